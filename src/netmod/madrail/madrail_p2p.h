/*
 * madrail ch4 netmod: point-to-point entry points (send, receive, probe,
 * matched probe and receive, cancel).
 *
 * By default (MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P) an MPI message is one
 * libmadrail tagged message: libmadrail matches it (64 match bits, ignore
 * mask for the wildcards), keeps per-peer order over the rails, and runs
 * eager, rendezvous, receiver-first CTS and striping itself
 * (madrail_p2p.c).  With the CVAR off every call goes to MPIDIG as before
 * (active messages, MPIDIG matching): the comparison path.  The choice is
 * made once at init and must be the same on every rank.  These wrappers
 * stay thin so that the inline build does not recompile MPICH when the
 * logic changes.
 */

#ifndef MADRAIL_P2P_H_INCLUDED
#define MADRAIL_P2P_H_INCLUDED

#include "madrail_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_isend(const void *buf, MPI_Aint count,
                                                MPI_Datatype datatype, int rank, int tag,
                                                MPIR_Comm * comm, int context_offset,
                                                MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_isend(buf, count, datatype, rank, tag, comm, context_offset,
                                       addr, request, 0);
    return MPIDIG_mpi_isend(buf, count, datatype, rank, tag, comm, context_offset, addr, 0, 0,
                            request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_issend(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_isend(buf, count, datatype, rank, tag, comm, context_offset,
                                       addr, request, 1);
    return MPIDIG_mpi_issend(buf, count, datatype, rank, tag, comm, context_offset, addr, 0, 0,
                             request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_isend_coll(const void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, int rank, int tag,
                                                 MPIR_Comm * comm, int context_offset,
                                                 MPIDI_av_entry_t * addr, MPIR_Request ** request,
                                                 MPIR_Errflag_t * errflag)
{
    if (!MPIDI_MADRAIL_global.native)
        return MPIDIG_isend_coll(buf, count, datatype, rank, tag, comm, context_offset, addr,
                                 0, 0, request, errflag);
    switch (*errflag) {
        case MPIR_ERR_NONE:
            break;
        case MPIR_ERR_PROC_FAILED:
            MPIR_TAG_SET_PROC_FAILURE_BIT(tag);
            break;
        default:
            MPIR_TAG_SET_ERROR_BIT(tag);
    }
    return MPIDI_MADRAIL_p2p_isend(buf, count, datatype, rank, tag, comm, context_offset, addr,
                                   request, 0);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_send(MPIR_Request * sreq)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_cancel_send(sreq);
    return MPIDIG_mpi_cancel_send(sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_imrecv(void *buf, MPI_Aint count,
                                                 MPI_Datatype datatype, MPIR_Request * message)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_imrecv(buf, count, datatype, message);
    return MPIDIG_mpi_imrecv(buf, count, datatype, message);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_irecv(void *buf, MPI_Aint count,
                                                MPI_Datatype datatype, int rank, int tag,
                                                MPIR_Comm * comm, int context_offset,
                                                MPIDI_av_entry_t * addr, MPIR_Request ** request,
                                                MPIR_Request * partner)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_irecv(buf, count, datatype, rank, tag, comm, context_offset,
                                       addr, request, partner);
    return MPIDIG_mpi_irecv(buf, count, datatype, rank, tag, comm, context_offset, 0, request, 0,
                            partner);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_cancel_recv(MPIR_Request * rreq)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_cancel_recv(rreq);
    return MPIDIG_mpi_cancel_recv(rreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_improbe(int source, int tag, MPIR_Comm * comm,
                                                  int context_offset, MPIDI_av_entry_t * addr,
                                                  int *flag, MPIR_Request ** message,
                                                  MPI_Status * status)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_improbe(source, tag, comm, context_offset, addr, flag, message,
                                         status);
    return MPIDIG_mpi_improbe(source, tag, comm, context_offset, 0, flag, message, status);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_iprobe(int source, int tag, MPIR_Comm * comm,
                                                 int context_offset, MPIDI_av_entry_t * addr,
                                                 int *flag, MPI_Status * status)
{
    if (MPIDI_MADRAIL_global.native)
        return MPIDI_MADRAIL_p2p_iprobe(source, tag, comm, context_offset, addr, flag, status);
    return MPIDIG_mpi_iprobe(source, tag, comm, context_offset, 0, flag, status);
}

#endif /* MADRAIL_P2P_H_INCLUDED */
