/*
 * Registration cache, one per rail.
 *
 * Identity mode (caching off, or the rail says registration is cheap):
 * every get registers exactly [addr, addr+len) and every put deregisters;
 * the entry is only a handle so that both modes share one interface.
 *
 * Cache mode keeps every region on one list in most-recently-used order
 * and looks a request up by a linear walk from the front.  That is
 * deliberate: the list is bounded by MADRAIL_RCACHE_MAX, hot regions sit at
 * the front so a hit costs a few steps, and a miss is paid for by the
 * registration it triggers (a real mem_reg costs tens of microseconds, a
 * walk of 1024 entries about one).  An interval tree would buy little and
 * cost correctness risk.  Regions are rounded out to whole pages, so
 * neighbouring buffers share a registration.  Unreferenced regions stay
 * registered until evicted, least recently used first, when the cache
 * holds more than max_regions; a referenced region is never evicted.
 * When mem_reg fails, every unreferenced region is dropped and the
 * registration tried once more (drivers run out of registrations).
 *
 * Entries are recycled through a small free list so that identity mode
 * does not call malloc per rendezvous.
 */
#include "mdr_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rcache.h"
#include "util/list.h"
#include "util/log.h"

#define MDR_RCACHE_FREE_MAX 64

struct mdr_rcache_entry {
    mdr_list_t link;  /* rc->entries (MRU first) or rc->free_entries */
    uintptr_t start;  /* registered region [start, end) */
    uintptr_t end;
    unsigned access;  /* MDR_MEM_* it was registered with */
    unsigned refcnt;
    int offered;      /* a referenced target offered to peer (see get_offer) */
    uint64_t peer;
    mdr_memh_t *memh;
};

struct mdr_rcache {
    const mdr_rail_ops_t *ops;
    mdr_rail_t *rail;
    int identity;
    size_t max_regions;
    uintptr_t page_mask;  /* page size - 1 */
    mdr_list_t entries;   /* every live entry; cache mode: MRU first */
    size_t nentries;
    mdr_list_t free_entries;
    unsigned nfree;
    mdr_rcache_stats_t stats;
    char name[64];        /* rail name, for messages */
};

static mdr_rcache_entry_t *mdr_rcache_entry_new(mdr_rcache_t *rc)
{
    mdr_list_t *l = mdr_list_pop_head(&rc->free_entries);
    if (l) {
        rc->nfree--;
        return mdr_container_of(l, mdr_rcache_entry_t, link);
    }
    return malloc(sizeof(mdr_rcache_entry_t));
}

static void mdr_rcache_entry_free(mdr_rcache_t *rc, mdr_rcache_entry_t *e)
{
    if (rc->nfree < MDR_RCACHE_FREE_MAX) {
        mdr_list_push_head(&rc->free_entries, &e->link);
        rc->nfree++;
    } else {
        free(e);
    }
}

/* Deregister and forget an entry that is on rc->entries. */
static void mdr_rcache_drop(mdr_rcache_t *rc, mdr_rcache_entry_t *e)
{
    mdr_list_del(&e->link);
    rc->nentries--;
    rc->ops->mem_dereg(rc->rail, e->memh);
    rc->stats.deregs++;
    mdr_rcache_entry_free(rc, e);
}

/* Evict unreferenced regions, least recently used first, until at most
 * `keep` entries remain or only referenced ones are left. */
static void mdr_rcache_evict(mdr_rcache_t *rc, size_t keep)
{
    mdr_list_t *it = rc->entries.prev;

    while (rc->nentries > keep && it != &rc->entries) {
        mdr_rcache_entry_t *e = mdr_container_of(it, mdr_rcache_entry_t, link);
        it = it->prev;
        if (e->refcnt == 0) {
            mdr_trace("rcache %s: evict [%#lx, %#lx)", rc->name, (unsigned long)e->start,
                      (unsigned long)e->end);
            mdr_rcache_drop(rc, e);
            rc->stats.evictions++;
        }
    }
}

madrail_status_t mdr_rcache_create(const mdr_rail_ops_t *ops, mdr_rail_t *rail, int enable,
                                   size_t max_regions, mdr_rcache_t **rc_p)
{
    mdr_rail_attr_t attr;
    mdr_rcache_t *rc;
    long page;

    /* a driver's operations are never NULL (mdr_rail_ops_check) */
    if (!ops || !rc_p) {
        mdr_error("rcache: no driver operations to register memory with");
        return MADRAIL_ERR_INVALID;
    }
    rc = calloc(1, sizeof(*rc));
    if (!rc) {
        mdr_error("rcache: out of memory");
        return MADRAIL_ERR_NOMEM;
    }
    memset(&attr, 0, sizeof(attr));
    ops->query(rail, &attr);
    snprintf(rc->name, sizeof(rc->name), "%s", attr.name[0] ? attr.name : ops->name);
    rc->ops = ops;
    rc->rail = rail;
    rc->identity = !enable || (attr.caps & MDR_RAIL_CAP_REG_CHEAP);
    rc->max_regions = max_regions;
    page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || (page & (page - 1)))
        page = 4096;
    rc->page_mask = (uintptr_t)page - 1;
    mdr_list_init(&rc->entries);
    mdr_list_init(&rc->free_entries);
    mdr_debug("rcache %s: %s, at most %zu regions", rc->name,
              rc->identity ? "identity (register per transfer)" : "caching", max_regions);
    *rc_p = rc;
    return MADRAIL_OK;
}

void mdr_rcache_destroy(mdr_rcache_t *rc)
{
    mdr_list_t *l;
    unsigned busy = 0;

    if (!rc)
        return;
    while ((l = mdr_list_pop_head(&rc->entries)) != NULL) {
        mdr_rcache_entry_t *e = mdr_container_of(l, mdr_rcache_entry_t, link);
        if (e->refcnt)
            busy++;
        rc->ops->mem_dereg(rc->rail, e->memh);
        rc->stats.deregs++;
        free(e);
    }
    if (busy)
        mdr_warn("rcache %s: %u registration(s) still in use at destroy, deregistered",
                 rc->name, busy);
    while ((l = mdr_list_pop_head(&rc->free_entries)) != NULL)
        free(mdr_container_of(l, mdr_rcache_entry_t, link));
    free(rc);
}

static madrail_status_t mdr_rcache_register(mdr_rcache_t *rc, uintptr_t start, uintptr_t end,
                                            unsigned access, mdr_rcache_entry_t **entry_p)
{
    mdr_rcache_entry_t *e;
    mdr_memh_t *memh = NULL;
    madrail_status_t st;

    e = mdr_rcache_entry_new(rc);
    if (!e) {
        mdr_error("rcache %s: out of memory", rc->name);
        return MADRAIL_ERR_NOMEM;
    }
    st = rc->ops->mem_reg(rc->rail, (void *)start, end - start, access, &memh);
    if (st != MADRAIL_OK && !rc->identity && rc->nentries > 0) {
        size_t before = rc->nentries;
        mdr_rcache_evict(rc, 0);
        if (rc->nentries < before) {
            mdr_debug("rcache %s: registration failed (%s), retrying after dropping %zu "
                      "unused region(s)",
                      rc->name, madrail_status_str(st), before - rc->nentries);
            st = rc->ops->mem_reg(rc->rail, (void *)start, end - start, access, &memh);
        }
    }
    if (st != MADRAIL_OK) {
        mdr_error("rcache %s: cannot register [%#lx, +%zu): %s", rc->name,
                  (unsigned long)start, (size_t)(end - start), madrail_status_str(st));
        mdr_rcache_entry_free(rc, e);
        return st;
    }
    rc->stats.regs++;
    e->start = start;
    e->end = end;
    e->access = access;
    e->refcnt = 1;
    e->offered = 0;
    e->memh = memh;
    mdr_list_push_head(&rc->entries, &e->link);
    rc->nentries++;
    *entry_p = e;
    return MADRAIL_OK;
}

madrail_status_t mdr_rcache_get(mdr_rcache_t *rc, void *addr, size_t len, unsigned access,
                                mdr_rcache_entry_t **entry_p)
{
    return mdr_rcache_get_offer(rc, addr, len, access, 0, 0, entry_p);
}

madrail_status_t mdr_rcache_get_offer(mdr_rcache_t *rc, void *addr, size_t len, unsigned access,
                                      int offer, uint64_t peer, mdr_rcache_entry_t **entry_p)
{
    uintptr_t a = (uintptr_t)addr, start, end, room;
    mdr_list_t *it;
    madrail_status_t st;

    if (!rc || !entry_p)
        return MADRAIL_ERR_INVALID;
    room = UINTPTR_MAX - rc->page_mask - 1; /* page rounding of the end must not wrap */
    if (a > room || len > room - a) {
        mdr_error("rcache %s: region [%p, +%zu) wraps around the address space", rc->name,
                  addr, len);
        return MADRAIL_ERR_INVALID;
    }

    if (rc->identity) {
        rc->stats.misses++;
        return mdr_rcache_register(rc, a, a + len, access, entry_p);
    }

    /* A zero-length request still needs a region to name. */
    end = a + (len ? len : 1);
    mdr_list_for_each(it, &rc->entries) {
        mdr_rcache_entry_t *e = mdr_container_of(it, mdr_rcache_entry_t, link);
        if (e->start <= a && e->end >= end && (e->access & access) == access) {
            /* a target still offered to another peer's live transfer is not
             * shared: offering it here would take it from that peer */
            if (offer && e->refcnt > 0 && e->offered && e->peer != peer)
                continue;
            if (offer) {
                e->offered = 1;
                e->peer = peer;
            }
            e->refcnt++;
            mdr_list_del(&e->link);
            mdr_list_push_head(&rc->entries, &e->link);
            rc->stats.hits++;
            *entry_p = e;
            return MADRAIL_OK;
        }
    }

    rc->stats.misses++;
    start = a & ~rc->page_mask;
    end = (end + rc->page_mask) & ~rc->page_mask;
    st = mdr_rcache_register(rc, start, end, access, entry_p);
    if (st != MADRAIL_OK)
        return st;
    if (offer) {
        (*entry_p)->offered = 1;
        (*entry_p)->peer = peer;
    }
    mdr_rcache_evict(rc, rc->max_regions);
    return MADRAIL_OK;
}

mdr_memh_t *mdr_rcache_memh(const mdr_rcache_entry_t *entry)
{
    return entry ? entry->memh : NULL;
}

void mdr_rcache_put(mdr_rcache_t *rc, mdr_rcache_entry_t *entry)
{
    if (!rc || !entry)
        return;
    if (entry->refcnt == 0) {
        mdr_error("rcache %s: put of region [%#lx, %#lx) that is not in use", rc->name,
                  (unsigned long)entry->start, (unsigned long)entry->end);
        return;
    }
    entry->refcnt--;
    if (entry->refcnt == 0)
        entry->offered = 0;
    if (rc->identity) {
        mdr_rcache_drop(rc, entry);
        return;
    }
    if (entry->refcnt == 0 && rc->nentries > rc->max_regions)
        mdr_rcache_evict(rc, rc->max_regions);
}

void mdr_rcache_get_stats(const mdr_rcache_t *rc, mdr_rcache_stats_t *stats)
{
    if (!rc || !stats)
        return;
    *stats = rc->stats;
}

size_t mdr_rcache_in_use(const mdr_rcache_t *rc)
{
    const mdr_list_t *it;
    size_t n = 0;

    if (!rc)
        return 0;
    for (it = rc->entries.next; it != &rc->entries; it = it->next)
        n += mdr_container_of(it, mdr_rcache_entry_t, link)->refcnt != 0;
    return n;
}
