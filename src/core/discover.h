/*
 * Rail discovery: what MADRAIL_RAILS=auto (the default) opens.  The choice
 * is a pure function (mdr_discover_choose) over device records
 * (util/topo.h), so the policy is unit-tested on machines described by
 * hand; mdr_discover_run probes this machine and applies it.
 */
#ifndef MDR_DISCOVER_H
#define MDR_DISCOVER_H

#include <stdio.h>

#include "madrail.h"
#include "util/cfg.h"
#include "util/topo.h"

#define MDR_DISC_MAX_RAILS 8 /* == MDR_MAX_RAILS (core.h) */
#define MDR_DISC_MAX_WARN 40
#define MDR_DISC_SPEC_MAX 96

/* ---------------- configuration (MADRAIL_AUTO_*) ---------------- */

typedef struct mdr_discover_config {
    unsigned max_rails;     /* MADRAIL_AUTO_MAX_RAILS */
    unsigned default_speed; /* MADRAIL_AUTO_DEFAULT_SPEED, Mb/s */
    char *locality;         /* MADRAIL_AUTO_LOCALITY: "near" or "all" */
} mdr_discover_config_t;

/* the table, mdr_discover_cfg_table, is declared in util/cfg.h */

/* ---------------- the choice ---------------- */

typedef struct mdr_disc_opts {
    unsigned max_rails;      /* at most this many rails (1..MDR_DISC_MAX_RAILS) */
    long default_speed_mbps; /* speed assumed when a device reports none */
    /* Is driver `name` built?  NULL: mdr_rail_find(name) != NULL. */
    int (*have_driver)(const char *name, void *arg);
    void *arg;
    const char *binding; /* "PU(s) 0-3 (NUMA 0)" for messages, may be NULL */
    /* 1: when some usable devices are near the binding (or of unknown
     * locality), leave out those away from it (MADRAIL_AUTO_LOCALITY=near);
     * 0: keep them, nearest first under the cap (=all). */
    int near_only;
} mdr_disc_opts_t;

typedef struct mdr_disc_rail {
    int dev;                      /* index of the device in the input array */
    char spec[MDR_DISC_SPEC_MAX]; /* rail spec: "tcp:eth0", "ucx:mlx5_0:1" */
    long speed_mbps;              /* the device's speed, or the default when unknown */
    double weight;                /* striping weight: speed_mbps */
} mdr_disc_rail_t;

enum {
    MDR_DISC_WARN_SHARED_PCI = 1, /* rails a and b sit on one PCI device */
    MDR_DISC_WARN_FAR_NUMA = 2    /* rail a is away from the process binding (b = -1) */
};

typedef struct mdr_disc_warn {
    int kind;
    int rail_a, rail_b;
    char text[200];
} mdr_disc_warn_t;

/* Why a device was chosen or rejected, one line. */
typedef struct mdr_disc_verdict {
    int rail; /* index in the chosen list, -1 rejected */
    char why[192];
} mdr_disc_verdict_t;

typedef struct mdr_disc_result {
    int nrails;
    mdr_disc_rail_t rails[MDR_DISC_MAX_RAILS]; /* in rail order: fastest first */
    int nwarn;
    mdr_disc_warn_t warn[MDR_DISC_MAX_WARN];
} mdr_disc_result_t;

/*
 * Choose rails among devs[0..ndev).  Fills verdict[0..ndev) (one per
 * device) and *res; returns res->nrails (0 when nothing usable: not even a
 * loopback interface with an IPv4 address, or no driver for any device).
 * Touches nothing outside its arguments (have_driver aside).
 */
int mdr_discover_choose(const mdr_netdev_t *devs, int ndev, const mdr_disc_opts_t *opts,
                        mdr_disc_verdict_t *verdict, mdr_disc_result_t *res);

/* ---------------- on this machine ---------------- */

typedef struct mdr_discover {
    int synthetic; /* devices of a topology file, not this machine's */
    mdr_discover_config_t cfg;
    mdr_netdev_t *devs;
    int ndev;
    mdr_topo_binding_t bind;
    mdr_disc_verdict_t *verdict;
    mdr_disc_result_t res;
} mdr_discover_t;

/* Probe the machine and choose, with MADRAIL_AUTO_* from overrides (may be
 * NULL) and the environment.  Logs nothing but errors; release after. */
madrail_status_t mdr_discover_run(const char *const *overrides, mdr_discover_t *disc);
void mdr_discover_release(mdr_discover_t *disc);

/* The same choice on the devices of an hwloc topology that describes
 * another machine (util/topo.h: mdr_topo_synthetic_netdevs), for
 * madrail_info: never used to open rails.  MADRAIL_ERR_UNSUPPORTED when
 * the topology is this machine's. */
madrail_status_t mdr_discover_run_synthetic(const char *const *overrides, mdr_discover_t *disc);

/* The comma-separated rail list of the choice, for MADRAIL_RAILS. */
madrail_status_t mdr_discover_rails_string(const mdr_discover_t *disc, char **list_p);

/* Devices (locality, speed, state), chosen rails, one verdict line per
 * device and the warnings, for madrail_info -r. */
void mdr_discover_report(const mdr_discover_t *disc, FILE *out);

#endif /* MDR_DISCOVER_H */
