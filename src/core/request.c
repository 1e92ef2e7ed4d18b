/*
 * Requests and their ids.  A peer refers to one of our requests by a 64-bit
 * id (generation << 32 | table index) rather than by pointer, so a stale or
 * forged id from the wire is detected by a table lookup, never followed.
 * Completion either calls the user's callback (and frees the request) or
 * waits for test/wait to collect it.
 *
 * A send is not complete when a driver accepted its data, only when the
 * data left this process: a driver may hold it (coalescing, a connection
 * still being made, a full socket) and a failure of that connection loses
 * it unsent, which must reach the user as an error, never as a success.
 * So a send remembers the rails that took its bytes (a bit per rail, no
 * allocation) and sits on ctx->unsent until each of those eps reports
 * nothing unsent (ep_unsent, FIFO per ep) or fails.  The common case stays
 * cheap: an ep that wrote at once completes the send inside isend, and
 * wait first flushes the rails the send used and looks again before it
 * pays for a full progress.  Data that left and is then lost in the
 * network is beyond what a sender can see without acknowledgements.
 *
 * The send entry points (mdr_send_start: eager, rendezvous, or a stored
 * receiver-first offer; progress; restart) live here too: what they start
 * is what this file tracks, and the protocol modules (eager.c, rndv.c,
 * rfs.c) only carry it out.
 */
#include "mdr_config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

#define MDR_REQ_CACHE_MAX 1024 /* released requests kept for reuse */
#define MDR_WAIT_SPINS 64      /* idle polls in madrail_wait before sched_yield */

static int mdr_reqtab_grow(mdr_ctx_t *ctx)
{
    uint32_t cap = ctx->reqtab_cap ? ctx->reqtab_cap * 2 : 256, i;
    mdr_req_t **tab = realloc(ctx->reqtab, cap * sizeof(*tab));
    uint32_t *gen, *fr;
    if (!tab)
        return -1;
    ctx->reqtab = tab;
    gen = realloc(ctx->reqgen, cap * sizeof(*gen));
    if (!gen)
        return -1;
    ctx->reqgen = gen;
    fr = realloc(ctx->reqfree, cap * sizeof(*fr));
    if (!fr)
        return -1;
    ctx->reqfree = fr;
    for (i = ctx->reqtab_cap; i < cap; i++) {
        tab[i] = NULL;
        gen[i] = 1;
    }
    /* push new indices so that lower ones are popped first */
    for (i = cap; i > ctx->reqtab_cap; i--)
        fr[ctx->nreqfree++] = i - 1;
    ctx->reqtab_cap = cap;
    return 0;
}

MDR_HOT mdr_req_t *mdr_req_alloc(mdr_ctx_t *ctx, int type)
{
    mdr_req_t *req;
    uint32_t idx;

    if (ctx->nreqfree == 0 && mdr_reqtab_grow(ctx) != 0)
        return NULL;
    if (ctx->req_cache) {
        req = ctx->req_cache;
        ctx->req_cache = *(mdr_req_t **)req;
        ctx->nreq_cache--;
        memset(req, 0, sizeof(*req));
    } else {
        req = calloc(1, sizeof(*req));
        if (!req)
            return NULL;
    }
    idx = ctx->reqfree[--ctx->nreqfree];
    ctx->reqtab[idx] = req;
    req->id = ((uint64_t)ctx->reqgen[idx] << 32) | idx;
    req->ctx = ctx;
    req->type = type;
    mdr_list_init(&req->link);
    mdr_list_init(&req->unsent_link);
    if (type == MDR_REQ_SEND)
        ctx->active_sends++;
    return req;
}

mdr_req_t *mdr_req_lookup(mdr_ctx_t *ctx, uint64_t id)
{
    uint32_t idx = (uint32_t)id;
    if (idx >= ctx->reqtab_cap || !ctx->reqtab[idx] || ctx->reqtab[idx]->id != id)
        return NULL;
    return ctx->reqtab[idx];
}

static void mdr_unsent_del(mdr_req_t *req)
{
    if (req->on_unsent) {
        req->on_unsent = 0;
        mdr_list_del(&req->unsent_link);
    }
}

MDR_HOT void mdr_req_release(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    uint32_t idx = (uint32_t)req->id;
    mdr_unsent_del(req); /* a send released without completing (isend error) */
    ctx->reqtab[idx] = NULL;
    ctx->reqgen[idx]++;
    if (ctx->reqgen[idx] == 0)
        ctx->reqgen[idx] = 1;
    ctx->reqfree[ctx->nreqfree++] = idx;
    if (req->has_reg)
        mdr_rndv_reg_release(req); /* a request released without completing (isend error) */
    if (req->cts != NULL || req->puts != NULL || req->am != NULL) { /* a rendezvous's */
        free(req->cts);
        free(req->puts);
        free(req->am);
    }
    if (ctx->nreq_cache < MDR_REQ_CACHE_MAX) {
        *(mdr_req_t **)req = ctx->req_cache;
        ctx->req_cache = req;
        ctx->nreq_cache++;
    } else {
        free(req);
    }
}

void mdr_req_cache_cleanup(mdr_ctx_t *ctx)
{
    while (ctx->req_cache) {
        mdr_req_t *req = ctx->req_cache;
        ctx->req_cache = *(mdr_req_t **)req;
        free(req);
    }
    ctx->nreq_cache = 0;
}

MDR_HOT void mdr_req_complete(mdr_req_t *req, madrail_status_t status)
{
    if (req->complete)
        return;
    if (req->type == MDR_REQ_SEND && status == MADRAIL_OK && req->cancel == MDR_CANCEL_SENT) {
        /* a CANCEL is out: its answer completes the send (cancel.c) */
        req->cancel_held = 1;
        mdr_unsent_del(req);
        return;
    }
    req->complete = 1;
    req->info.status = status;
    mdr_unsent_del(req);
    /* Registrations go back to the cache as soon as the transfer is over,
     * whatever its outcome: a send's local registrations (taken for its
     * puts), a receive's remote-write ones on paths that fail it without
     * mdr_recv_finish.  Every caller completes a request only once no put
     * of it is in flight.  Held past this point they would stay
     * referenced, hence never evicted, until the user collects the
     * request. */
    if (req->has_reg)
        mdr_rndv_reg_release(req);
    if (req->type == MDR_REQ_SEND) {
        req->ctx->active_sends--;
        req->info.msg_id = mdr_cancel_msg_id(req);
        if (status == MADRAIL_OK || status == MADRAIL_ERR_TRUNCATE)
            req->info.length = req->len;
    }
    if (req->cb) {
        req->cb(req, &req->info, req->cb_arg);
        mdr_req_release(req);
    } else if (req->freed_by_user) {
        mdr_req_release(req);
    }
}

/* ---------------- sends: data that may not have left ---------------- */

void mdr_send_track(mdr_req_t *req, int rail, int sequenced)
{
    if (rail >= 0) {
        uint8_t bit = (uint8_t)(1u << rail);
        req->unsent_rails |= bit;
        if (sequenced) {
            req->seq_unsent |= bit;
            req->seq_rails |= bit;
            req->seq_last = (uint8_t)(rail + 1);
        }
    }
    if (!req->on_unsent && !req->complete) {
        req->on_unsent = 1;
        mdr_list_push_tail(&req->ctx->unsent, &req->unsent_link);
    }
}

void mdr_send_fail(mdr_req_t *req, madrail_status_t status)
{
    int j, busy = 0;

    if (req->complete)
        return;
    mdr_unsent_del(req);
    if (req->queued) {
        req->queued = 0;
        mdr_list_del(&req->link);
    }
    /* puts not issued never will be; those in flight are still the
     * driver's and their completion finishes the send (with this status) */
    for (j = 0; j < req->nputs; j++) {
        if (req->puts[j].state == MDR_PUT_IDLE) {
            mdr_put_set(&req->puts[j], MDR_PUT_DONE);
            req->puts_left--;
        } else if (req->puts[j].state == MDR_PUT_INFLIGHT) {
            busy = 1;
        }
    }
    if (busy) {
        if (req->info.status == MADRAIL_OK)
            req->info.status = status;
        req->proto_done = 0;
        return;
    }
    mdr_req_complete(req, status);
}

/* "tcp:eth0, tcp:eth1": the names of the rails in bits. */
static void mdr_rail_names(const mdr_ctx_t *ctx, unsigned bits, char *buf, size_t len)
{
    size_t off = 0;
    int r;

    buf[0] = '\0';
    for (r = 0; r < ctx->nrails && off < len; r++)
        if (bits & (1u << r)) {
            int k = snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
                             ctx->rails[r].attr.name);
            if (k > 0)
                off += (size_t)k;
        }
}

/* Some of req's data was lost with a rail before it left.  Three cases:
 *  - no sequenced message of it was lost (a FIN): the send fails;
 *  - its sequenced messages went only on rails whose connection was never
 *    made: nothing of it reached the peer, it is sent again on the others;
 *  - else the peer misses a sequence number for good, and every later
 *    message to it would wait behind the hole, unmatched, while its
 *    sender was told success: the peer is given up (all its requests
 *    fail, later sends to it fail at once). */
static void mdr_send_lost(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    char names[MDR_MAX_RAILS * 24];
    unsigned hole = req->lost_rails & req->seq_unsent;

    mdr_rail_names(ctx, req->lost_rails, names, sizeof(names));
    if (hole == 0) {
        int reachable = mdr_peer_reachable(peer);
        mdr_error("peer %u rail %s: send of %zu bytes (tag %#llx) failed: the rail failed "
                  "before its data left this process%s",
                  req->peer, names, req->len, (unsigned long long)req->tag,
                  reachable ? "" : "; no rail left to the peer");
        mdr_send_fail(req, reachable ? MADRAIL_ERR_RAIL_DOWN : MADRAIL_ERR_PEER_UNREACHABLE);
        return;
    }
    if ((req->lost_rails & ~req->never_rails) == 0 && (req->seq_rails & ~req->never_rails) == 0 &&
        mdr_peer_reachable(peer)) {
        req->unsent_rails = req->seq_unsent = req->seq_rails = 0;
        req->lost_rails = req->never_rails = 0;
        if (mdr_send_restart(req) == MADRAIL_OK) {
            mdr_warn("peer %u rail %s: connection never made; send of %zu bytes (tag %#llx) "
                     "sent again on the other rails",
                     req->peer, names, req->len, (unsigned long long)req->tag);
            return;
        }
    }
    mdr_error("peer %u rail %s: message %llu (%zu bytes, tag %#llx) was lost before it left "
              "this process; the peer's later messages could never be matched in order: "
              "failing every request to it",
              req->peer, names, (unsigned long long)req->seq, req->len,
              (unsigned long long)req->tag);
    {
        uint64_t id = req->id;
        mdr_peer_give_up(peer);
        /* peer_fail leaves a send whose puts are in flight; it may also
         * have completed (and, with a callback, released) req */
        if (mdr_req_lookup(ctx, id) == req)
            mdr_send_fail(req, MADRAIL_ERR_PEER_UNREACHABLE);
    }
}

/* Clear the bits of rails whose ep has nothing unsent left; note failed
 * ones.  Completes req when its protocol is over and nothing is unsent;
 * leaves losses to the caller.  Returns 1 when req completed. */
static int mdr_send_settle(mdr_req_t *req)
{
    unsigned bits = req->unsent_rails;

    if (bits) {
        mdr_ctx_t *ctx = req->ctx;
        mdr_peer_t *peer = ctx->peers[req->peer];
        do {
            int r = __builtin_ctz(bits);
            uint8_t bit = (uint8_t)(1u << r);
            mdr_peer_rail_t *pr = &peer->rails[r];
            bits &= bits - 1;
            if (pr->down && !pr->replay_ok) {
                req->lost_rails |= bit;
            } else if (pr->down || pr->ep == NULL ||
                       ctx->rails[r].ops->ep_unsent(pr->ep) == 0) {
                /* down with replay_ok: what it held unsent goes again (replay.c) */
                req->unsent_rails &= (uint8_t)~bit;
                req->seq_unsent &= (uint8_t)~bit;
            }
        } while (bits);
    }
    if (req->lost_rails || req->unsent_rails || req->unsent_txq) {
        if (!req->on_unsent) { /* watched from progress from now on */
            req->on_unsent = 1;
            mdr_list_push_tail(&req->ctx->unsent, &req->unsent_link);
        }
        return 0;
    }
    mdr_unsent_del(req);
    if (!req->proto_done)
        return 0;
    mdr_req_complete(req, MADRAIL_OK);
    return 1;
}

void mdr_send_done(mdr_req_t *req)
{
    mdr_cancel_kick(req); /* a cancel asked while fragments were going out */
    req->proto_done = 1;
    mdr_send_settle(req);
}

void mdr_send_watch(mdr_req_t *req)
{
    mdr_cancel_kick(req);
    mdr_send_settle(req); /* completes nothing: the protocol is not over */
}

void mdr_send_rail_lost(mdr_peer_rail_t *pr, int never_connected)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    uint8_t bit = (uint8_t)(1u << pr->rail);
    mdr_list_t *it;

    mdr_list_for_each(it, &ctx->unsent) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, unsent_link);
        if (req->peer != pr->peer->index || !(req->unsent_rails & bit) ||
            (req->lost_rails & bit))
            continue;
        if (pr->replay_ok) {
            /* its messages there were copied and go again on another rail:
             * nothing of it is lost (replay.c) */
            req->unsent_rails &= (uint8_t)~bit;
            req->seq_unsent &= (uint8_t)~bit;
            continue;
        }
        req->lost_rails |= bit;
        if (never_connected)
            req->never_rails |= bit;
    }
}

void mdr_send_txq_sent(mdr_ctx_t *ctx, uint64_t sreq_id, int rail, int sequenced)
{
    mdr_req_t *req = mdr_req_lookup(ctx, sreq_id);
    if (!req || req->type != MDR_REQ_SEND || req->complete || req->unsent_txq == 0)
        return;
    req->unsent_txq--;
    mdr_send_track(req, rail, sequenced);
    mdr_cancel_kick(req); /* a cancel asked while its RTS waited in the txq */
}

void mdr_send_txq_lost(mdr_ctx_t *ctx, uint64_t sreq_id, int rail, int part)
{
    mdr_req_t *req = mdr_req_lookup(ctx, sreq_id);
    if (!req || req->type != MDR_REQ_SEND || req->complete || req->unsent_txq == 0)
        return;
    if (part >= 0 && mdr_rndv_fin_lost(req, part)) {
        req->unsent_txq--; /* after: the send must not look over in between */
        return;
    }
    req->unsent_txq--;
    req->lost_rails |= (uint8_t)(1u << rail); /* a FIN: never sequenced */
    mdr_send_track(req, -1, 0);
}

int mdr_send_check_all(mdr_ctx_t *ctx)
{
    mdr_list_t todo, *it;
    int n = 0;

    /* Work on a detached list: a completion may call back into the user,
     * who may start, wait for or release other sends, and a lost message
     * may fail a whole peer. */
    mdr_list_init(&todo);
    while ((it = mdr_list_pop_head(&ctx->unsent)))
        mdr_list_push_tail(&todo, it);
    while ((it = mdr_list_pop_head(&todo))) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, unsent_link);
        mdr_list_push_tail(&ctx->unsent, it);
        if (mdr_send_settle(req)) {
            n++;
        } else if (req->lost_rails) {
            mdr_send_lost(req);
            n++;
        }
    }
    return n;
}

/* A send whose protocol is over may only wait for a driver's coalescing
 * queue: hand that to the network and look again, before paying for a
 * whole progress (which also polls every rail for input). */
static void mdr_send_push(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    unsigned bits = req->unsent_rails;
    int r;

    for (r = 0; bits != 0; r++, bits >>= 1)
        if ((bits & 1u) && (ctx->rails[r].attr.caps & MDR_RAIL_CAP_FLUSH))
            ctx->rails[r].ops->flush(ctx->rails[r].rail);
    mdr_send_settle(req);
}

/* A completed send may sit in a driver's coalescing buffer: push it out
 * before the application goes on (it may block elsewhere next). */
MDR_HOT static void mdr_req_flush(const mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    int r;
    if (req->type != MDR_REQ_SEND)
        return;
    for (r = 0; r < ctx->nrails; r++)
        if (ctx->rails[r].attr.caps & MDR_RAIL_CAP_FLUSH)
            ctx->rails[r].ops->flush(ctx->rails[r].rail);
}

madrail_status_t madrail_test(madrail_request_t *req_p, int *flag_p, madrail_info_t *info_p)
{
    mdr_req_t *req;
    madrail_status_t st;

    if (!req_p || !*req_p || !flag_p)
        return MADRAIL_ERR_INVALID;
    req = *req_p;
    if (!req->complete && req->proto_done)
        mdr_send_push(req);
    if (!req->complete) {
        madrail_progress(req->ctx);
        if (!req->complete) {
            *flag_p = 0;
            return MADRAIL_OK;
        }
    }
    st = req->info.status;
    if (info_p)
        *info_p = req->info;
    mdr_req_flush(req);
    mdr_req_release(req);
    *req_p = NULL;
    *flag_p = 1;
    return st;
}

MDR_HOT madrail_status_t madrail_wait(madrail_request_t *req_p, madrail_info_t *info_p)
{
    mdr_req_t *req;
    madrail_status_t st;
    unsigned idle = 0;

    if (!req_p || !*req_p)
        return MADRAIL_ERR_INVALID;
    req = *req_p;
    while (!req->complete) {
        if (req->proto_done) {
            mdr_send_push(req);
            if (req->complete)
                break;
        }
        /* Spin, but give the core away after a run of idle polls: with more
         * processes than cores (tests, shared nodes) the peer we wait for
         * may need this core to make progress. */
        if (madrail_progress(req->ctx) == 0 && ++idle == MDR_WAIT_SPINS) {
            sched_yield();
            idle = 0;
        }
    }
    st = req->info.status;
    if (info_p)
        *info_p = req->info;
    mdr_req_flush(req);
    mdr_req_release(req);
    *req_p = NULL;
    return st;
}

madrail_status_t madrail_request_set_callback(madrail_request_t req, madrail_callback_t cb,
                                              void *arg)
{
    if (!req || !cb)
        return MADRAIL_ERR_INVALID;
    if (req->complete) {
        cb(req, &req->info, arg);
        mdr_req_release(req);
        return MADRAIL_OK;
    }
    req->cb = cb;
    req->cb_arg = arg;
    return MADRAIL_OK;
}

MDR_HOT madrail_status_t madrail_send(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                                      size_t len, uint64_t tag, unsigned flags)
{
    madrail_request_t req;
    uint64_t msg_id;
    madrail_status_t st = madrail_isend_nb(ctx, peer, buf, len, tag, flags, &req, &msg_id);
    if (st != MADRAIL_OK || req == NULL) /* NULL: it left in the call */
        return st;
    return madrail_wait(&req, NULL);
}

MDR_HOT madrail_status_t madrail_recv(madrail_context_t ctx, madrail_peer_t src, void *buf, size_t len,
                                      uint64_t tag, uint64_t ignore, madrail_info_t *info_p)
{
    madrail_request_t req;
    madrail_status_t st = madrail_irecv(ctx, src, buf, len, tag, ignore, &req);
    if (st != MADRAIL_OK)
        return st;
    return madrail_wait(&req, info_p);
}

MDR_HOT void mdr_recv_finish(mdr_req_t *req, madrail_status_t st)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->info.source);
    mdr_rndv_reg_release(req);
    if (peer && peer->rfs_out == req)
        peer->rfs_out = NULL;
    if (req->peer != MADRAIL_ANY_PEER) {
        peer = mdr_peer_get(req->ctx, req->peer);
        if (peer && peer->rfs_out == req)
            peer->rfs_out = NULL;
    }
    mdr_req_complete(req, st);
}

void mdr_sendq_add(mdr_peer_t *peer, mdr_req_t *req)
{
    if (!req->queued) {
        req->queued = 1;
        mdr_list_push_tail(&peer->sendq, &req->link);
        mdr_peer_activate(peer);
    }
}

void mdr_sendq_del(mdr_req_t *req)
{
    if (req->queued) {
        req->queued = 0;
        mdr_list_del(&req->link);
    }
}

int mdr_send_progress(mdr_req_t *req)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);
    if (req->rndv == MDR_RNDV_PUTTING)
        return mdr_rndv_issue_puts(req);
    if (req->rndv == MDR_RNDV_NONE && req->frag_off <= req->len)
        return mdr_eager_send(peer, req);
    mdr_sendq_del(req);
    return 0;
}

madrail_status_t mdr_send_restart(mdr_req_t *req)
{
    mdr_peer_t *peer = mdr_peer_get(req->ctx, req->peer);

    if (req->rndv == MDR_RNDV_NONE) { /* eager fragments: all again, same sequence number */
        req->frag_off = 0;
        mdr_ack_set(req, ((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed) ? MDR_ACK_WAIT
                                                                                  : MDR_ACK_NONE);
        req->proto_done = 0;
        mdr_sendq_add(peer, req);
        return MADRAIL_OK;
    }
    if (req->rndv == MDR_RNDV_RTS_SENT) /* the RTS: no CTS can have come */
        return mdr_rndv_send_rts(peer, req);
    return MADRAIL_ERR_RAIL_DOWN; /* RFS_DATA went with puts: not repeatable here */
}

madrail_status_t mdr_send_launch(mdr_peer_t *peer, mdr_req_t *req, madrail_request_t *req_p)
{
    madrail_status_t st = mdr_send_start(peer, req);

    if (st != MADRAIL_OK) {
        if (!req->complete)
            peer->ctx->active_sends--;
        mdr_req_release(req);
        return st;
    }
    *req_p = req;
    return MADRAIL_OK;
}

madrail_status_t mdr_send_start(mdr_peer_t *peer, mdr_req_t *req)
{
    mdr_ctx_t *ctx = peer->ctx;
    /* an announced message goes in its own first message (RTS or EAGER_AM)
     * with its header: never into an offer, whose RFS_DATA cannot carry it */
    mdr_rfs_t *offer = req->has_am ? NULL : mdr_rfs_take(peer, req);

    req->seq = peer->next_send_seq++;
    if (req->has_am) {
        if (req->am_len + req->len <= ctx->eager_max) { /* one EAGER_AM (eager.c) */
            mdr_eager_send(peer, req);
            return MADRAIL_OK;
        }
        return mdr_rndv_send_rts(peer, req);
    }
    if (offer) {
        req->rfs_consumed = 1;
        req->peer_req_id = offer->rreq_id;
    }
    if (req->len < ctx->cfg.rndv_thresh || (offer && req->len <= ctx->eager_max)) {
        free(offer);
        if ((req->flags & MADRAIL_SEND_SYNC) && !req->rfs_consumed)
            mdr_ack_set(req, MDR_ACK_WAIT);
        mdr_eager_send(peer, req);
        return MADRAIL_OK;
    }
    if (offer)
        return mdr_rfs_send_data(peer, req, offer);
    return mdr_rndv_send_rts(peer, req);
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
mdr_req_t *mdr_req_for_reply(mdr_peer_rail_t *pr, const char *what, uint64_t id, int type)
{
    mdr_req_t *req = mdr_req_lookup(pr->peer->ctx, id);

    if (!req || req->type != type || req->complete) {
        mdr_peer_proto_fail(pr, "%s for unknown %s %llx", what,
                            type == MDR_REQ_SEND ? "send" : "receive", (unsigned long long)id);
        return NULL;
    }
    if (mdr_req_bound_peer(req) != pr->peer->index) {
        madrail_peer_t b = mdr_req_bound_peer(req);
        if (b == MADRAIL_ANY_PEER)
            mdr_peer_proto_fail(pr, "%s for receive %llx, which no peer has matched yet", what,
                                (unsigned long long)id);
        else
            mdr_peer_proto_fail(pr, "%s for %s %llx, which is bound to peer %u", what,
                                type == MDR_REQ_SEND ? "send" : "receive",
                                (unsigned long long)id, b);
        return NULL;
    }
    return req;
}

void mdr_state_illegal(mdr_ctx_t *ctx, const char *machine, uint64_t id, const char *from,
                       const char *to)
{
    ctx->state_errors++;
    mdr_error("request %llx: %s state %s -> %s is not a transition of that machine; "
              "state kept (a bug in madrail, please report it)",
              (unsigned long long)id, machine, from, to);
}
