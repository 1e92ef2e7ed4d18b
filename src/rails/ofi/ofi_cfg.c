/*
 * The ofi driver's MADRAIL_OFI_* table.  Built whether or not libfabric
 * was found (see ofi_cfg.h): the variables and their documentation do not
 * change with the build, only whether an ofi rail can be opened.
 */
#include "mdr_config.h"

#include <stddef.h>

#include "rails/ofi/ofi_cfg.h"

#define MDR_OFI_CFG(...) MDR_CFG_ENTRY(mdr_ofi_config_t, __VA_ARGS__)

static const mdr_cfg_entry_t mdr_ofi_cfg_entries[] = {
    MDR_OFI_CFG("MADRAIL_OFI_LATENCY_US", MDR_CFG_DOUBLE, "0", 0, 1e7, latency_us,
                "ofi rails: one-way latency (us) in the rail profile; 0 = built-in value "
                "for the provider (shm 2, tcp/sockets/net 20, udp 30, others 5)."),
    MDR_OFI_CFG("MADRAIL_OFI_BANDWIDTH", MDR_CFG_DOUBLE, "0", 0, 1e7, bandwidth,
                "ofi rails: bandwidth (MB/s) in the rail profile; 0 = the NIC's link speed "
                "as libfabric reports it, else 5000 on loopback and shm, 1000 otherwise."),
    MDR_OFI_CFG("MADRAIL_OFI_PUT_COMPLETE", MDR_CFG_STRING, "delivery", 1, 0, put_complete,
                "ofi rails: when a put completes: 'delivery' = its data is visible at the "
                "target (FI_DELIVERY_COMPLETE; a write the target rejects fails the put); "
                "'order' = at the provider's transmit completion, relying on FI_ORDER_SAW "
                "for the control message sent after it (one round trip earlier, but a "
                "rejected write is only noticed when the next send fails)."),
    MDR_OFI_CFG("MADRAIL_OFI_MULTI_RECV", MDR_CFG_BOOL, "1", 1, 0, multi_recv,
                "ofi rails: receive control messages into a few shared FI_MULTI_RECV buffers "
                "when the provider offers it (memory independent of the number of peers); "
                "0 = one slot-sized buffer per posted receive."),
    MDR_OFI_CFG("MADRAIL_OFI_RX_BUFS", MDR_CFG_UINT, "0", 0, 65536, rx_bufs,
                "ofi rails: receive buffers kept posted; 0 = 4 with FI_MULTI_RECV, else "
                "twice the slots per peer (at least 64)."),
    MDR_OFI_CFG("MADRAIL_OFI_RX_BUF_SIZE", MDR_CFG_SIZE, "256k", 4096, 1073741824.0,
                rx_buf_size,
                "ofi rails: size of one FI_MULTI_RECV buffer (raised to hold at least 8 "
                "slots)."),
    MDR_OFI_CFG("MADRAIL_OFI_TIMEOUT", MDR_CFG_TIME, "0", 0, 86400, timeout,
                "ofi rails: fail an endpoint whose oldest send or put has not completed "
                "after this long without any other completion on it (plus 1 s per MB of "
                "the operation), or whose sends the provider has refused for this long; "
                "0 = never.  For providers that never report a peer that died or a write "
                "the target rejected (shm, udp;ofi_rxd in libfabric 1.17); "
                "keep it well above the longest time a peer computes without calling "
                "madrail, since software providers move data only inside progress."),
    MDR_OFI_CFG("MADRAIL_OFI_INJECT", MDR_CFG_BOOL, "1", 1, 0, inject,
                "ofi rails on the shm provider: send a control message of at most 256 bytes "
                "(and the provider's inject size) with fi_inject when nothing of its "
                "endpoint is in flight: shm puts it in the peer's queue inside the call, so "
                "the send is done at once instead of at a completion read by a later "
                "progress call; 0 = always fi_send with a completion.  Other providers "
                "always use fi_send (a completion is where they show a dead peer)."),
};

const mdr_cfg_table_t mdr_ofi_cfg_table = MDR_CFG_TABLE("ofi", mdr_ofi_cfg_entries);
