/*
 * Driver-level test of the tcp rail, without the core: two (or more) rails
 * on lo in one process, upcalls that record what arrives, and checks of
 * what rail.h promises — ordering and exact bytes of control messages,
 * bursts, simultaneous connect, software puts, and that malformed input
 * from a peer closes one endpoint instead of the process.  Each check
 * prints a line; exit 0 = pass, 1 = fail, 77 = skip (no loopback).
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rails/rail.h"
#include "rails/tcp/tcp.h" /* wire format, for the raw-socket tests */
#include "util/cfg.h"
#include "util/clock.h"
#include "util/log.h"

#include "rail_test_util.h"

/* cfg.c's registry names every module's table; when this test is linked
 * without the core or the loop driver, empty weak ones stand in. */
__attribute__((weak)) const mdr_cfg_table_t mdr_core_cfg_table = {"core", NULL, 0};
__attribute__((weak)) const mdr_cfg_table_t mdr_loop_cfg_table = {"loop", NULL, 0};

#define SLOT 1024

/* ---------------- recording upcalls ---------------- */

typedef struct msg {
    size_t len;
    uint8_t *data;
} msg_t;

typedef struct side side_t;

typedef struct epc {
    side_t *side;
    msg_t *msgs;
    size_t nmsgs, cap;
    int misaligned;
    int failed;
    madrail_status_t fail_status;
    char fail_reason[200];
    int echo;            /* reply to each message with its bytes reversed */
    int destroy_on_fail; /* ep_destroy from inside ep_failed */
    size_t destroy_at_msg; /* ep_destroy from inside ctrl_recv at this count (0: never) */
    /* put ordering check: at each message, is the put target complete? */
    const uint8_t *watch, *watch_ref;
    size_t watch_len;
    int watch_ok_at_msg; /* 1: target matched when the message arrived */
} epc_t;

struct side {
    const char *label;
    uint64_t uuid;
    mdr_rail_t *rail;
    mdr_rail_params_t params;
    mdr_rail_attr_t attr;
    uint8_t addr[64];
    mdr_ep_t *ep; /* our ep to the other side (created or accepted) */
    epc_t epc;
    int accepted;
    uint64_t accepted_uuid;
    int refuse;   /* ep_accepted returns NULL */
};

static const mdr_rail_ops_t *ops = &mdr_tcp_ops;

static void rec_ctrl_recv(void *cookie, const void *data, size_t len)
{
    epc_t *c = cookie;
    msg_t *m;

    if (((uintptr_t)data & 7) != 0)
        c->misaligned++;
    if (c->nmsgs == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 256;
        msg_t *n = realloc(c->msgs, ncap * sizeof(*n));
        if (n == NULL)
            abort();
        c->msgs = n;
        c->cap = ncap;
    }
    m = &c->msgs[c->nmsgs++];
    m->len = len;
    m->data = malloc(len ? len : 1);
    if (m->data == NULL)
        abort();
    memcpy(m->data, data, len);
    if (c->watch != NULL)
        c->watch_ok_at_msg = memcmp(c->watch, c->watch_ref, c->watch_len) == 0;
    if (c->destroy_at_msg != 0 && c->nmsgs == c->destroy_at_msg && c->side->ep != NULL) {
        ops->ep_destroy(c->side->ep);
        c->side->ep = NULL;
        return;
    }
    if (c->echo && c->side->ep != NULL) {
        uint8_t rev[SLOT];
        struct iovec iov = {rev, len};
        size_t i;
        for (i = 0; i < len; i++)
            rev[i] = ((const uint8_t *)data)[len - 1 - i];
        if (ops->ctrl_send(c->side->ep, &iov, 1) != MADRAIL_OK)
            c->echo = -1; /* reported by the test */
    }
}

static void *rec_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    side_t *s = rail_cookie;

    s->accepted++;
    s->accepted_uuid = uuid;
    if (s->refuse)
        return NULL;
    s->ep = ep;
    return &s->epc;
}

static void rec_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    epc_t *c = cookie;

    c->failed++;
    c->fail_status = status;
    snprintf(c->fail_reason, sizeof(c->fail_reason), "%s", reason ? reason : "(null)");
    if (c->destroy_on_fail && c->side->ep != NULL) {
        ops->ep_destroy(c->side->ep);
        c->side->ep = NULL;
    }
}

static const mdr_rail_upcalls_t upcalls = {rec_ctrl_recv, rec_ep_accepted, rec_ep_failed};

static void epc_clear(epc_t *c)
{
    size_t i;
    side_t *s = c->side;

    for (i = 0; i < c->nmsgs; i++)
        free(c->msgs[i].data);
    free(c->msgs);
    memset(c, 0, sizeof(*c));
    c->side = s;
}

static madrail_status_t side_open(side_t *s, const char *label, uint64_t uuid, const char *spec,
                                  const char *const *overrides)
{
    madrail_status_t st;

    memset(s, 0, sizeof(*s));
    s->label = label;
    s->uuid = uuid;
    s->epc.side = s;
    s->params = rt_params(uuid, &upcalls, s, SLOT, 16, overrides);
    st = ops->open(spec, &s->params, &s->rail);
    if (st != MADRAIL_OK)
        return st;
    ops->query(s->rail, &s->attr);
    return ops->addr_pack(s->rail, s->addr, s->attr.addr_len);
}

static void side_close(side_t *s)
{
    if (s->rail != NULL)
        ops->close(s->rail);
    s->rail = NULL;
    s->ep = NULL;
    epc_clear(&s->epc);
}

/* ---------------- helpers ---------------- */

static side_t *pumped[8];
static int npumped;

static void pump_set(side_t *a, side_t *b)
{
    npumped = 0;
    if (a)
        pumped[npumped++] = a;
    if (b)
        pumped[npumped++] = b;
}

/* Progress every pumped rail until cond(arg) or timeout; returns cond. */
static int pump(int (*cond)(void *), void *arg, double timeout)
{
    double end = mdr_time_sec() + timeout;
    int i, n;

    for (;;) {
        if (cond != NULL && cond(arg))
            return 1;
        if (mdr_time_sec() > end)
            return cond == NULL;
        n = 0;
        for (i = 0; i < npumped; i++)
            if (pumped[i]->rail)
                n += ops->progress(pumped[i]->rail);
        if (n == 0)
            usleep(50);
    }
}

typedef struct want {
    epc_t *c;
    size_t n;
} want_t;

static int have_msgs(void *arg)
{
    want_t *w = arg;
    return w->c->nmsgs >= w->n;
}

/* w->c saw at least w->n failures */
static int have_failures(void *arg)
{
    want_t *w = arg;
    return (size_t)w->c->failed >= w->n;
}

static int have_fail(void *arg)
{
    return ((epc_t *)arg)->failed > 0;
}

static int flag_set(void *arg)
{
    return *(volatile int *)arg != 0;
}

static void fill_msg(uint8_t *p, size_t len, unsigned seq)
{
    size_t i;
    for (i = 0; i < len; i++)
        p[i] = (uint8_t)(seq * 131u + i * 7u + len);
    if (len >= 4)
        memcpy(p, &seq, 4);
}

static int check_msg(const msg_t *m, size_t len, unsigned seq)
{
    uint8_t buf[SLOT];
    if (m->len != len)
        return 0;
    fill_msg(buf, len, seq);
    return memcmp(buf, m->data, len) == 0;
}

/* Send with a 2-iovec split (header/payload, as the core does). */
static madrail_status_t send_msg(side_t *s, size_t len, unsigned seq)
{
    uint8_t buf[SLOT];
    struct iovec iov[2];
    size_t h = len < 16 ? len / 2 : 16;

    fill_msg(buf, len, seq);
    iov[0].iov_base = buf;
    iov[0].iov_len = h;
    iov[1].iov_base = buf + h;
    iov[1].iov_len = len - h;
    return ops->ctrl_send(s->ep, iov, 2);
}

static int count_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char path[300], target[64];
    int n = 0;
    ssize_t l;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        l = readlink(path, target, sizeof(target) - 1);
        if (l > 0) {
            target[l] = '\0';
            if (strncmp(target, "socket:", 7) == 0)
                n++;
        }
    }
    closedir(d);
    return n;
}

/* A connected raw socket to a rail's listener. */
static int raw_connect(const side_t *s)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    memcpy(&sin.sin_addr.s_addr, s->addr + 4, 4);
    memcpy(&sin.sin_port, s->addr + 8, 2);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Pump until fd sees EOF/reset; 1 if the rail closed it. */
static int raw_wait_closed(int fd, double timeout)
{
    double end = mdr_time_sec() + timeout;
    char buf[256];
    ssize_t n;
    int i;

    while (mdr_time_sec() < end) {
        for (i = 0; i < npumped; i++)
            ops->progress(pumped[i]->rail);
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
        usleep(100);
    }
    return 0;
}

/* Pump until fd sees EOF/reset; 1 if the rail closed it.  *got_p: bytes
 * the rail sent before closing (a refused stranger must get none). */
static int raw_wait_closed_got(int fd, double timeout, size_t *got_p)
{
    double end = mdr_time_sec() + timeout;
    char buf[256];
    ssize_t n;
    int i;

    *got_p = 0;
    while (mdr_time_sec() < end) {
        for (i = 0; i < npumped; i++)
            ops->progress(pumped[i]->rail);
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0)
            *got_p += (size_t)n;
        else if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
        else
            usleep(100);
    }
    return 0;
}

/* A handshake frame as the driver of this version writes it: the 24
 * common bytes, then len bytes of data (tcp.h).  Returns its length. */
static size_t raw_hs_frame(uint8_t *frame, int type, uint64_t uuid, uint64_t target,
                           const void *data, size_t len)
{
    mdr_tcp_hdr_t h;
    mdr_tcp_hello_t b;

    memset(&h, 0, sizeof(h));
    memset(&b, 0, sizeof(b));
    h.type = (uint8_t)type;
    h.len = (uint32_t)(MDR_TCP_HS_BASE + len);
    b.magic = MDR_TCP_MAGIC;
    b.version = MDR_TCP_VERSION;
    b.uuid = uuid;
    b.target = target;
    if (len > 0)
        memcpy(b.data, data, len);
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &b, h.len);
    return sizeof(h) + h.len;
}

/* A HELLO frame (48 bytes) with nonce (NULL: zeros). */
static size_t raw_hello(uint8_t *frame, uint64_t uuid, uint64_t target, const uint8_t *nonce)
{
    static const uint8_t zero[MDR_AUTH_NONCE_LEN];
    return raw_hs_frame(frame, MDR_TCP_F_HELLO, uuid, target, nonce ? nonce : zero,
                        MDR_AUTH_NONCE_LEN);
}

/* Read n bytes from fd, progressing the pumped rails meanwhile; returns
 * the bytes read (fewer: closed, or timeout). */
static size_t raw_recv(int fd, uint8_t *buf, size_t n, double timeout)
{
    double end = mdr_time_sec() + timeout;
    size_t got = 0;
    ssize_t k;
    int i;

    while (got < n && mdr_time_sec() < end) {
        for (i = 0; i < npumped; i++)
            ops->progress(pumped[i]->rail);
        k = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
        else
            usleep(50);
    }
    return got;
}

/* The transcript of a handshake with the rail of side s (the acceptor). */
static void raw_transcript(const side_t *s, uint64_t uuid_i, const uint8_t *nonce_i,
                           const uint8_t *nonce_a, uint8_t rail_id[6], mdr_auth_transcript_t *t)
{
    memcpy(rail_id, s->addr + 4, 4); /* published ip and port, network order */
    memcpy(rail_id + 4, s->addr + 8, 2);
    t->driver = "tcp";
    t->uuid_i = uuid_i;
    t->uuid_a = s->uuid;
    t->nonce_i = nonce_i;
    t->nonce_a = nonce_a;
    t->rail_id = rail_id;
    t->rail_id_len = 6;
}

/* The client side of a whole handshake with side s over fd: HELLO, then
 * PROOF keyed by key (NULL: zeros for a proof) with a continuity proof
 * from secret (NULL: zeros).  Returns the HELLO_ACK's status (MDR_TCP_ACK_*)
 * once its proof checked out, -1 when the rail closed the connection
 * (*stage_p: 0 = before the CHALLENGE, 1 = after it), -2 for an answer
 * that does not prove the key.  session_p (may be NULL): the session
 * secret, when the answer was OK. */
static int raw_handshake(int fd, const side_t *s, uint64_t uuid, uint64_t target,
                         const uint8_t *key, const uint8_t *secret, int *stage_p,
                         uint8_t *session_p)
{
    uint8_t frame[MDR_TCP_HS_MAX], in[MDR_TCP_HS_MAX], nonce_i[MDR_AUTH_NONCE_LEN];
    uint8_t nonce_a[MDR_AUTH_NONCE_LEN];
    uint8_t proof[3 * MDR_AUTH_MAC_LEN], mac_a[MDR_AUTH_MAC_LEN], rail_id[6];
    mdr_auth_transcript_t t;
    uint16_t status;
    size_t n;

    *stage_p = 0;
    mdr_auth_nonce(nonce_i);
    n = raw_hello(frame, uuid, target, nonce_i);
    if (send(fd, frame, n, 0) != (ssize_t)n)
        return -1;
    if (raw_recv(fd, in, MDR_TCP_HELLO_LEN, 5) != MDR_TCP_HELLO_LEN)
        return -1;
    if (in[0] != MDR_TCP_F_CHALLENGE)
        return -2;
    *stage_p = 1;
    memcpy(nonce_a, in + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE, sizeof(nonce_a));
    raw_transcript(s, uuid, nonce_i, nonce_a, rail_id, &t);
    memset(proof, 0, sizeof(proof));
    if (key != NULL)
        mdr_auth_mac(proof, key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    if (secret != NULL)
        mdr_auth_mac(proof + MDR_AUTH_MAC_LEN, secret, MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY,
                     &t);
    n = raw_hs_frame(frame, MDR_TCP_F_PROOF, uuid, target, proof, sizeof(proof));
    if (send(fd, frame, n, 0) != (ssize_t)n)
        return -1;
    if (raw_recv(fd, in, MDR_TCP_HDR_LEN + MDR_TCP_HS_ACK_BODY, 5) !=
        MDR_TCP_HDR_LEN + MDR_TCP_HS_ACK_BODY)
        return -1;
    mdr_auth_mac(mac_a, key != NULL ? key : rt_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    if (in[0] != MDR_TCP_F_HELLO_ACK ||
        !mdr_auth_mac_equal(mac_a, in + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE))
        return -2;
    memcpy(&status, in + MDR_TCP_HDR_LEN + 6, 2);
    if (status == MDR_TCP_ACK_OK && session_p != NULL)
        mdr_auth_mac(session_p, key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
    return status;
}

/* ---------------- tests ---------------- */

static void test_specs(void)
{
    static const char *const bad_bw[] = {"MADRAIL_TCP_NODELAY=maybe", NULL};
    static const char *const bw[] = {"MADRAIL_TCP_BANDWIDTH=123", "MADRAIL_TCP_LATENCY_US=7",
                                     NULL};
    side_t s;

    CHECK(side_open(&s, "x", 1, "nosuchif0", NULL) == MADRAIL_ERR_CONFIG,
          "unknown interface is a config error");
    CHECK(side_open(&s, "x", 1, "192.0.2.77", NULL) == MADRAIL_ERR_CONFIG,
          "address not on this host is a config error");
    CHECK(side_open(&s, "x", 1, "lo;bogus=1", NULL) == MADRAIL_ERR_CONFIG,
          "unknown spec option is a config error");
    CHECK(side_open(&s, "x", 1, "lo;port=99999", NULL) == MADRAIL_ERR_CONFIG,
          "port out of range is a config error");
    CHECK(side_open(&s, "x", 1, "lo", bad_bw) == MADRAIL_ERR_CONFIG,
          "bad MADRAIL_TCP_NODELAY is a config error");

    if (side_open(&s, "x", 1, "127.0.0.1", bw) == MADRAIL_OK) {
        CHECK(s.attr.bandwidth_mbs == 123.0 && s.attr.latency_us == 7.0,
              "profile overrides: %.1f MB/s %.1f us", s.attr.bandwidth_mbs, s.attr.latency_us);
        CHECK((s.attr.caps & (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP)) ==
                      (MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP) &&
                  !(s.attr.caps & MDR_RAIL_CAP_PUT_HW),
              "caps PUT|REG_CHEAP (0x%x)", s.attr.caps);
        CHECK(s.attr.max_ctrl >= SLOT && s.attr.addr_len > 0 && s.attr.addr_len <= 64 &&
                  s.attr.max_rkey == 8,
              "attr max_ctrl %zu addr_len %zu max_rkey %zu", s.attr.max_ctrl, s.attr.addr_len,
              s.attr.max_rkey);
        CHECK(strcmp(s.attr.name, "tcp:lo") == 0, "rail name %s", s.attr.name);
        side_close(&s);
    } else {
        CHECK(0, "open tcp:127.0.0.1");
    }
    if (side_open(&s, "x", 1, "lo", NULL) == MADRAIL_OK) {
        CHECK(s.attr.bandwidth_mbs == 5000.0 && s.attr.latency_us == 20.0,
              "default lo profile: %.1f MB/s %.1f us", s.attr.bandwidth_mbs, s.attr.latency_us);
        side_close(&s);
    } else {
        CHECK(0, "open tcp:lo");
    }
    /* no default interface: "the first one that is up" is the kernel's
     * order, not the user's choice (MADRAIL_RAILS=auto chooses) */
    CHECK(side_open(&s, "x", 1, "", NULL) == MADRAIL_ERR_CONFIG,
          "empty spec (no interface) is a config error");
    CHECK(side_open(&s, "x", 1, ";port=0", NULL) == MADRAIL_ERR_CONFIG,
          "options without an interface are a config error");
}

static void test_ctrl(side_t *a, side_t *b)
{
    size_t sizes[] = {0, 1, SLOT - 1, SLOT, 7, 8, 9};
    int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    want_t w = {&b->epc, (size_t)nsizes};
    int i, ok = 1;
    madrail_status_t st;

    st = ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->epc, &a->ep);
    CHECK(st == MADRAIL_OK, "ep_create A->B: %s", madrail_status_str(st));
    if (st != MADRAIL_OK)
        return;
    pump(NULL, NULL, 0.05);
    CHECK(b->accepted == 0 && ops->ep_idle(a->ep) && ops->ep_backlog(a->ep) == 0,
          "connection is lazy: nothing at the peer before traffic");
    /* sent before the connection is up: queued in the ep */
    for (i = 0; i < nsizes; i++)
        if (send_msg(a, sizes[i], (unsigned)i) != MADRAIL_OK)
            ok = 0;
    CHECK(ok, "ctrl_send of sizes 0, 1, slot-1, slot, 7, 8, 9 accepted");
    {
        uint8_t big[SLOT + 1] = {0};
        struct iovec iov = {big, SLOT + 1};
        CHECK(ops->ctrl_send(a->ep, &iov, 1) != MADRAIL_OK, "ctrl_send of slot+1 refused");
    }
    CHECK(pump(have_msgs, &w, 5), "B received %zu/%d messages", b->epc.nmsgs, nsizes);
    CHECK(b->accepted == 1 && b->accepted_uuid == a->uuid && b->ep != NULL,
          "B's ep_accepted called once with A's uuid (%d calls)", b->accepted);
    for (i = 0; i < nsizes && (size_t)i < b->epc.nmsgs; i++)
        CHECK(check_msg(&b->epc.msgs[i], sizes[i], (unsigned)i),
              "message %d (%zu bytes) in order with the right bytes (got %zu)", i, sizes[i],
              b->epc.msgs[i].len);
    CHECK(b->epc.misaligned == 0, "payloads delivered 8-byte aligned");

    /* reply from inside the upcall: B echoes, A receives */
    if (b->ep != NULL) {
        want_t wa = {&a->epc, 3};
        uint8_t m[3][40];
        b->epc.echo = 1;
        for (i = 0; i < 3; i++) {
            struct iovec iov = {m[i], (size_t)(13 + i)};
            fill_msg(m[i], 13 + (size_t)i, 100u + (unsigned)i);
            ops->ctrl_send(a->ep, &iov, 1);
        }
        CHECK(pump(have_msgs, &wa, 5) && b->epc.echo == 1,
              "B replied from inside ctrl_recv; A got %zu/3", a->epc.nmsgs);
        for (i = 0; i < 3 && (size_t)i < a->epc.nmsgs; i++) {
            size_t k, len = 13 + (size_t)i;
            int same = a->epc.msgs[i].len == len;
            for (k = 0; same && k < len; k++)
                same = a->epc.msgs[i].data[k] == m[i][len - 1 - k];
            CHECK(same, "echo %d has the right bytes", i);
        }
        b->epc.echo = 0;
    }
    CHECK(a->epc.failed == 0 && b->epc.failed == 0, "no failures");
}

static void test_burst(side_t *a, side_t *b)
{
    const unsigned N = 10000;
    want_t w;
    unsigned i, bad = 0, nores = 0;
    size_t base = b->epc.nmsgs;
    double t0;

    w.c = &b->epc;
    w.n = base + N;
    t0 = mdr_time_sec();
    for (i = 0; i < N; i++) {
        size_t len = 16 + (i * 37u) % (SLOT - 16);
        madrail_status_t st;
        while ((st = send_msg(a, len, i)) == MADRAIL_ERR_NORESOURCE) {
            nores++;
            ops->progress(a->rail);
            ops->progress(b->rail);
        }
        if (st != MADRAIL_OK)
            bad++;
    }
    CHECK(bad == 0, "10000 ctrl_send in a burst accepted (NORESOURCE retries: %u)", nores);
    CHECK(pump(have_msgs, &w, 20), "B received %zu/%u", b->epc.nmsgs - base, N);
    for (i = 0; i < N && base + i < b->epc.nmsgs; i++) {
        size_t len = 16 + (i * 37u) % (SLOT - 16);
        if (!check_msg(&b->epc.msgs[base + i], len, i)) {
            if (bad++ < 3)
                printf("     message %u wrong (len %zu, expected %zu)\n", i,
                       b->epc.msgs[base + i].len, len);
        }
    }
    CHECK(bad == 0 && b->epc.nmsgs == base + N, "burst complete and in order (%u bad) in %.3f s",
          bad, mdr_time_sec() - t0);
    pump(NULL, NULL, 0.05);
    CHECK(ops->ep_backlog(a->ep) == 0 && ops->ep_idle(a->ep), "A's ep idle, backlog %zu",
          ops->ep_backlog(a->ep));
}

/* Both sides call ep_create before either progresses. */
static void test_simultaneous(int variant)
{
    side_t c, d;
    const unsigned N = 200;
    want_t wc, wd;
    int s0, s1;
    unsigned i, ok = 1;

    if (side_open(&c, "C", 0x3333, "lo", NULL) != MADRAIL_OK ||
        side_open(&d, "D", 0x4444, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open rails C and D");
        return;
    }
    s0 = count_sockets();
    if (ops->ep_create(c.rail, d.uuid, d.addr, d.attr.addr_len, &c.epc, &c.ep) != MADRAIL_OK ||
        ops->ep_create(d.rail, c.uuid, c.addr, c.attr.addr_len, &d.epc, &d.ep) != MADRAIL_OK) {
        CHECK(0, "simultaneous ep_create");
        goto out;
    }
    for (i = 0; i < N; i++)
        if (send_msg(&c, 8 + i % 100, i) != MADRAIL_OK || send_msg(&d, 8 + i % 90, i) != MADRAIL_OK)
            ok = 0;
    CHECK(ok, "variant %d: messages queued on both eps before the handshake", variant);
    wc.c = &c.epc;
    wc.n = N;
    wd.c = &d.epc;
    wd.n = N;
    if (variant == 1) {
        /* D handles C's HELLO before its own connection completes */
        pump_set(&d, NULL);
        pump(NULL, NULL, 0.05);
    } else if (variant == 2) {
        pump_set(&c, NULL);
        pump(NULL, NULL, 0.05);
    }
    pump_set(&c, &d);
    pump(have_msgs, &wc, 5);
    pump(have_msgs, &wd, 5);
    CHECK(c.epc.nmsgs == N && d.epc.nmsgs == N, "variant %d: C got %zu/%u, D got %zu/%u",
          variant, c.epc.nmsgs, N, d.epc.nmsgs, N);
    for (i = 0, ok = 1; i < N && i < c.epc.nmsgs && i < d.epc.nmsgs; i++)
        if (!check_msg(&c.epc.msgs[i], 8 + i % 90, i) || !check_msg(&d.epc.msgs[i], 8 + i % 100, i))
            ok = 0;
    CHECK(ok, "variant %d: both directions in order with the right bytes", variant);
    CHECK(c.accepted == 0 && d.accepted == 0 && c.epc.failed == 0 && d.epc.failed == 0,
          "variant %d: no extra ep (accepted %d/%d), no failure (%d/%d)", variant, c.accepted,
          d.accepted, c.epc.failed, d.epc.failed);
    pump(NULL, NULL, 0.05);
    s1 = count_sockets();
    CHECK(s1 - s0 == 2, "variant %d: exactly one connection left (%d new sockets)", variant,
          s1 - s0);
out:
    side_close(&c);
    side_close(&d);
}

static int first_byte(void *arg);

static void test_put(side_t *a, side_t *b)
{
    const size_t LEN = 8u << 20, MARGIN = 4096;
    const size_t ULEN = 1000003, UOFF = 12345; /* unaligned length and offset */
    uint8_t *src, *dst;
    mdr_memh_t *mh = NULL;
    uint8_t rkey[16];
    size_t rkey_len = 0, i;
    rt_comp_t pc = {{rt_comp_cb}, 0, MADRAIL_OK};
    madrail_status_t st;
    want_t w;
    double t0, dt;
    int intact;

    src = malloc(LEN);
    dst = calloc(1, LEN + 2 * MARGIN);
    if (src == NULL || dst == NULL) {
        CHECK(0, "allocate put buffers");
        goto out;
    }
    for (i = 0; i < LEN; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    st = ops->mem_reg(b->rail, dst + MARGIN, LEN, MDR_MEM_REMOTE_WRITE | MDR_MEM_LOCAL, &mh);
    CHECK(st == MADRAIL_OK, "B mem_reg 8 MiB");
    if (st != MADRAIL_OK)
        goto out;
    st = ops->rkey_pack(b->rail, mh, a->uuid, rkey, &rkey_len);
    CHECK(st == MADRAIL_OK && rkey_len > 0 && rkey_len <= b->attr.max_rkey, "rkey_pack: %zu bytes",
          rkey_len);

    /* puts both ways: B puts to A first, so A's connection carries the
     * peer's puts (within MDR_TCP_DUPLEX_HOLD) and A cuts its own into
     * frames */
    {
        static uint8_t back[256];
        uint8_t bkey[16], pat[64];
        size_t bkey_len = 0;
        mdr_memh_t *bmh = NULL;
        rt_comp_t bc = {{rt_comp_cb}, 0, MADRAIL_OK};

        memset(back, 0, sizeof(back));
        memset(pat, 0xb7, sizeof(pat));
        st = ops->mem_reg(a->rail, back, sizeof(back), MDR_MEM_REMOTE_WRITE, &bmh);
        if (st == MADRAIL_OK)
            st = ops->rkey_pack(a->rail, bmh, b->uuid, bkey, &bkey_len);
        if (st == MADRAIL_OK)
            st = ops->put(b->ep, pat, sizeof(pat), NULL, (uint64_t)(uintptr_t)back, bkey,
                          bkey_len, &bc.c);
        if (st == MADRAIL_OK)
            bc.calls = 1;
        CHECK((st == MADRAIL_OK || st == MADRAIL_INPROGRESS) && pump(flag_set, &bc.calls, 10) &&
                  pump(first_byte, back + sizeof(pat) - 1, 10) && bc.status == MADRAIL_OK,
              "B's put of %zu bytes to A arrived", sizeof(pat));
        if (bmh != NULL)
            ops->mem_dereg(a->rail, bmh);
    }

    /* 8 MiB put, and a control message sent while it is queued: the message
     * passes the put (replies to the peer's puts must not wait behind our
     * bulk data, or the two directions take turns) */
    b->epc.watch = dst + MARGIN;
    b->epc.watch_ref = src;
    b->epc.watch_len = LEN;
    b->epc.watch_ok_at_msg = -1;
    w.c = &b->epc;
    w.n = b->epc.nmsgs + 1;
    t0 = mdr_time_sec();
    st = ops->put(a->ep, src, LEN, NULL, (uint64_t)(uintptr_t)(dst + MARGIN), rkey, rkey_len,
                  &pc.c);
    CHECK(st == MADRAIL_INPROGRESS || st == MADRAIL_OK, "put 8 MiB: %s", madrail_status_str(st));
    if (st == MADRAIL_OK)
        pc.calls = 1;
    send_msg(a, 8, 4242);
    CHECK(pump(have_msgs, &w, 10) && check_msg(&b->epc.msgs[w.n - 1], 8, 4242),
          "control message sent while the put was queued arrived");
    CHECK(b->epc.watch_ok_at_msg == 0,
          "it passed the put: the data was not complete yet when it arrived");
    CHECK(pump(flag_set, &pc.calls, 10) && pc.status == MADRAIL_OK && pc.calls == 1,
          "put completion fired once with OK (%d)", pc.calls);
    /* rail.h's ordering promise: sent after the completion, after the data */
    w.n = b->epc.nmsgs + 1;
    send_msg(a, 8, 4243);
    CHECK(pump(have_msgs, &w, 10), "control message after the put's completion arrived");
    dt = mdr_time_sec() - t0;
    CHECK(memcmp(dst + MARGIN, src, LEN) == 0, "8 MiB arrived byte-exact (%.0f MB/s on lo)",
          (double)LEN / 1e6 / dt);
    CHECK(b->epc.watch_ok_at_msg == 1,
          "data was complete when the control message sent after the completion arrived");
    for (i = 0, intact = 1; i < MARGIN; i++)
        if (dst[i] != 0 || dst[MARGIN + LEN + i] != 0)
            intact = 0;
    CHECK(intact, "bytes around the region untouched");
    b->epc.watch = NULL;

    /* unaligned length/offset, then messages: framing stays right */
    memset(dst + MARGIN, 0, LEN);
    pc.calls = 0;
    w.n = b->epc.nmsgs + 2;
    st = ops->put(a->ep, src + 3, ULEN, NULL, (uint64_t)(uintptr_t)(dst + MARGIN + UOFF), rkey,
                  rkey_len, &pc.c);
    if (st == MADRAIL_OK)
        pc.calls = 1;
    send_msg(a, 5, 77);
    send_msg(a, SLOT, 78);
    CHECK(pump(flag_set, &pc.calls, 10) && pump(have_msgs, &w, 10),
          "unaligned put (%zu bytes at +%zu) completed and 2 messages followed", ULEN, UOFF);
    CHECK(memcmp(dst + MARGIN + UOFF, src + 3, ULEN) == 0 && dst[MARGIN + UOFF - 1] == 0 &&
              dst[MARGIN + UOFF + ULEN] == 0,
          "unaligned put byte-exact");
    CHECK(b->epc.nmsgs >= 2 && check_msg(&b->epc.msgs[b->epc.nmsgs - 2], 5, 77) &&
              check_msg(&b->epc.msgs[b->epc.nmsgs - 1], SLOT, 78) && b->epc.misaligned == 0,
          "messages after the unaligned put intact and aligned");
    {
        /* a small put completes too (possibly at once) */
        rt_comp_t pz = {{rt_comp_cb}, 0, MADRAIL_OK};
        st = ops->put(a->ep, src, 0, NULL, (uint64_t)(uintptr_t)(dst + MARGIN), rkey, rkey_len,
                      &pz.c);
        if (st == MADRAIL_OK)
            pz.calls = 1;
        CHECK(pump(flag_set, &pz.calls, 5) && pz.status == MADRAIL_OK, "zero-length put completes");
    }
    pump(NULL, NULL, 0.02);
    CHECK(ops->ep_idle(a->ep) && a->epc.failed == 0 && b->epc.failed == 0,
          "A idle after puts, no failures");

out:
    if (mh != NULL)
        ops->mem_dereg(b->rail, mh);
    free(src);
    free(dst);
}

/* A put outside the registered region: the receiver fails that ep. */
static void test_bad_put(int bad_key)
{
    side_t a, b;
    uint8_t *dst = NULL, src[256] = {1, 2, 3};
    uint8_t rkey[16];
    size_t rkey_len = 0;
    mdr_memh_t *mh = NULL;
    rt_comp_t pc = {{rt_comp_cb}, 0, MADRAIL_OK};
    want_t w;
    madrail_status_t st;

    /* with acknowledged puts the sender's completion itself reports the
     * rejection (the default, completion on write, is checked further on) */
    static const char *const ack[] = {"MADRAIL_TCP_PUT_ACK=1", NULL};

    if (side_open(&a, "A2", 0x5555, "lo", ack) != MADRAIL_OK ||
        side_open(&b, "B2", 0x6666, "lo", ack) != MADRAIL_OK) {
        CHECK(0, "open rails for the bad put");
        return;
    }
    pump_set(&a, &b);
    dst = calloc(1, 4096);
    if (ops->mem_reg(b.rail, dst, 1024, MDR_MEM_REMOTE_WRITE, &mh) != MADRAIL_OK ||
        ops->rkey_pack(b.rail, mh, a.uuid, rkey, &rkey_len) != MADRAIL_OK) {
        CHECK(0, "mem_reg for the bad put");
        goto out;
    }
    if (bad_key)
        rkey[0] ^= 0x5a;
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 10, 1);
    w.c = &b.epc;
    w.n = 1;
    pump(have_msgs, &w, 5);
    b.epc.destroy_on_fail = 1; /* the core may destroy the ep inside ep_failed */
    st = ops->put(a.ep, src, 100, NULL, (uint64_t)(uintptr_t)(dst + 1000), rkey, rkey_len,
                  &pc.c);
    CHECK(st == MADRAIL_OK || st == MADRAIL_INPROGRESS, "%s put accepted by the sender",
          bad_key ? "bad-key" : "out-of-region");
    pump(have_fail, &b.epc, 5);
    if (st == MADRAIL_INPROGRESS)
        pump(flag_set, &pc.calls, 5);
    CHECK(st == MADRAIL_INPROGRESS && pc.calls == 1 && pc.status != MADRAIL_OK,
          "sender's put completion reports an error (%s)", madrail_status_str(pc.status));
    CHECK(b.epc.failed == 1 && b.epc.fail_status == MADRAIL_ERR_RAIL_PROTO,
          "receiver reported ep_failed RAIL_PROTO (%d, %s: %s)", b.epc.failed,
          madrail_status_str(b.epc.fail_status), b.epc.fail_reason);
    CHECK(dst[1023] == 0 && dst[1024] == 0, "nothing written past the region");
    pump(have_fail, &a.epc, 5);
    CHECK(a.epc.failed == 1 && a.epc.fail_status == MADRAIL_ERR_RAIL_DOWN,
          "sender saw the connection go down (%s: %s)", madrail_status_str(a.epc.fail_status),
          a.epc.fail_reason);
    CHECK(ops->ctrl_send(a.ep, NULL, 0) != MADRAIL_OK, "ctrl_send on the failed ep is refused");
    ops->ep_destroy(a.ep);
    a.ep = NULL;
    ops->mem_dereg(b.rail, mh);
    mh = NULL;
out:
    if (mh)
        ops->mem_dereg(b.rail, mh);
    free(dst);
    side_close(&a);
    side_close(&b);
}

/* Frames written by a raw socket. */
static void test_raw(side_t *b)
{
    uint8_t frame[64];
    uint32_t u32;
    size_t n;
    int fd, before;

    pump_set(b, NULL);
    /* unknown frame type before any handshake */
    fd = raw_connect(b);
    if (fd < 0) {
        CHECK(0, "raw connect");
        return;
    }
    memset(frame, 0, sizeof(frame));
    frame[0] = 99;
    u32 = 8;
    memcpy(frame + 4, &u32, 4);
    CHECK(send(fd, frame, 16, 0) == 16, "raw: sent a frame of unknown type");
    CHECK(raw_wait_closed(fd, 5), "raw: listener closed the connection");
    close(fd);

    /* garbage bytes */
    fd = raw_connect(b);
    if (fd >= 0) {
        const char junk[] = "GET / HTTP/1.0\r\n\r\n";
        send(fd, junk, sizeof(junk), 0);
        CHECK(raw_wait_closed(fd, 5), "raw: garbage text rejected");
        close(fd);
    }

    /* a valid HELLO, then a control frame longer than the slot */
    fd = raw_connect(b);
    if (fd >= 0) {
        epc_t saved = b->epc;
        mdr_ep_t *saved_ep = b->ep;
        int acc = b->accepted;
        memset(&b->epc, 0, sizeof(b->epc));
        b->epc.side = b;
        b->epc.destroy_on_fail = 1;
        b->ep = NULL;
        int stage;
        before = b->accepted;
        int hrc = raw_handshake(fd, b, 0x7777, b->uuid, rt_job_key, NULL, &stage, NULL);
        CHECK(hrc ==
                  MDR_TCP_ACK_OK,
              "raw: handshake as uuid 7777 answered OK (%d, stage %d)", hrc, stage);
        CHECK(b->accepted == before + 1 && b->accepted_uuid == 0x7777,
              "raw: accepted as a new peer");
        memset(frame, 0, sizeof(frame));
        frame[0] = 1; /* CTRL */
        u32 = SLOT + 8;
        memcpy(frame + 4, &u32, 4);
        send(fd, frame, 16, 0);
        pump(have_fail, &b->epc, 5);
        CHECK(b->epc.failed == 1 && b->epc.fail_status == MADRAIL_ERR_RAIL_PROTO,
              "raw: oversized frame -> ep_failed RAIL_PROTO (%s)", b->epc.fail_reason);
        CHECK(raw_wait_closed(fd, 5), "raw: connection closed after the oversized frame");
        close(fd);
        epc_clear(&b->epc);
        b->epc = saved;
        b->ep = saved_ep;
        b->accepted = acc;
    }

    /* HELLO with the key, aimed at another uuid: refused without a word */
    fd = raw_connect(b);
    if (fd >= 0) {
        size_t got;
        before = b->accepted;
        n = raw_hello(frame, 0x8888, b->uuid + 1, NULL);
        send(fd, frame, n, 0);
        CHECK(raw_wait_closed_got(fd, 5, &got) && b->accepted == before && got == 0,
              "raw: HELLO for a wrong uuid refused without an ep, nothing answered (%zu bytes)",
              got);
        close(fd);
    }
}

static void test_refused(side_t *a)
{
    side_t z;
    madrail_status_t st;
    mdr_ep_t *ep = NULL;
    epc_t *c = &a->epc;
    uint8_t addr[64];

    /* a listener that is gone: open, remember the address, close */
    if (side_open(&z, "Z", 0x9999, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open rail Z");
        return;
    }
    memcpy(addr, z.addr, sizeof(addr));
    side_close(&z);
    {
        epc_t saved = *c;
        memset(c, 0, sizeof(*c));
        c->side = a;
        pump_set(a, NULL);
        st = ops->ep_create(a->rail, 0x9999, addr, a->attr.addr_len, c, &ep);
        if (st == MADRAIL_OK) {
            uint8_t m[8] = {0};
            struct iovec iov = {m, 8};
            madrail_status_t st2 = ops->ctrl_send(ep, &iov, 1);
            CHECK(st2 == MADRAIL_OK || st2 == MADRAIL_ERR_RAIL_DOWN,
                  "ctrl_send to a closed port: %s", madrail_status_str(st2));
            CHECK(c->failed == 0, "no upcall from inside ctrl_send");
            pump(have_fail, c, 5);
            /* never connected: RAIL_CONNECT tells the core nothing was sent */
            CHECK(c->failed == 1 && c->fail_status == MADRAIL_ERR_RAIL_CONNECT,
                  "connect to a closed port: ep_failed RAIL_CONNECT (%s)", c->fail_reason);
            ops->ep_destroy(ep);
        } else {
            CHECK(st == MADRAIL_ERR_RAIL_DOWN, "connect to a closed port: %s",
                  madrail_status_str(st));
        }
        epc_clear(c);
        *c = saved;
    }
}

static void test_refuse_accept(void)
{
    side_t a, b;
    want_t w;

    if (side_open(&a, "A3", 0xa1, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "B3", 0xb1, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open rails for refusal");
        return;
    }
    b.refuse = 1;
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 10, 1);
    pump(have_fail, &a.epc, 5);
    w.c = &b.epc;
    w.n = 1;
    CHECK(b.accepted == 1 && a.epc.failed == 1 && a.epc.fail_status == MADRAIL_ERR_RAIL_CONNECT &&
              !have_msgs(&w),
          "core refusal (NULL cookie): initiator fails with RAIL_CONNECT (%s)",
          a.epc.fail_reason);
    side_close(&a);
    side_close(&b);
}


/* Small socket buffers force the queue path: backlog, coalescing, order. */
static void test_queued(void)
{
    static const char *const small[] = {"MADRAIL_TCP_SNDBUF=4k", "MADRAIL_TCP_RCVBUF=4k", NULL};
    const unsigned N = 10000;
    side_t a, b;
    want_t w;
    size_t max_backlog = 0;
    unsigned i, bad = 0;

    if (side_open(&a, "Aq", 0x10, "lo", small) != MADRAIL_OK ||
        side_open(&b, "Bq", 0x20, "lo", small) != MADRAIL_OK) {
        CHECK(0, "open rails with small buffers");
        return;
    }
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    w.c = &b.epc;
    w.n = 1;
    send_msg(&a, 8, 0);
    pump(have_msgs, &w, 5);
    for (i = 1; i <= N; i++) {
        size_t len = 16 + (i * 37u) % (SLOT - 16);
        if (send_msg(&a, len, i) != MADRAIL_OK)
            bad++;
        if (ops->ep_backlog(a.ep) > max_backlog)
            max_backlog = ops->ep_backlog(a.ep);
    }
    CHECK(bad == 0 && max_backlog > 100000 && !ops->ep_idle(a.ep),
          "queued burst accepted, backlog reached %zu bytes", max_backlog);
    w.n = N + 1;
    CHECK(pump(have_msgs, &w, 20), "queued burst delivered %zu/%u", b.epc.nmsgs, N + 1);
    for (i = 1; i <= N && i < b.epc.nmsgs; i++)
        if (!check_msg(&b.epc.msgs[i], 16 + (i * 37u) % (SLOT - 16), i))
            bad++;
    CHECK(bad == 0 && b.epc.misaligned == 0, "queued burst in order and aligned (%u bad)", bad);
    pump(NULL, NULL, 0.02);
    CHECK(ops->ep_backlog(a.ep) == 0 && ops->ep_idle(a.ep), "backlog drained");
    side_close(&a);
    side_close(&b);
}

/* A large put on one ep does not hold back control messages on another. */
static void test_fairness(void)
{
    const size_t LEN = 32u << 20;
    side_t a, b, d;
    uint8_t *src, *dst;
    mdr_memh_t *mh = NULL;
    uint8_t rkey[8];
    size_t rkey_len;
    rt_comp_t pc = {{rt_comp_cb}, 0, MADRAIL_OK};
    want_t w;
    madrail_status_t st;

    src = malloc(LEN);
    dst = calloc(1, LEN);
    if (src == NULL || dst == NULL || side_open(&a, "Af", 0x31, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Bf", 0x32, "lo", NULL) != MADRAIL_OK ||
        side_open(&d, "Df", 0x33, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for fairness");
        free(src);
        free(dst);
        return;
    }
    memset(src, 0xab, LEN);
    npumped = 0;
    pumped[npumped++] = &a;
    pumped[npumped++] = &b;
    pumped[npumped++] = &d;
    ops->mem_reg(b.rail, dst, LEN, MDR_MEM_REMOTE_WRITE, &mh);
    ops->rkey_pack(b.rail, mh, a.uuid, rkey, &rkey_len);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    ops->ep_create(d.rail, b.uuid, b.addr, b.attr.addr_len, &d.epc, &d.ep);
    send_msg(&a, 8, 1);
    send_msg(&d, 8, 1);
    w.c = &b.epc;
    w.n = 2;
    pump(have_msgs, &w, 5);
    b.epc.watch = dst;
    b.epc.watch_ref = src;
    b.epc.watch_len = LEN;
    b.epc.watch_ok_at_msg = -1;
    st = ops->put(a.ep, src, LEN, NULL, (uint64_t)(uintptr_t)dst, rkey, rkey_len, &pc.c);
    if (st == MADRAIL_OK)
        pc.calls = 1;
    ops->progress(a.rail);
    send_msg(&d, 8, 2);
    w.n = 3;
    pump(have_msgs, &w, 10);
    CHECK(b.epc.nmsgs == 3 && b.epc.watch_ok_at_msg == 0,
          "message from another peer delivered while a 32 MiB put was still arriving");
    b.epc.watch = NULL;
    CHECK(pump(flag_set, &pc.calls, 20) && pc.status == MADRAIL_OK, "the 32 MiB put completed");
    send_msg(&a, 8, 3);
    w.n = 4;
    CHECK(pump(have_msgs, &w, 10) && memcmp(dst, src, LEN) == 0, "32 MiB put arrived intact");
    ops->mem_dereg(b.rail, mh);
    side_close(&a);
    side_close(&b);
    side_close(&d);
    free(src);
    free(dst);
}

static int first_byte(void *arg)
{
    return *(volatile uint8_t *)arg != 0;
}

/* The target region is deregistered (and freed) while a put streams in:
 * the rest is discarded, the connection keeps working. */
static void test_dereg_midput(void)
{
    const size_t LEN = 32u << 20;
    side_t a, b;
    uint8_t *src, *dst;
    mdr_memh_t *mh = NULL;
    uint8_t rkey[8];
    size_t rkey_len;
    rt_comp_t pc = {{rt_comp_cb}, 0, MADRAIL_OK};
    want_t w;
    int partial;

    src = malloc(LEN);
    dst = calloc(1, LEN);
    if (src == NULL || dst == NULL || side_open(&a, "Am", 0x41, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Bm", 0x42, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for dereg mid-put");
        free(src);
        free(dst);
        return;
    }
    memset(src, 0x5c, LEN);
    pump_set(&a, &b);
    ops->mem_reg(b.rail, dst, LEN, MDR_MEM_REMOTE_WRITE, &mh);
    ops->rkey_pack(b.rail, mh, a.uuid, rkey, &rkey_len);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    pump(have_msgs, &w, 5);
    if (ops->put(a.ep, src, LEN, NULL, (uint64_t)(uintptr_t)dst, rkey, rkey_len, &pc.c) ==
        MADRAIL_OK)
        pc.calls = 1;
    pump(first_byte, dst, 5);
    partial = dst[0] == 0x5c && dst[LEN - 1] == 0;
    ops->mem_dereg(b.rail, mh);
    free(dst); /* ASan reports any later write into it */
    dst = NULL;
    send_msg(&a, 8, 2);
    w.n = 2;
    CHECK(partial, "region deregistered with the put half-way in");
    CHECK(pump(flag_set, &pc.calls, 20) && pump(have_msgs, &w, 10) && b.epc.failed == 0 &&
              a.epc.failed == 0 && check_msg(&b.epc.msgs[1], 8, 2),
          "rest of the put discarded, the next message arrives, no failure");
    side_close(&a);
    side_close(&b);
    free(src);
}

/* The core destroys the ep from inside ctrl_recv with more frames behind. */
static void test_destroy_in_upcall(void)
{
    side_t a, b;
    want_t w;
    unsigned i;

    if (side_open(&a, "Ad", 0x51, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Bd", 0x52, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for destroy in upcall");
        return;
    }
    pump_set(&a, &b);
    b.epc.destroy_at_msg = 5;
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    for (i = 0; i < 50; i++)
        send_msg(&a, 40, i);
    w.c = &b.epc;
    w.n = 5;
    pump(have_msgs, &w, 5);
    pump(have_fail, &a.epc, 5);
    CHECK(b.epc.nmsgs == 5 && b.ep == NULL, "ep destroyed inside ctrl_recv: nothing more delivered"
          " (%zu)", b.epc.nmsgs);
    CHECK(a.epc.failed == 1 && a.epc.fail_status == MADRAIL_ERR_RAIL_DOWN && b.epc.failed == 0,
          "the peer sees RAIL_DOWN (%s); no upcall for the destroyed ep", a.epc.fail_reason);
    side_close(&a);
    side_close(&b);
}

/* The initiator drops its ep and connects again. */
static void test_reconnect(void)
{
    side_t a, b;
    want_t w;

    if (side_open(&a, "Ar", 0x61, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Br", 0x62, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for reconnect");
        return;
    }
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    pump(have_msgs, &w, 5);
    ops->ep_destroy(a.ep);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 2);
    w.n = 2;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&b.epc.msgs[1], 8, 2),
          "message on the new connection arrives");
    pump(NULL, NULL, 0.05);
    CHECK(b.accepted == 2 && b.epc.failed == 1 && b.epc.fail_status == MADRAIL_ERR_RAIL_DOWN &&
              a.epc.failed == 0,
          "old ep reported down (%s), new one accepted (%d accepts)", b.epc.fail_reason,
          b.accepted);
    side_close(&a);
    side_close(&b);
}

/* A peer whose frames arrive in tiny pieces: every header, payload and
 * padding boundary falls between two reads at some point. */
static void test_dribble(void)
{
    side_t b;
    uint8_t stream[4096], *dst;
    size_t n = 0, i, piece;
    mdr_tcp_hdr_t h;
    mdr_tcp_put_ext_t ext;
    mdr_memh_t *mh = NULL;
    uint8_t rkey[8];
    size_t rkey_len;
    want_t w;
    int fd, ok;
    unsigned k;

    if (side_open(&b, "Bx", 0x71, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open rail for dribble");
        return;
    }
    dst = calloc(1, 256);
    ops->mem_reg(b.rail, dst, 256, MDR_MEM_REMOTE_WRITE, &mh);
    ops->rkey_pack(b.rail, mh, 0x7a7a, rkey, &rkey_len);
    for (k = 0; k < 6; k++) {
        size_t len = k * 5 + 1; /* 1, 6, 11, ...: every padding length */
        memset(&h, 0, sizeof(h));
        h.type = MDR_TCP_F_CTRL;
        h.len = (uint32_t)len;
        memcpy(stream + n, &h, sizeof(h));
        n += sizeof(h);
        fill_msg(stream + n, len, k);
        n += len;
        memset(stream + n, 0, MDR_TCP_PAD8(len));
        n += MDR_TCP_PAD8(len);
        if (k == 2) { /* a 13-byte put in the middle */
            memset(&h, 0, sizeof(h));
            h.type = MDR_TCP_F_PUT;
            h.len = sizeof(ext);
            ext.raddr = (uint64_t)(uintptr_t)(dst + 100);
            memcpy(&ext.rkey, rkey, 8);
            ext.count = 13;
            memcpy(stream + n, &h, sizeof(h));
            n += sizeof(h);
            memcpy(stream + n, &ext, sizeof(ext));
            n += sizeof(ext);
            for (i = 0; i < 13; i++)
                stream[n++] = (uint8_t)(0xc0 + i);
            memset(stream + n, 0, 3);
            n += 3;
        }
    }
    pump_set(&b, NULL);
    fd = raw_connect(&b);
    if (fd < 0) {
        CHECK(0, "raw connect for dribble");
        goto out;
    }
    {
        /* the handshake in 1-3 byte pieces too: HELLO, then (after the
         * CHALLENGE) PROOF, which goes in front of the data frames */
        uint8_t hs[MDR_TCP_HS_MAX], ch[MDR_TCP_HELLO_LEN], nonce_i[MDR_AUTH_NONCE_LEN];
        uint8_t proof[3 * MDR_AUTH_MAC_LEN], rail_id[6];
        mdr_auth_transcript_t t;
        size_t hn;
        mdr_auth_nonce(nonce_i);
        hn = raw_hello(hs, 0x7a7a, b.uuid, nonce_i);
        for (i = 0; i < hn; i += piece) {
            piece = 1 + i % 3 < hn - i ? 1 + i % 3 : hn - i;
            send(fd, hs + i, piece, 0);
            usleep(200);
            ops->progress(b.rail);
        }
        if (raw_recv(fd, ch, sizeof(ch), 5) != sizeof(ch) || ch[0] != MDR_TCP_F_CHALLENGE) {
            CHECK(0, "dribble: CHALLENGE answered to a HELLO in pieces");
            close(fd);
            goto out;
        }
        raw_transcript(&b, 0x7a7a, nonce_i, ch + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE, rail_id, &t);
        memset(proof, 0, sizeof(proof));
        mdr_auth_mac(proof, rt_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
        hn = raw_hs_frame(hs, MDR_TCP_F_PROOF, 0x7a7a, b.uuid, proof, sizeof(proof));
        memmove(stream + hn, stream, n);
        memcpy(stream, hs, hn);
        n += hn;
    }
    for (i = 0; i < n; i += piece) {
        piece = 1 + i % 3;
        if (piece > n - i)
            piece = n - i;
        if (send(fd, stream + i, piece, 0) != (ssize_t)piece)
            break;
        usleep(200); /* let each piece be read on its own */
        ops->progress(b.rail);
    }
    w.c = &b.epc;
    w.n = 6;
    pump(have_msgs, &w, 5);
    for (k = 0, ok = b.epc.nmsgs == 6; ok && k < 6; k++)
        ok = check_msg(&b.epc.msgs[k], k * 5 + 1, k);
    for (i = 0; ok && i < 13; i++)
        ok = dst[100 + i] == 0xc0 + i;
    CHECK(ok && b.epc.failed == 0 && b.epc.misaligned == 0 && dst[99] == 0 && dst[113] == 0,
          "frames sent in 1-3 byte pieces parsed exactly (%zu messages)", b.epc.nmsgs);
    close(fd);
out:
    if (mh)
        ops->mem_dereg(b.rail, mh);
    side_close(&b);
    free(dst);
}

/* Handshake timeouts: a peer that never answers our HELLO, and a client
 * that connects to us and never sends one. */
static void test_timeouts(void)
{
    static const char *const fast[] = {"MADRAIL_TCP_CONNECT_TIMEOUT=200ms", NULL};
    side_t a;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    uint8_t addr[16];
    uint32_t mark = MDR_TCP_ADDR_MARK;
    int lfd, fd;
    double t0;

    if (side_open(&a, "At", 0x81, "lo", fast) != MADRAIL_OK) {
        CHECK(0, "open rail with a short connect timeout");
        return;
    }
    pump_set(&a, NULL);
    /* a listener that accepts at the TCP level but never speaks */
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &slen) != 0) {
        CHECK(0, "silent listener");
        goto out;
    }
    memcpy(addr, &mark, 4);
    memcpy(addr + 4, &sin.sin_addr.s_addr, 4);
    memcpy(addr + 8, &sin.sin_port, 2);
    addr[10] = MDR_TCP_VERSION;
    addr[11] = 0;
    t0 = mdr_time_sec();
    if (ops->ep_create(a.rail, 0x99, addr, MDR_TCP_ADDR_LEN, &a.epc, &a.ep) != MADRAIL_OK) {
        CHECK(0, "ep_create to the silent listener");
        goto out;
    }
    send_msg(&a, 8, 1);
    pump(have_fail, &a.epc, 5);
    CHECK(a.epc.failed == 1 && a.epc.fail_status == MADRAIL_ERR_RAIL_CONNECT &&
              mdr_time_sec() - t0 > 0.15,
          "unanswered HELLO times out with RAIL_CONNECT after %.2f s (%s)",
          mdr_time_sec() - t0, a.epc.fail_reason);
    CHECK(ops->ep_idle(a.ep), "failed ep is idle");
    ops->ep_destroy(a.ep);
    a.ep = NULL;

    fd = raw_connect(&a);
    CHECK(fd >= 0 && raw_wait_closed(fd, 5), "a client that sends no HELLO is dropped");
    if (fd >= 0)
        close(fd);
out:
    if (lfd >= 0)
        close(lfd);
    side_close(&a);
}

/* The same put checks with completion on write (MADRAIL_TCP_PUT_ACK=0). */
static void test_put_noack(void)
{
    static const char *const noack[] = {"MADRAIL_TCP_PUT_ACK=0", NULL};
    side_t a, b;
    want_t w;

    if (side_open(&a, "An", 0x91, "lo", noack) != MADRAIL_OK ||
        side_open(&b, "Bn", 0x92, "lo", noack) != MADRAIL_OK) {
        CHECK(0, "open rails with MADRAIL_TCP_PUT_ACK=0");
        return;
    }
    printf("---- MADRAIL_TCP_PUT_ACK=0\n");
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    if (pump(have_msgs, &w, 5))
        test_put(&a, &b);
    else
        CHECK(0, "connect with MADRAIL_TCP_PUT_ACK=0");
    side_close(&a);
    side_close(&b);
}

/* One way (the peer sends no puts): puts stay whole, and a control message
 * waits for the put being written but passes the ones queued after it. */
static void test_ctrl_passes_queued(void)
{
    const size_t LEN = 8u << 20, N = 4;
    side_t a, b;
    uint8_t *src, *dst;
    mdr_memh_t *mh = NULL;
    uint8_t rkey[8];
    size_t rkey_len, i;
    rt_comp_t pc[4];
    want_t w;
    int done;

    src = malloc(LEN);
    dst = calloc(N, LEN);
    if (src == NULL || dst == NULL || side_open(&a, "Ap", 0xb1, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Bp", 0xb2, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for a message passing queued puts");
        free(src);
        free(dst);
        return;
    }
    memset(src, 0x6d, LEN);
    pump_set(&a, &b);
    ops->mem_reg(b.rail, dst, N * LEN, MDR_MEM_REMOTE_WRITE, &mh);
    ops->rkey_pack(b.rail, mh, a.uuid, rkey, &rkey_len);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    pump(have_msgs, &w, 5);
    b.epc.watch = dst + (N - 1) * LEN; /* the last put's target */
    b.epc.watch_ref = src;
    b.epc.watch_len = LEN;
    b.epc.watch_ok_at_msg = -1;
    for (i = 0; i < N; i++) {
        pc[i].c.cb = rt_comp_cb;
        pc[i].calls = 0;
        pc[i].status = MADRAIL_OK;
        if (ops->put(a.ep, src, LEN, NULL, (uint64_t)(uintptr_t)(dst + i * LEN), rkey, rkey_len,
                     &pc[i].c) == MADRAIL_OK)
            pc[i].calls = 1;
    }
    send_msg(&a, 8, 2);
    w.n = 2;
    CHECK(pump(have_msgs, &w, 10) && b.epc.watch_ok_at_msg == 0,
          "one way: a message sent behind %zu queued 8 MiB puts arrived before the last one",
          N);
    b.epc.watch = NULL;
    for (i = 0, done = 1; i < N; i++)
        done &= pump(flag_set, &pc[i].calls, 20) && pc[i].status == MADRAIL_OK;
    send_msg(&a, 8, 3); /* after the completions: after the data */
    w.n = 3;
    done &= pump(have_msgs, &w, 10);
    for (i = 0; i < N; i++)
        done &= memcmp(dst + i * LEN, src, LEN) == 0;
    CHECK(done, "the %zu puts completed and were in place when the next message came", N);
    ops->mem_dereg(b.rail, mh);
    side_close(&a);
    side_close(&b);
    free(src);
    free(dst);
}

/* Multi-frame puts with MADRAIL_TCP_PUT_ACK=1: the receiver acknowledges
 * every frame, some while the put is still being written. */
static void test_put_ack(void)
{
    static const char *const ack[] = {"MADRAIL_TCP_PUT_ACK=1", "MADRAIL_TCP_PUT_FRAME=4k",
                                      NULL};
    side_t a, b;
    want_t w;

    if (side_open(&a, "Aa", 0xa1, "lo", ack) != MADRAIL_OK ||
        side_open(&b, "Ba", 0xa2, "lo", ack) != MADRAIL_OK) {
        CHECK(0, "open rails with MADRAIL_TCP_PUT_ACK=1");
        return;
    }
    printf("---- MADRAIL_TCP_PUT_ACK=1, 4 KiB put frames\n");
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    if (pump(have_msgs, &w, 5))
        test_put(&a, &b);
    else
        CHECK(0, "connect with MADRAIL_TCP_PUT_ACK=1");
    side_close(&a);
    side_close(&b);
}

/* A raw peer's put frames marked "continuation" (MDR_TCP_PUT_F_CONT): one
 * that follows no put, or does not start where the last one ended, closes
 * the connection; one whose region was deregistered since the put began is
 * dropped, and what follows is delivered. */
static void test_raw_cont(int kind)
{
    static const char *const names[] = {"follows no put", "does not continue the last put",
                                        "region deregistered since"};
    side_t b;
    uint8_t frame[128];
    uint8_t *dst = NULL;
    mdr_memh_t *mh = NULL;
    uint64_t key = 0, u64;
    size_t klen = 0, flen = 0;
    uint32_t u32;
    want_t w;
    int fd = -1, before;

    if (side_open(&b, "Bc", 0xc0 + (uint64_t)kind, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open a rail for the raw continuation test");
        return;
    }
    pump_set(&b, NULL);
    dst = calloc(1, 4096);
    if (dst == NULL || ops->mem_reg(b.rail, dst, 4096, MDR_MEM_REMOTE_WRITE, &mh) != MADRAIL_OK ||
        ops->rkey_pack(b.rail, mh, 0x7700 + (uint64_t)kind, &key, &klen) != MADRAIL_OK || (fd = raw_connect(&b)) < 0) {
        CHECK(0, "setup for the raw continuation test");
        goto out;
    }
    before = b.accepted;
    {
        int stage;
        CHECK(raw_handshake(fd, &b, 0x7700 + (uint64_t)kind, b.uuid, rt_job_key, NULL, &stage,
                            NULL) == MDR_TCP_ACK_OK,
              "raw: handshake answered OK");
    }
    CHECK(b.accepted == before + 1, "raw: accepted");
    b.epc.destroy_on_fail = 1;

    /* frames: [a first put of 8 bytes at dst] PUT CONT (8 bytes) CTRL (8 bytes) */
    memset(frame, 0, sizeof(frame));
    if (kind != 0) {
        frame[flen] = MDR_TCP_F_PUT;
        u32 = sizeof(mdr_tcp_put_ext_t);
        memcpy(frame + flen + 4, &u32, 4);
        u64 = (uint64_t)(uintptr_t)dst;
        memcpy(frame + flen + 8, &u64, 8);
        memcpy(frame + flen + 16, &key, 8);
        u64 = 8;
        memcpy(frame + flen + 24, &u64, 8);
        memset(frame + flen + 32, 0x11, 8);
        flen += MDR_TCP_PUT_HDR_LEN + 8;
    }
    frame[flen] = MDR_TCP_F_PUT;
    frame[flen + 1] = MDR_TCP_PUT_F_CONT;
    u32 = sizeof(mdr_tcp_put_ext_t);
    memcpy(frame + flen + 4, &u32, 4);
    u64 = (uint64_t)(uintptr_t)dst + (kind == 1 ? 16 : 8);
    memcpy(frame + flen + 8, &u64, 8);
    memcpy(frame + flen + 16, &key, 8);
    u64 = 8;
    memcpy(frame + flen + 24, &u64, 8);
    memset(frame + flen + 32, 0x22, 8);
    flen += MDR_TCP_PUT_HDR_LEN + 8;
    frame[flen] = MDR_TCP_F_CTRL;
    u32 = 8;
    memcpy(frame + flen + 4, &u32, 4);
    memset(frame + flen + 8, 0x33, 8);
    flen += 16;
    if (kind == 2) { /* the first frame lands, then the region goes */
        CHECK(send(fd, frame, MDR_TCP_PUT_HDR_LEN + 8, 0) == MDR_TCP_PUT_HDR_LEN + 8,
              "raw: first put frame sent");
        {
            double end = mdr_time_sec() + 5;
            while (dst[0] != 0x11 && mdr_time_sec() < end)
                ops->progress(b.rail);
        }
        CHECK(dst[0] == 0x11 && dst[7] == 0x11, "raw: first frame placed");
        ops->mem_dereg(b.rail, mh);
        mh = NULL;
        CHECK(send(fd, frame + MDR_TCP_PUT_HDR_LEN + 8, flen - MDR_TCP_PUT_HDR_LEN - 8, 0) ==
                  (ssize_t)(flen - MDR_TCP_PUT_HDR_LEN - 8),
              "raw: continuation and a message sent");
        w.c = &b.epc;
        w.n = 1;
        CHECK(pump(have_msgs, &w, 5) && b.epc.failed == 0 && dst[8] == 0,
              "raw: continuation %s: dropped, the next message delivered, no failure",
              names[kind]);
    } else {
        CHECK(send(fd, frame, flen, 0) == (ssize_t)flen, "raw: frames sent");
        pump(have_fail, &b.epc, 5);
        CHECK(b.epc.failed == 1 && b.epc.fail_status == MADRAIL_ERR_RAIL_PROTO &&
                  b.epc.nmsgs == 0 && dst[8] == 0 && dst[16] == 0,
              "raw: continuation that %s -> ep_failed RAIL_PROTO, nothing written (%s)",
              names[kind], b.epc.fail_reason);
        CHECK(raw_wait_closed(fd, 5), "raw: connection closed");
    }
out:
    if (fd >= 0)
        close(fd);
    if (mh != NULL)
        ops->mem_dereg(b.rail, mh);
    side_close(&b);
    free(dst);
}

/* The accepting side (larger uuid) drops its ep and connects back. */
static void test_reconnect_back(void)
{
    side_t q, p;
    want_t w;

    if (side_open(&q, "Q", 0x71, "lo", NULL) != MADRAIL_OK ||
        side_open(&p, "P", 0x72, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "setup for reconnect back");
        return;
    }
    pump_set(&q, &p);
    ops->ep_create(q.rail, p.uuid, p.addr, p.attr.addr_len, &q.epc, &q.ep);
    send_msg(&q, 8, 1);
    w.c = &p.epc;
    w.n = 1;
    pump(have_msgs, &w, 5);
    CHECK(p.accepted == 1 && p.ep != NULL, "P accepted Q's connection");
    ops->ep_destroy(p.ep);
    p.ep = NULL;
    ops->ep_create(p.rail, q.uuid, q.addr, q.attr.addr_len, &p.epc, &p.ep);
    send_msg(&p, 8, 2);
    w.c = &q.epc;
    w.n = 1;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&q.epc.msgs[0], 8, 2),
          "P's message on its new connection reaches Q");
    CHECK(q.accepted == 1 && q.epc.failed == 1 && q.epc.fail_status == MADRAIL_ERR_RAIL_DOWN,
          "Q reported its old ep down (%s) and accepted the new one", q.epc.fail_reason);
    pump(NULL, NULL, 0.05);
    CHECK(p.epc.failed == 0, "P's new ep is fine");
    side_close(&q);
    side_close(&p);
}

static int list_len(const mdr_list_t *l)
{
    const mdr_list_t *it;
    int n = 0;

    for (it = l->next; it != l; it = it->next)
        n++;
    return n;
}

/* Handshakes without this job's key, misdirected ones, and ones that
 * claim a live peer's uuid without its session: refused (a misdirected
 * HELLO with nothing answered, a bad PROOF after the CHALLENGE alone), no
 * ep, no effect on the live connection of the peer they name; each source
 * logged once (counted by the rail). */
static void test_auth(void)
{
    static const uint8_t other_key[MDR_JOB_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                       9, 10, 11, 12, 13, 14, 15, 16};
    static const char *const fast[] = {"MADRAIL_TCP_CONNECT_TIMEOUT=300ms", NULL};
    static const uint8_t bad_secret[MDR_AUTH_MAC_LEN] = {7, 7, 7};
    uint8_t frame[96], zeros[MDR_JOB_KEY_LEN] = {0};
    side_t a, b;
    want_t w;
    size_t n, got;
    int fd, i, closed, silent, rc, stage;
    struct {
        const char *what;
        uint64_t uuid, target;
        const uint8_t *key, *secret;
        int stage; /* where the rail closes: 0 at HELLO, 1 at PROOF */
    } cases[8];

    if (side_open(&a, "Aa", 0x1a, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Ba", 0x1b, "lo", fast) != MADRAIL_OK) {
        CHECK(0, "open rails for the key tests");
        return;
    }
    pump_set(&a, &b);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    CHECK(pump(have_msgs, &w, 5) && b.accepted == 1, "A connected to B with the job key");

    memset(cases, 0, sizeof(cases));
    cases[0].what = "no key (zeros), as a new peer";
    cases[0].uuid = 0x5151, cases[0].target = b.uuid, cases[0].key = zeros, cases[0].stage = 1;
    cases[1].what = "another job's key, as a new peer";
    cases[1].uuid = 0x5252, cases[1].target = b.uuid, cases[1].key = other_key;
    cases[1].stage = 1;
    cases[2].what = "another job's key, posing as A (a live peer)";
    cases[2].uuid = a.uuid, cases[2].target = b.uuid, cases[2].key = other_key;
    cases[2].stage = 1;
    cases[3].what = "the key, but meant for another uuid";
    cases[3].uuid = 0x5353, cases[3].target = b.uuid + 7, cases[3].key = rt_job_key;
    cases[4].what = "the key, but carrying B's own uuid";
    cases[4].uuid = b.uuid, cases[4].target = b.uuid, cases[4].key = rt_job_key;
    cases[5].what = "no key, posing as A, meant for another uuid";
    cases[5].uuid = a.uuid, cases[5].target = 0, cases[5].key = NULL;
    /* issue 28 finding 2: the key proves membership, not identity */
    cases[6].what = "the key, posing as A (a live peer), no proof of A's session";
    cases[6].uuid = a.uuid, cases[6].target = b.uuid, cases[6].key = rt_job_key;
    cases[6].stage = 1;
    cases[7].what = "the key, posing as A, continuity proved with a wrong secret";
    cases[7].uuid = a.uuid, cases[7].target = b.uuid, cases[7].key = rt_job_key;
    cases[7].secret = bad_secret, cases[7].stage = 1;
    for (i = 0; i < 8; i++) {
        fd = raw_connect(&b);
        if (fd < 0) {
            CHECK(0, "raw connect (%s)", cases[i].what);
            continue;
        }
        rc = raw_handshake(fd, &b, cases[i].uuid, cases[i].target, cases[i].key,
                           cases[i].secret, &stage, NULL);
        closed = rc == -1 && raw_wait_closed_got(fd, 5, &got);
        CHECK(closed && stage == cases[i].stage && b.accepted == 1 && b.epc.failed == 0 &&
                  a.epc.failed == 0,
              "handshake with %s: closed %s (%d), %d accepts, B's ep to A failed %d times",
              cases[i].what, stage ? "after the CHALLENGE" : "with nothing answered", rc,
              b.accepted, b.epc.failed);
        close(fd);
    }
    /* B's own connection to C (C's uuid larger: a claim of C's uuid would
     * lose a simultaneous connect against it): the claim, with the key but
     * not C's session, gets nothing either, not even "you lost" */
    {
        side_t c;
        want_t wc;
        mdr_ep_t *b2c = NULL;
        static epc_t b2c_epc; /* B's ep to C reports here (outlives c) */
        if (side_open(&c, "Ca", 0x1c, "lo", NULL) == MADRAIL_OK) {
            pump_set(&b, &c);
            ops->ep_create(b.rail, c.uuid, c.addr, c.attr.addr_len, &b2c_epc, &b2c);
            c.ep = b2c;
            send_msg(&c, 8, 1); /* from B, on its ep to C */
            wc.c = &c.epc;
            wc.n = 1;
            CHECK(pump(have_msgs, &wc, 5), "B connected to C (its own connection)");
            fd = raw_connect(&b);
            rc = fd >= 0 ? raw_handshake(fd, &b, c.uuid, b.uuid, rt_job_key, NULL, &stage, NULL)
                         : -3;
            CHECK(rc == -1 && stage == 1 && c.accepted == 1,
                  "the key, posing as C to which B has its own open connection: closed after "
                  "the CHALLENGE (%d, stage %d)", rc, stage);
            if (fd >= 0)
                close(fd);
            ops->ep_destroy(b2c);
            c.ep = NULL;
            side_close(&c);
            pump_set(&a, &b);
        }
    }
    /* the old protocol (version 1, 24-byte body, no key): refused, silently */
    fd = raw_connect(&b);
    if (fd >= 0) {
        mdr_tcp_hdr_t h = {MDR_TCP_F_HELLO, 0, 0, 24};
        uint32_t magic = MDR_TCP_MAGIC;
        uint16_t ver = 1;
        memset(frame, 0, sizeof(frame));
        memcpy(frame, &h, sizeof(h));
        memcpy(frame + 8, &magic, 4);
        memcpy(frame + 12, &ver, 2);
        memcpy(frame + 16, &a.uuid, 8);
        memcpy(frame + 24, &b.uuid, 8);
        send(fd, frame, 32, 0);
        closed = raw_wait_closed_got(fd, 5, &got);
        CHECK(closed && got == 0 && b.accepted == 1,
              "a version-1 HELLO (posing as A) is refused, %zu bytes answered", got);
        close(fd);
    }
    send_msg(&a, 8, 2);
    w.n = 2;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&b.epc.msgs[1], 8, 2) && a.epc.failed == 0 &&
              b.epc.failed == 0,
          "A's connection to B survived the impostors");

    /* a handshake split in two reads, and a silent client: the part
     * buffer of a connection without a handshake is a HELLO's size */
    fd = raw_connect(&b);
    silent = raw_connect(&b);
    if (fd >= 0 && silent >= 0) {
        mdr_tcp_conn_t *c;
        mdr_list_t *it;
        int small = 0, waiting = 0;
        n = raw_hello(frame, 0x5454, b.uuid, NULL);
        send(fd, frame, 20, 0);
        pump(NULL, NULL, 0.05);
        mdr_list_for_each(it, &b.rail->conns) {
            c = mdr_container_of(it, mdr_tcp_conn_t, link);
            if (c->state == MDR_TCP_CONN_WAIT_HELLO) {
                waiting++;
                small += c->part_cap <= MDR_TCP_PART_HS;
            }
        }
        CHECK(waiting == 2 && small == 2,
              "connections waiting for a HELLO hold %d-byte buffers (%d of %d)", MDR_TCP_PART_HS,
              small, waiting);
        send(fd, frame + 20, n - 20, 0);
        closed = raw_wait_closed_got(fd, 5, &got);
        CHECK(closed && got == MDR_TCP_HELLO_LEN,
              "a HELLO in two pieces, no PROOF: the CHALLENGE (%zu bytes) and nothing more, "
              "closed at the connect timeout", got);
        closed = raw_wait_closed_got(silent, 5, &got);
        CHECK(closed && got == 0 && b.rail->nwait_hello == 0,
              "a silent client is closed at the connect timeout (%u still waiting)",
              b.rail->nwait_hello);
    }
    if (fd >= 0)
        close(fd);
    if (silent >= 0)
        close(silent);

    /* a flood: every connection closed, nothing kept, one log line */
    {
        unsigned long before = b.rail->refusals.total;
        int answered = 0, kept;
        for (i = 0; i < 300; i++) {
            fd = raw_connect(&b);
            if (fd < 0)
                break;
            rc = raw_handshake(fd, &b, 0x6000 + (uint64_t)i, b.uuid, other_key, NULL, &stage,
                               NULL);
            if (rc != -1 || stage != 1 || !raw_wait_closed_got(fd, 5, &got) || got != 0)
                answered++;
            close(fd);
            if (answered)
                break; /* no need to wait 5 s 300 times to know */
        }
        pump(NULL, NULL, 0.02);
        kept = list_len(&b.rail->conns);
        CHECK(i == 300 && answered == 0 && b.accepted == 1 && kept == 1,
              "300 handshakes with another key: %d answered or left open, %d accepted, %d connections "
              "left (A's)",
              answered, b.accepted - 1, kept);
        CHECK(b.rail->refusals.total - before == 300 && b.rail->refusals.lines <= 1,
              "refusals counted (%lu), one source logged once (%u lines in this window)",
              b.rail->refusals.total - before, b.rail->refusals.lines);
    }
    side_close(&a);
    side_close(&b);
}

/* ---------------- a recorded handshake (issue 28, item 1) ---------------- */

/* A control frame carrying fill_msg(len, seq), padded; its length. */
static size_t sd_frame_ctrl(uint8_t *f, size_t len, unsigned seq)
{
    mdr_tcp_hdr_t h;

    memset(&h, 0, sizeof(h));
    h.type = MDR_TCP_F_CTRL;
    h.len = (uint32_t)len;
    memcpy(f, &h, sizeof(h));
    fill_msg(f + sizeof(h), len, seq);
    memset(f + sizeof(h) + len, 0, MDR_TCP_PAD8(len));
    return sizeof(h) + len + MDR_TCP_PAD8(len);
}

/* A raw client's connection as uuid X to side b, after a handshake that
 * proved continuity with secret (NULL: none): the ACK's status, or -1
 * when refused; *fd_p the connection (closed when refused), *session_p
 * its session secret. */
static int raw_session(side_t *b, uint64_t x, const uint8_t *secret, int *fd_p,
                       uint8_t *session_p)
{
    int stage, rc, fd = raw_connect(b);

    *fd_p = -1;
    if (fd < 0)
        return -2;
    rc = raw_handshake(fd, b, x, b->uuid, rt_job_key, secret, &stage, session_p);
    if (rc < 0) {
        close(fd);
        return -1;
    }
    *fd_p = fd;
    return rc;
}

/* Identity (issue 28, item 2): what a handshake naming a uuid that B
 * already has a session with must prove, step by step: nothing at first
 * contact; while that uuid's connection is open, continuity with its
 * session (pending: the initiator has not sent anything on it yet); once
 * the initiator sent data, that session is confirmed and an older one no
 * longer counts; after the connection died, still that session, while a
 * handshake without it is refused and leaves B's state alone. */
static void test_continuity(void)
{
    static const char *const fast[] = {"MADRAIL_TCP_CONNECT_TIMEOUT=300ms", NULL};
    uint8_t s1[MDR_AUTH_MAC_LEN], s2[MDR_AUTH_MAC_LEN], s3[MDR_AUTH_MAC_LEN], f[64];
    const uint64_t x = 0x9a;
    int fd1, fd2, fd, rc;
    size_t n;
    side_t b;
    want_t w;

    if (side_open(&b, "Bk", 0x9b, "lo", fast) != MADRAIL_OK) {
        CHECK(0, "open a rail for the continuity test");
        return;
    }
    pump_set(&b, NULL);
    b.epc.destroy_on_fail = 1;
    rc = raw_session(&b, x, NULL, &fd1, s1);
    CHECK(rc == MDR_TCP_ACK_OK && b.accepted == 1, "first contact as X: accepted (%d)", rc);
    rc = raw_session(&b, x, NULL, &fd, s3);
    CHECK(rc == -1 && b.accepted == 1 && b.epc.failed == 0,
          "X again while X's connection is open, no continuity proof: refused, X's ep untouched");
    rc = raw_session(&b, x, s1, &fd2, s2);
    pump(NULL, NULL, 0.05);
    CHECK(rc == MDR_TCP_ACK_OK && b.accepted == 2 && b.epc.failed == 1,
          "X again proving its session (pending: it sent nothing yet): accepted, the old ep "
          "reported down (%d, %d accepts, %d failures)", rc, b.accepted, b.epc.failed);
    if (fd1 >= 0)
        close(fd1);
    n = sd_frame_ctrl(f, 8, 2);
    send(fd2, f, n, 0);
    w.c = &b.epc;
    w.n = 1;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&b.epc.msgs[0], 8, 2),
          "X's message on the new connection arrives (the session is confirmed)");
    rc = raw_session(&b, x, s1, &fd, s3);
    CHECK(rc == -1 && b.accepted == 2 && b.epc.failed == 1,
          "X proving the session before the confirmed one: refused, X's ep untouched");
    close(fd2);
    pump(have_fail, &b.epc, 0.5);
    pump(NULL, NULL, 0.05);
    CHECK(b.epc.failed == 2, "X's connection closed: its ep reported down");
    rc = raw_session(&b, x, NULL, &fd, s3);
    CHECK(rc == -1 && b.accepted == 2,
          "X, its connection gone, no continuity proof: refused (a known session), no ep");
    rc = raw_session(&b, x, s2, &fd, s3);
    CHECK(rc == MDR_TCP_ACK_OK && b.accepted == 3,
          "X proving its confirmed session after its connection died: accepted (%d)", rc);
    if (fd >= 0)
        close(fd);
    side_close(&b);
}

/* A reader of the traffic, in process: send() and sendmsg() are this
 * program's own (the driver, linked statically, calls them), passing
 * everything to the kernel and copying into rec_buf the bytes written to
 * a socket whose remote port is rec_port (0: record nothing). */
static uint8_t rec_buf[8192];
static size_t rec_len;
static uint16_t rec_port; /* network order */

static void rec_bytes(int fd, const void *p, size_t n)
{
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);

    if (rec_port == 0 || getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
        peer.sin_family != AF_INET || peer.sin_port != rec_port ||
        rec_len + n > sizeof(rec_buf))
        return;
    memcpy(rec_buf + rec_len, p, n);
    rec_len += n;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    long n = syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
    if (n > 0)
        rec_bytes(fd, buf, (size_t)n);
    return n;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    long n = syscall(SYS_sendmsg, fd, msg, flags);
    size_t left = n > 0 ? (size_t)n : 0, k;

    for (k = 0; k < msg->msg_iovlen && left > 0; k++) {
        size_t take = msg->msg_iov[k].iov_len < left ? msg->msg_iov[k].iov_len : left;
        rec_bytes(fd, msg->msg_iov[k].iov_base, take);
        left -= take;
    }
    return n;
}

/* A's real handshake with B and its first message are recorded as A
 * writes them (above).  The recording does not hold the job key; replayed
 * whole on a new connection to B it is refused (no new ep, no message
 * delivered again, B's ep to A untouched), and A's connection goes on. */
static void test_replay(void)
{
    size_t i, got;
    int fd, has_key = 0, closed;
    unsigned long refused;
    side_t a, b;
    want_t w;

    if (side_open(&a, "Ar", 0x2a, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "Br", 0x2b, "lo", NULL) != MADRAIL_OK) {
        CHECK(0, "open rails for the replay test");
        return;
    }
    pump_set(&a, &b);
    rec_len = 0;
    memcpy(&rec_port, b.addr + 8, 2);
    ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.epc, &a.ep);
    send_msg(&a, 8, 1);
    w.c = &b.epc;
    w.n = 1;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&b.epc.msgs[0], 8, 1) && b.accepted == 1,
          "A reached B, its handshake recorded (%zu bytes)", rec_len);
    rec_port = 0;
    for (i = 0; i + MDR_JOB_KEY_LEN <= rec_len; i++)
        has_key |= memcmp(rec_buf + i, rt_job_key, MDR_JOB_KEY_LEN) == 0;
    CHECK(rec_len > 0 && !has_key, "the recorded handshake does not contain the job key");

    /* the recording, replayed whole on a new connection */
    refused = b.rail->refusals.total;
    fd = raw_connect(&b);
    if (fd < 0) {
        CHECK(0, "raw connect for the replay");
        goto out;
    }
    send(fd, rec_buf, rec_len, MSG_NOSIGNAL);
    closed = raw_wait_closed_got(fd, 5, &got);
    close(fd);
    pump(NULL, NULL, 0.05);
    CHECK(closed && b.accepted == 1 && b.epc.nmsgs == 1 && b.epc.failed == 0 &&
              b.rail->refusals.total == refused + 1,
          "the replayed handshake is refused: closed %d, %d accepts, %zu messages, B's ep to A "
          "failed %d times, %lu refusals",
          closed, b.accepted, b.epc.nmsgs, b.epc.failed, b.rail->refusals.total - refused);
    /* A's own connection goes on */
    send_msg(&a, 8, 2);
    w.n = 2;
    CHECK(pump(have_msgs, &w, 5) && check_msg(&b.epc.msgs[1], 8, 2) && a.epc.failed == 0,
          "A's connection to B goes on after the replay");
out:
    side_close(&a);
    side_close(&b);
}

/* ---------------- shared epoll set (MADRAIL_TCP_SHARED_POLL) ---------------- */

/* One pass of the core over a context's two rails, in its order. */
static int pass2(side_t *r0, side_t *r1)
{
    int n = 0;
    if (r0->rail != NULL)
        n += ops->progress(r0->rail);
    if (r1->rail != NULL)
        n += ops->progress(r1->rail);
    return n;
}

/* Wait until the rail's epoll set has an event ready (the bytes are in
 * the kernel), without running the rail. */
static int set_ready(side_t *s)
{
    struct pollfd p = {s->rail->epfd, POLLIN, 0};
    return poll(&p, 1, 5000) == 1;
}

/* tx sends seq (8 bytes); once it is in rx's socket, one progress of rx.
 * 1 when that pass delivered it, intact. */
static int first_pass_delivers(side_t *tx, side_t *rx, unsigned seq)
{
    size_t before = rx->epc.nmsgs;

    send_msg(tx, 8, seq);
    ops->progress(tx->rail);
    if (!set_ready(rx))
        return 0;
    ops->progress(rx->rail);
    return rx->epc.nmsgs == before + 1 && check_msg(&rx->epc.msgs[before], 8, seq);
}

/* Two contexts A and B in one process, each with two tcp rails on lo.
 * shared=1: a context's rails share one epoll set; the progress of either
 * rail delivers what arrives on the other, the core's pass (rail 0, then
 * rail 1) delivers a message on any rail in the first pass after it
 * arrived, a rail progressed alone still polls (at most one call skipped),
 * the two contexts never take each other's events, and the set survives
 * the close of the rail that created it.  shared=0: each rail has its own
 * set, and rail 0's progress never delivers rail 1's message. */
static void test_shared_poll(int shared)
{
    static const char *const on[] = {"MADRAIL_TCP_SHARED_POLL=1", NULL};
    static const char *const off[] = {"MADRAIL_TCP_SHARED_POLL=0", NULL};
    const char *const *ov = shared ? on : off;
    side_t a0, a1, b0, b1;
    want_t w;
    size_t before;
    int i, ok, calls;

    printf("---- MADRAIL_TCP_SHARED_POLL=%d\n", shared);
    if (side_open(&a0, "A0", 0xa1, "lo", ov) != MADRAIL_OK ||
        side_open(&a1, "A1", 0xa1, "lo", ov) != MADRAIL_OK ||
        side_open(&b0, "B0", 0xb1, "lo", ov) != MADRAIL_OK ||
        side_open(&b1, "B1", 0xb1, "lo", ov) != MADRAIL_OK) {
        CHECK(0, "open two contexts of two tcp rails");
        return;
    }
    CHECK(shared ? (a0.rail->epfd == a1.rail->epfd && b0.rail->epfd == b1.rail->epfd &&
                    a0.rail->epfd != b0.rail->epfd)
                 : (a0.rail->epfd != a1.rail->epfd && b0.rail->epfd != b1.rail->epfd),
          shared ? "one epoll set per context, two contexts apart" : "one epoll set per rail");
    ops->ep_create(a0.rail, b0.uuid, b0.addr, b0.attr.addr_len, &a0.epc, &a0.ep);
    ops->ep_create(a1.rail, b1.uuid, b1.addr, b1.attr.addr_len, &a1.epc, &a1.ep);
    send_msg(&a0, 8, 0);
    send_msg(&a1, 8, 0);
    npumped = 0;
    pumped[npumped++] = &a0;
    pumped[npumped++] = &a1;
    pumped[npumped++] = &b0;
    pumped[npumped++] = &b1;
    w.c = &b0.epc;
    w.n = 1;
    ok = pump(have_msgs, &w, 5);
    w.c = &b1.epc;
    ok = ok && pump(have_msgs, &w, 5);
    CHECK(ok, "both rails connected (B0 %zu, B1 %zu messages)", b0.epc.nmsgs, b1.epc.nmsgs);
    if (!ok)
        goto out;

    /* B0's progress alone, while a message waits on B1 */
    before = b1.epc.nmsgs;
    send_msg(&a1, 8, 1);
    ops->progress(a1.rail); /* the coalesced frame leaves */
    CHECK(set_ready(&b1), "the message reached B1's socket");
    for (i = 0; i < 20; i++)
        ops->progress(b0.rail);
    if (shared)
        CHECK(b1.epc.nmsgs == before + 1 && check_msg(&b1.epc.msgs[before], 8, 1),
              "rail 0's progress delivered rail 1's message (B1 has %zu new)",
              b1.epc.nmsgs - before);
    else
        CHECK(b1.epc.nmsgs == before, "rail 0's progress left rail 1's message (%zu new)",
              b1.epc.nmsgs - before);
    pass2(&b0, &b1);
    CHECK(b1.epc.nmsgs == before + 1, "delivered once (B1 has %zu new)", b1.epc.nmsgs - before);

    /* the core's pass: a message on either rail is delivered by the first
     * pass after it arrived, whichever rail polled */
    ok = 1;
    for (i = 0; i < 20; i++) {
        side_t *tx = i % 2 ? &a1 : &a0, *rx = i % 2 ? &b1 : &b0;
        before = rx->epc.nmsgs;
        send_msg(tx, 8, 100u + (unsigned)i);
        ops->progress(tx->rail);
        if (!set_ready(rx)) {
            ok = 0;
            break;
        }
        pass2(&b0, &b1);
        if (rx->epc.nmsgs != before + 1 || !check_msg(&rx->epc.msgs[before], 8, 100u + (unsigned)i))
            ok = 0;
    }
    CHECK(ok, "20 messages alternating rails: each delivered by the first pass (stopped at %d)",
          i);

    /* the other context's progress does not take B's events */
    before = b1.epc.nmsgs;
    send_msg(&a1, 8, 200);
    ops->progress(a1.rail);
    CHECK(set_ready(&b1), "the message reached B1's socket");
    for (i = 0; i < 10; i++)
        pass2(&a0, &a1);
    CHECK(b1.epc.nmsgs == before, "A's progress did not deliver B's message");
    pass2(&b0, &b1);
    CHECK(b1.epc.nmsgs == before + 1, "B's next pass did");

    /* rail 1 progressed alone (rail 0 never): at most one call skipped */
    before = b1.epc.nmsgs;
    send_msg(&a1, 8, 300);
    ops->progress(a1.rail);
    CHECK(set_ready(&b1), "the message reached B1's socket");
    for (calls = 0; calls < 10 && b1.epc.nmsgs == before; calls++)
        ops->progress(b1.rail);
    CHECK(b1.epc.nmsgs == before + 1 && calls <= 2,
          "rail 1 alone delivered in %d progress calls (at most 2)", calls);

    /* the rail that made the set closes; the other keeps polling it */
    side_close(&b0);
    side_close(&a0);
    CHECK(first_pass_delivers(&a1, &b1, 400),
          "after closing rail 0, rail 1's first progress delivered");
    CHECK(a1.epc.failed == 0 && b1.epc.failed == 0, "no failures");
out:
    side_close(&a0);
    side_close(&a1);
    side_close(&b0);
    side_close(&b1);
}

/* Connect a to b by a first message (seq 0), progressing both: 1 when b
 * has it. */
static int connect_first(side_t *a, side_t *b)
{
    want_t w;

    pump_set(a, b);
    ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->epc, &a->ep);
    send_msg(a, 8, 0);
    w.c = &b->epc;
    w.n = 1;
    return pump(have_msgs, &w, 5);
}

/* MADRAIL_TCP_DIRECT_FIRST: on an open connection the first small frame
 * after a progress call is written at once (nothing left unsent, so a
 * send completes inside isend), the next ones before the next progress
 * are coalesced behind it, and every frame arrives in order.  With 0,
 * even the first one waits for the next progress. */
static void test_direct_first(int direct)
{
    static const char *const on[] = {"MADRAIL_TCP_DIRECT_FIRST=1", NULL};
    static const char *const off[] = {"MADRAIL_TCP_DIRECT_FIRST=0", NULL};
    side_t a, b;
    want_t w;
    size_t u1, u2, u3;
    int i, ok;

    printf("---- MADRAIL_TCP_DIRECT_FIRST=%d\n", direct);
    if (side_open(&a, "Ad", 0xd1, "lo", direct ? on : off) != MADRAIL_OK ||
        side_open(&b, "Bd", 0xd2, "lo", direct ? on : off) != MADRAIL_OK) {
        CHECK(0, "open rails");
        return;
    }
    if (!connect_first(&a, &b)) {
        CHECK(0, "connect");
        goto out;
    }
    ops->progress(a.rail);
    send_msg(&a, 8, 1);
    u1 = ops->ep_unsent(a.ep);
    send_msg(&a, 8, 2);
    send_msg(&a, 8, 3);
    u2 = ops->ep_unsent(a.ep);
    ops->progress(a.rail); /* writes the coalesced ones; a new pass */
    u3 = ops->ep_unsent(a.ep);
    send_msg(&a, 8, 4);
    if (direct)
        CHECK(u1 == 0 && u2 > 0 && u3 == 0 && ops->ep_unsent(a.ep) == 0,
              "first frame after a progress written at once, the next two coalesced, "
              "first after the next progress at once (unsent %zu %zu %zu %zu)",
              u1, u2, u3, ops->ep_unsent(a.ep));
    else
        CHECK(u1 > 0 && u3 == 0 && ops->ep_unsent(a.ep) > 0,
              "every frame waits for the next progress (unsent %zu %zu %zu)", u1, u3,
              ops->ep_unsent(a.ep));
    w.c = &b.epc;
    w.n = 5;
    ok = pump(have_msgs, &w, 5) && b.epc.nmsgs == 5;
    for (i = 0; ok && i < 5; i++)
        ok = check_msg(&b.epc.msgs[i], 8, (unsigned)i);
    CHECK(ok, "5 frames arrived in order (%zu)", b.epc.nmsgs);
out:
    side_close(&a);
    side_close(&b);
}

/* epoll_wait calls on s's epoll set so far (its group's counter). */
static unsigned long set_polls(const side_t *s)
{
    return s->rail->group != NULL ? s->rail->group->polls : 0;
}

/* n progress calls of s alone; returns the epoll_wait calls they made,
 * and in *ticks (if not NULL) how often the coarse clock moved meanwhile. */
static unsigned long idle_polls_ticks(side_t *s, int n, unsigned *ticks)
{
    unsigned long p0 = set_polls(s);
    uint64_t t = mdr_time_coarse_ns(), u;
    unsigned moved = 0;
    int i;

    for (i = 0; i < n; i++) {
        ops->progress(s->rail);
        u = mdr_time_coarse_ns();
        moved += u != t;
        t = u;
    }
    if (ticks != NULL)
        *ticks = moved;
    return set_polls(s) - p0;
}

static unsigned long idle_polls(side_t *s, int n)
{
    return idle_polls_ticks(s, n, NULL);
}

/* MADRAIL_TCP_DIRECT_POLL=bound: while B's epoll set holds at most bound
 * connections, all open with nothing queued, B's progress reads them
 * without epoll_wait (one wait every 16th pass, 2 in 32 passes), and a
 * message is delivered by the first pass after it arrived; a new
 * connection (C's) is still accepted, by the periodic wait; past the
 * bound every pass waits on the set again (32 in 32).  0: always. */
static void test_direct_poll(unsigned bound)
{
    char opt[48];
    const char *ov[] = {opt, NULL};
    side_t a, b, c, d;
    want_t w;
    unsigned long polls;
    unsigned ticks;
    size_t before;
    int i, ok, failed;

    snprintf(opt, sizeof(opt), "MADRAIL_TCP_DIRECT_POLL=%u", bound);
    printf("---- %s\n", opt);
    memset(&c, 0, sizeof(c));
    memset(&d, 0, sizeof(d));
    if (side_open(&a, "Ap", 0xe1, "lo", ov) != MADRAIL_OK ||
        side_open(&b, "Bp", 0xe2, "lo", ov) != MADRAIL_OK ||
        side_open(&c, "Cp", 0xe3, "lo", ov) != MADRAIL_OK) {
        CHECK(0, "open rails");
        return;
    }
    CHECK(b.rail->group != NULL, "B's rail polls a group's set (its counter is read)");
    if (b.rail->group == NULL)
        goto out;
    if (!connect_first(&a, &b)) {
        CHECK(0, "connect A to B");
        goto out;
    }
    w.c = &b.epc;
    idle_polls(&b, 16); /* settles the handshake's leftovers */
    polls = idle_polls_ticks(&b, 32, &ticks);
    if (bound >= 1)
        CHECK(polls <= 2 + ticks + 1, "one connection: 32 idle passes waited on the set %lu "
              "times (every 16th pass and once a clock tick: at most %u)", polls, 2 + ticks + 1);
    else
        CHECK(polls == 32, "32 idle passes waited on the set %lu times (32)", polls);
    /* passes a tick apart: each one waits (a process that progresses seldom) */
    polls = set_polls(&b);
    for (i = 0; i < 3; i++) {
        usleep(25000);
        ops->progress(b.rail);
    }
    CHECK(set_polls(&b) - polls == 3, "3 passes 25 ms apart waited on the set %lu times (3)",
          set_polls(&b) - polls);

    before = b.epc.nmsgs;
    CHECK(first_pass_delivers(&a, &b, 1), "B's first pass delivered A's message");

    /* a second connection, from C: accepted, and counted */
    pump_set(&c, &b);
    ops->ep_create(c.rail, b.uuid, b.addr, b.attr.addr_len, &c.epc, &c.ep);
    send_msg(&c, 8, 7);
    w.n = before + 2;
    ok = pump(have_msgs, &w, 5);
    CHECK(ok && check_msg(&b.epc.msgs[before + 1], 8, 7), "C's connection accepted, its message "
          "delivered (%zu messages)", b.epc.nmsgs);
    idle_polls(&b, 16);
    polls = idle_polls_ticks(&b, 32, &ticks);
    if (bound >= 2)
        CHECK(polls <= 2 + ticks + 1, "two connections: 32 idle passes waited %lu times (at "
              "most %u)", polls, 2 + ticks + 1);
    else
        CHECK(polls == 32, "two connections, bound %u: 32 idle passes waited %lu times (32)",
              bound, polls);
    before = b.epc.nmsgs;
    send_msg(&c, 8, 8);
    send_msg(&a, 8, 9);
    ops->progress(c.rail);
    ops->progress(a.rail);
    ok = set_ready(&b);
    ops->progress(b.rail);
    if (b.epc.nmsgs < before + 2) /* the second may still have been on its way */
        ops->progress(b.rail);
    CHECK(ok && b.epc.nmsgs == before + 2, "both connections' messages delivered (%zu new)",
          b.epc.nmsgs - before);
    CHECK(a.epc.failed == 0 && b.epc.failed == 0 && c.epc.failed == 0, "no failures");

    /* a connection made while B progresses seldom (every 25 ms): accepted
     * and its message delivered within a few of B's passes, not 16 */
    if (side_open(&d, "Dp", 0xe4, "lo", ov) != MADRAIL_OK) {
        CHECK(0, "open rail D");
        goto out;
    }
    ops->ep_create(d.rail, b.uuid, b.addr, b.attr.addr_len, &d.epc, &d.ep);
    send_msg(&d, 8, 11);
    before = b.epc.nmsgs;
    for (i = 0; i < 12 && b.epc.nmsgs == before; i++) {
        int j;
        for (j = 0; j < 50; j++) { /* D's side of the handshake goes at once */
            ops->progress(d.rail);
            usleep(500);
        }
        ops->progress(b.rail);
    }
    CHECK(b.epc.nmsgs == before + 1 && check_msg(&b.epc.msgs[before], 8, 11) && i <= 4,
          "B progressing every 25 ms accepted D and delivered its message in %d passes (at "
          "most 4)", i);

    /* the peers go: C and D first, then A, B's last connection, whose end
     * a direct read must see (recv returns 0) at B's next pass */
    failed = b.epc.failed;
    side_close(&c);
    side_close(&d);
    pump_set(&b, NULL);
    w.c = &b.epc;
    w.n = (size_t)failed + 2;
    ok = pump(have_failures, &w, 5);
    CHECK(ok && *mdr_tcp_set_nconns(b.rail) == 1, "C and D closed: B lost both connections "
          "(%d failures), A's is left (%u in the set)", b.epc.failed - failed,
          *mdr_tcp_set_nconns(b.rail));
    side_close(&a);
    CHECK(set_ready(&b), "A's end reached B's socket");
    polls = set_polls(&b);
    ops->progress(b.rail);
    CHECK(b.epc.failed == failed + 3, "B's first pass after A closed reported it (%d failures; "
          "%lu waits on the set in that pass)", b.epc.failed - failed, set_polls(&b) - polls);
out:
    side_close(&a);
    side_close(&b);
    side_close(&c);
    side_close(&d);
}

int main(int argc, char **argv)
{
    side_t a, b;
    int probe;

    /* expected errors (malformed input) are logged; -v shows the debug trail */
    mdr_log_set_level(argc > 1 && strcmp(argv[1], "-v") == 0 ? MDR_LOG_DEBUG : MDR_LOG_ERROR);
    probe = socket(AF_INET, SOCK_STREAM, 0);
    if (probe < 0) {
        printf("SKIP: no sockets\n");
        return 77;
    }
    close(probe);

    test_specs();
    if (side_open(&a, "A", 0x1111, "lo", NULL) != MADRAIL_OK ||
        side_open(&b, "B", 0x2222, "lo", NULL) != MADRAIL_OK) {
        printf("SKIP: cannot open tcp rails on lo\n");
        return 77;
    }
    pump_set(&a, &b);
    test_ctrl(&a, &b);
    if (a.ep != NULL && b.ep != NULL) {
        pump_set(&a, &b);
        test_burst(&a, &b);
        pump_set(&a, &b);
        test_put(&a, &b);
        test_raw(&b);
        test_refused(&a);
    }
    side_close(&a);
    side_close(&b);

    test_simultaneous(0);
    test_simultaneous(1);
    test_simultaneous(2);
    test_bad_put(0);
    test_bad_put(1);
    test_refuse_accept();
    test_queued();
    test_fairness();
    test_dereg_midput();
    test_destroy_in_upcall();
    test_reconnect();
    test_reconnect_back();
    test_dribble();
    test_timeouts();
    test_put_noack();
    test_auth();
    test_replay();
    test_continuity();
    test_put_ack();
    test_ctrl_passes_queued();
    test_raw_cont(0);
    test_raw_cont(1);
    test_raw_cont(2);
    test_shared_poll(1);
    test_shared_poll(0);
    test_direct_first(1);
    test_direct_first(0);
    test_direct_poll(2);
    test_direct_poll(1);
    test_direct_poll(0);

    return rt_finish();
}
