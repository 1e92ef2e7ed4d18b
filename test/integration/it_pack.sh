#!/bin/sh
# it_pack.sh -- pack/unpack (Madeleine-style incremental messages) between
# two processes: every send/receive mode pair, 0 B .. 4 MiB pieces, both
# directions (two TCP rails).
. "$(dirname "$0")/common.sh"
it_run 2 --
