/*
 * Rejoin: a rail that went down to a peer (its connection failed, or the
 * rail timeout found it silent) is tried again in the background and
 * carries traffic again once it answers, with a new connection, fresh
 * credits and new registrations (issue 12 item 4).
 *
 * Only one side dials, the one whose context uuid is the smaller: two
 * reconnections crossing each other would each replace the other's
 * connection at the accepting side and leave neither.  The other side
 * takes the new connection as it takes any reconnection (the accepted
 * upcall in peer.c brings the rail up on it at once).
 *
 * The dialling side does not trust a new connection before the peer spoke
 * on it: the rail stays down (the planner does not use it) while a PING,
 * which needs no credit, waits for its PONG or for anything else the peer
 * sends.  The first message that arrives brings the rail up before it is
 * handled, so nothing the peer sent on it is lost.  A connection that
 * fails, or stays silent for a probe deadline (twice the back-off, 250 ms
 * to a second), is destroyed (only the
 * PING ever went on it) and the next attempt comes after a back-off that
 * doubles from an eighth of MADRAIL_RAIL_REJOIN up to MADRAIL_RAIL_REJOIN
 * itself, so a link that returns is back in use within about that long,
 * and a link that stays down costs one connection attempt per
 * MADRAIL_RAIL_REJOIN per peer.
 *
 * A rail closed for a protocol error (the peer sent garbage) is not
 * rejoined: a new connection would not cure the peer.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/clock.h"
#include "util/compiler.h"

static uint64_t mdr_rejoin_cap_ns(const mdr_ctx_t *ctx)
{
    return (uint64_t)(ctx->cfg.rail_rejoin * 1e9);
}

/* How long a new connection may stay silent: twice the current back-off,
 * at least 250 ms and at most the back-off cap (a second at least).  A
 * connection attempt whose SYN a dead link swallowed is retried by TCP
 * only a second later, then two: with the rail timeout at a quarter of a
 * second (MADRAIL_RAIL_TIMEOUT_MIN) the first attempts fall inside a short
 * outage, and a deadline of twice the cap (it was) left a rail down for
 * seconds after its link returned (seen under cl_mpi_failover's 2 s black
 * hole: no rejoin before the stream ended).  A fresh attempt sends a fresh
 * SYN at once. */
static uint64_t mdr_rejoin_deadline_ns(const mdr_peer_rail_t *pr)
{
    uint64_t max = mdr_rejoin_cap_ns(pr->peer->ctx), d = 2 * pr->rejoin_wait_ns;

    if (max < 1000000000ull)
        max = 1000000000ull;
    if (d < 250000000ull)
        d = 250000000ull;
    return d < max ? d : max;
}

static void mdr_rejoin_arm(mdr_peer_rail_t *pr, uint64_t now)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    uint64_t cap = mdr_rejoin_cap_ns(ctx);

    if (pr->rejoin_wait_ns == 0)
        pr->rejoin_wait_ns = cap / 8 ? cap / 8 : 1;
    else if (pr->rejoin_wait_ns < cap)
        pr->rejoin_wait_ns = 2 * pr->rejoin_wait_ns < cap ? 2 * pr->rejoin_wait_ns : cap;
    pr->rejoin_at_ns = now + pr->rejoin_wait_ns;
}

/* A rail that goes down again soon after it came back (MADRAIL_RAIL_FLAP)
 * is held down before it is dialled again, for the back-off cap times 2 to
 * the flaps in a row, at most MADRAIL_RAIL_HOLD_MAX: a link that bounces
 * costs a failover each time it carries stripes and dies under them, and a
 * rail that was stable for a while starts afresh.  Returns the hold (0:
 * none). */
static uint64_t mdr_rejoin_flap_hold(mdr_peer_rail_t *pr, uint64_t now)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    uint64_t flap = (uint64_t)(ctx->cfg.rail_flap * 1e9);
    uint64_t max = (uint64_t)(ctx->cfg.rail_hold_max * 1e9), hold;
    unsigned k;

    if (flap == 0 || pr->up_ns == 0 || now - pr->up_ns >= flap) {
        pr->flaps = 0;
        pr->hold_ns = 0;
        return 0;
    }
    pr->flaps++;
    hold = mdr_rejoin_cap_ns(ctx);
    for (k = 0; k < pr->flaps && hold < max; k++)
        hold *= 2;
    if (hold > max)
        hold = max;
    pr->hold_ns = hold;
    return hold;
}

void mdr_rejoin_down(mdr_peer_rail_t *pr)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    uint64_t now, hold;

    if (ctx->cfg.rail_rejoin <= 0 || ctx->finalizing || pr->rejoin_armed ||
        ctx->uuid >= pr->peer->uuid || !pr->have_addr)
        return;
    pr->rejoin_armed = 1;
    pr->rejoin_wait_ns = 0;
    now = mdr_time_ns();
    mdr_rejoin_arm(pr, now);
    hold = mdr_rejoin_flap_hold(pr, now);
    if (hold && pr->rejoin_at_ns < now + hold) {
        pr->rejoin_at_ns = now + hold;
        mdr_warn("rail %s peer %u: down again %.2f s after it came back (flap %u in a row): "
                 "held down for %.2f s before it is dialled again (MADRAIL_RAIL_FLAP, "
                 "MADRAIL_RAIL_HOLD_MAX)", ctx->rails[pr->rail].attr.name, pr->peer->index,
                 (double)(now - pr->up_ns) / 1e9, pr->flaps, (double)hold / 1e9);
        mdr_peer_rail_event(pr, 0, "held down %.3f s: flap %u in a row (down %.3f s after "
                            "coming back)", (double)hold / 1e9, pr->flaps,
                            (double)(now - pr->up_ns) / 1e9);
    }
    ctx->nrejoin++;
}

static void mdr_rejoin_disarm(mdr_peer_rail_t *pr)
{
    if (!pr->rejoin_armed)
        return;
    pr->rejoin_armed = 0;
    pr->peer->ctx->nrejoin--;
}

/* Drop the probe connection (from progress only: never inside an upcall). */
static void mdr_rejoin_drop_probe(mdr_peer_rail_t *pr)
{
    mdr_ctx_t *ctx = pr->peer->ctx;

    if (pr->probing && pr->ep)
        ctx->rails[pr->rail].ops->ep_destroy(pr->ep);
    pr->ep = NULL;
    pr->probing = 0;
    pr->probe_failed = 0;
    pr->probe_owed = 0;
}

/* Send the probe's PING.  A driver whose handshake is still under way
 * (ofi, ucx: nothing but the handshake goes before the peer proved the
 * job key) answers "no resource": the PING is owed and the next scans
 * send it; any other error drops the probe until the next attempt. */
static void mdr_rejoin_ping(mdr_peer_rail_t *pr, uint64_t now)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    mdr_hdr_t hdr;
    struct iovec iov;
    madrail_status_t st;

    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_MSG_PING;
    hdr.len = sizeof(hdr);
    iov.iov_base = &hdr;
    iov.iov_len = sizeof(hdr);
    st = rs->ops->ctrl_send(pr->ep, &iov, 1);
    if (st == MADRAIL_ERR_NORESOURCE) {
        pr->probe_owed = 1;
        return;
    }
    pr->probe_owed = 0;
    if (st != MADRAIL_OK) {
        mdr_rejoin_drop_probe(pr);
        mdr_rejoin_arm(pr, now);
        return;
    }
    rs->stats.tx_msgs++;
    rs->stats.tx_bytes += sizeof(hdr);
    rs->stats.pings++;
}

static void mdr_rejoin_try(mdr_peer_rail_t *pr, uint64_t now)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    madrail_status_t st;

    if (pr->ep && pr->close_pending)
        mdr_watch_close_now(pr); /* its puts in flight fail and go elsewhere */
    if (pr->ep) {
        /* the failed connection: its driver may still owe completions of
         * puts on it, so it is kept until finalize, as a replaced one is */
        mdr_dead_ep_t *d = malloc(sizeof(*d));
        if (!d) {
            mdr_rejoin_arm(pr, now);
            return;
        }
        d->rail = pr->rail;
        d->ep = pr->ep;
        mdr_list_push_tail(&peer->dead_eps, &d->link);
        pr->ep = NULL;
    }
    rs->rejoin_attempts++;
    st = rs->ops->ep_create(rs->rail, peer->uuid, pr->addr, pr->addr_len, pr, &pr->ep);
    if (st != MADRAIL_OK) {
        pr->ep = NULL;
        mdr_debug("rail %s peer %u: reconnection attempt failed at once: %s", rs->attr.name,
                  peer->index, madrail_status_str(st));
        mdr_rejoin_arm(pr, now);
        return;
    }
    pr->probing = 1;
    pr->probe_failed = 0;
    pr->probe_owed = 0;
    pr->probe_ns = now;
    mdr_debug("rail %s peer %u: reconnecting (attempt %llu)", rs->attr.name, peer->index,
              (unsigned long long)rs->rejoin_attempts);
    mdr_rejoin_ping(pr, now);
}

static void mdr_rejoin_scan(mdr_peer_rail_t *pr, void *arg)
{
    uint64_t now = *(const uint64_t *)arg;

    if (!pr->rejoin_armed)
        return;
    if (!pr->down || pr->peer->broken) {
        mdr_rejoin_disarm(pr);
        return;
    }
    if (pr->probing) {
        if (!pr->probe_failed && now - pr->probe_ns < mdr_rejoin_deadline_ns(pr)) {
            if (pr->probe_owed)
                mdr_rejoin_ping(pr, now);
            return;
        }
        mdr_rejoin_drop_probe(pr);
        mdr_rejoin_arm(pr, now);
        return;
    }
    if (now < pr->rejoin_at_ns)
        return;
    if (mdr_replay_settling(pr->peer)) {
        /* copies naming rails by their connection's counters are still on
         * their way: a new connection restarts those counts (replay.c) */
        mdr_rejoin_arm(pr, now);
        return;
    }
    mdr_rejoin_try(pr, now);
}

MDR_HOT void mdr_rejoin_progress(mdr_ctx_t *ctx)
{
    uint64_t now;

    if (ctx->nrejoin == 0 || ctx->finalizing)
        return;
    now = mdr_time_ns();
    if (now < ctx->rejoin_next_ns)
        return;
    ctx->rejoin_next_ns = now + mdr_rejoin_cap_ns(ctx) / 16;
    mdr_peer_rails_each(ctx, mdr_rejoin_scan, &now);
}

int mdr_rejoin_probe_failed(mdr_peer_rail_t *pr)
{
    if (!pr->probing)
        return 0;
    pr->probe_failed = 1; /* destroyed by the next scan, outside this upcall */
    return 1;
}

int mdr_rejoin_arrival(mdr_peer_rail_t *pr)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_rail_slot_t *rs = &ctx->rails[pr->rail];
    double down_s;

    if (!pr->probing || pr->probe_failed || !pr->ep)
        return 0;
    down_s = pr->down_ns ? (double)(mdr_time_ns() - pr->down_ns) / 1e9 : 0;
    pr->probing = 0;
    mdr_rejoin_disarm(pr);
    mdr_peer_rail_revive(pr);
    pr->pings_out = 1; /* the probe's PING: its PONG is on its way */
    mdr_info("rail %s peer %u: back up after %.2f s down (attempt %llu answered)",
             rs->attr.name, pr->peer->index, down_s, (unsigned long long)rs->rejoin_attempts);
    return 1;
}

void mdr_rejoin_forget(mdr_peer_rail_t *pr)
{
    pr->probing = 0;
    pr->probe_failed = 0;
    mdr_rejoin_disarm(pr);
}
