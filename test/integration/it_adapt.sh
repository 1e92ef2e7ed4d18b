#!/bin/sh
# it_adapt.sh -- stripes over two TCP rails on loopback, phase by phase
# (it_adapt.c; test/cluster runs the same program over shaped rails and
# changes a rail's rate between phases):
#  1. MADRAIL_RAIL_WEIGHTS=3,1: the user's split stands, 74..76% on rail 0,
#     however the rails measure;
#  2. no settings: the weights are measured over real processes and every
#     byte checked; neither rail may be starved (rail 0 10..90%: two
#     loopback rails share the CPU, so their measured speeds wander, and
#     splits from 25% to 77% were seen on a loaded VM);
#  3. a command between two phases runs once, on rank 0, with the phase
#     number, and the transfer goes on after it (what the cluster uses to
#     change a rate).
. "$(dirname "$0")/common.sh"
unset MADRAIL_RAIL_WEIGHTS MADRAIL_ADAPT
rc=0
it_run 2 MADRAIL_RAIL_WEIGHTS=3,1 -- --window 4 24:0.74:0.76 || rc=1
it_run 2 MADRAIL_STATS=1 -- --window 8 48:0.10:0.90 || rc=1
mark=${TMPDIR:-/tmp}/it_adapt.$$
rm -f "$mark".*
it_run 2 -- --window 4 --between "touch $mark.%d" 8 8 || rc=1
if [ -f "$mark.2" ] && [ ! -f "$mark.1" ]; then
    echo "it: between-phase command ran before phase 2 only: ok"
else
    echo "it: FAIL: between-phase command: $(ls "$mark".* 2>/dev/null)"
    rc=1
fi
rm -f "$mark".*
exit $rc
