/*
 * Helpers of the drivers' open() and close() (drv.h).  Functions, not
 * macros, so that each driver's open reads as calls with names; none of
 * them touches a driver's rail structure.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/drv.h"
#include "util/cfg.h"
#include "util/log.h"

int mdr_drv_open_args_ok(const char *spec, const mdr_rail_params_t *params,
                         mdr_rail_t *const *rail_p, size_t max_slot)
{
    return spec != NULL && params != NULL && params->upcalls != NULL && rail_p != NULL &&
           params->slot_size != 0 && params->slot_size <= max_slot;
}

madrail_status_t mdr_drv_spec_split(const char *spec,
                                    madrail_status_t (*opt)(const char *key, const char *val,
                                                            void *arg),
                                    void *arg, char **copy_p, char **first_p)
{
    madrail_status_t st;
    char *copy, *first = NULL;

    copy = strdup(spec);
    if (copy == NULL)
        return MADRAIL_ERR_NOMEM;
    st = mdr_spec_parse(copy, &first, opt, arg);
    if (st != MADRAIL_OK) {
        free(copy);
        return st;
    }
    *copy_p = copy;
    *first_p = first;
    return MADRAIL_OK;
}

int mdr_drv_close_refused(int in_progress, const char *rail_name)
{
    if (!in_progress)
        return 0;
    mdr_error("rail %s: close called from inside progress; leaking the rail", rail_name);
    return 1;
}

madrail_status_t mdr_drv_ctrl_len(const struct iovec *iov, int iovcnt, size_t slot_size,
                                  const char *rail_name, size_t *len_p)
{
    size_t total = 0;
    int i;

    for (i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len != 0 && iov[i].iov_base == NULL)
            return MADRAIL_ERR_INVALID;
        total += iov[i].iov_len;
    }
    if (total > slot_size) {
        mdr_error("rail %s: control message of %zu bytes exceeds the slot size %zu", rail_name,
                  total, slot_size);
        return MADRAIL_ERR_INVALID;
    }
    *len_p = total;
    return MADRAIL_OK;
}
