/*
 * The registered-region table of the software-put drivers (region.h).  It
 * was written three times (tcp, shm, ucx) before it moved here; the one
 * copy keeps the three drivers' key checks identical.  Ids are reused last
 * freed first, so the table stays as small as the most regions ever
 * registered at once; generations only grow (wrapping after 2^32 reuses of
 * one id, which no rendezvous outlives).
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/region.h"
#include "rails/rail.h"

const char mdr_region_why_stale[] = "unknown or stale remote key";
const char mdr_region_why_access[] = "region is not registered for remote write";
const char mdr_region_why_range[] = "put outside the registered region";

static madrail_status_t mdr_region_grow(mdr_region_tab_t *tab)
{
    uint32_t cap = tab->cap ? tab->cap * 2 : 64;
    mdr_region_t **slots;
    uint32_t *gen, *free_ids;

    if (cap <= tab->cap) /* 2^31 registrations: give up */
        return MADRAIL_ERR_NORESOURCE;
    slots = realloc(tab->slots, cap * sizeof(*slots));
    if (slots == NULL)
        return MADRAIL_ERR_NOMEM;
    tab->slots = slots;
    gen = realloc(tab->gen, cap * sizeof(*gen));
    if (gen == NULL)
        return MADRAIL_ERR_NOMEM;
    tab->gen = gen;
    free_ids = realloc(tab->free_ids, cap * sizeof(*free_ids));
    if (free_ids == NULL)
        return MADRAIL_ERR_NOMEM;
    tab->free_ids = free_ids;
    memset(slots + tab->cap, 0, (cap - tab->cap) * sizeof(*slots));
    memset(gen + tab->cap, 0, (cap - tab->cap) * sizeof(*gen));
    tab->cap = cap;
    return MADRAIL_OK;
}

madrail_status_t mdr_region_add(mdr_region_tab_t *tab, mdr_region_t *r, uintptr_t base,
                                size_t len, unsigned access)
{
    madrail_status_t st;
    uint32_t id;

    if (tab->nfree > 0) {
        id = tab->free_ids[--tab->nfree];
    } else {
        if (tab->n == tab->cap) {
            st = mdr_region_grow(tab);
            if (st != MADRAIL_OK)
                return st;
        }
        id = tab->n++;
    }
    r->id = id;
    r->gen = tab->gen[id];
    r->base = base;
    r->len = len;
    r->access = access;
    tab->slots[id] = r;
    return MADRAIL_OK;
}

int mdr_region_owned(const mdr_region_tab_t *tab, const mdr_region_t *r)
{
    return r->id < tab->n && tab->slots[r->id] == r;
}

uint32_t mdr_region_remove(mdr_region_tab_t *tab, mdr_region_t *r)
{
    tab->slots[r->id] = NULL;
    tab->gen[r->id]++;
    tab->free_ids[tab->nfree++] = r->id;
    return tab->gen[r->id];
}

mdr_region_t *mdr_region_lookup(const mdr_region_tab_t *tab, uint64_t key, const char **why_p)
{
    uint32_t id = (uint32_t)key, gen = (uint32_t)(key >> 32);
    mdr_region_t *r;

    if (id >= tab->n || tab->slots[id] == NULL || tab->slots[id]->gen != gen) {
        *why_p = mdr_region_why_stale;
        return NULL;
    }
    r = tab->slots[id];
    if (!(r->access & MDR_MEM_REMOTE_WRITE)) {
        *why_p = mdr_region_why_access;
        return NULL;
    }
    return r;
}

mdr_region_t *mdr_region_check_put(const mdr_region_tab_t *tab, uint64_t key, uint64_t raddr,
                                   uint64_t count, const char **why_p)
{
    mdr_region_t *r = mdr_region_lookup(tab, key, why_p);

    if (r != NULL && !mdr_region_covers(r->base, r->len, raddr, count)) {
        *why_p = mdr_region_why_range;
        return NULL;
    }
    return r;
}

void mdr_region_tab_cleanup(mdr_region_tab_t *tab, void (*release)(mdr_region_t *r, void *arg),
                            void *arg)
{
    uint32_t i;

    for (i = 0; i < tab->n; i++) {
        mdr_region_t *r = tab->slots[i];
        tab->slots[i] = NULL;
        if (r != NULL && release != NULL)
            release(r, arg);
    }
    free(tab->slots);
    free(tab->gen);
    free(tab->free_ids);
    memset(tab, 0, sizeof(*tab));
}
