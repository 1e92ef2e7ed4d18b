/*
 * Registration for software puts (sw_reg.h).  It was written four times
 * (tcp, shm, ucx, and loop with its own key table) before it moved here:
 * one copy keeps the range check, the key format and the messages the same
 * in every driver that checks puts itself.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/sw_reg.h"
#include "util/log.h"

madrail_status_t mdr_sw_reg_new(mdr_region_tab_t *tab, const char *log_name, void *addr,
                                size_t len, unsigned access, size_t size, size_t reg_off,
                                void **memh_p)
{
    madrail_status_t st;
    char *mh;

    if (memh_p == NULL || !mdr_region_args_ok(addr, len) ||
        size < reg_off + sizeof(mdr_region_t))
        return MADRAIL_ERR_INVALID;
    mh = calloc(1, size);
    if (mh == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto err_log;
    }
    st = mdr_region_add(tab, (mdr_region_t *)(mh + reg_off), (uintptr_t)addr, len, access);
    if (st != MADRAIL_OK)
        goto err_free;
    *memh_p = mh;
    return MADRAIL_OK;

err_free:
    free(mh);
err_log:
    mdr_error("rail %s: cannot register %zu bytes: %s", log_name, len, madrail_status_str(st));
    return st;
}

int mdr_sw_reg_known(const mdr_region_tab_t *tab, const mdr_region_t *r, const char *log_name)
{
    if (r != NULL && mdr_region_owned(tab, r))
        return 1;
    mdr_error("rail %s: mem_dereg of an unknown handle", log_name);
    return 0;
}

madrail_status_t mdr_sw_rkey_pack(const mdr_region_tab_t *tab, mdr_region_t *r, uint64_t peer,
                                  void *buf, size_t *len_p)
{
    uint64_t key;

    if (r == NULL || buf == NULL || len_p == NULL || !mdr_region_owned(tab, r))
        return MADRAIL_ERR_INVALID;
    mdr_region_bind(r, peer);
    key = mdr_region_key(r);
    memcpy(buf, &key, sizeof(key));
    *len_p = sizeof(key);
    return MADRAIL_OK;
}
