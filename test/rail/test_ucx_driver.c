/*
 * Driver-level test of the ucx rail, for what the conformance suite does
 * not reach: the connections an endpoint leaves behind.  A job whose
 * peers come and go (madrail_peer_remove, a rail that rejoins) creates
 * and destroys eps while the rail stays open; every cycle must give its
 * connection back, or a long job runs out of file descriptors.  Two
 * ucx:lo rails (UCX over tcp) in one process; each cycle: a connects to
 * b, one message each way, both destroy their ep (a first, then b; b
 * first; a first, and b sends once more, which the BYE fails, before it
 * destroys its ep).  The process's open descriptors are counted before
 * and after.
 *
 * Then the short form (ucx.h): once each side told the other its id,
 * control messages go in it; mixed with full-form ones they keep their
 * order; what comes for a freed slot, or for a slot from another
 * connection, is dropped; destroyed eps give their slots back.
 *
 * And a peer process that dies without a goodbye while the short form is
 * in use: the ep to it fails (UCX reports the broken connection).
 *
 * The handshake (issue 28): the job key is in no message the driver
 * frames; a recorded HELLO and PROOF replayed as a new connection are
 * refused (the PROOF answers another challenge); a third rail with the
 * key that claims a connected peer's id is refused, and the peer's
 * connection keeps working.
 *
 * Each check prints a line; exit 0 = pass, 1 = fail, 77 = skip (no ucx:lo
 * rail here).
 */
#include "mdr_config.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rails/rail.h"
#include "rails/ucx/ucx.h"
#include "util/clock.h"

#include "rail_test_util.h"

#define SLOT 8192 /* above MDR_UCX_IMM_MAX: a whole slot goes in the full form */
#define SPEC "lo"

typedef struct side side_t;

typedef struct epc {
    side_t *side;
    mdr_ep_t *ep;
    uint64_t nrecv;
    int failed;
    int seqcheck;       /* messages carry 1, 2, 3, ... in their first 8 bytes */
    uint64_t last, out_of_order;
} epc_t;

struct side {
    uint64_t uuid;
    mdr_rail_t *rail;
    mdr_rail_attr_t attr;
    uint8_t addr[512];
    epc_t own;
    epc_t acc;
    int naccepted;
};

static const mdr_rail_ops_t *ops = &mdr_ucx_ops;

static void up_recv(void *cookie, const void *data, size_t len)
{
    epc_t *c = cookie;
    c->nrecv++;
    if (c->seqcheck) {
        uint64_t v = 0;
        if (len >= sizeof(v))
            memcpy(&v, data, sizeof(v));
        if (v != c->last + 1)
            c->out_of_order++;
        c->last = v;
    }
}

static void *up_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    side_t *s = rail_cookie;
    (void)uuid;
    memset(&s->acc, 0, sizeof(s->acc));
    s->acc.side = s;
    s->acc.ep = ep;
    s->naccepted++;
    return &s->acc;
}

static void up_failed(void *cookie, madrail_status_t status, const char *reason)
{
    epc_t *c = cookie;
    (void)status;
    (void)reason;
    c->failed++;
}

static const mdr_rail_upcalls_t upcalls = {up_recv, up_accepted, up_failed};

static madrail_status_t side_open(side_t *s, uint64_t uuid)
{
    mdr_rail_params_t p = rt_params(uuid, &upcalls, s, SLOT, 16, NULL);
    madrail_status_t st;

    memset(s, 0, sizeof(*s));
    s->uuid = uuid;
    s->own.side = s;
    st = ops->open(SPEC, &p, &s->rail);
    if (st != MADRAIL_OK) {
        s->rail = NULL;
        return st;
    }
    ops->query(s->rail, &s->attr);
    return ops->addr_pack(s->rail, s->addr, s->attr.addr_len);
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

static void settle(side_t *a, side_t *b, double sec)
{
    double dl = mdr_time_sec() + sec;
    while (mdr_time_sec() < dl)
        prog2(a, b);
}

static int nfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static madrail_status_t send1(side_t *a, side_t *b, mdr_ep_t *ep)
{
    uint64_t v = 42;
    struct iovec iov = {&v, sizeof(v)};
    madrail_status_t st;
    double dl = mdr_time_sec() + 20.0;

    while ((st = ops->ctrl_send(ep, &iov, 1)) == MADRAIL_ERR_NORESOURCE &&
           mdr_time_sec() < dl)
        prog2(a, b);
    return st;
}

/* One cycle; order 0: a destroys its ep first, 1: b first, 2: a first,
 * and b tries to send on its ep before destroying it (as the core does:
 * the peer's BYE fails an ep when it is next used).  Returns 0 when the
 * messages went both ways (and in order 2 b's last send failed). */
static int cycle(side_t *a, side_t *b, int order)
{
    int b_first = order == 1;
    int ok;

    a->own.nrecv = 0;
    a->own.failed = 0;
    if (ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep) !=
        MADRAIL_OK)
        return -1;
    b->acc.ep = NULL;
    ok = send1(a, b, a->own.ep) == MADRAIL_OK &&
         WAIT(a, b, b->acc.ep != NULL && b->acc.nrecv == 1) &&
         send1(b, a, b->acc.ep) == MADRAIL_OK && WAIT(a, b, a->own.nrecv == 1);
    if (b_first && b->acc.ep != NULL) {
        ops->ep_destroy(b->acc.ep);
        settle(a, b, 0.002);
    }
    ops->ep_destroy(a->own.ep);
    a->own.ep = NULL;
    settle(a, b, 0.002);
    if (order == 2 && b->acc.ep != NULL) {
        uint64_t v = 7;
        struct iovec iov = {&v, sizeof(v)};
        if (ops->ctrl_send(b->acc.ep, &iov, 1) != MADRAIL_ERR_RAIL_DOWN)
            ok = 0;
        settle(a, b, 0.002);
    }
    if (!b_first && b->acc.ep != NULL)
        ops->ep_destroy(b->acc.ep);
    b->acc.ep = NULL;
    settle(a, b, 0.002);
    return ok ? 0 : -1;
}

/* Send n numbered messages on ep (the sizes alternate between 8 bytes
 * and a whole slot when mixed). */
static int send_numbered(side_t *a, side_t *b, mdr_ep_t *ep, uint64_t *next, int n, int mixed)
{
    static uint64_t buf[SLOT / 8];
    int i;

    for (i = 0; i < n; i++) {
        struct iovec iov = {buf, mixed && (i & 1) ? SLOT : 8};
        madrail_status_t st;
        double dl = mdr_time_sec() + 20.0;
        buf[0] = (*next)++;
        while ((st = ops->ctrl_send(ep, &iov, 1)) == MADRAIL_ERR_NORESOURCE &&
               mdr_time_sec() < dl)
            prog2(a, b);
        if (st != MADRAIL_OK)
            return -1;
    }
    return 0;
}

static unsigned slots_used(const side_t *s)
{
    unsigned i, n = 0;
    if (s->rail->short_slots == NULL)
        return 0;
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++)
        n += s->rail->short_slots[i].ep != NULL;
    return n;
}

/* Destroy a's own ep and b's accepted one, and let the closes run. */
static void drop_eps(side_t *a, side_t *b)
{
    if (a->own.ep != NULL)
        ops->ep_destroy(a->own.ep);
    a->own.ep = NULL;
    if (b->acc.ep != NULL)
        ops->ep_destroy(b->acc.ep);
    b->acc.ep = NULL;
    a->own.seqcheck = b->acc.seqcheck = 0;
    settle(a, b, 0.01);
}

static void test_short_form(side_t *a, side_t *b)
{
    uint64_t na = 1, nb = 1, tx0, rx0, v = 99;
    ucp_am_recv_param_t prm;
    mdr_ucx_short_hdr_t sh;
    mdr_ucx_short_slot_t *slot;
    int ok;

    if (ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep) !=
        MADRAIL_OK) {
        CHECK(0, "short form: ep_create");
        return;
    }
    a->own.nrecv = 0;
    b->acc.ep = NULL;
    /* the first message each way goes in the full form; each side sends its
     * SHORT_ID as soon as it joined the other's connection and can send */
    ok = send_numbered(a, b, a->own.ep, &na, 1, 0) == 0 && WAIT(a, b, b->acc.ep != NULL);
    if (ok) {
        b->acc.seqcheck = 1;
        b->acc.last = 0;
        b->acc.nrecv = 0;
    }
    ok = ok && WAIT(a, b, b->acc.nrecv == 0 || b->acc.nrecv == 1);
    a->own.seqcheck = 1;
    ok = ok && send_numbered(b, a, b->acc.ep, &nb, 1, 0) == 0 &&
         WAIT(a, b, a->own.nrecv == 1 && a->own.ep->tx_short_am != 0);
    ok = ok && WAIT(a, b, b->acc.ep->tx_short_am != 0);
    CHECK(ok && a->own.ep->tx_short_am >= MDR_UCX_AM_SHORT_BASE &&
              b->acc.ep->tx_short_am >= MDR_UCX_AM_SHORT_BASE,
          "short form: after a message each way, each side holds the other's id for its "
          "connection (%u, %u)",
          ok ? a->own.ep->tx_short_am : 0, ok && b->acc.ep ? b->acc.ep->tx_short_am : 0);
    if (!ok)
        goto out;
    b->acc.last = 1;
    b->acc.nrecv = 1;
    tx0 = a->rail->short_tx;
    rx0 = b->rail->short_rx;
    ok = send_numbered(a, b, a->own.ep, &na, 100, 0) == 0 && WAIT(a, b, b->acc.nrecv == 101);
    CHECK(ok && a->rail->short_tx - tx0 >= 99 && b->rail->short_rx - rx0 == a->rail->short_tx - tx0 &&
              b->acc.out_of_order == 0,
          "short form: 100 messages of 8 bytes a->b arrive in order, %llu of them sent and "
          "%llu received in the short form",
          (unsigned long long)(a->rail->short_tx - tx0),
          (unsigned long long)(b->rail->short_rx - rx0));
    tx0 = b->rail->short_tx;
    ok = send_numbered(b, a, b->acc.ep, &nb, 100, 0) == 0 && WAIT(a, b, a->own.nrecv == 101);
    CHECK(ok && b->rail->short_tx - tx0 == 100 && a->own.out_of_order == 0,
          "short form: 100 messages b->a, all in the short form (%llu) and in order",
          (unsigned long long)(b->rail->short_tx - tx0));
    tx0 = a->rail->short_tx;
    ok = send_numbered(a, b, a->own.ep, &na, 400, 1) == 0 && WAIT(a, b, b->acc.nrecv == 501);
    CHECK(ok && b->acc.out_of_order == 0 && b->acc.last == 501 &&
              a->rail->short_tx - tx0 == 200,
          "short form: 400 messages of 8 bytes and of a whole slot mixed arrive in order "
          "(%llu received, %llu out of order; %llu in the short form, the whole slots full)",
          (unsigned long long)b->acc.nrecv, (unsigned long long)b->acc.out_of_order,
          (unsigned long long)(a->rail->short_tx - tx0));

    /* forged: the slot of b's connection with other connection bits, then a free slot */
    memset(&prm, 0, sizeof(prm));
    slot = &b->rail->short_slots[a->own.ep->tx_short_am - MDR_UCX_AM_SHORT_BASE];
    sh.seq = (uint16_t)a->own.ep->tx_seq;
    sh.conn = (uint16_t)(a->own.ep->tx_conn + 1);
    (void)mdr_ucx_short_cb(slot, &sh, sizeof(sh), &na, sizeof(na), &prm);
    settle(a, b, 0.01);
    CHECK(b->acc.nrecv == 501 && b->acc.failed == 0,
          "short form: a message with another connection's bits is dropped (%llu received)",
          (unsigned long long)b->acc.nrecv);
    /* the slot before it served a connection of the cycles above */
    sh.conn = (uint16_t)a->own.ep->tx_conn;
    slot = &b->rail->short_slots[(slot - b->rail->short_slots + MDR_UCX_SHORT_SLOTS - 1) %
                                 MDR_UCX_SHORT_SLOTS];
    if (slot->registered)
        (void)mdr_ucx_short_cb(slot, &sh, sizeof(sh), &v, sizeof(v), &prm);
    settle(a, b, 0.01);
    CHECK(slot->registered && slot->ep == NULL && b->acc.nrecv == 501 && b->acc.failed == 0,
          "short form: a message for a free slot is dropped (%llu received)",
          (unsigned long long)b->acc.nrecv);
    CHECK(slots_used(a) == 1 && slots_used(b) == 1, "short form: one slot taken on each side "
          "(%u, %u)", slots_used(a), slots_used(b));
out:
    drop_eps(a, b);
    CHECK(slots_used(a) == 0 && slots_used(b) == 0,
          "short form: destroyed eps give their slots back (%u, %u taken)", slots_used(a),
          slots_used(b));
}

/* Every slot of b taken: b's incoming connection gets none and a keeps
 * sending in the full form, in order; b's own sends still go short. */
static void test_short_full(side_t *a, side_t *b)
{
    static char dummy;
    uint64_t na = 1, nb = 1, tx0;
    unsigned i;
    int ok;

    if (b->rail->short_slots == NULL) { /* set at open */
        CHECK(0, "short form, no slot left: the rail has no slots");
        return;
    }
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++)
        if (b->rail->short_slots[i].ep == NULL)
            b->rail->short_slots[i].ep = (mdr_ep_t *)(void *)&dummy;
    a->own.nrecv = 0;
    b->acc.ep = NULL;
    ok = ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep) ==
         MADRAIL_OK;
    ok = ok && send_numbered(a, b, a->own.ep, &na, 1, 0) == 0 &&
         WAIT(a, b, b->acc.ep != NULL && b->acc.nrecv == 1);
    if (ok) {
        b->acc.seqcheck = 1;
        b->acc.last = 1;
    }
    ok = ok && send_numbered(b, a, b->acc.ep, &nb, 1, 0) == 0 &&
         WAIT(a, b, a->own.nrecv == 1 && b->acc.ep->tx_short_am != 0);
    settle(a, b, 0.01);
    CHECK(ok && a->own.ep->tx_short_am == 0 && b->acc.ep->rx_short == 0,
          "short form, no slot left: b gives a's connection no id (a holds %u), a gave b one",
          ok ? a->own.ep->tx_short_am : 0);
    tx0 = a->rail->short_tx;
    ok = ok && send_numbered(a, b, a->own.ep, &na, 50, 0) == 0 &&
         WAIT(a, b, b->acc.nrecv == 51);
    CHECK(ok && a->rail->short_tx == tx0 && b->acc.out_of_order == 0,
          "short form, no slot left: 50 messages a->b in the full form, in order (%llu short)",
          (unsigned long long)(a->rail->short_tx - tx0));
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++)
        if (b->rail->short_slots[i].ep == (mdr_ep_t *)(void *)&dummy)
            b->rail->short_slots[i].ep = NULL;
    drop_eps(a, b);
}

/* In a process of its own (UCX starts afresh on both sides of the fork):
 * a child rail answers one message, which gives both sides each other's
 * short-form id, and dies without closing; the parent keeps sending in
 * the short form until its ep fails.  Returns 0 (pass), 1 (fail), 77 (no
 * rail). */
static int peer_death_run(void)
{
    int c2p[2], p2c[2], status = 0;
    side_t a, c;
    uint64_t na = 1, tx0;
    double dl;
    pid_t pid;
    char ch;

    if (pipe(c2p) != 0 || pipe(p2c) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        uint64_t nc = 1;
        close(c2p[0]);
        close(p2c[1]);
        if (side_open(&c, 0xC) != MADRAIL_OK)
            _exit(write(c2p[1], "n", 1) == 1 ? 3 : 2);
        if (write(c2p[1], "y", 1) != 1 || write(c2p[1], c.addr, c.attr.addr_len) !=
                                               (ssize_t)c.attr.addr_len)
            _exit(2);
        dl = mdr_time_sec() + 20.0;
        while (c.acc.nrecv < 1 && mdr_time_sec() < dl)
            ops->progress(c.rail);
        if (c.acc.ep == NULL || send_numbered(&c, &c, c.acc.ep, &nc, 1, 0) != 0)
            _exit(2);
        while (mdr_time_sec() < dl && (c.acc.ep->tx_short_am == 0 || ops->ep_backlog(c.acc.ep)))
            ops->progress(c.rail);
        if (write(c2p[1], "r", 1) != 1 || read(p2c[0], &ch, 1) < 0)
            _exit(2);
        _exit(0); /* no close: the peer hears no goodbye */
    }
    close(c2p[1]);
    close(p2c[0]);
    if (pid < 0 || read(c2p[0], &ch, 1) != 1) {
        printf("FAIL peer death: the child failed\n");
        return 1;
    }
    if (ch != 'y') {
        waitpid(pid, &status, 0);
        return 77;
    }
    if (side_open(&a, 0xA) != MADRAIL_OK) {
        printf("FAIL peer death: open\n");
        return 1;
    }
    memset(&c, 0, sizeof(c));
    c.attr.addr_len = a.attr.addr_len;
    c.uuid = 0xC;
    if (read(c2p[0], c.addr, c.attr.addr_len) != (ssize_t)c.attr.addr_len ||
        ops->ep_create(a.rail, c.uuid, c.addr, c.attr.addr_len, &a.own, &a.own.ep) !=
            MADRAIL_OK) {
        printf("FAIL peer death: connect\n");
        return 1;
    }
    a.own.seqcheck = 1;
    dl = mdr_time_sec() + 20.0;
    send_numbered(&a, &a, a.own.ep, &na, 1, 0);
    while ((a.own.nrecv < 1 || a.own.ep->tx_short_am == 0) && mdr_time_sec() < dl)
        ops->progress(a.rail);
    CHECK(a.own.nrecv == 1 && a.own.ep->tx_short_am != 0 && read(c2p[0], &ch, 1) == 1 &&
              ch == 'r',
          "peer death: the child answered; we hold its id (%u)", a.own.ep->tx_short_am);
    if (write(p2c[1], "x", 1) != 1 || waitpid(pid, &status, 0) != pid)
        kill(pid, SIGKILL);
    tx0 = a.rail->short_tx;
    dl = mdr_time_sec() + 20.0;
    while (a.own.failed == 0 && mdr_time_sec() < dl) {
        uint64_t v = na;
        struct iovec iov = {&v, sizeof(v)};
        if (ops->ctrl_send(a.own.ep, &iov, 1) == MADRAIL_OK)
            na++;
        ops->progress(a.rail);
        usleep(1000);
    }
    CHECK(a.own.failed == 1, "peer death: the ep to a child that died without a goodbye "
          "failed, after %llu messages to it in the short form",
          (unsigned long long)(a.rail->short_tx - tx0));
    CHECK(a.rail->short_tx > tx0, "peer death: the short form was in use when it died");
    ops->close(a.rail);
    return failures ? 1 : 0;
}

static void check_peer_death(void)
{
    int status = 0;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(peer_death_run());
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 77)) {
        printf("FAIL peer death check process\n");
        failures++;
    } else if (WEXITSTATUS(status) == 77) {
        printf("skip peer death: no ucx:%s rail here\n", SPEC);
    }
}

/* ---------------- the handshake (issue 28) ---------------- */

/* What the driver frames, as the test hook sees it (ucx.h, mdr_ucx_tx_hook). */
static struct {
    int on;
    unsigned nmsg, nhello, nproof, nkey;
    uint8_t hello[512], proof[512];
    size_t hello_len, proof_len;
    mdr_ucx_hdr_t hello_hdr, proof_hdr;
} cap;

static void cap_hook(const mdr_ucx_hdr_t *hdr, const struct iovec *iov, int iovcnt)
{
    uint8_t buf[sizeof(*hdr) + 16384];
    size_t len = sizeof(*hdr), i;
    int k;

    if (!cap.on)
        return;
    memcpy(buf, hdr, sizeof(*hdr));
    for (k = 0; k < iovcnt; k++)
        if (iov[k].iov_len > 0 && len + iov[k].iov_len <= sizeof(buf)) {
            memcpy(buf + len, iov[k].iov_base, iov[k].iov_len);
            len += iov[k].iov_len;
        }
    cap.nmsg++;
    for (i = 0; i + MDR_JOB_KEY_LEN <= len; i++)
        if (memcmp(buf + i, rt_job_key, MDR_JOB_KEY_LEN) == 0)
            cap.nkey++;
    if (hdr->type == MDR_UCX_M_HELLO && len - sizeof(*hdr) <= sizeof(cap.hello)) {
        cap.nhello++;
        cap.hello_hdr = *hdr;
        cap.hello_len = len - sizeof(*hdr);
        memcpy(cap.hello, buf + sizeof(*hdr), cap.hello_len);
    }
    if (hdr->type == MDR_UCX_M_PROOF && len - sizeof(*hdr) <= sizeof(cap.proof)) {
        cap.nproof++;
        cap.proof_hdr = *hdr;
        cap.proof_len = len - sizeof(*hdr);
        memcpy(cap.proof, buf + sizeof(*hdr), cap.proof_len);
    }
}

/* Hand a recorded message to r's handler as its worker would. */
static void inject(side_t *r, const mdr_ucx_hdr_t *hdr, const void *data, size_t len)
{
    ucp_am_recv_param_t prm;

    memset(&prm, 0, sizeof(prm));
    (void)mdr_ucx_am_cb(r->rail, hdr, sizeof(*hdr), (void *)data, len, &prm);
}

/* The key never leaves: every message of a connection's handshake and of
 * its traffic, both ways, scanned for the job key's bytes.  Then the
 * recorded HELLO and PROOF replayed to b as a new connection: b answers
 * the HELLO with a new challenge, which the old PROOF does not meet. */
static void test_handshake_wire(side_t *a, side_t *b)
{
    unsigned acc0, ref0;

    memset(&cap, 0, sizeof(cap));
    mdr_ucx_tx_hook = cap_hook;
    cap.on = 1;
    CHECK(cycle(a, b, 0) == 0, "handshake: a connection with a message each way (recorded)");
    cap.on = 0;
    CHECK(cap.nhello >= 1 && cap.nproof >= 1 && cap.nmsg > cap.nhello + cap.nproof,
          "handshake: %u messages framed, %u HELLO, %u PROOF", cap.nmsg, cap.nhello,
          cap.nproof);
    CHECK(cap.nkey == 0, "handshake: the job key is in none of them (%u found)", cap.nkey);

    /* the last HELLO and PROOF recorded are a's to b (b's reply rides on
     * the ACK's connection back) */
    acc0 = (unsigned)b->naccepted;
    ref0 = (unsigned)b->rail->refusals.total;
    cap.hello_hdr.uuid = a->uuid;
    inject(b, &cap.hello_hdr, cap.hello, cap.hello_len);
    settle(a, b, 0.05);
    CHECK(b->rail->npending == 1, "replay: b challenged the recorded HELLO (%u pending)",
          b->rail->npending);
    inject(b, &cap.proof_hdr, cap.proof, cap.proof_len);
    settle(a, b, 0.05);
    CHECK((unsigned)b->naccepted == acc0 && b->rail->npending == 0 &&
              b->rail->refusals.total > ref0,
          "replay: the recorded PROOF fails the new challenge (accepted %u -> %u, refusals "
          "%u -> %lu, %u pending)",
          acc0, (unsigned)b->naccepted, ref0, b->rail->refusals.total, b->rail->npending);
    mdr_ucx_tx_hook = NULL;
}

/* A process with the key that claims a's id (c, uuid 0xA) while a's
 * connection to b is live: b refuses it (no continuity proof), and a's
 * connection keeps working both ways. */
static void test_takeover(side_t *a, side_t *b)
{
    side_t c;
    int acc0, ok;

    if (side_open(&c, a->uuid) != MADRAIL_OK) {
        CHECK(0, "takeover: a third rail opens");
        return;
    }
    a->own.nrecv = 0;
    a->own.failed = 0;
    b->acc.ep = NULL;
    ok = ops->ep_create(a->rail, b->uuid, b->addr, b->attr.addr_len, &a->own, &a->own.ep) ==
             MADRAIL_OK &&
         send1(a, b, a->own.ep) == MADRAIL_OK &&
         WAIT(a, b, b->acc.ep != NULL && b->acc.nrecv == 1) &&
         send1(b, a, b->acc.ep) == MADRAIL_OK && WAIT(a, b, a->own.nrecv == 1);
    CHECK(ok, "takeover: a and b connected, a message each way");
    acc0 = b->naccepted;
    c.own.failed = 0;
    ok = ops->ep_create(c.rail, b->uuid, b->addr, b->attr.addr_len, &c.own, &c.own.ep) ==
         MADRAIL_OK;
    if (ok) {
        uint64_t v = 9;
        struct iovec iov = {&v, sizeof(v)};
        double dl = mdr_time_sec() + 20.0;
        (void)ops->ctrl_send(c.own.ep, &iov, 1);
        while (!c.own.failed && mdr_time_sec() < dl) {
            prog2(a, b);
            ops->progress(c.rail);
        }
    }
    CHECK(ok && c.own.failed && b->naccepted == acc0 && b->acc.failed == 0,
          "takeover: b refused c's connection under a's id (c failed: %d, b accepted %d more, "
          "b's ep to a failed: %d)",
          c.own.failed, b->naccepted - acc0, b->acc.failed);
    ok = send1(a, b, a->own.ep) == MADRAIL_OK && WAIT(a, b, b->acc.nrecv == 2) &&
         send1(b, a, b->acc.ep) == MADRAIL_OK && WAIT(a, b, a->own.nrecv == 2) &&
         !a->own.failed && !b->acc.failed;
    CHECK(ok, "takeover: a's connection still works both ways (a got %llu, b got %llu)",
          (unsigned long long)a->own.nrecv, (unsigned long long)b->acc.nrecv);
    if (c.own.ep != NULL)
        ops->ep_destroy(c.own.ep);
    ops->ep_destroy(a->own.ep);
    a->own.ep = NULL;
    if (b->acc.ep != NULL)
        ops->ep_destroy(b->acc.ep);
    b->acc.ep = NULL;
    settle(a, b, 0.05);
    ops->close(c.rail);
}

int main(int argc, char **argv)
{
    static const char *const who[] = {"the connecting side", "the accepting side",
                                      "the connecting side (the other sends after its BYE)"};
    int n = argc > 1 ? atoi(argv[1]) : 100, i, order, bad, before, after;
    side_t a, b;

    setvbuf(stdout, NULL, _IOLBF, 0);
    check_peer_death(); /* first: forks before this process starts UCX */
    if (side_open(&a, 0xA) != MADRAIL_OK || side_open(&b, 0xB) != MADRAIL_OK) {
        printf("SKIP: cannot open ucx:%s rails here\n", SPEC);
        return 77;
    }
    for (order = 0; order < 3; order++) {
        bad = 0;
        if (cycle(&a, &b, order) != 0) /* the first connection of the rails */
            bad++;
        settle(&a, &b, 0.1);
        before = nfds();
        for (i = 0; i < n; i++)
            if (cycle(&a, &b, order) != 0)
                bad++;
        /* the last closes finish within progress: wait for them, boundedly */
        after = nfds();
        for (i = 0; i < 100 && after - before > 4; i++) {
            settle(&a, &b, 0.1);
            after = nfds();
        }
        CHECK(bad == 0, "%s destroys first: %d cycles, a message each way in each (%d failed)",
              who[order], n + 1, bad);
        CHECK(after - before <= 4,
              "%s destroys first: open descriptors %d before %d cycles, %d after", who[order],
              before, n, after);
    }
    test_short_form(&a, &b);
    test_short_full(&a, &b);
    test_handshake_wire(&a, &b);
    test_takeover(&a, &b);
    ops->close(a.rail);
    ops->close(b.rail);
    return rt_finish();
}
