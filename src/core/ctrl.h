/*
 * Control messages (ctrl.c): slots and credits per peer-rail, the transmit
 * queue, header checks, and dispatch through the handler table the
 * protocol modules register into.
 */
#ifndef MDR_CTRL_H
#define MDR_CTRL_H

#include "core/core.h"

/* Message types and their handlers: each protocol module registers the
 * types it owns at context init (mdr_ctrl_init registers CREDIT). */
madrail_status_t mdr_ctrl_register(mdr_ctx_t *ctx, int type, const mdr_ctrl_handler_t *h);
madrail_status_t mdr_ctrl_init(mdr_ctx_t *ctx);

/* Send a control message to peer; rail -1 lets the core choose.  The
 * buffers may be reused on return (queued copies are made if needed). */
madrail_status_t mdr_ctrl_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                               const void *payload, size_t payload_len);
/* The same for a message that is part of send req (RTS, RFS_DATA, FIN):
 * req is not reported complete before the message left or failed.  part:
 * a FIN's chunk (index in req->puts), else -1; a queued FIN lost with its
 * rail has that chunk put again (mdr_rndv_fin_lost). */
madrail_status_t mdr_ctrl_send_req(mdr_peer_t *peer, int rail, mdr_req_t *req, int part,
                                   mdr_hdr_t *hdr, size_t hdr_len, const void *payload,
                                   size_t payload_len);
/* Send a header-only message in a reserved slot (no credit): PING, PONG.
 * MADRAIL_OK, or the driver's refusal (nothing was sent). */
madrail_status_t mdr_ctrl_send_reserved(mdr_peer_rail_t *pr, int type);
/* Try to send directly; returns the rail used, or -1 when no rail has a
 * credit right now (nothing was sent). */
int mdr_ctrl_try_send(mdr_peer_t *peer, int rail, mdr_hdr_t *hdr, size_t hdr_len,
                      const void *payload, size_t payload_len);
/* A whole small message (SHORT sh, sequence number seq) with one rail,
 * sent at once if it may start now and the rail has a credit: 0 when it
 * went, else -1 (nothing was sent; mdr_ctrl_try_send decides). */
int mdr_ctrl_short_lane(mdr_peer_t *peer, uint64_t seq, mdr_short_hdr_t *sh, const void *buf,
                        size_t len);
/* Send the peer's queued control messages its credits allow; returns how
 * many left. */
int mdr_ctrl_txq_progress(mdr_peer_t *peer);
/* The drivers' receive upcall: credits, checks, dispatch. */
void mdr_ctrl_recv_upcall(void *ep_cookie, const void *data, size_t len);
/* Check a message's length and flags against its type's entry (before
 * anything, credits included, is taken from it); 0 if it may be handled,
 * else the rail was closed (mdr_peer_proto_fail). */
int mdr_ctrl_check_hdr(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len);
/* Handle a message that passed mdr_ctrl_check_hdr: its type's handler. */
void mdr_ctrl_dispatch(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len);
/* The message being handled on pr is stored out of order: withhold its
 * credit (true when it was withheld). */
int mdr_ctrl_hold(mdr_peer_rail_t *pr);
/* n withheld credits of pr become returnable (their message came in
 * order); released says whether to return them (0: just forget them). */
void mdr_ctrl_unhold(mdr_peer_rail_t *pr, unsigned n, int released);

#endif /* MDR_CTRL_H */
