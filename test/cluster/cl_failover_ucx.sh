#!/bin/sh
# cl_failover_ucx.sh -- cl_failover.sh (every fault case) over UCX's tcp transport (ucx:tcp:railN): CL_RAILSET=ucx
CL_RAILSET=ucx exec sh "$(dirname "$0")/cl_failover.sh"
