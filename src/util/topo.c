/*
 * What the machine looks like to madrail: the network devices hwloc sees
 * (interfaces and OpenFabrics HCAs), the NUMA node each hangs off, and where
 * this process is bound.  Today madrail_info prints it; rail discovery (no
 * MADRAIL_RAILS: choose the NICs nearest the process) builds on the same
 * walk.  Without hwloc the function says so and prints nothing else.
 */
#include "mdr_config.h"

#include <stdio.h>

#include "madrail.h"

#ifdef HAVE_HWLOC
#include <hwloc.h>

static const char *mdr_topo_osdev_kind(hwloc_obj_osdev_type_t t)
{
    switch (t) {
    case HWLOC_OBJ_OSDEV_NETWORK:
        return "network";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
        return "openfabrics";
    default:
        return NULL;
    }
}

void madrail_topology_print(FILE *out)
{
    hwloc_topology_t topo;
    hwloc_obj_t dev = NULL;
    hwloc_bitmap_t set;
    char buf[256];
    int n = 0;

    if (hwloc_topology_init(&topo) != 0) {
        fprintf(out, "topology: hwloc_topology_init failed\n");
        return;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_load(topo) != 0) {
        fprintf(out, "topology: hwloc_topology_load failed\n");
        hwloc_topology_destroy(topo);
        return;
    }
    fprintf(out, "topology (hwloc %s): %d NUMA node(s), %d core(s), %d PU(s)\n",
            HWLOC_VERSION, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU));
    set = hwloc_bitmap_alloc();
    if (set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_bitmap_list_snprintf(buf, sizeof(buf), set);
        fprintf(out, "  this process is bound to PU(s) %s\n", buf);
    }
    while ((dev = hwloc_get_next_osdev(topo, dev)) != NULL) {
        const char *kind = mdr_topo_osdev_kind(dev->attr->osdev.type);
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, dev);
        hwloc_obj_t pci = dev->parent;
        if (!kind)
            continue;
        buf[0] = '\0';
        if (anc && anc->cpuset)
            hwloc_bitmap_list_snprintf(buf, sizeof(buf), anc->cpuset);
        fprintf(out, "  %-12s %-12s near PU(s) %-10s", dev->name ? dev->name : "?", kind,
                buf[0] ? buf : "?");
        while (pci && pci->type != HWLOC_OBJ_PCI_DEVICE)
            pci = pci->parent;
        if (pci)
            fprintf(out, " pci %04x:%02x:%02x.%x", pci->attr->pcidev.domain,
                    pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
        else
            fprintf(out, " (virtual)");
        fprintf(out, "\n");
        n++;
    }
    if (n == 0)
        fprintf(out, "  no network device seen by hwloc\n");
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
}
#else
void madrail_topology_print(FILE *out)
{
    fprintf(out, "topology: not available (built without hwloc)\n");
}
#endif
