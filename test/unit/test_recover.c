/*
 * Recovery of control messages lost with a rail (issue 12 item 3,
 * src/core/replay.c), and of rendezvous chunks whose rail died before
 * their FIN left (rndv.c), on the loop driver with two and three rails
 * (each phase: eager, RTS, CTS, puts in flight, puts placed with no FIN
 * sent, FIN in flight, FIN arrived with its credit return lost, a credit
 * return, a receiver-first offer; with three rails the copies go on rail
 * 0 and the stripe covers rail 2 too), a CANCEL lost with its rail, and
 * a CANCEL_ANS lost with its rail.  Each case puts
 * one kind of control message (an EAGER fragment, an RTS, a CTS, a FIN, a
 * credit return) in flight on rail 1, that is handed to the driver but not
 * yet delivered, and kills rail 1: the loop driver drops what is in flight
 * on a dead rail, both ways.  The sender must re-send what it has no
 * credit back for on rail 0 and the receiver must take each message
 * exactly once: every receive completes with exact data, a second receive
 * for the same tag stays unmatched, and the counters show the copies and
 * the duplicates dropped.  Without the recovery each case stalls (the
 * message is gone) or, for the credit case, would take messages twice.
 *
 * Rail 1 is chosen by taking rail 0's credits away for the moment
 * (MADRAIL_ADAPT=0: the static choice takes the lowest-latency rail with a
 * credit), and given back before anything else is sent there.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"

static void spin(pair_t *p)
{
    madrail_progress(p->a);
    madrail_progress(p->b);
}

static madrail_status_t pwait_n(pair_t *p, madrail_request_t *req, int n)
{
    int i, flag = 0;
    madrail_status_t st = MADRAIL_OK;
    for (i = 0; i < n && *req; i++) {
        spin(p);
        st = madrail_test(req, &flag, NULL);
        if (flag)
            return st;
    }
    return *req ? MADRAIL_ERR_IO : st; /* MADRAIL_ERR_IO: did not complete */
}

static const char *sts(madrail_status_t s)
{
    return s == MADRAIL_ERR_IO ? "did not complete" : madrail_status_str(s);
}

/* Take rail 0's credits from side's peer record (the next messages take
 * rail 1); restore them with the returned value. */
static unsigned rail0_off(mdr_peer_t *peer)
{
    unsigned c = peer->rails[0].credits;
    peer->rails[0].credits = 0;
    return c;
}

/* The same for every rail but rail 1 (three-rail cases); saved[] keeps
 * their credits for rails_on. */
static void rails_off(mdr_peer_t *peer, unsigned *saved)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++) {
        saved[r] = peer->rails[r].credits;
        if (r != 1)
            peer->rails[r].credits = 0;
    }
}

static void rails_on(mdr_peer_t *peer, const unsigned *saved)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++)
        if (r != 1)
            peer->rails[r].credits = saved[r];
}

static void pair_done(pair_t *p)
{
    int i;
    for (i = 0; i < 1000; i++)
        spin(p);
    CHECK(p->a->state_errors + p->b->state_errors == 0, "no state machine refused a transition");
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
}

enum { PH_EAGER, PH_RTS, PH_CTS, PH_FIN, PH_FIN_ARRIVED, PH_CREDIT, PH_RFS, PH_PUTS, PH_PUT_FIN,
       PH_MAX };
static const char *const ph_names[] = {"eager fragments", "RTS", "CTS", "FIN",
                                       "FIN arrived, its credit return lost",
                                       "credit return lost with a message",
                                       "receiver-first offer", "puts in flight",
                                       "puts placed, their FIN not sent"};

/* Every rail of peer but `keep` without credits (the next message takes
 * `keep`); saved[] for rails_back. */
static void only_rail(mdr_peer_t *peer, int keep, unsigned *saved)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++) {
        saved[r] = peer->rails[r].credits;
        if (r != keep)
            peer->rails[r].credits = 0;
    }
}

static void rails_back(mdr_peer_t *peer, int keep, const unsigned *saved)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++)
        if (r != keep)
            peer->rails[r].credits = saved[r];
}

/* The receiver also posts a second receive for the first tag: a message
 * taken twice would complete it. */
static void check_twice(pair_t *p, madrail_request_t *extra, int phase)
{
    int i, flag = 0;
    for (i = 0; i < 2000; i++)
        spin(p);
    madrail_test(extra, &flag, NULL);
    CHECK(!flag, "%s: no message was taken twice (the spare receive is still posted)",
          ph_names[phase]);
    if (!flag)
        madrail_cancel(p->b, *extra);
}

static void test_small(int phase, int nrails)
{
    enum { NM = 4, LEN = 20000 }; /* 3 fragments of a 8k slot each */
    char rails[80];
    const char *ov[] = {rails, "MADRAIL_LOG_LEVEL=error", "MADRAIL_ADAPT=0", "MADRAIL_CREDITS=4",
                        NULL};
    static uint8_t sb[NM][LEN], rb[NM][LEN], spare[LEN];
    madrail_request_t sr[NM], rr[NM], extra;
    madrail_status_t s[NM], r[NM];
    mdr_peer_t *ab, *ba;
    unsigned saved[MDR_MAX_RAILS], credit_msgs;
    int i, nok = 0;
    size_t len = phase == PH_EAGER ? LEN : 100; /* credit case: one slot each */
    pair_t p;

    snprintf(rails, sizeof(rails), "MADRAIL_RAILS=loop:rs%d%d0,loop:rs%d%d1%s", phase, nrails,
             phase, nrails, nrails == 3 ? ",loop:rs3" : "");
    if (pair_open(&p, ov) != 0) {
        CHECK(0, "%s: open", ph_names[phase]);
        return;
    }
    printf("-- %s, %d rails\n", ph_names[phase], nrails);
    ab = mdr_peer_get(p.a, p.a2b);
    ba = mdr_peer_get(p.b, p.b2a);
    for (i = 0; i < NM; i++) {
        pair_fill(sb[i], len, (unsigned)i + 1);
        madrail_irecv(p.b, p.b2a, rb[i], len, 50 + (uint64_t)i, 0, &rr[i]);
    }
    madrail_irecv(p.b, p.b2a, spare, len, 50, 0, &extra);
    /* connect both rails first, so that nothing below waits for a
     * handshake; two messages on rail 1 make B return both credits in a
     * CREDIT (MADRAIL_CREDITS=4: one is sent once 2 are owed) */
    {
        uint8_t x[2] = {1, 2}, y[2];
        madrail_request_t a1[2], b1[2];
        for (i = 0; i < 2; i++)
            madrail_irecv(p.b, p.b2a, &y[i], 1, 9, 0, &b1[i]);
        madrail_isend(p.a, p.a2b, &x[0], 1, 9, 0, &a1[0]);
        pwait_n(&p, &a1[0], 1000);
        pwait_n(&p, &b1[0], 1000);
        for (i = 0; i < 100; i++)
            spin(&p);
        rails_off(ab, saved);
        madrail_isend(p.a, p.a2b, &x[0], 1, 9, 0, &a1[0]);
        madrail_isend(p.a, p.a2b, &x[1], 1, 9, 0, &a1[1]);
        rails_on(ab, saved);
        pwait_n(&p, &a1[0], 1000);
        pwait_n(&p, &a1[1], 1000);
        pwait_n(&p, &b1[1], 1000);
        for (i = 0; i < 100; i++)
            spin(&p);
    }
    CHECK(ab->rails[1].ep && ba->rails[1].ep && ab->rails[1].credits == 4 &&
              ba->rails[1].ret_pending == 0,
          "%s: setup: rail 1 connected, all its credits back (%u)", ph_names[phase],
          ab->rails[1].credits);
    credit_msgs = ba->rails[1].credit_msgs;
    rails_off(ab, saved);
    if (phase == PH_EAGER) {
        /* the first message's 3 fragments take rail 1 (credits 4) and stay
         * in flight: B does not progress */
        s[0] = madrail_isend(p.a, p.a2b, sb[0], len, 50, 0, &sr[0]);
        CHECK(ab->rails[1].credits == 1, "%s: setup: 3 fragments on rail 1", ph_names[phase]);
    } else {
        /* messages 0-2 go on rail 1 and arrive; B returns 2 credits in a
         * CREDIT message and owes one; message 3 goes on rail 1 too.  Then
         * the CREDIT (to A) and message 3 (to B) are both in flight */
        for (i = 0; i < 3; i++)
            s[i] = madrail_isend(p.a, p.a2b, sb[i], len, 50 + (uint64_t)i, 0, &sr[i]);
        for (i = 0; i < 20; i++)
            madrail_progress(p.b);
        CHECK(ba->rails[1].credit_msgs == credit_msgs + 1 && ab->rails[1].credits == 1,
              "%s: setup: B took 3 messages and sent a CREDIT for 2 (A has 1 credit)",
              ph_names[phase]);
        s[3] = madrail_isend(p.a, p.a2b, sb[3], len, 53, 0, &sr[3]);
        CHECK(ab->rails[1].credits == 0, "%s: setup: message 3 on rail 1", ph_names[phase]);
    }
    rails_on(ab, saved);
    mdr_loop_rail_kill(p.a->rails[1].rail, "test: the rail dies");
    if (phase == PH_EAGER)
        for (i = 1; i < NM; i++) /* later messages, on rail 0 */
            s[i] = madrail_isend(p.a, p.a2b, sb[i], len, 50 + (uint64_t)i, 0, &sr[i]);
    for (i = 0; i < NM; i++) {
        r[i] = pwait_n(&p, &rr[i], 5000);
        if (s[i] == MADRAIL_OK)
            s[i] = pwait_n(&p, &sr[i], 5000);
        nok += r[i] == MADRAIL_OK && s[i] == MADRAIL_OK && pair_verify(rb[i], len, (unsigned)i + 1);
    }
    CHECK(nok == NM, "%s: %d of %d messages sent and received with exact data (first: send %s, "
                     "receive %s)",
          ph_names[phase], nok, NM, sts(s[0]), sts(r[0]));
    check_twice(&p, &extra, phase);
    CHECK(ab->rails[1].down && !ab->rails[0].down && ba->rails[1].down && !ba->rails[0].down,
          "%s: rail 1 down on both sides, rail 0 up", ph_names[phase]);
    if (phase == PH_EAGER)
        CHECK(p.a->rails[1].stats.resent_msgs == 3 && p.b->rails[1].stats.resent_dups == 0,
              "%s: A re-sent the 3 fragments (%llu), none was a duplicate (%llu)",
              ph_names[phase], (unsigned long long)p.a->rails[1].stats.resent_msgs,
              (unsigned long long)p.b->rails[1].stats.resent_dups);
    else
        CHECK(p.a->rails[1].stats.resent_msgs == 4 && p.b->rails[1].stats.resent_dups == 3,
              "%s: A re-sent the 4 messages it had no credit back for (%llu), B dropped the 3 "
              "it had (%llu)",
              ph_names[phase], (unsigned long long)p.a->rails[1].stats.resent_msgs,
              (unsigned long long)p.b->rails[1].stats.resent_dups);
    pair_done(&p);
}

/* Rendezvous striped over every rail (2 or 3); the control message of
 * the phase is in flight on rail 1 when it dies, or (PH_PUTS) rail 1's
 * put is, or (PH_PUT_FIN) B placed every chunk and A has not yet seen
 * the puts complete, so no FIN left: rail 1's chunk must be put again on
 * another rail with a FIN there (rndv.c, mdr_reput). */
static void test_rndv(int phase, int nrails)
{
    enum { N = 256 * 1024 };
    char rails[96];
    const char *ov[] = {rails, "MADRAIL_LOG_LEVEL=error", "MADRAIL_ADAPT=0",
                        phase == PH_RFS ? "MADRAIL_RNDV_RECV_FIRST=1" : "MADRAIL_RNDV_RECV_FIRST=0",
                        nrails == 3 ? "MADRAIL_RAIL_WEIGHTS=1,1,1" : "MADRAIL_RAIL_WEIGHTS=1,1", NULL};
    unsigned sv[MDR_MAX_RAILS];
    uint64_t moved0;
    uint8_t *sb = malloc(N), *rb = calloc(1, N), *spare = malloc(N);
    madrail_request_t sr, rr, extra = NULL;
    madrail_status_t s1, s2;
    mdr_peer_t *ab, *ba;
    int i;
    pair_t p;

    snprintf(rails, sizeof(rails), "MADRAIL_RAILS=loop:rv%d%d0,loop:rv%d%d1%s", phase, nrails,
             phase, nrails, nrails == 3 ? ",loop:rv32" : "");
    if (!sb || !rb || !spare || pair_open(&p, ov) != 0) {
        CHECK(0, "%s: open", ph_names[phase]);
        goto out;
    }
    printf("-- rendezvous, %s, %d rails\n", ph_names[phase], nrails);
    ab = mdr_peer_get(p.a, p.a2b);
    ba = mdr_peer_get(p.b, p.b2a);
    pair_fill(sb, N, 21);
    {
        /* connect both rails first: a rendezvous on each way */
        uint8_t x = 1, y;
        madrail_request_t a1, b1;
        for (i = 0; i < nrails; i++) { /* a message on rail i */
            mdr_peer_t *pe = i ? ab : NULL;
            if (pe)
                only_rail(pe, i, sv);
            madrail_irecv(p.b, p.b2a, &y, 1, 9, 0, &b1);
            madrail_isend(p.a, p.a2b, &x, 1, 9, 0, &a1);
            if (pe) {
                int k;
                for (k = 0; k < 5; k++)
                    madrail_progress(p.a);
                rails_back(pe, i, sv);
            }
            pwait_n(&p, &a1, 1000);
            pwait_n(&p, &b1, 1000);
        }
        only_rail(ba, 1, sv);
        madrail_irecv(p.a, p.a2b, &y, 1, 9, 0, &b1);
        madrail_isend(p.b, p.b2a, &x, 1, 9, 0, &a1);
        for (i = 0; i < 5; i++)
            madrail_progress(p.b);
        rails_back(ba, 1, sv);
        pwait_n(&p, &a1, 1000);
        pwait_n(&p, &b1, 1000);
        for (i = 0; i < 100; i++)
            spin(&p);
    }
    CHECK(ab->rails[1].ep && ba->rails[1].ep, "%s: setup: rail 1 connected both ways",
          ph_names[phase]);
    if (phase == PH_RFS) {
        /* B's receive offers its buffer on rail 1; the rail dies with the
         * offer in flight; A sends afterwards */
        only_rail(ba, 1, sv);
        madrail_irecv(p.b, p.b2a, rb, N, 7, 0, &rr);
        rails_back(ba, 1, sv);
        CHECK(rr->rfs_state == MDR_RFS_OUT && rr->rfs_rail == 1,
              "%s: setup: B's offer left on rail 1", ph_names[phase]);
        madrail_irecv(p.b, p.b2a, spare, N, 7, 0, &extra);
        mdr_loop_rail_kill(p.a->rails[1].rail, "test: the rail dies");
        for (i = 0; i < 100; i++)
            spin(&p);
        madrail_isend(p.a, p.a2b, sb, N, 7, 0, &sr);
    } else {
        madrail_irecv(p.b, p.b2a, rb, N, 7, 0, &rr);
        madrail_irecv(p.b, p.b2a, spare, N, 7, 0, &extra);
    }
    if (phase == PH_RFS) {
        /* the rail is dead already */
    } else if (phase == PH_RTS) {
        only_rail(ab, 1, sv);
        madrail_isend(p.a, p.a2b, sb, N, 7, 0, &sr);
        rails_back(ab, 1, sv);
        CHECK(sr->rndv == MDR_RNDV_RTS_SENT && sr->rts_rail == 1,
              "%s: setup: the RTS left on rail 1", ph_names[phase]);
    } else {
        madrail_isend(p.a, p.a2b, sb, N, 7, 0, &sr);
        if (phase == PH_CTS)
            only_rail(ba, 1, sv);
        for (i = 0; i < 100 && rr->rndv != MDR_RNDV_CTS_SENT; i++)
            madrail_progress(p.b);
        if (phase == PH_CTS) {
            rails_back(ba, 1, sv);
            CHECK(rr->rndv == MDR_RNDV_CTS_SENT && ba->rails[1].credits < p.b->cfg.credits,
                  "%s: setup: B's CTS left on rail 1", ph_names[phase]);
        } else if (phase == PH_PUTS || phase == PH_PUT_FIN) {
            /* A puts one chunk on each rail; B has not placed them yet
             * (PH_PUTS), or has and A has not taken their completions, so
             * no FIN left (PH_PUT_FIN) */
            for (i = 0; i < 100 && sr->rndv != MDR_RNDV_PUTTING; i++)
                madrail_progress(p.a);
            CHECK(sr->rndv == MDR_RNDV_PUTTING && sr->nputs == nrails &&
                      sr->puts_left == nrails && sr->puts[1].rail == 1 &&
                      sr->puts[1].state == MDR_PUT_INFLIGHT,
                  "%s: setup: %d chunks in flight, one on rail 1 (%d chunks, %d left)",
                  ph_names[phase], nrails, sr->nputs, sr->puts_left);
            if (phase == PH_PUT_FIN) {
                for (i = 0; i < 10; i++)
                    madrail_progress(p.b);
                CHECK(sr->puts_left == nrails && rr->fin_bytes == 0,
                      "%s: setup: B placed the chunks, no FIN left (%d left)", ph_names[phase],
                      sr->puts_left);
            }
        } else {
            /* A puts one chunk on each rail; B's progress places them;
             * A's then sends a FIN on each rail */
            for (i = 0; i < 100 && sr->rndv != MDR_RNDV_PUTTING; i++)
                madrail_progress(p.a);
            for (i = 0; i < 100; i++) { /* B places, A's next progress sends the FINs */
                madrail_progress(p.a);
                if (sr->puts_left == 0)
                    break;
                madrail_progress(p.b);
            }
            CHECK(sr->nputs == nrails && sr->puts_left == 0 && rr->fin_bytes == 0,
                  "%s: setup: both chunks placed, their FINs in flight (%d chunks, %d left, %llu "
                  "bytes reported)",
                  ph_names[phase], sr->nputs, sr->puts_left, (unsigned long long)rr->fin_bytes);
            if (phase == PH_FIN_ARRIVED) {
                /* B takes both FINs and completes; the credits it owes A
                 * for them are not returned yet when the rail dies */
                for (i = 0; i < 10; i++)
                    madrail_progress(p.b);
                CHECK(rr == NULL || rr->complete, "%s: setup: the receive completed",
                      ph_names[phase]);
            }
        }
    }
    moved0 = p.a->n_replanned_bytes;
    if (phase != PH_RFS)
        mdr_loop_rail_kill(p.a->rails[1].rail, "test: the rail dies");
    s1 = pwait_n(&p, &rr, 5000);
    s2 = pwait_n(&p, &sr, 5000);
    CHECK(s1 == MADRAIL_OK && pair_verify(rb, N, 21), "%s: the receive completes with exact data (%s)",
          ph_names[phase], sts(s1));
    CHECK(s2 == MADRAIL_OK, "%s: the send completes (%s)", ph_names[phase], sts(s2));
    check_twice(&p, &extra, phase);
    if (phase == PH_RFS) {
        /* the lost offer was answered (used or declined): B may offer again */
        madrail_request_t r2 = NULL;
        unsigned waiting = ba->nrfs_wait;
        CHECK(ba->rfs_out == NULL && waiting == 0 &&
                  madrail_irecv(p.b, p.b2a, rb, N, 8, 0, &r2) == MADRAIL_OK &&
                  r2->rfs_state == MDR_RFS_OUT,
              "%s: no offer left unanswered (%u waiting), B's next receive offers again",
              ph_names[phase], waiting);
        if (r2) { /* not posted when the offer is still waiting */
            madrail_cancel(p.b, r2);
            pwait_n(&p, &r2, 1000);
        }
    }
    CHECK(ab->rails[1].down && !ab->rails[0].down && ba->rails[1].down && !ba->rails[0].down,
          "%s: rail 1 down on both sides, rail 0 up", ph_names[phase]);
    {
        mdr_ctx_t *sender = phase == PH_CTS || phase == PH_RFS ? p.b : p.a,
                  *receiver = phase == PH_CTS || phase == PH_RFS ? p.a : p.b;
        if (phase == PH_PUTS || phase == PH_PUT_FIN)
            CHECK(p.a->n_replanned_bytes > moved0,
                  "%s: rail 1's chunk was put again on another rail (%llu bytes moved)",
                  ph_names[phase], (unsigned long long)(p.a->n_replanned_bytes - moved0));
        else
            CHECK(sender->rails[1].stats.resent_msgs >= 1,
                  "%s: the lost message was re-sent (%llu copies)", ph_names[phase],
                  (unsigned long long)sender->rails[1].stats.resent_msgs);
        if (phase == PH_FIN_ARRIVED)
            CHECK(receiver->rails[1].stats.resent_dups >= 1 && !ba->rails[0].down,
                  "%s: B dropped the FIN's copy as a duplicate (%llu), no protocol error",
                  ph_names[phase], (unsigned long long)receiver->rails[1].stats.resent_dups);
    }
    pair_done(&p);
out:
    free(sb);
    free(rb);
    free(spare);
}

/* A CANCEL lost in flight with its rail: the cancel of a send that
 * already completed (madrail_cancel_sent) goes on the rail of the
 * message, rail 1, which dies before B reads it.  Re-sent on rail 0, it
 * still drops the unexpected message at B: the cancel completes
 * cancelled and a receive B posts afterwards for that tag stays empty. */
static void test_cancel_lost(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:cx0,loop:cx1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_ADAPT=0", NULL};
    uint8_t msg[100], x = 1, y, got[100];
    madrail_request_t s, c, r, a1, b1;
    madrail_info_t si, ci;
    madrail_status_t st = MADRAIL_OK;
    mdr_peer_t *ab;
    unsigned saved;
    uint64_t tx1;
    int i, flag = 0;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "cancel lost: open");
        return;
    }
    printf("-- CANCEL lost with its rail\n");
    ab = mdr_peer_get(p.a, p.a2b);
    /* connect rail 1: a first message with rail 0's credits taken */
    madrail_irecv(p.b, p.b2a, &y, 1, 9, 0, &b1);
    saved = rail0_off(ab);
    madrail_isend(p.a, p.a2b, &x, 1, 9, 0, &a1);
    for (i = 0; i < 5; i++)
        madrail_progress(p.a);
    ab->rails[0].credits = saved;
    pwait_n(&p, &a1, 1000);
    pwait_n(&p, &b1, 1000);
    for (i = 0; i < 100; i++)
        spin(&p);
    /* the message goes on rail 1 and waits unexpected at B */
    pair_fill(msg, sizeof(msg), 61);
    saved = rail0_off(ab);
    madrail_isend(p.a, p.a2b, msg, sizeof(msg), 60, 0, &s);
    for (i = 0; i < 1000 && !flag; i++) {
        spin(&p);
        st = madrail_test(&s, &flag, &si);
    }
    for (i = 0; i < 100; i++)
        spin(&p);
    CHECK(flag && st == MADRAIL_OK && ab->rails[1].ep, "cancel lost: setup: the message left on "
          "rail 1 and waits at B");
    /* the cancel: handed to rail 1, then the rail dies before B reads it */
    tx1 = p.a->rails[1].stats.tx_msgs;
    CHECK(madrail_cancel_sent(p.a, p.a2b, si.msg_id, &c) == MADRAIL_OK, "cancel lost: cancel_sent");
    for (i = 0; i < 5; i++)
        madrail_progress(p.a);
    ab->rails[0].credits = saved;
    CHECK(p.a->rails[1].stats.tx_msgs > tx1, "cancel lost: setup: the CANCEL left on rail 1");
    mdr_loop_rail_kill(p.a->rails[1].rail, "test: the rail dies");
    for (i = 0, flag = 0; i < 5000 && !flag; i++) {
        spin(&p);
        st = madrail_test(&c, &flag, &ci);
    }
    CHECK(flag && ci.cancelled == 1 && st == MADRAIL_ERR_CANCELED,
          "cancel lost: the cancel completes and took effect (%s, cancelled %d)",
          flag ? madrail_status_str(st) : "did not complete", flag ? ci.cancelled : 0);
    CHECK(p.a->rails[1].stats.resent_msgs >= 1, "cancel lost: the CANCEL was re-sent (%llu)",
          (unsigned long long)p.a->rails[1].stats.resent_msgs);
    madrail_irecv(p.b, p.b2a, got, sizeof(got), 60, 0, &r);
    for (i = 0; i < 2000; i++)
        spin(&p);
    flag = 0;
    madrail_test(&r, &flag, NULL);
    CHECK(!flag, "cancel lost: the cancelled message never arrives at B");
    if (!flag)
        madrail_cancel(p.b, r);
    pair_done(&p);
}

/* A CANCEL_ANS lost in flight with its rail: the message and its CANCEL
 * go on rail 0; B's answer takes rail 1 (its other credits taken), which
 * dies before A reads it.  Re-sent on rail 0 by B, it completes A's
 * cancel, cancelled; B never delivers the message. */
static void test_cancel_ans_lost(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:ca0,loop:ca1", "MADRAIL_LOG_LEVEL=error",
                        "MADRAIL_ADAPT=0", NULL};
    uint8_t msg[100], x = 1, y, got[100];
    madrail_request_t s, c, r, a1, b1;
    madrail_info_t si, ci;
    madrail_status_t st = MADRAIL_OK;
    mdr_peer_t *ab, *ba;
    unsigned sv[MDR_MAX_RAILS];
    uint64_t tx1, rx0;
    int i, flag = 0;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "cancel answer lost: open");
        return;
    }
    printf("-- CANCEL_ANS lost with its rail\n");
    ab = mdr_peer_get(p.a, p.a2b);
    ba = mdr_peer_get(p.b, p.b2a);
    /* connect rail 1 both ways: a message each way with the others' credits taken */
    madrail_irecv(p.b, p.b2a, &y, 1, 9, 0, &b1);
    only_rail(ab, 1, sv);
    madrail_isend(p.a, p.a2b, &x, 1, 9, 0, &a1);
    for (i = 0; i < 5; i++)
        madrail_progress(p.a);
    rails_back(ab, 1, sv);
    pwait_n(&p, &a1, 1000);
    pwait_n(&p, &b1, 1000);
    madrail_irecv(p.a, p.a2b, &y, 1, 9, 0, &b1);
    only_rail(ba, 1, sv);
    madrail_isend(p.b, p.b2a, &x, 1, 9, 0, &a1);
    for (i = 0; i < 5; i++)
        madrail_progress(p.b);
    rails_back(ba, 1, sv);
    pwait_n(&p, &a1, 1000);
    pwait_n(&p, &b1, 1000);
    for (i = 0; i < 100; i++)
        spin(&p);
    CHECK(ab->rails[1].ep && ba->rails[1].ep, "cancel answer lost: setup: rail 1 connected");
    /* the message goes on rail 0 and waits unexpected at B */
    pair_fill(msg, sizeof(msg), 71);
    only_rail(ab, 0, sv);
    madrail_isend(p.a, p.a2b, msg, sizeof(msg), 70, 0, &s);
    for (i = 0; i < 1000 && !flag; i++) {
        spin(&p);
        st = madrail_test(&s, &flag, &si);
    }
    for (i = 0; i < 100; i++)
        spin(&p);
    CHECK(flag && st == MADRAIL_OK, "cancel answer lost: setup: the message waits at B");
    /* the CANCEL on rail 0; B answers on rail 1, the rail dies before A reads it */
    rx0 = p.a->rails[1].stats.rx_msgs;
    CHECK(madrail_cancel_sent(p.a, p.a2b, si.msg_id, &c) == MADRAIL_OK,
          "cancel answer lost: cancel_sent");
    rails_back(ab, 0, sv);
    for (i = 0; i < 5; i++)
        madrail_progress(p.a);
    tx1 = p.b->rails[1].stats.tx_msgs;
    only_rail(ba, 1, sv);
    for (i = 0; i < 5; i++)
        madrail_progress(p.b);
    rails_back(ba, 1, sv);
    CHECK(p.b->rails[1].stats.tx_msgs > tx1 && p.a->rails[1].stats.rx_msgs == rx0,
          "cancel answer lost: setup: B's answer left on rail 1, A has not read it");
    mdr_loop_rail_kill(p.a->rails[1].rail, "test: the rail dies");
    for (i = 0, flag = 0; i < 5000 && !flag; i++) {
        spin(&p);
        st = madrail_test(&c, &flag, &ci);
    }
    CHECK(flag && ci.cancelled == 1 && st == MADRAIL_ERR_CANCELED,
          "cancel answer lost: the cancel completes and took effect (%s, cancelled %d)",
          flag ? madrail_status_str(st) : "did not complete", flag ? ci.cancelled : 0);
    CHECK(p.b->rails[1].stats.resent_msgs >= 1, "cancel answer lost: B re-sent its answer (%llu)",
          (unsigned long long)p.b->rails[1].stats.resent_msgs);
    madrail_irecv(p.b, p.b2a, got, sizeof(got), 70, 0, &r);
    for (i = 0; i < 2000; i++)
        spin(&p);
    flag = 0;
    madrail_test(&r, &flag, NULL);
    CHECK(!flag, "cancel answer lost: the cancelled message never arrives at B");
    if (!flag)
        madrail_cancel(p.b, r);
    pair_done(&p);
}

int main(void)
{
    test_small(PH_EAGER, 2);
    test_small(PH_EAGER, 3);
    {
        static const int ph[] = {PH_RTS, PH_CTS, PH_PUTS, PH_PUT_FIN, PH_FIN, PH_FIN_ARRIVED};
        int k, n;
        for (k = 0; k < (int)(sizeof(ph) / sizeof(ph[0])); k++)
            for (n = 2; n <= 3; n++)
                test_rndv(ph[k], n);
    }
    test_small(PH_CREDIT, 2);
    test_small(PH_CREDIT, 3);
    test_rndv(PH_RFS, 2);
    test_rndv(PH_RFS, 3);
    test_cancel_lost();
    test_cancel_ans_lost();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
