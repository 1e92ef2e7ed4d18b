/*
 * The table of registered regions behind software puts, shared by the
 * drivers whose target checks a put itself (tcp, shm, and ucx's key
 * checks).  A region is [base, base+len) with its access bits, filed under
 * a small id; the id's generation changes when the region is removed, so
 * a packed key (generation << 32 | id) from an old rendezvous never
 * matches a newer region that reuses the id.
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
    uint32_t gen;    /* the id's generation when it was added */
    uintptr_t base;
    size_t len;
    unsigned access; /* MDR_MEM_* (rails/rail.h) */
} mdr_region_t;

typedef struct mdr_region_tab {
    mdr_region_t **slots; /* id -> region, NULL while the id is free */
    uint32_t *gen;        /* id -> current generation */
    uint32_t *free_ids;   /* ids to hand out again, last freed first */
    uint32_t n;           /* ids handed out so far (in use or free) */
    uint32_t cap;
    uint32_t nfree;
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

/* The packed key of a region: generation << 32 | id. */
static inline uint64_t mdr_region_key(const mdr_region_t *r)
{
    return ((uint64_t)r->gen << 32) | r->id;
}

/* File r (base, len, access) under a free id; fills r->id and r->gen.
 * MADRAIL_ERR_NOMEM, or MADRAIL_ERR_NORESOURCE after 2^31 ids; nothing is
 * logged. */
madrail_status_t mdr_region_add(mdr_region_tab_t *tab, mdr_region_t *r, uintptr_t base,
                                size_t len, unsigned access);
/* Is r the region filed under its id (not removed, not another table's)? */
int mdr_region_owned(const mdr_region_tab_t *tab, const mdr_region_t *r);
/* Take r (owned) out of the table: its id is free again and its generation
 * moves on.  Returns the id's new generation. */
uint32_t mdr_region_remove(mdr_region_tab_t *tab, mdr_region_t *r);
/* The region a packed key names, if it is registered for remote write;
 * else NULL with *why_p set. */
mdr_region_t *mdr_region_lookup(const mdr_region_tab_t *tab, uint64_t key, const char **why_p);
/* May a put of count bytes at raddr with this key land here?  The region,
 * or NULL with *why_p set. */
mdr_region_t *mdr_region_check_put(const mdr_region_tab_t *tab, uint64_t key, uint64_t raddr,
                                   uint64_t count, const char **why_p);
/* Hand every region still filed to release (may be NULL), then free the
 * table; it is empty and reusable afterwards. */
void mdr_region_tab_cleanup(mdr_region_tab_t *tab, void (*release)(mdr_region_t *r, void *arg),
                            void *arg);

/* The reasons lookup and check_put give (drivers checking a key elsewhere,
 * such as shm's CMA path, use the same words). */
extern const char mdr_region_why_stale[];
extern const char mdr_region_why_access[];
extern const char mdr_region_why_range[];

#endif /* MDR_RAILS_REGION_H */
