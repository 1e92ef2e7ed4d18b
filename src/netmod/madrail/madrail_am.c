/*
 * madrail ch4 netmod: active messages over libmadrail.
 *
 * Why it is built this way:
 *  - Each MPIDIG active message is one libmadrail active message, so all
 *    of them to a peer are delivered in send order (MPIDIG's matching and
 *    RMA ordering need that) whatever rail carried them.
 *  - A payload that does not fit next to its header (LARGE) is not cut in
 *    pieces here: it goes as ONE libmadrail tagged message announced by
 *    the active message (size, tag) that rides in its first control
 *    message (madrail_am_isend: the RTS of a rendezvous).  The receiver's
 *    handler runs when that message is already stored unexpected, so the
 *    madrail_irecv it posts answers the RTS with a CTS at once: one
 *    rendezvous per message, no separate announcement, and no receiver-
 *    first offer (a receive posted after a separate announcement offered
 *    one that the RTS on its way always made useless, NACKed).  The
 *    receiver posts madrail_irecv for it into the user's buffer as soon as
 *    MPIDIG has one (MPIDIG_AM_ATTR__IS_RNDV: at once if the receive was
 *    posted, else through data_copy_cb when MPI_Irecv matches it), so
 *    libmadrail's rendezvous writes the data in place, striped over the
 *    rails; nothing is staged for a contiguous host buffer.
 *  - Non-contiguous (or device) data of a LARGE message is pipelined
 *    instead of packed whole: chunks of MPIR_CVAR_CH4_MADRAIL_PIPELINE_
 *    CHUNK_SIZE bytes, at most _DEPTH of them staged on each side, sent as
 *    tagged messages with one tag (so they match in order), the first one
 *    carrying the announcement (madrail_am_isend); the sender packs
 *    chunk k+depth when chunk k has gone, the receiver unpacks chunk k
 *    (MPIDIG_recv_copy_seg) while the next ones travel.  Memory stays
 *    bounded and packing overlaps the transfer.  A pipeline advances only
 *    from the netmod's progress: its completion callbacks just mark the
 *    slot and queue one step per pipeline.
 *  - libmadrail has no peer for its own process: messages to self are
 *    queued and delivered by progress, never from inside the send (MPIDIG
 *    callbacks send in turn), large ones by one memcpy into the receive.
 *  - libmadrail callbacks may run inside madrail_isend/irecv (already
 *    finished) or inside MPIDIG's MPI_Irecv (data_copy_cb); MPIDIG requests
 *    are completed only from the netmod's progress, so such completions
 *    are queued and finished by the next progress call.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"

static const uint64_t MPIDI_MADRAIL_zeros = 0;
/* buffer of zero-length transfers (libmadrail wants a pointer) */
static uint64_t MPIDI_MADRAIL_sink;

#define MADRAIL_CALL_ERR(mpi_errno_, fn_, st_)                                  \
    MPIR_ERR_SETANDSTMT2(mpi_errno_, MPI_ERR_OTHER, goto fn_fail, "**madrail_call", \
                         "**madrail_call %s %s", fn_, madrail_status_str(st_))

static void record_error(int mpi_errno)
{
    if (mpi_errno != MPI_SUCCESS && MPIDI_MADRAIL_global.pending_errno == MPI_SUCCESS)
        MPIDI_MADRAIL_global.pending_errno = mpi_errno;
}

static int defer(MPIR_Request * req, MPIDI_MADRAIL_defer_kind_t kind, madrail_status_t status)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_deferred_t *d = MPL_malloc(sizeof(*d), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(d == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    d->next = NULL;
    d->req = req;
    d->kind = kind;
    d->status = status;
    if (MPIDI_MADRAIL_global.deferred_tail)
        MPIDI_MADRAIL_global.deferred_tail->next = d;
    else
        MPIDI_MADRAIL_global.deferred_head = d;
    MPIDI_MADRAIL_global.deferred_tail = d;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int xfer_error(madrail_status_t st)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**madrail_xfer", "**madrail_xfer %s",
                                madrail_status_str(st));
}

/* Count a posted libmadrail request as in flight (MPI_Finalize drains
 * them) and have cb(arg) called when it finishes. */
static int watch(madrail_request_t mreq, madrail_callback_t cb, void *arg)
{
    madrail_status_t st;

    MPIDI_MADRAIL_global.inflight++;
    st = madrail_request_set_callback(mreq, cb, arg);
    if (st != MADRAIL_OK)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**madrail_call", "**madrail_call %s %s",
                                    "madrail_request_set_callback", madrail_status_str(st));
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ sending */

/* Queue a message to this process; delivered by the next progress.
 * Eager data (data_sz bytes at `data`, or packed from count/datatype when
 * `pack` is set) is copied; a LARGE payload stays where it is. */
static int self_enqueue(int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                        const void *data, MPI_Aint count, MPI_Datatype datatype, int pack,
                        MPI_Aint data_sz, int is_large, MPIR_Request * sreq,
                        int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;
    MPI_Aint hdr_pad = MPIDI_MADRAIL_ALIGN8(am_hdr_sz);
    MPI_Aint copy_sz = is_large ? 0 : data_sz;
    MPIDI_MADRAIL_self_msg_t *msg;

    msg = MPL_malloc(sizeof(*msg) + hdr_pad + copy_sz, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(msg == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    msg->next = NULL;
    msg->handler_id = handler_id;
    msg->src_vci = src_vci;
    msg->dst_vci = dst_vci;
    msg->is_large = is_large;
    msg->am_hdr_sz = am_hdr_sz;
    msg->data_sz = data_sz;
    msg->data = is_large ? data : NULL;
    msg->sreq = is_large ? sreq : NULL;
    if (am_hdr_sz)
        MPIR_Memcpy(msg->buf, am_hdr, am_hdr_sz);
    if (copy_sz) {
        char *dst = (char *) msg->buf + hdr_pad;
        if (pack) {
            MPI_Aint actual = 0;
            mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, dst, copy_sz, &actual);
            if (mpi_errno) {
                MPL_free(msg);
                MPIR_ERR_POP(mpi_errno);
            }
            MPIR_Assert(actual == copy_sz);
        } else {
            MPIR_Memcpy(dst, data, copy_sz);
        }
    }
    if (MPIDI_MADRAIL_global.self_tail)
        MPIDI_MADRAIL_global.self_tail->next = msg;
    else
        MPIDI_MADRAIL_global.self_head = msg;
    MPIDI_MADRAIL_global.self_tail = msg;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The iov of an active message: header, padding, then `payload_sz` bytes
 * (eager data or a LARGE descriptor); returns the entries used (<= 3). */
static int am_iov(struct iovec *iov, const void *am_hdr, MPI_Aint am_hdr_sz,
                  const void *payload, MPI_Aint payload_sz)
{
    int n = 0;
    MPI_Aint pad = MPIDI_MADRAIL_ALIGN8(am_hdr_sz) - am_hdr_sz;

    if (am_hdr_sz) {
        iov[n].iov_base = (void *) am_hdr;
        iov[n++].iov_len = am_hdr_sz;
    }
    if (pad) {
        iov[n].iov_base = (void *) &MPIDI_MADRAIL_zeros;
        iov[n++].iov_len = pad;
    }
    if (payload_sz) {
        iov[n].iov_base = (void *) payload;
        iov[n++].iov_len = payload_sz;
    }
    return n;
}

/* One active message (am_iov).  Buffers are reusable on return. */
static int send_am(uint32_t peer, uint64_t id, const void *am_hdr, MPI_Aint am_hdr_sz,
                   const void *payload, MPI_Aint payload_sz)
{
    int mpi_errno = MPI_SUCCESS;
    struct iovec iov[3];
    int n = am_iov(iov, am_hdr, am_hdr_sz, payload, payload_sz);
    madrail_status_t st;

    st = madrail_am_send(MPIDI_MADRAIL_global.ctx, peer, id, iov, n);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_am_send", st);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int complete_large_send(MPIR_Request * sreq, madrail_status_t status)
{
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(sreq);

    MPL_free(am->pack_buffer);
    am->pack_buffer = NULL;
    if (status != MADRAIL_OK)
        sreq->status.MPI_ERROR = xfer_error(status);
    return MPIDIG_global.origin_cbs[am->handler_id] (sreq);
}

static void large_send_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIR_Request *sreq = arg;

    MPIDI_MADRAIL_global.inflight--;
    if (MPIDI_MADRAIL_global.progress_depth > 0)
        record_error(complete_large_send(sreq, info->status));
    else
        record_error(defer(sreq, MPIDI_MADRAIL_DEFER_SEND_DONE, info->status));
}

/* ----------------------------------------------------------- pipeline */

static MPIDI_MADRAIL_pipe_t *pipe_create(MPIR_Request * req, uint32_t peer, uint64_t tag,
                                         MPI_Aint total, MPI_Aint chunk)
{
    MPI_Aint nchunks = (total + chunk - 1) / chunk;
    int depth = MPIDI_MADRAIL_global.pipe_depth, i;
    MPIDI_MADRAIL_pipe_t *pipe;

    if (nchunks < depth)
        depth = (int) nchunks;
    pipe = MPL_malloc(sizeof(*pipe) + (size_t) depth * (size_t) chunk, MPL_MEM_BUFFER);
    if (pipe == NULL)
        return NULL;
    memset(pipe, 0, sizeof(*pipe));
    pipe->req = req;
    pipe->peer = peer;
    pipe->tag = tag;
    pipe->total = total;
    pipe->chunk = chunk;
    pipe->depth = depth;
    pipe->status = MADRAIL_OK;
    pipe->datatype = MPI_DATATYPE_NULL;
    pipe->ring = (char *) (pipe + 1);
    for (i = 0; i < depth; i++) {
        pipe->slots[i].pipe = pipe;
        pipe->slots[i].idx = i;
    }
    return pipe;
}

static MPIDI_MADRAIL_pipe_slot_t *pipe_slot_of(MPIDI_MADRAIL_pipe_t * pipe, MPI_Aint off)
{
    return &pipe->slots[(off / pipe->chunk) % pipe->depth];
}

static char *pipe_slot_buf(MPIDI_MADRAIL_pipe_t * pipe, MPIDI_MADRAIL_pipe_slot_t * slot)
{
    return pipe->ring + (size_t) slot->idx * (size_t) pipe->chunk;
}

/* libmadrail finished one chunk: mark its slot, queue one step of the
 * pipeline for the next progress (at most one queued step per pipeline, so
 * the step that completes the request is the last one to touch it). */
static void pipe_chunk_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIDI_MADRAIL_pipe_slot_t *slot = arg;
    MPIDI_MADRAIL_pipe_t *pipe = slot->pipe;

    MPIDI_MADRAIL_global.inflight--;
    pipe->inflight--;
    slot->done = 1;
    slot->status = info->status;
    if (!pipe->queued) {
        pipe->queued = 1;
        record_error(defer(pipe->req, pipe->is_send ? MPIDI_MADRAIL_DEFER_PIPE_SEND :
                           MPIDI_MADRAIL_DEFER_PIPE_RECV, MADRAIL_OK));
    }
}

static int pipe_post(MPIDI_MADRAIL_pipe_t * pipe, MPIDI_MADRAIL_pipe_slot_t * slot,
                     MPI_Aint len)
{
    int mpi_errno = MPI_SUCCESS;
    madrail_request_t mreq;
    madrail_status_t st;

    if (pipe->is_send && pipe->am_iov) {
        /* the first chunk carries the announcement */
        st = madrail_am_isend(MPIDI_MADRAIL_global.ctx, pipe->peer, pipe->am_id, pipe->am_iov,
                              pipe->am_iovcnt, pipe_slot_buf(pipe, slot), (size_t) len,
                              pipe->tag, &mreq);
        pipe->am_iov = NULL;
    } else if (pipe->is_send)
        st = madrail_isend(MPIDI_MADRAIL_global.ctx, pipe->peer, pipe_slot_buf(pipe, slot),
                           (size_t) len, pipe->tag, 0, &mreq);
    else
        st = madrail_irecv(MPIDI_MADRAIL_global.ctx, pipe->peer, pipe_slot_buf(pipe, slot),
                           (size_t) len, pipe->tag, MADRAIL_TAG_EXACT, &mreq);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, pipe->is_send ? "madrail_isend" : "madrail_irecv", st);
    slot->busy = 1;
    slot->done = 0;
    slot->len = len;
    pipe->inflight++;
    mpi_errno = watch(mreq, pipe_chunk_done, slot);
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Pack and send every chunk that has a free slot; complete the request
 * when all chunks have gone (or, after an error, when none is in flight). */
static int pipe_send_step(MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(sreq);
    MPIDI_MADRAIL_pipe_t *pipe = am->send_pipe;
    int i;

    pipe->queued = 0;
    for (i = 0; i < pipe->depth; i++) {
        MPIDI_MADRAIL_pipe_slot_t *slot = &pipe->slots[i];
        if (slot->busy && slot->done) {
            slot->busy = slot->done = 0;
            if (slot->status != MADRAIL_OK && pipe->status == MADRAIL_OK)
                pipe->status = slot->status;
            pipe->done_off += slot->len;
        }
    }
    while (pipe->status == MADRAIL_OK && pipe->next_off < pipe->total) {
        MPIDI_MADRAIL_pipe_slot_t *slot = pipe_slot_of(pipe, pipe->next_off);
        MPI_Aint len = MPL_MIN(pipe->chunk, pipe->total - pipe->next_off), actual = 0;
        if (slot->busy)
            break;
        mpi_errno = MPIR_Typerep_pack(pipe->buf, pipe->count, pipe->datatype, pipe->next_off,
                                      pipe_slot_buf(pipe, slot), len, &actual);
        if (mpi_errno == MPI_SUCCESS && actual != len)
            mpi_errno = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                             __LINE__, MPI_ERR_OTHER, "**madrail_xfer",
                                             "**madrail_xfer %s", "short pack of a chunk");
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = pipe_post(pipe, slot, len);
        if (mpi_errno != MPI_SUCCESS) {
            /* stop here; the request ends once nothing is in flight */
            pipe->status = MADRAIL_ERR_IO;
            break;
        }
        pipe->next_off += len;
    }
    /* a chunk that finished inside pipe_post queued another step: that
     * step ends the transfer (nothing may run on a freed pipe) */
    if (!pipe->queued && pipe->inflight == 0 &&
        (pipe->next_off == pipe->total || pipe->status != MADRAIL_OK)) {
        madrail_status_t status = pipe->status;
        int err;
        MPIR_Datatype_release_if_not_builtin(pipe->datatype);
        MPL_free(pipe);
        am->send_pipe = NULL;
        err = complete_large_send(sreq, status);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = err;
    }
    return mpi_errno;
}

static int start_pipe_send(MPIR_Request * sreq, uint32_t peer, uint64_t tag, const void *data,
                           MPI_Aint count, MPI_Datatype datatype, MPI_Aint data_sz,
                           uint64_t am_id, const struct iovec *iov, int iovcnt)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_pipe_t *pipe = pipe_create(sreq, peer, tag, data_sz,
                                             MPIDI_MADRAIL_global.pipe_chunk);

    MPIR_ERR_CHKANDJUMP(pipe == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    pipe->is_send = 1;
    pipe->buf = data;
    pipe->count = count;
    pipe->datatype = datatype;
    MPIR_Datatype_add_ref_if_not_builtin(datatype);
    pipe->am_id = am_id;
    pipe->am_iov = iov;
    pipe->am_iovcnt = iovcnt;
    MPIDI_MADRAIL_AMREQ(sreq).send_pipe = pipe;
    /* the first chunk is packed and posted now, with the announcement (a
     * free slot, nothing in flight); only an error leaves it unsent */
    mpi_errno = pipe_send_step(sreq);
    if (MPIDI_MADRAIL_AMREQ(sreq).send_pipe)
        ((MPIDI_MADRAIL_pipe_t *) MPIDI_MADRAIL_AMREQ(sreq).send_pipe)->am_iov = NULL;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}


int MPIDI_MADRAIL_am_isend(int rank, MPIR_Comm * comm, int handler_id, const void *am_hdr,
                           MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                           MPI_Datatype datatype, int src_vci, int dst_vci, MPIR_Request * sreq)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    MPI_Aint data_sz, dt_true_lb;
    MPIR_Datatype *dt_ptr;
    uint32_t peer = MPIDI_MADRAIL_comm_to_peer(comm, rank);
    int is_self = (peer == MPIDI_MADRAIL_PEER_SELF);
    MPI_Aint hdr_pad = MPIDI_MADRAIL_ALIGN8(am_hdr_sz);

    MPIR_FUNC_ENTER;

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    if (dt_contig && data_sz > 0) {
        MPL_pointer_attr_t attr;
        MPIR_GPU_query_pointer_attr(data, &attr);
        if (attr.type == MPL_GPU_POINTER_DEV)
            dt_contig = 0;      /* staged through host memory */
    }

    if (hdr_pad + data_sz <= MPIDI_MADRAIL_global.am_max) {
        /* eager: one active message; the buffers are free on return */
        if (is_self) {
            mpi_errno = self_enqueue(handler_id, am_hdr, am_hdr_sz,
                                     dt_contig ? MPIR_get_contig_ptr(data, dt_true_lb) : data,
                                     count, datatype, !dt_contig, data_sz, 0, NULL,
                                     src_vci, dst_vci);
            MPIR_ERR_CHECK(mpi_errno);
        } else {
            const void *payload = MPIR_get_contig_ptr(data, dt_true_lb);
            if (!dt_contig) {
                MPI_Aint actual = 0;
                mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0,
                                              MPIDI_MADRAIL_global.pack_scratch, data_sz,
                                              &actual);
                MPIR_ERR_CHECK(mpi_errno);
                MPIR_Assert(actual == data_sz);
                payload = MPIDI_MADRAIL_global.pack_scratch;
            }
            mpi_errno = send_am(peer, MPIDI_MADRAIL_AM_ID(handler_id, 0, src_vci, dst_vci,
                                                          am_hdr_sz),
                                am_hdr, am_hdr_sz, payload, data_sz);
            MPIR_ERR_CHECK(mpi_errno);
        }
        mpi_errno = MPIDIG_global.origin_cbs[handler_id] (sreq);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        /* LARGE: announce, then hand the payload to libmadrail in one piece */
        MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(sreq);
        const void *payload;

        MPIR_Assert(am->pack_buffer == NULL && am->send_pipe == NULL);
        am->handler_id = handler_id;
        if (!dt_contig && !is_self && data_sz > MPIDI_MADRAIL_global.pipe_chunk) {
            /* non-contiguous: pack and send chunk by chunk */
            MPIDI_MADRAIL_large_t large;
            struct iovec iov[3];
            int n;
            large.data_sz = (uint64_t) data_sz;
            large.tag = MPIDI_MADRAIL_TAG_LARGE |
                (MPIDI_MADRAIL_global.next_tag++ & (MPIDI_MADRAIL_TAG_BARRIER - 1));
            large.chunk = (uint64_t) MPIDI_MADRAIL_global.pipe_chunk;
            n = am_iov(iov, am_hdr, am_hdr_sz, &large, sizeof(large));
            mpi_errno = start_pipe_send(sreq, peer, large.tag, data, count, datatype, data_sz,
                                        MPIDI_MADRAIL_AM_ID(handler_id, MPIDI_MADRAIL_AM_F_LARGE,
                                                            src_vci, dst_vci, am_hdr_sz),
                                        iov, n);
            MPIR_ERR_CHECK(mpi_errno);
            goto fn_exit;
        }
        if (dt_contig) {
            payload = MPIR_get_contig_ptr(data, dt_true_lb);
        } else {
            MPI_Aint actual = 0;
            am->pack_buffer = MPL_malloc(data_sz, MPL_MEM_BUFFER);
            MPIR_ERR_CHKANDJUMP(am->pack_buffer == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
            mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, am->pack_buffer, data_sz,
                                          &actual);
            MPIR_ERR_CHECK(mpi_errno);
            MPIR_Assert(actual == data_sz);
            payload = am->pack_buffer;
        }

        if (is_self) {
            mpi_errno = self_enqueue(handler_id, am_hdr, am_hdr_sz, payload, 0, MPI_DATATYPE_NULL,
                                     0, data_sz, 1, sreq, src_vci, dst_vci);
            MPIR_ERR_CHECK(mpi_errno);
        } else {
            MPIDI_MADRAIL_large_t large;
            madrail_request_t mreq;
            madrail_status_t st;
            struct iovec iov[3];
            int n;

            large.data_sz = (uint64_t) data_sz;
            large.tag = MPIDI_MADRAIL_TAG_LARGE |
                (MPIDI_MADRAIL_global.next_tag++ & (MPIDI_MADRAIL_TAG_BARRIER - 1));
            large.chunk = 0;
            /* one message: the announcement rides in its RTS */
            n = am_iov(iov, am_hdr, am_hdr_sz, &large, sizeof(large));
            st = madrail_am_isend(MPIDI_MADRAIL_global.ctx, peer,
                                  MPIDI_MADRAIL_AM_ID(handler_id, MPIDI_MADRAIL_AM_F_LARGE,
                                                      src_vci, dst_vci, am_hdr_sz),
                                  iov, n, payload, (size_t) data_sz, large.tag, &mreq);
            if (st != MADRAIL_OK)
                MADRAIL_CALL_ERR(mpi_errno, "madrail_am_isend", st);
            mpi_errno = watch(mreq, large_send_done, sreq);
            MPIR_ERR_CHECK(mpi_errno);
        }
    }

  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_am_send_hdr(int rank, MPIR_Comm * comm, int handler_id, const void *am_hdr,
                              MPI_Aint am_hdr_sz, int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;
    uint32_t peer = MPIDI_MADRAIL_comm_to_peer(comm, rank);

    MPIR_FUNC_ENTER;

    MPIR_Assert(am_hdr_sz <= MPIDI_MADRAIL_global.hdr_max);
    if (peer == MPIDI_MADRAIL_PEER_SELF)
        mpi_errno = self_enqueue(handler_id, am_hdr, am_hdr_sz, NULL, 0, MPI_DATATYPE_NULL, 0, 0,
                                 0, NULL, src_vci, dst_vci);
    else
        mpi_errno = send_am(peer, MPIDI_MADRAIL_AM_ID(handler_id, 0, src_vci, dst_vci, am_hdr_sz),
                            am_hdr, am_hdr_sz, NULL, 0);

    MPIR_FUNC_EXIT;
    return mpi_errno;
}

/* ---------------------------------------------------------- receiving */

/* A LARGE payload of this process arrived at its receive: the sender's
 * request completes after the copy. */
static int complete_self_sender(MPIR_Request * sreq)
{
    return complete_large_send(sreq, MADRAIL_OK);
}

static int self_copy(MPIR_Request * rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(rreq);
    MPIR_Request *sreq = am->u.self.sreq;

    MPIDIG_recv_copy((void *) am->u.self.data, rreq);
    am->recv_flags = 0;
    mpi_errno = MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
    MPID_Request_complete(rreq);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = complete_self_sender(sreq);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int complete_large_recv(MPIR_Request * rreq, madrail_status_t status)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(rreq);

    if (status != MADRAIL_OK && status != MADRAIL_ERR_TRUNCATE) {
        rreq->status.MPI_ERROR = xfer_error(status);
    } else if (am->recv_flags & MPIDI_MADRAIL_RECV_BOUNCE) {
        MPIDIG_recv_copy(am->recv_buffer, rreq);
    } else {
        MPI_Aint in_data_sz = am->in_data_sz, data_sz = am->recv_sz;
        if (in_data_sz > data_sz)
            rreq->status.MPI_ERROR = MPIDIG_ERR_TRUNCATE(data_sz, in_data_sz);
        MPIR_STATUS_SET_COUNT(rreq->status, MPL_MIN(data_sz, in_data_sz));
    }
    MPL_free(am->recv_buffer);
    am->recv_buffer = NULL;
    am->recv_flags = 0;
    mpi_errno = MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
    /* the netmod's own completion count (taken when the payload was announced) */
    MPID_Request_complete(rreq);
    return mpi_errno;
}

static void large_recv_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIR_Request *rreq = arg;

    MPIDI_MADRAIL_global.inflight--;
    if (MPIDI_MADRAIL_global.progress_depth > 0)
        record_error(complete_large_recv(rreq, info->status));
    else
        record_error(defer(rreq, MPIDI_MADRAIL_DEFER_RECV_DONE, info->status));
}

static void discard_done(madrail_request_t mreq, const madrail_info_t * info, void *arg)
{
    MPIDI_MADRAIL_global.inflight--;
}

/* Unpack the chunks that are in, in order; post receives into the slots
 * that are free; complete the request after the last chunk. */
static int pipe_recv_step(MPIR_Request * rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(rreq);
    MPIDI_MADRAIL_pipe_t *pipe = am->recv_pipe;

    pipe->queued = 0;
    while (pipe->done_off < pipe->total) {
        MPIDI_MADRAIL_pipe_slot_t *slot = pipe_slot_of(pipe, pipe->done_off);
        if (!(slot->busy && slot->done))
            break;
        if (slot->status != MADRAIL_OK && pipe->status == MADRAIL_OK)
            pipe->status = slot->status;
        if (pipe->status == MADRAIL_OK && pipe->whole)
            MPIR_Memcpy(pipe->whole + pipe->done_off, pipe_slot_buf(pipe, slot), slot->len);
        else if (pipe->status == MADRAIL_OK)
            MPIDIG_recv_copy_seg(pipe_slot_buf(pipe, slot), slot->len, rreq);
        pipe->done_off += slot->len;
        slot->busy = slot->done = 0;
    }
    while (pipe->status == MADRAIL_OK && pipe->next_off < pipe->total) {
        MPIDI_MADRAIL_pipe_slot_t *slot = pipe_slot_of(pipe, pipe->next_off);
        MPI_Aint len = MPL_MIN(pipe->chunk, pipe->total - pipe->next_off);
        if (slot->busy)
            break;
        mpi_errno = pipe_post(pipe, slot, len);
        if (mpi_errno != MPI_SUCCESS) {
            /* stop here; the request ends once nothing is in flight */
            pipe->status = MADRAIL_ERR_IO;
            break;
        }
        pipe->next_off += len;
    }
    /* as in pipe_send_step: a queued step ends the transfer */
    if (!pipe->queued && (pipe->done_off == pipe->total ||
                          (pipe->status != MADRAIL_OK && pipe->inflight == 0))) {
        madrail_status_t status = pipe->status;
        int err;
        if (status == MADRAIL_OK && pipe->whole)
            MPIDIG_recv_copy(pipe->whole, rreq);
        MPL_free(pipe->whole);
        MPL_free(pipe);
        am->recv_pipe = NULL;
        am->recv_flags = 0;
        if (status != MADRAIL_OK)
            rreq->status.MPI_ERROR = xfer_error(status);
        err = MPIDIG_REQUEST(rreq, req->target_cmpl_cb) (rreq);
        /* the netmod's own completion count (taken when the payload was announced) */
        MPID_Request_complete(rreq);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = err;
    }
    return mpi_errno;
}

static int start_pipe_recv(MPIR_Request * rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(rreq);
    MPIDI_MADRAIL_pipe_t *pipe = pipe_create(rreq, am->u.net.src, am->u.net.tag,
                                             am->in_data_sz, am->in_chunk);

    MPIR_ERR_CHKANDJUMP(pipe == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    if (MPIDIG_REQUEST(rreq, req->recv_async).recv_type == MPIDIG_RECV_DATATYPE) {
        pipe->whole = MPL_malloc(am->in_data_sz, MPL_MEM_BUFFER);
        if (pipe->whole == NULL) {
            MPL_free(pipe);
            MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
        }
    } else {
        /* MPIDIG_recv_copy_seg copies through the iov that MPIDIG_recv_setup
         * points at the receive buffer; MPIDIG's RMA callbacks (accumulate,
         * get_accumulate...) only MPIDIG_recv_init their buffer, so without
         * this every chunk went nowhere (rma/derived_acc_flush_local,
         * rma/strided_acc_subarray: the target kept its old values) */
        MPIDIG_recv_setup(rreq);
    }
    am->recv_pipe = pipe;
    mpi_errno = pipe_recv_step(rreq);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Post the receive of a LARGE payload, MPIDIG knowing where it goes. */
static int large_recv_start(MPIR_Request * rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_am_request_t *am = &MPIDI_MADRAIL_AMREQ(rreq);
    void *buf;
    size_t len;
    madrail_request_t mreq;
    madrail_status_t st;

    if (am->recv_flags & MPIDI_MADRAIL_RECV_SELF) {
        if (MPIDI_MADRAIL_global.progress_depth > 0)
            mpi_errno = self_copy(rreq);
        else
            mpi_errno = defer(rreq, MPIDI_MADRAIL_DEFER_SELF_COPY, MADRAIL_OK);
        goto fn_exit;
    }
    if (am->in_chunk > 0) {
        mpi_errno = start_pipe_recv(rreq);
        goto fn_exit;
    }

    if (MPIDIG_get_recv_iov_count(rreq) == 1 &&
        !MPIDIG_REQUEST(rreq, req->recv_async).is_device_buffer) {
        /* straight into the user's buffer */
        int is_contig, is_gpu;
        void *p;
        MPI_Aint sz;
        MPIDIG_get_recv_data(&is_contig, &is_gpu, &p, &sz, rreq);
        if (!is_contig) {
            struct iovec *iov = p;
            p = iov[0].iov_base;
            sz = iov[0].iov_len;
        }
        am->recv_sz = sz;
        buf = p;
        len = (size_t) MPL_MIN(sz, am->in_data_sz);
    } else {
        /* non-contiguous or device memory: bounce buffer, unpacked at the end */
        am->recv_buffer = MPL_malloc(am->in_data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(am->recv_buffer == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        am->recv_flags |= MPIDI_MADRAIL_RECV_BOUNCE;
        buf = am->recv_buffer;
        len = (size_t) am->in_data_sz;
    }
    if (buf == NULL)
        buf = &MPIDI_MADRAIL_sink;
    st = madrail_irecv(MPIDI_MADRAIL_global.ctx, am->u.net.src, buf, len, am->u.net.tag,
                       MADRAIL_TAG_EXACT, &mreq);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_irecv", st);
    mpi_errno = watch(mreq, large_recv_done, rreq);
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIDIG matched an unexpected LARGE message with a receive. */
int MPIDI_MADRAIL_data_copy_cb(MPIR_Request * rreq)
{
    return large_recv_start(rreq);
}

/* The announcement of a LARGE payload (from a peer or from this process). */
static int large_arrived(int handler_id, void *am_hdr, uint32_t attr, MPI_Aint data_sz,
                         uint32_t src, uint64_t tag, MPI_Aint chunk, const void *self_data,
                         MPIR_Request * self_sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *rreq = NULL;
    MPIDI_MADRAIL_am_request_t *am;

    attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
    mpi_errno = MPIDIG_global.target_msg_cbs[handler_id] (am_hdr, NULL, data_sz, attr, &rreq);
    MPIR_ERR_CHECK(mpi_errno);

    if (rreq == NULL) {
        /* nobody takes the data: let the transfer finish without it */
        if (self_sreq) {
            mpi_errno = complete_self_sender(self_sreq);
        } else {
            /* one message, or every chunk of a pipelined one */
            MPI_Aint n = chunk > 0 ? (data_sz + chunk - 1) / chunk : 1;
            for (; n > 0; n--) {
                madrail_request_t mreq;
                madrail_status_t st = madrail_irecv(MPIDI_MADRAIL_global.ctx, src,
                                                    &MPIDI_MADRAIL_sink, 0, tag,
                                                    MADRAIL_TAG_EXACT, &mreq);
                if (st != MADRAIL_OK)
                    MADRAIL_CALL_ERR(mpi_errno, "madrail_irecv", st);
                mpi_errno = watch(mreq, discard_done, NULL);
                MPIR_ERR_CHECK(mpi_errno);
            }
        }
        goto fn_exit;
    }

    /* keep the request (and MPIDIG's part of it) until the data is in */
    MPIR_cc_inc(rreq->cc_ptr);

    am = &MPIDI_MADRAIL_AMREQ(rreq);
    am->in_data_sz = data_sz;
    am->in_chunk = chunk;
    am->recv_buffer = NULL;
    am->recv_pipe = NULL;
    if (self_sreq) {
        am->recv_flags = MPIDI_MADRAIL_RECV_LARGE | MPIDI_MADRAIL_RECV_SELF;
        am->u.self.data = self_data;
        am->u.self.sreq = self_sreq;
    } else {
        am->recv_flags = MPIDI_MADRAIL_RECV_LARGE;
        am->u.net.src = src;
        am->u.net.tag = tag;
    }
    /* otherwise MPIDIG calls MPIDI_MADRAIL_data_copy_cb once it is matched */
    if (MPIDIG_recv_initialized(rreq))
        mpi_errno = large_recv_start(rreq);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* libmadrail's active-message handler (called from madrail_progress). */
void MPIDI_MADRAIL_am_handler(void *arg, madrail_peer_t src, uint64_t id, const void *data,
                              size_t len)
{
    int mpi_errno = MPI_SUCCESS;
    int handler_id = MPIDI_MADRAIL_AM_ID_HANDLER(id);
    unsigned flags = MPIDI_MADRAIL_AM_ID_FLAGS(id);
    MPI_Aint am_hdr_sz = MPIDI_MADRAIL_AM_ID_HDR_SZ(id);
    MPI_Aint hdr_pad = MPIDI_MADRAIL_ALIGN8(am_hdr_sz);
    uint32_t attr = 0;
    const char *rest;
    size_t rest_len;

    if (handler_id >= MPIDI_AM_HANDLERS_MAX || !MPIDIG_global.target_msg_cbs[handler_id] ||
        (size_t) hdr_pad > len) {
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**madrail_xfer", "**madrail_xfer %s",
                             "malformed active message");
    }
    MPIDIG_AM_ATTR_SET_VCIS(attr, MPIDI_MADRAIL_AM_ID_SRC_VCI(id),
                            MPIDI_MADRAIL_AM_ID_DST_VCI(id));
    rest = (const char *) data + hdr_pad;
    rest_len = len - hdr_pad;

    if (!(flags & MPIDI_MADRAIL_AM_F_LARGE)) {
        mpi_errno = MPIDIG_global.target_msg_cbs[handler_id] ((void *) data, (void *) rest,
                                                              (MPI_Aint) rest_len, attr, NULL);
    } else {
        MPIDI_MADRAIL_large_t large;
        if (rest_len != sizeof(large)) {
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**madrail_xfer",
                                 "**madrail_xfer %s", "malformed LARGE announcement");
        }
        memcpy(&large, rest, sizeof(large));
        if (large.chunk != 0 && (large.chunk < 4096 || large.chunk > ((uint64_t) 1 << 30))) {
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**madrail_xfer",
                                 "**madrail_xfer %s", "malformed LARGE announcement (chunk)");
        }
        mpi_errno = large_arrived(handler_id, (void *) data, attr, (MPI_Aint) large.data_sz,
                                  src, large.tag, (MPI_Aint) large.chunk, NULL, NULL);
    }

  fn_fail:
    record_error(mpi_errno);
}

/* ----------------------------------------------------------- progress */

static int deliver_self(MPIDI_MADRAIL_self_msg_t * msg)
{
    uint32_t attr = 0;
    void *am_hdr = msg->buf;

    MPIDIG_AM_ATTR_SET_VCIS(attr, msg->src_vci, msg->dst_vci);
    if (!msg->is_large)
        return MPIDIG_global.target_msg_cbs[msg->handler_id] (am_hdr,
                                                              (char *) msg->buf +
                                                              MPIDI_MADRAIL_ALIGN8(msg->am_hdr_sz),
                                                              msg->data_sz, attr, NULL);
    return large_arrived(msg->handler_id, am_hdr, attr, msg->data_sz, 0, 0, 0, msg->data,
                         msg->sreq);
}

static int run_deferred(MPIDI_MADRAIL_deferred_t * d)
{
    switch (d->kind) {
        case MPIDI_MADRAIL_DEFER_SEND_DONE:
            return complete_large_send(d->req, d->status);
        case MPIDI_MADRAIL_DEFER_RECV_DONE:
            return complete_large_recv(d->req, d->status);
        case MPIDI_MADRAIL_DEFER_SELF_COPY:
            return self_copy(d->req);
        case MPIDI_MADRAIL_DEFER_PIPE_SEND:
            return pipe_send_step(d->req);
        case MPIDI_MADRAIL_DEFER_PIPE_RECV:
            return pipe_recv_step(d->req);
    }
    return MPI_SUCCESS;
}

int MPIDI_MADRAIL_progress(int vci, int blocking)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_MADRAIL_self_msg_t *msg;
    MPIDI_MADRAIL_deferred_t *d;
    int events;

    if (MPIDI_MADRAIL_global.ctx == NULL || MPIDI_MADRAIL_global.progress_depth > 0)
        return MPI_SUCCESS;
    MPIDI_MADRAIL_global.progress_depth++;

    events = madrail_progress(MPIDI_MADRAIL_global.ctx);
    if (MPIDI_MADRAIL_global.deferred_head || MPIDI_MADRAIL_global.self_head)
        events++;

    /* ch4 polls progress in a tight loop; with more processes than cores
     * (tests, shared nodes) the peer this one waits for may need the core:
     * give it away after a run of idle polls, as ch3:nemesis does */
    if (events > 0) {
        MPIDI_MADRAIL_global.idle_polls = 0;
    } else if (MPIR_CVAR_POLLS_BEFORE_YIELD > 0 &&
               ++MPIDI_MADRAIL_global.idle_polls >= MPIR_CVAR_POLLS_BEFORE_YIELD) {
        MPIDI_MADRAIL_global.idle_polls = 0;
        MPL_sched_yield();
    }

    /* work queued outside progress; what it queues waits for the next call */
    d = MPIDI_MADRAIL_global.deferred_head;
    MPIDI_MADRAIL_global.deferred_head = MPIDI_MADRAIL_global.deferred_tail = NULL;
    while (d) {
        MPIDI_MADRAIL_deferred_t *next = d->next;
        record_error(run_deferred(d));
        MPL_free(d);
        d = next;
    }

    /* messages to self, in send order */
    msg = MPIDI_MADRAIL_global.self_head;
    MPIDI_MADRAIL_global.self_head = MPIDI_MADRAIL_global.self_tail = NULL;
    while (msg) {
        MPIDI_MADRAIL_self_msg_t *next = msg->next;
        record_error(deliver_self(msg));
        MPL_free(msg);
        msg = next;
    }

    MPIDI_MADRAIL_global.progress_depth--;
    if (MPIDI_MADRAIL_global.pending_errno != MPI_SUCCESS) {
        mpi_errno = MPIDI_MADRAIL_global.pending_errno;
        MPIDI_MADRAIL_global.pending_errno = MPI_SUCCESS;
    }
    return mpi_errno;
}

int MPIDI_MADRAIL_drain(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPL_time_t start, now;
    double waited = 0;

    MPL_wtime(&start);
    while (MPIDI_MADRAIL_global.inflight > 0 || MPIDI_MADRAIL_global.self_head ||
           MPIDI_MADRAIL_global.deferred_head) {
        mpi_errno = MPIDI_MADRAIL_progress(0, 0);
        MPIR_ERR_CHECK(mpi_errno);
        MPL_wtime(&now);
        MPL_wtime_diff(&start, &now, &waited);
        if (waited > 60.0) {
            /* a send nobody receives never finishes: report it and go on */
            fprintf(stderr, "madrail netmod: rank %d: %ld transfers still in flight after "
                    "60 s in MPI_Finalize (unmatched sends?); finalizing anyway\n",
                    MPIDI_MADRAIL_global.rank, MPIDI_MADRAIL_global.inflight);
            break;
        }
    }

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void MPIDI_MADRAIL_am_request_cleanup(MPIR_Request * req)
{
    MPL_free(MPIDI_MADRAIL_AMREQ(req).pack_buffer);
    MPIDI_MADRAIL_AMREQ(req).pack_buffer = NULL;
    MPL_free(MPIDI_MADRAIL_AMREQ(req).recv_buffer);
    MPIDI_MADRAIL_AMREQ(req).recv_buffer = NULL;
    /* a pipeline ends before its request completes; nothing may be left */
    MPIR_Assert(MPIDI_MADRAIL_AMREQ(req).send_pipe == NULL);
    MPIR_Assert(MPIDI_MADRAIL_AMREQ(req).recv_pipe == NULL);
}
