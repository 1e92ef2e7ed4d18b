/*
 * Recovery of control messages lost with a rail (replay.c): the copies a
 * peer-rail keeps of what it sent and was not yet given credit for, their
 * re-sending on a surviving rail when it fails, and the receiver's exact
 * drop of the copies it already has.
 */
#ifndef MDR_REPLAY_H
#define MDR_REPLAY_H

#include "core/core.h"

/* pr handed a normal (credit-spending) message to its driver: keep a copy
 * (header, and an EAGER fragment's payload: at most a slot). */
void mdr_replay_keep(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t hdr_len,
                     const void *payload, size_t payload_len);
/* The copy kept last on pr (if one was) is part of send sreq_id, which
 * was made after the message went (madrail_isend_nb). */
void mdr_replay_name_last(mdr_peer_rail_t *pr, uint64_t sreq_id);
/* n credits came back on pr: the n oldest copies arrived, free them. */
void mdr_replay_acked(mdr_peer_rail_t *pr, unsigned n);
/* pr just went down for its peer: queue its copies, oldest first and
 * marked re-sent, on one surviving rail (nothing when the peer has none
 * or a copy could not be kept: pr->replay_ok stays 0). */
void mdr_replay_rail_down(mdr_peer_rail_t *pr);
/* item, a re-sent copy, is pinned to a rail that failed: pin it to
 * another usable one (-1: none left). */
int mdr_replay_move(mdr_peer_t *peer, mdr_txq_item_t *item);
/* A re-sent message hdr (flags carry MDR_HF_RESENT) arrived on pr and
 * passed the header checks: 1 if it must be handled, 0 if it is a
 * duplicate (dropped and counted), -1 if pr was closed (malformed). */
int mdr_replay_rx(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr);
/* Re-sent copies to peer may still be on their way (queued, or sent less
 * than a rail timeout ago and not acknowledged): its rails must not come
 * back on a new connection yet, whose counters would judge them (rejoin). */
int mdr_replay_settling(const mdr_peer_t *peer);
/* Forget pr's copies and counters (a new connection, or the peer failed). */
void mdr_replay_reset(mdr_peer_rail_t *pr);

/* mdr_hdr_t.flags of a re-sent message: MDR_HF_RESENT, the rail it was
 * first sent on in the top bits, and in .credits its index on that rail
 * (modulo 2^16). */
#define MDR_HF_RAIL_SHIFT 5
#define MDR_HF_RAIL_MASK 0xe0u
#define MDR_HF_PROTO_MASK 0x0fu /* the bits the protocol modules see */

#endif /* MDR_REPLAY_H */
