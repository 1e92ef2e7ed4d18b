/*
 * Unit test of the rail-discovery policy (core/discover.c) on machines
 * described by hand: the choice is a pure function of device records, so
 * two-socket nodes, dual-port HCAs, dead links and drivers that are not
 * built here can all be checked without the hardware.  The set of built
 * drivers is a test parameter (have_driver), so the ofi/ucx mappings are
 * exercised before those drivers exist.  Each case checks the chosen list
 * (specs and order), the weights, the warnings and the verdict of the
 * devices left out.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/discover.h"
#include "rails/rail.h"
#ifdef HAVE_UCX
#include "rails/ucx/ucx.h"
#endif
#include "unit_check.h"

#define MAXDEV 16

static const char *const only_tcp[] = {"tcp", "loop", NULL};
static const char *const tcp_ucx[] = {"tcp", "ucx", NULL};
static const char *const tcp_ofi_ucx[] = {"tcp", "ofi", "ucx", NULL};
static const char *const nothing[] = {"loop", NULL};

static int have(const char *name, void *arg)
{
    const char *const *l = arg;
    for (; *l; l++)
        if (strcmp(*l, name) == 0)
            return 1;
    return 0;
}

typedef struct {
    mdr_netdev_t d[MAXDEV];
    int n;
} machine_t;

static mdr_netdev_t *add(machine_t *m, const char *name, const char *pci, int numa, int near,
                         long speed, int up)
{
    mdr_netdev_t *d = &m->d[m->n++];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%s", name);
    snprintf(d->pci, sizeof(d->pci), "%s", pci);
    d->kind = MDR_NETDEV_IFACE;
    d->numa = numa;
    d->near = near;
    d->speed_mbps = speed;
    d->up = up;
    d->addr = MDR_NETDEV_IPV4;
    d->virt = pci[0] == '\0';
    return d;
}

static mdr_netdev_t *add_lo(machine_t *m)
{
    mdr_netdev_t *d = add(m, "lo", "", -1, MDR_NETDEV_NEAR_UNKNOWN, 0, 1);
    d->loopback = 1;
    d->addr = MDR_NETDEV_IPV4 | MDR_NETDEV_IPV6;
    return d;
}

static mdr_netdev_t *add_hca(machine_t *m, const char *name, unsigned port, const char *pci,
                             int numa, int near, long speed, int up)
{
    mdr_netdev_t *d = add(m, name, pci, numa, near, speed, up);
    d->kind = MDR_NETDEV_HCA;
    d->port = port;
    d->addr = 0;
    d->virt = 0;
    return d;
}

typedef struct {
    mdr_disc_verdict_t v[MAXDEV];
    mdr_disc_result_t r;
    char list[512];
    int n;
} outcome_t;

/* MADRAIL_AUTO_LOCALITY for run(): 0 = all (the pure function's zeroed
 * default, what the older cases check), 1 = near. */
static int near_only;

static void run(const machine_t *m, unsigned max, long defspeed, const char *const *built,
                outcome_t *o)
{
    mdr_disc_opts_t opts;
    size_t off = 0;
    int i;

    memset(&opts, 0, sizeof(opts));
    opts.max_rails = max;
    opts.default_speed_mbps = defspeed;
    opts.have_driver = have;
    opts.arg = (void *)built;
    opts.binding = "PU(s) 0-7, NUMA node(s) 0";
    opts.near_only = near_only;
    memset(o, 0, sizeof(*o));
    o->n = mdr_discover_choose(m->d, m->n, &opts, o->v, &o->r);
    for (i = 0; i < o->r.nrails; i++)
        off += (size_t)snprintf(o->list + off, sizeof(o->list) - off, "%s%s", i ? "," : "",
                                o->r.rails[i].spec);
}

static int dev_index(const machine_t *m, const char *name, unsigned port)
{
    int i;
    for (i = 0; i < m->n; i++)
        if (strcmp(m->d[i].name, name) == 0 && m->d[i].port == port)
            return i;
    return -1;
}

/* verdict of a device contains text */
static int why_has(const machine_t *m, const outcome_t *o, const char *name, unsigned port,
                   const char *text)
{
    int i = dev_index(m, name, port);
    return i >= 0 && strstr(o->v[i].why, text) != NULL;
}

static int rail_of(const machine_t *m, const outcome_t *o, const char *name, unsigned port)
{
    int i = dev_index(m, name, port);
    return i >= 0 ? o->v[i].rail : -99;
}

static int count_warn(const outcome_t *o, int kind)
{
    int i, n = 0;
    for (i = 0; i < o->r.nwarn; i++)
        n += o->r.warn[i].kind == kind;
    return n;
}

/* Two NICs, one per socket; the process is bound to socket 0. */
static void test_two_numa(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    add(&m, "eth1", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 25000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:eth0,tcp:eth1") == 0,
          "two NUMA nodes: both NICs, equal speed in name order (%s)", o.list);
    check(rail_of(&m, &o, "lo", 0) == -1 && why_has(&m, &o, "lo", 0, "loopback"),
          "two NUMA nodes: lo rejected as loopback (%s)", o.v[0].why);
    check(o.r.nwarn == 1 && count_warn(&o, MDR_DISC_WARN_FAR_NUMA) == 1 &&
              o.r.warn[0].rail_a == 1 && strstr(o.r.warn[0].text, "NUMA node 1") &&
              strstr(o.r.warn[0].text, "tcp:eth1"),
          "two NUMA nodes: one warning, for the far rail 1 (%s)",
          o.r.nwarn ? o.r.warn[0].text : "none");
    check(why_has(&m, &o, "eth1", 0, "away from the binding") &&
              why_has(&m, &o, "eth0", 0, "near the binding"),
          "two NUMA nodes: verdicts name the locality");

    /* the far NIC is faster: it leads the list, but the cap keeps the near one */
    m.d[2].speed_mbps = 100000;
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth1,tcp:eth0") == 0, "far 100G NIC first by speed (%s)", o.list);
    run(&m, 1, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth0") == 0 && o.r.nwarn == 0,
          "cap 1: the near NIC is kept although slower (%s, %d warnings)", o.list, o.r.nwarn);
    check(why_has(&m, &o, "eth1", 0, "MADRAIL_AUTO_MAX_RAILS=1"),
          "cap 1: the far NIC's verdict names the cap (%s)", o.v[2].why);

    /* unknown locality counts as near; unknown binding gives no warning */
    m.d[1].near = m.d[2].near = MDR_NETDEV_NEAR_UNKNOWN;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && o.r.nwarn == 0, "locality unknown: no warning (%d)", o.r.nwarn);
}

/* One PCI device with two ports. */
static void test_shared_pci(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    add(&m, "enp59s0f0", "0000:3b:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    add(&m, "enp59s0f1", "0000:3b:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:enp59s0f0,tcp:enp59s0f1") == 0,
          "two ports of one NIC: both rails (%s)", o.list);
    check(o.r.nwarn == 1 && o.r.warn[0].kind == MDR_DISC_WARN_SHARED_PCI &&
              o.r.warn[0].rail_a == 0 && o.r.warn[0].rail_b == 1 &&
              strstr(o.r.warn[0].text, "0000:3b:00"),
          "two ports of one NIC: a shared-PCI warning for rails 0 and 1 (%s)",
          o.r.nwarn ? o.r.warn[0].text : "none");
    /* the usual dual-port card: one PCI function per port */
    snprintf(m.d[2].pci, sizeof(m.d[2].pci), "0000:3b:00.1");
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && o.r.nwarn == 1 && o.r.warn[0].kind == MDR_DISC_WARN_SHARED_PCI,
          "two functions of one PCI device: still a shared-PCI warning (%d)", o.r.nwarn);
    snprintf(m.d[2].pci, sizeof(m.d[2].pci), "0000:3c:00.0");
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && o.r.nwarn == 0, "two PCI devices: no warning (%d)", o.r.nwarn);

    /* a dual-port HCA and its IPoIB interface */
    memset(&m, 0, sizeof(m));
    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 1000, 1);
    add(&m, "ib0", "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add_hca(&m, "mlx5_0", 1, "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add_hca(&m, "mlx5_0", 2, "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);

    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:ib0,tcp:eth0") == 0,
          "HCA without ofi/ucx: its IPoIB interface over tcp (%s)", o.list);
    check(why_has(&m, &o, "mlx5_0", 1, "no driver for OpenFabrics") &&
              why_has(&m, &o, "mlx5_0", 2, "ofi, ucx"),
          "HCA without ofi/ucx: ports rejected naming the drivers (%s)",
          o.v[dev_index(&m, "mlx5_0", 1)].why);

    run(&m, 4, 10000, tcp_ucx, &o);
    check(strcmp(o.list, "ucx:mlx5_0:1,ucx:mlx5_0:2,tcp:eth0") == 0,
          "ucx built: one rail per HCA port, HCA before the slower NIC (%s)", o.list);
    check(rail_of(&m, &o, "ib0", 0) == -1 && why_has(&m, &o, "ib0", 0, "same PCI device"),
          "ucx built: ib0 superseded by the native HCA (%s)", o.v[dev_index(&m, "ib0", 0)].why);
    check(o.r.nwarn == 1 && o.r.warn[0].kind == MDR_DISC_WARN_SHARED_PCI &&
              o.r.warn[0].rail_a == 0 && o.r.warn[0].rail_b == 1,
          "ucx built: the two ports share a PCI device (%d warnings)", o.r.nwarn);
    check(o.r.rails[0].weight == 100000.0 && o.r.rails[2].weight == 1000.0,
          "ucx built: weights are the link speeds (%g, %g)", o.r.rails[0].weight,
          o.r.rails[2].weight);

    run(&m, 4, 10000, tcp_ofi_ucx, &o);
    check(strcmp(o.list, "ofi:verbs;ofi_rxm:mlx5_0,tcp:eth0") == 0,
          "ofi built: preferred, one rail per device (%s)", o.list);
    check(rail_of(&m, &o, "mlx5_0", 2) == -1 && why_has(&m, &o, "mlx5_0", 2, "same rail") &&
              o.r.nwarn == 0,
          "ofi built: port 2 is the same rail, no warning (%s)",
          o.v[dev_index(&m, "mlx5_0", 2)].why);

    /* port 1 down: port 2 carries the ofi rail */
    m.d[dev_index(&m, "mlx5_0", 1)].up = 0;
    run(&m, 4, 10000, tcp_ofi_ucx, &o);
    check(strcmp(o.list, "ofi:verbs;ofi_rxm:mlx5_0,tcp:eth0") == 0 &&
              rail_of(&m, &o, "mlx5_0", 2) == 0 && why_has(&m, &o, "mlx5_0", 1, "not ACTIVE"),
          "ofi built, port 1 down: port 2 is the rail (%s)", o.list);
}

static void test_down(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    add(&m, "eth1", "0000:18:00.0", 0, MDR_NETDEV_NEAR, 25000, 0);
    add(&m, "eth2", "0000:19:00.0", 0, MDR_NETDEV_NEAR, 25000, 1)->addr = 0;
    add(&m, "eth3", "0000:1a:00.0", 0, MDR_NETDEV_NEAR, 25000, 1)->addr = MDR_NETDEV_IPV6;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth0") == 0, "down / no address: only eth0 (%s)", o.list);
    check(why_has(&m, &o, "eth1", 0, "link down"), "eth1: link down (%s)", o.v[2].why);
    check(why_has(&m, &o, "eth2", 0, "no IPv4 or IPv6 address"), "eth2: no address (%s)",
          o.v[3].why);
    check(why_has(&m, &o, "eth3", 0, "IPv6 only"), "eth3: IPv6 only, tcp needs IPv4 (%s)",
          o.v[4].why);
    check(why_has(&m, &o, "eth0", 0, "chosen: rail 0 tcp:eth0"), "eth0: chosen (%s)", o.v[1].why);
}

static void test_loopback_only(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:lo") == 0 && why_has(&m, &o, "lo", 0, "chosen") &&
              why_has(&m, &o, "lo", 0, "nothing else qualifies"),
          "only lo: tcp:lo (%s: %s)", o.list, o.v[0].why);
    add(&m, "wlan0", "0000:02:00.0", 0, MDR_NETDEV_NEAR, 0, 0);
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:lo") == 0, "lo and a down wlan0: tcp:lo (%s)", o.list);
    m.d[1].up = 1;
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:wlan0") == 0 && rail_of(&m, &o, "lo", 0) == -1,
          "wlan0 up: lo is no longer used (%s)", o.list);
    m.d[0].addr = MDR_NETDEV_IPV6;
    m.d[1].up = 0;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 0, "lo without IPv4 and nothing else: no rail (%d)", o.n);
}

static void test_speeds(void)
{
    machine_t m = {0};
    outcome_t o;

    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    add(&m, "eth1", "0000:18:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth1,tcp:eth0") == 0, "10G and 25G: 25G first (%s)", o.list);
    check(o.r.rails[0].weight == 25000.0 && o.r.rails[1].weight == 10000.0 &&
              o.r.rails[0].speed_mbps == 25000,
          "10G and 25G: weights 25000 and 10000 (%g, %g)", o.r.rails[0].weight,
          o.r.rails[1].weight);
    check(o.r.rails[0].dev == 1 && o.r.rails[1].dev == 0, "rails point at their devices");
    check(o.r.nwarn == 0, "distinct PCI, near: no warning (%d)", o.r.nwarn);

    /* unknown speed: the default, said so */
    m.d[0].speed_mbps = 0;
    run(&m, 4, 40000, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth0,tcp:eth1") == 0 && o.r.rails[0].weight == 40000.0 &&
              why_has(&m, &o, "eth0", 0, "(default)"),
          "unknown speed with default 40000: first, weight 40000 (%s, %g)", o.list,
          o.r.rails[0].weight);
    run(&m, 4, 2500, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth1,tcp:eth0") == 0 && o.r.rails[1].weight == 2500.0,
          "unknown speed with default 2500: last, weight 2500 (%s, %g)", o.list,
          o.r.rails[1].weight);
}

static void test_cap(void)
{
    static const long speeds[] = {1000, 10000, 25000, 100000, 40000, 10000};
    machine_t m = {0};
    outcome_t o;
    char name[16], pci[16];
    int i, rejected_by_cap = 0;

    for (i = 0; i < 6; i++) {
        snprintf(name, sizeof(name), "eth%d", i);
        snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + i);
        add(&m, name, pci, 0, MDR_NETDEV_NEAR, speeds[i], 1);
    }
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 4 && strcmp(o.list, "tcp:eth3,tcp:eth4,tcp:eth2,tcp:eth1") == 0,
          "cap 4 of 6: the four fastest, ties by name (%s)", o.list);
    for (i = 0; i < m.n; i++)
        rejected_by_cap += o.v[i].rail == -1 && strstr(o.v[i].why, "MADRAIL_AUTO_MAX_RAILS=4");
    check(rejected_by_cap == 2 && rail_of(&m, &o, "eth0", 0) == -1 &&
              rail_of(&m, &o, "eth5", 0) == -1,
          "cap 4 of 6: eth0 and eth5 left out by the cap (%d)", rejected_by_cap);
    run(&m, 8, 10000, only_tcp, &o);
    check(o.n == 6, "cap 8: all six (%d)", o.n);
    run(&m, 0, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth3") == 0, "cap 0 is taken as 1 (%s)", o.list);
    run(&m, 100, 10000, only_tcp, &o);
    check(o.n == 6, "cap above 8 is taken as 8 (%d)", o.n);

    /* the cap prefers near devices, then speed */
    m.d[3].near = MDR_NETDEV_FAR;
    m.d[3].numa = 1;
    run(&m, 2, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth4,tcp:eth2") == 0, "cap 2 with the 100G far: two near (%s)",
          o.list);
}

static void test_virtual(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    add(&m, "docker0", "", -1, MDR_NETDEV_NEAR_UNKNOWN, 0, 1);
    add(&m, "eth0", "0000:00:03.0", 0, MDR_NETDEV_NEAR, 0, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:eth0") == 0 && why_has(&m, &o, "docker0", 0, "virtual"),
          "a bridge beside a PCI NIC is not a rail (%s; %s)", o.list, o.v[1].why);

    /* a network namespace: two veths and lo */
    memset(&m, 0, sizeof(m));
    add_lo(&m);
    add(&m, "veth1", "", -1, MDR_NETDEV_NEAR_UNKNOWN, 10000, 1);
    add(&m, "veth0", "", -1, MDR_NETDEV_NEAR_UNKNOWN, 10000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(strcmp(o.list, "tcp:veth0,tcp:veth1") == 0 && rail_of(&m, &o, "lo", 0) == -1,
          "namespace: both veths in name order, not lo (%s)", o.list);
    check(why_has(&m, &o, "veth0", 0, "no PCI-backed device qualifies") && o.r.nwarn == 0,
          "namespace: the verdict says why virtual interfaces were used (%s)", o.v[2].why);
}

static void test_no_driver(void)
{
    machine_t m = {0};
    outcome_t o;

    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    run(&m, 4, 10000, nothing, &o);
    check(o.n == 0 && why_has(&m, &o, "eth0", 0, "no driver for network interfaces"),
          "no tcp driver: no rail (%d; %s)", o.n, o.v[1].why);
}

/* The list does not depend on the order devices are enumerated in. */
static void test_order_independent(void)
{
    machine_t m = {0}, r;
    outcome_t a, b;
    int i;

    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    add(&m, "eth1", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 10000, 1);
    add(&m, "eth2", "0000:18:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    add_hca(&m, "mlx5_0", 1, "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add_hca(&m, "mlx5_0", 2, "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add(&m, "ib0", "0000:5e:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    run(&m, 3, 10000, tcp_ofi_ucx, &a);
    r.n = m.n;
    for (i = 0; i < m.n; i++)
        r.d[i] = m.d[m.n - 1 - i];
    run(&r, 3, 10000, tcp_ofi_ucx, &b);
    check(strcmp(a.list, b.list) == 0 && a.n == 3, "reversed enumeration: same rails (%s | %s)",
          a.list, b.list);
    check(strcmp(a.list, "ofi:verbs;ofi_rxm:mlx5_0,tcp:eth2,tcp:eth0") == 0,
          "cap 3 of ofi + 3 NICs: the far eth1 is left out (%s)", a.list);
}

/* The probe's parser of /sys/class/infiniband/<dev>/ports/<n>/rate. */
/* The specs discovery writes for HCA ports are ones the drivers take: the
 * driver name is a registered driver (when discovery looks it up in the
 * registry), and with the ucx driver built its own spec parser accepts
 * "ucx:<dev>:<port>" for the device names HCAs have in the wild. */
static void test_driver_specs(void)
{
    static const char *const names[] = {"mlx5_0",  "mlx5_bond_0", "rocep59s0f0", "hfi1_0",
                                        "bnxt_re0", "irdma-x722",  "rxe.eth0"};
    const int nnames = (int)(sizeof(names) / sizeof(names[0]));
    machine_t m = {0};
    outcome_t o;
    mdr_disc_opts_t opts;
    char pci[16];
    int i, nucx = 0;

    for (i = 0; i < nnames; i++) {
        snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + i);
        add_hca(&m, names[i], (unsigned)(1 + i % 2), pci, 0, MDR_NETDEV_NEAR, 100000, 1);
    }
    run(&m, 8, 10000, tcp_ucx, &o);
    check(o.n == nnames, "ucx built: every HCA port with a usual name is a rail (%s)", o.list);
    for (i = 0; i < o.r.nrails; i++) {
        const char *spec = o.r.rails[i].spec;
        const mdr_netdev_t *d = &m.d[o.r.rails[i].dev];
        char want[MDR_DISC_SPEC_MAX];
        snprintf(want, sizeof(want), "ucx:%s:%u", d->name, d->port);
        check(strcmp(spec, want) == 0, "HCA %s port %u -> %s", d->name, d->port, spec);
#ifdef HAVE_UCX
        check(strncmp(spec, "ucx:", 4) == 0 && mdr_ucx_spec_check(spec + 4) == MADRAIL_OK,
              "the ucx driver accepts %s", spec);
        nucx++;
#endif
    }
#ifdef HAVE_UCX
    /* the checker is the driver's parser: it does refuse */
    check(mdr_ucx_spec_check("mlx5_0:1:2:3") != MADRAIL_OK &&
              mdr_ucx_spec_check("mlx5_0:x1") == MADRAIL_OK /* transports "mlx5_0", device x1 */ &&
              mdr_ucx_spec_check("tcp:mlx5_0:one") != MADRAIL_OK &&
              mdr_ucx_spec_check("mlx5_0:1;nosuch=1") != MADRAIL_OK,
          "ucx spec checker refuses malformed specs");
    check(nucx == nnames, "%d discovered ucx specs checked by the driver", nucx);
#else
    printf("ok: ucx driver not built: its parser is not asked (%d specs)\n", nucx);
#endif

    /* a name that would not survive as a spec is left out, not mangled */
    memset(&m, 0, sizeof(m));
    add_hca(&m, "mlx5;0", 1, "0000:10:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add_hca(&m, "mlx5+1", 1, "0000:11:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add_hca(&m, "mlx5_2", 1, "0000:12:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add(&m, "eth,1", "0000:13:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    add(&m, "eth0.100", "0000:14:00.0", 0, MDR_NETDEV_NEAR, 10000, 1);
    run(&m, 8, 10000, tcp_ucx, &o);
    check(strcmp(o.list, "ucx:mlx5_2:1,tcp:eth0.100") == 0 &&
              why_has(&m, &o, "mlx5;0", 1, "cannot be written in a rail spec") &&
              why_has(&m, &o, "mlx5+1", 1, "cannot be written in a rail spec") &&
              why_has(&m, &o, "eth,1", 0, "cannot be written in a rail spec"),
          "names that break a rail spec are rejected (%s)", o.list);

    /* with the real registry: the HCA's driver is one that is registered */
    memset(&m, 0, sizeof(m));
    add_hca(&m, "mlx5_0", 1, "0000:10:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    memset(&opts, 0, sizeof(opts));
    opts.max_rails = 4;
    opts.default_speed_mbps = 10000;
    memset(&o, 0, sizeof(o));
    o.n = mdr_discover_choose(m.d, m.n, &opts, o.v, &o.r);
    if (mdr_rail_find("ofi") == NULL && mdr_rail_find("ucx") == NULL) {
        check(o.n == 0 && strstr(o.v[0].why, "no driver for OpenFabrics") != NULL,
              "registry without ofi/ucx: the HCA is rejected (%s)", o.v[0].why);
    } else {
        char drv[16];
        size_t k = strcspn(o.r.rails[0].spec, ":");
        snprintf(drv, sizeof(drv), "%.*s", (int)(k < sizeof(drv) ? k : sizeof(drv) - 1),
                 o.r.rails[0].spec);
        check(o.n == 1 && mdr_rail_find(drv) != NULL,
              "registry: the HCA maps to built driver '%s' (%s)", drv, o.r.rails[0].spec);
#ifdef HAVE_UCX
        if (mdr_rail_find("ofi") == NULL)
            check(strcmp(o.r.rails[0].spec, "ucx:mlx5_0:1") == 0 &&
                      mdr_ucx_spec_check(o.r.rails[0].spec + 4) == MADRAIL_OK,
                  "registry with ucx, without ofi: %s, accepted by the driver",
                  o.r.rails[0].spec);
#endif
    }
}

/* MADRAIL_AUTO_LOCALITY=near: among interchangeable devices (same driver,
 * same speed) a process uses those near its binding; devices with no
 * near counterpart are all kept, so every rank holds the same drivers in
 * the same order (rails pair by index). */
static void test_locality(void)
{
    machine_t m = {0};
    outcome_t o;

    near_only = 1;
    /* one NIC per socket, bound to socket 0 (then to socket 1) */
    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    add(&m, "eth1", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 25000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth0") == 0 && o.r.nwarn == 0,
          "near: bound to socket 0, the socket-0 NIC only, no warning (%s, %d)", o.list,
          o.r.nwarn);
    check(rail_of(&m, &o, "eth1", 0) == -1 &&
              why_has(&m, &o, "eth1", 0, "on NUMA node 1, away from the binding") &&
              why_has(&m, &o, "eth1", 0, "eth0, of the same driver and speed, is near it") &&
              why_has(&m, &o, "eth1", 0, "MADRAIL_AUTO_LOCALITY=all"),
          "near: the far NIC's verdict names its near twin and the way back (%s)", o.v[2].why);
    m.d[1].near = MDR_NETDEV_FAR;
    m.d[2].near = MDR_NETDEV_NEAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth1") == 0,
          "near: bound to socket 1, the socket-1 NIC only (%s)", o.list);
    /* bound across both sockets (or not bound): near both */
    m.d[1].near = m.d[2].near = MDR_NETDEV_NEAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:eth0,tcp:eth1") == 0,
          "near: bound to both sockets, both NICs (%s)", o.list);
    /* bound to a socket with no NIC: both, each warned about */
    m.d[1].near = m.d[2].near = MDR_NETDEV_FAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && count_warn(&o, MDR_DISC_WARN_FAR_NUMA) == 2 &&
              why_has(&m, &o, "eth0", 0, "none of its driver and speed is near the binding"),
          "near: nothing near, every NIC used with a warning each (%s, %d warnings)", o.list,
          o.r.nwarn);
    /* locality unknown (no hwloc, virtual devices) counts as near */
    m.d[1].near = MDR_NETDEV_NEAR_UNKNOWN;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth0") == 0,
          "near: unknown locality is kept before a known far twin (%s)", o.list);
    m.d[1].near = m.d[2].near = MDR_NETDEV_NEAR_UNKNOWN;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && o.r.nwarn == 0, "near: locality unknown everywhere: both (%s)", o.list);
    /* not interchangeable (another speed): the far NIC stays, for every
     * rank alike, whatever their binding */
    m.d[1].near = MDR_NETDEV_FAR;
    m.d[1].speed_mbps = 100000;
    m.d[2].near = MDR_NETDEV_NEAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:eth0,tcp:eth1") == 0 &&
              count_warn(&o, MDR_DISC_WARN_FAR_NUMA) == 1,
          "near: a faster NIC on the other socket is no twin: kept, warned (%s)", o.list);
    m.d[1].near = MDR_NETDEV_NEAR;
    m.d[2].near = MDR_NETDEV_FAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:eth0,tcp:eth1") == 0,
          "near: ... and the rank on the other socket gets the same list (%s)", o.list);

    /* an HCA on socket 0, an Ethernet NIC on socket 1 (ucx and tcp built):
     * ranks on either socket hold both, HCA first, so their rails pair */
    memset(&m, 0, sizeof(m));
    add_lo(&m);
    add_hca(&m, "mlx5_0", 1, "0000:17:00.0", 0, MDR_NETDEV_NEAR, 100000, 1);
    add(&m, "eno1", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 1000, 1);
    run(&m, 4, 10000, tcp_ucx, &o);
    check(o.n == 2 && strcmp(o.list, "ucx:mlx5_0:1,tcp:eno1") == 0,
          "near: HCA here, NIC there, bound to socket 0: both (%s)", o.list);
    m.d[1].near = MDR_NETDEV_FAR;
    m.d[2].near = MDR_NETDEV_NEAR;
    run(&m, 4, 10000, tcp_ucx, &o);
    check(o.n == 2 && strcmp(o.list, "ucx:mlx5_0:1,tcp:eno1") == 0,
          "near: ... bound to socket 1: the same list (%s)", o.list);

    /* two NICs on socket 0, one like them on socket 1: a rank on socket 0
     * takes its two, a rank on socket 1 its one; the cap applies among
     * near ones */
    memset(&m, 0, sizeof(m));
    add_lo(&m);
    add(&m, "eth0", "0000:17:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    add(&m, "eth1", "0000:18:00.0", 0, MDR_NETDEV_NEAR, 25000, 1);
    add(&m, "eth2", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 25000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 2 && strcmp(o.list, "tcp:eth0,tcp:eth1") == 0,
          "near: two NICs on this socket, the third on the other left out (%s)", o.list);
    run(&m, 1, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth0") == 0 &&
              why_has(&m, &o, "eth1", 0, "MADRAIL_AUTO_MAX_RAILS=1") &&
              why_has(&m, &o, "eth2", 0, "away from the binding"),
          "near, cap 1: one near NIC; verdicts name the cap and the locality (%s)", o.list);
    m.d[1].near = m.d[2].near = MDR_NETDEV_FAR;
    m.d[3].near = MDR_NETDEV_NEAR;
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth2") == 0,
          "near: the rank on the other socket takes its one NIC (%s)", o.list);
    /* the locality step comes after the tiers: a far PCI NIC beats a
     * virtual bridge of unknown locality */
    memset(&m, 0, sizeof(m));
    add_lo(&m);
    add(&m, "docker0", "", -1, MDR_NETDEV_NEAR_UNKNOWN, 0, 1);
    add(&m, "eth2", "0000:b1:00.0", 1, MDR_NETDEV_FAR, 25000, 1);
    run(&m, 4, 10000, only_tcp, &o);
    check(o.n == 1 && strcmp(o.list, "tcp:eth2") == 0,
          "near: the only PCI NIC is used although far, not the bridge (%s)", o.list);
    near_only = 0;
}

static void test_ib_rate(void)
{
    check(mdr_topo_ib_rate("100 Gb/sec (4X EDR)") == 100000, "rate 100 Gb/sec (4X EDR)");
    check(mdr_topo_ib_rate("2.5 Gb/sec (1X SDR)") == 2500, "rate 2.5 Gb/sec (1X SDR)");
    check(mdr_topo_ib_rate("56 Gb/sec (4X FDR)") == 56000, "rate 56 Gb/sec (4X FDR)");
    check(mdr_topo_ib_rate("10 Mb/sec") == 10, "rate 10 Mb/sec");
    check(mdr_topo_ib_rate("fast") == 0 && mdr_topo_ib_rate("") == 0 &&
              mdr_topo_ib_rate("-4 Gb/sec") == 0 && mdr_topo_ib_rate("40 furlongs") == 0,
          "unparsable rates are 0 (unknown)");
}

int main(void)
{
    test_two_numa();
    test_shared_pci();
    test_down();
    test_loopback_only();
    test_speeds();
    test_cap();
    test_virtual();
    test_no_driver();
    test_order_independent();
    test_ib_rate();
    test_driver_specs();
    test_locality();
    printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "PASS", failures, checks);
    return failures ? 1 : 0;
}
