/*
 * test/unit/pair.h -- what the core unit tests share: a CHECK that counts
 * and says what it checked (unit_check.h's check()), and a pair of contexts of this process peered
 * with each other (most core tests drive two sides from one thread, on
 * the loop driver, so that every protocol race is repeatable).
 *
 * Header-only on purpose: each test is one program, and its counters
 * (failures, checks) are its own.  Include it after core/core.h.
 */
#ifndef MDR_TEST_PAIR_H
#define MDR_TEST_PAIR_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "madrail.h"
#include "unit_check.h"

/* contexts of one process that peer each other share a job key */
#define MDR_TEST_JOB_KEY ((const uint8_t *)"madrail-test-key")

/* CHECK(cond, fmt, ...): unit_check.h's check(), with the file and line
 * of a failure */
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        int ok_ = !!(cond);                                                                  \
        if (!ok_)                                                                            \
            printf("at %s:%d:\n", __FILE__, __LINE__);                                      \
        check(ok_, __VA_ARGS__);                                                             \
    } while (0)

typedef struct {
    madrail_context_t a, b;
    madrail_peer_t a2b, b2a; /* a's handle of b, b's handle of a */
} pair_t;

/* Opens a and b with the overrides ov and peers them; bend (may be NULL)
 * rewrites b's address before a adds it (a test of bad addresses). */
static inline int pair_open_bent(pair_t *p, const char *const *ov,
                                 void (*bend)(uint8_t *addr, size_t len, void *arg), void *arg)
{
    madrail_context_params_t prm = {.overrides = ov, .job_key = MDR_TEST_JOB_KEY};
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len;

    memset(p, 0, sizeof(*p));
    if (madrail_context_init(&prm, &p->a) != MADRAIL_OK)
        return -1;
    if (madrail_context_init(&prm, &p->b) != MADRAIL_OK)
        return -1;
    len = sizeof(addr);
    if (madrail_context_address(p->b, addr, &len) != MADRAIL_OK)
        return -1;
    if (bend != NULL)
        bend(addr, len, arg);
    if (madrail_peer_add(p->a, addr, len, &p->a2b) != MADRAIL_OK)
        return -1;
    len = sizeof(addr);
    if (madrail_context_address(p->a, addr, &len) != MADRAIL_OK)
        return -1;
    if (madrail_peer_add(p->b, addr, len, &p->b2a) != MADRAIL_OK)
        return -1;
    return 0;
}

/* The test pattern of a buffer: byte i of message seed; pair_verify says
 * whether b holds it. */
static inline void pair_fill(uint8_t *b, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 8));
}

static inline int pair_verify(const uint8_t *b, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (b[i] != (uint8_t)(i * 131u + seed * 7u + (i >> 8)))
            return 0;
    return 1;
}

static inline int pair_open(pair_t *p, const char *const *ov)
{
    return pair_open_bent(p, ov, NULL, NULL);
}

#endif
