/*
 * Driver-level test of the shm rail across real processes (fork): the
 * conformance suite runs both ends in one process, which cannot show that
 * the rings, CMA and the liveness checks work between address spaces, nor
 * survive a peer killed by a signal.  Each scenario forks a child that
 * opens its own rail after the fork (a rail is never inherited), swaps
 * addresses with the parent through pipes, and checks its side; the child's
 * exit status is one of the parent's checks.  Every child arms alarm() so
 * that a hang kills it instead of the test run.
 *
 * Scenarios: messages of every size around the slot size (echoed back, so
 * both directions), a full ring (NORESOURCE, then progress), puts with
 * CMA and through the ring (which path ran is read from the rail), a stale
 * key across processes, a peer killed while sending and while receiving,
 * stale segments of dead processes removed at open, two shm rails per
 * process connecting simultaneously, and a peer on "another node".
 *
 * Output: one line per check; exit 0 pass, 1 fail, 77 skip (no /dev/shm).
 */
#include "mdr_config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rails/rail.h"
#include "rails/shm/shm.h" /* rail internals: ring size, put-path counters */
#include "util/clock.h"
#include "util/log.h"

#include "rail_test_util.h"

#define SLOT 1024
#define SLOTS 16
#define TMO 20.0

/* ---------------- one side ---------------- */

typedef struct tside tside_t;
typedef struct tep tep_t;

struct tep {
    tside_t *side;
    mdr_ep_t *ep;
    uint64_t nrecv;
    int nfailed;
    madrail_status_t fail_status;
    char reason[256];
    void (*on_recv)(tep_t *te, const uint8_t *data, size_t len);
    void *arg;
};

struct tside {
    const mdr_rail_ops_t *ops;
    mdr_rail_t *rail;
    mdr_rail_attr_t attr;
    uint64_t uuid;
    uint8_t addr[256];
    size_t addr_len;
    int naccepted;
    tep_t own, acc;
    uint64_t puuid; /* the peer's */
    uint8_t paddr[256];
    size_t paddr_len;
};

static void up_ctrl_recv(void *cookie, const void *data, size_t len)
{
    tep_t *te = cookie;

    te->nrecv++;
    if (te->on_recv != NULL)
        te->on_recv(te, data, len);
}

static void *up_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    tside_t *s = rail_cookie;

    (void)uuid;
    s->naccepted++;
    if (s->acc.ep != NULL)
        return NULL;
    s->acc.ep = ep;
    return &s->acc;
}

static void up_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    tep_t *te = cookie;

    te->nfailed++;
    te->fail_status = status;
    snprintf(te->reason, sizeof(te->reason), "%s", reason ? reason : "(null)");
}

static const mdr_rail_upcalls_t upcalls = {up_ctrl_recv, up_ep_accepted, up_ep_failed};
static uint64_t uuid_next = 1;

static int t_open(tside_t *s, const char *spec, const char *const *ov)
{
    mdr_rail_params_t prm;
    madrail_status_t st;

    memset(s, 0, sizeof(*s));
    s->own.side = s->acc.side = s;
    s->ops = mdr_rail_find("shm");
    s->uuid = ((uint64_t)getpid() << 24) ^ 0x5300000000000000ull ^ uuid_next++;
    prm = rt_params(s->uuid, &upcalls, s, SLOT, SLOTS, ov);
    st = s->ops->open(spec, &prm, &s->rail);
    if (st != MADRAIL_OK) {
        CHECK(0, "open(\"%s\"): %s", spec, madrail_status_str(st));
        s->rail = NULL;
        return -1;
    }
    s->ops->query(s->rail, &s->attr);
    s->addr_len = s->attr.addr_len;
    st = s->ops->addr_pack(s->rail, s->addr, s->addr_len);
    if (st != MADRAIL_OK) {
        CHECK(0, "addr_pack: %s", madrail_status_str(st));
        return -1;
    }
    return 0;
}

static void t_close(tside_t *s)
{
    if (s->rail != NULL)
        s->ops->close(s->rail);
    s->rail = NULL;
    s->own.ep = s->acc.ep = NULL;
}

static int t_prog(tside_t *s)
{
    return s->rail != NULL ? s->ops->progress(s->rail) : 0;
}

#define WAITS(_s, _secs, _cond)                                                              \
    ({                                                                                       \
        double _dl = mdr_time_sec() + (_secs);                                               \
        int _ok;                                                                             \
        while (!(_ok = !!(_cond)) && mdr_time_sec() < _dl)                                   \
            t_prog(_s);                                                                      \
        _ok;                                                                                 \
    })
#define WAIT(_s, _cond) WAITS(_s, TMO, _cond)

static madrail_status_t t_connect(tside_t *s)
{
    return s->ops->ep_create(s->rail, s->puuid, s->paddr, s->paddr_len, &s->own, &s->own.ep);
}

/* Send, retrying no-resource with progress; *nores_p counts the retries. */
static madrail_status_t t_send(tside_t *s, tep_t *te, const void *buf, size_t len,
                               unsigned *nores_p)
{
    struct iovec iov[2];
    madrail_status_t st;
    double dl = mdr_time_sec() + TMO;
    size_t cut = len / 3;
    int cnt = 0;

    iov[cnt].iov_base = (void *)buf;
    iov[cnt++].iov_len = cut;
    iov[cnt].iov_base = (uint8_t *)buf + cut;
    iov[cnt++].iov_len = len - cut;
    for (;;) {
        st = s->ops->ctrl_send(te->ep, iov, cnt);
        if (st != MADRAIL_ERR_NORESOURCE || mdr_time_sec() > dl)
            return st;
        if (nores_p != NULL)
            (*nores_p)++;
        t_prog(s);
    }
}

/* ---------------- processes ---------------- */

typedef struct tchan {
    int rd, wr;
} tchan_t;

static int t_write(tchan_t *ch, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(ch->wr, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int t_read(tchan_t *ch, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(ch->rd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Swap uuid and address with the other process. */
static int t_exchange(tside_t *s, tchan_t *ch)
{
    uint64_t len = s->addr_len;

    if (t_write(ch, &s->uuid, 8) || t_write(ch, &len, 8) || t_write(ch, s->addr, s->addr_len))
        return -1;
    if (t_read(ch, &s->puuid, 8) || t_read(ch, &len, 8) || len > sizeof(s->paddr) ||
        t_read(ch, s->paddr, (size_t)len))
        return -1;
    s->paddr_len = (size_t)len;
    return 0;
}

typedef int (*tchild_fn)(tchan_t *ch, void *arg);

/* Fork a child running fn; the parent gets its end of the pipes. */
static pid_t t_fork(tchild_fn fn, void *arg, tchan_t *ch)
{
    int p2c[2], c2p[2];
    pid_t pid;

    if (pipe(p2c) != 0 || pipe(c2p) != 0)
        return -1;
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        tchan_t cch = {p2c[0], c2p[1]};
        int rc;
        close(p2c[1]);
        close(c2p[0]);
        rt_who = "child";
        failures = 0;
        alarm(60);
        rc = fn(&cch, arg);
        fflush(stdout);
        _exit(rc != 0 || failures != 0 ? 1 : 0);
    }
    close(p2c[0]);
    close(c2p[1]);
    ch->rd = c2p[0];
    ch->wr = p2c[1];
    return pid;
}

/* Wait for the child; its exit status, or 128 + signal. */
static int t_reap(pid_t pid, tchan_t *ch)
{
    int status = 0;

    if (ch != NULL) {
        close(ch->rd);
        close(ch->wr);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255;
}

static int seg_exists(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s%s", MDR_SHM_DIR, name);
    return access(path, F_OK) == 0;
}

static char *addr_seg(const uint8_t *addr, char *buf)
{
    mdr_shm_addr_t a;
    memcpy(&a, addr, sizeof(a));
    mdr_shm_seg_name(buf, a.pidns, a.pid, a.start, a.tag);
    return buf;
}

/* ---------------- A: every size around the slot size, both ways ---------------- */

static size_t sz_list[128];
static size_t sz_n;
#define SZ_ROUNDS 3

static void sizes_init(void)
{
    size_t v;
    sz_n = 0;
    for (v = 0; v <= 17; v++)
        sz_list[sz_n++] = v;
    sz_list[sz_n++] = 63;
    sz_list[sz_n++] = 64;
    sz_list[sz_n++] = 65;
    for (v = SLOT - 70; v <= SLOT; v++)
        sz_list[sz_n++] = v;
}

typedef struct sz_state {
    uint64_t bad;
    char why[160];
    uint8_t (*q)[SLOT]; /* child: messages to echo */
    size_t *qlen;
    size_t qn;
} sz_state_t;

static void sz_recv(tep_t *te, const uint8_t *d, size_t len)
{
    sz_state_t *st = te->arg;
    uint64_t k = te->nrecv - 1;

    if (len != sz_list[k % sz_n] || !rt_matches(d, len, k)) {
        if (st->bad++ == 0)
            snprintf(st->why, sizeof(st->why), "message %llu: %zu bytes (sent %zu) or content",
                     (unsigned long long)k, len, sz_list[k % sz_n]);
        return;
    }
    if (st->q != NULL) {
        memcpy(st->q[st->qn], d, len);
        st->qlen[st->qn++] = len;
    }
}

static int child_sizes(tchan_t *ch, void *arg)
{
    size_t total = sz_n * SZ_ROUNDS, sent = 0;
    sz_state_t st;
    tside_t s;
    int rc = 1;

    (void)arg;
    memset(&st, 0, sizeof(st));
    st.q = malloc(total * SLOT);
    st.qlen = calloc(total, sizeof(size_t));
    if (st.q == NULL || st.qlen == NULL || t_open(&s, "ta", NULL) != 0 || t_exchange(&s, ch))
        goto out;
    s.acc.on_recv = sz_recv;
    s.acc.arg = &st;
    while (sent < total && WAITS(&s, TMO, st.qn > sent || st.bad)) {
        if (st.bad)
            break;
        if (t_send(&s, &s.acc, st.q[sent], st.qlen[sent], NULL) != MADRAIL_OK)
            break;
        sent++;
    }
    CHECK(st.bad == 0, "sizes: every message arrived intact and in order (%s)", st.why);
    CHECK(sent == total, "sizes: echoed %zu of %zu messages", sent, total);
    CHECK(s.naccepted == 1, "sizes: one ep_accepted (%d)", s.naccepted);
    WAITS(&s, 2.0, s.acc.nfailed > 0); /* the parent closes first */
    rc = 0;
out:
    t_close(&s);
    free(st.q);
    free(st.qlen);
    return rc;
}

static void test_sizes(void)
{
    size_t total = sz_n * SZ_ROUNDS, k;
    uint8_t buf[SLOT];
    unsigned nores = 0;
    sz_state_t st;
    tchan_t ch;
    tside_t s;
    pid_t pid;
    int rc;

    memset(&st, 0, sizeof(st));
    pid = t_fork(child_sizes, NULL, &ch);
    if (pid < 0 || t_open(&s, "ta", NULL) != 0 || t_exchange(&s, &ch)) {
        CHECK(0, "sizes: setup");
        return;
    }
    s.own.on_recv = sz_recv;
    s.own.arg = &st;
    CHECK(t_connect(&s) == MADRAIL_OK, "sizes: ep_create to the child");
    for (k = 0; k < total; k++) {
        size_t len = sz_list[k % sz_n];
        rt_fill(buf, len, k);
        if (t_send(&s, &s.own, buf, len, &nores) != MADRAIL_OK)
            break;
        t_prog(&s);
    }
    CHECK(k == total, "sizes: sent %zu messages of %zu sizes (0..17, 63..65, %d..%d) x %d, "
                      "%u no-resource retries",
          k, sz_n, SLOT - 70, SLOT, SZ_ROUNDS, nores);
    WAIT(&s, s.own.nrecv >= total || st.bad || s.own.nfailed);
    CHECK(s.own.nrecv == total && st.bad == 0, "sizes: %llu of %zu echoes back intact (%s)",
          (unsigned long long)s.own.nrecv, total, st.why);
    CHECK(s.naccepted == 0 && s.own.nfailed == 0,
          "sizes: echoes came on our own ep (accepted %d, failed %d %s)", s.naccepted,
          s.own.nfailed, s.own.reason);
    t_close(&s);
    rc = t_reap(pid, &ch);
    CHECK(rc == 0, "sizes: child exit status %d", rc);
}

/* ---------------- B: full ring, NORESOURCE, then progress ---------------- */

#define BP_MSGS 3000
#define BP_LEN 1000

static const char *const bp_ov[] = {"MADRAIL_SHM_RING_SIZE=4k", NULL};

typedef struct bp_state {
    uint64_t bad;
} bp_state_t;

static void bp_recv(tep_t *te, const uint8_t *d, size_t len)
{
    bp_state_t *st = te->arg;
    uint64_t k = te->nrecv - 1, seq;

    if (len != BP_LEN) {
        st->bad++;
        return;
    }
    memcpy(&seq, d, 8);
    if (seq != k || !rt_matches(d + 8, len - 8, k))
        st->bad++;
}

static int child_bp(tchan_t *ch, void *arg)
{
    bp_state_t st = {0};
    char go;
    tside_t s;

    (void)arg;
    if (t_open(&s, "tb", bp_ov) != 0 || t_exchange(&s, ch))
        return 1;
    s.acc.on_recv = bp_recv;
    s.acc.arg = &st;
    /* no progress at all until the parent saw the ring full */
    if (t_read(ch, &go, 1) != 0)
        return 1;
    WAIT(&s, s.acc.nrecv >= BP_MSGS || st.bad);
    CHECK(s.acc.nrecv == BP_MSGS && st.bad == 0, "back-pressure: received %llu of %d in order, "
                                                  "%llu bad",
          (unsigned long long)s.acc.nrecv, BP_MSGS, (unsigned long long)st.bad);
    t_close(&s);
    return 0;
}

static void bp_msg(uint8_t *buf, uint64_t k)
{
    memcpy(buf, &k, 8);
    rt_fill(buf + 8, BP_LEN - 8, k);
}

static void test_backpressure(void)
{
    uint8_t buf[BP_LEN];
    struct iovec iov = {buf, BP_LEN};
    madrail_status_t st = MADRAIL_OK;
    unsigned nores = 0, i, still_full = 0;
    uint64_t k, cap, expect;
    tchan_t ch;
    tside_t s;
    pid_t pid;
    int rc;

    pid = t_fork(child_bp, NULL, &ch);
    if (pid < 0 || t_open(&s, "tb", bp_ov) != 0 || t_exchange(&s, &ch)) {
        CHECK(0, "back-pressure: setup");
        return;
    }
    CHECK(t_connect(&s) == MADRAIL_OK, "back-pressure: ep_create");
    for (k = 0; k < BP_MSGS; k++) {
        bp_msg(buf, k);
        st = s.ops->ctrl_send(s.own.ep, &iov, 1);
        if (st != MADRAIL_OK)
            break;
    }
    cap = s.own.ep->has_tx ? s.own.ep->tx.cap : 0;
    expect = cap / (MDR_SHM_REC_HDR + BP_LEN);
    CHECK(st == MADRAIL_ERR_NORESOURCE && k == expect,
          "back-pressure: a ring of %llu bytes took %llu messages of %d bytes, then %s "
          "(want %llu, then no-resource)",
          (unsigned long long)cap, (unsigned long long)k, BP_LEN, madrail_status_str(st),
          (unsigned long long)expect);
    for (i = 0; i < 20; i++) {
        t_prog(&s);
        still_full += s.ops->ctrl_send(s.own.ep, &iov, 1) == MADRAIL_ERR_NORESOURCE;
    }
    CHECK(still_full == 20, "back-pressure: stays full while the receiver does not progress "
                            "(%u of 20 refused)",
          still_full);
    CHECK(s.ops->ep_backlog(s.own.ep) == 0 && s.ops->ep_idle(s.own.ep),
          "back-pressure: a refused message is not queued (backlog %zu)",
          s.ops->ep_backlog(s.own.ep));
    rc = t_write(&ch, "g", 1);
    for (; rc == 0 && k < BP_MSGS; k++) {
        bp_msg(buf, k);
        if (t_send(&s, &s.own, buf, BP_LEN, &nores) != MADRAIL_OK)
            break;
    }
    CHECK(k == BP_MSGS && nores > 0,
          "back-pressure: all %d sent once the receiver progressed (%u no-resource retries)",
          BP_MSGS, nores);
    rc = t_reap(pid, &ch);
    CHECK(rc == 0, "back-pressure: child exit status %d", rc);
    CHECK(s.own.nfailed == 0, "back-pressure: no failure before the child closed");
    t_close(&s);
}

/* ---------------- C: puts (CMA or copied), and a stale key ---------------- */

#define PT_REG ((size_t)(4u << 20) + 128)
#define PT_GUARD 64

enum { PT_INFO = 1, PT_MARK = 2, PT_RESULT = 3, PT_DEREG = 4 };

typedef struct pt_msg {
    uint32_t type, idx;
    uint64_t raddr, roff, len, seed;
    uint32_t ok, rkey_len;
    uint8_t rkey[64];
} pt_msg_t;

typedef struct pt_child {
    uint8_t *buf, *model;
    size_t nmark, nbad;
    uint32_t results[16];
    size_t nresults;
} pt_child_t;

static void pt_child_recv(tep_t *te, const uint8_t *d, size_t len)
{
    pt_child_t *pc = te->arg;
    pt_msg_t m;

    if (len != sizeof(m))
        return;
    memcpy(&m, d, sizeof(m));
    if (m.type != PT_MARK || m.roff + m.len > PT_REG)
        return;
    rt_fill(pc->model + PT_GUARD + m.roff, (size_t)m.len, m.seed);
    if (memcmp(pc->buf, pc->model, PT_REG + 2 * PT_GUARD) != 0)
        pc->nbad++;
    if (pc->nresults < 16)
        pc->results[pc->nresults++] =
            m.idx << 1 | (memcmp(pc->buf, pc->model, PT_REG + 2 * PT_GUARD) == 0);
    pc->nmark++;
}

static int child_puts(tchan_t *ch, void *arg)
{
    const char *spec = arg;
    mdr_memh_t *mh = NULL;
    pt_child_t pc;
    pt_msg_t m;
    size_t sent = 0, rl = 64;
    madrail_status_t st;
    tside_t s;

    memset(&pc, 0, sizeof(pc));
    pc.buf = malloc(PT_REG + 2 * PT_GUARD);
    pc.model = malloc(PT_REG + 2 * PT_GUARD);
    if (pc.buf == NULL || pc.model == NULL || t_open(&s, spec, NULL) != 0 || t_exchange(&s, ch))
        return 1;
    memset(pc.buf, 0x5a, PT_REG + 2 * PT_GUARD);
    memset(pc.model, 0x5a, PT_REG + 2 * PT_GUARD);
    st = s.ops->mem_reg(s.rail, pc.buf + PT_GUARD, PT_REG, MDR_MEM_REMOTE_WRITE, &mh);
    CHECK(st == MADRAIL_OK, "puts %s: mem_reg", spec);
    memset(&m, 0, sizeof(m));
    m.type = PT_INFO;
    m.raddr = (uint64_t)(uintptr_t)(pc.buf + PT_GUARD);
    st = s.ops->rkey_pack(s.rail, mh, s.puuid, m.rkey, &rl);
    m.rkey_len = (uint32_t)rl;
    s.acc.on_recv = pt_child_recv;
    s.acc.arg = &pc;
    if (!WAIT(&s, s.acc.ep != NULL) || t_send(&s, &s.acc, &m, sizeof(m), NULL) != MADRAIL_OK)
        return 1;
    /* answer each marker with the verdict */
    while (WAIT(&s, pc.nresults > sent || s.acc.nfailed) && pc.nresults > sent &&
           !s.acc.nfailed) {
        memset(&m, 0, sizeof(m));
        m.type = PT_RESULT;
        m.idx = pc.results[sent] >> 1;
        m.ok = pc.results[sent] & 1;
        if (t_send(&s, &s.acc, &m, sizeof(m), NULL) != MADRAIL_OK)
            break;
        if (++sent == 5)
            break;
    }
    CHECK(pc.nmark == 5 && pc.nbad == 0, "puts %s: %zu markers, target matched the model at "
                                         "each (%zu mismatches)",
          spec, pc.nmark, pc.nbad);
    /* a stale key: deregister, tell the parent, expect its put to be refused */
    s.ops->mem_dereg(s.rail, mh);
    memset(&m, 0, sizeof(m));
    m.type = PT_DEREG;
    t_send(&s, &s.acc, &m, sizeof(m), NULL);
    WAIT(&s, s.acc.nfailed > 0);
    CHECK(s.acc.nfailed == 1 && s.acc.fail_status == MADRAIL_ERR_RAIL_PROTO,
          "puts %s: put with a stale key: ep_failed %d, %s (%s)", spec, s.acc.nfailed,
          madrail_status_str(s.acc.fail_status), s.acc.reason);
    CHECK(memcmp(pc.buf, pc.model, PT_REG + 2 * PT_GUARD) == 0,
          "puts %s: the stale-key put wrote nothing", spec);
    t_close(&s);
    free(pc.buf);
    free(pc.model);
    return 0;
}

typedef struct pt_parent {
    pt_msg_t info;
    int have_info, dereg;
    uint32_t results[16];
    size_t nresults;
} pt_parent_t;

static void pt_parent_recv(tep_t *te, const uint8_t *d, size_t len)
{
    pt_parent_t *pp = te->arg;
    pt_msg_t m;

    if (len != sizeof(m))
        return;
    memcpy(&m, d, sizeof(m));
    if (m.type == PT_INFO) {
        pp->info = m;
        pp->have_info = 1;
    } else if (m.type == PT_RESULT && pp->nresults < 16) {
        pp->results[pp->nresults++] = m.idx << 1 | (m.ok & 1);
    } else if (m.type == PT_DEREG) {
        pp->dereg = 1;
    }
}

static void test_puts(const char *spec, int want_cma)
{
    static const struct {
        size_t len, roff, loff;
    } pl[5] = {{1, 5, 0}, {4097, 17, 3}, {SLOT - 1, 100, 1}, {(1u << 20) + 3, 33, 1},
               {4u << 20, 64, 0}};
    size_t src_len = (4u << 20) + 64, i;
    uint8_t *src = malloc(src_len);
    pt_parent_t pp;
    pt_msg_t m;
    madrail_status_t st;
    rt_comp_t tc;
    tchan_t ch;
    tside_t s;
    pid_t pid;
    int rc, cma_here;

    memset(&pp, 0, sizeof(pp));
    pid = t_fork(child_puts, (void *)spec, &ch);
    if (src == NULL || pid < 0 || t_open(&s, spec, NULL) != 0 || t_exchange(&s, &ch)) {
        CHECK(0, "puts %s: setup", spec);
        free(src);
        return;
    }
    cma_here = s.rail->cma;
    s.own.on_recv = pt_parent_recv;
    s.own.arg = &pp;
    CHECK(t_connect(&s) == MADRAIL_OK, "puts %s: ep_create", spec);
    memset(&m, 0, sizeof(m));
    t_send(&s, &s.own, &m, sizeof(m), NULL); /* hello: the child learns of us */
    CHECK(WAIT(&s, pp.have_info), "puts %s: the child's target arrived", spec);
    for (i = 0; i < 5 && pp.have_info; i++) {
        rt_fill(src + pl[i].loff, pl[i].len, 700 + i);
        tc.c.cb = rt_comp_cb;
        tc.calls = 0;
        tc.status = MADRAIL_INPROGRESS;
        st = s.ops->put(s.own.ep, src + pl[i].loff, pl[i].len, NULL,
                        pp.info.raddr + pl[i].roff, pp.info.rkey, pp.info.rkey_len, &tc.c);
        if (st == MADRAIL_INPROGRESS) {
            WAIT(&s, tc.calls > 0);
            st = tc.status;
        }
        CHECK(st == MADRAIL_OK, "puts %s: put of %zu bytes at offset %zu: %s", spec, pl[i].len,
              pl[i].roff, madrail_status_str(st));
        memset(&m, 0, sizeof(m));
        m.type = PT_MARK;
        m.idx = (uint32_t)i;
        m.roff = pl[i].roff;
        m.len = pl[i].len;
        m.seed = 700 + i;
        /* sent right after completion: the child checks the data when it arrives */
        t_send(&s, &s.own, &m, sizeof(m), NULL);
        WAIT(&s, pp.nresults > i || s.own.nfailed);
        CHECK(pp.nresults > i && pp.results[i] == (i << 1 | 1),
              "puts %s: child saw the %zu bytes in place when the marker arrived", spec,
              pl[i].len);
    }
    if (want_cma && !cma_here)
        printf("SKIP [parent] puts %s: CMA is not available here; both runs copied\n", spec);
    else if (want_cma)
        CHECK(s.rail->nput_cma == 5 && s.rail->nput_copy == 0,
              "puts %s: single copy (process_vm_writev) between the processes: %llu CMA, "
              "%llu copied",
              spec, (unsigned long long)s.rail->nput_cma, (unsigned long long)s.rail->nput_copy);
    else
        CHECK(s.rail->nput_copy == 5 && s.rail->nput_cma == 0,
              "puts %s: copied through the ring: %llu copied, %llu CMA", spec,
              (unsigned long long)s.rail->nput_copy, (unsigned long long)s.rail->nput_cma);

    /* stale key */
    CHECK(WAIT(&s, pp.dereg), "puts %s: child deregistered its target", spec);
    tc.calls = 0;
    tc.status = MADRAIL_INPROGRESS;
    st = s.ops->put(s.own.ep, src, 100, NULL, pp.info.raddr, pp.info.rkey, pp.info.rkey_len,
                    &tc.c);
    WAIT(&s, s.own.nfailed > 0);
    CHECK(s.own.nfailed == 1 && (st == MADRAIL_ERR_RAIL_DOWN ||
                                 (st == MADRAIL_OK || st == MADRAIL_INPROGRESS)),
          "puts %s: put with a stale key returned %s, then our ep failed (%s: %s)", spec,
          madrail_status_str(st), madrail_status_str(s.own.fail_status), s.own.reason);
    rc = t_reap(pid, &ch);
    CHECK(rc == 0, "puts %s: child exit status %d", spec, rc);
    t_close(&s);
    free(src);
}

/* ---------------- D/E: a peer killed mid-transfer ---------------- */

static const char *const kill_ov[] = {"MADRAIL_SHM_PEER_CHECK=20ms", NULL};

typedef struct seq_state {
    uint64_t bad;
} seq_state_t;

static void seq_recv(tep_t *te, const uint8_t *d, size_t len)
{
    seq_state_t *st = te->arg;
    uint64_t seq;

    if (len < 8) {
        st->bad++;
        return;
    }
    memcpy(&seq, d, 8);
    if (seq != te->nrecv - 1 || !rt_matches(d + 8, len - 8, seq))
        st->bad++;
}

static size_t seq_len(uint64_t k)
{
    return 8 + (size_t)((k * 7919u) % (SLOT - 7));
}

/* The child sends forever until killed. */
static int child_sender(tchan_t *ch, void *arg)
{
    uint8_t buf[SLOT];
    tside_t s;
    uint64_t k;

    (void)arg;
    if (t_open(&s, "td", kill_ov) != 0 || t_exchange(&s, ch))
        return 1;
    if (t_connect(&s) != MADRAIL_OK)
        return 1;
    for (k = 0;; k++) {
        size_t len = seq_len(k);
        memcpy(buf, &k, 8);
        rt_fill(buf + 8, len - 8, k);
        if (t_send(&s, &s.own, buf, len, NULL) != MADRAIL_OK)
            return 1;
    }
}

/* use_pidfd 0: the driver's fallback where pidfds do not exist (kill(pid,
 * 0) and /proc: the killed child stays a zombie until we reap it). */
static void test_kill_sender(int use_pidfd)
{
    const char *how = use_pidfd ? "pidfd" : "kill+/proc";
    seq_state_t st = {0};
    double t0, dt;
    tchan_t ch;
    tside_t s;
    pid_t pid;
    int rc;
    char seg[MDR_SHM_NAME_MAX];

    pid = t_fork(child_sender, NULL, &ch);
    if (pid < 0 || t_open(&s, "td", kill_ov) != 0 || t_exchange(&s, &ch)) {
        CHECK(0, "kill sender (%s): setup", how);
        return;
    }
    addr_seg(s.paddr, seg);
    s.acc.on_recv = seq_recv;
    s.acc.arg = &st;
    CHECK(WAIT(&s, s.acc.nrecv >= 2000), "kill sender (%s): %llu messages from the child", how,
          (unsigned long long)s.acc.nrecv);
    CHECK(seg_exists(seg), "kill sender (%s): the child's segment %s exists while it runs", how,
          seg);
    if (!use_pidfd && s.acc.ep != NULL) {
        CHECK(s.acc.ep->pidfd >= 0, "kill sender (%s): the driver watches the child with a pidfd "
                                    "(%d); dropping it",
              how, s.acc.ep->pidfd);
        mdr_shm_unwatch_peer(s.acc.ep);
    }
    kill(pid, SIGKILL);
    t0 = mdr_time_sec();
    WAITS(&s, 10.0, s.acc.nfailed > 0);
    dt = mdr_time_sec() - t0;
    CHECK(s.acc.nfailed == 1 && s.acc.fail_status == MADRAIL_ERR_RAIL_DOWN,
          "kill sender (%s): ep_failed once with RAIL_DOWN after %.3f s: %s (%s)", how, dt,
          s.acc.reason, madrail_status_str(s.acc.fail_status));
    CHECK(dt < 5.0, "kill sender (%s): detected in %.3f s (peer check every 20 ms)", how, dt);
    CHECK(st.bad == 0, "kill sender (%s): the %llu messages delivered were intact and in order",
          how, (unsigned long long)s.acc.nrecv);
    CHECK(!seg_exists(seg), "kill sender (%s): the dead child's segment was removed from %s", how,
          MDR_SHM_DIR);
    rc = t_reap(pid, &ch);
    CHECK(rc == 128 + SIGKILL, "kill sender (%s): child died of SIGKILL (%d)", how, rc);
    t_close(&s);
}

/* The child receives a few messages, then stops reading and waits to die. */
static int child_receiver(tchan_t *ch, void *arg)
{
    seq_state_t st = {0};
    tside_t s;
    char c = 'r';

    (void)arg;
    if (t_open(&s, "te", kill_ov) != 0 || t_exchange(&s, ch))
        return 1;
    s.acc.on_recv = seq_recv;
    s.acc.arg = &st;
    WAIT(&s, s.acc.nrecv >= 100);
    t_write(ch, &c, 1);
    for (;;)
        pause();
}

static void test_kill_receiver(void)
{
    const char *spec = "te;cma=0";
    uint8_t buf[SLOT], *big = calloc(1, 4u << 20);
    struct iovec iov = {buf, 0};
    madrail_status_t st, st_put;
    uint8_t rkey[64];
    size_t rl = sizeof(rkey);
    rt_comp_t tc;
    double t0, dt;
    tchan_t ch;
    tside_t s;
    pid_t pid;
    uint64_t k;
    char c;
    int rc;

    /* The child stops reading: the put's fragments stay in its ring (its
     * key is never checked) and the rest waits in our queue. */
    pid = t_fork(child_receiver, NULL, &ch);
    if (big == NULL || pid < 0 || t_open(&s, spec, kill_ov) != 0 || t_exchange(&s, &ch)) {
        CHECK(0, "kill receiver: setup");
        free(big);
        return;
    }
    CHECK(t_connect(&s) == MADRAIL_OK, "kill receiver: ep_create");
    for (k = 0; k < 100; k++) {
        size_t len = seq_len(k);
        memcpy(buf, &k, 8);
        rt_fill(buf + 8, len - 8, k);
        t_send(&s, &s.own, buf, len, NULL);
    }
    CHECK(t_read(&ch, &c, 1) == 0, "kill receiver: the child got 100 messages and stopped");
    /* a copied put that cannot finish (the ring is not drained any more) */
    {
        mdr_shm_rkey_t rk;
        memset(&rk, 0, sizeof(rk));
        rk.key = 0;
        rk.tag = s.own.ep->pseg->tag; /* the child's segment */
        memcpy(rkey, &rk, sizeof(rk));
        rl = sizeof(rk);
    }
    tc.c.cb = rt_comp_cb;
    tc.calls = 0;
    tc.status = MADRAIL_INPROGRESS;
    st_put = s.ops->put(s.own.ep, big, 4u << 20, NULL, 0x1000, rkey, rl, &tc.c);
    CHECK(st_put == MADRAIL_INPROGRESS, "kill receiver: a 4 MiB copied put into the stalled "
                                        "child is in progress (%s, backlog %zu)",
          madrail_status_str(st_put), s.ops->ep_backlog(s.own.ep));
    iov.iov_len = 64;
    memset(buf, 0, 64);
    kill(pid, SIGKILL);
    t0 = mdr_time_sec();
    st = MADRAIL_OK;
    while (s.own.nfailed == 0 && mdr_time_sec() < t0 + 10.0) {
        st = s.ops->ctrl_send(s.own.ep, &iov, 1);
        t_prog(&s);
    }
    dt = mdr_time_sec() - t0;
    CHECK(s.own.nfailed == 1 && s.own.fail_status == MADRAIL_ERR_RAIL_DOWN,
          "kill receiver: ep_failed once with RAIL_DOWN after %.3f s: %s", dt, s.own.reason);
    CHECK(dt < 5.0, "kill receiver: detected in %.3f s", dt);
    WAITS(&s, 1.0, tc.calls > 0);
    CHECK(tc.calls == 1 && tc.status != MADRAIL_OK,
          "kill receiver: the pending put completed once, with an error (%d, %s)", tc.calls,
          madrail_status_str(tc.status));
    st = s.ops->ctrl_send(s.own.ep, &iov, 1);
    CHECK(st == MADRAIL_ERR_RAIL_DOWN, "kill receiver: ctrl_send after the failure: %s",
          madrail_status_str(st));
    CHECK(s.ops->ep_idle(s.own.ep) && s.ops->ep_backlog(s.own.ep) == 0,
          "kill receiver: the failed ep is idle with no backlog");
    rc = t_reap(pid, &ch);
    CHECK(rc == 128 + SIGKILL, "kill receiver: child died of SIGKILL (%d)", rc);
    t_close(&s);
    free(big);
}

/* ---------------- F: stale segments ---------------- */

static int child_hold(tchan_t *ch, void *arg)
{
    char seg[MDR_SHM_NAME_MAX];
    tside_t s;

    (void)arg;
    if (t_open(&s, "tf", NULL) != 0)
        return 1;
    t_write(ch, addr_seg(s.addr, seg), sizeof(seg));
    for (;;)
        pause();
}

static void test_stale(void)
{
    char seg1[MDR_SHM_NAME_MAX], seg2[MDR_SHM_NAME_MAX];
    tchan_t ch1, ch2;
    pid_t p1, p2;
    tside_t s;
    int rc;

    p1 = t_fork(child_hold, NULL, &ch1);
    p2 = t_fork(child_hold, NULL, &ch2);
    if (p1 < 0 || p2 < 0 || t_read(&ch1, seg1, sizeof(seg1)) || t_read(&ch2, seg2, sizeof(seg2))) {
        CHECK(0, "stale: setup");
        return;
    }
    kill(p1, SIGKILL);
    rc = t_reap(p1, &ch1);
    CHECK(rc == 128 + SIGKILL && seg_exists(seg1),
          "stale: a killed process leaves %s behind (nobody connected to it)", seg1);
    if (t_open(&s, "tf", NULL) == 0) {
        CHECK(!seg_exists(seg1), "stale: the next rail open removed it");
        CHECK(seg_exists(seg2), "stale: the segment of a live process %d is kept", (int)p2);
        t_close(&s);
    }
    kill(p2, SIGKILL);
    rc = t_reap(p2, &ch2);
    if (t_open(&s, "tf", NULL) == 0) {
        CHECK(!seg_exists(seg2), "stale: removed once that process was killed too");
        t_close(&s);
    }
}

/* ---------------- G: two rails per process, simultaneous connect ---------------- */

#define TR_MSGS 200

typedef struct tr_state {
    int rail;
    uint64_t bad;
} tr_state_t;

static void tr_recv(tep_t *te, const uint8_t *d, size_t len)
{
    tr_state_t *st = te->arg;
    uint32_t r;
    uint64_t k;

    if (len != 64) {
        st->bad++;
        return;
    }
    memcpy(&r, d, 4);
    memcpy(&k, d + 8, 8);
    if ((int)r != st->rail || k != te->nrecv - 1 || !rt_matches(d + 16, 48, k * 2 + r))
        st->bad++;
}

static int tr_run(tchan_t *ch)
{
    tside_t s[2];
    tr_state_t st[2];
    uint8_t buf[64];
    uint64_t k;
    int r, ok = 1;

    for (r = 0; r < 2; r++) {
        if (t_open(&s[r], r == 0 ? "a" : "b", NULL) != 0 || t_exchange(&s[r], ch))
            return 1;
        st[r].rail = r;
        st[r].bad = 0;
        s[r].own.on_recv = tr_recv;
        s[r].own.arg = &st[r];
        s[r].acc.on_recv = tr_recv;
        s[r].acc.arg = &st[r];
    }
    /* both processes create both endpoints before any traffic */
    for (r = 0; r < 2; r++)
        if (t_connect(&s[r]) != MADRAIL_OK)
            ok = 0;
    t_write(ch, "c", 1);
    if (t_read(ch, buf, 1) != 0)
        return 1;
    for (k = 0; k < TR_MSGS; k++)
        for (r = 0; r < 2; r++) {
            uint32_t rr = (uint32_t)r;
            memset(buf, 0, 8);
            memcpy(buf, &rr, 4);
            memcpy(buf + 8, &k, 8);
            rt_fill(buf + 16, 48, k * 2 + rr);
            if (t_send(&s[r], &s[r].own, buf, 64, NULL) != MADRAIL_OK)
                ok = 0;
            t_prog(&s[1 - r]);
        }
    for (r = 0; r < 2; r++)
        WAIT(&s[r], s[r].own.nrecv >= TR_MSGS || st[r].bad);
    for (r = 0; r < 2; r++) {
        CHECK(ok && s[r].own.nrecv == TR_MSGS && st[r].bad == 0,
              "two rails: rail %s got %llu of %d, all its own, in order", s[r].attr.name,
              (unsigned long long)s[r].own.nrecv, TR_MSGS);
        CHECK(s[r].naccepted == 0 && s[r].acc.nrecv == 0,
              "two rails: rail %s merged the simultaneous connection (ep_accepted %d)",
              s[r].attr.name, s[r].naccepted);
    }
    /* both must be done before either closes */
    t_write(ch, "d", 1);
    t_read(ch, buf, 1);
    for (r = 0; r < 2; r++)
        t_close(&s[r]);
    return 0;
}

static int child_two_rails(tchan_t *ch, void *arg)
{
    (void)arg;
    return tr_run(ch);
}

static void test_two_rails(void)
{
    tchan_t ch;
    pid_t pid;
    int rc;

    pid = t_fork(child_two_rails, NULL, &ch);
    if (pid < 0) {
        CHECK(0, "two rails: fork");
        return;
    }
    tr_run(&ch);
    rc = t_reap(pid, &ch);
    CHECK(rc == 0, "two rails: child exit status %d", rc);
}

/* ---------------- H: another node ---------------- */

static void test_other_node(void)
{
    tside_t a, b;
    mdr_shm_addr_t ad;
    mdr_ep_t *ep = NULL;
    madrail_status_t st;

    if (t_open(&a, "h1", NULL) != 0 || t_open(&b, "h2", NULL) != 0)
        return;
    memcpy(&ad, b.addr, sizeof(ad));
    ad.node ^= 1;
    st = a.ops->ep_create(a.rail, b.uuid, &ad, sizeof(ad), &a.own, &ep);
    CHECK(st == MADRAIL_ERR_RAIL_DOWN && ep == NULL,
          "other node: ep_create toward an address of another node fails at once (%s)",
          madrail_status_str(st));
    st = a.ops->ep_create(a.rail, b.uuid, b.addr, b.addr_len, &a.own, &ep);
    CHECK(st == MADRAIL_OK, "other node: the same address with our node id connects (%s)",
          madrail_status_str(st));
    t_close(&a);
    t_close(&b);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    struct stat st;

    rt_who = "parent";
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (mdr_rail_find("shm") == NULL) {
        printf("SKIP: the shm driver is not built\n");
        return 77;
    }
    if (stat(MDR_SHM_DIR, &st) != 0 || access(MDR_SHM_DIR, W_OK) != 0) {
        printf("SKIP: %s is missing or not writable\n", MDR_SHM_DIR);
        return 77;
    }
    sizes_init();
#define RUN(_name, _call)                                                                    \
    do {                                                                                     \
        if (only == NULL || strcmp(only, _name) == 0)                                        \
            _call;                                                                           \
    } while (0)
    RUN("sizes", test_sizes());
    RUN("backpressure", test_backpressure());
    RUN("puts-cma", test_puts("tc", 1));
    RUN("puts-copy", test_puts("tc;cma=0", 0));
    RUN("kill-sender", test_kill_sender(1));
    RUN("kill-sender-nopidfd", test_kill_sender(0));
    RUN("kill-receiver", test_kill_receiver());
    RUN("stale", test_stale());
    RUN("two-rails", test_two_rails());
    RUN("other-node", test_other_node());
    return rt_finish();
}
