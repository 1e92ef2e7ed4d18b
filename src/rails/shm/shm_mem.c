/*
 * Registrations of the shm driver.  Registering pins nothing: it records
 * [addr, addr+len) under a key id plus a random tag drawn anew for each
 * registration, so a stale key does not write into a newer buffer
 * (MDR_RAIL_CAP_REG_CHEAP).  Two readers check a key: the receiver itself
 * for puts copied through a ring (the common region table, as in the tcp
 * driver: rails/common/region.h), and a CMA writer in another process,
 * which cannot ask: it reads the mirror of the first MDR_SHM_NREGS entries
 * kept in the owner's segment, with the same checks and reasons.
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

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rails/shm/shm.h"
#include "util/list.h"
#include "util/log.h"

madrail_status_t mdr_shm_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    madrail_status_t st;
    mdr_memh_t *mh;
    void *p;

    if (rail == NULL)
        return MADRAIL_ERR_INVALID;
    st = mdr_sw_reg_new(&rail->regions, rail->log_name, addr, len, access, sizeof(*mh),
                        offsetof(mdr_memh_t, reg), &p);
    if (st != MADRAIL_OK)
        return st;
    mh = p;
    mh->rail = rail;
    if (mh->reg.id < MDR_SHM_NREGS) {
        mdr_shm_reg_ent_t *e = &rail->regtab[mh->reg.id];
        e->addr = mh->reg.base;
        e->len = len;
        e->access = access;
        e->bound = 0;
        e->valid = 1;
        atomic_store_explicit(&e->gen, mh->reg.gen, memory_order_release);
    }
    *memh_p = mh;
    return MADRAIL_OK;
}

void mdr_shm_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    uint32_t gen;

    if (rail == NULL || !mdr_sw_reg_known(&rail->regions, memh != NULL ? &memh->reg : NULL,
                                          rail->log_name))
        return;
    gen = mdr_region_remove(&rail->regions, &memh->reg);
    if (memh->reg.id < MDR_SHM_NREGS) {
        mdr_shm_reg_ent_t *e = &rail->regtab[memh->reg.id];
        /* the generation first: a writer that sees the old one also sees valid */
        atomic_store_explicit(&e->gen, gen, memory_order_seq_cst);
        e->valid = 0;
    }
    free(memh);
}

madrail_status_t mdr_shm_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p)
{
    mdr_shm_rkey_t k;

    if (rail == NULL || memh == NULL || buf == NULL || len_p == NULL ||
        !mdr_region_owned(&rail->regions, &memh->reg))
        return MADRAIL_ERR_INVALID;
    /* puts copied through a ring are checked against the binding; a CMA
     * writer checks itself, and could write anywhere in our address space
     * anyway (process_vm_writev needs ptrace rights over us) */
    mdr_region_bind(&memh->reg, peer);
    if (memh->reg.id < MDR_SHM_NREGS) {
        mdr_shm_reg_ent_t *e = &rail->regtab[memh->reg.id];
        e->peer = peer;
        e->bound = 1;
    }
    k.key = mdr_region_key(&memh->reg);
    k.tag = rail->tag;
    memcpy(buf, &k, sizeof(k));
    *len_p = sizeof(k);
    return MADRAIL_OK;
}

int mdr_shm_mem_check_remote(const mdr_shm_pseg_t *pseg, uint64_t key, uint64_t raddr,
                             uint64_t count, uint64_t from, const char **why_p)
{
    uint32_t id = (uint32_t)key, gen = (uint32_t)(key >> 32);
    const mdr_shm_reg_ent_t *tab, *e;
    uint64_t addr, len, valid, bound, peer;
    uint32_t access;

    if (id >= pseg->lay.nregs) {
        *why_p = "key not in the shared table";
        return -1;
    }
    tab = (const mdr_shm_reg_ent_t *)((const uint8_t *)pseg->base + pseg->lay.reg_off);
    e = &tab[id];
    if (atomic_load_explicit(&e->gen, memory_order_acquire) != gen) {
        *why_p = mdr_region_why_stale;
        return -1;
    }
    addr = e->addr;
    len = e->len;
    access = e->access;
    valid = e->valid;
    bound = e->bound;
    peer = e->peer;
    /* entries are rewritten only after a generation change: check again */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->gen, memory_order_relaxed) != gen || !valid) {
        *why_p = mdr_region_why_stale;
        return -1;
    }
    if (!(access & MDR_MEM_REMOTE_WRITE)) {
        *why_p = mdr_region_why_access;
        return -1;
    }
    if (!bound || peer != from) {
        *why_p = bound ? mdr_region_why_peer : mdr_region_why_unbound;
        return -1;
    }
    if (!mdr_region_covers(addr, len, raddr, count)) {
        *why_p = mdr_region_why_range;
        return -1;
    }
    return 0;
}

static void mdr_shm_mem_release(mdr_region_t *r, void *arg)
{
    (void)arg;
    free(mdr_container_of(r, mdr_memh_t, reg));
}

void mdr_shm_mem_cleanup(mdr_rail_t *rail)
{
    mdr_region_tab_cleanup(&rail->regions, mdr_shm_mem_release, NULL);
}
