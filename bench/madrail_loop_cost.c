/*
 * Cost of the core per small message, measured on the in-process loop
 * driver (no network, no system call): two contexts in one thread, a
 * ping-pong of small messages, reported as nanoseconds per one-way
 * message (send + match + receive, both sides' progress included), and a
 * streaming rate with a window of messages in flight.  A recording
 * benchmark: it asserts nothing about time.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "madrail.h"
#include "util/clock.h"

static madrail_status_t wait2(madrail_context_t a, madrail_context_t b, madrail_request_t *r)
{
    int flag = 0;
    madrail_status_t st = MADRAIL_OK;
    while (*r) {
        madrail_progress(a);
        madrail_progress(b);
        st = madrail_test(r, &flag, NULL);
    }
    return st;
}

int main(int argc, char **argv)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:cost", NULL};
    char rails[256];
    /* contexts of one process that peer each other share a job key */
    madrail_context_params_t prm = {.overrides = ov,
                                    .job_key = (const uint8_t *)"madrail-test-key"};
    madrail_context_t a, b;
    madrail_peer_t a2b, b2a;
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len, size = 8;
    long iters = 200000, i;
    char buf[256] = {0};
    double t0 = 0, t1;

    if (argc > 1)
        iters = atol(argv[1]);
    if (argc > 2)
        size = (size_t)atol(argv[2]);
    if (argc > 3) { /* e.g. loop:c0,loop:c1: the rail choice over two rails */
        snprintf(rails, sizeof(rails), "MADRAIL_RAILS=%s", argv[3]);
        ov[0] = rails;
    }
    if (iters <= 0 || size > sizeof(buf)) {
        fprintf(stderr, "usage: %s [iterations>0] [size<=%zu] [rails]\n", argv[0], sizeof(buf));
        return 2;
    }
    if (madrail_context_init(&prm, &a) != MADRAIL_OK || madrail_context_init(&prm, &b) != MADRAIL_OK)
        return 1;
    len = sizeof(addr);
    madrail_context_address(b, addr, &len);
    madrail_peer_add(a, addr, len, &a2b);
    len = sizeof(addr);
    madrail_context_address(a, addr, &len);
    madrail_peer_add(b, addr, len, &b2a);

    for (i = -1000; i < iters; i++) {
        madrail_request_t s, r;
        if (i == 0)
            t0 = mdr_time_sec();
        madrail_irecv(b, b2a, buf, size, 1, 0, &r);
        madrail_isend(a, a2b, buf, size, 1, 0, &s);
        wait2(a, b, &r);
        wait2(a, b, &s);
        madrail_irecv(a, a2b, buf, size, 2, 0, &r);
        madrail_isend(b, b2a, buf, size, 2, 0, &s);
        wait2(a, b, &r);
        wait2(a, b, &s);
    }
    t1 = mdr_time_sec();
    printf("# madrail loop-driver cost, %zu-byte messages\n", size);
    printf("ping-pong   %10.1f ns per one-way message (%ld round trips)\n",
           (t1 - t0) * 1e9 / (2.0 * (double)iters), iters);
    {
        enum { W = 64 };
        madrail_request_t s[W], r[W];
        long n = 0, rounds = iters / W + 1, k;
        int j;
        t0 = mdr_time_sec();
        for (k = 0; k < rounds; k++) {
            for (j = 0; j < W; j++)
                madrail_irecv(b, b2a, buf, size, 3, 0, &r[j]);
            for (j = 0; j < W; j++)
                madrail_isend(a, a2b, buf, size, 3, 0, &s[j]);
            for (j = 0; j < W; j++) {
                wait2(a, b, &r[j]);
                wait2(a, b, &s[j]);
            }
            n += W;
        }
        t1 = mdr_time_sec();
        printf("streaming   %10.1f ns per message (window %d, %ld messages)\n",
               (t1 - t0) * 1e9 / (double)n, W, n);
    }
    madrail_context_finalize(a);
    madrail_context_finalize(b);
    return 0;
}
