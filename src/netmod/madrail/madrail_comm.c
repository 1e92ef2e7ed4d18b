/*
 * madrail ch4 netmod: communicator hooks.  The netmod keeps no state per
 * communicator (MPIDIG matches on context ids, ranks map to libmadrail
 * peers through the address vector), so these do nothing.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"

int MPIDI_MADRAIL_mpi_comm_commit_pre_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_mpi_comm_commit_post_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_mpi_comm_free_hook(MPIR_Comm * comm)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_comm_set_hints(MPIR_Comm * comm, MPIR_Info * info)
{
    return MPI_SUCCESS;
}
