/*
 * The configuration table of rail discovery, alone in its file for the
 * same reason as the shm driver's: the config registry (util/cfg.c) names
 * every table, and a program that links the registry must not pull the
 * probe (and hwloc) and the driver registry in with it.
 */
#include "mdr_config.h"

#include <stddef.h>

#include "core/discover.h"

#define MDR_DISC_CFG(...) MDR_CFG_ENTRY(mdr_discover_config_t, __VA_ARGS__)

static const mdr_cfg_entry_t mdr_discover_cfg_entries[] = {
    MDR_DISC_CFG("MADRAIL_AUTO_MAX_RAILS", MDR_CFG_UINT, "4", 1, MDR_DISC_MAX_RAILS, max_rails,
                 "MADRAIL_RAILS=auto (the default): open at most this many discovered rails; "
                 "devices near the process binding, then faster ones, are kept."),
    MDR_DISC_CFG("MADRAIL_AUTO_DEFAULT_SPEED", MDR_CFG_UINT, "10000", 1, 10000000, default_speed,
                 "MADRAIL_RAILS=auto: link speed in Mb/s assumed for a device that reports "
                 "none (virtio, veth, loopback); discovered rails are ordered and weighted by "
                 "speed."),
    MDR_DISC_CFG("MADRAIL_AUTO_LOCALITY", MDR_CFG_STRING, "near", 0, 0, locality,
                 "MADRAIL_RAILS=auto: near (the default): a device away from the process "
                 "binding is left out when one of the same driver and speed is near it (hwloc: "
                 "the binding overlaps the cores the device hangs off), so ranks bound to "
                 "different sockets each use their own socket's NICs; devices with no such "
                 "twin near, and every device of a process not bound, are kept. all: every "
                 "usable device, the near ones first when MADRAIL_AUTO_MAX_RAILS cuts."),
};

const mdr_cfg_table_t mdr_discover_cfg_table = MDR_CFG_TABLE("discover", mdr_discover_cfg_entries);
