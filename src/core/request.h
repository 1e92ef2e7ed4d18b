/*
 * Requests and sends (request.c): ids, completion, the send entry points
 * (protocol choice), and the tracking of data handed to drivers that may
 * not have left the process yet.
 */
#ifndef MDR_REQUEST_H
#define MDR_REQUEST_H

#include "core/core.h"

mdr_req_t *mdr_req_alloc(mdr_ctx_t *ctx, int type);
mdr_req_t *mdr_req_lookup(mdr_ctx_t *ctx, uint64_t id);
void mdr_req_complete(mdr_req_t *req, madrail_status_t status);
void mdr_req_release(mdr_req_t *req);
void mdr_req_cache_cleanup(mdr_ctx_t *ctx);
/* The peer a request is bound to: a send's destination; a receive's
 * matched source, else its posted source (MADRAIL_ANY_PEER: none yet). */
madrail_peer_t mdr_req_bound_peer(const mdr_req_t *req);
/* Our request named by id in a reply `what` from pr's peer: live, of that
 * type, not complete, bound to that peer; NULL (and the rail closed)
 * otherwise. */
mdr_req_t *mdr_req_for_reply(mdr_peer_rail_t *pr, const char *what, uint64_t id, int type);
/* Complete a receive: release registrations and any receiver-first offer. */
void mdr_recv_finish(mdr_req_t *req, madrail_status_t st);
/* A state machine refused a transition of request id (see core.h): log
 * it and count it in ctx->state_errors. */
void mdr_state_illegal(mdr_ctx_t *ctx, const char *machine, uint64_t id, const char *from,
                       const char *to);

/* Start a send (eager/medium/rendezvous, with receiver-first CTS if one is stored). */
madrail_status_t mdr_send_start(mdr_peer_t *peer, mdr_req_t *req);
/* mdr_send_start, then hand req to the caller in *req_p, or on failure
 * release it and return the error (the tail of every public isend). */
madrail_status_t mdr_send_launch(mdr_peer_t *peer, mdr_req_t *req, madrail_request_t *req_p);
/* Drive a send request (fragments, puts); returns 1 when it made progress. */
int mdr_send_progress(mdr_req_t *req);
/* Send req's sequenced messages again (none of them reached the peer);
 * fails when its state does not allow it. */
madrail_status_t mdr_send_restart(mdr_req_t *req);
/* req waits in (leaves) its peer's sendq for credits or put resources. */
void mdr_sendq_add(mdr_peer_t *peer, mdr_req_t *req);
void mdr_sendq_del(mdr_req_t *req);

/* Sends and the data they handed to drivers.  A send is complete only
 * once its data left the process (or was acknowledged); data lost with a
 * failed rail before it left fails the send. */
/* req's bytes were accepted by the ep of rail (a control message;
 * sequenced: a fragment, RTS or RFS_DATA); rail -1 only notes that req
 * has messages in the txq. */
void mdr_send_track(mdr_req_t *req, int rail, int sequenced);
/* The same for an eager fragment, without watching req yet: the caller
 * calls mdr_send_watch or mdr_send_done before it lets req go. */
static inline void mdr_send_note(mdr_req_t *req, int rail)
{
    uint8_t bit = (uint8_t)(1u << rail);
    req->unsent_rails |= bit;
    req->seq_unsent |= bit;
    req->seq_rails |= bit;
    req->seq_last = (uint8_t)(rail + 1);
}
/* Watch req's unsent data from progress while its protocol goes on. */
void mdr_send_watch(mdr_req_t *req);
/* req's protocol is over with success: complete it once nothing is unsent. */
void mdr_send_done(mdr_req_t *req);
/* Fail a send now, or once its puts in flight report (their status wins
 * only if it is an error). */
void mdr_send_fail(mdr_req_t *req, madrail_status_t status);
/* pr's ep failed or was closed: what it held of any send is lost;
 * never_connected: none of it reached the peer. */
void mdr_send_rail_lost(mdr_peer_rail_t *pr, int never_connected);
/* A txq message of send sreq_id went out on rail, or was dropped with it
 * (part: a FIN's chunk, else -1). */
void mdr_send_txq_sent(mdr_ctx_t *ctx, uint64_t sreq_id, int rail, int sequenced);
void mdr_send_txq_lost(mdr_ctx_t *ctx, uint64_t sreq_id, int rail, int part);
/* From progress: settle the sends whose data left or was lost; returns
 * how many completed. */
int mdr_send_check_all(mdr_ctx_t *ctx);

#endif /* MDR_REQUEST_H */
