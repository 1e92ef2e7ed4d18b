/*
 * Registration table of the tcp driver's software puts (the MBCF idea: the
 * data travels with its target address and the receiver writes it).
 * Registration pins nothing, it only records [addr, addr+len) under a key
 * id, so it is cheap (MDR_RAIL_CAP_REG_CHEAP).  The packed rkey is the key
 * id plus a generation that changes when the id is reused, so a stale key
 * from an old rendezvous can never write into a newer buffer.  A region
 * deregistered while a put is streaming into it is kept (marked dead) until
 * that connection lets go; the rest of the payload is then discarded.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/tcp/tcp.h"
#include "util/log.h"

static madrail_status_t mdr_tcp_mem_grow(mdr_rail_t *rail)
{
    uint32_t cap = rail->region_cap ? rail->region_cap * 2 : 64;
    mdr_memh_t **regions;
    uint32_t *gen, *freel;

    if (cap <= rail->region_cap) /* 2^31 registrations: give up */
        return MADRAIL_ERR_NORESOURCE;
    regions = realloc(rail->regions, cap * sizeof(*regions));
    if (regions == NULL)
        return MADRAIL_ERR_NOMEM;
    rail->regions = regions;
    gen = realloc(rail->region_gen, cap * sizeof(*gen));
    if (gen == NULL)
        return MADRAIL_ERR_NOMEM;
    rail->region_gen = gen;
    freel = realloc(rail->region_free, cap * sizeof(*freel));
    if (freel == NULL)
        return MADRAIL_ERR_NOMEM;
    rail->region_free = freel;
    memset(regions + rail->region_cap, 0, (cap - rail->region_cap) * sizeof(*regions));
    memset(gen + rail->region_cap, 0, (cap - rail->region_cap) * sizeof(*gen));
    rail->region_cap = cap;
    return MADRAIL_OK;
}

madrail_status_t mdr_tcp_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    madrail_status_t st;
    mdr_memh_t *mh;
    uint32_t id;

    if (rail == NULL || memh_p == NULL || (addr == NULL && len > 0) ||
        (uintptr_t)addr + len < (uintptr_t)addr)
        return MADRAIL_ERR_INVALID;
    mh = calloc(1, sizeof(*mh));
    if (mh == NULL)
        return MADRAIL_ERR_NOMEM;
    if (rail->nfree > 0) {
        id = rail->region_free[--rail->nfree];
    } else {
        if (rail->nregions == rail->region_cap) {
            st = mdr_tcp_mem_grow(rail);
            if (st != MADRAIL_OK)
                goto err_free;
        }
        id = rail->nregions++;
    }
    mh->rail = rail;
    mh->id = id;
    mh->gen = rail->region_gen[id];
    mh->addr = (uintptr_t)addr;
    mh->len = len;
    mh->access = access;
    rail->regions[id] = mh;
    rail->nregistered++;
    *memh_p = mh;
    return MADRAIL_OK;

err_free:
    free(mh);
    mdr_error("rail %s: cannot register %zu bytes: %s", rail->log_name, len,
              madrail_status_str(st));
    return st;
}

void mdr_tcp_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    if (rail == NULL || memh == NULL || memh->id >= rail->nregions ||
        rail->regions[memh->id] != memh) {
        if (rail != NULL)
            mdr_error("rail %s: mem_dereg of an unknown handle", rail->log_name);
        return;
    }
    rail->regions[memh->id] = NULL;
    rail->region_gen[memh->id]++;
    rail->region_free[rail->nfree++] = memh->id;
    rail->nregistered--;
    memh->rail = NULL;
    if (memh->refs > 0)
        memh->dead = 1; /* a connection still writes into it; it frees it */
    else
        free(memh);
}

madrail_status_t mdr_tcp_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, void *buf,
                                   size_t *len_p)
{
    uint64_t key;

    if (rail == NULL || memh == NULL || buf == NULL || len_p == NULL ||
        memh->id >= rail->nregions || rail->regions[memh->id] != memh)
        return MADRAIL_ERR_INVALID;
    key = ((uint64_t)memh->gen << 32) | memh->id;
    memcpy(buf, &key, sizeof(key));
    *len_p = sizeof(key);
    return MADRAIL_OK;
}

mdr_memh_t *mdr_tcp_mem_lookup(mdr_rail_t *rail, uint64_t rkey, uint64_t raddr, uint64_t count,
                               const char **why_p)
{
    uint32_t id = (uint32_t)rkey, gen = (uint32_t)(rkey >> 32);
    mdr_memh_t *mh;

    if (id >= rail->nregions || rail->regions[id] == NULL || rail->regions[id]->gen != gen) {
        *why_p = "unknown or stale remote key";
        return NULL;
    }
    mh = rail->regions[id];
    if (!(mh->access & MDR_MEM_REMOTE_WRITE)) {
        *why_p = "region is not registered for remote write";
        return NULL;
    }
    if (raddr < mh->addr || count > mh->len || raddr - mh->addr > mh->len - count) {
        *why_p = "put outside the registered region";
        return NULL;
    }
    return mh;
}

void mdr_tcp_mem_unref(mdr_memh_t *memh)
{
    if (memh == NULL || memh->refs == 0)
        return;
    if (--memh->refs == 0 && memh->dead)
        free(memh);
}

void mdr_tcp_mem_cleanup(mdr_rail_t *rail)
{
    uint32_t i;

    for (i = 0; i < rail->nregions; i++) {
        mdr_memh_t *mh = rail->regions[i];
        if (mh == NULL)
            continue;
        rail->regions[i] = NULL;
        if (mh->refs > 0) { /* a connection still holds it: it frees it */
            mh->dead = 1;
            mh->rail = NULL;
        } else {
            free(mh);
        }
    }
    free(rail->regions);
    free(rail->region_gen);
    free(rail->region_free);
    rail->regions = NULL;
    rail->region_gen = NULL;
    rail->region_free = NULL;
    rail->nregions = rail->region_cap = rail->nfree = 0;
}
