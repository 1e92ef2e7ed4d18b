/*
 * Shared code of madrail_lat and madrail_bw.  The benchmarks follow the
 * OSU micro-benchmarks' semantics and output format (so numbers line up
 * with osu_latency / osu_bw runs of other MPI stacks) but are our own code
 * on the public madrail API only: they link against the installed library,
 * whose only exported symbols are madrail_*, so nothing here uses the
 * library's internal helpers.
 */
#include "mdr_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define BENCH_DEFAULT_MIN ((size_t)1)
#define BENCH_DEFAULT_MAX ((size_t)16 << 20)
#define BENCH_DEFAULT_WINDOW 64
#define BENCH_LARGE ((size_t)64 << 10) /* above this, fewer iterations */
#define BENCH_BW_BYTES_PER_SIZE ((size_t)256 << 20)
#define BENCH_MAX_REPORTS 10

static unsigned bench_reports; /* bad-byte reports printed by this process */

static void bench_usage(FILE *out, const char *prog, bench_kind_t kind)
{
    fprintf(out,
            "Usage: mpiexec -n 2 %s [options]\n"
            "%s between two madrail processes (OSU-style).\n"
            "  --min SIZE      smallest message (default 1; k/m/g suffixes)\n"
            "  --max SIZE      largest message (default 16m); sizes double from min\n"
            "  --iters N       timed iterations per size (default: %s)\n"
            "  --warmup N      untimed iterations first (default: %s)\n",
            prog, kind == BENCH_LAT ? "Ping-pong latency" : "Streaming bandwidth",
            kind == BENCH_LAT ? "1000 up to 64 KiB, then 100"
                              : "100 up to 64 KiB, then 3..20 by size",
            kind == BENCH_LAT ? "100 up to 64 KiB, then 10" : "10 up to 64 KiB, then 2");
    if (kind == BENCH_BW)
        fprintf(out, "  --window N      messages in flight per iteration (default %d)\n"
                     "  --bibw          both directions at once\n",
                BENCH_DEFAULT_WINDOW);
    fprintf(out,
            "  --validate      fill every message with a pattern and check every byte\n"
            "                  (exit 1 on any error; timings then include fill and check)\n"
            "  --csv FILE      also write size,value rows to FILE (rank 0)\n"
            "  -h, --help      this help\n"
            "Rails, thresholds and statistics come from MADRAIL_* variables\n"
            "(MADRAIL_RAILS=tcp:lo,tcp:lo, MADRAIL_STATS=1; see madrail_info).\n");
}

int bench_parse_size(const char *text, size_t *size_p)
{
    char *end;
    unsigned long long v, mul = 1;

    if (text == NULL || *text == '\0' || *text == '-')
        return -1;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default:
        return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || (v != 0 && mul > (unsigned long long)SIZE_MAX / v))
        return -1;
    *size_p = (size_t)(v * mul);
    return 0;
}

static int bench_parse_int(const char *text, int min, int *out_p)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > 1000000000L)
        return -1;
    *out_p = (int)v;
    return 0;
}

const char *bench_progname(const char *argv0)
{
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    return slash ? slash + 1 : argv0 ? argv0 : "madrail_bench";
}

int bench_parse_args(int argc, char **argv, bench_kind_t kind, bench_opts_t *opts)
{
    enum { O_MIN = 256, O_MAX, O_ITERS, O_WARMUP, O_WINDOW, O_BIBW, O_VALIDATE, O_CSV };
    static const struct option lopts[] = {
        {"min", required_argument, NULL, O_MIN},
        {"max", required_argument, NULL, O_MAX},
        {"iters", required_argument, NULL, O_ITERS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"window", required_argument, NULL, O_WINDOW},
        {"bibw", no_argument, NULL, O_BIBW},
        {"validate", no_argument, NULL, O_VALIDATE},
        {"csv", required_argument, NULL, O_CSV},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *prog = bench_progname(argv[0]);
    int c;

    memset(opts, 0, sizeof(*opts));
    opts->min_size = BENCH_DEFAULT_MIN;
    opts->max_size = BENCH_DEFAULT_MAX;
    opts->iters = -1;
    opts->warmup = -1;
    opts->window = BENCH_DEFAULT_WINDOW;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        switch (c) {
        case O_MIN:
        case O_MAX:
            if (bench_parse_size(optarg, c == O_MIN ? &opts->min_size : &opts->max_size)) {
                fprintf(stderr, "%s: --%s %s: not a size (e.g. 64, 8k, 16m)\n", prog,
                        c == O_MIN ? "min" : "max", optarg);
                return -1;
            }
            break;
        case O_ITERS:
            if (bench_parse_int(optarg, 1, &opts->iters)) {
                fprintf(stderr, "%s: --iters %s: expected an integer >= 1\n", prog, optarg);
                return -1;
            }
            break;
        case O_WARMUP:
            if (bench_parse_int(optarg, 0, &opts->warmup)) {
                fprintf(stderr, "%s: --warmup %s: expected an integer >= 0\n", prog, optarg);
                return -1;
            }
            break;
        case O_WINDOW:
        case O_BIBW:
            if (kind != BENCH_BW) {
                fprintf(stderr, "%s: --%s applies to the bandwidth test only\n", prog,
                        c == O_WINDOW ? "window" : "bibw");
                return -1;
            }
            if (c == O_BIBW) {
                opts->bibw = 1;
            } else if (bench_parse_int(optarg, 1, &opts->window) || opts->window > 65536) {
                fprintf(stderr, "%s: --window %s: expected an integer in 1..65536\n", prog,
                        optarg);
                return -1;
            }
            break;
        case O_VALIDATE:
            opts->validate = 1;
            break;
        case O_CSV:
            opts->csv = optarg;
            break;
        case 'h':
            bench_usage(stdout, prog, kind);
            return 1;
        default:
            if (optopt != 0 && optopt < 256)
                fprintf(stderr, "%s: unknown option -%c\n", prog, optopt);
            else
                fprintf(stderr, "%s: unknown or incomplete option %s\n", prog,
                        argv[optind - 1]);
            bench_usage(stderr, prog, kind);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument %s\n", prog, argv[optind]);
        return -1;
    }
    if (opts->min_size > opts->max_size) {
        fprintf(stderr, "%s: --min %zu is larger than --max %zu\n", prog, opts->min_size,
                opts->max_size);
        return -1;
    }
    if (kind == BENCH_LAT && opts->max_size > ((size_t)1 << 34)) {
        fprintf(stderr, "%s: --max %zu is unreasonably large\n", prog, opts->max_size);
        return -1;
    }
    return 0;
}

size_t bench_size_first(const bench_opts_t *opts)
{
    return opts->min_size;
}

int bench_size_next(const bench_opts_t *opts, size_t *size_p)
{
    size_t s = *size_p;
    size_t next = s == 0 ? 1 : 2 * s;

    if (next <= s || next > opts->max_size)
        return 0;
    *size_p = next;
    return 1;
}

int bench_iters(const bench_opts_t *opts, bench_kind_t kind, size_t size)
{
    size_t per_iter, n;

    if (opts->iters > 0)
        return opts->iters;
    if (kind == BENCH_LAT)
        return size <= BENCH_LARGE ? 1000 : 100;
    if (size <= BENCH_LARGE)
        return 100;
    /* Keep each size near BENCH_BW_BYTES_PER_SIZE: 3..20 iterations. */
    per_iter = size * (size_t)opts->window * (opts->bibw ? 2 : 1);
    n = BENCH_BW_BYTES_PER_SIZE / (per_iter ? per_iter : 1);
    return n < 3 ? 3 : n > 20 ? 20 : (int)n;
}

int bench_warmup(const bench_opts_t *opts, bench_kind_t kind, size_t size)
{
    if (opts->warmup >= 0)
        return opts->warmup;
    if (kind == BENCH_LAT)
        return size <= BENCH_LARGE ? 100 : 10;
    return size <= BENCH_LARGE ? 10 : 2;
}

int bench_fail(const bench_env_t *env, const char *what, madrail_status_t status)
{
    fprintf(stderr, "%s: rank %d: %s failed: %s (%d)\n", env->prog, env->rank, what,
            madrail_status_str(status), (int)status);
    return -1;
}

int bench_setup(bench_env_t *env, const char *prog)
{
    madrail_status_t status;

    memset(env, 0, sizeof(*env));
    env->prog = prog;
    env->rank = -1;
    status = madrail_context_init(NULL, &env->ctx);
    if (status != MADRAIL_OK) {
        fprintf(stderr, "%s: madrail_context_init failed: %s (check MADRAIL_RAILS)\n", prog,
                madrail_status_str(status));
        return -1;
    }
    status = madrail_pmi_wireup(env->ctx, &env->job);
    if (status != MADRAIL_OK) {
        fprintf(stderr, "%s: madrail_pmi_wireup failed: %s; run it as: mpiexec -n 2 %s\n",
                prog, madrail_status_str(status), prog);
        goto err_ctx;
    }
    env->job_up = 1;
    env->rank = env->job.rank;
    if (env->job.size != 2) {
        if (env->rank == 0)
            fprintf(stderr, "%s: needs exactly 2 processes, got %d: run mpiexec -n 2 %s\n",
                    prog, env->job.size, prog);
        goto err_job;
    }
    env->peer = env->job.peers[1 - env->rank];
    return 0;

err_job:
    madrail_pmi_finalize(&env->job);
    env->job_up = 0;
err_ctx:
    madrail_context_finalize(env->ctx);
    env->ctx = NULL;
    return -1;
}

int bench_teardown(bench_env_t *env)
{
    int rc = 0;
    madrail_status_t status;

    /* Both ranks are done communicating before either closes its rails. */
    status = madrail_pmi_barrier();
    if (status != MADRAIL_OK)
        rc = bench_fail(env, "madrail_pmi_barrier", status);
    status = madrail_context_finalize(env->ctx);
    if (status != MADRAIL_OK)
        rc = bench_fail(env, "madrail_context_finalize", status);
    env->ctx = NULL;
    status = madrail_pmi_finalize(&env->job);
    if (status != MADRAIL_OK)
        rc = bench_fail(env, "madrail_pmi_finalize", status);
    env->job_up = 0;
    return rc;
}

/* splitmix64 finalizer: cheap and every input bit reaches every output bit */
static inline uint64_t bench_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t bench_seed(size_t size, uint64_t iter, uint64_t index, int dir)
{
    return bench_mix((uint64_t)size * 0x9e3779b97f4a7c15ull ^ bench_mix(iter) ^
                     (index << 20) ^ ((uint64_t)dir << 62));
}

/* Pattern word w of a message: depends on seed and word offset, so a
 * shifted, duplicated or stale block is detected. */
static inline uint64_t bench_word(uint64_t seed, uint64_t w)
{
    uint64_t x = seed + w * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29) ^ (w << 3);
}

void bench_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    size_t w, nw = len / 8, i;

    for (w = 0; w < nw; w++) {
        uint64_t v = bench_word(seed, w);
        memcpy(p + 8 * w, &v, 8);
    }
    if (len % 8) {
        uint64_t v = bench_word(seed, nw);
        for (i = 0; i < len % 8; i++)
            p[8 * nw + i] = (uint8_t)(v >> (8 * i));
    }
}

size_t bench_check(const void *buf, size_t len, uint64_t seed, const char *what)
{
    const uint8_t *p = buf;
    size_t w, nw = (len + 7) / 8, i, bad = 0;

    for (w = 0; w < nw; w++) {
        uint64_t v = bench_word(seed, w);
        size_t n = (w == nw - 1 && len % 8) ? len % 8 : 8;
        uint64_t got = 0;
        if (n == 8) {
            memcpy(&got, p + 8 * w, 8);
            if (got == v)
                continue;
        }
        for (i = 0; i < n; i++) {
            uint8_t exp = (uint8_t)(v >> (8 * i));
            if (p[8 * w + i] != exp) {
                if (bad == 0 && bench_reports < BENCH_MAX_REPORTS) {
                    bench_reports++;
                    fprintf(stderr,
                            "VALIDATION ERROR: %s: %zu-byte message, first bad byte at "
                            "offset %zu: got 0x%02x, expected 0x%02x\n",
                            what, len, 8 * w + i, p[8 * w + i], exp);
                }
                bad++;
            }
        }
    }
    if (bad != 0 && bench_reports <= BENCH_MAX_REPORTS)
        fprintf(stderr, "VALIDATION ERROR: %s: %zu of %zu bytes wrong\n", what, bad, len);
    return bad;
}

void *bench_alloc(size_t len)
{
    void *p = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    if (posix_memalign(&p, page, len ? len : 1) != 0)
        return NULL;
    memset(p, 0, len ? len : 1);
    return p;
}

void bench_free(void *buf)
{
    free(buf);
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_out_open(bench_out_t *out, const bench_opts_t *opts, const bench_env_t *env,
                   const char *title, const char *column, const char *csv_column)
{
    int i, n;

    out->csv = NULL;
    if (env->rank != 0)
        return 0;
    if (opts->csv != NULL) {
        out->csv = fopen(opts->csv, "w");
        if (out->csv == NULL) {
            fprintf(stderr, "%s: cannot write %s: %s\n", env->prog, opts->csv,
                    strerror(errno));
            return -1;
        }
        fprintf(out->csv, "size,%s\n", csv_column);
    }
    printf("# madrail %s\n", title);
    n = madrail_rail_count(env->ctx);
    printf("# rails (%d):", n);
    for (i = 0; i < n; i++) {
        madrail_rail_info_t info;
        if (madrail_rail_info(env->ctx, i, &info) == MADRAIL_OK)
            printf(" %s", info.name);
    }
    printf("%s\n", opts->validate ? "  (validation on)" : "");
    /* "# Size" + column right-aligned at 28, as OSU prints it */
    printf("# Size%*s\n", 22, column);
    fflush(stdout);
    return 0;
}

void bench_out_row(bench_out_t *out, size_t size, double value)
{
    printf("%-10zu%18.2f\n", size, value);
    fflush(stdout);
    if (out->csv != NULL)
        fprintf(out->csv, "%zu,%.3f\n", size, value);
}

void bench_out_close(bench_out_t *out)
{
    if (out->csv != NULL) {
        fclose(out->csv);
        out->csv = NULL;
    }
}

int bench_report_validation(bench_env_t *env, uint64_t local, uint64_t *total_p)
{
    if (bench_sum_errors(env, local, total_p) != 0)
        return -1;
    if (env->rank == 0)
        printf("# validation: %llu bad bytes%s\n", (unsigned long long)*total_p,
               *total_p ? " -- FAILED" : ", all messages correct");
    return 0;
}

int bench_sum_errors(bench_env_t *env, uint64_t local, uint64_t *total_p)
{
    uint64_t remote = 0;
    madrail_info_t info;
    madrail_request_t rreq = NULL;
    madrail_status_t status;

    status = madrail_irecv(env->ctx, env->peer, &remote, sizeof(remote), BENCH_TAG_ERRS,
                           MADRAIL_TAG_EXACT, &rreq);
    if (status != MADRAIL_OK)
        return bench_fail(env, "madrail_irecv(error count)", status);
    status = madrail_send(env->ctx, env->peer, &local, sizeof(local), BENCH_TAG_ERRS, 0);
    if (status != MADRAIL_OK) {
        bench_fail(env, "madrail_send(error count)", status);
        madrail_cancel(env->ctx, rreq);
        madrail_wait(&rreq, NULL);
        return -1;
    }
    status = madrail_wait(&rreq, &info);
    if (status != MADRAIL_OK || info.length != sizeof(remote))
        return bench_fail(env, "madrail_wait(error count)",
                          status != MADRAIL_OK ? status : MADRAIL_ERR_TRUNCATE);
    *total_p = local + remote;
    return 0;
}
