#!/bin/sh
# it_rndv_many.sh -- 300 rendezvous sends (64 KiB .. 1 MiB) in flight at
# once, received in shuffled order, byte-exact (two TCP rails).
. "$(dirname "$0")/common.sh"
it_run 2 --
