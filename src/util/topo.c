/*
 * What the machine looks like to madrail: the network interfaces and
 * OpenFabrics HCA ports, their link state and speed, and where each sits
 * relative to this process's binding.
 *
 * Built in two passes so each source does what it is good at: the kernel
 * (getifaddrs, /sys/class/net, /sys/class/infiniband) is the authority on
 * which devices exist in this network namespace, their state, speed and
 * addresses, and it sees virtual interfaces (veth, bridges) that hwloc
 * does not; hwloc then adds locality (the PCI device, the NUMA node and
 * cores it hangs off, and whether the process's binding overlaps them).
 * Without hwloc the PCI id and NUMA node still come from sysfs and the
 * locality is reported unknown.  Nothing here decides anything: the rail
 * choice is core/discover.c's pure function over these records.
 *
 * An hwloc topology file (HWLOC_XMLFILE) only ever adds locality to the
 * kernel's devices, matched by name, so a rail is never opened on a device
 * this machine lacks.  When the file describes another machine, hwloc
 * cannot read bindings, so the kernel's affinity mask stands for the
 * binding (PUs matched by OS index), and the file's own devices can be
 * listed apart (mdr_topo_synthetic_netdevs) for madrail_info to show what
 * a process bound like this one would choose there.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

#include "util/log.h"
#include "util/topo.h"

typedef struct mdr_topo_list {
    mdr_netdev_t *v;
    int n, cap;
} mdr_topo_list_t;

/* First line of a small sysfs file, without the newline; 0 on success. */
static int mdr_topo_read(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return -1;
    if (!fgets(buf, (int)len, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

static mdr_netdev_t *mdr_topo_add(mdr_topo_list_t *l)
{
    mdr_netdev_t *d;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        mdr_netdev_t *nv = realloc(l->v, (size_t)cap * sizeof(*nv));
        if (!nv)
            return NULL;
        l->v = nv;
        l->cap = cap;
    }
    d = &l->v[l->n++];
    memset(d, 0, sizeof(*d));
    d->numa = -1;
    d->near = MDR_NETDEV_NEAR_UNKNOWN;
    return d;
}

/* PCI id and NUMA node from sysfs: the deepest PCI device ("0000:3b:00.0")
 * on the resolved path of the device directory (an interface may hang off
 * a virtio or USB child of it). */
static void mdr_topo_sysfs_pci(const char *devdir, mdr_netdev_t *d)
{
    char real[PATH_MAX], seg[16], buf[32];
    size_t pos = 0, keep = 0, n;
    unsigned a, b, c, f;
    char tail;

    if (!realpath(devdir, real))
        return;
    while (real[pos]) {
        while (real[pos] == '/')
            pos++;
        n = strcspn(real + pos, "/");
        if (n == 12) {
            memcpy(seg, real + pos, n);
            seg[n] = '\0';
            if (sscanf(seg, "%4x:%2x:%2x.%1x%c", &a, &b, &c, &f, &tail) == 4) {
                memcpy(d->pci, seg, n + 1);
                keep = pos + n;
            }
        }
        pos += n;
    }
    if (keep == 0 || keep + sizeof("/numa_node") > sizeof(real))
        return;
    memcpy(real + keep, "/numa_node", sizeof("/numa_node"));
    if (mdr_topo_read(real, buf, sizeof(buf)) == 0 && atoi(buf) >= 0)
        d->numa = atoi(buf);
}

/* State, speed and backing device of an interface from /sys/class/net. */
static void mdr_topo_iface_sysfs(mdr_netdev_t *d, unsigned flags)
{
    char path[128], buf[64];
    struct stat sb;
    int running = (flags & IFF_UP) && (flags & IFF_RUNNING);

    d->loopback = (flags & IFF_LOOPBACK) != 0;
    snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", d->name);
    if (mdr_topo_read(path, buf, sizeof(buf)) != 0)
        d->up = running;
    else if (strcmp(buf, "up") == 0)
        d->up = (flags & IFF_UP) != 0;
    else if (strcmp(buf, "unknown") == 0) /* lo, tun: no operstate; trust the carrier */
        d->up = running;
    else
        d->up = 0; /* down, lowerlayerdown, dormant, notpresent, testing */
    if (d->up && !d->loopback) {
        snprintf(path, sizeof(path), "/sys/class/net/%s/carrier", d->name);
        if (mdr_topo_read(path, buf, sizeof(buf)) == 0 && strcmp(buf, "0") == 0)
            d->up = 0;
    }
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", d->name);
    if (mdr_topo_read(path, buf, sizeof(buf)) == 0 && atol(buf) > 0)
        d->speed_mbps = atol(buf);
    snprintf(path, sizeof(path), "/sys/class/net/%s/device", d->name);
    d->virt = stat(path, &sb) != 0;
    if (!d->virt)
        mdr_topo_sysfs_pci(path, d);
}

static madrail_status_t mdr_topo_ifaces(mdr_topo_list_t *l)
{
    struct ifaddrs *list, *ifa;
    int i;

    if (getifaddrs(&list) != 0) {
        mdr_error("rail discovery: getifaddrs: %m");
        return MADRAIL_ERR_IO;
    }
    /* one entry per address (and one AF_PACKET entry) of each interface */
    for (ifa = list; ifa; ifa = ifa->ifa_next) {
        mdr_netdev_t *d = NULL;
        for (i = 0; i < l->n && !d; i++)
            if (strcmp(l->v[i].name, ifa->ifa_name) == 0)
                d = &l->v[i];
        if (!d) {
            d = mdr_topo_add(l);
            if (!d) {
                freeifaddrs(list);
                return MADRAIL_ERR_NOMEM;
            }
            snprintf(d->name, sizeof(d->name), "%s", ifa->ifa_name);
            mdr_topo_iface_sysfs(d, ifa->ifa_flags);
        }
        if (!ifa->ifa_addr)
            continue;
        if (ifa->ifa_addr->sa_family == AF_INET) {
            d->addr |= MDR_NETDEV_IPV4;
        } else if (ifa->ifa_addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ifa->ifa_addr;
            if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
                d->addr |= MDR_NETDEV_IPV6;
        }
    }
    freeifaddrs(list);
    return MADRAIL_OK;
}

/* Rate "100 Gb/sec (4X EDR)" in Mb/s, 0 when unreadable (exposed for the test). */
long mdr_topo_ib_rate(const char *text)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || v <= 0)
        return 0;
    while (*end == ' ')
        end++;
    if (strncmp(end, "Gb", 2) == 0)
        return (long)(v * 1000.0 + 0.5);
    if (strncmp(end, "Mb", 2) == 0)
        return (long)(v + 0.5);
    return 0;
}

static madrail_status_t mdr_topo_hcas(mdr_topo_list_t *l)
{
    DIR *dir, *pdir;
    struct dirent *e, *pe;
    char path[PATH_MAX], buf[64], name[MDR_NETDEV_NAME_MAX];

    dir = opendir("/sys/class/infiniband");
    if (!dir)
        return MADRAIL_OK; /* no RDMA devices (or no sysfs): nothing to add */
    while ((e = readdir(dir)) != NULL) {
        size_t nlen = strlen(e->d_name);
        if (e->d_name[0] == '.' || nlen >= sizeof(name))
            continue;
        memcpy(name, e->d_name, nlen + 1);
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports", name);
        pdir = opendir(path);
        if (!pdir)
            continue;
        while ((pe = readdir(pdir)) != NULL) {
            mdr_netdev_t *d;
            long port = strtol(pe->d_name, NULL, 10);
            if (pe->d_name[0] == '.' || port <= 0 || port > 255)
                continue;
            d = mdr_topo_add(l);
            if (!d) {
                closedir(pdir);
                closedir(dir);
                return MADRAIL_ERR_NOMEM;
            }
            memcpy(d->name, name, sizeof(name));
            d->kind = MDR_NETDEV_HCA;
            d->port = (unsigned)port;
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%ld/state", name, port);
            d->up = mdr_topo_read(path, buf, sizeof(buf)) == 0 && strstr(buf, "ACTIVE");
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%ld/rate", name, port);
            if (mdr_topo_read(path, buf, sizeof(buf)) == 0)
                d->speed_mbps = mdr_topo_ib_rate(buf);
            snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", name);
            mdr_topo_sysfs_pci(path, d);
        }
        closedir(pdir);
    }
    closedir(dir);
    return MADRAIL_OK;
}

#ifdef HAVE_HWLOC
static hwloc_topology_t mdr_topo_load(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return NULL;
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
    /* PCI from Linux sysfs rather than the libpciaccess plugin: same
     * devices here, and that plugin leaks at every load (LeakSanitizer),
     * which every context would now pay with MADRAIL_RAILS=auto */
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return NULL;
    }
    return topo;
}

/* The CPUs this process may run on, from the kernel (sched_getaffinity of
 * the calling thread, i.e. the binding mpiexec or Slurm gave the process
 * before it started), as OS indexes; 0 on success.  The mask grows until
 * the kernel accepts its size (machines with more than CPU_SETSIZE CPUs). */
static int mdr_topo_affinity(hwloc_bitmap_t set)
{
    int ncpu = CPU_SETSIZE, cpu;

    for (;;) {
        cpu_set_t *mask = CPU_ALLOC((size_t)ncpu);
        size_t size = CPU_ALLOC_SIZE((size_t)ncpu);
        if (!mask)
            return -1;
        CPU_ZERO_S(size, mask);
        if (sched_getaffinity(0, size, mask) == 0) {
            hwloc_bitmap_zero(set);
            for (cpu = 0; cpu < ncpu; cpu++)
                if (CPU_ISSET_S((size_t)cpu, size, mask))
                    hwloc_bitmap_set(set, (unsigned)cpu);
            CPU_FREE(mask);
            return 0;
        }
        CPU_FREE(mask);
        if (errno != EINVAL || ncpu >= (1 << 20))
            return -1;
        ncpu *= 2;
    }
}

/*
 * The process binding, restricted to the machine; 0 when known.  On a
 * topology of this system hwloc reads it (every thread's, OR'ed: what the
 * process as a whole may use).  On a topology that describes another
 * machine (an XML file without HWLOC_THISSYSTEM=1) hwloc refuses binding
 * queries, so the kernel's affinity mask is read instead and matched to
 * the file's PUs by OS index: a process bound with taskset or mpiexec
 * then sees the described machine as if it ran there.
 */
static int mdr_topo_get_binding(hwloc_topology_t topo, hwloc_bitmap_t set)
{
    if (hwloc_topology_is_thissystem(topo)) {
        if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0 &&
            hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0)
            return -1;
    } else if (mdr_topo_affinity(set) != 0) {
        return -1;
    }
    hwloc_bitmap_and(set, set, hwloc_topology_get_topology_cpuset(topo));
    return hwloc_bitmap_iszero(set) ? -1 : 0;
}

/* Where the process runs: *bind filled, *set the binding; 1 when known. */
static int mdr_topo_binding(hwloc_topology_t topo, hwloc_bitmap_t set, mdr_topo_binding_t *bind)
{
    hwloc_bitmap_t nodes;

    if (mdr_topo_get_binding(topo, set) != 0)
        return 0;
    if (bind) {
        bind->known = 1;
        hwloc_bitmap_list_snprintf(bind->cpus, sizeof(bind->cpus), set);
        nodes = hwloc_bitmap_alloc();
        if (nodes) {
            hwloc_cpuset_to_nodeset(topo, set, nodes);
            hwloc_bitmap_list_snprintf(bind->numa, sizeof(bind->numa), nodes);
            hwloc_bitmap_free(nodes);
        }
    }
    return 1;
}

/* An OS device's PCI id, nearby PUs, NUMA node and nearness to the
 * binding (set, when bound) into d. */
static void mdr_topo_osdev_locality(hwloc_topology_t topo, hwloc_obj_t dev, int bound,
                                    hwloc_const_bitmap_t set, mdr_netdev_t *d)
{
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, dev), pci;

    for (pci = dev->parent; pci && pci->type != HWLOC_OBJ_PCI_DEVICE; pci = pci->parent)
        ;
    if (pci) { /* hwloc knows its PCI device: not a virtual interface */
        snprintf(d->pci, sizeof(d->pci), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain,
                 pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
        d->virt = 0;
    }
    if (anc && anc->cpuset) {
        hwloc_bitmap_list_snprintf(d->cpus, sizeof(d->cpus), anc->cpuset);
        if (bound)
            d->near = hwloc_bitmap_intersects(set, anc->cpuset) ? MDR_NETDEV_NEAR : MDR_NETDEV_FAR;
    }
    if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
        d->numa = hwloc_bitmap_first(anc->nodeset);
}

static int mdr_topo_osdev_kind(hwloc_obj_t dev, mdr_netdev_kind_t *kind_p)
{
    if (!dev->name)
        return -1;
    if (dev->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
        *kind_p = MDR_NETDEV_IFACE;
    else if (dev->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        *kind_p = MDR_NETDEV_HCA;
    else
        return -1;
    return 0;
}

static void mdr_topo_locality(mdr_topo_list_t *l, mdr_topo_binding_t *bind)
{
    hwloc_topology_t topo = mdr_topo_load();
    hwloc_bitmap_t set = NULL;
    hwloc_obj_t dev = NULL;
    int bound = 0, i;

    if (!topo) {
        mdr_debug("rail discovery: hwloc could not load the topology; locality unknown");
        return;
    }
    set = hwloc_bitmap_alloc();
    if (set)
        bound = mdr_topo_binding(topo, set, bind);
    /* The kernel's list decides which devices exist; hwloc only adds
     * where they sit (a device named in an XML topology but absent here
     * is never a rail). */
    while ((dev = hwloc_get_next_osdev(topo, dev)) != NULL) {
        mdr_netdev_kind_t kind;

        if (mdr_topo_osdev_kind(dev, &kind) != 0)
            continue;
        for (i = 0; i < l->n; i++)
            if (l->v[i].kind == kind && strcmp(l->v[i].name, dev->name) == 0)
                mdr_topo_osdev_locality(topo, dev, bound, set, &l->v[i]);
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
}
#endif

static int mdr_topo_cmp(const void *a, const void *b)
{
    const mdr_netdev_t *x = a, *y = b;
    int c;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->port < y->port ? -1 : x->port > y->port;
}

madrail_status_t mdr_topo_netdevs(mdr_netdev_t **devs_p, int *n_p, mdr_topo_binding_t *bind_p)
{
    mdr_topo_list_t l = {NULL, 0, 0};
    madrail_status_t st;

    if (!devs_p || !n_p)
        return MADRAIL_ERR_INVALID;
    if (bind_p)
        memset(bind_p, 0, sizeof(*bind_p));
    st = mdr_topo_ifaces(&l);
    if (st != MADRAIL_OK)
        goto err_free;
    st = mdr_topo_hcas(&l);
    if (st != MADRAIL_OK)
        goto err_free;
#ifdef HAVE_HWLOC
    mdr_topo_locality(&l, bind_p);
#endif
    if (l.n > 1)
        qsort(l.v, (size_t)l.n, sizeof(l.v[0]), mdr_topo_cmp);
    *devs_p = l.v;
    *n_p = l.n;
    return MADRAIL_OK;

err_free:
    free(l.v);
    return st;
}

#ifdef HAVE_HWLOC
/* One record per port of a synthetic HCA: the ports hwloc's Linux backend
 * recorded ("Port1State" = "4" is ACTIVE), or port 1, up, when the file
 * names none. */
static madrail_status_t mdr_topo_synthetic_hca(mdr_topo_list_t *l, hwloc_topology_t topo,
                                               hwloc_obj_t dev, int bound,
                                               hwloc_const_bitmap_t set)
{
    unsigned i, port, nports = 0;
    mdr_netdev_t *d;

    for (i = 0; i < dev->infos_count; i++) {
        const char *n = dev->infos[i].name, *v = dev->infos[i].value, *q;
        if (!n || !v || strncmp(n, "Port", 4) != 0)
            continue;
        for (q = n + 4, port = 0; *q >= '0' && *q <= '9' && port <= 255; q++)
            port = port * 10 + (unsigned)(*q - '0');
        if (q == n + 4 || strcmp(q, "State") != 0 || port == 0 || port > 255)
            continue;
        d = mdr_topo_add(l);
        if (!d)
            return MADRAIL_ERR_NOMEM;
        snprintf(d->name, sizeof(d->name), "%s", dev->name);
        d->kind = MDR_NETDEV_HCA;
        d->port = port;
        d->up = strcmp(v, "4") == 0;
        mdr_topo_osdev_locality(topo, dev, bound, set, d);
        nports++;
    }
    if (nports)
        return MADRAIL_OK;
    d = mdr_topo_add(l);
    if (!d)
        return MADRAIL_ERR_NOMEM;
    snprintf(d->name, sizeof(d->name), "%s", dev->name);
    d->kind = MDR_NETDEV_HCA;
    d->port = 1;
    d->up = 1;
    mdr_topo_osdev_locality(topo, dev, bound, set, d);
    return MADRAIL_OK;
}

madrail_status_t mdr_topo_synthetic_netdevs(mdr_netdev_t **devs_p, int *n_p,
                                            mdr_topo_binding_t *bind_p)
{
    mdr_topo_list_t l = {NULL, 0, 0};
    hwloc_topology_t topo;
    hwloc_bitmap_t set;
    hwloc_obj_t dev = NULL;
    madrail_status_t st = MADRAIL_OK;
    int bound = 0;

    if (!devs_p || !n_p)
        return MADRAIL_ERR_INVALID;
    if (bind_p)
        memset(bind_p, 0, sizeof(*bind_p));
    topo = mdr_topo_load();
    if (!topo)
        return MADRAIL_ERR_UNSUPPORTED;
    if (hwloc_topology_is_thissystem(topo)) {
        hwloc_topology_destroy(topo);
        return MADRAIL_ERR_UNSUPPORTED;
    }
    set = hwloc_bitmap_alloc();
    if (!set) {
        hwloc_topology_destroy(topo);
        return MADRAIL_ERR_NOMEM;
    }
    bound = mdr_topo_binding(topo, set, bind_p);
    while (st == MADRAIL_OK && (dev = hwloc_get_next_osdev(topo, dev)) != NULL) {
        mdr_netdev_kind_t kind;
        mdr_netdev_t *d;

        if (mdr_topo_osdev_kind(dev, &kind) != 0)
            continue;
        if (kind == MDR_NETDEV_HCA) {
            st = mdr_topo_synthetic_hca(&l, topo, dev, bound, set);
            continue;
        }
        d = mdr_topo_add(&l);
        if (!d) {
            st = MADRAIL_ERR_NOMEM;
            break;
        }
        snprintf(d->name, sizeof(d->name), "%s", dev->name);
        d->kind = MDR_NETDEV_IFACE;
        d->up = 1;
        d->addr = MDR_NETDEV_IPV4;
        d->virt = 1; /* until its PCI device is found */
        mdr_topo_osdev_locality(topo, dev, bound, set, d);
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    if (st != MADRAIL_OK) {
        free(l.v);
        return st;
    }
    if (l.n > 1)
        qsort(l.v, (size_t)l.n, sizeof(l.v[0]), mdr_topo_cmp);
    *devs_p = l.v;
    *n_p = l.n;
    return MADRAIL_OK;
}

void mdr_topo_print_machine(FILE *out)
{
    hwloc_topology_t topo = mdr_topo_load();
    hwloc_bitmap_t set;
    mdr_topo_binding_t bind;

    if (!topo) {
        fprintf(out, "topology: hwloc could not load the topology\n");
        return;
    }
    fprintf(out, "topology (hwloc %s%s): %d NUMA node(s), %d core(s), %d PU(s)\n", HWLOC_VERSION,
            hwloc_topology_is_thissystem(topo)
                ? ""
                : "; synthetic: not this system (HWLOC_XMLFILE without HWLOC_THISSYSTEM=1)",
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    memset(&bind, 0, sizeof(bind));
    set = hwloc_bitmap_alloc();
    if (set && mdr_topo_binding(topo, set, &bind))
        fprintf(out, "  this process is bound to PU(s) %s (NUMA node(s) %s)%s\n", bind.cpus,
                bind.numa,
                hwloc_topology_is_thissystem(topo) ? "" : ", from its CPU affinity by OS index");
    else
        fprintf(out, "  the process binding could not be read\n");
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
}
#else
madrail_status_t mdr_topo_synthetic_netdevs(mdr_netdev_t **devs_p, int *n_p,
                                            mdr_topo_binding_t *bind_p)
{
    (void)devs_p;
    (void)n_p;
    (void)bind_p;
    return MADRAIL_ERR_UNSUPPORTED;
}

void mdr_topo_print_machine(FILE *out)
{
    fprintf(out, "topology: no hwloc in this build (locality unknown; devices from sysfs)\n");
}
#endif
