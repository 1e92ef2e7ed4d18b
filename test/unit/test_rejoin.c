/*
 * Rejoin on the loop driver (issue 12 item 4): a rail that went down to a
 * peer (here a black hole found by the rail timeout) is dialled again in
 * the background by the side with the smaller context id and carries
 * stripes again once the link delivers; with MADRAIL_RAIL_REJOIN=0 it
 * stays down; a rail that never comes back costs attempts at the back-off
 * rate, no more; a rail that dies again during its rejoin (right after it
 * came back up, or while the dialler's probe waits for its answer) ends
 * down again and is dialled again, traffic flowing on rail 0 meanwhile,
 * and comes back once the link delivers; a rail that flaps is held down
 * for a growing time before it is dialled again.  Two contexts of this process, progressed from this
 * thread, timeouts of 100 ms.  Asserted: rail states, up events, attempts,
 * put bytes per rail and exact data; times are printed only.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include "core/core.h"
#include "rails/tcp/tcp.h"
#include "forge.h"
#include "pair.h"
#include "util/clock.h"

enum { N = 256 * 1024 };

static void spin(pair_t *p)
{
    madrail_progress(p->a);
    madrail_progress(p->b);
}

static void spin_for(pair_t *p, double s)
{
    uint64_t end = mdr_time_ns() + (uint64_t)(s * 1e9);
    while (mdr_time_ns() < end)
        spin(p);
}

/* One N-byte message from a to b, tag t, content seeded by t: 1 if both
 * ends complete within 10 s and every byte is right. */
static int transfer(pair_t *p, uint64_t t)
{
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    madrail_request_t sr = NULL, rr = NULL;
    uint64_t end = mdr_time_ns() + 10000000000ull;
    int fs = 0, fr = 0, ok = 0;
    size_t i;

    if (!sb || !rb)
        goto out;
    for (i = 0; i < N; i++)
        sb[i] = (uint8_t)(i * 7 + t);
    if (madrail_irecv(p->b, p->b2a, rb, N, t, 0, &rr) != MADRAIL_OK ||
        madrail_isend(p->a, p->a2b, sb, N, t, 0, &sr) != MADRAIL_OK)
        goto out;
    while ((!fs || !fr) && mdr_time_ns() < end) {
        spin(p);
        if (!fs && madrail_test(&sr, &fs, NULL) != MADRAIL_OK)
            goto out;
        if (!fr && madrail_test(&rr, &fr, NULL) != MADRAIL_OK)
            goto out;
    }
    ok = fs && fr;
    for (i = 0; ok && i < N; i++)
        ok = rb[i] == (uint8_t)(i * 7 + t);
out:
    free(sb);
    free(rb);
    return ok;
}

static int both_down(pair_t *p, int r)
{
    return mdr_peer_get(p->a, p->a2b)->rails[r].down && mdr_peer_get(p->b, p->b2a)->rails[r].down;
}

static int both_up(pair_t *p, int r)
{
    return !mdr_peer_get(p->a, p->a2b)->rails[r].down &&
           !mdr_peer_get(p->b, p->b2a)->rails[r].down;
}

static void pair_close(pair_t *p)
{
    spin_for(p, 0.01);
    CHECK(p->a->state_errors + p->b->state_errors == 0, "no state machine refused a transition");
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
}

/* rail 1 black-holed, timed out on both sides, then delivers again */
static void test_blackhole_returns(const char *rejoin)
{
    char rj[64];
    const char *ov[] = {"MADRAIL_RAILS=loop:rj0,loop:rj1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=100ms", rj, NULL};
    int off = strcmp(rejoin, "0") == 0;
    pair_t p;
    mdr_ctx_t *dialler;
    uint64_t put1, t0, attempts;

    snprintf(rj, sizeof(rj), "MADRAIL_RAIL_REJOIN=%s", rejoin);
    if (pair_open(&p, ov) != 0) {
        CHECK(0, "rejoin %s: open", rejoin);
        return;
    }
    dialler = p.a->uuid < p.b->uuid ? p.a : p.b;
    CHECK(transfer(&p, 1) && p.a->rails[1].stats.tx_put_bytes > 0,
          "rejoin %s: first transfer striped on both rails", rejoin);
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 1);
    CHECK(transfer(&p, 2), "rejoin %s: transfer during the black hole completes", rejoin);
    spin_for(&p, 0.4);
    CHECK(both_down(&p, 1), "rejoin %s: rail 1 down on both sides", rejoin);
    attempts = dialler->rails[1].rejoin_attempts;
    if (off)
        CHECK(attempts == 0, "rejoin off: no attempt while it is down (%llu)",
              (unsigned long long)attempts);
    else
        CHECK(attempts >= 1 && both_down(&p, 1),
              "rejoin %s: the %s side dialled (%llu attempts) and the rail stays down while "
              "the black hole lasts", rejoin, dialler == p.a ? "sending" : "receiving",
              (unsigned long long)attempts);
    CHECK((dialler == p.a ? p.b : p.a)->rails[1].rejoin_attempts == 0,
          "rejoin %s: the other side never dials", rejoin);

    mdr_loop_rail_blackhole(p.a->rails[1].rail, 0);
    t0 = mdr_time_ns();
    while (!both_up(&p, 1) && mdr_time_ns() - t0 < 3000000000ull)
        spin(&p);
    if (off) {
        spin_for(&p, 0.3);
        CHECK(both_down(&p, 1) && p.a->rails[1].up_events + p.b->rails[1].up_events == 0,
              "rejoin off: rail 1 stays down once the link delivers again");
    } else {
        printf("  link back to rail up on both sides: %.0f ms (MADRAIL_RAIL_REJOIN %s)\n",
               (double)(mdr_time_ns() - t0) / 1e6, rejoin);
        CHECK(both_up(&p, 1) && p.a->rails[1].up_events == 1 && p.b->rails[1].up_events == 1,
              "rejoin %s: rail 1 back up on both sides, one up event each (%llu, %llu)", rejoin,
              (unsigned long long)p.a->rails[1].up_events,
              (unsigned long long)p.b->rails[1].up_events);
    }
    if (!off) {
        madrail_rail_event_t ev[8];
        uint64_t total = 0;
        int n = madrail_rail_events(p.a, ev, 8, &total), k, down = -1, up = -1;
        char *text = NULL;
        size_t tlen = 0;
        FILE *f = open_memstream(&text, &tlen);
        for (k = 0; k < n; k++) {
            if (ev[k].rail == 1 && !ev[k].up && down < 0)
                down = k;
            if (ev[k].rail == 1 && ev[k].up && up < 0)
                up = k;
        }
        CHECK(n == (int)total && down >= 0 && up > down && ev[down].peer == p.a2b &&
                  (strstr(ev[down].what, "no sign of life") || /* A timed out first */
                   strstr(ev[down].what, "closed the connection")) && /* or B did */
                  strstr(ev[up].what, "down") &&
                  ev[up].time >= ev[down].time,
              "rejoin %s: A's events: rail 1 down (\"%s\") then up (\"%s\"), %d in all", rejoin,
              down >= 0 ? ev[down].what : "-", up >= 0 ? ev[up].what : "-", n);
        if (f) {
            madrail_stats_print(p.a, f);
            fclose(f);
        }
        CHECK(text && strstr(text, "event: ") && strstr(text, "rail 1 loop:rj1 peer") &&
                  strstr(text, " down: ") && strstr(text, " up: after "),
              "rejoin %s: MADRAIL_STATS lists the events with their times", rejoin);
        free(text);
    }
    put1 = p.a->rails[1].stats.tx_put_bytes;
    CHECK(transfer(&p, 3) && transfer(&p, 4), "rejoin %s: transfers after the link returned",
          rejoin);
    if (off)
        CHECK(p.a->rails[1].stats.tx_put_bytes == put1,
              "rejoin off: rail 1 carries nothing more");
    else
        CHECK(p.a->rails[1].stats.tx_put_bytes > put1,
              "rejoin %s: rail 1 carries stripes again (%llu more bytes)", rejoin,
              (unsigned long long)(p.a->rails[1].stats.tx_put_bytes - put1));
    if (!off) {
        /* PONGs to PINGs a side forgot when the rail came back may still
         * arrive: up to MDR_PING_MAX + 1 are taken, one more is a
         * protocol error (watch.c) */
        mdr_hdr_t h;
        int k;
        for (k = 0; k < MDR_PING_MAX + 1; k++) {
            memset(&h, 0, sizeof(h));
            h.type = MDR_MSG_PONG;
            h.len = sizeof(h);
            (void)mdr_forge_send(p.b, p.b2a, 1, &h, sizeof(h));
            spin_for(&p, 0.01);
        }
        CHECK(both_up(&p, 1), "rejoin %s: %d stale PONGs after the rail came back: still up",
              rejoin, MDR_PING_MAX + 1);
        memset(&h, 0, sizeof(h));
        h.type = MDR_MSG_PONG;
        h.len = sizeof(h);
        (void)mdr_forge_send(p.b, p.b2a, 1, &h, sizeof(h));
        spin_for(&p, 0.05);
        CHECK(mdr_peer_get(p.a, p.a2b)->rails[1].down,
              "rejoin %s: one PONG more is a protocol error: A closed rail 1 (%s)", rejoin,
              mdr_peer_get(p.a, p.a2b)->rails[1].last_error);
        CHECK(transfer(&p, 5), "rejoin %s: rail 0 carries on after the protocol error", rejoin);
    }
    pair_close(&p);
}

/* a rail that is dead for good: attempts at the back-off rate only */
/* A rejoin whose probe the driver cannot send at once (its handshake is
 * under way: "no resource") keeps the probe and sends its PING later; it
 * was dropped, and on ofi, where every new endpoint says so first, the
 * rail never came back. */
static void test_probe_waits_handshake(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:rn0,loop:rn1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=100ms", "MADRAIL_RAIL_REJOIN=50ms", NULL};
    pair_t p;
    mdr_ctx_t *dialler;
    uint64_t t0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "probe under a handshake: open");
        return;
    }
    dialler = p.a->uuid < p.b->uuid ? p.a : p.b;
    CHECK(transfer(&p, 1), "probe under a handshake: first transfer");
    mdr_loop_rail_nores_fresh(dialler->rails[1].rail, 1); /* every probe from now on */
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 1);
    CHECK(transfer(&p, 2), "probe under a handshake: transfer during the black hole");
    spin_for(&p, 0.4);
    CHECK(both_down(&p, 1), "probe under a handshake: rail 1 down on both sides");
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 0);
    t0 = mdr_time_ns();
    while (!both_up(&p, 1) && mdr_time_ns() - t0 < 3000000000ull)
        spin(&p);
    CHECK(both_up(&p, 1),
          "probe under a handshake: rail 1 back up on both sides (%llu attempts) though every "
          "new connection's first send says no resource",
          (unsigned long long)dialler->rails[1].rejoin_attempts);
    CHECK(transfer(&p, 3), "probe under a handshake: a transfer after it came back");
    mdr_loop_rail_nores_fresh(dialler->rails[1].rail, 0);
    pair_close(&p);
}

static void test_dead_for_good(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:rk0,loop:rk1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=100ms", "MADRAIL_RAIL_REJOIN=200ms", NULL};
    pair_t p;
    mdr_ctx_t *dialler;
    uint64_t a0, a1;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "dead rail: open");
        return;
    }
    dialler = p.a->uuid < p.b->uuid ? p.a : p.b;
    CHECK(transfer(&p, 1), "dead rail: first transfer");
    mdr_loop_rail_kill(dialler->rails[1].rail, "test: the rail dies for good");
    CHECK(transfer(&p, 2), "dead rail: transfer after the rail died");
    spin_for(&p, 0.5); /* the back-off reaches its cap */
    a0 = dialler->rails[1].rejoin_attempts;
    spin_for(&p, 1.0);
    a1 = dialler->rails[1].rejoin_attempts;
    CHECK(both_down(&p, 1), "dead rail: rail 1 stays down");
    CHECK(a0 >= 2 && a1 - a0 >= 2 && a1 - a0 <= 8,
          "dead rail: %llu attempts in the first 0.5 s, then %llu in 1 s at a 200 ms cap "
          "(2..8)", (unsigned long long)a0, (unsigned long long)(a1 - a0));
    CHECK(transfer(&p, 3) && p.a->rails[0].stats.tx_put_bytes > 0,
          "dead rail: traffic keeps flowing on rail 0");
    pair_close(&p);
}

/* A rail that dies again during its rejoin: right after it came back up
 * on both sides (after_up), or while the dialler's probe connection waits
 * for its answer (the PING held by the black hole past the probe
 * deadline).  It must end down again, be dialled again, never wedge the
 * peer: traffic keeps flowing on rail 0 meanwhile, and once the link
 * delivers the rail comes back and carries stripes. */
static void test_dies_in_rejoin(int after_up)
{
    const char *name = after_up ? "dies right after it came up" : "dies during the probe";
    const char *ov[] = {after_up ? "MADRAIL_RAILS=loop:rd0,loop:rd1" : "MADRAIL_RAILS=loop:rp0,loop:rp1",
                        "MADRAIL_LOG_LEVEL=error", "MADRAIL_RNDV_RECV_FIRST=0",
                        "MADRAIL_RAIL_WEIGHTS=1,1", "MADRAIL_RAIL_TIMEOUT=100ms",
                        "MADRAIL_RAIL_REJOIN=200ms", NULL};
    pair_t p;
    mdr_ctx_t *dialler;
    mdr_peer_rail_t *dpr;
    uint64_t t0, a0, put1, ups;
    int i;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "%s: open", name);
        return;
    }
    printf("-- rail 1 %s\n", name);
    dialler = p.a->uuid < p.b->uuid ? p.a : p.b;
    dpr = &mdr_peer_get(dialler, dialler == p.a ? p.a2b : p.b2a)->rails[1];
    CHECK(transfer(&p, 1), "%s: first transfer", name);
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 1);
    CHECK(transfer(&p, 2), "%s: transfer during the black hole", name);
    spin_for(&p, 0.4);
    CHECK(both_down(&p, 1), "%s: rail 1 down on both sides", name);
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 0);
    if (after_up) {
        t0 = mdr_time_ns();
        while (!both_up(&p, 1) && mdr_time_ns() - t0 < 3000000000ull)
            spin(&p);
        CHECK(both_up(&p, 1), "%s: setup: rail 1 came back up on both sides", name);
    } else {
        /* only the dialler progresses: its probe leaves, nobody answers */
        t0 = mdr_time_ns();
        while (!dpr->probing && mdr_time_ns() - t0 < 3000000000ull)
            madrail_progress(dialler);
        CHECK(dpr->probing && dpr->down, "%s: setup: the dialler's probe is out, rail 1 down", name);
    }
    a0 = dialler->rails[1].rejoin_attempts;
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 1);
    CHECK(transfer(&p, 3), "%s: a transfer right after the rail died again completes", name);
    /* past the rail timeout, and past the probe deadline (max(2 x 200 ms, 1 s)) */
    spin_for(&p, after_up ? 0.5 : 1.4);
    CHECK(dpr->down, "%s: rail 1 down again at the dialler", name);
    if (after_up)
        CHECK(both_down(&p, 1), "%s: rail 1 down again on both sides", name);
    CHECK(dialler->rails[1].rejoin_attempts > a0,
          "%s: dialled again while the link is dead (%llu attempts, %llu before)", name,
          (unsigned long long)dialler->rails[1].rejoin_attempts, (unsigned long long)a0);
    CHECK(transfer(&p, 4) && transfer(&p, 5), "%s: traffic keeps flowing on rail 0", name);
    for (i = 0; i < 2; i++) { /* the other way too: B's rail 1 may be stale */
        pair_t q = p;
        q.a = p.b;
        q.b = p.a;
        q.a2b = p.b2a;
        q.b2a = p.a2b;
        CHECK(transfer(&q, 6 + (uint64_t)i), "%s: B to A transfer %d completes", name, i);
    }
    ups = p.a->rails[1].up_events;
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 0);
    t0 = mdr_time_ns();
    while ((!both_up(&p, 1) || p.a->rails[1].up_events == ups) &&
           mdr_time_ns() - t0 < 4000000000ull)
        spin(&p);
    printf("  link back to rail up on both sides: %.0f ms\n", (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(both_up(&p, 1) && p.a->rails[1].up_events > ups,
          "%s: rail 1 back up on both sides once the link delivers (up events %llu, %llu)", name,
          (unsigned long long)p.a->rails[1].up_events, (unsigned long long)p.b->rails[1].up_events);
    put1 = p.a->rails[1].stats.tx_put_bytes;
    CHECK(transfer(&p, 8) && transfer(&p, 9) && p.a->rails[1].stats.tx_put_bytes > put1,
          "%s: transfers exact, rail 1 carries stripes again (%llu more bytes)", name,
          (unsigned long long)(p.a->rails[1].stats.tx_put_bytes - put1));
    pair_close(&p);
}

/* One down/up cycle of rail 1: black hole, a transfer, both sides down,
 * the hole lifted, both sides up again (5 s at most).  1 when it came up. */
static int flap_once(pair_t *p, uint64_t t)
{
    uint64_t t0;

    mdr_loop_rail_blackhole(p->a->rails[1].rail, 1);
    (void)transfer(p, t);
    t0 = mdr_time_ns();
    while (!both_down(p, 1) && mdr_time_ns() - t0 < 3000000000ull)
        spin(p);
    mdr_loop_rail_blackhole(p->a->rails[1].rail, 0);
    t0 = mdr_time_ns();
    while (!both_up(p, 1) && mdr_time_ns() - t0 < 5000000000ull)
        spin(p);
    return both_up(p, 1);
}

/* A flapping rail (issue 27 item 4), the clock scaled down: rail 1 goes
 * down again right after each time it came back, so the dialling side
 * holds it down before it dials, doubling from MADRAIL_RAIL_REJOIN (50 ms)
 * up to MADRAIL_RAIL_HOLD_MAX (400 ms): 100, 200, 400, 400 ms; each hold is
 * a 'held down' event; a rail that stayed up longer than MADRAIL_RAIL_FLAP
 * (2 s) starts afresh.  Asserted: the flap counts, the holds, that no rail
 * came back before its hold ran out (a time lower bound, never an upper
 * one), the events and exact data. */
static void test_flapping(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:fl0,loop:fl1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=100ms", "MADRAIL_RAIL_REJOIN=50ms",
                        "MADRAIL_RAIL_FLAP=2s", "MADRAIL_RAIL_HOLD_MAX=400ms", NULL};
    static const uint64_t want[] = {0, 100000000ull, 200000000ull, 400000000ull, 400000000ull};
    madrail_rail_event_t ev[32];
    uint64_t total = 0;
    mdr_peer_rail_t *pr;
    mdr_ctx_t *dialler;
    pair_t p;
    int k, n, held = 0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "flapping: open");
        return;
    }
    dialler = p.a->uuid < p.b->uuid ? p.a : p.b;
    pr = &mdr_peer_get(dialler, dialler == p.a ? p.a2b : p.b2a)->rails[1];
    CHECK(transfer(&p, 1), "flapping: first transfer");
    for (k = 0; k < 5; k++) {
        int up = flap_once(&p, 10 + k);
        CHECK(up && pr->flaps == (unsigned)k && pr->hold_ns == want[k] &&
                  pr->up_ns - pr->down_ns >= pr->hold_ns,
              "flapping: cycle %d: back up (%d), flap %u in a row, held %.0f ms (want %.0f), "
              "down for %.0f ms", k + 1, up, pr->flaps, (double)pr->hold_ns / 1e6,
              (double)want[k] / 1e6, (double)(pr->up_ns - pr->down_ns) / 1e6);
    }
    n = madrail_rail_events(dialler, ev, 32, &total);
    for (k = 0; k < n; k++)
        if (ev[k].rail == 1 && !ev[k].up && strstr(ev[k].what, "held down"))
            held++;
    CHECK(held == 4, "flapping: four 'held down' events (%d of %d events)", held, n);
    spin_for(&p, 2.1); /* up for longer than MADRAIL_RAIL_FLAP */
    CHECK(flap_once(&p, 20) && pr->flaps == 0 && pr->hold_ns == 0,
          "flapping: after a stable second the next down is no flap (flaps %u, hold %.0f ms)",
          pr->flaps, (double)pr->hold_ns / 1e6);
    CHECK(transfer(&p, 21) && transfer(&p, 22), "flapping: transfers exact afterwards");
    pair_close(&p);
}

/* tcp over loopback (issue 28, item 2): rail 1's connection is cut (its
 * socket shut down under the driver); both sides see it fail, the dialler
 * reconnects, and the acceptor, which holds the session of the old
 * connection, takes the new one only because it proves continuity with
 * that session: the rail is up again on both sides, once, and carries
 * stripes byte-exact. */
static void test_tcp_cut_returns(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_REJOIN=100ms", NULL};
    pair_t p;
    mdr_peer_rail_t *pr;
    mdr_ep_t *ep;
    uint64_t t0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "tcp rejoin: open");
        return;
    }
    CHECK(transfer(&p, 1) && p.a->rails[1].stats.tx_put_bytes > 0,
          "tcp rejoin: first transfer striped on both rails");
    pr = &mdr_peer_get(p.a, p.a2b)->rails[1];
    ep = pr->ep;
    CHECK(ep != NULL && ep->conn != NULL && ep->conn->fd >= 0 &&
              shutdown(ep->conn->fd, SHUT_RDWR) == 0,
          "tcp rejoin: rail 1's connection cut");
    t0 = mdr_time_ns();
    while (!both_down(&p, 1) && mdr_time_ns() - t0 < 3000000000ull)
        spin(&p);
    CHECK(both_down(&p, 1), "tcp rejoin: rail 1 down on both sides");
    t0 = mdr_time_ns();
    while (!both_up(&p, 1) && mdr_time_ns() - t0 < 5000000000ull)
        spin(&p);
    printf("  cut to rail up on both sides: %.0f ms\n", (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(both_up(&p, 1) && p.a->rails[1].up_events == 1 && p.b->rails[1].up_events == 1,
          "tcp rejoin: rail 1 up again on both sides, once (up events %llu and %llu)",
          (unsigned long long)p.a->rails[1].up_events,
          (unsigned long long)p.b->rails[1].up_events);
    {
        uint64_t before = p.a->rails[1].stats.tx_put_bytes;
        CHECK(transfer(&p, 3) && p.a->rails[1].stats.tx_put_bytes > before,
              "tcp rejoin: the next transfer is striped on rail 1 again, byte-exact");
    }
    pair_close(&p);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_flapping();
    test_blackhole_returns("200ms");
    test_tcp_cut_returns();
    test_blackhole_returns("0");
    test_probe_waits_handshake();
    test_dead_for_good();
    test_dies_in_rejoin(1);
    test_dies_in_rejoin(0);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
