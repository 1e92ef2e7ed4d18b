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
 * turn comes, see match.c).  A message that finds that count at `credits`
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
 * needs; and in-order starts are what bound the reorder window (match.c).
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* ceil(credits/2): see the header comment (credits >= 1, so t >= 1) */
static unsigned mdr_credit_threshold(const mdr_ctx_t *ctx)
{
    return (ctx->cfg.credits + 1) / 2;
}

/* The sequence number of a sequenced message (EAGER, RTS, RFS_DATA: it
 * follows the common header in all three). */
static int mdr_hdr_seq(const mdr_hdr_t *hdr, size_t hdr_len, uint64_t *seq_p)
{
    if ((hdr->type != MDR_MSG_EAGER && hdr->type != MDR_MSG_RTS &&
         hdr->type != MDR_MSG_RFS_DATA) ||
        hdr_len < sizeof(*hdr) + sizeof(*seq_p))
        return 0;
    memcpy(seq_p, (const uint8_t *)hdr + sizeof(*hdr), sizeof(*seq_p));
    return 1;
}

/* A sequenced message whose predecessor has not started must wait. */
static int mdr_seq_blocked(const mdr_peer_t *peer, const mdr_hdr_t *hdr, size_t hdr_len)
{
    uint64_t seq;
    return mdr_hdr_seq(hdr, hdr_len, &seq) && seq > peer->tx_seq_started;
}

static void mdr_seq_started(mdr_peer_t *peer, const mdr_hdr_t *hdr, size_t hdr_len)
{
    uint64_t seq;
    if (mdr_hdr_seq(hdr, hdr_len, &seq) && seq == peer->tx_seq_started)
        peer->tx_seq_started++;
}

void mdr_peer_activate(mdr_peer_t *peer)
{
    if (!peer->active) {
        peer->active = 1;
        mdr_list_push_tail(&peer->ctx->active, &peer->active_link);
    }
}

static int mdr_pr_usable(const mdr_peer_rail_t *pr)
{
    return !pr->down && (pr->ep || pr->have_addr);
}

madrail_status_t mdr_peer_connect_rail(mdr_peer_t *peer, int rail)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_peer_rail_t *pr = &peer->rails[rail];
    madrail_status_t st;

    if (pr->ep)
        return MADRAIL_OK;
    if (pr->down || !pr->have_addr)
        return MADRAIL_ERR_RAIL_DOWN;
    st = ctx->rails[rail].ops->ep_create(ctx->rails[rail].rail, peer->uuid, pr->addr,
                                         pr->addr_len, pr, &pr->ep);
    if (st != MADRAIL_OK) {
        pr->down = 1;
        ctx->rails[rail].stats.failovers++;
        if (mdr_peer_reachable(peer)) {
            mdr_warn("rail %s peer %u: connect failed: %s; the other rails carry its traffic",
                     ctx->rails[rail].attr.name, peer->index, madrail_status_str(st));
        } else {
            /* no upcall will come: fail the peer's requests from progress
             * (the caller may be in the middle of one of them) */
            mdr_error("rail %s peer %u: connect failed: %s; no rail left to the peer",
                      ctx->rails[rail].attr.name, peer->index, madrail_status_str(st));
            peer->unreachable_pending = 1;
            mdr_peer_activate(peer);
        }
        return st;
    }
    mdr_debug("rail %s peer %u: connecting", ctx->rails[rail].attr.name, peer->index);
    return MADRAIL_OK;
}

/* Hand one message to the driver on pr; returns the driver's status. */
static madrail_status_t mdr_pr_send(mdr_peer_rail_t *pr, mdr_hdr_t *hdr, size_t hdr_len,
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
    ret = pr->ret_pending > 0xffff ? 0xffff : pr->ret_pending;
    hdr->credits = (uint16_t)ret;
    hdr->len = (uint32_t)(hdr_len + payload_len);
    iov[0].iov_base = hdr;
    iov[0].iov_len = hdr_len;
    iov[1].iov_base = (void *)payload;
    iov[1].iov_len = payload_len;
    st = rs->ops->ctrl_send(pr->ep, iov, payload_len ? 2 : 1);
    if (st != MADRAIL_OK)
        return st;
    if (!is_credit)
        pr->credits--;
    pr->ret_pending -= ret;
    rs->stats.tx_msgs++;
    rs->stats.tx_bytes += hdr_len + payload_len;
    return MADRAIL_OK;
}

int mdr_ctrl_try_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                      const void *payload, size_t payload_len)
{
    mdr_ctx_t *ctx = peer->ctx;
    int i, r;
    madrail_status_t st;

    if (mdr_seq_blocked(peer, hdr, hdr_len))
        return -1;
    if (rail >= 0) {
        st = mdr_pr_send(&peer->rails[rail], hdr, hdr_len, payload, payload_len, 0);
        if (st != MADRAIL_OK)
            return -1;
        mdr_seq_started(peer, hdr, hdr_len);
        return rail;
    }
    /* adaptive: shortest expected completion (health.c) */
    if (ctx->cfg.adapt) {
        r = mdr_health_pick_rail(peer, hdr_len + payload_len);
        if (r == MDR_HEALTH_WAIT)
            return -1; /* the best rail has no credit yet */
        if (r >= 0 && mdr_pr_send(&peer->rails[r], hdr, hdr_len, payload, payload_len, 0) ==
                          MADRAIL_OK) {
            mdr_seq_started(peer, hdr, hdr_len);
            return r;
        }
    }
    /* static: lowest-latency rail that is idle and has a credit */
    for (i = 0; i < ctx->nrails; i++) {
        mdr_peer_rail_t *pr = &peer->rails[ctx->rail_order[i]];
        if (!mdr_pr_usable(pr) || pr->credits == 0)
            continue;
        if (pr->ep && ctx->rails[pr->rail].ops->ep_backlog(pr->ep) != 0)
            continue;
        if (mdr_pr_send(pr, hdr, hdr_len, payload, payload_len, 0) == MADRAIL_OK) {
            mdr_seq_started(peer, hdr, hdr_len);
            return pr->rail;
        }
    }
    /* else round robin over rails with a credit */
    for (i = 0; i < ctx->nrails; i++) {
        mdr_peer_rail_t *pr;
        r = (int)((peer->rr + (unsigned)i) % (unsigned)ctx->nrails);
        pr = &peer->rails[r];
        if (!mdr_pr_usable(pr) || pr->credits == 0)
            continue;
        if (mdr_pr_send(pr, hdr, hdr_len, payload, payload_len, 0) == MADRAIL_OK) {
            peer->rr = (unsigned)r + 1;
            mdr_seq_started(peer, hdr, hdr_len);
            return r;
        }
    }
    return -1;
}

int mdr_peer_reachable(const mdr_peer_t *peer)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++)
        if (mdr_pr_usable(&peer->rails[r]))
            return 1;
    return 0;
}

static void mdr_stall(mdr_peer_t *peer, int rail)
{
    mdr_ctx_t *ctx = peer->ctx;
    if (rail >= 0) {
        ctx->rails[rail].stats.credit_stalls++;
    } else {
        int r;
        for (r = 0; r < ctx->nrails; r++)
            if (mdr_pr_usable(&peer->rails[r]) && peer->rails[r].credits == 0) {
                ctx->rails[r].stats.credit_stalls++;
                break;
            }
    }
}

static madrail_status_t mdr_txq_push(mdr_peer_t *peer, int rail, int is_credit,
                                     uint64_t sreq_id, const mdr_hdr_t *hdr, size_t hdr_len,
                                     const void *payload, size_t payload_len)
{
    mdr_txq_item_t *it = malloc(sizeof(*it) + hdr_len + payload_len);
    if (!it)
        return MADRAIL_ERR_NOMEM;
    it->rail = rail;
    it->is_credit = is_credit;
    it->sreq_id = sreq_id;
    it->len = hdr_len + payload_len;
    memcpy(it->data, hdr, hdr_len);
    if (payload_len)
        memcpy(it->data + hdr_len, payload, payload_len);
    mdr_list_push_tail(&peer->txq, &it->link);
    mdr_peer_activate(peer);
    return MADRAIL_OK;
}

madrail_status_t mdr_ctrl_send_req(mdr_peer_t *peer, int rail, mdr_req_t *req, mdr_hdr_t *hdr,
                                   size_t hdr_len, const void *payload, size_t payload_len)
{
    madrail_status_t st;
    int used;

    if (!mdr_peer_reachable(peer))
        return MADRAIL_ERR_PEER_UNREACHABLE;
    if (rail >= 0 && peer->rails[rail].down)
        return MADRAIL_ERR_RAIL_DOWN;
    used = mdr_ctrl_try_send(peer, rail, hdr, hdr_len, payload, payload_len);
    if (used >= 0) {
        if (req)
            mdr_send_track(req, used, hdr->type != MDR_MSG_FIN);
        else
            peer->rails[used].untracked_sent = 1;
        return MADRAIL_OK;
    }
    mdr_stall(peer, rail);
    st = mdr_txq_push(peer, rail, 0, req ? req->id : 0, hdr, hdr_len, payload, payload_len);
    if (st == MADRAIL_OK && req) {
        req->unsent_txq++;
        mdr_send_track(req, -1, 0);
    }
    return st;
}

madrail_status_t mdr_ctrl_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                               const void *payload, size_t payload_len)
{
    return mdr_ctrl_send_req(peer, rail, NULL, hdr, hdr_len, payload, payload_len);
}

/* Return credits explicitly if enough are owed on this rail. */
static void mdr_credit_maybe_return(mdr_peer_rail_t *pr)
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
    if (mdr_txq_push(pr->peer, pr->rail, 1, 0, &hdr, sizeof(hdr), NULL, 0) == MADRAIL_OK)
        pr->credit_queued = 1;
}

int mdr_ctrl_progress_peer(mdr_peer_t *peer)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_list_t *it, *tmp;
    int n = 0;

    if (peer->unreachable_pending) {
        peer->unreachable_pending = 0;
        mdr_peer_fail(peer, MADRAIL_ERR_PEER_UNREACHABLE);
    }
    mdr_list_for_each_safe(it, tmp, &peer->txq) {
        mdr_txq_item_t *item = mdr_container_of(it, mdr_txq_item_t, link);
        mdr_hdr_t *hdr = (mdr_hdr_t *)item->data;
        size_t hlen = item->len;
        int sent = -1;

        if (item->rail >= 0 && peer->rails[item->rail].down) {
            mdr_list_del(it);
            if (item->sreq_id)
                mdr_send_txq_lost(ctx, item->sreq_id, item->rail);
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
            sent = mdr_ctrl_try_send(peer, item->rail, hdr, hlen, NULL, 0);
        }
        if (sent < 0) {
            if (item->rail < 0)
                break; /* no credit on any rail: later items would not fit either */
            continue;
        }
        mdr_list_del(it);
        if (item->sreq_id)
            mdr_send_txq_sent(ctx, item->sreq_id, sent, hdr->type != MDR_MSG_FIN);
        else if (!item->is_credit)
            peer->rails[sent].untracked_sent = 1;
        free(item);
        n++;
    }
    mdr_list_for_each_safe(it, tmp, &peer->sendq) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, link);
        n += mdr_send_progress(req);
    }
    if (mdr_list_empty(&peer->txq) && mdr_list_empty(&peer->sendq) && peer->active) {
        peer->active = 0;
        mdr_list_del(&peer->active_link);
    }
    return n;
}

void mdr_proto_fail(mdr_peer_rail_t *pr, const char *fmt, ...)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    mdr_error("rail %s peer %u: malformed message: %s; closing this rail to the peer",
              ctx->rails[pr->rail].attr.name, pr->peer->index, why);
    pr->down = 1;
    ctx->rails[pr->rail].stats.failovers++;
    mdr_send_rail_lost(pr, 0);
    if (!mdr_peer_reachable(pr->peer))
        mdr_peer_fail(pr->peer, MADRAIL_ERR_PEER_PROTO);
}

void mdr_ctrl_recv_upcall(void *ep_cookie, const void *data, size_t len)
{
    mdr_peer_rail_t *pr = ep_cookie;
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    mdr_hdr_t hdr;

    if (pr->down)
        return;
    rs->stats.rx_msgs++;
    rs->stats.rx_bytes += len;
    if (len < sizeof(hdr)) {
        mdr_proto_fail(pr, "%zu bytes, shorter than a header", len);
        return;
    }
    memcpy(&hdr, data, sizeof(hdr));
    if (hdr.len != len) {
        mdr_proto_fail(pr, "header says %u bytes, %zu arrived", hdr.len, len);
        return;
    }
    if (mdr_proto_check_hdr(pr, &hdr, len) != 0) /* type, length, flags: proto.c's table */
        return;
    if (hdr.type == MDR_MSG_CREDIT && hdr.credits < mdr_credit_threshold(ctx)) {
        mdr_proto_fail(pr, "CREDIT message returning %u credits (they are sent once %u are "
                       "owed): more than the %d reserved slots would be in flight",
                       hdr.credits, mdr_credit_threshold(ctx), MDR_RESERVED_SLOTS);
        return;
    }
    if (hdr.type != MDR_MSG_CREDIT && pr->ret_pending + pr->held >= ctx->cfg.credits) {
        mdr_proto_fail(pr, "credit overrun: a message beyond its %u credits (%u consumed and "
                       "not returned, %u of them held out of order)",
                       ctx->cfg.credits, pr->ret_pending + pr->held, pr->held);
        return;
    }
    if ((uint64_t)pr->credits + hdr.credits > ctx->cfg.credits) {
        mdr_proto_fail(pr, "returns %u credits, we only spent %u", hdr.credits,
                       ctx->cfg.credits - pr->credits);
        return;
    }
    if (hdr.credits) {
        pr->credits += hdr.credits;
        if (!mdr_list_empty(&pr->peer->txq) || !mdr_list_empty(&pr->peer->sendq))
            mdr_peer_activate(pr->peer);
    }
    if (hdr.type == MDR_MSG_CREDIT)
        return;
    /* The message is consumed now (copied or delivered): its slot is free. */
    pr->ret_pending++;
    if (((uintptr_t)data & 7) == 0) {
        mdr_proto_handle(pr, data, len);
    } else {
        /* drivers hand aligned buffers; copy if one does not */
        uint64_t *copy = malloc(len + 8);
        if (!copy) {
            mdr_error("out of memory handling a message");
            return;
        }
        memcpy(copy, data, len);
        mdr_proto_handle(pr, (const mdr_hdr_t *)copy, len);
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

void *mdr_ep_accepted_upcall(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    mdr_rail_slot_t *rs = rail_cookie;
    mdr_ctx_t *ctx = rs->ctx;
    mdr_peer_t *peer = mdr_hash_get(&ctx->peer_by_uuid, uuid);
    mdr_peer_rail_t *pr;

    if (!peer) {
        if (mdr_peer_lookup_or_create(ctx, uuid, &peer) != MADRAIL_OK)
            return NULL;
        peer->anonymous = 1;
        mdr_info("rail %s: connection from unknown peer %016llx (now peer %u)",
                 rs->attr.name, (unsigned long long)uuid, peer->index);
    }
    if (peer->broken) {
        mdr_warn("rail %s peer %u: connection refused: the peer was given up", rs->attr.name,
                 peer->index);
        return NULL;
    }
    pr = &peer->rails[rs->index];
    if (pr->ep && pr->ep != ep) {
        mdr_dead_ep_t *d;
        if (!pr->down) {
            mdr_warn("rail %s peer %u: second connection refused", rs->attr.name, peer->index);
            return NULL;
        }
        /* the peer reconnected after this rail failed: start afresh on the
         * new connection; the old ep is destroyed at finalize */
        d = malloc(sizeof(*d));
        if (!d)
            return NULL;
        d->rail = rs->index;
        d->ep = pr->ep;
        mdr_list_push_tail(&peer->dead_eps, &d->link);
        pr->down = 0;
        pr->credits = ctx->cfg.credits;
        pr->ret_pending = 0;
        pr->credit_queued = 0;
        mdr_match_rail_reset(peer, rs->index);
        pr->untracked_sent = 0;
        mdr_health_rail_reset(pr);
        rs->up_events++;
        mdr_info("rail %s peer %u: reconnected", rs->attr.name, peer->index);
    }
    pr->ep = ep;
    return pr;
}

void mdr_ep_failed_upcall(void *ep_cookie, madrail_status_t status, const char *reason)
{
    mdr_peer_rail_t *pr = ep_cookie;
    mdr_ctx_t *ctx = pr->peer->ctx;

    if (pr->down || mdr_peer_rail_failed_unused(pr, reason))
        return;
    if (ctx->finalizing &&
        (status == MADRAIL_ERR_RAIL_DOWN || status == MADRAIL_ERR_RAIL_CONNECT))
        mdr_debug("rail %s peer %u closed: %s", ctx->rails[pr->rail].attr.name,
                  pr->peer->index, reason ? reason : "");
    else
        mdr_warn("rail %s peer %u failed: %s (%s)", ctx->rails[pr->rail].attr.name,
                 pr->peer->index, reason ? reason : "", madrail_status_str(status));
    pr->down = 1;
    ctx->rails[pr->rail].stats.failovers++;
    mdr_send_rail_lost(pr, status == MADRAIL_ERR_RAIL_CONNECT);
    if (status == MADRAIL_ERR_RAIL_CONNECT && pr->untracked_sent &&
        mdr_peer_reachable(pr->peer)) {
        /* an active message or a protocol reply queued on it is lost for
         * sure and no request can send it again */
        mdr_error("rail %s peer %u: a message no request can send again was lost with the "
                  "connection; failing every request to the peer",
                  ctx->rails[pr->rail].attr.name, pr->peer->index);
        mdr_peer_give_up(pr->peer);
    } else if (!mdr_peer_reachable(pr->peer)) {
        mdr_peer_fail(pr->peer, MADRAIL_ERR_PEER_UNREACHABLE);
    } else {
        mdr_peer_activate(pr->peer);
    }
}
