/* Eager and medium sends, synchronous-send ACKs (eager.c). */
#ifndef MDR_EAGER_H
#define MDR_EAGER_H

#include "core/core.h"

madrail_status_t mdr_eager_init(mdr_ctx_t *ctx);
/* The ACK state machine of a synchronous send: 0, or -1 (logged,
 * counted, no change) for a transition its table does not allow. */
int mdr_ack_set(mdr_req_t *req, enum mdr_ack_state to);
/* Send req's fragments until done or out of credits (then req waits in the
 * peer's sendq); returns how many went. */
int mdr_eager_send(mdr_peer_t *peer, mdr_req_t *req);
/* A whole message of at most one slot sent at once with no request, when
 * nothing of the peer's waits before it: the rail it went on (*seq_p its
 * sequence number), or -1 when it did not go (nothing was sent). */
int mdr_eager_send_now(mdr_peer_t *peer, const void *buf, size_t len, uint64_t tag,
                       uint64_t *seq_p);
/* A synchronous message of peer's send sreq_id was matched. */
void mdr_eager_send_ack(mdr_peer_t *peer, uint64_t sreq_id);

#endif /* MDR_EAGER_H */
