#!/bin/sh
# it_wildcard.sh -- non-overtaking through ANY_PEER / TAG_ANY / masked
# receives, with two senders interleaving small, medium and rendezvous
# messages into rank 0 (3 ranks, two TCP rails).
. "$(dirname "$0")/common.sh"
it_run 3 --
