/*
 * Unit test of the open-addressing hash map (src/util/hash.c).  Besides the
 * API it checks the table's own invariants after each phase by scanning the
 * slots: `used` counts every occupied slot (live + tombstones), `count` the
 * live ones, the load never passes 70%, and the capacity stays a power of
 * two.  A random workload is compared against a plain reference array.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

#include "unit_check.h"

static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rng(void)
{
    /* xorshift64*: only needs to be reproducible, not good */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* Distinct keys for distinct i: multiply by an odd constant, xor a constant. */
static uint64_t key_of(uint64_t i)
{
    return (i * 0x9e3779b97f4a7c15ull) ^ 0x5555aaaa5555aaaaull;
}

/* Scan the slots; returns 1 when the bookkeeping matches. */
static int invariants(const mdr_hash_t *h, const char *when)
{
    size_t i, occupied = 0, live = 0;
    int ok = 1;

    if (h->cap == 0 || (h->cap & (h->cap - 1)) != 0) {
        printf("  %s: capacity %zu not a power of two\n", when, h->cap);
        return 0;
    }
    for (i = 0; i < h->cap; i++) {
        if (h->vals[i] == NULL)
            continue;
        occupied++;
        if (mdr_hash_get(h, h->keys[i]) == h->vals[i])
            live++;
    }
    if (occupied != h->used || live != h->count) {
        printf("  %s: used %zu (scan %zu), count %zu (scan %zu)\n", when, h->used, occupied,
               h->count, live);
        ok = 0;
    }
    if (h->used * 10 > h->cap * 7) {
        printf("  %s: load %zu/%zu over 70%%\n", when, h->used, h->cap);
        ok = 0;
    }
    return ok;
}

static void test_basic(void)
{
    mdr_hash_t h;
    int a, b, c;
    madrail_status_t st;

    st = mdr_hash_init(&h, 4);
    check(st == MADRAIL_OK && h.cap >= 4 && h.count == 0, "init (cap %zu)", h.cap);
    check(mdr_hash_get(&h, 1) == NULL, "get on empty table");
    check(mdr_hash_put(&h, 1, &a) == MADRAIL_OK, "put 1");
    check(mdr_hash_put(&h, 0, &b) == MADRAIL_OK, "put key 0");
    check(mdr_hash_put(&h, UINT64_MAX, &c) == MADRAIL_OK, "put key UINT64_MAX");
    check(mdr_hash_get(&h, 1) == &a && mdr_hash_get(&h, 0) == &b &&
              mdr_hash_get(&h, UINT64_MAX) == &c,
          "get returns what was put");
    check(h.count == 3, "count 3 (%zu)", h.count);
    check(mdr_hash_get(&h, 2) == NULL, "absent key");

    check(mdr_hash_put(&h, 1, &c) == MADRAIL_OK && mdr_hash_get(&h, 1) == &c && h.count == 3,
          "replace keeps count, returns new value");
    check(mdr_hash_put(&h, 5, NULL) == MADRAIL_ERR_INVALID && mdr_hash_get(&h, 5) == NULL,
          "NULL value rejected");

    check(mdr_hash_del(&h, 1) == &c && mdr_hash_get(&h, 1) == NULL && h.count == 2,
          "del returns value and removes");
    check(mdr_hash_del(&h, 1) == NULL, "del twice returns NULL");
    check(mdr_hash_del(&h, 77) == NULL && h.count == 2, "del of absent key");
    check(mdr_hash_get(&h, 0) == &b && mdr_hash_get(&h, UINT64_MAX) == &c,
          "other keys survive a delete");
    check(invariants(&h, "basic"), "invariants after basic ops");
    mdr_hash_cleanup(&h);
    check(h.cap == 0 && mdr_hash_get(&h, 0) == NULL, "cleanup empties");

    /* A zero-initialized (or cleaned-up) table works. */
    check(mdr_hash_put(&h, 9, &a) == MADRAIL_OK && mdr_hash_get(&h, 9) == &a,
          "put into zeroed table");
    mdr_hash_cleanup(&h);
}

static void test_growth(void)
{
    mdr_hash_t h;
    size_t i, caps_seen = 0, lastcap;
    int ok = 1;
    static char vals[1];

    mdr_hash_init(&h, 0);
    lastcap = h.cap;
    for (i = 0; i < 5000; i++) { /* sequential keys: the mixer must spread them */
        if (mdr_hash_put(&h, i, vals + 0) != MADRAIL_OK)
            ok = 0;
        if (h.cap != lastcap) {
            caps_seen++;
            if (h.cap != 2 * lastcap)
                ok = 0;
            lastcap = h.cap;
        }
        if (h.used * 10 > h.cap * 7)
            ok = 0;
    }
    check(ok, "5000 sequential puts: capacity doubles, load stays <= 70%%");
    check(caps_seen >= 9 && h.cap >= 5000 * 10 / 7 && h.cap <= 4 * 5000,
          "grew %zu times to cap %zu", caps_seen, h.cap);
    for (i = 0; i < 5000; i++)
        if (mdr_hash_get(&h, i) != vals)
            ok = 0;
    check(ok && h.count == 5000, "all 5000 found after growth");
    check(invariants(&h, "growth"), "invariants after growth");
    mdr_hash_cleanup(&h);
}

#define NREF 100000

static void test_random(void)
{
    static void *ref[NREF];
    static char tokens[NREF];
    mdr_hash_t h;
    size_t i, idx, live = 0, mismatches = 0, op;
    void *got;

    memset(ref, 0, sizeof(ref));
    mdr_hash_init(&h, 16);
    /* 100k random keys inserted. */
    for (i = 0; i < NREF; i++) {
        idx = (size_t)(rng() % NREF);
        if (ref[idx] == NULL)
            live++;
        ref[idx] = &tokens[(idx + i) % NREF]; /* values change on replace */
        if (mdr_hash_put(&h, key_of(idx), ref[idx]) != MADRAIL_OK)
            mismatches++;
    }
    /* 300k mixed operations. */
    for (op = 0; op < 3 * NREF; op++) {
        idx = (size_t)(rng() % NREF);
        switch (rng() % 4) {
        case 0:
        case 1:
            got = mdr_hash_get(&h, key_of(idx));
            if (got != ref[idx])
                mismatches++;
            break;
        case 2:
            got = mdr_hash_del(&h, key_of(idx));
            if (got != ref[idx])
                mismatches++;
            if (ref[idx] != NULL)
                live--;
            ref[idx] = NULL;
            break;
        default:
            if (ref[idx] == NULL)
                live++;
            ref[idx] = &tokens[(idx * 7 + op) % NREF];
            if (mdr_hash_put(&h, key_of(idx), ref[idx]) != MADRAIL_OK)
                mismatches++;
            break;
        }
    }
    check(mismatches == 0, "random workload matches the reference (%zu mismatches)", mismatches);
    check(h.count == live, "count %zu == reference live %zu", h.count, live);
    mismatches = 0;
    for (i = 0; i < NREF; i++)
        if (mdr_hash_get(&h, key_of(i)) != ref[i])
            mismatches++;
    check(mismatches == 0, "full sweep against reference (%zu mismatches)", mismatches);
    check(invariants(&h, "random"), "invariants after random workload (cap %zu used %zu count %zu)",
          h.cap, h.used, h.count);

    /* Delete a key in the middle of a chain (its successor slot is
     * occupied): it leaves a tombstone, and putting the key back reuses that
     * slot instead of taking a new one. */
    for (i = 0; i < h.cap; i++) {
        idx = (i + 1) & (h.cap - 1);
        if (h.vals[i] != NULL && mdr_hash_get(&h, h.keys[i]) == h.vals[i] && h.vals[idx] != NULL)
            break;
    }
    if (i < h.cap) {
        uint64_t k = h.keys[i];
        size_t used0 = h.used;
        void *v = mdr_hash_del(&h, k);
        check(v != NULL && h.used == used0 && h.vals[i] != NULL && mdr_hash_get(&h, k) == NULL,
              "mid-chain delete leaves a tombstone (used %zu -> %zu)", used0, h.used);
        check(mdr_hash_put(&h, k, v) == MADRAIL_OK && h.used == used0 && h.vals[i] == v,
              "put of an absent key reuses the tombstone in its chain (used %zu)", h.used);
    } else {
        check(0, "no mid-chain slot found");
    }
    mdr_hash_cleanup(&h);
}

#define CHURN_LIVE 20

static void test_churn(void)
{
    mdr_hash_t h;
    size_t i, j, maxcap = 0, bad = 0;
    static char v;
    uint64_t base = 1000;
    int ok = 1;

    mdr_hash_init(&h, 32);
    /* Keep 20 live keys while 200k distinct keys pass through.  At 20 live
     * keys a 64-slot table is 31% full, so chains form and deletes leave
     * tombstones; only rehashing at the same size (dropping tombstones)
     * keeps the capacity at 64 instead of growing without bound. */
    for (i = 0; i < CHURN_LIVE; i++)
        mdr_hash_put(&h, key_of(i), &v);
    for (i = CHURN_LIVE; i < 200000; i++) {
        if (mdr_hash_put(&h, key_of(i), &v) != MADRAIL_OK)
            bad++;
        if (mdr_hash_del(&h, key_of(i - CHURN_LIVE)) != &v)
            bad++;
        if (h.cap > maxcap)
            maxcap = h.cap;
        if (h.used * 10 > h.cap * 7 || h.count != CHURN_LIVE)
            ok = 0;
        if (i % 20011 == 0 && !invariants(&h, "churn"))
            ok = 0;
    }
    check(bad == 0 && ok, "churn: put/del succeed, count stays %d, load <= 70%%", CHURN_LIVE);
    check(maxcap <= 64, "churn: capacity stays bounded (max %zu)", maxcap);
    for (j = 200000 - CHURN_LIVE; j < 200000; j++)
        if (mdr_hash_get(&h, key_of(j)) != &v)
            bad++;
    for (j = 0; j < 200000 - CHURN_LIVE; j += 997)
        if (mdr_hash_get(&h, key_of(j)) != NULL)
            bad++;
    check(bad == 0, "churn: last %d present, deleted keys absent", CHURN_LIVE);
    mdr_hash_cleanup(&h);

    /* Tombstones in the middle of probe chains: keys that collide in a tiny
     * table, delete every other one, the rest must still be found. */
    mdr_hash_init(&h, 8);
    for (i = 0; i < 5; i++)
        mdr_hash_put(&h, base + i, &v);
    for (i = 0; i < 5; i += 2)
        mdr_hash_del(&h, base + i);
    for (i = 0; i < 5; i++)
        if ((mdr_hash_get(&h, base + i) != NULL) != (i % 2 == 1))
            bad++;
    check(bad == 0 && invariants(&h, "holes"), "holes in probe chains");
    for (i = 0; i < 5; i += 2) /* refill through tombstones */
        mdr_hash_put(&h, base + i, &v);
    for (i = 0; i < 5; i++)
        if (mdr_hash_get(&h, base + i) != &v)
            bad++;
    check(bad == 0 && h.count == 5 && invariants(&h, "refill"), "refill reuses tombstones");
    mdr_hash_cleanup(&h);
}

int main(void)
{
    test_basic();
    test_growth();
    test_random();
    test_churn();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
