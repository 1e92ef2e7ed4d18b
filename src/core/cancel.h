/*
 * Cancel of sends (cancel.c): the CANCEL / CANCEL_ANS exchange with the
 * receiver, on both sides.
 */
#ifndef MDR_CANCEL_H
#define MDR_CANCEL_H

#include "core/core.h"

madrail_status_t mdr_cancel_init(mdr_ctx_t *ctx);
/* madrail_cancel of a send. */
void mdr_cancel_send(mdr_req_t *req);
/* req may now be ready to send the CANCEL the user asked for (its message
 * is all out): called where a send's messages go to drivers. */
void mdr_cancel_kick(mdr_req_t *req);

/* msg_id of a send: its sequence number and 1 + the rail of its last
 * sequenced message (0: none known). */
static inline uint64_t mdr_msg_id(uint64_t seq, unsigned seq_last)
{
    return (seq << 8) | (seq_last & 0xff);
}
/* info.msg_id of a send (madrail_cancel_sent takes it back). */
uint64_t mdr_cancel_msg_id(const mdr_req_t *req);

/* Receiver side, from tag.c at the points where an arrived message m
 * changes hands.  m was bound to a receive or taken by improbe: a CANCEL
 * waiting for it is answered "not cancelled". */
void mdr_cancel_inmsg_taken(mdr_inmsg_t *m);
/* m is in order, unmatched and whole: if a CANCEL waits for it, it is
 * dropped (freed; listed: it is in ctx->unexpected) and 1 returned. */
int mdr_cancel_inmsg_whole(mdr_ctx_t *ctx, mdr_inmsg_t *m, int listed);

#endif /* MDR_CANCEL_H */
