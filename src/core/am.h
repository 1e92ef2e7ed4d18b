/* Active messages (am.c). */
#ifndef MDR_AM_H
#define MDR_AM_H

#include "core/core.h"

/* An active message's sequence number came up: call the handler. */
void mdr_am_deliver(mdr_ctx_t *ctx, mdr_peer_t *peer, uint64_t id, const void *data, size_t len);

/* Send req, announced by its active message (madrail_am_isend), as one
 * EAGER_AM: the rail used, or -1 when none has a credit (nothing sent). */
int mdr_am_send_eager(mdr_peer_t *peer, mdr_req_t *req);

#endif /* MDR_AM_H */
