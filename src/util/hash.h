/* Open-addressing hash map from uint64_t keys to non-NULL pointers. */
#ifndef MDR_HASH_H
#define MDR_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "madrail.h"

typedef struct mdr_hash {
    uint64_t *keys;
    void **vals;   /* NULL = empty slot; a tombstone is a private marker */
    size_t cap;    /* power of two */
    size_t count;  /* live entries */
    size_t used;   /* live + tombstones */
} mdr_hash_t;

madrail_status_t mdr_hash_init(mdr_hash_t *h, size_t initial_cap);
void mdr_hash_cleanup(mdr_hash_t *h);
/* Insert or replace; MADRAIL_ERR_NOMEM on growth failure. */
madrail_status_t mdr_hash_put(mdr_hash_t *h, uint64_t key, void *val);
void *mdr_hash_get(const mdr_hash_t *h, uint64_t key);
/* Remove and return the value, NULL if absent. */
void *mdr_hash_del(mdr_hash_t *h, uint64_t key);

#endif
