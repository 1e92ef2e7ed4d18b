/*
 * Striping planner.  It runs once per rendezvous, so it allocates nothing:
 * the caller's chunks[] array (room for n entries) doubles as the working
 * set of candidate rails while the plan is refined.
 *
 * Method: every inner edge is the ideal cumulative weight share rounded to
 * the NEAREST aligned position, so each edge moves at most align/2 and each
 * chunk differs from its ideal share by at most align.  If a chunk then
 * falls below min_chunk (or is empty) the rail with the smallest chunk is
 * dropped and the plan recomputed over the remaining rails; with one rail
 * left the plan is one chunk.  A dropped rail's ideal share (over all
 * usable rails) was therefore below min_chunk + align: rails are only
 * dropped when the message is too short for them.  Integer edges are
 * computed in long double so that lengths beyond 2^53 stay exact enough.
 *
 * MADRAIL_RAIL_WEIGHTS is parsed by hand rather than with strtod() so that
 * the application's LC_NUMERIC cannot change what "2.5" means.
 */
#include "mdr_config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/stripe.h"

/* Usable weight: positive and finite (NaN compares false). */
static int mdr_stripe_usable(double w)
{
    return w > 0.0 && isfinite(w);
}

/* Nearest position p in [0, len] with (base + p) % align == 0 to the real
 * position e (0 <= e <= len); falls back to 0 or len when the nearest
 * aligned point is outside (the caller then sees an empty chunk). */
static uint64_t mdr_stripe_round(long double e, uint64_t first, uint64_t align, uint64_t len)
{
    long double q = (e - (long double)first) / (long double)align + 0.5L;
    long double k;
    long double p;

    /* floor without libm */
    k = (long double)(int64_t)q;
    if (k > q)
        k -= 1.0L;
    p = (long double)first + k * (long double)align;
    if (p <= 0.0L)
        return 0;
    if (p >= (long double)len)
        return len;
    return (uint64_t)p;
}

int mdr_stripe_plan(const int *rails, const double *weights, int n, uintptr_t base, size_t len,
                    const mdr_stripe_params_t *params, mdr_chunk_t *chunks)
{
    uint64_t align = 1, min_chunk = 1, first;
    int m = 0, i, k, best;

    if (len == 0 || n <= 0 || !rails || !weights || !chunks)
        return 0;
    if (params) {
        if (params->align > 1)
            align = params->align;
        if (params->min_chunk > 1)
            min_chunk = params->min_chunk;
    }

    /* Candidates, in input order; chunks[k].rail holds the input index for
     * now.  A rail listed twice is used once (first entry wins). */
    for (i = 0; i < n; i++) {
        int dup = 0;
        if (!mdr_stripe_usable(weights[i]))
            continue;
        for (k = 0; k < m; k++)
            if (rails[chunks[k].rail] == rails[i])
                dup = 1;
        if (!dup)
            chunks[m++].rail = i;
    }
    if (m == 0)
        return 0;

    /* Single chunk on the heaviest rail: one rail, a short message, or a
     * length so large that edge arithmetic could overflow. */
    if (m == 1 || (uint64_t)len < 2 * min_chunk || (uint64_t)len > (UINT64_MAX >> 2)) {
        best = chunks[0].rail;
        for (k = 1; k < m; k++)
            if (weights[chunks[k].rail] > weights[best])
                best = chunks[k].rail;
        chunks[0].rail = rails[best];
        chunks[0].offset = 0;
        chunks[0].len = len;
        return 1;
    }

    /* Offset of the first aligned position at or after base. */
    first = (align - (uint64_t)(base & (align - 1))) & (align - 1);
    if ((align & (align - 1)) != 0) /* not a power of two: be correct anyway */
        first = (align - (uint64_t)(base % align)) % align;

    while (m > 1) {
        long double total = 0.0L, cum = 0.0L;
        uint64_t prev = 0, edge;
        int smallest = 0;

        for (k = 0; k < m; k++)
            total += (long double)weights[chunks[k].rail];
        for (k = 0; k < m; k++) {
            cum += (long double)weights[chunks[k].rail];
            if (k == m - 1)
                edge = len;
            else
                edge = mdr_stripe_round((long double)len * (cum / total), first, align, len);
            if (edge < prev) /* cannot happen (monotone rounding); stay safe */
                edge = prev;
            chunks[k].offset = prev;
            chunks[k].len = edge - prev;
            prev = edge;
            if (chunks[k].len < chunks[smallest].len ||
                (chunks[k].len == chunks[smallest].len &&
                 weights[chunks[k].rail] < weights[chunks[smallest].rail]))
                smallest = k;
        }
        if (chunks[smallest].len >= min_chunk)
            break;
        for (k = smallest; k < m - 1; k++)
            chunks[k] = chunks[k + 1];
        m--;
    }

    if (m == 1) {
        chunks[0].offset = 0;
        chunks[0].len = len;
    }
    for (k = 0; k < m; k++)
        chunks[k].rail = rails[chunks[k].rail];
    return m;
}

/* One decimal number: digits [. digits] [e[+-]digits].  Returns the end
 * of the number, or NULL when there is none. */
static const char *mdr_stripe_parse_number(const char *s, double *out)
{
    long double v = 0.0L, scale = 1.0L;
    int digits = 0, exp = 0, eneg = 0, edigits = 0;

    while (*s >= '0' && *s <= '9') {
        v = v * 10.0L + (long double)(*s - '0');
        s++;
        digits++;
    }
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') {
            scale /= 10.0L;
            v += scale * (long double)(*s - '0');
            s++;
            digits++;
        }
    }
    if (digits == 0)
        return NULL;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            eneg = (*s++ == '-');
        while (*s >= '0' && *s <= '9') {
            if (exp < 10000)
                exp = exp * 10 + (*s - '0');
            s++;
            edigits++;
        }
        if (edigits == 0)
            return NULL;
        while (exp-- > 0) {
            v = eneg ? v / 10.0L : v * 10.0L;
            if (v == 0.0L || v > 1e300L)
                break;
        }
    }
    *out = (double)v;
    return s;
}

static int mdr_stripe_space(char c)
{
    return c == ' ' || c == '\t';
}

int mdr_stripe_parse_weights(const char *text, double *weights, int max, const char **why_p)
{
    const char *why = NULL;
    const char *s;
    int pass, count = 0;

    if (!text) {
        why = "no weight list";
        goto err;
    }
    /* Pass 0 validates and counts, pass 1 writes: outputs only on success. */
    for (pass = 0; pass < 2; pass++) {
        count = 0;
        s = text;
        for (;;) {
            double v;
            const char *end;

            while (mdr_stripe_space(*s))
                s++;
            if (*s == '-') {
                why = "weights must be > 0";
                goto err;
            }
            if (*s == '+')
                s++;
            end = mdr_stripe_parse_number(s, &v);
            if (!end) {
                why = (*s == ',' || *s == '\0') ? "empty weight in the list"
                                                : "not a number (expected e.g. 3,1 or 2.5,1)";
                goto err;
            }
            s = end;
            while (mdr_stripe_space(*s))
                s++;
            if (*s != ',' && *s != '\0') {
                why = "not a number (expected e.g. 3,1 or 2.5,1)";
                goto err;
            }
            if (!(v > 0.0) || !isfinite(v)) {
                why = "weights must be > 0";
                goto err;
            }
            if (count >= max) {
                why = "more weights than rails";
                goto err;
            }
            if (pass == 1)
                weights[count] = v;
            count++;
            if (*s == '\0')
                break;
            s++; /* ',' */
        }
    }
    return count;

err:
    if (why_p)
        *why_p = why;
    return -1;
}
