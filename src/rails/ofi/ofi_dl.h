/*
 * libfabric, loaded when the first ofi rail asks for it rather than when
 * libmadrail is loaded.  Debian's libfabric links the PSM providers, and
 * libinfinipath's constructor sleeps about 1,000 times 125 us on a
 * machine without its hardware: linked directly, every process that
 * loaded libmadrail (every MPI rank over ch4:madrail, madrail_info) paid
 * 0.13 s at start-up, whether or not it used an ofi rail.
 *
 * The ofi driver calls libfabric's five exported functions (the rest of
 * its API is inline calls through the objects' operation tables); this
 * header renames them to the loader's wrappers before libfabric's headers
 * declare them, so the driver's code and the headers' inline helpers
 * (fi_allocinfo) call the wrappers.  Include it instead of the rdma/
 * headers, first.
 */
#ifndef MDR_OFI_DL_H
#define MDR_OFI_DL_H

#define fi_getinfo mdr_fi_getinfo
#define fi_freeinfo mdr_fi_freeinfo
#define fi_dupinfo mdr_fi_dupinfo
#define fi_fabric mdr_fi_fabric
#define fi_strerror mdr_fi_strerror

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

/* The library's soname: libfabric 1.x. */
#define MDR_OFI_SONAME "libfabric.so.1"

/* Load libfabric once (thread-safe).  0 when it is loaded; -1 when it
 * cannot be, with *why_p (if not NULL) saying why.  The wrappers load it
 * themselves; until it is loaded, fi_getinfo and fi_fabric return
 * -FI_ENOSYS, fi_dupinfo NULL, and fi_strerror(FI_ENOSYS) the reason. */
int mdr_ofi_dl_load(const char **why_p);

#endif /* MDR_OFI_DL_H */
