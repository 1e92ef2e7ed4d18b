#!/bin/sh
# cl_mpi_failover_mix.sh -- cl_mpi_failover.sh (an MPI stream through rail faults) over one ofi rail (rail0) and one ucx rail (rail1): CL_RAILSET=mix
CL_RAILSET=mix exec sh "$(dirname "$0")/cl_mpi_failover.sh"
