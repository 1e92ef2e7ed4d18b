/*
 * Registration cache: one per rail.  The core asks for a registration of
 * [addr, addr+len) and gives it back when the transfer is done.  When the
 * rail says registration is cheap (MDR_RAIL_CAP_REG_CHEAP, e.g. tcp, loop)
 * or caching is disabled, every get registers and every put deregisters
 * (identity).  Otherwise regions are rounded to pages, kept with a reference
 * count after their last put, reused for any request they cover, and
 * evicted least-recently-used beyond max_regions.
 *
 * Caveat (documented in docs/): a cached region whose memory the
 * application frees and maps again elsewhere is not invalidated yet;
 * MADRAIL_RCACHE=0 turns caching off.
 */
#ifndef MDR_RCACHE_H
#define MDR_RCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "rails/rail.h"

typedef struct mdr_rcache mdr_rcache_t;
typedef struct mdr_rcache_entry mdr_rcache_entry_t;

typedef struct mdr_rcache_stats {
    uint64_t hits, misses, evictions, regs, deregs;
} mdr_rcache_stats_t;

madrail_status_t mdr_rcache_create(const mdr_rail_ops_t *ops, mdr_rail_t *rail, int enable,
                                   size_t max_regions, mdr_rcache_t **rc_p);
/* Deregisters everything (entries still referenced are logged and freed). */
void mdr_rcache_destroy(mdr_rcache_t *rc);
madrail_status_t mdr_rcache_get(mdr_rcache_t *rc, void *addr, size_t len, unsigned access,
                                mdr_rcache_entry_t **entry_p);
/* mdr_rcache_get for a region that will be offered to the peer of uuid
 * peer (offer = 1: rkey_pack binds a software-put region to one peer):
 * a cached region that a live transfer of another peer holds as an
 * offered target is not handed out, a new one is registered instead.
 * offer = 0 is mdr_rcache_get. */
madrail_status_t mdr_rcache_get_offer(mdr_rcache_t *rc, void *addr, size_t len, unsigned access,
                                      int offer, uint64_t peer, mdr_rcache_entry_t **entry_p);
mdr_memh_t *mdr_rcache_memh(const mdr_rcache_entry_t *entry);
void mdr_rcache_put(mdr_rcache_t *rc, mdr_rcache_entry_t *entry);
void mdr_rcache_get_stats(const mdr_rcache_t *rc, mdr_rcache_stats_t *stats);
/* Registrations some transfer holds (got, not put back yet); 0 when every
 * transfer gave its registrations back. */
size_t mdr_rcache_in_use(const mdr_rcache_t *rc);

#endif
