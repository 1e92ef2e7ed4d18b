/*
 * Fuzz target: the ofi driver's receive handler (mdr_ofi_recv_msg: the
 * header, the handshake (HELLO with the sender's address, CHALLENGE,
 * PROOF, HELLO_ACK), BYE, control messages), as a
 * stranger or a broken peer on the same fabric can drive it.
 *
 * No refactor of the driver was needed: mdr_ofi_recv_msg() already takes
 * one received message as a byte buffer, exactly as the completion queue
 * hands it over.  Two real rails (tcp;ofi_rxm over lo) live in this
 * process, V under test and P its peer, so that a HELLO can carry a real
 * address (fi_av_insert must succeed to get further) and V's answers and
 * sends have somewhere to go.  The input is a setup byte and operations:
 * inject a message into V (aligned as the provider delivers it, or not),
 * with patches that write values the input cannot know (P's packed
 * address, the uuids, the endpoints' incarnation numbers), run progress,
 * make V send, make P send for real, destroy endpoints.
 *
 * The harness is V's core: its upcalls check what the driver promises
 * (control data 8-byte aligned, at most a slot, no upcall for a destroyed
 * ep) and read every byte.
 *
 * The handshake's proofs (ofi.h) are patches too: the right mac for the
 * nonces V holds at that moment, computed here with the job key, so the
 * fuzzer gets past the PROOF and the HELLO_ACK to everything behind them.
 *
 * Message layouts come from ofi.h; the input format is written down once,
 * by fz_ofi_seeds() at the bottom (FZ_GEN_SEEDS=dir).
 */
#include "mdr_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rails/ofi/ofi.h"
#include "util/log.h"
#include "fuzz_common.h"

FZ_DEFINE_GETRANDOM

#define FZ_V_UUID 0x1111111111111111ull
#define FZ_P_UUID 0x2222222222222222ull
#define FZ_SPEC "tcp;ofi_rxm:lo"
#define FZ_SLOT 1024u
#define FZ_MAXOPS 128
#define FZ_MAXEP 4

enum {
    FZ_S_V_FIRST = 1, /* V makes its ep to P (and sends) before the input */
    FZ_S_P_FIRST = 2, /* P makes its ep to V and sends (a real HELLO) before the input */
    FZ_S_REFUSE = 4,  /* V's core refuses connections */
    FZ_S_REPLY = 8    /* V's core answers each control message */
};

enum {
    FZ_OP_MSG = 0,      /* align(u8) len(u16) bytes npatch(u8) {off(u16) sel(u8)}*
                         * [cq data(u64) when npatch & 8]: npatch & 8 delivers it in the
                         * short form with that CQ data (npatch & 16: its slot and
                         * incarnation bits made V's ep to P's and P's) */
    FZ_OP_PROGRESS = 1, /* n(u8) */
    FZ_OP_V_SEND = 2,   /* which(u8) len(u16): V sends on one of its eps */
    FZ_OP_P_SEND = 3,   /* len(u16): P sends to V for real */
    FZ_OP_DESTROY = 4,  /* which(u8): V destroys one of its eps (or P its ep) */
    FZ_OP_V_CREATE = 5  /* V makes an ep to P */
};

/* Patch selectors: what goes at the offset. */
enum {
    FZ_SEL_P_ADDR = 0, /* P's packed address (attr.addr_len bytes) */
    FZ_SEL_V_UUID = 1, /* 8 bytes */
    FZ_SEL_P_UUID = 2,
    FZ_SEL_V_EPID = 3, /* 4 bytes: V's incarnation number of its ep to P */
    FZ_SEL_P_EPID = 4, /* 4 bytes: P's incarnation number of its ep to V */
    FZ_SEL_ADDR_LEN = 5, /* 4 bytes: P's packed address length */
    FZ_SEL_PROOF = 6,    /* 32 bytes: the right mac_i for V's newest pending handshake of P */
    FZ_SEL_CONT = 7,     /* 32 bytes: continuity with the session V keeps with P */
    FZ_SEL_ACK = 8,      /* 32 bytes: the right mac_a for V's ep to P waiting for the ack */
    FZ_SEL_V_NONCE = 9,  /* 16 bytes: the nonce of V's HELLO (a CHALLENGE echoes it) */
    FZ_NSEL
};

struct fz_ofi;

typedef struct fz_epc {
    struct fz_ofi *s;
    mdr_ep_t *ep;
    int failed;
    int is_v;
} fz_epc_t;

typedef struct fz_ofi {
    mdr_rail_t *v, *p;
    mdr_rail_attr_t pattr;
    uint8_t paddr[256];
    fz_epc_t rv, rp;         /* rail cookies */
    fz_epc_t vep[FZ_MAXEP];  /* V's eps (created or accepted) */
    fz_epc_t pep;            /* P's ep to V */
    uint8_t setup;
    uint64_t sum;
} fz_ofi_t;

static fz_ofi_t *fz_cur;

/* ---------------- the handshake's proofs ---------------- */

static mdr_ep_t *fz_vep_to_p(fz_ofi_t *s);

/* The 32 or 16 bytes a proof selector stands for, at that moment (zeros
 * when V holds nothing it could be checked against). */
static size_t fz_proof_patch(fz_ofi_t *s, uint8_t sel, uint8_t *out)
{
    mdr_auth_transcript_t t;
    mdr_ofi_pend_t *e = NULL;
    mdr_ofi_peer_t *peer;
    mdr_ep_t *ep;
    unsigned k;

    memset(out, 0, MDR_AUTH_MAC_LEN);
    t.driver = "ofi";
    switch (sel) {
    case FZ_SEL_PROOF:
    case FZ_SEL_CONT:
        for (k = 0; k < MDR_OFI_PEND_MAX; k++)
            if (s->v->pend[k].used && s->v->pend[k].uuid == FZ_P_UUID &&
                (e == NULL || s->v->pend[k].since >= e->since))
                e = &s->v->pend[k];
        if (e == NULL)
            return MDR_AUTH_MAC_LEN;
        t.uuid_i = FZ_P_UUID;
        t.uuid_a = FZ_V_UUID;
        t.nonce_i = e->nonce_i;
        t.nonce_a = e->nonce_a;
        t.rail_id = s->v->name_buf;
        t.rail_id_len = s->v->name_len;
        if (sel == FZ_SEL_PROOF) {
            mdr_auth_mac(out, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
        } else {
            peer = mdr_hash_get(&s->v->peers, FZ_P_UUID);
            if (peer != NULL && peer->has_sess[peer->newest])
                mdr_auth_mac(out, peer->sess[peer->newest], MDR_AUTH_MAC_LEN,
                             MDR_AUTH_CONTINUITY, &t);
        }
        return MDR_AUTH_MAC_LEN;
    case FZ_SEL_ACK:
        ep = fz_vep_to_p(s);
        if (ep == NULL)
            return MDR_AUTH_MAC_LEN;
        t.uuid_i = FZ_V_UUID;
        t.uuid_a = FZ_P_UUID;
        t.nonce_i = ep->nonce_i;
        t.nonce_a = ep->nonce_a;
        t.rail_id = ep->peer->name;
        t.rail_id_len = ep->peer->name_len;
        mdr_auth_mac(out, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
        return MDR_AUTH_MAC_LEN;
    default:
        ep = fz_vep_to_p(s);
        if (ep != NULL)
            memcpy(out, ep->nonce_i, MDR_AUTH_NONCE_LEN);
        return MDR_AUTH_NONCE_LEN;
    }
}

/* ---------------- V's and P's cores ---------------- */

static void fz_ctrl_recv(void *cookie, const void *data, size_t len)
{
    fz_epc_t *c = cookie;
    fz_ofi_t *s = c->s;
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
        (void)mdr_ofi_ops.ctrl_send(c->ep, &iov, 1);
    }
}

static void *fz_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    fz_epc_t *rc = rail_cookie;
    fz_ofi_t *s = rc->s;
    int i;

    (void)uuid;
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
    if (c->s != fz_cur || c->ep == NULL) {
        fprintf(stderr, "fuzz: failure reported for a destroyed endpoint: %s\n", reason);
        __builtin_trap();
    }
    c->failed = 1;
}

static const mdr_rail_upcalls_t fz_upcalls = {fz_ctrl_recv, fz_ep_accepted, fz_ep_failed};

/* ---------------- harness ---------------- */

static mdr_rail_t *fz_rail_open(uint64_t uuid, void *cookie)
{
    const char *ov[] = {"MADRAIL_OFI_RX_BUFS=4", "MADRAIL_OFI_RX_BUF_SIZE=64k", NULL};
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
    if (mdr_ofi_ops.open(FZ_SPEC, &prm, &rail) != MADRAIL_OK)
        return NULL;
    return rail;
}

static void fz_progress(fz_ofi_t *s, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        mdr_ofi_ops.progress(s->v);
        mdr_ofi_ops.progress(s->p);
    }
}

static fz_epc_t *fz_vep_free(fz_ofi_t *s)
{
    int i;

    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep == NULL)
            return &s->vep[i];
    return NULL;
}

static void fz_v_create(fz_ofi_t *s)
{
    fz_epc_t *c = fz_vep_free(s);

    if (c != NULL && mdr_ofi_ops.ep_create(s->v, FZ_P_UUID, s->paddr, s->pattr.addr_len, c,
                                           &c->ep) != MADRAIL_OK)
        c->ep = NULL;
}

static void fz_send(fz_epc_t *c, size_t len)
{
    uint8_t buf[FZ_SLOT];
    struct iovec iov = {buf, len % (FZ_SLOT + 1)};

    if (c->ep == NULL || c->failed)
        return;
    memset(buf, 0x56, iov.iov_len);
    (void)mdr_ofi_ops.ctrl_send(c->ep, &iov, 1);
}

/* V's ep toward P, or NULL. */
static mdr_ep_t *fz_vep_to_p(fz_ofi_t *s)
{
    int i;

    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL && s->vep[i].ep->base.uuid == FZ_P_UUID &&
            !s->vep[i].ep->base.destroyed)
            return s->vep[i].ep;
    return NULL;
}

/* The incarnation number of V's (or P's) ep toward the other. */
static uint32_t fz_epid(fz_ofi_t *s, int v)
{
    int i;

    if (!v)
        return s->pep.ep != NULL ? s->pep.ep->epid : 0;
    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL && s->vep[i].ep->base.uuid == FZ_P_UUID)
            return s->vep[i].ep->epid;
    return 0;
}

static void fz_msg(fz_ofi_t *s, fz_in_t *in, uint8_t *buf, size_t cap)
{
    uint8_t align = fz_u8(in) & 7;
    size_t len = fz_u16(in);
    uint8_t *m = buf + align;
    unsigned npatch, k, flags;
    uint64_t data = 0;

    if (len > cap - 8)
        len = cap - 8;
    fz_bytes(in, m, len);
    flags = fz_u8(in);
    npatch = flags & 7;
    for (k = 0; k < npatch; k++) {
        uint16_t off = fz_u16(in);
        uint8_t sel = fz_u8(in) % FZ_NSEL;
        uint64_t v64 = 0;
        uint32_t v32;
        uint8_t mac[MDR_AUTH_MAC_LEN];
        const void *src = &v64;
        size_t n = 8;
        switch (sel) {
        case FZ_SEL_P_ADDR: src = s->paddr; n = s->pattr.addr_len; break;
        case FZ_SEL_V_UUID: v64 = FZ_V_UUID; break;
        case FZ_SEL_P_UUID: v64 = FZ_P_UUID; break;
        case FZ_SEL_V_EPID: v32 = fz_epid(s, 1); src = &v32; n = 4; break;
        case FZ_SEL_P_EPID: v32 = fz_epid(s, 0); src = &v32; n = 4; break;
        case FZ_SEL_PROOF:
        case FZ_SEL_CONT:
        case FZ_SEL_ACK:
        case FZ_SEL_V_NONCE: n = fz_proof_patch(s, sel, mac); src = mac; break;
        default: v32 = (uint32_t)s->pattr.addr_len; src = &v32; n = 4; break;
        }
        if ((size_t)off + n <= len)
            memcpy(m + off, src, n);
    }
    if (!(flags & 8)) {
        mdr_ofi_recv_msg(s->v, m, len);
        return;
    }
    fz_bytes(in, &data, sizeof(data));
    if (flags & 16) {
        uint32_t slot = 0xffffffffu;
        for (k = 0; k < FZ_MAXEP; k++)
            if (s->vep[k].ep != NULL && s->vep[k].ep->base.uuid == FZ_P_UUID &&
                s->vep[k].ep->rx_short != 0)
                slot = s->vep[k].ep->rx_short - 1;
        data = (data & 0xffff000000000000ull) | ((uint64_t)(fz_epid(s, 0) & 0xffff) << 32) | slot;
    }
    mdr_ofi_recv_short(s->v, m, len, data);
}

static fz_ofi_t fz_state;

/* Destroy every ep of this input and let the goodbyes go out. */
static void fz_reset(fz_ofi_t *s)
{
    int i;

    for (i = 0; i < FZ_MAXEP; i++)
        if (s->vep[i].ep != NULL) {
            mdr_ofi_ops.ep_destroy(s->vep[i].ep);
            s->vep[i].ep = NULL;
        }
    if (s->pep.ep != NULL) {
        mdr_ofi_ops.ep_destroy(s->pep.ep);
        s->pep.ep = NULL;
    }
    fz_progress(s, 8);
    if (getenv("FZ_DEBUG") != NULL) {
        size_t np = 0, ne = 0;
        mdr_list_t *l;
        mdr_list_for_each(l, &s->v->peer_list) np++;
        mdr_list_for_each(l, &s->v->base.eps_all) ne++;
        fprintf(stderr, "fuzz: V keeps %zu peer addresses, %zu endpoints\n", np, ne);
    }
}

static void fz_ofi_run(const uint8_t *data, size_t size)
{
    static uint64_t buf[(65536 + 16) / 8];
    fz_in_t in = {data, size};
    fz_ofi_t *s = &fz_state;
    int nops = 0, i;

    /* Opening and closing a tcp;ofi_rxm rail takes seconds (connection
     * teardown, the goodbyes' grace time), so V and P are opened once and
     * kept: each input starts without endpoints.  What a rail keeps across
     * inputs (peer addresses in its AV, incarnation numbers) is what a
     * long-lived rail keeps anyway. */
    if (s->v == NULL) {
        s->rv.s = s->rp.s = s->pep.s = s;
        s->rv.is_v = 1;
        for (i = 0; i < FZ_MAXEP; i++) {
            s->vep[i].s = s;
            s->vep[i].is_v = 1;
        }
        s->v = fz_rail_open(FZ_V_UUID, &s->rv);
        s->p = fz_rail_open(FZ_P_UUID, &s->rp);
        if (s->v == NULL || s->p == NULL) {
            fprintf(stderr, "fuzz: cannot open ofi rails on %s\n", FZ_SPEC);
            exit(1);
        }
        /* V receives the short form (its slots, its SHORT_IDs) although
         * tcp;ofi_rxm does not inject: the receive side is what is fuzzed */
        s->v->short_form = 1;
        mdr_ofi_ops.query(s->p, &s->pattr);
        if (s->pattr.addr_len > sizeof(s->paddr) ||
            mdr_ofi_ops.addr_pack(s->p, s->paddr, s->pattr.addr_len) != MADRAIL_OK) {
            fprintf(stderr, "fuzz: cannot pack the address of an ofi rail\n");
            exit(1);
        }
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
        uint8_t vaddr[256];
        mdr_rail_attr_t va;
        mdr_ofi_ops.query(s->v, &va);
        if (s->pep.ep == NULL && va.addr_len <= sizeof(vaddr) &&
            mdr_ofi_ops.addr_pack(s->v, vaddr, va.addr_len) == MADRAIL_OK &&
            mdr_ofi_ops.ep_create(s->p, FZ_V_UUID, vaddr, va.addr_len, &s->pep, &s->pep.ep) !=
                MADRAIL_OK)
            s->pep.ep = NULL;
        fz_send(&s->pep, 24);
        fz_progress(s, 4);
    }

    while (fz_left(&in) > 0 && nops++ < FZ_MAXOPS) {
        uint8_t op = fz_u8(&in);
        switch (op % 6) {
        case FZ_OP_MSG:
            fz_msg(s, &in, (uint8_t *)buf, sizeof(buf));
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
                mdr_ofi_ops.ep_destroy(c->ep);
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
    fz_ofi_run(data, size);
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

/* A message op: header (type, padding, epid) + body; the uuid and the
 * epid go in as patches when asked. */
static void sd_msg(fz_seed_t *sd, uint8_t align, uint8_t type, uint16_t magic, uint8_t pad,
                   uint32_t epid, const void *body, size_t blen, const sd_patch_t *pt,
                   unsigned npt)
{
    uint8_t m[4096];
    mdr_ofi_hdr_t h;
    size_t len = MDR_OFI_HDR_LEN + blen + pad;
    unsigned k;

    memset(&h, 0, sizeof(h));
    h.type = type;
    h.pad = pad;
    h.magic = magic;
    h.epid = epid;
    h.uuid = FZ_P_UUID;
    memcpy(m, &h, MDR_OFI_HDR_LEN);
    if (blen > 0)
        memcpy(m + MDR_OFI_HDR_LEN, body, blen);
    memset(m + MDR_OFI_HDR_LEN + blen, 0, pad);
    sd_u8(sd, FZ_OP_MSG);
    sd_u8(sd, align);
    sd_u16(sd, (uint16_t)len);
    sd_put(sd, m, len);
    sd_u8(sd, (uint8_t)npt);
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

/* A HELLO body: target, nonce, then P's address (patched in at run time). */
static size_t sd_hello(uint8_t *b, uint64_t target, uint32_t addr_len)
{
    mdr_ofi_hello_t h;

    memset(&h, 0, sizeof(h));
    h.target = target;
    memset(h.nonce, 0x4e, sizeof(h.nonce));
    h.addr_len = addr_len;
    memcpy(b, &h, sizeof(h));
    memset(b + sizeof(h), 0, addr_len);
    return sizeof(h) + addr_len;
}

/* A PROOF from P's incarnation epid (0: P's real one, patched): the right
 * mac for V's pending entry unless wrong; continuity when cont. */
static void sd_proof(fz_seed_t *sd, uint32_t epid, int flags)
{
    mdr_ofi_proof_t pr;
    sd_patch_t pt[3];
    unsigned npt = 0;

    memset(&pr, 0x70, sizeof(pr));
    if (epid == 0)
        pt[npt++] = (sd_patch_t){4, FZ_SEL_P_EPID};
    if (!(flags & 1))
        pt[npt++] = (sd_patch_t){MDR_OFI_HDR_LEN, FZ_SEL_PROOF};
    if (flags & 2)
        pt[npt++] = (sd_patch_t){MDR_OFI_HDR_LEN + 32, FZ_SEL_CONT};
    else
        memset(pr.cont, 0, sizeof(pr.cont));
    sd_msg(sd, 0, MDR_OFI_M_PROOF, MDR_OFI_MAGIC, 0, epid, &pr, sizeof(pr), pt, npt);
}

static int fz_ofi_seeds(const char *dir)
{
    const uint16_t body = MDR_OFI_HDR_LEN;
    const sd_patch_t p_hello[] = {{4, FZ_SEL_P_EPID}, {body + 8, FZ_SEL_ADDR_LEN},
                                  {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR}};
    const sd_patch_t p_epid[] = {{4, FZ_SEL_P_EPID}};
    uint8_t b[1024], ctl[FZ_SLOT + 8];
    uint32_t alen;
    fz_seed_t sd;
    size_t n;
    int rc = 0, k;

    memset(ctl, 0x43, sizeof(ctl));
    /* P's address length, as a run sees it */
    {
        fz_epc_t c;
        mdr_rail_t *p;
        mdr_rail_attr_t a;
        memset(&c, 0, sizeof(c));
        p = fz_rail_open(FZ_P_UUID, &c);
        if (p == NULL) {
            fprintf(stderr, "gen_seeds: cannot open an ofi rail on %s\n", FZ_SPEC);
            return -1;
        }
        mdr_ofi_ops.query(p, &a);
        alen = (uint32_t)a.addr_len;
        mdr_ofi_ops.close(p);
    }

    /* a HELLO with P's real address, then control messages of edge sizes */
    for (k = 0; k < 4; k++) {
        static const uint8_t setups[4] = {0, FZ_S_V_FIRST, FZ_S_REPLY, FZ_S_REFUSE};
        static const char *const names[4] = {"hello-ctrl", "hello-joins-ep", "hello-reply",
                                             "hello-refused"};
        const size_t sizes[] = {0, 1, 8, 100, FZ_SLOT, FZ_SLOT + 1};
        size_t j;
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, setups[k]);
        n = sd_hello(b, FZ_V_UUID, alen);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b, n,
               p_hello, 3);
        sd_proof(&sd, 0, 0);
        for (j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
            sd_msg(&sd, (uint8_t)(j & 1 ? 4 : 0), MDR_OFI_M_CTRL, MDR_OFI_MAGIC,
                   (uint8_t)MDR_OFI_PAD8(sizes[j]), 0, ctl, sizes[j], p_epid, 1);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, names[k], &sd);
    }
    /* HELLOs that must be dropped */
    {
        struct {
            uint64_t target;
            uint32_t alen;
            int garble;
            const char *name;
        } h[] = {
            {FZ_P_UUID, alen, 0, "hello-wrong-target"},
            {FZ_V_UUID, 4, 0, "hello-short-addr"},
            {FZ_V_UUID, alen + 100, 0, "hello-addr-past-end"},
            {FZ_V_UUID, alen, 1, "hello-foreign-mark"},
            {FZ_V_UUID, alen, 2, "hello-garbled-name"},
        };
        for (k = 0; k < (int)(sizeof(h) / sizeof(h[0])); k++) {
            const sd_patch_t pt[] = {{4, FZ_SEL_P_EPID},
                                     {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR}};
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, 0);
            n = sd_hello(b, h[k].target, h[k].alen);
            if (h[k].alen > alen)
                n -= 100;
            {
                const sd_patch_t garbled[] = {
                    {4, FZ_SEL_P_EPID},
                    {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR},
                    {(uint16_t)(body + sizeof(mdr_ofi_hello_t) + 12), FZ_SEL_V_UUID}};
                sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b,
                       n, h[k].garble == 2 ? garbled : pt,
                       h[k].garble == 1 ? 1 : h[k].garble == 2 ? 3 : 2);
            }
            sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0, ctl, 32, p_epid, 1);
            rc |= sd_save(dir, h[k].name, &sd);
        }
    }
    /* a known uuid's address changed and changed back (tcp;ofi_rxm crashed
     * in fi_send after this when the driver re-pointed the uuid's AV entry) */
    for (k = 0; k < 3; k++) {
        char name[48];
        const sd_patch_t real[] = {{4, FZ_SEL_P_EPID}, {body + 8, FZ_SEL_ADDR_LEN},
                                   {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR}};
        const sd_patch_t garbled[] = {{body + 8, FZ_SEL_ADDR_LEN},
                                      {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR},
                                      {(uint16_t)(body + sizeof(mdr_ofi_hello_t) + 12),
                                       FZ_SEL_V_UUID}};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, (uint8_t)(FZ_S_V_FIRST | FZ_S_REPLY | (k ? FZ_S_P_FIRST : 0)));
        if (k == 2) { /* both endpoints gone first, the connection with them */
            sd_u8(&sd, FZ_OP_DESTROY);
            sd_u8(&sd, 0);
            sd_u8(&sd, FZ_OP_DESTROY);
            sd_u8(&sd, FZ_MAXEP);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 7);
        }
        n = sd_hello(b, FZ_V_UUID, alen);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0x77, b, n,
               garbled, 3);
        sd_proof(&sd, 0x77, 0);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0x78, b, n,
               real, 2);
        sd_proof(&sd, 0x78, 0);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0x78, ctl, 40, NULL, 0);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 50);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        snprintf(name, sizeof(name), "hello-address-change-and-back-%d", k);
        rc |= sd_save(dir, name, &sd);
    }
    /* headers: bad magic, padding beyond 7 or beyond the message, unknown type, short */
    {
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_P_FIRST);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, 0x314f, 0, 0, ctl, 16, p_epid, 1);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 9, 0, ctl, 16, p_epid, 1);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 7, 0, ctl, 0, p_epid, 1);
        sd_msg(&sd, 0, 77, MDR_OFI_MAGIC, 0, 0, ctl, 16, p_epid, 1);
        sd_u8(&sd, FZ_OP_MSG);
        sd_u8(&sd, 0);
        sd_u16(&sd, 7);
        sd_put(&sd, ctl, 7);
        sd_u8(&sd, 0);
        rc |= sd_save(dir, "bad-headers", &sd);
    }
    /* BYEs: for V's ep (its epid), for another incarnation, each reason */
    for (k = 1; k <= 6; k++) {
        char name[32];
        mdr_ofi_bye_t bye;
        const sd_patch_t pt[] = {{4, FZ_SEL_P_EPID}, {body, FZ_SEL_V_EPID}};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_V_FIRST | FZ_S_P_FIRST);
        bye.target_epid = 0;
        bye.reason = (uint32_t)k;
        sd_msg(&sd, 0, MDR_OFI_M_BYE, MDR_OFI_MAGIC, 0, 0, &bye, sizeof(bye), pt,
               k & 1 ? 2 : 1);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 40);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 2);
        snprintf(name, sizeof(name), "bye-%d", k);
        rc |= sd_save(dir, name, &sd);
    }
    /* a second HELLO from a new incarnation of P (the peer started over) */
    {
        const sd_patch_t pt[] = {{body + 8, FZ_SEL_ADDR_LEN},
                                 {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR}};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_P_FIRST | FZ_S_V_FIRST);
        n = sd_hello(b, FZ_V_UUID, alen);
        /* without continuity (refused: P's endpoint is alive), then with it */
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0x4242, b, n,
               pt, 2);
        sd_proof(&sd, 0x4242, 0);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0x4242, ctl, 24, NULL, 0);
        sd_u8(&sd, FZ_OP_P_SEND);
        sd_u16(&sd, 30);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0x4343, b, n,
               pt, 2);
        sd_proof(&sd, 0x4343, 2);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0x4343, ctl, 24, NULL, 0);
        sd_u8(&sd, FZ_OP_DESTROY);
        sd_u8(&sd, 0);
        rc |= sd_save(dir, "hello-new-incarnation", &sd);
    }
    /* proofs that fail: a wrong mac, none pending, a second one, one of a bad length */
    {
        const sd_patch_t pt[] = {{4, FZ_SEL_P_EPID}, {body + 8, FZ_SEL_ADDR_LEN},
                                 {body + sizeof(mdr_ofi_hello_t), FZ_SEL_P_ADDR}};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        sd_proof(&sd, 0x99, 0);
        n = sd_hello(b, FZ_V_UUID, alen);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b, n, pt, 3);
        sd_proof(&sd, 0, 1);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b, n, pt, 3);
        sd_msg(&sd, 0, MDR_OFI_M_PROOF, MDR_OFI_MAGIC, 0, 0, ctl, 40, p_epid, 1);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b, n, pt, 3);
        sd_proof(&sd, 0, 0);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO, MDR_OFI_MAGIC, (uint8_t)MDR_OFI_PAD8(n), 0, b, n, pt, 3);
        sd_proof(&sd, 0, 0);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0, ctl, 32, p_epid, 1);
        rc |= sd_save(dir, "proof-wrong-none-second", &sd);
    }
    /* V's own handshake answered by the input: a CHALLENGE echoing V's
     * nonce, then a HELLO_ACK with the right mac (and ones that are not) */
    for (k = 0; k < 2; k++) {
        mdr_ofi_challenge_t c;
        mdr_ofi_hello_ack_t a;
        const sd_patch_t pc[] = {{body, FZ_SEL_V_EPID}, {body + 8, FZ_SEL_V_NONCE}};
        const sd_patch_t pa[] = {{4, FZ_SEL_P_EPID}, {body, FZ_SEL_V_EPID},
                                 {body + 8, FZ_SEL_ACK}};
        memset(&sd, 0, sizeof(sd));
        /* the real P answers V's HELLO too (its CHALLENGE and HELLO_ACK
         * take the success paths), when the provider's connection is up */
        sd_u8(&sd, FZ_S_V_FIRST | (k ? FZ_S_REPLY : 0));
        sd_u8(&sd, FZ_OP_V_CREATE);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 16);
        sd_u8(&sd, FZ_OP_PROGRESS); /* the provider's connection: the HELLO goes */
        sd_u8(&sd, 0);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 16);
        memset(&c, 0x43, sizeof(c));
        sd_msg(&sd, 0, MDR_OFI_M_CHALLENGE, MDR_OFI_MAGIC, 0, 0x51, &c, sizeof(c), pc, k ? 1 : 2);
        memset(&a, 0x41, sizeof(a));
        sd_msg(&sd, 0, MDR_OFI_M_HELLO_ACK, MDR_OFI_MAGIC, 0, 0x52, &a, sizeof(a), pa, 2);
        sd_msg(&sd, 0, MDR_OFI_M_HELLO_ACK, MDR_OFI_MAGIC, 0, 0x52, &a, sizeof(a), pa, 3);
        sd_msg(&sd, 0, MDR_OFI_M_CTRL, MDR_OFI_MAGIC, 0, 0x52, ctl, 24, NULL, 0);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 20);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, k ? "challenge-stale" : "challenge-ack", &sd);
    }
    /* the short form: P's real HELLO gave its incarnation a slot at V; then
     * messages in it (good, then with padding 3, padding 9, one past a
     * slot), one with another mark, one for a free slot, one of another
     * incarnation; a SHORT_ID for V's ep (good, bad slot, bad length) */
    {
        mdr_ofi_short_id_t id;
        const sd_patch_t v_epid[] = {{4, FZ_SEL_P_EPID}, {MDR_OFI_HDR_LEN, FZ_SEL_V_EPID}};
        const struct {
            size_t len;
            uint64_t data;
            uint8_t flags;
        } m[] = {{16, 0xa500000000000000ull, 16},      {16, 0xa503000000000000ull, 16},
                 {16, 0xa509000000000000ull, 16},      {FZ_SLOT + 8, 0xa500000000000000ull, 16},
                 {16, 0x5a00000000000000ull, 16},      {16, 0xa5000000000007ffull, 0},
                 {16, 0xa500777700000000ull, 0}};
        size_t j;
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_P_FIRST | FZ_S_V_FIRST | FZ_S_REPLY);
        for (j = 0; j < sizeof(m) / sizeof(m[0]); j++) {
            sd_u8(&sd, FZ_OP_MSG);
            sd_u8(&sd, 0);
            sd_u16(&sd, (uint16_t)m[j].len);
            sd_put(&sd, ctl, m[j].len);
            sd_u8(&sd, (uint8_t)(8 | m[j].flags));
            sd_put(&sd, &m[j].data, sizeof(m[j].data));
        }
        id.target_epid = 0;
        id.slot = 5;
        sd_msg(&sd, 0, MDR_OFI_M_SHORT_ID, MDR_OFI_MAGIC, 0, 0, &id, sizeof(id), v_epid, 2);
        sd_u8(&sd, FZ_OP_V_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 8);
        id.slot = MDR_OFI_SHORT_SLOTS;
        sd_msg(&sd, 0, MDR_OFI_M_SHORT_ID, MDR_OFI_MAGIC, 0, 0, &id, sizeof(id), v_epid, 2);
        sd_msg(&sd, 0, MDR_OFI_M_SHORT_ID, MDR_OFI_MAGIC, 3, 0, &id, 5, v_epid, 2);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        rc |= sd_save(dir, "short-form", &sd);
    }
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
        exit(fz_ofi_seeds(dir) == 0 ? 0 : 1);
    }
    return 0;
}
