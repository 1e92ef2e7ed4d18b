#!/bin/sh
# it_stripe.sh -- striping of 16 MiB messages over two TCP rails: equal
# weights give each rail 30..70% of the put bytes; MADRAIL_RAIL_WEIGHTS=3,1
# gives rail 0 65..85%.  Two runs; the test fails if either fails.
. "$(dirname "$0")/common.sh"
unset MADRAIL_RAIL_WEIGHTS
rc=0
it_run 2 -- 0.30 0.70 || rc=1
it_run 2 MADRAIL_RAIL_WEIGHTS=3,1 -- 0.65 0.85 || rc=1
exit $rc
