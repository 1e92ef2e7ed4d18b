#!/bin/sh
# it_stripe.sh -- striping of 16 MiB messages over two TCP rails: equal
# weights give each rail 30..70% of the put bytes; MADRAIL_RAIL_WEIGHTS=3,1
# gives rail 0 65..85%.  Two runs; the test fails if either fails.
# The equal run keeps the profile weights (MADRAIL_ADAPT=0): two loopback
# rails share the CPU, so their measured speeds differ by chance (splits
# of 77/23 seen); adaptation is tested by it_adapt.sh and test_adapt.
. "$(dirname "$0")/common.sh"
unset MADRAIL_RAIL_WEIGHTS
rc=0
it_run 2 MADRAIL_ADAPT=0 -- 0.30 0.70 || rc=1
it_run 2 MADRAIL_RAIL_WEIGHTS=3,1 -- 0.65 0.85 || rc=1
exit $rc
