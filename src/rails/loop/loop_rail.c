/*
 * The loop driver: rails between contexts of one process, so that the core
 * and its fault handling can be tested in milliseconds without a network.
 *
 * Every open loop rail sits in one process-wide registry (rail id -> rail)
 * guarded by one mutex, because two contexts may run in two threads and a
 * send touches the receiver's state.  A message or put is copied (puts:
 * described) into the sending ep's in-flight queue and handed over by the
 * receiver's progress(): that is what lets the knobs speak in the
 * receiver's progress ticks (delay, reorder) and in wall-clock time
 * (bandwidth), and lets a rail "die" by dropping what is still in flight.
 * Each ep's in-flight queue is FIFO and its ready times never decrease, so
 * order per ep holds whatever the knobs do; only rails overtake each other.
 *
 * Upcalls are made with the mutex released and with no pointer into driver
 * state held across them: progress() takes one event out under the lock,
 * unlocks, makes the upcall, and looks again.  The core may therefore send,
 * put or destroy eps from inside any upcall.
 *
 * A knob given on either end of a connection applies to it (delay, reorder
 * and bandwidth take the stronger of the two); refusals (nores) and death
 * (fail) count the operations a rail itself issues.
 *
 * First contact compares the two rails' job keys, as a network driver's
 * handshake does: a rail of another job is refused without an upcall, and
 * its side sees "the peer closed the connection", nothing more.
 */
#include "mdr_config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails/common/drv.h"
#include "rails/loop/loop.h"
#include "rails/common/region.h"
#include "rails/common/sw_reg.h"
#include "rails/rail.h"
#include "util/cfg.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/list.h"
#include "util/log.h"

/* ---------------- configuration ---------------- */

typedef struct mdr_loop_config {
    unsigned delay;       /* extra receiver progress calls before delivery */
    int reorder;          /* add a pseudo-random 0..7 calls per delivery */
    unsigned seed;        /* seed of that generator (mixed with the rail id) */
    unsigned nores_every; /* refuse every Nth ctrl_send/put, 0: never */
    size_t bandwidth;     /* bytes per second per ep, 0: unlimited */
    unsigned fail_after;  /* the rail dies after N operations, 0: never */
    double latency_us;    /* profile latency */
    int reg;              /* registration is not cheap: no MDR_RAIL_CAP_REG_CHEAP */
    double profile_mbs;   /* profile bandwidth, 0: from the cap */
} mdr_loop_config_t;

static const mdr_cfg_entry_t mdr_loop_cfg_entries[] = {
    {"MADRAIL_LOOP_DELAY", MDR_CFG_UINT, "0", 0, 1000000, offsetof(mdr_loop_config_t, delay),
     "loop rails: a message or put becomes visible only after the receiving rail ran "
     "progress() this many more times (spec option delay=)"},
    {"MADRAIL_LOOP_REORDER", MDR_CFG_BOOL, "0", 1, 0, offsetof(mdr_loop_config_t, reorder),
     "loop rails: delay each delivery by a pseudo-random 0..7 progress calls, so rails "
     "overtake each other; order on one ep is kept (spec option reorder=)"},
    {"MADRAIL_LOOP_SEED", MDR_CFG_UINT, "1", 0, 4294967295.0, offsetof(mdr_loop_config_t, seed),
     "loop rails: seed of the reorder generator, mixed with the rail id (spec option seed=)"},
    {"MADRAIL_LOOP_NORES_EVERY", MDR_CFG_UINT, "0", 0, 4294967295.0,
     offsetof(mdr_loop_config_t, nores_every),
     "loop rails: every Nth ctrl_send or put is refused with no-resource, 0: never "
     "(spec option nores=)"},
    {"MADRAIL_LOOP_BANDWIDTH", MDR_CFG_SIZE, "0", 0, 1e15, offsetof(mdr_loop_config_t, bandwidth),
     "loop rails: bandwidth cap per ep in bytes per second, e.g. 100m; 0: unlimited "
     "(spec option bw=)"},
    {"MADRAIL_LOOP_FAIL_AFTER", MDR_CFG_UINT, "0", 0, 4294967295.0,
     offsetof(mdr_loop_config_t, fail_after),
     "loop rails: the rail dies when it issues an operation after this many (its eps fail "
     "with rail-down on both sides), 0: never (spec option fail=)"},
    {"MADRAIL_LOOP_LATENCY_US", MDR_CFG_DOUBLE, "1", 0, 1e9,
     offsetof(mdr_loop_config_t, latency_us),
     "loop rails: one-way latency in microseconds reported in the profile (spec option "
     "latency=)"},
    {"MADRAIL_LOOP_REG", MDR_CFG_BOOL, "0", 1, 0, offsetof(mdr_loop_config_t, reg),
     "loop rails: do not report registration as cheap, so the core registers send buffers "
     "too and caches registrations, as on an RDMA rail (spec option reg=)"},
    {"MADRAIL_LOOP_PROFILE_MBS", MDR_CFG_DOUBLE, "0", 0, 1e9,
     offsetof(mdr_loop_config_t, profile_mbs),
     "loop rails: bandwidth in MB/s reported in the profile, whatever the cap; 0: the cap "
     "(10000 when uncapped). Lets a test give rails a profile that is wrong "
     "(spec option mbs=)"},
};

const mdr_cfg_table_t mdr_loop_cfg_table = MDR_CFG_TABLE("loop", mdr_loop_cfg_entries);

/* Spec option -> index in mdr_loop_cfg_entries. */
static const struct {
    const char *key;
    size_t entry;
} mdr_loop_spec_opts[] = {
    {"delay", 0}, {"reorder", 1}, {"seed", 2}, {"nores", 3},
    {"bw", 4},    {"fail", 5},    {"latency", 6}, {"reg", 7},
    {"mbs", 8},
};

/* ---------------- objects ---------------- */

#define MDR_LOOP_ADDR_MAGIC 0x4c4f4f50u /* "LOOP" */
#define MDR_LOOP_FABRIC_MAX 32
#define MDR_LOOP_REASON_MAX 192

enum { MDR_LOOP_CTRL = 1, MDR_LOOP_PUT = 2 };

typedef struct mdr_loop_addr {
    uint32_t magic;
    uint32_t pad;
    uint64_t rail_id;
} mdr_loop_addr_t;

typedef struct mdr_loop_rkey {
    uint64_t rail_id;
    uint64_t key; /* the region key (rails/common/sw_reg.h) */
} mdr_loop_rkey_t;

/* One message or put between accept and delivery (then, for a put, until
 * its completion is reported). */
typedef struct mdr_loop_item {
    mdr_list_t link;
    int kind;
    size_t len;
    uint64_t ready_tick; /* receiver's progress count from which it may be delivered */
    uint64_t ready_ns;   /* and the time (bandwidth cap), 0: at once */
    uint64_t sent_ns;    /* when it was accepted (ep_link_quiet) */
    uint64_t paused_at;  /* mdr_loop_paused_ns then (ep_link_quiet) */
    const void *src;     /* PUT: local data, read at delivery */
    uint64_t raddr;
    mdr_loop_rkey_t rkey;
    mdr_completion_t *comp;
    _Alignas(16) uint8_t data[]; /* CTRL: the message (aligned: the core reads it in place) */
} mdr_loop_item_t;

struct mdr_memh {
    mdr_region_t reg; /* in rail->regions: id, generation, range, access */
    mdr_rail_t *rail;
};

struct mdr_ep {
    mdr_list_t link; /* rail->eps */
    mdr_rail_t *rail;
    uint64_t remote_uuid;
    uint64_t remote_id; /* the peer rail's id */
    void *cookie;
    mdr_ep_t *peer;     /* the other end once the connection is made */
    int accepting;      /* ep_accepted upcall under way */
    uint64_t born_ns;   /* when ep_create made it (the nores_fresh hook) */
    mdr_list_t flight;  /* items sent, not yet delivered */
    mdr_list_t in_link; /* in dst->incoming while flight is not empty */
    mdr_rail_t *in_rail;
    mdr_list_t done;    /* puts delivered, completion not yet reported */
    mdr_list_t errq;    /* puts dropped by a failure, error not yet reported */
    mdr_list_t ev_link; /* rail->evq */
    int in_evq;
    size_t backlog;     /* bytes in flight */
    uint64_t last_tick, last_ns;
    uint64_t delivered_ns; /* when the receiver last took an item of ours */
    uint64_t delivered_paused; /* mdr_loop_paused_ns then */
    int failed, fail_reported;
    madrail_status_t fail_status;
    char fail_reason[MDR_LOOP_REASON_MAX];
};

struct mdr_rail {
    uint64_t id;
    char fabric[MDR_LOOP_FABRIC_MAX];
    char name[64];
    mdr_loop_config_t cfg;
    uint64_t uuid;
    const uint8_t *job_key; /* the core's */
    mdr_drv_refusals_t refusals;
    const mdr_rail_upcalls_t *upcalls;
    void *cookie;
    size_t slot_size;
    uint64_t rng;
    uint64_t ticks;    /* progress() calls */
    uint64_t attempts; /* ctrl_send/put calls that reached the knobs */
    uint64_t ops;      /* operations accepted */
    int dead;
    int blackhole;     /* nothing to or from it is delivered, nothing fails */
    int nores_fresh;   /* a new ep's operations say no resource for 20 ms (a handshake under way) */
    mdr_list_t eps;
    mdr_list_t incoming; /* eps of any rail with items in flight to us */
    mdr_list_t evq;      /* our eps with something to report */
    mdr_region_tab_t regions; /* registrations (mdr_memh_t.reg), under the lock */
};

/* Process-wide registry. */
static pthread_mutex_t mdr_loop_lock = PTHREAD_MUTEX_INITIALIZER;

/* Both ends of a loop connection live in this process, so when the whole
 * process stops (descheduled on a loaded machine, stopped in a debugger)
 * the receiver stops too: a kernel would have kept acknowledging, this
 * "transport" cannot.  Time during which no loop rail of the process was
 * progressed for more than MDR_LOOP_PAUSE_NS is therefore left out of
 * ep_link_quiet, or a unit test would see a black hole in every long
 * pause of its own process.  A peer context that stops while another
 * keeps progressing (the tests' black holes) is not a pause. */
#define MDR_LOOP_PAUSE_NS 20000000ull
static uint64_t mdr_loop_seen_ns;   /* last progress of any loop rail */
static uint64_t mdr_loop_paused_ns; /* sum of the pauses longer than the above */
static mdr_hash_t mdr_loop_registry;
static size_t mdr_loop_nrails;
static uint64_t mdr_loop_next_id = 1;

/* What progress() hands to the core after dropping the lock. */
enum { MDR_LOOP_EV_NOP = 1, MDR_LOOP_EV_CTRL, MDR_LOOP_EV_ACCEPT, MDR_LOOP_EV_FAILED,
       MDR_LOOP_EV_COMP };

typedef struct mdr_loop_event {
    int kind;
    void *cookie;
    mdr_loop_item_t *item; /* CTRL, COMP: owned by the event */
    mdr_ep_t *new_ep;      /* ACCEPT */
    uint64_t uuid;         /* ACCEPT */
    madrail_status_t status;
    char reason[MDR_LOOP_REASON_MAX];
} mdr_loop_event_t;

/* ---------------- helpers (lock held) ---------------- */

static uint64_t mdr_loop_rand(mdr_rail_t *rail)
{
    /* xorshift64*: cheap, deterministic, good enough for delays. */
    uint64_t x = rail->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rail->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static mdr_rail_t *mdr_loop_lookup(uint64_t id)
{
    if (mdr_loop_nrails == 0)
        return NULL;
    return mdr_hash_get(&mdr_loop_registry, id);
}

static void mdr_loop_mark_event(mdr_ep_t *ep)
{
    if (!ep->in_evq) {
        mdr_list_push_tail(&ep->rail->evq, &ep->ev_link);
        ep->in_evq = 1;
    }
}

static void mdr_loop_leave_incoming(mdr_ep_t *ep)
{
    if (ep->in_rail != NULL) {
        mdr_list_del(&ep->in_link);
        ep->in_rail = NULL;
    }
}

static void mdr_loop_free_items(mdr_list_t *list)
{
    mdr_list_t *it;

    while ((it = mdr_list_pop_head(list)) != NULL)
        free(mdr_container_of(it, mdr_loop_item_t, link));
}

/* Drop what is in flight: messages are lost, puts owe an error completion. */
static void mdr_loop_drop_flight(mdr_ep_t *ep)
{
    mdr_loop_item_t *item;
    mdr_list_t *it;

    while ((it = mdr_list_pop_head(&ep->flight)) != NULL) {
        item = mdr_container_of(it, mdr_loop_item_t, link);
        if (item->kind == MDR_LOOP_PUT)
            mdr_list_push_tail(&ep->errq, &item->link);
        else
            free(item);
    }
    ep->backlog = 0;
    mdr_loop_leave_incoming(ep);
}

/* Fail ep and the other end of its connection; both report at their
 * rail's next progress(). */
static void mdr_loop_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *reason)
{
    char peer_reason[MDR_LOOP_REASON_MAX];
    mdr_ep_t *peer;

    if (ep->failed)
        return;
    ep->failed = 1;
    ep->fail_status = status;
    snprintf(ep->fail_reason, sizeof(ep->fail_reason), "%s", reason);
    mdr_loop_drop_flight(ep);
    mdr_loop_mark_event(ep);
    mdr_debug("rail %s ep to uuid %016llx failed: %s", ep->rail->name,
              (unsigned long long)ep->remote_uuid, reason);

    peer = ep->peer;
    if (peer != NULL) {
        ep->peer = NULL;
        peer->peer = NULL;
        snprintf(peer_reason, sizeof(peer_reason), "connection lost (peer side: %s)", reason);
        mdr_loop_ep_fail(peer, MADRAIL_ERR_RAIL_DOWN, peer_reason);
    }
}

static void mdr_loop_rail_die(mdr_rail_t *rail, const char *reason)
{
    mdr_list_t *it;

    rail->dead = 1;
    mdr_warn("rail %s (loop id %llu): %s", rail->name, (unsigned long long)rail->id, reason);
    mdr_list_for_each(it, &rail->eps)
        mdr_loop_ep_fail(mdr_container_of(it, mdr_ep_t, link), MADRAIL_ERR_RAIL_DOWN, reason);
    while (!mdr_list_empty(&rail->incoming))
        mdr_loop_ep_fail(mdr_container_of(rail->incoming.next, mdr_ep_t, in_link),
                         MADRAIL_ERR_RAIL_DOWN, reason);
}

/* Free an ep without any upcall; the other end fails as on a closed
 * connection. */
static void mdr_loop_ep_free(mdr_ep_t *ep)
{
    mdr_ep_t *peer = ep->peer;

    mdr_list_del(&ep->link);
    if (ep->in_evq)
        mdr_list_del(&ep->ev_link);
    mdr_loop_leave_incoming(ep);
    mdr_loop_free_items(&ep->flight);
    mdr_loop_free_items(&ep->done);
    mdr_loop_free_items(&ep->errq);
    if (peer != NULL) {
        ep->peer = NULL;
        peer->peer = NULL;
        mdr_loop_ep_fail(peer, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection");
    }
    free(ep);
}

static mdr_ep_t *mdr_loop_ep_new(mdr_rail_t *rail, uint64_t remote_uuid, uint64_t remote_id,
                                 void *cookie)
{
    mdr_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL)
        return NULL;
    ep->rail = rail;
    ep->remote_uuid = remote_uuid;
    ep->remote_id = remote_id;
    ep->cookie = cookie;
    mdr_list_init(&ep->flight);
    mdr_list_init(&ep->in_link);
    mdr_list_init(&ep->done);
    mdr_list_init(&ep->errq);
    mdr_list_init(&ep->ev_link);
    mdr_list_push_tail(&rail->eps, &ep->link);
    return ep;
}

/*
 * The checks every ctrl_send/put goes through after argument validation:
 * refusal knob, death knob, reachability.  Returns OK with *dst_p set, or
 * the status for the caller to return.
 */
static madrail_status_t mdr_loop_admit(mdr_ep_t *ep, mdr_rail_t **dst_p)
{
    mdr_rail_t *rail = ep->rail, *dst;
    char why[MDR_LOOP_REASON_MAX];

    if (ep->failed)
        return MADRAIL_ERR_RAIL_DOWN;
    rail->attempts++;
    if (rail->nores_fresh && mdr_time_ns() - ep->born_ns < 20000000ull)
        return MADRAIL_ERR_NORESOURCE;
    if (rail->cfg.nores_every != 0 && rail->attempts % rail->cfg.nores_every == 0)
        return MADRAIL_ERR_NORESOURCE;
    if (rail->cfg.fail_after != 0 && rail->ops >= rail->cfg.fail_after) {
        snprintf(why, sizeof(why), "rail died after %u operations (fail=%u)",
                 rail->cfg.fail_after, rail->cfg.fail_after);
        mdr_loop_rail_die(rail, why);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    dst = mdr_loop_lookup(ep->remote_id);
    if (dst == NULL || dst->dead || strcmp(dst->fabric, rail->fabric) != 0) {
        if (dst == NULL)
            snprintf(why, sizeof(why), "loop rail id %llu is closed",
                     (unsigned long long)ep->remote_id);
        else if (dst->dead)
            snprintf(why, sizeof(why), "loop rail id %llu (%s) is dead",
                     (unsigned long long)ep->remote_id, dst->name);
        else
            snprintf(why, sizeof(why), "loop rail id %llu is on fabric %s, not %s",
                     (unsigned long long)ep->remote_id, dst->fabric, rail->fabric);
        mdr_loop_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, why);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    *dst_p = dst;
    return MADRAIL_OK;
}

/* Put an accepted item in flight with its ready tick and time. */
static void mdr_loop_enqueue(mdr_ep_t *ep, mdr_rail_t *dst, mdr_loop_item_t *item)
{
    mdr_rail_t *rail = ep->rail;
    uint64_t tick, ns = 0, start, now;
    unsigned delay = rail->cfg.delay > dst->cfg.delay ? rail->cfg.delay : dst->cfg.delay;
    size_t bw = rail->cfg.bandwidth;

    /* Deliverable from the receiver's (delay+1)th progress call on. */
    tick = dst->ticks + 1 + delay;
    if (rail->cfg.reorder)
        tick += mdr_loop_rand(rail) & 7;
    else if (dst->cfg.reorder)
        tick += mdr_loop_rand(dst) & 7;
    if (tick < ep->last_tick)
        tick = ep->last_tick; /* never overtake an earlier item of this ep */
    ep->last_tick = tick;

    if (dst->cfg.bandwidth != 0 && (bw == 0 || dst->cfg.bandwidth < bw))
        bw = dst->cfg.bandwidth;
    if (bw != 0) {
        now = mdr_time_ns();
        start = ep->last_ns > now ? ep->last_ns : now;
        ns = start + (uint64_t)((double)item->len * 1e9 / (double)bw);
    }
    if (ns < ep->last_ns)
        ns = ep->last_ns;
    ep->last_ns = ns;

    item->ready_tick = tick;
    item->ready_ns = ns;
    item->sent_ns = mdr_time_ns();
    item->paused_at = mdr_loop_paused_ns;
    mdr_list_push_tail(&ep->flight, &item->link);
    ep->backlog += item->len;
    rail->ops++;
    if (ep->in_rail == NULL) {
        mdr_list_push_tail(&dst->incoming, &ep->in_link);
        ep->in_rail = dst;
    }
}

/* The receiving ep of rail for a connection from sep, or NULL. */
static mdr_ep_t *mdr_loop_find_ep(mdr_rail_t *rail, const mdr_ep_t *sep)
{
    mdr_list_t *it;
    mdr_ep_t *ep;

    mdr_list_for_each(it, &rail->eps) {
        ep = mdr_container_of(it, mdr_ep_t, link);
        if (ep != sep && ep->remote_id == sep->rail->id &&
            ep->remote_uuid == sep->rail->uuid && !ep->failed && ep->peer == NULL)
            return ep;
    }
    return NULL;
}

/* A put from the peer of uuid from arrived at rail: is [raddr, raddr+len)
 * inside a region registered for remote writes under its key and offered
 * to that peer? */
static mdr_memh_t *mdr_loop_put_target(mdr_rail_t *rail, const mdr_loop_item_t *item,
                                       uint64_t from, char *why, size_t why_len)
{
    mdr_region_t *r;
    const char *reason;

    if (item->rkey.rail_id != rail->id) {
        snprintf(why, why_len, "put with a remote key of loop rail id %llu, not %llu",
                 (unsigned long long)item->rkey.rail_id, (unsigned long long)rail->id);
        return NULL;
    }
    r = mdr_region_check_put(&rail->regions, item->rkey.key, item->raddr, item->len, from,
                             &reason);
    if (r == NULL) {
        snprintf(why, why_len, "put of %zu bytes at 0x%llx with key %#llx: %s", item->len,
                 (unsigned long long)item->raddr, (unsigned long long)item->rkey.key, reason);
        return NULL;
    }
    return mdr_container_of(r, mdr_memh_t, reg);
}

/*
 * Take the next thing progress() must do out of the rail's state.  Returns
 * 0 when there is nothing; otherwise fills ev (kind NOP when the work was
 * done here and needs no upcall).
 */
static int mdr_loop_next_event(mdr_rail_t *rail, mdr_loop_event_t *ev, uint64_t *now_p)
{
    char why[MDR_LOOP_REASON_MAX];
    mdr_loop_item_t *item;
    mdr_ep_t *sep, *rep;
    mdr_list_t *it;

    /* Deliveries first, one sender ep at a time, rotating for fairness. */
    mdr_list_for_each(it, &rail->incoming) {
        sep = mdr_container_of(it, mdr_ep_t, in_link);
        item = mdr_container_of(sep->flight.next, mdr_loop_item_t, link);
        if (item->ready_tick > rail->ticks || rail->blackhole || sep->rail->blackhole)
            continue;
        if (item->ready_ns != 0) {
            if (*now_p == 0)
                *now_p = mdr_time_ns();
            if (item->ready_ns > *now_p)
                continue;
        }
        rep = sep->peer;
        if (rep == NULL && !mdr_drv_key_equal(rail->job_key, sep->rail->job_key)) {
            char src[48];
            snprintf(src, sizeof(src), "loop rail %llu", (unsigned long long)sep->rail->id);
            mdr_drv_refusal(&rail->refusals, rail->name, src, "first contact without this "
                            "job's key");
            mdr_loop_ep_fail(sep, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection");
            ev->kind = MDR_LOOP_EV_NOP;
            return 1;
        }
        if (rep == NULL) {
            rep = mdr_loop_find_ep(rail, sep);
            if (rep == NULL) {
                rep = mdr_loop_ep_new(rail, sep->rail->uuid, sep->rail->id, NULL);
                if (rep == NULL) {
                    mdr_loop_ep_fail(sep, MADRAIL_ERR_RAIL_DOWN,
                                     "the peer could not allocate an endpoint");
                    ev->kind = MDR_LOOP_EV_NOP;
                    return 1;
                }
                rep->accepting = 1;
            }
            rep->peer = sep;
            sep->peer = rep;
            if (rep->accepting) {
                ev->kind = MDR_LOOP_EV_ACCEPT;
                ev->new_ep = rep;
                ev->uuid = sep->rail->uuid;
                return 1;
            }
        }
        if (rep->accepting)
            continue; /* progress() called from inside ep_accepted */

        mdr_list_del(&item->link);
        sep->backlog -= item->len;
        sep->delivered_ns = *now_p ? *now_p : mdr_time_ns();
        sep->delivered_paused = mdr_loop_paused_ns;
        mdr_list_del(&sep->in_link);
        if (mdr_list_empty(&sep->flight))
            sep->in_rail = NULL;
        else
            mdr_list_push_tail(&rail->incoming, &sep->in_link);

        if (item->kind == MDR_LOOP_CTRL) {
            ev->kind = MDR_LOOP_EV_CTRL;
            ev->cookie = rep->cookie;
            ev->item = item;
            return 1;
        }
        if (mdr_loop_put_target(rail, item, sep->rail->uuid, why, sizeof(why)) == NULL) {
            mdr_error("rail %s: %s; closing the connection to uuid %016llx", rail->name, why,
                      (unsigned long long)rep->remote_uuid);
            mdr_list_push_head(&sep->errq, &item->link);
            mdr_loop_ep_fail(rep, MADRAIL_ERR_RAIL_PROTO, why);
        } else {
            if (item->len != 0)
                memmove((void *)(uintptr_t)item->raddr, item->src, item->len);
            mdr_list_push_tail(&sep->done, &item->link);
            mdr_loop_mark_event(sep);
        }
        ev->kind = MDR_LOOP_EV_NOP;
        return 1;
    }

    /* Then what our own eps owe the core: completions, failures. */
    while (!mdr_list_empty(&rail->evq)) {
        rep = mdr_container_of(rail->evq.next, mdr_ep_t, ev_link);
        if (!mdr_list_empty(&rep->done)) {
            ev->kind = MDR_LOOP_EV_COMP;
            ev->item = mdr_container_of(mdr_list_pop_head(&rep->done), mdr_loop_item_t, link);
            ev->status = MADRAIL_OK;
            return 1;
        }
        if (rep->failed && !rep->fail_reported && !rep->accepting) {
            rep->fail_reported = 1;
            ev->kind = MDR_LOOP_EV_FAILED;
            ev->cookie = rep->cookie;
            ev->status = rep->fail_status;
            snprintf(ev->reason, sizeof(ev->reason), "%s", rep->fail_reason);
            return 1;
        }
        if (!mdr_list_empty(&rep->errq) && rep->fail_reported) {
            ev->kind = MDR_LOOP_EV_COMP;
            ev->item = mdr_container_of(mdr_list_pop_head(&rep->errq), mdr_loop_item_t, link);
            ev->status = rep->fail_status;
            return 1;
        }
        /* Nothing left (an ep failed during its accept upcall is marked
         * again once the upcall returned). */
        mdr_list_del(&rep->ev_link);
        rep->in_evq = 0;
    }
    return 0;
}

/* After ep_accepted returned. */
static void mdr_loop_accept_done(mdr_ep_t *ep, void *cookie)
{
    ep->accepting = 0;
    if (cookie != NULL) {
        ep->cookie = cookie;
        if (ep->failed)
            mdr_loop_mark_event(ep);
        return;
    }
    if (ep->peer != NULL) {
        ep->peer->peer = NULL;
        mdr_loop_ep_fail(ep->peer, MADRAIL_ERR_RAIL_DOWN, "the peer refused the connection");
        ep->peer = NULL;
    }
    mdr_loop_ep_free(ep);
}

/* ---------------- spec parsing ---------------- */

typedef struct mdr_loop_spec_arg {
    const char *spec;
    mdr_loop_config_t *cfg;
} mdr_loop_spec_arg_t;

static madrail_status_t mdr_loop_spec_opt(const char *key, const char *val, void *arg)
{
    mdr_loop_spec_arg_t *sa = arg;
    const mdr_cfg_entry_t *e = NULL;
    union {
        size_t sz;
        unsigned u;
        int b;
        double d;
    } v;
    const char *why = "invalid value";
    double num = 0;
    size_t i;

    for (i = 0; i < sizeof(mdr_loop_spec_opts) / sizeof(mdr_loop_spec_opts[0]); i++)
        if (strcmp(key, mdr_loop_spec_opts[i].key) == 0)
            e = &mdr_loop_cfg_entries[mdr_loop_spec_opts[i].entry];
    if (e == NULL) {
        mdr_error("rail spec loop:%s: unknown option '%s' (known: delay, reorder, seed, nores, "
                  "bw, fail, latency, reg, mbs)",
                  sa->spec, key);
        return MADRAIL_ERR_CONFIG;
    }
    memset(&v, 0, sizeof(v));
    if (e->type == MDR_CFG_BOOL && val[0] == '\0')
        v.b = 1; /* "reorder" alone switches it on */
    else if (mdr_cfg_parse_value(e->type, val, &v, &why) != MADRAIL_OK) {
        mdr_error("rail spec loop:%s: option %s=%s: %s", sa->spec, key, val, why);
        return MADRAIL_ERR_CONFIG;
    }
    switch (e->type) {
    case MDR_CFG_SIZE: num = (double)v.sz; break;
    case MDR_CFG_UINT: num = (double)v.u; break;
    case MDR_CFG_DOUBLE: num = v.d; break;
    default: break;
    }
    if (e->type != MDR_CFG_BOOL && e->min <= e->max && (num < e->min || num > e->max)) {
        mdr_error("rail spec loop:%s: option %s=%s: out of range %g..%g", sa->spec, key, val,
                  e->min, e->max);
        return MADRAIL_ERR_CONFIG;
    }
    switch (e->type) {
    case MDR_CFG_SIZE: *(size_t *)((char *)sa->cfg + e->offset) = v.sz; break;
    case MDR_CFG_UINT: *(unsigned *)((char *)sa->cfg + e->offset) = v.u; break;
    case MDR_CFG_BOOL: *(int *)((char *)sa->cfg + e->offset) = v.b; break;
    case MDR_CFG_DOUBLE: *(double *)((char *)sa->cfg + e->offset) = v.d; break;
    default: break;
    }
    return MADRAIL_OK;
}

/* ---------------- operations ---------------- */

static madrail_status_t mdr_loop_open(const char *spec, const mdr_rail_params_t *params,
                                      mdr_rail_t **rail_p)
{
    mdr_loop_spec_arg_t sa;
    mdr_loop_config_t cfg;
    madrail_status_t st;
    mdr_rail_t *rail;
    char *copy, *fabric = NULL;
    uint64_t x;

    if (!mdr_drv_open_args_ok(spec, params, rail_p, SIZE_MAX))
        return MADRAIL_ERR_INVALID;

    memset(&cfg, 0, sizeof(cfg));
    st = mdr_cfg_parse(&mdr_loop_cfg_table, params->overrides, &cfg);
    if (st != MADRAIL_OK)
        goto err_cfg;

    sa.spec = spec;
    sa.cfg = &cfg;
    st = mdr_drv_spec_split(spec, mdr_loop_spec_opt, &sa, &copy, &fabric);
    if (st != MADRAIL_OK)
        goto err_cfg;
    if (fabric == NULL || fabric[0] == '\0' || strlen(fabric) >= MDR_LOOP_FABRIC_MAX) {
        mdr_error("rail spec loop:%s: expected a fabric name of 1..%d characters, e.g. loop:f0",
                  spec, MDR_LOOP_FABRIC_MAX - 1);
        st = MADRAIL_ERR_CONFIG;
        goto err_copy;
    }

    rail = calloc(1, sizeof(*rail));
    if (rail == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto err_copy;
    }
    snprintf(rail->fabric, sizeof(rail->fabric), "%s", fabric);
    snprintf(rail->name, sizeof(rail->name), "loop:%s", fabric);
    rail->cfg = cfg;
    rail->uuid = params->uuid;
    rail->job_key = params->job_key;
    rail->upcalls = params->upcalls;
    rail->cookie = params->rail_cookie;
    rail->slot_size = params->slot_size;
    mdr_list_init(&rail->eps);
    mdr_list_init(&rail->incoming);
    mdr_list_init(&rail->evq);

    pthread_mutex_lock(&mdr_loop_lock);
    if (mdr_loop_nrails == 0) {
        st = mdr_hash_init(&mdr_loop_registry, 16);
        if (st != MADRAIL_OK)
            goto err_locked;
    }
    rail->id = mdr_loop_next_id++;
    st = mdr_hash_put(&mdr_loop_registry, rail->id, rail);
    if (st != MADRAIL_OK) {
        if (mdr_loop_nrails == 0)
            mdr_hash_cleanup(&mdr_loop_registry);
        goto err_locked;
    }
    mdr_loop_nrails++;
    pthread_mutex_unlock(&mdr_loop_lock);

    /* splitmix64 of seed and id: rails with one seed still differ. */
    x = ((uint64_t)cfg.seed << 32 ^ rail->id) + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    rail->rng = x != 0 ? x : 1;

    mdr_debug("rail %s open: loop id %llu delay %u reorder %d nores %u bw %zu fail %u",
              rail->name, (unsigned long long)rail->id, cfg.delay, cfg.reorder,
              cfg.nores_every, cfg.bandwidth, cfg.fail_after);
    free(copy);
    mdr_cfg_release(&mdr_loop_cfg_table, &cfg);
    *rail_p = rail;
    return MADRAIL_OK;

err_locked:
    pthread_mutex_unlock(&mdr_loop_lock);
    free(rail);
err_copy:
    free(copy);
err_cfg:
    mdr_cfg_release(&mdr_loop_cfg_table, &cfg);
    return st;
}

static void mdr_loop_region_free(mdr_region_t *r, void *arg)
{
    (void)arg;
    free(mdr_container_of(r, mdr_memh_t, reg));
}

static void mdr_loop_close(mdr_rail_t *rail)
{
    if (rail == NULL)
        return;
    pthread_mutex_lock(&mdr_loop_lock);
    mdr_hash_del(&mdr_loop_registry, rail->id);
    if (--mdr_loop_nrails == 0)
        mdr_hash_cleanup(&mdr_loop_registry);
    while (!mdr_list_empty(&rail->eps))
        mdr_loop_ep_free(mdr_container_of(rail->eps.next, mdr_ep_t, link));
    while (!mdr_list_empty(&rail->incoming))
        mdr_loop_ep_fail(mdr_container_of(rail->incoming.next, mdr_ep_t, in_link),
                         MADRAIL_ERR_RAIL_DOWN, "the peer rail was closed");
    pthread_mutex_unlock(&mdr_loop_lock);

    mdr_region_tab_cleanup(&rail->regions, mdr_loop_region_free, NULL);
    free(rail);
}

/* Make the rail die now, as fail=N does after N operations: its eps and
 * the eps sending to it fail and report at the next progress (fault tests,
 * and the fuzz targets' teardown, which must not wait for hostile peers). */
void mdr_loop_rail_kill(mdr_rail_t *rail, const char *reason)
{
    pthread_mutex_lock(&mdr_loop_lock);
    if (!rail->dead)
        mdr_loop_rail_die(rail, reason);
    pthread_mutex_unlock(&mdr_loop_lock);
}

void mdr_loop_rail_blackhole(mdr_rail_t *rail, int on)
{
    pthread_mutex_lock(&mdr_loop_lock);
    rail->blackhole = on != 0;
    pthread_mutex_unlock(&mdr_loop_lock);
    mdr_warn("rail %s (loop id %llu): %s", rail->name, (unsigned long long)rail->id,
             on ? "black hole: nothing is delivered any more" : "delivers again");
}

void mdr_loop_rail_nores_fresh(mdr_rail_t *rail, int on)
{
    pthread_mutex_lock(&mdr_loop_lock);
    rail->nores_fresh = on != 0;
    pthread_mutex_unlock(&mdr_loop_lock);
}

static void mdr_loop_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "%s", rail->name);
    /* a put completes once the receiver's progress copied it in place */
    attr->caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_REMOTE |
                 (rail->cfg.reg ? 0 : MDR_RAIL_CAP_REG_CHEAP);
    attr->latency_us = rail->cfg.latency_us;
    if (rail->cfg.profile_mbs > 0)
        attr->bandwidth_mbs = rail->cfg.profile_mbs;
    else
        attr->bandwidth_mbs =
            rail->cfg.bandwidth != 0 ? (double)rail->cfg.bandwidth / 1e6 : 10000.0;
    attr->max_ctrl = rail->slot_size;
    attr->addr_len = sizeof(mdr_loop_addr_t);
    attr->max_rkey = sizeof(mdr_loop_rkey_t);
}

static madrail_status_t mdr_loop_addr_pack(mdr_rail_t *rail, void *buf, size_t len)
{
    mdr_loop_addr_t a;

    if (buf == NULL || len < sizeof(a))
        return MADRAIL_ERR_INVALID;
    memset(&a, 0, sizeof(a));
    a.magic = MDR_LOOP_ADDR_MAGIC;
    a.rail_id = rail->id;
    memcpy(buf, &a, sizeof(a));
    return MADRAIL_OK;
}

static madrail_status_t mdr_loop_ep_create(mdr_rail_t *rail, uint64_t remote_uuid,
                                           const void *addr, size_t len, void *ep_cookie,
                                           mdr_ep_t **ep_p)
{
    mdr_loop_addr_t a;
    mdr_ep_t *ep;

    if (addr == NULL || len != sizeof(a) || ep_p == NULL) {
        mdr_error("rail %s: peer address of %zu bytes, expected %zu", rail->name, len,
                  sizeof(a));
        return MADRAIL_ERR_INVALID;
    }
    memcpy(&a, addr, sizeof(a));
    if (a.magic != MDR_LOOP_ADDR_MAGIC || a.rail_id == 0) {
        mdr_error("rail %s: not a loop rail address", rail->name);
        return MADRAIL_ERR_INVALID;
    }
    pthread_mutex_lock(&mdr_loop_lock);
    ep = mdr_loop_ep_new(rail, remote_uuid, a.rail_id, ep_cookie);
    if (ep == NULL) {
        pthread_mutex_unlock(&mdr_loop_lock);
        return MADRAIL_ERR_NOMEM;
    }
    ep->born_ns = mdr_time_ns();
    if (rail->dead)
        mdr_loop_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the rail is dead");
    pthread_mutex_unlock(&mdr_loop_lock);
    *ep_p = ep;
    return MADRAIL_OK;
}

static void mdr_loop_ep_destroy(mdr_ep_t *ep)
{
    if (ep == NULL)
        return;
    pthread_mutex_lock(&mdr_loop_lock);
    mdr_loop_ep_free(ep);
    pthread_mutex_unlock(&mdr_loop_lock);
}

static size_t mdr_loop_ep_backlog(mdr_ep_t *ep)
{
    size_t n;

    pthread_mutex_lock(&mdr_loop_lock);
    n = ep->backlog;
    pthread_mutex_unlock(&mdr_loop_lock);
    return n;
}

/* Nothing accepted stays in this process: ctrl_send and put hand the item
 * to the fabric (the in-flight queue the receiver drains), which stands
 * for the network; ep_backlog counts what is in that network, so that the
 * core sees a busy rail as a real network would show one.  So a failure
 * drops only bytes that had already left (mdr_loop_drop_flight: lost in
 * the network, as a real link loses them), and ep_unsent, 0 from the
 * start, has nothing to keep counting (rail.h: what a failed ep dropped
 * unsent stays counted); conformance failed-ep-keeps-unsent skips loop. */
static size_t mdr_loop_ep_unsent(mdr_ep_t *ep)
{
    (void)ep;
    return 0;
}

static int mdr_loop_ep_idle(mdr_ep_t *ep)
{
    int idle;

    pthread_mutex_lock(&mdr_loop_lock);
    idle = mdr_list_empty(&ep->flight) && mdr_list_empty(&ep->done) &&
           mdr_list_empty(&ep->errq);
    pthread_mutex_unlock(&mdr_loop_lock);
    return idle;
}

/* The fabric stands for the network and the receiver's progress for its
 * acknowledgements: the oldest item in flight that could have been
 * delivered (its ticks and bandwidth time passed) and was not says for how
 * long the other end has taken nothing.  Items still "on the wire" under a
 * bandwidth cap count as moving.  (Unlike a kernel, a receiver that stops
 * calling progress looks like a black hole here.) */
static int mdr_loop_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    uint64_t now = mdr_time_ns(), since, paused_since;
    mdr_loop_item_t *item;

    *quiet_ns_p = 0;
    pthread_mutex_lock(&mdr_loop_lock);
    if (!mdr_list_empty(&ep->flight)) {
        item = mdr_container_of(ep->flight.next, mdr_loop_item_t, link);
        since = item->sent_ns > item->ready_ns ? item->sent_ns : item->ready_ns;
        paused_since = item->paused_at;
        if (ep->delivered_ns > since) {
            since = ep->delivered_ns;
            paused_since = ep->delivered_paused;
        }
        if (now > since)
            *quiet_ns_p = now - since;
        /* the process's own pauses since then are not the link's silence */
        paused_since = mdr_loop_paused_ns - paused_since;
        *quiet_ns_p = *quiet_ns_p > paused_since ? *quiet_ns_p - paused_since : 0;
    }
    pthread_mutex_unlock(&mdr_loop_lock);
    return 0;
}

static madrail_status_t mdr_loop_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt)
{
    mdr_loop_item_t *item;
    madrail_status_t st;
    mdr_rail_t *dst = NULL;
    size_t total = 0, off = 0;
    int i;

    if (iovcnt < 0 || (iovcnt > 0 && iov == NULL))
        return MADRAIL_ERR_INVALID;
    st = mdr_drv_ctrl_len(iov, iovcnt, ep->rail->slot_size, ep->rail->name, &total);
    if (st != MADRAIL_OK)
        return st;

    pthread_mutex_lock(&mdr_loop_lock);
    st = mdr_loop_admit(ep, &dst);
    if (st != MADRAIL_OK)
        goto out;
    item = malloc(sizeof(*item) + total);
    if (item == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto out;
    }
    memset(item, 0, sizeof(*item));
    item->kind = MDR_LOOP_CTRL;
    item->len = total;
    for (i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len != 0)
            memcpy(item->data + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    mdr_loop_enqueue(ep, dst, item);
out:
    pthread_mutex_unlock(&mdr_loop_lock);
    return st;
}

static madrail_status_t mdr_loop_mem_reg(mdr_rail_t *rail, void *addr, size_t len,
                                         unsigned access, mdr_memh_t **memh_p)
{
    madrail_status_t st;
    void *memh;

    if (rail == NULL)
        return MADRAIL_ERR_INVALID;
    pthread_mutex_lock(&mdr_loop_lock);
    st = mdr_sw_reg_new(&rail->regions, rail->name, addr, len, access, sizeof(mdr_memh_t),
                        offsetof(mdr_memh_t, reg), &memh);
    pthread_mutex_unlock(&mdr_loop_lock);
    if (st != MADRAIL_OK)
        return st;
    ((mdr_memh_t *)memh)->rail = rail;
    *memh_p = memh;
    return MADRAIL_OK;
}

static void mdr_loop_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    if (memh == NULL || rail == NULL)
        return;
    pthread_mutex_lock(&mdr_loop_lock);
    if (!mdr_sw_reg_known(&rail->regions, &memh->reg, rail->name)) {
        pthread_mutex_unlock(&mdr_loop_lock);
        return;
    }
    (void)mdr_region_remove(&rail->regions, &memh->reg);
    pthread_mutex_unlock(&mdr_loop_lock);
    free(memh);
}

static madrail_status_t mdr_loop_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                           void *buf, size_t *len_p)
{
    mdr_loop_rkey_t k;

    if (memh == NULL || buf == NULL || len_p == NULL || memh->rail != rail)
        return MADRAIL_ERR_INVALID;
    pthread_mutex_lock(&mdr_loop_lock); /* the put checks read it under the lock */
    mdr_region_bind(&memh->reg, peer);
    pthread_mutex_unlock(&mdr_loop_lock);
    k.rail_id = rail->id;
    k.key = mdr_region_key(&memh->reg);
    memcpy(buf, &k, sizeof(k));
    *len_p = sizeof(k);
    return MADRAIL_OK;
}

static madrail_status_t mdr_loop_put(mdr_ep_t *ep, const void *local, size_t len,
                                     mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                     size_t rkey_len, mdr_completion_t *comp)
{
    mdr_loop_item_t *item;
    madrail_status_t st;
    mdr_rail_t *dst = NULL;

    if (rkey == NULL || rkey_len != sizeof(mdr_loop_rkey_t)) {
        mdr_error("rail %s: remote key of %zu bytes, expected %zu", ep->rail->name, rkey_len,
                  sizeof(mdr_loop_rkey_t));
        return MADRAIL_ERR_INVALID;
    }
    if ((local == NULL && len != 0) || comp == NULL || comp->cb == NULL)
        return MADRAIL_ERR_INVALID;
    if (lmemh != NULL &&
        (lmemh->rail != ep->rail ||
         !mdr_region_covers(lmemh->reg.base, lmemh->reg.len, (uintptr_t)local, len))) {
        mdr_error("rail %s: put source of %zu bytes is not covered by its registration",
                  ep->rail->name, len);
        return MADRAIL_ERR_INVALID;
    }

    pthread_mutex_lock(&mdr_loop_lock);
    st = mdr_loop_admit(ep, &dst);
    if (st != MADRAIL_OK)
        goto out;
    item = calloc(1, sizeof(*item));
    if (item == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto out;
    }
    item->kind = MDR_LOOP_PUT;
    item->len = len;
    item->src = local;
    item->raddr = raddr;
    memcpy(&item->rkey, rkey, sizeof(item->rkey));
    item->comp = comp;
    mdr_loop_enqueue(ep, dst, item);
    st = MADRAIL_INPROGRESS;
out:
    pthread_mutex_unlock(&mdr_loop_lock);
    return st;
}

int mdr_loop_set_bandwidth(const char *fabric, size_t bandwidth)
{
    uint64_t id;
    int n = 0;

    pthread_mutex_lock(&mdr_loop_lock);
    for (id = 1; id < mdr_loop_next_id; id++) {
        mdr_rail_t *rail = mdr_loop_lookup(id);
        if (rail != NULL && strcmp(rail->fabric, fabric) == 0) {
            rail->cfg.bandwidth = bandwidth;
            n++;
        }
    }
    pthread_mutex_unlock(&mdr_loop_lock);
    return n;
}

static int mdr_loop_progress(mdr_rail_t *rail)
{
    const mdr_rail_upcalls_t *up = rail->upcalls;
    mdr_loop_event_t ev;
    uint64_t now = 0;
    void *cookie;
    int n = 0;

    pthread_mutex_lock(&mdr_loop_lock);
    {
        uint64_t t = mdr_time_ns();
        if (mdr_loop_seen_ns && t > mdr_loop_seen_ns + MDR_LOOP_PAUSE_NS)
            mdr_loop_paused_ns += t - mdr_loop_seen_ns;
        mdr_loop_seen_ns = t;
    }
    rail->ticks++;
    while (mdr_loop_next_event(rail, &ev, &now)) {
        n++;
        if (ev.kind == MDR_LOOP_EV_NOP)
            continue;
        pthread_mutex_unlock(&mdr_loop_lock);
        switch (ev.kind) {
        case MDR_LOOP_EV_CTRL:
            up->ctrl_recv(ev.cookie, ev.item->data, ev.item->len);
            free(ev.item);
            break;
        case MDR_LOOP_EV_COMP:
            ev.item->comp->cb(ev.item->comp, ev.status);
            free(ev.item);
            break;
        case MDR_LOOP_EV_FAILED:
            up->ep_failed(ev.cookie, ev.status, ev.reason);
            break;
        case MDR_LOOP_EV_ACCEPT:
            cookie = up->ep_accepted(rail->cookie, ev.uuid, ev.new_ep);
            pthread_mutex_lock(&mdr_loop_lock);
            mdr_loop_accept_done(ev.new_ep, cookie);
            pthread_mutex_unlock(&mdr_loop_lock);
            break;
        default:
            break;
        }
        pthread_mutex_lock(&mdr_loop_lock);
    }
    pthread_mutex_unlock(&mdr_loop_lock);
    return n;
}

const mdr_rail_ops_t mdr_loop_ops = {
    .size = MDR_RAIL_OPS_SIZE,
    .caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_REMOTE | MDR_RAIL_CAP_REG_CHEAP,
    .name = "loop",
    .open = mdr_loop_open,
    .close = mdr_loop_close,
    .query = mdr_loop_query,
    .addr_pack = mdr_loop_addr_pack,
    .ep_create = mdr_loop_ep_create,
    .ep_destroy = mdr_loop_ep_destroy,
    .ep_backlog = mdr_loop_ep_backlog,
    .ep_unsent = mdr_loop_ep_unsent,
    .ep_idle = mdr_loop_ep_idle,
    .ep_link_quiet = mdr_loop_ep_link_quiet,
    .ep_fence = mdr_rail_noop_fence,
    .ep_link_rto = mdr_rail_unknown_link_rto,
    .ctrl_send = mdr_loop_ctrl_send,
    .mem_reg = mdr_loop_mem_reg,
    .mem_dereg = mdr_loop_mem_dereg,
    .rkey_pack = mdr_loop_rkey_pack,
    .put = mdr_loop_put,
    .progress = mdr_loop_progress,
    .flush = mdr_rail_noop_flush,
};
