/*
 * Rendezvous (len >= MADRAIL_RNDV_THRESH): RTS -> (receiver matches,
 * registers its buffer on every rail) CTS with one key per rail -> the
 * sender plans stripes in proportion to rail weights and puts each on its
 * rail -> a FIN on every rail used once that rail's put completed (the
 * driver orders a later control message after the put's data).  The
 * receive completes when FINs account for every byte.  Registrations are
 * taken per rail from the registration cache and given back as soon as
 * the transfer is over, whatever its outcome.
 *
 * A chunk that cannot be put on its planned rail before anything of it
 * left (no connection, no registration, the ep refused it) is moved to
 * another rail of the key block; once a put is issued its outcome is the
 * driver's to report.
 *
 * Put-ahead: with adaptation on, a rail's driver holds at most
 * MADRAIL_PUT_AHEAD of puts (in time at the rail's measured speed); a
 * chunk beyond that waits here, IDLE, and when it is its turn it goes to
 * the rail of its key block that would finish it first.  A plan is a
 * forecast made when the CTS came; a window of 32 messages of 1 MiB plans
 * 16 MiB per rail at once, and a rail that slowed to 200 Mbit after that
 * would hold every message of the window for 0.7 s while the others ran
 * dry (measured on the namespace cluster, docs/performance.md).  With the
 * work held here the slowed rail keeps only what it had taken, and the
 * other rails take the rest as they drain.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

static void mdr_put_done(mdr_completion_t *comp, madrail_status_t status);

/* ---------------- states ---------------- */

#define MDR_BIT(s) (1u << (s))

static const char *const mdr_rndv_names[] = {"NONE", "RTS_SENT", "PUTTING", "CTS_SENT",
                                             "RFS_DATA"};

/* req->rndv, by request type: from -> the states it may go to.  A send
 * sends its RTS (again, when none of it reached the peer: mdr_send_restart)
 * and puts once a CTS came, or puts at once into a receiver-first offer; a
 * receive answers a matched RTS with a CTS, or takes an RFS_DATA into its
 * offer.  Both are over when the request completes: no way back. */
static const unsigned mdr_rndv_send_next[] = {
    [MDR_RNDV_NONE] = MDR_BIT(MDR_RNDV_RTS_SENT) | MDR_BIT(MDR_RNDV_PUTTING),
    [MDR_RNDV_RTS_SENT] = MDR_BIT(MDR_RNDV_RTS_SENT) | MDR_BIT(MDR_RNDV_PUTTING),
};
static const unsigned mdr_rndv_recv_next[] = {
    [MDR_RNDV_NONE] = MDR_BIT(MDR_RNDV_CTS_SENT) | MDR_BIT(MDR_RNDV_RFS_DATA),
};

int mdr_rndv_set(mdr_req_t *req, enum mdr_rndv_state to)
{
    const unsigned *next = req->type == MDR_REQ_SEND ? mdr_rndv_send_next : mdr_rndv_recv_next;
    size_t n = req->type == MDR_REQ_SEND ? sizeof(mdr_rndv_send_next) / sizeof(*next)
                                         : sizeof(mdr_rndv_recv_next) / sizeof(*next);

    if ((size_t)req->rndv >= n || !(next[req->rndv] & MDR_BIT(to))) {
        mdr_state_illegal(req->ctx, req->type == MDR_REQ_SEND ? "send rendezvous"
                                                              : "receive rendezvous",
                          req->id, mdr_rndv_names[req->rndv], mdr_rndv_names[to]);
        return -1;
    }
    req->rndv = to;
    return 0;
}

static const char *const mdr_put_names[] = {"IDLE", "INFLIGHT", "DONE"};

/* op->state: a chunk is issued, or given up before it is (its send
 * failed); an issued one is reported, or comes back IDLE to be put again
 * on another rail when its rail failed under it (never connected, the put
 * failed, or no FIN could follow it: mdr_reput); a done one comes back
 * IDLE when its FIN was lost in the txq with its rail (mdr_rndv_fin_lost). */
static const unsigned mdr_put_next[] = {
    [MDR_PUT_IDLE] = MDR_BIT(MDR_PUT_INFLIGHT) | MDR_BIT(MDR_PUT_DONE),
    [MDR_PUT_INFLIGHT] = MDR_BIT(MDR_PUT_IDLE) | MDR_BIT(MDR_PUT_DONE),
    [MDR_PUT_DONE] = MDR_BIT(MDR_PUT_IDLE),
};

int mdr_put_set(mdr_put_op_t *op, enum mdr_put_state to)
{
    if (!(mdr_put_next[op->state] & MDR_BIT(to))) {
        mdr_state_illegal(op->req->ctx, "put", op->req->id, mdr_put_names[op->state],
                          mdr_put_names[to]);
        return -1;
    }
    op->state = to;
    return 0;
}

MDR_HOT void mdr_rndv_reg_release(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    int r;
    if (!req->has_reg)
        return; /* never registered (eager): nothing to look at */
    req->has_reg = 0;
    for (r = 0; r < ctx->nrails; r++) /* reg[] is indexed by the context's rails */
        if (req->reg[r]) {
            mdr_rcache_put(ctx->rails[r].rcache, req->reg[r]);
            req->reg[r] = NULL;
        }
}

static int mdr_rail_can_put(const mdr_ctx_t *ctx, const mdr_peer_t *peer, int r)
{
    const mdr_peer_rail_t *pr = &peer->rails[r];
    return (ctx->rails[r].attr.caps & MDR_RAIL_CAP_PUT) && !pr->down && (pr->ep || pr->have_addr);
}

/* Rotate the first n entries of the four arrays left by rot. */
static void mdr_rotate_keys(int *rails, const uint8_t **kp, uint16_t *kl, uint64_t *raddr, int n,
                            unsigned rot)
{
    int r0[MDR_MAX_RAILS];
    const uint8_t *k0[MDR_MAX_RAILS];
    uint16_t l0[MDR_MAX_RAILS];
    uint64_t a0[MDR_MAX_RAILS];
    int i;

    if (rot == 0)
        return;
    for (i = 0; i < n; i++) {
        int j = (int)(((unsigned)i + rot) % (unsigned)n);
        r0[i] = rails[j];
        k0[i] = kp[j];
        l0[i] = kl[j];
        a0[i] = raddr[j];
    }
    memcpy(rails, r0, (size_t)n * sizeof(*rails));
    memcpy(kp, k0, (size_t)n * sizeof(*kp));
    memcpy(kl, l0, (size_t)n * sizeof(*kl));
    memcpy(raddr, a0, (size_t)n * sizeof(*raddr));
}

/* Plan puts from a key block (CTS or RFS, checked by mdr_rndv_keys_check when
 * it arrived) and record them in req. */
madrail_status_t mdr_rndv_plan_puts(mdr_peer_t *peer, mdr_req_t *req, const uint8_t *keys,
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
    if (n > 1) {
        /* Chunk edges are rounded to MADRAIL_STRIPE_ALIGN, so one rail's
         * chunk takes the rounding: three equal rails split 64 KiB as 20,
         * 24 and 20 KiB, and the middle rail, always the same one, carried
         * 20% more than the others and set the pace (3 x 1 Gbit, osu_bw
         * 64 KiB: 91% of the limit).  Rotating the rails' order from one
         * plan to the next spreads the rounding over the rails. */
        unsigned rot = peer->stripe_rot++ % (unsigned)n;
        mdr_rotate_keys(rails, kp, kl, raddr, n, rot);
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
        op->state = MDR_PUT_IDLE; /* a new chunk: where the machine starts */
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
static void mdr_send_fin(mdr_req_t *req, mdr_put_op_t *op)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);
    mdr_fin_hdr_t f;
    madrail_status_t st;
    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = req->peer_req_id;
    f.bytes = op->len;
    /* the chunk's index rides with a queued FIN: if its rail fails before
     * the FIN leaves, mdr_rndv_fin_lost puts that chunk again */
    st = mdr_ctrl_send_req(peer, op->rail, req, (int)(op - req->puts), &f.h, sizeof(f), NULL,
                           0);
    if (st != MADRAIL_OK) {
        mdr_error("peer %u rail %s: cannot send the FIN of %llu put bytes: %s", req->peer,
                  req->ctx->rails[op->rail].attr.name, (unsigned long long)op->len,
                  madrail_status_str(st));
        if (req->info.status == MADRAIL_OK)
            req->info.status = st;
    }
}

/* The keys of req's key block (CTS or RFS, checked when it arrived), one
 * at a time: *k starts at 0 (and *off at 0); fills *d and *key (the
 * rail's key bytes) and returns 1, or 0 past the last one. */
static int mdr_rndv_next_key(const mdr_req_t *req, uint32_t *k, size_t *off, mdr_key_desc_t *d,
                             const uint8_t **key)
{
    if (*k >= req->cts_nkeys || *off > req->cts_len || req->cts_len - *off < sizeof(*d))
        return 0;
    memcpy(d, req->cts + *off, sizeof(*d));
    *off += sizeof(*d);
    if (d->key_len > req->cts_len - *off)
        return 0;
    *key = req->cts + *off;
    *off = mdr_pad8(*off + d->key_len);
    (*k)++;
    return 1;
}

/* Point op at rail d.rail of the key block (nothing of it was sent). */
static void mdr_put_retarget(mdr_put_op_t *op, const mdr_key_desc_t *d, const uint8_t *key)
{
    op->rail = d->rail;
    op->raddr = d->raddr + op->offset;
    op->rkey = key;
    op->rkey_len = d->key_len;
}

/* A chunk could not be put on op->rail (no connection, no registration,
 * the ep refused it) before anything of it was sent: move it to another
 * rail of the key block that can take puts.  Returns 1 when it did. */
static int mdr_replan_put(mdr_req_t *req, mdr_put_op_t *op)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    const uint8_t *key;
    mdr_key_desc_t d;
    size_t off = 0;
    uint32_t k = 0;

    op->tried |= 1u << op->rail;
    while (mdr_rndv_next_key(req, &k, &off, &d, &key)) {
        if (d.rail < ctx->nrails && !(op->tried & (1u << d.rail)) &&
            mdr_rail_can_put(ctx, peer, d.rail)) {
            mdr_warn("peer %u: %llu bytes planned on rail %s go on rail %s", req->peer,
                     (unsigned long long)op->len, ctx->rails[op->rail].attr.name,
                     ctx->rails[d.rail].attr.name);
            ctx->n_replanned_bytes += op->len;
            mdr_put_retarget(op, &d, key);
            return 1;
        }
    }
    return 0;
}

/* Put-ahead: op's rail holds MADRAIL_PUT_AHEAD of work already.  Move op
 * to the rail of its key block that would finish it first, if that rail
 * has room and beats waiting for this one (health.c measures both).
 * Only connected rails are candidates: a move never dials.  Returns 1
 * when the chunk moved (nothing of it had been sent). */
static int mdr_move_put(mdr_req_t *req, mdr_put_op_t *op)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    double best = mdr_health_put_eta(&peer->rails[op->rail], op->len), eta;
    const uint8_t *key, *best_key = NULL;
    mdr_key_desc_t d, best_d;
    size_t off = 0;
    uint32_t k = 0;

    memset(&best_d, 0, sizeof(best_d));
    while (mdr_rndv_next_key(req, &k, &off, &d, &key)) {
        if (d.rail < ctx->nrails && d.rail != op->rail && mdr_rail_can_put(ctx, peer, d.rail) &&
            peer->rails[d.rail].ep && mdr_health_put_room(&peer->rails[d.rail])) {
            eta = mdr_health_put_eta(&peer->rails[d.rail], op->len);
            if (eta < best) {
                best = eta;
                best_d = d;
                best_key = key;
            }
        }
    }
    if (!best_key)
        return 0;
    mdr_debug("peer %u: %llu put bytes move from rail %s (busy) to rail %s", req->peer,
              (unsigned long long)op->len, ctx->rails[op->rail].attr.name,
              ctx->rails[best_d.rail].attr.name);
    peer->health.moved_bytes += op->len;
    mdr_put_retarget(op, &best_d, best_key);
    return 1;
}

/* No FIN of op left and its bytes may not all have reached the receiver
 * (why): put them again on another rail of the key block, whose FIN then
 * reports them.  Safe because the receiver counts put bytes by FIN only
 * and a put is idempotent (the same bytes to the same place).  Returns 1
 * when the chunk moved (it waits IDLE for mdr_rndv_issue_puts). */
static int mdr_reput(mdr_req_t *req, mdr_put_op_t *op, const char *why)
{
    mdr_ctx_t *ctx = req->ctx;
    int from = op->rail;

    if (req->info.status != MADRAIL_OK || !mdr_replan_put(req, op))
        return 0;
    mdr_warn("peer %u rail %s: %s: %llu bytes at offset %llu of send %llx are put again on "
             "rail %s",
             req->peer, ctx->rails[from].attr.name, why, (unsigned long long)op->len,
             (unsigned long long)op->offset, (unsigned long long)req->id,
             ctx->rails[op->rail].attr.name);
    mdr_put_set(op, MDR_PUT_IDLE);
    mdr_sendq_add(mdr_peer_get(ctx, req->peer), req);
    return 1;
}

int mdr_rndv_fin_lost(mdr_req_t *req, int part)
{
    mdr_put_op_t *op;

    if (req->rndv != MDR_RNDV_PUTTING || part < 0 || part >= req->nputs)
        return 0;
    op = &req->puts[part];
    if (op->state != MDR_PUT_DONE ||
        !mdr_reput(req, op, "the rail failed before the FIN of a completed put left"))
        return 0;
    /* the chunk counts again, and the send is not over before its new FIN */
    req->puts_left++;
    req->proto_done = 0;
    return 1;
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
        mdr_put_set(op, MDR_PUT_IDLE);
        mdr_sendq_add(mdr_peer_get(req->ctx, req->peer), req);
        return;
    }
    if (status == MADRAIL_ERR_RAIL_CONNECT)
        status = MADRAIL_ERR_RAIL_DOWN; /* the rail-level news stays inside */
    /* Its rail failed under it (the put failed, or completed on a rail
     * that is down now, so no FIN can follow it there): no FIN of it left,
     * so another rail can carry it again. */
    if ((status == MADRAIL_ERR_RAIL_DOWN || (status == MADRAIL_OK && peer &&
                                             peer->rails[op->rail].down)) &&
        mdr_reput(req, op, status == MADRAIL_OK ? "the rail failed before the FIN of a put"
                                                : "a put failed with its rail"))
        return;
    mdr_put_set(op, MDR_PUT_DONE);
    if (status != MADRAIL_OK && peer && !mdr_peer_reachable(peer))
        status = MADRAIL_ERR_PEER_UNREACHABLE; /* the last rail went: the peer's news */
    if (status != MADRAIL_OK) {
        mdr_warn("peer %u rail %d: put of %llu bytes failed: %s", req->peer, op->rail,
                 (unsigned long long)op->len, madrail_status_str(status));
        if (req->info.status == MADRAIL_OK)
            req->info.status = status;
    } else {
        mdr_send_fin(req, op);
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
int mdr_rndv_issue_puts(mdr_req_t *req)
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
        if (pr->ep && !mdr_health_put_room(pr)) { /* MADRAIL_PUT_AHEAD held by its rail */
            if (mdr_move_put(req, op)) {
                i--; /* this chunk again, on the rail with room */
                continue;
            }
            waiting++;
            continue;
        }
        if (!pr->ep && mdr_peer_connect_rail(peer, op->rail) != MADRAIL_OK) {
            if (mdr_replan_put(req, op)) {
                i--; /* this chunk again, on its new rail */
                continue;
            }
            mdr_put_set(op, MDR_PUT_INFLIGHT);
            over[nover] = op;
            over_st[nover++] = mdr_peer_reachable(peer) ? MADRAIL_ERR_RAIL_DOWN
                                                        : MADRAIL_ERR_PEER_UNREACHABLE;
            continue;
        }
        if (!(rs->attr.caps & MDR_RAIL_CAP_REG_CHEAP)) {
            req->has_reg = 1; /* mdr_rndv_reg_release looks at reg[] */
            if (!req->reg[op->rail] &&
                (((ctx->fault_reg >> op->rail) & 1u) ||
                 mdr_rcache_get(rs->rcache, req->buf, req->len, MDR_MEM_LOCAL,
                                &req->reg[op->rail]) != MADRAIL_OK)) {
                mdr_warn("rail %s peer %u: cannot register %zu bytes for a put", rs->attr.name,
                         peer->index, req->len);
                if (mdr_replan_put(req, op)) {
                    i--;
                    continue;
                }
                mdr_put_set(op, MDR_PUT_INFLIGHT);
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
        mdr_put_set(op, MDR_PUT_INFLIGHT);
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

madrail_status_t mdr_rndv_send_rts(mdr_peer_t *peer, mdr_req_t *req)
{
    /* an announced message (madrail_am_isend) carries its active message
     * after the RTS: AM id, then the header (am.c builds it) */
    struct {
        mdr_rts_hdr_t r;
        uint64_t am_id;
    } msg;
    mdr_rts_hdr_t *rp = &msg.r;
    const void *body = NULL;
    size_t body_len = 0, hlen = sizeof(msg.r);

    memset(&msg, 0, sizeof(msg));
    rp->h.type = MDR_MSG_RTS;
    rp->h.flags = (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0;
    rp->seq = req->seq;
    rp->tag = req->tag;
    rp->total = req->len;
    rp->sreq_id = req->id;
    if (req->has_am) {
        rp->h.flags = MDR_HF_AM;
        msg.am_id = req->am_id;
        hlen = sizeof(msg);
        body = req->am;
        body_len = req->am_len;
    }
    mdr_rndv_set(req, MDR_RNDV_RTS_SENT);
    peer->ctx->n_rts++;
    if (mdr_peer_reachable(peer)) {
        int rail;
        peer->ctx->tx_sreq_id = req->id; /* its copy (replay.c) names the send */
        rail = mdr_ctrl_try_send(peer, -1, &rp->h, hlen, body, body_len);
        peer->ctx->tx_sreq_id = 0;
        if (rail >= 0) {
            mdr_send_track(req, rail, 1);
            mdr_health_rts_sent(req, rail); /* RTS -> CTS round trip */
            return MADRAIL_OK;
        }
    }
    return mdr_ctrl_send_req(peer, -1, req, -1, &rp->h, hlen, body, body_len);
}

/* Register buf on every rail that can take puts to peer and pack the keys. */
madrail_status_t mdr_rndv_build_keys(mdr_peer_t *peer, mdr_req_t *req, size_t len,
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
        req->has_reg = 1; /* mdr_rndv_reg_release looks at reg[] */
        if (!req->reg[r] && mdr_rcache_get_offer(rs->rcache, req->buf, len,
                                                 MDR_MEM_REMOTE_WRITE, 1, peer->uuid,
                                                 &req->reg[r]) != MADRAIL_OK) {
            mdr_warn("rail %s: cannot register %zu bytes for a receive", rs->attr.name, len);
            continue;
        }
        klen = MDR_KEYS_MAX - off - sizeof(d);
        /* offered to this peer alone: the rail refuses puts into it from
         * any other (rkey_pack, rails/rail.h) */
        if (rs->ops->rkey_pack(rs->rail, mdr_rcache_memh(req->reg[r]), peer->uuid,
                               out + off + sizeof(d), &klen) != MADRAIL_OK) {
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
        st = mdr_rndv_build_keys(peer, req, xfer, msg.keys, &klen, &nkeys);
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
    mdr_rndv_set(req, MDR_RNDV_CTS_SENT); /* FINs from the sender may follow */
    st = mdr_ctrl_send(peer, -1, &msg.c.h, sizeof(msg.c), klen ? msg.keys : NULL, klen);
    if (st != MADRAIL_OK) {
        mdr_recv_finish(req, st);
        return;
    }
    if (xfer == 0)
        mdr_recv_finish(req, total > req->len ? MADRAIL_ERR_TRUNCATE : MADRAIL_OK);
    (void)ctx;
}

/* A key block (CTS or RFS) as the peer sent it: keys exactly when there
 * are bytes to put, each naming one of our rails at most once, laid out as
 * mdr_rndv_build_keys writes them (descriptor, key, padding to 8) with nothing
 * after.  0 if good, else the rail was closed. */
int mdr_rndv_keys_check(mdr_peer_rail_t *pr, const char *what, const uint8_t *keys,
                          size_t keys_len, uint32_t nkeys, uint64_t xfer)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    unsigned seen = 0;
    size_t off = 0;
    uint32_t k;

    if ((xfer == 0) != (nkeys == 0) || nkeys > (uint32_t)ctx->nrails) {
        mdr_peer_proto_fail(pr, "%s with %u keys for %llu bytes (%d rails)", what, nkeys,
                            (unsigned long long)xfer, ctx->nrails);
        return -1;
    }
    for (k = 0; k < nkeys; k++) {
        mdr_key_desc_t d;
        if (keys_len - off < sizeof(d)) {
            mdr_peer_proto_fail(pr, "%s: key %u of %u truncated", what, k, nkeys);
            return -1;
        }
        memcpy(&d, keys + off, sizeof(d));
        off += sizeof(d);
        if (d.rail >= ctx->nrails || (seen & (1u << d.rail))) {
            mdr_peer_proto_fail(pr, "%s: key %u names rail %u (%d rails, %s)", what, k, d.rail,
                                ctx->nrails, d.rail < ctx->nrails ? "named twice" : "no such rail");
            return -1;
        }
        seen |= 1u << d.rail;
        if (d.key_len > keys_len - off) {
            mdr_peer_proto_fail(pr, "%s: key for rail %u of %u bytes, %zu left", what, d.rail,
                                d.key_len, keys_len - off);
            return -1;
        }
        off = mdr_pad8(off + d.key_len);
    }
    if (off != keys_len) {
        mdr_peer_proto_fail(pr, "%s: %zu bytes of keys, %zu expected", what, keys_len, off);
        return -1;
    }
    return 0;
}

static void mdr_handle_cts(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_cts_hdr_t *c = (const mdr_cts_hdr_t *)hdr;
    mdr_req_t *req;
    madrail_status_t st;

    req = mdr_req_for_reply(pr, "CTS", c->sreq_id, MDR_REQ_SEND);
    if (!req)
        return;
    if (req->rndv != MDR_RNDV_RTS_SENT) {
        mdr_peer_proto_fail(pr, "CTS for send %llx that sent no RTS or had its CTS",
                            (unsigned long long)c->sreq_id);
        return;
    }
    if (c->xfer_len > req->len) {
        mdr_peer_proto_fail(pr, "CTS asks for %llu bytes of a %zu-byte message",
                            (unsigned long long)c->xfer_len, req->len);
        return;
    }
    if (mdr_rndv_keys_check(pr, "CTS", (const uint8_t *)(c + 1), len - sizeof(*c), c->nkeys,
                            c->xfer_len) != 0)
        return;
    mdr_health_cts_rcvd(req, pr);
    req->peer_req_id = c->rreq_id;
    mdr_rndv_set(req, MDR_RNDV_PUTTING);
    req->seq_unsent = 0; /* the CTS answers the RTS: it arrived */
    st = mdr_rndv_plan_puts(pr->peer, req, (const uint8_t *)(c + 1), len - sizeof(*c), c->nkeys,
                            c->xfer_len);
    if (st != MADRAIL_OK) {
        mdr_req_complete(req, st);
        return;
    }
    if (req->nputs == 0) {
        mdr_send_done(req);
        return;
    }
    mdr_rndv_issue_puts(req);
}

static void mdr_handle_fin(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_fin_hdr_t *f = (const mdr_fin_hdr_t *)hdr;
    mdr_req_t *req;
    uint64_t limit;

    (void)len;
    req = mdr_req_for_reply(pr, "FIN", f->rreq_id, MDR_REQ_RECV);
    if (!req)
        return;
    if (req->rndv == MDR_RNDV_CTS_SENT || req->rndv == MDR_RNDV_RFS_DATA) {
        limit = req->xfer_len;
    } else if (req->rfs_state == MDR_RFS_OUT && !req->matched) {
        limit = req->len; /* the puts into our offer may overtake its RFS_DATA */
    } else {
        mdr_peer_proto_fail(pr, "FIN for receive %llx, which waits for no puts (%s)",
                            (unsigned long long)f->rreq_id,
                            req->matched ? "an eager message" : "not matched, no offer out");
        return;
    }
    /* a re-sent FIN reports puts on the rail it was first sent on */
    if (!req->reg[ctx->rx_resent_rail >= 0 ? ctx->rx_resent_rail : pr->rail]) {
        mdr_peer_proto_fail(pr, "FIN for receive %llx on a rail it gave no key for",
                            (unsigned long long)f->rreq_id);
        return;
    }
    if (f->bytes == 0 || f->bytes > limit - req->fin_bytes) {
        mdr_peer_proto_fail(pr, "FIN of %llu bytes for receive %llx: %llu of %llu reported already",
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

madrail_status_t mdr_rndv_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t cts = {"CTS", sizeof(mdr_cts_hdr_t), 1, 0, mdr_handle_cts, 0};
    static const mdr_ctrl_handler_t fin = {"FIN", sizeof(mdr_fin_hdr_t), 0, 0, mdr_handle_fin, 0};
    madrail_status_t st = mdr_ctrl_register(ctx, MDR_MSG_CTS, &cts);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_FIN, &fin);
    return st;
}
