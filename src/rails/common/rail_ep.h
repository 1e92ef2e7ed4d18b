/*
 * The base endpoint that the connection drivers (tcp, shm, ofi, ucx)
 * embed, and the per-rail half of it.  Every one of them wrote the same
 * scaffolding around its own connection code:
 *
 *   - a table uuid -> live ep, so that a peer's handshake finds the ep the
 *     core created for it (and a failed ep leaves the table at once, so a
 *     reconnecting peer gets a new one);
 *   - a failure recorded where it is seen (inside a send, a receive
 *     parser, a timeout) but reported to the core only from progress,
 *     through a queue, because upcalls are made from progress alone;
 *   - ep_destroy called from inside an upcall while progress still holds
 *     pointers to the ep: the ep becomes a zombie, freed at the end of
 *     progress;
 *   - the accept path of a connection from a peer: the new ep is offered
 *     through ep_accepted, which may destroy it (inside the upcall) or
 *     refuse it (mdr_rail_ep_offer).  Before that, a driver whose peer
 *     started over fails the old ep and runs its report, so the core sees
 *     the two events in order (each driver decides what "started over"
 *     means on its wire);
 *   - the rule that settles a simultaneous connect of two stream
 *     connections (tcp; mdr_rail_arbitrate_remote_wins).
 *
 * What stays in the driver is what differs: its connection objects, its
 * queues, what a failure drops, and what it reports after ep_failed (the
 * error completions of its puts).  The driver embeds mdr_rail_ep_t as
 * `base` in its struct mdr_ep and mdr_rail_base_t as `base` in its struct
 * mdr_rail, and passes its own free function at init.  loop does not
 * embed it: its eps live under one process-wide lock and report through
 * one event queue, with none of the above but the software-put
 * registration (sw_reg.h).
 */
#ifndef MDR_RAILS_RAIL_EP_H
#define MDR_RAILS_RAIL_EP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "rails/rail.h"
#include "util/hash.h"
#include "util/list.h"

#define MDR_RAIL_EP_REASON 200 /* bytes of a failure reason, with the NUL */

typedef struct mdr_rail_ep mdr_rail_ep_t;

typedef struct mdr_rail_base {
    const char *log_name; /* the driver's rail name for messages (its storage) */
    const mdr_rail_upcalls_t *upcalls;
    void *rail_cookie;
    mdr_hash_t eps;        /* uuid -> ep that is not failed */
    mdr_rail_ep_t *hot;    /* the last ep looked up, while mapped: a message's
                            * sender is most often the last one's */
    mdr_list_t eps_all;    /* every ep not yet destroyed */
    mdr_list_t zombie_eps; /* destroyed inside progress, freed at its end */
    mdr_list_t failq;      /* eps whose failure is still to be reported */
    int in_progress;       /* the driver's progress is running */
    void (*ep_free)(mdr_rail_ep_t *ep); /* the driver's: frees the whole ep */
} mdr_rail_base_t;

struct mdr_rail_ep {
    mdr_rail_base_t *rb;
    void *cookie;    /* the core's; NULL until ep_accepted answered */
    uint64_t uuid;   /* the peer's */
    int mapped;      /* rb->eps[uuid] == this */
    int destroyed;   /* ep_destroy called: no upcall names it any more */
    int fail_queued; /* on rb->failq */
    madrail_status_t fail_status;
    char fail_reason[MDR_RAIL_EP_REASON];
    mdr_list_t link;      /* rb->eps_all, or rb->zombie_eps once destroyed */
    mdr_list_t fail_link; /* rb->failq */
};

/* Set up rb (empty tables and lists) from the open parameters; log_name
 * must outlive rb.  MADRAIL_ERR_NOMEM. */
madrail_status_t mdr_rail_base_init(mdr_rail_base_t *rb, const char *log_name,
                                    const mdr_rail_params_t *params,
                                    void (*ep_free)(mdr_rail_ep_t *ep));
/* Free the zombies, then the table.  The driver destroyed or freed its
 * live eps before. */
void mdr_rail_base_cleanup(mdr_rail_base_t *rb);
/* Free the eps destroyed during progress (its last step). */
void mdr_rail_base_reap(mdr_rail_base_t *rb);

/* Initialise ep (zeroed by the caller) and file it in rb->eps_all; with
 * map, also under uuid in rb->eps (MADRAIL_ERR_NOMEM: nothing is filed).
 * A uuid already mapped stays with its ep: the table then names the old
 * one and ep->mapped stays 0. */
madrail_status_t mdr_rail_ep_init(mdr_rail_base_t *rb, mdr_rail_ep_t *ep, uint64_t uuid,
                                  void *cookie, int map);
/* The live ep of a uuid, or NULL. */
mdr_rail_ep_t *mdr_rail_ep_lookup(mdr_rail_base_t *rb, uint64_t uuid);
/* File ep under its uuid if no other ep is (mapped afterwards or not). */
void mdr_rail_ep_map(mdr_rail_ep_t *ep);
/* Take ep out of the uuid table (if it is the one filed there). */
void mdr_rail_ep_unmap(mdr_rail_ep_t *ep);

/* Record a failure: status, the formatted reason, out of the uuid table,
 * queued for the report (once).  The caller checked that ep is neither
 * destroyed nor failed already, and logs with ep->fail_reason. */
void mdr_rail_ep_fail_set(mdr_rail_ep_t *ep, madrail_status_t status, const char *fmt,
                          va_list ap);
void mdr_rail_ep_fail_setf(mdr_rail_ep_t *ep, madrail_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Take ep off the failure queue (its failure will not be reported). */
void mdr_rail_ep_fail_unqueue(mdr_rail_ep_t *ep);

/* The common part of ep_destroy, after the driver let go of its own
 * resources: marked destroyed, out of the table and the failure queue, off
 * eps_all; freed now through rb->ep_free, or at the end of progress when
 * progress runs. */
void mdr_rail_ep_retire(mdr_rail_ep_t *ep);

/* Report the queued failures (from progress): for each ep, ep_failed (when
 * the core gave it a cookie), then the driver's after(ep) unless the core
 * destroyed it inside the upcall (after reports the error completions).
 * An ep for which hold(ep) says 1 (e.g. inside ep_accepted, no cookie yet)
 * stays queued for the next call.  hold and after may be NULL.  Returns
 * the number of eps reported plus what after returned. */
int mdr_rail_base_report(mdr_rail_base_t *rb, int (*hold)(mdr_rail_ep_t *ep),
                         int (*after)(mdr_rail_ep_t *ep));

/* ---------------- accepting a peer's connection ---------------- */

typedef enum {
    MDR_RAIL_OFFER_ACCEPTED, /* ep->cookie is the core's */
    MDR_RAIL_OFFER_REFUSED,  /* the core said no: the driver tells the peer, destroys ep */
    MDR_RAIL_OFFER_GONE      /* the core destroyed ep inside the upcall: touch nothing */
} mdr_rail_offer_t;

/* Offer a new ep (no cookie yet; drv_ep is the driver's ep that embeds
 * ep) to the core through ep_accepted.  Called from progress only, so an
 * ep the core destroys inside the upcall is a zombie, still readable. */
mdr_rail_offer_t mdr_rail_ep_offer(mdr_rail_ep_t *ep, mdr_ep_t *drv_ep);

/* Simultaneous connect of two stream connections (each side initiated
 * one): both sides keep the connection initiated by the smaller uuid, so
 * they agree without a further message.  1 when the connection initiated
 * by remote_uuid wins at the side whose uuid is local_uuid. */
static inline int mdr_rail_arbitrate_remote_wins(uint64_t local_uuid, uint64_t remote_uuid)
{
    return remote_uuid < local_uuid;
}

#endif /* MDR_RAILS_RAIL_EP_H */
