/*
 * Rail failure detection and failover on the loop driver (issue 12): a
 * rail that goes silent (a black hole: nothing delivered, no error) is
 * taken down by MADRAIL_RAIL_TIMEOUT and its traffic moves to the other
 * rails; a rail that is merely busy or idle is never taken down; when the
 * last rail to a peer goes, every request bound to that peer fails in
 * bounded time with an error.  Two contexts in one process, progressed
 * from this thread; the timeout is short (100 ms) so a case takes well
 * under a second.  The assertions are on outcomes and counters: a time is
 * printed, never asserted, except that no rail goes down before the
 * configured timeout has passed.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "pair.h"
#include "util/clock.h"

static void pair_close(pair_t *p)
{
    int i;
    for (i = 0; i < 1000; i++) {
        madrail_progress(p->a);
        madrail_progress(p->b);
    }
    CHECK(p->a->state_errors + p->b->state_errors == 0, "no state machine refused a transition");
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
}

static void spin(pair_t *p)
{
    madrail_progress(p->a);
    madrail_progress(p->b);
}

/* Wait for req while progressing both sides, at most max_s seconds (far
 * above what any case needs; MADRAIL_ERR_IO: it did not complete). */
static madrail_status_t pwait(pair_t *p, madrail_request_t *req, double max_s)
{
    uint64_t end = mdr_time_ns() + (uint64_t)(max_s * 1e9);
    int flag = 0;
    madrail_status_t st;

    while (*req && mdr_time_ns() < end) {
        spin(p);
        st = madrail_test(req, &flag, NULL);
        if (flag)
            return st;
    }
    return MADRAIL_ERR_IO;
}

static void spin_for(pair_t *p, double s)
{
    uint64_t end = mdr_time_ns() + (uint64_t)(s * 1e9);
    while (mdr_time_ns() < end)
        spin(p);
}

static const char *sts(madrail_status_t s)
{
    return s == MADRAIL_ERR_IO ? "did not complete" : madrail_status_str(s);
}

/* A rendezvous striped over two rails; rail 1 becomes a black hole while
 * its put is in flight.  Nothing fails in the driver: only the timeout
 * can find it.  A takes the rail down, puts the chunk again on rail 0:
 * both requests complete with exact data. */
static void test_blackhole_put(void)
{
    enum { N = 256 * 1024 };
    const char *ov[] = {"MADRAIL_RAILS=loop:bh0,loop:bh1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=100ms", NULL};
    pair_t p;
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    madrail_request_t sr, rr;
    madrail_status_t s1, s2;
    mdr_peer_t *ab;
    uint64_t t0;
    int i;

    if (!sb || !rb || pair_open(&p, ov) != 0) {
        CHECK(0, "blackhole put: open");
        goto out;
    }
    pair_fill(sb, N, 3);
    ab = mdr_peer_get(p.a, p.a2b);
    CHECK(madrail_irecv(p.b, p.b2a, rb, N, 5, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, N, 5, 0, &sr) == MADRAIL_OK,
          "blackhole put: post");
    for (i = 0; i < 100 && rr->rndv != MDR_RNDV_CTS_SENT; i++)
        madrail_progress(p.b);
    for (i = 0; i < 100 && sr->rndv != MDR_RNDV_PUTTING; i++)
        madrail_progress(p.a);
    CHECK(sr->rndv == MDR_RNDV_PUTTING && sr->nputs == 2 &&
              sr->puts[1].state == MDR_PUT_INFLIGHT,
          "blackhole put: setup: A has its rail 1 chunk in flight");
    t0 = mdr_time_ns();
    mdr_loop_rail_blackhole(p.a->rails[1].rail, 1);
    s1 = pwait(&p, &rr, 10);
    s2 = pwait(&p, &sr, 10);
    printf("  black hole to both completions: %.0f ms (timeout 100 ms)\n",
           (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(s1 == MADRAIL_OK && pair_verify(rb, N, 3), "blackhole put: receive exact (%s)", sts(s1));
    CHECK(s2 == MADRAIL_OK, "blackhole put: send complete (%s)", sts(s2));
    CHECK(ab->rails[1].down && !ab->rails[0].down, "blackhole put: A's rail 1 down, rail 0 up");
    CHECK(p.a->rails[1].stats.timeouts == 1, "blackhole put: one timeout counted on rail 1 (%llu)",
          (unsigned long long)p.a->rails[1].stats.timeouts);
    CHECK(p.a->rails[0].stats.tx_put_bytes == N,
          "blackhole put: rail 0 put all %d bytes (%llu)", N,
          (unsigned long long)p.a->rails[0].stats.tx_put_bytes);
    pair_close(&p);
out:
    free(sb);
    free(rb);
}

/* A receive waits on an idle peer: the rails are probed (PINGs counted
 * on the waiting side, PONGs on the other) and never taken down; then a
 * black hole on the only rail ends it with an error on both sides. */
/* Opens the pair and passes a first message a -> b (b's receive posted
 * from src: a, or any peer).  0 when it arrived. */
static int open_first(pair_t *p, const char *const *ov, int wildcard, const char *what)
{
    char sbuf[8] = "hello", rbuf[8];
    madrail_request_t sr, rr;
    int ok;

    if (pair_open(p, ov) != 0) {
        CHECK(0, "%s: open", what);
        return -1;
    }
    ok = madrail_irecv(p->b, wildcard ? MADRAIL_ANY_PEER : p->b2a, rbuf, sizeof(rbuf), 1, 0,
                       &rr) == MADRAIL_OK &&
         madrail_isend(p->a, p->a2b, sbuf, 6, 1, 0, &sr) == MADRAIL_OK &&
         pwait(p, &rr, 5) == MADRAIL_OK && pwait(p, &sr, 5) == MADRAIL_OK;
    CHECK(ok, "%s: first message", what);
    return ok ? 0 : -1;
}

static void test_idle_then_blackhole(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:id0", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_TIMEOUT=100ms", NULL};
    pair_t p;
    char sbuf[64] = "hello", rbuf[64];
    madrail_request_t sr, rr;
    madrail_status_t s;
    uint64_t t0;

    /* first contact, then a receive that nothing answers for 5 timeouts */
    if (open_first(&p, ov, 0, "idle") != 0)
        return;
    CHECK(madrail_irecv(p.b, p.b2a, rbuf, sizeof(rbuf), 2, 0, &rr) == MADRAIL_OK,
          "idle: post a receive");
    spin_for(&p, 0.5);
    CHECK(!mdr_peer_get(p.b, p.b2a)->rails[0].down && !mdr_peer_get(p.a, p.a2b)->rails[0].down,
          "idle: the rail stays up for 5 timeouts (B sent %llu PINGs, A %llu PONGs)",
          (unsigned long long)p.b->rails[0].stats.pings,
          (unsigned long long)p.a->rails[0].stats.pongs);
    CHECK(p.b->rails[0].stats.pings >= 2 && p.a->rails[0].stats.pongs >= 2 &&
              p.b->rails[0].stats.timeouts == 0,
          "idle: B probed the idle rail, A answered, no timeout");
    CHECK(madrail_isend(p.a, p.a2b, sbuf, 6, 2, 0, &sr) == MADRAIL_OK &&
              pwait(&p, &rr, 5) == MADRAIL_OK && pwait(&p, &sr, 5) == MADRAIL_OK,
          "idle: the next message goes through");
    /* the last rail becomes a black hole while B waits */
    CHECK(madrail_irecv(p.b, p.b2a, rbuf, sizeof(rbuf), 3, 0, &rr) == MADRAIL_OK,
          "last rail: post a receive");
    spin_for(&p, 0.05);
    t0 = mdr_time_ns();
    mdr_loop_rail_blackhole(p.a->rails[0].rail, 1);
    s = pwait(&p, &rr, 10);
    printf("  black hole to the receive's error: %.0f ms (timeout 100 ms)\n",
           (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(s == MADRAIL_ERR_PEER_UNREACHABLE,
          "last rail: the receive bound to the peer fails (%s)", sts(s));
    CHECK(mdr_time_ns() - t0 >= 100000000ull, "last rail: not before the timeout passed");
    s = madrail_isend(p.a, p.a2b, sbuf, 6, 3, 0, &sr);
    if (s == MADRAIL_OK)
        s = pwait(&p, &sr, 10);
    CHECK(s != MADRAIL_OK && s != MADRAIL_ERR_IO, "last rail: A's next send fails (%s)", sts(s));
    pair_close(&p);
}

/* B waits only on a wildcard receive when its one peer's last rail becomes
 * a black hole: B must find the silence (the wildcard receive waits on
 * every peer) and, with no peer left to match it, fail the receive: never
 * wait for good (cl_mpi_failover's header receive from MPI_ANY_SOURCE). */
static void test_wildcard_blackhole(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:wb0", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_TIMEOUT=100ms", NULL};
    pair_t p;
    char rbuf[64];
    madrail_request_t rr;
    madrail_status_t s;
    uint64_t t0;

    if (open_first(&p, ov, 1, "wildcard") != 0)
        return;
    CHECK(madrail_irecv(p.b, MADRAIL_ANY_PEER, rbuf, sizeof(rbuf), 2, 0, &rr) == MADRAIL_OK,
          "wildcard: a wildcard receive posted, nothing else");
    spin_for(&p, 0.3);
    CHECK(!rr->complete && !mdr_peer_get(p.b, p.b2a)->rails[0].down &&
              p.b->rails[0].stats.pings >= 1,
          "wildcard: while the peer answers, the receive waits and the rail is probed (%llu "
          "PINGs)", (unsigned long long)p.b->rails[0].stats.pings);
    t0 = mdr_time_ns();
    mdr_loop_rail_blackhole(p.a->rails[0].rail, 1);
    s = pwait(&p, &rr, 10);
    printf("  black hole to the wildcard receive's error: %.0f ms (timeout 100 ms)\n",
           (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(s == MADRAIL_ERR_PEER_UNREACHABLE,
          "wildcard: with no peer left, the wildcard receive fails (%s)", sts(s));
    CHECK(mdr_time_ns() - t0 >= 100000000ull, "wildcard: not before the timeout passed");
    pair_close(&p);
}

/* A big put on a slow rail (the loop bandwidth cap: 4 MiB at 8 MB/s, half
 * a second, five timeouts) is busy, not dead: no timeout, exact data. */
static void test_busy_not_dead(void)
{
    enum { N = 4 * 1024 * 1024 };
    const char *ov[] = {"MADRAIL_RAILS=loop:bz0;bw=8m", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_TIMEOUT=100ms", NULL};
    pair_t p;
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    madrail_request_t sr, rr;
    madrail_status_t s1, s2;
    uint64_t t0;

    if (!sb || !rb || pair_open(&p, ov) != 0) {
        CHECK(0, "busy: open");
        goto out;
    }
    pair_fill(sb, N, 9);
    t0 = mdr_time_ns();
    CHECK(madrail_irecv(p.b, p.b2a, rb, N, 4, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, N, 4, 0, &sr) == MADRAIL_OK,
          "busy: post");
    s1 = pwait(&p, &rr, 20);
    s2 = pwait(&p, &sr, 20);
    printf("  4 MiB at 8 MB/s took %.0f ms (timeout 100 ms)\n",
           (double)(mdr_time_ns() - t0) / 1e6);
    CHECK(s1 == MADRAIL_OK && s2 == MADRAIL_OK && pair_verify(rb, N, 9),
          "busy: the transfer completes exact (%s, %s)", sts(s1), sts(s2));
    CHECK(p.a->rails[0].stats.timeouts == 0 && p.b->rails[0].stats.timeouts == 0,
          "busy: no timeout on either side");
    pair_close(&p);
out:
    free(sb);
    free(rb);
}

/* The whole process stops longer than the timeout (descheduled on a loaded
 * machine, a debugger) with a message in flight on a loop rail: both ends
 * stopped, so that is no black hole (loop_rail.c leaves pauses of the
 * process out of its acknowledgement clock).  The rail stays up and the
 * message arrives; without that rule the first pass after the pause takes
 * the rail down (it failed here under a sanitizer at load 5.7). */
static void test_process_pause(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:pz0,loop:pz1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_TIMEOUT=100ms", "MADRAIL_RAIL_REJOIN=0",
                        "MADRAIL_RNDV_THRESH=4k", NULL};
    static uint8_t sb[32768], rb[32768];
    pair_t p;
    madrail_request_t sr, rr;
    madrail_status_t s1, s2;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "pause: open");
        return;
    }
    pair_fill(sb, sizeof(sb), 5);
    memset(rb, 0, sizeof(rb));
    /* connect both rails first, then leave a message in flight */
    CHECK(madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 8, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, sizeof(sb), 8, 0, &sr) == MADRAIL_OK &&
              pwait(&p, &rr, 5) == MADRAIL_OK && pwait(&p, &sr, 5) == MADRAIL_OK,
          "pause: a first message");
    CHECK(madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 9, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, sizeof(sb), 9, 0, &sr) == MADRAIL_OK,
          "pause: post");
    madrail_progress(p.a); /* its RTS leaves; b has not taken it, a's send waits */
    usleep(300000);        /* the process stops for 3 timeouts */
    s1 = pwait(&p, &rr, 5);
    s2 = pwait(&p, &sr, 5);
    CHECK(s1 == MADRAIL_OK && s2 == MADRAIL_OK && pair_verify(rb, sizeof(rb), 5),
          "pause: the message arrives after a 300 ms pause of the process (%s, %s)", sts(s1),
          sts(s2));
    CHECK(p.a->rails[0].stats.timeouts + p.a->rails[1].stats.timeouts +
                  p.b->rails[0].stats.timeouts + p.b->rails[1].stats.timeouts ==
              0,
          "pause: no rail timed out on either side (a: %llu + %llu, b: %llu + %llu)",
          (unsigned long long)p.a->rails[0].stats.timeouts,
          (unsigned long long)p.a->rails[1].stats.timeouts,
          (unsigned long long)p.b->rails[0].stats.timeouts,
          (unsigned long long)p.b->rails[1].stats.timeouts);
    pair_close(&p);
}

/* A small message whose send is over (it left; eager) is lost with a rail
 * that becomes a black hole, and the sender has nothing else to wait for.
 * Its copy waits for its credit (replay.c), so the sender watches that
 * rail, finds it silent and sends the copy again on the other one; the
 * receive, posted from any peer (it watches nothing), completes.  Before
 * copies counted as waiting the message was never looked for again. */
static void test_blackhole_eager(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:be0,loop:be1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_TIMEOUT=100ms", "MADRAIL_RAIL_REJOIN=0",
                        "MADRAIL_ADAPT=0", NULL};
    pair_t p;
    char sbuf[64] = "lost and found", rbuf[64];
    madrail_request_t sr, rr;
    madrail_status_t s1, s2;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "eager lost: open");
        return;
    }
    CHECK(madrail_irecv(p.b, MADRAIL_ANY_PEER, rbuf, sizeof(rbuf), 1, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sbuf, 15, 1, 0, &sr) == MADRAIL_OK &&
              pwait(&p, &rr, 5) == MADRAIL_OK && pwait(&p, &sr, 5) == MADRAIL_OK,
          "eager lost: first message");
    mdr_loop_rail_blackhole(p.a->rails[0].rail, 1); /* what A sends on rail 0 is lost */
    memset(rbuf, 0, sizeof(rbuf));
    CHECK(madrail_isend(p.a, p.a2b, sbuf, 15, 2, 0, &sr) == MADRAIL_OK &&
              (s2 = pwait(&p, &sr, 5)) == MADRAIL_OK,
          "eager lost: the send completes as it leaves");
    CHECK(p.a->rails[0].stats.tx_msgs > p.a->rails[1].stats.tx_msgs,
          "eager lost: it left on rail 0 (rail 0 sent %llu, rail 1 %llu)",
          (unsigned long long)p.a->rails[0].stats.tx_msgs,
          (unsigned long long)p.a->rails[1].stats.tx_msgs);
    CHECK(madrail_irecv(p.b, MADRAIL_ANY_PEER, rbuf, sizeof(rbuf), 2, 0, &rr) == MADRAIL_OK,
          "eager lost: post the receive from any peer");
    s1 = pwait(&p, &rr, 2);
    CHECK(s1 == MADRAIL_OK && strcmp(rbuf, "lost and found") == 0,
          "eager lost: the message arrives, sent again on rail 1 (%s, '%s')", sts(s1), rbuf);
    CHECK(p.a->rails[0].stats.timeouts == 1 && p.a->rails[0].stats.resent_msgs >= 1,
          "eager lost: A timed rail 0 out (%llu) and re-sent its copies (%llu)",
          (unsigned long long)p.a->rails[0].stats.timeouts,
          (unsigned long long)p.a->rails[0].stats.resent_msgs);
    pair_close(&p);
}

/* Progress both sides at most n times; MADRAIL_ERR_IO: not complete. */
static madrail_status_t pwait_n(pair_t *p, madrail_request_t *req, long n)
{
    int flag = 0;
    madrail_status_t st;

    while (*req && n-- > 0) {
        spin(p);
        st = madrail_test(req, &flag, NULL);
        if (flag)
            return st;
    }
    return MADRAIL_ERR_IO;
}

/* The only rail fails (killed: a driver error; or black-holed: only the
 * timeout finds it) at each phase of a transfer; both requests, each bound
 * to the other side, end with an error: after a kill within a bounded
 * number of progress calls, after a black hole within a bounded time (a
 * few timeouts).  Phase "wildcard" is a receive from any peer matched to
 * the rendezvous of the peer that then fails (test/fuzz/crashers strict4:
 * it used to wait for good). */
enum { LR_EAGER, LR_RTS, LR_CTS, LR_PUT, LR_FIN_QUEUED, LR_WILDCARD, LR_NPHASES };
static const char *const lr_names[] = {"eager queued", "RTS sent", "CTS sent", "put in flight",
                                       "FIN queued", "wildcard rndv recv"};

static void test_last_rail(int phase, int blackhole)
{
    enum { N = 256 * 1024 };
    const char *ov[] = {"MADRAIL_RAILS=loop:lr0", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_TIMEOUT=100ms", NULL};
    const char *how = blackhole ? "black hole" : "kill";
    size_t n = phase == LR_EAGER ? 100 : N;
    pair_t p;
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    madrail_request_t sr, rr;
    madrail_status_t s1, s2;
    mdr_peer_t *ab;
    int i;

    if (!sb || !rb || pair_open(&p, ov) != 0) {
        CHECK(0, "last rail: open");
        goto out;
    }
    pair_fill(sb, N, 1);
    ab = mdr_peer_get(p.a, p.a2b);
    /* connect first, so that the phase is set up on a live rail */
    CHECK(madrail_irecv(p.b, p.b2a, rb, N, 1, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, 8, 1, 0, &sr) == MADRAIL_OK &&
              pwait_n(&p, &rr, 1000) == MADRAIL_OK && pwait_n(&p, &sr, 1000) == MADRAIL_OK,
          "last rail %s/%s: connected", lr_names[phase], how);
    CHECK(madrail_irecv(p.b, phase == LR_WILDCARD ? MADRAIL_ANY_PEER : p.b2a, rb, N, 2, 0,
                        &rr) == MADRAIL_OK,
          "last rail %s/%s: receive posted", lr_names[phase], how);
    if (phase == LR_EAGER)
        ab->rails[0].credits = 0; /* the message waits in A's queue */
    CHECK(madrail_isend(p.a, p.a2b, sb, n, 2, 0, &sr) == MADRAIL_OK,
          "last rail %s/%s: send posted", lr_names[phase], how);
    switch (phase) {
    case LR_RTS: /* A's RTS out, B has not seen it */
        break;
    case LR_CTS: /* B's CTS out, A has not seen it */
    case LR_WILDCARD:
        for (i = 0; i < 100 && rr->rndv != MDR_RNDV_CTS_SENT; i++)
            madrail_progress(p.b);
        break;
    case LR_PUT:
    case LR_FIN_QUEUED:
        for (i = 0; i < 100 && rr->rndv != MDR_RNDV_CTS_SENT; i++)
            madrail_progress(p.b);
        for (i = 0; i < 100 && sr->rndv != MDR_RNDV_PUTTING; i++)
            madrail_progress(p.a);
        if (phase == LR_FIN_QUEUED) {
            ab->rails[0].credits = 0; /* after the CTS, which returned some */
            for (i = 0; i < 200 && (sr->puts_left > 0 || mdr_list_empty(&ab->txq)); i++)
                spin(&p);
        }
        break;
    }
    CHECK(!rr->complete && !sr->complete &&
              (phase != LR_PUT || (sr->nputs == 1 && sr->puts[0].state == MDR_PUT_INFLIGHT)) &&
              (phase != LR_FIN_QUEUED || (sr->puts_left == 0 && !mdr_list_empty(&ab->txq))) &&
              (phase != LR_EAGER || !mdr_list_empty(&ab->sendq) || !mdr_list_empty(&ab->txq)),
          "last rail %s/%s: phase set up", lr_names[phase], how);
    if (blackhole) {
        mdr_loop_rail_blackhole(p.a->rails[0].rail, 1);
        s1 = pwait(&p, &rr, 1.0); /* 10 timeouts */
        s2 = pwait(&p, &sr, 1.0);
    } else {
        mdr_loop_rail_kill(p.a->rails[0].rail, "test: the rail dies");
        s1 = pwait_n(&p, &rr, 100);
        s2 = pwait_n(&p, &sr, 100);
    }
    CHECK(s1 == MADRAIL_ERR_PEER_UNREACHABLE && s2 == MADRAIL_ERR_PEER_UNREACHABLE,
          "last rail %s/%s: both requests end with PEER_UNREACHABLE in bounded %s (receive: %s, "
          "send: %s)", lr_names[phase], how, blackhole ? "time" : "progress calls", sts(s1),
          sts(s2));
    pair_close(&p);
out:
    free(sb);
    free(rb);
}

/* B finds a malformed message on rail 1 from A and closes that rail: A
 * must see the connection end (its rail 1 down too), or it keeps striping
 * onto a rail whose every message B drops and its next transfer waits for
 * good.  The next striped transfer completes on rail 0, exact. */
static void test_proto_close(void)
{
    enum { N = 256 * 1024 };
    const char *ov[] = {"MADRAIL_RAILS=loop:pc0,loop:pc1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_RAIL_WEIGHTS=1,1",
                        "MADRAIL_RAIL_TIMEOUT=0", "MADRAIL_RAIL_REJOIN=0", NULL};
    pair_t p;
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    uint64_t bad[2] = {0, 0};
    madrail_request_t sr, rr;
    madrail_status_t s1 = MADRAIL_ERR_IO, s2 = MADRAIL_ERR_IO;
    mdr_peer_t *ab, *ba;
    mdr_hdr_t h;
    int k;

    if (!sb || !rb || pair_open(&p, ov) != 0) {
        CHECK(0, "proto close: open");
        goto out;
    }
    ab = mdr_peer_get(p.a, p.a2b);
    ba = mdr_peer_get(p.b, p.b2a);
    pair_fill(sb, N, 5);
    CHECK(madrail_irecv(p.b, p.b2a, rb, N, 1, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, N, 1, 0, &sr) == MADRAIL_OK &&
              pwait(&p, &rr, 10) == MADRAIL_OK && pwait(&p, &sr, 10) == MADRAIL_OK &&
              ba->rails[1].ep != NULL,
          "proto close: a first transfer connects both rails");
    /* what a broken A would send on rail 1: a header of an unknown type */
    memset(&h, 0, sizeof(h));
    h.type = 0xee;
    h.len = sizeof(h);
    memcpy(bad, &h, sizeof(h));
    mdr_ctrl_recv_upcall(&ba->rails[1], bad, sizeof(h));
    CHECK(ba->rails[1].down, "proto close: B takes rail 1 down");
    for (k = 0; k < 100; k++)
        spin(&p);
    CHECK(ab->rails[1].down && strstr(ab->rails[1].last_error, "closed"),
          "proto close: A sees the connection end and takes rail 1 down too (%s)",
          ab->rails[1].down ? ab->rails[1].last_error : "A's rail 1 is still up");
    memset(rb, 0, N);
    pair_fill(sb, N, 6);
    if (madrail_irecv(p.b, p.b2a, rb, N, 2, 0, &rr) == MADRAIL_OK &&
        madrail_isend(p.a, p.a2b, sb, N, 2, 0, &sr) == MADRAIL_OK) {
        s1 = pwait(&p, &rr, 3);
        s2 = pwait(&p, &sr, 3);
    }
    CHECK(s1 == MADRAIL_OK && s2 == MADRAIL_OK && pair_verify(rb, N, 6),
          "proto close: the next transfer completes exact on rail 0 (%s, %s)", sts(s1), sts(s2));
    /* small messages, many at once (more than one rail's credits): none
     * may go where B drops them */
    {
        enum { M = 64 };
        static char smsg[M][200], rmsg[M][200];
        madrail_request_t srq[M], rrq[M];
        int done = 0;
        for (k = 0; k < M; k++) {
            memset(smsg[k], 'a' + k % 26, sizeof(smsg[k]));
            if (madrail_irecv(p.b, p.b2a, rmsg[k], sizeof(rmsg[k]), 100 + (uint64_t)k, 0,
                              &rrq[k]) != MADRAIL_OK ||
                madrail_isend(p.a, p.a2b, smsg[k], sizeof(smsg[k]), 100 + (uint64_t)k, 0,
                              &srq[k]) != MADRAIL_OK)
                break;
        }
        for (k = 0; k < M; k++)
            done += pwait(&p, &rrq[k], 1) == MADRAIL_OK && pwait(&p, &srq[k], 1) == MADRAIL_OK &&
                    memcmp(smsg[k], rmsg[k], sizeof(smsg[k])) == 0;
        CHECK(done == M, "proto close: %d small messages sent at once all arrive (%d)", M, done);
    }
    pair_close(&p);
out:
    free(sb);
    free(rb);
}

/* MADRAIL_TCP_PUT_ACK=auto with more than one rail: tcp puts complete
 * when the target placed them (MDR_RAIL_CAP_PUT_REMOTE), whatever rail
 * adaptation does, because failover re-sends a FIN lost with its rail only
 * for puts the target has (rndv.c): with completion at the socket write, a
 * rail dying mid-transfer could take bytes with it.  With one rail, or an
 * explicit 0, puts complete at the write.  Read from the rails' caps (tcp
 * on loopback; nothing is sent). */
static void test_put_ack_auto(const char *rails, const char *setting, int want_ack)
{
    const char *ov[] = {rails, setting, NULL};
    madrail_context_params_t prm = {.overrides = ov, .job_key = (const uint8_t *)"madrail-test-key"};
    madrail_context_t c = NULL;
    int r, n = 0, acked = 0;

    if (madrail_context_init(&prm, &c) != MADRAIL_OK) {
        CHECK(0, "put acks: open %s %s", rails, setting ? setting : "");
        return;
    }
    for (r = 0; r < c->nrails; r++) {
        n++;
        acked += (c->rails[r].attr.caps & MDR_RAIL_CAP_PUT_REMOTE) != 0;
    }
    CHECK(acked == (want_ack ? n : 0), "put acks: %s %s: %d of %d tcp rails complete puts at the "
          "target (want %s)", rails, setting ? setting : "(defaults)", acked, n,
          want_ack ? "all" : "none");
    madrail_context_finalize(c);
}

/* tcp over loopback: a receiver that stops calling progress in the middle
 * of a big rendezvous fills its socket buffers, so its kernel closes the
 * window: our bytes then wait with nothing in flight, and the peer's
 * kernel answers our window probes.  That peer is alive (tcp's
 * ep_link_quiet tells a closed window from a drop rule by the window,
 * tcp_info.c): no rail may time out in 4 timeouts of it, and the transfer
 * completes exact once B progresses again. */
static void test_tcp_slow_reader(void)
{
    enum { N = 16 * 1024 * 1024 };
    /* small socket buffers: the window closes after a few hundred KiB */
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_RAIL_WEIGHTS=1,1", "MADRAIL_RAIL_TIMEOUT=200ms",
                        "MADRAIL_RNDV_RECV_FIRST=0", "MADRAIL_TCP_RCVBUF=64k",
                        "MADRAIL_TCP_SNDBUF=64k", NULL};
    pair_t p;
    uint8_t *sb = malloc(N), *rb = calloc(1, N);
    madrail_request_t sr = NULL, rr = NULL;
    madrail_status_t s1, s2;
    uint64_t end;
    int r;

    if (!sb || !rb || pair_open(&p, ov) != 0) {
        CHECK(0, "slow reader: open");
        goto out;
    }
    pair_fill(sb, N, 13);
    CHECK(madrail_irecv(p.b, p.b2a, rb, N, 5, 0, &rr) == MADRAIL_OK &&
              madrail_isend(p.a, p.a2b, sb, N, 5, 0, &sr) == MADRAIL_OK,
          "slow reader: post");
    end = mdr_time_ns() + 5000000000ull;
    while (sr && sr->rndv != MDR_RNDV_PUTTING && mdr_time_ns() < end)
        spin(&p);
    CHECK(sr && sr->rndv == MDR_RNDV_PUTTING, "slow reader: setup: A is putting");
    /* B stops progressing for 4 timeouts; A keeps writing until the
     * window closes */
    end = mdr_time_ns() + 800000000ull;
    while (mdr_time_ns() < end)
        madrail_progress(p.a);
    for (r = 0; r < 2; r++)
        CHECK(p.a->rails[r].stats.timeouts == 0 && !mdr_peer_get(p.a, p.a2b)->rails[r].down,
              "slow reader: rail %d still up at A after 4 timeouts of B not progressing", r);
    CHECK(sr && !sr->complete && sr->puts_left > 0,
          "slow reader: A's send still waits for B's acknowledgements (its puts are not over)");
    s1 = pwait(&p, &rr, 30);
    s2 = pwait(&p, &sr, 30);
    CHECK(s1 == MADRAIL_OK && s2 == MADRAIL_OK && pair_verify(rb, N, 13),
          "slow reader: the transfer completes exact (%s, %s)", sts(s1), sts(s2));
    CHECK(p.a->rails[0].stats.timeouts + p.a->rails[1].stats.timeouts +
                  p.b->rails[0].stats.timeouts + p.b->rails[1].stats.timeouts == 0,
          "slow reader: no timeout on either side");
    pair_close(&p);
out:
    free(sb);
    free(rb);
}

int main(void)
{
    test_put_ack_auto("MADRAIL_RAILS=tcp:lo,tcp:lo", NULL, 1);
    test_put_ack_auto("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_RAIL_WEIGHTS=3,1", 1);
    test_put_ack_auto("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_ADAPT=0", 1);
    test_put_ack_auto("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_TCP_PUT_ACK=0", 0);
    test_put_ack_auto("MADRAIL_RAILS=tcp:lo", NULL, 0);
    test_blackhole_put();
    test_idle_then_blackhole();
    test_wildcard_blackhole();
    test_busy_not_dead();
    test_process_pause();
    test_blackhole_eager();
    test_tcp_slow_reader();
    test_proto_close();
    {
        int ph;
        for (ph = 0; ph < LR_NPHASES; ph++) {
            test_last_rail(ph, 0);
            test_last_rail(ph, 1);
        }
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
