/*
 * Peers: a remote process and the rails that reach it.  Peer records are
 * made at peer_add (or when a process we did not know connects to us) and
 * connected rail by rail on first traffic, so a large job pays for the
 * peers it talks to, not for all of them.  This file owns what happens to
 * a peer-rail over its life: connection, the accepted/failed upcalls of
 * the drivers, a rail closed for a protocol error, and the peer failing
 * when no rail is left.
 *
 * Peers are never freed while the user may hold their index, with one
 * exception: a peer that connected to us before we knew it (anonymous) and
 * lost every rail while it held nothing here and before its index was
 * shown to the user (no message of it received, probed or delivered as an
 * active message).  Nobody can know its index, so it is retired at once
 * and its index reused: processes that connect and leave cannot make the
 * peer table grow.  Those that stay are bounded too, once the job size is
 * known (madrail_context_set_job_size, MADRAIL_JOB_SIZE): a connection
 * from an unknown process is refused while the context has the job size
 * plus MADRAIL_PEER_SLACK peers, so a holder of the job key cannot make a
 * process keep a record (and a cap's worth of unexpected messages) for
 * every id it invents (issue 28).
 *
 * A failed ep is never destroyed inside the driver upcall that reported
 * it (the driver is on its stack): it is kept on the peer until finalize,
 * and a retired peer is freed by the next progress.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "util/clock.h"

/* Inbound messages were freed by the caller. */
void mdr_peer_destroy(mdr_ctx_t *ctx, mdr_peer_t *peer)
{
    mdr_list_t *it;
    int r;

    for (r = 0; r < ctx->nrails; r++) {
        if (peer->rails[r].ep)
            ctx->rails[r].ops->ep_destroy(peer->rails[r].ep);
        mdr_replay_reset(&peer->rails[r]);
    }
    while ((it = mdr_list_pop_head(&peer->txq)))
        free(mdr_container_of(it, mdr_txq_item_t, link));
    while ((it = mdr_list_pop_head(&peer->rfs_stored)))
        free(mdr_container_of(it, mdr_rfs_t, link));
    while ((it = mdr_list_pop_head(&peer->dead_eps))) {
        mdr_dead_ep_t *d = mdr_container_of(it, mdr_dead_ep_t, link);
        ctx->rails[d->rail].ops->ep_destroy(d->ep);
        free(d);
    }
    mdr_hash_cleanup(&peer->inflight);
    free(peer);
}

void mdr_peer_rails_each(mdr_ctx_t *ctx, void (*fn)(mdr_peer_rail_t *pr, void *arg),
                         void *arg)
{
    uint32_t p;
    int r;

    for (p = 0; p < ctx->npeers; p++) {
        mdr_peer_t *peer = ctx->peers[p];
        if (peer)
            for (r = 0; r < ctx->nrails; r++)
                fn(&peer->rails[r], arg);
    }
}

/* Free the retired peers (from progress, outside any driver upcall). */
void mdr_peer_reap_retired(mdr_ctx_t *ctx)
{
    mdr_list_t *it;

    while ((it = mdr_list_pop_head(&ctx->retired)))
        mdr_peer_destroy(ctx, mdr_container_of(it, mdr_peer_t, retired_link));
}

/* Nothing refers to peer: the user never saw its index (so no request
 * names it), nothing of it is held, nothing is owed to it.  A peer that
 * sent messages qualifies once they are gone (freed when it failed): it
 * cannot come back under its old counters anyway. */
static int mdr_peer_unused(const mdr_peer_t *peer)
{
    return peer->anonymous && !peer->index_shown && peer->next_send_seq == 0 &&
           peer->inflight.count == 0 && mdr_list_empty(&peer->txq) &&
           mdr_list_empty(&peer->sendq) && mdr_list_empty(&peer->rfs_stored) &&
           peer->rfs_out == NULL;
}

int mdr_peer_retire_unused(mdr_peer_t *peer)
{
    mdr_ctx_t *ctx = peer->ctx;
    int r;

    if (!mdr_peer_unused(peer))
        return 0;
    for (r = 0; r < ctx->nrails; r++)
        if (peer->rails[r].ep && !peer->rails[r].down)
            return 0;
    if (ctx->npeer_free == ctx->peer_free_cap) {
        uint32_t cap = ctx->peer_free_cap ? 2 * ctx->peer_free_cap : 16;
        uint32_t *nf = realloc(ctx->peer_free, cap * sizeof(*nf));
        if (!nf)
            return 0; /* kept: it costs a table slot, nothing else */
        ctx->peer_free = nf;
        ctx->peer_free_cap = cap;
    }
    mdr_debug("peer %u (%016llx) left before it was used: retired", peer->index,
              (unsigned long long)peer->uuid);
    if (mdr_hash_get(&ctx->peer_by_uuid, peer->uuid) == peer)
        mdr_hash_del(&ctx->peer_by_uuid, peer->uuid);
    if (peer->active) {
        peer->active = 0;
        mdr_list_del(&peer->active_link);
    }
    ctx->peers[peer->index] = NULL;
    ctx->peer_free[ctx->npeer_free++] = peer->index;
    mdr_list_push_tail(&ctx->retired, &peer->retired_link);
    return 1;
}

int mdr_peer_rail_failed_unused(mdr_peer_rail_t *pr, const char *reason)
{
    mdr_peer_t *peer = pr->peer;

    if (!mdr_peer_unused(peer))
        return 0;
    mdr_debug("rail %s peer %u (%016llx, not used yet) failed: %s",
              peer->ctx->rails[pr->rail].attr.name, peer->index,
              (unsigned long long)peer->uuid, reason ? reason : "");
    mdr_peer_rail_mark_down(pr, 0); /* not a failover: the peer was never used */
    (void)mdr_peer_retire_unused(peer);
    return 1;
}

/* Create (or find) the peer record for uuid. */
static madrail_status_t mdr_peer_create(mdr_ctx_t *ctx, uint64_t uuid, mdr_peer_t **peer_p)
{
    mdr_peer_t *peer;
    madrail_status_t st;
    int r;

    peer = mdr_hash_get(&ctx->peer_by_uuid, uuid);
    if (peer) {
        *peer_p = peer;
        return MADRAIL_OK;
    }
    if (ctx->npeer_free == 0 && ctx->npeers == ctx->peers_cap) {
        uint32_t cap = ctx->peers_cap ? ctx->peers_cap * 2 : 16;
        mdr_peer_t **np = realloc(ctx->peers, cap * sizeof(*np));
        if (!np)
            return MADRAIL_ERR_NOMEM;
        ctx->peers = np;
        ctx->peers_cap = cap;
    }
    peer = calloc(1, sizeof(*peer));
    if (!peer)
        return MADRAIL_ERR_NOMEM;
    st = mdr_hash_init(&peer->inflight, 16);
    if (st != MADRAIL_OK)
        goto err_free;
    peer->ctx = ctx;
    peer->uuid = uuid;
    peer->index = ctx->npeer_free ? ctx->peer_free[ctx->npeer_free - 1] : ctx->npeers;
    peer->nrails = ctx->nrails;
    mdr_list_init(&peer->txq);
    mdr_list_init(&peer->sendq);
    mdr_list_init(&peer->rfs_stored);
    mdr_list_init(&peer->active_link);
    mdr_list_init(&peer->dead_eps);
    mdr_list_init(&peer->retired_link);
    for (r = 0; r < ctx->nrails; r++) {
        peer->rails[r].peer = peer;
        peer->rails[r].rail = r;
        peer->rails[r].credits = ctx->cfg.credits;
    }
    st = mdr_hash_put(&ctx->peer_by_uuid, uuid, peer);
    if (st != MADRAIL_OK)
        goto err_hash;
    if (ctx->npeer_free)
        ctx->peers[ctx->peer_free[--ctx->npeer_free]] = peer;
    else
        ctx->peers[ctx->npeers++] = peer;
    *peer_p = peer;
    return MADRAIL_OK;

err_hash:
    mdr_hash_cleanup(&peer->inflight);
err_free:
    free(peer);
    return st;
}

madrail_status_t mdr_peer_lookup_or_create(mdr_ctx_t *ctx, uint64_t uuid, mdr_peer_t **peer_p)
{
    return mdr_peer_create(ctx, uuid, peer_p);
}

void mdr_peer_activate(mdr_peer_t *peer)
{
    if (!peer->active) {
        peer->active = 1;
        mdr_list_push_tail(&peer->ctx->active, &peer->active_link);
    }
}

int mdr_peer_rail_usable(const mdr_peer_rail_t *pr)
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
        mdr_peer_rail_mark_down(pr, 1);
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
    free(pr->rx_resent); /* copies of the peer's given-up connection: a new one starts */
    pr->rx_resent = NULL;
    mdr_debug("rail %s peer %u: connecting", ctx->rails[rail].attr.name, peer->index);
    return MADRAIL_OK;
}

void mdr_peer_rail_event(mdr_peer_rail_t *pr, int up, const char *fmt, ...)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    madrail_rail_event_t *ev = &ctx->events[ctx->nevents++ % MDR_EVENTS_MAX];
    struct timespec ts;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    ev->time = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    ev->rail = pr->rail;
    ev->peer = pr->peer->index;
    ev->up = up;
    va_start(ap, fmt);
    vsnprintf(ev->what, sizeof(ev->what), fmt, ap);
    va_end(ap);
}

int mdr_peer_rail_mark_down(mdr_peer_rail_t *pr, int failover)
{
    if (pr->down)
        return 0;
    pr->down = 1;
    pr->down_ns = mdr_time_ns();
    if (failover) {
        pr->peer->ctx->rails[pr->rail].stats.failovers++;
        if (!pr->peer->ctx->finalizing) /* connections closing at the end are no event */
            mdr_peer_rail_event(pr, 0, "%s", pr->last_error[0] ? pr->last_error : "closed");
        mdr_replay_rail_down(pr); /* what may not have arrived goes on another rail */
        /* the copies that fill a hole in the peer's sequence (ours to it
         * and its to us) need slots the messages after the hole hold */
        if (!pr->peer->broken)
            mdr_match_release_held(pr->peer);
    }
    return 1;
}

int mdr_peer_reachable(const mdr_peer_t *peer)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++)
        if (mdr_peer_rail_usable(&peer->rails[r]))
            return 1;
    return 0;
}

void mdr_peer_proto_fail(mdr_peer_rail_t *pr, const char *fmt, ...)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    mdr_error("rail %s peer %u: malformed message: %s; closing this rail to the peer",
              ctx->rails[pr->rail].attr.name, pr->peer->index, why);
    if (!pr->down)
        snprintf(pr->last_error, sizeof(pr->last_error), "malformed message: %s", why);
    mdr_peer_rail_mark_down(pr, 1);
    mdr_watch_close_later(pr); /* so that the peer sees the connection end */
    mdr_send_rail_lost(pr, 0);
    if (!mdr_peer_reachable(pr->peer))
        mdr_peer_fail(pr->peer, MADRAIL_ERR_PEER_PROTO);
}

/* A connection from an unknown process: may it have a peer record?  Not
 * while the context has the job size plus MADRAIL_PEER_SLACK peers (the
 * job size known); refusals are logged once per interval with a count,
 * since a holder of the key can make them at the rate it connects. */
static int mdr_peer_inbound_ok(mdr_ctx_t *ctx, const char *rail, uint64_t uuid)
{
    uint64_t bound = (uint64_t)ctx->job_size + ctx->cfg.peer_slack;
    uint32_t live = ctx->npeers - ctx->npeer_free;
    double now;

    if (ctx->job_size == 0 || live < bound)
        return 1;
    now = mdr_time_sec();
    if (ctx->peer_refused_logged != 0 && now - ctx->peer_refused_logged < 10.0) {
        ctx->peer_refused_unlogged++;
        return 0;
    }
    mdr_warn("rail %s: connection from unknown process %016llx refused: %u peers already, "
             "the job size %u plus MADRAIL_PEER_SLACK=%u (%lu more refused since the last "
             "such line; logged at most once per 10 s)",
             rail, (unsigned long long)uuid, live, ctx->job_size, ctx->cfg.peer_slack,
             ctx->peer_refused_unlogged);
    ctx->peer_refused_logged = now;
    ctx->peer_refused_unlogged = 0;
    return 0;
}

void *mdr_ep_accepted_upcall(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    mdr_rail_slot_t *rs = rail_cookie;
    mdr_ctx_t *ctx = rs->ctx;
    mdr_peer_t *peer = mdr_hash_get(&ctx->peer_by_uuid, uuid);
    mdr_peer_rail_t *pr;

    if (!peer) {
        if (!mdr_peer_inbound_ok(ctx, rs->attr.name, uuid))
            return NULL;
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
    if (!pr->ep && !pr->down && pr->rx_resent) {
        /* the peer re-sent what it had sent on this rail (replay.c): this
         * is that connection, late; what it carries came already */
        mdr_warn("rail %s peer %u: connection refused: the peer gave it up", rs->attr.name,
                 peer->index);
        return NULL;
    }
    if (pr->ep && pr->ep != ep && !pr->down) {
        mdr_warn("rail %s peer %u: second connection refused", rs->attr.name, peer->index);
        return NULL;
    }
    if (pr->down && pr->ep != ep && mdr_replay_settling(peer)) {
        /* copies that name rails by their connection's counters are still
         * on their way: a new connection restarts those counts (replay.c);
         * the peer dials again later */
        mdr_info("rail %s peer %u: reconnection refused until the re-sent messages are "
                 "acknowledged", rs->attr.name, peer->index);
        return NULL;
    }
    if (pr->down && pr->ep != ep) {
        /* the peer reconnected after this rail failed: start afresh on the
         * new connection; the old ep is destroyed at finalize (none when
         * the rail timed out: watch.c destroyed it) */
        if (pr->ep) { /* the failed one, or our own unanswered reconnection attempt */
            mdr_dead_ep_t *d = malloc(sizeof(*d));
            if (!d)
                return NULL;
            d->rail = rs->index;
            d->ep = pr->ep;
            mdr_list_push_tail(&peer->dead_eps, &d->link);
        }
        mdr_rejoin_forget(pr);
        pr->ep = ep;
        mdr_peer_rail_revive(pr);
        mdr_info("rail %s peer %u: reconnected", rs->attr.name, peer->index);
    }
    pr->ep = ep;
    return pr;
}

/* pr, down, has a new connection (pr->ep) the peer uses: the only way up.
 * Everything the old connection carried is settled (peer.c, watch.c):
 * start afresh. */
void mdr_peer_rail_revive(mdr_peer_rail_t *pr)
{
    mdr_ctx_t *ctx = pr->peer->ctx;

    pr->down = 0;
    pr->stale_pongs = MDR_PING_MAX + 1; /* PINGs forgotten here, and a probe's */
    pr->pings_out = pr->pongs_owed = 0;
    pr->rx_ns = pr->life_ns = 0;
    pr->credits = ctx->cfg.credits;
    pr->ret_pending = 0;
    pr->credit_queued = 0;
    mdr_match_rail_reset(pr->peer, pr->rail);
    pr->untracked_sent = 0;
    mdr_replay_reset(pr); /* its counters restart with the connection (replay.c) */
    mdr_health_rail_reset(pr);
    ctx->rails[pr->rail].up_events++;
    pr->up_ns = mdr_time_ns();
    mdr_peer_rail_event(pr, 1, "after %.3f s down",
                        pr->down_ns ? (double)(mdr_time_ns() - pr->down_ns) / 1e9 : 0.0);
    if (!mdr_list_empty(&pr->peer->txq) || !mdr_list_empty(&pr->peer->sendq))
        mdr_peer_activate(pr->peer);
}

void mdr_ep_failed_upcall(void *ep_cookie, madrail_status_t status, const char *reason)
{
    mdr_peer_rail_t *pr = ep_cookie;
    mdr_ctx_t *ctx = pr->peer->ctx;

    if (pr->down) {
        if (mdr_rejoin_probe_failed(pr))
            mdr_debug("rail %s peer %u: reconnection attempt failed: %s",
                      ctx->rails[pr->rail].attr.name, pr->peer->index, reason ? reason : "");
        return;
    }
    if (mdr_peer_rail_failed_unused(pr, reason))
        return;
    if (ctx->finalizing &&
        (status == MADRAIL_ERR_RAIL_DOWN || status == MADRAIL_ERR_RAIL_CONNECT))
        mdr_debug("rail %s peer %u closed: %s", ctx->rails[pr->rail].attr.name,
                  pr->peer->index, reason ? reason : "");
    else if (pr->peer->anonymous && !pr->peer->index_shown)
        /* a process that connected to us, the user never saw it: a line
         * per such process would let one that comes and goes fill the log */
        mdr_debug("rail %s peer %u (unknown process %016llx) failed: %s (%s)",
                  ctx->rails[pr->rail].attr.name, pr->peer->index,
                  (unsigned long long)pr->peer->uuid, reason ? reason : "",
                  madrail_status_str(status));
    else
        mdr_warn("rail %s peer %u failed: %s (%s)", ctx->rails[pr->rail].attr.name,
                 pr->peer->index, reason ? reason : "", madrail_status_str(status));
    snprintf(pr->last_error, sizeof(pr->last_error), "%s (%s)", reason ? reason : "",
             madrail_status_str(status));
    mdr_peer_rail_mark_down(pr, 1);
    /* a connection that was made may hold what the peer must never see
     * land later: it fences its end before a FIN sent after this can
     * complete a receive (watch.c, GONE); one never made held nothing, and
     * the peer's own connection on that rail may be fine */
    if (status != MADRAIL_ERR_RAIL_CONNECT)
        mdr_watch_tell_gone(pr);
    mdr_rejoin_down(pr);
    mdr_send_rail_lost(pr, status == MADRAIL_ERR_RAIL_CONNECT);
    if (status == MADRAIL_ERR_RAIL_CONNECT && pr->untracked_sent && !pr->replay_ok &&
        mdr_peer_reachable(pr->peer)) {
        /* an active message or a protocol reply queued on it is lost for
         * sure and no request can send it again */
        mdr_error("rail %s peer %u: a message no request can send again was lost with the "
                  "connection; failing every request to the peer",
                  ctx->rails[pr->rail].attr.name, pr->peer->index);
        mdr_peer_give_up(pr->peer);
    } else if (!mdr_peer_reachable(pr->peer)) {
        mdr_peer_fail(pr->peer, MADRAIL_ERR_PEER_UNREACHABLE);
        /* an inbound peer that left holding nothing the user can still
         * take: its record goes (freed by the next progress) */
        (void)mdr_peer_retire_unused(pr->peer);
    } else {
        mdr_peer_activate(pr->peer);
    }
}

/* Every rail to peer is gone: fail what depends on it, and free what it
 * made us hold (see the top of this file for what is kept). */
/* Is a peer other than but reachable (not failed, a rail usable)? */
static int mdr_peer_any_reachable(const mdr_ctx_t *ctx, const mdr_peer_t *but)
{
    uint32_t p;

    for (p = 0; p < ctx->npeers; p++) {
        const mdr_peer_t *o = ctx->peers[p];
        if (o != NULL && o != but && !o->broken && mdr_peer_reachable(o))
            return 1;
    }
    return 0;
}

void mdr_peer_fail(mdr_peer_t *peer, madrail_status_t status)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_list_t *it, *tmp;
    uint32_t i;

    {
        char rails[1024];
        size_t off = 0;
        int r;
        rails[0] = 0;
        for (r = 0; r < ctx->nrails && off < sizeof(rails); r++) {
            const mdr_peer_rail_t *pr = &peer->rails[r];
            if (!pr->ep && !pr->down && !pr->last_error[0])
                continue; /* never used with this peer */
            off += (size_t)snprintf(rails + off, sizeof(rails) - off, "%s rail %s: %s",
                                    off ? ";" : "", ctx->rails[r].attr.name,
                                    pr->last_error[0] ? pr->last_error : "down");
        }
        if (peer->anonymous && !peer->index_shown) /* as in mdr_ep_failed_upcall */
            mdr_debug("peer %u (unknown process %016llx) failed (%s);%s", peer->index,
                      (unsigned long long)peer->uuid, madrail_status_str(status),
                      rails[0] ? rails : " no rail was connected");
        else
            mdr_error("peer %u failed: failing its requests (%s);%s", peer->index,
                      madrail_status_str(status), rails[0] ? rails : " no rail was connected");
    }
    mdr_match_peer_release(peer, 0, status == MADRAIL_ERR_PEER_UNREACHABLE);
    for (i = 0; i < (uint32_t)ctx->nrails; i++) /* copies nothing will re-send */
        mdr_replay_reset(&peer->rails[i]);
    /* control messages that can no longer go, and offers it made us */
    while ((it = mdr_list_pop_head(&peer->txq)))
        free(mdr_container_of(it, mdr_txq_item_t, link));
    peer->nreplay = 0;
    while ((it = mdr_list_pop_head(&peer->rfs_stored)))
        free(mdr_container_of(it, mdr_rfs_t, link));
    peer->nrfs_stored = 0;
    mdr_list_for_each_safe(it, tmp, &peer->sendq) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, link);
        int j;
        mdr_list_del(it);
        req->queued = 0;
        /* Puts it could not issue yet never will; puts already issued are
         * still the driver's (their completions, failed, finish the send:
         * its buffer and registrations must outlive them). */
        for (j = 0; j < req->nputs; j++)
            if (req->puts[j].state == MDR_PUT_IDLE) {
                mdr_put_set(&req->puts[j], MDR_PUT_DONE);
                req->puts_left--;
            }
        if (req->rndv != MDR_RNDV_PUTTING || req->puts_left == 0)
            mdr_req_complete(req, status);
        else if (req->info.status == MADRAIL_OK)
            req->info.status = status;
    }
    mdr_list_for_each_safe(it, tmp, &ctx->posted) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, link);
        if (req->peer == peer->index) {
            mdr_list_del(it);
            mdr_req_complete(req, status);
        }
    }
    /* sends waiting for CTS/ACK and receives waiting for FIN from this peer,
     * wildcard receives matched to its messages included (they would wait
     * for good: test/fuzz/crashers strict4) */
    for (i = 0; i < ctx->reqtab_cap; i++) {
        mdr_req_t *req = ctx->reqtab[i];
        int j, busy = 0;
        if (!req || req->complete || mdr_req_bound_peer(req) != peer->index)
            continue;
        for (j = 0; j < req->nputs; j++)
            busy |= req->puts[j].state == MDR_PUT_INFLIGHT; /* the driver still reports these */
        if (busy)
            continue;
        if (req->type == MDR_REQ_SEND || req->matched)
            mdr_req_complete(req, status);
    }
    /* wildcard receives no peer is left to match: they would wait for good */
    if (status == MADRAIL_ERR_PEER_UNREACHABLE && !mdr_peer_any_reachable(ctx, peer)) {
        mdr_list_for_each_safe(it, tmp, &ctx->posted) {
            mdr_req_t *req = mdr_container_of(it, mdr_req_t, link);
            if (req->peer == MADRAIL_ANY_PEER) {
                mdr_list_del(it);
                mdr_req_complete(req, status);
            }
        }
    }
}

void mdr_peer_recv_nomem(mdr_peer_rail_t *pr, const char *what)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    int r;

    mdr_error("rail %s peer %u: out of memory for %s: a message from the peer is lost, and "
              "its later messages could never be matched in order: failing every request to "
              "the peer",
              ctx->rails[pr->rail].attr.name, peer->index, what);
    peer->broken = 1;
    for (r = 0; r < ctx->nrails; r++)
        mdr_peer_rail_mark_down(&peer->rails[r], 1);
    mdr_peer_fail(peer, MADRAIL_ERR_NOMEM);
}

void mdr_peer_give_up(mdr_peer_t *peer)
{
    mdr_ctx_t *ctx = peer->ctx;
    int r;

    peer->broken = 1;
    for (r = 0; r < ctx->nrails; r++)
        mdr_peer_rail_mark_down(&peer->rails[r], 1);
    mdr_peer_fail(peer, MADRAIL_ERR_PEER_UNREACHABLE);
}
