/*
 * Helpers shared by the MPI test programs in test/mpi.  Not a test itself:
 * each mpi_*.c #includes this file (one translation unit per program,
 * nothing extra to link, no private header), so every helper is static and
 * marked unused, and every program still builds with a plain
 * `mpicc mpi_x.c -o mpi_x`.  Only MPI-3 and POSIX are used: the programs
 * must run unchanged on any MPICH (ch4:madrail, Debian's ch4:ucx), which is
 * how the tests themselves are validated.
 *
 * Conventions (MPICH test-suite style, plus TAP-like check lines):
 *   - a check prints "ok - [rR] ..." or "FAIL - [rR] ..."; bulk checks
 *     (hundreds of sizes) print one ok line per group and every failure
 *     (up to a cap);
 *   - at the end rank 0 prints " No Errors" when no rank saw a failure,
 *     else " Found N errors"; the exit status is 0 or 1, 77 to skip;
 *   - MPI errors are returned (MPI_ERRORS_RETURN), reported with the call,
 *     file and line, and end the job with MPI_Abort;
 *   - a per-rank watchdog (alarm, MPIT_TIMEOUT seconds, default 150) prints
 *     the phase the rank was in when it hung and exits 1, so a hang in the
 *     netmod names the step that hung instead of just timing out.
 */
#if defined(__has_include)
#if __has_include("mdr_config.h")
#include "mdr_config.h"
#endif
#endif

#include <mpi.h>

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MPIT_UNUSED __attribute__((unused))
#define MPIT_KIB ((size_t)1024)
#define MPIT_MIB ((size_t)1024 * 1024)
#define MPIT_MAX_FAIL_LINES 40

static const char *mpit_name = "mpit";
static int mpit_rank = -1, mpit_size = 0;
static long mpit_checks, mpit_fails, mpit_fail_lines;
static char mpit_phase_buf[256] = "init";

#define MPIT_CALL(call)                                                                  \
    do {                                                                                 \
        int mpit_rc_ = (call);                                                           \
        if (mpit_rc_ != MPI_SUCCESS)                                                     \
            mpit_mpi_error(#call, mpit_rc_, __FILE__, __LINE__);                         \
    } while (0)

MPIT_UNUSED static void mpit_mpi_error(const char *call, int rc, const char *file, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    msg[0] = '\0';
    MPI_Error_string(rc, msg, &len);
    printf("FAIL - [r%d] %s: %s returned %d (%s) at %s:%d during '%s'\n", mpit_rank, mpit_name,
           call, rc, msg, file, line, mpit_phase_buf);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* What this rank is doing now; the watchdog prints it. */
MPIT_UNUSED __attribute__((format(printf, 1, 2))) static void mpit_phase(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mpit_phase_buf, sizeof(mpit_phase_buf), fmt, ap);
    va_end(ap);
}

static void mpit_watchdog(int sig)
{
    char msg[512];
    int n;

    (void)sig;
    n = snprintf(msg, sizeof(msg), "FAIL - [r%d] %s: watchdog: still running, stuck in '%s'\n",
                 mpit_rank, mpit_name, mpit_phase_buf);
    if (n > 0)
        (void)!write(STDOUT_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
    _exit(1);
}

static void mpit_arm_watchdog(void)
{
    const char *s = getenv("MPIT_TIMEOUT");
    long secs = s ? strtol(s, NULL, 10) : 150;
    struct sigaction sa;

    if (secs <= 0)
        return;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = mpit_watchdog;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)secs);
}

MPIT_UNUSED static void mpit_setup(const char *name)
{
    mpit_name = name;
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Comm_rank(MPI_COMM_WORLD, &mpit_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpit_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpit_arm_watchdog();
}

MPIT_UNUSED static void mpit_init(int *argc, char ***argv, const char *name)
{
    MPI_Init(argc, argv);
    mpit_setup(name);
}

/* Always printed. Returns ok. */
MPIT_UNUSED __attribute__((format(printf, 2, 3))) static int mpit_check(int ok, const char *fmt,
                                                                       ...)
{
    va_list ap;

    mpit_checks++;
    if (!ok)
        mpit_fails++;
    printf("%s - [r%d] ", ok ? "ok" : "FAIL", mpit_rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    return ok;
}

/* Collective over MPI_COMM_WORLD: `bad` is this rank's count of failed
 * sub-checks; rank 0 prints one line for all ranks (fewer interleaved lines
 * from mpiexec), and the failure is counted once, on rank 0.  Returns the
 * total. */
MPIT_UNUSED __attribute__((format(printf, 2, 3))) static long mpit_check_all(long bad,
                                                                           const char *fmt, ...)
{
    long total = 0;
    va_list ap;

    MPIT_CALL(MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (mpit_rank == 0) {
        mpit_checks++;
        if (total)
            mpit_fails++;
        printf("%s - ", total ? "FAIL" : "ok");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        if (total)
            printf(" [%ld failures over all ranks]", total);
        putchar('\n');
    }
    return total;
}

/* Printed only on failure (bulk checks), at most MPIT_MAX_FAIL_LINES lines.
 * Returns ok. */
MPIT_UNUSED __attribute__((format(printf, 2, 3))) static int mpit_expect(int ok, const char *fmt,
                                                                        ...)
{
    va_list ap;

    mpit_checks++;
    if (ok)
        return 1;
    mpit_fails++;
    if (++mpit_fail_lines > MPIT_MAX_FAIL_LINES) {
        if (mpit_fail_lines == MPIT_MAX_FAIL_LINES + 1)
            printf("FAIL - [r%d] (further failure lines suppressed)\n", mpit_rank);
        return 0;
    }
    printf("FAIL - [r%d] ", mpit_rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    return 0;
}

/* Ends the program: every rank contributes its failure count, rank 0 prints
 * the MPICH verdict line.  Returns the exit status for main(). */
MPIT_UNUSED static int mpit_finish(void)
{
    long total = 0;

    mpit_phase("finish (allreduce of failure counts)");
    MPIT_CALL(MPI_Allreduce(&mpit_fails, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (mpit_rank == 0) {
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %ld errors\n", total);
    }
    fflush(stdout);
    mpit_phase("MPI_Finalize");
    MPI_Finalize();
    alarm(0);
    return total == 0 ? 0 : 1;
}

/* Skip the whole program (automake's 77): every rank must call it. */
MPIT_UNUSED static void mpit_skip(const char *why)
{
    if (mpit_rank <= 0)
        printf("SKIP - %s: %s\n", mpit_name, why);
    fflush(stdout);
    MPI_Finalize();
    exit(77);
}

/* The test needs at least n ranks: with fewer, every rank skips. */
MPIT_UNUSED static void mpit_need_ranks(int n)
{
    if (mpit_size < n) {
        char why[128];
        snprintf(why, sizeof(why), "needs at least %d ranks, run with %d", n, mpit_size);
        mpit_skip(why);
    }
}

MPIT_UNUSED static MPI_Status *mpit_malloc_sts(int n)
{
    MPI_Status *p = calloc((size_t)(n > 0 ? n : 1), sizeof(MPI_Status));
    if (!p) {
        printf("FAIL - [r%d] %s: out of memory (%d statuses)\n", mpit_rank, mpit_name, n);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
    return p;
}

/* MPI_Waitall with statuses that are checked for errors only.  (Passing
 * MPI_STATUSES_IGNORE, MPICH's (MPI_Status *)1, trips gcc 12's
 * -Wstringop-overflow on MPICH's prototype.) */
MPIT_UNUSED static void mpit_waitall(int n, MPI_Request *reqs)
{
    MPI_Status *sts = mpit_malloc_sts(n);

    MPIT_CALL(MPI_Waitall(n, reqs, sts));
    free(sts);
}

/* ------------------------------------------------------------ data patterns */

static uint64_t mpit_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A seed from a few small numbers (size, direction, iteration...). */
MPIT_UNUSED static uint64_t mpit_seed(uint64_t a, uint64_t b, uint64_t c)
{
    return mpit_mix(a * 0x100000001b3ull ^ mpit_mix(b + 0x51ed27 * c));
}

/* Byte i of the pattern: depends on seed and i only, so any piece of a
 * message can be checked on its own (word-wise for speed). */
static uint8_t mpit_byte(uint64_t seed, size_t i)
{
    uint64_t w = mpit_mix(seed ^ (uint64_t)(i / 8) * 0xd6e8feb86659fd93ull);
    return (uint8_t)(w >> (8 * (i % 8)));
}

MPIT_UNUSED static void mpit_fill(void *buf, size_t n, uint64_t seed)
{
    uint8_t *p = buf;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t w = mpit_mix(seed ^ (uint64_t)(i / 8) * 0xd6e8feb86659fd93ull);
        memcpy(p + i, &w, 8);
    }
    for (; i < n; i++)
        p[i] = mpit_byte(seed, i);
}

/* Number of bytes differing from the pattern; *first_p = first bad offset
 * (or n). */
MPIT_UNUSED static size_t mpit_verify(const void *buf, size_t n, uint64_t seed, size_t *first_p)
{
    const uint8_t *p = buf;
    size_t i = 0, bad = 0, first = n;

    for (; i + 8 <= n; i += 8) {
        uint64_t w = mpit_mix(seed ^ (uint64_t)(i / 8) * 0xd6e8feb86659fd93ull), got;
        memcpy(&got, p + i, 8);
        if (got != w) {
            size_t k;
            for (k = 0; k < 8; k++)
                if (p[i + k] != (uint8_t)(w >> (8 * k))) {
                    if (first == n)
                        first = i + k;
                    bad++;
                }
        }
    }
    for (; i < n; i++)
        if (p[i] != mpit_byte(seed, i)) {
            if (first == n)
                first = i;
            bad++;
        }
    if (first_p)
        *first_p = first;
    return bad;
}

/* FNV-1a, 64 bit: the checksum a sender ships with a message. */
MPIT_UNUSED static uint64_t mpit_checksum(const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Bytes in [0,n) that are not `val` (canary checks). */
MPIT_UNUSED static size_t mpit_count_not(const void *buf, size_t n, uint8_t val)
{
    const uint8_t *p = buf;
    size_t i, bad = 0;

    for (i = 0; i < n; i++)
        bad += p[i] != val;
    return bad;
}

MPIT_UNUSED static void *mpit_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL - [r%d] %s: out of memory (%zu bytes)\n", mpit_rank, mpit_name, n);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
    return p;
}

MPIT_UNUSED static void mpit_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}
