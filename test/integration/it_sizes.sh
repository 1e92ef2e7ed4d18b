#!/bin/sh
# it_sizes.sh -- every size around the eager, rendezvous and stripe edges
# (0 B .. 64 MiB), both directions, posted and unexpected, on two TCP
# rails.  The thresholds are pinned (8 KiB slots, 64 KiB rendezvous) both
# here and in the program.
. "$(dirname "$0")/common.sh"
it_run 2 MADRAIL_SLOT_SIZE=8k MADRAIL_RNDV_THRESH=64k --
