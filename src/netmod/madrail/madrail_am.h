/*
 * madrail ch4 netmod: the active-message entry points MPIDIG calls.  The
 * work is in madrail_am.c (see madrail_types.h for the wire format).
 *
 * am_check_eager always answers true: any payload is handed to am_isend in
 * one piece, which sends it itself (eager in one libmadrail active message,
 * or LARGE through libmadrail's rendezvous), so MPIDIG never adds its own
 * RTS/CTS round trip.
 */

#ifndef MADRAIL_AM_H_INCLUDED
#define MADRAIL_AM_H_INCLUDED

#include "madrail_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend(int rank,
                                               MPIR_Comm * comm,
                                               int handler_id,
                                               const void *am_hdr,
                                               MPI_Aint am_hdr_sz,
                                               const void *data,
                                               MPI_Aint count, MPI_Datatype datatype,
                                               int src_vci, int dst_vci, MPIR_Request * sreq)
{
    return MPIDI_MADRAIL_am_isend(rank, comm, handler_id, am_hdr, am_hdr_sz, data, count,
                                  datatype, src_vci, dst_vci, sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend_reply(MPIR_Comm * comm,
                                                     int src_rank,
                                                     int handler_id,
                                                     const void *am_hdr,
                                                     MPI_Aint am_hdr_sz,
                                                     const void *data, MPI_Aint count,
                                                     MPI_Datatype datatype,
                                                     int src_vci, int dst_vci, MPIR_Request * sreq)
{
    return MPIDI_MADRAIL_am_isend(src_rank, comm, handler_id, am_hdr, am_hdr_sz, data, count,
                                  datatype, src_vci, dst_vci, sreq);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr(int rank,
                                                  MPIR_Comm * comm,
                                                  int handler_id, const void *am_hdr,
                                                  MPI_Aint am_hdr_sz, int src_vci, int dst_vci)
{
    return MPIDI_MADRAIL_am_send_hdr(rank, comm, handler_id, am_hdr, am_hdr_sz, src_vci,
                                     dst_vci);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr_reply(MPIR_Comm * comm,
                                                        int rank,
                                                        int handler_id, const void *am_hdr,
                                                        MPI_Aint am_hdr_sz,
                                                        int src_vci, int dst_vci)
{
    return MPIDI_MADRAIL_am_send_hdr(rank, comm, handler_id, am_hdr, am_hdr_sz, src_vci,
                                     dst_vci);
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_hdr_max_sz(void)
{
    return MPIDI_MADRAIL_global.hdr_max;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_limit(void)
{
    return MPIDI_MADRAIL_global.am_max;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_buf_limit(void)
{
    return MPIDI_MADRAIL_global.am_max;
}

MPL_STATIC_INLINE_PREFIX bool MPIDI_NM_am_check_eager(MPI_Aint am_hdr_sz, MPI_Aint data_sz,
                                                      const void *data, MPI_Aint count,
                                                      MPI_Datatype datatype, MPIR_Request * sreq)
{
    return true;
}

MPL_STATIC_INLINE_PREFIX MPIDIG_recv_data_copy_cb MPIDI_NM_am_get_data_copy_cb(uint32_t attr)
{
    return MPIDI_MADRAIL_data_copy_cb;
}

#endif /* MADRAIL_AM_H_INCLUDED */
