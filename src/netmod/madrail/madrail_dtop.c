/*
 * madrail ch4 netmod: datatype and op hooks.  Payloads are packed with
 * MPIR_Typerep when not contiguous and reductions run in MPIR, so nothing
 * is registered per datatype or op.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"

int MPIDI_MADRAIL_mpi_type_commit_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_mpi_type_free_hook(MPIR_Datatype * datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_mpi_op_commit_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_mpi_op_free_hook(MPIR_Op * op_p)
{
    return MPI_SUCCESS;
}
