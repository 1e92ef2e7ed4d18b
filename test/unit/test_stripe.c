/*
 * Property test of the striping planner: instead of comparing plans with
 * expected tables (which would only restate the implementation), every
 * plan -- named edge cases and many random inputs drawn from a fixed seed
 * -- is checked against the properties the core relies on: exact
 * coverage in ascending order, no empty chunk, aligned inner edges,
 * min_chunk, weight shares within `align` of ideal over the rails used,
 * one chunk per rail, and rails dropped only when the message is too
 * short for them.  Plus the MADRAIL_RAIL_WEIGHTS parser.
 */
#include "mdr_config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stripe.h"

static int failures;
static int printed_failures;

#define MAXN 16

typedef struct {
    int rails[MAXN];
    double weights[MAXN];
    int n;
    uintptr_t base;
    size_t len;
    mdr_stripe_params_t params;
} plan_input_t;

static void describe(const plan_input_t *in, char *buf, size_t sz)
{
    size_t off;
    int i;
    off = (size_t)snprintf(buf, sz, "len=%zu base=0x%lx align=%zu min=%zu n=%d w=[", in->len,
                           (unsigned long)in->base, in->params.align, in->params.min_chunk,
                           in->n);
    for (i = 0; i < in->n && off < sz; i++)
        off += (size_t)snprintf(buf + off, sz - off, "%s%d:%g", i ? "," : "", in->rails[i],
                                in->weights[i]);
    if (off < sz)
        snprintf(buf + off, sz - off, "]");
}

static int usable(double w)
{
    return w > 0.0 && isfinite(w);
}

/* Returns NULL when the plan satisfies every property, else the first violation. */
static const char *check_plan(const plan_input_t *in, const mdr_chunk_t *c, int count)
{
    static char why[256];
    uint64_t align = in->params.align > 1 ? in->params.align : 1;
    uint64_t min_chunk = in->params.min_chunk > 1 ? in->params.min_chunk : 1;
    double wall = 0.0, wused = 0.0, maxw = 0.0;
    int nusable = 0, i, j, used[MAXN];
    uint64_t pos = 0;

    /* usable rails: weight > 0, first occurrence of each rail id */
    for (i = 0; i < in->n; i++) {
        int dup = 0;
        for (j = 0; j < i; j++)
            if (in->rails[j] == in->rails[i] && usable(in->weights[j]))
                dup = 1;
        if (usable(in->weights[i]) && !dup) {
            nusable++;
            wall += in->weights[i];
            if (in->weights[i] > maxw)
                maxw = in->weights[i];
        }
    }
    if (in->len == 0 || nusable == 0) {
        if (count != 0) {
            snprintf(why, sizeof(why), "expected 0 chunks, got %d", count);
            return why;
        }
        return NULL;
    }
    if (count < 1 || count > nusable) {
        snprintf(why, sizeof(why), "chunk count %d outside [1,%d]", count, nusable);
        return why;
    }
    for (i = 0; i < count; i++) {
        int idx = -1;
        if (c[i].offset != pos) {
            snprintf(why, sizeof(why), "chunk %d at offset %llu, expected %llu (gap/overlap)",
                     i, (unsigned long long)c[i].offset, (unsigned long long)pos);
            return why;
        }
        if (c[i].len == 0) {
            snprintf(why, sizeof(why), "chunk %d is empty", i);
            return why;
        }
        if (i > 0 && (in->base + c[i].offset) % align != 0) {
            snprintf(why, sizeof(why), "inner edge %llu not aligned to %llu",
                     (unsigned long long)c[i].offset, (unsigned long long)align);
            return why;
        }
        if (count > 1 && c[i].len < min_chunk) {
            snprintf(why, sizeof(why), "chunk %d of %llu bytes < min_chunk %llu", i,
                     (unsigned long long)c[i].len, (unsigned long long)min_chunk);
            return why;
        }
        for (j = 0; j < in->n; j++)
            if (in->rails[j] == c[i].rail && usable(in->weights[j])) {
                idx = j;
                break;
            }
        if (idx < 0) {
            snprintf(why, sizeof(why), "chunk %d on rail %d, which is not usable", i, c[i].rail);
            return why;
        }
        used[i] = idx;
        for (j = 0; j < i; j++)
            if (c[j].rail == c[i].rail) {
                snprintf(why, sizeof(why), "rail %d has two chunks", c[i].rail);
                return why;
            }
        /* ascending offsets follow the input order of rails */
        if (i > 0 && used[i] <= used[i - 1]) {
            snprintf(why, sizeof(why), "chunks not in input rail order");
            return why;
        }
        wused += in->weights[idx];
        pos += c[i].len;
    }
    if (pos != in->len) {
        snprintf(why, sizeof(why), "chunks cover %llu of %zu bytes", (unsigned long long)pos,
                 in->len);
        return why;
    }
    if (nusable == 1 && count != 1) {
        snprintf(why, sizeof(why), "one usable rail but %d chunks", count);
        return why;
    }
    if ((uint64_t)in->len < 2 * min_chunk) {
        if (count != 1) {
            snprintf(why, sizeof(why), "len < 2*min_chunk but %d chunks", count);
            return why;
        }
        if (in->weights[used[0]] != maxw) {
            snprintf(why, sizeof(why), "single chunk on rail %d, not the heaviest", c[0].rail);
            return why;
        }
        return NULL;
    }
    /* weight shares over the rails used */
    for (i = 0; i < count; i++) {
        double ideal = (double)in->len * (in->weights[used[i]] / wused);
        double dev = fabs((double)c[i].len - ideal);
        if (dev > (double)align + 1e-9 * (double)in->len + 1e-6) {
            snprintf(why, sizeof(why), "rail %d share %llu, ideal %.1f: off by %.1f > align",
                     c[i].rail, (unsigned long long)c[i].len, ideal, dev);
            return why;
        }
    }
    /* a usable rail left out must have been too small for the message:
     * its ideal share over all usable rails < min_chunk + align */
    for (j = 0; j < in->n; j++) {
        int in_plan = 0, dup = 0, k;
        double ideal;
        if (!usable(in->weights[j]))
            continue;
        for (k = 0; k < j; k++)
            if (in->rails[k] == in->rails[j] && usable(in->weights[k]))
                dup = 1;
        if (dup)
            continue;
        for (i = 0; i < count; i++)
            if (used[i] == j)
                in_plan = 1;
        if (in_plan)
            continue;
        ideal = (double)in->len * (in->weights[j] / wall);
        if (ideal >= (double)(min_chunk + align) * (1.0 + 1e-12) + 1e-6) {
            snprintf(why, sizeof(why),
                     "rail %d dropped although its ideal share %.1f >= min_chunk+align %llu",
                     in->rails[j], ideal, (unsigned long long)(min_chunk + align));
            return why;
        }
    }
    return NULL;
}

/* Run the planner (with a guard entry past n to catch overruns) and check. */
static int run_case(const plan_input_t *in, const char *name, int verbose, int *count_p,
                    mdr_chunk_t *out)
{
    mdr_chunk_t chunks[MAXN + 1];
    const char *why;
    char desc[512];
    int count, i;

    for (i = 0; i <= MAXN; i++) {
        chunks[i].rail = -12345;
        chunks[i].offset = 0xdeadbeef;
        chunks[i].len = 0xdeadbeef;
    }
    count = mdr_stripe_plan(in->rails, in->weights, in->n, in->base, in->len, &in->params,
                            chunks);
    why = check_plan(in, chunks, count);
    if (!why && (chunks[in->n].rail != -12345 || chunks[in->n].len != 0xdeadbeef))
        why = "planner wrote past chunks[n-1]";
    if (why) {
        failures++;
        if (printed_failures++ < 30) {
            describe(in, desc, sizeof(desc));
            printf("FAIL %s: %s [%s]\n", name, why, desc);
            for (i = 0; i < count && i < MAXN; i++)
                printf("     chunk %d: rail %d offset %llu len %llu\n", i, chunks[i].rail,
                       (unsigned long long)chunks[i].offset, (unsigned long long)chunks[i].len);
        }
        return 0;
    }
    if (verbose)
        printf("ok   %s (%d chunk%s)\n", name, count, count == 1 ? "" : "s");
    if (count_p)
        *count_p = count;
    if (out)
        memcpy(out, chunks, sizeof(chunks[0]) * (size_t)(count > 0 ? count : 0));
    return 1;
}

static void expect(int cond, const char *name)
{
    if (cond) {
        printf("ok   %s\n", name);
    } else {
        printf("FAIL %s\n", name);
        failures++;
    }
}

static void set_input(plan_input_t *in, int n, const double *w, uintptr_t base, size_t len,
                      size_t align, size_t min_chunk)
{
    int i;
    memset(in, 0, sizeof(*in));
    in->n = n;
    for (i = 0; i < n; i++) {
        in->rails[i] = i;
        in->weights[i] = w[i];
    }
    in->base = base;
    in->len = len;
    in->params.align = align;
    in->params.min_chunk = min_chunk;
}

/* xorshift64*: fixed seed, same sequence on every machine */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double rng_unit(void)
{
    return (double)(rng() >> 11) * (1.0 / 9007199254740992.0);
}

static void edge_cases(void)
{
    static const double two[] = {1, 1};
    static const double eight[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const double mixed[] = {3, 0, -1, 1};
    static const double none[] = {0, -2, 0};
    static const double huge_tiny[] = {1e9, 1e-9};
    static const double tiny_huge[] = {1e-9, 1e9};
    const size_t A = 4096, M = 16384;
    plan_input_t in;
    mdr_chunk_t out[MAXN + 1];
    int count = -1;
    const size_t lens[] = {0, 1, A - 1, A, 2 * M - 1, 2 * M, 2 * M + 1, 64u << 20};
    const char *lname[] = {"0", "1", "align-1", "align", "2*min-1", "2*min", "2*min+1", "64MiB"};
    const uintptr_t bases[] = {0, 4096 * 7, 1, 4095, 0x7f12345678ab};
    char name[128];
    size_t li, bi;

    for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        for (bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
            set_input(&in, 2, two, bases[bi], lens[li], A, M);
            snprintf(name, sizeof(name), "2 equal rails, len %s, base 0x%lx", lname[li],
                     (unsigned long)bases[bi]);
            run_case(&in, name, 1, NULL, NULL);
            set_input(&in, 8, eight, bases[bi], lens[li], A, M);
            snprintf(name, sizeof(name), "8 rails, len %s, base 0x%lx", lname[li],
                     (unsigned long)bases[bi]);
            run_case(&in, name, 1, NULL, NULL);
            set_input(&in, 1, two, bases[bi], lens[li], A, M);
            snprintf(name, sizeof(name), "1 rail, len %s, base 0x%lx", lname[li],
                     (unsigned long)bases[bi]);
            run_case(&in, name, 1, &count, out);
        }
    }

    /* direct expectations on top of the properties */
    set_input(&in, 0, two, 0, 1000, A, M);
    expect(mdr_stripe_plan(in.rails, in.weights, 0, 0, 1000, &in.params, out) == 0,
           "n == 0: no chunk");
    set_input(&in, 2, two, 0, 0, A, M);
    expect(mdr_stripe_plan(in.rails, in.weights, 2, 0, 0, &in.params, out) == 0,
           "len == 0: no chunk");
    set_input(&in, 3, none, 0, 1 << 20, A, M);
    expect(run_case(&in, "zero/negative weights only", 0, &count, out) && count == 0,
           "zero/negative weights only: no chunk");

    set_input(&in, 1, two, 0, 64u << 20, A, M);
    expect(run_case(&in, "1 rail 64MiB", 0, &count, out) && count == 1 && out[0].rail == 0 &&
               out[0].len == (64u << 20),
           "1 rail, 64 MiB: exactly one chunk of the whole message");

    set_input(&in, 2, two, 0, 1 << 20, A, M);
    expect(run_case(&in, "2x1 1MiB", 0, &count, out) && count == 2 &&
               out[0].len == 512 * 1024 && out[1].len == 512 * 1024,
           "2 equal rails, 1 MiB aligned: two halves of 512 KiB");

    set_input(&in, 2, (const double[]){3, 1}, 0, 1 << 20, A, M);
    expect(run_case(&in, "3:1 1MiB", 0, &count, out) && count == 2 &&
               out[0].len == 768 * 1024 && out[1].len == 256 * 1024,
           "weights 3,1 on 1 MiB: 768 KiB + 256 KiB");

    set_input(&in, 8, eight, 0, 64u << 20, A, M);
    expect(run_case(&in, "8 rails 64MiB", 0, &count, out) && count == 8,
           "8 rails, 64 MiB: every rail gets a chunk");

    set_input(&in, 4, mixed, 123, 1 << 20, A, M);
    expect(run_case(&in, "mixed weights", 0, &count, out) && count == 2 && out[0].rail == 0 &&
               out[1].rail == 3,
           "weights 3,0,-1,1: rails 1 and 2 unused");

    set_input(&in, 2, huge_tiny, 0, 64u << 20, A, M);
    expect(run_case(&in, "huge+tiny", 0, &count, out) && count == 1 && out[0].rail == 0,
           "one huge and one tiny weight: tiny rail dropped, one chunk on the huge one");
    set_input(&in, 2, tiny_huge, 0, 64u << 20, A, M);
    expect(run_case(&in, "tiny+huge", 0, &count, out) && count == 1 && out[0].rail == 1,
           "tiny then huge weight: one chunk on the huge rail");

    set_input(&in, 2, two, 0, 2 * M - 1, A, M);
    expect(run_case(&in, "below 2*min", 0, &count, out) && count == 1,
           "just under 2*min_chunk: one chunk");

    /* duplicate rail id is used once */
    set_input(&in, 3, (const double[]){1, 1, 1}, 0, 1 << 20, A, M);
    in.rails[2] = 0;
    expect(run_case(&in, "duplicate rail", 0, &count, out) && count == 2,
           "rail listed twice gets one chunk");

    /* NaN and infinity are not usable weights */
    set_input(&in, 3, (const double[]){NAN, INFINITY, 2}, 0, 1 << 20, A, M);
    expect(run_case(&in, "nan/inf", 0, &count, out) && count == 1 && out[0].rail == 2,
           "NaN and inf weights ignored");

    /* align larger than the message: no inner aligned edge exists */
    set_input(&in, 2, two, 1, 1 << 20, 1u << 22, 1);
    expect(run_case(&in, "align > len", 0, &count, out) && count == 1,
           "align larger than the message: one chunk");

    /* align 1 / min_chunk 0 degenerate params */
    set_input(&in, 3, (const double[]){1, 1, 1}, 0, 10, 1, 0);
    expect(run_case(&in, "align 1 min 0", 0, &count, out) && count == 3,
           "align 1, min_chunk 0: 10 bytes over 3 rails");

    /* unaligned base: inner edges land on aligned addresses */
    set_input(&in, 2, two, 0x1001, 1 << 20, A, M);
    expect(run_case(&in, "unaligned base", 0, &count, out) && count == 2 &&
               (0x1001 + out[1].offset) % A == 0,
           "unaligned base: inner edge aligned in address space");
}

static void random_cases(void)
{
    const int iterations = 200000;
    plan_input_t in;
    int it, i, ok = 0;
    int before = failures;

    for (it = 0; it < iterations; it++) {
        int kind = (int)(rng() % 8);
        memset(&in, 0, sizeof(in));
        in.n = 1 + (int)(rng() % 8);
        for (i = 0; i < in.n; i++) {
            in.rails[i] = (int)(rng() % 32);
            switch (rng() % 10) {
            case 0: in.weights[i] = 0.0; break;
            case 1: in.weights[i] = -rng_unit() * 5; break;
            case 2: in.weights[i] = 1e-6 + rng_unit() * 1e-3; break;
            case 3: in.weights[i] = 1e6 * (1 + rng_unit()); break;
            default: in.weights[i] = 0.01 + rng_unit() * 10; break;
            }
        }
        if (kind == 0) /* distinct rails, as the core passes them */
            for (i = 0; i < in.n; i++)
                in.rails[i] = i;
        in.base = (uintptr_t)rng();
        if (rng() % 4 == 0)
            in.base &= ~(uintptr_t)4095;
        in.params.align = (size_t)1 << (rng() % 17);
        in.params.min_chunk = (size_t)(rng() % 4 == 0 ? rng() % 64 : rng() % (1u << 20));
        /* lengths log-uniform up to 64 MiB, sometimes near 2*min_chunk */
        if (kind == 1 && in.params.min_chunk >= 2) {
            in.len = 2 * in.params.min_chunk + (size_t)(rng() % 5) - 2;
        } else {
            int bits = (int)(rng() % 27);
            in.len = (size_t)(rng() % ((uint64_t)1 << bits)) + (rng() % 2);
        }
        if (run_case(&in, "random", 0, NULL, NULL))
            ok++;
    }
    printf("%s random plans: %d of %d satisfy every property (seed fixed)\n",
           failures == before ? "ok  " : "FAIL", ok, iterations);
}

static void parse_cases(void)
{
    double w[8];
    const char *why = NULL;
    int n;
    static const char *bad[] = {"", "1,,2", "0", "-1", "abc", "1,", ",1", "1 2", "1;2",
                                "nan", "inf", "1e", ".", "1,0", "2,-3", "1,2,3,4,5,6,7,8,9"};
    size_t i;
    char name[128];

    memset(w, 0, sizeof(w));
    n = mdr_stripe_parse_weights("3,1", w, 8, &why);
    expect(n == 2 && w[0] == 3.0 && w[1] == 1.0, "parse \"3,1\" -> 3, 1");
    n = mdr_stripe_parse_weights("2.5, 1", w, 8, &why);
    expect(n == 2 && w[0] == 2.5 && w[1] == 1.0, "parse \"2.5, 1\" -> 2.5, 1");
    n = mdr_stripe_parse_weights(" 0.125 ,4 ,1e2 ", w, 8, &why);
    expect(n == 3 && w[0] == 0.125 && w[1] == 4.0 && w[2] == 100.0,
           "parse \" 0.125 ,4 ,1e2 \" -> 0.125, 4, 100");
    n = mdr_stripe_parse_weights("1,2,3,4,5,6,7,8", w, 8, &why);
    expect(n == 8 && w[7] == 8.0, "parse 8 weights with max 8");

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double keep[8] = {42, 42, 42, 42, 42, 42, 42, 42};
        why = NULL;
        n = mdr_stripe_parse_weights(bad[i], keep, 8, &why);
        snprintf(name, sizeof(name), "reject \"%s\" (%s), outputs untouched", bad[i],
                 why ? why : "no reason");
        expect(n == -1 && why != NULL && keep[0] == 42 && keep[1] == 42, name);
    }
    why = NULL;
    n = mdr_stripe_parse_weights("1,1,1", w, 2, &why);
    expect(n == -1 && why != NULL, "reject 3 weights with max 2");
    n = mdr_stripe_parse_weights(NULL, w, 2, &why);
    expect(n == -1, "reject NULL list");
}

int main(void)
{
    edge_cases();
    random_cases();
    parse_cases();
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("all stripe checks passed\n");
    return 0;
}
