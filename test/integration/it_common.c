/*
 * Helpers shared by the integration tests.  This file is #included by each
 * it_*.c (one translation unit per test program, nothing to link and no
 * private header), so every helper is static and marked unused.  The tests
 * use the public API only: they link the installed library, which exports
 * nothing but madrail_*.
 *
 * Conventions: a check prints "rank R: ok - ..." or "rank R: FAIL - ...";
 * bulk checks (thousands of messages) print only failures and one summary.
 * A communication error ends the process at once with exit 1 (mpiexec then
 * ends the job); the test's verdict is the exit status: 0 pass, 1 fail.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "madrail.h"

#define IT_UNUSED __attribute__((unused))

typedef struct it_env {
    const char *name;
    madrail_context_t ctx;
    madrail_job_t job;
    int rank, size;
    unsigned checks, failures;
    unsigned quiet_fail_reports; /* failures printed by it_expect */
} it_env_t;

IT_UNUSED static double it_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

IT_UNUSED static void it_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A check that is always reported. */
IT_UNUSED __attribute__((format(printf, 3, 4))) static int it_check(it_env_t *e, int ok,
                                                                   const char *fmt, ...)
{
    va_list ap;

    e->checks++;
    if (!ok)
        e->failures++;
    printf("rank %d: %s - ", e->rank, ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return ok;
}

/* A bulk check: reported only when it fails (at most 20 reports). */
IT_UNUSED __attribute__((format(printf, 3, 4))) static int it_expect(it_env_t *e, int ok,
                                                                    const char *fmt, ...)
{
    va_list ap;

    e->checks++;
    if (ok)
        return 1;
    e->failures++;
    if (e->quiet_fail_reports++ < 20) {
        printf("rank %d: FAIL - ", e->rank);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

/* Fatal: a call that must not fail did.  No finalize (the peer may be
 * stuck); mpiexec sees exit 1 and ends the job. */
IT_UNUSED __attribute__((noreturn)) static void it_die(it_env_t *e, const char *what,
                                                      madrail_status_t status)
{
    printf("rank %d: FAIL - %s: %s (%d)\n", e->rank, what, madrail_status_str(status),
           (int)status);
    fflush(stdout);
    exit(1);
}

#define IT_CALL(e, call)                                                                     \
    do {                                                                                     \
        madrail_status_t it_st_ = (call);                                                   \
        if (it_st_ != MADRAIL_OK)                                                            \
            it_die((e), #call, it_st_);                                                      \
    } while (0)

/*
 * Open a context (with optional overrides), join the PMI job and check the
 * number of ranks.  Returns 0 to go on, or the exit code (1 fail, 77 skip).
 */
IT_UNUSED static int it_setup(it_env_t *e, const char *name, int min_ranks,
                              const char *const *overrides)
{
    madrail_context_params_t params = {.overrides = overrides};
    madrail_status_t st;

    memset(e, 0, sizeof(*e));
    e->name = name;
    e->rank = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    st = madrail_context_init(&params, &e->ctx);
    if (st != MADRAIL_OK) {
        printf("%s: FAIL - madrail_context_init: %s\n", name, madrail_status_str(st));
        return 1;
    }
    st = madrail_pmi_wireup(e->ctx, &e->job);
    if (st != MADRAIL_OK) {
        printf("%s: FAIL - madrail_pmi_wireup: %s (run under mpiexec)\n", name,
               madrail_status_str(st));
        madrail_context_finalize(e->ctx);
        return 1;
    }
    e->rank = e->job.rank;
    e->size = e->job.size;
    if (e->size < min_ranks) {
        if (e->rank == 0)
            printf("%s: FAIL - needs at least %d ranks, got %d\n", name, min_ranks, e->size);
        madrail_pmi_finalize(&e->job);
        madrail_context_finalize(e->ctx);
        return 1;
    }
    if (e->rank == 0) {
        int i, n = madrail_rail_count(e->ctx);
        printf("%s: %d ranks, %d rail(s):", name, e->size, n);
        for (i = 0; i < n; i++) {
            madrail_rail_info_t ri;
            if (madrail_rail_info(e->ctx, i, &ri) == MADRAIL_OK)
                printf(" %s", ri.name);
        }
        printf("\n");
    }
    return 0;
}

/* Barrier, finalize, summary.  Returns the exit code. */
IT_UNUSED static int it_finish(it_env_t *e)
{
    madrail_status_t st;

    st = madrail_pmi_barrier();
    it_check(e, st == MADRAIL_OK, "final barrier (%s)", madrail_status_str(st));
    st = madrail_context_finalize(e->ctx);
    it_check(e, st == MADRAIL_OK, "madrail_context_finalize (%s)", madrail_status_str(st));
    e->ctx = NULL;
    st = madrail_pmi_finalize(&e->job);
    it_check(e, st == MADRAIL_OK, "madrail_pmi_finalize (%s)", madrail_status_str(st));
    printf("rank %d: %s: %u checks, %u failed -> %s\n", e->rank, e->name, e->checks,
           e->failures, e->failures ? "FAIL" : "PASS");
    return e->failures ? 1 : 0;
}

IT_UNUSED static uint64_t it_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

IT_UNUSED static uint64_t it_seed(uint64_t a, uint64_t b, uint64_t c)
{
    return it_mix(it_mix(a + 0x1234567ull) ^ it_mix(b + 0x89abcdefull) ^ (c << 17));
}

static inline uint64_t it_word(uint64_t seed, uint64_t w)
{
    uint64_t x = seed + w * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29) ^ (w << 3);
}

/* Fill len bytes with a pattern of seed (word- and offset-dependent). */
IT_UNUSED static void it_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    size_t w, nw = len / 8, i;

    for (w = 0; w < nw; w++) {
        uint64_t v = it_word(seed, w);
        memcpy(p + 8 * w, &v, 8);
    }
    if (len % 8) {
        uint64_t v = it_word(seed, nw);
        for (i = 0; i < len % 8; i++)
            p[8 * nw + i] = (uint8_t)(v >> (8 * i));
    }
}

/* Number of bytes that differ from the pattern; *first_p = first bad offset. */
IT_UNUSED static size_t it_verify(const void *buf, size_t len, uint64_t seed, size_t *first_p)
{
    const uint8_t *p = buf;
    size_t w, nw = (len + 7) / 8, i, bad = 0;

    *first_p = (size_t)-1;
    for (w = 0; w < nw; w++) {
        uint64_t v = it_word(seed, w);
        size_t n = (w == nw - 1 && len % 8) ? len % 8 : 8;
        if (n == 8) {
            uint64_t got;
            memcpy(&got, p + 8 * w, 8);
            if (got == v)
                continue;
        }
        for (i = 0; i < n; i++)
            if (p[8 * w + i] != (uint8_t)(v >> (8 * i))) {
                if (bad++ == 0)
                    *first_p = 8 * w + i;
            }
    }
    return bad;
}

/* FNV-1a 64 checksum. */
IT_UNUSED static uint64_t it_checksum(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Page-aligned buffer; dies on ENOMEM. */
IT_UNUSED static void *it_alloc(it_env_t *e, size_t len)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, len ? len : 1) != 0) {
        printf("rank %d: FAIL - cannot allocate %zu bytes\n", e->rank, len);
        exit(1);
    }
    memset(p, 0, len ? len : 1);
    return p;
}

/* Deterministic PRNG (xorshift64*) for shuffles and sizes. */
IT_UNUSED static uint64_t it_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

IT_UNUSED static void it_shuffle(int *a, int n, uint64_t *state)
{
    int i;
    for (i = n - 1; i > 0; i--) {
        int j = (int)(it_rand(state) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
