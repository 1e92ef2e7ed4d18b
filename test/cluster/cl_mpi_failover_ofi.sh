#!/bin/sh
# cl_mpi_failover_ofi.sh -- cl_mpi_failover.sh (an MPI stream through rail faults) over libfabric's tcp provider with rxm (ofi:tcp;ofi_rxm:railN): CL_RAILSET=ofi
CL_RAILSET=ofi exec sh "$(dirname "$0")/cl_mpi_failover.sh"
