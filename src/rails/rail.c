/*
 * Driver registry and the "unsupported" stubs.  Drivers are compiled in
 * (no dlopen): the list below is fixed at build time by configure, so a
 * rail spec naming a driver that was not built fails with a clear error.
 * Each table is checked before it is first handed out (its size against
 * this build's mdr_rail_ops_t, no NULL operation, capability bits that
 * match the operations wired in), so the core can trust ops->caps instead
 * of testing pointers, and a table built against another version of
 * rail.h is refused with a message rather than called through.
 */
#include "mdr_config.h"

#include <string.h>

#include "rails/rail.h"
#include "util/log.h"

static const mdr_rail_ops_t *const mdr_drivers[] = {
    &mdr_tcp_ops,
    &mdr_loop_ops,
#ifdef MDR_HAVE_SHM
    &mdr_shm_ops,
#endif
#ifdef HAVE_UCX
    &mdr_ucx_ops,
#endif
#ifdef HAVE_LIBFABRIC
    &mdr_ofi_ops,
#endif
};

madrail_status_t mdr_rail_ops_check(const mdr_rail_ops_t *ops)
{
    const char *name = ops != NULL && ops->name != NULL ? ops->name : "(unnamed)";
    int put, flush;

    if (ops == NULL)
        return MADRAIL_ERR_INVALID;
    if (ops->size != sizeof(mdr_rail_ops_t)) {
        mdr_error("driver %s refused: built for a driver interface of %zu bytes, this library's "
                  "is %zu (rebuild the driver against this rails/rail.h)",
                  name, ops->size, sizeof(mdr_rail_ops_t));
        return MADRAIL_ERR_INVALID;
    }
    if (ops->name == NULL || ops->name[0] == '\0' || !ops->open || !ops->close ||
        !ops->query || !ops->addr_pack || !ops->ep_create || !ops->ep_destroy ||
        !ops->ep_backlog || !ops->ep_unsent || !ops->ep_idle || !ops->ep_link_quiet || !ops->ep_fence || !ops->ep_link_rto || !ops->ctrl_send ||
        !ops->mem_reg || !ops->mem_dereg || !ops->rkey_pack || !ops->put || !ops->progress ||
        !ops->flush) {
        mdr_error("driver %s refused: no name or a NULL operation (a missing operation points "
                  "at an mdr_rail_unsup_* stub)", name);
        return MADRAIL_ERR_INVALID;
    }
    if (ops->caps & ~(uint32_t)MDR_RAIL_CAP_ALL) {
        mdr_error("driver %s refused: unknown capability bits %#x", name,
                  ops->caps & ~(uint32_t)MDR_RAIL_CAP_ALL);
        return MADRAIL_ERR_INVALID;
    }
    put = ops->put != mdr_rail_unsup_put && ops->mem_reg != mdr_rail_unsup_mem_reg &&
          ops->rkey_pack != mdr_rail_unsup_rkey_pack;
    if (put != ((ops->caps & MDR_RAIL_CAP_PUT) != 0)) {
        mdr_error("driver %s refused: %s", name,
                  put ? "put, mem_reg and rkey_pack are wired in but MDR_RAIL_CAP_PUT is not set"
                      : "MDR_RAIL_CAP_PUT is set but put, mem_reg or rkey_pack is the "
                        "unsupported stub");
        return MADRAIL_ERR_INVALID;
    }
    if (!put && (ops->caps & (MDR_RAIL_CAP_PUT_HW | MDR_RAIL_CAP_PUT_REMOTE | MDR_RAIL_CAP_CMA |
                              MDR_RAIL_CAP_REG_CHEAP))) {
        mdr_error("driver %s refused: put capabilities %#x without put", name, ops->caps);
        return MADRAIL_ERR_INVALID;
    }
    flush = ops->flush != mdr_rail_noop_flush;
    if (flush != ((ops->caps & MDR_RAIL_CAP_FLUSH) != 0)) {
        mdr_error("driver %s refused: %s", name,
                  flush ? "flush is wired in but MDR_RAIL_CAP_FLUSH is not set"
                        : "MDR_RAIL_CAP_FLUSH is set but flush is mdr_rail_noop_flush");
        return MADRAIL_ERR_INVALID;
    }
    return MADRAIL_OK;
}

#define MDR_NDRIVERS (sizeof(mdr_drivers) / sizeof(mdr_drivers[0]))

/* Each driver checked once (0: not yet, 1: usable, -1: refused).  Lookups
 * come from context creation, which may run in several threads: a race
 * only checks (and may log) twice. */
static volatile int mdr_driver_state[MDR_NDRIVERS];

static int mdr_rail_usable(size_t i)
{
    if (mdr_driver_state[i] == 0)
        mdr_driver_state[i] = mdr_rail_ops_check(mdr_drivers[i]) == MADRAIL_OK ? 1 : -1;
    return mdr_driver_state[i] > 0;
}

const mdr_rail_ops_t *mdr_rail_find(const char *name)
{
    size_t i;
    for (i = 0; i < MDR_NDRIVERS; i++)
        if (mdr_drivers[i]->name != NULL && strcmp(mdr_drivers[i]->name, name) == 0)
            return mdr_rail_usable(i) ? mdr_drivers[i] : NULL;
    return NULL;
}

int mdr_rail_foreach(void (*fn)(const mdr_rail_ops_t *ops, void *arg), void *arg)
{
    size_t i;
    int n = 0;
    for (i = 0; i < MDR_NDRIVERS; i++)
        if (mdr_rail_usable(i)) {
            fn(mdr_drivers[i], arg);
            n++;
        }
    return n;
}

madrail_status_t mdr_rail_unsup_mem_reg(mdr_rail_t *rail, void *addr, size_t len,
                                        unsigned access, mdr_memh_t **memh_p)
{
    (void)rail; (void)addr; (void)len; (void)access; (void)memh_p;
    return MADRAIL_ERR_UNSUPPORTED;
}

void mdr_rail_unsup_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    (void)rail; (void)memh;
}

madrail_status_t mdr_rail_unsup_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                          void *buf, size_t *len_p)
{
    (void)rail; (void)memh; (void)peer; (void)buf; (void)len_p;
    return MADRAIL_ERR_UNSUPPORTED;
}

madrail_status_t mdr_rail_unsup_put(mdr_ep_t *ep, const void *local, size_t len,
                                    mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                    size_t rkey_len, mdr_completion_t *comp)
{
    (void)ep; (void)local; (void)len; (void)lmemh; (void)raddr; (void)rkey; (void)rkey_len;
    (void)comp;
    return MADRAIL_ERR_UNSUPPORTED;
}

int mdr_rail_noop_flush(mdr_rail_t *rail)
{
    (void)rail;
    return 0;
}

void mdr_rail_noop_fence(mdr_ep_t *ep)
{
    (void)ep;
}

int mdr_rail_unknown_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p)
{
    (void)ep;
    *rto_ns_p = 0;
    return -1;
}

int mdr_rail_unknown_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    (void)ep;
    (void)quiet_ns_p;
    return -1;
}
