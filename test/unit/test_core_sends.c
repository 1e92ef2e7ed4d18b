/*
 * Sends report success only for data that left the process (issue 9):
 * two contexts in this process over tcp:lo rails, progressed from this
 * thread.  The loop driver cannot show it: what it accepts is already in
 * its in-process "network", so nothing is ever left behind in a sender.
 * tcp keeps data in the sender while a connection is being made, and a
 * peer address can be bent to make a connection fail at once (a bad
 * address: ep_create refuses it) or later (a port nobody listens on).
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "pair.h"

enum { BEND_NONE, BEND_MARK, BEND_PORT };

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A local TCP port nobody listens on (bound, then closed). */
static uint16_t closed_port(void)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    uint16_t port = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = sin.sin_port;
    if (fd >= 0)
        close(fd);
    return port;
}

/* Change rail `rail` of a packed context address (see context.c): BEND_MARK
 * breaks the tcp address mark (ep_create refuses it), BEND_PORT points it
 * at a closed port (the connection is refused later). */
static void bend_addr(uint8_t *addr, size_t len, int rail, int how)
{
    size_t off = 17;
    int r, nr = addr[16];

    for (r = 0; r < nr && off + 10 <= len; r++) {
        uint16_t alen;
        memcpy(&alen, addr + off + 8, 2);
        if (r == rail) {
            uint8_t *a = addr + off + 10;
            if (how == BEND_MARK) {
                a[0] ^= 0xff;
            } else if (how == BEND_PORT) {
                uint16_t port = closed_port();
                memcpy(a + 8, &port, 2);
            }
        }
        off += 10 + alen;
    }
}

/* bend[r]: how a's copy of b's rail r address is bent. */
static void bend_all(uint8_t *addr, size_t len, void *arg)
{
    const int *bend = arg;
    int r;

    for (r = 0; bend && r < MDR_MAX_RAILS; r++)
        if (bend[r] != BEND_NONE)
            bend_addr(addr, len, r, bend[r]);
}

/* Sends go through madrail_isend, or through madrail_isend_nb when set:
 * a message the rail keeps (a connection being made) must come back as a
 * request that fails or succeeds exactly as madrail_isend's would. */
static int use_nb;

static madrail_status_t tsend(pair_t *p, const void *buf, size_t len, uint64_t tag,
                              madrail_request_t *req)
{
    uint64_t msg_id;

    if (use_nb)
        return madrail_isend_nb(p->a, p->a2b, buf, len, tag, 0, req, &msg_id);
    return madrail_isend(p->a, p->a2b, buf, len, tag, 0, req);
}

static int pair_open_bend(pair_t *p, const char *const *ov, const int *bend)
{
    return pair_open_bent(p, ov, bend_all, (void *)bend);
}

static void pair_close(pair_t *p)
{
    int i;
    for (i = 0; i < 200; i++) {
        madrail_progress(p->a);
        madrail_progress(p->b);
    }
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
}

/* Test a request until it completes, progressing both contexts when both
 * (else only the request's own, through madrail_test); bounded: returns
 * MADRAIL_INPROGRESS when it did not complete. */
static madrail_status_t pwait(pair_t *p, madrail_request_t *req, int both, madrail_info_t *info)
{
    long i;
    int flag = 0;
    madrail_status_t st;

    for (i = 0; i < 2000000 && *req; i++) {
        if (both) {
            madrail_progress(p->a);
            madrail_progress(p->b);
        }
        st = madrail_test(req, &flag, info);
        if (flag)
            return st;
        if (i % 1000 == 999)
            sleep_ms(1);
    }
    return MADRAIL_INPROGRESS;
}

/* On a connected rail a send completes through the sender's own progress:
 * the receiver need not run (MPI's eager sends rely on that). */
static void test_completes_without_receiver(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo", NULL};
    uint8_t buf[64] = {1}, rb[64];
    madrail_request_t sr, rr;
    madrail_status_t st;
    pair_t p;
    int i, done = 0;

    if (pair_open_bend(&p, ov, NULL) != 0) {
        check(0, "open a tcp:lo pair");
        return;
    }
    /* connect: one message with both sides running */
    madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 1, 0, &rr);
    madrail_isend(p.a, p.a2b, buf, sizeof(buf), 1, 0, &sr);
    st = pwait(&p, &sr, 1, NULL);
    check(st == MADRAIL_OK && pwait(&p, &rr, 1, NULL) == MADRAIL_OK, "first message (%s)",
          madrail_status_str(st));
    for (i = 0; i < 20; i++) {
        st = madrail_isend(p.a, p.a2b, buf, sizeof(buf), 2, 0, &sr);
        if (st != MADRAIL_OK || pwait(&p, &sr, 0, NULL) != MADRAIL_OK)
            break;
        done++;
    }
    check(done == 20, "%d of 20 sends completed with only the sender progressing", done);
    for (i = 0; i < 20; i++) {
        madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 2, 0, &rr);
        pwait(&p, &rr, 1, NULL);
    }
    pair_close(&p);
}

/* The defect of issue 9: a sender that does not progress past the connect
 * timeout got success and its data was dropped. */
static void test_connect_timeout(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo", "MADRAIL_TCP_CONNECT_TIMEOUT=200ms", NULL};
    uint8_t buf[64], rb[8];
    madrail_request_t sr, rr;
    madrail_status_t st, rst;
    pair_t p;

    if (pair_open_bend(&p, ov, NULL) != 0) {
        check(0, "open a tcp:lo pair");
        return;
    }
    pair_fill(buf, sizeof(buf), 1);
    madrail_irecv(p.a, p.a2b, rb, sizeof(rb), 9, 0, &rr); /* to fail with the peer */
    st = tsend(&p, buf, sizeof(buf), 3, &sr);
    check(st == MADRAIL_OK, "isend accepted (%s)", madrail_status_str(st));
    check(sr != NULL, "the connection is being made: the send is a request");
    sleep_ms(400); /* no progress anywhere: b never answers the connection */
    st = madrail_wait(&sr, NULL);
    check(st == MADRAIL_ERR_PEER_UNREACHABLE,
          "send past the connect timeout: peer unreachable, not success (%s)",
          madrail_status_str(st));
    rst = pwait(&p, &rr, 0, NULL);
    check(rst == MADRAIL_ERR_PEER_UNREACHABLE, "receive posted from that peer fails too (%s)",
          madrail_status_str(rst));
    pair_close(&p);
}

/* Rail 1's connection is refused after sends were queued on it: it never
 * carried a byte, so they go again on rail 0; every send succeeds and
 * every success was received (once: success, never delivered, and the
 * sequence hole kept every later message from being matched). */
static void test_refused_rail(void)
{
    enum { N = 64 };
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_ADAPT=0", NULL};
    const int bend[MDR_MAX_RAILS] = {BEND_NONE, BEND_PORT};
    static uint8_t sb[N][256], rb[N][256];
    madrail_request_t sr[N], rr[N];
    madrail_status_t sst[N], rst[N];
    int i, nok = 0, bad = 0, lost_ok = 0, sdone;
    madrail_rail_stats_t s1;
    long spins;
    pair_t p;

    if (pair_open_bend(&p, ov, bend) != 0) {
        check(0, "open a tcp:lo,tcp:lo pair");
        return;
    }
    for (i = 0; i < N; i++) {
        pair_fill(sb[i], sizeof(sb[i]), (unsigned)i);
        madrail_irecv(p.b, p.b2a, rb[i], sizeof(rb[i]), 100 + (uint64_t)i, 0, &rr[i]);
        rst[i] = MADRAIL_INPROGRESS;
    }
    for (i = 0; i < N; i++) {
        sst[i] = tsend(&p, sb[i], sizeof(sb[i]), 100 + (uint64_t)i, &sr[i]);
        if (sst[i] != MADRAIL_OK)
            sr[i] = NULL;
        else if (sr[i] != NULL)
            sst[i] = MADRAIL_INPROGRESS; /* (NULL: isend_nb's message left at once) */
    }
    for (spins = 0, sdone = 0; spins < 2000000 && sdone < N; spins++) {
        madrail_progress(p.b);
        for (i = 0, sdone = 0; i < N; i++) {
            int flag = 0;
            if (sr[i])
                sst[i] = madrail_test(&sr[i], &flag, NULL);
            sdone += sr[i] == NULL;
        }
    }
    /* let b take everything that left a (receives of failed sends stay) */
    for (spins = 0; spins < 200000; spins++) {
        int pending = 0;
        madrail_progress(p.a);
        for (i = 0; i < N; i++) {
            int flag = 0;
            if (rr[i])
                rst[i] = madrail_test(&rr[i], &flag, NULL);
            pending += rr[i] != NULL && sst[i] == MADRAIL_OK;
        }
        if (pending == 0)
            break;
    }
    for (i = 0; i < N; i++) {
        if (sst[i] == MADRAIL_OK) {
            nok++;
            if (rst[i] != MADRAIL_OK || !pair_verify(rb[i], sizeof(rb[i]), (unsigned)i))
                lost_ok++;
        } else {
            bad++;
        }
    }
    madrail_rail_stats(p.a, 1, &s1);
    check(sdone == N, "all %d sends completed (%d)", N, sdone);
    check(bad == 0 && nok == N, "%d of %d sends succeeded, %d failed", nok, N, bad);
    check(s1.tx_msgs > 0 && s1.failovers == 1,
          "%llu messages had been queued on the refused rail (none would prove nothing), "
          "%llu failover",
          (unsigned long long)s1.tx_msgs, (unsigned long long)s1.failovers);
    check(lost_ok == 0, "%d of %d successes never arrived (success for dropped data)", lost_ok,
          nok);
    {
        /* madrail_rail_state (the netmod's rail-state pvars): rail 1 is
         * down to the one peer it was tried with, rail 0 is up */
        madrail_rail_state_t rs0, rs1;
        madrail_status_t st0 = madrail_rail_state(p.a, 0, &rs0);
        madrail_status_t st1 = madrail_rail_state(p.a, 1, &rs1);
        check(st0 == MADRAIL_OK && st1 == MADRAIL_OK && rs1.peers == 1 && rs1.peers_down == 1 &&
                  rs1.down_events == 1 && rs1.up_events == 0,
              "rail state of the refused rail: %u peer(s), %u down, %llu down / %llu up events",
              rs1.peers, rs1.peers_down, (unsigned long long)rs1.down_events,
              (unsigned long long)rs1.up_events);
        check(rs0.peers == 1 && rs0.peers_down == 0 && rs0.down_events == 0,
              "rail state of the working rail: %u peer(s), %u down, %llu down events", rs0.peers,
              rs0.peers_down, (unsigned long long)rs0.down_events);
        check(madrail_rail_state(p.a, 2, &rs0) == MADRAIL_ERR_INVALID,
              "madrail_rail_state refuses a rail that does not exist");
    }
    {
        /* b (whose address of a is right) sends small messages, round
         * robin over its rails (MADRAIL_ADAPT=0): its rail-1 connection
         * reaches a, which takes it as the failed rail coming back up */
        madrail_request_t bs[16], br[16];
        uint8_t bsb[16][64], brb[16][64];
        madrail_rail_state_t rs1;
        int nok2 = 0;
        for (i = 0; i < 16; i++) {
            pair_fill(bsb[i], sizeof(bsb[i]), 500u + (unsigned)i);
            madrail_irecv(p.a, p.a2b, brb[i], sizeof(brb[i]), 5000 + (uint64_t)i, 0, &br[i]);
            madrail_isend(p.b, p.b2a, bsb[i], sizeof(bsb[i]), 5000 + (uint64_t)i, 0, &bs[i]);
        }
        for (i = 0; i < 16; i++)
            nok2 += pwait(&p, &bs[i], 1, NULL) == MADRAIL_OK &&
                    pwait(&p, &br[i], 1, NULL) == MADRAIL_OK &&
                    pair_verify(brb[i], sizeof(brb[i]), 500u + (unsigned)i);
        check(nok2 == 16, "16 messages from b to a, round robin over b's rails (%d arrived)", nok2);
        madrail_rail_state(p.a, 1, &rs1);
        check(rs1.up_events == 1 && rs1.peers_down == 0 && rs1.down_events == 1,
              "a's rail 1 came back up when b connected on it: %llu up / %llu down events, "
              "%u peer(s) down", (unsigned long long)rs1.up_events,
              (unsigned long long)rs1.down_events, rs1.peers_down);
    }
    {
        madrail_request_t r2, s2;
        uint8_t x = 7, y = 0;
        madrail_status_t st;
        madrail_irecv(p.b, p.b2a, &y, 1, 999, 0, &r2);
        madrail_isend(p.a, p.a2b, &x, 1, 999, 0, &s2);
        st = pwait(&p, &s2, 1, NULL);
        check(st == MADRAIL_OK && pwait(&p, &r2, 1, NULL) == MADRAIL_OK && y == 7,
              "the surviving rail carries the next send (%s)", madrail_status_str(st));
    }
    for (i = 0; i < N; i++)
        if (rr[i])
            madrail_cancel(p.b, rr[i]);
    pair_close(&p);
}

/* A connection that was up fails (as the driver reports it: rail down)
 * while it holds messages (b silent, so they are still in a's ep).  Before
 * issue 12 item 3 the peer was given up (a sequence hole b could never
 * fill); now a re-sends the copies it kept of what rail 1 was not given
 * credit for on rail 0, marked re-sent.  The tcp connection itself stays
 * open here (only the core was told), so b may get the originals on rail
 * 1 AND the copies: each message must be received exactly once, with its
 * data, and a later send works. */
static void test_sequence_hole(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", NULL};
    uint8_t buf[4][100], rbuf[5][100];
    madrail_request_t sr[4], rr[5], s2;
    madrail_status_t st[4], rst[5], st2;
    mdr_peer_t *peer;
    pair_t p;
    int i, nok = 0, nrecv = 0;
    long spins;

    if (pair_open_bend(&p, ov, NULL) != 0) {
        check(0, "open a tcp:lo,tcp:lo pair");
        return;
    }
    for (i = 0; i < 4; i++) {
        pair_fill(buf[i], sizeof(buf[i]), (unsigned)i);
        st[i] = tsend(&p, buf[i], sizeof(buf[i]), 20 + (uint64_t)i, &sr[i]);
        if (st[i] == MADRAIL_OK && sr[i] == NULL)
            st[i] = MADRAIL_ERR_INVALID; /* isend_nb: done while its rail holds it? */
    }
    peer = mdr_peer_get(p.a, p.a2b);
    check(peer->rails[1].ep != NULL && p.a->rails[1].ops->ep_backlog(peer->rails[1].ep) > 0,
          "rail 1 holds messages while b is silent");
    mdr_ep_failed_upcall(&peer->rails[1], MADRAIL_ERR_RAIL_DOWN, "test: connection lost");
    for (i = 0; i < 4; i++) {
        if (st[i] == MADRAIL_OK)
            st[i] = pwait(&p, &sr[i], 1, NULL);
        nok += st[i] == MADRAIL_OK;
    }
    check(nok == 4, "%d of 4 sends succeed (%s %s %s %s)", nok, madrail_status_str(st[0]),
          madrail_status_str(st[1]), madrail_status_str(st[2]), madrail_status_str(st[3]));
    for (i = 0; i < 5; i++) /* the fifth receive stays posted: no message is taken twice */
        madrail_irecv(p.b, p.b2a, rbuf[i], sizeof(rbuf[i]), 20 + (uint64_t)(i < 4 ? i : 0), 0,
                      &rr[i]);
    for (spins = 0; spins < 200000; spins++) {
        madrail_progress(p.a);
        madrail_progress(p.b);
    }
    for (i = 0; i < 5; i++) {
        int flag = 0;
        rst[i] = madrail_test(&rr[i], &flag, NULL);
        if (!flag)
            rst[i] = MADRAIL_INPROGRESS;
        nrecv += flag && rst[i] == MADRAIL_OK &&
                 pair_verify(rbuf[i], sizeof(rbuf[i]), (unsigned)(i < 4 ? i : 0));
    }
    check(nrecv == 4 && rst[4] == MADRAIL_INPROGRESS,
          "b received each of the 4 messages once with its data (%d; a second copy of the first: "
          "%s)",
          nrecv, madrail_status_str(rst[4]));
    check(p.a->rails[1].stats.resent_msgs > 0, "a re-sent %llu messages of rail 1",
          (unsigned long long)p.a->rails[1].stats.resent_msgs);
    st2 = madrail_isend(p.a, p.a2b, buf[0], 10, 30, 0, &s2);
    if (st2 == MADRAIL_OK)
        st2 = pwait(&p, &s2, 1, NULL);
    check(st2 == MADRAIL_OK, "a later send works (%s)", madrail_status_str(st2));
    madrail_cancel(p.b, rr[4]);
    pair_close(&p);
}

static int am_got, am_ok;
static void am_count(void *arg, madrail_peer_t src, uint64_t id, const void *data, size_t len)
{
    (void)arg;
    (void)src;
    am_got++;
    am_ok += id == 7 && len == 16 && ((const uint8_t *)data)[0] == 2;
}

/* An active message (no request watches it) queued on a rail whose
 * connection is then refused: before issue 12 item 3 it was lost for
 * good and a gave b up; now its copy goes again on rail 0: b's handler
 * gets it exactly once, and a later send succeeds. */
static void test_untracked_lost(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", NULL};
    const int bend[MDR_MAX_RAILS] = {BEND_NONE, BEND_PORT};
    uint8_t first[16] = {1}, am[16] = {2}, later[16] = {3}, rb[2][16];
    struct iovec iov = {am, sizeof(am)};
    madrail_request_t sr, rr[2];
    madrail_status_t st;
    mdr_peer_t *peer;
    pair_t p;
    long spins;

    if (pair_open_bend(&p, ov, bend) != 0) {
        check(0, "open a tcp:lo,tcp:lo pair");
        return;
    }
    am_got = am_ok = 0;
    madrail_am_set_handler(p.b, am_count, NULL);
    madrail_irecv(p.b, p.b2a, rb[0], sizeof(rb[0]), 40, 0, &rr[0]);
    madrail_irecv(p.b, p.b2a, rb[1], sizeof(rb[1]), 41, 0, &rr[1]);
    /* the first message keeps rail 0 busy, so the active message takes rail 1 */
    st = madrail_isend(p.a, p.a2b, first, sizeof(first), 40, 0, &sr);
    check(st == MADRAIL_OK, "isend (%s)", madrail_status_str(st));
    st = madrail_am_send(p.a, p.a2b, 7, &iov, 1);
    peer = mdr_peer_get(p.a, p.a2b);
    check(st == MADRAIL_OK && peer->rails[1].ep != NULL, "active message queued on rail 1 (%s)",
          madrail_status_str(st));
    pwait(&p, &sr, 1, NULL);
    st = madrail_isend(p.a, p.a2b, later, sizeof(later), 41, 0, &sr);
    if (st == MADRAIL_OK)
        st = pwait(&p, &sr, 1, NULL);
    check(st == MADRAIL_OK, "a send after the lost active message succeeds (%s)",
          madrail_status_str(st));
    for (spins = 0; spins < 100000; spins++) {
        madrail_progress(p.a);
        madrail_progress(p.b);
    }
    check(am_got == 1 && am_ok == 1, "b's handler got the active message once (%d, %d right)",
          am_got, am_ok);
    check(pwait(&p, &rr[1], 1, NULL) == MADRAIL_OK && rb[1][0] == 3,
          "b received the later message");
    if (rr[0])
        pwait(&p, &rr[0], 1, NULL);
    pair_close(&p);
}

/* ep_create refuses rail 1 when a rendezvous chunk is planned on it: the
 * chunk moves to rail 0 (once it failed the send, and the receive waited
 * for bytes that never came). */
static void test_put_replanned(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_STRIPE_MIN_CHUNK=16k", "MADRAIL_RNDV_RECV_FIRST=0", NULL};
    const int bend[MDR_MAX_RAILS] = {BEND_NONE, BEND_MARK};
    size_t n = 1 << 20;
    uint8_t *sb = malloc(n), *rb = calloc(1, n);
    madrail_request_t sr, rr;
    madrail_status_t st, rs;
    madrail_rail_stats_t s0, s1;
    pair_t p;

    if (!sb || !rb || pair_open_bend(&p, ov, bend) != 0) {
        check(0, "open a tcp:lo,tcp:lo pair");
        free(sb);
        free(rb);
        return;
    }
    pair_fill(sb, n, 5);
    madrail_irecv(p.b, p.b2a, rb, n, 11, 0, &rr);
    madrail_isend(p.a, p.a2b, sb, n, 11, 0, &sr);
    st = pwait(&p, &sr, 1, NULL);
    rs = pwait(&p, &rr, 1, NULL);
    madrail_rail_stats(p.a, 0, &s0);
    madrail_rail_stats(p.a, 1, &s1);
    check(st == MADRAIL_OK, "1 MiB send with rail 1 unconnectable: %s", madrail_status_str(st));
    check(rs == MADRAIL_OK && pair_verify(rb, n, 5), "the receive completes with every byte (%s)",
          madrail_status_str(rs));
    check(s0.tx_put_bytes == n && s1.tx_put_bytes == 0,
          "all %zu bytes put on rail 0 (rail 0 %llu, rail 1 %llu)", n,
          (unsigned long long)s0.tx_put_bytes, (unsigned long long)s1.tx_put_bytes);
    if (rr)
        madrail_cancel(p.b, rr);
    pair_close(&p);
    free(sb);
    free(rb);
}

/* Every rail of the peer refused by ep_create: no upcall will ever come,
 * yet the send and a receive posted from that peer fail (they hung). */
static void test_unreachable(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo,tcp:lo", NULL};
    const int bend[MDR_MAX_RAILS] = {BEND_MARK, BEND_MARK};
    uint8_t x = 1, y;
    madrail_request_t sr, rr;
    madrail_status_t st, rs;
    pair_t p;

    if (pair_open_bend(&p, ov, bend) != 0) {
        check(0, "open a tcp:lo,tcp:lo pair");
        return;
    }
    madrail_irecv(p.a, p.a2b, &y, 1, 5, 0, &rr);
    st = madrail_isend(p.a, p.a2b, &x, 1, 4, 0, &sr);
    if (st == MADRAIL_OK)
        st = pwait(&p, &sr, 0, NULL);
    check(st == MADRAIL_ERR_PEER_UNREACHABLE, "send to a peer no rail can reach fails (%s)",
          madrail_status_str(st));
    rs = pwait(&p, &rr, 0, NULL);
    check(rs == MADRAIL_ERR_PEER_UNREACHABLE, "receive posted from it fails too (%s)",
          madrail_status_str(rs));
    pair_close(&p);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("-- completion through the sender's progress alone\n");
    test_completes_without_receiver();
    printf("-- connect timeout passed without progress\n");
    test_connect_timeout();
    printf("-- a rail refused after sends were queued on it\n");
    test_refused_rail();
    use_nb = 1;
    printf("-- the same three through madrail_isend_nb\n");
    test_connect_timeout();
    test_refused_rail();
    test_sequence_hole();
    use_nb = 0;
    printf("-- a message lost with a connection that was up\n");
    test_sequence_hole();
    printf("-- an active message lost with a connection never made\n");
    test_untracked_lost();
    printf("-- rendezvous chunk moved off a rail that cannot connect\n");
    test_put_replanned();
    printf("-- no rail reaches the peer\n");
    test_unreachable();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
