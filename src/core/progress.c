/*
 * Progress: poll every rail (which runs the receive upcalls), then let
 * each peer with queued work send what its credits allow, then settle the
 * sends whose data may still sit in a driver, then look for silent rails
 * (watch.c, a few times per timeout).  Only peers on ctx->active
 * are visited, so an idle job costs the rail polls and nothing per peer.
 * A pass that delivered something and has nothing to send leaves that
 * upkeep to the next pass (below).
 * Progress never recurses: an upcall or a completion callback that calls
 * madrail_progress returns at once.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/clock.h"
#include "util/compiler.h"

/* A peer on ctx->active: its deferred failure, its queued control
 * messages, then its sends with fragments or puts left (after the txq:
 * sequenced messages start in order, ctrl.c). */
static int mdr_peer_progress(mdr_peer_t *peer)
{
    mdr_list_t *it, *tmp;
    int n;

    if (peer->unreachable_pending) {
        peer->unreachable_pending = 0;
        mdr_peer_fail(peer, MADRAIL_ERR_PEER_UNREACHABLE);
    }
    n = mdr_ctrl_txq_progress(peer);
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

MDR_HOT int madrail_progress(madrail_context_t ctx)
{
    int r, n = 0;
    mdr_list_t *it, *tmp;

    if (!ctx || ctx->in_progress)
        return 0;
    ctx->in_progress = 1;
    if (ctx->cfg.rail_timeout > 0)
        ctx->pass_coarse_ns = mdr_time_coarse_ns(); /* one clock read a pass (watch.c) */
    for (r = 0; r < ctx->nrails; r++)
        n += ctx->rails[r].ops->progress(ctx->rails[r].rail);
    /* A pass that delivered something returns to the application at once
     * when nothing waits to be sent: the upkeep that only keeps time (rails
     * gone silent, rejoins, retired peers) is left to the next pass, which
     * the application's next wait makes while the next message is on its
     * way, off this one's path (a ping-pong over ucx:tcp: -0.10 and
     * -0.03 us a message in two runs, docs/performance.md).  Never twice
     * in a row (test_core_loop, upkeep under a stream), so a stream
     * that delivers on every pass still gets it every other pass. */
    if (n > 0 && !ctx->tail_deferred && mdr_list_empty(&ctx->active) &&
        mdr_list_empty(&ctx->unsent)) {
        ctx->tail_deferred = 1;
        ctx->in_progress = 0;
        return n;
    }
    ctx->tail_deferred = 0;
    if (!mdr_list_empty(&ctx->retired))
        mdr_peer_reap_retired(ctx);
    mdr_list_for_each_safe(it, tmp, &ctx->active) {
        mdr_peer_t *peer = mdr_container_of(it, mdr_peer_t, active_link);
        n += mdr_peer_progress(peer);
    }
    if (!mdr_list_empty(&ctx->unsent))
        n += mdr_send_check_all(ctx);
    mdr_watch_progress(ctx); /* rails silent past MADRAIL_RAIL_TIMEOUT */
    mdr_rejoin_progress(ctx); /* rails that went down, dialled again */
    ctx->in_progress = 0;
    return n;
}
