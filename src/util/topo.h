/*
 * What the machine offers to talk on: one record per network interface and
 * per OpenFabrics HCA port, with its link state, speed and locality.  The
 * probe (mdr_topo_netdevs) fills them from getifaddrs, /sys/class/net,
 * /sys/class/infiniband and hwloc; the rail choice (core/discover.c) is a
 * pure function of these records, so tests describe a machine by hand.
 */
#ifndef MDR_TOPO_H
#define MDR_TOPO_H

#include <stdio.h>

#include "madrail.h"

#define MDR_NETDEV_NAME_MAX 32

/* mdr_netdev_t.kind */
typedef enum {
    MDR_NETDEV_IFACE = 0, /* a network interface (eth0, ib0, veth1, lo) */
    MDR_NETDEV_HCA = 1    /* one port of an OpenFabrics device (mlx5_0 port 1) */
} mdr_netdev_kind_t;

/* mdr_netdev_t.near */
enum {
    MDR_NETDEV_NEAR_UNKNOWN = -1, /* no locality (virtual device, no hwloc, no binding) */
    MDR_NETDEV_FAR = 0,           /* the device's cores and the binding are disjoint */
    MDR_NETDEV_NEAR = 1           /* the binding overlaps the cores next to the device */
};

/* mdr_netdev_t.addr bits: the interface holds an address of that family
 * (IPv6 link-local addresses do not count). */
enum { MDR_NETDEV_IPV4 = 1u << 0, MDR_NETDEV_IPV6 = 1u << 1 };

typedef struct mdr_netdev {
    char name[MDR_NETDEV_NAME_MAX]; /* "eth0", "mlx5_0" */
    mdr_netdev_kind_t kind;
    unsigned port;   /* HCA port number (from 1); 0 for an interface */
    char pci[16];    /* PCI bus id "0000:3b:00.0", "" when none is known */
    int numa;        /* NUMA node (OS index) the device hangs off, -1 unknown */
    int near;        /* MDR_NETDEV_NEAR, _FAR or _NEAR_UNKNOWN vs the process binding */
    char cpus[32];   /* PUs next to the device as a list ("0-15"), "" unknown */
    long speed_mbps; /* link speed in Mb/s, <= 0 when unknown */
    int up;          /* link up: operstate/carrier, or HCA port ACTIVE */
    unsigned addr;   /* MDR_NETDEV_IPV4 | MDR_NETDEV_IPV6 */
    int loopback;    /* IFF_LOOPBACK */
    int virt;        /* interface without a backing device (veth, bridge, bond, tun) */
} mdr_netdev_t;

/* Where this process runs, for messages. */
typedef struct mdr_topo_binding {
    int known;     /* 0: no hwloc or the binding could not be read */
    char cpus[64]; /* PU list "0-3" */
    char numa[32]; /* NUMA node list "0" */
} mdr_topo_binding_t;

/*
 * Probe the devices.  On success *devs_p is a malloc'ed array of *n_p
 * records (free it with free()), interfaces sorted by name then HCA ports
 * by name and port, and *bind_p (may be NULL) says where the process runs.
 * Fails only when getifaddrs fails or memory runs out.
 */
madrail_status_t mdr_topo_netdevs(mdr_netdev_t **devs_p, int *n_p, mdr_topo_binding_t *bind_p);

/*
 * The devices of an hwloc topology that describes another machine (an XML
 * file loaded without HWLOC_THISSYSTEM=1), located against this process's
 * CPU affinity matched to the file's PUs by OS index.  The file says where
 * each device sits, not its state: interfaces are taken as up with an IPv4
 * address, HCA ports by their "Port<N>State" info (ACTIVE) or as port 1
 * up.  For madrail_info's "what would a process bound like this choose
 * there" only: these devices need not exist here and are never opened.
 * MADRAIL_ERR_UNSUPPORTED when the topology is this machine's (or there
 * is no hwloc).
 */
madrail_status_t mdr_topo_synthetic_netdevs(mdr_netdev_t **devs_p, int *n_p,
                                            mdr_topo_binding_t *bind_p);

/* An HCA port's rate file ("100 Gb/sec (4X EDR)") in Mb/s, 0 when it
 * does not parse. */
long mdr_topo_ib_rate(const char *text);

/* The machine summary of madrail_topology_print: hwloc version, NUMA
 * nodes, cores, PUs and the process binding (one line when no hwloc). */
void mdr_topo_print_machine(FILE *out);

#endif /* MDR_TOPO_H */
