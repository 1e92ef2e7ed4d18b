#!/bin/sh
# it_flood.sh -- 100,000 small messages into a slow receiver with 4
# credits per rail: nothing lost, nothing reordered, and the sender did
# stall on credits (two TCP rails).
. "$(dirname "$0")/common.sh"
it_run 2 MADRAIL_CREDITS=4 --
