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
        if (mdr_ctrl_try_send(peer, -1, &e.h, sizeof(e), (uint8_t *)req->buf + req->frag_off,
                              plen) < 0) {
            if (n == 0 && !req->queued) {
                int r;
                for (r = 0; r < ctx->nrails; r++)
                    if (peer->rails[r].credits == 0) {
                        ctx->rails[r].stats.credit_stalls++;
                        break;
                    }
            }
            mdr_sendq_add(peer, req);
            return n;
        }
        req->frag_off += plen;
        n++;
    } while (req->frag_off < req->len);
    req->frag_off = req->len + 1; /* all sent (also for len 0) */
    mdr_sendq_del(req);
    if (req->flags & MADRAIL_SEND_SYNC && !req->rfs_consumed)
        req->wait_ack = 1;
    else
        mdr_req_complete(req, MADRAIL_OK);
    return n;
}

static int mdr_rail_can_put(const mdr_ctx_t *ctx, const mdr_peer_t *peer, int r)
{
    const mdr_peer_rail_t *pr = &peer->rails[r];
    return (ctx->rails[r].attr.caps & MDR_RAIL_CAP_PUT) && !pr->down && (pr->ep || pr->have_addr);
}

static void mdr_put_done(mdr_completion_t *comp, madrail_status_t status);

/* Plan puts from a key block (CTS or RFS) and record them in req. */
static madrail_status_t mdr_plan_puts(mdr_peer_rail_t *pr, mdr_req_t *req, const uint8_t *keys,
                                      size_t keys_len, uint32_t nkeys, uint64_t xfer)
{
    mdr_peer_t *peer = pr->peer;
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
    for (k = 0; k < nkeys; k++) {
        mdr_key_desc_t d;
        if (keys_len - off < sizeof(d)) {
            mdr_proto_fail(pr, "key block truncated");
            return MADRAIL_ERR_RAIL_PROTO;
        }
        memcpy(&d, req->cts + off, sizeof(d));
        off += sizeof(d);
        if (d.key_len > keys_len - off || d.rail >= ctx->nrails) {
            mdr_proto_fail(pr, "key for rail %u of %u bytes does not fit", d.rail, d.key_len);
            return MADRAIL_ERR_RAIL_PROTO;
        }
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
        op->state = 0;
        op->offset = ch[i].offset;
        op->len = ch[i].len;
        op->raddr = raddr[j] + ch[i].offset;
        op->rkey = kp[j];
        op->rkey_len = kl[j];
    }
    return MADRAIL_OK;
}

static void mdr_send_fin(mdr_req_t *req, int rail, uint64_t bytes)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);
    mdr_fin_hdr_t f;
    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = req->peer_req_id;
    f.bytes = bytes;
    if (mdr_ctrl_send(peer, rail, &f.h, sizeof(f), NULL, 0) != MADRAIL_OK)
        mdr_warn("peer %u rail %d: cannot send FIN", req->peer, rail);
}

static void mdr_put_done(mdr_completion_t *comp, madrail_status_t status)
{
    mdr_put_op_t *op = (mdr_put_op_t *)comp;
    mdr_req_t *req = op->req;
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);

    if (peer)
        mdr_health_put_done(&peer->rails[op->rail], op, status == MADRAIL_OK);
    op->state = 2;
    if (status != MADRAIL_OK) {
        mdr_warn("peer %u rail %d: put of %llu bytes failed: %s", req->peer, op->rail,
                 (unsigned long long)op->len, madrail_status_str(status));
        if (req->info.status == MADRAIL_OK)
            req->info.status = status;
    } else {
        mdr_send_fin(req, op->rail, op->len);
    }
    if (--req->puts_left == 0)
        mdr_req_complete(req, req->info.status);
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

        if (op->state != 0)
            continue;
        if (nover == MDR_MAX_RAILS) { /* not reached: one chunk per rail at most */
            waiting++;
            continue;
        }
        if (!pr->ep && mdr_peer_connect_rail(peer, op->rail) != MADRAIL_OK) {
            op->state = 1;
            over[nover] = op;
            over_st[nover++] = MADRAIL_ERR_RAIL_DOWN;
            continue;
        }
        if (!(rs->attr.caps & MDR_RAIL_CAP_REG_CHEAP)) {
            if (!req->reg[op->rail] &&
                mdr_rcache_get(rs->rcache, req->buf, req->len, MDR_MEM_LOCAL,
                               &req->reg[op->rail]) != MADRAIL_OK) {
                op->state = 1;
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
        mdr_health_put_issued(pr, op);
        rs->stats.tx_puts++;
        rs->stats.tx_put_bytes += op->len;
        rs->stats.tx_bytes += op->len;
        n++;
        op->state = 1;
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
    if (req->rndv == 2)
        return mdr_issue_puts(req);
    if (req->rndv == 0 && req->frag_off <= req->len)
        return mdr_send_frags(peer, req);
    mdr_sendq_del(req);
    return 0;
}

static int mdr_rfs_fits(const mdr_rfs_t *o, const mdr_req_t *req)
{
    return !!o->space == !!(req->flags & MDR_FLAG_INTERNAL) &&
           ((o->tag ^ req->tag) & ~o->ignore) == 0;
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
        req->rfs_consumed = 1;
        req->peer_req_id = offer->rreq_id;
    }
    if (req->len < ctx->cfg.rndv_thresh || (offer && req->len <= ctx->eager_max)) {
        free(offer);
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
        st = mdr_plan_puts(&peer->rails[0], req, offer->keys, offer->keys_len, offer->nkeys,
                           xfer);
        free(offer);
        if (st != MADRAIL_OK)
            return st;
        st = mdr_ctrl_send(peer, -1, &d.h, sizeof(d), NULL, 0);
        if (st != MADRAIL_OK)
            return st;
        req->rndv = 2;
        if (req->nputs == 0) {
            mdr_req_complete(req, MADRAIL_OK);
            return MADRAIL_OK;
        }
        mdr_issue_puts(req);
        return MADRAIL_OK;
    }
    {
        mdr_rts_hdr_t r;
        memset(&r, 0, sizeof(r));
        r.h.type = MDR_MSG_RTS;
        r.h.flags = (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0;
        r.seq = req->seq;
        r.tag = req->tag;
        r.total = req->len;
        r.sreq_id = req->id;
        req->rndv = 1;
        {
            int rail = mdr_ctrl_try_send(peer, -1, &r.h, sizeof(r), NULL, 0);
            if (rail >= 0) {
                mdr_health_rts_sent(req, rail); /* RTS -> CTS round trip */
                return MADRAIL_OK;
            }
        }
        return mdr_ctrl_send(peer, -1, &r.h, sizeof(r), NULL, 0);
    }
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
    if (!peer || peer->rfs_out || peer->inflight.count != 0)
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
    if (mdr_ctrl_send(peer, -1, &msg.r.h, sizeof(msg.r), msg.keys, klen) != MADRAIL_OK) {
        mdr_rfs_release(req);
        return;
    }
    req->rfs_state = 1;
    peer->rfs_out = req;
}

/* ---------------- handlers ---------------- */

static void mdr_handle_cts(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_cts_hdr_t *c = (const mdr_cts_hdr_t *)hdr;
    mdr_req_t *req;
    madrail_status_t st;

    if (len < sizeof(*c)) {
        mdr_proto_fail(pr, "CTS of %zu bytes", len);
        return;
    }
    req = mdr_req_lookup(ctx, c->sreq_id);
    if (!req || req->type != MDR_REQ_SEND || req->rndv != 1 || req->peer != pr->peer->index) {
        mdr_proto_fail(pr, "CTS for unknown send %llx", (unsigned long long)c->sreq_id);
        return;
    }
    if (c->xfer_len > req->len) {
        mdr_proto_fail(pr, "CTS asks for %llu bytes of a %zu-byte message",
                       (unsigned long long)c->xfer_len, req->len);
        return;
    }
    mdr_health_cts_rcvd(req, pr);
    req->peer_req_id = c->rreq_id;
    req->rndv = 2;
    st = mdr_plan_puts(pr, req, (const uint8_t *)(c + 1), len - sizeof(*c), c->nkeys,
                       c->xfer_len);
    if (st != MADRAIL_OK) {
        mdr_req_complete(req, st);
        return;
    }
    if (req->nputs == 0) {
        mdr_req_complete(req, MADRAIL_OK);
        return;
    }
    mdr_issue_puts(req);
}

static void mdr_handle_fin(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_fin_hdr_t *f = (const mdr_fin_hdr_t *)hdr;
    mdr_req_t *req;

    if (len != sizeof(*f)) {
        mdr_proto_fail(pr, "FIN of %zu bytes", len);
        return;
    }
    req = mdr_req_lookup(ctx, f->rreq_id);
    if (!req || req->type != MDR_REQ_RECV || req->complete) {
        mdr_proto_fail(pr, "FIN for unknown receive %llx", (unsigned long long)f->rreq_id);
        return;
    }
    ctx->rails[pr->rail].stats.rx_put_bytes += f->bytes;
    ctx->rails[pr->rail].stats.rx_bytes += f->bytes;
    req->fin_bytes += f->bytes;
    if (req->matched && req->fin_bytes > req->xfer_len) {
        mdr_proto_fail(pr, "FINs report %llu bytes, %llu expected",
                       (unsigned long long)req->fin_bytes, (unsigned long long)req->xfer_len);
        return;
    }
    if (req->matched && req->fin_bytes == req->xfer_len)
        mdr_recv_finish(req, req->info.sent_length > req->len ? MADRAIL_ERR_TRUNCATE
                                                               : MADRAIL_OK);
}

static void mdr_handle_ack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_id_hdr_t *a = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;
    if (len != sizeof(*a)) {
        mdr_proto_fail(pr, "ACK of %zu bytes", len);
        return;
    }
    req = mdr_req_lookup(pr->peer->ctx, a->id);
    if (!req || req->type != MDR_REQ_SEND || !req->wait_ack) {
        mdr_proto_fail(pr, "ACK for unknown send %llx", (unsigned long long)a->id);
        return;
    }
    req->wait_ack = 0;
    mdr_req_complete(req, MADRAIL_OK);
}

static void mdr_send_nack(mdr_peer_t *peer, uint64_t rreq_id)
{
    mdr_id_hdr_t n;
    memset(&n, 0, sizeof(n));
    n.h.type = MDR_MSG_RFS_NACK;
    n.id = rreq_id;
    mdr_ctrl_send(peer, -1, &n.h, sizeof(n), NULL, 0);
}

static void mdr_handle_rfs(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    const mdr_rfs_hdr_t *r = (const mdr_rfs_hdr_t *)hdr;
    mdr_rfs_t *o;
    size_t klen;

    if (len < sizeof(*r)) {
        mdr_proto_fail(pr, "RFS of %zu bytes", len);
        return;
    }
    if (r->expected_seq != peer->next_send_seq) {
        /* we sent since the receiver's view: a sent message may match first */
        mdr_send_nack(peer, r->rreq_id);
        return;
    }
    klen = len - sizeof(*r);
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
}

static void mdr_handle_nack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_id_hdr_t *n = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;

    if (len != sizeof(*n)) {
        mdr_proto_fail(pr, "RFS_NACK of %zu bytes", len);
        return;
    }
    req = mdr_req_lookup(ctx, n->id);
    if (!req || req->type != MDR_REQ_RECV)
        return; /* the receive already completed: nothing to undo */
    if (pr->peer->rfs_out == req)
        pr->peer->rfs_out = NULL;
    if (req->rfs_state == 3) {
        req->rfs_state = 0; /* registrations now serve the CTS */
        return;
    }
    if (req->rfs_state != 1)
        return;
    req->rfs_state = 0;
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

    if (len != sizeof(*v)) {
        mdr_proto_fail(pr, "RFS_REVOKE of %zu bytes", len);
        return;
    }
    mdr_list_for_each(it, &peer->rfs_stored) {
        mdr_rfs_t *o = mdr_container_of(it, mdr_rfs_t, link);
        if (o->rreq_id == v->id) {
            mdr_list_del(it);
            free(o);
            mdr_send_nack(peer, v->id);
            return;
        }
    }
    /* already spent: the message is on its way and the receive completes */
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
    default:
        mdr_proto_fail(pr, "unexpected type %u", hdr->type);
        break;
    }
}
