/*
 * Active messages: one EAGER fragment with MDR_HF_AM, sequenced like any
 * message (so they keep their order with tagged traffic) and handed to the
 * handler when their sequence number comes up instead of being matched.
 * An active message is at most one slot: the netmod sends larger payloads
 * as tagged messages.
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
    if (ctx->am_cb)
        ctx->am_cb(ctx->am_arg, peer->index, id, data, len);
    else
        mdr_warn("peer %u: active message %llx dropped: no handler", peer->index,
                 (unsigned long long)id);
}
