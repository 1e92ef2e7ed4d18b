/*
 * madrail_lat: ping-pong latency between two processes, as osu_latency
 * measures it (rank 0 sends, rank 1 echoes, latency = half the round trip
 * averaged over the timed iterations), on the madrail API directly.  Run
 * it under mpiexec -n 2; the rails come from MADRAIL_RAILS.
 *
 * Blocking send/recv on purpose: that is what osu_latency does, and it
 * makes the number the cost of one message each way including progress.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

/* One size: returns 0, or -1 on a communication failure.  *errs_p counts
 * bad bytes found by this rank when validating. */
static int lat_run_size(bench_env_t *env, const bench_opts_t *opts, size_t size,
                        void *sbuf, void *rbuf, double *lat_p, uint64_t *errs_p)
{
    int iters = bench_iters(opts, BENCH_LAT, size);
    int warmup = bench_warmup(opts, BENCH_LAT, size);
    double t0 = 0.0;
    madrail_status_t status;
    madrail_info_t info;
    int i;

    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = bench_now();
        if (env->rank == 0) {
            if (opts->validate)
                bench_fill(sbuf, size, bench_seed(size, (uint64_t)i, 0, 0));
            status = madrail_send(env->ctx, env->peer, sbuf, size, BENCH_TAG_DATA, 0);
            if (status != MADRAIL_OK)
                return bench_fail(env, "madrail_send", status);
            status = madrail_recv(env->ctx, env->peer, rbuf, size, BENCH_TAG_DATA,
                                  MADRAIL_TAG_EXACT, &info);
            if (status != MADRAIL_OK)
                return bench_fail(env, "madrail_recv", status);
        } else {
            status = madrail_recv(env->ctx, env->peer, rbuf, size, BENCH_TAG_DATA,
                                  MADRAIL_TAG_EXACT, &info);
            if (status != MADRAIL_OK)
                return bench_fail(env, "madrail_recv", status);
        }
        if (opts->validate) {
            if (info.length != size) {
                fprintf(stderr, "VALIDATION ERROR: rank %d: size %zu iteration %d: received "
                                "%zu bytes\n",
                        env->rank, size, i, info.length);
                (*errs_p)++;
            }
            *errs_p += bench_check(rbuf, size, bench_seed(size, (uint64_t)i, 0, env->rank == 0),
                                   env->rank == 0 ? "rank 0 <- 1" : "rank 1 <- 0");
        }
        if (env->rank == 1) {
            if (opts->validate)
                bench_fill(sbuf, size, bench_seed(size, (uint64_t)i, 0, 1));
            status = madrail_send(env->ctx, env->peer, sbuf, size, BENCH_TAG_DATA, 0);
            if (status != MADRAIL_OK)
                return bench_fail(env, "madrail_send", status);
        }
    }
    *lat_p = (bench_now() - t0) * 1e6 / (2.0 * iters);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t opts;
    bench_env_t env;
    bench_out_t out;
    void *sbuf = NULL, *rbuf = NULL;
    uint64_t errs = 0, total_errs = 0;
    size_t size;
    int rc, failed = 0;

    rc = bench_parse_args(argc, argv, BENCH_LAT, &opts);
    if (rc != 0)
        return rc > 0 ? 0 : 1;
    if (bench_setup(&env, bench_progname(argv[0])) != 0)
        return 1;

    sbuf = bench_alloc(opts.max_size);
    rbuf = bench_alloc(opts.max_size);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", env.prog, env.rank,
                opts.max_size);
        failed = 1;
        goto out_bufs;
    }
    if (bench_out_open(&out, &opts, &env, "Latency Test", "Latency (us)", "latency_us") != 0) {
        failed = 1;
        goto out_bufs;
    }

    size = bench_size_first(&opts);
    do {
        double lat = 0.0;
        if (madrail_pmi_barrier() != MADRAIL_OK ||
            lat_run_size(&env, &opts, size, sbuf, rbuf, &lat, &errs) != 0) {
            failed = 1;
            break;
        }
        if (env.rank == 0)
            bench_out_row(&out, size, lat);
    } while (bench_size_next(&opts, &size));
    bench_out_close(&out);

    if (!failed && opts.validate) {
        if (bench_report_validation(&env, errs, &total_errs) != 0)
            failed = 1;
    }

out_bufs:
    bench_free(sbuf);
    bench_free(rbuf);
    if (failed) {
        /* A communication failure: the peer may be gone, so do not wait in
         * a barrier or drain; mpiexec reports the exit code and ends the
         * job. */
        return 1;
    }
    rc = bench_teardown(&env);
    return (rc == 0 && total_errs == 0) ? 0 : 1;
}
