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
 * and after.  Each check prints a line; exit 0 = pass, 1 = fail, 77 =
 * skip (no ucx:lo rail here).
 */
#include "mdr_config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails/rail.h"
#include "util/clock.h"

#include "rail_test_util.h"

#define SLOT 2048
#define SPEC "lo"

typedef struct side side_t;

typedef struct epc {
    side_t *side;
    mdr_ep_t *ep;
    uint64_t nrecv;
    int failed;
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
    (void)data;
    (void)len;
    c->nrecv++;
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

int main(int argc, char **argv)
{
    static const char *const who[] = {"the connecting side", "the accepting side",
                                      "the connecting side (the other sends after its BYE)"};
    int n = argc > 1 ? atoi(argv[1]) : 100, i, order, bad, before, after;
    side_t a, b;

    setvbuf(stdout, NULL, _IOLBF, 0);
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
    ops->close(a.rail);
    ops->close(b.rail);
    return rt_finish();
}
