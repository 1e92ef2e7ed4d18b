/*
 * Registrations of the shm driver.  Registering pins nothing: it records
 * [addr, addr+len) under a key id plus a generation that changes when the
 * id is reused, so a stale key can never write into a newer buffer
 * (MDR_RAIL_CAP_REG_CHEAP).  Two readers check a key: the receiver itself
 * for puts copied through a ring (the local table, as in the tcp driver),
 * and a CMA writer in another process, which cannot ask: it reads the
 * mirror of the first MDR_SHM_NREGS entries kept in the owner's segment.
 * A key whose id is beyond the mirror is simply not CMA-checkable, and
 * such puts take the copy path.
 *
 * What the mirror cannot give is a lock against deregistration while a CMA
 * write is in progress: the core deregisters a target only after every put
 * into it completed (FIN), so the window only exists for a core bug, and
 * then the write lands in memory of the (same-user) peer's address space
 * or fails with EFAULT, never in ours.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/shm/shm.h"
#include "util/log.h"

static madrail_status_t mdr_shm_mem_grow(mdr_rail_t *rail)
{
    uint32_t cap = rail->region_cap ? rail->region_cap * 2 : 64;
    mdr_memh_t **regions;
    uint32_t *gen, *freel;

    if (cap <= rail->region_cap)
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

madrail_status_t mdr_shm_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
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
            st = mdr_shm_mem_grow(rail);
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
    if (id < MDR_SHM_NREGS) {
        mdr_shm_reg_ent_t *e = &rail->regtab[id];
        e->addr = mh->addr;
        e->len = len;
        e->access = access;
        e->valid = 1;
        atomic_store_explicit(&e->gen, mh->gen, memory_order_release);
    }
    *memh_p = mh;
    return MADRAIL_OK;

err_free:
    free(mh);
    mdr_error("rail %s: cannot register %zu bytes: %s", rail->log_name, len,
              madrail_status_str(st));
    return st;
}

void mdr_shm_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    if (rail == NULL || memh == NULL || memh->id >= rail->nregions ||
        rail->regions[memh->id] != memh) {
        if (rail != NULL)
            mdr_error("rail %s: mem_dereg of an unknown handle", rail->log_name);
        return;
    }
    rail->regions[memh->id] = NULL;
    rail->region_gen[memh->id]++;
    if (memh->id < MDR_SHM_NREGS) {
        mdr_shm_reg_ent_t *e = &rail->regtab[memh->id];
        /* the generation first: a writer that sees the old one also sees valid */
        atomic_store_explicit(&e->gen, rail->region_gen[memh->id], memory_order_seq_cst);
        e->valid = 0;
    }
    rail->region_free[rail->nfree++] = memh->id;
    free(memh);
}

madrail_status_t mdr_shm_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, void *buf,
                                   size_t *len_p)
{
    mdr_shm_rkey_t k;

    if (rail == NULL || memh == NULL || buf == NULL || len_p == NULL ||
        memh->id >= rail->nregions || rail->regions[memh->id] != memh)
        return MADRAIL_ERR_INVALID;
    k.key = ((uint64_t)memh->gen << 32) | memh->id;
    k.tag = rail->tag;
    memcpy(buf, &k, sizeof(k));
    *len_p = sizeof(k);
    return MADRAIL_OK;
}

static int mdr_shm_range_ok(uint64_t base, uint64_t len, uint64_t raddr, uint64_t count)
{
    return raddr >= base && count <= len && raddr - base <= len - count;
}

mdr_memh_t *mdr_shm_mem_lookup(mdr_rail_t *rail, uint64_t key, uint64_t raddr, uint64_t count,
                               const char **why_p)
{
    uint32_t id = (uint32_t)key, gen = (uint32_t)(key >> 32);
    mdr_memh_t *mh;

    if (id >= rail->nregions || rail->regions[id] == NULL || rail->regions[id]->gen != gen) {
        *why_p = "unknown or stale remote key";
        return NULL;
    }
    mh = rail->regions[id];
    if (!(mh->access & MDR_MEM_REMOTE_WRITE)) {
        *why_p = "region not registered for remote write";
        return NULL;
    }
    if (!mdr_shm_range_ok(mh->addr, mh->len, raddr, count)) {
        *why_p = "put outside the registered region";
        return NULL;
    }
    return mh;
}

int mdr_shm_mem_check_remote(const mdr_shm_pseg_t *pseg, uint64_t key, uint64_t raddr,
                             uint64_t count, const char **why_p)
{
    uint32_t id = (uint32_t)key, gen = (uint32_t)(key >> 32);
    const mdr_shm_reg_ent_t *tab, *e;
    uint64_t addr, len, valid;
    uint32_t access;

    if (id >= pseg->hdr->nregs) {
        *why_p = "key not in the shared table";
        return -1;
    }
    tab = (const mdr_shm_reg_ent_t *)((const uint8_t *)pseg->base + pseg->hdr->reg_off);
    e = &tab[id];
    if (atomic_load_explicit(&e->gen, memory_order_acquire) != gen) {
        *why_p = "unknown or stale remote key";
        return -1;
    }
    addr = e->addr;
    len = e->len;
    access = e->access;
    valid = e->valid;
    /* entries are rewritten only after a generation change: check again */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->gen, memory_order_relaxed) != gen || !valid) {
        *why_p = "unknown or stale remote key";
        return -1;
    }
    if (!(access & MDR_MEM_REMOTE_WRITE)) {
        *why_p = "region not registered for remote write";
        return -1;
    }
    if (!mdr_shm_range_ok(addr, len, raddr, count)) {
        *why_p = "put outside the registered region";
        return -1;
    }
    return 0;
}

void mdr_shm_mem_cleanup(mdr_rail_t *rail)
{
    uint32_t i;

    for (i = 0; i < rail->nregions; i++)
        free(rail->regions[i]);
    free(rail->regions);
    free(rail->region_gen);
    free(rail->region_free);
    rail->regions = NULL;
    rail->region_gen = NULL;
    rail->region_free = NULL;
    rail->nregions = rail->region_cap = rail->nfree = 0;
}
