/*
 * Peers (peer.c): the peer table, rail connections, the drivers'
 * accepted/failed upcalls, and failure of a rail or of a whole peer.
 */
#ifndef MDR_PEER_H
#define MDR_PEER_H

#include "core/core.h"

madrail_status_t mdr_peer_lookup_or_create(mdr_ctx_t *ctx, uint64_t uuid, mdr_peer_t **peer_p);
/* Free a peer record (its messages were freed by the caller). */
void mdr_peer_destroy(mdr_ctx_t *ctx, mdr_peer_t *peer);
/* Call fn on every peer-rail of the peer table (scans from progress: fn
 * must not add or retire peers). */
void mdr_peer_rails_each(mdr_ctx_t *ctx, void (*fn)(mdr_peer_rail_t *pr, void *arg),
                         void *arg);
/* Free the retired peers (from progress, outside any driver upcall). */
void mdr_peer_reap_retired(mdr_ctx_t *ctx);
/* A peer that connected to us before we knew it (anonymous) and lost every
 * rail before anything came of it (nothing received from it, nothing sent
 * to it, never named by madrail_peer_add): nobody can know its index, so
 * it is taken out of the peer table at once (its index is reused) and
 * freed by the next progress, outside the driver upcall that reported its
 * failure.  Returns 1 if it was retired, 0 if the peer must stay. */
int mdr_peer_retire_unused(mdr_peer_t *peer);
/* The ep_failed upcall of such a peer's rail: marks it down, logs at debug
 * level only, retires the peer when no rail is left; returns 1 if the peer
 * was one of those (the upcall has nothing more to do), 0 otherwise. */
int mdr_peer_rail_failed_unused(mdr_peer_rail_t *pr, const char *reason);

/* Put peer on ctx->active (it has queued work for progress). */
void mdr_peer_activate(mdr_peer_t *peer);
/* Connect pr lazily (first traffic); a refused connection marks the rail
 * down for the peer (and the peer failed from progress when none is left). */
madrail_status_t mdr_peer_connect_rail(mdr_peer_t *peer, int rail);
/* pr can carry messages: not down, connected or with an address. */
int mdr_peer_rail_usable(const mdr_peer_rail_t *pr);
/* pr goes down (failover: counted in the rail's statistics); returns 0 if
 * it was down already.  The only way up again is a new connection
 * (mdr_ep_accepted_upcall, or rejoin.c's). */
int mdr_peer_rail_mark_down(mdr_peer_rail_t *pr, int failover);
/* pr, down, has a new connection in pr->ep that the peer uses (it
 * reconnected to us, or answered our reconnection, rejoin.c): up again,
 * with fresh credits, reorder state and health. */
void mdr_peer_rail_revive(mdr_peer_rail_t *pr);
/* Keep a rail event for madrail_rail_events and MADRAIL_STATS (up: 1 an
 * up event, 0 a down one; the text says what happened). */
void mdr_peer_rail_event(mdr_peer_rail_t *pr, int up, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Some rail can still carry messages to peer. */
int mdr_peer_reachable(const mdr_peer_t *peer);
/* Report a malformed message: close the rail to this peer. */
void mdr_peer_proto_fail(mdr_peer_rail_t *pr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* Every rail to peer is gone: fail what depends on it, and free what it
 * made us hold (tag.c says what is kept). */
void mdr_peer_fail(mdr_peer_t *peer, madrail_status_t status);
/* Memory ran out for a message that arrived from pr's peer (what: which
 * allocation): the message is lost, and every later message from the peer
 * would wait behind its sequence number for good.  The peer is given up
 * loudly (its rails down, reconnections refused, its requests failed with
 * MADRAIL_ERR_NOMEM), never left with a silent hole. */
void mdr_peer_recv_nomem(mdr_peer_rail_t *pr, const char *what) __attribute__((cold));
/* A message to peer was lost before it left and cannot be sent again: its
 * sequence (or a reply it waits for) has a hole for good.  Marks every
 * rail to it down, refuses its reconnections and fails its requests. */
void mdr_peer_give_up(mdr_peer_t *peer);

/* The drivers' upcalls (mdr_rail_upcalls_t). */
void *mdr_ep_accepted_upcall(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep);
void mdr_ep_failed_upcall(void *ep_cookie, madrail_status_t status, const char *reason);

static inline mdr_peer_t *mdr_peer_get(mdr_ctx_t *ctx, madrail_peer_t p)
{
    return (p < ctx->npeers) ? ctx->peers[p] : NULL;
}

#endif /* MDR_PEER_H */
