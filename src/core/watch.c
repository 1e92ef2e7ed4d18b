/*
 * Rail liveness.  A rail can die without any driver noticing: under an
 * nftables drop rule the link stays up and TCP retransmits for minutes
 * without an error.  So a rail is also taken down for a peer when it gives
 * no sign of life for MADRAIL_RAIL_TIMEOUT while something waits on that
 * peer (a request bound to it, a wildcard receive posted (every peer),
 * queued messages, a message half arrived),
 * or on that rail (messages sent on it whose credit has not come back:
 * a small send is over once it left, so a black hole that swallows it
 * leaves nobody waiting but its copy in replay.c; the PONG to our PING
 * carries the owed credits back, so an idle healthy rail stops being
 * watched after one PING).
 *
 * What counts as life: any message received on the rail, and the
 * transport's own acknowledgements (ep_link_quiet in rails/rail.h: how
 * long bytes of ours have waited for one).  The second is what keeps a
 * healthy but busy rail alive: a big put on a slow link holds our PONGs
 * behind it for seconds, and a peer that stops calling progress (a long
 * computation) sends no PONG and returns no credit, but in both cases its
 * transport keeps acknowledging.  A black hole acknowledges nothing.
 * Drivers that cannot tell (-1) are never timed out: their errors alone
 * take them down, and a slow peer process is not a dead link.
 *
 * The rule, exactly: while something waits on the peer, a rail is taken
 * down the moment its last sign of life is MADRAIL_RAIL_TIMEOUT old.  The
 * signs are a message received on it and the transport acknowledging our
 * bytes or having none waiting for an acknowledgement.  So on a busy rail
 * the clock runs from the last acknowledgement, i.e. from the moment the
 * rail stopped delivering; on an idle rail, from when bytes (a PING, or
 * traffic) started waiting unacknowledged: an idle rail is not asked to
 * deliver anything before that.  Scans are timed to the earliest deadline
 * (not merely every eighth of the timeout, which made detection up to an
 * eighth late), and just after a PING (a 64th of the timeout) so that the
 * transport starts timing it when it leaves, not a scan later.
 *
 * A rail nothing was received on for a quarter of the timeout gets a PING
 * (a reserved slot: it needs no credit, so credit starvation cannot stop
 * it); the peer answers PONG at once.  A PING is what makes a silent
 * black hole visible to the transport (bytes waiting with no ACK).  At most
 * MDR_PING_MAX PINGs are unanswered (the reserved slots are counted for
 * that); the second goes only once the first waited half the timeout, so a
 * black hole that starts after a first PING was acknowledged by a peer
 * that does not progress is still probed.  A hole that opens on an idle
 * rail is therefore found within a quarter plus a 64th of the timeout
 * after the last message received, plus the timeout.
 *
 * A rail found silent is closed as a driver error would close it: its ep
 * is destroyed (no completion of it can come any more) and its puts in
 * flight are failed here, so the rendezvous re-puts them on another rail
 * or, with none left, the peer fails with its requests (peer.c).
 *
 * Scans run from progress, at least every eighth of the timeout and at
 * the deadlines above, over the peer table: a cost per scan of the
 * request table plus the peers, paid some ten times a second (at most 64
 * a timeout while PINGs leave), never per message.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/clock.h"
#include "util/compiler.h"

/* How far the coarse clock may lag the precise one (one tick, HZ >= 100). */
#define MDR_WATCH_COARSE_SLACK_NS 10000000ull

static void mdr_watch_ping(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;

    (void)hdr;
    (void)len;
    if (pr->pongs_owed >= MDR_PING_MAX) {
        mdr_peer_proto_fail(pr, "PING while %u PONGs to earlier ones are owed (at most %d "
                            "PINGs go unanswered)", pr->pongs_owed, MDR_PING_MAX);
        return;
    }
    if (mdr_ctrl_send_reserved(pr, MDR_MSG_PONG) == MADRAIL_OK) {
        ctx->rails[pr->rail].stats.pongs++;
        return;
    }
    pr->pongs_owed++; /* sent by the next scan */
}

/* The peer gave up its connection on rail g.rail (a timeout, a link event,
 * what it learned from us): fence ours now, before anything it sends
 * after this on this rail (a FIN of a stripe it put again here) can
 * complete a receive whose buffer the dead connection might still write
 * into. */
static void mdr_watch_gone(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_gone_hdr_t g;
    mdr_peer_rail_t *op;

    (void)len;
    memcpy(&g, hdr, sizeof(g));
    if (g.rail >= (uint32_t)ctx->nrails || g.rail == (uint32_t)pr->rail) {
        mdr_peer_proto_fail(pr, "GONE for rail %u (it came on rail %d, we have %d)", g.rail,
                            pr->rail, ctx->nrails);
        return;
    }
    op = &pr->peer->rails[g.rail];
    if (!op->ep || op->probing)
        return; /* nothing of the old connection left, or a new one already */
    if (!op->down) {
        mdr_warn("rail %s peer %u: the peer gave this rail up: closing it",
                 ctx->rails[g.rail].attr.name, pr->peer->index);
        mdr_watch_rail_close(op, "the peer gave it up");
    } else if (op->close_pending) {
        mdr_watch_close_now(op);
    }
}

void mdr_watch_tell_gone(mdr_peer_rail_t *pr)
{
    mdr_peer_t *peer = pr->peer;
    mdr_gone_hdr_t g;
    int r;

    if (peer->ctx->finalizing || peer->broken)
        return;
    for (r = 0; r < peer->ctx->nrails; r++) {
        if (r == pr->rail || !mdr_peer_rail_usable(&peer->rails[r]))
            continue;
        memset(&g, 0, sizeof(g));
        g.h.type = MDR_MSG_GONE;
        g.h.len = sizeof(g);
        g.rail = (uint32_t)pr->rail;
        (void)mdr_ctrl_send(peer, r, &g.h, sizeof(g), NULL, 0);
    }
}

static void mdr_watch_pong(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    (void)hdr;
    (void)len;
    if (pr->pings_out == 0) {
        /* a rail that just came back forgets the PINGs it had out; their
         * PONGs may still come, on the new connection (seen once under a
         * flapping link: the rail closed for good on the first of them) */
        if (pr->stale_pongs > 0) {
            pr->stale_pongs--;
            return;
        }
        mdr_peer_proto_fail(pr, "PONG without a PING");
        return;
    }
    pr->pings_out--;
}

madrail_status_t mdr_watch_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t ping = {"PING", sizeof(mdr_hdr_t), 0, 0, mdr_watch_ping, 1};
    static const mdr_ctrl_handler_t pong = {"PONG", sizeof(mdr_hdr_t), 0, 0, mdr_watch_pong, 1};
    static const mdr_ctrl_handler_t gone = {"GONE", sizeof(mdr_gone_hdr_t), 0, 0,
                                            mdr_watch_gone, 0};
    madrail_status_t st = mdr_ctrl_register(ctx, MDR_MSG_PING, &ping);

    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_PONG, &pong);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_GONE, &gone);
    return st;
}

/* Every message received stamps its rail, so the stamp is the cheap
 * clock (about 7 ns against 32-48 for the precise one, on the path from a
 * message's arrival to its receive's completion), moved forward by the
 * tick it may lag by: a stamp is then never earlier than the arrival, so a
 * rail is never judged silent early, only up to a tick late.  A stamp
 * ahead of a scan's precise clock is taken as that clock (mdr_watch_rail). */
MDR_HOT void mdr_watch_rx(mdr_peer_rail_t *pr)
{
    /* upcalls run inside a progress pass, which read the coarse clock as
     * it started: the stamp is early by at most that pass */
    if (pr->peer->ctx->cfg.rail_timeout > 0)
        pr->rx_ns = pr->life_ns = pr->peer->ctx->pass_coarse_ns + MDR_WATCH_COARSE_SLACK_NS;
}

typedef struct {
    uint64_t id;
    int part;
} mdr_lost_put_t;

/* Destroy pr's ep (from progress only) and hand back the puts in flight
 * on it, which its driver will never report now: *lost_p (free it), their
 * count returned.  Puts past a failed allocation stay in flight (logged:
 * their send waits). */
static size_t mdr_watch_drop_ep(mdr_peer_rail_t *pr, mdr_lost_put_t **lost_p)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    mdr_lost_put_t *lost = NULL;
    size_t nlost = 0, cap = 0;
    uint32_t i;
    mdr_ep_t *ep = pr->ep;

    for (i = 0; i < ctx->reqtab_cap; i++) {
        mdr_req_t *req = ctx->reqtab[i];
        int j;
        if (!req || req->complete || req->type != MDR_REQ_SEND || req->peer != peer->index)
            continue;
        for (j = 0; j < req->nputs; j++) {
            if (req->puts[j].state != MDR_PUT_INFLIGHT || req->puts[j].rail != pr->rail)
                continue;
            if (nlost == cap) {
                size_t nc = cap ? 2 * cap : 8;
                void *nl = realloc(lost, nc * sizeof(*lost));
                if (!nl) {
                    mdr_error("rail %s peer %u: no memory to track a put in flight on a "
                              "closed connection: its send may wait for good",
                              ctx->rails[pr->rail].attr.name, peer->index);
                    break;
                }
                lost = nl;
                cap = nc;
            }
            lost[nlost].id = req->id;
            lost[nlost].part = j;
            nlost++;
        }
    }
    pr->ep = NULL;
    ctx->rails[pr->rail].ops->ep_fence(ep); /* nothing of it may land later (rail.h) */
    ctx->rails[pr->rail].ops->ep_destroy(ep);
    *lost_p = lost;
    return nlost;
}

/* Fail the puts mdr_watch_drop_ep handed back: the rendezvous puts them
 * again on another rail, or its send fails. */
static void mdr_watch_fail_puts(mdr_peer_rail_t *pr, mdr_lost_put_t *lost, size_t nlost)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    size_t k;

    for (k = 0; k < nlost; k++) {
        mdr_req_t *req = mdr_req_lookup(ctx, lost[k].id);
        mdr_put_op_t *op;
        if (!req || req->complete || lost[k].part >= req->nputs)
            continue;
        op = &req->puts[lost[k].part];
        if (op->state == MDR_PUT_INFLIGHT && op->rail == pr->rail)
            op->comp.cb(&op->comp, MADRAIL_ERR_RAIL_DOWN);
    }
    free(lost);
}

void mdr_watch_rail_close(mdr_peer_rail_t *pr, const char *reason)
{
    mdr_lost_put_t *lost;
    size_t nlost;

    if (pr->down || !pr->ep)
        return;
    nlost = mdr_watch_drop_ep(pr, &lost);
    mdr_ep_failed_upcall(pr, MADRAIL_ERR_RAIL_DOWN, reason);
    mdr_watch_fail_puts(pr, lost, nlost);
}

static void mdr_watch_close_one(mdr_peer_rail_t *pr, void *arg);

void mdr_watch_close_later(mdr_peer_rail_t *pr)
{
    if (pr->close_pending || !pr->ep)
        return;
    pr->close_pending = 1;
    pr->peer->ctx->nclose_pending++;
}

/* Close the connections of rails taken down inside a driver upcall (a
 * protocol error): the peer's transport then sees them end, so the peer
 * takes the rail down as well instead of sending on into a connection
 * whose every message we drop. */
void mdr_watch_close_now(mdr_peer_rail_t *pr)
{
    mdr_watch_close_one(pr, NULL);
}

static void mdr_watch_close_one(mdr_peer_rail_t *pr, void *arg)
{
    mdr_lost_put_t *lost;
    size_t nlost;

    (void)arg;
    if (!pr->close_pending)
        return;
    pr->close_pending = 0;
    if (!pr->down || !pr->ep || pr->probing)
        return; /* up again on a new connection, or closed already */
    nlost = mdr_watch_drop_ep(pr, &lost);
    mdr_debug("rail %s peer %u: connection closed after its protocol error",
              pr->peer->ctx->rails[pr->rail].attr.name, pr->peer->index);
    mdr_watch_fail_puts(pr, lost, nlost);
}

static void mdr_watch_close_pending(mdr_ctx_t *ctx)
{
    ctx->nclose_pending = 0;
    mdr_peer_rails_each(ctx, mdr_watch_close_one, NULL);
}

/* Something waits on the peer: a request bound to it (marked by the scan),
 * or messages queued to it or half arrived from it. */
static int mdr_watch_wanted(const mdr_peer_t *peer, uint64_t gen)
{
    return peer->watch_gen == gen || !mdr_list_empty(&peer->txq) ||
           !mdr_list_empty(&peer->sendq) || peer->inflight.count != 0 ||
           peer->rfs_out != NULL || peer->nrfs_wait != 0;
}

/* The rail timeout of pr's path: where the driver knows the transport's
 * own retransmission timeout (ep_link_rto: TCP's RTO without back-off, 200
 * ms at least on Linux), MDR_WATCH_RTO_MULT times it, at least
 * MADRAIL_RAIL_TIMEOUT_MIN and at most MADRAIL_RAIL_TIMEOUT; else
 * MADRAIL_RAIL_TIMEOUT.  A healthy path acknowledges within its RTO (TCP
 * retransmits at it, and a tail loss is probed well before), so silence
 * past it with bytes waiting is a dead path: a black hole is found in a
 * quarter of a second instead of the second the fixed timeout takes. */
#define MDR_WATCH_RTO_MULT 1.25
static uint64_t mdr_watch_timeout(mdr_peer_rail_t *pr, const mdr_rail_slot_t *rs,
                                  uint64_t *rto_p)
{
    const mdr_ctx_t *ctx = pr->peer->ctx;
    uint64_t max = (uint64_t)(ctx->cfg.rail_timeout * 1e9);
    uint64_t floor = (uint64_t)(ctx->cfg.rail_timeout_min * 1e9), t;

    *rto_p = 0;
    if (floor == 0 || floor >= max || rs->ops->ep_link_rto(pr->ep, rto_p) != 0)
        return max;
    t = (uint64_t)((double)*rto_p * MDR_WATCH_RTO_MULT);
    if (t < floor)
        t = floor;
    return t < max ? t : max;
}

/* Watch one rail at a scan: take it down when its last sign of life is a
 * timeout old, PING it when due.  Returns when it next needs a look (its
 * deadline, its next PING, or the transport's wait clock to start just
 * after a PING), UINT64_MAX when nothing is due. */
static uint64_t mdr_watch_rail(mdr_peer_rail_t *pr, uint64_t now, int wanted)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    uint64_t timeout = (uint64_t)(ctx->cfg.rail_timeout * 1e9);
    uint64_t soon = now + timeout / 64, next, due;
    uint64_t quiet, rto;
    char why[240];

    while (pr->pongs_owed && mdr_ctrl_send_reserved(pr, MDR_MSG_PONG) == MADRAIL_OK) {
        pr->pongs_owed--;
        rs->stats.pongs++;
    }
    if (!wanted || rs->ops->ep_link_quiet(pr->ep, &quiet) != 0) {
        pr->life_ns = now; /* nothing to watch: the clock starts when something waits */
        return pr->pongs_owed ? soon : UINT64_MAX;
    }
    timeout = mdr_watch_timeout(pr, rs, &rto); /* after ep_link_quiet: it read the path */
    soon = now + timeout / 64;
    if (quiet > now)
        quiet = now;
    if (pr->life_ns == 0 || pr->life_ns > now) /* > now: a stamp of mdr_watch_rx */
        pr->life_ns = now;
    if (pr->rx_ns > now)
        pr->rx_ns = now;
    if (now - quiet > pr->life_ns) /* the transport was acknowledging until then */
        pr->life_ns = now - quiet;
    if (now - pr->life_ns >= timeout) {
        char lim[96];
        if (rto)
            snprintf(lim, sizeof(lim), "rail timeout %.0f ms: %.2f x the path's RTO %.0f ms, "
                     "MADRAIL_RAIL_TIMEOUT_MIN %g s", (double)timeout / 1e6, MDR_WATCH_RTO_MULT,
                     (double)rto / 1e6, ctx->cfg.rail_timeout_min);
        else
            snprintf(lim, sizeof(lim), "MADRAIL_RAIL_TIMEOUT %g s", ctx->cfg.rail_timeout);
        snprintf(why, sizeof(why),
                 "no sign of life for %.0f ms (%s; %u PING%s unanswered, transport waiting "
                 "%.0f ms for an acknowledgement)",
                 (double)(now - pr->life_ns) / 1e6, lim, pr->pings_out,
                 pr->pings_out == 1 ? "" : "s", (double)quiet / 1e6);
        rs->stats.timeouts++;
        mdr_watch_rail_close(pr, why);
        return UINT64_MAX;
    }
    next = pr->life_ns + timeout; /* the deadline itself, not the scan after it */
    if (pr->pongs_owed && soon < next)
        next = soon;
    if (now - pr->rx_ns >= timeout / 4 &&
        (pr->pings_out == 0 ||
         (pr->pings_out < MDR_PING_MAX && now - pr->ping_ns >= timeout / 2)) &&
        mdr_ctrl_send_reserved(pr, MDR_MSG_PING) == MADRAIL_OK) {
        pr->pings_out++;
        pr->ping_ns = now;
        rs->stats.pings++;
        /* look again as soon as the PING has left (the driver may write it
         * with the next progress): an unacknowledged PING starts the
         * transport's wait clock then, not a scan period later */
        return soon < next ? soon : next;
    }
    if (pr->pings_out == 0)
        due = pr->rx_ns + timeout / 4;
    else if (pr->pings_out < MDR_PING_MAX)
        due = pr->ping_ns + timeout / 2;
    else
        due = UINT64_MAX;
    if (due < soon)
        due = soon; /* due now but not sent (no reserved slot free): retry soon */
    return due < next ? due : next;
}

MDR_HOT void mdr_watch_progress(mdr_ctx_t *ctx)
{
    uint64_t now, gen, next;
    uint32_t i, p;
    int any_wait = 0;

    if (ctx->nclose_pending)
        mdr_watch_close_pending(ctx);
    if (ctx->cfg.rail_timeout <= 0 || ctx->finalizing)
        return;
    /* Every pass asks the cheap clock first (7 ns here against 32-48 for
     * the precise one).  It lags by up to one tick (at most 10 ms at
     * HZ >= 100), so within that of the deadline the precise clock decides:
     * a scan is never late for the coarse clock's sake. */
    if (ctx->pass_coarse_ns + MDR_WATCH_COARSE_SLACK_NS < ctx->watch_next_ns)
        return;
    now = mdr_time_ns();
    if (now < ctx->watch_next_ns)
        return;
    next = now + (uint64_t)(ctx->cfg.rail_timeout * 1e9 / 8);
    gen = ++ctx->watch_gen;
    for (i = 0; i < ctx->reqtab_cap; i++) {
        mdr_req_t *req = ctx->reqtab[i];
        mdr_peer_t *peer;
        if (!req || req->complete)
            continue;
        if (mdr_req_bound_peer(req) == MADRAIL_ANY_PEER) {
            /* a wildcard receive waits on every peer: one whose rails all
             * went silent must be found, or a process whose only sender
             * died would wait for good (mdr_peer_fail then fails it) */
            any_wait |= req->type == MDR_REQ_RECV;
            continue;
        }
        peer = mdr_peer_get(ctx, mdr_req_bound_peer(req));
        if (peer)
            peer->watch_gen = gen;
    }
    for (p = 0; p < ctx->npeers; p++) {
        mdr_peer_t *peer = ctx->peers[p];
        int r, wanted;
        if (!peer || peer->broken)
            continue;
        wanted = any_wait || mdr_watch_wanted(peer, gen);
        for (r = 0; r < ctx->nrails; r++) {
            mdr_peer_rail_t *pr = &peer->rails[r];
            if (pr->ep && !pr->down) {
                /* messages whose credit has not come back wait too: a
                 * small send completes when it leaves, and lost with a
                 * black hole it would otherwise never be looked for */
                uint64_t t = mdr_watch_rail(pr, now, wanted || pr->credits < ctx->cfg.credits);
                if (t < next)
                    next = t;
            }
        }
    }
    ctx->watch_next_ns = next;
}
