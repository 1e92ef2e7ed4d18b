/*
 * The table of registered regions behind software puts, shared by the
 * drivers whose target checks a put itself (tcp, shm, and ucx's key
 * checks).  A region is [base, base+len) with its access bits, filed under
 * a small id.  Its packed key is tag << 32 | id: the id finds the slot in
 * one load, the tag is 32 bits drawn from getrandom(2) for each
 * registration (never the id's previous tag), so a key read from one
 * rendezvous says nothing about the next one's, and a key kept after its
 * region was removed fails (unless a later registration of the same id
 * drew the same tag: 2^-32 per reuse, and then it still meets the peer
 * binding below).
 *
 * A region is also bound to the one peer it was offered to (rkey_pack,
 * rails/rail.h): mdr_region_check_put refuses a put that comes from any
 * other peer, and one that was never offered, however good its key and
 * range.  The binding is the peer's uuid, not an ep, so a put on a
 * reconnected ep of the same peer still lands.
 *
 * A driver embeds an mdr_region_t in its struct mdr_memh and an
 * mdr_region_tab_t in its struct mdr_rail; what else a registration holds
 * (a CMA mirror, a ucp_mem_h, a reference count) stays in the driver.
 */
#ifndef MDR_RAILS_REGION_H
#define MDR_RAILS_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "madrail.h"

typedef struct mdr_region {
    uint32_t id;     /* index in the table */
    uint32_t gen;    /* the key's random tag (named gen for the drivers that
                      * carry it apart from the id: ucx, shm's mirror) */
    int bound;       /* rkey_pack named a peer: puts only from that one */
    uint64_t peer;   /* its uuid, when bound */
    uintptr_t base;
    size_t len;
    unsigned access; /* MDR_MEM_* (rails/rail.h) */
} mdr_region_t;

typedef struct mdr_region_tab {
    mdr_region_t **slots; /* id -> region, NULL while the id is free */
    uint32_t *gen;        /* id -> the tag it had last (the next must differ) */
    uint32_t *free_ids;   /* ids to hand out again, last freed first */
    uint32_t n;           /* ids handed out so far (in use or free) */
    uint32_t cap;
    uint32_t nfree;
    uint32_t rnd[64];     /* random tags drawn ahead: one getrandom per 64 */
    uint32_t nrnd;        /* tags left in rnd */
} mdr_region_tab_t;

/* Do [addr, addr+count) lie inside [base, base+len)?  (No overflow.) */
static inline int mdr_region_covers(uint64_t base, uint64_t len, uint64_t addr, uint64_t count)
{
    return addr >= base && count <= len && addr - base <= len - count;
}

/* Is [addr, addr+len) a range mem_reg may record (not NULL unless empty,
 * no wrap-around)? */
static inline int mdr_region_args_ok(const void *addr, size_t len)
{
    return (addr != NULL || len == 0) && (uintptr_t)addr + len >= (uintptr_t)addr;
}

/* The packed key of a region: tag << 32 | id. */
static inline uint64_t mdr_region_key(const mdr_region_t *r)
{
    return ((uint64_t)r->gen << 32) | r->id;
}

/* File r (base, len, access) under a free id with a fresh random tag,
 * bound to no peer yet; fills r->id and r->gen.  MADRAIL_ERR_NOMEM, or
 * MADRAIL_ERR_NORESOURCE after 2^31 ids or when no random bytes can be
 * had; nothing is logged. */
madrail_status_t mdr_region_add(mdr_region_tab_t *tab, mdr_region_t *r, uintptr_t base,
                                size_t len, unsigned access);
/* Is r the region filed under its id (not removed, not another table's)? */
int mdr_region_owned(const mdr_region_tab_t *tab, const mdr_region_t *r);
/* Take r (owned) out of the table: its id is free again and its key dead.
 * Returns a tag that is not r's (for a mirror of the table to mark the
 * entry with). */
uint32_t mdr_region_remove(mdr_region_tab_t *tab, mdr_region_t *r);
/* The region a packed key names, if it is registered for remote write;
 * else NULL with *why_p set. */
mdr_region_t *mdr_region_lookup(const mdr_region_tab_t *tab, uint64_t key, const char **why_p);
/* Offer r to the peer of uuid peer: from now on only its puts land in r
 * (a cached registration offered to another peer moves to that one). */
static inline void mdr_region_bind(mdr_region_t *r, uint64_t peer)
{
    r->peer = peer;
    r->bound = 1;
}
/* May a put of count bytes at raddr with this key, from the peer of uuid
 * from, land here?  The region, or NULL with *why_p set. */
mdr_region_t *mdr_region_check_put(const mdr_region_tab_t *tab, uint64_t key, uint64_t raddr,
                                   uint64_t count, uint64_t from, const char **why_p);
/* Hand every region still filed to release (may be NULL), then free the
 * table; it is empty and reusable afterwards. */
void mdr_region_tab_cleanup(mdr_region_tab_t *tab, void (*release)(mdr_region_t *r, void *arg),
                            void *arg);

/* The reasons lookup and check_put give (drivers checking a key elsewhere,
 * such as shm's CMA path, use the same words). */
extern const char mdr_region_why_stale[];
extern const char mdr_region_why_access[];
extern const char mdr_region_why_range[];
extern const char mdr_region_why_peer[];
extern const char mdr_region_why_unbound[];

#endif /* MDR_RAILS_REGION_H */
