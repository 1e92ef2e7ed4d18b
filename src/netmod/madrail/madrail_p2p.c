/*
 * madrail ch4 netmod: native point-to-point.
 *
 * Why it is built this way:
 *  - An MPI message is one libmadrail tagged message, its (context id,
 *    source rank, tag) packed into the 64 match bits (madrail_types.h).
 *    libmadrail then matches (posted and unexpected queues, MPI_ANY_SOURCE
 *    and MPI_ANY_TAG through the ignore mask), keeps the order of a peer's
 *    messages over every rail, and chooses eager, rendezvous, receiver-
 *    first CTS (a receive posted before the sender's RTS, with a known
 *    source, saves the RTS round trip) and striping.  MPIDIG and its
 *    active messages are not involved, so a small message costs one
 *    library's path, not two, and a large one is announced once.
 *  - MPI_Ssend is libmadrail's synchronous send; MPI_Iprobe, MPI_Improbe
 *    and MPI_Imrecv are libmadrail's probe, matched probe and receive.
 *  - Non-contiguous (or device) data is packed whole into a host buffer on
 *    the sender and received whole into one on the receiver, unpacked at
 *    the end.  (The pipelined path of the active messages still serves
 *    RMA and partitioned data.)
 *  - MPI_ANY_SOURCE with shared memory: ch4 posts the receive in both
 *    shared memory (MPIDIG) and here, each naming the other as its
 *    partner.  When libmadrail completes ours, the shared-memory partner is
 *    cancelled and completed with our status, as ch4:ofi does
 *    (MPIDI_anysrc_try_cancel_partner/free_partner); when shared memory
 *    matches first it cancels ours through MPIDI_NM_mpi_cancel_recv, which
 *    madrail_cancel answers at once for an unmatched receive (a wildcard
 *    receive never makes a receiver-first offer, which is the only
 *    receive whose cancel waits for the peer).  One exception: a receive
 *    that libmadrail completes inside the very call that posts it (the
 *    message was waiting) is completed without partner handling, because
 *    ch4's anysource_irecv checks for exactly that on return and cancels
 *    the shared-memory half itself.
 *  - libmadrail has no peer for this process, but ch4 never routes a
 *    message to self through the netmod when it has shared memory (self is
 *    local); without shared memory (MPIDI_CH4_DIRECT_NETMOD) the netmod
 *    stays on the MPIDIG path (madrail_init.c).
 *  - Completions run in libmadrail callbacks, under MPICH's global critical
 *    section (the only threading the netmod supports), so THREAD_MULTIPLE
 *    needs nothing more here.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"

/* the native request shares a union with MPIDIG's fields and must end
 * before MPIDIG_REQUEST(req, req) (see madrail_pre.h) */
MPL_COMPILE_TIME_ASSERT(sizeof(MPIDI_MADRAIL_request_t) <= sizeof(MPIDI_MADRAIL_am_request_t));

/* buffer of zero-length transfers (libmadrail wants a pointer) */
static uint64_t MPIDI_MADRAIL_p2p_sink;

static int p2p_xfer_error(madrail_status_t st)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**madrail_xfer", "**madrail_xfer %s",
                                madrail_status_str(st));
}

#define P2P_CALL_ERR(mpi_errno_, fn_, st_)                                     \
    MPIR_ERR_SETANDSTMT2(mpi_errno_, MPI_ERR_OTHER, goto fn_fail, "**madrail_call", \
                         "**madrail_call %s %s", fn_, madrail_status_str(st_))

/* Match bits and ignore mask of a receive or probe. */
static void recv_bits(int rank, int tag, MPIR_Comm * comm, int context_offset,
                      uint64_t * match_p, uint64_t * ignore_p)
{
    uint64_t ignore = (uint64_t) (uint32_t) (MPIR_TAG_ERROR_BIT | MPIR_TAG_PROC_FAILURE_BIT);

    if (rank == MPI_ANY_SOURCE) {
        ignore |= MPIDI_MADRAIL_P2P_RANK_MASK;
        rank = 0;
    }
    if (tag == MPI_ANY_TAG) {
        ignore |= (uint64_t) MPIR_TAG_USABLE_BITS;
        tag = 0;
    }
    *match_p = MPIDI_MADRAIL_P2P_MATCH(comm->recvcontext_id + context_offset, rank, tag);
    *ignore_p = ignore;
}

static madrail_peer_t recv_peer(int rank, MPIDI_av_entry_t * addr)
{
    return rank == MPI_ANY_SOURCE ? MADRAIL_ANY_PEER : MPIDI_MADRAIL_AV(addr).peer;
}

static void p2p_req_init(MPIR_Request * req)
{
    MPIDI_MADRAIL_request_t *r = &MPIDI_MADRAIL_REQ(req);
    r->mreq = NULL;
    r->msg = NULL;
    r->pack_buf = NULL;
    r->user_buf = NULL;
    r->user_count = 0;
    r->user_datatype = MPI_DATATYPE_NULL;
    r->flags = 0;
    r->sent_peer = 0;
    r->sent_msg = 0;
}

/* ------------------------------------------------------------ sending */

static void send_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIR_Request *sreq = arg;
    MPIDI_MADRAIL_request_t *r = &MPIDI_MADRAIL_REQ(sreq);

    MPIDI_MADRAIL_global.inflight--;
    r->mreq = NULL;
    MPL_free(r->pack_buf);
    r->pack_buf = NULL;
    if (info->cancelled) {
        MPIR_STATUS_SET_CANCEL_BIT(sreq->status, TRUE);
    } else if (info->status != MADRAIL_OK) {
        sreq->status.MPI_ERROR = p2p_xfer_error(info->status);
    } else {
        /* MPI_Cancel may still come (a small send completes at once) */
        r->sent_msg = info->msg_id;
        r->flags |= MPIDI_MADRAIL_P2P_SENT;
    }
    MPIDIU_request_complete(sreq);
}

int MPIDI_MADRAIL_p2p_isend(const void *buf, MPI_Aint count, MPI_Datatype datatype, int rank,
                            int tag, MPIR_Comm * comm, int context_offset,
                            MPIDI_av_entry_t * addr, MPIR_Request ** request, int is_sync)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    madrail_peer_t peer = MPIDI_MADRAIL_AV(addr).peer;
    MPIR_Request *sreq = NULL;
    const void *sbuf;
    madrail_request_t mreq;
    madrail_status_t st;
    uint64_t match, msg_id;

    MPIR_FUNC_ENTER;

    MPIR_ERR_CHKANDJUMP1(peer == MPIDI_MADRAIL_PEER_SELF, mpi_errno, MPI_ERR_OTHER,
                         "**madrail_xfer", "**madrail_xfer %s",
                         "native send to this process (needs shared memory)");
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    if (dt_contig && data_sz > 0) {
        MPL_pointer_attr_t attr;
        MPIR_GPU_query_pointer_attr(buf, &attr);
        if (attr.type == MPL_GPU_POINTER_DEV)
            dt_contig = 0;      /* staged through host memory */
    }

    sreq = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__SEND, 0, 2);
    MPIR_ERR_CHKANDSTMT(sreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    p2p_req_init(sreq);

    if (data_sz == 0) {
        sbuf = &MPIDI_MADRAIL_p2p_sink;
    } else if (dt_contig) {
        sbuf = MPIR_get_contig_ptr(buf, dt_true_lb);
    } else {
        MPI_Aint actual = 0;
        void *pack = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(pack == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        MPIDI_MADRAIL_REQ(sreq).pack_buf = pack;
        mpi_errno = MPIR_Typerep_pack(buf, count, datatype, 0, pack, data_sz, &actual);
        MPIR_ERR_CHECK(mpi_errno);
        MPIR_ERR_CHKANDJUMP1(actual != data_sz, mpi_errno, MPI_ERR_OTHER, "**madrail_xfer",
                             "**madrail_xfer %s", "short pack of a send");
        sbuf = pack;
    }

    match = MPIDI_MADRAIL_P2P_MATCH(comm->context_id + context_offset, comm->rank, tag);
    st = madrail_isend_nb(MPIDI_MADRAIL_global.ctx, peer, sbuf, (size_t) data_sz, match,
                          is_sync ? MADRAIL_SEND_SYNC : 0, &mreq, &msg_id);
    if (st != MADRAIL_OK)
        P2P_CALL_ERR(mpi_errno, "madrail_isend_nb", st);
    MPIDI_MADRAIL_REQ(sreq).sent_peer = peer;
    *request = sreq;
    if (mreq == NULL) {
        /* a small message that left at once: no libmadrail request (and
         * no pack buffer: a packed send's data is copied out too, so it
         * can go now) */
        MPL_free(MPIDI_MADRAIL_REQ(sreq).pack_buf);
        MPIDI_MADRAIL_REQ(sreq).pack_buf = NULL;
        MPIDI_MADRAIL_REQ(sreq).sent_msg = msg_id;
        MPIDI_MADRAIL_REQ(sreq).flags |= MPIDI_MADRAIL_P2P_SENT;
        MPIDIU_request_complete(sreq);
        goto fn_exit;
    }
    MPIDI_MADRAIL_REQ(sreq).mreq = mreq;
    MPIDI_MADRAIL_global.inflight++;
    /* may complete the request at once (the data left): then the user gets
     * it completed */
    st = madrail_request_set_callback(mreq, send_done, sreq);
    MPIR_Assert(st == MADRAIL_OK);

  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    if (sreq) {
        MPL_free(MPIDI_MADRAIL_REQ(sreq).pack_buf);
        MPIDI_MADRAIL_REQ(sreq).pack_buf = NULL;
        MPIR_Request_free(sreq);
        MPIR_Request_free(sreq);
    }
    goto fn_exit;
}

/* The receiver answered the cancel of a send that had completed. */
static void cancel_sent_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIR_Request *sreq = arg;

    MPIDI_MADRAIL_global.inflight--;
    if (info->cancelled)
        MPIR_STATUS_SET_CANCEL_BIT(sreq->status, TRUE);
    MPIDIU_request_complete(sreq);
}

int MPIDI_MADRAIL_p2p_cancel_send(MPIR_Request * sreq)
{
    MPIDI_MADRAIL_request_t *r = &MPIDI_MADRAIL_REQ(sreq);
    madrail_request_t creq;
    int was_incomplete;

    /* In flight: libmadrail asks the receiver, and the send completes with
     * its answer (send_done; info.cancelled tells whether it took effect). */
    if (r->mreq) {
        madrail_cancel(MPIDI_MADRAIL_global.ctx, r->mreq);
        return MPI_SUCCESS;
    }
    /* Completed (its bytes left), not cancelled yet: ask the receiver to
     * drop the message if no receive took it.  The request is made
     * incomplete again until the answer (with a reference for the
     * completion), so MPI_Wait/MPI_Test_cancelled see the outcome.  Asked
     * once: a second MPI_Cancel finds the flag cleared. */
    if (!(r->flags & MPIDI_MADRAIL_P2P_SENT))
        return MPI_SUCCESS;
    r->flags &= ~MPIDI_MADRAIL_P2P_SENT;
    if (madrail_cancel_sent(MPIDI_MADRAIL_global.ctx, r->sent_peer, r->sent_msg, &creq) !=
        MADRAIL_OK)
        return MPI_SUCCESS;     /* peer gone: the send stays complete, not cancelled */
    MPIR_cc_incr(sreq->cc_ptr, &was_incomplete);
    (void) was_incomplete;
    MPIR_Request_add_ref(sreq);
    MPIDI_MADRAIL_global.inflight++;
    madrail_request_set_callback(creq, cancel_sent_done, sreq);
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------- receiving */

static void recv_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIR_Request *rreq = arg;
    MPIDI_MADRAIL_request_t *r = &MPIDI_MADRAIL_REQ(rreq);

    r->mreq = NULL;
    if (info->cancelled) {
        MPIR_STATUS_SET_CANCEL_BIT(rreq->status, TRUE);
        MPIR_STATUS_SET_COUNT(rreq->status, 0);
    } else {
        rreq->status.MPI_SOURCE = MPIDI_MADRAIL_P2P_GET_RANK(info->tag);
        rreq->status.MPI_TAG = MPIDI_MADRAIL_P2P_GET_TAG(info->tag);
        MPIR_STATUS_SET_COUNT(rreq->status, (MPI_Aint) info->length);
        if (info->status == MADRAIL_OK) {
            rreq->status.MPI_ERROR = MPI_SUCCESS;
        } else if (info->status == MADRAIL_ERR_TRUNCATE) {
            rreq->status.MPI_ERROR =
                MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                     MPI_ERR_TRUNCATE, "**truncate", "**truncate %d %d %d %d",
                                     rreq->status.MPI_SOURCE, rreq->status.MPI_TAG,
                                     (int) info->length, (int) info->sent_length);
        } else {
            rreq->status.MPI_ERROR = p2p_xfer_error(info->status);
        }
        if ((r->flags & MPIDI_MADRAIL_P2P_UNPACK) &&
            (info->status == MADRAIL_OK || info->status == MADRAIL_ERR_TRUNCATE) &&
            info->length > 0) {
            MPI_Aint actual = 0;
            MPIR_Typerep_unpack(r->pack_buf, (MPI_Aint) info->length, r->user_buf,
                                r->user_count, r->user_datatype, 0, &actual);
            if (actual != (MPI_Aint) info->length && rreq->status.MPI_ERROR == MPI_SUCCESS)
                rreq->status.MPI_ERROR =
                    MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                         __LINE__, MPI_ERR_TYPE, "**dtypemismatch", 0);
        }
    }
    if (r->flags & MPIDI_MADRAIL_P2P_UNPACK) {
        MPL_free(r->pack_buf);
        r->pack_buf = NULL;
        MPIR_Datatype_release_if_not_builtin(r->user_datatype);
        r->flags &= ~MPIDI_MADRAIL_P2P_UNPACK;
    }

    if (MPIDI_MADRAIL_global.posting == rreq) {
        /* inside the call that posts it: that call completes it */
        r->flags |= MPIDI_MADRAIL_P2P_INLINE_DONE;
        return;
    }
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (!info->cancelled) {
        int is_cancelled;
        /* an MPI_ANY_SOURCE receive: withdraw the shared-memory half (that
         * always succeeds: shared memory has not matched, or it would have
         * cancelled this one) and complete it with this status */
        MPIDI_anysrc_try_cancel_partner(rreq, &is_cancelled);
        MPIDI_anysrc_free_partner(rreq);
    }
#endif
    MPIDIU_request_complete(rreq);
}

/* Post the libmadrail receive of rreq (a new receive or a probed
 * message), into the user's buffer or a packing buffer. */
static int post_recv(MPIR_Request * rreq, void *buf, MPI_Aint count, MPI_Datatype datatype,
                     madrail_peer_t peer, uint64_t match, uint64_t ignore,
                     madrail_message_t msg)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    MPIDI_MADRAIL_request_t *r = &MPIDI_MADRAIL_REQ(rreq);
    void *rbuf;
    madrail_request_t mreq;
    madrail_status_t st;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    if (dt_contig && data_sz > 0) {
        MPL_pointer_attr_t attr;
        MPIR_GPU_query_pointer_attr(buf, &attr);
        if (attr.type == MPL_GPU_POINTER_DEV)
            dt_contig = 0;
    }
    if (data_sz == 0) {
        rbuf = &MPIDI_MADRAIL_p2p_sink;
    } else if (dt_contig) {
        rbuf = MPIR_get_contig_ptr(buf, dt_true_lb);
    } else {
        r->pack_buf = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(r->pack_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        r->user_buf = buf;
        r->user_count = count;
        r->user_datatype = datatype;
        MPIR_Datatype_add_ref_if_not_builtin(datatype);
        r->flags |= MPIDI_MADRAIL_P2P_UNPACK;
        rbuf = r->pack_buf;
    }

    if (msg)
        st = madrail_imrecv(MPIDI_MADRAIL_global.ctx, msg, rbuf, (size_t) data_sz, &mreq);
    else
        st = madrail_irecv(MPIDI_MADRAIL_global.ctx, peer, rbuf, (size_t) data_sz, match, ignore,
                           &mreq);
    if (st != MADRAIL_OK) {
        if (r->flags & MPIDI_MADRAIL_P2P_UNPACK) {
            MPL_free(r->pack_buf);
            r->pack_buf = NULL;
            MPIR_Datatype_release_if_not_builtin(datatype);
            r->flags &= ~MPIDI_MADRAIL_P2P_UNPACK;
        }
        P2P_CALL_ERR(mpi_errno, msg ? "madrail_imrecv" : "madrail_irecv", st);
    }
    r->mreq = mreq;
    r->msg = NULL;
    MPIDI_MADRAIL_global.posting = rreq;
    st = madrail_request_set_callback(mreq, recv_done, rreq);
    MPIDI_MADRAIL_global.posting = NULL;
    MPIR_Assert(st == MADRAIL_OK);
    if (r->flags & MPIDI_MADRAIL_P2P_INLINE_DONE) {
        /* the message was already here */
        r->flags &= ~MPIDI_MADRAIL_P2P_INLINE_DONE;
        MPIDIU_request_complete(rreq);
    }

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_p2p_irecv(void *buf, MPI_Aint count, MPI_Datatype datatype, int rank, int tag,
                            MPIR_Comm * comm, int context_offset, MPIDI_av_entry_t * addr,
                            MPIR_Request ** request, MPIR_Request * partner)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *rreq;
    uint64_t match, ignore;

    MPIR_FUNC_ENTER;

    rreq = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__RECV, 0, 2);
    MPIR_ERR_CHKANDSTMT(rreq == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
    p2p_req_init(rreq);
    MPIDI_REQUEST_SET_LOCAL(rreq, 0, partner);
    rreq->status.MPI_ERROR = MPI_SUCCESS;

    recv_bits(rank, tag, comm, context_offset, &match, &ignore);
    mpi_errno = post_recv(rreq, buf, count, datatype, recv_peer(rank, addr), match, ignore,
                          NULL);
    if (mpi_errno) {
        MPIR_Request_free(rreq);
        MPIR_Request_free(rreq);
        MPIR_ERR_POP(mpi_errno);
    }
    *request = rreq;

  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_p2p_cancel_recv(MPIR_Request * rreq)
{
    /* an unmatched receive completes (cancelled) inside madrail_cancel;
     * one with a receiver-first offer out completes once the sender has
     * answered the revocation; a matched one completes normally */
    if (!MPIR_Request_is_complete(rreq) && MPIDI_MADRAIL_REQ(rreq).mreq)
        madrail_cancel(MPIDI_MADRAIL_global.ctx, MPIDI_MADRAIL_REQ(rreq).mreq);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ probing */

static void probe_status(const madrail_info_t * info, MPI_Status * status)
{
    /* MPI_ERROR is left alone, as MPIDIG does (MPICH's pt2pt/mprobe checks it) */
    if (status == MPI_STATUS_IGNORE)
        return;
    status->MPI_SOURCE = MPIDI_MADRAIL_P2P_GET_RANK(info->tag);
    status->MPI_TAG = MPIDI_MADRAIL_P2P_GET_TAG(info->tag);
    MPIR_STATUS_SET_COUNT(*status, (MPI_Aint) info->sent_length);
}

int MPIDI_MADRAIL_p2p_iprobe(int source, int tag, MPIR_Comm * comm, int context_offset,
                             MPIDI_av_entry_t * addr, int *flag, MPI_Status * status)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t match, ignore;
    madrail_info_t info;
    madrail_status_t st;

    recv_bits(source, tag, comm, context_offset, &match, &ignore);
    /* madrail_iprobe drives progress: completions in it are progress's */
    MPIDI_MADRAIL_global.progress_depth++;
    st = madrail_iprobe(MPIDI_MADRAIL_global.ctx, recv_peer(source, addr), match, ignore, flag,
                        &info);
    MPIDI_MADRAIL_global.progress_depth--;
    if (st != MADRAIL_OK)
        P2P_CALL_ERR(mpi_errno, "madrail_iprobe", st);
    if (*flag)
        probe_status(&info, status);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_p2p_improbe(int source, int tag, MPIR_Comm * comm, int context_offset,
                              MPIDI_av_entry_t * addr, int *flag, MPIR_Request ** message,
                              MPI_Status * status)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t match, ignore;
    madrail_info_t info;
    madrail_message_t msg = NULL;
    madrail_status_t st;
    MPIR_Request *req;

    recv_bits(source, tag, comm, context_offset, &match, &ignore);
    MPIDI_MADRAIL_global.progress_depth++;
    st = madrail_improbe(MPIDI_MADRAIL_global.ctx, recv_peer(source, addr), match, ignore, &msg,
                         &info);
    MPIDI_MADRAIL_global.progress_depth--;
    if (st != MADRAIL_OK)
        P2P_CALL_ERR(mpi_errno, "madrail_improbe", st);
    *flag = msg != NULL;
    *message = NULL;
    if (msg) {
        req = MPIR_Request_create_from_pool(MPIR_REQUEST_KIND__MPROBE, 0, 2);
        /* the message is out of libmadrail's matching: it must be received */
        MPIR_ERR_CHKANDSTMT(req == NULL, mpi_errno, MPIX_ERR_NOREQ, goto fn_fail, "**nomemreq");
        p2p_req_init(req);
        MPIDI_MADRAIL_REQ(req).msg = msg;
        probe_status(&info, status);
        *message = req;
    }

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_p2p_imrecv(void *buf, MPI_Aint count, MPI_Datatype datatype,
                             MPIR_Request * message)
{
    int mpi_errno = MPI_SUCCESS;
    madrail_message_t msg = MPIDI_MADRAIL_REQ(message).msg;

    MPIR_FUNC_ENTER;

    MPIR_ERR_CHKANDJUMP1(msg == NULL, mpi_errno, MPI_ERR_OTHER, "**madrail_xfer",
                         "**madrail_xfer %s", "MPI_Imrecv of a message the netmod did not probe");
    MPIDI_REQUEST_SET_LOCAL(message, 0, NULL);
    message->status.MPI_ERROR = MPI_SUCCESS;
    mpi_errno = post_recv(message, buf, count, datatype, MADRAIL_ANY_PEER, 0, 0, msg);
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}
