/*
 * madrail_isend_nb (tag.c, eager.c): a message of one slot that leaves
 * this process inside the call completes there, with no request; any
 * other send goes madrail_isend's way.  Two contexts of this process,
 * driven from this thread (loop rails, and tcp:lo where the driver can
 * keep bytes of a message for its next progress).
 *
 * What must hold: no request is taken for a message that went at once
 * (the request table does not move); its msg_id cancels it like a
 * request's info.msg_id; messages sent with and without requests, and
 * with madrail_isend, arrive in the order they were sent; a message that
 * could spend the receiver's offer, a synchronous one, one above a slot,
 * one that finds no credit, and one whose bytes tcp kept all come back
 * as requests that complete.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"

#define SPIN 200000

/* Progress both until *req completes; its status (MADRAIL_ERR_NORESOURCE
 * if it never did). */
static madrail_status_t wait2(pair_t *p, madrail_request_t *req, madrail_info_t *info)
{
    madrail_status_t st = MADRAIL_ERR_NORESOURCE;
    int i, flag = 0;
    for (i = 0; i < SPIN && !flag; i++) {
        madrail_progress(p->b);
        st = madrail_test(req, &flag, info);
    }
    return flag ? st : MADRAIL_ERR_NORESOURCE;
}

static uint32_t reqs_free(madrail_context_t c)
{
    return ((mdr_ctx_t *)c)->nreqfree;
}

static int no_state_errors(pair_t *p)
{
    return ((mdr_ctx_t *)p->a)->state_errors == 0 && ((mdr_ctx_t *)p->b)->state_errors == 0;
}

/* A small message and an empty one go at once: no request, right data. */
static void test_at_once(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:n0", NULL};
    uint8_t sb[64], rb[64];
    madrail_request_t s = (madrail_request_t)&s, r;
    madrail_info_t ri;
    uint64_t msg_id = 0;
    uint32_t before;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "at once: contexts open");
        return;
    }
    pair_fill(sb, sizeof(sb), 1);
    memset(rb, 0, sizeof(rb));
    CHECK(madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 7, 0, &r) == MADRAIL_OK, "at once: irecv");
    before = reqs_free(p.a);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 7, 0, &s, &msg_id) == MADRAIL_OK,
          "at once: isend_nb of 64 bytes");
    CHECK(s == NULL, "at once: no request (%p)", (void *)s);
    CHECK(reqs_free(p.a) == before, "at once: the request table did not move (%u -> %u free)",
          before, reqs_free(p.a));
    CHECK(msg_id == ((0ull << 8) | 1u), "at once: msg_id names sequence 0 on rail 0 (%#llx)",
          (unsigned long long)msg_id);
    CHECK(((mdr_ctx_t *)p.a)->active_sends == 0, "at once: no send is active");
    CHECK(wait2(&p, &r, &ri) == MADRAIL_OK && ri.length == sizeof(sb) && ri.tag == 7 &&
              pair_verify(rb, sizeof(rb), 1),
          "at once: received whole (%zu bytes, tag %llu)", ri.length,
          (unsigned long long)ri.tag);

    s = (madrail_request_t)&s;
    CHECK(madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 8, 0, &r) == MADRAIL_OK, "empty: irecv");
    CHECK(madrail_isend_nb(p.a, p.a2b, NULL, 0, 8, 0, &s, &msg_id) == MADRAIL_OK && s == NULL,
          "empty: goes at once");
    CHECK(msg_id >> 8 == 1, "empty: msg_id names sequence 1 (%#llx)",
          (unsigned long long)msg_id);
    CHECK(wait2(&p, &r, &ri) == MADRAIL_OK && ri.length == 0, "empty: received, length %zu",
          ri.length);
    /* madrail_send goes the same way: no request for what leaves at once */
    CHECK(madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 9, 0, &r) == MADRAIL_OK, "send: irecv");
    before = reqs_free(p.a);
    CHECK(madrail_send(p.a, p.a2b, sb, sizeof(sb), 9, 0) == MADRAIL_OK &&
              reqs_free(p.a) == before,
          "madrail_send of 64 bytes: done, the request table did not move");
    CHECK(wait2(&p, &r, &ri) == MADRAIL_OK && ri.length == sizeof(sb), "send: received");
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 8, 1u << 7, &s, &msg_id) ==
              MADRAIL_ERR_INVALID,
          "unknown flag: refused as madrail_isend refuses it");
    CHECK(madrail_isend_nb(p.a, 99, sb, sizeof(sb), 8, 0, &s, &msg_id) == MADRAIL_ERR_INVALID,
          "unknown peer: refused");
    CHECK(no_state_errors(&p), "at once: no refused state transition");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

/* 48 messages, each third by madrail_isend and the others by isend_nb,
 * with 4 credits: some nb sends find no credit and come back as
 * requests.  Wildcard receives posted in order take them in the order
 * they were sent. */
#define NORD 48
static void test_order(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:o0,loop:o1", "MADRAIL_CREDITS=4", NULL};
    uint8_t sb[NORD][100], rb[NORD][100];
    madrail_request_t s[NORD], r[NORD];
    madrail_info_t si, ri;
    uint64_t msg_id;
    int i, at_once = 0, as_req = 0, bad = 0, failed = 0;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "order: contexts open");
        return;
    }
    for (i = 0; i < NORD; i++) {
        pair_fill(sb[i], sizeof(sb[i]), (unsigned)i);
        memset(rb[i], 0, sizeof(rb[i]));
        if (madrail_irecv(p.b, MADRAIL_ANY_PEER, rb[i], sizeof(rb[i]), 0, MADRAIL_TAG_ANY, &r[i]) !=
            MADRAIL_OK)
            failed++;
    }
    for (i = 0; i < NORD; i++) {
        madrail_status_t st;
        if (i % 3 == 2) {
            st = madrail_isend(p.a, p.a2b, sb[i], sizeof(sb[i]), 1000 + (uint64_t)i, 0, &s[i]);
        } else {
            st = madrail_isend_nb(p.a, p.a2b, sb[i], sizeof(sb[i]), 1000 + (uint64_t)i, 0, &s[i],
                                  &msg_id);
            if (st == MADRAIL_OK && s[i] == NULL)
                at_once++;
            else if (st == MADRAIL_OK)
                as_req++;
        }
        if (st != MADRAIL_OK)
            failed++;
        if (i % 12 == 11) /* the receiver takes some, so credits come back */
            madrail_progress(p.b), madrail_progress(p.a);
    }
    CHECK(failed == 0, "order: every send and receive started (%d failed)", failed);
    CHECK(at_once > 0 && as_req > 0,
          "order: nb sends went at once (%d) and, short of credits, as requests (%d)", at_once,
          as_req);
    for (i = 0; i < NORD; i++) {
        if (s[i] && wait2(&p, &s[i], &si) != MADRAIL_OK)
            bad++;
        if (wait2(&p, &r[i], &ri) != MADRAIL_OK || ri.tag != 1000 + (uint64_t)i ||
            ri.length != sizeof(rb[i]) || !pair_verify(rb[i], sizeof(rb[i]), (unsigned)i))
            bad++;
    }
    CHECK(bad == 0, "order: %d messages arrived in the order sent, whole (%d wrong)", NORD, bad);
    CHECK(no_state_errors(&p), "order: no refused state transition");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

/* Sends that must not go at once come back as requests that complete. */
static void test_as_request(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:q0", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", NULL};
    static uint8_t sb[40000], rb[40000];
    madrail_request_t s, r;
    madrail_info_t si, ri;
    uint64_t msg_id;
    mdr_peer_t *a2b;
    pair_t p;
    int i;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "as request: contexts open");
        return;
    }
    a2b = ((mdr_ctx_t *)p.a)->peers[p.a2b];
    pair_fill(sb, sizeof(sb), 3);

    /* above one slot: a medium message in fragments */
    madrail_irecv(p.b, p.b2a, rb, 5000, 20, 0, &r);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, 5000, 20, 0, &s, &msg_id) == MADRAIL_OK && s != NULL,
          "5000 bytes (slot 1k): a request");
    CHECK(wait2(&p, &s, &si) == MADRAIL_OK && wait2(&p, &r, &ri) == MADRAIL_OK &&
              ri.length == 5000 && pair_verify(rb, 5000, 3),
          "5000 bytes: sent and received whole");

    /* synchronous: completes once matched, so never at once */
    madrail_irecv(p.b, p.b2a, rb, 64, 21, 0, &r);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, 64, 21, MADRAIL_SEND_SYNC, &s, &msg_id) ==
                  MADRAIL_OK &&
              s != NULL,
          "synchronous: a request");
    CHECK(wait2(&p, &s, &si) == MADRAIL_OK && wait2(&p, &r, &ri) == MADRAIL_OK &&
              ri.length == 64,
          "synchronous: completes, received");

    /* the receiver's offer (a large receive posted first) could be spent
     * by a small message: that is madrail_isend's work */
    madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 22, 0, &r);
    for (i = 0; i < 1000 && a2b->nrfs_stored == 0; i++) {
        madrail_progress(p.b);
        madrail_progress(p.a);
    }
    CHECK(a2b->nrfs_stored == 1, "offer: the sender holds the receiver's offer");
    pair_fill(sb, 64, 4);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, 64, 22, 0, &s, &msg_id) == MADRAIL_OK && s != NULL,
          "offer: a small message that may spend it is a request");
    CHECK(wait2(&p, &s, &si) == MADRAIL_OK && wait2(&p, &r, &ri) == MADRAIL_OK &&
              ri.length == 64 && pair_verify(rb, 64, 4),
          "offer: the message went into the offered receive");
    CHECK(no_state_errors(&p), "as request: no refused state transition");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

/* The msg_id of a message that went at once cancels it while the
 * receiver has not matched it. */
static void test_cancel(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:c0", NULL};
    uint8_t sb[100], rb[100];
    madrail_request_t s, c, r;
    madrail_info_t ci, ri;
    madrail_status_t st;
    uint64_t msg_id = 0;
    int i, flag = 0;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "cancel: contexts open");
        return;
    }
    pair_fill(sb, sizeof(sb), 5);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 30, 0, &s, &msg_id) == MADRAIL_OK &&
              s == NULL,
          "cancel: the message went at once");
    for (i = 0; i < 100 && !flag; i++) {
        madrail_progress(p.b);
        madrail_iprobe(p.b, p.b2a, 30, 0, &flag, NULL);
    }
    CHECK(flag, "cancel: it waits unexpected at the receiver");
    CHECK(madrail_cancel_sent(p.a, p.a2b, msg_id, &c) == MADRAIL_OK, "cancel: cancel_sent");
    st = wait2(&p, &c, &ci);
    CHECK(st == MADRAIL_ERR_CANCELED && ci.cancelled == 1, "cancel: dropped (%s, cancelled %d)",
          madrail_status_str(st), ci.cancelled);
    /* the next message with that tag is the one received */
    pair_fill(sb, sizeof(sb), 6);
    madrail_irecv(p.b, p.b2a, rb, sizeof(rb), 30, 0, &r);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 30, 0, &s, &msg_id) == MADRAIL_OK,
          "cancel: next send");
    if (s)
        wait2(&p, &s, &ri);
    CHECK(wait2(&p, &r, &ri) == MADRAIL_OK && pair_verify(rb, sizeof(rb), 6),
          "cancel: the next message is the one received");
    CHECK(no_state_errors(&p), "cancel: no refused state transition");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

/* tcp writes the first small frame after a progress at once and keeps a
 * burst's later frames for the next progress: the first is done in the
 * call, the second comes back as a request that completes once tcp wrote
 * it (the sender's progress alone). */
static void test_tcp_kept(void)
{
    const char *ov[] = {"MADRAIL_RAILS=tcp:lo", NULL};
    uint8_t sb[64], rb[3][64];
    madrail_request_t s0, s1, s2, r[3];
    madrail_info_t si, ri;
    uint64_t id0, id1;
    int i, flag = 0;
    pair_t p;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "tcp: contexts open");
        return;
    }
    pair_fill(sb, sizeof(sb), 7);
    for (i = 0; i < 3; i++)
        madrail_irecv(p.b, p.b2a, rb[i], sizeof(rb[i]), 40 + (uint64_t)i, 0, &r[i]);
    /* the connection is made by the first message */
    CHECK(madrail_isend(p.a, p.a2b, sb, sizeof(sb), 40, 0, &s0) == MADRAIL_OK &&
              wait2(&p, &s0, &si) == MADRAIL_OK && wait2(&p, &r[0], &ri) == MADRAIL_OK,
          "tcp: first message (connects)");
    madrail_progress(p.a);
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 41, 0, &s1, &id0) == MADRAIL_OK &&
              s1 == NULL,
          "tcp: the first frame after a progress is written at once: no request");
    CHECK(madrail_isend_nb(p.a, p.a2b, sb, sizeof(sb), 42, 0, &s2, &id1) == MADRAIL_OK &&
              s2 != NULL,
          "tcp: the next one is kept for the progress: a request");
    CHECK(s2 && !s2->complete, "tcp: that request waits for its bytes to leave");
    for (i = 0; i < SPIN && !flag; i++) /* the sender alone */
        madrail_test(&s2, &flag, &si);
    CHECK(flag && si.status == MADRAIL_OK, "tcp: it completes with the sender's progress");
    CHECK(wait2(&p, &r[1], &ri) == MADRAIL_OK && ri.tag == 41 &&
              wait2(&p, &r[2], &ri) == MADRAIL_OK && ri.tag == 42 &&
              pair_verify(rb[2], sizeof(rb[2]), 7),
          "tcp: both received, in order");
    CHECK(no_state_errors(&p), "tcp: no refused state transition");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

/* The one rail dies under a stream of small sends (the send lane's
 * fault case): sends made before the core heard of it, and after, each
 * either went at once or comes back as a request or an error that ends in
 * bounded time; none hangs, none reports success after the failure is
 * known, and the messages that arrived before it came whole and in order. */
static void test_rail_dies(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:nd0", "MADRAIL_RAIL_TIMEOUT=0",
                        "MADRAIL_LOG_LEVEL=error", NULL};
    uint32_t v[4] = {10, 11, 12, 13}, w[4] = {0, 0, 0, 0};
    madrail_request_t s = NULL, r[4];
    madrail_status_t st, st2;
    uint64_t id;
    pair_t p;
    int i, good = 1, flag = 0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "rail dies: contexts open");
        return;
    }
    for (i = 0; i < 4; i++)
        madrail_irecv(p.b, p.b2a, &w[i], sizeof(w[i]), 50, 0, &r[i]);
    for (i = 0; i < 2; i++) {
        good &= madrail_isend_nb(p.a, p.a2b, &v[i], sizeof(v[i]), 50, 0, &s, &id) == MADRAIL_OK;
        good &= s == NULL || wait2(&p, &s, NULL) == MADRAIL_OK;
        good &= wait2(&p, &r[i], NULL) == MADRAIL_OK && w[i] == v[i];
    }
    CHECK(good, "rail dies: two messages before, at once and received in order");
    mdr_loop_rail_kill(((mdr_ctx_t *)p.a)->rails[0].rail, "test: the rail dies");
    /* before any progress: the core does not know yet */
    s = NULL;
    st = madrail_isend_nb(p.a, p.a2b, &v[2], sizeof(v[2]), 50, 0, &s, &id);
    for (i = 0; i < SPIN && s != NULL && !flag; i++) {
        madrail_progress(p.a);
        madrail_progress(p.b);
        madrail_test(&s, &flag, NULL);
    }
    CHECK(s == NULL || flag, "rail dies: a send made before the core heard of it ends (%s%s)",
          madrail_status_str(st), s == NULL ? ", no request" : ", its request completed");
    for (i = 0; i < 100; i++) {
        madrail_progress(p.a);
        madrail_progress(p.b);
    }
    CHECK(mdr_peer_get(p.a, p.a2b)->rails[0].down, "rail dies: a's rail to b is down");
    s = NULL;
    st = madrail_isend_nb(p.a, p.a2b, &v[3], sizeof(v[3]), 50, 0, &s, &id);
    st2 = st;
    if (st == MADRAIL_OK && s != NULL)
        st2 = wait2(&p, &s, NULL);
    CHECK(st2 != MADRAIL_OK && st2 != MADRAIL_ERR_NORESOURCE,
          "rail dies: a send after it is refused or fails (%s, then %s)",
          madrail_status_str(st), madrail_status_str(st2));
    CHECK(w[3] == 0, "rail dies: nothing of it arrived");
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
}

int main(void)
{
    test_at_once();
    test_order();
    test_as_request();
    test_cancel();
    test_tcp_kept();
    test_rail_dies();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
