/*
 * Active messages: one EAGER fragment with MDR_HF_AM, sequenced like any
 * message (so they keep their order with tagged traffic) and handed to the
 * handler when their sequence number comes up instead of being matched.
 * An active message is at most one slot.
 *
 * A larger payload goes as a tagged message ANNOUNCED by an active message
 * (madrail_am_isend): the AM travels inside the message's first control
 * message, an RTS with MDR_HF_AM (AM id and header after it) or, when
 * header and data fit one slot, an EAGER_AM (the header, then the data).
 * The receiver takes it in sequence order like any tagged message
 * (matched, or stored unexpected) and then calls the handler at that same
 * place of the peer's order; a receive the handler posts with the tag it
 * names finds the RTS already there and answers CTS at once.  So a large
 * payload costs one rendezvous: no separate announcement, and no
 * receiver-first offer that an RTS already on its way would make useless
 * (a receive posted after the announcement offered one, always NACKed).
 * Between one slot and MADRAIL_RNDV_THRESH the payload goes in several
 * EAGER fragments, which cannot carry the header without every fragment
 * waiting for the first: there the announcement is a plain active message
 * followed by the tagged message (the next sequence number, so a receive
 * posted by the handler is there before it).
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

madrail_status_t madrail_am_set_handler(madrail_context_t ctx, madrail_am_handler_t cb, void *arg)
{
    if (!ctx)
        return MADRAIL_ERR_INVALID;
    ctx->am_cb = cb;
    ctx->am_arg = arg;
    return MADRAIL_OK;
}

size_t madrail_am_max(madrail_context_t ctx)
{
    return ctx ? ctx->eager_max : 0;
}

madrail_status_t madrail_am_send(madrail_context_t ctx, madrail_peer_t peer_idx, uint64_t id,
                                 const struct iovec *iov, int iovcnt)
{
    mdr_peer_t *peer;
    mdr_eager_hdr_t e;
    const void *payload = NULL;
    size_t total = 0, off = 0;
    int i;

    if (!ctx || iovcnt < 0 || (iovcnt && !iov))
        return MADRAIL_ERR_INVALID;
    peer = mdr_peer_get(ctx, peer_idx);
    if (!peer) {
        mdr_error("am_send: no peer %u", peer_idx);
        return MADRAIL_ERR_INVALID;
    }
    for (i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total > ctx->eager_max) {
        mdr_error("am_send: %zu bytes, at most %zu in an active message", total,
                  ctx->eager_max);
        return MADRAIL_ERR_INVALID;
    }
    if (iovcnt == 1) {
        payload = iov[0].iov_base;
    } else if (total) {
        for (i = 0; i < iovcnt; i++) {
            if (iov[i].iov_len)
                memcpy(ctx->am_scratch + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        payload = ctx->am_scratch;
    }
    memset(&e, 0, sizeof(e));
    e.h.type = MDR_MSG_EAGER;
    e.h.flags = MDR_HF_AM;
    e.seq = peer->next_send_seq++;
    e.tag = id;
    e.total = total;
    return mdr_ctrl_send(peer, -1, &e.h, sizeof(e), payload, total);
}

void mdr_am_deliver(mdr_ctx_t *ctx, mdr_peer_t *peer, uint64_t id, const void *data,
                           size_t len)
{
    peer->index_shown = 1; /* peer.c: never retired now */
    if (ctx->am_cb)
        ctx->am_cb(ctx->am_arg, peer->index, id, data, len);
    else
        mdr_warn("peer %u: active message %llx dropped: no handler", peer->index,
                 (unsigned long long)id);
}

/* The AM id that precedes the header in an RTS: the header may use the
 * rest of a slot. */
#define MDR_AM_RTS_EXTRA sizeof(uint64_t)

int mdr_am_send_eager(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_eager_hdr_t e;

    /* mdr_send_start sends an EAGER_AM only when both fit one slot */
    memset(&e, 0, sizeof(e));
    e.h.type = MDR_MSG_EAGER_AM;
    e.seq = req->seq;
    e.tag = req->tag;
    e.total = req->len;
    e.id = req->am_id;
    if (req->am_len)
        memcpy(ctx->am_scratch, req->am, req->am_len);
    if (req->len)
        memcpy(ctx->am_scratch + req->am_len, req->buf, req->len);
    return mdr_ctrl_try_send(peer, -1, &e.h, sizeof(e), ctx->am_scratch, req->am_len + req->len);
}

madrail_status_t madrail_am_isend(madrail_context_t ctx, madrail_peer_t peer_idx, uint64_t id,
                                  const struct iovec *am_iov, int am_iovcnt, const void *buf,
                                  size_t len, uint64_t tag, madrail_request_t *req_p)
{
    mdr_peer_t *peer;
    mdr_req_t *req;
    madrail_status_t st;
    size_t am_len = 0, off = 0;
    int i;

    if (!ctx || !req_p || am_iovcnt < 0 || (am_iovcnt && !am_iov) || (len && !buf))
        return MADRAIL_ERR_INVALID;
    peer = mdr_peer_get(ctx, peer_idx);
    if (!peer) {
        mdr_error("am_isend: no peer %u", peer_idx);
        return MADRAIL_ERR_INVALID;
    }
    for (i = 0; i < am_iovcnt; i++)
        am_len += am_iov[i].iov_len;
    if (am_len > ctx->eager_max - MDR_AM_RTS_EXTRA) {
        mdr_error("am_isend: a header of %zu bytes, at most %zu (madrail_am_max() - %zu)",
                  am_len, ctx->eager_max - MDR_AM_RTS_EXTRA, (size_t)MDR_AM_RTS_EXTRA);
        return MADRAIL_ERR_INVALID;
    }
    if (len < ctx->cfg.rndv_thresh && am_len + len > ctx->eager_max) {
        /* medium: the announcement, then the message in EAGER fragments */
        st = madrail_am_send(ctx, peer_idx, id, am_iov, am_iovcnt);
        if (st != MADRAIL_OK)
            return st;
        return mdr_tagged_isend(ctx, peer_idx, buf, len, tag, 0, req_p);
    }
    req = mdr_req_alloc(ctx, MDR_REQ_SEND);
    if (!req)
        return MADRAIL_ERR_NOMEM;
    req->peer = peer_idx;
    req->buf = (void *)buf;
    req->len = len;
    req->tag = tag;
    req->has_am = 1;
    req->am_id = id;
    req->am_len = am_len;
    if (am_len) {
        req->am = malloc(am_len);
        if (!req->am) {
            ctx->active_sends--;
            mdr_req_release(req);
            return MADRAIL_ERR_NOMEM;
        }
        for (i = 0; i < am_iovcnt; i++) {
            if (am_iov[i].iov_len)
                memcpy((uint8_t *)req->am + off, am_iov[i].iov_base, am_iov[i].iov_len);
            off += am_iov[i].iov_len;
        }
    }
    return mdr_send_launch(peer, req, req_p);
}
