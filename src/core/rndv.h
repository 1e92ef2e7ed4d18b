/* Rendezvous: RTS/CTS, puts, FIN, registrations (rndv.c). */
#ifndef MDR_RNDV_H
#define MDR_RNDV_H

#include "core/core.h"

madrail_status_t mdr_rndv_init(mdr_ctx_t *ctx);
/* Send side: the RTS; the puts planned from a key block (CTS or RFS,
 * checked on arrival) and issued. */
madrail_status_t mdr_rndv_send_rts(mdr_peer_t *peer, mdr_req_t *req);
madrail_status_t mdr_rndv_plan_puts(mdr_peer_t *peer, mdr_req_t *req, const uint8_t *keys,
                                    size_t keys_len, uint32_t nkeys, uint64_t xfer);
int mdr_rndv_issue_puts(mdr_req_t *req);
/* Receive side: a matched RTS: register, answer CTS. */
void mdr_rndv_recv_start(mdr_req_t *req, mdr_peer_t *peer, uint64_t sreq_id, uint64_t total);
/* Register req's buffer on every rail that can take puts to peer and pack
 * the keys (CTS and RFS). */
madrail_status_t mdr_rndv_build_keys(mdr_peer_t *peer, mdr_req_t *req, size_t len, uint8_t *out,
                                     size_t *out_len_p, uint32_t *nkeys_p);
/* A key block as a peer sent it; 0 if good, else the rail was closed. */
int mdr_rndv_keys_check(mdr_peer_rail_t *pr, const char *what, const uint8_t *keys,
                        size_t keys_len, uint32_t nkeys, uint64_t xfer);
/* The FIN of chunk part of send req was queued on a rail that failed
 * before it left: put the chunk again on another rail (1), or 0 when no
 * rail can take it (the caller fails the send). */
int mdr_rndv_fin_lost(mdr_req_t *req, int part);
/* Give req's registrations back to the registration cache. */
void mdr_rndv_reg_release(mdr_req_t *req);
/* The rendezvous and put state machines: 0, or -1 (logged, counted, no
 * change) for a transition their tables do not allow. */
int mdr_rndv_set(mdr_req_t *req, enum mdr_rndv_state to);
int mdr_put_set(mdr_put_op_t *op, enum mdr_put_state to);

#endif /* MDR_RNDV_H */
