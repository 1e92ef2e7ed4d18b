/*
 * Fuzz target: the core's receive path (mdr_ctrl_recv_upcall and what it
 * dispatches to: header and credit checks, matching, reorder, eager,
 * rendezvous, receiver-first, active messages).
 *
 * Three contexts share loop rails in this process: B is the one under
 * test, A and C are its peers (C is the "third peer" of FINs and CTSs that
 * come from the wrong side).  Each input is a small program: a setup byte
 * (rails and their fault knobs, credits, receiver-first, an active-message
 * handler), then operations.  Most operations are what a real application
 * and a real peer do (post receives, send, probe, cancel, progress any of
 * the three); the one that matters injects raw control messages into B as
 * if the loop driver had delivered them from A or C on a given rail.  An
 * injected message may be patched before delivery with values the input
 * cannot know by itself (a live request id picked by index, B's next
 * expected sequence number, a loop rail id, a buffer address), so that
 * the fuzzer gets past the lookups to FIN for a real receive, CTS for a
 * real send, and so on.
 *
 * The harness behaves as an application would: every buffer is malloc'd
 * at its exact size and freed as soon as its request completes (so a late
 * write is a use-after-free for ASan), and the active-message handler
 * reads every byte it is given, as the netmod's does.  At the end every
 * rail is killed (a hostile peer must not keep finalize waiting), the
 * contexts are finalized and LeakSanitizer checks that nothing was left.
 *
 * The input format is written down once, in fz_core_seeds() at the
 * bottom, which also makes the seed corpus (FZ_GEN_SEEDS=dir).
 */
#include "mdr_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "fuzz_common.h"

FZ_DEFINE_GETRANDOM

enum { FZ_B = 0, FZ_A = 1, FZ_C = 2, FZ_NCTX = 3 };
enum { FZ_MAXREQ = 64, FZ_MAXOPS = 200, FZ_MAXMSG = 4096 };

/* Operations (low 3 bits of the op byte). */
enum {
    FZ_OP_INJECT = 0,   /* src(u8) len(u16) bytes npatch(u8) {off8(u8) sel(u8)}*: each
                         * patch writes 64-bit word off8 (off8 & 0x80: the low 32 bits
                         * of the value into the upper half of word off8 & 0x7f, where
                         * a SHORT keeps its sequence number) */
    FZ_OP_PROGRESS = 1, /* mask(u8): bits 0-2 contexts B A C, bits 3-5 rounds-1 */
    FZ_OP_RECV = 2,     /* kind(u8) tag(u8): B posts a receive */
    FZ_OP_SEND = 3,     /* kind(u8) tag(u8): B sends to A or C */
    FZ_OP_PEER_SEND = 4,/* kind(u8) tag(u8): A or C sends to B */
    FZ_OP_CANCEL = 5,   /* idx(u8): cancel one of the open requests */
    FZ_OP_PROBE = 6,    /* kind(u8) tag(u8): improbe on B, imrecv what it finds */
    FZ_OP_AM = 7        /* kind(u8) len(u16): A or C sends an active message to B;
                         * kind & 0x80: one that announces a tagged message of
                         * fz_sizes[(kind >> 2) & 7] bytes, tag kind & 7 (madrail_am_isend) */
};

/* Patch selectors (high 2 bits of sel; low 6 bits an index). */
enum {
    FZ_SEL_REQ = 0,  /* the id of the index-th live request (B, then A, then C) */
    FZ_SEL_SEQ = 1,  /* B's next expected sequence number from the sender, + index - 8
                      * (so that later fragments of a message can name its number) */
    FZ_SEL_RAIL = 2, /* word (index & 1) of the address of rail (index >> 1) & 7 of
                      * context (index >> 4) % 3 */
    FZ_SEL_BUF = 3   /* address of the index-th open request's buffer */
};

static const size_t fz_sizes[8] = {0, 8, 200, 976, 3000, 16384, 40000, 100000};

static const char *const fz_rail_specs[4] = {
    "MADRAIL_RAILS=loop:fz0",
    "MADRAIL_RAILS=loop:fz0,loop:fz1",
    "MADRAIL_RAILS=loop:fz0;reorder=1;seed=3,loop:fz1;reorder=1;seed=7;nores=5",
    "MADRAIL_RAILS=loop:fz0;delay=2,loop:fz1;nores=3",
};

typedef struct fz_req {
    madrail_request_t req;
    int ctx;
    void *buf;
} fz_req_t;

typedef struct fz_state {
    madrail_context_t ctx[FZ_NCTX];
    madrail_peer_t peer_of_b[FZ_NCTX]; /* B's handle of A and C */
    madrail_peer_t b_of[FZ_NCTX];      /* A's and C's handle of B */
    fz_req_t reqs[FZ_MAXREQ];
    int nreqs;
    uint64_t am_sum;
} fz_state_t;

static void fz_am_handler(void *arg, madrail_peer_t src, uint64_t id, const void *data,
                          size_t len)
{
    fz_state_t *s = arg;
    const uint8_t *p = data;
    uint64_t sum = id + src;
    size_t i;

    if (p == NULL && len > 0) {
        fprintf(stderr, "fuzz: active-message handler called with no data and a length of "
                "%zu bytes (id %llx from peer %u)\n", len, (unsigned long long)id, src);
        __builtin_trap();
    }
    /* read all of it, as the netmod's handler does */
    for (i = 0; i < len; i++)
        sum = sum * 31 + p[i];
    s->am_sum += sum;
}

static int fz_open(fz_state_t *s, uint8_t setup)
{
    char credits[40];
    const char *ov[] = {fz_rail_specs[setup & 3],
                        (setup & 4) ? "MADRAIL_RNDV_RECV_FIRST=1" : "MADRAIL_RNDV_RECV_FIRST=0",
                        credits,
                        "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k",
                        "MADRAIL_STRIPE_MIN_CHUNK=4k",
                        "MADRAIL_LOG_LEVEL=error",
                        NULL};
    madrail_context_params_t prm = {.overrides = ov, .job_key = fz_job_key};
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len;
    int i;

    snprintf(credits, sizeof(credits), "MADRAIL_CREDITS=%u", (setup & 16) ? 2u : 8u);
    for (i = 0; i < FZ_NCTX; i++)
        if (madrail_context_init(&prm, &s->ctx[i]) != MADRAIL_OK)
            return -1;
    for (i = FZ_A; i < FZ_NCTX; i++) {
        len = sizeof(addr);
        if (madrail_context_address(s->ctx[i], addr, &len) != MADRAIL_OK ||
            madrail_peer_add(s->ctx[FZ_B], addr, len, &s->peer_of_b[i]) != MADRAIL_OK)
            return -1;
        len = sizeof(addr);
        if (madrail_context_address(s->ctx[FZ_B], addr, &len) != MADRAIL_OK ||
            madrail_peer_add(s->ctx[i], addr, len, &s->b_of[i]) != MADRAIL_OK)
            return -1;
    }
    if (setup & 8)
        madrail_am_set_handler(s->ctx[FZ_B], fz_am_handler, s);
    return 0;
}

/* FZ_STRICT=mask: no workaround for the known defects whose bits are set
 * (1: eager send to a failed peer, 2: queued messages of a failed peer,
 * 4: requests that never complete once every peer failed, 8: more than
 * FZ_HELD_MAX bytes held for one peer's unexpected and out-of-order
 * messages); any other value than a number: all of them.  See
 * test/fuzz/crashers/core. */
enum { FZ_K_SEND_FAILED = 1, FZ_K_TXQ_FAILED = 2, FZ_K_NEVER_DONE = 4, FZ_K_HELD = 8 };
#define FZ_HELD_MAX ((uint64_t)256 << 20)
static unsigned fz_strict;
static int fz_debug;

/* Does ctx still have a usable rail to peer p? */
static int fz_reachable(mdr_ctx_t *ctx, madrail_peer_t p)
{
    mdr_peer_t *peer = mdr_peer_get(ctx, p);
    int r;

    for (r = 0; peer != NULL && r < ctx->nrails; r++)
        if (!peer->rails[r].down && (peer->rails[r].ep || peer->rails[r].have_addr))
            return 1;
    return 0;
}

static fz_req_t *fz_req_new(fz_state_t *s, int ctx, size_t len, int fill)
{
    fz_req_t *r;

    if (s->nreqs >= FZ_MAXREQ)
        return NULL;
    r = &s->reqs[s->nreqs];
    r->ctx = ctx;
    r->req = NULL;
    r->buf = malloc(len ? len : 1); /* exact size: ASan sees any overflow */
    if (r->buf == NULL)
        return NULL;
    if (fill)
        memset(r->buf, 0x5a, len);
    s->nreqs++;
    return r;
}

/* The last fz_req_new() was not used. */
static void fz_req_drop(fz_state_t *s)
{
    s->nreqs--;
    free(s->reqs[s->nreqs].buf);
}

/* Bytes B holds for one peer's messages that arrived and are not
 * received yet (out of order, or unexpected), by the buffers it gave them. */
static void fz_check_held(fz_state_t *s)
{
    mdr_ctx_t *b = s->ctx[FZ_B];
    uint32_t p;

    for (p = 0; p < b->npeers; p++) {
        mdr_peer_t *peer = b->peers[p];
        uint64_t held;
        if (peer == NULL)
            continue; /* retired */
        held = peer->held_bytes; /* tag.c's count of what it holds for the peer */
        if (held > FZ_HELD_MAX) {
            fprintf(stderr, "fuzz: %llu bytes held for peer %u's unreceived messages (more "
                    "than %llu)\n", (unsigned long long)held, p,
                    (unsigned long long)FZ_HELD_MAX);
            __builtin_trap();
        }
    }
}

/* Complete what completed, as an application does: test, then free the
 * buffer at once. */
static void fz_reap(fz_state_t *s)
{
    int i, j = 0, flag;

    if (fz_strict & FZ_K_HELD)
        fz_check_held(s);

    for (i = 0; i < s->nreqs; i++) {
        fz_req_t *r = &s->reqs[i];
        flag = 0;
        if (r->req != NULL)
            (void)madrail_test(&r->req, &flag, NULL);
        if (r->req == NULL) {
            free(r->buf);
            continue;
        }
        s->reqs[j++] = *r;
    }
    s->nreqs = j;
}

static void fz_progress(fz_state_t *s, unsigned mask, unsigned rounds)
{
    unsigned k;
    int i;

    for (k = 0; k < rounds; k++)
        for (i = 0; i < FZ_NCTX; i++)
            if (mask & (1u << i))
                madrail_progress(s->ctx[i]);
}

/* The value a patch selector names. */
static uint64_t fz_select(fz_state_t *s, mdr_peer_t *from, uint8_t sel)
{
    unsigned idx = sel & 63;
    int i;

    switch (sel >> 6) {
    case FZ_SEL_REQ: {
        unsigned n = 0;
        for (i = 0; i < FZ_NCTX; i++) {
            mdr_ctx_t *c = s->ctx[i];
            uint32_t k;
            for (k = 0; k < c->reqtab_cap; k++)
                if (c->reqtab[k] != NULL)
                    n++;
        }
        if (n == 0)
            return 0;
        idx %= n;
        for (i = 0; i < FZ_NCTX; i++) {
            mdr_ctx_t *c = s->ctx[i];
            uint32_t k;
            for (k = 0; k < c->reqtab_cap; k++)
                if (c->reqtab[k] != NULL && idx-- == 0)
                    return c->reqtab[k]->id;
        }
        return 0;
    }
    case FZ_SEL_SEQ:
        return from->expected_seq + idx - 8;
    case FZ_SEL_RAIL: {
        /* a word of a rail's packed address (a loop address holds its rail
         * id in word 1, which loop rkeys name) */
        mdr_ctx_t *c = s->ctx[(idx >> 4) % FZ_NCTX];
        int r = (int)((idx >> 1) & 7) % c->nrails;
        uint64_t a[8] = {0};
        if (c->rails[r].attr.addr_len > sizeof(a) ||
            c->rails[r].ops->addr_pack(c->rails[r].rail, a, c->rails[r].attr.addr_len) !=
                MADRAIL_OK)
            return 0;
        return a[idx & 1];
    }
    default:
        if (s->nreqs == 0)
            return 0;
        return (uint64_t)(uintptr_t)s->reqs[idx % (unsigned)s->nreqs].buf;
    }
}

static void fz_inject(fz_state_t *s, fz_in_t *in)
{
    static uint64_t msg[FZ_MAXMSG / 8]; /* 8-byte aligned, as drivers deliver */
    mdr_ctx_t *b = s->ctx[FZ_B];
    uint8_t src = fz_u8(in);
    int from = (src & 1) ? FZ_C : FZ_A;
    mdr_peer_t *peer = mdr_peer_get(b, s->peer_of_b[from]);
    int rail = (int)((src >> 1) % (unsigned)b->nrails);
    size_t len = fz_u16(in) % FZ_MAXMSG;
    unsigned npatch, k;

    fz_bytes(in, msg, len);
    npatch = fz_u8(in) & 7;
    for (k = 0; k < npatch; k++) {
        uint8_t off = fz_u8(in), sel = fz_u8(in);
        uint64_t v = fz_select(s, peer, sel);
        if (off & 0x80) {
            uint32_t v32 = (uint32_t)v;
            off &= 0x7f;
            if ((size_t)off * 8 + 8 <= len)
                memcpy((uint8_t *)&msg[off] + 4, &v32, sizeof(v32));
        } else if ((size_t)off * 8 + 8 <= len) {
            msg[off] = v;
        }
    }
    if (peer == NULL)
        return;
    /* a message arrives on a connection: make the ep (lazily, as traffic does) */
    if (peer->rails[rail].ep == NULL && mdr_peer_connect_rail(peer, rail) != MADRAIL_OK)
        return;
    mdr_ctrl_recv_upcall(&peer->rails[rail], msg, len);
}

/* kind: bits 0-1 source (A, C, any), bits 2-4 size class, bit 6 the
 * receive is A's (bit 0 clear) or C's instead of B's, from B or any, bit 7
 * any tag. */
static void fz_recv(fz_state_t *s, fz_in_t *in)
{
    uint8_t kind = fz_u8(in), tag = fz_u8(in);
    madrail_peer_t srcs[3] = {s->peer_of_b[FZ_A], s->peer_of_b[FZ_C], MADRAIL_ANY_PEER};
    size_t len = fz_sizes[(kind >> 2) & 7];
    uint64_t ignore = (kind & 0x80) ? MADRAIL_TAG_ANY : 0;
    int ctx = FZ_B;
    madrail_peer_t src = srcs[(kind & 3) % 3];
    fz_req_t *r;

    if (kind & 0x40) {
        ctx = (kind & 1) ? FZ_C : FZ_A;
        src = (kind & 2) ? MADRAIL_ANY_PEER : s->b_of[ctx];
    }
    r = fz_req_new(s, ctx, len, 0);
    if (r == NULL)
        return;
    if (madrail_irecv(s->ctx[ctx], src, r->buf, len, tag & 7, ignore, &r->req) != MADRAIL_OK)
        fz_req_drop(s);
}

static void fz_send(fz_state_t *s, fz_in_t *in, int from_b)
{
    uint8_t kind = fz_u8(in), tag = fz_u8(in);
    size_t len = fz_sizes[(kind >> 2) & 7];
    unsigned flags = (kind & 0x40) ? MADRAIL_SEND_SYNC : 0;
    int peer = (kind & 1) ? FZ_C : FZ_A;
    int ctx = from_b ? FZ_B : peer;
    madrail_peer_t to = from_b ? s->peer_of_b[peer] : s->b_of[peer];
    fz_req_t *r = fz_req_new(s, ctx, len, 1);

    if (r == NULL)
        return;
    if (!(fz_strict & FZ_K_SEND_FAILED) && !fz_reachable(s->ctx[ctx], to)) {
        /* KNOWN DEFECT (test/fuzz/crashers/core/strict1-timeout-eager-send-to-failed-peer):
         * an eager send to a peer that already failed stays queued for
         * ever and finalize waits its full 30 s.  Skipped so that the
         * fuzzer looks further; FZ_STRICT=1 does not skip it. */
        fz_req_drop(s);
        return;
    }
    if (kind & 0x80) { /* no request when it leaves at once (r->req NULL: reaped as done,
                        * its buffer freed: ASan sees the library keep a pointer to it) */
        uint64_t msg_id;
        if (madrail_isend_nb(s->ctx[ctx], to, r->buf, len, tag & 7, flags, &r->req, &msg_id) !=
            MADRAIL_OK)
            fz_req_drop(s);
        return;
    }
    if (madrail_isend(s->ctx[ctx], to, r->buf, len, tag & 7, flags, &r->req) != MADRAIL_OK)
        fz_req_drop(s);
}

static void fz_cancel(fz_state_t *s, fz_in_t *in)
{
    uint8_t idx = fz_u8(in);
    fz_req_t *r;

    if (s->nreqs == 0)
        return;
    r = &s->reqs[idx % s->nreqs];
    if (r->req != NULL)
        (void)madrail_cancel(s->ctx[r->ctx], r->req);
}

static void fz_probe(fz_state_t *s, fz_in_t *in)
{
    uint8_t kind = fz_u8(in), tag = fz_u8(in);
    madrail_peer_t srcs[3] = {s->peer_of_b[FZ_A], s->peer_of_b[FZ_C], MADRAIL_ANY_PEER};
    madrail_message_t msg = NULL;
    madrail_info_t info;
    size_t len;
    fz_req_t *r;

    if (madrail_improbe(s->ctx[FZ_B], srcs[(kind & 3) % 3], tag & 7,
                        (kind & 0x80) ? MADRAIL_TAG_ANY : 0, &msg, &info) != MADRAIL_OK ||
        msg == NULL)
        return;
    /* receive it into a buffer of the probed length, or a smaller one (truncation) */
    len = info.sent_length;
    if (kind & 0x40)
        len /= 2;
    if (len > 1u << 20)
        len = 1u << 20;
    r = fz_req_new(s, FZ_B, len, 0);
    if (r == NULL) {
        /* no room: receive into a scratch buffer and complete it now */
        static uint8_t scratch[1];
        madrail_request_t q = NULL;
        if (madrail_imrecv(s->ctx[FZ_B], msg, scratch, 0, &q) == MADRAIL_OK && q != NULL)
            (void)madrail_request_set_callback(q, NULL, NULL);
        return;
    }
    if (madrail_imrecv(s->ctx[FZ_B], msg, r->buf, len, &r->req) != MADRAIL_OK)
        fz_req_drop(s);
}

static void fz_am(fz_state_t *s, fz_in_t *in)
{
    uint8_t kind = fz_u8(in);
    size_t len = fz_u16(in);
    int peer = (kind & 1) ? FZ_C : FZ_A;
    uint8_t buf[1024];
    struct iovec iov;

    memset(buf, kind, sizeof(buf));
    if (len > madrail_am_max(s->ctx[peer]))
        len %= madrail_am_max(s->ctx[peer]) + 1;
    iov.iov_base = buf;
    iov.iov_len = len < sizeof(buf) ? len : sizeof(buf);
    if (kind & 0x80) {
        size_t dlen = fz_sizes[(kind >> 2) & 7];
        fz_req_t *r = fz_req_new(s, peer, dlen, 1);
        if (r == NULL)
            return;
        if (!(fz_strict & FZ_K_SEND_FAILED) && !fz_reachable(s->ctx[peer], s->b_of[peer])) {
            fz_req_drop(s); /* as in fz_send */
            return;
        }
        if (madrail_am_isend(s->ctx[peer], s->b_of[peer], kind, &iov, 1, r->buf, dlen, kind & 7,
                             &r->req) != MADRAIL_OK)
            fz_req_drop(s);
        return;
    }
    (void)madrail_am_send(s->ctx[peer], s->b_of[peer], kind, &iov, 1);
}

/* A fixed prelude, so that request ids of every kind exist before the
 * first injected message: B's posted receive from A, wildcard receive,
 * rendezvous-sized receive (offered receiver-first when that is on), a
 * synchronous send and a rendezvous send; A's rendezvous send to B and
 * C's eager one. */
static void fz_prelude(fz_state_t *s)
{
    static const uint8_t ops[] = {
        FZ_OP_RECV, 0x00 | (2 << 2), 1,        /* from A, 200 B, tag 1 */
        FZ_OP_RECV, 0x02 | (3 << 2) | 0x80, 0, /* any peer, any tag, 976 B */
        FZ_OP_RECV, 0x00 | (6 << 2), 3,        /* from A, 40000 B, tag 3 */
        FZ_OP_SEND, 0x00 | (2 << 2) | 0x40, 4, /* to A, 200 B, synchronous */
        FZ_OP_SEND, 0x00 | (6 << 2), 5,        /* to A, 40000 B: RTS */
        FZ_OP_PEER_SEND, 0x00 | (6 << 2), 3,   /* A to B, 40000 B */
        FZ_OP_PEER_SEND, 0x01 | (3 << 2), 2,   /* C to B, 976 B */
    };
    fz_in_t in = {ops + 1, sizeof(ops) - 1};
    size_t i;

    for (i = 0; i < sizeof(ops); i += 3) {
        in.p = ops + i + 1;
        in.n = 2;
        switch (ops[i]) {
        case FZ_OP_RECV: fz_recv(s, &in); break;
        case FZ_OP_SEND: fz_send(s, &in, 1); break;
        default: fz_send(s, &in, 0); break;
        }
    }
    fz_progress(s, 1u << FZ_B, 1);
}

/* FZ_DEBUG=1: what each context still holds before finalize (triage of
 * inputs that keep finalize waiting). */
static void fz_dump(fz_state_t *s)
{
    int i, r;

    for (i = 0; i < FZ_NCTX; i++) {
        mdr_ctx_t *c = s->ctx[i];
        uint32_t k;
        if (c == NULL)
            continue;
        fprintf(stderr, "fuzz: context %c: %llu sends active, %s\n", "BAC"[i],
                (unsigned long long)c->active_sends,
                mdr_list_empty(&c->active) ? "no peer with queued work" : "peers with queued work");
        for (k = 0; k < c->reqtab_cap; k++) {
            mdr_req_t *q = c->reqtab[k];
            if (q == NULL)
                continue;
            fprintf(stderr,
                    "fuzz:   request %llx %s peer %u len %zu complete %d rndv %d wait_ack %d "
                    "queued %d frag_off %zu nputs %d puts_left %d fins_left %d matched %d "
                    "rfs_state %d\n",
                    (unsigned long long)q->id, q->type == MDR_REQ_SEND ? "send" : "recv",
                    q->peer, q->len, q->complete, (int)q->rndv, (int)q->wait_ack, q->queued, q->frag_off,
                    q->nputs, q->puts_left, q->fins_left, q->matched, (int)q->rfs_state);
        }
        for (k = 0; k < c->npeers; k++)
            for (r = 0; r < c->nrails; r++) {
                mdr_peer_rail_t *pr = &c->peers[k]->rails[r];
                fprintf(stderr, "fuzz:   peer %u rail %d: ep %s down %d idle %d txq %d sendq %d\n",
                        k, r, pr->ep ? "yes" : "no", pr->down,
                        pr->ep ? c->rails[r].ops->ep_idle(pr->ep) : -1,
                        !mdr_list_empty(&c->peers[k]->txq), !mdr_list_empty(&c->peers[k]->sendq));
            }
    }
}

static void fz_close(fz_state_t *s)
{
    int i, r;

    /* whatever is well-formed finishes; then the peers are gone */
    fz_progress(s, 7, 64);
    fz_reap(s);
    for (i = 0; i < FZ_NCTX; i++) {
        mdr_ctx_t *c = s->ctx[i];
        uint32_t p;
        if (c == NULL)
            continue;
        /* a rail never used to a peer has no ep to fail: make them all, so
         * that every peer becomes unreachable (rail failover is still to
         * come: a message lost with a rail is not sent again, and what
         * waits for its answer would keep finalize waiting) */
        for (p = 0; p < c->npeers; p++)
            for (r = 0; r < c->nrails; r++)
                (void)mdr_peer_connect_rail(c->peers[p], r);
        for (r = 0; r < c->nrails; r++)
            if (c->rails[r].ops == &mdr_loop_ops)
                mdr_loop_rail_kill(c->rails[r].rail, "fuzz teardown");
    }
    fz_progress(s, 7, 4);
    for (i = 0; i < s->nreqs; i++)
        if (s->reqs[i].req != NULL)
            (void)madrail_cancel(s->ctx[s->reqs[i].ctx], s->reqs[i].req);
    fz_progress(s, 7, 4);
    fz_reap(s);
    if (fz_debug)
        fz_dump(s);
    for (i = 0; i < FZ_NCTX; i++) {
        mdr_ctx_t *c = s->ctx[i];
        uint32_t p, k;
        if (c == NULL)
            continue;
        for (p = 0; p < c->npeers; p++) {
            mdr_peer_t *peer = c->peers[p];
            mdr_list_t *it;
            if (fz_reachable(c, peer->index) || mdr_list_empty(&peer->txq))
                continue;
            if (fz_strict & FZ_K_TXQ_FAILED) {
                fprintf(stderr, "fuzz: context %c: peer %u failed with control messages "
                        "still queued for it (finalize will wait 30 s)\n", "BAC"[i], p);
                __builtin_trap();
            }
            /* KNOWN DEFECT (crashers/core/strict2-txq-of-failed-peer): a
             * message queued for want of credit stays queued when its peer
             * fails, the peer stays active and finalize waits 30 s.  Dropped
             * here, after the fuzzed part, as the fix would. */
            while ((it = mdr_list_pop_head(&peer->txq)) != NULL)
                free(mdr_container_of(it, mdr_txq_item_t, link));
            if (mdr_list_empty(&peer->sendq) && peer->active) {
                peer->active = 0;
                mdr_list_del(&peer->active_link);
            }
        }
        /* every peer is gone: every request must have completed by now */
        for (k = 0; (fz_strict & FZ_K_NEVER_DONE) && k < c->reqtab_cap; k++) {
            mdr_req_t *q = c->reqtab[k];
            if (q != NULL && !q->complete && (q->matched || q->type == MDR_REQ_SEND)) {
                fprintf(stderr, "fuzz: context %c: %s request %llx (peer %u) matched, "
                        "never completed although every peer failed\n", "BAC"[i],
                        q->type == MDR_REQ_SEND ? "send" : "receive",
                        (unsigned long long)q->id, q->peer);
                __builtin_trap();
            }
        }
    }
    for (i = 0; i < FZ_NCTX; i++)
        if (s->ctx[i] != NULL) {
            madrail_context_finalize(s->ctx[i]);
        }
    /* requests never completed were freed by finalize; their buffers now */
    for (i = 0; i < s->nreqs; i++)
        free(s->reqs[i].buf);
    s->nreqs = 0;
}

static void fz_core_run(const uint8_t *data, size_t size)
{
    fz_in_t in = {data, size};
    fz_state_t s;
    int nops = 0;

    memset(&s, 0, sizeof(s));
    fz_rand_reset();
    if (fz_open(&s, fz_u8(&in)) == 0) {
        fz_prelude(&s);
        while (fz_left(&in) > 0 && nops++ < FZ_MAXOPS) {
            uint8_t op = fz_u8(&in);
            switch (op & 7) {
            case FZ_OP_INJECT: fz_inject(&s, &in); break;
            case FZ_OP_PROGRESS: {
                uint8_t m = fz_u8(&in);
                fz_progress(&s, m & 7, 1u + ((m >> 3) & 7));
                break;
            }
            case FZ_OP_RECV: fz_recv(&s, &in); break;
            case FZ_OP_SEND: fz_send(&s, &in, 1); break;
            case FZ_OP_PEER_SEND: fz_send(&s, &in, 0); break;
            case FZ_OP_CANCEL: fz_cancel(&s, &in); break;
            case FZ_OP_PROBE: fz_probe(&s, &in); break;
            default: fz_am(&s, &in); break;
            }
            fz_reap(&s);
        }
    }
    fz_close(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_core_run(data, size);
    return 0;
}

/* ---------------- the seed corpus ---------------- */

/*
 * Seeds are programs in the format above.  Injected messages are built
 * from core.h's structs; ids, sequence numbers and addresses go in as
 * patches, so the seeds stay valid when the setup changes.  What the ids
 * are: the prelude makes, in B's table, the receive from A (index 0),
 * the wildcard receive (1), the rendezvous receive (2), the synchronous
 * send (3), the rendezvous send (4); A's send to B and C's follow.
 */
typedef struct fz_seed {
    uint8_t buf[8192];
    size_t len;
} fz_seed_t;

static void sd_put(fz_seed_t *sd, const void *p, size_t n)
{
    if (n > 0 && sd->len + n <= sizeof(sd->buf)) {
        memcpy(sd->buf + sd->len, p, n);
        sd->len += n;
    }
}

static void sd_u8(fz_seed_t *sd, uint8_t v) { sd_put(sd, &v, 1); }

static void sd_u16(fz_seed_t *sd, uint16_t v) { sd_put(sd, &v, 2); }

/* An inject op: msg of len bytes from A (src bit 0 = 0) or C, with patches
 * given as (word offset, selector) pairs. */
static void sd_inject(fz_seed_t *sd, uint8_t src, const void *msg, size_t len,
                      const uint8_t *patches, unsigned npatch)
{
    sd_u8(sd, FZ_OP_INJECT);
    sd_u8(sd, src);
    sd_u16(sd, (uint16_t)len);
    sd_put(sd, msg, len);
    sd_u8(sd, (uint8_t)npatch);
    sd_put(sd, patches, 2 * npatch);
}

static void sd_op2(fz_seed_t *sd, uint8_t op, uint8_t a, uint8_t b)
{
    sd_u8(sd, op);
    sd_u8(sd, a);
    sd_u8(sd, b);
}

static void sd_progress(fz_seed_t *sd, uint8_t mask)
{
    sd_u8(sd, FZ_OP_PROGRESS);
    sd_u8(sd, mask);
}

#define SEL(kind, idx) ((uint8_t)(((kind) << 6) | ((idx) & 63)))

static int sd_write(const char *dir, const char *name, const fz_seed_t *sd)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(sd->buf, 1, sd->len, f) != sd->len) {
        fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* Seeds that crash today, on defects being fixed elsewhere: written only
 * where FZ_GEN_DEFECTS names (their minimized forms are in
 * test/fuzz/crashers/core).  Once fixed, make them sd_write() seeds. */
static int sd_write_defect(const char *name, const fz_seed_t *sd)
{
    const char *dir = getenv("FZ_GEN_DEFECTS");

    if (dir == NULL)
        return 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    return sd_write(dir, name, sd);
}

static void sd_hdr(mdr_hdr_t *h, uint8_t type, uint8_t flags, size_t len)
{
    memset(h, 0, sizeof(*h));
    h->type = type;
    h->flags = flags;
    h->len = (uint32_t)len;
}

static int fz_core_seeds(const char *dir)
{
    fz_seed_t sd;
    int rc = 0;
    uint8_t setup;

    for (setup = 0; setup < 32; setup += 9) {
        char name[64];
        /* FIN for the rendezvous receive (index 2), right and wrong byte counts */
        {
            mdr_fin_hdr_t f;
            const uint8_t pt[] = {1, SEL(FZ_SEL_REQ, 2)};
            uint64_t counts[3] = {40000, 0, 1ull << 40};
            int k;
            for (k = 0; k < 3; k++) {
                memset(&sd, 0, sizeof(sd));
                sd_u8(&sd, setup);
                sd_hdr(&f.h, MDR_MSG_FIN, 0, sizeof(f));
                f.rreq_id = 0;
                f.bytes = counts[k];
                sd_inject(&sd, 0, &f, sizeof(f), pt, 1);
                sd_progress(&sd, 7 | (3 << 3));
                snprintf(name, sizeof(name), "fin-rreq-%d-setup%u", k, setup);
                rc |= sd_write(dir, name, &sd);
                /* the same from the third peer */
                sd.buf[2] = 1;
                snprintf(name, sizeof(name), "fin-rreq-%d-from-c-setup%u", k, setup);
                rc |= sd_write(dir, name, &sd);
            }
        }
        /* FIN for the small receive (index 0) while it is still arriving */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 64];
            mdr_fin_hdr_t f;
            const uint8_t pe[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t pe_next[] = {1, SEL(FZ_SEL_SEQ, 7)}; /* the same message */
            const uint8_t pf[] = {1, SEL(FZ_SEL_REQ, 0)};
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            memset(msg, 0x11, sizeof(msg));
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.seq = 0;
            e.tag = 1;
            e.total = 200;
            e.offset = 0;
            e.id = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), pe, 1);
            sd_hdr(&f.h, MDR_MSG_FIN, 0, sizeof(f));
            f.rreq_id = 0;
            f.bytes = 0;
            sd_inject(&sd, 0, &f, sizeof(f), pf, 1);
            e.offset = 64;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), pe_next, 1);
            sd_progress(&sd, 7);
            snprintf(name, sizeof(name), "eager-fin-eager-setup%u", setup);
            rc |= sd_write_defect(name, &sd); /* crashers/core/fin-0-completes-arriving-eager */
        }
        /* CTS for the rendezvous send (index 4), with one loop key */
        {
            struct {
                mdr_cts_hdr_t c;
                mdr_key_desc_t k;
                uint64_t rkey[2]; /* loop rkey: rail id, key */
            } m;
            const uint8_t pt[] = {1, SEL(FZ_SEL_REQ, 4), 2, SEL(FZ_SEL_REQ, 2),
                                  7, SEL(FZ_SEL_BUF, 2), 8, SEL(FZ_SEL_RAIL, 0x11)};
            memset(&m, 0, sizeof(m));
            sd_hdr(&m.c.h, MDR_MSG_CTS, 0, sizeof(m));
            m.c.xfer_len = 40000;
            m.c.nkeys = 1;
            m.k.rail = 0;
            m.k.key_len = 16;
            m.rkey[1] = 1;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_inject(&sd, 0, &m, sizeof(m), pt, 4);
            sd_progress(&sd, 7 | (7 << 3));
            snprintf(name, sizeof(name), "cts-sreq-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
            m.c.xfer_len = 1ull << 33;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_inject(&sd, 1, &m, sizeof(m), pt, 4);
            snprintf(name, sizeof(name), "cts-huge-from-c-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* ACK for the synchronous send (index 3), from A and from C */
        {
            mdr_id_hdr_t a;
            const uint8_t pt[] = {1, SEL(FZ_SEL_REQ, 3)};
            sd_hdr(&a.h, MDR_MSG_ACK, 0, sizeof(a));
            a.id = 0;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_inject(&sd, 0, &a, sizeof(a), pt, 1);
            sd_inject(&sd, 1, &a, sizeof(a), pt, 1);
            snprintf(name, sizeof(name), "ack-sync-twice-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* RTS and RFS_DATA with and without the AM flag, and NACK/REVOKE */
        {
            mdr_rts_hdr_t r;
            mdr_rfs_data_hdr_t d;
            mdr_id_hdr_t n;
            const uint8_t ps[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t pd[] = {1, SEL(FZ_SEL_SEQ, 8), 4, SEL(FZ_SEL_REQ, 2)};
            const uint8_t pn[] = {1, SEL(FZ_SEL_REQ, 2)};
            int am;
            for (am = 0; am < 2; am++) {
                memset(&sd, 0, sizeof(sd));
                sd_u8(&sd, (uint8_t)(setup | 8));
                sd_hdr(&r.h, MDR_MSG_RTS, am ? MDR_HF_AM : 0, sizeof(r));
                r.seq = 0;
                r.tag = 3;
                r.total = am ? 1u << 20 : 40000;
                r.sreq_id = 0x100000001ull;
                sd_inject(&sd, 0, &r, sizeof(r), ps, 1);
                sd_hdr(&d.h, MDR_MSG_RFS_DATA, am ? MDR_HF_AM : 0, sizeof(d));
                d.seq = 0;
                d.tag = 3;
                d.total = 40000;
                d.rreq_id = 0;
                d.xfer_len = 40000;
                sd_inject(&sd, 0, &d, sizeof(d), pd, 2);
                sd_progress(&sd, 7 | (2 << 3));
                snprintf(name, sizeof(name), "rts-rfsdata-am%d-setup%u", am, setup);
                rc |= sd_write(dir, name, &sd);
            }
            /* the same headers with the AM flag one ahead of the sequence, then
             * what fills the gap: the handler gets no data and the header's
             * length (crashers/core/am-flag-on-rts, am-flag-on-rfsdata) */
            for (am = 0; am < 2; am++) {
                mdr_eager_hdr_t e;
                uint8_t msg[sizeof(e) + 8];
                const uint8_t p1[] = {1, SEL(FZ_SEL_SEQ, 9)};
                const uint8_t pd1[] = {1, SEL(FZ_SEL_SEQ, 9), 4, SEL(FZ_SEL_REQ, 2)};
                memset(&sd, 0, sizeof(sd));
                sd_u8(&sd, (uint8_t)(setup | 8));
                if (am) {
                    sd_hdr(&r.h, MDR_MSG_RTS, MDR_HF_AM, sizeof(r));
                    r.seq = 0;
                    r.tag = 3;
                    r.total = 1u << 20;
                    r.sreq_id = 0x100000001ull;
                    sd_inject(&sd, 0, &r, sizeof(r), p1, 1);
                } else {
                    sd_hdr(&d.h, MDR_MSG_RFS_DATA, MDR_HF_AM, sizeof(d));
                    d.total = 1u << 20;
                    d.xfer_len = 40000;
                    sd_inject(&sd, 0, &d, sizeof(d), pd1, 2);
                }
                memset(msg, 0x44, sizeof(msg));
                sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
                e.seq = 0;
                e.tag = 1;
                e.total = 8;
                e.offset = 0;
                e.id = 0;
                memcpy(msg, &e, sizeof(e));
                sd_inject(&sd, 0, msg, sizeof(msg), ps, 1);
                sd_progress(&sd, 7);
                snprintf(name, sizeof(name), "%s-am-ahead-setup%u", am ? "rts" : "rfsdata",
                         setup);
                rc |= sd_write_defect(name, &sd);
            }
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 4));
            sd_hdr(&n.h, MDR_MSG_RFS_NACK, 0, sizeof(n));
            n.id = 0;
            sd_inject(&sd, 0, &n, sizeof(n), pn, 1);
            sd_hdr(&n.h, MDR_MSG_RFS_REVOKE, 0, sizeof(n));
            sd_inject(&sd, 1, &n, sizeof(n), pn, 1);
            snprintf(name, sizeof(name), "nack-revoke-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* RFS offering a buffer for B's next send to A */
        {
            struct {
                mdr_rfs_hdr_t f;
                mdr_key_desc_t k;
                uint64_t rkey[2];
            } m;
            const uint8_t pt[] = {1, SEL(FZ_SEL_REQ, 5), 7, SEL(FZ_SEL_BUF, 0),
                                  8, SEL(FZ_SEL_RAIL, 0x11)};
            memset(&m, 0, sizeof(m));
            sd_hdr(&m.f.h, MDR_MSG_RFS, 0, sizeof(m));
            m.f.expected_seq = 0;
            m.f.tag = 6;
            m.f.buf_len = 40000;
            m.f.nkeys = 1;
            m.k.key_len = 16;
            m.rkey[1] = 1;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_inject(&sd, 0, &m, sizeof(m), pt, 3);
            sd_op2(&sd, FZ_OP_SEND, 0x00 | (6 << 2), 6);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "rfs-then-send-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* eager fragments out of order, far ahead, overlapping; a medium message */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 512];
            const uint8_t p0[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t p1[] = {1, SEL(FZ_SEL_SEQ, 9)};
            const uint8_t pfar[] = {1, SEL(FZ_SEL_SEQ, 63)};
            const uint8_t p0prev[] = {1, SEL(FZ_SEL_SEQ, 7)};
            memset(msg, 0x22, sizeof(msg));
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 1));
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.tag = 2;
            e.total = 1024;
            e.offset = 512;
            e.id = 0;
            e.seq = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 2, msg, sizeof(msg), p1, 1);
            sd_inject(&sd, 0, msg, sizeof(msg), pfar, 1);
            e.offset = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
            e.offset = 488;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 2, msg, sizeof(msg), p0prev, 1);
            sd_op2(&sd, FZ_OP_PROBE, 0x82, 0);
            sd_progress(&sd, 7);
            snprintf(name, sizeof(name), "eager-reorder-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* re-sent copies (replay.c): an EAGER fragment that came on rail 1
         * and again, flagged re-sent from rail 1, on rail 0 (a duplicate,
         * dropped), then one more copy naming the next index (taken); a
         * re-sent FIN for the rendezvous receive; a copy naming the rail
         * it came on (refused) */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 64];
            mdr_fin_hdr_t f;
            const uint8_t p0[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t pf[] = {1, SEL(FZ_SEL_REQ, 2)};
            memset(msg, 0x44, sizeof(msg));
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 1));
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.tag = 1;
            e.total = 200;
            e.offset = 0;
            e.id = 0;
            e.seq = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 2, msg, sizeof(msg), p0, 1);
            e.h.flags = MDR_HF_RESENT | (1u << MDR_HF_RAIL_SHIFT);
            e.h.credits = 0; /* index 0 on rail 1: arrived */
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
            e.h.credits = 1; /* index 1: not yet, taken */
            e.offset = 64;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "resent-eager-setup%u", setup);
            rc |= sd_write(dir, name, &sd);

            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 1));
            sd_hdr(&f.h, MDR_MSG_FIN, MDR_HF_RESENT | (1u << MDR_HF_RAIL_SHIFT), sizeof(f));
            f.rreq_id = 0;
            f.bytes = 40000;
            sd_inject(&sd, 0, &f, sizeof(f), pf, 1);
            sd_inject(&sd, 0, &f, sizeof(f), pf, 1); /* the same copy twice */
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "resent-fin-setup%u", setup);
            rc |= sd_write(dir, name, &sd);

            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 1));
            sd_hdr(&f.h, MDR_MSG_FIN, MDR_HF_RESENT, sizeof(f)); /* names rail 0, comes on 0 */
            f.bytes = 1;
            sd_inject(&sd, 0, &f, sizeof(f), pf, 1);
            sd_progress(&sd, 7);
            snprintf(name, sizeof(name), "resent-own-rail-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* an active message: well-formed, and one claiming more than arrived */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 16];
            const uint8_t p0[] = {1, SEL(FZ_SEL_SEQ, 8)};
            memset(msg, 0x33, sizeof(msg));
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 8));
            sd_hdr(&e.h, MDR_MSG_EAGER, MDR_HF_AM, sizeof(msg));
            e.seq = 0;
            e.tag = 9;
            e.total = 16;
            e.offset = 0;
            e.id = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
            e.total = 900;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
            sd_u8(&sd, FZ_OP_AM);
            sd_u8(&sd, 1);
            sd_u16(&sd, 100);
            sd_progress(&sd, 7 | (1 << 3));
            snprintf(name, sizeof(name), "am-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* tagged messages announced by an active message (madrail_am_isend):
         * an EAGER_AM for B's posted receive (tag 1), an RTS with AM for
         * B's 40000-byte receive (tag 3) and one for no receive (tag 6),
         * then an EAGER_AM claiming more data than its body; one ahead of
         * the sequence, then the RTS with AM that fills the gap; forms that
         * are refused (RTS with AM and no id, EAGER_AM at an offset); and
         * A sending announced messages of 200 and 100000 bytes itself */
        {
            mdr_eager_hdr_t e;
            struct {
                mdr_rts_hdr_t r;
                uint64_t am_id;
                uint8_t hdr[24];
            } ra;
            uint8_t msg[sizeof(e) + 40];
            const uint8_t p0[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t p1[] = {1, SEL(FZ_SEL_SEQ, 9)};
            int k;
            for (k = 0; k < 3; k++) {
                memset(&sd, 0, sizeof(sd));
                sd_u8(&sd, (uint8_t)(setup | 8));
                memset(msg, 0x35, sizeof(msg));
                sd_hdr(&e.h, MDR_MSG_EAGER_AM, 0, sizeof(msg));
                e.seq = 0;
                e.tag = 1;
                e.total = 24; /* a 16-byte header, then 24 bytes */
                e.offset = 0;
                e.id = 0xb0;
                memcpy(msg, &e, sizeof(e));
                memset(&ra, 0x36, sizeof(ra));
                sd_hdr(&ra.r.h, MDR_MSG_RTS, MDR_HF_AM, sizeof(ra));
                ra.r.seq = 0;
                ra.r.tag = 3;
                ra.r.total = 40000;
                ra.r.sreq_id = 0x100000001ull;
                ra.am_id = 0xb1;
                if (k == 0) {
                    sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
                    sd_inject(&sd, 0, &ra, sizeof(ra), p0, 1);
                    ra.r.tag = 6;
                    sd_inject(&sd, 0, &ra, sizeof(ra), p0, 1);
                    e.total = 41;
                    memcpy(msg, &e, sizeof(e));
                    sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
                } else if (k == 1) {
                    sd_inject(&sd, 0, msg, sizeof(msg), p1, 1);
                    sd_inject(&sd, 0, &ra, sizeof(ra), p0, 1);
                    sd_hdr(&ra.r.h, MDR_MSG_RTS, MDR_HF_AM, sizeof(ra.r));
                    sd_inject(&sd, 0, &ra, sizeof(ra.r), p0, 1);
                    e.offset = 8;
                    e.total = 8;
                    memcpy(msg, &e, sizeof(e));
                    sd_inject(&sd, 0, msg, sizeof(msg), p0, 1);
                } else {
                    sd_u8(&sd, FZ_OP_AM);
                    sd_u8(&sd, 0x80 | (2 << 2) | 1);
                    sd_u16(&sd, 40);
                    sd_u8(&sd, FZ_OP_AM);
                    sd_u8(&sd, 0x80 | (7 << 2) | 6);
                    sd_u16(&sd, 64);
                    sd_u8(&sd, FZ_OP_AM);
                    sd_u8(&sd, 0x80 | (0 << 2) | 2);
                    sd_u16(&sd, 0);
                }
                sd_progress(&sd, 7 | (3 << 3));
                snprintf(name, sizeof(name), "am-announced-%d-setup%u", k, setup);
                rc |= sd_write(dir, name, &sd);
            }
        }
        /* credits: a return of more than was spent; a CREDIT message */
        {
            mdr_hdr_t h;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_hdr(&h, MDR_MSG_CREDIT, 0, sizeof(h));
            h.credits = 1;
            sd_inject(&sd, 0, &h, sizeof(h), NULL, 0);
            h.credits = 0xffff;
            sd_inject(&sd, 2, &h, sizeof(h), NULL, 0);
            snprintf(name, sizeof(name), "credit-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* CANCEL of B's messages from A: the wildcard receive takes the
         * first EAGER, the second waits unexpected; CANCEL of each (the
         * matched one answered 0, the unexpected one dropped), again, and
         * one far ahead of anything A can have sent */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 64];
            mdr_cancel_hdr_t c;
            const uint8_t pe[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t pc_last[] = {1, SEL(FZ_SEL_SEQ, 7)};
            const uint8_t pc_first[] = {1, SEL(FZ_SEL_SEQ, 6)};
            const uint8_t pc_far[] = {1, SEL(FZ_SEL_SEQ, 63)};
            memset(msg, 0x44, sizeof(msg));
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.seq = 0;
            e.tag = 5;
            e.total = 64;
            e.offset = 0;
            e.id = 0x100000007ull;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), pe, 1);
            sd_inject(&sd, 0, msg, sizeof(msg), pe, 1);
            sd_hdr(&c.h, MDR_MSG_CANCEL, 0, sizeof(c));
            c.seq = 0;
            c.id = 0x100000009ull;
            sd_inject(&sd, 0, &c, sizeof(c), pc_first, 1);
            sd_inject(&sd, 0, &c, sizeof(c), pc_last, 1);
            sd_inject(&sd, 0, &c, sizeof(c), pc_last, 1);
            sd_inject(&sd, 0, &c, sizeof(c), pc_far, 1);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "cancel-unexpected-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* CANCEL of a medium message still arriving (decided when it is whole) */
        {
            mdr_eager_hdr_t e;
            uint8_t msg[sizeof(e) + 512];
            mdr_cancel_hdr_t c;
            const uint8_t pe[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t pe_next[] = {1, SEL(FZ_SEL_SEQ, 7)};
            memset(msg, 0x55, sizeof(msg));
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(setup | 1));
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, 24 + sizeof(e)); /* a small one for the wildcard */
            e.seq = 0;
            e.tag = 6;
            e.total = 24;
            e.offset = 0;
            e.id = 0x100000007ull;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, 24 + sizeof(e), pe, 1);
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.total = 1024;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), pe, 1);
            sd_hdr(&c.h, MDR_MSG_CANCEL, 0, sizeof(c));
            c.seq = 0;
            c.id = 0x10000000bull;
            sd_inject(&sd, 2, &c, sizeof(c), pe_next, 1);
            e.offset = 512;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 2, msg, sizeof(msg), pe_next, 1);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "cancel-arriving-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* SHORT: a whole message for the small receive (index 0); then an
         * EAGER fragment, a SHORT with its sequence number on the other
         * rail, and a SHORT that claims a synchronous ACK */
        {
            mdr_short_hdr_t sh;
            mdr_eager_hdr_t e;
            uint8_t smsg[sizeof(sh) + 40], msg[sizeof(e) + 64];
            const uint8_t pe[] = {1, SEL(FZ_SEL_SEQ, 8)};
            const uint8_t ps[] = {0x80, SEL(FZ_SEL_SEQ, 8)}; /* a SHORT's seq: h.len */
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            memset(smsg, 0x66, sizeof(smsg));
            sd_hdr(&sh.h, MDR_MSG_SHORT, 0, 0);
            sh.tag = 1;
            memcpy(smsg, &sh, sizeof(sh));
            sd_inject(&sd, 0, smsg, sizeof(smsg), ps, 1);
            sd_progress(&sd, 7);
            memset(msg, 0x11, sizeof(msg));
            sd_hdr(&e.h, MDR_MSG_EAGER, 0, sizeof(msg));
            e.seq = 0;
            e.tag = 1;
            e.total = 200;
            e.offset = 0;
            e.id = 0;
            memcpy(msg, &e, sizeof(e));
            sd_inject(&sd, 0, msg, sizeof(msg), pe, 1);
            sd_inject(&sd, 2, smsg, sizeof(smsg), ps, 1);
            sd_hdr(&sh.h, MDR_MSG_SHORT, MDR_HF_SYNC, 0);
            memcpy(smsg, &sh, sizeof(sh));
            sd_inject(&sd, 0, smsg, sizeof(smsg), ps, 1);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "short-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* CANCEL_ANS for B's synchronous send (index 3), before and after B
         * asked for its cancel, with a good and a bad answer, from A and C */
        {
            mdr_cancel_ans_hdr_t a;
            const uint8_t pt[] = {1, SEL(FZ_SEL_REQ, 3)};
            uint64_t answers[3] = {1, 0, 7};
            int k;
            for (k = 0; k < 3; k++) {
                memset(&sd, 0, sizeof(sd));
                sd_u8(&sd, setup);
                sd_hdr(&a.h, MDR_MSG_CANCEL_ANS, 0, sizeof(a));
                a.id = 0;
                a.cancelled = answers[k];
                sd_inject(&sd, 0, &a, sizeof(a), pt, 1);
                sd_u8(&sd, FZ_OP_CANCEL);
                sd_u8(&sd, 3);
                sd_inject(&sd, 0, &a, sizeof(a), pt, 1);
                sd_inject(&sd, 1, &a, sizeof(a), pt, 1);
                sd_progress(&sd, 7 | (3 << 3));
                snprintf(name, sizeof(name), "cancel-ans-%d-setup%u", k, setup);
                rc |= sd_write(dir, name, &sd);
            }
        }
        /* genuine cancels of sends: A's rendezvous send to B that B has not
         * matched (the wildcard took a small one first), B's own sends */
        {
            int k;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x00 | (1 << 2), 4);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x00 | (7 << 2), 5);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x00 | (2 << 2) | 0x40, 5);
            sd_progress(&sd, 7 | (3 << 3));
            for (k = 0; k < 10; k++) {
                sd_u8(&sd, FZ_OP_CANCEL);
                sd_u8(&sd, (uint8_t)k);
                sd_progress(&sd, 7);
            }
            sd_progress(&sd, 7 | (7 << 3));
            snprintf(name, sizeof(name), "cancel-genuine-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* genuine traffic only: every application operation, no injection */
        {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x00 | (5 << 2) | 0x40, 1);
            sd_op2(&sd, FZ_OP_RECV, 0x02 | (7 << 2), 6);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x01 | (7 << 2), 6);
            sd_op2(&sd, FZ_OP_SEND, 0x01 | (4 << 2), 2);
            sd_progress(&sd, 7 | (7 << 3));
            sd_op2(&sd, FZ_OP_PROBE, 0x82, 0);
            sd_u8(&sd, FZ_OP_CANCEL);
            sd_u8(&sd, 0);
            sd_progress(&sd, 7 | (7 << 3));
            snprintf(name, sizeof(name), "genuine-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
        /* liveness (watch.c): PINGs on both rails, one carrying a credit
         * return, more PINGs than the PONGs owed allow, a PONG nobody asked
         * for, and a PING that claims a body; traffic in between */
        {
            mdr_hdr_t h;
            uint8_t big[sizeof(h) + 8];
            int k;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, setup);
            sd_hdr(&h, MDR_MSG_PING, 0, sizeof(h));
            sd_inject(&sd, 0, &h, sizeof(h), NULL, 0);
            sd_inject(&sd, 2, &h, sizeof(h), NULL, 0);
            sd_progress(&sd, 7);
            h.credits = 1;
            sd_inject(&sd, 0, &h, sizeof(h), NULL, 0);
            h.credits = 0;
            for (k = 0; k < 4; k++)
                sd_inject(&sd, 1, &h, sizeof(h), NULL, 0);
            sd_op2(&sd, FZ_OP_PEER_SEND, 0x00 | (5 << 2), 1);
            sd_progress(&sd, 7 | (1 << 3));
            sd_hdr(&h, MDR_MSG_PONG, 0, sizeof(h));
            sd_inject(&sd, 2, &h, sizeof(h), NULL, 0);
            sd_hdr(&h, MDR_MSG_PING, 0, sizeof(big));
            memset(big, 0, sizeof(big));
            memcpy(big, &h, sizeof(h));
            sd_inject(&sd, 3, big, sizeof(big), NULL, 0);
            sd_progress(&sd, 7 | (3 << 3));
            snprintf(name, sizeof(name), "ping-pong-setup%u", setup);
            rc |= sd_write(dir, name, &sd);
        }
    }
    /* malformed headers */
    {
        mdr_hdr_t h;
        const uint8_t types[] = {0, MDR_MSG_MAX, 0xff};
        size_t k;
        for (k = 0; k < sizeof(types); k++) {
            char name[64];
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, 1);
            sd_hdr(&h, types[k], 0, sizeof(h));
            sd_inject(&sd, 0, &h, sizeof(h), NULL, 0);
            sd_hdr(&h, MDR_MSG_EAGER, 0, 3);
            sd_inject(&sd, 2, &h, sizeof(h), NULL, 0);
            sd_inject(&sd, 0, &h, 4, NULL, 0);
            snprintf(name, sizeof(name), "bad-header-%zu", k);
            rc |= sd_write(dir, name, &sd);
        }
    }
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FZ_GEN_SEEDS");

    (void)argc;
    fz_env_setup(*argv);
    if (getenv("FZ_STRICT") != NULL) {
        char *end;
        fz_strict = (unsigned)strtoul(getenv("FZ_STRICT"), &end, 0);
        if (*end != '\0' || end == getenv("FZ_STRICT"))
            fz_strict = ~0u;
    }
    fz_debug = getenv("FZ_DEBUG") != NULL && strcmp(getenv("FZ_DEBUG"), "0") != 0;
    if (dir != NULL) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "gen_seeds: %s: %s\n", dir, strerror(errno));
            exit(1);
        }
        exit(fz_core_seeds(dir) == 0 ? 0 : 1);
    }
    return 0;
}
