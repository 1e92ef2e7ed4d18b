/*
 * Fuzz target: the ucx driver's receive side (the active-message handler,
 * then what progress does with each message: HELLO with the sender's
 * worker address, the handshake's CHALLENGE, PROOF and ACK, per-connection
 * sequencing, control messages, BYE, REFUSE, key checks and answers,
 * SYNC), as a stranger or a broken peer reaching the rail's worker can
 * drive it.  A stranger cannot answer V's challenge; so that inputs reach
 * past the handshake, patch selectors put in the right proofs (V's
 * pending challenge answered with the job key, V's expected ACK), and
 * the seeds use them after each HELLO.
 *
 * The one refactor: the driver's active-message handler (mdr_ucx_am_cb)
 * is no longer static, so the harness hands it a header and data exactly
 * as the worker does (eager data; no rendezvous handle).  Two real rails
 * over UCX tcp on lo live in this process, V under test and P its peer, so
 * that a HELLO can carry a real worker address and V's answers have
 * somewhere to go.  Opening a UCX rail costs tens of milliseconds, so both
 * are opened once; each input starts without endpoints.
 *
 * The harness is V's core: its upcalls check what the driver promises
 * (control data 8-byte aligned, at most a slot, no upcall for a destroyed
 * ep) and read every byte.  V registers a window of the fixed-address
 * arena once, so key checks can name it.
 *
 * Message layouts come from ucx.h; the input format is written down once,
 * by fz_ucx_seeds() at the bottom (FZ_GEN_SEEDS=dir).
 */
#include "mdr_config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rails/common/auth.h"
#include "rails/ucx/ucx.h"
#include "util/log.h"
#include "fuzz_common.h"

FZ_DEFINE_GETRANDOM

#define FZ_V_UUID 0x1111111111111111ull
#define FZ_P_UUID 0x2222222222222222ull
#define FZ_SPEC "lo"
#define FZ_SLOT 1024u
#define FZ_REGION_OFF 4096u
#define FZ_REGION_LEN 65536u
#define FZ_MAXOPS 128
#define FZ_MAXEP 4

enum {
    FZ_S_V_FIRST = 1, /* V makes its ep to P and sends before the input */
    FZ_S_P_FIRST = 2, /* P makes its ep to V and sends (a real HELLO) before the input */
    FZ_S_REFUSE = 4,  /* V's core refuses connections */
    FZ_S_REPLY = 8    /* V's core answers each control message */
};

enum {
    FZ_OP_MSG = 0,      /* hlen(u8) header dlen(u16) data npatch(u8) {off(u16) sel(u8)}*
                         * (npatch & 8: delivered as inside progress, where an in-order
                         * control message goes up from the handler itself; npatch &
                         * 16: in the short form, to the handler of V's slot npatch >> 5
                         * among those serving a connection, else among those set) */
    FZ_OP_PROGRESS = 1, /* n(u8) */
    FZ_OP_V_SEND = 2,   /* which(u8) len(u16): V sends on one of its eps */
    FZ_OP_P_SEND = 3,   /* len(u16): P sends to V for real */
    FZ_OP_DESTROY = 4,  /* which(u8): V destroys one of its eps (or P its ep) */
    FZ_OP_V_CREATE = 5  /* V makes an ep to P */
};

/* Patch selectors (sel & 0x80: into the header instead of the data). */
enum {
    FZ_SEL_P_WADDR = 0,     /* P's worker address */
    FZ_SEL_P_WADDR_LEN = 1, /* 4 bytes */
    FZ_SEL_V_UUID = 2,      /* 8 bytes */
    FZ_SEL_P_UUID = 3,
    FZ_SEL_V_CONN = 4,      /* 4 bytes: V's connection id toward P (REFUSE, SYNC_ACK) */
    FZ_SEL_P_CONN = 5,      /* 4 bytes: P's connection id toward V */
    FZ_SEL_P_CONN16 = 6,    /* 2 bytes: its low 16 bits (the short form's header) */
    FZ_SEL_PROOF = 7,       /* 32 bytes: the PROOF mac answering V's latest challenge to
                             * P's uuid, made with the job key */
    FZ_SEL_ACK = 8,         /* 32 bytes: the ACK mac V's ep to P waits for */
    FZ_NSEL
};

struct fz_ucx;

typedef struct fz_epc {
    struct fz_ucx *s;
    mdr_ep_t *ep;
    int failed;
    int is_v;
} fz_epc_t;

typedef struct fz_ucx {
    mdr_rail_t *v, *p;
    fz_epc_t rv, rp;
    fz_epc_t vep[FZ_MAXEP];
    fz_epc_t pep;
    mdr_memh_t *region;
    uint8_t setup;
    uint64_t sum;
} fz_ucx_t;

static fz_ucx_t fz_state;
static fz_ucx_t *fz_cur;

/* ---------------- V's and P's cores ---------------- */

static void fz_ctrl_recv(void *cookie, const void *data, size_t len)
{
    fz_epc_t *c = cookie;
    fz_ucx_t *s = c->s;
    const uint8_t *p = data;
    size_t i;

    if (s != fz_cur || c->ep == NULL) {
        fprintf(stderr, "fuzz: control message for a destroyed endpoint\n");
        __builtin_trap();
    }
    if (((uintptr_t)data & 7) != 0 || len > FZ_SLOT) {
        fprintf(stderr, "fuzz: control message of %zu bytes at %p (slot %u, must be 8-byte "
                "aligned)\n", len, data, FZ_SLOT);
        __builtin_trap();
    }
    for (i = 0; i < len; i++)
        s->sum = s->sum * 31 + p[i];
    if (c->is_v && (s->setup & FZ_S_REPLY) && !c->failed) {
        struct iovec iov = {(void *)data, len < 64 ? len : 64};
        (void)mdr_ucx_ops.ctrl_send(c->ep, &iov, 1);
    }
}

static void *fz_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    fz_epc_t *rc = rail_cookie;
    fz_ucx_t *s = rc->s;
    int i;

    (void)uuid;
    if (s != fz_cur)
        return NULL; /* between inputs */
    if (!rc->is_v) {
        if (s->pep.ep != NULL)
            return NULL;
        s->pep.ep = ep;
        s->pep.failed = 0;
        return &s->pep;
    }
    if (s->setup & FZ_S_REFUSE)
        return NULL;
    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep == NULL) {
            s->vep[i].ep = ep;
            s->vep[i].failed = 0;
            return &s->vep[i];
        }
    return NULL;
}

static void fz_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    fz_epc_t *c = cookie;

    (void)status;
    if (c->ep == NULL) {
        fprintf(stderr, "fuzz: failure reported for a destroyed endpoint: %s\n", reason);
        __builtin_trap();
    }
    c->failed = 1;
}

static const mdr_rail_upcalls_t fz_upcalls = {fz_ctrl_recv, fz_ep_accepted, fz_ep_failed};

/* ---------------- harness ---------------- */

static mdr_rail_t *fz_rail_open(uint64_t uuid, void *cookie)
{
    const char *ov[] = {NULL};
    mdr_rail_params_t prm;
    mdr_rail_t *rail = NULL;

    memset(&prm, 0, sizeof(prm));
    prm.uuid = uuid;
    prm.upcalls = &fz_upcalls;
    prm.rail_cookie = cookie;
    prm.slot_size = FZ_SLOT;
    prm.slots = 8;
    prm.overrides = ov;
    prm.job_key = fz_job_key;
    if (mdr_ucx_ops.open(FZ_SPEC, &prm, &rail) != MADRAIL_OK)
        return NULL;
    return rail;
}

static void fz_progress(fz_ucx_t *s, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        mdr_ucx_ops.progress(s->v);
        mdr_ucx_ops.progress(s->p);
    }
}

static void fz_v_create(fz_ucx_t *s)
{
    int i;

    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep == NULL) {
            if (mdr_ucx_ops.ep_create(s->v, FZ_P_UUID, s->p->addr, MDR_UCX_ADDR_LEN, &s->vep[i],
                                      &s->vep[i].ep) != MADRAIL_OK)
                s->vep[i].ep = NULL;
            return;
        }
}

static void fz_send(fz_epc_t *c, size_t len)
{
    uint8_t buf[FZ_SLOT];
    struct iovec iov = {buf, len % (FZ_SLOT + 1)};

    if (c->ep == NULL || c->failed)
        return;
    memset(buf, 0x55, iov.iov_len);
    (void)mdr_ucx_ops.ctrl_send(c->ep, &iov, 1);
}

static uint32_t fz_conn(fz_ucx_t *s, int v)
{
    int i;

    if (!v)
        return s->pep.ep != NULL ? s->pep.ep->tx_conn : 0;
    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL && s->vep[i].ep->base.uuid == FZ_P_UUID)
            return s->vep[i].ep->tx_conn;
    return 0;
}

/* V's short-form slot k among those serving a connection, else among
 * those whose handler is set; NULL when there is none. */
static mdr_ucx_short_slot_t *fz_slot(fz_ucx_t *s, unsigned k)
{
    mdr_ucx_short_slot_t *sl = s->v->short_slots;
    unsigned i, nuse = 0, nreg = 0;

    if (sl == NULL)
        return NULL;
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++) {
        nuse += sl[i].ep != NULL;
        nreg += sl[i].registered;
    }
    if (nreg == 0)
        return NULL;
    k %= nuse ? nuse : nreg;
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++)
        if ((nuse ? sl[i].ep != NULL : sl[i].registered) && k-- == 0)
            return &sl[i];
    return NULL;
}

/* The initiator's proof for V's latest pending challenge to P's uuid
 * (zeros when there is none), as P would make it (ucx_ep.c). */
static void fz_proof(fz_ucx_t *s, uint8_t mac[MDR_AUTH_MAC_LEN])
{
    const mdr_ucx_pending_t *p = NULL;
    uint8_t rid[2 * MDR_UCX_ADDR_LEN];
    mdr_auth_transcript_t t;
    unsigned i;

    memset(mac, 0, MDR_AUTH_MAC_LEN);
    for (i = 0; i < MDR_UCX_PENDING_MAX; i++)
        if (s->v->pending[i].used && s->v->pending[i].uuid == FZ_P_UUID &&
            (p == NULL || s->v->pending[i].deadline >= p->deadline))
            p = &s->v->pending[i];
    if (p == NULL)
        return;
    memcpy(rid, s->v->addr + MDR_UCX_ADDR_HDR, s->v->waddr_len);
    memcpy(rid + s->v->waddr_len, p->waddr, p->waddr_len);
    t.driver = "ucx";
    t.uuid_i = FZ_P_UUID;
    t.uuid_a = FZ_V_UUID;
    t.nonce_i = p->nonce_i;
    t.nonce_a = p->nonce_a;
    t.rail_id = rid;
    t.rail_id_len = s->v->waddr_len + p->waddr_len;
    mdr_auth_mac(mac, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
}

static void fz_ack(fz_ucx_t *s, uint8_t mac[MDR_AUTH_MAC_LEN])
{
    int i;

    memset(mac, 0, MDR_AUTH_MAC_LEN);
    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL && s->vep[i].ep->base.uuid == FZ_P_UUID &&
            s->vep[i].ep->hs == MDR_UCX_HS_PROOF) {
            memcpy(mac, s->vep[i].ep->mac_a_want, MDR_AUTH_MAC_LEN);
            return;
        }
}

static void fz_msg(fz_ucx_t *s, fz_in_t *in)
{
    static uint64_t data[65536 / 8];
    uint8_t hdr[64];
    size_t hlen = fz_u8(in) % sizeof(hdr);
    size_t dlen;
    unsigned npatch, k, in_worker, short_form, slot_k;
    ucp_am_recv_param_t prm;

    fz_bytes(in, hdr, hlen);
    dlen = fz_u16(in);
    fz_bytes(in, data, dlen);
    npatch = fz_u8(in);
    in_worker = (npatch & 8) != 0;
    short_form = (npatch & 16) != 0;
    slot_k = npatch >> 5;
    npatch &= 7;
    for (k = 0; k < npatch; k++) {
        uint16_t off = fz_u16(in);
        uint8_t sel = fz_u8(in);
        uint8_t *dst = (sel & 0x80) ? hdr : (uint8_t *)data;
        size_t cap = (sel & 0x80) ? hlen : dlen;
        uint64_t v64 = 0;
        uint32_t v32;
        uint8_t mac[MDR_AUTH_MAC_LEN];
        const void *src = &v64;
        size_t n = 8;
        switch ((sel & 0x7f) % FZ_NSEL) {
        case FZ_SEL_P_WADDR: src = s->p->addr + MDR_UCX_ADDR_HDR; n = s->p->waddr_len; break;
        case FZ_SEL_P_WADDR_LEN: v32 = (uint32_t)s->p->waddr_len; src = &v32; n = 4; break;
        case FZ_SEL_V_UUID: v64 = FZ_V_UUID; break;
        case FZ_SEL_P_UUID: v64 = FZ_P_UUID; break;
        case FZ_SEL_V_CONN: v32 = fz_conn(s, 1); src = &v32; n = 4; break;
        case FZ_SEL_P_CONN16: v32 = fz_conn(s, 0); src = &v32; n = 2; break;
        case FZ_SEL_PROOF: fz_proof(s, mac); src = mac; n = sizeof(mac); break;
        case FZ_SEL_ACK: fz_ack(s, mac); src = mac; n = sizeof(mac); break;
        default: v32 = fz_conn(s, 0); src = &v32; n = 4; break;
        }
        if ((size_t)off + n <= cap)
            memcpy(dst + off, src, n);
    }
    memset(&prm, 0, sizeof(prm)); /* eager: no rendezvous flag, no reply ep */
    /* as from V's progress (its worker's progress runs the handler) or not */
    s->v->in_worker = (int)in_worker;
    s->v->base.in_progress = (int)in_worker;
    if (!short_form) {
        (void)mdr_ucx_am_cb(s->v, hdr, hlen, data, dlen, &prm);
    } else {
        /* as UCX would: only to an id whose handler is set */
        mdr_ucx_short_slot_t *slot = fz_slot(s, slot_k);
        if (slot != NULL)
            (void)mdr_ucx_short_cb(slot, hdr, hlen, data, dlen, &prm);
    }
    s->v->in_worker = 0;
    s->v->base.in_progress = 0;
    if (!mdr_list_empty(&s->v->close_later))
        mdr_ucx_close_later(s->v);
}

static void fz_reset(fz_ucx_t *s)
{
    int i;

    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL) {
            mdr_ucx_ops.ep_destroy(s->vep[i].ep);
            s->vep[i].ep = NULL;
        }
    if (s->pep.ep != NULL) {
        mdr_ucx_ops.ep_destroy(s->pep.ep);
        s->pep.ep = NULL;
    }
    fz_progress(s, 8);
}

static void fz_ucx_run(const uint8_t *d, size_t size)
{
    fz_in_t in = {d, size};
    fz_ucx_t *s = &fz_state;
    int nops = 0, i;

    if (s->v == NULL) {
        uint8_t *arena = fz_arena();
        s->rv.s = s->rp.s = s->pep.s = s;
        s->rv.is_v = 1;
        for (i = 0; i < FZ_MAXEP; i++) {
            s->vep[i].s = s;
            s->vep[i].is_v = 1;
        }
        s->v = fz_rail_open(FZ_V_UUID, &s->rv);
        s->p = fz_rail_open(FZ_P_UUID, &s->rp);
        if (s->v == NULL || s->p == NULL) {
            fprintf(stderr, "fuzz: cannot open ucx rails on %s\n", FZ_SPEC);
            exit(1);
        }
        if (arena != NULL &&
            mdr_ucx_ops.mem_reg(s->v, arena + FZ_REGION_OFF, FZ_REGION_LEN,
                                MDR_MEM_LOCAL | MDR_MEM_REMOTE_WRITE, &s->region) != MADRAIL_OK)
            s->region = NULL;
    }
    fz_cur = s;
    fz_rand_reset();
    s->setup = fz_u8(&in);
    s->sum = 0;
    if (s->setup & FZ_S_V_FIRST) {
        fz_v_create(s);
        fz_send(&s->vep[0], 16);
        fz_progress(s, 4);
    }
    if (s->setup & FZ_S_P_FIRST) {
        if (s->pep.ep == NULL &&
            mdr_ucx_ops.ep_create(s->p, FZ_V_UUID, s->v->addr, MDR_UCX_ADDR_LEN, &s->pep,
                                  &s->pep.ep) != MADRAIL_OK)
            s->pep.ep = NULL;
        fz_send(&s->pep, 24);
        fz_progress(s, 4);
    }

    while (fz_left(&in) > 0 && nops++ < FZ_MAXOPS) {
        uint8_t op = fz_u8(&in);
        switch (op % 6) {
        case FZ_OP_MSG:
            fz_msg(s, &in);
            fz_progress(s, 1);
            break;
        case FZ_OP_PROGRESS:
            fz_progress(s, 1 + (fz_u8(&in) & 7));
            break;
        case FZ_OP_V_SEND: {
            uint8_t which = fz_u8(&in);
            fz_send(&s->vep[which % FZ_MAXEP], fz_u16(&in));
            break;
        }
        case FZ_OP_P_SEND:
            fz_send(&s->pep, fz_u16(&in));
            fz_progress(s, 2);
            break;
        case FZ_OP_DESTROY: {
            uint8_t which = fz_u8(&in) % (FZ_MAXEP + 1);
            fz_epc_t *c = which < FZ_MAXEP ? &s->vep[which] : &s->pep;
            if (c->ep != NULL) {
                mdr_ucx_ops.ep_destroy(c->ep);
                c->ep = NULL;
            }
            break;
        }
        default:
            fz_v_create(s);
            break;
        }
    }
    fz_progress(s, 2);
    fz_reset(s);
    fz_cur = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_ucx_run(data, size);
    return 0;
}

/* ---------------- the seed corpus ---------------- */

typedef struct fz_seed {
    uint8_t buf[16384];
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

typedef struct sd_patch {
    uint16_t off;
    uint8_t sel;
} sd_patch_t;

/* 8: the seed's messages are delivered as from inside progress */
static uint8_t sd_npatch_flags;

static void sd_msg(fz_seed_t *sd, uint8_t type, uint16_t flags, uint32_t conn, uint32_t seq,
                   uint32_t aux, const void *body, size_t blen, const sd_patch_t *pt,
                   unsigned npt)
{
    mdr_ucx_hdr_t h;
    unsigned k;

    memset(&h, 0, sizeof(h));
    h.type = type;
    h.version = MDR_UCX_VERSION;
    h.flags = flags;
    h.conn = conn;
    h.seq = seq;
    h.aux = aux;
    h.uuid = FZ_P_UUID;
    sd_u8(sd, FZ_OP_MSG);
    sd_u8(sd, sizeof(h));
    sd_put(sd, &h, sizeof(h));
    sd_u16(sd, (uint16_t)blen);
    sd_put(sd, body, blen);
    sd_u8(sd, (uint8_t)(npt | sd_npatch_flags));
    for (k = 0; k < npt; k++) {
        sd_u16(sd, pt[k].off);
        sd_u8(sd, pt[k].sel);
    }
}

static int sd_save(const char *dir, const char *name, const fz_seed_t *sd)
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

/* A short-form message (ucx.h) of hlen header bytes to V's slot k, its
 * connection bits P's when patch_conn (else 0x7777). */
static void sd_short(fz_seed_t *sd, unsigned hlen, uint16_t seq, const void *body, size_t blen,
                     int patch_conn, unsigned k)
{
    uint8_t h[8] = {0};
    mdr_ucx_short_hdr_t sh;

    sh.seq = seq;
    sh.conn = 0x7777;
    memcpy(h, &sh, sizeof(sh));
    sd_u8(sd, FZ_OP_MSG);
    sd_u8(sd, (uint8_t)hlen);
    sd_put(sd, h, hlen);
    sd_u16(sd, (uint16_t)blen);
    sd_put(sd, body, blen);
    sd_u8(sd, (uint8_t)((patch_conn ? 1 : 0) | 16 | (k << 5) | sd_npatch_flags));
    if (patch_conn) {
        sd_u16(sd, offsetof(mdr_ucx_short_hdr_t, conn));
        sd_u8(sd, 0x80 | FZ_SEL_P_CONN16);
    }
}

/* The HELLO of connection conn: target and P's worker address (patched). */
static void sd_hello(fz_seed_t *sd, uint32_t conn, uint64_t target, uint32_t seq, int addr)
{
    uint8_t b[sizeof(mdr_ucx_hello_t) + MDR_UCX_ADDR_LEN];
    mdr_ucx_hello_t h;
    const sd_patch_t pt[] = {{8, FZ_SEL_P_WADDR_LEN},
                             {sizeof(mdr_ucx_hello_t), FZ_SEL_P_WADDR}};

    memset(&h, 0, sizeof(h));
    h.target = target;
    memset(h.nonce, 0x6e, sizeof(h.nonce));
    h.addr_len = 16; /* replaced by the real length when patched */
    memcpy(b, &h, sizeof(h));
    memset(b + sizeof(h), 0x5a, sizeof(b) - sizeof(h)); /* not a worker address */
    sd_msg(sd, MDR_UCX_M_HELLO, 0, conn, seq, 0, b, sizeof(b), pt, addr ? 2 : 0);
}

/* The PROOF of connection conn, its mac patched in to answer V's challenge
 * (good) or left as zeros; cont zeros (no session yet). */
static void sd_proof(fz_seed_t *sd, uint32_t conn, int good)
{
    mdr_ucx_proof_t pr;
    const sd_patch_t pt[] = {{offsetof(mdr_ucx_proof_t, mac), FZ_SEL_PROOF}};

    memset(&pr, 0, sizeof(pr));
    sd_msg(sd, MDR_UCX_M_PROOF, 0, conn, 0, 0, &pr, sizeof(pr), pt, good ? 1 : 0);
}

/* A HELLO as P, and a PROOF that answers V's challenge. */
static void sd_connect(fz_seed_t *sd, uint32_t conn)
{
    sd_hello(sd, conn, FZ_V_UUID, 0, 1);
    sd_proof(sd, conn, 1);
}

static int fz_ucx_seeds(const char *dir)
{
    const uint64_t base = FZ_ARENA_ADDR + FZ_REGION_OFF;
    uint8_t ctl[FZ_SLOT + 8];
    fz_seed_t sd;
    int rc = 0, k;

    memset(ctl, 0x43, sizeof(ctl));

    /* a HELLO with P's worker address, control messages in and out of order
     * (the last seed: delivered as inside progress, in order ones going up
     * from the handler) */
    for (k = 0; k < 5; k++) {
        static const uint8_t setups[5] = {0, FZ_S_V_FIRST, FZ_S_REPLY, FZ_S_REFUSE, 0};
        static const char *const names[5] = {"hello-ctrl", "hello-joins-ep", "hello-reply",
                                             "hello-refused", "hello-ctrl-direct"};
        memset(&sd, 0, sizeof(sd));
        sd_npatch_flags = k == 4 ? 8 : 0;
        sd_u8(&sd, setups[k]);
        sd_connect(&sd, 7);
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 7, 1, 0, ctl, 16, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 7, 3, 0, ctl, 1, NULL, 0);  /* early */
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 7, 2, 0, ctl, FZ_SLOT, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 7, 2, 0, ctl, 8, NULL, 0);  /* duplicate */
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 7, 4, 0, ctl, FZ_SLOT + 1, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 8, 5, 0, ctl, 8, NULL, 0);  /* other connection */
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, names[k], &sd);
    }
    sd_npatch_flags = 0;
    /* HELLOs that must be refused or dropped: another target, our uuid, a
     * worker address that is not one, sequence not 0, connection 0 */
    {
        struct {
            uint64_t target;
            uint32_t conn, seq;
            int addr;
            const char *name;
        } h[] = {
            {FZ_P_UUID, 7, 0, 1, "hello-wrong-target"},
            {FZ_P_UUID, 7, 0, 0, "hello-wrong-target-junk-address"},
            {FZ_V_UUID, 7, 0, 0, "hello-junk-address"},
            {FZ_V_UUID, 7, 1, 1, "hello-seq-1"},
            {FZ_V_UUID, 0, 0, 1, "hello-conn-0"},
        };
        for (k = 0; k < (int)(sizeof(h) / sizeof(h[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, 0);
            sd_hello(&sd, h[k].conn, h[k].target, h[k].seq, h[k].addr);
            sd_proof(&sd, h[k].conn, 1);
            sd_msg(&sd, MDR_UCX_M_CTRL, 0, h[k].conn, 1, 0, ctl, 24, NULL, 0);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 2);
            rc |= sd_save(dir, h[k].name, &sd);
        }
    }
    /* the handshake: a PROOF that does not answer the challenge, one for no
     * HELLO, one of the wrong size, the right one twice; a CHALLENGE and
     * an ACK for V's own connection to P (good, wrong, for another
     * connection), with V's first send to P before them */
    {
        const sd_patch_t vaux[] = {{offsetof(mdr_ucx_hdr_t, aux), 0x80 | FZ_SEL_V_CONN}};
        const sd_patch_t vack[] = {{offsetof(mdr_ucx_hdr_t, aux), 0x80 | FZ_SEL_V_CONN},
                                   {0, FZ_SEL_ACK}};
        uint8_t nonce[16], mac[32];
        memset(nonce, 0x33, sizeof(nonce));
        memset(mac, 0, sizeof(mac));
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        sd_hello(&sd, 21, FZ_V_UUID, 0, 1);
        sd_proof(&sd, 21, 0);                   /* wrong mac */
        sd_proof(&sd, 22, 1);                   /* no HELLO */
        sd_hello(&sd, 23, FZ_V_UUID, 0, 1);
        sd_msg(&sd, MDR_UCX_M_PROOF, 0, 23, 0, 0, mac, 31, NULL, 0); /* short */
        sd_connect(&sd, 24);
        sd_proof(&sd, 24, 1);                   /* again */
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 24, 1, 0, ctl, 16, NULL, 0);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, "handshake-proofs", &sd);
        for (k = 0; k < 3; k++) {
            static const char *const names[3] = {"handshake-challenge-ack",
                                                 "handshake-ack-wrong", "handshake-ack-other"};
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_V_FIRST);
            sd_msg(&sd, MDR_UCX_M_CHALLENGE, 0, 31, 0, 0, nonce, sizeof(nonce), vaux, 1);
            if (k == 0)
                sd_msg(&sd, MDR_UCX_M_ACK, 0, 31, 0, 0, mac, sizeof(mac), vack, 2);
            else if (k == 1)
                sd_msg(&sd, MDR_UCX_M_ACK, 0, 31, 0, 0, mac, sizeof(mac), vaux, 1);
            else
                sd_msg(&sd, MDR_UCX_M_ACK, 0, 31, 0, 5, mac, sizeof(mac), NULL, 0);
            sd_msg(&sd, MDR_UCX_M_CTRL, 0, 31, 1, 0, ctl, 16, NULL, 0);
            sd_u8(&sd, FZ_OP_V_SEND);
            sd_u8(&sd, 0);
            sd_u16(&sd, 30);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 3);
            rc |= sd_save(dir, names[k], &sd);
        }
    }
    /* headers: short, long, another version; unknown types; SYNC flags */
    {
        mdr_ucx_hdr_t bad;
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        sd_connect(&sd, 9);
        memset(&bad, 0, sizeof(bad));
        bad.type = MDR_UCX_M_CTRL;
        bad.version = MDR_UCX_VERSION;
        bad.conn = 9;
        bad.seq = 1;
        bad.uuid = FZ_P_UUID;
        sd_u8(&sd, FZ_OP_MSG);
        sd_u8(&sd, sizeof(bad) - 4);
        sd_put(&sd, &bad, sizeof(bad) - 4);
        sd_u16(&sd, 8);
        sd_put(&sd, ctl, 8);
        sd_u8(&sd, 0);
        sd_msg(&sd, MDR_UCX_M_CTRL, 0, 9, 1, 0, ctl, 8, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_MAX, 0, 9, 2, 0, ctl, 8, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_SYNC, MDR_UCX_HF_SYNC, 9, 3, 77, NULL, 0, NULL, 0);
        sd_msg(&sd, MDR_UCX_M_SYNC_ACK, 0, 9, 4, 0, ctl, 4, NULL, 0);
        rc |= sd_save(dir, "headers", &sd);
    }
    /* key checks against V's registered window: inside, outside, wrong region */
    {
        struct {
            uint32_t id, gen;
            uint64_t b, l, raddr, count;
            const char *name;
        } c[] = {
            {0, 0, base, FZ_REGION_LEN, base + 16, 100, "key-check-ok"},
            {0, 0, base, FZ_REGION_LEN, base + FZ_REGION_LEN - 4, 8, "key-check-past-end"},
            {0, 0, base, 8, base, 4, "key-check-wrong-region"},
            {0, 1, base, FZ_REGION_LEN, base, 4, "key-check-stale"},
            {77, 0, base, FZ_REGION_LEN, base, 4, "key-check-unknown"},
        };
        for (k = 0; k < (int)(sizeof(c) / sizeof(c[0])); k++) {
            mdr_ucx_check_t kc;
            mdr_ucx_answer_t a;
            mdr_ucx_revoke_t rv;
            memset(&kc, 0, sizeof(kc));
            kc.check_id = 5;
            kc.id = c[k].id;
            kc.gen = c[k].gen;
            kc.base = c[k].b;
            kc.len = c[k].l;
            kc.raddr = c[k].raddr;
            kc.count = c[k].count;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_V_FIRST);
            sd_connect(&sd, 11);
            sd_msg(&sd, MDR_UCX_M_KEY_CHECK, 0, 11, 1, 0, &kc, sizeof(kc), NULL, 0);
            memset(&a, 0, sizeof(a));
            a.check_id = 5;
            sd_msg(&sd, MDR_UCX_M_KEY_OK, 0, 11, 2, 0, &a, sizeof(a), NULL, 0);
            memset(&rv, 0, sizeof(rv));
            sd_msg(&sd, MDR_UCX_M_KEY_REVOKE, 0, 11, 3, 0, &rv, sizeof(rv), NULL, 0);
            sd_msg(&sd, MDR_UCX_M_KEY_BAD, 0, 11, 4, 0, ctl, sizeof(a) + 40, NULL, 0);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 3);
            rc |= sd_save(dir, c[k].name, &sd);
        }
    }
    /* BYE and REFUSE for V's own connection to P */
    {
        const sd_patch_t aux[] = {{offsetof(mdr_ucx_hdr_t, aux), 0x80 | FZ_SEL_V_CONN}};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_V_FIRST);
        sd_msg(&sd, MDR_UCX_M_REFUSE, 0, 0, 0, 0, NULL, 0, aux, 1);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 30);
        rc |= sd_save(dir, "refuse", &sd);
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_V_FIRST | FZ_S_P_FIRST);
        sd_u8(&sd, FZ_OP_P_SEND);
        sd_u16(&sd, 20);
        sd_msg(&sd, MDR_UCX_M_BYE, 0, 0, 2, 0, "bye", 3, NULL, 0);
        {
            const sd_patch_t conn[] = {{offsetof(mdr_ucx_hdr_t, conn), 0x80 | FZ_SEL_P_CONN}};
            /* the same BYE on P's connection (its sequence 2 or 3) */
            sd_msg(&sd, MDR_UCX_M_BYE, 0, 0, 2, 0, "bye", 3, conn, 1);
            sd_msg(&sd, MDR_UCX_M_BYE, 0, 0, 3, 0, ctl, 200, conn, 1);
        }
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 30);
        rc |= sd_save(dir, "bye", &sd);
    }
    /* the short form: P connected for real (V gave its connection a slot);
     * messages to that slot in and out of order, a duplicate, one of
     * another connection, a bad header length; SHORT_IDs on P's connection
     * for V's own: good, bad id, bad length; one past a slot (the last
     * seed: delivered as inside progress) */
    for (k = 0; k < 2; k++) {
        const sd_patch_t vconn[] = {{0, FZ_SEL_V_CONN},
                                    {offsetof(mdr_ucx_hdr_t, conn), 0x80 | FZ_SEL_P_CONN}};
        mdr_ucx_short_id_t id;
        memset(&sd, 0, sizeof(sd));
        sd_npatch_flags = k == 1 ? 8 : 0;
        sd_u8(&sd, FZ_S_P_FIRST | FZ_S_V_FIRST | (k == 1 ? FZ_S_REPLY : 0));
        sd_short(&sd, 4, 2, ctl, 16, 1, 0);
        sd_short(&sd, 4, 4, ctl, 8, 1, 0); /* early */
        sd_short(&sd, 4, 3, ctl, 24, 1, 0);
        sd_short(&sd, 4, 3, ctl, 8, 1, 0); /* duplicate */
        sd_short(&sd, 4, 5, ctl, 8, 0, 0); /* another connection */
        sd_short(&sd, 6, 5, ctl, 8, 1, 0); /* header of 6 bytes */
        id.conn = 0;
        id.am_id = MDR_UCX_AM_SHORT_BASE + 3;
        sd_msg(&sd, MDR_UCX_M_SHORT_ID, 0, 9, 5, 0, &id, sizeof(id), vconn, 2);
        sd_short(&sd, 4, 6, ctl, 8, 1, 0);
        id.am_id = 3;
        sd_msg(&sd, MDR_UCX_M_SHORT_ID, 0, 9, 7, 0, &id, sizeof(id), vconn, 2);
        sd_msg(&sd, MDR_UCX_M_SHORT_ID, 0, 9, 8, 0, &id, 5, vconn, 2);
        sd_short(&sd, 4, 9, ctl, FZ_SLOT + 1, 1, 0);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 30);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, k == 0 ? "short-form" : "short-form-direct", &sd);
    }
    sd_npatch_flags = 0;
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FZ_GEN_SEEDS");

    (void)argc;
    fz_env_setup(*argv);
    /* the driver alone: no context reads MADRAIL_LOG_LEVEL (default: errors) */
    mdr_log_set_level(getenv("MADRAIL_LOG_LEVEL") != NULL
                          ? mdr_log_level_parse(getenv("MADRAIL_LOG_LEVEL"))
                          : MDR_LOG_ERROR);
    if (dir != NULL) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "gen_seeds: %s: %s\n", dir, strerror(errno));
            exit(1);
        }
        exit(fz_ucx_seeds(dir) == 0 ? 0 : 1);
    }
    return 0;
}
