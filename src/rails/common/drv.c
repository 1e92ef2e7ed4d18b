/*
 * Helpers of the drivers' open() and close() (drv.h), and of their
 * handshakes.  Functions, not macros, so that each driver's open reads as
 * calls with names; none of them touches a driver's rail structure.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails/common/drv.h"
#include "util/cfg.h"
#include "util/clock.h"
#include "util/log.h"

int mdr_drv_open_args_ok(const char *spec, const mdr_rail_params_t *params,
                         mdr_rail_t *const *rail_p, size_t max_slot)
{
    if (params != NULL && params->job_key == NULL) {
        mdr_error("rail %s: opened without a job key", spec != NULL ? spec : "?");
        return 0;
    }
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

int mdr_drv_key_equal(const uint8_t *key, const void *got)
{
    const volatile uint8_t *a = key, *b = got;
    unsigned diff = 0;
    size_t i;

    for (i = 0; i < MDR_JOB_KEY_LEN; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

static uint64_t mdr_drv_source_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h ? h : 1;
}

void mdr_drv_refusal(mdr_drv_refusals_t *r, const char *rail_name, const char *source,
                     const char *fmt, ...)
{
    uint64_t h = mdr_drv_source_hash(source != NULL ? source : "?");
    double now = mdr_time_sec();
    char why[200];
    va_list ap;
    unsigned i;

    r->total++;
    for (i = 0; i < MDR_DRV_REFUSAL_SOURCES; i++)
        if (r->seen[i] == h) {
            r->unlogged++;
            return;
        }
    if (now - r->window_start > MDR_DRV_REFUSAL_WINDOW) {
        r->window_start = now;
        r->lines = 0;
    }
    if (r->lines >= MDR_DRV_REFUSAL_BURST) {
        r->unlogged++;
        return;
    }
    r->lines++;
    r->seen[r->next] = h;
    r->next = (r->next + 1) % MDR_DRV_REFUSAL_SOURCES;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (r->unlogged > 0)
        mdr_warn("rail %s: connection from %s refused: %s (%lu earlier refusals not logged; "
                 "repeats from this source are counted, not logged)",
                 rail_name, source, why, r->unlogged);
    else
        mdr_warn("rail %s: connection from %s refused: %s (repeats from this source are "
                 "counted, not logged)",
                 rail_name, source, why);
    r->unlogged = 0;
}

void mdr_drv_ratelog(mdr_drv_ratelog_t *r, const char *rail_name, const char *fmt, ...)
{
    double now = mdr_time_sec();
    char what[200];
    va_list ap;

    r->total++;
    if (r->last != 0 && now - r->last < MDR_DRV_RATELOG_INTERVAL) {
        r->unlogged++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (r->unlogged > 0)
        mdr_warn("rail %s: %s (%lu times more in the last %.0f s, not logged; %lu since open)",
                 rail_name, what, r->unlogged, now - r->last, r->total);
    else
        mdr_warn("rail %s: %s (further occurrences are counted and logged at most once "
                 "per %.0f s)",
                 rail_name, what, MDR_DRV_RATELOG_INTERVAL);
    r->last = now;
    r->unlogged = 0;
}
