/*
 * Driver-level test of the ofi rail, for what the conformance suite does
 * not reach: the rail spec and provider selection (unknown provider, a
 * provider without RDM, a missing domain, an IPv4 address, "auto"), the
 * messages the refusals print (stderr is captured), both receive modes
 * (FI_MULTI_RECV pools and single buffers) with odd message lengths, the
 * send-after-write put mode, a peer that destroys its endpoint and comes
 * back (the hello/bye incarnations), addresses of another provider, and a
 * peer process that dies without a goodbye (tcp;ofi_rxm reports it; shm
 * needs MADRAIL_OFI_TIMEOUT), and on shm the small messages that
 * MADRAIL_OFI_INJECT sends with fi_inject (done in the call, in order with
 * the longer ones) and the short form (ofi.h: no header, CQ data instead)
 * once the peers told each other their slots.  Two rails in one process on tcp;ofi_rxm or shm
 * over lo, or two processes (fork) for the deaths.  Each check prints a
 * line; exit 0 = pass, 1 = fail, 77 = skip (no tcp;ofi_rxm provider).
 */
#include "mdr_config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rails/ofi/ofi_dl.h" /* libfabric as the driver loads it */
#include "rails/ofi/ofi.h"    /* the short form's slots and counters */

#include "rails/rail.h"
#include "util/clock.h"
#include "util/log.h"

#include "rail_test_util.h"

#define SLOT 2048
#define MDR_OFI_ADDR_HDR_TEST 12 /* packed ofi address: header, then fi_getname() bytes */
#define PROV "tcp;ofi_rxm"
#define SPEC PROV ":lo"

/* ---------------- recording upcalls ---------------- */

typedef struct side side_t;

typedef struct epc { /* one ep's record (the ep cookie) */
    side_t *side;
    mdr_ep_t *ep;
    uint64_t nrecv;
    uint64_t next_seq;
    int bad, misaligned;
    char why[200];
    int failed;
    madrail_status_t fail_status;
    char fail_reason[200];
    const uint8_t *watch, *watch_ref; /* put ordering: target == ref at each message? */
    size_t watch_len;
    int watch_bad;
} epc_t;

struct side {
    uint64_t uuid;
    mdr_rail_t *rail;
    mdr_rail_attr_t attr;
    uint8_t addr[256];
    epc_t own;     /* the ep we created */
    epc_t acc[4];  /* eps the peer's hellos made here, in order */
    int naccepted;
};

static const mdr_rail_ops_t *ops = &mdr_ofi_ops;

/* Message seq has length seq % 67 * 29 % SLOT (odd lengths) and bytes
 * derived from seq; the first 8 bytes carry seq when there is room. */
static size_t msg_len(uint64_t seq)
{
    size_t n = (size_t)(seq % 67) * 29 % SLOT;
    return n < 8 ? 8 + (seq & 7) : n;
}

static uint8_t msg_byte(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 31 + i * 7 + 1);
}

static size_t msg_make(uint8_t *buf, uint64_t seq)
{
    size_t n = msg_len(seq), i;
    memcpy(buf, &seq, 8);
    for (i = 8; i < n; i++)
        buf[i] = msg_byte(seq, i);
    return n;
}

static void up_recv(void *cookie, const void *data, size_t len)
{
    epc_t *c = cookie;
    const uint8_t *d = data;
    uint64_t seq;
    size_t i;

    c->nrecv++;
    if (((uintptr_t)data & 7) != 0)
        c->misaligned++;
    if (c->watch != NULL && memcmp(c->watch, c->watch_ref, c->watch_len) != 0)
        c->watch_bad++;
    if (c->bad || len < 8)
        return;
    memcpy(&seq, d, 8);
    if (seq != c->next_seq || len != msg_len(seq)) {
        c->bad = 1;
        snprintf(c->why, sizeof(c->why), "got seq %llu len %zu, expected seq %llu len %zu",
                 (unsigned long long)seq, len, (unsigned long long)c->next_seq,
                 msg_len(c->next_seq));
        return;
    }
    for (i = 8; i < len; i++)
        if (d[i] != msg_byte(seq, i)) {
            c->bad = 1;
            snprintf(c->why, sizeof(c->why), "seq %llu byte %zu differs",
                     (unsigned long long)seq, i);
            return;
        }
    c->next_seq++;
}

static void *up_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    side_t *s = rail_cookie;
    epc_t *c;

    (void)uuid;
    if (s->naccepted >= 4)
        return NULL;
    c = &s->acc[s->naccepted++];
    memset(c, 0, sizeof(*c));
    c->side = s;
    c->ep = ep;
    return c;
}

static void up_failed(void *cookie, madrail_status_t status, const char *reason)
{
    epc_t *c = cookie;

    c->failed++;
    c->fail_status = status;
    snprintf(c->fail_reason, sizeof(c->fail_reason), "%s", reason ? reason : "");
}

static const mdr_rail_upcalls_t upcalls = {up_recv, up_accepted, up_failed};

static madrail_status_t side_open(side_t *s, uint64_t uuid, const char *spec,
                                  const char *const *overrides)
{
    mdr_rail_params_t p = rt_params(uuid, &upcalls, s, SLOT, 16, overrides);
    madrail_status_t st;

    memset(s, 0, sizeof(*s));
    s->uuid = uuid;
    s->own.side = s;
    st = ops->open(spec, &p, &s->rail);
    if (st != MADRAIL_OK) {
        s->rail = NULL;
        return st;
    }
    ops->query(s->rail, &s->attr);
    return ops->addr_pack(s->rail, s->addr, s->attr.addr_len);
}

static void side_close(side_t *s)
{
    if (s->rail != NULL)
        ops->close(s->rail);
    s->rail = NULL;
}

static void prog2(side_t *a, side_t *b)
{
    ops->progress(a->rail);
    ops->progress(b->rail);
}

#define WAIT(_a, _b, _cond)                                                                  \
    ({                                                                                       \
        double _dl = mdr_time_sec() + 20.0;                                                  \
        while (!(_cond) && mdr_time_sec() < _dl)                                             \
            prog2((_a), (_b));                                                               \
        (_cond);                                                                             \
    })

static madrail_status_t send_seq(side_t *a, side_t *b, mdr_ep_t *ep, uint64_t seq)
{
    uint8_t buf[SLOT];
    size_t n = msg_make(buf, seq), cut = n / 3;
    struct iovec iov[2] = {{buf, cut}, {buf + cut, n - cut}};
    double dl = mdr_time_sec() + 20.0;
    madrail_status_t st;

    while ((st = ops->ctrl_send(ep, iov, 2)) == MADRAIL_ERR_NORESOURCE &&
           mdr_time_sec() < dl)
        prog2(a, b);
    return st;
}

/* ---------------- stderr capture ---------------- */

static char captured[8192];

/* Run open(spec) with stderr going to a file; the text lands in captured. */
static madrail_status_t open_captured(side_t *s, const char *spec, const char *const *ov)
{
    char path[] = "/tmp/mdr_ofi_testXXXXXX";
    int fd = mkstemp(path), saved;
    madrail_status_t st;
    ssize_t n;

    captured[0] = '\0';
    if (fd < 0)
        return side_open(s, 9, spec, ov);
    unlink(path);
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    st = side_open(s, 9, spec, ov);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    n = pread(fd, captured, sizeof(captured) - 1, 0);
    captured[n > 0 ? n : 0] = '\0';
    close(fd);
    /* show it, so a failure is explained in the log */
    fprintf(stderr, "%s", captured);
    return st;
}

static int provider_exists(const char *prov, int want_rdm)
{
    struct fi_info *h = fi_allocinfo(), *list = NULL, *i;
    int found = 0;

    if (h == NULL)
        return 0;
    h->fabric_attr->prov_name = strdup(prov);
    if (fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, h, &list) ==
        0) {
        for (i = list; i != NULL; i = i->next)
            if (!want_rdm || i->ep_attr->type == FI_EP_RDM)
                found = 1;
        if (!want_rdm && found)
            for (i = list; i != NULL; i = i->next)
                if (i->ep_attr->type == FI_EP_RDM)
                    found = 2; /* has RDM too */
        fi_freeinfo(list);
    }
    fi_freeinfo(h);
    return found;
}

/* ---------------- checks ---------------- */

/* A provider without RDM endpoints: libfabric layers ofi_rxd over udp
 * whenever it can, so a child process excludes ofi_rxd (FI_PROVIDER is
 * read once, at libfabric's first call) and asks for udp. */
static void check_lacks(void)
{
    int status = 0;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        side_t s;
        madrail_status_t st;
        setenv("FI_PROVIDER", "^ofi_rxd", 1);
        if (!provider_exists("udp", 0))
            _exit(77);
        st = open_captured(&s, "udp:lo", NULL);
        side_close(&s);
        _exit(st == MADRAIL_ERR_CONFIG && strstr(captured, "provider 'udp' lacks") &&
                      strstr(captured, "FI_EP_RDM")
                  ? 0
                  : 1);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        CHECK(0, "provider without RDM: the child process did not run");
        return;
    }
    if (WEXITSTATUS(status) == 77) {
        printf("skip provider without RDM: libfabric has no udp provider\n");
        return;
    }
    CHECK(WEXITSTATUS(status) == 0,
          "provider udp alone (datagrams only) refused, the message says it lacks FI_EP_RDM");
}

static void check_specs(void)
{
    static const char *const bad_mode[] = {"MADRAIL_OFI_PUT_COMPLETE=sometimes", NULL};
    madrail_status_t st;
    side_t s;

    st = open_captured(&s, "nosuchprovider:lo", NULL);
    CHECK(st == MADRAIL_ERR_CONFIG && strstr(captured, "no provider 'nosuchprovider'") &&
              strstr(captured, "tcp"),
          "unknown provider refused, message lists the available ones (%s)",
          madrail_status_str(st));
    side_close(&s);

    st = open_captured(&s, PROV ":nosuchdev0", NULL);
    CHECK(st == MADRAIL_ERR_CONFIG && strstr(captured, "no domain or address 'nosuchdev0'") &&
              strstr(captured, "lo"),
          "missing domain refused, message lists the domains (%s)", madrail_status_str(st));
    side_close(&s);

    st = open_captured(&s, PROV ":lo:extra", NULL);
    CHECK(st == MADRAIL_ERR_CONFIG && strstr(captured, "expected ofi:<provider>"),
          "spec with a third field refused (%s)", madrail_status_str(st));
    side_close(&s);

    st = open_captured(&s, SPEC, bad_mode);
    CHECK(st == MADRAIL_ERR_CONFIG && strstr(captured, "MADRAIL_OFI_PUT_COMPLETE=sometimes"),
          "bad MADRAIL_OFI_PUT_COMPLETE refused (%s)", madrail_status_str(st));
    side_close(&s);

    st = side_open(&s, 9, PROV ":127.0.0.1", NULL);
    CHECK(st == MADRAIL_OK && strcmp(s.attr.name, "ofi:" PROV ":lo") == 0,
          "IPv4 address 127.0.0.1 selects domain lo (%s, name %s)", madrail_status_str(st),
          st == MADRAIL_OK ? s.attr.name : "-");
    side_close(&s);

    st = side_open(&s, 9, ":lo", NULL);
    CHECK(st == MADRAIL_OK && strncmp(s.attr.name, "ofi:", 4) == 0,
          "empty provider picks one that qualifies (%s, name %s)", madrail_status_str(st),
          st == MADRAIL_OK ? s.attr.name : "-");
    side_close(&s);
}

/* A peer process that dies without a goodbye (exit without closing its
 * rail): the survivor's ep must fail once it sends.  tcp;ofi_rxm notices
 * the broken connection by itself; shm needs MADRAIL_OFI_TIMEOUT, which the
 * overrides give.  Runs before this process initialises libfabric (fork). */
static void check_peer_death(const char *spec, const char *const *ov, const char *label)
{
    int c2p[2], p2c[2], status = 0, n;
    uint8_t addr[256];
    uint32_t alen = 0;
    pid_t pid;
    side_t a;
    madrail_status_t st;
    uint64_t short0 = 0;
    double dl;
    char ch;

    if (pipe(c2p) != 0 || pipe(p2c) != 0) {
        CHECK(0, "%s: pipe", label);
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        side_t c;
        close(c2p[0]);
        close(p2c[1]);
        if (side_open(&c, 0xC0DE, spec, ov) != MADRAIL_OK) {
            alen = 0; /* no such provider here: the parent skips */
            _exit(write(c2p[1], &alen, 4) == 4 ? 3 : 2);
        }
        alen = (uint32_t)c.attr.addr_len;
        if (write(c2p[1], &alen, 4) != 4 || write(c2p[1], c.addr, alen) != (ssize_t)alen)
            _exit(2);
        dl = mdr_time_sec() + 20.0;
        while ((c.naccepted < 1 || c.acc[0].nrecv < 1) && mdr_time_sec() < dl)
            ops->progress(c.rail);
        ch = c.acc[0].nrecv >= 1 ? 'r' : 'n';
        if (ch == 'r') {
            /* one message back (on shm it carries our SHORT_ID first: the
             * parent's next messages go in the short form), gone before we say so */
            uint8_t buf[SLOT];
            struct iovec iov = {buf, msg_make(buf, 0)};
            while (ops->ctrl_send(c.acc[0].ep, &iov, 1) == MADRAIL_ERR_NORESOURCE &&
                   mdr_time_sec() < dl)
                ops->progress(c.rail);
            while (ops->ep_unsent(c.acc[0].ep) != 0 && mdr_time_sec() < dl)
                ops->progress(c.rail);
        }
        if (write(c2p[1], &ch, 1) != 1)
            _exit(2);
        if (read(p2c[0], &ch, 1) < 0)
            _exit(2);
        exit(0); /* no close: the peer hears nothing from the driver */
    }
    close(c2p[1]);
    close(p2c[0]);
    if (pid < 0 || read(c2p[0], &alen, 4) != 4 || alen > sizeof(addr)) {
        CHECK(0, "%s: the child process failed", label);
        goto out_child;
    }
    if (alen == 0) {
        printf("skip %s: %s does not open here\n", label, spec);
        goto out_child;
    }
    if (read(c2p[0], addr, alen) != (ssize_t)alen) {
        CHECK(0, "%s: the child process failed", label);
        goto out_child;
    }
    if (side_open(&a, 0xA11CE, spec, ov) != MADRAIL_OK) {
        CHECK(0, "%s: open", label);
        goto out_child;
    }
    st = ops->ep_create(a.rail, 0xC0DE, addr, alen, &a.own, &a.own.ep);
    if (st == MADRAIL_OK) {
        uint8_t buf[SLOT];
        struct iovec iov = {buf, msg_make(buf, 0)};
        dl = mdr_time_sec() + 20.0;
        while ((st = ops->ctrl_send(a.own.ep, &iov, 1)) == MADRAIL_ERR_NORESOURCE &&
               mdr_time_sec() < dl)
            ops->progress(a.rail);
    }
    /* progress until the child says it got the message */
    fcntl(c2p[0], F_SETFL, O_NONBLOCK);
    dl = mdr_time_sec() + 20.0;
    ch = 0;
    while (st == MADRAIL_OK && mdr_time_sec() < dl && (n = (int)read(c2p[0], &ch, 1)) != 1)
        ops->progress(a.rail);
    CHECK(st == MADRAIL_OK && ch == 'r', "%s: the child process received a message", label);
    if (ch != 'r')
        goto out_rail;
    while (a.own.nrecv < 1 && mdr_time_sec() < dl)
        ops->progress(a.rail);
    CHECK(a.own.nrecv == 1 && !a.own.bad, "%s: its answer arrived %s", label, a.own.why);
    if (a.rail->short_form)
        CHECK(a.own.ep->tx_short != 0, "%s: our next messages go in the short form (slot %u)",
              label, a.own.ep->tx_short);
    short0 = a.rail->short_tx;
    ch = 'x';
    if (write(p2c[1], &ch, 1) != 1 || waitpid(pid, &status, 0) != pid) {
        CHECK(0, "%s: the child did not exit", label);
        goto out_rail;
    }
    pid = -1;
    if (strncmp(spec, "shm", 3) == 0 && alen > MDR_OFI_ADDR_HDR_TEST + 9 &&
        memcmp(addr + MDR_OFI_ADDR_HDR_TEST, "fi_shm://", 9) == 0) {
        /* the dead process left its shm region behind (nobody closed it) */
        char name[200];
        size_t n = alen - MDR_OFI_ADDR_HDR_TEST - 9;
        if (n >= sizeof(name))
            n = sizeof(name) - 1;
        memcpy(name, addr + MDR_OFI_ADDR_HDR_TEST + 9, n);
        name[n] = '\0';
        shm_unlink(name);
    }
    dl = mdr_time_sec() + 25.0;
    while (a.own.failed == 0 && mdr_time_sec() < dl) {
        uint8_t buf[SLOT];
        static uint64_t seq = 1;
        struct iovec iov = {buf, msg_make(buf, seq)};
        if (ops->ctrl_send(a.own.ep, &iov, 1) == MADRAIL_OK)
            seq++;
        ops->progress(a.rail);
        usleep(1000);
    }
    CHECK(a.own.failed == 1 && a.own.fail_status == MADRAIL_ERR_RAIL_DOWN,
          "%s: the ep to a peer that died without a goodbye failed (%d report(s): %s)", label,
          a.own.failed, a.own.fail_reason);
    if (a.rail->short_form)
        CHECK(a.rail->short_tx > short0, "%s: %llu of the messages to the dead peer went in "
              "the short form", label, (unsigned long long)(a.rail->short_tx - short0));
out_rail:
    side_close(&a);
out_child:
    if (pid > 0) {
        ch = 'x';
        if (write(p2c[1], &ch, 1) != 1)
            kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    (void)status;
    close(c2p[0]);
    close(p2c[1]);
}

enum { PEER_DEATH_RXM, PEER_DEATH_SHM };

/* Run one forking check in a process of its own, so that this one has not
 * started libfabric when the next check forks. */
static void run_isolated(int which)
{
    static const char *const ov[] = {"MADRAIL_OFI_TIMEOUT=2s", NULL};
    int status = 0;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        failures = 0; /* no libfabric call here before check_peer_death forks */
        if (which == PEER_DEATH_RXM)
            check_peer_death(SPEC, NULL, "peer death (" PROV ")");
        else
            check_peer_death("shm", ov, "peer death (shm, MADRAIL_OFI_TIMEOUT=2s)");
        fflush(stdout);
        fflush(stderr);
        _exit(failures ? 1 : 0);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        if (pid < 0 || !WIFEXITED(status))
            printf("FAIL peer death check process: %s\n",
                   pid < 0 ? "fork failed" : "killed by a signal");
        failures++;
    }
}

/* Both directions, many messages of odd lengths, through one receive mode. */
/* Open rails a and b of spec and a's ep to b (checked, named by label);
 * 0 when all went, else -1 (side_close both either way). */
static int pair_open(const char *spec, uint64_t ua, uint64_t ub, const char *const *ov,
                     const char *label, side_t *a, side_t *b)
{
    madrail_status_t st;

    memset(b, 0, sizeof(*b));
    if (side_open(a, ua, spec, ov) != MADRAIL_OK || side_open(b, ub, spec, ov) != MADRAIL_OK) {
        CHECK(0, "%s: open", label);
        return -1;
    }
    st = ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep);
    CHECK(st == MADRAIL_OK, "%s: ep_create", label);
    return st == MADRAIL_OK ? 0 : -1;
}

/* pair_open, then (after `before`, if given, ran on b) a's first
 * message, which makes b accept a: 0 when it did. */
static int open_first(const char *spec, uint64_t ua, uint64_t ub, const char *const *ov,
                      const char *label, side_t *a, side_t *b, int (*before)(side_t *))
{
    madrail_status_t st;

    if (pair_open(spec, ua, ub, ov, label, a, b) != 0 || (before != NULL && before(b) != 0))
        return -1;
    st = send_seq(a, b, a->own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(a, b, b->acc[0].nrecv >= 1) && b->naccepted == 1,
          "%s: first message accepted the peer (%d accepted)", label, b->naccepted);
    return b->naccepted == 1 ? 0 : -1;
}

static void check_traffic(const char *spec, const char *label, const char *const *ov)
{
    const uint64_t n = 3000;
    side_t a, b;
    madrail_status_t st = MADRAIL_OK;
    uint64_t i;

    if (open_first(spec, 0x1001, 0x2002, ov, label, &a, &b, NULL) != 0)
        goto out;
    for (i = 1; i < n && st == MADRAIL_OK; i++) {
        st = send_seq(&a, &b, a.own.ep, i);
        if (st == MADRAIL_OK)
            st = send_seq(&a, &b, b.acc[0].ep, i - 1);
    }
    CHECK(st == MADRAIL_OK, "%s: %llu messages each way sent (%s)", label,
          (unsigned long long)n, madrail_status_str(st));
    CHECK(WAIT(&a, &b, (b.acc[0].nrecv >= n && a.own.nrecv >= n - 1) || b.acc[0].bad ||
                           a.own.bad),
          "%s: all arrived (a->b %llu, b->a %llu)", label,
          (unsigned long long)b.acc[0].nrecv, (unsigned long long)a.own.nrecv);
    CHECK(!b.acc[0].bad && !a.own.bad, "%s: in order, exact bytes %s%s", label, b.acc[0].why,
          a.own.why);
    CHECK(b.acc[0].misaligned == 0 && a.own.misaligned == 0,
          "%s: every message 8-byte aligned (%d, %d misaligned)", label, b.acc[0].misaligned,
          a.own.misaligned);
    CHECK(a.own.failed == 0 && b.acc[0].failed == 0, "%s: no failure %s%s", label,
          a.own.fail_reason, b.acc[0].fail_reason);
out:
    side_close(&a);
    side_close(&b);
}

/* MADRAIL_OFI_INJECT on shm: a message of at most 256 bytes sent while
 * nothing of the ep is in flight is done in the call (ep_unsent 0 before
 * any progress); a longer one, or any with the knob off, is held until
 * progress reads its completion.  Both arrive intact. */
static void check_shm_inject(int on)
{
    const char *ov[] = {on ? "MADRAIL_OFI_INJECT=1" : "MADRAIL_OFI_INJECT=0", NULL};
    const char *label = on ? "shm inject on" : "shm inject off";
    uint8_t buf[SLOT];
    struct iovec iov;
    size_t held, held_first = 0;
    uint64_t seq, done_in_call = 0;
    side_t a, b;
    madrail_status_t st;

    if (pair_open("shm", 0x3003, 0x4004, ov, label, &a, &b) != 0)
        goto out;
    st = send_seq(&a, &b, a.own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv >= 1 && ops->ep_unsent(a.own.ep) == 0),
          "%s: connected, nothing in flight", label);
    /* messages 1..8 are 29..232 bytes (header and padding: at most 256),
     * sent back to back with no progress between them */
    for (seq = 1; seq <= 8 && st == MADRAIL_OK; seq++) {
        iov.iov_base = buf;
        iov.iov_len = msg_make(buf, seq);
        st = ops->ctrl_send(a.own.ep, &iov, 1);
        held = ops->ep_unsent(a.own.ep);
        if (seq == 1)
            held_first = held;
        done_in_call += held == 0;
    }
    CHECK(st == MADRAIL_OK && (on ? done_in_call == 8 : held_first > 0 && done_in_call == 0),
          "%s: %llu of 8 messages of 29-232 bytes done in the call (first held %zu bytes)",
          label, (unsigned long long)done_in_call, held_first);
    /* message 9 is 261 bytes: fi_send, held until its completion */
    iov.iov_base = buf;
    iov.iov_len = msg_make(buf, 9);
    st = ops->ctrl_send(a.own.ep, &iov, 1);
    held = ops->ep_unsent(a.own.ep);
    CHECK(st == MADRAIL_OK && held > 0, "%s: a %zu-byte message is held until its completion "
          "(%zu bytes)", label, iov.iov_len, held);
    CHECK(WAIT(&a, &b, (b.acc[0].nrecv >= 10 && ops->ep_unsent(a.own.ep) == 0) || b.acc[0].bad),
          "%s: all arrived, nothing held (%llu messages)", label,
          (unsigned long long)b.acc[0].nrecv);
    CHECK(!b.acc[0].bad, "%s: in order, exact bytes %s", label, b.acc[0].why);
    CHECK(a.own.failed == 0 && b.acc[0].failed == 0, "%s: no failure %s%s", label,
          a.own.fail_reason, b.acc[0].fail_reason);
out:
    side_close(&a);
    side_close(&b);
}

/* The short form on shm (ofi.h): once each side told the other its slot,
 * small messages go without our header, in order with the ones that still
 * carry it (longer, or sent while another is in flight); a destroyed ep
 * frees its slot; what comes for a free slot or from another incarnation
 * is dropped. */
static void check_shm_short(void)
{
    const char *label = "shm short form";
    const uint64_t n = 600;
    uint64_t i, tx, rx, before, buf[2] = {7, 7};
    uint32_t slot, epid;
    side_t a, b;
    madrail_status_t st;

    if (open_first("shm", 0x7007, 0x8008, NULL, label, &a, &b, NULL) != 0)
        goto out;
    st = send_seq(&a, &b, b.acc[0].ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, a.own.nrecv >= 1 && a.own.ep->tx_short != 0 &&
                                               b.acc[0].ep->tx_short != 0),
          "%s: after a message each way each side holds the other's slot (%u, %u)", label,
          a.own.ep->tx_short, b.acc[0].ep != NULL ? b.acc[0].ep->tx_short : 0);
    tx = a.rail->short_tx + b.rail->short_tx;
    rx = a.rail->short_rx + b.rail->short_rx;
    for (i = 1; i < n && st == MADRAIL_OK; i++) {
        st = send_seq(&a, &b, a.own.ep, i);
        if (st == MADRAIL_OK)
            st = send_seq(&a, &b, b.acc[0].ep, i);
    }
    CHECK(st == MADRAIL_OK &&
              WAIT(&a, &b, (b.acc[0].nrecv >= n && a.own.nrecv >= n) || b.acc[0].bad ||
                               a.own.bad),
          "%s: %llu messages of 8 to 2047 bytes each way arrived (a->b %llu, b->a %llu)",
          label, (unsigned long long)n, (unsigned long long)b.acc[0].nrecv,
          (unsigned long long)a.own.nrecv);
    CHECK(!b.acc[0].bad && !a.own.bad && b.acc[0].misaligned == 0 && a.own.misaligned == 0,
          "%s: in order, exact bytes, 8-byte aligned %s%s", label, b.acc[0].why, a.own.why);
    tx = a.rail->short_tx + b.rail->short_tx - tx;
    rx = a.rail->short_rx + b.rail->short_rx - rx;
    CHECK(tx == rx && tx > 0 && tx < 2 * (n - 1),
          "%s: %llu of %llu sent and received in the short form, the rest with the header "
          "(longer, or sent while another was in flight)",
          label, (unsigned long long)tx, (unsigned long long)(2 * (n - 1)));
    /* with nothing in flight, every message that fits an inject goes short */
    tx = a.rail->short_tx;
    rx = 0;
    for (i = n; i < n + 200 && st == MADRAIL_OK; i++) {
        WAIT(&a, &b, ops->ep_unsent(a.own.ep) == 0);
        rx += msg_len(i) + ((8 - (msg_len(i) & 7)) & 7) <= a.rail->inject_max;
        st = send_seq(&a, &b, a.own.ep, i);
    }
    tx = a.rail->short_tx - tx;
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv >= n + 200 || b.acc[0].bad) &&
              !b.acc[0].bad && rx > 0 && tx == rx,
          "%s: sent one at a time, the %llu of 200 that fit an inject went short (%llu)",
          label, (unsigned long long)rx, (unsigned long long)tx);
    /* at a, b's slot with other incarnation bits */
    before = a.own.nrecv;
    mdr_ofi_recv_short(a.rail, (const uint8_t *)buf, 8,
                       mdr_ofi_short_data(a.own.ep->rx_short - 1, a.own.ep->peer_epid + 1, 0));
    CHECK(a.own.nrecv == before && a.own.failed == 0,
          "%s: a message from another incarnation is dropped", label);
    /* b drops its ep: its slot for a's incarnation is free, and a message
     * for it is dropped */
    slot = b.acc[0].ep->rx_short - 1;
    epid = a.own.ep->epid;
    ops->ep_destroy(b.acc[0].ep);
    b.acc[0].ep = NULL;
    before = b.acc[0].nrecv;
    mdr_ofi_recv_short(b.rail, (const uint8_t *)buf, 8, mdr_ofi_short_data(slot, epid, 0));
    CHECK(b.rail->short_eps[slot] == NULL && b.acc[0].nrecv == before,
          "%s: a destroyed ep frees its slot; a message for it is dropped", label);
out:
    side_close(&a);
    side_close(&b);
}

/* Every slot of b taken: a's incarnation gets none and a keeps its header,
 * every message arriving in order. */
static char slot_taken;

static int take_every_slot(side_t *s)
{
    uint32_t k;
    s->rail->short_eps = calloc(MDR_OFI_SHORT_SLOTS, sizeof(*s->rail->short_eps));
    if (s->rail->short_eps == NULL)
        return -1;
    for (k = 0; k < MDR_OFI_SHORT_SLOTS; k++)
        s->rail->short_eps[k] = (mdr_ep_t *)(void *)&slot_taken;
    return 0;
}

static void check_shm_short_full(void)
{
    const char *label = "shm short form, no slot left";
    side_t a, b;
    uint64_t i, tx;
    uint32_t k;
    madrail_status_t st;

    if (open_first("shm", 0x9009, 0xa00a, NULL, label, &a, &b, take_every_slot) != 0)
        goto out;
    st = send_seq(&a, &b, b.acc[0].ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, a.own.nrecv >= 1 && b.acc[0].ep->tx_short != 0) &&
              a.own.ep->tx_short == 0 && b.acc[0].ep->rx_short == 0,
          "%s: b gives a no slot (a holds %u), a gave b one", label, a.own.ep->tx_short);
    tx = a.rail->short_tx;
    for (i = 1; i < 200 && st == MADRAIL_OK; i++) {
        WAIT(&a, &b, ops->ep_unsent(a.own.ep) == 0);
        st = send_seq(&a, &b, a.own.ep, i);
    }
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv >= 200 || b.acc[0].bad) &&
              !b.acc[0].bad && a.rail->short_tx == tx,
          "%s: 199 messages a->b with the header, in order (%llu short) %s", label,
          (unsigned long long)(a.rail->short_tx - tx), b.acc[0].why);
out:
    if (b.rail != NULL && b.rail->short_eps != NULL)
        for (k = 0; k < MDR_OFI_SHORT_SLOTS; k++)
            if (b.rail->short_eps[k] == (mdr_ep_t *)(void *)&slot_taken)
                b.rail->short_eps[k] = NULL;
    side_close(&a);
    side_close(&b);
}

/* A destroys its ep and creates a new one: B's old ep fails with A's
 * goodbye, the new one is accepted afresh and carries the new messages. */
static void check_reincarnation(void)
{
    side_t a, b;
    madrail_status_t st;

    if (side_open(&a, 0x3003, SPEC, NULL) != MADRAIL_OK ||
        side_open(&b, 0x4004, SPEC, NULL) != MADRAIL_OK) {
        CHECK(0, "reincarnation: open");
        side_close(&a);
        return;
    }
    st = ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.own, &a.own.ep);
    if (st == MADRAIL_OK)
        st = send_seq(&a, &b, a.own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv == 1), "reincarnation: first ep up");
    if (b.naccepted != 1)
        goto out;
    ops->ep_destroy(a.own.ep);
    a.own.ep = NULL;
    {
        /* an orderly goodbye with nothing pending: the peer's ep fails only
         * when it is next used (processes finalizing at different times) */
        double dl = mdr_time_sec() + 0.3;
        while (mdr_time_sec() < dl)
            prog2(&a, &b);
    }
    CHECK(b.acc[0].failed == 0, "reincarnation: the goodbye alone fails nothing (%d failures)",
          b.acc[0].failed);
    st = send_seq(&a, &b, b.acc[0].ep, 1);
    CHECK(st == MADRAIL_ERR_RAIL_DOWN && WAIT(&a, &b, b.acc[0].failed > 0) &&
              b.acc[0].fail_status == MADRAIL_ERR_RAIL_DOWN &&
              strstr(b.acc[0].fail_reason, "destroyed") != NULL,
          "reincarnation: a send on the peer's old ep fails with the goodbye (%s: %s)",
          madrail_status_str(st), b.acc[0].fail_reason);
    memset(&a.own, 0, sizeof(a.own));
    a.own.side = &a;
    st = ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.own, &a.own.ep);
    CHECK(st == MADRAIL_OK, "reincarnation: ep_create again after destroy (%s)",
          madrail_status_str(st));
    if (st != MADRAIL_OK)
        goto out;
    st = send_seq(&a, &b, a.own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.naccepted == 2 && b.acc[1].nrecv == 1),
          "reincarnation: accepted again as a new ep (%d accepts)", b.naccepted);
    CHECK(b.acc[0].nrecv == 1 && b.acc[0].failed == 1 && !b.acc[1].bad,
          "reincarnation: nothing more on the old ep (%llu messages, %d failures)",
          (unsigned long long)b.acc[0].nrecv, b.acc[0].failed);
    if (b.naccepted == 2) {
        st = send_seq(&a, &b, b.acc[1].ep, 0);
        CHECK(st == MADRAIL_OK && WAIT(&a, &b, a.own.nrecv == 1) && a.naccepted == 0,
              "reincarnation: the reply reaches the new ep, no accept at the initiator");
        ops->ep_destroy(b.acc[1].ep);
    }
    ops->ep_destroy(b.acc[0].ep);
out:
    side_close(&a);
    side_close(&b);
}

/* ---------------- the handshake (issue 28) ---------------- */

/* Every message a rail hands to the provider (and it takes), copied:
 * the rail's fi_ops_msg is swapped for one that records, then calls the
 * provider's (fi_send and friends are inline calls through that table). */
#define CAP_MAX 256
#define CAP_LEN 512
typedef struct cap_rail {
    struct fid_ep *ep;
    struct fi_ops_msg *orig, mine;
} cap_rail_t;
static cap_rail_t cap_rails[2];
static struct {
    int from; /* cap_rails index */
    size_t len;
    uint8_t b[CAP_LEN];
} cap_log[CAP_MAX];
static int cap_n, cap_overflow;

static cap_rail_t *cap_of(struct fid_ep *ep)
{
    return cap_rails[0].ep == ep ? &cap_rails[0] : &cap_rails[1];
}

static void cap_record(struct fid_ep *ep, const void *buf, size_t len)
{
    if (cap_n == CAP_MAX || len > CAP_LEN) {
        cap_overflow++;
        return;
    }
    cap_log[cap_n].from = (int)(cap_of(ep) - cap_rails);
    cap_log[cap_n].len = len;
    memcpy(cap_log[cap_n].b, buf, len);
    cap_n++;
}

static ssize_t cap_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                        fi_addr_t dest, void *ctx)
{
    ssize_t ret = cap_of(ep)->orig->send(ep, buf, len, desc, dest, ctx);
    if (ret == 0)
        cap_record(ep, buf, len);
    return ret;
}

static ssize_t cap_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
    ssize_t ret = cap_of(ep)->orig->inject(ep, buf, len, dest);
    if (ret == 0)
        cap_record(ep, buf, len);
    return ret;
}

static ssize_t cap_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest, void *ctx)
{
    ssize_t ret = cap_of(ep)->orig->senddata(ep, buf, len, desc, data, dest, ctx);
    if (ret == 0)
        cap_record(ep, buf, len);
    return ret;
}

static ssize_t cap_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                              fi_addr_t dest)
{
    ssize_t ret = cap_of(ep)->orig->injectdata(ep, buf, len, data, dest);
    if (ret == 0)
        cap_record(ep, buf, len);
    return ret;
}

static void cap_attach(int i, side_t *s)
{
    cap_rail_t *c = &cap_rails[i];
    c->ep = s->rail->ep;
    c->orig = c->ep->msg;
    c->mine = *c->orig;
    c->mine.send = cap_send;
    c->mine.inject = cap_inject;
    c->mine.senddata = cap_senddata;
    c->mine.injectdata = cap_injectdata;
    c->ep->msg = &c->mine;
}

static void cap_detach(void)
{
    int i;
    for (i = 0; i < 2; i++)
        if (cap_rails[i].ep != NULL)
            cap_rails[i].ep->msg = cap_rails[i].orig;
    memset(cap_rails, 0, sizeof(cap_rails));
}

/* One message as the receive path gets it, in an aligned buffer. */
static void inject_msg(mdr_rail_t *to, const void *m, size_t len)
{
    uint64_t buf[CAP_LEN / 8];
    memcpy(buf, m, len);
    mdr_ofi_recv_msg(to, (const uint8_t *)buf, len);
}

/* Two rails connected by one handshake (a dials b), messages both ways,
 * every message captured.  0 when up. */
static int hs_pair(side_t *a, side_t *b, uint64_t ua, uint64_t ub)
{
    madrail_status_t st;

    memset(b, 0, sizeof(*b));
    if (side_open(a, ua, SPEC, NULL) != MADRAIL_OK || side_open(b, ub, SPEC, NULL) != MADRAIL_OK)
        return -1;
    cap_n = cap_overflow = 0;
    cap_attach(0, a);
    cap_attach(1, b);
    st = ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep);
    if (st == MADRAIL_OK)
        st = send_seq(a, b, a->own.ep, 0);
    if (st != MADRAIL_OK || !WAIT(a, b, b->acc[0].nrecv == 1))
        return -1;
    st = send_seq(a, b, b->acc[0].ep, 0);
    return st == MADRAIL_OK && WAIT(a, b, a->own.nrecv == 1) ? 0 : -1;
}

/* No message either side sends holds the job key (nor its first half). */
static void check_key_never_sent(void)
{
    side_t a, b;
    int i, found = 0, up;
    size_t k;

    up = hs_pair(&a, &b, 0x9009, 0x9119) == 0;
    CHECK(up, "key never sent: handshake and a message each way");
    for (i = 0; up && i < cap_n; i++)
        for (k = 0; k + 8 <= cap_log[i].len; k++)
            if (memcmp(cap_log[i].b + k, rt_job_key, 8) == 0 ||
                memcmp(cap_log[i].b + k, rt_job_key + 8, 8) == 0)
                found++;
    CHECK(up && cap_n >= 4 && cap_overflow == 0 && found == 0,
          "key never sent: %d messages captured, none holds the job key (%d found)", cap_n,
          found);
    cap_detach();
    side_close(&a);
    side_close(&b);
}

/* A recording of a handshake (a to b) played to b again, once a's endpoint
 * is gone, makes no endpoint: the proof answered another challenge. */
static void check_replay(void)
{
    side_t a, b;
    int i, n, up;
    static struct {
        size_t len;
        uint8_t b[CAP_LEN];
    } rec[CAP_MAX];

    up = hs_pair(&a, &b, 0xA00A, 0xA11A) == 0;
    CHECK(up, "replay: handshake and a message each way");
    if (!up)
        goto out;
    for (i = n = 0; i < cap_n; i++)
        if (cap_log[i].from == 0) {
            rec[n].len = cap_log[i].len;
            memcpy(rec[n].b, cap_log[i].b, cap_log[i].len);
            n++;
        }
    cap_detach();
    ops->ep_destroy(a.own.ep);
    a.own.ep = NULL;
    {
        double dl = mdr_time_sec() + 0.3;
        while (mdr_time_sec() < dl)
            prog2(&a, &b);
    }
    for (i = 0; i < n; i++) {
        inject_msg(b.rail, rec[i].b, rec[i].len);
        prog2(&a, &b);
    }
    {
        double dl = mdr_time_sec() + 0.3;
        while (mdr_time_sec() < dl)
            prog2(&a, &b);
    }
    CHECK(n >= 2 && cap_overflow == 0 && b.naccepted == 1 && b.acc[0].nrecv == 1,
          "replay: %d recorded messages of a's handshake played again make no endpoint (%d "
          "accepted, %llu messages)", n, b.naccepted, (unsigned long long)b.acc[0].nrecv);
out:
    cap_detach();
    side_close(&a);
    side_close(&b);
}

/* A handshake in a's name (its uuid, its address, a new incarnation, the
 * job key) sent to b while a's endpoint is alive.  cont: with the proof of
 * continuity a's rail can make (its session secret with b).  0 when the
 * messages went in. */
static int forge_handshake(side_t *a, side_t *b, uint32_t epid, int cont)
{
    uint8_t m[CAP_LEN];
    mdr_ofi_hdr_t h;
    mdr_ofi_hello_t hello;
    mdr_ofi_proof_t pr;
    mdr_auth_transcript_t t;
    mdr_ofi_pend_t *e = NULL;
    size_t blen, pad;
    unsigned k;

    memset(&hello, 0, sizeof(hello));
    hello.target = b->uuid;
    hello.addr_len = (uint32_t)a->attr.addr_len;
    memset(hello.nonce, 0x6e, sizeof(hello.nonce));
    blen = sizeof(hello) + hello.addr_len;
    pad = MDR_OFI_PAD8(blen);
    memset(&h, 0, sizeof(h));
    h.type = MDR_OFI_M_HELLO;
    h.pad = (uint8_t)pad;
    h.magic = MDR_OFI_MAGIC;
    h.epid = epid;
    h.uuid = a->uuid;
    memset(m, 0, sizeof(m));
    memcpy(m, &h, MDR_OFI_HDR_LEN);
    memcpy(m + MDR_OFI_HDR_LEN, &hello, sizeof(hello));
    memcpy(m + MDR_OFI_HDR_LEN + sizeof(hello), a->addr, hello.addr_len);
    inject_msg(b->rail, m, MDR_OFI_HDR_LEN + blen + pad);
    for (k = 0; k < MDR_OFI_PEND_MAX; k++)
        if (b->rail->pend[k].used && b->rail->pend[k].uuid == a->uuid &&
            b->rail->pend[k].epid == epid)
            e = &b->rail->pend[k];
    if (e == NULL)
        return -1;
    t.driver = "ofi";
    t.uuid_i = a->uuid;
    t.uuid_a = b->uuid;
    t.nonce_i = hello.nonce;
    t.nonce_a = e->nonce_a;
    t.rail_id = b->rail->name_buf;
    t.rail_id_len = b->rail->name_len;
    mdr_auth_mac(pr.mac, rt_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    memset(pr.cont, 0, sizeof(pr.cont));
    if (cont) {
        mdr_ofi_peer_t *p = mdr_hash_get(&a->rail->peers, b->uuid);
        if (p == NULL || !p->has_sess[p->newest])
            return -1;
        mdr_auth_mac(pr.cont, p->sess[p->newest], MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, &t);
    }
    h.type = MDR_OFI_M_PROOF;
    h.pad = 0;
    memcpy(m, &h, MDR_OFI_HDR_LEN);
    memcpy(m + MDR_OFI_HDR_LEN, &pr, sizeof(pr));
    inject_msg(b->rail, m, MDR_OFI_HDR_LEN + sizeof(pr));
    return 0;
}

/* HELLOs of 40 made-up ids (no key needed to send one) fill the pending
 * table to its cap and no further, make no endpoint, and a genuine
 * handshake still gets through (its HELLO goes again until an entry is
 * old enough to give way). */
static void check_pending_cap(void)
{
    side_t a, b;
    madrail_status_t st;
    unsigned i, maxpend = 0;
    double t0;

    memset(&b, 0, sizeof(b));
    if (side_open(&a, 0xC00C, SPEC, NULL) != MADRAIL_OK ||
        side_open(&b, 0xC11C, SPEC, NULL) != MADRAIL_OK) {
        CHECK(0, "pending cap: open");
        goto out;
    }
    for (i = 0; i < 40; i++) {
        uint8_t m[CAP_LEN];
        mdr_ofi_hdr_t h;
        mdr_ofi_hello_t hello;
        size_t blen, pad;
        memset(&hello, 0, sizeof(hello));
        hello.target = b.uuid;
        hello.addr_len = (uint32_t)a.attr.addr_len;
        blen = sizeof(hello) + hello.addr_len;
        pad = MDR_OFI_PAD8(blen);
        memset(&h, 0, sizeof(h));
        h.type = MDR_OFI_M_HELLO;
        h.pad = (uint8_t)pad;
        h.magic = MDR_OFI_MAGIC;
        h.epid = 7;
        h.uuid = 0xDEAD0000ull + i;
        memset(m, 0, sizeof(m));
        memcpy(m, &h, MDR_OFI_HDR_LEN);
        memcpy(m + MDR_OFI_HDR_LEN, &hello, sizeof(hello));
        memcpy(m + MDR_OFI_HDR_LEN + sizeof(hello), a.addr, hello.addr_len);
        inject_msg(b.rail, m, MDR_OFI_HDR_LEN + blen + pad);
        if (b.rail->npend > maxpend)
            maxpend = b.rail->npend;
    }
    CHECK(maxpend == MDR_OFI_PEND_MAX && b.naccepted == 0,
          "pending cap: 40 HELLOs of strangers hold %u pending entries (cap %d), no endpoint",
          maxpend, MDR_OFI_PEND_MAX);
    t0 = mdr_time_sec();
    st = ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.own, &a.own.ep);
    if (st == MADRAIL_OK)
        st = send_seq(&a, &b, a.own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv == 1) && b.naccepted == 1,
          "pending cap: a genuine handshake gets through the full table (%s, %.1f s)",
          madrail_status_str(st), mdr_time_sec() - t0);
out:
    side_close(&a);
    side_close(&b);
}

/* issue 28 item 2: the key alone does not take over a live peer's
 * identity; the session's secret does (a genuine reconnection). */
static void check_takeover(void)
{
    side_t a, b;
    madrail_status_t st;
    int up, fr;
    uint32_t epid;

    up = hs_pair(&a, &b, 0xB00B, 0xB11B) == 0;
    cap_detach();
    CHECK(up, "takeover: handshake and a message each way");
    if (!up)
        goto out;
    epid = a.own.ep->epid + 1000;
    fr = forge_handshake(&a, &b, epid, 0);
    {
        double dl = mdr_time_sec() + 0.3;
        while (mdr_time_sec() < dl)
            prog2(&a, &b);
    }
    CHECK(fr == 0 && b.naccepted == 1 && b.acc[0].failed == 0,
          "takeover: a handshake with the key naming a live peer, without continuity, is "
          "refused (%d accepted, live ep %s)", b.naccepted,
          b.acc[0].failed ? b.acc[0].fail_reason : "untouched");
    st = send_seq(&a, &b, a.own.ep, 1);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv == 2) && !b.acc[0].bad,
          "takeover: the live connection still carries a's messages (%s, %llu)",
          madrail_status_str(st), (unsigned long long)b.acc[0].nrecv);
    st = send_seq(&a, &b, b.acc[0].ep, 1);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, a.own.nrecv == 2) && !a.own.bad,
          "takeover: ... and b's (%s, %llu)", madrail_status_str(st),
          (unsigned long long)a.own.nrecv);
    fr = forge_handshake(&a, &b, epid + 1, 1);
    CHECK(fr == 0 && WAIT(&a, &b, b.naccepted == 2) && b.acc[0].failed == 1 &&
              strstr(b.acc[0].fail_reason, "reconnected") != NULL,
          "takeover: with the proof of continuity it replaces the old endpoint (%d accepted, "
          "%s)", b.naccepted, b.acc[0].fail_reason);
out:
    side_close(&a);
    side_close(&b);
}

/* Puts in send-after-write mode: the message sent right after each put's
 * completion finds the data in place at the target. */
static void check_put_order_mode(void)
{
    static const char *const ov[] = {"MADRAIL_OFI_PUT_COMPLETE=order", NULL};
    const size_t len = 1u << 20;
    uint8_t *src = malloc(len), *dst = malloc(len), rkey[64];
    size_t rkey_len = sizeof(rkey), i;
    mdr_memh_t *memh = NULL;
    side_t a, b;
    madrail_status_t st;
    uint64_t round;
    rt_comp_t tc;

    memset(&b, 0, sizeof(b));
    if (src == NULL || dst == NULL) {
        CHECK(0, "put order mode: out of memory");
        goto out0;
    }
    st = side_open(&a, 0x5005, SPEC, ov);
    if (st == MADRAIL_ERR_CONFIG) {
        printf("skip put order mode: the provider does not order sends after writes\n");
        goto out0;
    }
    if (st != MADRAIL_OK || side_open(&b, 0x6006, SPEC, ov) != MADRAIL_OK) {
        CHECK(0, "put order mode: open");
        goto out;
    }
    memset(dst, 0, len);
    st = ops->mem_reg(b.rail, dst, len, MDR_MEM_REMOTE_WRITE, &memh);
    if (st == MADRAIL_OK)
        st = ops->rkey_pack(b.rail, memh, a.uuid, rkey, &rkey_len);
    if (st == MADRAIL_OK)
        st = ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.own, &a.own.ep);
    if (st == MADRAIL_OK)
        st = send_seq(&a, &b, a.own.ep, 0);
    CHECK(st == MADRAIL_OK && WAIT(&a, &b, b.acc[0].nrecv == 1), "put order mode: set up");
    if (b.naccepted != 1)
        goto out;
    b.acc[0].watch = dst;
    b.acc[0].watch_ref = src;
    b.acc[0].watch_len = len;
    for (round = 1; round <= 8; round++) {
        double dl = mdr_time_sec() + 20.0;
        for (i = 0; i < len; i++)
            src[i] = (uint8_t)(i * 13 + round * 101);
        memset(&tc, 0, sizeof(tc));
        tc.c.cb = rt_comp_cb;
        while ((st = ops->put(a.own.ep, src, len, NULL, (uint64_t)(uintptr_t)dst, rkey,
                              rkey_len, &tc.c)) == MADRAIL_ERR_NORESOURCE &&
               mdr_time_sec() < dl)
            prog2(&a, &b);
        if (st == MADRAIL_INPROGRESS) {
            /* progress only the initiator: the target must not get ahead */
            while (tc.calls == 0 && mdr_time_sec() < dl)
                ops->progress(a.rail);
            st = tc.calls == 1 ? tc.status : MADRAIL_INPROGRESS;
        }
        if (st != MADRAIL_OK)
            break;
        st = send_seq(&a, &b, a.own.ep, round);
        if (st != MADRAIL_OK || !WAIT(&a, &b, b.acc[0].nrecv == round + 1))
            break;
    }
    CHECK(round == 9 && b.acc[0].watch_bad == 0 && !b.acc[0].bad,
          "put order mode: 8 puts of 1 MiB, each message after a put finds its data "
          "(%d too early, stopped at round %llu: %s)", b.acc[0].watch_bad,
          (unsigned long long)round, madrail_status_str(st));
out:
    if (memh != NULL && b.rail != NULL)
        ops->mem_dereg(b.rail, memh);
    side_close(&a);
    side_close(&b);
out0:
    free(src);
    free(dst);
}

/* An address packed by a rail of another provider is refused by name. */
static void check_foreign_address(void)
{
    side_t a, b;
    madrail_status_t st;
    mdr_ep_t *ep = NULL;

    memset(&b, 0, sizeof(b));
    if (!provider_exists("udp;ofi_rxd", 1)) {
        printf("skip foreign address: no udp;ofi_rxd provider to make one\n");
        return;
    }
    if (side_open(&a, 0x7007, SPEC, NULL) != MADRAIL_OK ||
        side_open(&b, 0x8008, "udp;ofi_rxd:lo", NULL) != MADRAIL_OK) {
        CHECK(0, "foreign address: open");
        goto out;
    }
    st = ops->ep_create(a.rail, b.uuid, b.addr, b.attr.addr_len, &a.own, &ep);
    CHECK(st == MADRAIL_ERR_INVALID && ep == NULL,
          "an address of a udp;ofi_rxd rail is refused by a tcp;ofi_rxm rail (%s)",
          madrail_status_str(st));
out:
    side_close(&a);
    side_close(&b);
}

/* Remote-write keys the driver chooses are random: eight live
 * registrations of one buffer give eight keys, no two a step apart (a
 * counter from 1 made them guessable from one CTS). */
static void check_random_keys(void)
{
    side_t a;
    static uint8_t buf[4096];
    mdr_memh_t *mh[8] = {NULL};
    uint64_t key[8];
    uint8_t rkey[64];
    size_t rkey_len;
    int i, j, ok = 1, steps = 0;

    if (side_open(&a, 0x9009, SPEC, NULL) != MADRAIL_OK) {
        CHECK(0, "random keys: open");
        return;
    }
    if (a.rail->mr_mode & FI_MR_PROV_KEY) {
        printf("skip random keys: %s chooses its keys (FI_MR_PROV_KEY)\n", PROV);
        goto out;
    }
    for (i = 0; i < 8 && ok; i++) {
        rkey_len = sizeof(rkey);
        ok = ops->mem_reg(a.rail, buf, sizeof(buf), MDR_MEM_REMOTE_WRITE, &mh[i]) == MADRAIL_OK &&
             ops->rkey_pack(a.rail, mh[i], 0x1234, rkey, &rkey_len) == MADRAIL_OK;
        if (ok)
            memcpy(&key[i], rkey, 8);
    }
    CHECK(ok, "random keys: eight registrations of one buffer");
    for (i = 0; ok && i < 8; i++)
        for (j = 0; j < i; j++) {
            if (key[i] == key[j])
                ok = 0;
            if (key[i] - key[j] == 1 || key[j] - key[i] == 1)
                steps++;
        }
    CHECK(ok && steps == 0, "remote keys are random: all differ, %d pairs a step apart", steps);
out:
    for (i = 0; i < 8; i++)
        if (mh[i] != NULL)
            ops->mem_dereg(a.rail, mh[i]);
    side_close(&a);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* first, the checks that fork: every process involved starts libfabric
     * afresh (a child forked after libfabric started shares its file
     * descriptors and may inherit its locks) */
    check_lacks();
    run_isolated(PEER_DEATH_RXM);
    run_isolated(PEER_DEATH_SHM);
    if (!provider_exists(PROV, 1)) {
        printf("SKIP: libfabric has no %s provider with RDM endpoints\n", PROV);
        return 77;
    }
    check_specs();
    {
        static const char *const mrecv[] = {"MADRAIL_OFI_MULTI_RECV=1", NULL};
        static const char *const single[] = {"MADRAIL_OFI_MULTI_RECV=0",
                                             "MADRAIL_OFI_RX_BUFS=8", NULL};
        check_traffic(SPEC, "FI_MULTI_RECV buffers", mrecv);
        check_traffic(SPEC, "8 single-message buffers", single);
    }
    if (provider_exists("shm", 1)) {
        static const char *const inject_on[] = {"MADRAIL_OFI_INJECT=1", NULL};
        static const char *const inject_off[] = {"MADRAIL_OFI_INJECT=0", NULL};
        /* lengths 8 to 2047: injected and fi_send messages interleaved */
        check_traffic("shm", "shm, small messages injected", inject_on);
        check_traffic("shm", "shm, no inject", inject_off);
        check_shm_inject(1);
        check_shm_inject(0);
        check_shm_short();
        check_shm_short_full();
    } else {
        printf("SKIP: no shm provider: the fi_inject checks\n");
    }
    check_reincarnation();
    check_key_never_sent();
    check_replay();
    check_takeover();
    check_pending_cap();
    check_put_order_mode();
    check_random_keys();
    check_foreign_address();
    return rt_finish();
}
