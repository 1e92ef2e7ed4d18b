/*
 * What this libmadrail is: its version, the drivers madrail has (built
 * into this library or not, and why, in configure's words), and how it was
 * configured.  madrail_info prints these through the public API, so it
 * describes the library it actually runs against (LD_LIBRARY_PATH may pick
 * another build than the one it was compiled with).  Whether a driver is
 * built comes from the driver registry, the same list rail specs are
 * checked against; only the explanation comes from configure
 * (mdr_config.h).
 */
#include "mdr_config.h"

#include <stddef.h>

#include "madrail.h"
#include "rails/rail.h"

typedef struct mdr_info_driver {
    const char *name;
    const char *detail;
} mdr_info_driver_t;

/* Every driver madrail has, in the order of the registry (rails/rail.c). */
static const mdr_info_driver_t mdr_info_drivers[] = {
    {"tcp", "built: always (TCP sockets, any interface with an IPv4 address)"},
    {"loop", "built: always (in-process rails with fault knobs, for tests)"},
    {"shm", MDR_BUILD_SHM_DETAIL},
    {"ucx", MDR_BUILD_UCX_DETAIL},
    {"ofi", MDR_BUILD_OFI_DETAIL},
};
#define MDR_INFO_NDRIVERS ((int)(sizeof(mdr_info_drivers) / sizeof(mdr_info_drivers[0])))

int madrail_driver_count(void)
{
    return MDR_INFO_NDRIVERS;
}

madrail_status_t madrail_driver_info(int index, madrail_driver_info_t *info_p)
{
    if (index < 0 || index >= MDR_INFO_NDRIVERS || !info_p)
        return MADRAIL_ERR_INVALID;
    info_p->name = mdr_info_drivers[index].name;
    info_p->built = mdr_rail_find(mdr_info_drivers[index].name) != NULL;
    info_p->detail = mdr_info_drivers[index].detail;
    return MADRAIL_OK;
}

const char *madrail_version(void)
{
    return PACKAGE_VERSION;
}

#ifdef __SANITIZE_ADDRESS__
#define MDR_INFO_ASAN "address"
#else
#define MDR_INFO_ASAN "no"
#endif

const char *madrail_build_config(void)
{
    return "version: " PACKAGE_VERSION "\n"
           "configure arguments: " MDR_CONFIGURE_ARGS "\n"
           "hwloc (locality of rails): " MDR_BUILD_HWLOC_DETAIL "\n"
           "sanitizers: " MDR_INFO_ASAN "\n"
           "compiler: " __VERSION__ "\n";
}
