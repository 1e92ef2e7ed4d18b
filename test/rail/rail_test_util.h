/*
 * What the rail-level tests share (the driver tests test/rail/test_*_driver.c
 * and the conformance suite): the CHECK line and failure count of the
 * driver tests, a completion that records its call, and the data pattern
 * of put payloads.  Header-only, like test/unit/unit_check.h: each test is
 * one program of one file.
 */
#ifndef MDR_RAIL_TEST_UTIL_H
#define MDR_RAIL_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rails/rail.h"

/* ---------------- checks ---------------- */

/* Checks failed so far (in this process: a forked child counts its own). */
static int failures __attribute__((unused));
/* When set, each line names the process: "ok   [child] ...". */
static const char *rt_who __attribute__((unused));

static void rt_report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void rt_report(int ok, const char *fmt, ...)
{
    va_list ap;

    printf(ok ? "ok   " : "FAIL ");
    if (rt_who != NULL)
        printf("[%s] ", rt_who);
    if (!ok)
        failures++;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* One line per check.  The condition is evaluated before the message's
 * arguments, which may show what it did (counters a wait advanced). */
#define CHECK(_cond, ...)                                                                    \
    do {                                                                                     \
        int rt_ok_ = (_cond) ? 1 : 0;                                                        \
        rt_report(rt_ok_, __VA_ARGS__);                                                      \
    } while (0)

/* The summary line; returns the exit status (0 pass, 1 fail). */
static int rt_finish(void) __attribute__((unused));
static int rt_finish(void)
{
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

/* ---------------- rails ---------------- */

/* The job key of test rails (every driver needs one; tests that check
 * refusals open a rail with another). */
static const uint8_t rt_job_key[MDR_JOB_KEY_LEN] __attribute__((unused)) = {
    0x6d, 0x61, 0x64, 0x72, 0x61, 0x69, 0x6c, 0x2d, 0x74, 0x65, 0x73, 0x74, 0x2d, 0x6b, 0x65, 0x79};

/* Parameters of a test rail's open (fields not named here are 0). */
static inline mdr_rail_params_t rt_params(uint64_t uuid, const mdr_rail_upcalls_t *upcalls,
                                          void *rail_cookie, size_t slot_size, unsigned slots,
                                          const char *const *overrides)
{
    mdr_rail_params_t p = {.uuid = uuid,
                           .upcalls = upcalls,
                           .rail_cookie = rail_cookie,
                           .slot_size = slot_size,
                           .slots = slots,
                           .overrides = overrides,
                           .job_key = rt_job_key};
    return p;
}

/* ---------------- completions ---------------- */

/* A put completion that records its calls: {{rt_comp_cb}, 0, MADRAIL_OK}. */
typedef struct rt_comp {
    mdr_completion_t c; /* first: the callback casts back */
    int calls;
    madrail_status_t status;
} rt_comp_t;

static void rt_comp_cb(mdr_completion_t *c, madrail_status_t status) __attribute__((unused));
static void rt_comp_cb(mdr_completion_t *c, madrail_status_t status)
{
    rt_comp_t *rc = (rt_comp_t *)c;

    rc->calls++;
    rc->status = status;
}

/* ---------------- data ---------------- */

/* Byte i of the data pattern of seed: it varies with both, so a byte
 * from the wrong offset or an older transfer shows. */
static inline uint8_t rt_pat(uint64_t seed, size_t i)
{
    return (uint8_t)((seed * 0x9e3779b1u) ^ (i * 131u) ^ (i >> 9) ^ (seed >> 7));
}

static inline void rt_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    size_t i;

    for (i = 0; i < len; i++)
        buf[i] = rt_pat(seed, i);
}

/* Does buf hold the first len bytes of seed's pattern? */
static inline int rt_matches(const uint8_t *buf, size_t len, uint64_t seed)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (buf[i] != rt_pat(seed, i))
            return 0;
    return 1;
}

#endif /* MDR_RAIL_TEST_UTIL_H */
