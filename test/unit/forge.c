/*
 * Test support: forge control messages (see forge.h).  It goes around the
 * core's send path on purpose (credits, sequence order, header filling)
 * and straight to the driver, which is where a peer's bytes come from.
 */
#include "mdr_config.h"

#include <sys/uio.h>

#include "core/core.h"
#include "forge.h"

madrail_status_t mdr_forge_send(madrail_context_t ctx, madrail_peer_t peer_idx, int rail,
                                const void *msg, size_t len)
{
    mdr_peer_t *peer = mdr_peer_get(ctx, peer_idx);
    mdr_peer_rail_t *pr;
    struct iovec iov;
    madrail_status_t st;

    if (!peer || rail < 0 || rail >= ctx->nrails || len < sizeof(mdr_hdr_t))
        return MADRAIL_ERR_INVALID;
    pr = &peer->rails[rail];
    if (!pr->ep) {
        st = mdr_peer_connect_rail(peer, rail);
        if (st != MADRAIL_OK)
            return st;
    }
    iov.iov_base = (void *)msg;
    iov.iov_len = len;
    st = ctx->rails[rail].ops->ctrl_send(pr->ep, &iov, 1);
    if (st == MADRAIL_OK && ((const mdr_hdr_t *)msg)->type != MDR_MSG_CREDIT && pr->credits)
        pr->credits--;
    return st;
}
