/*
 * madrail ch4 netmod: MPI_T performance variables, one set per rail.
 *
 * Why it is built this way:
 *  - Tools (mpit_vars, TAU, Caliper) list pvars by name and description and
 *    mostly read scalars, so every rail gets its own scalar pvars,
 *    "madrail_rail<N>_<what>", whose descriptions name the rail ("rail 1
 *    (tcp:eth1)"), instead of one array per counter that a tool would have
 *    to know how to index.  The number of rails is only known once the
 *    libmadrail context is open (init_local), so the names are made at run
 *    time and registered with MPIR_T_PVAR_REGISTER_impl, the function
 *    behind MPICH's MPIR_T_PVAR_*_REGISTER_* macros (which take the name as
 *    an identifier).  MPICH keeps a pointer to the name in its hash table,
 *    so names live in static storage for the life of the process.
 *  - Nothing is counted here: every value is read from libmadrail when a
 *    tool reads it (madrail_rail_stats, madrail_rail_state,
 *    madrail_peer_rail_health), through get_value callbacks, so the send
 *    and receive paths carry no MPI_T code and the pvars exist in every
 *    build (MPICH's own MULTINIC counters need --enable-mpit-pvars).
 *    MPICH treats counters as sums: a handle reads what was counted since
 *    it was allocated (or reset), as the MPI standard describes.
 *  - The libmadrail context closes in MPI_Finalize, but MPI_T may be read
 *    after it: the finalize hook takes a last snapshot of every value, and
 *    reads after that return the snapshot.
 *  - Stripe weights and measured throughput are per peer in libmadrail
 *    (adaptation measures each peer's path); the per-rail pvar is their
 *    mean over the peers that have one, and the description says so.
 *  - Reads of the live context take the global critical section (the
 *    netmod requires --enable-thread-cs=global): progress may add a peer
 *    (and grow the peer table) in another thread.
 */

#include "mpidimpl.h"
#include "madrail_impl.h"
#include "madrail_pvars.h"

/* MPI_T cannot show more; libmadrail opens at most 8 */
#define MPIDI_MADRAIL_PVAR_MAX_RAILS 16

typedef enum {
    PV_TX_MSGS,
    PV_TX_BYTES,
    PV_TX_PUT_BYTES,
    PV_TX_PUTS,
    PV_RX_MSGS,
    PV_RX_BYTES,
    PV_RX_PUT_BYTES,
    PV_CREDIT_STALLS,
    PV_DOWN_EVENTS,
    PV_UP_EVENTS,
    PV_STATE,
    PV_PEERS_DOWN,
    PV_WEIGHT,
    PV_SHARE,
    PV_THROUGHPUT,
    PV_NUM
} pvar_metric_t;

/* value kinds: counter (unsigned long long), level (unsigned), state
 * (int, with the rail-state enum), level (double) */
enum { K_COUNTER, K_LEVEL_U, K_STATE, K_LEVEL_D };

static const struct {
    const char *suffix;
    int kind;
    int verbosity;
    const char *desc;           /* printf format: rail index, rail name */
} metrics[PV_NUM] = {
    [PV_TX_MSGS] = {"tx_msgs", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                    "Messages sent on rail %d (%s): eager messages and protocol messages "
                    "(RTS, CTS, FIN, credits), not counting put payload"},
    [PV_TX_BYTES] = {"tx_bytes", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                     "Bytes sent on rail %d (%s): messages plus rendezvous payload put"},
    [PV_TX_PUT_BYTES] = {"tx_put_bytes", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                         "Rendezvous payload bytes this process put on rail %d (%s): its "
                         "share of large messages striped over the rails"},
    [PV_TX_PUTS] = {"tx_puts", K_COUNTER, MPI_T_VERBOSITY_USER_DETAIL,
                    "Put operations (stripe chunks) issued on rail %d (%s)"},
    [PV_RX_MSGS] = {"rx_msgs", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                    "Messages received on rail %d (%s), not counting put payload"},
    [PV_RX_BYTES] = {"rx_bytes", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                     "Bytes received on rail %d (%s): messages plus rendezvous payload "
                     "put into this process"},
    [PV_RX_PUT_BYTES] = {"rx_put_bytes", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                         "Rendezvous payload bytes put into this process on rail %d (%s)"},
    [PV_CREDIT_STALLS] = {"credit_stalls", K_COUNTER, MPI_T_VERBOSITY_USER_DETAIL,
                          "Sends on rail %d (%s) that waited because the peer had no "
                          "receive slot free (no credit); many: raise MADRAIL_CREDITS"},
    [PV_DOWN_EVENTS] = {"down_events", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                        "Times rail %d (%s) went down to a peer (connection failed or "
                        "refused); its traffic moved to the other rails"},
    [PV_UP_EVENTS] = {"up_events", K_COUNTER, MPI_T_VERBOSITY_USER_BASIC,
                      "Times rail %d (%s) came back up to a peer after going down (the "
                      "peer connected again)"},
    [PV_STATE] = {"state", K_STATE, MPI_T_VERBOSITY_USER_BASIC,
                  "State of rail %d (%s): 0 up, 1 partly down (down to some of the peers "
                  "it was used with), 2 down (down to all of them)"},
    [PV_PEERS_DOWN] = {"peers_down", K_LEVEL_U, MPI_T_VERBOSITY_USER_DETAIL,
                       "Peers rail %d (%s) is down to now"},
    [PV_WEIGHT] = {"weight", K_LEVEL_D, MPI_T_VERBOSITY_USER_DETAIL,
                   "Striping weight of rail %d (%s): in the last stripe plan to each peer, "
                   "mean over the peers with a plan (measured weights once rails adapt, "
                   "MADRAIL_ADAPT); before any plan, the rail's static weight"},
    [PV_SHARE] = {"stripe_share", K_LEVEL_D, MPI_T_VERBOSITY_USER_BASIC,
                  "Share (0..1) of large-message payload that the last stripe plan to a "
                  "peer gave rail %d (%s), mean over the peers with a plan; 0 before any"},
    [PV_THROUGHPUT] = {"throughput_mbs", K_LEVEL_D, MPI_T_VERBOSITY_USER_BASIC,
                       "Measured put throughput of rail %d (%s) in MB/s (10^6 B/s), smoothed, "
                       "mean over the peers with a measurement; 0 before any (rails "
                       "measure with MADRAIL_ADAPT)"},
};

/* what a pvar's get_value callback receives as addr */
typedef struct {
    int rail;
    pvar_metric_t metric;
    char name[48];
    char desc[384];
} pvar_slot_t;

typedef union {
    unsigned long long ull;
    unsigned u;
    int i;
    double d;
} pvar_value_t;

static pvar_slot_t slots[MPIDI_MADRAIL_PVAR_MAX_RAILS][PV_NUM];
static pvar_value_t snapshot[MPIDI_MADRAIL_PVAR_MAX_RAILS][PV_NUM];
static int nrails_registered;
static int frozen;              /* the context is closed: read the snapshot */
static unsigned rails_level;    /* madrail_rails */
static MPI_T_enum state_enum = MPI_T_ENUM_NULL;

/* Per-peer adaptation values of one rail, mean over the peers that have
 * them.  Peers are dense from 0; the first index madrail does not know
 * ends the walk. */
static void rail_health_means(madrail_context_t ctx, int rail, double *weight_p,
                              double *share_p, double *mbs_p)
{
    double w = 0, s = 0, mbs = 0;
    int nplan = 0, nmeas = 0;
    madrail_rail_health_t h;

    for (madrail_peer_t p = 0;
         madrail_peer_rail_health(ctx, p, rail, &h) == MADRAIL_OK; p++) {
        if (h.plans > 0) {
            w += h.weight;
            s += h.share;
            nplan++;
        }
        if (h.samples > 0 && h.measured_mbs > 0) {
            mbs += h.measured_mbs;
            nmeas++;
        }
    }
    if (nplan > 0) {
        *weight_p = w / nplan;
        *share_p = s / nplan;
    } else {
        madrail_rail_info_t info;
        *weight_p = madrail_rail_info(ctx, rail, &info) == MADRAIL_OK ? info.weight : 0;
        *share_p = 0;
    }
    *mbs_p = nmeas > 0 ? mbs / nmeas : 0;
}

/* Every value of one rail from the live context. */
static void read_rail(madrail_context_t ctx, int rail, pvar_value_t v[PV_NUM])
{
    madrail_rail_stats_t st;
    madrail_rail_state_t rs;
    double w, share, mbs;

    memset(v, 0, sizeof(pvar_value_t) * PV_NUM);
    if (madrail_rail_stats(ctx, rail, &st) == MADRAIL_OK) {
        v[PV_TX_MSGS].ull = st.tx_msgs;
        v[PV_TX_BYTES].ull = st.tx_bytes;
        v[PV_TX_PUT_BYTES].ull = st.tx_put_bytes;
        v[PV_TX_PUTS].ull = st.tx_puts;
        v[PV_RX_MSGS].ull = st.rx_msgs;
        v[PV_RX_BYTES].ull = st.rx_bytes;
        v[PV_RX_PUT_BYTES].ull = st.rx_put_bytes;
        v[PV_CREDIT_STALLS].ull = st.credit_stalls;
    }
    if (madrail_rail_state(ctx, rail, &rs) == MADRAIL_OK) {
        v[PV_DOWN_EVENTS].ull = rs.down_events;
        v[PV_UP_EVENTS].ull = rs.up_events;
        v[PV_PEERS_DOWN].u = rs.peers_down;
        v[PV_STATE].i = rs.peers_down == 0 ? MPIDI_MADRAIL_RAIL_UP :
            rs.peers_down < rs.peers ? MPIDI_MADRAIL_RAIL_PARTLY_DOWN : MPIDI_MADRAIL_RAIL_DOWN;
    }
    rail_health_means(ctx, rail, &w, &share, &mbs);
    v[PV_WEIGHT].d = w;
    v[PV_SHARE].d = share;
    v[PV_THROUGHPUT].d = mbs;
}

static void get_value(void *addr, void *obj_handle, int count, void *buf)
{
    const pvar_slot_t *slot = addr;
    pvar_value_t v[PV_NUM];

    (void) obj_handle;
    (void) count;
    if (frozen || MPIDI_MADRAIL_global.ctx == NULL) {
        v[slot->metric] = snapshot[slot->rail][slot->metric];
    } else {
        MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
        read_rail(MPIDI_MADRAIL_global.ctx, slot->rail, v);
        MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    }
    switch (metrics[slot->metric].kind) {
        case K_COUNTER:
            *(unsigned long long *) buf = v[slot->metric].ull;
            break;
        case K_LEVEL_U:
            *(unsigned *) buf = v[slot->metric].u;
            break;
        case K_STATE:
            *(int *) buf = v[slot->metric].i;
            break;
        default:
            *(double *) buf = v[slot->metric].d;
            break;
    }
}

void MPIDI_MADRAIL_pvars_init(void)
{
    madrail_context_t ctx = MPIDI_MADRAIL_global.ctx;
    int n = madrail_rail_count(ctx);
    static const char cat[] = "CH4_MADRAIL";

    if (n > MPIDI_MADRAIL_PVAR_MAX_RAILS)
        n = MPIDI_MADRAIL_PVAR_MAX_RAILS;
    nrails_registered = n;
    frozen = 0;

    if (state_enum == MPI_T_ENUM_NULL) {
        MPIR_T_enum_create("madrail_rail_state", &state_enum);
        MPIR_T_enum_add_item(state_enum, "up", MPIDI_MADRAIL_RAIL_UP);
        MPIR_T_enum_add_item(state_enum, "partly down", MPIDI_MADRAIL_RAIL_PARTLY_DOWN);
        MPIR_T_enum_add_item(state_enum, "down", MPIDI_MADRAIL_RAIL_DOWN);
    }
    rails_level = (unsigned) n;
    MPIR_T_PVAR_REGISTER_impl(MPI_T_PVAR_CLASS_LEVEL, MPI_UNSIGNED, "madrail_rails",
                              &rails_level, 1, MPI_T_ENUM_NULL, MPI_T_VERBOSITY_USER_BASIC,
                              MPI_T_BIND_NO_OBJECT,
                              MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS, NULL,
                              NULL, cat,
                              "Rails the madrail netmod opened (MADRAIL_RAILS); rail N has "
                              "the pvars madrail_railN_*");

    for (int r = 0; r < n; r++) {
        madrail_rail_info_t info;
        if (madrail_rail_info(ctx, r, &info) != MADRAIL_OK)
            snprintf(info.name, sizeof(info.name), "?");
        for (int m = 0; m < PV_NUM; m++) {
            pvar_slot_t *s = &slots[r][m];
            int varclass;
            MPI_Datatype dtype;
            MPIR_T_enum_t *etype = MPI_T_ENUM_NULL;

            s->rail = r;
            s->metric = (pvar_metric_t) m;
            snprintf(s->name, sizeof(s->name), "madrail_rail%d_%s", r, metrics[m].suffix);
            snprintf(s->desc, sizeof(s->desc), metrics[m].desc, r, info.name);
            switch (metrics[m].kind) {
                case K_COUNTER:
                    varclass = MPI_T_PVAR_CLASS_COUNTER;
                    dtype = MPI_UNSIGNED_LONG_LONG;
                    break;
                case K_LEVEL_U:
                    varclass = MPI_T_PVAR_CLASS_LEVEL;
                    dtype = MPI_UNSIGNED;
                    break;
                case K_STATE:
                    varclass = MPI_T_PVAR_CLASS_STATE;
                    dtype = MPI_INT;
                    etype = state_enum;
                    break;
                default:
                    varclass = MPI_T_PVAR_CLASS_LEVEL;
                    dtype = MPI_DOUBLE;
                    break;
            }
            MPIR_T_PVAR_REGISTER_impl(varclass, dtype, s->name, s, 1, etype,
                                      metrics[m].verbosity, MPI_T_BIND_NO_OBJECT,
                                      MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,
                                      get_value, NULL, cat, s->desc);
        }
    }
}

void MPIDI_MADRAIL_pvars_freeze(void)
{
    madrail_context_t ctx = MPIDI_MADRAIL_global.ctx;

    if (ctx == NULL || frozen)
        return;
    for (int r = 0; r < nrails_registered; r++)
        read_rail(ctx, r, snapshot[r]);
    frozen = 1;
}
