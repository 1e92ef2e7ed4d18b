/*
 * The registered-region table of the software-put drivers (region.h).  It
 * was written three times (tcp, shm, ucx) before it moved here; the one
 * copy keeps the three drivers' key checks identical.  Ids are reused last
 * freed first, so the table stays as small as the most regions ever
 * registered at once; what makes a key unguessable and an old one dead is
 * its tag, random per registration.  The tags come from getrandom(2) 64 at
 * a time, so a registration costs a system call only once in 64 (tcp and
 * shm register per transfer), and a put costs none.
 */
#include "mdr_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rails/common/region.h"
#include "rails/rail.h"

const char mdr_region_why_stale[] = "unknown or stale remote key";
const char mdr_region_why_access[] = "region is not registered for remote write";
const char mdr_region_why_range[] = "put outside the registered region";
const char mdr_region_why_peer[] = "region was offered to another peer";
const char mdr_region_why_unbound[] = "region was not offered to any peer";

/* The next random tag of tab, refilling its store when empty. */
static madrail_status_t mdr_region_tag(mdr_region_tab_t *tab, uint32_t *tag_p)
{
    if (tab->nrnd == 0) {
        size_t got = 0;
        while (got < sizeof(tab->rnd)) {
            ssize_t n = getrandom((uint8_t *)tab->rnd + got, sizeof(tab->rnd) - got, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return MADRAIL_ERR_NORESOURCE;
            got += (size_t)n;
        }
        tab->nrnd = sizeof(tab->rnd) / sizeof(tab->rnd[0]);
    }
    *tag_p = tab->rnd[--tab->nrnd];
    tab->rnd[tab->nrnd] = 0; /* a used tag is not left lying in memory */
    return MADRAIL_OK;
}

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
    uint32_t id, tag;

    /* the tag first: failing here leaves the table as it was */
    st = mdr_region_tag(tab, &tag);
    if (st != MADRAIL_OK)
        return st;
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
    if (tag == tab->gen[id])
        tag = ~tag; /* never the id's previous key */
    tab->gen[id] = tag;
    r->id = id;
    r->gen = tag;
    r->bound = 0;
    r->peer = 0;
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
    tab->free_ids[tab->nfree++] = r->id;
    r->bound = 0;
    return ~r->gen;
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
                                   uint64_t count, uint64_t from, const char **why_p)
{
    mdr_region_t *r = mdr_region_lookup(tab, key, why_p);

    if (r == NULL)
        return NULL;
    if (!r->bound) {
        *why_p = mdr_region_why_unbound;
        return NULL;
    }
    if (r->peer != from) {
        *why_p = mdr_region_why_peer;
        return NULL;
    }
    if (!mdr_region_covers(r->base, r->len, raddr, count)) {
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
