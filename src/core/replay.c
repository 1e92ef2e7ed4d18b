/*
 * Recovery of the control messages a failed rail may have lost.  A rail is
 * FIFO per connection and the receiver returns a credit only for a message
 * it took, so when a rail fails the messages that may not have arrived are
 * exactly those whose credit has not come back: the last (credits - credits
 * left) sent on it.  Each peer-rail keeps a copy of those (a ring of at
 * most `credits`: control headers, and an EAGER fragment's payload, never
 * more than a slot; puts are never copied), frees the oldest n when n
 * credits return, and when the rail goes down queues them all, oldest
 * first, on ONE surviving rail (FIFO there too: an RFS_REVOKE stays behind
 * its RFS), marked re-sent.  They spend credits of that rail like any
 * message (the dead rail's credits are gone) and are kept in its ring in
 * turn, so a second failure re-sends them again.
 *
 * The receiver drops exactly what it already has, whatever the type, with
 * no per-type guess: a re-sent copy names the rail it was first sent on
 * and its index there (messages the sender handed to the driver on that
 * rail before it), and the receiver counts the messages it took on each
 * rail (rx_count).  The first copy for a rail that is still up at the
 * receiver closes that rail there too (the sender gave it up), so its
 * count is final (a rail with no connection yet stays up: nothing came on
 * it, and the given-up connection is refused if it comes late): a copy whose index is below it arrived and is dropped
 * (counted, resent_dups), one at or above it did not and is handled as if
 * it had come on its first rail, once (a bitmap over the window, since a
 * copy can itself be re-sent when its carrier fails).  The index travels
 * modulo 2^16 in the credits field (a re-sent copy returns no credits), so
 * MADRAIL_CREDITS is at most 32768 and the window is unambiguous.  An
 * unflagged message is never a duplicate: replies keep their strict
 * checks (ctrl.c), and one that comes twice without the flag still closes
 * the rail.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/clock.h"
#include "util/compiler.h"

struct mdr_replay_copy {
    int resent;       /* itself a re-sent copy: counted in peer->resent_out */
    uint64_t sreq_id; /* the send it is part of (its completion waits for the copy), 0: none */
    size_t len;
    uint64_t data[]; /* header + body, 8-byte aligned */
};

static void mdr_replay_copy_free(mdr_peer_rail_t *pr, struct mdr_replay_copy *c)
{
    if (c->resent)
        pr->peer->resent_out--;
    mdr_pool_put(&pr->peer->ctx->pool, c, sizeof(*c) + c->len);
}

static void mdr_replay_free_ring(mdr_peer_rail_t *pr)
{
    unsigned cap = pr->peer->ctx->cfg.credits, i;

    if (pr->ring) {
        for (i = 0; i < pr->ring_n; i++)
            mdr_replay_copy_free(pr, pr->ring[(pr->ring_head + i) % cap]);
        free(pr->ring);
    }
    pr->ring = NULL;
    pr->ring_head = pr->ring_n = 0;
}

void mdr_replay_reset(mdr_peer_rail_t *pr)
{
    mdr_replay_free_ring(pr);
    free(pr->rx_resent);
    pr->rx_resent = NULL;
    pr->tx_count = pr->rx_count = 0;
    pr->ring_broken = 0;
    pr->replay_ok = 0;
}

void mdr_replay_keep(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t hdr_len,
                     const void *payload, size_t payload_len)
{
    unsigned cap = pr->peer->ctx->cfg.credits;
    struct mdr_replay_copy *c;

    pr->tx_count++;
    /* with one rail there is no other to re-send on (a failed rail fails
     * the peer: mdr_replay_rail_down), so no copy is kept */
    if (pr->ring_broken || pr->peer->ctx->nrails < 2)
        return;
    if (!pr->ring) {
        pr->ring = calloc(cap, sizeof(*pr->ring));
        if (!pr->ring)
            goto err_broken;
    }
    if (pr->ring_n == cap) /* more out than credits: a bug, or a test that forged credits */
        goto err_broken;
    c = mdr_pool_get(&pr->peer->ctx->pool, sizeof(*c) + hdr_len + payload_len); /* no malloc
                                                                               * once warm */
    if (!c)
        goto err_broken;
    c->sreq_id = pr->peer->ctx->tx_sreq_id;
    c->resent = (hdr->flags & MDR_HF_RESENT) != 0;
    if (c->resent) {
        pr->peer->resent_out++;
        pr->peer->resent_ns = mdr_time_ns();
    }
    c->len = hdr_len + payload_len;
    memcpy(c->data, hdr, hdr_len);
    if (payload_len)
        memcpy((uint8_t *)c->data + hdr_len, payload, payload_len);
    pr->ring[(pr->ring_head + pr->ring_n) % cap] = c;
    pr->ring_n++;
    return;

err_broken:
    mdr_warn("rail %s peer %u: cannot keep a copy of a control message: a failure of this "
             "rail will not be recovered",
             pr->peer->ctx->rails[pr->rail].attr.name, pr->peer->index);
    mdr_replay_free_ring(pr);
    pr->ring_broken = 1;
}

void mdr_replay_name_last(mdr_peer_rail_t *pr, uint64_t sreq_id)
{
    unsigned cap = pr->peer->ctx->cfg.credits;

    if (pr->ring && pr->ring_n > 0)
        pr->ring[(pr->ring_head + pr->ring_n - 1) % cap]->sreq_id = sreq_id;
}

MDR_HOT void mdr_replay_acked(mdr_peer_rail_t *pr, unsigned n)
{
    unsigned cap = pr->peer->ctx->cfg.credits;

    while (n-- > 0 && pr->ring_n > 0) {
        mdr_replay_copy_free(pr, pr->ring[pr->ring_head]);
        pr->ring[pr->ring_head] = NULL;
        pr->ring_head = (pr->ring_head + 1) % cap;
        pr->ring_n--;
    }
}

/* The surviving rail the copies go on: the lowest-latency usable one. */
static int mdr_replay_carrier(const mdr_peer_t *peer, int not)
{
    const mdr_ctx_t *ctx = peer->ctx;
    int i;

    for (i = 0; i < ctx->nrails; i++) {
        int r = ctx->rail_order[i];
        if (r != not && mdr_peer_rail_usable(&peer->rails[r]))
            return r;
    }
    return -1;
}

int mdr_replay_move(mdr_peer_t *peer, mdr_txq_item_t *item)
{
    int r = mdr_replay_carrier(peer, item->rail);
    if (r < 0)
        return -1;
    item->rail = r;
    return 0;
}

void mdr_replay_rail_down(mdr_peer_rail_t *pr)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    unsigned cap = ctx->cfg.credits, i, n = pr->ring_n;
    uint64_t first = pr->tx_count - n;
    mdr_list_t batch;
    int carrier, fin_skipped = 0;
    unsigned nq = 0;

    pr->replay_ok = 0;
    if (pr->ring_broken || peer->broken) {
        mdr_replay_free_ring(pr);
        return;
    }
    carrier = mdr_replay_carrier(peer, pr->rail);
    if (carrier < 0) { /* the peer fails: nothing to re-send on */
        mdr_replay_free_ring(pr);
        return;
    }
    mdr_list_init(&batch);
    for (i = 0; i < n; i++) {
        struct mdr_replay_copy *c = pr->ring[(pr->ring_head + i) % cap];
        mdr_hdr_t *h = (mdr_hdr_t *)c->data;
        mdr_txq_item_t *it;

        if (h->type == MDR_MSG_FIN && !(ctx->rails[pr->rail].attr.caps & MDR_RAIL_CAP_PUT_REMOTE)) {
            /* its puts completed when written, not when placed: they may
             * have been lost with the rail, and the FIN must not report
             * them (tcp with MADRAIL_TCP_PUT_ACK=0) */
            mdr_error("rail %s peer %u: a FIN that may not have arrived is not sent again: this "
                      "rail's puts complete before the data is placed (MADRAIL_TCP_PUT_ACK=0), "
                      "so its bytes may be lost too",
                      ctx->rails[pr->rail].attr.name, peer->index);
            fin_skipped = 1;
            continue;
        }
        it = malloc(sizeof(*it) + c->len);
        if (!it) {
            mdr_error("rail %s peer %u: no memory to re-send %u control messages that may "
                      "have been lost with the rail",
                      ctx->rails[pr->rail].attr.name, peer->index, n - i);
            while (!mdr_list_empty(&batch))
                free(mdr_container_of(mdr_list_pop_head(&batch), mdr_txq_item_t, link));
            mdr_replay_free_ring(pr);
            return;
        }
        if (!(h->flags & MDR_HF_RESENT)) { /* a copy of a copy keeps its first identity */
            h->flags = (uint8_t)(h->flags | MDR_HF_RESENT |
                                 ((unsigned)pr->rail << MDR_HF_RAIL_SHIFT));
            h->credits = (uint16_t)(first + i);
        }
        it->rail = carrier;
        it->is_credit = 0;
        it->sreq_id = 0;
        if (c->sreq_id) {
            /* a send whose message this is does not complete before the
             * copy left (or fails if it cannot: mdr_send_txq_lost) */
            mdr_req_t *req = mdr_req_lookup(ctx, c->sreq_id);
            if (req && req->type == MDR_REQ_SEND && !req->complete) {
                it->sreq_id = c->sreq_id;
                req->unsent_txq++;
                mdr_send_track(req, -1, 0);
            }
        }
        it->part = -1;
        it->replay = 1;
        it->len = c->len;
        memcpy(it->data, c->data, c->len);
        mdr_list_push_tail(&batch, &it->link);
        nq++;
    }
    /* ahead of what waits: they were sent before it */
    while (!mdr_list_empty(&batch)) {
        mdr_list_t *l = batch.prev;
        mdr_list_del(l);
        mdr_list_push_head(&peer->txq, l);
    }
    peer->nreplay += nq;
    ctx->rails[pr->rail].stats.resent_msgs += nq;
    if (nq)
        mdr_warn("rail %s peer %u: %u control messages whose arrival was not confirmed are "
                 "sent again on rail %s",
                 ctx->rails[pr->rail].attr.name, peer->index, nq, ctx->rails[carrier].attr.name);
    mdr_replay_free_ring(pr);
    pr->replay_ok = !fin_skipped; /* else its sends count what it held unsent as lost */
    mdr_peer_activate(peer);
}

int mdr_replay_settling(const mdr_peer_t *peer)
{
    double wait = peer->ctx->cfg.rail_timeout > 0 ? peer->ctx->cfg.rail_timeout : 1.0;

    if (peer->nreplay)
        return 1;
    /* a copy is acknowledged when its credit returns, which can take long
     * on a quiet carrier; one not acknowledged within a rail timeout of
     * leaving is taken as arrived (its carrier is alive, or it would have
     * failed) */
    return peer->resent_out && mdr_time_ns() - peer->resent_ns < (uint64_t)(wait * 1e9);
}

int mdr_replay_rx(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    unsigned origin = (hdr->flags & MDR_HF_RAIL_MASK) >> MDR_HF_RAIL_SHIFT;
    unsigned cap = ctx->cfg.credits, d;
    mdr_peer_rail_t *op;

    /* mdr_ctrl_check_hdr made sure origin names another rail of ours */
    op = &peer->rails[origin];
    if (!op->down && op->ep) {
        /* the peer gave that rail up: so do we, and what we sent on it
         * that it may not have goes again too; from now on nothing more
         * is taken from it, so its count is final */
        mdr_warn("rail %s peer %u: the peer re-sends what it sent on this rail: closing it",
                 ctx->rails[origin].attr.name, peer->index);
        snprintf(op->last_error, sizeof(op->last_error),
                 "the peer gave it up (it re-sent its messages on another rail)");
        mdr_peer_rail_mark_down(op, 1);
        /* and its connection goes at the next progress, its puts in flight
         * failed so that they go again elsewhere: over a dead link neither
         * the peer's close nor an error may ever reach us (a ucx or ofi rail
         * waits on TCP's retries), and kept open they would wait for good */
        mdr_watch_close_later(op);
        mdr_rejoin_down(op); /* dialled again later, as after a driver error */
        mdr_send_rail_lost(op, 0);
    }
    /* (up with no connection: nothing came on it, so every copy is new,
     * and its connection from the peer, given up, is refused if it ever
     * comes: mdr_ep_accepted_upcall) */
    d = (uint16_t)(hdr->credits - (uint16_t)op->rx_count);
    if (d >= 32768u) { /* before what we took there: it arrived */
        ctx->rails[origin].stats.resent_dups++;
        return 0;
    }
    if (d >= cap) {
        mdr_peer_proto_fail(pr, "re-sent message %u past the last one taken on rail %s: more "
                            "than its %u credits ahead",
                            d, ctx->rails[origin].attr.name, cap);
        return -1;
    }
    if (!op->rx_resent) {
        op->rx_resent = mdr_fault_nomem(ctx) ? NULL : calloc((cap + 63) / 64, sizeof(uint64_t));
        if (!op->rx_resent) {
            mdr_peer_recv_nomem(pr, "the record of re-sent messages");
            return -1;
        }
    }
    if (op->rx_resent[d / 64] & (1ull << (d % 64))) { /* a copy of it came already */
        ctx->rails[origin].stats.resent_dups++;
        return 0;
    }
    op->rx_resent[d / 64] |= 1ull << (d % 64);
    return 1;
}
