#!/bin/sh
# cl_mpi_failover_ucx.sh -- cl_mpi_failover.sh (an MPI stream through rail faults) over UCX's tcp transport (ucx:tcp:railN): CL_RAILSET=ucx
CL_RAILSET=ucx exec sh "$(dirname "$0")/cl_mpi_failover.sh"
