/*
 * Driver registry and the "unsupported" stubs.  Drivers are compiled in
 * (no dlopen): the list below is fixed at build time by configure, so a
 * rail spec naming a driver that was not built fails with a clear error.
 */
#include "mdr_config.h"

#include <string.h>

#include "rails/rail.h"

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

const mdr_rail_ops_t *mdr_rail_find(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof(mdr_drivers) / sizeof(mdr_drivers[0]); i++)
        if (strcmp(mdr_drivers[i]->name, name) == 0)
            return mdr_drivers[i];
    return NULL;
}

int mdr_rail_foreach(void (*fn)(const mdr_rail_ops_t *ops, void *arg), void *arg)
{
    int i, n = (int)(sizeof(mdr_drivers) / sizeof(mdr_drivers[0]));
    for (i = 0; i < n; i++)
        fn(mdr_drivers[i], arg);
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

madrail_status_t mdr_rail_unsup_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, void *buf,
                                          size_t *len_p)
{
    (void)rail; (void)memh; (void)buf; (void)len_p;
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

int mdr_rail_unknown_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    (void)ep;
    (void)quiet_ns_p;
    return -1;
}
