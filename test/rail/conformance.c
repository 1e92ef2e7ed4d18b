/*
 * Driver conformance suite: every promise of src/rails/rail.h, checked
 * against each rail spec given on the command line (default: one spec per
 * built driver).  It drives the ops table directly, without the core, so a
 * failure names the driver and the promise.  Each check opens its own pair
 * of rails of the spec in this process (distinct uuids) and closes them, so
 * checks are independent and close is exercised with every kind of state;
 * run it under AddressSanitizer and LeakSanitizer turns "close with
 * traffic pending" into a leak check.  Checks that need a capability skip
 * with the reason; the loop driver's fault knobs get checks of their own.
 *
 * Output: "ok <spec> <check>", "FAIL <spec> <check>: why", "SKIP <spec>
 * <check>: why", then a summary.  Exit 0 pass, 1 fail, 77 nothing ran.
 */
#include "mdr_config.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rails/rail.h"
#include "util/clock.h"
#include "util/log.h"

#include "rail_test_util.h"

#define T_SLOT 4096
#define T_SLOTS 64
#define T_TIMEOUT 30.0 /* seconds any single wait may take */
#define T_BURST 5000
#define T_WHY 512
#define T_MAXREC 32

enum { T_PASS = 0, T_FAIL = 1, T_SKIP = 2 };

typedef struct t_side t_side_t;
typedef struct t_ep t_ep_t;
typedef void (*t_recv_fn)(t_ep_t *te, const void *data, size_t len);

struct t_ep {
    t_side_t *side;
    mdr_ep_t *ep;
    int destroyed;
    uint64_t nrecv;
    t_recv_fn on_recv;
    void *arg;
    /* t_recv_seq: sequence and content checker */
    uint64_t next_seq;
    int bad;
    char why[256];
    /* t_recv_record */
    size_t rec_len[T_MAXREC];
    uint8_t *rec[T_MAXREC];
    /* ep_failed */
    int nfailed;
    madrail_status_t fail_status;
    char fail_reason[256];
    int watch_unsent;      /* ep_failed records ep_unsent of the ep then: */
    size_t unsent_at_fail;
};

struct t_side {
    const mdr_rail_ops_t *ops;
    mdr_rail_t *rail;
    mdr_rail_attr_t attr;
    uint64_t uuid;
    uint8_t addr[256];
    size_t addr_len;
    int naccepted;
    uint64_t accepted_uuid;
    int refuse;
    t_ep_t own; /* the ep this side created */
    t_ep_t acc; /* the ep the peer's connection made here */
};

typedef struct t_pair {
    t_side_t a, b;
} t_pair_t;

typedef struct t_spec {
    const char *full; /* as given: "loop:f0;delay=2" */
    char drv[32];     /* "loop" */
    const char *rest; /* "f0;delay=2" */
    const mdr_rail_ops_t *ops;
} t_spec_t;

typedef struct t_comp {
    mdr_completion_t c; /* first: the callback casts back */
    int calls;
    madrail_status_t status;
} t_comp_t;

/* Contract violations seen by the upcalls, counted per spec. */
static __thread int t_in_progress;
static int t_upcalls;        /* every upcall */
static int t_bad_upcalls;    /* upcall outside progress() */
static int t_dead_upcalls;   /* upcall for an ep after ep_destroy */
static int t_close_upcalls;  /* upcall from inside close() */
static int t_misaligned;     /* ctrl data not 8-byte aligned */
static uint64_t t_uuid_next = 1;
/* When set, the next t_side_open uses this job key instead of rt_job_key. */
static const uint8_t *t_open_key;

static int t_nok, t_nfail, t_nskip;

static void t_count_upcall(void)
{
    __atomic_fetch_add(&t_upcalls, 1, __ATOMIC_RELAXED);
    if (!t_in_progress)
        __atomic_fetch_add(&t_bad_upcalls, 1, __ATOMIC_RELAXED);
}

/* ---------------- data patterns ---------------- */

/* rt_pat, rt_fill: rail_test_util.h */

/* Burst message length for sequence number seq: 8 .. T_SLOT. */
static size_t t_msg_len(uint64_t seq)
{
    return 8 + (size_t)((seq * 7919u) % (T_SLOT - 7));
}

/* A sequenced message: 8-byte seq, then pattern bytes. */
static size_t t_make_msg(uint8_t *buf, uint64_t seq, size_t len)
{
    memcpy(buf, &seq, 8);
    rt_fill(buf + 8, len - 8, seq);
    return len;
}

/* ---------------- upcalls ---------------- */

static void t_recv_seq(t_ep_t *te, const void *data, size_t len)
{
    const uint8_t *d = data;
    uint64_t seq;
    size_t i;

    if (te->bad)
        return;
    if (len < 8) {
        te->bad = 1;
        snprintf(te->why, sizeof(te->why), "message %llu: %zu bytes, too short",
                 (unsigned long long)te->next_seq, len);
        return;
    }
    memcpy(&seq, d, 8);
    if (seq != te->next_seq) {
        te->bad = 1;
        snprintf(te->why, sizeof(te->why), "expected message %llu, got %llu (out of order)",
                 (unsigned long long)te->next_seq, (unsigned long long)seq);
        return;
    }
    if (len != t_msg_len(seq)) {
        te->bad = 1;
        snprintf(te->why, sizeof(te->why), "message %llu: %zu bytes, sent %zu",
                 (unsigned long long)seq, len, t_msg_len(seq));
        return;
    }
    for (i = 8; i < len; i++) {
        if (d[i] != rt_pat(seq, i - 8)) {
            te->bad = 1;
            snprintf(te->why, sizeof(te->why), "message %llu: byte %zu differs",
                     (unsigned long long)seq, i);
            return;
        }
    }
    te->next_seq++;
}

static void t_recv_record(t_ep_t *te, const void *data, size_t len)
{
    size_t k = (size_t)te->nrecv - 1; /* nrecv already counts this one */

    if (k >= T_MAXREC)
        return;
    te->rec_len[k] = len;
    te->rec[k] = malloc(len ? len : 1);
    if (te->rec[k] != NULL && len)
        memcpy(te->rec[k], data, len);
}

static void t_up_ctrl_recv(void *cookie, const void *data, size_t len)
{
    t_ep_t *te = cookie;

    t_count_upcall();
    if (te == NULL)
        return;
    if (te->destroyed)
        __atomic_fetch_add(&t_dead_upcalls, 1, __ATOMIC_RELAXED);
    if (len >= 8 && ((uintptr_t)data & 7) != 0)
        __atomic_fetch_add(&t_misaligned, 1, __ATOMIC_RELAXED);
    te->nrecv++;
    if (te->on_recv != NULL)
        te->on_recv(te, data, len);
}

static void *t_up_ep_accepted(void *rail_cookie, uint64_t remote_uuid, mdr_ep_t *new_ep)
{
    t_side_t *s = rail_cookie;

    t_count_upcall();
    s->naccepted++;
    s->accepted_uuid = remote_uuid;
    if (s->refuse || s->acc.ep != NULL)
        return NULL;
    s->acc.ep = new_ep;
    return &s->acc;
}

static void t_up_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    t_ep_t *te = cookie;

    t_count_upcall();
    if (te == NULL)
        return;
    if (te->destroyed)
        __atomic_fetch_add(&t_dead_upcalls, 1, __ATOMIC_RELAXED);
    te->nfailed++;
    if (te->watch_unsent && te->ep != NULL)
        te->unsent_at_fail = te->side->ops->ep_unsent(te->ep);
    te->fail_status = status;
    snprintf(te->fail_reason, sizeof(te->fail_reason), "%s", reason ? reason : "(null)");
}

static const mdr_rail_upcalls_t t_upcalls_tab = {t_up_ctrl_recv, t_up_ep_accepted,
                                                 t_up_ep_failed};

static void t_comp_cb(mdr_completion_t *c, madrail_status_t status)
{
    t_comp_t *tc = (t_comp_t *)c;

    t_count_upcall();
    tc->calls++;
    tc->status = status;
}

static void t_comp_init(t_comp_t *tc)
{
    memset(tc, 0, sizeof(*tc));
    tc->c.cb = t_comp_cb;
    tc->status = MADRAIL_INPROGRESS;
}

/* ---------------- rails ---------------- */

static void t_ep_init(t_ep_t *te, t_side_t *s)
{
    memset(te, 0, sizeof(*te));
    te->side = s;
    te->on_recv = t_recv_seq;
}

static int t_side_open(t_side_t *s, const mdr_rail_ops_t *ops, const char *rest,
                       const char *const *overrides, char *why)
{
    mdr_rail_params_t prm;
    madrail_status_t st;

    memset(s, 0, sizeof(*s));
    t_ep_init(&s->own, s);
    t_ep_init(&s->acc, s);
    s->ops = ops;
    s->uuid = ((uint64_t)getpid() << 32) ^ 0x5a5a000000000000ull ^ t_uuid_next++;
    prm = rt_params(s->uuid, &t_upcalls_tab, s, T_SLOT, T_SLOTS, overrides);
    if (t_open_key != NULL)
        prm.job_key = t_open_key;
    st = ops->open(rest, &prm, &s->rail);
    if (st != MADRAIL_OK) {
        snprintf(why, T_WHY, "open(\"%s\") failed: %s", rest, madrail_status_str(st));
        s->rail = NULL;
        return -1;
    }
    ops->query(s->rail, &s->attr);
    s->addr_len = s->attr.addr_len;
    if (s->addr_len == 0 || s->addr_len > sizeof(s->addr)) {
        snprintf(why, T_WHY, "addr_len %zu (want 1..%zu)", s->addr_len, sizeof(s->addr));
        goto err;
    }
    st = ops->addr_pack(s->rail, s->addr, s->addr_len);
    if (st != MADRAIL_OK) {
        snprintf(why, T_WHY, "addr_pack failed: %s", madrail_status_str(st));
        goto err;
    }
    return 0;
err:
    ops->close(s->rail);
    s->rail = NULL;
    return -1;
}

static void t_ep_clear(t_ep_t *te)
{
    int i;
    for (i = 0; i < T_MAXREC; i++) {
        free(te->rec[i]);
        te->rec[i] = NULL;
    }
}

static void t_side_close(t_side_t *s, int destroy_eps)
{
    int before;

    if (s->rail != NULL) {
        if (destroy_eps) {
            if (s->own.ep != NULL) {
                s->ops->ep_destroy(s->own.ep);
                s->own.ep = NULL;
                s->own.destroyed = 1;
            }
            if (s->acc.ep != NULL) {
                s->ops->ep_destroy(s->acc.ep);
                s->acc.ep = NULL;
                s->acc.destroyed = 1;
            }
        }
        before = t_upcalls;
        s->ops->close(s->rail);
        if (t_upcalls != before)
            t_close_upcalls++;
        s->rail = NULL;
        s->own.ep = s->acc.ep = NULL;
        s->own.destroyed = s->acc.destroyed = 1;
    }
    t_ep_clear(&s->own);
    t_ep_clear(&s->acc);
}

static int t_pair_open2(t_pair_t *p, const t_spec_t *sp, const char *rest_a, const char *rest_b,
                        const char *const *overrides, char *why)
{
    memset(p, 0, sizeof(*p));
    if (t_side_open(&p->a, sp->ops, rest_a, overrides, why) != 0)
        return -1;
    if (t_side_open(&p->b, sp->ops, rest_b, overrides, why) != 0) {
        t_side_close(&p->a, 1);
        return -1;
    }
    return 0;
}

static int t_pair_open(t_pair_t *p, const t_spec_t *sp, char *why)
{
    return t_pair_open2(p, sp, sp->rest, sp->rest, NULL, why);
}

static void t_pair_close(t_pair_t *p)
{
    t_side_close(&p->a, 1);
    t_side_close(&p->b, 1);
}

/* s creates its ep toward peer (lazily: no traffic yet). */
static madrail_status_t t_connect(t_side_t *s, t_side_t *peer)
{
    return s->ops->ep_create(s->rail, peer->uuid, peer->addr, peer->addr_len, &s->own,
                             &s->own.ep);
}

static int t_prog(t_side_t *s)
{
    int n;
    if (s->rail == NULL)
        return 0;
    t_in_progress++;
    n = s->ops->progress(s->rail);
    t_in_progress--;
    return n;
}

static void t_prog2(t_pair_t *p)
{
    t_prog(&p->a);
    t_prog(&p->b);
}

/* Progress both sides until cond holds or T_TIMEOUT passes; value: cond. */
#define T_WAIT(_p, _cond)                                                                    \
    ({                                                                                       \
        double _dl = mdr_time_sec() + T_TIMEOUT;                                             \
        int _ok;                                                                             \
        while (!(_ok = !!(_cond)) && mdr_time_sec() < _dl)                                   \
            t_prog2(_p);                                                                     \
        _ok;                                                                                 \
    })

/* Fail the current check with a message (needs rc, why and label out). */
#define T_CHECK(_cond, ...)                                                                  \
    do {                                                                                     \
        if (!(_cond)) {                                                                      \
            snprintf(why, T_WHY, __VA_ARGS__);                                               \
            rc = T_FAIL;                                                                     \
            goto out;                                                                        \
        }                                                                                    \
    } while (0)

/* Send len bytes from buf in up to three iovec pieces, retrying
 * NORESOURCE as the core would (progress, then again). */
static madrail_status_t t_send(t_pair_t *p, t_ep_t *te, const void *buf, size_t len,
                               unsigned *nores_p)
{
    const uint8_t *b = buf;
    struct iovec iov[3];
    madrail_status_t st;
    double dl = mdr_time_sec() + T_TIMEOUT;
    int cnt = 0;

    if (len == 0) {
        iov[0].iov_base = (void *)b;
        iov[0].iov_len = 0;
        cnt = 1;
    } else {
        size_t cut1 = len < 8 ? len : 8, cut2 = cut1 + (len - cut1) / 2;
        iov[cnt].iov_base = (void *)b;
        iov[cnt++].iov_len = cut1;
        if (cut2 > cut1) {
            iov[cnt].iov_base = (void *)(b + cut1);
            iov[cnt++].iov_len = cut2 - cut1;
        }
        if (len > cut2) {
            iov[cnt].iov_base = (void *)(b + cut2);
            iov[cnt++].iov_len = len - cut2;
        }
    }
    for (;;) {
        st = te->side->ops->ctrl_send(te->ep, iov, cnt);
        if (st != MADRAIL_ERR_NORESOURCE || mdr_time_sec() > dl)
            return st;
        if (nores_p != NULL)
            (*nores_p)++;
        t_prog2(p);
    }
}

static madrail_status_t t_send_seq(t_pair_t *p, t_ep_t *te, uint64_t seq, unsigned *nores_p)
{
    uint8_t buf[T_SLOT];
    size_t len = t_make_msg(buf, seq, t_msg_len(seq));
    return t_send(p, te, buf, len, nores_p);
}

/* Start a put, retrying NORESOURCE; OK means done (tc not called). */
static madrail_status_t t_put_start(t_pair_t *p, t_ep_t *te, const void *local, size_t len,
                                    mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                    size_t rkey_len, t_comp_t *tc)
{
    double dl = mdr_time_sec() + T_TIMEOUT;
    madrail_status_t st;

    t_comp_init(tc);
    for (;;) {
        st = te->side->ops->put(te->ep, local, len, lmemh, raddr, rkey, rkey_len, &tc->c);
        if (st != MADRAIL_ERR_NORESOURCE || mdr_time_sec() > dl)
            break;
        t_prog2(p);
    }
    if (st == MADRAIL_OK)
        tc->status = MADRAIL_OK;
    return st;
}

/* Start a put and wait for its completion; returns the final status. */
static madrail_status_t t_put_wait(t_pair_t *p, t_ep_t *te, const void *local, size_t len,
                                   mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                   size_t rkey_len, t_comp_t *tc)
{
    madrail_status_t st = t_put_start(p, te, local, len, lmemh, raddr, rkey, rkey_len, tc);

    if (st != MADRAIL_INPROGRESS)
        return st;
    if (!T_WAIT(p, tc->calls > 0))
        return MADRAIL_INPROGRESS;
    return tc->status;
}

/* ---------------- generic checks ---------------- */

static int t_is_unsup(const mdr_rail_ops_t *ops)
{
    return ops->put == mdr_rail_unsup_put;
}

static int chk_attr(const t_spec_t *sp, char *why)
{
    const mdr_rail_ops_t *o = sp->ops;
    const mdr_rail_attr_t *at;
    int rc = T_PASS;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    at = &p.a.attr;
    T_CHECK(strcmp(o->name, sp->drv) == 0, "ops->name \"%s\" for driver \"%s\"", o->name,
            sp->drv);
    T_CHECK(o->open && o->close && o->query && o->addr_pack && o->ep_create && o->ep_destroy &&
                o->ep_backlog && o->ep_unsent && o->ep_idle && o->ctrl_send && o->mem_reg &&
                o->mem_dereg && o->rkey_pack && o->put && o->progress && o->flush,
            "an operation is NULL (missing ones must point at the mdr_rail_unsup_* stubs)");
    T_CHECK(at->name[0] != '\0' && memchr(at->name, '\0', sizeof(at->name)) != NULL,
            "empty or unterminated rail name");
    T_CHECK(strncmp(at->name, sp->drv, strlen(sp->drv)) == 0,
            "rail name \"%s\" does not start with the driver name", at->name);
    T_CHECK(at->max_ctrl >= T_SLOT, "max_ctrl %zu < slot_size %d", at->max_ctrl, T_SLOT);
    T_CHECK(at->addr_len > 0 && at->addr_len <= 256, "addr_len %zu", at->addr_len);
    T_CHECK(at->latency_us > 0 && isfinite(at->latency_us), "latency_us %g", at->latency_us);
    T_CHECK(at->bandwidth_mbs > 0 && isfinite(at->bandwidth_mbs), "bandwidth_mbs %g",
            at->bandwidth_mbs);
    T_CHECK(!(at->caps & MDR_RAIL_CAP_PUT_HW) || (at->caps & MDR_RAIL_CAP_PUT),
            "PUT_HW without PUT");
    T_CHECK(o->size == sizeof(mdr_rail_ops_t) && mdr_rail_ops_check(o) == MADRAIL_OK,
            "ops table refused by mdr_rail_ops_check (size %zu)", o->size);
    T_CHECK((at->caps & ~o->caps) == 0,
            "rail caps %#x include bits %#x its driver's ops->caps %#x do not list", at->caps,
            at->caps & ~o->caps, o->caps);
    T_CHECK(at->caps == p.b.attr.caps && at->max_ctrl == p.b.attr.max_ctrl,
            "two rails of one spec report different caps or max_ctrl");
    if (at->caps & MDR_RAIL_CAP_PUT) {
        T_CHECK(!t_is_unsup(o) && o->mem_reg != mdr_rail_unsup_mem_reg &&
                    o->rkey_pack != mdr_rail_unsup_rkey_pack,
                "advertises MDR_RAIL_CAP_PUT but put/mem_reg/rkey_pack is the unsupported stub");
        T_CHECK(at->max_rkey > 0 && at->max_rkey <= 1024, "max_rkey %zu with PUT",
                at->max_rkey);
    }
    T_CHECK(p.a.addr_len != p.b.addr_len || memcmp(p.a.addr, p.b.addr, p.a.addr_len) != 0,
            "two rails packed the same address");
out:
    t_pair_close(&p);
    return rc;
}

static int chk_connect_lazy(const t_spec_t *sp, char *why)
{
    madrail_status_t st;
    int rc = T_PASS, before;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    before = t_upcalls;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    T_CHECK(t_upcalls == before, "ep_create made an upcall");
    T_CHECK(p.a.ops->ep_idle(p.a.own.ep) && p.a.ops->ep_backlog(p.a.own.ep) == 0 &&
                p.a.ops->ep_unsent(p.a.own.ep) == 0,
            "fresh ep is not idle / has backlog %zu / unsent %zu",
            p.a.ops->ep_backlog(p.a.own.ep), p.a.ops->ep_unsent(p.a.own.ep));
    /* Nothing may happen at the peer before traffic. */
    t_prog2(&p);
    t_prog2(&p);
    T_CHECK(p.b.naccepted == 0, "peer accepted before any traffic (connection not lazy?)");

    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1 || p.a.own.nfailed), "first message never arrived");
    T_CHECK(p.b.naccepted == 1, "peer saw %d ep_accepted upcalls, want 1", p.b.naccepted);
    T_CHECK(p.b.accepted_uuid == p.a.uuid, "ep_accepted gave uuid %016llx, want %016llx",
            (unsigned long long)p.b.accepted_uuid, (unsigned long long)p.a.uuid);
    T_CHECK(!p.b.acc.bad, "%s", p.b.acc.why);

    st = t_send_seq(&p, &p.b.acc, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send on the accepted ep: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.a.own.nrecv >= 1), "reply on the accepted ep never arrived");
    T_CHECK(!p.a.own.bad, "%s", p.a.own.why);
    T_CHECK(p.a.naccepted == 0, "the connecting side got an ep_accepted for its own connection");
    T_CHECK(p.a.own.nfailed == 0 && p.b.acc.nfailed == 0, "ep failed: %.200s%.200s",
            p.a.own.fail_reason, p.b.acc.fail_reason);
out:
    t_pair_close(&p);
    return rc;
}

static int chk_connect_both(const t_spec_t *sp, char *why)
{
    madrail_status_t st;
    int rc = T_PASS, i;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create a->b: %s", madrail_status_str(st));
    st = t_connect(&p.b, &p.a);
    T_CHECK(st == MADRAIL_OK, "ep_create b->a: %s", madrail_status_str(st));
    for (i = 0; i < 3; i++) {
        st = t_send_seq(&p, &p.a.own, (uint64_t)i, NULL);
        T_CHECK(st == MADRAIL_OK, "ctrl_send a->b: %s", madrail_status_str(st));
        st = t_send_seq(&p, &p.b.own, (uint64_t)i, NULL);
        T_CHECK(st == MADRAIL_OK, "ctrl_send b->a: %s", madrail_status_str(st));
    }
    T_CHECK(T_WAIT(&p, (p.a.own.nrecv + p.a.acc.nrecv >= 3 && p.b.own.nrecv + p.b.acc.nrecv >= 3) ||
                           p.a.own.nfailed || p.b.own.nfailed),
            "messages did not arrive (a got %llu, b got %llu)",
            (unsigned long long)(p.a.own.nrecv + p.a.acc.nrecv),
            (unsigned long long)(p.b.own.nrecv + p.b.acc.nrecv));
    T_CHECK(p.a.naccepted == 0 && p.b.naccepted == 0,
            "ep_accepted called (%d, %d) although both sides created their ep: connections "
            "not merged",
            p.a.naccepted, p.b.naccepted);
    T_CHECK(p.a.own.nrecv == 3 && p.b.own.nrecv == 3, "messages on the wrong ep");
    T_CHECK(!p.a.own.bad && !p.b.own.bad, "%s%s", p.a.own.why, p.b.own.why);
out:
    t_pair_close(&p);
    return rc;
}

/* The core completes a send once every ep it used has nothing unsent, and
 * a blocking send only drives its own side: on an open connection, a few
 * messages (no flow control in the way: a full socket or shared-memory
 * fifo waits for the receiver, as it should) leave through the sender's
 * flush and progress alone, while the receiver does nothing.  A provider
 * whose send completes on the peer's acknowledgement (libfabric's rxd)
 * cannot: skipped with the reason. */
static int chk_unsent_local(const t_spec_t *sp, char *why)
{
    enum { N = 8 };
    madrail_status_t st;
    size_t unsent, backlog;
    double dl;
    int rc = T_PASS, i;
    t_pair_t p;

    if (strstr(sp->full, "ofi_rxd") != NULL) {
        snprintf(why, T_WHY, "rxd completes a send when the peer acknowledges it");
        return T_SKIP;
    }
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1 || p.a.own.nfailed), "first message never arrived");
    for (i = 1; i <= N; i++) {
        st = t_send_seq(&p, &p.a.own, (uint64_t)i, NULL);
        T_CHECK(st == MADRAIL_OK, "ctrl_send %d: %s", i, madrail_status_str(st));
    }
    unsent = p.a.ops->ep_unsent(p.a.own.ep);
    backlog = p.a.ops->ep_backlog(p.a.own.ep);
    T_CHECK(unsent <= backlog, "ep_unsent %zu > ep_backlog %zu", unsent, backlog);
    dl = mdr_time_sec() + T_TIMEOUT;
    while ((unsent = p.a.ops->ep_unsent(p.a.own.ep)) != 0 && mdr_time_sec() < dl) {
        p.a.ops->flush(p.a.rail);
        t_prog(&p.a);
    }
    T_CHECK(unsent == 0, "%zu bytes still unsent after %.0f s of the sender's own progress "
            "(a blocking send would wait for the receiver)", unsent, T_TIMEOUT);
    T_CHECK(p.a.own.nfailed == 0, "ep failed: %.200s", p.a.own.fail_reason);
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= N + 1), "the receiver got %llu of %d messages",
            (unsigned long long)p.b.acc.nrecv, N + 1);
out:
    t_pair_close(&p);
    return rc;
}

static int chk_accept_refuse(const t_spec_t *sp, char *why)
{
    madrail_status_t st;
    int rc = T_PASS;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    p.b.refuse = 1;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK || st == MADRAIL_ERR_RAIL_DOWN, "ctrl_send: %s",
            madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.a.own.nfailed > 0), "refused connection never failed the sender's ep");
    T_CHECK(p.b.naccepted >= 1, "ep_accepted was never called");
    T_CHECK(p.b.acc.nrecv == 0, "a message was delivered on a refused connection");
out:
    t_pair_close(&p);
    return rc;
}

/* A rail of another job (another key) connects: the other side never
 * offers it to its core and nothing is delivered either way; the
 * initiator at most sees its connection fail. */
static int chk_foreign_key(const t_spec_t *sp, char *why)
{
    static const uint8_t other[MDR_JOB_KEY_LEN] = {0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5,
                                                   0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b,
                                                   0x3c, 0x2d, 0x1e, 0x0f};
    madrail_status_t st;
    int rc = T_PASS, i, lvl = mdr_log_level;
    double end;
    t_pair_t p;

    memset(&p, 0, sizeof(p));
    if (t_side_open(&p.a, sp->ops, sp->rest, NULL, why) != 0)
        return T_FAIL;
    t_open_key = other;
    i = t_side_open(&p.b, sp->ops, sp->rest, NULL, why);
    t_open_key = NULL;
    if (i != 0) {
        t_side_close(&p.a, 1);
        return T_FAIL;
    }
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    mdr_log_level = -1; /* the refusal is logged */
    for (i = 0; i < 3; i++) {
        st = t_send_seq(&p, &p.a.own, (uint64_t)i, NULL);
        if (st != MADRAIL_OK)
            break;
    }
    for (end = mdr_time_sec() + 0.3; mdr_time_sec() < end;)
        t_prog2(&p);
    mdr_log_level = lvl;
    T_CHECK(st == MADRAIL_OK || st == MADRAIL_ERR_RAIL_DOWN, "ctrl_send: %s",
            madrail_status_str(st));
    T_CHECK(p.b.naccepted == 0, "the other job's connection was offered to the core (%d times)",
            p.b.naccepted);
    T_CHECK(p.b.acc.nrecv == 0 && p.b.own.nrecv == 0, "%llu messages delivered across keys",
            (unsigned long long)(p.b.acc.nrecv + p.b.own.nrecv));
out:
    mdr_log_level = lvl;
    t_pair_close(&p);
    return rc;
}

static int chk_ctrl_sizes(const t_spec_t *sp, char *why)
{
    static const size_t sizes[] = {0, 1, T_SLOT, 0, 1};
    const size_t n = sizeof(sizes) / sizeof(sizes[0]);
    uint8_t big[T_SLOT];
    madrail_status_t st;
    int rc = T_PASS, dir;
    size_t i, k;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    p.b.acc.on_recv = t_recv_record;
    p.a.own.on_recv = t_recv_record;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    for (dir = 0; dir < 2; dir++) {
        t_ep_t *tx = dir == 0 ? &p.a.own : &p.b.acc, *rx = dir == 0 ? &p.b.acc : &p.a.own;
        for (i = 0; i < n; i++) {
            rt_fill(big, sizes[i], 100 + i);
            st = t_send(&p, tx, big, sizes[i], NULL);
            T_CHECK(st == MADRAIL_OK, "ctrl_send of %zu bytes: %s", sizes[i],
                    madrail_status_str(st));
        }
        T_CHECK(T_WAIT(&p, rx->nrecv >= n), "%s: %llu of %zu messages arrived",
                dir ? "b->a" : "a->b", (unsigned long long)rx->nrecv, n);
        for (i = 0; i < n; i++) {
            T_CHECK(rx->rec[i] != NULL, "out of memory");
            T_CHECK(rx->rec_len[i] == sizes[i], "%s message %zu: %zu bytes, sent %zu",
                    dir ? "b->a" : "a->b", i, rx->rec_len[i], sizes[i]);
            for (k = 0; k < sizes[i]; k++)
                T_CHECK(rx->rec[i][k] == rt_pat(100 + i, k), "%s message %zu: byte %zu differs",
                        dir ? "b->a" : "a->b", i, k);
        }
        if (dir == 0)
            T_CHECK(p.b.acc.ep != NULL, "no accepted ep");
    }
    for (i = 0; i < 10; i++)
        t_prog2(&p);
    T_CHECK(p.a.own.nrecv == n && p.b.acc.nrecv == n, "extra messages arrived");
out:
    t_pair_close(&p);
    return rc;
}

static int chk_ctrl_burst(const t_spec_t *sp, char *why, char *note)
{
    unsigned nores = 0;
    madrail_status_t st;
    int rc = T_PASS;
    uint64_t i;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    /* First message establishes the accepted ep so both directions can run. */
    st = t_send_seq(&p, &p.a.own, 0, &nores);
    T_CHECK(st == MADRAIL_OK, "ctrl_send 0: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.ep != NULL), "no ep_accepted");
    for (i = 0; i < T_BURST; i++) {
        if (i > 0) {
            st = t_send_seq(&p, &p.a.own, i, &nores);
            T_CHECK(st == MADRAIL_OK, "ctrl_send a->b %llu: %s", (unsigned long long)i,
                    madrail_status_str(st));
        }
        st = t_send_seq(&p, &p.b.acc, i, &nores);
        T_CHECK(st == MADRAIL_OK, "ctrl_send b->a %llu: %s", (unsigned long long)i,
                madrail_status_str(st));
        T_CHECK(!p.a.own.bad && !p.b.acc.bad, "%s%s", p.a.own.why, p.b.acc.why);
    }
    T_CHECK(T_WAIT(&p, (p.a.own.nrecv >= T_BURST && p.b.acc.nrecv >= T_BURST) ||
                           p.a.own.bad || p.b.acc.bad),
            "arrived a->b %llu, b->a %llu of %d", (unsigned long long)p.b.acc.nrecv,
            (unsigned long long)p.a.own.nrecv, T_BURST);
    T_CHECK(!p.a.own.bad && !p.b.acc.bad, "%s%s", p.a.own.why, p.b.acc.why);
    T_CHECK(p.a.own.nfailed == 0 && p.b.acc.nfailed == 0, "ep failed: %.200s%.200s",
            p.a.own.fail_reason, p.b.acc.fail_reason);
    snprintf(note, 128, "%u no-resource retries", nores);
out:
    t_pair_close(&p);
    return rc;
}

/* Target memory for put checks: a buffer with guard bytes, a region in its
 * middle, and a model of what it must contain. */
typedef struct t_target {
    uint8_t *buf, *model;
    size_t buf_len, reg_off, reg_len;
    mdr_memh_t *memh;
    uint8_t rkey[1024];
    size_t rkey_len;
} t_target_t;

static int t_target_make(t_side_t *s, t_target_t *t, size_t reg_len, size_t guard,
                         unsigned access, uint64_t peer, char *why)
{
    madrail_status_t st;

    memset(t, 0, sizeof(*t));
    t->buf_len = reg_len + 2 * guard;
    t->reg_off = guard;
    t->reg_len = reg_len;
    t->buf = malloc(t->buf_len);
    t->model = malloc(t->buf_len);
    if (t->buf == NULL || t->model == NULL) {
        snprintf(why, T_WHY, "out of memory");
        return -1;
    }
    memset(t->buf, 0x5a, t->buf_len);
    memset(t->model, 0x5a, t->buf_len);
    st = s->ops->mem_reg(s->rail, t->buf + guard, reg_len, access, &t->memh);
    if (st != MADRAIL_OK) {
        snprintf(why, T_WHY, "mem_reg of %zu bytes: %s", reg_len, madrail_status_str(st));
        t->memh = NULL;
        return -1;
    }
    if (s->attr.max_rkey > sizeof(t->rkey)) {
        snprintf(why, T_WHY, "max_rkey %zu too large", s->attr.max_rkey);
        return -1;
    }
    st = s->ops->rkey_pack(s->rail, t->memh, peer, t->rkey, &t->rkey_len);
    if (st != MADRAIL_OK || t->rkey_len == 0 || t->rkey_len > s->attr.max_rkey) {
        snprintf(why, T_WHY, "rkey_pack: %s, %zu bytes (max_rkey %zu)", madrail_status_str(st),
                 t->rkey_len, s->attr.max_rkey);
        return -1;
    }
    return 0;
}

static void t_target_free(t_side_t *s, t_target_t *t)
{
    if (t->memh != NULL && s->rail != NULL)
        s->ops->mem_dereg(s->rail, t->memh);
    free(t->buf);
    free(t->model);
    memset(t, 0, sizeof(*t));
}

static uint64_t t_raddr(const t_target_t *t, size_t off)
{
    return (uint64_t)(uintptr_t)(t->buf + t->reg_off + off);
}

/* First differing byte of target vs model, or -1. */
static long t_target_diff(const t_target_t *t)
{
    size_t i;
    if (memcmp(t->buf, t->model, t->buf_len) == 0)
        return -1;
    for (i = 0; i < t->buf_len; i++)
        if (t->buf[i] != t->model[i])
            return (long)i;
    return -1;
}

static int t_need_put(const t_spec_t *sp, t_pair_t *p, char *why)
{
    (void)sp;
    if (!(p->a.attr.caps & MDR_RAIL_CAP_PUT)) {
        snprintf(why, T_WHY, "rail has no MDR_RAIL_CAP_PUT");
        return T_SKIP;
    }
    return T_PASS;
}

/* Marker message after a put completed, to know the data is in place. */
static int t_marker(t_pair_t *p, t_ep_t *tx, t_ep_t *rx, uint64_t *seq)
{
    if (t_send_seq(p, tx, *seq, NULL) != MADRAIL_OK)
        return -1;
    (*seq)++;
    return T_WAIT(p, rx->nrecv >= *seq || rx->bad) && !rx->bad ? 0 : -1;
}

static int chk_put_sizes(const t_spec_t *sp, char *why)
{
    static const struct {
        size_t len, roff, loff;
    } puts[] = {{1, 5, 0}, {4097, 17, 3}, {4u << 20, 33, 1}, {4097, 1, 7}};
    const size_t n = sizeof(puts) / sizeof(puts[0]);
    size_t src_len = (4u << 20) + 64;
    mdr_memh_t *lmemh = NULL;
    t_target_t t;
    uint8_t *src = NULL;
    madrail_status_t st;
    uint64_t mseq = 0;
    int rc, cheap;
    long d;
    size_t i;
    t_comp_t tc;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    rc = t_need_put(sp, &p, why);
    if (rc != T_PASS)
        goto out;
    cheap = (p.a.attr.caps & MDR_RAIL_CAP_REG_CHEAP) != 0;
    if (t_target_make(&p.b, &t, (4u << 20) + 64, 4096, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    src = malloc(src_len);
    T_CHECK(src != NULL, "out of memory");
    rt_fill(src, src_len, 77);
    st = p.a.ops->mem_reg(p.a.rail, src, src_len, MDR_MEM_LOCAL, &lmemh);
    T_CHECK(st == MADRAIL_OK, "mem_reg of the source: %s", madrail_status_str(st));
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));

    /* The first put is the first traffic: it must connect lazily too. */
    for (i = 0; i < n; i++) {
        mdr_memh_t *lm = (cheap && i == n - 1) ? NULL : lmemh;
        rt_fill(src + puts[i].loff, puts[i].len, 1000 + i);
        st = t_put_wait(&p, &p.a.own, src + puts[i].loff, puts[i].len, lm,
                        t_raddr(&t, puts[i].roff), t.rkey, t.rkey_len, &tc);
        T_CHECK(st != MADRAIL_ERR_UNSUPPORTED, "advertises MDR_RAIL_CAP_PUT but put returned %s",
                madrail_status_str(st));
        T_CHECK(st == MADRAIL_OK, "put of %zu bytes%s: %s%s%s", puts[i].len,
                lm ? "" : " (lmemh NULL)", madrail_status_str(st),
                p.b.acc.nfailed ? "; receiver: " : "", p.b.acc.fail_reason);
        T_CHECK(tc.calls <= 1, "completion called %d times", tc.calls);
        memcpy(t.model + t.reg_off + puts[i].roff, src + puts[i].loff, puts[i].len);
        T_CHECK(t_marker(&p, &p.a.own, &p.b.acc, &mseq) == 0,
                "control message after the put of %zu bytes did not arrive: %s", puts[i].len,
                p.b.acc.why);
        d = t_target_diff(&t);
        T_CHECK(d < 0, "after put of %zu bytes: target byte %ld (region offset %ld) is %#x, "
                       "want %#x",
                puts[i].len, d, d - (long)t.reg_off, t.buf[d], t.model[d]);
    }
    T_CHECK(p.a.own.nfailed == 0 && p.b.acc.nfailed == 0, "ep failed: %.200s%.200s",
            p.a.own.fail_reason, p.b.acc.fail_reason);
out:
    if (lmemh != NULL)
        p.a.ops->mem_dereg(p.a.rail, lmemh);
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* MDR_RAIL_CAP_PUT_REMOTE: when a put's completion is reported, its data
 * is in the target memory already (checked inside the callback, before
 * anything else runs on either side).  Rails without the bit skip. */
typedef struct t_remote_comp {
    mdr_completion_t c;
    const uint8_t *dst, *src;
    size_t len;
    int calls, placed;
    madrail_status_t status;
} t_remote_comp_t;

static void t_remote_cb(mdr_completion_t *c, madrail_status_t status)
{
    t_remote_comp_t *rc = (t_remote_comp_t *)c;

    rc->calls++;
    rc->status = status;
    rc->placed = memcmp(rc->dst, rc->src, rc->len) == 0;
}

static int chk_put_remote(const t_spec_t *sp, char *why)
{
    static const size_t lens[] = {64, 65536, 1u << 20};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    t_remote_comp_t rcomp;
    mdr_memh_t *lmemh = NULL;
    t_target_t t;
    uint8_t *src = NULL;
    madrail_status_t st;
    double dl;
    int rc;
    size_t i;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    rc = t_need_put(sp, &p, why);
    if (rc != T_PASS)
        goto out;
    if (!(p.a.attr.caps & MDR_RAIL_CAP_PUT_REMOTE)) {
        snprintf(why, T_WHY, "put completion is local (no MDR_RAIL_CAP_PUT_REMOTE)");
        rc = T_SKIP;
        goto out;
    }
    if (t_target_make(&p.b, &t, 1u << 20, 4096, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    src = malloc(1u << 20);
    T_CHECK(src != NULL, "out of memory");
    if (!(p.a.attr.caps & MDR_RAIL_CAP_REG_CHEAP)) {
        st = p.a.ops->mem_reg(p.a.rail, src, 1u << 20, MDR_MEM_LOCAL, &lmemh);
        T_CHECK(st == MADRAIL_OK, "mem_reg of the source: %s", madrail_status_str(st));
    }
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    for (i = 0; i < n; i++) {
        rt_fill(src, lens[i], 500 + i);
        memset(&rcomp, 0, sizeof(rcomp));
        rcomp.c.cb = t_remote_cb;
        rcomp.dst = t.buf + t.reg_off;
        rcomp.src = src;
        rcomp.len = lens[i];
        dl = mdr_time_sec() + T_TIMEOUT;
        do {
            st = p.a.ops->put(p.a.own.ep, src, lens[i], lmemh, t_raddr(&t, 0), t.rkey,
                              t.rkey_len, &rcomp.c);
            if (st == MADRAIL_ERR_NORESOURCE)
                t_prog2(&p);
        } while (st == MADRAIL_ERR_NORESOURCE && mdr_time_sec() < dl);
        if (st == MADRAIL_OK) /* done at once: the data must be there now */
            t_remote_cb(&rcomp.c, MADRAIL_OK);
        else
            T_CHECK(st == MADRAIL_INPROGRESS, "put of %zu bytes: %s", lens[i],
                    madrail_status_str(st));
        T_CHECK(T_WAIT(&p, rcomp.calls > 0), "put of %zu bytes never completed", lens[i]);
        T_CHECK(rcomp.status == MADRAIL_OK, "put of %zu bytes: %s", lens[i],
                madrail_status_str(rcomp.status));
        T_CHECK(rcomp.placed, "advertises MDR_RAIL_CAP_PUT_REMOTE but the put of %zu bytes "
                              "completed before its data was in the target memory", lens[i]);
    }
out:
    if (lmemh != NULL)
        p.a.ops->mem_dereg(p.a.rail, lmemh);
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* Ordering promise: the receiver checks the data when the message comes. */
typedef struct t_order_arg {
    t_target_t *t;
    size_t len;
    int rounds_ok, rounds_bad;
    char why[200];
} t_order_arg_t;

static void t_recv_order(t_ep_t *te, const void *data, size_t len)
{
    t_order_arg_t *oa = te->arg;
    uint64_t round;
    size_t i;

    if (len < 8)
        return;
    memcpy(&round, data, 8);
    for (i = 0; i < oa->len; i++) {
        if (oa->t->buf[oa->t->reg_off + i] != rt_pat(5000 + round, i)) {
            if (oa->rounds_bad++ == 0)
                snprintf(oa->why, sizeof(oa->why),
                         "round %llu: message arrived before the put's data (byte %zu)",
                         (unsigned long long)round, i);
            return;
        }
    }
    oa->rounds_ok++;
}

static int chk_put_order(const t_spec_t *sp, char *why)
{
    const int rounds = 8;
    uint8_t *src = NULL;
    t_order_arg_t oa;
    madrail_status_t st;
    t_target_t t;
    t_comp_t tc;
    uint8_t msg[8];
    uint64_t r;
    int rc;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    memset(&oa, 0, sizeof(oa));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    rc = t_need_put(sp, &p, why);
    if (rc != T_PASS)
        goto out;
    oa.len = 1u << 20;
    if (t_target_make(&p.b, &t, oa.len, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    oa.t = &t;
    p.b.acc.on_recv = t_recv_order;
    p.b.acc.arg = &oa;
    src = malloc(oa.len);
    T_CHECK(src != NULL, "out of memory");
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    for (r = 0; r < (uint64_t)rounds; r++) {
        rt_fill(src, oa.len, 5000 + r);
        st = t_put_wait(&p, &p.a.own, src, oa.len, NULL, t_raddr(&t, 0), t.rkey, t.rkey_len,
                        &tc);
        T_CHECK(st == MADRAIL_OK, "round %llu: put: %s", (unsigned long long)r,
                madrail_status_str(st));
        /* Sent right after the completion, without progressing the receiver. */
        memcpy(msg, &r, 8);
        st = t_send(&p, &p.a.own, msg, 8, NULL);
        T_CHECK(st == MADRAIL_OK, "round %llu: ctrl_send: %s", (unsigned long long)r,
                madrail_status_str(st));
        T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= r + 1), "round %llu: message never arrived",
                (unsigned long long)r);
    }
    T_CHECK(oa.rounds_bad == 0, "%s (%d of %d rounds)", oa.why, oa.rounds_bad, rounds);
    T_CHECK(oa.rounds_ok == rounds, "%d of %d rounds checked", oa.rounds_ok, rounds);
out:
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* A bad put: kind 0 straddles the region's end, 1 starts before it,
 * 2 uses the key of a deregistered region, 3 puts into a region offered
 * to another peer (refused like the others, the data intact). */
static int chk_put_bad(const t_spec_t *sp, char *why, int kind)
{
    uint8_t src[256];
    madrail_status_t st;
    t_target_t t;
    t_comp_t tc;
    uint64_t raddr;
    int rc, hw, i;
    long d;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    rc = t_need_put(sp, &p, why);
    if (rc != T_PASS)
        goto out;
    if (kind == 3 && (strcmp(sp->drv, "ucx") == 0 || strcmp(sp->drv, "ofi") == 0)) {
        snprintf(why, T_WHY, "the provider binds no key to a peer (docs/security.md)");
        rc = T_SKIP;
        goto out;
    }
    /* kind 3: the region is offered to another peer than the one that puts */
    if (t_target_make(&p.b, &t, 4096, 4096, MDR_MEM_REMOTE_WRITE,
                      kind == 3 ? p.a.uuid ^ 0x00ff00ff00ff00ffull : p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    rt_fill(src, sizeof(src), 9);
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1), "first message never arrived");

    if (kind == 0) {
        raddr = t_raddr(&t, t.reg_len - 50);
    } else if (kind == 3) {
        raddr = t_raddr(&t, 0);
    } else if (kind == 1) {
        raddr = t_raddr(&t, 0) - 16;
    } else {
        raddr = t_raddr(&t, 0);
        p.b.ops->mem_dereg(p.b.rail, t.memh);
        t.memh = NULL;
    }
    /* A software put is checked by the target, which must close the
     * connection with RAIL_PROTO; hardware RMA (PUT_HW) never involves the
     * target's CPU, so there only the initiator can report the error. */
    hw = (p.a.attr.caps & MDR_RAIL_CAP_PUT_HW) != 0;
    st = t_put_start(&p, &p.a.own, src, 100, NULL, raddr, t.rkey, t.rkey_len, &tc);
    if (st == MADRAIL_INPROGRESS)
        T_WAIT(&p, (hw || p.b.acc.nfailed > 0) && tc.calls > 0);
    else if (!hw)
        T_WAIT(&p, p.b.acc.nfailed > 0);
    /* The sender must learn: either the put itself fails, or (a software put
     * that completes when written, with no acknowledgement) its ep fails, so
     * nothing sent after the put is delivered as if the data were there. */
    T_WAIT(&p, (st != MADRAIL_OK && st != MADRAIL_INPROGRESS) ||
                   (tc.calls > 0 && tc.status != MADRAIL_OK) || p.a.own.nfailed > 0);
    T_CHECK((st != MADRAIL_OK && tc.status != MADRAIL_OK) || p.a.own.nfailed > 0,
            "bad put reported success and the sender's ep stayed up (returned %s, "
            "completion %s)",
            madrail_status_str(st), madrail_status_str(tc.status));
    if (!hw) {
        T_CHECK(p.b.acc.nfailed > 0, "receiver reported no ep_failed (put returned %s)",
                madrail_status_str(st));
        T_CHECK(p.b.acc.fail_status == MADRAIL_ERR_RAIL_PROTO,
                "receiver's ep_failed status %s, want MADRAIL_ERR_RAIL_PROTO (%s)",
                madrail_status_str(p.b.acc.fail_status), p.b.acc.fail_reason);
    }
    d = t_target_diff(&t);
    T_CHECK(d < 0, "target byte %ld (region offset %ld) was written", d, d - (long)t.reg_off);
    T_CHECK(st != MADRAIL_INPROGRESS || tc.calls == 1,
            "sender's completion called %d times, want once with an error", tc.calls);
    /* Reported once; nothing more arrives on the failed ep. */
    for (i = 0; i < 10; i++)
        t_prog2(&p);
    T_CHECK(p.b.acc.nfailed <= 1 && p.a.own.nfailed <= 1 && tc.calls <= 1,
            "failure reported more than once (receiver %d, sender %d, completion %d)",
            p.b.acc.nfailed, p.a.own.nfailed, tc.calls);
    T_CHECK(p.b.acc.nrecv == 1, "%llu messages after the failure",
            (unsigned long long)p.b.acc.nrecv - 1);
out:
    t_target_free(&p.b, &t);
    t_pair_close(&p);
    return rc;
}

static int chk_drain_idle(const t_spec_t *sp, char *why)
{
    const int nmsg = 200, nput = 4;
    uint8_t *src = NULL;
    t_comp_t tc[4];
    t_target_t t;
    madrail_status_t st;
    int rc = T_PASS, i, done, has_put;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    has_put = (p.a.attr.caps & MDR_RAIL_CAP_PUT) != 0;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.ep != NULL), "no ep_accepted");
    if (has_put) {
        if (t_target_make(&p.b, &t, 256u << 10, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
            rc = T_FAIL;
            goto out;
        }
        src = malloc(256u << 10);
        T_CHECK(src != NULL, "out of memory");
        rt_fill(src, 256u << 10, 3);
    }
    for (i = 1; i <= nmsg; i++) {
        st = t_send_seq(&p, &p.a.own, (uint64_t)i, NULL);
        T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
        st = t_send_seq(&p, &p.b.acc, (uint64_t)i - 1, NULL);
        T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
        if (has_put && i % (nmsg / nput) == 0) {
            int k = i / (nmsg / nput) - 1;
            st = t_put_start(&p, &p.a.own, src, 256u << 10, NULL, t_raddr(&t, 0), t.rkey,
                             t.rkey_len, &tc[k]);
            T_CHECK(st == MADRAIL_OK || st == MADRAIL_INPROGRESS, "put: %s",
                    madrail_status_str(st));
        }
    }
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= (uint64_t)nmsg + 1 && p.a.own.nrecv >= (uint64_t)nmsg),
            "messages did not arrive");
    if (has_put) {
        T_CHECK(T_WAIT(&p, tc[0].status != MADRAIL_INPROGRESS &&
                               tc[1].status != MADRAIL_INPROGRESS &&
                               tc[2].status != MADRAIL_INPROGRESS &&
                               tc[3].status != MADRAIL_INPROGRESS),
                "put completions missing");
        for (i = 0; i < nput; i++)
            T_CHECK(tc[i].status == MADRAIL_OK && tc[i].calls <= 1, "put %d: %s, %d calls", i,
                    madrail_status_str(tc[i].status), tc[i].calls);
    }
    done = T_WAIT(&p, p.a.ops->ep_backlog(p.a.own.ep) == 0 && p.a.ops->ep_idle(p.a.own.ep) &&
                          p.b.ops->ep_backlog(p.b.acc.ep) == 0 && p.b.ops->ep_idle(p.b.acc.ep));
    T_CHECK(done, "after draining: sender backlog %zu idle %d, receiver backlog %zu idle %d",
            p.a.ops->ep_backlog(p.a.own.ep), p.a.ops->ep_idle(p.a.own.ep),
            p.b.ops->ep_backlog(p.b.acc.ep), p.b.ops->ep_idle(p.b.acc.ep));
    T_CHECK(!p.a.own.bad && !p.b.acc.bad, "%s%s", p.a.own.why, p.b.acc.why);
out:
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* Close both rails with traffic in flight both ways (and puts), without
 * destroying the eps first.  Leaks show up under LeakSanitizer. */
static int chk_close_pending(const t_spec_t *sp, char *why)
{
    uint8_t *src = NULL;
    t_comp_t tc[2];
    t_target_t t;
    madrail_status_t st;
    int rc = T_PASS, i, before;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    memset(tc, 0, sizeof(tc));
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.ep != NULL), "no ep_accepted");
    if (p.a.attr.caps & MDR_RAIL_CAP_PUT) {
        if (t_target_make(&p.b, &t, 4u << 20, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
            rc = T_FAIL;
            goto out;
        }
        src = calloc(1, 4u << 20);
        T_CHECK(src != NULL, "out of memory");
    }
    /* Fill without progressing: stop at the first refusal. */
    for (i = 1; i <= 300; i++) {
        uint8_t buf[T_SLOT];
        struct iovec iov = {buf, t_make_msg(buf, (uint64_t)i, t_msg_len((uint64_t)i))};
        if (p.a.ops->ctrl_send(p.a.own.ep, &iov, 1) != MADRAIL_OK)
            break;
        iov.iov_len = t_make_msg(buf, (uint64_t)i - 1, t_msg_len((uint64_t)i - 1));
        p.b.ops->ctrl_send(p.b.acc.ep, &iov, 1);
    }
    if (src != NULL)
        for (i = 0; i < 2; i++) {
            t_comp_init(&tc[i]);
            p.a.ops->put(p.a.own.ep, src, 4u << 20, NULL, t_raddr(&t, 0), t.rkey, t.rkey_len,
                         &tc[i].c);
        }
    before = t_upcalls;
    t_side_close(&p.a, 0);
    t_side_close(&p.b, 0);
    T_CHECK(t_upcalls == before, "close made an upcall");
out:
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* The receiver closes its rail with traffic pending; the sender must learn
 * it (ep_failed) and get every put completion exactly once. */
static int chk_peer_close(const t_spec_t *sp, char *why)
{
    uint8_t *src = NULL;
    t_target_t t;
    t_comp_t tc;
    madrail_status_t st;
    int rc = T_PASS, i, put_started = 0;
    double dl;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    t_comp_init(&tc);
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1), "first message never arrived");
    if (p.a.attr.caps & MDR_RAIL_CAP_PUT) {
        if (t_target_make(&p.b, &t, 1u << 20, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
            rc = T_FAIL;
            goto out;
        }
        src = calloc(1, 1u << 20);
        T_CHECK(src != NULL, "out of memory");
    }
    for (i = 0; i < 50; i++) {
        uint8_t buf[T_SLOT];
        struct iovec iov = {buf, t_make_msg(buf, (uint64_t)i, t_msg_len((uint64_t)i))};
        p.b.ops->ctrl_send(p.b.acc.ep, &iov, 1);
    }
    if (src != NULL) {
        st = p.a.ops->put(p.a.own.ep, src, 1u << 20, NULL, t_raddr(&t, 0), t.rkey, t.rkey_len,
                          &tc.c);
        put_started = st == MADRAIL_INPROGRESS;
    }
    /* The receiver goes away: its memory is released with it. */
    t_side_close(&p.b, 0);
    t_target_free(&p.b, &t);

    dl = mdr_time_sec() + T_TIMEOUT;
    for (i = 0; p.a.own.nfailed == 0 && mdr_time_sec() < dl; i++) {
        uint8_t buf[T_SLOT];
        struct iovec iov = {buf, t_make_msg(buf, 1000 + (uint64_t)i, t_msg_len(1000 + (uint64_t)i))};
        if (i % 16 == 0)
            p.a.ops->ctrl_send(p.a.own.ep, &iov, 1);
        t_prog(&p.a);
    }
    T_CHECK(p.a.own.nfailed > 0, "sender's ep never failed after the peer closed its rail");
    T_CHECK(p.a.own.nfailed == 1, "ep_failed reported %d times", p.a.own.nfailed);
    if (put_started) {
        T_WAIT(&p, tc.calls > 0);
        T_CHECK(tc.calls == 1, "pending put completed %d times, want once", tc.calls);
    }
    st = t_send_seq(&p, &p.a.own, 5000, NULL);
    T_CHECK(st != MADRAIL_OK && st != MADRAIL_ERR_NORESOURCE,
            "ctrl_send on a failed ep returned %s", madrail_status_str(st));
out:
    t_target_free(&p.b, &t);
    free(src);
    t_pair_close(&p);
    return rc;
}

/* What a failed ep held unsent stays counted in ep_unsent (rail.h): the
 * core hears of the failure only with the ep_failed upcall, and takes
 * ep_unsent 0 before it for "every message left", completing sends whose
 * bytes were dropped with success (the tcp rail did, 944ad28).  The
 * receiver stops taking data; the sender sends until it refuses more
 * through its own flush and progress, and adds a put when the rail takes
 * one without registration (shm without CMA keeps puts back behind a full
 * ring); then the receiver's rail closes.  Nothing held can leave after
 * that, so ep_unsent must stay above 0 at the upcall and after it.  A rail
 * that held nothing is skipped (loop hands everything to its fabric at
 * once, shm with CMA writes puts in the call): it has nothing to drop. */
#define T_HOLD_CAP ((size_t)160 << 20) /* above any driver's queue cap + socket buffers */
#define T_HOLD_NONE ((size_t)32 << 20) /* sent with ep_unsent still 0: holds nothing */

static int chk_fail_keeps_unsent(const t_spec_t *sp, char *why, char *note)
{
    const size_t put_len = 1u << 20;
    uint8_t *src = NULL, buf[T_SLOT];
    size_t sent = 0, held, unsent;
    unsigned nores = 0;
    madrail_status_t st;
    struct iovec iov;
    uint64_t seq = 1;
    int rc = T_PASS, i, put_started = 0, has_put;
    double dl, settle;
    t_target_t t;
    t_comp_t tc;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    t_comp_init(&tc);
    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    has_put = (p.a.attr.caps & (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP)) ==
              (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP);
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1 || p.a.own.nfailed), "first message never arrived");
    /* and one back, so that each side has sent on the connection (a peer
     * that closes says so on its own sending side) */
    st = t_send_seq(&p, &p.b.acc, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send on the accepted ep: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.a.own.nrecv >= 1 || p.a.own.nfailed), "reply never arrived");
    T_CHECK(p.a.own.nfailed == 0, "ep failed: %.200s", p.a.own.fail_reason);
    if (has_put) {
        if (t_target_make(&p.b, &t, put_len, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
            rc = T_FAIL;
            goto out;
        }
        src = calloc(1, put_len);
        T_CHECK(src != NULL, "out of memory");
    }

    /* From here on the receiver does nothing.  Fill until a run of
     * refusals that the sender's own progress does not end. */
    dl = mdr_time_sec() + T_TIMEOUT;
    while (nores < 64 && sent < T_HOLD_CAP && mdr_time_sec() < dl) {
        if (sent >= T_HOLD_NONE && nores == 0 && p.a.ops->ep_unsent(p.a.own.ep) == 0)
            break;
        iov.iov_base = buf;
        iov.iov_len = t_make_msg(buf, seq, T_SLOT);
        st = p.a.ops->ctrl_send(p.a.own.ep, &iov, 1);
        if (st == MADRAIL_OK) {
            seq++;
            sent += iov.iov_len;
            nores = 0;
            continue;
        }
        T_CHECK(st == MADRAIL_ERR_NORESOURCE, "ctrl_send %llu (receiver idle): %s",
                (unsigned long long)seq, madrail_status_str(st));
        nores++;
        p.a.ops->flush(p.a.rail);
        t_prog(&p.a);
    }
    T_CHECK(p.a.own.nfailed == 0, "ep failed while its peer was merely idle: %.200s",
            p.a.own.fail_reason);
    if (has_put) {
        st = p.a.ops->put(p.a.own.ep, src, put_len, NULL, t_raddr(&t, 0), t.rkey, t.rkey_len,
                          &tc.c);
        T_CHECK(st == MADRAIL_OK || st == MADRAIL_INPROGRESS || st == MADRAIL_ERR_NORESOURCE,
                "put (receiver idle): %s", madrail_status_str(st));
        put_started = st == MADRAIL_INPROGRESS;
    }
    /* What can still leave leaves now. */
    for (settle = mdr_time_sec() + 0.1; mdr_time_sec() < settle;) {
        p.a.ops->flush(p.a.rail);
        t_prog(&p.a);
    }
    held = p.a.ops->ep_unsent(p.a.own.ep);
    if (held == 0) {
        snprintf(why, T_WHY, "nothing held unsent with the receiver idle (%zu bytes sent): "
                 "nothing to drop", sent);
        rc = T_SKIP;
        goto out;
    }
    snprintf(note, 128, "%zu bytes held%s", held, put_started ? " (with a put)" : "");

    p.a.own.watch_unsent = 1;
    t_side_close(&p.b, 0);
    dl = mdr_time_sec() + T_TIMEOUT;
    for (i = 0; p.a.own.nfailed == 0 && mdr_time_sec() < dl; i++)
        t_prog(&p.a);
    T_CHECK(p.a.own.nfailed == 1, "sender's ep failed %d times after the peer closed its rail",
            p.a.own.nfailed);
    T_CHECK(p.a.own.unsent_at_fail > 0,
            "ep_unsent 0 at the ep_failed upcall (%.100s), with %zu bytes held unsent before "
            "the peer went: the core would complete their sends with success",
            p.a.own.fail_reason, held);
    for (i = 0; i < 20; i++)
        t_prog(&p.a);
    unsent = p.a.ops->ep_unsent(p.a.own.ep);
    T_CHECK(unsent > 0, "ep_unsent fell to 0 after the ep_failed upcall (%zu at the upcall, "
            "%zu held before the peer went)", p.a.own.unsent_at_fail, held);
out:
    t_pair_close(&p);
    t_target_free(&p.b, &t);
    free(src);
    return rc;
}

/* ep_destroy with traffic pending: no upcall may name the ep afterwards. */
static int chk_destroy_pending(const t_spec_t *sp, char *why)
{
    madrail_status_t st;
    int rc = T_PASS, i, before;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1), "first message never arrived");
    for (i = 0; i < 100; i++) {
        uint8_t buf[T_SLOT];
        struct iovec iov = {buf, t_make_msg(buf, (uint64_t)i, t_msg_len((uint64_t)i))};
        p.b.ops->ctrl_send(p.b.acc.ep, &iov, 1);
        iov.iov_len = t_make_msg(buf, (uint64_t)i + 1, t_msg_len((uint64_t)i + 1));
        p.a.ops->ctrl_send(p.a.own.ep, &iov, 1);
    }
    before = t_dead_upcalls;
    p.a.ops->ep_destroy(p.a.own.ep);
    p.a.own.ep = NULL;
    p.a.own.destroyed = 1;
    for (i = 0; i < 200; i++)
        t_prog2(&p);
    T_CHECK(t_dead_upcalls == before, "%d upcalls named the destroyed ep",
            t_dead_upcalls - before);
out:
    t_pair_close(&p);
    return rc;
}

/* Upcalls may call the driver back (rail.h): the core answers a message,
 * returns credits and closes eps from inside ctrl_recv.  A ping-pong whose
 * every reply is sent from the receive upcall, then an upcall that
 * destroys its own ep: no upcall names that ep afterwards, and the peer
 * learns that the ep is gone. */
#define T_UPCALL_ROUNDS 2000
typedef struct t_role {
    int echo;            /* 1: answer seq with seq (b); 0: with seq + 1 (a) */
    uint64_t destroy_at; /* destroy the ep in the upcall of this message */
    int has_pending;     /* the driver said no-resource in the upcall: */
    uint64_t pending;    /* this reply goes from the test loop (t_role_kick) */
} t_role_t;

/* A reply the upcall could not send (no-resource), sent outside progress
 * as the core's queue would; always 0, for use inside T_WAIT's condition. */
static int t_role_kick(t_ep_t *te)
{
    t_role_t *role = te->arg;
    uint8_t buf[T_SLOT];
    struct iovec iov;

    if (!role->has_pending || te->ep == NULL)
        return 0;
    iov.iov_base = buf;
    iov.iov_len = t_make_msg(buf, role->pending, t_msg_len(role->pending));
    if (te->side->ops->ctrl_send(te->ep, &iov, 1) != MADRAIL_ERR_NORESOURCE)
        role->has_pending = 0;
    return 0;
}

static void t_recv_reply(t_ep_t *te, const void *data, size_t len)
{
    t_role_t *role = te->arg;
    madrail_status_t st;
    uint8_t buf[T_SLOT];
    struct iovec iov;
    uint64_t seq, next;

    t_recv_seq(te, data, len);
    if (te->bad)
        return;
    memcpy(&seq, data, 8);
    if (seq == role->destroy_at) {
        te->side->ops->ep_destroy(te->ep); /* from inside the upcall */
        te->ep = NULL;
        te->destroyed = 1;
        return;
    }
    next = role->echo ? seq : seq + 1;
    if (next >= T_UPCALL_ROUNDS)
        return;
    iov.iov_base = buf;
    iov.iov_len = t_make_msg(buf, next, t_msg_len(next));
    st = te->side->ops->ctrl_send(te->ep, &iov, 1);
    if (st == MADRAIL_ERR_NORESOURCE) {
        role->has_pending = 1;
        role->pending = next;
    } else if (st != MADRAIL_OK) {
        te->bad = 1;
        snprintf(te->why, sizeof(te->why), "ctrl_send from the upcall failed after %llu",
                 (unsigned long long)seq);
    }
}

static int chk_upcall_calls(const t_spec_t *sp, char *why)
{
    t_role_t ra = {0, UINT64_MAX, 0, 0}, rb = {1, UINT64_MAX, 0, 0};
    uint8_t buf[T_SLOT];
    struct iovec iov;
    madrail_status_t st;
    int rc = T_PASS, i, before;
    uint64_t seq;
    double dl;
    t_pair_t p;

    if (t_pair_open(&p, sp, why) != 0)
        return T_FAIL;
    p.a.own.on_recv = t_recv_reply;
    p.a.own.arg = &ra;
    p.b.acc.on_recv = t_recv_reply;
    p.b.acc.arg = &rb;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    T_CHECK(T_WAIT(&p, t_role_kick(&p.a.own) + t_role_kick(&p.b.acc) ||
                           (p.a.own.nrecv >= T_UPCALL_ROUNDS &&
                            p.b.acc.nrecv >= T_UPCALL_ROUNDS) ||
                           p.a.own.bad || p.b.acc.bad),
            "upcall ping-pong stopped at %llu/%llu of %d rounds",
            (unsigned long long)p.a.own.nrecv, (unsigned long long)p.b.acc.nrecv,
            T_UPCALL_ROUNDS);
    T_CHECK(!p.a.own.bad && !p.b.acc.bad, "replies sent from upcalls: %.200s%.200s",
            p.a.own.why, p.b.acc.why);
    T_CHECK(p.a.own.nfailed == 0 && p.b.acc.nfailed == 0, "an ep failed: %.200s%.200s",
            p.a.own.fail_reason, p.b.acc.fail_reason);
    /* b destroys its ep in the upcall of the next message */
    rb.destroy_at = T_UPCALL_ROUNDS;
    before = t_dead_upcalls;
    st = t_send_seq(&p, &p.a.own, T_UPCALL_ROUNDS, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send of the last message: %s", madrail_status_str(st));
    iov.iov_base = buf;
    T_CHECK(T_WAIT(&p, p.b.acc.destroyed), "the message that destroys b's ep never arrived");
    for (i = 0; i < 200; i++)
        t_prog2(&p);
    T_CHECK(t_dead_upcalls == before, "%d upcalls named the ep destroyed in its upcall",
            t_dead_upcalls - before);
    /* a learns it: its ep fails, at the latest when it sends */
    dl = mdr_time_sec() + T_TIMEOUT;
    seq = T_UPCALL_ROUNDS + 1;
    while (p.a.own.nfailed == 0 && mdr_time_sec() < dl) {
        iov.iov_len = t_make_msg(buf, seq, t_msg_len(seq));
        st = p.a.ops->ctrl_send(p.a.own.ep, &iov, 1);
        if (st != MADRAIL_OK && st != MADRAIL_ERR_NORESOURCE)
            break;
        seq++;
        for (i = 0; i < 50; i++)
            t_prog2(&p);
    }
    T_CHECK(p.a.own.nfailed > 0 || (st != MADRAIL_OK && st != MADRAIL_ERR_NORESOURCE),
            "the peer's ep was destroyed in an upcall; ours never failed (%llu sent after)",
            (unsigned long long)(seq - T_UPCALL_ROUNDS - 1));
out:
    t_pair_close(&p);
    return rc;
}

/* ---------------- loop knobs ---------------- */

static int t_loop_pair(t_pair_t *p, const t_spec_t *sp, const char *a, const char *b,
                       const char *const *ov, char *why)
{
    return t_pair_open2(p, sp, a, b, ov, why);
}

/* delay=3 (spec) or delay from the global table; *first_p = receiver
 * progress call on which the first message arrived. */
static int t_delay_probe(const t_spec_t *sp, const char *rest, const char *const *ov,
                         int *first_p, char *why)
{
    madrail_status_t st;
    int rc = T_PASS, k;
    t_pair_t p;

    *first_p = -1;
    if (t_loop_pair(&p, sp, rest, rest, ov, why) != 0)
        return T_FAIL;
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(st == MADRAIL_OK, "ctrl_send: %s", madrail_status_str(st));
    for (k = 1; k <= 20 && p.b.acc.nrecv == 0; k++) {
        t_prog(&p.a);
        t_prog(&p.b);
        if (p.b.acc.nrecv > 0)
            *first_p = k;
    }
out:
    t_pair_close(&p);
    return rc;
}

static int chk_knob_delay(const t_spec_t *sp, const char *fab, char *why)
{
    char rest[128];
    uint8_t src[64];
    madrail_status_t st;
    t_target_t t;
    t_comp_t tc;
    int rc = T_PASS, k, first;
    t_pair_t p;

    snprintf(rest, sizeof(rest), "%s;delay=3", fab);
    rc = t_delay_probe(sp, rest, NULL, &first, why);
    if (rc != T_PASS)
        return rc;
    if (first != 4) {
        snprintf(why, T_WHY, "with delay=3 the message arrived at receiver progress call %d, "
                             "want 4", first);
        return T_FAIL;
    }
    snprintf(rest, sizeof(rest), "%s", fab);
    rc = t_delay_probe(sp, rest, NULL, &first, why);
    if (rc != T_PASS)
        return rc;
    if (first != 1) {
        snprintf(why, T_WHY, "with delay=0 the message arrived at call %d, want 1", first);
        return T_FAIL;
    }

    /* A put is delayed the same way, and completes at the sender only after. */
    memset(&t, 0, sizeof(t));
    snprintf(rest, sizeof(rest), "%s;delay=3", fab);
    if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0)
        return T_FAIL;
    if (t_target_make(&p.b, &t, 4096, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    st = t_connect(&p.a, &p.b);
    T_CHECK(st == MADRAIL_OK, "ep_create: %s", madrail_status_str(st));
    rt_fill(src, sizeof(src), 4);
    st = t_put_start(&p, &p.a.own, src, sizeof(src), NULL, t_raddr(&t, 8), t.rkey, t.rkey_len,
                     &tc);
    T_CHECK(st == MADRAIL_INPROGRESS, "put: %s", madrail_status_str(st));
    for (k = 1; k <= 3; k++) {
        t_prog(&p.b);
        t_prog(&p.a);
        T_CHECK(t_target_diff(&t) < 0,
                "put visible after %d receiver progress calls with delay=3", k);
        T_CHECK(tc.calls == 0, "put completed after %d receiver progress calls with delay=3",
                k);
    }
    t_prog(&p.b);
    memcpy(t.model + t.reg_off + 8, src, sizeof(src));
    T_CHECK(t_target_diff(&t) < 0, "put not in place at the 4th receiver progress call");
    T_CHECK(tc.calls == 0, "completion reported from the receiver's progress");
    t_prog(&p.a);
    T_CHECK(tc.calls == 1 && tc.status == MADRAIL_OK,
            "completion not reported by the sender's next progress (%d calls, %s)", tc.calls,
            madrail_status_str(tc.status));
out:
    t_target_free(&p.b, &t);
    t_pair_close(&p);
    return rc;
}

static int chk_knob_config(const t_spec_t *sp, const char *fab, char *why)
{
    static const char *const ov[] = {"MADRAIL_LOOP_DELAY=2", NULL};
    static const char *const bad[] = {"MADRAIL_LOOP_DELAY=soon", NULL};
    mdr_rail_params_t prm;
    mdr_rail_t *rail = NULL;
    char rest[128];
    int rc, first, lvl;
    madrail_status_t st;

    snprintf(rest, sizeof(rest), "%s", fab);
    rc = t_delay_probe(sp, rest, ov, &first, why);
    if (rc != T_PASS)
        return rc;
    if (first != 3) {
        snprintf(why, T_WHY, "with MADRAIL_LOOP_DELAY=2 the message arrived at call %d, want 3",
                 first);
        return T_FAIL;
    }
    snprintf(rest, sizeof(rest), "%s;delay=0", fab);
    rc = t_delay_probe(sp, rest, ov, &first, why);
    if (rc != T_PASS)
        return rc;
    if (first != 1) {
        snprintf(why, T_WHY, "spec delay=0 did not win over MADRAIL_LOOP_DELAY=2 (call %d)",
                 first);
        return T_FAIL;
    }
    memset(&prm, 0, sizeof(prm));
    prm.upcalls = &t_upcalls_tab;
    prm.slot_size = T_SLOT;
    prm.job_key = rt_job_key;
    prm.overrides = bad;
    lvl = mdr_log_level;
    mdr_log_level = -1; /* the error message is expected */
    st = sp->ops->open(fab, &prm, &rail);
    mdr_log_level = lvl;
    if (st != MADRAIL_ERR_CONFIG || rail != NULL) {
        if (rail != NULL)
            sp->ops->close(rail);
        snprintf(why, T_WHY, "MADRAIL_LOOP_DELAY=soon: open returned %s, want CONFIG",
                 madrail_status_str(st));
        return T_FAIL;
    }
    return T_PASS;
}

static int chk_knob_bad_spec(const t_spec_t *sp, char *why)
{
    static const char *const bad[] = {
        "", ";delay=1", "x;bogus=1", "x;delay=abc", "x;delay=-1", "x;bw=1q", "x;latency=-3",
        "x;fail", "x;nores=1.5", "a-fabric-name-much-longer-than-thirty-two-chars"};
    mdr_rail_params_t prm;
    mdr_rail_t *rail;
    madrail_status_t st;
    size_t i;
    int lvl;

    memset(&prm, 0, sizeof(prm));
    prm.upcalls = &t_upcalls_tab;
    prm.slot_size = T_SLOT;
    prm.job_key = rt_job_key;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rail = (mdr_rail_t *)&prm; /* sentinel: must stay untouched */
        lvl = mdr_log_level;
        mdr_log_level = -1;
        st = sp->ops->open(bad[i], &prm, &rail);
        mdr_log_level = lvl;
        if (st != MADRAIL_ERR_CONFIG || rail != (mdr_rail_t *)&prm) {
            if (st == MADRAIL_OK)
                sp->ops->close(rail);
            snprintf(why, T_WHY, "spec \"loop:%s\": open returned %s%s, want CONFIG", bad[i],
                     madrail_status_str(st),
                     rail != (mdr_rail_t *)&prm ? " and wrote *rail_p" : "");
            return T_FAIL;
        }
    }
    return T_PASS;
}

static int chk_knob_profile(const t_spec_t *sp, const char *fab, char *why)
{
    char rest[128];
    int rc = T_PASS;
    t_pair_t p;

    snprintf(rest, sizeof(rest), "%s;latency=7.5;bw=10m;reg=1", fab);
    if (t_loop_pair(&p, sp, fab, rest, NULL, why) != 0)
        return T_FAIL;
    T_CHECK(p.a.attr.latency_us == 1.0 && p.a.attr.bandwidth_mbs == 10000.0,
            "default profile %g us %g MB/s, want 1 us 10000 MB/s", p.a.attr.latency_us,
            p.a.attr.bandwidth_mbs);
    T_CHECK(p.b.attr.latency_us == 7.5, "latency=7.5 gave %g us", p.b.attr.latency_us);
    T_CHECK(fabs(p.b.attr.bandwidth_mbs - 10.0 * 1048576 / 1e6) < 1e-9,
            "bw=10m gave %g MB/s, want %g", p.b.attr.bandwidth_mbs, 10.0 * 1048576 / 1e6);
    T_CHECK(p.a.attr.caps ==
                (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_REMOTE | MDR_RAIL_CAP_REG_CHEAP),
            "caps %#x", p.a.attr.caps);
    T_CHECK(p.b.attr.caps == (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_REMOTE),
            "reg=1: caps %#x, want put without REG_CHEAP", p.b.attr.caps);
    T_CHECK(p.a.attr.max_ctrl == T_SLOT, "max_ctrl %zu, want slot_size %d", p.a.attr.max_ctrl,
            T_SLOT);
    T_CHECK(strncmp(p.a.attr.name, "loop:", 5) == 0 && strcmp(p.a.attr.name + 5, fab) == 0,
            "name \"%s\", want \"loop:%s\"", p.a.attr.name, fab);
out:
    t_pair_close(&p);
    return rc;
}

/* Arrival log shared by the two receivers of the reorder check. */
static uint64_t t_arrivals[1024];
static size_t t_narrivals;

static void t_recv_log(t_ep_t *te, const void *data, size_t len)
{
    uint64_t idx;
    (void)te;
    if (len >= 8 && t_narrivals < sizeof(t_arrivals) / sizeof(t_arrivals[0])) {
        memcpy(&idx, data, 8);
        t_arrivals[t_narrivals++] = idx;
    }
}

/* Two pairs on one fabric; message 2r goes on pair 1, 2r+1 on pair 2,
 * then each receiver progresses once.  Returns the inversions in arrival
 * order, or -1 (why set) on failure. */
static long t_reorder_run(const t_spec_t *sp, const char *rest, int rounds, char *why)
{
    t_pair_t p1, p2;
    uint64_t last1 = 0, last2 = 0;
    int r, seen1 = 0, seen2 = 0;
    long inv = 0;
    size_t i;
    uint8_t buf[8];
    uint64_t idx;

    if (t_loop_pair(&p1, sp, rest, rest, NULL, why) != 0)
        return -1;
    if (t_loop_pair(&p2, sp, rest, rest, NULL, why) != 0) {
        t_pair_close(&p1);
        return -1;
    }
    t_narrivals = 0;
    p1.b.acc.on_recv = t_recv_log;
    p2.b.acc.on_recv = t_recv_log;
    if (t_connect(&p1.a, &p1.b) != MADRAIL_OK || t_connect(&p2.a, &p2.b) != MADRAIL_OK) {
        snprintf(why, T_WHY, "ep_create failed");
        inv = -1;
        goto out;
    }
    for (r = 0; r < rounds; r++) {
        idx = 2 * (uint64_t)r;
        memcpy(buf, &idx, 8);
        if (t_send(&p1, &p1.a.own, buf, 8, NULL) != MADRAIL_OK) {
            snprintf(why, T_WHY, "ctrl_send failed");
            inv = -1;
            goto out;
        }
        idx++;
        memcpy(buf, &idx, 8);
        if (t_send(&p2, &p2.a.own, buf, 8, NULL) != MADRAIL_OK) {
            snprintf(why, T_WHY, "ctrl_send failed");
            inv = -1;
            goto out;
        }
        t_prog(&p1.b);
        t_prog(&p2.b);
    }
    for (r = 0; r < 64 && t_narrivals < 2 * (size_t)rounds; r++) {
        t_prog(&p1.b);
        t_prog(&p2.b);
    }
    if (t_narrivals != 2 * (size_t)rounds) {
        snprintf(why, T_WHY, "%zu of %d messages arrived", t_narrivals, 2 * rounds);
        inv = -1;
        goto out;
    }
    for (i = 0; i < t_narrivals; i++) {
        idx = t_arrivals[i];
        if (idx % 2 == 0) {
            if (seen1 && idx <= last1) {
                snprintf(why, T_WHY, "order broken on one ep: %llu after %llu",
                         (unsigned long long)idx, (unsigned long long)last1);
                inv = -1;
                goto out;
            }
            last1 = idx;
            seen1 = 1;
        } else {
            if (seen2 && idx <= last2) {
                snprintf(why, T_WHY, "order broken on one ep: %llu after %llu",
                         (unsigned long long)idx, (unsigned long long)last2);
                inv = -1;
                goto out;
            }
            last2 = idx;
            seen2 = 1;
        }
        if (i > 0 && idx < t_arrivals[i - 1])
            inv++;
    }
out:
    t_pair_close(&p1);
    t_pair_close(&p2);
    return inv;
}

static int chk_knob_reorder(const t_spec_t *sp, const char *fab, char *why, char *note)
{
    char rest[128];
    long inv0, inv1;

    snprintf(rest, sizeof(rest), "%s", fab);
    inv0 = t_reorder_run(sp, rest, 200, why);
    if (inv0 < 0)
        return T_FAIL;
    if (inv0 != 0) {
        snprintf(why, T_WHY, "without reorder, %ld messages overtook others across rails", inv0);
        return T_FAIL;
    }
    snprintf(rest, sizeof(rest), "%s;reorder=1;seed=7", fab);
    inv1 = t_reorder_run(sp, rest, 200, why);
    if (inv1 < 0)
        return T_FAIL;
    if (inv1 == 0) {
        snprintf(why, T_WHY, "with reorder=1, no message overtook another across rails");
        return T_FAIL;
    }
    snprintf(note, 128, "%ld cross-rail overtakes, order per ep kept", inv1);
    return T_PASS;
}

static int chk_knob_nores(const t_spec_t *sp, const char *fab, char *why)
{
    enum { NOPS = 30 };
    madrail_status_t st[NOPS];
    t_comp_t tc[NOPS];
    uint8_t src[NOPS][64];
    char rest[128];
    t_target_t t;
    int rc = T_PASS, i, nctrl = 0;
    t_pair_t p;

    memset(&t, 0, sizeof(t));
    snprintf(rest, sizeof(rest), "%s;nores=3", fab);
    if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0)
        return T_FAIL;
    p.b.acc.on_recv = t_recv_log;
    t_narrivals = 0;
    if (t_target_make(&p.b, &t, NOPS * 64, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
    for (i = 0; i < NOPS; i++) {
        t_comp_init(&tc[i]);
        if (i % 2 == 0) {
            uint64_t idx = (uint64_t)i;
            struct iovec iov = {&idx, 8};
            st[i] = p.a.ops->ctrl_send(p.a.own.ep, &iov, 1);
        } else {
            rt_fill(src[i], 64, (uint64_t)i);
            st[i] = p.a.ops->put(p.a.own.ep, src[i], 64, NULL, t_raddr(&t, (size_t)i * 64),
                                 t.rkey, t.rkey_len, &tc[i].c);
        }
    }
    for (i = 0; i < NOPS; i++) {
        madrail_status_t want = i % 3 == 2 ? MADRAIL_ERR_NORESOURCE
                                : i % 2 == 0 ? MADRAIL_OK
                                             : MADRAIL_INPROGRESS;
        T_CHECK(st[i] == want, "op %d (%s): %s, want %s", i + 1, i % 2 ? "put" : "ctrl_send",
                madrail_status_str(st[i]), madrail_status_str(want));
        if (i % 2 == 0 && want == MADRAIL_OK)
            nctrl++;
        if (i % 2 == 1 && want != MADRAIL_ERR_NORESOURCE)
            memcpy(t.model + t.reg_off + (size_t)i * 64, src[i], 64);
    }
    T_CHECK(T_WAIT(&p, t_narrivals >= (size_t)nctrl), "%zu of %d messages arrived", t_narrivals,
            nctrl);
    for (i = 0; i < 20; i++)
        t_prog2(&p);
    T_CHECK(t_narrivals == (size_t)nctrl, "%zu messages arrived, %d were accepted", t_narrivals,
            nctrl);
    for (i = 0; i < NOPS; i++) {
        if (i % 2 == 1)
            T_CHECK(tc[i].calls == (st[i] == MADRAIL_INPROGRESS ? 1 : 0) &&
                        (tc[i].calls == 0 || tc[i].status == MADRAIL_OK),
                    "put %d: %d completions (%s)", i + 1, tc[i].calls,
                    madrail_status_str(tc[i].status));
    }
    {
        size_t k = 0;
        for (i = 0; i < NOPS; i += 2)
            if (i % 3 != 2)
                T_CHECK(t_arrivals[k++] == (uint64_t)i, "refused message %d delivered", i);
    }
    T_CHECK(t_target_diff(&t) < 0, "target memory differs: a refused put wrote, or an "
                                   "accepted one did not");
out:
    t_target_free(&p.b, &t);
    t_pair_close(&p);
    return rc;
}

static int chk_knob_bw(const t_spec_t *sp, const char *fab, char *why, char *note)
{
    double capped = 1e9;
    const size_t half = 512u << 10;
    uint8_t *src = NULL;
    char rest[128];
    t_target_t t;
    t_comp_t tc[2];
    madrail_status_t st;
    double t0, el[2];
    int rc = T_PASS, pass, i;
    t_pair_t p;

    src = malloc(2 * half);
    if (src == NULL) {
        snprintf(why, T_WHY, "out of memory");
        return T_FAIL;
    }
    rt_fill(src, 2 * half, 11);
    for (pass = 0; pass < 2; pass++) {
        memset(&t, 0, sizeof(t));
        snprintf(rest, sizeof(rest), pass == 0 ? "%s;bw=10m" : "%s", fab);
        if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0) {
            free(src);
            return T_FAIL;
        }
        if (t_target_make(&p.b, &t, 2 * half, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
            rc = T_FAIL;
            goto out;
        }
        T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
        t0 = mdr_time_sec();
        for (i = 0; i < 2; i++) {
            st = t_put_start(&p, &p.a.own, src + i * half, half, NULL, t_raddr(&t, i * half),
                             t.rkey, t.rkey_len, &tc[i]);
            T_CHECK(st == MADRAIL_INPROGRESS, "put: %s", madrail_status_str(st));
        }
        el[0] = el[1] = -1;
        while ((el[0] < 0 || el[1] < 0) && mdr_time_sec() - t0 < T_TIMEOUT) {
            t_prog2(&p);
            for (i = 0; i < 2; i++)
                if (tc[i].calls && el[i] < 0)
                    el[i] = mdr_time_sec() - t0;
        }
        T_CHECK(el[0] >= 0 && el[1] >= 0, "put completions missing");
        T_CHECK(tc[0].status == MADRAIL_OK && tc[1].status == MADRAIL_OK, "put failed");
        memcpy(t.model + t.reg_off, src, 2 * half);
        T_CHECK(t_target_diff(&t) < 0, "data differs");
        if (pass == 0) {
            /* 512 KiB at 10 MiB/s: 50 ms each, the second after the first. */
            T_CHECK(el[0] >= 0.045 && el[1] >= 0.095,
                    "bw=10m: puts of 512 KiB completed after %.3f s and %.3f s, want >= 0.05 "
                    "and >= 0.1",
                    el[0], el[1]);
            snprintf(note, 128, "2 x 512 KiB at bw=10m: %.3f s, %.3f s", el[0], el[1]);
            capped = el[1];
        } else {
            /* compared with the capped run of this same test, not a fixed time */
            T_CHECK(el[1] < capped, "without bw the puts took %.3f s, capped %.3f s", el[1],
                    capped);
        }
        t_target_free(&p.b, &t);
        t_pair_close(&p);
    }
    free(src);
    return T_PASS;
out:
    t_target_free(&p.b, &t);
    t_pair_close(&p);
    free(src);
    return rc;
}

static int chk_knob_fail(const t_spec_t *sp, const char *fab, char *why)
{
    uint8_t src[128];
    char rest[128];
    madrail_status_t st;
    t_target_t t;
    t_comp_t tc;
    int rc = T_PASS, i;
    t_pair_t p;

    /* fail=5: five messages arrive, the sixth op kills the rail. */
    memset(&t, 0, sizeof(t));
    snprintf(rest, sizeof(rest), "%s;fail=5", fab);
    if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0)
        return T_FAIL;
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
    for (i = 0; i < 5; i++) {
        st = t_send_seq(&p, &p.a.own, (uint64_t)i, NULL);
        T_CHECK(st == MADRAIL_OK, "op %d: %s", i + 1, madrail_status_str(st));
    }
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 5), "%llu of 5 messages arrived",
            (unsigned long long)p.b.acc.nrecv);
    T_CHECK(p.a.own.nfailed == 0 && p.b.acc.nfailed == 0, "failed before op 6");
    st = t_send_seq(&p, &p.a.own, 5, NULL);
    T_CHECK(st != MADRAIL_OK && st != MADRAIL_ERR_NORESOURCE, "op 6: %s, want an error",
            madrail_status_str(st));
    t_prog2(&p);
    T_CHECK(p.a.own.nfailed == 1 && p.a.own.fail_status == MADRAIL_ERR_RAIL_DOWN,
            "sender: %d ep_failed (%s), want one RAIL_DOWN from its next progress",
            p.a.own.nfailed, madrail_status_str(p.a.own.fail_status));
    T_CHECK(p.b.acc.nfailed == 1 && p.b.acc.fail_status == MADRAIL_ERR_RAIL_DOWN,
            "receiver: %d ep_failed (%s), want one RAIL_DOWN from its next progress",
            p.b.acc.nfailed, madrail_status_str(p.b.acc.fail_status));
    st = t_send_seq(&p, &p.a.own, 6, NULL);
    T_CHECK(st != MADRAIL_OK, "op 7 on the dead rail: %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.b.acc, 0, NULL);
    T_CHECK(st != MADRAIL_OK, "reverse send on the failed ep: %s", madrail_status_str(st));
    for (i = 0; i < 10; i++)
        t_prog2(&p);
    T_CHECK(p.a.own.nfailed == 1 && p.b.acc.nfailed == 1 && p.b.acc.nrecv == 5,
            "after more progress: failed %d/%d, received %llu", p.a.own.nfailed,
            p.b.acc.nfailed, (unsigned long long)p.b.acc.nrecv);
    t_pair_close(&p);

    /* fail=3 with a put in flight when the rail dies: it completes once
     * with an error and writes nothing. */
    snprintf(rest, sizeof(rest), "%s;fail=3", fab);
    if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0)
        return T_FAIL;
    if (t_target_make(&p.b, &t, 4096, 64, MDR_MEM_REMOTE_WRITE, p.a.uuid, why) != 0) {
        rc = T_FAIL;
        goto out;
    }
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
    T_CHECK(t_send_seq(&p, &p.a.own, 0, NULL) == MADRAIL_OK, "op 1 failed");
    T_CHECK(T_WAIT(&p, p.b.acc.nrecv >= 1), "op 1 never arrived");
    T_CHECK(t_send_seq(&p, &p.a.own, 1, NULL) == MADRAIL_OK, "op 2 failed");
    rt_fill(src, sizeof(src), 1);
    st = p.a.ops->put(p.a.own.ep, src, sizeof(src), NULL, t_raddr(&t, 0), t.rkey, t.rkey_len,
                      (t_comp_init(&tc), &tc.c));
    T_CHECK(st == MADRAIL_INPROGRESS, "op 3 (put): %s", madrail_status_str(st));
    st = t_send_seq(&p, &p.a.own, 2, NULL);
    T_CHECK(st != MADRAIL_OK && st != MADRAIL_ERR_NORESOURCE, "op 4: %s, want an error",
            madrail_status_str(st));
    for (i = 0; i < 5; i++)
        t_prog2(&p);
    T_CHECK(tc.calls == 1 && tc.status != MADRAIL_OK,
            "put in flight at death: %d completions (%s), want one error", tc.calls,
            madrail_status_str(tc.status));
    T_CHECK(t_target_diff(&t) < 0, "put in flight at death wrote the target");
    T_CHECK(p.a.own.nfailed == 1 && p.b.acc.nfailed == 1, "ep_failed %d/%d, want 1/1",
            p.a.own.nfailed, p.b.acc.nfailed);
    T_CHECK(p.b.acc.nrecv == 1, "receiver got %llu messages, want 1 (op 2 was in flight)",
            (unsigned long long)p.b.acc.nrecv);
out:
    t_target_free(&p.b, &t);
    t_pair_close(&p);
    return rc;
}

/* Different fabrics do not reach each other; a closed rail is unreachable. */
static int chk_knob_reach(const t_spec_t *sp, const char *fab, char *why)
{
    char ra[128], rb[128];
    madrail_status_t st;
    int rc = T_PASS, i;
    t_pair_t p;

    snprintf(ra, sizeof(ra), "%s.x1", fab);
    snprintf(rb, sizeof(rb), "%s.x2", fab);
    if (t_loop_pair(&p, sp, ra, rb, NULL, why) != 0)
        return T_FAIL;
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    for (i = 0; i < 5; i++)
        t_prog2(&p);
    T_CHECK(p.b.naccepted == 0 && p.b.acc.nrecv == 0, "a rail of another fabric was reached");
    T_CHECK(p.a.own.nfailed == 1, "send across fabrics (returned %s) did not fail the ep",
            madrail_status_str(st));
    t_pair_close(&p);

    if (t_loop_pair(&p, sp, fab, fab, NULL, why) != 0)
        return T_FAIL;
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK, "ep_create failed");
    t_side_close(&p.b, 0);
    st = t_send_seq(&p, &p.a.own, 0, NULL);
    T_CHECK(p.a.own.nfailed == 0, "ep_failed reported outside progress");
    t_prog(&p.a);
    T_CHECK(p.a.own.nfailed == 1 && p.a.own.fail_status == MADRAIL_ERR_RAIL_DOWN,
            "send to a closed rail (returned %s): %d ep_failed at the next progress, want 1",
            madrail_status_str(st), p.a.own.nfailed);
out:
    t_pair_close(&p);
    return rc;
}

/* Two threads, one context each: the registry is shared. */
#define T_THR_MSGS 20000

typedef struct t_thr {
    t_pair_t *p;
    int side; /* 0: a, 1: b */
    int ok;
} t_thr_t;

static void *t_thr_main(void *arg)
{
    t_thr_t *th = arg;
    t_side_t *s = th->side ? &th->p->b : &th->p->a;
    double dl = mdr_time_sec() + T_TIMEOUT;
    uint8_t buf[T_SLOT];
    madrail_status_t st;
    struct iovec iov;
    uint64_t i = 0;

    while (mdr_time_sec() < dl && (i < T_THR_MSGS || s->own.nrecv < T_THR_MSGS)) {
        if (i < T_THR_MSGS) {
            iov.iov_base = buf;
            iov.iov_len = t_make_msg(buf, i, t_msg_len(i));
            st = s->ops->ctrl_send(s->own.ep, &iov, 1);
            if (st == MADRAIL_OK)
                i++;
            else if (st != MADRAIL_ERR_NORESOURCE)
                break;
        }
        t_in_progress++;
        s->ops->progress(s->rail);
        t_in_progress--;
    }
    th->ok = i >= T_THR_MSGS && s->own.nrecv >= T_THR_MSGS && !s->own.bad;
    return NULL;
}

static int chk_knob_threads(const t_spec_t *sp, const char *fab, char *why)
{
    char rest[128];
    t_thr_t th[2];
    pthread_t tid[2];
    int rc = T_PASS, i;
    t_pair_t p;

    snprintf(rest, sizeof(rest), "%s;reorder=1;nores=7", fab);
    if (t_loop_pair(&p, sp, rest, rest, NULL, why) != 0)
        return T_FAIL;
    T_CHECK(t_connect(&p.a, &p.b) == MADRAIL_OK && t_connect(&p.b, &p.a) == MADRAIL_OK,
            "ep_create failed");
    /* Both sides created their ep: the connection is merged and each side
     * receives the peer's messages on its own ep. */
    for (i = 0; i < 2; i++) {
        th[i].p = &p;
        th[i].side = i;
        th[i].ok = 0;
    }
    for (i = 0; i < 2; i++)
        T_CHECK(pthread_create(&tid[i], NULL, t_thr_main, &th[i]) == 0, "pthread_create");
    for (i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    T_CHECK(th[0].ok && th[1].ok,
            "a got %llu (%.150s), b got %llu (%.150s) of %d each (accepted %d/%d)",
            (unsigned long long)(p.a.own.nrecv + p.a.acc.nrecv), p.a.own.bad ? p.a.own.why : "",
            (unsigned long long)(p.b.own.nrecv + p.b.acc.nrecv), p.b.own.bad ? p.b.own.why : "",
            T_THR_MSGS, p.a.naccepted, p.b.naccepted);
out:
    t_pair_close(&p);
    return rc;
}

/* ---------------- driver ---------------- */

static void t_report(const t_spec_t *sp, const char *label, const char *check, int rc,
                     const char *why, const char *note)
{
    const char *name = label ? label : sp->full;
    if (rc == T_PASS) {
        t_nok++;
        if (note != NULL && note[0] != '\0')
            printf("ok %s %s # %s\n", name, check, note);
        else
            printf("ok %s %s\n", name, check);
    } else if (rc == T_SKIP) {
        t_nskip++;
        printf("SKIP %s %s: %s\n", name, check, why);
    } else {
        t_nfail++;
        printf("FAIL %s %s: %s\n", name, check, why);
    }
    fflush(stdout);
}

#define T_RUN(_sp, _label, _name, _call)                                                     \
    do {                                                                                     \
        char why[T_WHY] = "", note[128] = "";                                                \
        int _rc;                                                                             \
        (void)note;                                                                          \
        _rc = (_call);                                                                       \
        t_report((_sp), (_label), (_name), _rc, why, note);                                  \
    } while (0)

static void t_run_loop_knobs(const t_spec_t *sp)
{
    char fab[64], label[160];
    const char *semi = strchr(sp->rest, ';');
    size_t n = semi ? (size_t)(semi - sp->rest) : strlen(sp->rest);

    /* Fabric names of their own, so that no rail of the spec interferes. */
    snprintf(fab, sizeof(fab), "%.*sk", (int)(n > 20 ? 20 : n), sp->rest);
    snprintf(label, sizeof(label), "loop:%s;<knobs>", fab);
    T_RUN(sp, label, "knob-delay", chk_knob_delay(sp, fab, why));
    T_RUN(sp, label, "knob-config-override", chk_knob_config(sp, fab, why));
    T_RUN(sp, label, "knob-bad-spec", chk_knob_bad_spec(sp, why));
    T_RUN(sp, label, "knob-profile", chk_knob_profile(sp, fab, why));
    T_RUN(sp, label, "knob-reorder", chk_knob_reorder(sp, fab, why, note));
    T_RUN(sp, label, "knob-nores", chk_knob_nores(sp, fab, why));
    T_RUN(sp, label, "knob-bw", chk_knob_bw(sp, fab, why, note));
    T_RUN(sp, label, "knob-fail", chk_knob_fail(sp, fab, why));
    T_RUN(sp, label, "knob-reachability", chk_knob_reach(sp, fab, why));
    T_RUN(sp, label, "knob-two-threads", chk_knob_threads(sp, fab, why));
}

static void t_run_spec(const t_spec_t *sp, int *loop_knobs_done)
{
    int bad0 = t_bad_upcalls, dead0 = t_dead_upcalls, close0 = t_close_upcalls,
        mis0 = t_misaligned;

    T_RUN(sp, NULL, "attr", chk_attr(sp, why));
    T_RUN(sp, NULL, "connect-lazy-accept", chk_connect_lazy(sp, why));
    T_RUN(sp, NULL, "connect-both-sides", chk_connect_both(sp, why));
    T_RUN(sp, NULL, "accept-refused", chk_accept_refuse(sp, why));
    T_RUN(sp, NULL, "unsent-drains-locally", chk_unsent_local(sp, why));
    T_RUN(sp, NULL, "foreign-key", chk_foreign_key(sp, why));
    T_RUN(sp, NULL, "ctrl-sizes", chk_ctrl_sizes(sp, why));
    T_RUN(sp, NULL, "ctrl-burst", chk_ctrl_burst(sp, why, note));
    T_RUN(sp, NULL, "put-sizes", chk_put_sizes(sp, why));
    T_RUN(sp, NULL, "put-then-ctrl-order", chk_put_order(sp, why));
    T_RUN(sp, NULL, "put-remote-complete", chk_put_remote(sp, why));
    T_RUN(sp, NULL, "put-past-region-end", chk_put_bad(sp, why, 0));
    T_RUN(sp, NULL, "put-before-region", chk_put_bad(sp, why, 1));
    T_RUN(sp, NULL, "put-stale-key", chk_put_bad(sp, why, 2));
    T_RUN(sp, NULL, "put-region-of-another-peer", chk_put_bad(sp, why, 3));
    T_RUN(sp, NULL, "drain-backlog-idle", chk_drain_idle(sp, why));
    T_RUN(sp, NULL, "destroy-with-pending", chk_destroy_pending(sp, why));
    T_RUN(sp, NULL, "upcall-sends-and-destroys", chk_upcall_calls(sp, why));
    T_RUN(sp, NULL, "close-with-pending", chk_close_pending(sp, why));
    T_RUN(sp, NULL, "peer-closes", chk_peer_close(sp, why));
    T_RUN(sp, NULL, "failed-ep-keeps-unsent", chk_fail_keeps_unsent(sp, why, note));
    if (strcmp(sp->drv, "loop") == 0 && !*loop_knobs_done) {
        *loop_knobs_done = 1;
        t_run_loop_knobs(sp);
    }
    T_RUN(sp, NULL, "upcalls-only-from-progress",
          (t_bad_upcalls == bad0 && t_close_upcalls == close0
               ? T_PASS
               : (snprintf(why, T_WHY, "%d upcalls outside progress(), %d from close()",
                           t_bad_upcalls - bad0, t_close_upcalls - close0),
                  T_FAIL)));
    T_RUN(sp, NULL, "no-upcall-after-destroy",
          (t_dead_upcalls == dead0
               ? T_PASS
               : (snprintf(why, T_WHY, "%d upcalls for destroyed eps", t_dead_upcalls - dead0),
                  T_FAIL)));
    T_RUN(sp, NULL, "ctrl-data-8-byte-aligned",
          (t_misaligned == mis0
               ? T_PASS
               : (snprintf(why, T_WHY, "%d messages delivered at an address not a multiple of "
                                       "8 (the core reads headers in place)",
                           t_misaligned - mis0),
                  T_FAIL)));
}

static const struct {
    const char *drv;
    const char *specs[3];
} t_defaults[] = {
    {"loop", {"loop:conf0", "loop:conf1;delay=2;reorder=1;nores=5", NULL}},
    {"tcp", {"tcp:lo", NULL, NULL}},
};

static const char *t_default_specs[8];
static int t_ndefault;

static void t_add_default(const mdr_rail_ops_t *ops, void *arg)
{
    size_t i, k;
    (void)arg;
    for (i = 0; i < sizeof(t_defaults) / sizeof(t_defaults[0]); i++)
        if (strcmp(t_defaults[i].drv, ops->name) == 0)
            for (k = 0; k < 3 && t_defaults[i].specs[k] != NULL; k++)
                if (t_ndefault < 8)
                    t_default_specs[t_ndefault++] = t_defaults[i].specs[k];
}

int main(int argc, char **argv)
{
    const char *const *specs = (const char *const *)argv + 1;
    int nspecs = argc - 1, i, loop_knobs_done = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (nspecs == 0) {
        mdr_rail_foreach(t_add_default, NULL);
        specs = t_default_specs;
        nspecs = t_ndefault;
    }
    for (i = 0; i < nspecs; i++) {
        const char *colon = strchr(specs[i], ':');
        t_spec_t sp;

        memset(&sp, 0, sizeof(sp));
        sp.full = specs[i];
        if (colon == NULL || colon == specs[i] || (size_t)(colon - specs[i]) >= sizeof(sp.drv)) {
            printf("FAIL %s spec: expected <driver>:<device>[;opt=val...]\n", specs[i]);
            t_nfail++;
            continue;
        }
        memcpy(sp.drv, specs[i], (size_t)(colon - specs[i]));
        sp.rest = colon + 1;
        sp.ops = mdr_rail_find(sp.drv);
        if (sp.ops == NULL) {
            printf("SKIP %s all: driver \"%s\" is not built\n", specs[i], sp.drv);
            t_nskip++;
            continue;
        }
        t_run_spec(&sp, &loop_knobs_done);
    }
    printf("summary: %d ok, %d failed, %d skipped\n", t_nok, t_nfail, t_nskip);
    if (t_nfail > 0)
        return 1;
    return t_nok > 0 ? 0 : 77;
}
