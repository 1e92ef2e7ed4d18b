/*
 * uint64 -> pointer map with open addressing and linear probing: one probe
 * sequence walks adjacent memory, which beats chained buckets for the small
 * keys the core looks up on every message (request ids, peer uuids).  Keys
 * are often sequential, so they go through a 64-bit mixer before masking
 * with the power-of-two capacity.  Deleted slots become tombstones; the
 * table grows (or rehashes in place, dropping tombstones, when most of the
 * load is tombstones) once live + tombstones pass 70%, so a probe always
 * reaches an empty slot.  A deletion whose successor slot is empty clears
 * its slot (and tombstones just before it) outright, since no probe chain
 * can run through it.
 */
#include "mdr_config.h"

#include <stdlib.h>

#include "util/hash.h"

#define MDR_HASH_MIN_CAP 8

static char mdr_hash_tomb_marker;
#define MDR_HASH_TOMB ((void *)&mdr_hash_tomb_marker)

static inline uint64_t mdr_hash_mix(uint64_t x)
{
    /* xor-shift / multiply finalizer: every input bit reaches every output bit. */
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

/* Capacity is at most SIZE_MAX/2+1; returns 0 on overflow. */
static size_t mdr_hash_pow2(size_t n)
{
    size_t c = MDR_HASH_MIN_CAP;

    while (c < n) {
        if (c > ((size_t)-1 >> 1))
            return 0;
        c <<= 1;
    }
    return c;
}

static int mdr_hash_over(size_t used, size_t cap)
{
    /* used / cap > 0.7, without floating point or overflow for sane caps */
    return used > cap / 10 * 7 + (cap % 10) * 7 / 10;
}

static madrail_status_t mdr_hash_alloc(mdr_hash_t *h, size_t cap)
{
    uint64_t *keys;
    void **vals;

    if (cap == 0 || cap > ((size_t)-1) / sizeof(uint64_t))
        return MADRAIL_ERR_NOMEM;
    keys = malloc(cap * sizeof(*keys));
    if (keys == NULL)
        goto err_keys;
    vals = calloc(cap, sizeof(*vals));
    if (vals == NULL)
        goto err_vals;
    h->keys = keys;
    h->vals = vals;
    h->cap = cap;
    h->count = 0;
    h->used = 0;
    return MADRAIL_OK;

err_vals:
    free(keys);
err_keys:
    return MADRAIL_ERR_NOMEM;
}

madrail_status_t mdr_hash_init(mdr_hash_t *h, size_t initial_cap)
{
    size_t cap = mdr_hash_pow2(initial_cap);

    if (h == NULL)
        return MADRAIL_ERR_INVALID;
    if (cap == 0)
        return MADRAIL_ERR_NOMEM;
    return mdr_hash_alloc(h, cap);
}

void mdr_hash_cleanup(mdr_hash_t *h)
{
    if (h == NULL)
        return;
    free(h->keys);
    free(h->vals);
    h->keys = NULL;
    h->vals = NULL;
    h->cap = h->count = h->used = 0;
}

/* Slot holding key, or SIZE_MAX. */
static size_t mdr_hash_find(const mdr_hash_t *h, uint64_t key)
{
    size_t mask, i, n;

    if (h->cap == 0)
        return (size_t)-1;
    mask = h->cap - 1;
    i = (size_t)mdr_hash_mix(key) & mask;
    for (n = 0; n < h->cap; n++, i = (i + 1) & mask) {
        if (h->vals[i] == NULL)
            return (size_t)-1;
        if (h->vals[i] != MDR_HASH_TOMB && h->keys[i] == key)
            return i;
    }
    return (size_t)-1;
}

/* Insert a key known to be absent into a table with no tombstones in its
 * path and room to spare (used during rehash). */
static void mdr_hash_insert_fresh(mdr_hash_t *h, uint64_t key, void *val)
{
    size_t mask = h->cap - 1, i = (size_t)mdr_hash_mix(key) & mask;

    while (h->vals[i] != NULL)
        i = (i + 1) & mask;
    h->keys[i] = key;
    h->vals[i] = val;
    h->count++;
    h->used++;
}

static madrail_status_t mdr_hash_rehash(mdr_hash_t *h, size_t newcap)
{
    mdr_hash_t nh;
    madrail_status_t st;
    size_t i;

    st = mdr_hash_alloc(&nh, newcap);
    if (st != MADRAIL_OK)
        return st;
    for (i = 0; i < h->cap; i++)
        if (h->vals[i] != NULL && h->vals[i] != MDR_HASH_TOMB)
            mdr_hash_insert_fresh(&nh, h->keys[i], h->vals[i]);
    free(h->keys);
    free(h->vals);
    *h = nh;
    return MADRAIL_OK;
}

madrail_status_t mdr_hash_put(mdr_hash_t *h, uint64_t key, void *val)
{
    size_t mask, i, n, tomb = (size_t)-1, newcap;
    madrail_status_t st;

    if (h == NULL || val == NULL)
        return MADRAIL_ERR_INVALID;
    if (h->cap == 0) { /* zero-initialized or cleaned up: start small */
        st = mdr_hash_alloc(h, MDR_HASH_MIN_CAP);
        if (st != MADRAIL_OK)
            return st;
    }

    mask = h->cap - 1;
    i = (size_t)mdr_hash_mix(key) & mask;
    for (n = 0; n < h->cap; n++, i = (i + 1) & mask) {
        if (h->vals[i] == NULL)
            break;
        if (h->vals[i] == MDR_HASH_TOMB) {
            if (tomb == (size_t)-1)
                tomb = i;
        } else if (h->keys[i] == key) {
            h->vals[i] = val; /* replace */
            return MADRAIL_OK;
        }
    }
    /* Absent.  Reusing a tombstone does not raise the load. */
    if (tomb != (size_t)-1) {
        h->keys[tomb] = key;
        h->vals[tomb] = val;
        h->count++;
        return MADRAIL_OK;
    }
    if (mdr_hash_over(h->used + 1, h->cap)) {
        /* Double when live entries alone fill over half the 70% budget;
         * otherwise the load is mostly tombstones: rehash at the same size. */
        newcap = h->cap;
        if (mdr_hash_over(2 * (h->count + 1), h->cap)) {
            if (h->cap > ((size_t)-1 >> 1))
                return MADRAIL_ERR_NOMEM;
            newcap = h->cap << 1;
        }
        st = mdr_hash_rehash(h, newcap);
        if (st != MADRAIL_OK)
            return st;
        mdr_hash_insert_fresh(h, key, val);
        return MADRAIL_OK;
    }
    /* The loop stops at an empty slot: the load limit keeps one free. */
    h->keys[i] = key;
    h->vals[i] = val;
    h->count++;
    h->used++;
    return MADRAIL_OK;
}

void *mdr_hash_get(const mdr_hash_t *h, uint64_t key)
{
    size_t i;

    if (h == NULL || h->count == 0)
        return NULL;
    i = mdr_hash_find(h, key);
    return i == (size_t)-1 ? NULL : h->vals[i];
}

void *mdr_hash_del(mdr_hash_t *h, uint64_t key)
{
    size_t i, mask;
    void *val;

    if (h == NULL)
        return NULL;
    i = mdr_hash_find(h, key);
    if (i == (size_t)-1)
        return NULL;
    mask = h->cap - 1;
    val = h->vals[i];
    h->count--;
    if (h->vals[(i + 1) & mask] == NULL) {
        /* End of a probe chain: empty this slot and the tombstones before it. */
        h->vals[i] = NULL;
        h->used--;
        i = (i - 1) & mask;
        while (h->vals[i] == MDR_HASH_TOMB) {
            h->vals[i] = NULL;
            h->used--;
            i = (i - 1) & mask;
        }
    } else {
        h->vals[i] = MDR_HASH_TOMB;
    }
    return val;
}
