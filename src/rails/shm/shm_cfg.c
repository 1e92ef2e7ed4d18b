/*
 * The configuration table of the shm driver, alone in its file: the config
 * registry (util/cfg.c) names every module's table, and a program that
 * links the registry (unit tests with tables of their own, madrail_info)
 * must not pull in the driver, and through it the driver registry, with it.
 * It is built even when the driver is not (--disable-shm), so that the
 * documented MADRAIL_SHM_* variables stay known (and are simply unused).
 */
#include "mdr_config.h"

#include <stddef.h>

#include "rails/shm/shm.h"

#define MDR_SHM_CFG(...) MDR_CFG_ENTRY(mdr_shm_config_t, __VA_ARGS__)

static const mdr_cfg_entry_t mdr_shm_cfg_entries[] = {
    MDR_SHM_CFG("MADRAIL_SHM_CMA", MDR_CFG_BOOL, "1", 1, 0, cma,
                "shm rails: single-copy puts with process_vm_writev (CMA) when the kernel "
                "permits it (probed at open, falls back per peer); 0 = always copy through the "
                "ring (spec option cma=)."),
    MDR_SHM_CFG("MADRAIL_SHM_MAX_PEERS", MDR_CFG_UINT, "256", 1, 65535, max_peers,
                "shm rails: rings in a rail's segment, i.e. most local processes that can "
                "connect to it (the segment is sparse: unused rings cost no memory)."),
    MDR_SHM_CFG("MADRAIL_SHM_RING_SIZE", MDR_CFG_SIZE, "256k", 4096, 1073741824.0, ring_size,
                "shm rails: bytes of one ring (one direction of one connection); never less "
                "than the core's slots x slot size."),
    MDR_SHM_CFG("MADRAIL_SHM_FRAG", MDR_CFG_SIZE, "64k", 4096, 1073741824.0, frag,
                "shm rails: largest put fragment copied through a ring (copy path), at most a "
                "quarter of the ring."),
    MDR_SHM_CFG("MADRAIL_SHM_PEER_CHECK", MDR_CFG_TIME, "100ms", 0.001, 3600, peer_check,
                "shm rails: how often progress checks that the peer processes still exist."),
    MDR_SHM_CFG("MADRAIL_SHM_LATENCY_US", MDR_CFG_DOUBLE, "0", 0, 1e7, latency_us,
                "shm rails: one-way latency (us) in the rail profile; 0 = built in (0.5)."),
    MDR_SHM_CFG("MADRAIL_SHM_BANDWIDTH", MDR_CFG_DOUBLE, "0", 0, 1e7, bandwidth,
                "shm rails: bandwidth (MB/s) in the rail profile; 0 = built in (10000 with "
                "CMA, 6000 copying through the ring)."),
};

const mdr_cfg_table_t mdr_shm_cfg_table = MDR_CFG_TABLE("shm", mdr_shm_cfg_entries);
