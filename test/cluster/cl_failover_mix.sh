#!/bin/sh
# cl_failover_mix.sh -- cl_failover.sh (every fault case) over one ofi rail (rail0) and one ucx rail (rail1): CL_RAILSET=mix
CL_RAILSET=mix exec sh "$(dirname "$0")/cl_failover.sh"
