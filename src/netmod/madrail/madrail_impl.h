/*
 * madrail ch4 netmod: what the netmod's files share.  The inline entry
 * points (madrail_am.h, madrail_progress.h) are thin wrappers around the
 * functions declared here, which live in madrail_am.c: the inline build
 * recompiles every MPICH object when a netmod header changes, so the logic
 * stays in .c files.
 */

#ifndef MADRAIL_IMPL_H_INCLUDED
#define MADRAIL_IMPL_H_INCLUDED

#include <mpidimpl.h>
#include "madrail_types.h"
#include "mpidch4r.h"
#include "ch4_impl.h"

/* libmadrail peer of `rank` in `comm` */
MPL_STATIC_INLINE_PREFIX uint32_t MPIDI_MADRAIL_comm_to_peer(MPIR_Comm * comm, int rank)
{
    return MPIDI_MADRAIL_AV(MPIDIU_comm_rank_to_av(comm, rank)).peer;
}

int MPIDI_MADRAIL_am_isend(int rank, MPIR_Comm * comm, int handler_id, const void *am_hdr,
                           MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                           MPI_Datatype datatype, int src_vci, int dst_vci, MPIR_Request * sreq);
int MPIDI_MADRAIL_am_send_hdr(int rank, MPIR_Comm * comm, int handler_id, const void *am_hdr,
                              MPI_Aint am_hdr_sz, int src_vci, int dst_vci);
int MPIDI_MADRAIL_data_copy_cb(MPIR_Request * rreq);
int MPIDI_MADRAIL_progress(int vci, int blocking);
void MPIDI_MADRAIL_am_handler(void *arg, madrail_peer_t src, uint64_t id, const void *data,
                              size_t len);
/* Progress until every transfer the netmod started has finished. */
int MPIDI_MADRAIL_drain(void);
/* Native point-to-point (madrail_p2p.c); the inline entry points in
 * madrail_p2p.h call these when MPIDI_MADRAIL_global.native is set. */
int MPIDI_MADRAIL_p2p_isend(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                            int tag, MPIR_Comm * comm, int context_offset,
                            MPIDI_av_entry_t * addr, MPIR_Request ** request, int is_sync);
int MPIDI_MADRAIL_p2p_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                            MPIR_Comm * comm, int context_offset, MPIDI_av_entry_t * addr,
                            MPIR_Request ** request, MPIR_Request * partner);
int MPIDI_MADRAIL_p2p_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                             MPIR_Request * message);
int MPIDI_MADRAIL_p2p_improbe(int source, int tag, MPIR_Comm * comm, int context_offset,
                              MPIDI_av_entry_t * addr, int *flag, MPIR_Request ** message,
                              MPI_Status * status);
int MPIDI_MADRAIL_p2p_iprobe(int source, int tag, MPIR_Comm * comm, int context_offset,
                             MPIDI_av_entry_t * addr, int *flag, MPI_Status * status);
int MPIDI_MADRAIL_p2p_cancel_send(MPIR_Request * sreq);
int MPIDI_MADRAIL_p2p_cancel_recv(MPIR_Request * rreq);
/* Free what am_isend/irecv left in a request that is being freed. */
void MPIDI_MADRAIL_am_request_cleanup(MPIR_Request * req);

#endif /* MADRAIL_IMPL_H_INCLUDED */
