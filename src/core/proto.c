/*
 * Message protocols.
 *
 * eager/medium (len < MADRAIL_RNDV_THRESH): the message goes in slot-sized
 *   EAGER fragments that share one sequence number; each fragment takes the
 *   best rail that has a credit, so a medium message spreads over rails.
 * rendezvous (len >= threshold): RTS -> (receiver matches, registers its
 *   buffer on every rail) CTS with one key per rail -> the sender plans
 *   stripes in proportion to rail weights and puts each on its rail -> a
 *   FIN on every rail used once that rail's put completed (the driver
 *   orders a later control message after the put's data).  The receive
 *   completes when FINs account for every byte.
 * receiver-first: a receive posted with a known source, for a peer from
 *   which nothing else could match first, offers its buffer (RFS) before
 *   any RTS.  The sender keeps the offer only if it has sent nothing since
 *   the receiver's view (expected sequence), and spends it on its next
 *   send that matches: an RFS_DATA envelope (sequenced) and puts, no RTS
 *   round trip.  Otherwise it declines (RFS_NACK).  A cancel revokes.
 *
 * Every reply a peer sends (CTS, FIN, ACK, RFS_NACK, RFS_REVOKE, and the
 * RFS_DATA / RFS_CONSUMED answers checked in match.c) names one of our
 * requests or offers; it is honoured only from the peer that request is
 * bound to, in the state that waits for it, with sizes that fit.  Anything
 * else closes the rail it came on (mdr_proto_fail) before the request is
 * touched: a peer that is broken or hostile must not be able to complete,
 * fail or redirect a transfer that belongs to someone else.  The rules are
 * listed in one place, the "what a peer may send" section below.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define MDR_KEYS_MAX 4096 /* bytes of key descriptors in one CTS/RFS */

static size_t mdr_pad8(size_t n) { return (n + 7) & ~(size_t)7; }

void mdr_rfs_release(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    int r;
    for (r = 0; r < ctx->nrails; r++) /* reg[] is indexed by the context's rails */
        if (req->reg[r]) {
            mdr_rcache_put(ctx->rails[r].rcache, req->reg[r]);
            req->reg[r] = NULL;
        }
}

void mdr_recv_finish(mdr_req_t *req, madrail_status_t st)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->info.source);
    mdr_rfs_release(req);
    if (peer && peer->rfs_out == req)
        peer->rfs_out = NULL;
    if (req->peer != MADRAIL_ANY_PEER) {
        peer = mdr_peer_get(req->ctx, req->peer);
        if (peer && peer->rfs_out == req)
            peer->rfs_out = NULL;
    }
    mdr_req_complete(req, st);
}

/* ---------------- send side ---------------- */

static void mdr_sendq_add(mdr_peer_t *peer, mdr_req_t *req)
{
    if (!req->queued) {
        req->queued = 1;
        mdr_list_push_tail(&peer->sendq, &req->link);
        mdr_peer_activate(peer);
    }
}

static void mdr_sendq_del(mdr_req_t *req)
{
    if (req->queued) {
        req->queued = 0;
        mdr_list_del(&req->link);
    }
}

/* Send eager fragments until done or out of credits. */
static int mdr_send_frags(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_ctx_t *ctx = peer->ctx;
    int n = 0;

    do {
        mdr_eager_hdr_t e;
        size_t plen = req->len - req->frag_off;
        int used;
        if (plen > ctx->eager_max)
            plen = ctx->eager_max;
        memset(&e, 0, sizeof(e));
        e.h.type = MDR_MSG_EAGER;
        e.h.flags = (uint8_t)(((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed ? MDR_HF_SYNC : 0) |
                              ((req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0) |
                              (req->rfs_consumed ? MDR_HF_RFS_CONSUMED : 0));
        e.seq = req->seq;
        e.tag = req->tag;
        e.total = req->len;
        e.offset = req->frag_off;
        e.id = req->rfs_consumed ? req->peer_req_id : req->id;
        used = mdr_ctrl_try_send(peer, -1, &e.h, sizeof(e), (uint8_t *)req->buf + req->frag_off,
                                 plen);
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
        req->wait_ack = MDR_ACK_NONE;
        mdr_send_done(req); /* complete once the fragments left */
    }
    return n;
}

static int mdr_rail_can_put(const mdr_ctx_t *ctx, const mdr_peer_t *peer, int r)
{
    const mdr_peer_rail_t *pr = &peer->rails[r];
    return (ctx->rails[r].attr.caps & MDR_RAIL_CAP_PUT) && !pr->down && (pr->ep || pr->have_addr);
}

static void mdr_put_done(mdr_completion_t *comp, madrail_status_t status);

/* Plan puts from a key block (CTS or RFS, checked by mdr_keys_check when
 * it arrived) and record them in req. */
static madrail_status_t mdr_plan_puts(mdr_peer_t *peer, mdr_req_t *req, const uint8_t *keys,
                                      size_t keys_len, uint32_t nkeys, uint64_t xfer)
{
    mdr_ctx_t *ctx = peer->ctx;
    int rails[MDR_MAX_RAILS], n = 0, i, nch;
    double w[MDR_MAX_RAILS];
    const uint8_t *kp[MDR_MAX_RAILS];
    uint16_t kl[MDR_MAX_RAILS];
    uint64_t raddr[MDR_MAX_RAILS];
    mdr_chunk_t ch[MDR_MAX_RAILS];
    size_t off = 0;
    uint32_t k;

    free(req->cts);
    req->cts = malloc(keys_len ? keys_len : 1);
    if (!req->cts)
        return MADRAIL_ERR_NOMEM;
    memcpy(req->cts, keys, keys_len);
    req->cts_len = keys_len;
    req->cts_nkeys = nkeys;
    for (k = 0; k < nkeys; k++) {
        mdr_key_desc_t d;
        if (keys_len - off < sizeof(d))
            return MADRAIL_ERR_RAIL_PROTO; /* not reached: checked on arrival */
        memcpy(&d, req->cts + off, sizeof(d));
        off += sizeof(d);
        if (d.key_len > keys_len - off || d.rail >= ctx->nrails)
            return MADRAIL_ERR_RAIL_PROTO;
        if (n < MDR_MAX_RAILS && mdr_rail_can_put(ctx, peer, d.rail)) {
            rails[n] = d.rail;
            kp[n] = req->cts + off;
            kl[n] = d.key_len;
            raddr[n] = d.raddr;
            n++;
        }
        off = mdr_pad8(off + d.key_len);
        if (off > keys_len)
            off = keys_len;
    }
    if (xfer && n == 0) {
        mdr_error("peer %u: no rail to put %llu bytes on", peer->index,
                  (unsigned long long)xfer);
        return MADRAIL_ERR_PEER_UNREACHABLE;
    }
    if (n > 0 && xfer > 0)
        mdr_health_plan_weights(peer, rails, n, xfer, w); /* static or measured */
    nch = mdr_stripe_plan(rails, w, n, (uintptr_t)req->buf, xfer, &ctx->stripe, ch);
    free(req->puts);
    req->puts = nch ? calloc((size_t)nch, sizeof(*req->puts)) : NULL;
    if (nch && !req->puts)
        return MADRAIL_ERR_NOMEM;
    req->nputs = nch;
    req->puts_left = nch;
    for (i = 0; i < nch; i++) {
        int j;
        mdr_put_op_t *op = &req->puts[i];
        for (j = 0; j < n && rails[j] != ch[i].rail; j++)
            ;
        op->comp.cb = mdr_put_done;
        op->req = req;
        op->rail = ch[i].rail;
        op->state = MDR_PUT_IDLE;
        op->offset = ch[i].offset;
        op->len = ch[i].len;
        op->raddr = raddr[j] + ch[i].offset;
        op->rkey = kp[j];
        op->rkey_len = kl[j];
    }
    return MADRAIL_OK;
}

/* The FIN follows its put's data on the same rail; the send is not over
 * before the FIN left. */
static void mdr_send_fin(mdr_req_t *req, int rail, uint64_t bytes)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);
    mdr_fin_hdr_t f;
    madrail_status_t st;
    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = req->peer_req_id;
    f.bytes = bytes;
    st = mdr_ctrl_send_req(peer, rail, req, &f.h, sizeof(f), NULL, 0);
    if (st != MADRAIL_OK) {
        mdr_error("peer %u rail %s: cannot send the FIN of %llu put bytes: %s", req->peer,
                  req->ctx->rails[rail].attr.name, (unsigned long long)bytes,
                  madrail_status_str(st));
        if (req->info.status == MADRAIL_OK)
            req->info.status = st;
    }
}

/* A chunk could not be put on op->rail (no connection, no registration,
 * the ep refused it) before anything of it was sent: move it to another
 * rail of the key block that can take puts.  Returns 1 when it did. */
static int mdr_replan_put(mdr_req_t *req, mdr_put_op_t *op)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    size_t off = 0;
    uint32_t k;

    op->tried |= 1u << op->rail;
    for (k = 0; k < req->cts_nkeys && req->cts_len - off >= sizeof(mdr_key_desc_t); k++) {
        mdr_key_desc_t d;
        memcpy(&d, req->cts + off, sizeof(d));
        off += sizeof(d);
        if (d.key_len > req->cts_len - off)
            break;
        if (d.rail < ctx->nrails && !(op->tried & (1u << d.rail)) &&
            mdr_rail_can_put(ctx, peer, d.rail)) {
            mdr_warn("peer %u: %llu bytes planned on rail %s go on rail %s", req->peer,
                     (unsigned long long)op->len, ctx->rails[op->rail].attr.name,
                     ctx->rails[d.rail].attr.name);
            op->rail = d.rail;
            op->raddr = d.raddr + op->offset;
            op->rkey = req->cts + off;
            op->rkey_len = d.key_len;
            return 1;
        }
        off = mdr_pad8(off + d.key_len);
        if (off > req->cts_len)
            break;
    }
    return 0;
}

static void mdr_put_done(mdr_completion_t *comp, madrail_status_t status)
{
    mdr_put_op_t *op = (mdr_put_op_t *)comp;
    mdr_req_t *req = op->req;
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);

    if (peer)
        mdr_health_put_done(&peer->rails[op->rail], op, status == MADRAIL_OK);
    if (status == MADRAIL_ERR_RAIL_CONNECT && req->info.status == MADRAIL_OK &&
        mdr_replan_put(req, op)) {
        /* its rail never connected, nothing of it was sent: progress puts
         * it on the new rail */
        op->state = MDR_PUT_IDLE;
        mdr_sendq_add(mdr_peer_get(req->ctx, req->peer), req);
        return;
    }
    if (status == MADRAIL_ERR_RAIL_CONNECT)
        status = MADRAIL_ERR_RAIL_DOWN; /* the rail-level news stays inside */
    op->state = MDR_PUT_DONE;
    if (status != MADRAIL_OK) {
        mdr_warn("peer %u rail %d: put of %llu bytes failed: %s", req->peer, op->rail,
                 (unsigned long long)op->len, madrail_status_str(status));
        if (req->info.status == MADRAIL_OK)
            req->info.status = status;
    } else {
        mdr_send_fin(req, op->rail, op->len);
    }
    if (--req->puts_left == 0) {
        if (req->info.status == MADRAIL_OK)
            mdr_send_done(req); /* complete once the FINs left */
        else
            mdr_req_complete(req, req->info.status);
    }
}

/* Issue the puts not yet issued; returns how many went out.  Puts that are
 * over at once (done, refused, failed) are reported after the loop: the
 * last report may complete the request, which may then be released (a
 * callback request) with its puts array. */
static int mdr_issue_puts(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    mdr_put_op_t *over[MDR_MAX_RAILS];
    madrail_status_t over_st[MDR_MAX_RAILS];
    int i, n = 0, waiting = 0, nover = 0;

    for (i = 0; i < req->nputs; i++) {
        mdr_put_op_t *op = &req->puts[i];
        mdr_peer_rail_t *pr = &peer->rails[op->rail];
        mdr_rail_slot_t *rs = &ctx->rails[op->rail];
        mdr_memh_t *lmemh = NULL;
        madrail_status_t st;

        if (op->state != MDR_PUT_IDLE)
            continue;
        if (nover == MDR_MAX_RAILS) { /* not reached: one chunk per rail at most */
            waiting++;
            continue;
        }
        if (!pr->ep && mdr_peer_connect_rail(peer, op->rail) != MADRAIL_OK) {
            if (mdr_replan_put(req, op)) {
                i--; /* this chunk again, on its new rail */
                continue;
            }
            op->state = MDR_PUT_INFLIGHT;
            over[nover] = op;
            over_st[nover++] = mdr_peer_reachable(peer) ? MADRAIL_ERR_RAIL_DOWN
                                                        : MADRAIL_ERR_PEER_UNREACHABLE;
            continue;
        }
        if (!(rs->attr.caps & MDR_RAIL_CAP_REG_CHEAP)) {
            if (!req->reg[op->rail] &&
                mdr_rcache_get(rs->rcache, req->buf, req->len, MDR_MEM_LOCAL,
                               &req->reg[op->rail]) != MADRAIL_OK) {
                mdr_warn("rail %s: cannot register %zu bytes for a put", rs->attr.name,
                         req->len);
                if (mdr_replan_put(req, op)) {
                    i--;
                    continue;
                }
                op->state = MDR_PUT_INFLIGHT;
                over[nover] = op;
                over_st[nover++] = MADRAIL_ERR_RAIL_DOWN;
                continue;
            }
            lmemh = mdr_rcache_memh(req->reg[op->rail]);
        }
        st = rs->ops->put(pr->ep, (uint8_t *)req->buf + op->offset, op->len, lmemh, op->raddr,
                          op->rkey, op->rkey_len, &op->comp);
        if (st == MADRAIL_ERR_NORESOURCE) {
            waiting++;
            continue;
        }
        if (st == MADRAIL_ERR_RAIL_DOWN && mdr_replan_put(req, op)) {
            i--; /* the ep refused it, nothing was sent: another rail */
            continue;
        }
        mdr_health_put_issued(pr, op);
        rs->stats.tx_puts++;
        rs->stats.tx_put_bytes += op->len;
        rs->stats.tx_bytes += op->len;
        n++;
        op->state = MDR_PUT_INFLIGHT;
        if (st != MADRAIL_INPROGRESS) {
            over[nover] = op;
            over_st[nover++] = st;
        }
    }
    if (waiting)
        mdr_sendq_add(peer, req);
    else
        mdr_sendq_del(req);
    for (i = 0; i < nover; i++)
        mdr_put_done(&over[i]->comp, over_st[i]);
    return n;
}

int mdr_send_progress(mdr_req_t *req)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);
    if (req->rndv == MDR_RNDV_PUTTING)
        return mdr_issue_puts(req);
    if (req->rndv == MDR_RNDV_NONE && req->frag_off <= req->len)
        return mdr_send_frags(peer, req);
    mdr_sendq_del(req);
    return 0;
}

static int mdr_rfs_fits(const mdr_rfs_t *o, const mdr_req_t *req)
{
    return !!o->space == !!(req->flags & MDR_FLAG_INTERNAL) &&
           ((o->tag ^ req->tag) & ~o->ignore) == 0;
}

static madrail_status_t mdr_send_rts(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_rts_hdr_t r;
    memset(&r, 0, sizeof(r));
    r.h.type = MDR_MSG_RTS;
    r.h.flags = (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0;
    r.seq = req->seq;
    r.tag = req->tag;
    r.total = req->len;
    r.sreq_id = req->id;
    req->rndv = MDR_RNDV_RTS_SENT;
    peer->ctx->n_rts++;
    if (mdr_peer_reachable(peer)) {
        int rail = mdr_ctrl_try_send(peer, -1, &r.h, sizeof(r), NULL, 0);
        if (rail >= 0) {
            mdr_send_track(req, rail, 1);
            mdr_health_rts_sent(req, rail); /* RTS -> CTS round trip */
            return MADRAIL_OK;
        }
    }
    return mdr_ctrl_send_req(peer, -1, req, &r.h, sizeof(r), NULL, 0);
}

madrail_status_t mdr_send_restart(mdr_req_t *req)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);

    if (req->rndv == MDR_RNDV_NONE) { /* eager fragments: all again, same sequence number */
        req->frag_off = 0;
        req->wait_ack = ((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed) ? MDR_ACK_WAIT
                                                                                 : MDR_ACK_NONE;
        req->proto_done = 0;
        mdr_sendq_add(peer, req);
        return MADRAIL_OK;
    }
    if (req->rndv == MDR_RNDV_RTS_SENT) /* the RTS: no CTS can have come */
        return mdr_send_rts(peer, req);
    return MADRAIL_ERR_RAIL_DOWN; /* RFS_DATA went with puts: not repeatable here */
}

madrail_status_t mdr_send_start(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_list_t *it;
    mdr_rfs_t *offer = NULL;

    mdr_list_for_each(it, &peer->rfs_stored) {
        mdr_rfs_t *o = mdr_container_of(it, mdr_rfs_t, link);
        if (mdr_rfs_fits(o, req)) {
            offer = o;
            break;
        }
    }
    req->seq = peer->next_send_seq++;
    if (offer) {
        mdr_list_del(&offer->link);
        peer->nrfs_stored--;
        req->rfs_consumed = 1;
        req->peer_req_id = offer->rreq_id;
    }
    if (req->len < ctx->cfg.rndv_thresh || (offer && req->len <= ctx->eager_max)) {
        free(offer);
        if ((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed)
            req->wait_ack = MDR_ACK_WAIT;
        mdr_send_frags(peer, req);
        return MADRAIL_OK;
    }
    if (offer) {
        mdr_rfs_data_hdr_t d;
        uint64_t xfer = req->len < offer->buf_len ? req->len : offer->buf_len;
        madrail_status_t st;

        memset(&d, 0, sizeof(d));
        d.h.type = MDR_MSG_RFS_DATA;
        d.h.flags = (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0;
        d.seq = req->seq;
        d.tag = req->tag;
        d.total = req->len;
        d.rreq_id = offer->rreq_id;
        d.xfer_len = xfer;
        st = mdr_plan_puts(peer, req, offer->keys, offer->keys_len, offer->nkeys, xfer);
        free(offer);
        if (st != MADRAIL_OK)
            return st;
        st = mdr_ctrl_send_req(peer, -1, req, &d.h, sizeof(d), NULL, 0);
        if (st != MADRAIL_OK)
            return st;
        ctx->n_rfs_used++;
        req->rndv = MDR_RNDV_PUTTING;
        if (req->nputs == 0) {
            mdr_send_done(req);
            return MADRAIL_OK;
        }
        mdr_issue_puts(req);
        return MADRAIL_OK;
    }
    return mdr_send_rts(peer, req);
}

/* ---------------- receive side ---------------- */

/* Register buf on every rail that can take puts to peer and pack the keys. */
static madrail_status_t mdr_build_keys(mdr_peer_t *peer, mdr_req_t *req, size_t len,
                                       uint8_t *out, size_t *out_len_p, uint32_t *nkeys_p)
{
    mdr_ctx_t *ctx = peer->ctx;
    size_t off = 0;
    uint32_t nkeys = 0;
    int r;

    for (r = 0; r < ctx->nrails; r++) {
        mdr_rail_slot_t *rs = &ctx->rails[r];
        mdr_key_desc_t d;
        size_t klen;

        if (!mdr_rail_can_put(ctx, peer, r))
            continue;
        if (off + sizeof(d) + rs->attr.max_rkey + 8 > MDR_KEYS_MAX)
            break;
        if (!req->reg[r] && mdr_rcache_get(rs->rcache, req->buf, len, MDR_MEM_REMOTE_WRITE,
                                           &req->reg[r]) != MADRAIL_OK) {
            mdr_warn("rail %s: cannot register %zu bytes for a receive", rs->attr.name, len);
            continue;
        }
        klen = MDR_KEYS_MAX - off - sizeof(d);
        if (rs->ops->rkey_pack(rs->rail, mdr_rcache_memh(req->reg[r]), out + off + sizeof(d),
                               &klen) != MADRAIL_OK) {
            mdr_rcache_put(rs->rcache, req->reg[r]);
            req->reg[r] = NULL;
            continue;
        }
        memset(&d, 0, sizeof(d));
        d.rail = (uint8_t)r;
        d.key_len = (uint16_t)klen;
        d.raddr = (uint64_t)(uintptr_t)req->buf;
        memcpy(out + off, &d, sizeof(d));
        off = mdr_pad8(off + sizeof(d) + klen);
        nkeys++;
    }
    *out_len_p = off;
    *nkeys_p = nkeys;
    return nkeys || len == 0 ? MADRAIL_OK : MADRAIL_ERR_PEER_UNREACHABLE;
}

void mdr_rndv_recv_start(mdr_req_t *req, mdr_peer_t *peer, uint64_t sreq_id, uint64_t total)
{
    mdr_ctx_t *ctx = peer->ctx;
    struct {
        mdr_cts_hdr_t c;
        uint8_t keys[MDR_KEYS_MAX];
    } msg;
    size_t klen = 0;
    uint32_t nkeys = 0;
    uint64_t xfer = total < req->len ? total : req->len;
    madrail_status_t st;

    req->xfer_len = xfer;
    req->fin_bytes = 0;
    req->peer_req_id = sreq_id;
    memset(&msg.c, 0, sizeof(msg.c));
    if (xfer) {
        st = mdr_build_keys(peer, req, xfer, msg.keys, &klen, &nkeys);
        if (st != MADRAIL_OK) {
            mdr_recv_finish(req, st);
            return;
        }
    }
    msg.c.h.type = MDR_MSG_CTS;
    msg.c.sreq_id = sreq_id;
    msg.c.rreq_id = req->id;
    msg.c.xfer_len = xfer;
    msg.c.nkeys = nkeys;
    req->rndv = MDR_RNDV_CTS_SENT; /* FINs from the sender may follow */
    st = mdr_ctrl_send(peer, -1, &msg.c.h, sizeof(msg.c), klen ? msg.keys : NULL, klen);
    if (st != MADRAIL_OK) {
        mdr_recv_finish(req, st);
        return;
    }
    if (xfer == 0)
        mdr_recv_finish(req, total > req->len ? MADRAIL_ERR_TRUNCATE : MADRAIL_OK);
    (void)ctx;
}

void mdr_rfs_maybe_offer(mdr_ctx_t *ctx, mdr_req_t *req)
{
    mdr_peer_t *peer;
    mdr_list_t *it;
    struct {
        mdr_rfs_hdr_t r;
        uint8_t keys[MDR_KEYS_MAX];
    } msg;
    size_t klen = 0;
    uint32_t nkeys = 0;

    if (!ctx->cfg.recv_first || req->peer == MADRAIL_ANY_PEER || req->len < ctx->cfg.rndv_thresh)
        return;
    peer = mdr_peer_get(ctx, req->peer);
    if (!peer || peer->rfs_out || peer->inflight.count != 0 ||
        peer->nrfs_wait == MDR_RFS_WAIT_MAX)
        return;
    /* req must be the only posted receive that could take this peer's messages */
    mdr_list_for_each(it, &ctx->posted) {
        mdr_req_t *o = mdr_container_of(it, mdr_req_t, link);
        if (o != req && (o->peer == MADRAIL_ANY_PEER || o->peer == req->peer))
            return;
    }
    mdr_list_for_each(it, &ctx->unexpected) {
        mdr_inmsg_t *m = mdr_container_of(it, mdr_inmsg_t, link);
        if (m->peer == peer)
            return;
    }
    if (mdr_build_keys(peer, req, req->len, msg.keys, &klen, &nkeys) != MADRAIL_OK ||
        nkeys == 0) {
        mdr_rfs_release(req);
        return;
    }
    memset(&msg.r, 0, sizeof(msg.r));
    msg.r.h.type = MDR_MSG_RFS;
    msg.r.rreq_id = req->id;
    msg.r.expected_seq = peer->expected_seq;
    msg.r.tag = req->tag;
    msg.r.ignore = req->ignore;
    msg.r.buf_len = req->len;
    msg.r.nkeys = nkeys;
    msg.r.space = (req->flags & MDR_FLAG_INTERNAL) ? 1 : 0;
    /* Only straight to a rail (no queueing): a cancel's RFS_REVOKE must
     * follow the offer on that same rail, so that it never arrives first
     * (the sender counts offers against revokes).  With no credit now,
     * no offer: it is only a shortcut. */
    req->rfs_rail = mdr_ctrl_try_send(peer, -1, &msg.r.h, sizeof(msg.r), msg.keys, klen);
    if (req->rfs_rail < 0) {
        mdr_rfs_release(req);
        return;
    }
    req->rfs_state = MDR_RFS_OUT;
    ctx->n_rfs_offered++;
    peer->rfs_out = req;
    peer->rfs_wait[peer->nrfs_wait++] = req->id;
}

int mdr_rfs_wait_has(const mdr_peer_t *peer, uint64_t rreq_id)
{
    unsigned i;
    for (i = 0; i < peer->nrfs_wait; i++)
        if (peer->rfs_wait[i] == rreq_id)
            return 1;
    return 0;
}

void mdr_rfs_wait_del(mdr_peer_t *peer, uint64_t rreq_id)
{
    unsigned i;
    for (i = 0; i < peer->nrfs_wait; i++)
        if (peer->rfs_wait[i] == rreq_id) {
            peer->rfs_wait[i] = peer->rfs_wait[--peer->nrfs_wait];
            return;
        }
}

/* ---------------- what a peer may send, and when ---------------- */

/*
 * Per message type: its length (exact, or the fixed part when a body of
 * variable length follows) and the header flags it may carry.  Checked
 * for every message before anything is taken from it (credits included).
 * Further, per type (handlers below and match.c):
 *
 *   EAGER     AM only alone; RFS_CONSUMED not with SYNC; a consumed
 *             eager must answer one of our offers to that peer and go to
 *             the receive that made it (match.c)
 *   RTS       nothing to check against our state: it starts a transfer
 *   RFS_DATA  answers an offer of ours to that peer, still unanswered;
 *             xfer_len == min(total, offered buffer) (match.c)
 *   CTS       a send of ours to that peer, RTS sent and no CTS yet;
 *             xfer_len <= its length; keys as mdr_keys_check says
 *   FIN       a receive of ours from that peer that waits for puts (CTS
 *             sent, or an offer of ours out or spent by RFS_DATA), on a
 *             rail we gave a key for, 0 < bytes <= bytes not yet reported
 *   ACK       a synchronous eager send of ours to that peer, waiting for it
 *   CREDIT    returns at least ceil(credits/2) (ctrl.c, with the
 *             over-return and overrun checks that apply to every message)
 *   RFS       keys as mdr_keys_check says; at most MDR_RFS_WAIT_MAX kept
 *             from one peer, no id twice
 *   RFS_NACK  answers an offer of ours to that peer, still unanswered
 *   RFS_REVOKE  from a peer with more offers to us than revokes (an offer
 *             already spent or declined may still be revoked: the cancel
 *             crossed the answer)
 */
typedef struct mdr_msg_rule {
    const char *name;
    size_t len;    /* exact length, or the minimum when body */
    int body;      /* a variable-length body follows */
    uint8_t flags; /* MDR_HF_* the type may carry */
} mdr_msg_rule_t;

static const mdr_msg_rule_t mdr_msg_rules[MDR_MSG_MAX] = {
    [MDR_MSG_EAGER] = {"EAGER", sizeof(mdr_eager_hdr_t), 1,
                       MDR_HF_SYNC | MDR_HF_INTERNAL | MDR_HF_RFS_CONSUMED | MDR_HF_AM},
    [MDR_MSG_RTS] = {"RTS", sizeof(mdr_rts_hdr_t), 0, MDR_HF_INTERNAL},
    [MDR_MSG_RFS_DATA] = {"RFS_DATA", sizeof(mdr_rfs_data_hdr_t), 0, MDR_HF_INTERNAL},
    [MDR_MSG_CTS] = {"CTS", sizeof(mdr_cts_hdr_t), 1, 0},
    [MDR_MSG_FIN] = {"FIN", sizeof(mdr_fin_hdr_t), 0, 0},
    [MDR_MSG_ACK] = {"ACK", sizeof(mdr_id_hdr_t), 0, 0},
    [MDR_MSG_CREDIT] = {"CREDIT", sizeof(mdr_hdr_t), 0, 0},
    [MDR_MSG_RFS] = {"RFS", sizeof(mdr_rfs_hdr_t), 1, 0},
    [MDR_MSG_RFS_NACK] = {"RFS_NACK", sizeof(mdr_id_hdr_t), 0, 0},
    [MDR_MSG_RFS_REVOKE] = {"RFS_REVOKE", sizeof(mdr_id_hdr_t), 0, 0},
};

int mdr_proto_check_hdr(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_msg_rule_t *rule;

    if (hdr->type >= MDR_MSG_MAX || !mdr_msg_rules[hdr->type].name) {
        mdr_proto_fail(pr, "unknown type %u", hdr->type);
        return -1;
    }
    rule = &mdr_msg_rules[hdr->type];
    if (rule->body ? len < rule->len : len != rule->len) {
        mdr_proto_fail(pr, "%s of %zu bytes (%s%zu)", rule->name, len, rule->body ? ">= " : "",
                       rule->len);
        return -1;
    }
    if (hdr->flags & ~rule->flags) {
        mdr_proto_fail(pr, "%s with flags 0x%x (allowed: 0x%x)", rule->name, hdr->flags,
                       rule->flags);
        return -1;
    }
    if (((hdr->flags & MDR_HF_AM) && hdr->flags != MDR_HF_AM) ||
        ((hdr->flags & MDR_HF_RFS_CONSUMED) && (hdr->flags & MDR_HF_SYNC))) {
        mdr_proto_fail(pr, "%s with flags 0x%x that exclude each other", rule->name,
                       hdr->flags);
        return -1;
    }
    return 0;
}

madrail_peer_t mdr_req_bound_peer(const mdr_req_t *req)
{
    if (req->type == MDR_REQ_RECV && req->matched)
        return req->info.source;
    return req->peer;
}

/* Our request named by id in a message of `what` from pr's peer: live (the
 * id's generation and index, see mdr_req_lookup), of that type, not
 * complete, bound to that peer.  NULL (and the rail closed) otherwise. */
static mdr_req_t *mdr_proto_req(mdr_peer_rail_t *pr, const char *what, uint64_t id, int type)
{
    mdr_req_t *req = mdr_req_lookup(pr->peer->ctx, id);

    if (!req || req->type != type || req->complete) {
        mdr_proto_fail(pr, "%s for unknown %s %llx", what, type == MDR_REQ_SEND ? "send" : "receive",
                       (unsigned long long)id);
        return NULL;
    }
    if (mdr_req_bound_peer(req) != pr->peer->index) {
        madrail_peer_t b = mdr_req_bound_peer(req);
        if (b == MADRAIL_ANY_PEER)
            mdr_proto_fail(pr, "%s for receive %llx, which no peer has matched yet", what,
                           (unsigned long long)id);
        else
            mdr_proto_fail(pr, "%s for %s %llx, which is bound to peer %u", what,
                           type == MDR_REQ_SEND ? "send" : "receive", (unsigned long long)id, b);
        return NULL;
    }
    return req;
}

/* A key block (CTS or RFS) as the peer sent it: keys exactly when there
 * are bytes to put, each naming one of our rails at most once, laid out as
 * mdr_build_keys writes them (descriptor, key, padding to 8) with nothing
 * after.  0 if good, else the rail was closed. */
static int mdr_keys_check(mdr_peer_rail_t *pr, const char *what, const uint8_t *keys,
                          size_t keys_len, uint32_t nkeys, uint64_t xfer)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    unsigned seen = 0;
    size_t off = 0;
    uint32_t k;

    if ((xfer == 0) != (nkeys == 0) || nkeys > (uint32_t)ctx->nrails) {
        mdr_proto_fail(pr, "%s with %u keys for %llu bytes (%d rails)", what, nkeys,
                       (unsigned long long)xfer, ctx->nrails);
        return -1;
    }
    for (k = 0; k < nkeys; k++) {
        mdr_key_desc_t d;
        if (keys_len - off < sizeof(d)) {
            mdr_proto_fail(pr, "%s: key %u of %u truncated", what, k, nkeys);
            return -1;
        }
        memcpy(&d, keys + off, sizeof(d));
        off += sizeof(d);
        if (d.rail >= ctx->nrails || (seen & (1u << d.rail))) {
            mdr_proto_fail(pr, "%s: key %u names rail %u (%d rails, %s)", what, k, d.rail,
                           ctx->nrails, d.rail < ctx->nrails ? "named twice" : "no such rail");
            return -1;
        }
        seen |= 1u << d.rail;
        if (d.key_len > keys_len - off) {
            mdr_proto_fail(pr, "%s: key for rail %u of %u bytes, %zu left", what, d.rail,
                           d.key_len, keys_len - off);
            return -1;
        }
        off = mdr_pad8(off + d.key_len);
    }
    if (off != keys_len) {
        mdr_proto_fail(pr, "%s: %zu bytes of keys, %zu expected", what, keys_len, off);
        return -1;
    }
    return 0;
}

/* ---------------- handlers ---------------- */

static void mdr_handle_cts(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_cts_hdr_t *c = (const mdr_cts_hdr_t *)hdr;
    mdr_req_t *req;
    madrail_status_t st;

    req = mdr_proto_req(pr, "CTS", c->sreq_id, MDR_REQ_SEND);
    if (!req)
        return;
    if (req->rndv != MDR_RNDV_RTS_SENT) {
        mdr_proto_fail(pr, "CTS for send %llx that sent no RTS or had its CTS",
                       (unsigned long long)c->sreq_id);
        return;
    }
    if (c->xfer_len > req->len) {
        mdr_proto_fail(pr, "CTS asks for %llu bytes of a %zu-byte message",
                       (unsigned long long)c->xfer_len, req->len);
        return;
    }
    if (mdr_keys_check(pr, "CTS", (const uint8_t *)(c + 1), len - sizeof(*c), c->nkeys,
                       c->xfer_len) != 0)
        return;
    mdr_health_cts_rcvd(req, pr);
    req->peer_req_id = c->rreq_id;
    req->rndv = MDR_RNDV_PUTTING;
    req->seq_unsent = 0; /* the CTS answers the RTS: it arrived */
    st = mdr_plan_puts(pr->peer, req, (const uint8_t *)(c + 1), len - sizeof(*c), c->nkeys,
                       c->xfer_len);
    if (st != MADRAIL_OK) {
        mdr_req_complete(req, st);
        return;
    }
    if (req->nputs == 0) {
        mdr_send_done(req);
        return;
    }
    mdr_issue_puts(req);
}

static void mdr_handle_fin(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_fin_hdr_t *f = (const mdr_fin_hdr_t *)hdr;
    mdr_req_t *req;
    uint64_t limit;

    (void)len;
    req = mdr_proto_req(pr, "FIN", f->rreq_id, MDR_REQ_RECV);
    if (!req)
        return;
    if (req->rndv == MDR_RNDV_CTS_SENT || req->rndv == MDR_RNDV_RFS_DATA) {
        limit = req->xfer_len;
    } else if (req->rfs_state == MDR_RFS_OUT && !req->matched) {
        limit = req->len; /* the puts into our offer may overtake its RFS_DATA */
    } else {
        mdr_proto_fail(pr, "FIN for receive %llx, which waits for no puts (%s)",
                       (unsigned long long)f->rreq_id,
                       req->matched ? "an eager message" : "not matched, no offer out");
        return;
    }
    if (!req->reg[pr->rail]) {
        mdr_proto_fail(pr, "FIN for receive %llx on a rail it gave no key for",
                       (unsigned long long)f->rreq_id);
        return;
    }
    if (f->bytes == 0 || f->bytes > limit - req->fin_bytes) {
        mdr_proto_fail(pr, "FIN of %llu bytes for receive %llx: %llu of %llu reported already",
                       (unsigned long long)f->bytes, (unsigned long long)f->rreq_id,
                       (unsigned long long)req->fin_bytes, (unsigned long long)limit);
        return;
    }
    ctx->rails[pr->rail].stats.rx_put_bytes += f->bytes;
    ctx->rails[pr->rail].stats.rx_bytes += f->bytes;
    req->fin_bytes += f->bytes;
    if (req->rndv != MDR_RNDV_NONE && req->fin_bytes == req->xfer_len)
        mdr_recv_finish(req, req->info.sent_length > req->len ? MADRAIL_ERR_TRUNCATE
                                                               : MADRAIL_OK);
}

static void mdr_handle_ack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_id_hdr_t *a = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;

    (void)len;
    req = mdr_proto_req(pr, "ACK", a->id, MDR_REQ_SEND);
    if (!req)
        return;
    if (req->wait_ack != MDR_ACK_WAIT || req->frag_off == 0) {
        mdr_proto_fail(pr, "ACK for send %llx, which waits for none",
                       (unsigned long long)a->id);
        return;
    }
    if (req->frag_off <= req->len) { /* fragments still going out */
        req->wait_ack = MDR_ACK_GOT;
        return;
    }
    req->wait_ack = MDR_ACK_NONE;
    mdr_req_complete(req, MADRAIL_OK);
}

static void mdr_send_nack(mdr_peer_t *peer, uint64_t rreq_id)
{
    mdr_id_hdr_t n;
    memset(&n, 0, sizeof(n));
    n.h.type = MDR_MSG_RFS_NACK;
    n.id = rreq_id;
    peer->ctx->n_rfs_nacked++;
    mdr_ctrl_send(peer, -1, &n.h, sizeof(n), NULL, 0);
}

static void mdr_handle_rfs(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    const mdr_rfs_hdr_t *r = (const mdr_rfs_hdr_t *)hdr;
    mdr_list_t *it;
    mdr_rfs_t *o;
    size_t klen = len - sizeof(*r);

    if (r->buf_len == 0 || r->space > 1) {
        mdr_proto_fail(pr, "RFS of %llu bytes in tag space %u", (unsigned long long)r->buf_len,
                       r->space);
        return;
    }
    if (mdr_keys_check(pr, "RFS", (const uint8_t *)(r + 1), klen, r->nkeys, r->buf_len) != 0)
        return;
    if (peer->nrfs_stored >= MDR_RFS_WAIT_MAX) {
        mdr_proto_fail(pr, "RFS beyond the %d offers a peer may have out", MDR_RFS_WAIT_MAX);
        return;
    }
    mdr_list_for_each(it, &peer->rfs_stored) {
        if (mdr_container_of(it, mdr_rfs_t, link)->rreq_id == r->rreq_id) {
            mdr_proto_fail(pr, "RFS %llx offered twice", (unsigned long long)r->rreq_id);
            return;
        }
    }
    peer->rfs_offers_in++;
    if (r->expected_seq != peer->next_send_seq) {
        /* we sent since the receiver's view: a sent message may match first */
        mdr_send_nack(peer, r->rreq_id);
        return;
    }
    o = malloc(sizeof(*o) + klen);
    if (!o) {
        mdr_send_nack(peer, r->rreq_id);
        return;
    }
    o->rreq_id = r->rreq_id;
    o->tag = r->tag;
    o->ignore = r->ignore;
    o->buf_len = r->buf_len;
    o->space = r->space;
    o->nkeys = r->nkeys;
    o->keys_len = klen;
    memcpy(o->keys, r + 1, klen);
    mdr_list_push_tail(&peer->rfs_stored, &o->link);
    peer->nrfs_stored++;
}

static void mdr_handle_nack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_id_hdr_t *n = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;

    (void)len;
    if (!mdr_rfs_wait_has(pr->peer, n->id)) {
        mdr_proto_fail(pr, "RFS_NACK for %llx: no offer of ours to this peer waits for an answer",
                       (unsigned long long)n->id);
        return;
    }
    mdr_rfs_wait_del(pr->peer, n->id);
    req = mdr_req_lookup(ctx, n->id);
    if (!req || req->type != MDR_REQ_RECV || req->peer != pr->peer->index)
        return; /* the receive completed and was collected: nothing to undo */
    if (pr->peer->rfs_out == req)
        pr->peer->rfs_out = NULL;
    if (req->rfs_state == MDR_RFS_STALE) {
        req->rfs_state = MDR_RFS_NONE; /* registrations now serve the CTS */
        return;
    }
    if (req->rfs_state != MDR_RFS_OUT)
        return;
    req->rfs_state = MDR_RFS_NONE;
    mdr_rfs_release(req);
    if (req->cancel_pending && !req->matched) {
        mdr_list_del(&req->link);
        req->info.cancelled = 1;
        mdr_req_complete(req, MADRAIL_ERR_CANCELED);
    }
}

static void mdr_handle_revoke(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    const mdr_id_hdr_t *v = (const mdr_id_hdr_t *)hdr;
    mdr_list_t *it;

    (void)len;
    /* Each revoke follows its offer on one rail (mdr_rfs_maybe_offer), and
     * a receive revokes once: never more revokes than offers. */
    if (peer->rfs_revokes_in >= peer->rfs_offers_in) {
        mdr_proto_fail(pr, "RFS_REVOKE %llx: %llu offers from this peer, all revoked",
                       (unsigned long long)v->id, (unsigned long long)peer->rfs_offers_in);
        return;
    }
    peer->rfs_revokes_in++;
    mdr_list_for_each(it, &peer->rfs_stored) {
        mdr_rfs_t *o = mdr_container_of(it, mdr_rfs_t, link);
        if (o->rreq_id == v->id) {
            mdr_list_del(it);
            peer->nrfs_stored--;
            free(o);
            mdr_send_nack(peer, v->id);
            return;
        }
    }
    /* already spent or declined: the answer is on its way */
}

void mdr_proto_handle(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    switch (hdr->type) {
    case MDR_MSG_EAGER:
    case MDR_MSG_RTS:
    case MDR_MSG_RFS_DATA:
        mdr_match_incoming(pr, hdr, len);
        break;
    case MDR_MSG_CTS:
        mdr_handle_cts(pr, hdr, len);
        break;
    case MDR_MSG_FIN:
        mdr_handle_fin(pr, hdr, len);
        break;
    case MDR_MSG_ACK:
        mdr_handle_ack(pr, hdr, len);
        break;
    case MDR_MSG_RFS:
        mdr_handle_rfs(pr, hdr, len);
        break;
    case MDR_MSG_RFS_NACK:
        mdr_handle_nack(pr, hdr, len);
        break;
    case MDR_MSG_RFS_REVOKE:
        mdr_handle_revoke(pr, hdr, len);
        break;
    default: /* CREDIT is taken in ctrl.c; others fail mdr_proto_check_hdr */
        mdr_proto_fail(pr, "unexpected type %u", hdr->type);
        break;
    }
}
