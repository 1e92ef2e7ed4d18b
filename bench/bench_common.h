/*
 * Shared pieces of the madrail benchmarks (madrail_lat, madrail_bw):
 * option parsing, the size sweep, iteration defaults, the validation
 * pattern, OSU-style output and CSV, and PMI launch/teardown.
 */
#ifndef MDR_BENCH_COMMON_H
#define MDR_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "madrail.h"

typedef struct bench_opts {
    size_t min_size, max_size;
    int iters;      /* < 0: per-size default */
    int warmup;     /* < 0: per-size default */
    int window;     /* bw only */
    int bibw;       /* bw only */
    int validate;
    const char *csv;
} bench_opts_t;

typedef enum { BENCH_LAT = 0, BENCH_BW = 1 } bench_kind_t;

typedef struct bench_env {
    const char *prog;
    madrail_context_t ctx;
    madrail_job_t job;
    int job_up;         /* pmi wireup succeeded */
    int rank;
    madrail_peer_t peer; /* the other rank */
} bench_env_t;

/* The program name without its directory (for messages). */
const char *bench_progname(const char *argv0);

/* Parse the command line.  Returns 0 to run, 1 when help was printed
 * (exit 0), -1 on a bad option (a message was printed; exit 1). */
int bench_parse_args(int argc, char **argv, bench_kind_t kind, bench_opts_t *opts);

/* Parse "64", "8k", "16m", "1g" (powers of 1024); 0 on success. */
int bench_parse_size(const char *text, size_t *size_p);

/* First size of the sweep, and the next one after size (0 when done). */
size_t bench_size_first(const bench_opts_t *opts);
int bench_size_next(const bench_opts_t *opts, size_t *size_p);

/* Iterations and warm-up iterations for a message size. */
int bench_iters(const bench_opts_t *opts, bench_kind_t kind, size_t size);
int bench_warmup(const bench_opts_t *opts, bench_kind_t kind, size_t size);

/* Context init + PMI wireup, exactly 2 ranks.  0 on success; on failure
 * prints why and returns -1 (everything already released). */
int bench_setup(bench_env_t *env, const char *prog);
/* Barrier, context finalize (prints stats if MADRAIL_STATS=1), PMI
 * finalize.  Returns 0 on success, -1 if any step failed. */
int bench_teardown(bench_env_t *env);

/* Validation pattern: bytes depend on the message size, a sequence number
 * (iteration, message index, direction mixed by the caller) and the byte
 * offset. */
uint64_t bench_seed(size_t size, uint64_t iter, uint64_t index, int dir);
void bench_fill(void *buf, size_t len, uint64_t seed);
/* Count bytes that differ from the pattern; prints the first few bad
 * offsets (limited per process).  Returns the number of bad bytes. */
size_t bench_check(const void *buf, size_t len, uint64_t seed, const char *what);

/* Page-aligned, zeroed buffer (never NULL for len 0); NULL on ENOMEM. */
void *bench_alloc(size_t len);
void bench_free(void *buf);

double bench_now(void);

/* Output: header lines and one row per size, on rank 0, plus CSV. */
typedef struct bench_out {
    FILE *csv;
} bench_out_t;
int bench_out_open(bench_out_t *out, const bench_opts_t *opts, const bench_env_t *env,
                   const char *title, const char *column, const char *csv_column);
void bench_out_row(bench_out_t *out, size_t size, double value);
void bench_out_close(bench_out_t *out);

/* Sum an error count over both ranks (a small message exchange on a
 * reserved tag); both ranks learn the total.  -1 on a communication
 * failure. */
int bench_sum_errors(bench_env_t *env, uint64_t local, uint64_t *total_p);
/* bench_sum_errors, then rank 0 prints the "# validation: ..." line. */
int bench_report_validation(bench_env_t *env, uint64_t local, uint64_t *total_p);

/* Report a failed madrail call and return -1. */
int bench_fail(const bench_env_t *env, const char *what, madrail_status_t status);

#define BENCH_TAG_DATA  ((uint64_t)0x6d64720000000001ull)
#define BENCH_TAG_ACK   ((uint64_t)0x6d64720000000002ull)
#define BENCH_TAG_ERRS  ((uint64_t)0x6d64720000000003ull)

#endif
