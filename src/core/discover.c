/*
 * Rail discovery: which devices MADRAIL_RAILS=auto turns into rails.
 *
 * The policy is one pure function over device records so that it can be
 * tested on machines that do not exist (two sockets, dual-port HCAs, dead
 * links) and so that madrail_info can say why each device was taken or
 * left.  In order:
 *   1. a device is usable when its link is up, an interface has an
 *      address its driver can use, and a built driver takes its kind;
 *      the first built driver of the preference table below wins, so a new
 *      driver joins discovery with one line there;
 *   2. an HCA reached natively supersedes the IP interfaces of the same
 *      PCI device (ib0 beside mlx5_0 would carry the same wire twice);
 *      two ports that map to one rail spec keep the first;
 *   3. only the best tier is used: PCI-backed devices, else virtual
 *      interfaces (veth, bridges: containers, namespaces), else loopback,
 *      so a docker0 bridge never becomes a rail on a cluster node and a
 *      laptop still gets tcp:lo;
 *   4. locality (MADRAIL_AUTO_LOCALITY=near, the default): a device away
 *      from the process binding is left out when an interchangeable one
 *      (same driver, same speed) is near it (or of unknown locality), so
 *      ranks bound to different sockets of a node with one NIC per
 *      socket each use their own socket's NIC and none crosses the
 *      inter-socket link.  Only interchangeable devices are traded: a
 *      node with an HCA on one socket and an Ethernet NIC on the other
 *      gives every rank both, in the same order, since rails pair by
 *      index and an ucx rail cannot pair with a tcp one; a process not
 *      bound is near everything;
 *   5. at most max_rails are kept, those near the process binding first,
 *      then the fastest;
 *   6. the kept rails are listed fastest first, then by name, never by
 *      locality or enumeration order, so processes bound alike on
 *      identical nodes get identical lists (rails pair by index between
 *      peers); each rail's weight is its link speed in Mb/s.
 * Two ranks bound to different sockets may thus hold different devices
 * at one index: rail i of one connects to rail i of the other by address,
 * which a routed or single-fabric network carries (each side leaves and
 * enters through its own NIC).
 * The probe (util/topo.c) is separate and does not decide anything.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/discover.h"
#include "rails/rail.h"
#include "util/log.h"

/* ---------------- driver preference ---------------- */

typedef struct mdr_disc_map {
    mdr_netdev_kind_t kind;
    const char *driver;
    unsigned need_addr; /* MDR_NETDEV_IPV4...: address family the driver needs, 0 none */
    void (*spec)(const mdr_netdev_t *d, char *buf, size_t len);
} mdr_disc_map_t;

static void mdr_disc_spec_ofi(const mdr_netdev_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "ofi:verbs;ofi_rxm:%s", d->name);
}

static void mdr_disc_spec_ucx(const mdr_netdev_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "ucx:%s:%u", d->name, d->port);
}

static void mdr_disc_spec_tcp(const mdr_netdev_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "tcp:%s", d->name);
}

/* Per kind, the first built driver is used. */
static const mdr_disc_map_t mdr_disc_maps[] = {
    {MDR_NETDEV_HCA, "ofi", 0, mdr_disc_spec_ofi},
    {MDR_NETDEV_HCA, "ucx", 0, mdr_disc_spec_ucx},
    {MDR_NETDEV_IFACE, "tcp", MDR_NETDEV_IPV4, mdr_disc_spec_tcp},
};
#define MDR_DISC_NMAPS (sizeof(mdr_disc_maps) / sizeof(mdr_disc_maps[0]))

static int mdr_disc_registry_has(const char *name, void *arg)
{
    (void)arg;
    return mdr_rail_find(name) != NULL;
}

static const mdr_disc_map_t *mdr_disc_map_for(const mdr_netdev_t *d, const mdr_disc_opts_t *o)
{
    size_t i;
    for (i = 0; i < MDR_DISC_NMAPS; i++)
        if (mdr_disc_maps[i].kind == d->kind &&
            (o->have_driver ? o->have_driver(mdr_disc_maps[i].driver, o->arg)
                            : mdr_disc_registry_has(mdr_disc_maps[i].driver, NULL)))
            return &mdr_disc_maps[i];
    return NULL;
}

/* Can the device's name be written in its rail spec?  A rail list is split
 * at ',', a spec at ';' (options) and ':' (the ucx driver's
 * [transports:]device[:port]), so an interface name must avoid those, '='
 * and blanks; an HCA name must be letters, digits and "_-." (what the ucx
 * driver's spec parser and ofi's domain names take: "mlx5_0", "hfi1_0",
 * "rocep59s0f0").  Linux never names devices otherwise; this keeps a
 * renamed one from becoming a spec that means something else. */
static int mdr_disc_name_ok(const mdr_netdev_t *d)
{
    const char *p;
    if (d->name[0] == '\0')
        return 0;
    for (p = d->name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (d->kind == MDR_NETDEV_HCA
                ? !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == '-' || c == '.')
                : (c <= ' ' || c == ',' || c == ';' || c == ':' || c == '=' || c >= 0x7f))
            return 0;
    }
    return 1;
}

/* "tcp" or "ofi, ucx": the drivers that could take this kind. */
static void mdr_disc_drivers_of(mdr_netdev_kind_t kind, char *buf, size_t len)
{
    size_t i, off = 0;
    buf[0] = '\0';
    for (i = 0; i < MDR_DISC_NMAPS && off < len; i++)
        if (mdr_disc_maps[i].kind == kind)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
                                    mdr_disc_maps[i].driver);
}

/* ---------------- ranking ---------------- */

enum { MDR_DISC_TIER_PCI = 0, MDR_DISC_TIER_VIRTUAL = 1, MDR_DISC_TIER_LOOPBACK = 2 };

/* verdict[].rail while choosing */
enum { MDR_DISC_REJECTED = -1, MDR_DISC_CANDIDATE = -2, MDR_DISC_KEPT = -3 };

static int mdr_disc_tier(const mdr_netdev_t *d)
{
    if (d->kind == MDR_NETDEV_IFACE && d->loopback)
        return MDR_DISC_TIER_LOOPBACK;
    if (d->kind == MDR_NETDEV_IFACE && d->virt)
        return MDR_DISC_TIER_VIRTUAL;
    return MDR_DISC_TIER_PCI;
}

static long mdr_disc_speed(const mdr_netdev_t *d, const mdr_disc_opts_t *o)
{
    return d->speed_mbps > 0 ? d->speed_mbps : o->default_speed_mbps;
}

/* Rail order: faster first; at equal speed an HCA before an interface;
 * then name and port.  <0 when a goes first. */
static int mdr_disc_cmp_order(const mdr_netdev_t *a, const mdr_netdev_t *b,
                              const mdr_disc_opts_t *o)
{
    long sa = mdr_disc_speed(a, o), sb = mdr_disc_speed(b, o);
    int c;
    if (sa != sb)
        return sa > sb ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind == MDR_NETDEV_HCA ? -1 : 1;
    c = strcmp(a->name, b->name);
    if (c)
        return c;
    return a->port < b->port ? -1 : a->port > b->port;
}

/* Keep order when capping: near the binding (or unknown) first, then the
 * rail order. */
static int mdr_disc_cmp_keep(const mdr_netdev_t *a, const mdr_netdev_t *b, const mdr_disc_opts_t *o)
{
    int fa = a->near == MDR_NETDEV_FAR, fb = b->near == MDR_NETDEV_FAR;
    if (fa != fb)
        return fa - fb;
    return mdr_disc_cmp_order(a, b, o);
}

/* Same PCI device: equal bus ids up to the function ("0000:3b:00.0" and
 * "0000:3b:00.1" are two ports of one card, on one PCIe link). */
static int mdr_disc_same_pci_device(const char *a, const char *b)
{
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    return a[0] != '\0' && la == lb && strncmp(a, b, la) == 0;
}

static void mdr_disc_label(const mdr_netdev_t *d, char *buf, size_t len)
{
    if (d->kind == MDR_NETDEV_HCA)
        snprintf(buf, len, "%s port %u", d->name, d->port);
    else
        snprintf(buf, len, "%s", d->name);
}

/* Verdicts and warnings are cut at their buffer's end (a long spec or name
 * only shortens the message). */
static void mdr_disc_text(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mdr_disc_text(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}
#define mdr_disc_why(_v, ...) mdr_disc_text((_v)->why, sizeof((_v)->why), __VA_ARGS__)

/* ---------------- the choice ---------------- */

int mdr_discover_choose(const mdr_netdev_t *devs, int ndev, const mdr_disc_opts_t *opts,
                        mdr_disc_verdict_t *verdict, mdr_disc_result_t *res)
{
    mdr_disc_opts_t o = *opts;
    char spec[MDR_DISC_SPEC_MAX], other[MDR_DISC_SPEC_MAX], label[48], drivers[48];
    int i, j, best_tier = MDR_DISC_TIER_LOOPBACK + 1, kept = 0;
    int order[MDR_DISC_MAX_RAILS];

    memset(res, 0, sizeof(*res));
    if (o.max_rails < 1)
        o.max_rails = 1;
    if (o.max_rails > MDR_DISC_MAX_RAILS)
        o.max_rails = MDR_DISC_MAX_RAILS;
    if (o.default_speed_mbps <= 0)
        o.default_speed_mbps = 10000;

    /* 1. usable at all? */
    for (i = 0; i < ndev; i++) {
        const mdr_netdev_t *d = &devs[i];
        const mdr_disc_map_t *m = mdr_disc_map_for(d, &o);
        mdr_disc_verdict_t *v = &verdict[i];

        v->rail = MDR_DISC_REJECTED;
        mdr_disc_drivers_of(d->kind, drivers, sizeof(drivers));
        if (!mdr_disc_name_ok(d)) {
            mdr_disc_why(v, "rejected: its name cannot be written in a rail spec");
        } else if (d->kind == MDR_NETDEV_HCA) {
            if (!d->up)
                mdr_disc_why(v, "rejected: port not ACTIVE");
            else if (!m)
                mdr_disc_why(v, "rejected: no driver for OpenFabrics devices built (%s)", drivers);
            else
                v->rail = MDR_DISC_CANDIDATE;
        } else {
            if (!d->up)
                mdr_disc_why(v, "rejected: link down");
            else if (!(d->addr & (MDR_NETDEV_IPV4 | MDR_NETDEV_IPV6)))
                mdr_disc_why(v, "rejected: no IPv4 or IPv6 address");
            else if (!m)
                mdr_disc_why(v, "rejected: no driver for network interfaces built (%s)", drivers);
            else if (m->need_addr && !(d->addr & m->need_addr))
                mdr_disc_why(v, "rejected: IPv6 only, the %s driver needs an IPv4 address",
                             m->driver);
            else
                v->rail = MDR_DISC_CANDIDATE;
        }
    }

    /* 2a. an HCA reached natively supersedes the interfaces on its PCI device */
    for (i = 0; i < ndev; i++) {
        if (verdict[i].rail != MDR_DISC_CANDIDATE || devs[i].kind != MDR_NETDEV_IFACE ||
            devs[i].pci[0] == '\0')
            continue;
        for (j = 0; j < ndev; j++)
            if (verdict[j].rail == MDR_DISC_CANDIDATE && devs[j].kind == MDR_NETDEV_HCA &&
                strcmp(devs[j].pci, devs[i].pci) == 0)
                break;
        if (j < ndev) {
            mdr_disc_map_for(&devs[j], &o)->spec(&devs[j], other, sizeof(other));
            verdict[i].rail = MDR_DISC_REJECTED;
            mdr_disc_why(&verdict[i], "rejected: same PCI device %s as %s, used natively (%s)",
                         devs[i].pci, devs[j].name, other);
        }
    }
    /* 2b. two devices giving one rail spec (ports of one HCA under ofi) */
    for (i = 0; i < ndev; i++) {
        if (verdict[i].rail != MDR_DISC_CANDIDATE)
            continue;
        mdr_disc_map_for(&devs[i], &o)->spec(&devs[i], spec, sizeof(spec));
        for (j = 0; j < ndev; j++) {
            int c;
            if (j == i || verdict[j].rail != MDR_DISC_CANDIDATE)
                continue;
            c = mdr_disc_cmp_keep(&devs[j], &devs[i], &o);
            if (c > 0 || (c == 0 && j > i)) /* only a device kept before this one */
                continue;
            mdr_disc_map_for(&devs[j], &o)->spec(&devs[j], other, sizeof(other));
            if (strcmp(spec, other) == 0)
                break;
        }
        if (j < ndev) {
            mdr_disc_label(&devs[j], label, sizeof(label));
            verdict[i].rail = MDR_DISC_REJECTED;
            mdr_disc_why(&verdict[i], "rejected: same rail %s as %s", spec, label);
        }
    }

    /* 3. the best tier only */
    for (i = 0; i < ndev; i++)
        if (verdict[i].rail == MDR_DISC_CANDIDATE && mdr_disc_tier(&devs[i]) < best_tier)
            best_tier = mdr_disc_tier(&devs[i]);
    for (i = 0; i < ndev; i++) {
        int t = mdr_disc_tier(&devs[i]);
        if (verdict[i].rail != MDR_DISC_CANDIDATE || t == best_tier)
            continue;
        verdict[i].rail = MDR_DISC_REJECTED;
        mdr_disc_why(&verdict[i], "%s",
                     t == MDR_DISC_TIER_LOOPBACK
                         ? "rejected: loopback, used only when no other device qualifies"
                         : "rejected: virtual interface, used only when no PCI-backed device "
                           "qualifies");
    }

    /* 4. locality: among interchangeable devices, the near ones */
    if (o.near_only) {
        for (i = 0; i < ndev; i++) {
            const mdr_disc_map_t *mi;
            int twin = -1;

            if (verdict[i].rail != MDR_DISC_CANDIDATE || devs[i].near != MDR_NETDEV_FAR)
                continue;
            mi = mdr_disc_map_for(&devs[i], &o);
            for (j = 0; j < ndev && twin < 0; j++)
                if (j != i && verdict[j].rail == MDR_DISC_CANDIDATE &&
                    devs[j].near != MDR_NETDEV_FAR && mdr_disc_map_for(&devs[j], &o) == mi &&
                    mdr_disc_speed(&devs[j], &o) == mdr_disc_speed(&devs[i], &o))
                    twin = j;
            if (twin < 0)
                continue; /* nothing like it near: kept (and warned about) */
            /* a twin is never FAR, so rejecting here changes no other
             * device's outcome */
            verdict[i].rail = MDR_DISC_REJECTED;
            mdr_disc_label(&devs[twin], label, sizeof(label));
            if (devs[i].numa >= 0)
                snprintf(other, sizeof(other), "NUMA node %d", devs[i].numa);
            else
                snprintf(other, sizeof(other), "PU(s) %s", devs[i].cpus[0] ? devs[i].cpus : "?");
            mdr_disc_why(&verdict[i],
                         "rejected: on %s, away from the binding (%s); %s, of the same driver "
                         "and speed, is near it (MADRAIL_AUTO_LOCALITY=all to use both)",
                         other, o.binding ? o.binding : "?", label);
        }
    }

    /* 5. keep at most max_rails: near first, then fast */
    while ((unsigned)kept < o.max_rails) {
        int best = -1;
        for (i = 0; i < ndev; i++)
            if (verdict[i].rail == MDR_DISC_CANDIDATE &&
                (best < 0 || mdr_disc_cmp_keep(&devs[i], &devs[best], &o) < 0))
                best = i;
        if (best < 0)
            break;
        verdict[best].rail = MDR_DISC_KEPT;
        order[kept++] = best;
    }
    for (i = 0; i < ndev; i++)
        if (verdict[i].rail == MDR_DISC_CANDIDATE) {
            verdict[i].rail = MDR_DISC_REJECTED;
            mdr_disc_why(&verdict[i],
                         "rejected: MADRAIL_AUTO_MAX_RAILS=%u reached by nearer or faster devices",
                         o.max_rails);
        }

    /* 6. rail order: fastest first, then by name */
    for (i = 1; i < kept; i++) {
        int x = order[i];
        for (j = i; j > 0 && mdr_disc_cmp_order(&devs[x], &devs[order[j - 1]], &o) < 0; j--)
            order[j] = order[j - 1];
        order[j] = x;
    }
    for (i = 0; i < kept; i++) {
        const mdr_netdev_t *d = &devs[order[i]];
        mdr_disc_rail_t *r = &res->rails[i];
        char where[64], addr[32];

        r->dev = order[i];
        mdr_disc_map_for(d, &o)->spec(d, r->spec, sizeof(r->spec));
        r->speed_mbps = mdr_disc_speed(d, &o);
        r->weight = (double)r->speed_mbps;
        verdict[order[i]].rail = i;
        if (d->near == MDR_NETDEV_NEAR)
            snprintf(where, sizeof(where), "near the binding");
        else if (d->near == MDR_NETDEV_FAR && d->numa >= 0)
            snprintf(where, sizeof(where), "NUMA node %d, away from the binding", d->numa);
        else if (d->near == MDR_NETDEV_FAR)
            snprintf(where, sizeof(where), "away from the binding");
        else
            snprintf(where, sizeof(where), "locality unknown");
        if (d->kind == MDR_NETDEV_HCA)
            snprintf(addr, sizeof(addr), "port ACTIVE");
        else
            snprintf(addr, sizeof(addr), "up, %s",
                     (d->addr & MDR_NETDEV_IPV4) && (d->addr & MDR_NETDEV_IPV6) ? "IPv4+IPv6"
                     : (d->addr & MDR_NETDEV_IPV4)                              ? "IPv4"
                                                                                : "IPv6");
        mdr_disc_why(&verdict[order[i]], "chosen: rail %d %s, weight %ld: %s, %ld Mb/s%s, %s%s%s",
                     i, r->spec, r->speed_mbps, addr, r->speed_mbps,
                     d->speed_mbps > 0 ? "" : " (default)", where,
                     best_tier == MDR_DISC_TIER_LOOPBACK  ? "; loopback: nothing else qualifies"
                     : best_tier == MDR_DISC_TIER_VIRTUAL ? "; no PCI-backed device qualifies"
                                                          : "",
                     o.near_only && d->near == MDR_NETDEV_FAR
                         ? "; none of its driver and speed is near the binding"
                         : "");
    }
    res->nrails = kept;

    /* warnings */
    for (i = 0; i < kept; i++) {
        const mdr_netdev_t *a = &devs[res->rails[i].dev];
        for (j = i + 1; j < kept && a->pci[0]; j++) {
            const mdr_netdev_t *b = &devs[res->rails[j].dev];
            mdr_disc_warn_t *w;
            if (!mdr_disc_same_pci_device(a->pci, b->pci) || res->nwarn == MDR_DISC_MAX_WARN)
                continue;
            w = &res->warn[res->nwarn++];
            w->kind = MDR_DISC_WARN_SHARED_PCI;
            w->rail_a = i;
            w->rail_b = j;
            mdr_disc_text(w->text, sizeof(w->text),
                          "rails %d (%s) and %d (%s) share PCI device %.*s: they split one "
                          "device's bandwidth",
                          i, res->rails[i].spec, j, res->rails[j].spec,
                          (int)strcspn(a->pci, "."), a->pci);
        }
    }
    for (i = 0; i < kept; i++) {
        const mdr_netdev_t *a = &devs[res->rails[i].dev];
        mdr_disc_warn_t *w;
        if (a->near != MDR_NETDEV_FAR || res->nwarn == MDR_DISC_MAX_WARN)
            continue;
        w = &res->warn[res->nwarn++];
        w->kind = MDR_DISC_WARN_FAR_NUMA;
        w->rail_a = i;
        w->rail_b = -1;
        if (a->numa >= 0)
            snprintf(other, sizeof(other), "NUMA node %d", a->numa);
        else
            snprintf(other, sizeof(other), "PU(s) %s", a->cpus[0] ? a->cpus : "?");
        mdr_disc_text(w->text, sizeof(w->text),
                      "rail %d (%s) sits on %s, not near this process's binding (%s): its "
                      "traffic crosses the inter-socket link",
                      i, res->rails[i].spec, other, o.binding ? o.binding : "?");
    }
    return kept;
}

/* ---------------- on this machine ---------------- */

/* Parse MADRAIL_AUTO_*, probe (this machine or a topology file), choose. */
static madrail_status_t mdr_discover_do(const char *const *overrides, int synthetic,
                                        mdr_discover_t *disc)
{
    madrail_status_t st;
    mdr_disc_opts_t opts;
    char binding[128];
    int near_only;

    if (!disc)
        return MADRAIL_ERR_INVALID;
    memset(disc, 0, sizeof(*disc));
    disc->synthetic = synthetic;
    st = mdr_cfg_parse(&mdr_discover_cfg_table, overrides, &disc->cfg);
    if (st != MADRAIL_OK)
        goto err_cfg;
    if (disc->cfg.locality && strcasecmp(disc->cfg.locality, "near") == 0) {
        near_only = 1;
    } else if (disc->cfg.locality && strcasecmp(disc->cfg.locality, "all") == 0) {
        near_only = 0;
    } else {
        mdr_error("MADRAIL_AUTO_LOCALITY=%s: not a locality policy (expected near or all)",
                  disc->cfg.locality ? disc->cfg.locality : "");
        st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }
    if (synthetic)
        st = mdr_topo_synthetic_netdevs(&disc->devs, &disc->ndev, &disc->bind);
    else
        st = mdr_topo_netdevs(&disc->devs, &disc->ndev, &disc->bind);
    if (st != MADRAIL_OK)
        goto err_cfg;
    disc->verdict = calloc(disc->ndev ? (size_t)disc->ndev : 1, sizeof(*disc->verdict));
    if (!disc->verdict) {
        st = MADRAIL_ERR_NOMEM;
        goto err_devs;
    }
    if (disc->bind.known)
        snprintf(binding, sizeof(binding), "PU(s) %s, NUMA node(s) %s", disc->bind.cpus,
                 disc->bind.numa);
    else
        snprintf(binding, sizeof(binding), "unknown");
    memset(&opts, 0, sizeof(opts));
    opts.max_rails = disc->cfg.max_rails;
    opts.default_speed_mbps = (long)disc->cfg.default_speed;
    opts.binding = binding;
    opts.near_only = near_only;
    mdr_discover_choose(disc->devs, disc->ndev, &opts, disc->verdict, &disc->res);
    return MADRAIL_OK;

err_devs:
    free(disc->devs);
    disc->devs = NULL;
err_cfg:
    mdr_cfg_release(&mdr_discover_cfg_table, &disc->cfg);
    return st;
}

madrail_status_t mdr_discover_run(const char *const *overrides, mdr_discover_t *disc)
{
    return mdr_discover_do(overrides, 0, disc);
}

madrail_status_t mdr_discover_run_synthetic(const char *const *overrides, mdr_discover_t *disc)
{
    return mdr_discover_do(overrides, 1, disc);
}

void mdr_discover_release(mdr_discover_t *disc)
{
    if (!disc)
        return;
    free(disc->verdict);
    free(disc->devs);
    mdr_cfg_release(&mdr_discover_cfg_table, &disc->cfg);
    memset(disc, 0, sizeof(*disc));
}

madrail_status_t mdr_discover_rails_string(const mdr_discover_t *disc, char **list_p)
{
    size_t len = 1, off = 0;
    char *s;
    int i;

    for (i = 0; i < disc->res.nrails; i++)
        len += strlen(disc->res.rails[i].spec) + 1;
    s = malloc(len);
    if (!s)
        return MADRAIL_ERR_NOMEM;
    s[0] = '\0';
    for (i = 0; i < disc->res.nrails; i++)
        off += (size_t)snprintf(s + off, len - off, "%s%s", i ? "," : "", disc->res.rails[i].spec);
    *list_p = s;
    return MADRAIL_OK;
}

void mdr_discover_report(const mdr_discover_t *disc, FILE *out)
{
    char label[48], speed[24], numa[12];
    int i;

    if (disc->synthetic)
        fprintf(out,
                "network devices of the synthetic topology (%d; not this machine's: taken as "
                "up with an IPv4 address, never opened)\n",
                disc->ndev);
    else
        fprintf(out, "network devices (%d)\n", disc->ndev);
    fprintf(out, "  %-16s %-6s %-13s %-5s %-10s %-8s %11s %-5s %s\n", "DEVICE", "KIND", "PCI",
            "NUMA", "NEAR-PUS", "LOCALITY", "SPEED(Mb/s)", "STATE", "ADDRESS");
    for (i = 0; i < disc->ndev; i++) {
        const mdr_netdev_t *d = &disc->devs[i];
        if (d->kind == MDR_NETDEV_HCA)
            snprintf(label, sizeof(label), "%s:%u", d->name, d->port);
        else
            snprintf(label, sizeof(label), "%s", d->name);
        if (d->speed_mbps > 0)
            snprintf(speed, sizeof(speed), "%ld", d->speed_mbps);
        else
            snprintf(speed, sizeof(speed), "?");
        if (d->numa >= 0)
            snprintf(numa, sizeof(numa), "%d", d->numa);
        else
            snprintf(numa, sizeof(numa), "?");
        fprintf(out, "  %-16s %-6s %-13s %-5s %-10s %-8s %11s %-5s %s\n", label,
                d->kind == MDR_NETDEV_HCA ? "hca"
                : d->loopback             ? "loop"
                                          : "iface",
                d->pci[0]                                ? d->pci
                : d->kind == MDR_NETDEV_IFACE && d->virt ? "(virtual)"
                                                         : "?",
                numa, d->cpus[0] ? d->cpus : "?",
                d->near == MDR_NETDEV_NEAR  ? "near"
                : d->near == MDR_NETDEV_FAR ? "far"
                                            : "?",
                speed, d->up ? "up" : "down",
                d->kind == MDR_NETDEV_HCA                                    ? "-"
                : (d->addr & MDR_NETDEV_IPV4) && (d->addr & MDR_NETDEV_IPV6) ? "IPv4,IPv6"
                : (d->addr & MDR_NETDEV_IPV4)                                ? "IPv4"
                : (d->addr & MDR_NETDEV_IPV6)                                ? "IPv6"
                                                                             : "none");
    }
    fprintf(out,
            "%sauto-discovery (MADRAIL_RAILS=auto, MADRAIL_AUTO_MAX_RAILS=%u, "
            "MADRAIL_AUTO_LOCALITY=%s, unknown speed = %u Mb/s, binding %s%s): %d rail(s)",
            disc->synthetic ? "synthetic " : "", disc->cfg.max_rails,
            disc->cfg.locality ? disc->cfg.locality : "?", disc->cfg.default_speed,
            disc->bind.known ? "PU(s) " : "unknown", disc->bind.known ? disc->bind.cpus : "",
            disc->res.nrails);
    for (i = 0; i < disc->res.nrails; i++)
        fprintf(out, "%s%s", i ? "," : " ", disc->res.rails[i].spec);
    fprintf(out, "\n");
    for (i = 0; i < disc->ndev; i++) {
        const mdr_netdev_t *d = &disc->devs[i];
        if (d->kind == MDR_NETDEV_HCA)
            snprintf(label, sizeof(label), "%s:%u", d->name, d->port);
        else
            snprintf(label, sizeof(label), "%s", d->name);
        fprintf(out, "  %-16s %s\n", label, disc->verdict[i].why);
    }
    for (i = 0; i < disc->res.nwarn; i++)
        fprintf(out, "  warning: %s\n", disc->res.warn[i].text);
    if (disc->res.nrails == 0 && !disc->synthetic)
        fprintf(out, "  no usable device: set MADRAIL_RAILS (e.g. tcp:lo)\n");
}

/* Public: madrail_info -r prints this after the context's rails. */
void madrail_topology_print(FILE *out)
{
    mdr_discover_t disc;
    madrail_status_t st;

    if (!out)
        return;
    mdr_topo_print_machine(out);
    st = mdr_discover_run(NULL, &disc);
    if (st != MADRAIL_OK) {
        fprintf(out, "rail discovery failed: %s\n", madrail_status_str(st));
        return;
    }
    mdr_discover_report(&disc, out);
    mdr_discover_release(&disc);
    /* An hwloc topology file of another machine: what a process bound as
     * this one would choose there (the section above is this machine's). */
    st = mdr_discover_run_synthetic(NULL, &disc);
    if (st == MADRAIL_ERR_UNSUPPORTED)
        return;
    if (st != MADRAIL_OK) {
        fprintf(out, "rail discovery on the synthetic topology failed: %s\n",
                madrail_status_str(st));
        return;
    }
    mdr_discover_report(&disc, out);
    mdr_discover_release(&disc);
}
