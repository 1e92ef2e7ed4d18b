/* Receiver-first rendezvous: offers, RFS_DATA, NACK, REVOKE (rfs.c). */
#ifndef MDR_RFS_H
#define MDR_RFS_H

#include "core/core.h"

madrail_status_t mdr_rfs_init(mdr_ctx_t *ctx);
/* The offer state machine of a receive: 0, or -1 (logged, counted, no
 * change) for a transition its table does not allow. */
int mdr_rfs_set(mdr_req_t *req, enum mdr_rfs_state to);
/* Receiver: consider offering a freshly posted receive's buffer. */
void mdr_rfs_maybe_offer(mdr_ctx_t *ctx, mdr_req_t *req);
/* Our offers to peer still waiting for an answer. */
int mdr_rfs_wait_has(const mdr_peer_t *peer, uint64_t rreq_id);
void mdr_rfs_wait_del(mdr_peer_t *peer, uint64_t rreq_id);
/* A receive with an offer out was matched by message m. */
void mdr_rfs_on_match(mdr_req_t *req, mdr_peer_t *peer, const mdr_inmsg_t *m);
/* The RFS_DATA envelope m came in order (m is freed). */
void mdr_rfs_data_in_order(mdr_peer_rail_t *pr, mdr_inmsg_t *m);
/* Cancel of a receive whose offer is out. */
void mdr_rfs_revoke(mdr_req_t *req);
/* Sender: the stored offer req fits (taken off the list), and spending it. */
mdr_rfs_t *mdr_rfs_take(mdr_peer_t *peer, const mdr_req_t *req);
madrail_status_t mdr_rfs_send_data(mdr_peer_t *peer, mdr_req_t *req, mdr_rfs_t *offer);

#endif /* MDR_RFS_H */
