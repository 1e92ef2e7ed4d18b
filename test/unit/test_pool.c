/*
 * Unit test of the bounce-buffer pool (src/util/pool.c): class boundaries,
 * reuse of returned buffers (LIFO, counted as hits), requests above the
 * largest class, and the per-class bound on kept buffers.  Every buffer is
 * written over its full class size so ASan catches a short allocation.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/pool.h"

#include "unit_check.h"

static void test_classes(void)
{
    int c, ok = 1;
    size_t sz;

    check(mdr_pool_class(0) == 0, "class(0) = 0");
    check(mdr_pool_class(1) == 0, "class(1) = 0");
    check(mdr_pool_class(64) == 0, "class(64) = 0");
    check(mdr_pool_class(65) == 1, "class(65) = 1");
    check(mdr_pool_class(4096) == 6, "class(4096) = 6");
    check(mdr_pool_class(4097) == 7, "class(4097) = 7");
    check(mdr_pool_class((size_t)4 << 20) == MDR_POOL_NCLASSES - 1, "class(4 MiB) = last");
    check(mdr_pool_class(((size_t)4 << 20) + 1) == -1, "class(4 MiB + 1) = -1");
    check(mdr_pool_class(SIZE_MAX) == -1, "class(SIZE_MAX) = -1");
    for (c = 0; c < MDR_POOL_NCLASSES; c++) {
        sz = (size_t)1 << (c + MDR_POOL_MIN_SHIFT);
        if (mdr_pool_class(sz) != c || mdr_pool_class(sz - 1) != (c == 0 ? 0 : c) ||
            mdr_pool_class(sz + 1) != (c + 1 < MDR_POOL_NCLASSES ? c + 1 : -1))
            ok = 0;
        if (c > 0 && mdr_pool_class(sz / 2 + 1) != c)
            ok = 0;
    }
    check(ok, "every class boundary 2^k-1, 2^k, 2^k+1");
}

static void test_get_put(void)
{
    mdr_pool_t p;
    void *a, *b, *c, *d;
    size_t len;
    int c_, ok = 1;

    mdr_pool_init(&p, 4);
    check(p.hits == 0 && p.misses == 0, "init: counters zero");

    /* every class: usable over its full size, aligned */
    for (c_ = 0; c_ < MDR_POOL_NCLASSES; c_++) {
        len = (size_t)1 << (c_ + MDR_POOL_MIN_SHIFT);
        a = mdr_pool_get(&p, len / 2 + 1);
        if (a == NULL) {
            ok = 0;
            continue;
        }
        memset(a, 0x5a, len); /* the whole class, not just what was asked */
        if ((uintptr_t)a % (len < 4096 ? len : 4096) != 0)
            ok = 0;
        mdr_pool_put(&p, a, len / 2 + 1);
    }
    check(ok, "each class gives a full-size buffer aligned to min(size, 4096)");
    check(p.misses == MDR_POOL_NCLASSES && p.hits == 0, "first get per class is a miss (%zu)",
          p.misses);

    a = mdr_pool_get(&p, 100);
    check(p.hits == 1, "get(100) after put of the 128 class: hit");
    b = mdr_pool_get(&p, 100);
    check(b != NULL && b != a && p.misses == MDR_POOL_NCLASSES + 1, "second get(100): miss, new buffer");
    mdr_pool_put(&p, a, 100);
    mdr_pool_put(&p, b, 100);
    c = mdr_pool_get(&p, 128);
    d = mdr_pool_get(&p, 65);
    check(c == b && d == a, "returned buffers reused, last returned first");
    check(p.hits == 3, "hits counted (%zu)", p.hits);
    mdr_pool_put(&p, c, 128);
    mdr_pool_put(&p, d, 65);
    a = mdr_pool_get(&p, 64);
    check(a != c && a != d, "other class does not hand out a 128-byte buffer");
    mdr_pool_put(&p, a, 64);

    a = mdr_pool_get(&p, 0);
    check(a != NULL, "get(0) gives a buffer");
    mdr_pool_put(&p, a, 0);
    mdr_pool_put(&p, NULL, 100); /* no-op */

    mdr_pool_cleanup(&p);
    ok = 1;
    for (c_ = 0; c_ < MDR_POOL_NCLASSES; c_++)
        if (p.free[c_] != NULL || p.nfree[c_] != 0)
            ok = 0;
    check(ok, "cleanup empties every class");
}

static void test_large(void)
{
    mdr_pool_t p;
    size_t len = ((size_t)4 << 20) + 12345;
    size_t misses;
    char *a;
    int c, kept = 0;

    mdr_pool_init(&p, 8);
    misses = p.misses;
    a = mdr_pool_get(&p, len);
    check(a != NULL, "get above the largest class");
    if (a != NULL) {
        memset(a, 1, len);
        check(a[len - 1] == 1, "large buffer writable to its end");
    }
    check(p.misses == misses + 1, "large get counted as a miss");
    mdr_pool_put(&p, a, len);
    for (c = 0; c < MDR_POOL_NCLASSES; c++)
        kept += (int)p.nfree[c];
    check(kept == 0, "large buffer freed, not kept");
    a = mdr_pool_get(&p, len);
    check(p.hits == 0, "large get never hits");
    mdr_pool_put(&p, a, len);
    a = mdr_pool_get(&p, SIZE_MAX);
    check(a == NULL, "impossible size gives NULL");
    mdr_pool_cleanup(&p);
}

static void test_max_free(void)
{
    mdr_pool_t p;
    void *bufs[10];
    int i, c = mdr_pool_class(1000);
    size_t hits;

    mdr_pool_init(&p, 3);
    for (i = 0; i < 10; i++)
        bufs[i] = mdr_pool_get(&p, 1000);
    for (i = 0; i < 10; i++)
        mdr_pool_put(&p, bufs[i], 1000);
    check(p.nfree[c] == 3, "at most max_free=3 kept (%u)", p.nfree[c]);
    hits = p.hits;
    for (i = 0; i < 4; i++)
        bufs[i] = mdr_pool_get(&p, 1000);
    check(p.hits == hits + 3 && p.nfree[c] == 0, "3 hits then a miss (hits +%zu)", p.hits - hits);
    for (i = 0; i < 4; i++)
        mdr_pool_put(&p, bufs[i], 1000);
    mdr_pool_cleanup(&p);

    mdr_pool_init(&p, 0);
    bufs[0] = mdr_pool_get(&p, 200);
    mdr_pool_put(&p, bufs[0], 200);
    bufs[0] = mdr_pool_get(&p, 200);
    check(p.hits == 0 && p.misses == 2, "max_free=0 keeps nothing");
    mdr_pool_put(&p, bufs[0], 200);
    mdr_pool_cleanup(&p);
}

int main(void)
{
    test_classes();
    test_get_put();
    test_large();
    test_max_free();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
