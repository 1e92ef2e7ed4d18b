#!/bin/sh
# cl_failover_ofi.sh -- cl_failover.sh (every fault case) over libfabric's tcp provider with rxm (ofi:tcp;ofi_rxm:railN): CL_RAILSET=ofi
CL_RAILSET=ofi exec sh "$(dirname "$0")/cl_failover.sh"
