/*
 * Bounded receive state (issue 9, item 3), on the loop driver: two
 * contexts in one process, one of them forging what a broken or hostile
 * peer could send (test/unit/forge.c), the other one checked.  What must
 * hold: a peer that sends beyond its credits or too far ahead of the
 * expected sequence number loses its rail; an EAGER header claiming more
 * than eager can carry is refused; what a peer makes us hold stays within
 * MADRAIL_RECV_MEM_MAX, counted (peer->held_bytes) and measured (VmRSS of
 * this process); a peer that fails is freed; and legit traffic that
 * reorders heavily over several rails never trips any of it.  Also the
 * SHORT form of a whole small message: which sends take it (bytes on the
 * wire) and which SHORT messages are refused.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"
#include "forge.h"

/* The RSS checks measure this process; keep AddressSanitizer's quarantine
 * of freed blocks (256 MB by default) from counting as growth. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=1";
}

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

static madrail_status_t pwait(pair_t *p, madrail_request_t *req, madrail_info_t *info)
{
    long i;
    int flag = 0;
    madrail_status_t st = MADRAIL_OK;
    for (i = 0; i < 200000 && *req; i++) {
        spin(p);
        st = madrail_test(req, &flag, info);
        if (flag)
            return st;
    }
    printf("  (request did not complete)\n");
    return MADRAIL_ERR_IO;
}

/* One message a to b so that both eps exist; b then expects sequence 1. */
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

static mdr_peer_t *bpeer(pair_t *p)
{
    return mdr_peer_get(p->b, p->b2a);
}

static int all_down(const mdr_peer_t *peer)
{
    int r;
    for (r = 0; r < peer->ctx->nrails; r++)
        if (!peer->rails[r].down)
            return 0;
    return 1;
}

/* Forge from a to b on rail: an EAGER fragment (plen bytes of payload). */
static void forge_eager(pair_t *p, int rail, uint64_t seq, uint64_t total, uint64_t off,
                        size_t plen, uint64_t tag)
{
    uint8_t msg[sizeof(mdr_eager_hdr_t) + 1024];
    mdr_eager_hdr_t *e = (mdr_eager_hdr_t *)msg;
    memset(msg, 0, sizeof(msg));
    if (plen > 1024)
        plen = 1024;
    e->h.type = MDR_MSG_EAGER;
    e->h.len = (uint32_t)(sizeof(*e) + plen);
    e->seq = seq;
    e->tag = tag;
    e->total = total;
    e->offset = off;
    memset(e + 1, 0x5a, plen);
    mdr_forge_send(p->a, p->a2b, rail, msg, sizeof(*e) + plen);
}

static void forge_rts(pair_t *p, int rail, uint64_t seq, uint64_t total, uint64_t tag)
{
    mdr_rts_hdr_t r;
    memset(&r, 0, sizeof(r));
    r.h.type = MDR_MSG_RTS;
    r.h.len = sizeof(r);
    r.seq = seq;
    r.tag = tag;
    r.total = total;
    r.sreq_id = 1;
    mdr_forge_send(p->a, p->a2b, rail, &r, sizeof(r));
}

static void forge_credit(pair_t *p, int rail, uint16_t n)
{
    mdr_hdr_t h;
    memset(&h, 0, sizeof(h));
    h.type = MDR_MSG_CREDIT;
    h.len = sizeof(h);
    h.credits = n;
    mdr_forge_send(p->a, p->a2b, rail, &h, sizeof(h));
}

/* VmRSS of this process in bytes (0 if unknown). */
static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* ---- credits ---- */

/* Out-of-order messages keep their credits: on a rail with four credits,
 * the message that makes five unreturned (the warm-up's return may still
 * be owed) is one the sender cannot have had, and closes that rail only. */
static void test_credit_overrun(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:co0,loop:co1", "MADRAIL_CREDITS=4",
                        "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_LOG_LEVEL=error", NULL};
    pair_t p;
    mdr_peer_t *peer;
    uint64_t e;
    unsigned i, room;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    e = peer->expected_seq; /* never sent: what follows waits out of order */
    room = 4 - peer->rails[0].ret_pending;
    for (i = 1; i <= room; i++) {
        forge_eager(&p, 0, e + i, 1, 0, 1, 9);
        spin(&p);
    }
    CHECK(!peer->rails[0].down && peer->rails[0].held == room,
          "%u out-of-order messages within the credits are held (down %d held %u)", room,
          peer->rails[0].down, peer->rails[0].held);
    forge_eager(&p, 0, e + room + 1, 1, 0, 1, 9);
    spin(&p);
    CHECK(peer->rails[0].down, "one more on a rail with four credits closes it");
    CHECK(!peer->rails[1].down, "the other rail stays up");
    pair_close(&p);
}

/* A CREDIT message must return at least ceil(credits/2): a legit peer
 * sends one only then, which is what keeps them within the reserved slots. */
static void test_credit_messages(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:cm0", "MADRAIL_CREDITS=4", "MADRAIL_LOG_LEVEL=error",
                        NULL};
    pair_t p;
    mdr_peer_t *peer;
    int v[3] = {1, 2, 3}, i;
    madrail_request_t sr[3];

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    for (i = 0; i < 3; i++) /* b spends three credits; a does not progress */
        madrail_isend(p.b, p.b2a, &v[i], sizeof(int), 1, 0, &sr[i]);
    CHECK(peer->rails[0].credits == 1, "b spent three of four credits (%u left)",
          peer->rails[0].credits);
    forge_credit(&p, 0, 2);
    madrail_progress(p.b);
    CHECK(!peer->rails[0].down && peer->rails[0].credits == 3,
          "a CREDIT returning 2 of 4 is taken (down %d credits %u)", peer->rails[0].down,
          peer->rails[0].credits);
    forge_credit(&p, 0, 1);
    madrail_progress(p.b);
    CHECK(peer->rails[0].down, "a CREDIT returning 1 of 4 (below the threshold 2) closes the rail");
    pair_close(&p);
}

/* ---- reorder window ---- */

static void test_far_ahead(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:fa0,loop:fa1", "MADRAIL_CREDITS=4",
                        "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_LOG_LEVEL=error", NULL};
    pair_t p;
    mdr_peer_t *peer;
    uint64_t e;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    e = peer->expected_seq;
    CHECK(mdr_match_window(p.b) == 8, "window = credits x rails = 8 (%llu)",
          (unsigned long long)mdr_match_window(p.b));
    forge_eager(&p, 0, e + 7, 1, 0, 1, 9);
    spin(&p);
    CHECK(!peer->rails[0].down && peer->inflight.count == 1 && peer->held_bytes > 0,
          "7 ahead (window 8) is held (down %d, %zu held, %zu bytes)", peer->rails[0].down,
          peer->inflight.count, peer->held_bytes);
    forge_eager(&p, 0, e + 8, 1, 0, 1, 9);
    spin(&p);
    CHECK(peer->rails[0].down, "8 ahead closes the rail");
    CHECK(peer->inflight.count == 1, "and is not stored (%zu held)", peer->inflight.count);
    forge_rts(&p, 1, e + ((uint64_t)1 << 40), (uint64_t)1 << 40, 9);
    spin(&p);
    CHECK(peer->rails[1].down, "2^40 ahead closes the other rail");
    CHECK(peer->inflight.count == 0 && peer->held_bytes == 0 && p.b->held_bytes == 0,
          "the peer failed: what it made us hold is freed (%zu messages, %zu bytes)",
          peer->inflight.count, peer->held_bytes);
    pair_close(&p);
}

/* ---- what a header claims ---- */

static void test_eager_total(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:et0,loop:et1", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", "MADRAIL_LOG_LEVEL=error", NULL};
    pair_t p;
    mdr_peer_t *peer;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    forge_eager(&p, 0, peer->expected_seq, 16 * 1024 - 1, 0, 1, 9);
    spin(&p);
    CHECK(!peer->rails[0].down && peer->held_bytes > 0 && peer->held_bytes < 4096,
          "an EAGER of 16k-1 (below the threshold) is taken, holding what arrived (%zu bytes)",
          peer->held_bytes);
    forge_eager(&p, 1, peer->expected_seq, 16 * 1024, 0, 1, 9);
    spin(&p);
    CHECK(peer->rails[1].down, "an EAGER of 16k (the rendezvous threshold) closes the rail");
    pair_close(&p);
}

/* SHORT (a whole message, seq and tag only): what a sender puts on the
 * wire for each kind of small send, counted in the rail's tx_bytes, and
 * what the receiver refuses. */
static void forge_short_cr(pair_t *p, int rail, uint64_t seq, size_t plen, uint8_t flags,
                           uint16_t credits)
{
    uint8_t msg[sizeof(mdr_short_hdr_t) + 1024];
    mdr_short_hdr_t *sh = (mdr_short_hdr_t *)msg;
    memset(msg, 0, sizeof(msg));
    if (plen > 1024)
        plen = 1024;
    sh->h.type = MDR_MSG_SHORT;
    sh->h.flags = flags;
    sh->h.len = (uint32_t)seq; /* a SHORT's .len: the low bits of seq */
    sh->h.credits = credits;
    sh->tag = 9;
    memset(sh + 1, 0x5a, plen);
    mdr_forge_send(p->a, p->a2b, rail, msg, sizeof(*sh) + plen);
}

static void forge_short(pair_t *p, int rail, uint64_t seq, size_t plen, uint8_t flags)
{
    forge_short_cr(p, rail, seq, plen, flags, 0);
}

/* Bytes a's one rail sent for one send of len bytes (flags), and whether
 * b received it whole. */
static uint64_t short_wire(pair_t *p, size_t len, unsigned flags, int nb, int *ok_p)
{
    static uint8_t sb[2048], rb[2048];
    madrail_rail_stats_t s0, s1;
    madrail_request_t sr = NULL, rr;
    madrail_info_t info;
    uint64_t id;
    size_t i;

    for (i = 0; i < len; i++)
        sb[i] = (uint8_t)(i * 7 + len);
    memset(rb, 0, sizeof(rb));
    madrail_rail_stats(p->a, 0, &s0);
    madrail_irecv(p->b, p->b2a, rb, sizeof(rb), 5, 0, &rr);
    if (nb)
        madrail_isend_nb(p->a, p->a2b, sb, len, 5, flags, &sr, &id);
    else
        madrail_isend(p->a, p->a2b, sb, len, 5, flags, &sr);
    *ok_p = pwait(p, &rr, &info) == MADRAIL_OK && info.length == len &&
            memcmp(sb, rb, len) == 0 && (sr == NULL || pwait(p, &sr, NULL) == MADRAIL_OK);
    madrail_rail_stats(p->a, 0, &s1);
    return s1.tx_bytes - s0.tx_bytes;
}

/* A pair opened with ov and warmed up: b's peer record of a, or NULL
 * (counted as a failed check). */
static mdr_peer_t *open_warm(pair_t *p, const char *const *ov)
{
    if (pair_open(p, ov) != 0 || warm_up(p) != 0) {
        CHECK(0, "open");
        return NULL;
    }
    return bpeer(p);
}

static void test_short(void)
{
    const char *ov1[] = {"MADRAIL_RAILS=loop:sh0", "MADRAIL_SLOT_SIZE=1k",
                         "MADRAIL_RNDV_THRESH=16k", "MADRAIL_RAIL_TIMEOUT=0",
                         "MADRAIL_LOG_LEVEL=error", NULL};
    const char *ov[] = {"MADRAIL_RAILS=loop:sh0,loop:sh1", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", "MADRAIL_LOG_LEVEL=error", NULL};
    size_t em = 1024 - sizeof(mdr_eager_hdr_t), sh = sizeof(mdr_short_hdr_t),
           eh = sizeof(mdr_eager_hdr_t);
    pair_t p;
    mdr_peer_t *peer;
    uint64_t n, e;
    int ok;

    if (open_warm(&p, ov1) == NULL)
        return;
    CHECK(sh == 16 && eh == 48, "SHORT header 16 bytes, EAGER 48 (%zu, %zu)", sh, eh);
    n = short_wire(&p, 8, 0, 1, &ok);
    CHECK(ok && n == sh + 8, "8 bytes by isend_nb: one SHORT of %zu bytes (%llu sent)", sh + 8,
          (unsigned long long)n);
    n = short_wire(&p, 8, 0, 0, &ok);
    CHECK(ok && n == sh + 8, "8 bytes by isend: one SHORT (%llu bytes sent)",
          (unsigned long long)n);
    n = short_wire(&p, 0, 0, 0, &ok);
    CHECK(ok && n == sh, "0 bytes: a bare SHORT header (%llu bytes sent)", (unsigned long long)n);
    n = short_wire(&p, 8, MADRAIL_SEND_SYNC, 0, &ok);
    CHECK(ok && n == eh + 8, "a synchronous send names itself for the ACK: EAGER (%llu sent)",
          (unsigned long long)n);
    n = short_wire(&p, em, 0, 0, &ok);
    CHECK(ok && n == sh + em, "%zu bytes (one fragment's worth): SHORT (%llu sent)", em,
          (unsigned long long)n);
    n = short_wire(&p, em + 1, 0, 0, &ok);
    CHECK(ok && n == 2 * eh + em + 1, "%zu bytes: two EAGER fragments (%llu sent)", em + 1,
          (unsigned long long)n);
    pair_close(&p);

    if ((peer = open_warm(&p, ov)) == NULL)
        return;
    e = peer->expected_seq;
    forge_short(&p, 0, e, em, 0);
    spin(&p);
    CHECK(!peer->rails[0].down && peer->expected_seq == e + 1,
          "a forged SHORT of %zu bytes is taken (down %d)", em, peer->rails[0].down);
    forge_short(&p, 1, e + 1, em + 1, 0);
    spin(&p);
    CHECK(peer->rails[1].down && peer->expected_seq == e + 1,
          "a SHORT of %zu bytes (more than one fragment) closes the rail", em + 1);
    forge_short(&p, 0, e + 2, 8, MDR_HF_SYNC);
    spin(&p);
    CHECK(peer->rails[0].down && peer->expected_seq == e + 1,
          "a SHORT with SYNC (no request to answer) closes the rail");
    pair_close(&p);

    /* a SHORT with the sequence number of a message half arrived */
    if ((peer = open_warm(&p, ov)) == NULL)
        return;
    e = peer->expected_seq;
    forge_eager(&p, 0, e, 64, 0, 32, 9);
    spin(&p);
    forge_short(&p, 1, e, 32, 0);
    spin(&p);
    CHECK(!peer->rails[0].down && peer->rails[1].down,
          "a SHORT that reuses the sequence number of a half-arrived message closes its rail");
    pair_close(&p);

    /* a SHORT carries the low 32 bits of its sequence number: messages
     * across 2^32 arrive in order, and one from behind is refused */
    if ((peer = open_warm(&p, ov)) == NULL)
        return;
    {
        mdr_peer_t *tx = mdr_peer_get(p.a, p.a2b);
        uint64_t base = ((uint64_t)1 << 32) - 2;
        static uint64_t rb[4];
        madrail_request_t rr[4], sr;
        madrail_info_t info;
        uint64_t id;
        int i, good = 1;

        tx->next_send_seq = tx->tx_seq_started = base;
        peer->expected_seq = base;
        for (i = 0; i < 4; i++)
            madrail_irecv(p.b, p.b2a, &rb[i], sizeof(rb[i]), 20 + (uint64_t)i, 0, &rr[i]);
        for (i = 0; i < 4; i++) {
            uint64_t v = 100 + (uint64_t)i;
            madrail_isend_nb(p.a, p.a2b, &v, sizeof(v), 20 + (uint64_t)i, 0, &sr, &id);
            if (sr != NULL && pwait(&p, &sr, NULL) != MADRAIL_OK)
                good = 0;
        }
        for (i = 0; i < 4; i++)
            good &= pwait(&p, &rr[i], &info) == MADRAIL_OK && info.length == 8 &&
                    rb[i] == 100 + (uint64_t)i;
        CHECK(good && peer->expected_seq == base + 4 && !peer->rails[0].down &&
                  !peer->rails[1].down,
              "four SHORTs numbered 2^32-2 to 2^32+1 arrive whole and in turn (expected %llx)",
              (unsigned long long)peer->expected_seq);
        forge_short(&p, 0, base + 3, 8, 0);
        spin(&p);
        CHECK(peer->rails[0].down && peer->expected_seq == base + 4,
              "a SHORT whose low sequence bits are one behind (2^32 - 1 ahead) closes the rail");
    }
    pair_close(&p);
}

/* The lane of a SHORT without flags (ctrl.c): the receiver's credit rules
 * hold there as on the general path, and with one rail the sender's lane
 * spends and returns credits as mdr_pr_send does. */
static void test_short_lane(void)
{
    const char *ov2[] = {"MADRAIL_RAILS=loop:sl0,loop:sl1", "MADRAIL_CREDITS=4",
                         "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k",
                         "MADRAIL_LOG_LEVEL=error", NULL};
    const char *ov1[] = {"MADRAIL_RAILS=loop:sl2", "MADRAIL_CREDITS=4", "MADRAIL_LOG_LEVEL=error",
                         NULL};
    pair_t p;
    mdr_peer_t *peer, *apeer;
    uint64_t e, id;
    unsigned i, room, c0;
    int v[6] = {1, 2, 3, 4, 5, 6}, w[6], good;
    madrail_request_t sr[6], rr[6];

    /* overrun: SHORTs out of order, within the credits, then one more */
    if ((peer = open_warm(&p, ov2)) == NULL)
        return;
    e = peer->expected_seq;
    room = 4 - peer->rails[0].ret_pending;
    for (i = 1; i <= room; i++) {
        forge_short(&p, 0, e + i, 8, 0);
        spin(&p);
    }
    CHECK(!peer->rails[0].down && peer->rails[0].held == room,
          "%u SHORTs out of order within the credits are held (down %d held %u)", room,
          peer->rails[0].down, peer->rails[0].held);
    forge_short(&p, 0, e + room + 1, 8, 0);
    spin(&p);
    CHECK(peer->rails[0].down && !peer->rails[1].down,
          "one more SHORT on a rail with four credits closes it, and only it");
    pair_close(&p);

    /* returns: of credits never spent, and of credits spent */
    if ((peer = open_warm(&p, ov2)) == NULL)
        return;
    e = peer->expected_seq;
    c0 = peer->rails[1].credits;
    forge_short_cr(&p, 1, e, 8, 0, 1);
    forge_short(&p, 1, e, 8, 0); /* right, but behind it on the same connection */
    spin(&p);
    CHECK(peer->rails[1].down && peer->rails[1].credits == c0 && peer->expected_seq == e,
          "a SHORT returning a credit never spent closes its rail, unread (credits %u, was %u), "
          "and the SHORT behind it on that rail is not taken (expected %llu, was %llu)",
          peer->rails[1].credits, c0, (unsigned long long)peer->expected_seq,
          (unsigned long long)e);
    for (i = 0; i < 3; i++) /* b spends three credits on rail 0; a does not progress */
        madrail_isend(p.b, p.b2a, &v[i], sizeof(int), 1, 0, &sr[i]);
    c0 = peer->rails[0].credits;
    forge_short_cr(&p, 0, e, 8, 0, 2);
    madrail_progress(p.b);
    CHECK(!peer->rails[0].down && peer->rails[0].credits == c0 + 2 && peer->expected_seq == e + 1,
          "a SHORT returning two spent credits gives them back and is taken (credits %u, was "
          "%u; down %d)",
          peer->rails[0].credits, c0, peer->rails[0].down);
    pair_close(&p);

    /* the sender's lane with one rail: a credit a message, the return
     * piggy-backed, and the general path once the credits are out */
    if ((peer = open_warm(&p, ov1)) == NULL)
        return;
    apeer = mdr_peer_get(p.a, p.a2b);
    madrail_irecv(p.a, p.a2b, &w[0], sizeof(int), 2, 0, &rr[0]);
    madrail_isend(p.b, p.b2a, &v[0], sizeof(int), 2, 0, &sr[0]);
    good = pwait(&p, &rr[0], NULL) == MADRAIL_OK && pwait(&p, &sr[0], NULL) == MADRAIL_OK;
    c0 = apeer->rails[0].ret_pending;
    CHECK(good && c0 > 0 && peer->rails[0].credits == 4 - c0,
          "b's message to a: a owes %u credit(s), b has %u", c0, peer->rails[0].credits);
    for (i = 0; i < 5; i++)
        madrail_isend_nb(p.a, p.a2b, &v[i], sizeof(int), 3 + i, 0, &sr[i], &id);
    CHECK(apeer->rails[0].credits == 0 && apeer->rails[0].ret_pending == 0 && sr[0] == NULL &&
              sr[3] == NULL && sr[4] != NULL,
          "a's first four go at once with the owed return, the fifth waits for a credit "
          "(credits %u, owed %u)",
          apeer->rails[0].credits, apeer->rails[0].ret_pending);
    for (i = 0; i < 5; i++)
        madrail_irecv(p.b, p.b2a, &w[i], sizeof(int), 3 + i, 0, &rr[i]);
    good = sr[4] != NULL && pwait(&p, &sr[4], NULL) == MADRAIL_OK;
    for (i = 0; i < 5; i++)
        good &= pwait(&p, &rr[i], NULL) == MADRAIL_OK && w[i] == v[i];
    CHECK(good && peer->rails[0].credits == 4 && !peer->rails[0].down,
          "all five arrive in order, b has its credits back (%u)", peer->rails[0].credits);
    pair_close(&p);

    /* the lane sends on no rail that is down: b's one rail, closed for a
     * protocol error inside an upcall, keeps its connection until a later
     * progress closes it, and a send meanwhile must not go on it */
    if ((peer = open_warm(&p, ov1)) == NULL)
        return;
    forge_short(&p, 0, peer->expected_seq, 8, MDR_HF_SYNC);
    for (i = 0; i < 20 && !peer->rails[0].down; i++)
        madrail_progress(p.b);
    {
        madrail_rail_stats_t s0, s1;
        madrail_status_t st;
        madrail_request_t s = NULL;
        madrail_rail_stats(p.b, 0, &s0);
        st = madrail_isend_nb(p.b, p.b2a, &v[0], sizeof(int), 9, 0, &s, &id);
        madrail_rail_stats(p.b, 0, &s1);
        CHECK(peer->rails[0].down && peer->rails[0].ep != NULL && s1.tx_msgs == s0.tx_msgs &&
                  !(st == MADRAIL_OK && s == NULL),
              "a send on a rail down but not yet closed does not go on it (%s, %s; %llu sent)",
              madrail_status_str(st), s ? "a request" : "no request",
              (unsigned long long)(s1.tx_msgs - s0.tx_msgs));
        if (s != NULL)
            pwait(&p, &s, NULL);
    }
    pair_close(&p);
}

/* Floods by a peer that keeps within its credits (it paces itself on the
 * returns): what it makes us hold is capped by MADRAIL_RECV_MEM_MAX, and
 * passing the cap fails it and frees everything. */
typedef enum { FLOOD_HEADERS, FLOOD_AHEAD } flood_t;

static void test_flood(flood_t kind, const char *name, size_t nmsg)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:fl0,loop:fl1", "MADRAIL_CREDITS=8",
                        "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_RECV_MEM_MAX=1m", "MADRAIL_LOG_LEVEL=error", NULL};
    const size_t cap = 1 << 20, margin = 16 << 20;
    pair_t p;
    mdr_peer_t *peer;
    size_t i, rss0, rss1, held_max = 0, bytes = 0;
    uint64_t e;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    e = peer->expected_seq;
    rss0 = rss_bytes();
    for (i = 0; i < nmsg; i++) {
        int rail = (int)(i % 2);
        if (kind == FLOOD_HEADERS) {
            /* in order, unexpected: medium headers with one byte, and RTSs */
            if (i % 4 == 3)
                forge_rts(&p, rail, e + i, (uint64_t)1 << 40, 9);
            else
                forge_eager(&p, rail, e + i, 16 * 1024 - 1, 0, 1, 9);
            bytes += sizeof(mdr_eager_hdr_t) + 1;
        } else {
            /* 1-byte messages ahead of one that never comes */
            forge_eager(&p, rail, e + 1 + i, 60000 % (16 * 1024), 0, 1, 9);
            bytes += sizeof(mdr_eager_hdr_t) + 1;
        }
        if (i % 2 == 1)
            spin(&p);
        if (peer->held_bytes > held_max)
            held_max = peer->held_bytes;
    }
    spin(&p);
    rss1 = rss_bytes();
    printf("  %s: %zu messages (%zu bytes) sent; held at most %zu bytes; VmRSS %+ld kB\n",
           name, nmsg, bytes, held_max, ((long)rss1 - (long)rss0) / 1024);
    CHECK(held_max <= cap, "%s: held at most %zu bytes, cap %zu", name, held_max, cap);
    CHECK(all_down(peer), "%s: the peer was failed", name);
    CHECK(peer->held_bytes == 0 && peer->inflight.count == 0 && p.b->held_bytes == 0,
          "%s: and freed (%zu bytes, %zu messages held)", name, peer->held_bytes,
          peer->inflight.count);
    CHECK(rss1 <= rss0 + cap + margin, "%s: VmRSS grew %zu kB (cap %zu kB + margin %zu kB)",
          name, (rss1 - rss0) / 1024, cap / 1024, margin / 1024);
    pair_close(&p);
}

/* ---- a legit peer at the cap ---- */

/* Unexpected medium messages past MADRAIL_RECV_MEM_MAX: the peer fails
 * with out-of-memory (the log names the variable); a receive waiting for
 * it learns it; nothing stays held. */
static void test_legit_cap(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:lc0", "MADRAIL_CREDITS=4", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", "MADRAIL_RECV_MEM_MAX=256k",
                        "MADRAIL_LOG_LEVEL=error", NULL};
    enum { N = 100, LEN = 8000 };
    static uint8_t sb[LEN];
    static madrail_request_t sr[N];
    pair_t p;
    mdr_peer_t *peer;
    madrail_request_t rr;
    madrail_status_t st;
    size_t held_max = 0;
    int i, w = 0, j;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    madrail_irecv(p.b, p.b2a, &w, sizeof(w), 999, 0, &rr);
    for (i = 0; i < N; i++) {
        madrail_isend(p.a, p.a2b, sb, LEN, 1, 0, &sr[i]);
        for (j = 0; j < 20; j++) {
            spin(&p);
            if (peer->held_bytes > held_max)
                held_max = peer->held_bytes;
        }
    }
    st = pwait(&p, &rr, NULL);
    CHECK(st == MADRAIL_ERR_NOMEM, "the waiting receive fails with out-of-memory (%s)",
          madrail_status_str(st));
    CHECK(held_max <= 256 * 1024 && held_max > 128 * 1024,
          "held up to the cap (at most %zu bytes)", held_max);
    CHECK(all_down(peer) && peer->held_bytes == 0 && peer->inflight.count == 0,
          "the peer is failed and freed (%zu bytes, %zu messages)", peer->held_bytes,
          peer->inflight.count);
    /* b does not tell a (a closed rail says nothing to the other side):
     * fail b on a's side too, so that a's stalled sends end */
    {
        mdr_peer_t *apeer = mdr_peer_get(p.a, p.a2b);
        apeer->rails[0].down = 1;
        mdr_peer_fail(apeer, MADRAIL_ERR_PEER_UNREACHABLE);
    }
    for (i = 0; i < N; i++)
        if (sr[i])
            pwait(&p, &sr[i], NULL);
    pair_close(&p);
}

/* ---- failed peers are freed ---- */

static void test_fail_frees(madrail_status_t how)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:ff0", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", "MADRAIL_LOG_LEVEL=error", NULL};
    pair_t p;
    mdr_peer_t *peer;
    int v[3] = {11, 12, 13}, i;
    madrail_request_t sr[3];
    uint64_t e;
    size_t complete_bytes;

    if (pair_open(&p, ov) != 0 || warm_up(&p) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    for (i = 0; i < 3; i++) /* three whole unexpected messages */
        madrail_isend(p.a, p.a2b, &v[i], sizeof(int), 5, 0, &sr[i]);
    for (i = 0; i < 3; i++)
        pwait(&p, &sr[i], NULL);
    for (i = 0; i < 10; i++)
        spin(&p);
    complete_bytes = peer->held_bytes;
    e = peer->expected_seq;
    forge_eager(&p, 0, e, 2000, 0, 976, 6);     /* first fragment of two: partial */
    forge_eager(&p, 0, e + 2, 1, 0, 1, 6);      /* out of order */
    for (i = 0; i < 10; i++)
        spin(&p);
    CHECK(peer->inflight.count == 5 && peer->held_bytes > complete_bytes,
          "five messages held (%zu), %zu bytes", peer->inflight.count, peer->held_bytes);
    peer->rails[0].down = 1;
    mdr_peer_fail(peer, how);
    if (how == MADRAIL_ERR_PEER_UNREACHABLE) {
        madrail_request_t rr;
        madrail_info_t info;
        int w = 0, ok = 1;
        CHECK(peer->inflight.count == 3 && peer->held_bytes == complete_bytes,
              "unreachable: the three whole messages stay (%zu, %zu bytes), the rest is freed",
              peer->inflight.count, peer->held_bytes);
        for (i = 0; i < 3; i++) {
            madrail_irecv(p.b, p.b2a, &w, sizeof(w), 5, 0, &rr);
            if (pwait(&p, &rr, &info) != MADRAIL_OK || w != v[i])
                ok = 0;
        }
        CHECK(ok, "and can still be received");
        CHECK(peer->held_bytes == 0 && p.b->held_bytes == 0, "then nothing is held");
    } else {
        CHECK(peer->inflight.count == 0 && peer->held_bytes == 0 && p.b->held_bytes == 0 &&
                  mdr_list_empty(&p.b->unexpected),
              "%s: everything it sent is freed (%zu messages, %zu bytes)",
              madrail_status_str(how), peer->inflight.count, peer->held_bytes);
    }
    pair_close(&p);
}

/* ---- legit traffic does not trip ---- */

static int am_count, am_bad;
static uint64_t am_next;
static void am_handler(void *arg, madrail_peer_t src, uint64_t id, const void *data, size_t len)
{
    (void)arg;
    (void)src;
    (void)data;
    if (id != am_next || len != sizeof(uint64_t))
        am_bad++;
    am_next = id + 5;
    am_count++;
}

/* Mixed sizes (eager, medium, rendezvous) and active messages over two
 * rails that overtake each other, with two credits per rail (a window of
 * four): received in order, no rail closed, nothing left held. */
static void test_legit_reorder(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:lr0;reorder=1;seed=3,loop:lr1;reorder=1;seed=8;delay=2",
                        "MADRAIL_CREDITS=2", "MADRAIL_SLOT_SIZE=512", "MADRAIL_RNDV_THRESH=4k",
                        NULL};
    enum { N = 600 };
    static uint8_t sb[N][9000], rb[9000];
    static madrail_request_t sr[N];
    pair_t p;
    mdr_peer_t *peer;
    int i, ok = 1, r;
    uint64_t one = 1;
    struct iovec iov = {&one, sizeof(one)};

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "open");
        return;
    }
    peer = bpeer(&p);
    madrail_am_set_handler(p.b, am_handler, NULL);
    for (i = 0; i < N; i++) {
        size_t n = (size_t)((i * 977) % 9000);
        memset(sb[i], 0, 16);
        memcpy(sb[i], &i, sizeof(i));
        madrail_isend(p.a, p.a2b, sb[i], n < 4 ? 4 : n, (uint64_t)(i % 7), 0, &sr[i]);
        if (i % 5 == 0)
            madrail_am_send(p.a, p.a2b, (uint64_t)i, &iov, 1);
        if (i % 3 == 0)
            spin(&p);
    }
    for (i = 0; i < N; i++) {
        madrail_request_t rr;
        madrail_info_t info;
        int got = -1;
        madrail_irecv(p.b, MADRAIL_ANY_PEER, rb, sizeof(rb), 0, MADRAIL_TAG_ANY, &rr);
        if (pwait(&p, &rr, &info) != MADRAIL_OK) {
            ok = 0;
            break;
        }
        memcpy(&got, rb, sizeof(got));
        if (got != i) {
            ok = 0;
            break;
        }
    }
    CHECK(ok, "legit reordered traffic: all %d messages in order", N);
    CHECK(am_count == N / 5 && am_bad == 0, "and %d active messages in order (%d, %d bad)",
          N / 5, am_count, am_bad);
    for (i = 0; i < N; i++)
        if (sr[i])
            pwait(&p, &sr[i], NULL);
    for (i = 0; i < 100; i++)
        spin(&p);
    for (r = 0; r < 2; r++)
        CHECK(!peer->rails[r].down && peer->rails[r].held == 0 &&
                  peer->rails[r].ret_pending <= 2,
              "rail %d: up, nothing held, %u owed", r, peer->rails[r].ret_pending);
    CHECK(peer->held_bytes == 0 && peer->inflight.count == 0, "nothing held at the end");
    pair_close(&p);
}

static void test_config(void)
{
    madrail_context_t c;
    const char *small[] = {"MADRAIL_RAILS=loop:cf0", "MADRAIL_RECV_MEM_MAX=64k", NULL};
    const char *ok[] = {"MADRAIL_RAILS=loop:cf1", NULL};
    madrail_context_params_t p1 = {.overrides = small}, p2 = {.overrides = ok};
    CHECK(madrail_context_init(&p1, &c) == MADRAIL_ERR_CONFIG,
          "MADRAIL_RECV_MEM_MAX below what the credits allow is refused");
    CHECK(madrail_context_init(&p2, &c) == MADRAIL_OK && c->cfg.recv_mem_max == 256u << 20,
          "default MADRAIL_RECV_MEM_MAX is 256m");
    madrail_context_finalize(c);
}

int main(void)
{
    test_config();
    test_credit_overrun();
    test_credit_messages();
    test_far_ahead();
    test_eager_total();
    test_short();
    test_short_lane();
    test_flood(FLOOD_HEADERS, "header flood", 20000);
    test_flood(FLOOD_AHEAD, "1-byte fragments ahead", 80000);
    test_legit_cap();
    test_fail_frees(MADRAIL_ERR_PEER_PROTO);
    test_fail_frees(MADRAIL_ERR_PEER_UNREACHABLE);
    test_legit_reorder();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
