/*
 * Rejoin (rejoin.c): a rail that went down to a peer is dialled again in
 * the background, with back-off (MADRAIL_RAIL_REJOIN), by the side with
 * the smaller uuid, and comes back up when the peer answers on it.
 */
#ifndef MDR_REJOIN_H
#define MDR_REJOIN_H

#include "core/core.h"

/* pr went down for a reason a new connection may cure (a driver error, a
 * timeout): schedule reconnection attempts if this side dials. */
void mdr_rejoin_down(mdr_peer_rail_t *pr);
/* From progress, outside any driver upcall: start the attempts that are
 * due, drop the ones that failed or stayed silent. */
void mdr_rejoin_progress(mdr_ctx_t *ctx);
/* The ep of a down pr reported a failure: 1 if it was our reconnection
 * attempt (it is dropped by the next progress), 0 otherwise. */
int mdr_rejoin_probe_failed(mdr_peer_rail_t *pr);
/* A message arrived on a down pr: 1 if it came on our reconnection
 * attempt, which is now the rail's connection (the rail is up: handle the
 * message), 0 if it is to be dropped. */
int mdr_rejoin_arrival(mdr_peer_rail_t *pr);
/* The rail came up another way (the peer reconnected to us): stop. */
void mdr_rejoin_forget(mdr_peer_rail_t *pr);

#endif /* MDR_REJOIN_H */
