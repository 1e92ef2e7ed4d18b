/*
 * Registrations of the tcp driver's software puts (the MBCF idea: the
 * data travels with its target address and the receiver writes it).
 * Registration pins nothing, it only records [addr, addr+len) under a key
 * id in the common region table (rails/common/region.h), so it is cheap
 * (MDR_RAIL_CAP_REG_CHEAP).  The packed rkey is the key id plus a
 * generation that changes when the id is reused, so a stale key from an
 * old rendezvous can never write into a newer buffer; the receiver checks
 * it with mdr_region_check_put.  A region deregistered while a put is
 * streaming into it is kept (marked dead) until that connection lets go;
 * the rest of the payload is then discarded.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/tcp/tcp.h"
#include "util/list.h"
#include "util/log.h"

madrail_status_t mdr_tcp_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    madrail_status_t st;
    mdr_memh_t *mh;

    if (rail == NULL || memh_p == NULL || !mdr_region_args_ok(addr, len))
        return MADRAIL_ERR_INVALID;
    mh = calloc(1, sizeof(*mh));
    if (mh == NULL)
        return MADRAIL_ERR_NOMEM;
    st = mdr_region_add(&rail->regions, &mh->reg, (uintptr_t)addr, len, access);
    if (st != MADRAIL_OK)
        goto err_free;
    mh->rail = rail;
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
    if (rail == NULL || memh == NULL || !mdr_region_owned(&rail->regions, &memh->reg)) {
        if (rail != NULL)
            mdr_error("rail %s: mem_dereg of an unknown handle", rail->log_name);
        return;
    }
    (void)mdr_region_remove(&rail->regions, &memh->reg);
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
        !mdr_region_owned(&rail->regions, &memh->reg))
        return MADRAIL_ERR_INVALID;
    key = mdr_region_key(&memh->reg);
    memcpy(buf, &key, sizeof(key));
    *len_p = sizeof(key);
    return MADRAIL_OK;
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
