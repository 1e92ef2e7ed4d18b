/*
 * madrail_bw: streaming bandwidth between two processes, as osu_bw and
 * osu_bibw measure it, on the madrail API directly.  Per iteration rank 0
 * issues a window of non-blocking sends, rank 1 a window of receives, and
 * rank 1 answers with a 4-byte ack once all arrived; rank 0 times the whole
 * loop.  MB/s = 1e6 bytes per second.  With --bibw both ranks send and
 * receive a window at once (no ack, each waits for its own receives).
 *
 * Without --validate every message of a window uses the same buffer, as in
 * OSU.  With it, messages cycle over up to BW_VALIDATE_BYTES of distinct
 * buffers so each one can be checked; messages that share a buffer carry
 * the same pattern, so their unordered landing cannot cause false errors.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define BW_VALIDATE_BYTES ((size_t)64 << 20)

typedef struct bw_bufs {
    size_t region;  /* bytes of each region */
    uint8_t *send;  /* message j of a window uses send + (j % n) * size */
    uint8_t *recv;
    madrail_request_t *reqs; /* 2 * window */
} bw_bufs_t;

static void bw_bufs_free(bw_bufs_t *b)
{
    bench_free(b->send);
    bench_free(b->recv);
    free(b->reqs);
    memset(b, 0, sizeof(*b));
}

static int bw_bufs_alloc(bw_bufs_t *b, const bench_opts_t *opts)
{
    memset(b, 0, sizeof(*b));
    b->region = opts->max_size;
    if (opts->validate) {
        size_t want = opts->max_size * (size_t)opts->window;
        if (want > BW_VALIDATE_BYTES)
            want = BW_VALIDATE_BYTES;
        if (want > b->region)
            b->region = want;
    }
    b->send = bench_alloc(b->region);
    b->recv = bench_alloc(b->region);
    b->reqs = calloc(2 * (size_t)opts->window, sizeof(madrail_request_t));
    if (b->send == NULL || b->recv == NULL || b->reqs == NULL) {
        bw_bufs_free(b);
        return -1;
    }
    return 0;
}

/* Distinct message buffers at this size (1 without validation, as OSU). */
static int bw_nbufs(const bw_bufs_t *b, const bench_opts_t *opts, size_t size)
{
    size_t n;

    if (!opts->validate)
        return 1;
    n = size ? b->region / size : (size_t)opts->window;
    if (n > (size_t)opts->window)
        n = (size_t)opts->window;
    return n < 1 ? 1 : (int)n;
}

static int bw_waitall(bench_env_t *env, madrail_request_t *reqs, int n, size_t size,
                      int check_len)
{
    madrail_info_t info;
    madrail_status_t status;
    int i, rc = 0;

    for (i = 0; i < n; i++) {
        status = madrail_wait(&reqs[i], &info);
        if (status != MADRAIL_OK)
            rc = bench_fail(env, "madrail_wait", status);
        else if (check_len && info.length != size) {
            fprintf(stderr, "%s: rank %d: received %zu bytes, expected %zu\n", env->prog,
                    env->rank, info.length, size);
            rc = -1;
        }
    }
    return rc;
}

/* One size; *bw_p in MB/s (rank 0).  *errs_p counts bad bytes seen here. */
static int bw_run_size(bench_env_t *env, const bench_opts_t *opts, bw_bufs_t *b, size_t size,
                       double *bw_p, uint64_t *errs_p)
{
    int iters = bench_iters(opts, BENCH_BW, size);
    int warmup = bench_warmup(opts, BENCH_BW, size);
    int window = opts->window, nb = bw_nbufs(b, opts, size);
    int sending = opts->bibw || env->rank == 0;
    int receiving = opts->bibw || env->rank == 1;
    uint32_t ack = 0;
    double t0 = 0.0, secs;
    madrail_status_t status;
    int i, j, nreq;

    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = bench_now();
        nreq = 0;
        if (receiving) {
            for (j = 0; j < window; j++) {
                status = madrail_irecv(env->ctx, env->peer, b->recv + (size_t)(j % nb) * size, size,
                                       BENCH_TAG_DATA, MADRAIL_TAG_EXACT, &b->reqs[nreq]);
                if (status != MADRAIL_OK)
                    return bench_fail(env, "madrail_irecv", status);
                nreq++;
            }
        }
        if (sending) {
            if (opts->validate)
                for (j = 0; j < nb; j++)
                    bench_fill(b->send + (size_t)j * size, size,
                               bench_seed(size, (uint64_t)i, (uint64_t)j, env->rank));
            for (j = 0; j < window; j++) {
                status = madrail_isend(env->ctx, env->peer, b->send + (size_t)(j % nb) * size, size,
                                       BENCH_TAG_DATA, 0, &b->reqs[nreq]);
                if (status != MADRAIL_OK)
                    return bench_fail(env, "madrail_isend", status);
                nreq++;
            }
        }
        /* receives first in the array: they carry the length check */
        if (bw_waitall(env, b->reqs, receiving ? window : 0, size, 1) != 0 ||
            bw_waitall(env, b->reqs + (receiving ? window : 0), nreq - (receiving ? window : 0),
                       size, 0) != 0)
            return -1;
        if (receiving && opts->validate) {
            char what[64];
            snprintf(what, sizeof(what), "rank %d <- %d iteration %d", env->rank,
                     1 - env->rank, i);
            for (j = 0; j < nb; j++)
                *errs_p += bench_check(b->recv + (size_t)j * size, size,
                                       bench_seed(size, (uint64_t)i, (uint64_t)j, 1 - env->rank),
                                       what);
        }
        if (!opts->bibw) {
            if (env->rank == 1)
                status = madrail_send(env->ctx, env->peer, &ack, sizeof(ack), BENCH_TAG_ACK, 0);
            else
                status = madrail_recv(env->ctx, env->peer, &ack, sizeof(ack), BENCH_TAG_ACK,
                                      MADRAIL_TAG_EXACT, NULL);
            if (status != MADRAIL_OK)
                return bench_fail(env, "ack", status);
        }
    }
    secs = bench_now() - t0;
    *bw_p = (double)size * window * iters * (opts->bibw ? 2.0 : 1.0) / secs / 1e6;
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t opts;
    bench_env_t env;
    bench_out_t out;
    bw_bufs_t bufs;
    uint64_t errs = 0, total_errs = 0;
    size_t size;
    int rc, failed = 0;

    rc = bench_parse_args(argc, argv, BENCH_BW, &opts);
    if (rc != 0)
        return rc > 0 ? 0 : 1;
    if (bench_setup(&env, bench_progname(argv[0])) != 0)
        return 1;
    if (bw_bufs_alloc(&bufs, &opts) != 0) {
        fprintf(stderr, "%s: rank %d: cannot allocate buffers of %zu bytes\n", env.prog,
                env.rank, opts.max_size);
        return 1;
    }
    if (bench_out_open(&out, &opts, &env,
                       opts.bibw ? "Bi-Directional Bandwidth Test" : "Bandwidth Test",
                       "Bandwidth (MB/s)", "bandwidth_mbs") != 0) {
        bw_bufs_free(&bufs);
        return 1;
    }

    size = bench_size_first(&opts);
    do {
        double bw = 0.0;
        if (madrail_pmi_barrier() != MADRAIL_OK ||
            bw_run_size(&env, &opts, &bufs, size, &bw, &errs) != 0) {
            failed = 1;
            break;
        }
        if (env.rank == 0)
            bench_out_row(&out, size, bw);
    } while (bench_size_next(&opts, &size));
    bench_out_close(&out);

    if (!failed && opts.validate) {
        if (bench_report_validation(&env, errs, &total_errs) != 0)
            failed = 1;
    }
    bw_bufs_free(&bufs);
    if (failed)
        return 1; /* communication failure: see madrail_lat */
    rc = bench_teardown(&env);
    return (rc == 0 && total_errs == 0) ? 0 : 1;
}
