/*
 * The lazy loader of libfabric (ofi_dl.h says why).  Each function is
 * looked up at the symbol version a link against these headers would bind
 * (dlvsym), so the structures the headers describe are the ones the
 * library expects.
 */
#include "mdr_config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rails/ofi/ofi_dl.h"

typedef int (*mdr_getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
                              const struct fi_info *, struct fi_info **);
typedef void (*mdr_freeinfo_fn)(struct fi_info *);
typedef struct fi_info *(*mdr_dupinfo_fn)(const struct fi_info *);
typedef int (*mdr_fabric_fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);
typedef const char *(*mdr_strerror_fn)(int);

static struct {
    pthread_once_t once;
    void *handle;
    char why[256];
    mdr_getinfo_fn getinfo;
    mdr_freeinfo_fn freeinfo;
    mdr_dupinfo_fn dupinfo;
    mdr_fabric_fn fabric;
    mdr_strerror_fn strerror;
} mdr_ofi_dl = {.once = PTHREAD_ONCE_INIT};

/* dlvsym, falling back to the default version (a libfabric built without
 * symbol versions) */
static void *mdr_ofi_sym(const char *name, const char *version)
{
    void *p = dlvsym(mdr_ofi_dl.handle, name, version);
    return p ? p : dlsym(mdr_ofi_dl.handle, name);
}

static void mdr_ofi_dl_open(void)
{
    const char *err;

    mdr_ofi_dl.handle = dlopen(MDR_OFI_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!mdr_ofi_dl.handle) {
        err = dlerror();
        snprintf(mdr_ofi_dl.why, sizeof(mdr_ofi_dl.why), "cannot load %s: %s", MDR_OFI_SONAME,
                 err ? err : "unknown error");
        return;
    }
    mdr_ofi_dl.getinfo = (mdr_getinfo_fn)mdr_ofi_sym("fi_getinfo", "FABRIC_1.3");
    mdr_ofi_dl.freeinfo = (mdr_freeinfo_fn)mdr_ofi_sym("fi_freeinfo", "FABRIC_1.3");
    mdr_ofi_dl.dupinfo = (mdr_dupinfo_fn)mdr_ofi_sym("fi_dupinfo", "FABRIC_1.3");
    mdr_ofi_dl.fabric = (mdr_fabric_fn)mdr_ofi_sym("fi_fabric", "FABRIC_1.1");
    mdr_ofi_dl.strerror = (mdr_strerror_fn)mdr_ofi_sym("fi_strerror", "FABRIC_1.0");
    if (!mdr_ofi_dl.getinfo || !mdr_ofi_dl.freeinfo || !mdr_ofi_dl.dupinfo ||
        !mdr_ofi_dl.fabric || !mdr_ofi_dl.strerror) {
        snprintf(mdr_ofi_dl.why, sizeof(mdr_ofi_dl.why),
                 "%s lacks fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric or fi_strerror",
                 MDR_OFI_SONAME);
        dlclose(mdr_ofi_dl.handle);
        mdr_ofi_dl.handle = NULL;
    }
}

int mdr_ofi_dl_load(const char **why_p)
{
    pthread_once(&mdr_ofi_dl.once, mdr_ofi_dl_open);
    if (mdr_ofi_dl.handle)
        return 0;
    if (why_p)
        *why_p = mdr_ofi_dl.why;
    return -1;
}

int mdr_fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const struct fi_info *hints, struct fi_info **info)
{
    if (mdr_ofi_dl_load(NULL) != 0)
        return -FI_ENOSYS;
    return mdr_ofi_dl.getinfo(version, node, service, flags, hints, info);
}

void mdr_fi_freeinfo(struct fi_info *info)
{
    /* an fi_info exists only if the library gave it */
    if (info && mdr_ofi_dl_load(NULL) == 0)
        mdr_ofi_dl.freeinfo(info);
}

struct fi_info *mdr_fi_dupinfo(const struct fi_info *info)
{
    if (mdr_ofi_dl_load(NULL) != 0)
        return NULL;
    return mdr_ofi_dl.dupinfo(info);
}

int mdr_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    if (mdr_ofi_dl_load(NULL) != 0)
        return -FI_ENOSYS;
    return mdr_ofi_dl.fabric(attr, fabric, context);
}

const char *mdr_fi_strerror(int errnum)
{
    const char *why;

    if (mdr_ofi_dl_load(&why) != 0)
        return errnum == FI_ENOSYS ? why : strerror(errnum);
    return mdr_ofi_dl.strerror(errnum);
}
