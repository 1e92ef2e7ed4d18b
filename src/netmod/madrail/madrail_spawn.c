/*
 * madrail ch4 netmod: dynamic processes (MPI_Comm_spawn, connect/accept,
 * join) are not supported yet: they need a process id small enough for a
 * port name and messages to processes that are not peers yet.  Each entry
 * point returns a clear MPI error instead of failing later.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"

int MPIDI_MADRAIL_dynamic_send(uint64_t remote_gpid, int tag, const void *buf, int size,
                               int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET(mpi_errno, MPI_ERR_OTHER, "**madrail_notsupported");
    return mpi_errno;
}

int MPIDI_MADRAIL_dynamic_recv(int tag, void *buf, int size, int timeout)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET(mpi_errno, MPI_ERR_OTHER, "**madrail_notsupported");
    return mpi_errno;
}

int MPIDI_MADRAIL_get_local_upids(MPIR_Comm * comm, int **local_upid_size, char **local_upids)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET(mpi_errno, MPI_ERR_OTHER, "**madrail_notsupported");
    return mpi_errno;
}

int MPIDI_MADRAIL_upids_to_gpids(int size, int *remote_upid_size, char *remote_upids,
                                 uint64_t * remote_gpids)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET(mpi_errno, MPI_ERR_OTHER, "**madrail_notsupported");
    return mpi_errno;
}
