/*
 * Size-class pool of bounce buffers.  Each class is a LIFO free list linked
 * through the buffers' first word (no bookkeeping memory of its own), the
 * most recently returned buffer is handed out first (still warm in cache),
 * and each list is capped at max_free so a burst of large messages does not
 * pin memory forever.  Buffers are aligned to their size up to a page, so
 * page-sized and larger buffers register cleanly and stripe edges stay
 * page-aligned; requests beyond the largest class bypass the lists.
 */
#include "mdr_config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/pool.h"

#define MDR_POOL_PAGE 4096

int mdr_pool_class(size_t len)
{
    int c = 0;
    size_t sz = (size_t)1 << MDR_POOL_MIN_SHIFT;

    if (len > ((size_t)1 << MDR_POOL_MAX_SHIFT))
        return -1;
    while (sz < len) {
        sz <<= 1;
        c++;
    }
    return c;
}

void mdr_pool_init(mdr_pool_t *p, unsigned max_free_per_class)
{
    memset(p, 0, sizeof(*p));
    p->max_free = max_free_per_class;
}

void mdr_pool_cleanup(mdr_pool_t *p)
{
    void *buf, *next;
    int c;

    for (c = 0; c < MDR_POOL_NCLASSES; c++) {
        for (buf = p->free[c]; buf != NULL; buf = next) {
            memcpy(&next, buf, sizeof(next));
            free(buf);
        }
        p->free[c] = NULL;
        p->nfree[c] = 0;
    }
}

static void *mdr_pool_alloc(size_t len)
{
    size_t align = len < MDR_POOL_PAGE ? len : MDR_POOL_PAGE;
    void *buf;

    if (len > PTRDIFF_MAX) /* no allocator can serve it; fail before asking */
        return NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    /* align must be a power of two: true for classes; round up for big sizes */
    if (align & (align - 1))
        align = MDR_POOL_PAGE;
    if (posix_memalign(&buf, align, len ? len : 1) != 0)
        return NULL;
    return buf;
}

void *mdr_pool_get(mdr_pool_t *p, size_t len)
{
    int c = mdr_pool_class(len);
    void *buf;

    if (c < 0) {
        p->misses++;
        return mdr_pool_alloc(len);
    }
    buf = p->free[c];
    if (buf != NULL) {
        memcpy(&p->free[c], buf, sizeof(void *));
        p->nfree[c]--;
        p->hits++;
        return buf;
    }
    p->misses++;
    return mdr_pool_alloc((size_t)1 << (c + MDR_POOL_MIN_SHIFT));
}

void mdr_pool_put(mdr_pool_t *p, void *buf, size_t len)
{
    int c;

    if (buf == NULL)
        return;
    c = mdr_pool_class(len);
    if (c < 0 || p->nfree[c] >= p->max_free) {
        free(buf);
        return;
    }
    memcpy(buf, &p->free[c], sizeof(void *));
    p->free[c] = buf;
    p->nfree[c]++;
}
