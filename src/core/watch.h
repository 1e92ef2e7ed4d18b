/*
 * Rail liveness (watch.c): PING/PONG on quiet rails, and the rail timeout
 * (MADRAIL_RAIL_TIMEOUT) that takes a silent rail down for a peer.
 */
#ifndef MDR_WATCH_H
#define MDR_WATCH_H

#include "core/core.h"

/* Registers PING and PONG. */
madrail_status_t mdr_watch_init(mdr_ctx_t *ctx);
/* A message arrived on pr (before its handler): a sign of life. */
void mdr_watch_rx(mdr_peer_rail_t *pr);
/* From progress, outside any driver upcall: probe the quiet rails of the
 * peers something waits on and take down those silent past the timeout
 * (at most every eighth of it; cheap otherwise). */
void mdr_watch_progress(mdr_ctx_t *ctx);
/* Take pr down now as if its driver had reported reason (the ep is
 * destroyed, its puts in flight fail with their rail); the timeout uses
 * it.  From progress only. */
void mdr_watch_rail_close(mdr_peer_rail_t *pr, const char *reason);
/* pr was taken down inside a driver upcall (a protocol error): close its
 * connection from the next progress, so that the peer sees it end too
 * (its puts in flight fail and go again on other rails). */
void mdr_watch_close_later(mdr_peer_rail_t *pr);
/* A close mdr_watch_close_later asked for, done now if still pending (from
 * progress, not an upcall): the rejoin's next connection must not start
 * while the old one still holds puts that nobody will fail. */
void mdr_watch_close_now(mdr_peer_rail_t *pr);
/* pr's rail went down to its peer: a GONE on every other rail the peer is
 * reachable on, so that it fences that connection before a FIN of a stripe
 * put again elsewhere can complete a receive (watch.c). */
void mdr_watch_tell_gone(mdr_peer_rail_t *pr);

#endif /* MDR_WATCH_H */
