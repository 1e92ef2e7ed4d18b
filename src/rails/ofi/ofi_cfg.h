/*
 * Configuration of the ofi driver.  Kept apart from ofi.h (which needs
 * libfabric's headers) because the table is built even without libfabric:
 * madrail_info and docs/configuration.md list the same variables whatever
 * drivers a build has, and a MADRAIL_OFI_* setting is never reported as
 * unknown merely because this build lacks the driver.
 */
#ifndef MDR_OFI_CFG_H
#define MDR_OFI_CFG_H

#include <stddef.h>

#include "util/cfg.h"

typedef struct mdr_ofi_config {
    double latency_us;   /* MADRAIL_OFI_LATENCY_US, 0 = built-in per provider */
    double bandwidth;    /* MADRAIL_OFI_BANDWIDTH (MB/s), 0 = from the NIC or built-in */
    char *put_complete;  /* MADRAIL_OFI_PUT_COMPLETE: delivery | order */
    int multi_recv;      /* MADRAIL_OFI_MULTI_RECV: use FI_MULTI_RECV when offered */
    unsigned rx_bufs;    /* MADRAIL_OFI_RX_BUFS: receive buffers posted, 0 = automatic */
    size_t rx_buf_size;  /* MADRAIL_OFI_RX_BUF_SIZE: size of one FI_MULTI_RECV buffer */
    double timeout;      /* MADRAIL_OFI_TIMEOUT: seconds without a completion, 0 = never */
    int inject;          /* MADRAIL_OFI_INJECT: small messages with fi_inject on shm */
} mdr_ofi_config_t;

extern const mdr_cfg_table_t mdr_ofi_cfg_table;

#endif /* MDR_OFI_CFG_H */
