/* Active messages (am.c). */
#ifndef MDR_AM_H
#define MDR_AM_H

#include "core/core.h"

/* An active message's sequence number came up: call the handler. */
void mdr_am_deliver(mdr_ctx_t *ctx, mdr_peer_t *peer, uint64_t id, const void *data, size_t len);

#endif /* MDR_AM_H */
