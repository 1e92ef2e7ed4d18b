/*
 * Replies a peer may not send (issue 9, item 2): FIN, ACK, CTS, RFS_NACK,
 * RFS_REVOKE and CREDIT from the wrong peer, in the wrong state or with
 * the wrong size, and header flags that do not apply to a message type.
 *
 * Three contexts in one process on loop rails: A and B do the real
 * traffic, C is a third member of the job.  A forged message is put on the
 * wire exactly as a broken or hostile peer would put it: raw bytes handed
 * to the loop driver's ctrl_send on that peer's connection (forge.c), so
 * it arrives through the driver's progress and the core's receive path
 * like any other message; the library has no test hook for it.
 *
 * Each case checks that the victim request is untouched (not complete,
 * its buffer and bookkeeping unchanged), that the rail the message came on
 * was closed to its sender (and only that rail), and that afterwards the
 * victim transfer and other traffic complete byte-exact on the rails left.
 *
 * Closing a rail after a protocol error is one-sided (the core marks its
 * own side down; the connection stays open), so before further traffic a
 * case tells the offender's side as its driver would once the connection
 * closed (peer_closed_rail()): otherwise the offender would keep using the
 * rail and its messages would be dropped.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"
#include "forge.h"

enum { A = 0, B = 1, C = 2, N = 3 };

typedef struct {
    madrail_context_t c[N];
    madrail_peer_t p[N][N]; /* p[i][j]: context i's handle of context j */
} trio_t;

static int trio_open(trio_t *t, const char *rails, const char *extra)
{
    const char *ov[] = {rails, "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_LOG_LEVEL=error", extra, NULL};
    madrail_context_params_t prm = {.overrides = ov,
                                    .job_key = (const uint8_t *)"madrail-test-key"};
    uint8_t addr[N][MADRAIL_ADDR_MAX];
    size_t len[N];
    int i, j;

    memset(t, 0, sizeof(*t));
    for (i = 0; i < N; i++) {
        if (madrail_context_init(&prm, &t->c[i]) != MADRAIL_OK)
            return -1;
        len[i] = sizeof(addr[i]);
        if (madrail_context_address(t->c[i], addr[i], &len[i]) != MADRAIL_OK)
            return -1;
    }
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            if (i != j && madrail_peer_add(t->c[i], addr[j], len[j], &t->p[i][j]) != MADRAIL_OK)
                return -1;
    return 0;
}

/* transitions the state machines refused, all cases: forged replies must
 * be stopped by the handlers' checks before any state changes */
static uint64_t state_errors;

static void trio_close(trio_t *t)
{
    int i, k;
    for (k = 0; k < 1000; k++)
        for (i = 0; i < N; i++)
            madrail_progress(t->c[i]);
    for (i = 0; i < N; i++) {
        state_errors += t->c[i]->state_errors;
        madrail_context_finalize(t->c[i]);
    }
}

/* Progress the contexts in mask (bit i: context i) n times. */
static void spin(trio_t *t, unsigned mask, int n)
{
    int i, k;
    for (k = 0; k < n; k++)
        for (i = 0; i < N; i++)
            if (mask & (1u << i))
                madrail_progress(t->c[i]);
}
#define ALL 7u
#define ONLY(x) (1u << (x))

static mdr_peer_t *peer_of(trio_t *t, int i, int j)
{
    return mdr_peer_get(t->c[i], t->p[i][j]);
}

/* Is rail r of context i to context j closed? */
static int rail_down(trio_t *t, int i, int j, int r)
{
    return peer_of(t, i, j)->rails[r].down;
}

/* Rails of context i to context j that are closed, as a bit mask. */
static unsigned rails_down(trio_t *t, int i, int j)
{
    unsigned m = 0;
    int r;
    for (r = 0; r < t->c[i]->nrails; r++)
        if (rail_down(t, i, j, r))
            m |= 1u << r;
    return m;
}

/* Put len raw bytes on rail r from context `from` to context `to`, through
 * the driver as any control message travels (forge.c); only the header's
 * len is filled in here (credits stay as given: 0 unless a case says
 * otherwise). */
static int forge(trio_t *t, int from, int to, int r, void *msg, size_t len)
{
    ((mdr_hdr_t *)msg)->len = (uint32_t)len;
    return mdr_forge_send(t->c[from], t->p[from][to], r, msg, len) == MADRAIL_OK ? 0 : -1;
}

/* The offender learns that rail r to `victim` is gone, as its driver
 * reports a closed connection. */
static void peer_closed_rail(trio_t *t, int offender, int victim, int r)
{
    mdr_ep_failed_upcall(&peer_of(t, offender, victim)->rails[r], MADRAIL_ERR_RAIL_DOWN,
                         "test: the peer closed this rail after a protocol error");
}

static madrail_status_t pwait(trio_t *t, madrail_request_t *req, madrail_info_t *info)
{
    long i;
    int flag = 0;
    madrail_status_t st = MADRAIL_OK;
    for (i = 0; i < 50000 && *req; i++) {
        spin(t, ALL, 1);
        st = madrail_test(req, &flag, info);
        if (flag)
            return st;
    }
    printf("  (request did not complete)\n");
    return MADRAIL_ERR_IO;
}

static int all_bytes(const uint8_t *b, size_t n, uint8_t v)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

static int regs_held(const mdr_req_t *req)
{
    int r, n = 0;
    for (r = 0; r < MDR_MAX_RAILS; r++)
        n += req->reg[r] != NULL;
    return n;
}

/* One message from s to d, byte-exact: the job's other traffic. */
static int exchange(trio_t *t, int s, int d, size_t n, uint64_t tag)
{
    uint8_t *sb = malloc(n + 1), *rb = calloc(1, n + 1);
    madrail_request_t sr, rr;
    madrail_info_t info;
    int ok;

    pair_fill(sb, n, (unsigned)tag);
    madrail_irecv(t->c[d], t->p[d][s], rb, n, tag, 0, &rr);
    ok = madrail_isend(t->c[s], t->p[s][d], sb, n, tag, 0, &sr) == MADRAIL_OK;
    ok = ok && pwait(t, &rr, &info) == MADRAIL_OK && info.length == n && pair_verify(rb, n, (unsigned)tag);
    ok = ok && pwait(t, &sr, NULL) == MADRAIL_OK;
    free(sb);
    free(rb);
    return ok;
}

/* Traffic between every pair, both directions, eager and rendezvous. */
static int others_complete(trio_t *t, uint64_t tag)
{
    int i, j, ok = 1;
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++)
            if (i != j) {
                ok &= exchange(t, i, j, 300, tag++);
                ok &= exchange(t, i, j, 40000, tag++);
            }
    return ok;
}

/* ---------------- FIN ---------------- */

/* Reproduction 2 of the issue: a FIN from a third peer for a 100,000-byte
 * receive whose CTS is out marked it successful with none of its bytes. */
static void test_fin_third_peer(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN);
    madrail_request_t sr, rr;
    mdr_req_t *r;
    mdr_fin_hdr_t f;
    madrail_info_t info;
    int i;

    printf("# FIN from a third peer for a receive waiting for puts (CTS sent)\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:f1a,loop:f1b", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 1);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], MADRAIL_ANY_PEER, rb, LEN, 1, 0, &rr);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 1, 0, &sr);
    r = rr;
    /* B only: it matches the RTS and answers CTS, which A has not seen */
    for (i = 0; i < 50 && !(r->matched && r->xfer_len == LEN); i++)
        spin(&t, ONLY(B), 1);
    CHECK(r->matched && r->xfer_len == LEN && !r->complete, "setup: B's receive sent its CTS");

    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = r->id;
    f.bytes = LEN;
    forge(&t, C, B, 0, &f, sizeof(f));
    spin(&t, ONLY(B) | ONLY(C), 10);
    CHECK(!r->complete && r->fin_bytes == 0, "the receive is untouched (complete %d, %llu FIN bytes)",
          r->complete, (unsigned long long)r->fin_bytes);
    CHECK(all_bytes(rb, LEN, 0x5a), "its buffer is unchanged");
    CHECK(rails_down(&t, B, C) == 1u, "B closed rail 0 to C, only that (mask %x)",
          rails_down(&t, B, C));
    CHECK(rails_down(&t, B, A) == 0, "B's rails to A stay up");

    peer_closed_rail(&t, C, B, 0);
    CHECK(pwait(&t, &rr, &info) == MADRAIL_OK && info.length == LEN && pair_verify(rb, LEN, 1),
          "the receive then completes with A's bytes");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    CHECK(others_complete(&t, 1000), "other traffic completes (all pairs, both ways)");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* Reproduction 1 of the issue: a FIN of 0 bytes from the sender itself
 * completed a small receive still receiving fragments; the application
 * took its buffer back (here: freed it, as the netmod does), and the later
 * fragments were written into it (ASan: heap-use-after-free).  Rail 1 is
 * slow (delay=), so fragments on it arrive last. */
static void test_fin_eager_in_progress(void)
{
    enum { LEN = 3000 };
    trio_t t;
    uint8_t sb[LEN], *rb = malloc(LEN);
    madrail_request_t sr, rr;
    mdr_req_t *r;
    mdr_fin_hdr_t f;
    madrail_info_t info;
    int i, flag = 0;

    printf("# FIN from the right peer for a receive still receiving eager fragments\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:f2a,loop:f2b;delay=40", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 2);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 2, 0, &rr);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 2, 0, &sr);
    r = rr;
    for (i = 0; i < 5 && !r->matched; i++)
        spin(&t, ONLY(B), 1);
    CHECK(r->matched && r->inmsg && !r->complete && r->inmsg->recvd < LEN,
          "setup: B's receive matched, %zu of %d bytes arrived", r->inmsg ? r->inmsg->recvd : 0,
          LEN);

    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = r->id;
    f.bytes = 0;
    forge(&t, A, B, 0, &f, sizeof(f));
    spin(&t, ONLY(B), 2);
    CHECK(!r->complete && r->fin_bytes == 0 && r->inmsg, "FIN of 0 bytes: the receive is untouched");
    CHECK(rails_down(&t, B, A) == 1u, "B closed rail 0 to A, only that (mask %x)",
          rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 0);
    /* what an application does with a receive reported complete */
    madrail_test(&rr, &flag, NULL);
    if (flag) {
        free(rb);
        rb = NULL;
    }
    CHECK(!flag, "the application is not told the receive is done");
    spin(&t, ALL, 100); /* the fragments on rail 1 arrive */
    CHECK(rb && pwait(&t, &rr, &info) == MADRAIL_OK && info.length == LEN && pair_verify(rb, LEN, 2),
          "the receive completes byte-exact once its last fragments came on rail 1");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    CHECK(others_complete(&t, 1100), "other traffic completes");
    trio_close(&t);
    free(rb);
}

/* Wrong state and wrong sizes from the right peer, one rail each:
 *   rail 3: FIN for a receive not matched, no offer out (not a rendezvous)
 *   rail 2: FIN of xfer_len + 1 bytes for a receive whose CTS is out
 *   rail 1: FIN of 0 bytes for it
 * then the transfer completes on rail 0. */
static void test_fin_state_size(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN), small[100];
    madrail_request_t sr, rr, rr2, sr2;
    mdr_req_t *r, *r2;
    mdr_fin_hdr_t f;
    madrail_info_t info;
    int i;

    printf("# FIN in the wrong state and with wrong sizes\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:f3a,loop:f3b,loop:f3c,loop:f3d",
                  "MADRAIL_RNDV_RECV_FIRST=0") != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 3);
    memset(rb, 0x5a, LEN);
    memset(small, 0x5a, sizeof(small));
    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;

    madrail_irecv(t.c[B], MADRAIL_ANY_PEER, small, sizeof(small), 33, 0, &rr2);
    r2 = rr2;
    f.rreq_id = r2->id;
    f.bytes = sizeof(small);
    forge(&t, A, B, 3, &f, sizeof(f));
    spin(&t, ONLY(B), 3);
    CHECK(!r2->complete && !r2->matched && r2->fin_bytes == 0 &&
              all_bytes(small, sizeof(small), 0x5a),
          "FIN for a posted, unmatched receive: untouched");
    CHECK(rails_down(&t, B, A) == 8u, "... and rail 3 closed (mask %x)", rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 3);

    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 3, 0, &rr);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 3, 0, &sr);
    r = rr;
    for (i = 0; i < 50 && !(r->matched && r->xfer_len == LEN); i++)
        spin(&t, ONLY(B), 1);
    CHECK(r->matched && r->xfer_len == LEN && !r->complete, "setup: CTS out for %d bytes", LEN);
    f.rreq_id = r->id;
    f.bytes = LEN + 1;
    forge(&t, A, B, 2, &f, sizeof(f));
    spin(&t, ONLY(B), 3);
    CHECK(!r->complete && r->fin_bytes == 0 && all_bytes(rb, LEN, 0x5a),
          "FIN of xfer_len + 1 bytes: untouched (%llu FIN bytes)", (unsigned long long)r->fin_bytes);
    CHECK(rails_down(&t, B, A) == 0xcu, "... and rail 2 closed (mask %x)", rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 2);
    f.bytes = 0;
    forge(&t, A, B, 1, &f, sizeof(f));
    spin(&t, ONLY(B), 3);
    CHECK(!r->complete && r->fin_bytes == 0, "FIN of 0 bytes: untouched");
    CHECK(rails_down(&t, B, A) == 0xeu, "... and rail 1 closed (mask %x)", rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 1);

    CHECK(pwait(&t, &rr, &info) == MADRAIL_OK && info.length == LEN && pair_verify(rb, LEN, 3),
          "the rendezvous completes on rail 0");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "its send completes");
    pair_fill(small, sizeof(small), 4);
    madrail_isend(t.c[A], t.p[A][B], small, sizeof(small), 33, 0, &sr2);
    CHECK(pwait(&t, &rr2, &info) == MADRAIL_OK && info.length == sizeof(small),
          "the receive that got a FIN completes with its own message");
    pwait(&t, &sr2, NULL);
    CHECK(others_complete(&t, 1200), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* A FIN from a third peer for a receive with a receiver-first offer out:
 * it counted towards the offer, so A's RFS_DATA completed the receive at
 * once, before A's bytes were in it. */
static void test_fin_rfs_third_peer(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN);
    madrail_request_t sr, rr;
    mdr_req_t *r;
    mdr_fin_hdr_t f;
    madrail_info_t info;

    printf("# FIN from a third peer for a receive with an offer out\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:f4a,loop:f4b", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 5);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 5, 0, &rr);
    r = rr;
    CHECK(r->rfs_state == MDR_RFS_OUT, "setup: B offered its buffer to A");
    memset(&f, 0, sizeof(f));
    f.h.type = MDR_MSG_FIN;
    f.rreq_id = r->id;
    f.bytes = LEN;
    forge(&t, C, B, 1, &f, sizeof(f));
    spin(&t, ONLY(B) | ONLY(C), 5);
    CHECK(!r->complete && r->fin_bytes == 0 && r->rfs_state == MDR_RFS_OUT,
          "the receive is untouched (%llu FIN bytes)", (unsigned long long)r->fin_bytes);
    CHECK(rails_down(&t, B, C) == 2u, "B closed rail 1 to C (mask %x)", rails_down(&t, B, C));
    peer_closed_rail(&t, C, B, 1);
    spin(&t, ALL, 20);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 5, 0, &sr);
    CHECK(pwait(&t, &rr, &info) == MADRAIL_OK && info.length == LEN && pair_verify(rb, LEN, 5),
          "the receiver-first transfer completes byte-exact");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    CHECK(others_complete(&t, 1300), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* ---------------- ACK ---------------- */

static void test_ack(void)
{
    trio_t t;
    uint8_t sb[100], rb[100], big[40000];
    madrail_request_t sr, rr, sr2;
    mdr_req_t *s, *s2;
    mdr_id_hdr_t a;
    uint8_t junk[sizeof(mdr_id_hdr_t) + 8];

    printf("# ACK from a third peer, in the wrong state, of the wrong size\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:k0,loop:k1,loop:k2,loop:k3",
                  "MADRAIL_RNDV_RECV_FIRST=0") != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, sizeof(sb), 6);
    pair_fill(big, sizeof(big), 7);
    madrail_isend(t.c[A], t.p[A][B], sb, sizeof(sb), 6, MADRAIL_SEND_SYNC, &sr);
    s = sr;
    spin(&t, ALL, 20);
    CHECK(!s->complete && s->wait_ack == MDR_ACK_WAIT, "setup: A's synchronous send waits for B");

    memset(&a, 0, sizeof(a));
    a.h.type = MDR_MSG_ACK;
    a.id = s->id;
    forge(&t, C, A, 0, &a, sizeof(a));
    spin(&t, ONLY(A) | ONLY(C), 5);
    CHECK(!s->complete && s->wait_ack == MDR_ACK_WAIT, "ACK from C: A's send is untouched");
    CHECK(rails_down(&t, A, C) == 1u && rails_down(&t, A, B) == 0,
          "A closed rail 0 to C, only that (mask %x)", rails_down(&t, A, C));
    peer_closed_rail(&t, C, A, 0);

    /* wrong state: an ACK from B for A's rendezvous send (not synchronous) */
    madrail_isend(t.c[A], t.p[A][B], big, sizeof(big), 7, 0, &sr2);
    s2 = sr2;
    spin(&t, ALL, 5);
    a.id = s2->id;
    forge(&t, B, A, 1, &a, sizeof(a));
    spin(&t, ONLY(A), 5);
    CHECK(!s2->complete && s2->rndv == MDR_RNDV_RTS_SENT,
          "ACK for a send that waits for none: untouched");
    CHECK(rails_down(&t, A, B) == 2u, "... and rail 1 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 1);
    /* wrong size */
    memset(junk, 0, sizeof(junk));
    memcpy(junk, &a, sizeof(a));
    ((mdr_id_hdr_t *)junk)->id = s->id;
    forge(&t, B, A, 2, junk, sizeof(junk));
    spin(&t, ONLY(A), 5);
    CHECK(!s->complete && s->wait_ack == MDR_ACK_WAIT, "ACK of %zu bytes: untouched", sizeof(junk));
    CHECK(rails_down(&t, A, B) == 6u, "... and rail 2 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 2);

    memset(rb, 0, sizeof(rb));
    madrail_irecv(t.c[B], t.p[B][A], rb, sizeof(rb), 6, 0, &rr);
    CHECK(pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, sizeof(rb), 6), "B receives");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "then A's synchronous send completes");
    {
        static uint8_t rbig[40000];
        madrail_request_t rr2;
        madrail_irecv(t.c[B], t.p[B][A], rbig, sizeof(rbig), 7, 0, &rr2);
        CHECK(pwait(&t, &rr2, NULL) == MADRAIL_OK && pair_verify(rbig, sizeof(rbig), 7) &&
                  pwait(&t, &sr2, NULL) == MADRAIL_OK,
              "the rendezvous send completes byte-exact");
    }
    CHECK(others_complete(&t, 1400), "other traffic completes");
    trio_close(&t);
}

/* The receiver acknowledges a synchronous send when its first fragment
 * matches: with few credits the ACK comes back before the last fragments
 * have left, and was refused as "ACK for unknown send". */
static void test_ack_before_last_fragment(void)
{
    enum { LEN = 6000 };
    trio_t t;
    uint8_t sb[LEN], rb[LEN];
    madrail_request_t sr, rr;
    int ok;

    printf("# a synchronous medium send whose ACK overtakes its last fragments\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:k9", "MADRAIL_CREDITS=2") != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 8);
    memset(rb, 0, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 8, 0, &rr);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 8, MADRAIL_SEND_SYNC, &sr);
    ok = pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, LEN, 8);
    CHECK(ok && pwait(&t, &sr, NULL) == MADRAIL_OK, "send and receive complete byte-exact");
    CHECK(rails_down(&t, A, B) == 0 && rails_down(&t, B, A) == 0, "no rail closed");
    trio_close(&t);
}

/* ---------------- CTS ---------------- */

/* A CTS with one key descriptor for `rail` (8 bytes of key). */
static size_t make_cts(uint8_t *buf, uint64_t sreq, uint64_t xfer, uint32_t nkeys, uint8_t rail)
{
    mdr_cts_hdr_t c;
    mdr_key_desc_t d;
    memset(buf, 0, 256);
    memset(&c, 0, sizeof(c));
    c.h.type = MDR_MSG_CTS;
    c.sreq_id = sreq;
    c.rreq_id = 0x100000001ull;
    c.xfer_len = xfer;
    c.nkeys = nkeys;
    memcpy(buf, &c, sizeof(c));
    if (!nkeys)
        return sizeof(c);
    memset(&d, 0, sizeof(d));
    d.rail = rail;
    d.key_len = 8;
    d.raddr = 0x10000;
    memcpy(buf + sizeof(c), &d, sizeof(d));
    return sizeof(c) + sizeof(d) + 8;
}

static void test_cts(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN), msg[256], small[64];
    madrail_request_t sr, rr, ss, srr;
    mdr_req_t *s, *s2;
    size_t n;

    printf("# CTS from a third peer, in the wrong state, of the wrong size, with bad keys\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:c0,loop:c1,loop:c2,loop:c3,loop:c4,loop:c5",
                  "MADRAIL_RNDV_RECV_FIRST=0") != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 9);
    memset(rb, 0, LEN);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 9, 0, &sr);
    s = sr;
    spin(&t, ALL, 10);
    CHECK(s->rndv == MDR_RNDV_RTS_SENT && !s->complete, "setup: A's send waits for a CTS");
#define CTS_UNTOUCHED(s) (!(s)->complete && (s)->rndv == MDR_RNDV_RTS_SENT && (s)->nputs == 0)

    n = make_cts(msg, s->id, LEN, 1, 0);
    forge(&t, C, A, 0, msg, n);
    spin(&t, ONLY(A) | ONLY(C), 5);
    CHECK(CTS_UNTOUCHED(s), "CTS from C: A's send untouched");
    CHECK(rails_down(&t, A, C) == 1u && rails_down(&t, A, B) == 0, "A closed rail 0 to C only");
    peer_closed_rail(&t, C, A, 0);

    n = make_cts(msg, s->id, LEN, 1, 7);
    forge(&t, B, A, 1, msg, n);
    spin(&t, ONLY(A), 5);
    CHECK(CTS_UNTOUCHED(s), "CTS naming rail 7 of 6: untouched (complete %d, status %s)",
          s->complete, madrail_status_str(s->info.status));
    CHECK(rails_down(&t, A, B) == 2u, "... and rail 1 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 1);

    n = make_cts(msg, s->id, LEN, 0, 0);
    forge(&t, B, A, 2, msg, n);
    spin(&t, ONLY(A), 5);
    CHECK(CTS_UNTOUCHED(s), "CTS with no key for %d bytes: untouched (complete %d, status %s)",
          LEN, s->complete, madrail_status_str(s->info.status));
    CHECK(rails_down(&t, A, B) == 6u, "... and rail 2 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 2);

    n = make_cts(msg, s->id, LEN + 1, 1, 0);
    forge(&t, B, A, 3, msg, n);
    spin(&t, ONLY(A), 5);
    CHECK(CTS_UNTOUCHED(s), "CTS for %d bytes of a %d-byte send: untouched", LEN + 1, LEN);
    CHECK(rails_down(&t, A, B) == 14u, "... and rail 3 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 3);

    /* wrong state: a CTS for a synchronous eager send waiting for its ACK */
    pair_fill(small, sizeof(small), 10);
    madrail_isend(t.c[A], t.p[A][B], small, sizeof(small), 10, MADRAIL_SEND_SYNC, &ss);
    s2 = ss;
    n = make_cts(msg, s2->id, sizeof(small), 1, 0);
    forge(&t, B, A, 4, msg, n);
    spin(&t, ONLY(A), 5);
    CHECK(!s2->complete && s2->wait_ack == MDR_ACK_WAIT && s2->rndv == MDR_RNDV_NONE,
          "CTS for an eager send: untouched");
    CHECK(rails_down(&t, A, B) == 30u, "... and rail 4 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 4);

    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 9, 0, &rr);
    CHECK(pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, LEN, 9), "the rendezvous completes");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    madrail_irecv(t.c[B], t.p[B][A], rb, sizeof(small), 10, 0, &srr);
    CHECK(pwait(&t, &srr, NULL) == MADRAIL_OK && pwait(&t, &ss, NULL) == MADRAIL_OK &&
              pair_verify(rb, sizeof(small), 10),
          "the synchronous send completes");
    CHECK(others_complete(&t, 1500), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* ---------------- RFS_NACK ---------------- */

static void test_nack(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN), small[64];
    madrail_request_t sr, rr, rr2;
    mdr_req_t *r, *r2;
    mdr_id_hdr_t nk;
    uint8_t junk[sizeof(mdr_id_hdr_t) + 8];
    int regs;

    printf("# RFS_NACK from a third peer, in the wrong state, of the wrong size\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:n0,loop:n1,loop:n2", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    pair_fill(sb, LEN, 11);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 11, 0, &rr);
    r = rr;
    spin(&t, ALL, 20);
    regs = regs_held(r);
    CHECK(r->rfs_state == MDR_RFS_OUT && regs > 0 &&
              !mdr_list_empty(&peer_of(&t, A, B)->rfs_stored),
          "setup: B's offer is out (%d registrations) and A keeps it", regs);
#define NACK_UNTOUCHED(r) (!(r)->complete && (r)->rfs_state == MDR_RFS_OUT && regs_held(r) == regs)

    memset(&nk, 0, sizeof(nk));
    nk.h.type = MDR_MSG_RFS_NACK;
    nk.id = r->id;
    forge(&t, C, B, 0, &nk, sizeof(nk));
    spin(&t, ONLY(B) | ONLY(C), 5);
    CHECK(NACK_UNTOUCHED(r), "RFS_NACK from C: the offer is untouched (state %d, %d regs)",
          r->rfs_state, regs_held(r));
    CHECK(rails_down(&t, B, C) == 1u && rails_down(&t, B, A) == 0, "B closed rail 0 to C only");
    peer_closed_rail(&t, C, B, 0);

    memset(junk, 0, sizeof(junk));
    memcpy(junk, &nk, sizeof(nk));
    forge(&t, A, B, 1, junk, sizeof(junk));
    spin(&t, ONLY(B), 5);
    CHECK(NACK_UNTOUCHED(r), "RFS_NACK of %zu bytes: untouched", sizeof(junk));
    CHECK(rails_down(&t, B, A) == 2u, "... and rail 1 closed (mask %x)", rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 1);

    /* wrong state: for a receive that offered nothing (any source) */
    memset(small, 0x5a, sizeof(small));
    madrail_irecv(t.c[B], MADRAIL_ANY_PEER, small, sizeof(small), 12, 0, &rr2);
    r2 = rr2;
    nk.id = r2->id;
    forge(&t, A, B, 2, &nk, sizeof(nk));
    spin(&t, ONLY(B), 5);
    CHECK(!r2->complete && !r2->matched && r2->rfs_state == MDR_RFS_NONE &&
              all_bytes(small, sizeof(small), 0x5a),
          "RFS_NACK for a receive with no offer: untouched");
    CHECK(rails_down(&t, B, A) == 6u, "... and rail 2 closed (mask %x)", rails_down(&t, B, A));
    peer_closed_rail(&t, A, B, 2);
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 11, 0, &sr);
    CHECK(pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, LEN, 11),
          "A spends the offer: the receiver-first transfer completes byte-exact");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    {
        madrail_request_t s2;
        uint8_t v[64];
        pair_fill(v, sizeof(v), 13);
        madrail_isend(t.c[C], t.p[C][B], v, sizeof(v), 12, 0, &s2);
        CHECK(pwait(&t, &rr2, NULL) == MADRAIL_OK && pair_verify(small, sizeof(small), 13),
              "the any-source receive completes with C's message");
        pwait(&t, &s2, NULL);
    }
    CHECK(others_complete(&t, 1600), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* ---------------- RFS_REVOKE ---------------- */

static void test_revoke(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN);
    madrail_request_t sr, rr, rc;
    mdr_req_t *r;
    mdr_peer_t *ab;
    mdr_id_hdr_t rv;
    madrail_info_t info;
    uint64_t revoked;
    uint8_t junk[sizeof(mdr_id_hdr_t) + 8];

    printf("# RFS_REVOKE from a third peer, in the wrong state, of the wrong size\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:v0,loop:v1,loop:v2", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    ab = peer_of(&t, A, B);
    memset(&rv, 0, sizeof(rv));
    rv.h.type = MDR_MSG_RFS_REVOKE;

    /* a real cancel: its revoke is honoured (A answers RFS_NACK) */
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 15, 0, &rc);
    revoked = rc->id;
    spin(&t, ALL, 20);
    CHECK(rc->rfs_state == MDR_RFS_OUT && !mdr_list_empty(&ab->rfs_stored), "setup: an offer out");
    madrail_cancel(t.c[B], rc);
    CHECK(pwait(&t, &rc, &info) == MADRAIL_ERR_CANCELED && info.cancelled &&
              mdr_list_empty(&ab->rfs_stored),
          "cancel: revoked, A dropped the offer, the receive is cancelled");
    CHECK(rails_down(&t, A, B) == 0, "the real revoke closed nothing");
    /* wrong state: the same offer revoked again (B has none left to revoke) */
    rv.id = revoked;
    forge(&t, B, A, 2, &rv, sizeof(rv));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, B) == 4u, "a second RFS_REVOKE of that offer closes rail 2 (mask %x)",
          rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 2);

    pair_fill(sb, LEN, 14);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 14, 0, &rr);
    r = rr;
    spin(&t, ALL, 20);
    CHECK(r->rfs_state == MDR_RFS_OUT && !mdr_list_empty(&ab->rfs_stored),
          "setup: A keeps B's new offer");

    rv.id = r->id;
    forge(&t, C, A, 0, &rv, sizeof(rv));
    spin(&t, ONLY(A) | ONLY(C), 5);
    CHECK(!mdr_list_empty(&ab->rfs_stored) && r->rfs_state == MDR_RFS_OUT && !r->complete,
          "RFS_REVOKE from C: A still keeps B's offer");
    CHECK(rails_down(&t, A, C) == 1u && rails_down(&t, A, B) == 4u, "A closed rail 0 to C only");
    peer_closed_rail(&t, C, A, 0);

    memset(junk, 0, sizeof(junk));
    memcpy(junk, &rv, sizeof(rv));
    forge(&t, B, A, 1, junk, sizeof(junk));
    spin(&t, ONLY(A), 5);
    CHECK(!mdr_list_empty(&ab->rfs_stored), "RFS_REVOKE of %zu bytes: offer kept", sizeof(junk));
    CHECK(rails_down(&t, A, B) == 6u, "... and rail 1 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 1);

    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 14, 0, &sr);
    CHECK(mdr_list_empty(&ab->rfs_stored), "A's send spent the offer");
    CHECK(pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, LEN, 14),
          "the receiver-first transfer completes byte-exact");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    CHECK(others_complete(&t, 1700), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

/* ---------------- CREDIT ---------------- */

/* Credit returns come on the connection they return credits for, so a
 * third peer can only return credits of its own.  Checked: a return of
 * credits never spent (ctrl.c, older than this test), a CREDIT below the
 * return threshold (ctrl.c, issue 9 item 3), and the header table's own
 * rules for CREDIT: no body, no flags, even with a count that is right. */
/* GONE (watch.c): a peer whose rail 1 to A failed by its own account
 * (its driver's error) tells A on a surviving rail, and A closes its end
 * of rail 1 at once (the fence: nothing the dead connection holds may
 * land after a FIN that follows); a GONE naming the rail it came on or a
 * rail A does not have closes the rail it came on, a GONE for a rail
 * already down changes nothing, and other traffic goes on. */
static void test_gone(void)
{
    trio_t t;
    mdr_gone_hdr_t g;
    mdr_peer_t *ab;

    printf("# GONE: a rail the peer gave up, and malformed ones\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:go0,loop:go1,loop:go2", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    ab = peer_of(&t, A, B);
    CHECK(exchange(&t, A, B, 100000, 40) && exchange(&t, B, A, 100000, 41) &&
              ab->rails[1].ep != NULL && peer_of(&t, B, A)->rails[1].ep != NULL,
          "setup: rail 1 connected both ways");
    /* a GONE alone (nothing re-sent with it): A closes its end of rail 1 */
    memset(&g, 0, sizeof(g));
    g.h.type = MDR_MSG_GONE;
    g.rail = 1;
    forge(&t, B, A, 0, &g, sizeof(g));
    spin(&t, ONLY(A), 5);
    CHECK(ab->rails[1].down && ab->rails[1].ep == NULL &&
              strcmp(ab->rails[1].last_error, "the peer gave it up (rail down)") == 0,
          "A closed rail 1 on B's GONE at once (%s)",
          ab->rails[1].down ? ab->rails[1].last_error : "up");
    CHECK(!ab->rails[0].down && !ab->rails[2].down, "A's other rails to B stay up");
    peer_closed_rail(&t, B, A, 1);
    /* B's driver reports its rail 2 to A failed: B tells A (GONE, and the
     * copies of what A may not have seen), A takes rail 2 down too */
    mdr_ep_failed_upcall(&peer_of(&t, B, A)->rails[2], MADRAIL_ERR_RAIL_DOWN,
                         "test: B's end of rail 2 failed");
    spin(&t, ONLY(A) | ONLY(B), 20);
    CHECK(ab->rails[2].down && ab->rails[2].ep == NULL,
          "A closed rail 2 when B's end of it failed (%s)",
          ab->rails[2].down ? ab->rails[2].last_error : "up");
    /* a second GONE for the same rail: nothing more happens */
    memset(&g, 0, sizeof(g));
    g.h.type = MDR_MSG_GONE;
    g.rail = 1;
    forge(&t, B, A, 0, &g, sizeof(g));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, B) == 6u, "a GONE for a rail already down changes nothing (mask %x)",
          rails_down(&t, A, B));
    /* C: a GONE naming the rail it came on */
    memset(&g, 0, sizeof(g));
    g.h.type = MDR_MSG_GONE;
    g.rail = 2;
    forge(&t, C, A, 2, &g, sizeof(g));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, C) == 4u, "a GONE naming the rail it came on closes that rail only "
          "(mask %x)", rails_down(&t, A, C));
    peer_closed_rail(&t, C, A, 2);
    /* C: a GONE naming a rail A does not have */
    g.rail = 7;
    forge(&t, C, A, 0, &g, sizeof(g));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, C) == 5u, "a GONE naming rail 7 of 3 closes the rail it came on "
          "(mask %x)", rails_down(&t, A, C));
    peer_closed_rail(&t, C, A, 0);
    CHECK(others_complete(&t, 2000), "other traffic completes");
    trio_close(&t);
}

static void test_credit(void)
{
    trio_t t;
    mdr_hdr_t h;
    uint8_t junk[16];
    unsigned cr0, crc, tcr, out2, out3, bret0, cret0;
    mdr_peer_t *ab;

    printf("# CREDIT from a third peer, in the wrong state, of the wrong size\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:r0,loop:r1,loop:r2,loop:r3", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    ab = peer_of(&t, A, B);
    tcr = (t.c[A]->cfg.credits + 1) / 2; /* what a CREDIT returns at least */
    CHECK(exchange(&t, A, B, 100, 20) && exchange(&t, A, C, 100, 21), "setup: some traffic");
    cr0 = ab->rails[0].credits;
    crc = peer_of(&t, A, C)->rails[0].credits;
    /* what B and C owe A on rail 0: a GONE they send there when their end
     * of a closed rail fails (watch.c) carries it back, legitimately */
    bret0 = peer_of(&t, B, A)->rails[0].ret_pending;
    cret0 = peer_of(&t, C, A)->rails[0].ret_pending;

    /* C returns a credit A never spent on rail 1 to C */
    memset(&h, 0, sizeof(h));
    h.type = MDR_MSG_CREDIT;
    h.credits = 1;
    forge(&t, C, A, 1, &h, sizeof(h));
    spin(&t, ONLY(A) | ONLY(C), 5);
    CHECK(peer_of(&t, A, C)->rails[1].credits == t.c[A]->cfg.credits,
          "a return beyond what was spent: credits unchanged");
    CHECK(rails_down(&t, A, C) == 2u && rails_down(&t, A, B) == 0,
          "A closed rail 1 to C only (mask %x)", rails_down(&t, A, C));
    peer_closed_rail(&t, C, A, 1);
    /* B: a CREDIT that returns nothing */
    h.credits = 0;
    forge(&t, B, A, 1, &h, sizeof(h));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, B) == 2u, "CREDIT returning no credit closes rail 1 (mask %x)",
          rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 1);

    /* As if A had tcr messages out on rails 2 and 3 that B consumed: a
     * CREDIT returning them would be right, but not with a body or flags. */
    ab->rails[2].credits -= tcr;
    ab->rails[3].credits -= tcr;
    out2 = ab->rails[2].credits;
    out3 = ab->rails[3].credits;
    memset(junk, 0, sizeof(junk));
    ((mdr_hdr_t *)junk)->type = MDR_MSG_CREDIT;
    ((mdr_hdr_t *)junk)->credits = (uint16_t)tcr;
    forge(&t, B, A, 2, junk, sizeof(junk));
    spin(&t, ONLY(A), 5);
    CHECK(ab->rails[2].credits == out2, "CREDIT of %zu bytes returning %u: credits unchanged",
          sizeof(junk), tcr);
    CHECK(rails_down(&t, A, B) == 6u, "... and rail 2 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 2);
    h.credits = (uint16_t)tcr;
    h.flags = MDR_HF_INTERNAL;
    forge(&t, B, A, 3, &h, sizeof(h));
    spin(&t, ONLY(A), 5);
    CHECK(ab->rails[3].credits == out3, "CREDIT with flags 0x%x returning %u: credits unchanged",
          MDR_HF_INTERNAL, tcr);
    CHECK(rails_down(&t, A, B) == 14u, "... and rail 3 closed (mask %x)", rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 3);

    bret0 -= peer_of(&t, B, A)->rails[0].ret_pending;
    cret0 -= peer_of(&t, C, A)->rails[0].ret_pending;
    CHECK(ab->rails[0].credits == cr0 + bret0 && peer_of(&t, A, C)->rails[0].credits == crc + cret0,
          "credits on rail 0 changed only by what the peers' GONE messages returned (%u, %u; "
          "B returned %u, C %u)", ab->rails[0].credits - cr0,
          peer_of(&t, A, C)->rails[0].credits - crc, bret0, cret0);
    CHECK(others_complete(&t, 1800), "other traffic completes");
    trio_close(&t);
}

/* ---------------- dispatch table ---------------- */

static void dummy_handler(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    (void)pr;
    (void)hdr;
    (void)len;
}

/* The protocol modules register their message types at context init
 * (ctrl.c dispatches by that table, issue 12): every type is there, each
 * with a handler but CREDIT (ctrl.c takes it itself); a second
 * registration of a type, or a type out of range, is refused and changes
 * nothing; a message of a type nobody registered closes its rail. */
static void test_dispatch(void)
{
    trio_t t;
    mdr_ctx_t *a;
    mdr_ctrl_handler_t h = {"X", sizeof(mdr_hdr_t), 0, 0, dummy_handler, 0};
    mdr_hdr_t m;
    int type, all = 1;

    printf("# dispatch table: registrations and unknown types\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:r0,loop:r1", NULL) != 0) {
        CHECK(0, "open");
        return;
    }
    a = t.c[A];
    for (type = 1; type < MDR_MSG_MAX; type++)
        all &= a->handlers[type].name != NULL &&
               (type == MDR_MSG_CREDIT) == (a->handlers[type].fn == NULL);
    CHECK(all, "types 1..%d registered, each with a handler but CREDIT", MDR_MSG_MAX - 1);
    CHECK(a->handlers[0].name == NULL, "type 0 is not registered");
    CHECK(mdr_ctrl_register(a, MDR_MSG_CTS, &h) == MADRAIL_ERR_INVALID &&
              a->handlers[MDR_MSG_CTS].fn != dummy_handler,
          "CTS registered twice: refused, the first handler stays");
    CHECK(mdr_ctrl_register(a, 0, &h) == MADRAIL_ERR_INVALID &&
              mdr_ctrl_register(a, MDR_MSG_MAX, &h) == MADRAIL_ERR_INVALID,
          "types 0 and %d refused", MDR_MSG_MAX);
    CHECK(exchange(&t, B, A, 100, 30), "setup: some traffic");
    memset(&m, 0, sizeof(m));
    m.type = 0;
    forge(&t, B, A, 1, &m, sizeof(m));
    spin(&t, ONLY(A), 5);
    CHECK(rails_down(&t, A, B) == 2u, "a message of type 0 closes rail 1 (mask %x)",
          rails_down(&t, A, B));
    peer_closed_rail(&t, B, A, 1);
    CHECK(others_complete(&t, 1900), "other traffic completes");
    trio_close(&t);
}

/* ---------------- flags ---------------- */

static int am_calls;
static void am_count(void *arg, madrail_peer_t src, uint64_t id, const void *data, size_t len)
{
    (void)arg;
    (void)src;
    (void)id;
    printf("  active-message handler called: data %p, %zu bytes\n", data, len);
    am_calls++;
}

/* Defect 4: the active-message flag was honoured on RTS and RFS_DATA (the
 * handler ran with data NULL and a length the peer chose).  And other
 * flags on types they do not apply to, and unknown bits. */
static void test_flags(void)
{
    enum { LEN = 100000 };
    trio_t t;
    uint8_t *sb = malloc(LEN), *rb = malloc(LEN);
    madrail_request_t sr, rr;
    mdr_req_t *r;
    mdr_peer_t *ab, *ba;
    uint64_t exp;
    union {
        mdr_rts_hdr_t rts;
        mdr_rfs_data_hdr_t rd;
        mdr_eager_hdr_t e;
        mdr_fin_hdr_t f;
        uint8_t b[256];
    } m;
    struct {
        int type;
        uint8_t flags;
        const char *what;
    } cases[] = {
        {MDR_MSG_RTS, MDR_HF_AM, "RTS with AM"},
        {MDR_MSG_RFS_DATA, MDR_HF_AM, "RFS_DATA with AM"},
        {MDR_MSG_RTS, MDR_HF_RFS_CONSUMED, "RTS with RFS_CONSUMED"},
        {MDR_MSG_RTS, MDR_HF_SYNC, "RTS with SYNC"},
        {MDR_MSG_EAGER, 0x40, "EAGER with unknown bit 0x40"},
        {MDR_MSG_EAGER, MDR_HF_AM | MDR_HF_SYNC, "EAGER with AM and SYNC"},
        {MDR_MSG_FIN, MDR_HF_INTERNAL, "FIN with INTERNAL"},
    };
    int ncases = (int)(sizeof(cases) / sizeof(cases[0])), k;
    size_t n;

    printf("# header flags that do not apply to the message type\n");
    if (trio_open(&t, "MADRAIL_RAILS=loop:g0,loop:g1,loop:g2,loop:g3,loop:g4,loop:g5,loop:g6,"
                      "loop:g7",
                  "MADRAIL_RNDV_RECV_FIRST=0") != 0) {
        CHECK(0, "open");
        return;
    }
    ab = peer_of(&t, A, B);
    ba = peer_of(&t, B, A);
    am_calls = 0;
    madrail_am_set_handler(t.c[B], am_count, NULL);
    pair_fill(sb, LEN, 16);
    memset(rb, 0x5a, LEN);
    madrail_irecv(t.c[B], t.p[B][A], rb, LEN, 16, 0, &rr);
    r = rr;
    exp = ba->expected_seq;
    for (k = 0; k < ncases; k++) {
        int rail = 7 - k;
        memset(&m, 0, sizeof(m));
        m.rts.h.type = (uint8_t)cases[k].type;
        m.rts.h.flags = cases[k].flags;
        switch (cases[k].type) {
        case MDR_MSG_RTS:
            m.rts.seq = ab->next_send_seq; /* the next in A's sequence */
            m.rts.tag = 16;
            m.rts.total = LEN;
            m.rts.sreq_id = 0x100000001ull;
            n = sizeof(m.rts);
            break;
        case MDR_MSG_RFS_DATA:
            m.rd.seq = ab->next_send_seq;
            m.rd.tag = 16;
            m.rd.total = LEN;
            m.rd.rreq_id = r->id;
            m.rd.xfer_len = LEN;
            n = sizeof(m.rd);
            break;
        case MDR_MSG_EAGER:
            m.e.seq = ab->next_send_seq;
            m.e.tag = 16;
            m.e.total = 8;
            memset(m.b + sizeof(m.e), 0xee, 8);
            n = sizeof(m.e) + 8;
            break;
        default:
            m.f.rreq_id = r->id;
            m.f.bytes = 1;
            n = sizeof(m.f);
            break;
        }
        forge(&t, A, B, rail, &m, n);
        spin(&t, ONLY(B), 3);
        CHECK(rail_down(&t, B, A, rail) && rails_down(&t, B, A) == (0xffu << rail & 0xffu),
              "%s closes rail %d to A (mask %x)", cases[k].what, rail, rails_down(&t, B, A));
        CHECK(am_calls == 0 && !r->complete && !r->matched && ba->expected_seq == exp &&
                  all_bytes(rb, LEN, 0x5a),
              "%s: no handler call, the posted receive untouched, sequence unchanged",
              cases[k].what);
        peer_closed_rail(&t, A, B, rail);
    }
    madrail_isend(t.c[A], t.p[A][B], sb, LEN, 16, 0, &sr);
    CHECK(pwait(&t, &rr, NULL) == MADRAIL_OK && pair_verify(rb, LEN, 16),
          "the receive then takes A's real message, byte-exact");
    CHECK(pwait(&t, &sr, NULL) == MADRAIL_OK, "A's send completes");
    madrail_am_set_handler(t.c[B], NULL, NULL);
    CHECK(others_complete(&t, 1900), "other traffic completes");
    trio_close(&t);
    free(sb);
    free(rb);
}

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
    {"fin_third_peer", test_fin_third_peer},
    {"fin_eager_in_progress", test_fin_eager_in_progress},
    {"fin_state_size", test_fin_state_size},
    {"fin_rfs_third_peer", test_fin_rfs_third_peer},
    {"ack", test_ack},
    {"ack_before_last_fragment", test_ack_before_last_fragment},
    {"cts", test_cts},
    {"nack", test_nack},
    {"revoke", test_revoke},
    {"credit", test_credit},
    {"gone", test_gone},
    {"flags", test_flags},
    {"dispatch", test_dispatch},
};

/* No argument: every case; else only the cases named. */
int main(int argc, char **argv)
{
    size_t i;
    int j;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int run = argc < 2;
        for (j = 1; j < argc; j++)
            run |= strcmp(argv[j], tests[i].name) == 0;
        if (run)
            tests[i].fn();
    }
    CHECK(state_errors == 0, "no state machine refused a transition (%llu)",
          (unsigned long long)state_errors);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
