/*
 * Control messages and credits.  Each peer-rail has `credits` normal slots
 * at the receiver plus MDR_RESERVED_SLOTS kept for CREDIT messages.  A
 * sender spends one credit per message and never sends without one; the
 * receiver counts what it consumed and gives it back piggy-backed on any
 * message it sends on that rail, or in an explicit CREDIT message once
 * t = ceil(credits/2) are owed.  A CREDIT carries everything owed (>= t,
 * and never more than credits), so the returns in flight, at most
 * `credits`, fit in at most two CREDIT messages: the reserved slots cover
 * them, and returns never wait for credits (no deadlock).  (With
 * floor(credits/2), credits = 3 allowed three.)
 *
 * The receiver enforces the same rules, because a peer that breaks them
 * makes it hold memory it never agreed to: per peer-rail it counts the
 * normal messages consumed and not yet returned (ret_pending, plus `held`:
 * messages stored out of order, whose credits are withheld until their
 * turn comes, see tag.c).  A message that finds that count at `credits`
 * is beyond what the sender can have been given, and a CREDIT returning
 * fewer than t would need a third reserved slot: both close the rail as
 * protocol errors.  The count is exact across piggy-backed returns
 * because it drops only when a return is handed to the driver, before the
 * sender can see it: received - returned_by_us <= sent - returned_seen =
 * what the sender has out, which is at most `credits`.  (Every process of
 * a job must use the same MADRAIL_CREDITS; the return threshold already
 * needed that.)
 *
 * A message that finds no credit (or a driver that says no-resource) is
 * copied into the peer's queue and sent by progress; sequenced messages
 * may take any rail because the receiver reorders by sequence number.
 * They must however START in sequence order: a sequenced message whose
 * predecessor has not sent a first fragment yet waits.  The receiver
 * withholds the credits of out-of-order messages, so a message that
 * overtook an unsent predecessor could hold every credit the predecessor
 * needs; and in-order starts are what bound the reorder window (tag.c).
 *
 * Every reply a peer sends (CTS, FIN, ACK, RFS_NACK, RFS_REVOKE, and the
 * RFS_DATA / RFS_CONSUMED answers checked in tag.c) names one of our
 * requests or offers; it is honoured only from the peer that request is
 * bound to, in the state that waits for it, with sizes that fit.  Anything
 * else closes the rail it came on (mdr_peer_proto_fail) before the request is
 * touched: a peer that is broken or hostile must not be able to complete,
 * fail or redirect a transfer that belongs to someone else.  The rules are
 * listed in one place, the "what a peer may send" section below.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

/* ceil(credits/2): see the header comment (credits >= 1, so t >= 1) */
static unsigned mdr_credit_threshold(const mdr_ctx_t *ctx)
{
    return (ctx->cfg.credits + 1) / 2;
}

/* The sequence number of a sequenced message of ours to peer (EAGER,
 * EAGER_AM, RTS, RFS_DATA: it follows the common header; SHORT: its low
 * 32 bits are in h.len, and the message is the one nearest to the next
 * start, ahead of it or a copy from behind it). */
static int mdr_hdr_seq(const mdr_peer_t *peer, const mdr_hdr_t *hdr, size_t hdr_len,
                       uint64_t *seq_p)
{
    if (hdr->type == MDR_MSG_SHORT) {
        *seq_p = peer->tx_seq_started +
                 (uint64_t)(int64_t)(int32_t)(hdr->len - (uint32_t)peer->tx_seq_started);
        return 1;
    }
    if ((hdr->type != MDR_MSG_EAGER && hdr->type != MDR_MSG_RTS &&
         hdr->type != MDR_MSG_RFS_DATA && hdr->type != MDR_MSG_EAGER_AM) ||
        hdr_len < sizeof(*hdr) + sizeof(*seq_p))
        return 0;
    memcpy(seq_p, (const uint8_t *)hdr + sizeof(*hdr), sizeof(*seq_p));
    return 1;
}

/* A sequenced message whose predecessor has not started must wait. */
static int mdr_seq_blocked(const mdr_peer_t *peer, const mdr_hdr_t *hdr, size_t hdr_len)
{
    uint64_t seq;
    return mdr_hdr_seq(peer, hdr, hdr_len, &seq) && seq > peer->tx_seq_started;
}

/* The sequenced message seq (has_seq) started: the next one may. */
static void mdr_seq_started(mdr_peer_t *peer, int has_seq, uint64_t seq)
{
    if (has_seq && seq == peer->tx_seq_started)
        peer->tx_seq_started++;
}

/* The driver took a message on pr that carried ret credits back: a
 * normal one spends a credit and is kept until that credit returns. */
MDR_HOT static inline void mdr_pr_sent(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t hdr_len,
                                       const void *payload, size_t payload_len, unsigned ret,
                                       int is_credit)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];

    if (!is_credit) {
        if (--pr->credits == 0)
            mdr_health_credits_out(pr);
        if (ctx->nrails < 2)
            pr->tx_count++; /* one rail keeps no copy (mdr_replay_keep) */
        else
            mdr_replay_keep(pr, hdr, hdr_len, payload, payload_len); /* until its credit returns */
    }
    pr->ret_pending -= ret;
    rs->stats.tx_msgs++;
    rs->stats.tx_bytes += hdr_len + payload_len;
}

/* Hand one message to the driver on pr; returns the driver's status. */
MDR_HOT static madrail_status_t mdr_pr_send(mdr_peer_rail_t *pr, mdr_hdr_t *hdr, size_t hdr_len,
                                            const void *payload, size_t payload_len, int is_credit)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    struct iovec iov[2];
    unsigned ret;
    madrail_status_t st;

    if (!pr->ep) {
        st = mdr_peer_connect_rail(pr->peer, pr->rail);
        if (st != MADRAIL_OK)
            return st;
    }
    if (!is_credit && pr->credits == 0)
        return MADRAIL_ERR_NORESOURCE;
    if (hdr->flags & MDR_HF_RESENT) {
        ret = 0; /* .credits names the copy (replay.c) */
    } else {
        ret = pr->ret_pending > 0xffff ? 0xffff : pr->ret_pending;
        hdr->credits = (uint16_t)ret;
    }
    if (hdr->type != MDR_MSG_SHORT) /* a SHORT's .len holds its sequence number */
        hdr->len = (uint32_t)(hdr_len + payload_len);
    iov[0].iov_base = hdr;
    iov[0].iov_len = hdr_len;
    iov[1].iov_base = (void *)payload;
    iov[1].iov_len = payload_len;
    st = rs->ops->ctrl_send(pr->ep, iov, payload_len ? 2 : 1);
    if (st != MADRAIL_OK)
        return st;
    mdr_pr_sent(pr, hdr, hdr_len, payload, payload_len, ret, is_credit);
    return MADRAIL_OK;
}

/* The lane of a whole small message (SHORT, sh) with one rail: what
 * mdr_ctrl_try_send and mdr_pr_send do for it when it may start now (its
 * sequence number seq is the next to start, no re-sent copy goes first)
 * and the rail is connected, usable and has a credit, without the choice
 * of a rail and the cases of other messages.  Returns 0 when it went, -1
 * when it did not (nothing was sent): the general path then decides. */
MDR_HOT int mdr_ctrl_short_lane(mdr_peer_t *peer, uint64_t seq, mdr_short_hdr_t *sh,
                                const void *buf, size_t len)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_peer_rail_t *pr = &peer->rails[0];
    struct iovec iov[2];
    unsigned ret;

    if (ctx->nrails != 1 || seq != peer->tx_seq_started || peer->nreplay || !pr->ep ||
        pr->down || pr->credits == 0) /* connected and usable (mdr_peer_rail_usable) */
        return -1;
    ret = pr->ret_pending > 0xffff ? 0xffff : pr->ret_pending;
    sh->h.credits = (uint16_t)ret;
    iov[0].iov_base = sh;
    iov[0].iov_len = sizeof(*sh);
    iov[1].iov_base = (void *)buf;
    iov[1].iov_len = len;
    if (ctx->rails[0].ops->ctrl_send(pr->ep, iov, len ? 2 : 1) != MADRAIL_OK)
        return -1;
    mdr_pr_sent(pr, &sh->h, sizeof(*sh), buf, len, ret, 0);
    peer->tx_seq_started++;
    return 0;
}

MDR_HOT int mdr_ctrl_try_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                              const void *payload, size_t payload_len)
{
    mdr_ctx_t *ctx = peer->ctx;
    int i, r;
    uint64_t seq = 0;
    int has_seq = mdr_hdr_seq(peer, hdr, hdr_len, &seq); /* read once for the whole call */

    if (has_seq && seq > peer->tx_seq_started)
        return -1; /* its predecessor has not started */
    if (peer->nreplay && !(hdr->flags & MDR_HF_RESENT))
        return -1; /* copies of what a failed rail lost go first (replay.c) */
    if (rail < 0 && ctx->nrails == 1) {
        /* one rail, no choice: what the static and round-robin passes
         * below come to with a single rail */
        rail = 0;
        if (!mdr_peer_rail_usable(&peer->rails[0]) || peer->rails[0].credits == 0)
            return -1;
    }
    if (rail >= 0) {
        if (mdr_pr_send(&peer->rails[rail], hdr, hdr_len, payload, payload_len, 0) !=
            MADRAIL_OK)
            return -1;
        mdr_seq_started(peer, has_seq, seq);
        return rail;
    }
    /* adaptive: shortest expected completion (health.c); one rail has no
     * choice to make */
    if (ctx->cfg.adapt && ctx->nrails > 1) {
        r = mdr_health_pick_rail(peer, hdr_len + payload_len);
        if (r == MDR_HEALTH_WAIT)
            return -1; /* the best rail has no credit yet */
        if (r >= 0 && mdr_pr_send(&peer->rails[r], hdr, hdr_len, payload, payload_len, 0) ==
                          MADRAIL_OK) {
            mdr_seq_started(peer, has_seq, seq);
            return r;
        }
    }
    /* static: lowest-latency rail that is idle and has a credit */
    for (i = 0; i < ctx->nrails; i++) {
        mdr_peer_rail_t *pr = &peer->rails[ctx->rail_order[i]];
        if (!mdr_peer_rail_usable(pr) || pr->credits == 0)
            continue;
        if (pr->ep && ctx->rails[pr->rail].ops->ep_backlog(pr->ep) != 0)
            continue;
        if (mdr_pr_send(pr, hdr, hdr_len, payload, payload_len, 0) == MADRAIL_OK) {
            mdr_seq_started(peer, has_seq, seq);
            return pr->rail;
        }
    }
    /* else round robin over rails with a credit */
    for (i = 0; i < ctx->nrails; i++) {
        mdr_peer_rail_t *pr;
        r = (int)((peer->rr + (unsigned)i) % (unsigned)ctx->nrails);
        pr = &peer->rails[r];
        if (!mdr_peer_rail_usable(pr) || pr->credits == 0)
            continue;
        if (mdr_pr_send(pr, hdr, hdr_len, payload, payload_len, 0) == MADRAIL_OK) {
            peer->rr = (unsigned)r + 1;
            mdr_seq_started(peer, has_seq, seq);
            return r;
        }
    }
    return -1;
}

static void mdr_stall(mdr_peer_t *peer, int rail)
{
    mdr_ctx_t *ctx = peer->ctx;
    if (rail >= 0) {
        ctx->rails[rail].stats.credit_stalls++;
    } else {
        int r;
        for (r = 0; r < ctx->nrails; r++)
            if (mdr_peer_rail_usable(&peer->rails[r]) && peer->rails[r].credits == 0) {
                ctx->rails[r].stats.credit_stalls++;
                break;
            }
    }
}

static madrail_status_t mdr_txq_push(mdr_peer_t *peer, int rail, int is_credit,
                                     uint64_t sreq_id, int part, const mdr_hdr_t *hdr,
                                     size_t hdr_len, const void *payload, size_t payload_len)
{
    mdr_txq_item_t *it = malloc(sizeof(*it) + hdr_len + payload_len);
    if (!it)
        return MADRAIL_ERR_NOMEM;
    it->rail = rail;
    it->is_credit = is_credit;
    it->sreq_id = sreq_id;
    it->part = part;
    it->replay = 0;
    it->len = hdr_len + payload_len;
    memcpy(it->data, hdr, hdr_len);
    if (payload_len)
        memcpy(it->data + hdr_len, payload, payload_len);
    mdr_list_push_tail(&peer->txq, &it->link);
    mdr_peer_activate(peer);
    return MADRAIL_OK;
}

madrail_status_t mdr_ctrl_send_req(mdr_peer_t *peer, int rail, mdr_req_t *req, int part,
                                   mdr_hdr_t *hdr, size_t hdr_len, const void *payload,
                                   size_t payload_len)
{
    madrail_status_t st;
    int used;

    if (!mdr_peer_reachable(peer))
        return MADRAIL_ERR_PEER_UNREACHABLE;
    if (rail >= 0 && peer->rails[rail].down)
        return MADRAIL_ERR_RAIL_DOWN;
    peer->ctx->tx_sreq_id = req ? req->id : 0;
    used = mdr_ctrl_try_send(peer, rail, hdr, hdr_len, payload, payload_len);
    peer->ctx->tx_sreq_id = 0;
    if (used >= 0) {
        if (req)
            mdr_send_track(req, used, hdr->type != MDR_MSG_FIN);
        else
            peer->rails[used].untracked_sent = 1;
        return MADRAIL_OK;
    }
    mdr_stall(peer, rail);
    st = mdr_txq_push(peer, rail, 0, req ? req->id : 0, part, hdr, hdr_len, payload,
                      payload_len);
    if (st == MADRAIL_OK && req) {
        req->unsent_txq++;
        mdr_send_track(req, -1, 0);
    }
    return st;
}

madrail_status_t mdr_ctrl_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                               const void *payload, size_t payload_len)
{
    return mdr_ctrl_send_req(peer, rail, NULL, -1, hdr, hdr_len, payload, payload_len);
}

madrail_status_t mdr_ctrl_send_reserved(mdr_peer_rail_t *pr, int type)
{
    mdr_hdr_t hdr;

    if (pr->down || !pr->ep)
        return MADRAIL_ERR_RAIL_DOWN;
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = (uint8_t)type;
    return mdr_pr_send(pr, &hdr, sizeof(hdr), NULL, 0, 1);
}

/* Return credits explicitly if enough are owed on this rail. */
MDR_HOT static void mdr_credit_maybe_return(mdr_peer_rail_t *pr)
{
    mdr_hdr_t hdr;
    if (pr->ret_pending < mdr_credit_threshold(pr->peer->ctx) || pr->credit_queued || pr->down)
        return;
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_MSG_CREDIT;
    if (mdr_pr_send(pr, &hdr, sizeof(hdr), NULL, 0, 1) == MADRAIL_OK) {
        pr->credit_msgs++;
        return;
    }
    if (mdr_txq_push(pr->peer, pr->rail, 1, 0, -1, &hdr, sizeof(hdr), NULL, 0) == MADRAIL_OK)
        pr->credit_queued = 1;
}

int mdr_ctrl_txq_progress(mdr_peer_t *peer)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_list_t *it, *tmp;
    int n = 0;

    mdr_list_for_each_safe(it, tmp, &peer->txq) {
        mdr_txq_item_t *item = mdr_container_of(it, mdr_txq_item_t, link);
        mdr_hdr_t *hdr = (mdr_hdr_t *)item->data;
        size_t hlen = item->len;
        int sent = -1;

        if (item->replay && peer->rails[item->rail].down)
            (void)mdr_replay_move(peer, item); /* its carrier failed too: another one */
        if (item->rail >= 0 && peer->rails[item->rail].down) {
            mdr_list_del(it);
            if (item->replay)
                peer->nreplay--;
            if (item->sreq_id)
                mdr_send_txq_lost(ctx, item->sreq_id, item->rail, item->part);
            free(item);
            continue;
        }
        if (item->is_credit) {
            mdr_peer_rail_t *pr = &peer->rails[item->rail];
            if (pr->ret_pending < mdr_credit_threshold(ctx)) {
                /* piggy-backed returns took what it was for: a CREDIT
                 * carrying less than the threshold is refused (see top) */
                pr->credit_queued = 0;
                mdr_list_del(it);
                free(item);
                continue;
            }
            if (mdr_pr_send(pr, hdr, hlen, NULL, 0, 1) == MADRAIL_OK) {
                sent = item->rail;
                pr->credit_queued = 0;
                pr->credit_msgs++;
            }
        } else if (mdr_seq_blocked(peer, hdr, hlen)) {
            continue; /* its predecessor (in sendq) starts first */
        } else {
            ctx->tx_sreq_id = item->sreq_id;
            sent = mdr_ctrl_try_send(peer, item->rail, hdr, hlen, NULL, 0);
            ctx->tx_sreq_id = 0;
        }
        if (sent < 0) {
            if (item->rail < 0)
                break; /* no credit on any rail: later items would not fit either */
            continue;
        }
        mdr_list_del(it);
        if (item->replay)
            peer->nreplay--;
        if (item->sreq_id)
            mdr_send_txq_sent(ctx, item->sreq_id, sent, hdr->type != MDR_MSG_FIN);
        else if (!item->is_credit)
            peer->rails[sent].untracked_sent = 1;
        free(item);
        n++;
    }
    return n;
}

/* The two credit rules of the top.  A normal message fits the credits
 * its sender can have: ret_pending + held below `credits`.  Returns -1
 * when the rail was closed for it. */
static inline int mdr_ctrl_overrun_check(mdr_peer_rail_t *pr)
{
    const mdr_ctx_t *ctx = pr->peer->ctx;

    if (pr->ret_pending + pr->held < ctx->cfg.credits)
        return 0;
    mdr_peer_proto_fail(pr, "credit overrun: a message beyond its %u credits (%u consumed and "
                        "not returned, %u of them held out of order)",
                        ctx->cfg.credits, pr->ret_pending + pr->held, pr->held);
    return -1;
}

/* Any message returns only credits that were spent (n of them). */
static inline int mdr_ctrl_return_check(mdr_peer_rail_t *pr, unsigned n)
{
    const mdr_ctx_t *ctx = pr->peer->ctx;

    if ((uint64_t)pr->credits + n <= ctx->cfg.credits)
        return 0;
    mdr_peer_proto_fail(pr, "returns %u credits, we only spent %u", n,
                        ctx->cfg.credits - pr->credits);
    return -1;
}

/* n credits came back on pr (checked). */
static inline void mdr_ctrl_credits_back(mdr_peer_rail_t *pr, unsigned n)
{
    pr->credits += n;
    mdr_health_credits_back(pr);
    mdr_replay_acked(pr, n); /* the oldest copies arrived */
    if (!mdr_list_empty(&pr->peer->txq) || !mdr_list_empty(&pr->peer->sendq))
        mdr_peer_activate(pr->peer);
}

MDR_HOT void mdr_ctrl_recv_upcall(void *ep_cookie, const void *data, size_t len)
{
    mdr_peer_rail_t *pr = ep_cookie;
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    const mdr_hdr_t *lane = data;
    mdr_hdr_t hdr;
    int reserved;

    /* The lane of a whole small message: a SHORT without flags, aligned,
     * on a rail that is up.  What the general path below does for it,
     * without the table: its rule (at least the SHORT header, flags 0 among
     * those allowed, no reserved slot) holds by the test itself; the
     * credit rules, the sign of life and the credit owed are the same, and
     * so is its handler (tag.c checks the rest, as for any SHORT). */
    if (len >= sizeof(mdr_short_hdr_t) && ((uintptr_t)data & 7) == 0 &&
        lane->type == MDR_MSG_SHORT && lane->flags == 0 && !pr->down) {
        rs->stats.rx_msgs++;
        rs->stats.rx_bytes += len;
        mdr_watch_rx(pr);
        if (mdr_ctrl_overrun_check(pr) != 0 || mdr_ctrl_return_check(pr, lane->credits) != 0)
            return;
        if (lane->credits)
            mdr_ctrl_credits_back(pr, lane->credits);
        pr->ret_pending++;
        pr->rx_count++;
        mdr_match_incoming(pr, lane, len);
        mdr_credit_maybe_return(pr);
        return;
    }
    if (pr->down && !mdr_rejoin_arrival(pr))
        return; /* what a closed connection still delivers */
    rs->stats.rx_msgs++;
    rs->stats.rx_bytes += len;
    if (len < sizeof(hdr)) {
        mdr_peer_proto_fail(pr, "%zu bytes, shorter than a header", len);
        return;
    }
    memcpy(&hdr, data, sizeof(hdr));
    if (hdr.len != len && hdr.type != MDR_MSG_SHORT) { /* a SHORT's .len: core.h */
        mdr_peer_proto_fail(pr, "header says %u bytes, %zu arrived", hdr.len, len);
        return;
    }
    if (mdr_ctrl_check_hdr(pr, &hdr, len) != 0) /* type, length, flags: the table below */
        return;
    mdr_watch_rx(pr); /* a sign of life, whatever it carries */
    reserved = ctx->handlers[hdr.type].reserved;
    if (hdr.type == MDR_MSG_CREDIT && hdr.credits < mdr_credit_threshold(ctx)) {
        mdr_peer_proto_fail(pr, "CREDIT message returning %u credits (they are sent once %u are "
                            "owed): more than the %d reserved slots would be in flight",
                            hdr.credits, mdr_credit_threshold(ctx), MDR_RESERVED_SLOTS);
        return;
    }
    if (!reserved && mdr_ctrl_overrun_check(pr) != 0)
        return;
    /* a re-sent copy's .credits names the copy, it returns none: see replay.c */
    if (!(hdr.flags & MDR_HF_RESENT) && mdr_ctrl_return_check(pr, hdr.credits) != 0)
        return;
    if (!(hdr.flags & MDR_HF_RESENT) && hdr.credits)
        mdr_ctrl_credits_back(pr, hdr.credits);
    if (reserved) { /* its slot is one of the reserved ones: no credit owed for it */
        if (ctx->handlers[hdr.type].fn)
            ctx->handlers[hdr.type].fn(pr, (const mdr_hdr_t *)data, len);
        return;
    }
    /* The message is consumed now (copied or delivered): its slot is free. */
    pr->ret_pending++;
    pr->rx_count++;
    if (hdr.flags & MDR_HF_RESENT) {
        /* a copy of a message first sent on another rail that failed: taken
         * once, as if it had come there (replay.c) */
        uint64_t *copy;
        int take = mdr_replay_rx(pr, &hdr);
        if (take <= 0) {
            if (take == 0 && !pr->down)
                mdr_credit_maybe_return(pr);
            return;
        }
        copy = mdr_fault_nomem(ctx) ? NULL : malloc(len + 8);
        if (!copy) {
            mdr_peer_recv_nomem(pr, "a copy of a re-sent message");
            return;
        }
        memcpy(copy, data, len);
        ((mdr_hdr_t *)copy)->flags &= MDR_HF_PROTO_MASK;
        ctx->rx_resent_rail = (hdr.flags & MDR_HF_RAIL_MASK) >> MDR_HF_RAIL_SHIFT;
        mdr_ctrl_dispatch(pr, (const mdr_hdr_t *)copy, len);
        ctx->rx_resent_rail = -1;
        free(copy);
    } else if (((uintptr_t)data & 7) == 0) {
        mdr_ctrl_dispatch(pr, data, len);
    } else {
        /* drivers hand aligned buffers; copy if one does not */
        uint64_t *copy = mdr_fault_nomem(ctx) ? NULL : malloc(len + 8);
        if (!copy) {
            mdr_peer_recv_nomem(pr, "an aligned copy of a message");
            return;
        }
        memcpy(copy, data, len);
        mdr_ctrl_dispatch(pr, (const mdr_hdr_t *)copy, len);
        free(copy);
    }
    mdr_credit_maybe_return(pr);
}

int mdr_ctrl_hold(mdr_peer_rail_t *pr)
{
    /* mdr_ctrl_recv_upcall counted the message before handling it, and
     * nothing is sent between that and storing it out of order */
    if (pr->ret_pending == 0)
        return 0;
    pr->ret_pending--;
    pr->held++;
    return 1;
}

void mdr_ctrl_unhold(mdr_peer_rail_t *pr, unsigned n, int released)
{
    if (n > pr->held)
        n = pr->held;
    pr->held -= n;
    if (!released || pr->down)
        return;
    pr->ret_pending += n;
    mdr_credit_maybe_return(pr);
}

/* ---------------- what a peer may send, and when ---------------- */

/*
 * Per message type: its length (exact, or the fixed part when a body of
 * variable length follows) and the header flags it may carry, registered
 * with its handler by the module that owns the type (mdr_ctrl_register,
 * from each module's _init at context init: tag.c the sequenced types,
 * eager.c ACK, rndv.c CTS and FIN, rfs.c the offers, this file CREDIT).
 * Checked for every message before anything is taken from it (credits
 * included); a type nobody registered is a protocol error.
 * Further, per type (the handlers in eager.c, rndv.c, rfs.c and tag.c):
 *
 *   EAGER     AM only alone; RFS_CONSUMED not with SYNC; a consumed
 *             eager must answer one of our offers to that peer and go to
 *             the receive that made it; a fragment within its message,
 *             overlapping none that arrived (byte ranges, tag.c)
 *   EAGER_AM  one fragment: offset 0, total <= its body (the rest of the
 *             body is the AM header); no flags (tag.c)
 *   RTS       nothing to check against our state: it starts a transfer;
 *             a body only with AM, and then at least the AM id (tag.c)
 *   RFS_DATA  answers an offer of ours to that peer, still unanswered;
 *             xfer_len == min(total, offered buffer) (tag.c)
 *   CTS       a send of ours to that peer, RTS sent and no CTS yet;
 *             xfer_len <= its length; keys as mdr_rndv_keys_check says
 *   FIN       a receive of ours from that peer that waits for puts (CTS
 *             sent, or an offer of ours out or spent by RFS_DATA), on a
 *             rail we gave a key for, 0 < bytes <= bytes not yet reported
 *   ACK       a synchronous eager send of ours to that peer, waiting for it
 *   CREDIT    returns at least ceil(credits/2) (ctrl.c, with the
 *             over-return and overrun checks that apply to every message)
 *   PING      not while our PONG to the previous one is still unsent
 *             (the sender waits for PONGs: MDR_PING_MAX out at most)
 *   PONG      answers a PING of ours (watch.c)
 *   RFS       keys as mdr_rndv_keys_check says; at most MDR_RFS_WAIT_MAX kept
 *             from one peer, no id twice
 *   RFS_NACK  answers an offer of ours to that peer, still unanswered
 *   RFS_REVOKE  from a peer with more offers to us than revokes (an offer
 *             already spent or declined may still be revoked: the cancel
 *             crossed the answer)
 *   CANCEL    seq within the reorder window; answered once (cancel.c)
 *   CANCEL_ANS  a send of ours to that peer with a CANCEL out, unanswered;
 *             cancelled 0 or 1, and 1 only if no CTS or ACK came (cancel.c)
 */
madrail_status_t mdr_ctrl_register(mdr_ctx_t *ctx, int type, const mdr_ctrl_handler_t *h)
{
    if (type <= 0 || type >= MDR_MSG_MAX || !h->name || ctx->handlers[type].name) {
        mdr_error("message type %d (%s): %s", type, h->name ? h->name : "?",
                  type > 0 && type < MDR_MSG_MAX ? "registered twice" : "out of range");
        return MADRAIL_ERR_INVALID;
    }
    ctx->handlers[type] = *h;
    return MADRAIL_OK;
}

madrail_status_t mdr_ctrl_init(mdr_ctx_t *ctx)
{
    /* taken in mdr_ctrl_recv_upcall itself: no handler */
    static const mdr_ctrl_handler_t credit = {"CREDIT", sizeof(mdr_hdr_t), 0, 0, NULL, 1};
    return mdr_ctrl_register(ctx, MDR_MSG_CREDIT, &credit);
}

MDR_HOT int mdr_ctrl_check_hdr(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_ctrl_handler_t *rule;
    unsigned flags = hdr->flags;

    if (hdr->type >= MDR_MSG_MAX || !pr->peer->ctx->handlers[hdr->type].name) {
        mdr_peer_proto_fail(pr, "unknown type %u", hdr->type);
        return -1;
    }
    rule = &pr->peer->ctx->handlers[hdr->type];
    if ((flags & MDR_HF_RESENT) && !rule->reserved) {
        /* a copy re-sent after its first rail failed: that rail in the
         * top bits, another rail of ours (replay.c) */
        unsigned origin = (flags & MDR_HF_RAIL_MASK) >> MDR_HF_RAIL_SHIFT;
        if ((int)origin >= pr->peer->ctx->nrails || (int)origin == pr->rail) {
            mdr_peer_proto_fail(pr, "%s re-sent for rail %u (it came on rail %d, we have %d)",
                                rule->name, origin, pr->rail, pr->peer->ctx->nrails);
            return -1;
        }
        flags &= MDR_HF_PROTO_MASK;
    }
    if (rule->body ? len < rule->len : len != rule->len) {
        mdr_peer_proto_fail(pr, "%s of %zu bytes (%s%zu)", rule->name, len, rule->body ? ">= " : "",
                            rule->len);
        return -1;
    }
    if (flags & ~rule->flags) {
        mdr_peer_proto_fail(pr, "%s with flags 0x%x (allowed: 0x%x)", rule->name, hdr->flags,
                            rule->flags);
        return -1;
    }
    if (((flags & MDR_HF_AM) && flags != MDR_HF_AM) ||
        ((flags & MDR_HF_RFS_CONSUMED) && (flags & MDR_HF_SYNC))) {
        mdr_peer_proto_fail(pr, "%s with flags 0x%x that exclude each other", rule->name,
                            hdr->flags);
        return -1;
    }
    return 0;
}

MDR_HOT void mdr_ctrl_dispatch(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_ctrl_handler_t *h = &pr->peer->ctx->handlers[hdr->type];

    if (h->fn) /* mdr_ctrl_check_hdr let only registered types through */
        h->fn(pr, hdr, len);
    else /* CREDIT is taken in mdr_ctrl_recv_upcall */
        mdr_peer_proto_fail(pr, "unexpected %s", h->name);
}
