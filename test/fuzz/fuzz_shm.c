/*
 * Fuzz target: the shm driver's receive side, as a broken or hostile
 * process of the same node sees it: the records it writes into the ring it
 * claimed in our segment, the ring's control block (identity, tail, flags,
 * reason) and, since both segments are mapped read-write by both sides,
 * any byte of either segment.
 *
 * No refactor of the driver was needed: two real shm rails live in this
 * process, V (under test) and P (the peer).  P claims a ring in V's
 * segment the normal way (or the input claims one with an identity of its
 * choosing); from then on the harness is P's side of that ring and writes
 * what the input says, at the ring's tail, wrapping as a producer does,
 * publishing the tail when the input says, and runs V's progress.  V's
 * core is the harness too: its upcalls check what the driver promises
 * (control data 8-byte aligned, at most a slot, no upcall on a destroyed
 * ep) and read every byte.  V's put target is a fixed-address arena.
 *
 * Record and segment layouts come from shm.h; the input format is written
 * down once, by fz_shm_seeds() at the bottom (FZ_GEN_SEEDS=dir).
 */
#include "mdr_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rails/shm/shm.h"
#include "util/log.h"
#include "fuzz_common.h"

FZ_DEFINE_GETRANDOM

#define FZ_V_UUID 0x1111111111111111ull
#define FZ_P_UUID 0x2222222222222222ull
#define FZ_SLOT 512u
#define FZ_REGION_OFF 4096u
#define FZ_REGION_LEN 65536u
#define FZ_MAXOPS 128

enum {
    FZ_S_RAW_CLAIM = 1, /* the input claims a ring (identity from the input) */
    FZ_S_NO_CMA = 2,
    FZ_S_REGION = 4,    /* V registers [arena+4096, +64 KiB) for remote writes */
    FZ_S_REPLY = 8,     /* V's core answers each control message */
    FZ_S_REFUSE = 16    /* V's core refuses the connection */
};

enum {
    FZ_OP_APPEND = 0,   /* len(u16) bytes: written at the tail, not yet published */
    FZ_OP_PUBLISH = 1,  /* n(u8): publish the tail, run progress 1 + n%4 times */
    FZ_OP_TAIL = 2,     /* delta(u64): tail = V's head + delta (nonsense allowed) */
    FZ_OP_FLAGS = 3,    /* flags(u8) status(u32) reason(40): the producer's flags */
    FZ_OP_PROGRESS = 4, /* n(u8) */
    FZ_OP_SEND = 5,     /* kind(u8) len(u16) [raddr(u64) key(u64)]: V sends or puts to P */
    FZ_OP_POKE = 6,     /* seg(u8) off(u32) len(u8) bytes: write into V's or P's segment */
    FZ_OP_DESTROY = 7   /* what(u8): V destroys its ep, deregisters, or P destroys its ep */
};

struct fz_shm;

typedef struct fz_side {
    struct fz_shm *s;
    int is_v;
} fz_side_t;

typedef struct fz_shm {
    mdr_rail_t *v, *p;
    fz_side_t sv, sp;
    mdr_ep_t *vp;       /* V's ep to P (accepted, or created for sending) */
    mdr_ep_t *pv;       /* P's ep to V */
    int vp_failed, pv_failed;
    mdr_memh_t *region; /* V's */
    uint8_t setup;
    /* the ring the harness writes into (in V's segment) */
    mdr_shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t cap, tail;
    uint64_t sum;
    unsigned puts;
    mdr_completion_t comp[16];
    uint8_t src[8192];
} fz_shm_t;

static fz_shm_t *fz_cur;

/* ---------------- the cores of V and P ---------------- */

static void fz_ctrl_recv(void *cookie, const void *data, size_t len)
{
    fz_side_t *side = cookie;
    fz_shm_t *s = side->s;
    const uint8_t *p = data;
    mdr_ep_t *ep = side->is_v ? s->vp : s->pv;
    size_t i;

    if (s != fz_cur || ep == NULL) {
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
    if (side->is_v && (s->setup & FZ_S_REPLY) && !s->vp_failed) {
        struct iovec iov = {(void *)data, len < 64 ? len : 64};
        (void)mdr_shm_ops.ctrl_send(s->vp, &iov, 1);
    }
}

static void *fz_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    fz_side_t *side = rail_cookie;
    fz_shm_t *s = side->s;

    (void)uuid;
    if (!side->is_v) {
        if (s->pv != NULL)
            return NULL;
        s->pv = ep;
        return &s->sp;
    }
    if ((s->setup & FZ_S_REFUSE) || s->vp != NULL)
        return NULL;
    s->vp = ep;
    s->vp_failed = 0;
    return &s->sv;
}

static void fz_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    fz_side_t *side = cookie;
    fz_shm_t *s = side->s;

    (void)status;
    if (s != fz_cur || (side->is_v ? s->vp : s->pv) == NULL) {
        fprintf(stderr, "fuzz: failure reported for a destroyed endpoint: %s\n", reason);
        __builtin_trap();
    }
    if (side->is_v)
        s->vp_failed = 1;
    else
        s->pv_failed = 1;
}

static const mdr_rail_upcalls_t fz_upcalls = {fz_ctrl_recv, fz_ep_accepted, fz_ep_failed};

static void fz_put_done(mdr_completion_t *comp, madrail_status_t status)
{
    (void)comp;
    (void)status;
}

/* ---------------- harness ---------------- */

static mdr_rail_t *fz_rail_open(uint64_t uuid, uint8_t setup, fz_side_t *side)
{
    const char *ov[] = {(setup & FZ_S_NO_CMA) ? "MADRAIL_SHM_CMA=0" : "MADRAIL_SHM_CMA=1",
                        "MADRAIL_SHM_MAX_PEERS=4", "MADRAIL_SHM_RING_SIZE=4k",
                        "MADRAIL_SHM_FRAG=4k", NULL};
    mdr_rail_params_t prm;
    mdr_rail_t *rail = NULL;

    memset(&prm, 0, sizeof(prm));
    prm.uuid = uuid;
    prm.upcalls = &fz_upcalls;
    prm.rail_cookie = side;
    prm.slot_size = FZ_SLOT;
    prm.slots = 4;
    prm.overrides = ov;
    prm.job_key = fz_job_key;
    if (mdr_shm_ops.open(side != NULL && side->is_v ? "fzv" : "fzp", &prm, &rail) != MADRAIL_OK)
        return NULL;
    return rail;
}

static void fz_progress(fz_shm_t *s, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        mdr_shm_ops.progress(s->v);
        mdr_shm_ops.progress(s->p);
    }
}

/* Write len bytes at the harness's tail, wrapping at the ring's end. */
static void fz_append(fz_shm_t *s, const uint8_t *b, size_t len)
{
    while (len > 0 && s->data != NULL) {
        uint64_t off = s->tail % s->cap;
        size_t n = (size_t)(s->cap - off) < len ? (size_t)(s->cap - off) : len;
        memcpy(s->data + off, b, n);
        s->tail += n;
        b += n;
        len -= n;
    }
}

static void fz_publish(fz_shm_t *s)
{
    if (s->ctl != NULL)
        atomic_store_explicit(&s->ctl->tail, s->tail, memory_order_release);
}

/* Claim ring i of V's segment as the input says (a hostile producer). */
static void fz_raw_claim(fz_shm_t *s, fz_in_t *in)
{
    mdr_shm_seg_hdr_t *h = s->v->hdr;
    uint32_t i = fz_u8(in) % s->v->nrings;
    uint8_t who = fz_u8(in);
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(s->v->seg_base, &s->v->lay, i);
    const uint64_t uuids[4] = {FZ_P_UUID, FZ_V_UUID, 0, 0x4444444444444444ull};

    c->prod_uuid = uuids[who & 3];
    c->prod_start = (who & 4) ? fz_u64(in) : s->p->start;
    c->prod_tag = (who & 8) ? fz_u64(in) : s->p->tag;
    c->prod_pid = (who & 16) ? (int32_t)fz_u32(in) : (int32_t)s->p->pid;
    c->prod_caps = (who & 32) ? MDR_SHM_AF_CMA : 0;
    if (who & 128)
        fz_bytes(in, c->prod_key, sizeof(c->prod_key)); /* a wrong key, maybe */
    else
        memcpy(c->prod_key, fz_job_key, sizeof(c->prod_key));
    if (who & 64)
        fz_bytes(in, c->prod_seg, sizeof(c->prod_seg)); /* maybe not even terminated */
    else
        snprintf(c->prod_seg, sizeof(c->prod_seg), "%s", s->p->seg_name);
    atomic_store_explicit(&c->tail, 0, memory_order_relaxed);
    atomic_store_explicit(&c->head, 0, memory_order_relaxed);
    atomic_store_explicit(&c->prod_flags, 0, memory_order_relaxed);
    atomic_store_explicit(&c->cons_flags, 0, memory_order_relaxed);
    atomic_store_explicit(&c->state, MDR_SHM_MKSTATE(MDR_SHM_RING_OPEN, s->p->pid),
                          memory_order_seq_cst);
    atomic_fetch_add_explicit(&h->claims, 1, memory_order_release);
    s->ctl = c;
    s->data = (uint8_t *)s->v->seg_base + s->v->lay.data_off + (uint64_t)i * s->v->ring_bytes;
    s->cap = s->v->ring_bytes;
    s->tail = 0;
}

static int fz_connect(fz_shm_t *s, fz_in_t *in)
{
    uint8_t addr[sizeof(mdr_shm_addr_t)];

    if (s->setup & FZ_S_RAW_CLAIM) {
        fz_raw_claim(s, in);
        fz_progress(s, 1);
        return 0;
    }
    /* P's ep to V claims a ring in V's segment with its first message */
    if (mdr_shm_ops.addr_pack(s->v, addr, sizeof(addr)) != MADRAIL_OK ||
        mdr_shm_ops.ep_create(s->p, FZ_V_UUID, addr, sizeof(addr), &s->sp, &s->pv) != MADRAIL_OK)
        return -1;
    {
        uint8_t msg[16] = {0};
        struct iovec iov = {msg, sizeof(msg)};
        if (mdr_shm_ops.ctrl_send(s->pv, &iov, 1) != MADRAIL_OK || !s->pv->has_tx)
            return -1;
    }
    /* the ring through V's own mapping (P's goes away with its ep) */
    s->ctl = mdr_shm_ring_ctl(s->v->seg_base, &s->v->lay, s->pv->tx.index);
    s->data = (uint8_t *)s->v->seg_base + s->v->lay.data_off +
              (uint64_t)s->pv->tx.index * s->v->ring_bytes;
    s->cap = s->pv->tx.cap;
    s->tail = s->pv->tx.pos;
    fz_progress(s, 1);
    return 0;
}

static void fz_send(fz_shm_t *s, fz_in_t *in)
{
    uint8_t kind = fz_u8(in);
    size_t len = fz_u16(in);
    uint8_t addr[sizeof(mdr_shm_addr_t)];

    if (s->vp == NULL && mdr_shm_ops.addr_pack(s->p, addr, sizeof(addr)) == MADRAIL_OK)
        (void)mdr_shm_ops.ep_create(s->v, FZ_P_UUID, addr, sizeof(addr), &s->sv, &s->vp);
    if (s->vp == NULL || s->vp_failed)
        return;
    if (kind & 1) {
        uint64_t raddr = fz_u64(in);
        mdr_shm_rkey_t k;
        k.key = fz_u64(in);
        k.tag = (kind & 2) ? fz_u64(in) : s->p->tag;
        len %= sizeof(s->src) + 1;
        memset(s->src, 0x50, len);
        if (s->puts < 16) {
            s->comp[s->puts].cb = fz_put_done;
            if (mdr_shm_ops.put(s->vp, s->src, len, NULL, raddr, &k, sizeof(k),
                                &s->comp[s->puts]) == MADRAIL_INPROGRESS)
                s->puts++;
        }
    } else {
        struct iovec iov = {s->src, len % (FZ_SLOT + 1)};
        memset(s->src, 0x53, iov.iov_len);
        (void)mdr_shm_ops.ctrl_send(s->vp, &iov, 1);
    }
}

static void fz_poke(fz_shm_t *s, fz_in_t *in)
{
    uint8_t seg = fz_u8(in);
    uint32_t off = fz_u32(in);
    size_t len = fz_u8(in) % 65;
    mdr_rail_t *r = (seg & 1) ? s->p : s->v;
    uint8_t b[64];

    fz_bytes(in, b, len);
    if (r->seg_len == 0)
        return;
    off %= (uint32_t)r->seg_len;
    if (off + len > r->seg_len)
        len = r->seg_len - off;
    memcpy((uint8_t *)r->seg_base + off, b, len);
}

static void fz_shm_run(const uint8_t *data, size_t size)
{
    static uint8_t buf[65536];
    fz_in_t in = {data, size};
    fz_shm_t *s = calloc(1, sizeof(*s));
    uint8_t *arena = fz_arena();
    int nops = 0;

    if (s == NULL)
        return;
    fz_cur = s;
    fz_rand_reset();
    s->sv.s = s->sp.s = s;
    s->sv.is_v = 1;
    s->setup = fz_u8(&in);
    s->v = fz_rail_open(FZ_V_UUID, s->setup, &s->sv);
    s->p = fz_rail_open(FZ_P_UUID, s->setup, &s->sp);
    if (s->v == NULL || s->p == NULL)
        goto out;
    if ((s->setup & FZ_S_REGION) && arena != NULL &&
        mdr_shm_ops.mem_reg(s->v, arena + FZ_REGION_OFF, FZ_REGION_LEN,
                            MDR_MEM_LOCAL | MDR_MEM_REMOTE_WRITE, &s->region) != MADRAIL_OK)
        s->region = NULL;
    if (fz_connect(s, &in) != 0)
        goto out;
    if (s->region != NULL) { /* offered to the harness's rail */
        mdr_shm_rkey_t rk;
        size_t klen = sizeof(rk);
        (void)mdr_shm_ops.rkey_pack(s->v, s->region, FZ_P_UUID, &rk, &klen);
    }

    while (fz_left(&in) > 0 && nops++ < FZ_MAXOPS) {
        uint8_t op = fz_u8(&in);
        switch (op & 7) {
        case FZ_OP_APPEND: {
            size_t len = fz_u16(&in);
            if (len > fz_left(&in))
                len = fz_left(&in);
            fz_bytes(&in, buf, len);
            fz_append(s, buf, len);
            break;
        }
        case FZ_OP_PUBLISH:
            fz_publish(s);
            fz_progress(s, 1 + (fz_u8(&in) & 3));
            break;
        case FZ_OP_TAIL: {
            uint64_t d = fz_u64(&in);
            if (s->ctl != NULL) {
                uint64_t head = atomic_load_explicit(&s->ctl->head, memory_order_acquire);
                atomic_store_explicit(&s->ctl->tail, head + d, memory_order_release);
            }
            fz_progress(s, 1);
            break;
        }
        case FZ_OP_FLAGS: {
            uint8_t f = fz_u8(&in);
            uint32_t st = fz_u32(&in);
            char reason[MDR_SHM_REASON_MAX];
            fz_bytes(&in, reason, sizeof(reason));
            if (s->ctl != NULL) {
                s->ctl->prod_status = (int32_t)st;
                memcpy(s->ctl->prod_reason, reason, sizeof(reason));
                atomic_fetch_or_explicit(&s->ctl->prod_flags, f & 3, memory_order_release);
            }
            fz_progress(s, 1);
            break;
        }
        case FZ_OP_PROGRESS:
            fz_progress(s, 1 + (fz_u8(&in) & 7));
            break;
        case FZ_OP_SEND:
            fz_send(s, &in);
            break;
        case FZ_OP_POKE:
            fz_poke(s, &in);
            break;
        default: {
            uint8_t what = fz_u8(&in) % 3;
            if (what == 0 && s->vp != NULL) {
                mdr_shm_ops.ep_destroy(s->vp);
                s->vp = NULL;
            } else if (what == 1 && s->region != NULL) {
                mdr_shm_ops.mem_dereg(s->v, s->region);
                s->region = NULL;
            } else if (what == 2 && s->pv != NULL) {
                mdr_shm_ops.ep_destroy(s->pv);
                s->pv = NULL;
            }
            fz_progress(s, 1);
            break;
        }
        }
    }
    fz_progress(s, 2);

out:
    if (s->vp != NULL)
        mdr_shm_ops.ep_destroy(s->vp);
    s->vp = NULL;
    if (s->pv != NULL)
        mdr_shm_ops.ep_destroy(s->pv);
    s->pv = NULL;
    if (s->region != NULL)
        mdr_shm_ops.mem_dereg(s->v, s->region);
    if (s->v != NULL)
        mdr_shm_ops.close(s->v);
    if (s->p != NULL)
        mdr_shm_ops.close(s->p);
    fz_cur = NULL;
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_shm_run(data, size);
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

static void sd_u32(fz_seed_t *sd, uint32_t v) { sd_put(sd, &v, 4); }

static void sd_u64(fz_seed_t *sd, uint64_t v) { sd_put(sd, &v, 8); }

/* An append op with one record: header, body, padding to 8. */
static void sd_record(fz_seed_t *sd, uint8_t type, uint32_t len, const void *body, size_t blen)
{
    mdr_shm_rec_t r;
    uint8_t zero[8] = {0};
    size_t pad = (size_t)(MDR_SHM_PAD8(blen) - blen);

    memset(&r, 0, sizeof(r));
    r.type = type;
    r.len = len;
    sd_u8(sd, FZ_OP_APPEND);
    sd_u16(sd, (uint16_t)(sizeof(r) + blen + pad));
    sd_put(sd, &r, sizeof(r));
    sd_put(sd, body, blen);
    sd_put(sd, zero, pad);
}

static void sd_publish(fz_seed_t *sd)
{
    sd_u8(sd, FZ_OP_PUBLISH);
    sd_u8(sd, 1);
}

static void sd_put_record(fz_seed_t *sd, uint64_t raddr, uint64_t key, uint64_t count,
                          uint32_t len)
{
    uint8_t b[sizeof(mdr_shm_put_ext_t) + 256];
    mdr_shm_put_ext_t e;
    size_t blen = sizeof(e) + (count <= 256 ? count : 0);

    e.raddr = raddr;
    e.key = key;
    e.count = count;
    memcpy(b, &e, sizeof(e));
    memset(b + sizeof(e), 0x77, sizeof(b) - sizeof(e));
    sd_record(sd, MDR_SHM_R_PUT, len, b, blen);
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

static int fz_shm_seeds(const char *dir)
{
    const uint64_t base = FZ_ARENA_ADDR + FZ_REGION_OFF;
    uint8_t ctl[FZ_SLOT + 8];
    uint64_t key = 0;
    fz_seed_t sd;
    int rc = 0, k;

    memset(ctl, 0x43, sizeof(ctl));
    /* the key of the region a run registers, as V packs it */
    {
        mdr_rail_t *v, *p;
        mdr_memh_t *mh = NULL;
        mdr_shm_rkey_t rk;
        size_t klen = sizeof(rk);
        /* the same getrandom stream as a run: reset, open V then P, register */
        fz_rand_reset();
        v = fz_rail_open(FZ_V_UUID, 0, NULL);
        p = fz_rail_open(FZ_P_UUID, 0, NULL);
        if (v == NULL || p == NULL || fz_arena() == NULL ||
            mdr_shm_ops.mem_reg(v, fz_arena() + FZ_REGION_OFF, FZ_REGION_LEN,
                                MDR_MEM_LOCAL | MDR_MEM_REMOTE_WRITE, &mh) != MADRAIL_OK ||
            mdr_shm_ops.rkey_pack(v, mh, FZ_P_UUID, &rk, &klen) != MADRAIL_OK) {
            fprintf(stderr, "gen_seeds: cannot open an shm rail and register memory\n");
            return -1;
        }
        key = rk.key;
        mdr_shm_ops.mem_dereg(v, mh);
        mdr_shm_ops.close(p);
        mdr_shm_ops.close(v);
    }

    /* control records of edge sizes, published one by one and all at once */
    {
        const uint32_t sizes[] = {0, 1, 8, 100, FZ_SLOT, FZ_SLOT + 1};
        for (k = 0; k < 2; k++) {
            size_t j;
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, (uint8_t)(FZ_S_REGION | (k ? FZ_S_REPLY : 0)));
            for (j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
                sd_record(&sd, MDR_SHM_R_CTRL, sizes[j], ctl, sizes[j]);
                if (k == 0)
                    sd_publish(&sd);
            }
            sd_publish(&sd);
            rc |= sd_save(dir, k ? "ctrl-sizes-batch-reply" : "ctrl-sizes", &sd);
        }
    }
    /* enough records to wrap the 4 KiB ring, with the PAD record a producer writes */
    {
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        for (k = 0; k < 7; k++) {
            sd_record(&sd, MDR_SHM_R_CTRL, 500, ctl, 500);
            sd_publish(&sd);
        }
        /* 24 + 7 * 512 = 3608: a PAD of 480 bytes reaches the end */
        sd_record(&sd, MDR_SHM_R_PAD, 4096 - 3608 - 8, ctl, 4096 - 3608 - 8);
        sd_record(&sd, MDR_SHM_R_CTRL, 64, ctl, 64);
        sd_publish(&sd);
        rc |= sd_save(dir, "wrap", &sd);
        /* a PAD that does not reach the end; a record crossing the end */
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        sd_record(&sd, MDR_SHM_R_PAD, 8, ctl, 8);
        sd_publish(&sd);
        rc |= sd_save(dir, "pad-short", &sd);
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        for (k = 0; k < 7; k++)
            sd_record(&sd, MDR_SHM_R_CTRL, 500, ctl, 500);
        sd_publish(&sd);
        sd_record(&sd, MDR_SHM_R_CTRL, FZ_SLOT, ctl, FZ_SLOT);
        sd_publish(&sd);
        rc |= sd_save(dir, "record-across-end", &sd);
    }
    /* puts into V's region: in, at the edge, beyond, stale key, count that lies */
    {
        struct {
            uint64_t raddr, key, count;
            uint32_t len;
            const char *name;
        } p[] = {
            {base, key, 100, 24 + 100, "put-ok"},
            {base + FZ_REGION_LEN - 8, key, 8, 24 + 8, "put-edge"},
            {base + FZ_REGION_LEN - 8, key, 16, 24 + 16, "put-past-end"},
            {base, key + (1ull << 32), 16, 24 + 16, "put-stale-key"},
            {base, key, 200, 24 + 100, "put-count-lies"},
            {base, key, 0, 24, "put-empty"},
            {base, key, 8, 16, "put-short-record"},
        };
        for (k = 0; k < (int)(sizeof(p) / sizeof(p[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_REGION | (k & 1 ? FZ_S_NO_CMA : 0));
            sd_put_record(&sd, p[k].raddr, p[k].key, p[k].count, p[k].len);
            sd_record(&sd, MDR_SHM_R_CTRL, 16, ctl, 16);
            sd_publish(&sd);
            rc |= sd_save(dir, p[k].name, &sd);
        }
    }
    /* tails that lie; unknown record types; producer flags and reasons */
    {
        const uint64_t tails[] = {4097, 1ull << 63, (uint64_t)-8, 3};
        for (k = 0; k < 4; k++) {
            char name[32];
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, 0);
            sd_record(&sd, MDR_SHM_R_CTRL, 16, ctl, 16);
            sd_u8(&sd, FZ_OP_TAIL);
            sd_u64(&sd, tails[k]);
            snprintf(name, sizeof(name), "tail-%d", k);
            rc |= sd_save(dir, name, &sd);
        }
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        sd_record(&sd, 9, 16, ctl, 16);
        sd_publish(&sd);
        rc |= sd_save(dir, "unknown-type", &sd);
        for (k = 1; k < 4; k++) {
            char name[32];
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, 0);
            sd_record(&sd, MDR_SHM_R_CTRL, 16, ctl, 16);
            sd_u8(&sd, FZ_OP_FLAGS);
            sd_u8(&sd, (uint8_t)k);
            sd_u32(&sd, (uint32_t)MADRAIL_ERR_RAIL_PROTO);
            sd_put(&sd, ctl, MDR_SHM_REASON_MAX); /* not terminated */
            snprintf(name, sizeof(name), "flags-%d", k);
            rc |= sd_save(dir, name, &sd);
        }
    }
    /* claims with forged identities */
    for (k = 0; k < 8; k++) {
        static const uint8_t who[8] = {0, 1, 2, 3, 8, 16, 64, 4 | 32};
        char name[32];
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_RAW_CLAIM | FZ_S_REGION | (k == 0 ? FZ_S_REFUSE : 0));
        sd_u8(&sd, (uint8_t)k);
        sd_u8(&sd, who[k]);
        if (who[k] & 4)
            sd_u64(&sd, 12345);
        if (who[k] & 8)
            sd_u64(&sd, 0xdeadbeef);
        if (who[k] & 16)
            sd_u32(&sd, 1);
        if (who[k] & 64)
            sd_put(&sd, ctl, MDR_SHM_NAME_MAX);
        sd_record(&sd, MDR_SHM_R_CTRL, 32, ctl, 32);
        sd_publish(&sd);
        snprintf(name, sizeof(name), "claim-%d", k);
        rc |= sd_save(dir, name, &sd);
    }
    /* V sends and puts back to P (its own ring in P's segment) */
    {
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_REGION | FZ_S_REPLY);
        sd_record(&sd, MDR_SHM_R_CTRL, 32, ctl, 32);
        sd_publish(&sd);
        sd_u8(&sd, FZ_OP_SEND);
        sd_u8(&sd, 0);
        sd_u16(&sd, 200);
        sd_u8(&sd, FZ_OP_SEND);
        sd_u8(&sd, 1);
        sd_u16(&sd, 3000);
        sd_u64(&sd, base);
        sd_u64(&sd, key);
        sd_u8(&sd, FZ_OP_PROGRESS);
        sd_u8(&sd, 3);
        sd_u8(&sd, FZ_OP_DESTROY);
        sd_u8(&sd, 2);
        rc |= sd_save(dir, "send-back", &sd);
    }
    /* a peer scribbling over segment headers and ring control blocks */
    {
        const struct {
            uint8_t seg;
            uint32_t off;
            uint64_t v;
            const char *name;
        } pk[] = {
            {1, offsetof(mdr_shm_seg_hdr_t, nrings), 100000, "poke-p-nrings"},
            {1, offsetof(mdr_shm_seg_hdr_t, ring_bytes), 1ull << 40, "poke-p-ring-bytes"},
            {1, offsetof(mdr_shm_seg_hdr_t, ctl_off), 1ull << 40, "poke-p-ctl-off"},
            {0, offsetof(mdr_shm_seg_hdr_t, ctl_off), 1ull << 40, "poke-v-ctl-off"},
            {0, offsetof(mdr_shm_seg_hdr_t, data_off), 1ull << 40, "poke-v-data-off"},
            {0, offsetof(mdr_shm_seg_hdr_t, claims), 7, "poke-v-claims"},
        };
        for (k = 0; k < (int)(sizeof(pk) / sizeof(pk[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_REGION);
            sd_u8(&sd, FZ_OP_POKE);
            sd_u8(&sd, pk[k].seg);
            sd_u32(&sd, pk[k].off);
            sd_u8(&sd, 8);
            sd_u64(&sd, pk[k].v);
            sd_record(&sd, MDR_SHM_R_CTRL, 32, ctl, 32);
            sd_publish(&sd);
            sd_u8(&sd, FZ_OP_SEND);
            sd_u8(&sd, 0);
            sd_u16(&sd, 100);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 2);
            rc |= sd_save(dir, pk[k].name, &sd);
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
    /* the driver alone: no context reads MADRAIL_LOG_LEVEL (default: errors) */
    mdr_log_set_level(getenv("MADRAIL_LOG_LEVEL") != NULL
                          ? mdr_log_level_parse(getenv("MADRAIL_LOG_LEVEL"))
                          : MDR_LOG_ERROR);
    if (dir != NULL) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "gen_seeds: %s: %s\n", dir, strerror(errno));
            exit(1);
        }
        exit(fz_shm_seeds(dir) == 0 ? 0 : 1);
    }
    return 0;
}
