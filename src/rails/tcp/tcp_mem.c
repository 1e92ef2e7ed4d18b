/*
 * Registrations of the tcp driver's software puts (the MBCF idea: the
 * data travels with its target address and the receiver writes it).
 * Registration pins nothing, it only records [addr, addr+len) under a key
 * id in the common region table (rails/common/region.h), so it is cheap
 * (MDR_RAIL_CAP_REG_CHEAP).  The packed rkey is the key id plus a random
 * tag drawn anew for each registration, so a stale key from an old
 * rendezvous does not write into a newer buffer; rkey_pack binds the
 * region to the peer it is offered to, and the receiver checks key, peer
 * and range with mdr_region_check_put.  A region deregistered while a put is
 * streaming into it is kept (marked dead) until that connection lets go;
 * the rest of the payload is then discarded.
 */
#include "mdr_config.h"

#include <stddef.h>
#include <stdlib.h>

#include "rails/tcp/tcp.h"
#include "util/list.h"
#include "util/log.h"

madrail_status_t mdr_tcp_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    madrail_status_t st;
    void *mh;

    if (rail == NULL)
        return MADRAIL_ERR_INVALID;
    st = mdr_sw_reg_new(&rail->regions, rail->log_name, addr, len, access, sizeof(mdr_memh_t),
                        offsetof(mdr_memh_t, reg), &mh);
    if (st != MADRAIL_OK)
        return st;
    ((mdr_memh_t *)mh)->rail = rail;
    *memh_p = mh;
    return MADRAIL_OK;
}

void mdr_tcp_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    if (rail == NULL || !mdr_sw_reg_known(&rail->regions, memh != NULL ? &memh->reg : NULL,
                                          rail->log_name))
        return;
    (void)mdr_region_remove(&rail->regions, &memh->reg);
    memh->rail = NULL;
    if (memh->refs > 0)
        memh->dead = 1; /* a connection still writes into it; it frees it */
    else
        free(memh);
}

madrail_status_t mdr_tcp_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p)
{
    if (rail == NULL || memh == NULL)
        return MADRAIL_ERR_INVALID;
    return mdr_sw_rkey_pack(&rail->regions, &memh->reg, peer, buf, len_p);
}

void mdr_tcp_mem_unref(mdr_memh_t *memh)
{
    if (memh == NULL || memh->refs == 0)
        return;
    if (--memh->refs == 0 && memh->dead)
        free(memh);
}

static void mdr_tcp_mem_release(mdr_region_t *r, void *arg)
{
    mdr_memh_t *mh = mdr_container_of(r, mdr_memh_t, reg);

    (void)arg;
    if (mh->refs > 0) { /* a connection still holds it: it frees it */
        mh->dead = 1;
        mh->rail = NULL;
    } else {
        free(mh);
    }
}

void mdr_tcp_mem_cleanup(mdr_rail_t *rail)
{
    mdr_region_tab_cleanup(&rail->regions, mdr_tcp_mem_release, NULL);
}
