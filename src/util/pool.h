/*
 * Bounce buffers in power-of-two size classes (64 B .. 4 MiB).  Freed
 * buffers go back to their class's free list (bounded per class) instead of
 * the allocator, so the steady state does no malloc on the message path.
 */
#ifndef MDR_POOL_H
#define MDR_POOL_H

#include <stddef.h>

#define MDR_POOL_MIN_SHIFT 6  /* 64 B */
#define MDR_POOL_MAX_SHIFT 22 /* 4 MiB; larger requests go straight to malloc */
#define MDR_POOL_NCLASSES (MDR_POOL_MAX_SHIFT - MDR_POOL_MIN_SHIFT + 1)

typedef struct mdr_pool {
    void *free[MDR_POOL_NCLASSES];      /* singly linked through the first word */
    unsigned nfree[MDR_POOL_NCLASSES];
    unsigned max_free;                  /* kept per class */
    size_t hits, misses;                /* statistics */
} mdr_pool_t;

void mdr_pool_init(mdr_pool_t *p, unsigned max_free_per_class);
void mdr_pool_cleanup(mdr_pool_t *p);
/* A buffer of at least len bytes (len 0 gives the smallest class); NULL on ENOMEM. */
void *mdr_pool_get(mdr_pool_t *p, size_t len);
/* Return a buffer obtained with mdr_pool_get(p, len) — same len. */
void mdr_pool_put(mdr_pool_t *p, void *buf, size_t len);
/* Class index for len, or -1 when len exceeds the largest class. */
int mdr_pool_class(size_t len);

#endif
