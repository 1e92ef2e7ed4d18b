/*
 * Rail adaptation (health.c): the estimator with synthetic samples, then
 * whole transfers on loop rails with bandwidth caps (two contexts in one
 * process, progressed from this thread).  The transfer tests assert the
 * share of put bytes each rail carried in a window of messages, never a
 * time: the caps set how fast each rail drains, and adaptation must find
 * their ratio whatever the rails' profiles claim.  A cap changes in the
 * middle of a run through the loop driver's test hook.
 *
 * Usage: test_adapt [scenario ...] (no argument: all); MDR_ADAPT_TRACE=1
 * prints the share of every message (what the EWMA constants were chosen
 * from, docs/configuration.md).
 */
#include "mdr_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "rails/loop/loop.h"
#include "util/clock.h"
#include "unit_check.h"

#define MIB (1024u * 1024u)

static int trace;

/* ---------------- estimator pieces ---------------- */

static int near(double a, double b, double tol)
{
    return fabs(a - b) <= tol;
}

static void test_busy(void)
{
    mdr_health_busy_t b;
    double mbs = 0;
    int got;

    /* two overlapping puts: the first completion starts the clock */
    memset(&b, 0, sizeof(b));
    mdr_health_busy_issue(&b, 0);
    mdr_health_busy_issue(&b, 100);
    got = mdr_health_busy_done(&b, 1000, 1000, 1, 0, &mbs);
    check(!got && b.acc_bytes == 0,
          "busy: first of two overlapping puts leads the period: no sample, no bytes (%d)", got);
    got = mdr_health_busy_done(&b, 2000, 1000, 1, 0, &mbs);
    check(got && near(mbs, 1000.0, 1e-9) && b.inflight == 0,
          "busy: second put counts only the time after the first completion: %.1f MB/s", mbs);

    /* a latency before the first completion does not depend on how many
     * puts the period holds, so it must not make a long period read
     * faster than a short one (the split would drift towards the rail
     * with the larger share): 1000 B puts at 1000 MB/s (1000 ns each)
     * behind 20000 ns of latency, periods of 2 and of 8 puts */
    {
        static const int lens[2] = {2, 8};
        double rate[2];
        uint64_t t0 = 0;
        int k, i;

        for (k = 0; k < 2; k++) {
            memset(&b, 0, sizeof(b));
            rate[k] = 0;
            for (i = 0; i < lens[k]; i++)
                mdr_health_busy_issue(&b, t0);
            for (i = 0; i < lens[k]; i++)
                if (mdr_health_busy_done(&b, t0 + 20000 + (uint64_t)(i + 1) * 1000, 1000, 1, 0,
                                         &mbs))
                    rate[k] = mbs;
            t0 += 100000;
        }
        check(near(rate[0], 1000.0, 1e-9) && near(rate[1], 1000.0, 1e-9),
              "busy: 2 and 8 puts behind the same latency read the rail's speed: %.1f and %.1f "
              "MB/s (want 1000 both)",
              rate[0], rate[1]);
    }

    /* idle time between two puts is not counted */
    memset(&b, 0, sizeof(b));
    mdr_health_busy_issue(&b, 0);
    got = mdr_health_busy_done(&b, 1000, 1000, 1, 1500, &mbs);
    check(!got, "busy: 1000 ns of busy time is below a 1500 ns sample: no sample yet");
    mdr_health_busy_issue(&b, 50000);
    got = mdr_health_busy_done(&b, 51000, 1000, 1, 1500, &mbs);
    check(got && near(mbs, 1000.0, 1e-9),
          "busy: 2000 bytes over 2000 busy ns in a 51000 ns span = %.1f MB/s (want 1000)", mbs);

    /* completions reported in one burst gather into the next sample */
    memset(&b, 0, sizeof(b));
    mdr_health_busy_issue(&b, 0);
    mdr_health_busy_issue(&b, 0);
    mdr_health_busy_issue(&b, 0);
    got = mdr_health_busy_done(&b, 3000, 1000, 1, 1000, &mbs);
    check(!got, "busy: first of a burst leads: no sample");
    got = mdr_health_busy_done(&b, 3000, 1000, 1, 1000, &mbs);
    check(!got, "busy: a completion 0 ns after the last one gives no sample of its own");
    got = mdr_health_busy_done(&b, 4000, 1000, 1, 1000, &mbs);
    check(got && near(mbs, 2000.0, 1e-9), "busy: burst gathered: 2000 bytes / 1000 ns = %.1f",
          mbs);

    /* a failed put drops the partial sample and counts no bytes */
    memset(&b, 0, sizeof(b));
    mdr_health_busy_issue(&b, 0);
    mdr_health_busy_issue(&b, 0);
    got = mdr_health_busy_done(&b, 500, 1000, 0, 1000, &mbs);
    check(!got && b.acc_bytes == 0 && b.acc_ns == 0 && b.inflight == 1,
          "busy: failed put: no sample, accumulators cleared");
    got = mdr_health_busy_done(&b, 1500, 1000, 1, 1000, &mbs);
    check(got && near(mbs, 1000.0, 1e-9), "busy: after a failure: %.1f MB/s", mbs);

    /* reset forgets what is in flight; a stray completion is ignored */
    memset(&b, 0, sizeof(b));
    mdr_health_busy_issue(&b, 0);
    mdr_health_busy_reset(&b);
    check(b.inflight == 0 && b.gen == 1, "busy: reset clears in-flight puts, bumps generation");
    got = mdr_health_busy_done(&b, 100, 1000, 1, 0, &mbs);
    check(!got && b.inflight == 0, "busy: completion with nothing in flight is ignored");
}

static void test_est(void)
{
    mdr_health_est_t e;
    double lo, hi, v, want;
    int i;

    mdr_health_clamp_range(100.0, &lo, &hi);
    check(near(lo, 100.0 / 1024, 1e-12) && near(hi, 6400.0, 1e-9),
          "clamp range of a 100 MB/s profile: %.4f..%.0f", lo, hi);
    mdr_health_clamp_range(0.0, &lo, &hi);
    check(near(hi, 64000.0, 1e-6), "no profile: 1000 MB/s assumed (hi %.0f)", hi);

    memset(&e, 0, sizeof(e));
    mdr_health_est_add(&e, 1e12, 100.0, 0.25);
    check(near(e.mbs, 6400.0, 1e-9), "est: a huge sample is clamped to 64x profile: %.1f",
          e.mbs);
    memset(&e, 0, sizeof(e));
    mdr_health_est_add(&e, 0.0, 100.0, 0.25);
    check(near(e.mbs, 100.0 / 1024, 1e-12), "est: a zero sample is clamped to profile/1024");
    memset(&e, 0, sizeof(e));
    mdr_health_est_add(&e, NAN, 100.0, 0.25);
    check(near(e.mbs, 100.0 / 1024, 1e-12), "est: a NaN sample is clamped to the floor");

    /* steady samples: the estimate is the value */
    memset(&e, 0, sizeof(e));
    for (i = 0; i < 10; i++)
        mdr_health_est_add(&e, 50.0, 100.0, 0.25);
    check(near(e.mbs, 50.0, 1e-9) && e.n == 10, "est: 10 samples of 50 give %.3f", e.mbs);
    /* one outlier either way moves nothing */
    v = mdr_health_est_add(&e, 5000.0, 100.0, 0.25);
    check(near(v, 50.0, 1e-9), "est: one 100x outlier leaves the estimate at %.3f", v);
    mdr_health_est_add(&e, 50.0, 100.0, 0.25);
    v = mdr_health_est_add(&e, 0.5, 100.0, 0.25);
    check(near(v, 50.0, 1e-9), "est: one 1/100 outlier leaves it at %.3f", v);
    mdr_health_est_add(&e, 50.0, 100.0, 0.25);
    /* a step to 75 (1.5x, below the jump factor): the median follows from
     * the second new sample, then the EWMA closes (1 - gain) of the gap
     * per sample */
    v = mdr_health_est_add(&e, 75.0, 100.0, 0.25);
    check(near(v, 50.0, 1e-9), "est: first sample of a step is held back (%.3f)", v);
    want = 50.0;
    for (i = 0; i < 8; i++) {
        v = mdr_health_est_add(&e, 75.0, 100.0, 0.25);
        want += 0.25 * (75.0 - want);
    }
    check(near(v, want, 1e-9) && fabs(v - 75.0) < 0.11 * 25.0,
          "est: 8 samples after a 1.5x step: %.3f (EWMA gain 0.25: %.3f, within 11%% of the "
          "step)",
          v, want);
    /* a drop to a third: the EWMA from the second sample (the median),
     * then the third sample in a row that far below is believed at once
     * (the EWMA at gain 0.1 would still be at 68% of the way after 10) */
    memset(&e, 0, sizeof(e));
    for (i = 0; i < 10; i++)
        mdr_health_est_add(&e, 150.0, 100.0, 0.1);
    v = mdr_health_est_add(&e, 50.0, 100.0, 0.1);
    check(near(v, 150.0, 1e-9), "est: first sample of a drop to 1/3 is held back (%.3f)", v);
    v = mdr_health_est_add(&e, 50.0, 100.0, 0.1);
    check(near(v, 140.0, 1e-9), "est: the second goes through the EWMA (%.3f)", v);
    v = mdr_health_est_add(&e, 50.0, 100.0, 0.1);
    check(near(v, 50.0, 1e-9), "est: the third sample of the drop is believed: %.3f", v);
    /* a rise to 3x: the moving average only (a rail that idled reads
     * fast: good news is believed slowly) */
    mdr_health_est_add(&e, 150.0, 100.0, 0.1);
    want = 50.0;
    for (i = 0; i < 4; i++) {
        v = mdr_health_est_add(&e, 150.0, 100.0, 0.1);
        want += 0.1 * (150.0 - want);
    }
    check(near(v, want, 1e-9), "est: a rise to 3x goes through the EWMA: %.3f after 5 samples",
          v);
    /* two samples in a row far below, then the old rate: no jump */
    memset(&e, 0, sizeof(e));
    for (i = 0; i < 10; i++)
        mdr_health_est_add(&e, 100.0, 100.0, 0.1);
    mdr_health_est_add(&e, 10.0, 100.0, 0.1);
    v = mdr_health_est_add(&e, 10.0, 100.0, 0.1);
    check(near(v, 91.0, 1e-9), "est: two 1/10 samples in a row: EWMA only (%.3f)", v);
    v = mdr_health_est_add(&e, 100.0, 100.0, 0.1);
    check(near(v, 91.0 + 0.1 * (10.0 - 91.0), 1e-9),
          "est: ... and no jump when the third is back to 100 (%.3f)", v);
    /* the first value: a median of the first three */
    memset(&e, 0, sizeof(e));
    mdr_health_est_add(&e, 10.0, 100.0, 0.25);
    mdr_health_est_add(&e, 900.0, 100.0, 0.25);
    v = mdr_health_est_add(&e, 12.0, 100.0, 0.25);
    check(near(v, 12.0, 1e-9) && e.n == 3, "est: first usable value is the median of 3: %.1f",
          v);
}

static void test_lat(void)
{
    mdr_health_lat_t l;
    double v;
    int i;

    memset(&l, 0, sizeof(l));
    mdr_health_lat_add(&l, 20.0);
    v = mdr_health_lat_add(&l, 500.0); /* the peer matched late */
    check(near(v, 10.0, 1e-9), "lat: half the smallest round trip (%.1f us)", v);
    v = mdr_health_lat_add(&l, -1.0);
    check(near(v, 10.0, 1e-9) && l.n == 2, "lat: a negative round trip is ignored");
    for (i = 0; i < MDR_HEALTH_LAT_WIN; i++)
        v = mdr_health_lat_add(&l, 40.0);
    check(near(v, 20.0, 1e-9), "lat: the window slides: 8 newer round trips of 40 us -> %.1f", v);
}

/* ---------------- transfers on capped loop rails ---------------- */

typedef struct {
    madrail_context_t a, b;
    madrail_peer_t a2b, b2a;
    uint8_t *sbuf, *rbuf;
    size_t size;
    int window;
} pair_t;

static int pair_open(pair_t *p, const char *const *ov, size_t size, int window)
{
    madrail_context_params_t prm = {.overrides = ov, .job_key = (const uint8_t *)"madrail-test-key"};
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len;

    memset(p, 0, sizeof(*p));
    if (madrail_context_init(&prm, &p->a) != MADRAIL_OK)
        return -1;
    if (madrail_context_init(&prm, &p->b) != MADRAIL_OK)
        return -1;
    len = sizeof(addr);
    if (madrail_context_address(p->b, addr, &len) != MADRAIL_OK ||
        madrail_peer_add(p->a, addr, len, &p->a2b) != MADRAIL_OK)
        return -1;
    len = sizeof(addr);
    if (madrail_context_address(p->a, addr, &len) != MADRAIL_OK ||
        madrail_peer_add(p->b, addr, len, &p->b2a) != MADRAIL_OK)
        return -1;
    p->size = size;
    p->window = window;
    p->sbuf = malloc(size * (size_t)window);
    p->rbuf = malloc(size * (size_t)window);
    if (!p->sbuf || !p->rbuf)
        return -1;
    memset(p->sbuf, 0x5a, size * (size_t)window);
    return 0;
}

static void pair_close(pair_t *p)
{
    int i;
    for (i = 0; i < 1000; i++) {
        madrail_progress(p->a);
        madrail_progress(p->b);
    }
    madrail_context_finalize(p->a);
    madrail_context_finalize(p->b);
    free(p->sbuf);
    free(p->rbuf);
}

static void put_bytes(madrail_context_t ctx, uint64_t *bytes)
{
    madrail_rail_stats_t s;
    int r;
    for (r = 0; r < madrail_rail_count(ctx); r++) {
        madrail_rail_stats(ctx, r, &s);
        bytes[r] = s.tx_put_bytes;
    }
}

/* Send n messages a -> b, window of them in flight (receives posted
 * first); returns 0 when every request completed.  With trace, prints
 * rail 0's share of each message's put bytes. */
static int stream(pair_t *p, int n)
{
    madrail_request_t sr[64], rr[64];
    uint64_t before[MDR_MAX_RAILS], after[MDR_MAX_RAILS];
    int posted = 0, done = 0, k, flag;
    long spins = 0;

    memset(sr, 0, sizeof(sr));
    memset(rr, 0, sizeof(rr));
    put_bytes(p->a, before);
    while (done < n) {
        while (posted < n && posted - done < p->window) {
            k = posted % p->window;
            if (madrail_irecv(p->b, p->b2a, p->rbuf + (size_t)k * p->size, p->size, 77, 0,
                              &rr[k]) != MADRAIL_OK ||
                madrail_isend(p->a, p->a2b, p->sbuf + (size_t)k * p->size, p->size, 77, 0,
                              &sr[k]) != MADRAIL_OK)
                return -1;
            posted++;
        }
        madrail_progress(p->a);
        madrail_progress(p->b);
        k = done % p->window;
        flag = 0;
        if (rr[k] && madrail_test(&rr[k], &flag, NULL) != MADRAIL_OK)
            return -1;
        flag = 0;
        if (!rr[k] && sr[k] && madrail_test(&sr[k], &flag, NULL) != MADRAIL_OK)
            return -1;
        if (!rr[k] && !sr[k]) {
            done++;
            if (trace) {
                put_bytes(p->a, after);
                printf("  trace: message %d rail0 share %.3f\n", done,
                       (double)(after[0] - before[0]) /
                           (double)(after[0] - before[0] + after[1] - before[1]));
                memcpy(before, after, sizeof(before));
            }
        }
        if (++spins > 2000000000L)
            return -1;
    }
    return 0;
}

/* Run n messages, the last `last` of them measured: rail 0's share of the
 * put bytes they carried. */
static double phase(pair_t *p, int n, int last, const char *what)
{
    uint64_t b0[MDR_MAX_RAILS], b1[MDR_MAX_RAILS];
    double f, t0, t1;

    if (stream(p, n - last) != 0) {
        check(0, "%s: transfer failed", what);
        return -1;
    }
    put_bytes(p->a, b0);
    t0 = mdr_time_sec();
    if (stream(p, last) != 0) {
        check(0, "%s: transfer failed", what);
        return -1;
    }
    t1 = mdr_time_sec();
    put_bytes(p->a, b1);
    f = (double)(b1[0] - b0[0]) / (double)(b1[0] - b0[0] + b1[1] - b0[1]);
    /* the rate is printed for whoever tunes the constants, never checked */
    printf("  %s: rail 0 carried %.1f%% of the last %d messages' put bytes (%.1f MB/s)\n", what,
           100 * f, last, (double)last * (double)p->size / (t1 - t0) / 1e6);
    return f;
}

static void print_health(pair_t *p)
{
    madrail_rail_health_t h;
    int r;
    for (r = 0; r < 2; r++) {
        if (madrail_peer_rail_health(p->a, p->a2b, r, &h) != MADRAIL_OK)
            continue;
        printf("  rail %d: measured %.1f MB/s (%llu samples) weight %.2f share %.1f%% %s, "
               "%llu plans %llu probes\n",
               r, h.measured_mbs, (unsigned long long)h.samples, h.weight, 100 * h.share,
               h.measured ? "measured" : "static", (unsigned long long)h.plans,
               (unsigned long long)h.probes);
    }
}

/* stderr into a temporary file while a test runs (the log goes there). */
static int stderr_saved = -1;
static FILE *stderr_file;

static void capture_stderr(void)
{
    fflush(stderr);
    stderr_file = tmpfile();
    if (!stderr_file)
        return;
    stderr_saved = dup(2);
    dup2(fileno(stderr_file), 2);
}

/* Stop capturing; returns what was written (malloc'ed) or NULL. */
static char *captured_stderr(void)
{
    char *text;
    long n;

    if (!stderr_file)
        return NULL;
    fflush(stderr);
    dup2(stderr_saved, 2);
    close(stderr_saved);
    n = ftell(stderr_file);
    text = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (text) {
        rewind(stderr_file);
        n = n > 0 ? (long)fread(text, 1, (size_t)n, stderr_file) : 0;
        text[n] = '\0';
    }
    fclose(stderr_file);
    stderr_file = NULL;
    return text;
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    const char *p = text;
    while (p && (p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    return n;
}

/* Caps 3:1 (equal profiles), then 1:3 in the middle of the run.  Also what
 * a user sees: the info log records the weight changes, rate-limited, and
 * MADRAIL_STATS prints the measured throughput and weight per peer. */
static void test_switch(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:sw0;bw=24m;mbs=100,loop:sw1;bw=8m;mbs=100",
                        "MADRAIL_LOG_LEVEL=info", NULL};
    pair_t p;
    double f, t0 = mdr_time_sec(), el;
    char *log, *stats = NULL;
    size_t stats_len = 0;
    FILE *mem;
    int nlog;

    capture_stderr();
    if (pair_open(&p, ov, MIB, 4) != 0) {
        free(captured_stderr());
        check(0, "switch: open");
        return;
    }
    f = phase(&p, 24, 8, "caps 24m:8m, equal profiles");
    check(f >= 0.70 && f <= 0.80, "caps 3:1: rail 0 carries %.1f%% (want 75 +- 5)", 100 * f);
    print_health(&p);
    mdr_loop_set_bandwidth("sw0", 8u * MIB);
    mdr_loop_set_bandwidth("sw1", 24u * MIB);
    f = phase(&p, 48, 8, "caps changed to 8m:24m");
    check(f >= 0.20 && f <= 0.30, "caps changed to 1:3: rail 0 carries %.1f%% (want 25 +- 5)",
          100 * f);
    print_health(&p);
    mem = open_memstream(&stats, &stats_len);
    if (mem) {
        madrail_stats_print(p.a, mem);
        fclose(mem);
    }
    pair_close(&p);
    el = mdr_time_sec() - t0;
    log = captured_stderr();
    fputs(log ? log : "", stdout);
    nlog = count_lines(log, "stripe weights measured");
    check(nlog >= 2, "info log: %d lines record the weight changes (want >= 2: the first measured "
          "split, the swap)", nlog);
    /* rate limit: at most one line a second per peer (72 plans were made) */
    check(nlog <= 1 + (int)el, "info log: %d lines in %.1f s (at most one a second)", nlog, el);
    check(log && strstr(log, "rail loop:sw0") && strstr(log, "MB/s"),
          "info log names the rails and their measured speeds");
    fputs(stats ? stats : "", stdout);
    check(stats && count_lines(stats, "peer 0 rail ") == 2 &&
              strstr(stats, "weights measured") && strstr(stats, "measured ") &&
              strstr(stats, "samples"),
          "MADRAIL_STATS prints each rail's measured throughput and weight for the peer");
    free(log);
    free(stats);
}

/* Put-ahead (rndv.c, MADRAIL_PUT_AHEAD): equal caps, then rail 1 slowed 8x
 * just before a window of 32 messages is planned half on it (its measured
 * speed is still the old one).  Rail 1's driver holds only what it took
 * within MADRAIL_PUT_AHEAD; the rest of its halves move to rail 0 as rail 0
 * drains.  Asserted: rail 0's share of that window's put bytes (about 50%
 * when every put goes to its driver at once: `test_adapt drop0`), the
 * bytes moved in MADRAIL_STATS, and every byte received right. */
static void test_drop(const char *setting, double lo, double hi, int want_moved)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:dr0;bw=16m;mbs=100,loop:dr1;bw=16m;mbs=100", setting,
                        NULL};
    size_t size = 256u * 1024u, i, bad = 0;
    unsigned long long moved = 0;
    char *stats = NULL, *line;
    size_t stats_len = 0;
    FILE *mem;
    pair_t p;
    double f;

    if (pair_open(&p, ov, size, 32) != 0) {
        check(0, "drop (%s): open", setting);
        return;
    }
    for (i = 0; i < size * 32; i++)
        p.sbuf[i] = (uint8_t)(i * 7 + i / 4099);
    memset(p.rbuf, 0, size * 32);
    f = phase(&p, 64, 32, "caps 16m:16m");
    check(f >= 0.40 && f <= 0.60, "drop (%s): equal caps: rail 0 carries %.1f%% (want 50 +- 10)",
          setting, 100 * f);
    mdr_loop_set_bandwidth("dr1", 2u * MIB);
    f = phase(&p, 32, 32, "rail 1 capped to 2m, the first window after");
    check(f >= lo && f <= hi,
          "drop (%s): the window planned after rail 1 slowed 8x: rail 0 carries %.1f%% (want "
          "%.0f-%.0f)",
          setting, 100 * f, 100 * lo, 100 * hi);
    for (i = 0; i < size * 32; i++)
        bad += p.rbuf[i] != p.sbuf[i];
    check(bad == 0, "drop (%s): every byte received right (%zu wrong)", setting, bad);
    print_health(&p);
    mem = open_memstream(&stats, &stats_len);
    if (mem) {
        madrail_stats_print(p.a, mem);
        fclose(mem);
    }
    line = stats ? strstr(stats, "stripe plans") : NULL;
    if (line)
        line = strstr(line, "weights");
    if (line)
        line = strchr(line, ',');
    if (!line || sscanf(line, ", %llu put bytes moved", &moved) != 1)
        check(0, "drop (%s): MADRAIL_STATS has no 'put bytes moved' count", setting);
    else if (want_moved)
        check(moved > 0, "drop (%s): MADRAIL_STATS: %llu put bytes moved to a rail with room",
              setting, moved);
    else
        check(moved == 0, "drop (%s): MADRAIL_STATS: no put bytes moved (%llu)", setting, moved);
    free(stats);
    pair_close(&p);
}

/* Equal caps, profiles claiming 3:1: the split goes to 50/50. */
static void test_equal(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:eq0;bw=16m;mbs=300,loop:eq1;bw=16m;mbs=100", NULL};
    pair_t p;
    double f;

    if (pair_open(&p, ov, MIB, 4) != 0) {
        check(0, "equal: open");
        return;
    }
    f = phase(&p, 20, 8, "equal caps 16m, profiles 3:1");
    check(f >= 0.45 && f <= 0.55, "equal caps: rail 0 carries %.1f%% (want 50 +- 5)", 100 * f);
    print_health(&p);
    pair_close(&p);
}

/* MADRAIL_ADAPT=0 and MADRAIL_RAIL_WEIGHTS keep the static split whatever
 * the rails do. */
static void test_static(const char *setting, const char *rails)
{
    const char *ov[] = {rails, setting, NULL};
    pair_t p;
    double f;

    if (pair_open(&p, ov, MIB, 4) != 0) {
        check(0, "static: open");
        return;
    }
    f = phase(&p, 16, 8, setting);
    check(f >= 0.74 && f <= 0.76, "%s, caps 1:3: rail 0 keeps %.1f%% (static 75)", setting,
          100 * f);
    print_health(&p);
    pair_close(&p);
}

/* A rail too slow for a chunk (1m against 32m, chunks of 64k at least)
 * carries nothing but probes; once it is as fast as the other, it gets
 * half again.  A probe chunk then lasts ~2 ms: a 1 ms sample window lets
 * each probe be a sample (with the default 5 ms, three probes make one,
 * and the test would need three times as many messages). */
static void test_starved(const char *probe, double lo, double hi)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:sv0;bw=32m;mbs=3200,loop:sv1;bw=1m;mbs=100",
                        "MADRAIL_STRIPE_MIN_CHUNK=64k", "MADRAIL_ADAPT_SAMPLE=1ms", probe,
                        NULL};
    pair_t p;
    double f;

    if (pair_open(&p, ov, MIB, 4) != 0) {
        check(0, "starved: open");
        return;
    }
    f = phase(&p, 24, 8, "caps 32m:1m");
    check(f >= 0.90, "%s: the 1m rail carries %.1f%% (a probe chunk at most)", probe,
          100 * (1 - f));
    print_health(&p);
    mdr_loop_set_bandwidth("sv1", 32u * MIB);
    f = phase(&p, 96, 8, "slow rail now 32m"); /* rises go through the EWMA */
    check(f >= lo && f <= hi, "%s: the rail that sped up carries %.1f%% (want %.0f..%.0f)", probe,
          100 * (1 - f), 100 * (1 - hi), 100 * (1 - lo));
    print_health(&p);
    pair_close(&p);
}

static void tx_bytes(madrail_context_t ctx, uint64_t *bytes)
{
    madrail_rail_stats_t s;
    int r;
    for (r = 0; r < madrail_rail_count(ctx); r++) {
        madrail_rail_stats(ctx, r, &s);
        bytes[r] = s.tx_bytes;
    }
}

/* Small messages (eager fragments) on rails capped 3:1 with equal
 * profiles, after large messages measured the rails: each fragment takes
 * the rail that will deliver it first, so the bytes split as the caps do.
 * (Without puts there is no measurement, and the profiles stand.) */
static void test_eager(const char *setting, double lo, double hi)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:eg0;bw=24m;mbs=100,loop:eg1;bw=8m;mbs=100",
                        setting, NULL};
    uint64_t b0[MDR_MAX_RAILS], b1[MDR_MAX_RAILS];
    pair_t p;
    double f, t0, t1;

    if (pair_open(&p, ov, MIB, 32) != 0) {
        check(0, "eager: open");
        return;
    }
    /* large messages first: their puts measure the rails */
    p.window = 4;
    if (stream(&p, 12) != 0)
        check(0, "eager: transfer failed");
    p.size = 32 * 1024;
    p.window = 32; /* 1 MiB in flight: more than the fast rail's credits (64 x 8 KiB) */
    if (stream(&p, 64) != 0)
        check(0, "eager: transfer failed");
    tx_bytes(p.a, b0);
    t0 = mdr_time_sec();
    if (stream(&p, 256) != 0)
        check(0, "eager: transfer failed");
    t1 = mdr_time_sec();
    tx_bytes(p.a, b1);
    printf("  %s: 256 x 32 KiB at %.1f MB/s\n", setting, 256.0 * 32768 / (t1 - t0) / 1e6);
    f = (double)(b1[0] - b0[0]) / (double)(b1[0] - b0[0] + b1[1] - b0[1]);
    if (trace) {
        madrail_rail_stats_t s;
        int r;
        print_health(&p);
        for (r = 0; r < 2; r++) {
            madrail_rail_stats(p.a, r, &s);
            printf("  rail %d: %llu credit stalls, %llu msgs\n", r,
                   (unsigned long long)s.credit_stalls, (unsigned long long)s.tx_msgs);
        }
    }
    check(f >= lo && f <= hi, "%s: 32 KiB messages (eager fragments), caps 3:1: rail 0 carries "
          "%.1f%% of the bytes (want %.0f..%.0f)", setting, 100 * f, 100 * lo, 100 * hi);
    pair_close(&p);
}

/* Three equal rails and 64 KiB messages: chunk edges are rounded to
 * MADRAIL_STRIPE_ALIGN (4 KiB), so a plan is 20 + 24 + 20 KiB; the rails'
 * order rotates from plan to plan, so each rail carries a third of the
 * bytes, not the middle one 37.5% (static weights: only the rounding
 * differs). */
static void test_rotate(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:ro0,loop:ro1,loop:ro2", "MADRAIL_ADAPT=0", NULL};
    madrail_rail_stats_t s;
    uint64_t b[3], total = 0;
    double lo = 1.0, hi = 0.0;
    pair_t p;
    int r;

    if (pair_open(&p, ov, 64 * 1024, 8) != 0) {
        check(0, "rotate: open");
        return;
    }
    /* sends first, so each goes by RTS and the sender plans it against
     * the receiver's CTS (rails in their order) */
    for (r = 0; r < 12; r++) {
        madrail_request_t sr[8], rr[8];
        int k, left = 16;
        for (k = 0; k < 8; k++)
            if (madrail_isend(p.a, p.a2b, p.sbuf + (size_t)k * p.size, p.size, 78, 0, &sr[k]) !=
                MADRAIL_OK)
                left = -1;
        for (k = 0; k < 8 && left > 0; k++) {
            madrail_progress(p.a);
            madrail_progress(p.b);
        }
        for (k = 0; k < 8 && left > 0; k++)
            if (madrail_irecv(p.b, p.b2a, p.rbuf + (size_t)k * p.size, p.size, 78, 0, &rr[k]) !=
                MADRAIL_OK)
                left = -1;
        while (left > 0) {
            madrail_progress(p.a);
            madrail_progress(p.b);
            for (k = 0, left = 0; k < 8; k++) {
                int f = 0;
                if (sr[k] && madrail_test(&sr[k], &f, NULL) != MADRAIL_OK)
                    left = -1000;
                if (rr[k] && madrail_test(&rr[k], &f, NULL) != MADRAIL_OK)
                    left = -1000;
                left += (sr[k] != NULL) + (rr[k] != NULL);
            }
        }
        if (left < 0) {
            check(0, "rotate: transfer");
            pair_close(&p);
            return;
        }
    }
    for (r = 0; r < 3; r++) {
        madrail_rail_stats(p.a, r, &s);
        b[r] = s.tx_put_bytes;
        total += b[r];
    }
    for (r = 0; r < 3 && total; r++) {
        double f = (double)b[r] / (double)total;
        lo = f < lo ? f : lo;
        hi = f > hi ? f : hi;
    }
    check(total == 96ull * 64 * 1024 && lo >= 0.32 && hi <= 0.347,
          "rotate: 96 x 64 KiB over 3 equal rails: put shares %.1f%% .. %.1f%% (want 32..34.7)",
          100 * lo, 100 * hi);
    pair_close(&p);
}

/* A control message and a rail without credits: it waits for them only
 * while that rail, counted with the time its credits took to come back
 * the last times they ran out, still delivers first.  The rails' latencies
 * and credits are set by hand on a connected pair (no traffic moves while
 * they are), and restored. */
static void test_credit_wait(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:cw0,loop:cw1", NULL};
    mdr_peer_rail_t *r0, *r1, s0, s1;
    mdr_peer_t *peer;
    mdr_health_peer_t hp;
    pair_t p;
    int got;

    if (pair_open(&p, ov, 4096, 4) != 0 || stream(&p, 4) != 0) {
        check(0, "credit wait: open");
        return;
    }
    peer = mdr_peer_get(p.a, p.a2b);
    r0 = &peer->rails[0];
    r1 = &peer->rails[1];
    s0 = *r0;
    s1 = *r1;
    hp = peer->health;
    /* rail 0: 10 us one way, rail 1: 100 us; both idle */
    memset(&r0->health.lat, 0, sizeof(r0->health.lat));
    memset(&r1->health.lat, 0, sizeof(r1->health.lat));
    mdr_health_lat_add(&r0->health.lat, 20.0);
    mdr_health_lat_add(&r1->health.lat, 200.0);
    peer->health.order_valid = 1;
    peer->health.order[0] = 0;
    peer->health.order[1] = 1;

    r0->credits = 0;
    r0->health.credit_us = 0.0;
    got = mdr_health_pick_rail(peer, 64);
    check(got == MDR_HEALTH_WAIT,
          "credit wait: no credit on the 10 us rail, its credits never timed: wait for them "
          "(a round trip, 30 us in all, beats 100 us) (%d)", got);

    /* credits out, back 2 ms later: the wait is measured */
    r0->credits = 1;
    r0->health.dry_ns = 0;
    mdr_health_credits_out(r0);
    usleep(2000);
    mdr_health_credits_back(r0);
    check(r0->health.credit_us >= 2000.0 && r0->health.dry_ns == 0,
          "credit wait: credits out and back 2 ms later read %.0f us", r0->health.credit_us);
    mdr_health_credits_back(r0);
    check(r0->health.credit_us >= 2000.0,
          "credit wait: credits coming back while the rail has some are not timed (%.0f us)",
          r0->health.credit_us);

    r0->credits = 0;
    got = mdr_health_pick_rail(peer, 64);
    check(got == 1,
          "credit wait: credits that took %.0f us to come back: the 100 us rail with credits "
          "takes the message (%d)", r0->health.credit_us, got);

    *r0 = s0;
    *r1 = s1;
    peer->health = hp;
    check(stream(&p, 4) == 0, "credit wait: the pair still streams afterwards");
    pair_close(&p);
}

/* MADRAIL_TCP_PUT_ACK=auto: tcp rails complete puts at the receiver's
 * acknowledgement with more than one rail (adaptation measures them,
 * failover needs them), else at the socket write; a set value wins.  Read from each rail's debug line at open. */
static void test_put_ack(const char *rails, const char *setting, int want_on)
{
    const char *ov[] = {rails, "MADRAIL_LOG_LEVEL=debug", setting, NULL};
    madrail_context_params_t prm = {.overrides = ov, .job_key = (const uint8_t *)"madrail-test-key"};
    madrail_context_t c = NULL;
    madrail_status_t st;
    char *log;
    int n = strchr(rails, ',') ? 2 : 1, on, off;

    capture_stderr();
    st = madrail_context_init(&prm, &c);
    if (st == MADRAIL_OK)
        madrail_context_finalize(c);
    log = captured_stderr();
    on = count_lines(log, "put acks on");
    off = count_lines(log, "put acks off");
    check(st == MADRAIL_OK && on == (want_on ? n : 0) && off == (want_on ? 0 : n),
          "%s %s: %d rail(s) with put acks, %d without (want %s on %d)", rails,
          setting ? setting : "(defaults)", on, off, want_on ? "acks" : "no acks", n);
    free(log);
}

/* Not run by default (named on the command line only): a measurement
 * of fast rails, where a chunk lasts about 100 us and completions come in
 * bursts; run with MADRAIL_LOG_LEVEL=debug to see each sample, and with
 * MADRAIL_ADAPT_SAMPLE set to compare sample windows. */
static void test_fast(void)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:fs0;bw=800m;mbs=100,loop:fs1;bw=400m;mbs=100", NULL};
    pair_t p;
    double f;

    if (pair_open(&p, ov, 256 * 1024, 4) != 0) {
        check(0, "fast: open");
        return;
    }
    f = phase(&p, 400, 200, "caps 800m:400m, 256 KiB messages");
    printf("  fast: rail 0 share %.1f%% (caps: 66.7%%)\n", 100 * f);
    print_health(&p);
    pair_close(&p);
}

static int want(int argc, char **argv, const char *name)
{
    int i;
    if (argc < 2)
        return 1;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *t = getenv("MDR_ADAPT_TRACE");

    trace = t && t[0] == '1';
    if (want(argc, argv, "est")) {
        test_busy();
        test_est();
        test_lat();
    }
    if (want(argc, argv, "switch"))
        test_switch();
    if (want(argc, argv, "equal"))
        test_equal();
    if (want(argc, argv, "drop"))
        test_drop("MADRAIL_PUT_AHEAD=50ms", 0.70, 0.95, 1);
    if (argc > 1 && want(argc, argv, "drop0"))
        test_drop("MADRAIL_PUT_AHEAD=0", 0.70, 0.95, 0);
    if (want(argc, argv, "off"))
        test_static("MADRAIL_ADAPT=0",
                    "MADRAIL_RAILS=loop:of0;bw=8m;mbs=300,loop:of1;bw=24m;mbs=100");
    if (want(argc, argv, "weights"))
        test_static("MADRAIL_RAIL_WEIGHTS=3,1",
                    "MADRAIL_RAILS=loop:wt0;bw=8m;mbs=100,loop:wt1;bw=24m;mbs=100");
    if (want(argc, argv, "starved"))
        test_starved("MADRAIL_ADAPT_PROBE=8", 0.40, 0.60);
    if (want(argc, argv, "eager"))
        test_eager("MADRAIL_ADAPT=1", 0.70, 0.80);
    if (argc > 1 && want(argc, argv, "eager0"))
        test_eager("MADRAIL_ADAPT=0", 0.70, 0.80);
    if (want(argc, argv, "rotate"))
        test_rotate();
    if (want(argc, argv, "creditwait"))
        test_credit_wait();
    if (want(argc, argv, "putack")) {
        test_put_ack("MADRAIL_RAILS=tcp:lo,tcp:lo", NULL, 1);
        test_put_ack("MADRAIL_RAILS=tcp:lo", NULL, 0);
        /* more than one rail: acks for failover too (test_failover) */
        test_put_ack("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_ADAPT=0", 1);
        test_put_ack("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_RAIL_WEIGHTS=3,1", 1);
        test_put_ack("MADRAIL_RAILS=tcp:lo,tcp:lo", "MADRAIL_TCP_PUT_ACK=0", 0);
        test_put_ack("MADRAIL_RAILS=tcp:lo", "MADRAIL_TCP_PUT_ACK=1", 1);
    }
    if (argc > 1 && want(argc, argv, "fast"))
        test_fast();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
