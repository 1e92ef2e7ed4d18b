/*
 * Fragments of an EAGER message are tracked by the byte ranges that
 * arrived (issue 28, item 5), on the loop driver: two contexts of this
 * process, one forging fragments as a broken or hostile peer could
 * (test/unit/forge.c), the other checked.  What must hold: a fragment
 * sent twice, one that overlaps another, one outside its message and an
 * empty one close that peer's rail with the reason in its last_error, and
 * never complete a receive with MADRAIL_OK; a peer that splits a message
 * into more pieces than it has fragments is refused too; and fragments
 * that come in any order (striped over rails, reversed) are still
 * delivered byte-exact, as is a real multi-fragment send over two rails
 * that reorder.
 *
 * MADRAIL_SLOT_SIZE=1k: a fragment carries 976 bytes, so a 3000-byte
 * message is 0+976, 976+976, 1952+976, 2928+72.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"
#include "forge.h"

#define FRAG 976u
#define TOTAL 3000u

static void spin(pair_t *p)
{
    madrail_progress(p->a);
    madrail_progress(p->b);
}

static void pair_close(pair_t *p)
{
    int i;
    for (i = 0; i < 200; i++)
        spin(p);
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
}

static void spin_n(pair_t *p, int n)
{
    while (n-- > 0)
        spin(p);
}

/* The request's status once complete; MADRAIL_ERR_IO if it never is. */
static madrail_status_t pwait(pair_t *p, madrail_request_t *req, madrail_info_t *info)
{
    long i;
    int flag = 0;
    madrail_status_t st = MADRAIL_OK;
    for (i = 0; i < 20000 && *req; i++) {
        spin(p);
        st = madrail_test(req, &flag, info);
        if (flag)
            return st;
    }
    printf("  (request did not complete)\n");
    return MADRAIL_ERR_IO;
}

/* One message a to b so that both eps exist. */
static int warm_up(pair_t *p)
{
    int v = 7, w = 0;
    madrail_request_t sr, rr;
    madrail_irecv(p->b, p->b2a, &w, sizeof(w), 0xfff, 0, &rr);
    madrail_isend(p->a, p->a2b, &v, sizeof(v), 0xfff, 0, &sr);
    if (pwait(p, &rr, NULL) != MADRAIL_OK || pwait(p, &sr, NULL) != MADRAIL_OK || w != 7)
        return -1;
    return 0;
}

/* The byte at offset i of the message forged in these tests. */
static uint8_t pat(uint64_t i)
{
    return (uint8_t)(i * 7u + 3u + (i >> 8));
}

/* Forge from a to b on rail: EAGER fragment off+plen of a total-byte
 * message seq with tag 9, carrying the pattern, or junk bytes when junk. */
static void forge_frag(pair_t *p, int rail, uint64_t seq, uint64_t total, uint64_t off,
                       size_t plen, int junk)
{
    uint8_t msg[sizeof(mdr_eager_hdr_t) + FRAG];
    mdr_eager_hdr_t *e = (mdr_eager_hdr_t *)msg;
    size_t i;

    memset(msg, 0, sizeof(msg));
    if (plen > FRAG)
        plen = FRAG;
    e->h.type = MDR_MSG_EAGER;
    e->h.len = (uint32_t)(sizeof(*e) + plen);
    e->seq = seq;
    e->tag = 9;
    e->total = total;
    e->offset = off;
    for (i = 0; i < plen; i++)
        ((uint8_t *)(e + 1))[i] = junk ? 0xee : pat(off + i);
    mdr_forge_send(p->a, p->a2b, rail, msg, sizeof(*e) + plen);
}

/* buf holds the pattern for n bytes */
static int pat_ok(const uint8_t *buf, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (buf[i] != pat(i))
            return 0;
    return 1;
}

static int open_pair(pair_t *p, int nrails)
{
    const char *ov1[] = {"MADRAIL_RAILS=loop:fr0", "MADRAIL_SLOT_SIZE=1k",
                         "MADRAIL_RNDV_THRESH=16k", "MADRAIL_LOG_LEVEL=error", NULL};
    const char *ov2[] = {"MADRAIL_RAILS=loop:fr0,loop:fr1", "MADRAIL_SLOT_SIZE=1k",
                         "MADRAIL_RNDV_THRESH=16k", "MADRAIL_LOG_LEVEL=error", NULL};
    if (pair_open(p, nrails == 1 ? ov1 : ov2) != 0 || warm_up(p) != 0) {
        CHECK(0, "open");
        return -1;
    }
    return 0;
}

/* ---- refused ---- */

/* The finding: the first fragment three times and the last one add up to
 * 3000 bytes.  One rail: the second copy closes it, so the peer fails and
 * the receive posted before does not complete as a success, or, with none
 * posted, no message waits to be received. */
static void test_triple_first(int posted)
{
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr = NULL;
    madrail_info_t info;
    madrail_status_t st;
    uint64_t e;

    if (open_pair(&p, 1) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    memset(buf, 0, sizeof(buf));
    if (posted)
        madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 0);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 1);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 1);
    forge_frag(&p, 0, e, TOTAL, 2928, 72, 0);
    spin_n(&p, 50);
    CHECK(peer->rails[0].down && strstr(peer->rails[0].last_error, "overlaps"),
          "%s: a first fragment sent three times closes the rail (%s)",
          posted ? "posted" : "unexpected", peer->rails[0].last_error);
    if (posted) {
        st = pwait(&p, &rr, &info);
        CHECK(st != MADRAIL_OK, "and the receive does not complete as a success (%s)",
              madrail_status_str(st));
    } else {
        int flag = 1;
        madrail_iprobe(p.b, p.b2a, 9, 0, &flag, &info);
        CHECK(!flag, "and no message waits to be received");
    }
    CHECK(peer->held_bytes == 0 && peer->inflight.count == 0, "nothing of it is held");
    pair_close(&p);
}

/* Two rails: a copy on rail 1 of what came on rail 0 closes rail 1 only,
 * and its junk never reaches the buffer; the real fragments on rail 0
 * then complete the message byte-exact. */
static void test_dup_other_rail(void)
{
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr;
    madrail_info_t info;
    madrail_status_t st;
    uint64_t e;

    if (open_pair(&p, 2) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    memset(buf, 0, sizeof(buf));
    madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 0);
    spin_n(&p, 20);
    forge_frag(&p, 1, e, TOTAL, 0, FRAG, 1);
    spin_n(&p, 20);
    CHECK(peer->rails[1].down && !peer->rails[0].down &&
              strstr(peer->rails[1].last_error, "overlaps"),
          "a copy on rail 1 of a fragment taken on rail 0 closes rail 1 only (%s)",
          peer->rails[1].last_error);
    forge_frag(&p, 0, e, TOTAL, 976, FRAG, 0);
    forge_frag(&p, 0, e, TOTAL, 1952, FRAG, 0);
    forge_frag(&p, 0, e, TOTAL, 2928, 72, 0);
    st = pwait(&p, &rr, &info);
    CHECK(st == MADRAIL_OK && info.length == TOTAL && pat_ok(buf, TOTAL),
          "the real fragments complete it byte-exact, no junk (%s, %zu bytes)",
          madrail_status_str(st), info.length);
    pair_close(&p);
}

/* A fragment that overlaps another without being the same one: at the
 * end of a single range, and inside a list of several (after a gap). */
static void test_overlap(int gap)
{
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr;
    madrail_status_t st;
    uint64_t e;

    if (open_pair(&p, 1) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 0);
    if (gap) { /* ranges [0,976) and [1952,2928); then one over the second's start */
        forge_frag(&p, 0, e, TOTAL, 1952, FRAG, 0);
        forge_frag(&p, 0, e, TOTAL, 1900, 100, 1);
    } else {
        forge_frag(&p, 0, e, TOTAL, 500, FRAG, 1);
    }
    spin_n(&p, 50);
    CHECK(peer->rails[0].down && strstr(peer->rails[0].last_error, "overlaps"),
          "a fragment overlapping another (%s) closes the rail (%s)",
          gap ? "in a list of ranges" : "one range", peer->rails[0].last_error);
    st = pwait(&p, &rr, NULL);
    CHECK(st != MADRAIL_OK, "and the receive fails (%s)", madrail_status_str(st));
    pair_close(&p);
}

/* Fragments whose range is not one the message can have: past its end,
 * a total other than the first fragment's, an empty one. */
static void test_outside(int which)
{
    static const char *const what[] = {"past the end of its message",
                                       "naming another total than its message's",
                                       "empty, of a non-empty message"};
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr;
    madrail_status_t st;
    uint64_t e;

    if (open_pair(&p, 1) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 0);
    if (which == 0)
        forge_frag(&p, 0, e, TOTAL, 2928, FRAG, 1);
    else if (which == 1)
        forge_frag(&p, 0, e, TOTAL + FRAG, TOTAL, FRAG, 1);
    else
        forge_frag(&p, 0, e, TOTAL, 976, 0, 1);
    spin_n(&p, 50);
    CHECK(peer->rails[0].down && peer->rails[0].last_error[0],
          "a fragment %s closes the rail (%s)", what[which], peer->rails[0].last_error);
    st = pwait(&p, &rr, NULL);
    CHECK(st != MADRAIL_OK, "and the receive fails (%s)", madrail_status_str(st));
    pair_close(&p);
}

/* 1-byte fragments with gaps between them: a 3000-byte message has four
 * fragments, so it can never have five separate pieces. */
static void test_many_pieces(void)
{
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr;
    int i;
    uint64_t e;

    if (open_pair(&p, 1) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    for (i = 0; i < 4; i++)
        forge_frag(&p, 0, e, TOTAL, (uint64_t)i * 2, 1, 0);
    spin_n(&p, 50);
    CHECK(!peer->rails[0].down, "four separate pieces of a 4-fragment message are taken");
    forge_frag(&p, 0, e, TOTAL, 8, 1, 0);
    spin_n(&p, 50);
    CHECK(peer->rails[0].down && strstr(peer->rails[0].last_error, "pieces"),
          "a fifth closes the rail (%s)", peer->rails[0].last_error);
    CHECK(pwait(&p, &rr, NULL) != MADRAIL_OK, "and the receive fails");
    pair_close(&p);
}

/* The list of ranges a message with gaps needs is memory like its
 * fragments: when there is none (an allocation fails) or it would pass
 * MADRAIL_RECV_MEM_MAX (held bytes pushed near the cap by hand), the peer
 * fails cleanly and nothing stays held. */
static void test_list_nomem(int cap)
{
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[TOTAL];
    madrail_request_t rr;
    madrail_status_t st;
    size_t pad = 0;
    uint64_t e;

    if (open_pair(&p, 1) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    forge_frag(&p, 0, e, TOTAL, 0, FRAG, 0);
    spin_n(&p, 20);
    if (cap) {
        pad = p.b->cfg.recv_mem_max - peer->held_bytes - 8;
        peer->held_bytes += pad;
        p.b->held_bytes += pad;
    } else {
        p.b->fault_nomem = 1;
    }
    forge_frag(&p, 0, e, TOTAL, 1952, FRAG, 0); /* a gap: the list is made */
    spin_n(&p, 20);
    st = pwait(&p, &rr, NULL);
    CHECK(peer->rails[0].down && st != MADRAIL_OK && (cap || p.b->fault_nomem == 0),
          "%s for the list of ranges: the peer fails (%s)",
          cap ? "MADRAIL_RECV_MEM_MAX reached" : "no memory", madrail_status_str(st));
    CHECK(peer->held_bytes == pad && peer->inflight.count == 0, "nothing of it held (%zu)",
          peer->held_bytes - pad);
    peer->held_bytes -= pad;
    p.b->held_bytes -= pad;
    pair_close(&p);
}

/* ---- legit orders still delivered ---- */

/* The fragments of a 5000-byte message (six) in the order given, by
 * index, alternating over two rails; received posted or unexpected. */
static void test_order(const char *name, const int *order, int posted)
{
    enum { N = 5000 };
    pair_t p;
    mdr_peer_t *peer;
    static uint8_t buf[N];
    madrail_request_t rr = NULL;
    madrail_info_t info;
    madrail_status_t st;
    uint64_t e;
    int i;

    if (open_pair(&p, 2) != 0)
        return;
    peer = mdr_peer_get(p.b, p.b2a);
    e = peer->expected_seq;
    memset(buf, 0, sizeof(buf));
    if (posted)
        madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    for (i = 0; i < 6; i++) {
        uint64_t off = (uint64_t)order[i] * FRAG;
        forge_frag(&p, i % 2, e, N, off, N - off < FRAG ? N - off : FRAG, 0);
        spin_n(&p, 3);
    }
    spin_n(&p, 20);
    if (!posted)
        madrail_irecv(p.b, p.b2a, buf, sizeof(buf), 9, 0, &rr);
    st = pwait(&p, &rr, &info);
    CHECK(st == MADRAIL_OK && info.length == N && pat_ok(buf, N) && !peer->rails[0].down &&
              !peer->rails[1].down,
          "fragments %s over two rails (%s): delivered byte-exact (%s), rails up",
          name, posted ? "posted" : "unexpected", madrail_status_str(st));
    CHECK(peer->held_bytes == 0 && peer->inflight.count == 0, "nothing held after");
    pair_close(&p);
}

/* Real sends of several fragments over two rails that reorder. */
static void test_real_sends(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:rs0;reorder=1;seed=5,loop:rs1;reorder=1;seed=9;delay=2",
                        "MADRAIL_SLOT_SIZE=512", "MADRAIL_RNDV_THRESH=16k", NULL};
    enum { N = 40, LEN = 12000 };
    static uint8_t sb[N][LEN], rb[N][LEN];
    madrail_request_t sr[N], rr[N];
    pair_t p;
    mdr_peer_t *peer;
    int i, ok = 1;
    size_t j;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = mdr_peer_get(p.b, p.b2a);
    for (i = 0; i < N; i++) {
        for (j = 0; j < LEN; j++)
            sb[i][j] = (uint8_t)(j * 13u + (unsigned)i);
        if (i % 2 == 0) /* half posted first, half unexpected */
            madrail_irecv(p.b, p.b2a, rb[i], LEN, (uint64_t)i, 0, &rr[i]);
        madrail_isend(p.a, p.a2b, sb[i], LEN - (size_t)i * 97, (uint64_t)i, 0, &sr[i]);
    }
    spin_n(&p, 100);
    for (i = 1; i < N; i += 2)
        madrail_irecv(p.b, p.b2a, rb[i], LEN, (uint64_t)i, 0, &rr[i]);
    for (i = 0; i < N; i++) {
        madrail_info_t info;
        if (pwait(&p, &rr[i], &info) != MADRAIL_OK || info.length != LEN - (size_t)i * 97 ||
            memcmp(rb[i], sb[i], info.length) != 0)
            ok = 0;
        pwait(&p, &sr[i], NULL);
    }
    CHECK(ok && !peer->rails[0].down && !peer->rails[1].down,
          "%d sends of up to %d bytes (slot 512) over two reordering rails: byte-exact", N, LEN);
    pair_close(&p);
}

int main(void)
{
    static const int in_order[] = {0, 1, 2, 3, 4, 5}, reverse[] = {5, 4, 3, 2, 1, 0},
                     striped[] = {0, 2, 4, 1, 3, 5}, gaps[] = {5, 1, 3, 0, 4, 2};

    test_triple_first(1);
    test_triple_first(0);
    test_dup_other_rail();
    test_overlap(0);
    test_overlap(1);
    test_outside(0);
    test_outside(1);
    test_outside(2);
    test_many_pieces();
    test_list_nomem(0);
    test_list_nomem(1);
    test_order("in order", in_order, 1);
    test_order("reversed", reverse, 1);
    test_order("reversed", reverse, 0);
    test_order("striped", striped, 1);
    test_order("with gaps filled last", gaps, 0);
    test_real_sends();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
