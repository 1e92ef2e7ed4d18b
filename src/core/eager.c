/*
 * Eager and medium sends (len < MADRAIL_RNDV_THRESH): the message goes in
 * slot-sized EAGER fragments that share one sequence number; each fragment
 * takes the best rail that has a credit, so a medium message spreads over
 * rails and needs no registration and no round trip.  A message of one
 * fragment that names no request (not synchronous, spending no offer)
 * goes as SHORT, whose header leaves out total, offset and id.  A synchronous send
 * completes on the ACK the receiver sends when the message matched; the
 * ACK may overtake the last fragments (MDR_ACK_GOT).
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

#define MDR_BIT(s) (1u << (s))

static const char *const mdr_ack_names[] = {"NONE", "WAIT", "GOT"};

/* req->wait_ack: a synchronous send waits for its ACK from the start (and
 * again when it is sent anew: mdr_send_restart); the ACK may come before
 * the last fragment left (GOT) or after (NONE: taken).  Staying put is
 * always allowed (a send that was never synchronous stays NONE). */
static const unsigned mdr_ack_next[] = {
    [MDR_ACK_NONE] = MDR_BIT(MDR_ACK_NONE) | MDR_BIT(MDR_ACK_WAIT),
    [MDR_ACK_WAIT] = MDR_BIT(MDR_ACK_WAIT) | MDR_BIT(MDR_ACK_GOT) | MDR_BIT(MDR_ACK_NONE),
    [MDR_ACK_GOT] = MDR_BIT(MDR_ACK_GOT) | MDR_BIT(MDR_ACK_NONE),
};

int mdr_ack_set(mdr_req_t *req, enum mdr_ack_state to)
{
    if (!(mdr_ack_next[req->wait_ack] & MDR_BIT(to))) {
        mdr_state_illegal(req->ctx, "synchronous-send ACK", req->id,
                          mdr_ack_names[req->wait_ack], mdr_ack_names[to]);
        return -1;
    }
    req->wait_ack = to;
    return 0;
}

/* The header of an EAGER fragment. */
static void mdr_eager_hdr_init(mdr_eager_hdr_t *e, uint8_t flags, uint64_t seq, uint64_t tag,
                               uint64_t total, uint64_t offset, uint64_t id)
{
    memset(e, 0, sizeof(*e));
    e->h.type = MDR_MSG_EAGER;
    e->h.flags = flags;
    e->seq = seq;
    e->tag = tag;
    e->total = total;
    e->offset = offset;
    e->id = id;
}

/* A whole message that names no request of either side goes as SHORT:
 * the EAGER header without total, offset and id (core.h). */
static inline void mdr_short_hdr_init(mdr_short_hdr_t *sh, uint8_t flags, uint64_t seq,
                                      uint64_t tag)
{
    memset(sh, 0, sizeof(*sh));
    sh->h.type = MDR_MSG_SHORT;
    sh->h.flags = flags;
    sh->h.len = (uint32_t)seq; /* the low bits of seq (core.h) */
    sh->tag = tag;
}

MDR_HOT static int mdr_short_send(mdr_peer_t *peer, uint8_t flags, uint64_t seq, uint64_t tag,
                                  const void *buf, size_t len)
{
    mdr_short_hdr_t sh;

    mdr_short_hdr_init(&sh, flags, seq, tag);
    return mdr_ctrl_try_send(peer, -1, &sh.h, sizeof(sh), buf, len);
}

/* Send eager fragments until done or out of credits. */
int mdr_eager_send(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_ctx_t *ctx = peer->ctx;
    int n = 0;

    do {
        mdr_eager_hdr_t e;
        size_t plen = req->len - req->frag_off;
        int used;
        if (req->has_am) { /* one EAGER_AM: header and data gathered (am.c) */
            ctx->tx_sreq_id = req->id;
            used = mdr_am_send_eager(peer, req);
            ctx->tx_sreq_id = 0;
            plen = req->len;
            goto sent;
        }
        if (req->frag_off == 0 && plen <= ctx->eager_max && !req->rfs_consumed &&
            !(req->flags & MADRAIL_SEND_SYNC)) {
            ctx->tx_sreq_id = req->id; /* its copy (replay.c) names the send */
            used = mdr_short_send(peer, (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0,
                                  req->seq, req->tag, req->buf, plen);
            ctx->tx_sreq_id = 0;
            goto sent;
        }
        if (plen > ctx->eager_max)
            plen = ctx->eager_max;
        mdr_eager_hdr_init(
            &e,
            (uint8_t)(((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed ? MDR_HF_SYNC : 0) |
                      ((req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0) |
                      (req->rfs_consumed ? MDR_HF_RFS_CONSUMED : 0)),
            req->seq, req->tag, req->len, req->frag_off,
            req->rfs_consumed ? req->peer_req_id : req->id);
        ctx->tx_sreq_id = req->id; /* its copy (replay.c) names the send */
        used = mdr_ctrl_try_send(peer, -1, &e.h, sizeof(e), (uint8_t *)req->buf + req->frag_off,
                                 plen);
        ctx->tx_sreq_id = 0;
    sent:
        if (used < 0) {
            if (!mdr_peer_reachable(peer)) { /* no rail left: nothing will come */
                mdr_sendq_del(req);
                mdr_send_fail(req, MADRAIL_ERR_PEER_UNREACHABLE);
                return n;
            }
            if (n == 0 && !req->queued) {
                int r;
                for (r = 0; r < ctx->nrails; r++)
                    if (peer->rails[r].credits == 0) {
                        ctx->rails[r].stats.credit_stalls++;
                        break;
                    }
            }
            mdr_sendq_add(peer, req);
            mdr_send_watch(req);
            return n;
        }
        mdr_send_note(req, used);
        req->frag_off += plen;
        n++;
    } while (req->frag_off < req->len);
    req->frag_off = req->len + 1; /* all sent (also for len 0) */
    mdr_sendq_del(req);
    /* A synchronous send completes on its ACK, which the receiver sends when
     * the first fragment matched: it may have come already (MDR_ACK_GOT),
     * and then the send completes once its fragments have left. */
    if (req->wait_ack == MDR_ACK_WAIT) {
        mdr_send_watch(req);
    } else {
        mdr_ack_set(req, MDR_ACK_NONE);
        mdr_send_done(req); /* complete once the fragments left */
    }
    return n;
}

/* A whole small message with no request (madrail_isend_nb): sent at once
 * or not at all.  Only when nothing could come before it: no send waiting
 * for credits, no offer of the peer's that it might spend, no re-sent
 * copies going first (mdr_ctrl_try_send checks those and the order of
 * starts).  Returns the rail it went on, -1 when it did not go. */
MDR_HOT int mdr_eager_send_now(mdr_peer_t *peer, const void *buf, size_t len, uint64_t tag,
                               uint64_t *seq_p)
{
    uint64_t seq = peer->next_send_seq;
    mdr_short_hdr_t sh;
    int used;

    if (len > peer->ctx->eager_max || !mdr_list_empty(&peer->sendq) || peer->nrfs_stored)
        return -1;
    /* no synchronous ACK to ask for, no offer to spend: a SHORT message,
     * in its lane with one rail (ctrl.c), else as any other */
    mdr_short_hdr_init(&sh, 0, seq, tag);
    used = mdr_ctrl_short_lane(peer, seq, &sh, buf, len) == 0
               ? 0
               : mdr_ctrl_try_send(peer, -1, &sh.h, sizeof(sh), buf, len);
    if (used >= 0) {
        peer->next_send_seq++;
        *seq_p = seq;
    }
    return used;
}

static void mdr_handle_ack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_id_hdr_t *a = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;

    (void)len;
    req = mdr_req_for_reply(pr, "ACK", a->id, MDR_REQ_SEND);
    if (!req)
        return;
    if (req->wait_ack != MDR_ACK_WAIT || req->frag_off == 0) {
        mdr_peer_proto_fail(pr, "ACK for send %llx, which waits for none",
                            (unsigned long long)a->id);
        return;
    }
    if (req->frag_off <= req->len) { /* fragments still going out */
        mdr_ack_set(req, MDR_ACK_GOT);
        return;
    }
    mdr_ack_set(req, MDR_ACK_NONE);
    mdr_req_complete(req, MADRAIL_OK);
}

void mdr_eager_send_ack(mdr_peer_t *peer, uint64_t sreq_id)
{
    mdr_id_hdr_t ack;
    memset(&ack, 0, sizeof(ack));
    ack.h.type = MDR_MSG_ACK;
    ack.id = sreq_id;
    if (mdr_ctrl_send(peer, -1, &ack.h, sizeof(ack), NULL, 0) != MADRAIL_OK)
        mdr_warn("peer %u: cannot send ACK", peer->index);
}

madrail_status_t mdr_eager_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t ack = {"ACK", sizeof(mdr_id_hdr_t), 0, 0, mdr_handle_ack, 0};
    return mdr_ctrl_register(ctx, MDR_MSG_ACK, &ack);
}
