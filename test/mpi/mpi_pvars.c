/*
 * mpi_pvars: the netmod's MPI_T performance variables, per rail, read by
 * an MPI program and checked against what it sent.
 *
 * Rank 0 sends NSMALL eager messages of SMALL bytes and NLARGE messages of
 * LARGE bytes (rendezvous, striped over the rails) to rank 1.  Both ranks
 * read every rail's counters through MPI_T_pvar_read right before and
 * right after (nothing else is sent in between), and check the
 * differences: the put bytes summed over the rails are exactly the large
 * payload on both sides, every rail carried part of it, the bytes and
 * messages each way cover the payload with bounded overhead, the rails are
 * up, the sender's stripe shares add up to 1 and its rails measured a
 * throughput (the runner sets MADRAIL_TCP_PUT_ACK=1: tcp puts give
 * throughput samples only when acknowledged; and MADRAIL_ADAPT_SAMPLE=100us:
 * on an idle machine 24 MiB over loopback keep each rail busy for less
 * than three default 5 ms samples, and a rail with none has no
 * throughput).  The pvars' names, classes, types and descriptions are
 * checked as a tool lists them (MPI_T_pvar_get_info), and after
 * MPI_Finalize a pvar still reads its last value (MPI_T was initialized
 * before MPI_Init, so it outlives MPI).
 *
 * On an MPICH without the madrail netmod (Debian's) the program skips
 * (exit 77); on ch4:madrail without the pvars it fails.
 */
#include "mpit_common.c"

#define NSMALL 200
#define SMALL ((size_t)1000)
#define NLARGE 6
#define LARGE ((size_t)4 * 1024 * 1024)
/* a message's headers (libmadrail's, the netmod's, MPIDIG's) are well under
 * 256 bytes; the rendezvous adds a few protocol messages per large message */
#define OVERHEAD_MAX ((unsigned long long)(NSMALL + 40 * NLARGE) * 256)
#define MAX_RAILS 16
#define TAG_SMALL 71
#define TAG_LARGE 72
#define TAG_GO 73

enum { C_TX_MSGS, C_TX_BYTES, C_TX_PUT_BYTES, C_RX_MSGS, C_RX_BYTES, C_RX_PUT_BYTES,
       C_CREDIT_STALLS, C_DOWN_EVENTS, C_UP_EVENTS, NCOUNTERS };
static const char *const counter_names[NCOUNTERS] = {
    "tx_msgs", "tx_bytes", "tx_put_bytes", "rx_msgs", "rx_bytes", "rx_put_bytes",
    "credit_stalls", "down_events", "up_events"};
enum { L_STATE, L_PEERS_DOWN, L_WEIGHT, L_SHARE, L_THROUGHPUT, NLEVELS };
static const char *const level_names[NLEVELS] = {"state", "peers_down", "weight",
                                                 "stripe_share", "throughput_mbs"};
static const int level_class[NLEVELS] = {MPI_T_PVAR_CLASS_STATE, MPI_T_PVAR_CLASS_LEVEL,
                                         MPI_T_PVAR_CLASS_LEVEL, MPI_T_PVAR_CLASS_LEVEL,
                                         MPI_T_PVAR_CLASS_LEVEL};

typedef struct {
    int index;
    MPI_T_pvar_handle h;
} pv_t;

static int nrails;
static pv_t counters[MAX_RAILS][NCOUNTERS];
static pv_t levels[MAX_RAILS][NLEVELS];
static MPI_T_pvar_session session;

/* Index of the pvar called name, with its properties; -1 if none. */
static int find_pvar(const char *name, int *class_p, MPI_Datatype *dt_p, MPI_T_enum *en_p,
                     int *bind_p, char *desc, int desc_cap)
{
    int num = 0;
    MPIT_CALL(MPI_T_pvar_get_num(&num));
    for (int i = 0; i < num; i++) {
        char n[128];
        int nlen = sizeof(n), dlen = desc_cap, verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, n, &nlen, &verb, &cls, &dt, &en, desc, &dlen, &bind, &ro,
                                &cont, &atomic) != MPI_SUCCESS)
            continue;
        if (strcmp(n, name) == 0) {
            *class_p = cls;
            *dt_p = dt;
            *en_p = en;
            *bind_p = bind;
            return i;
        }
    }
    return -1;
}

static int is_madrail_library(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPIT_CALL(MPI_Get_library_version(v, &len));
    return strstr(v, "madrail") != NULL;
}

static unsigned long long read_counter(int r, int c)
{
    unsigned long long v = 0;
    MPIT_CALL(MPI_T_pvar_read(session, counters[r][c].h, &v));
    return v;
}

/* all counters of all rails */
static void read_all(unsigned long long v[MAX_RAILS][NCOUNTERS])
{
    for (int r = 0; r < nrails; r++)
        for (int c = 0; c < NCOUNTERS; c++)
            v[r][c] = read_counter(r, c);
}

static double read_level_d(int r, int l)
{
    double d = -1;
    MPIT_CALL(MPI_T_pvar_read(session, levels[r][l].h, &d));
    return d;
}

/* Looks up and checks the description of every pvar; allocates handles.
 * Returns the number of failed checks. */
static long setup_pvars(void)
{
    long bad = 0;
    char desc[1024];
    int cls, bind, count;
    MPI_Datatype dt;
    MPI_T_enum en;
    unsigned nr = 0;
    int idx;

    idx = find_pvar("madrail_rails", &cls, &dt, &en, &bind, desc, sizeof(desc));
    if (idx < 0)
        return -1;
    MPIT_CALL(MPI_T_pvar_session_create(&session));
    {
        MPI_T_pvar_handle h;
        MPIT_CALL(MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count));
        MPIT_CALL(MPI_T_pvar_read(session, h, &nr));
        MPIT_CALL(MPI_T_pvar_handle_free(session, &h));
    }
    bad += !mpit_check(cls == MPI_T_PVAR_CLASS_LEVEL && dt == MPI_UNSIGNED && nr >= 1 &&
                       nr <= MAX_RAILS,
                       "madrail_rails: %u rail(s), a level of type MPI_UNSIGNED", nr);
    nrails = (int)nr;
    {
        /* the runner's MADRAIL_RAILS names the rails: as many as its commas + 1 */
        const char *spec = getenv("MADRAIL_RAILS");
        if (spec && !strstr(spec, "auto")) {
            int want = 1;
            for (const char *p = spec; *p; p++)
                want += *p == ',';
            bad += !mpit_check(nrails == want, "madrail_rails %d = the %d rails of "
                               "MADRAIL_RAILS=%s", nrails, want, spec);
        }
    }
    for (int r = 0; r < nrails; r++) {
        char name[96], want_in_desc[32];
        snprintf(want_in_desc, sizeof(want_in_desc), "rail %d (", r);
        for (int c = 0; c < NCOUNTERS; c++) {
            snprintf(name, sizeof(name), "madrail_rail%d_%s", r, counter_names[c]);
            idx = find_pvar(name, &cls, &dt, &en, &bind, desc, sizeof(desc));
            if (!mpit_expect(idx >= 0, "no pvar %s", name)) {
                bad++;
                continue;
            }
            bad += !mpit_expect(cls == MPI_T_PVAR_CLASS_COUNTER && dt == MPI_UNSIGNED_LONG_LONG
                                && bind == MPI_T_BIND_NO_OBJECT,
                                "%s: class %d type %s bind %d, want a counter of unsigned long "
                                "long bound to no object", name, cls,
                                dt == MPI_UNSIGNED_LONG_LONG ? "ull" : "other", bind);
            bad += !mpit_expect(strstr(desc, want_in_desc) != NULL,
                                "%s: description does not name '%s...)': '%s'", name,
                                want_in_desc, desc);
            counters[r][c].index = idx;
            MPIT_CALL(MPI_T_pvar_handle_alloc(session, idx, NULL, &counters[r][c].h, &count));
            bad += !mpit_expect(count == 1, "%s: count %d, want 1", name, count);
        }
        for (int l = 0; l < NLEVELS; l++) {
            snprintf(name, sizeof(name), "madrail_rail%d_%s", r, level_names[l]);
            idx = find_pvar(name, &cls, &dt, &en, &bind, desc, sizeof(desc));
            if (!mpit_expect(idx >= 0, "no pvar %s", name)) {
                bad++;
                continue;
            }
            bad += !mpit_expect(cls == level_class[l] &&
                                dt == (l == L_STATE ? MPI_INT : l == L_PEERS_DOWN ? MPI_UNSIGNED
                                       : MPI_DOUBLE),
                                "%s: class %d, or not the expected type", name, cls);
            bad += !mpit_expect(strstr(desc, want_in_desc) != NULL,
                                "%s: description does not name '%s...)': '%s'", name,
                                want_in_desc, desc);
            if (l == L_STATE) {
                char ename[64], item[64];
                int elen = sizeof(ename), nitems = 0, val = -1, ilen = sizeof(item);
                bad += !mpit_expect(en != MPI_T_ENUM_NULL, "%s: no enum", name);
                if (en != MPI_T_ENUM_NULL) {
                    MPIT_CALL(MPI_T_enum_get_info(en, &nitems, ename, &elen));
                    MPIT_CALL(MPI_T_enum_get_item(en, 0, &val, item, &ilen));
                    bad += !mpit_expect(nitems == 3 && strcmp(ename, "madrail_rail_state") == 0
                                        && val == 0 && strcmp(item, "up") == 0,
                                        "%s: enum '%s' with %d items, item 0 = %d '%s'", name,
                                        ename, nitems, val, item);
                }
            }
            levels[r][l].index = idx;
            MPIT_CALL(MPI_T_pvar_handle_alloc(session, idx, NULL, &levels[r][l].h, &count));
        }
    }
    mpit_check(bad == 0, "%d rail(s): %d counters and %d levels each, with classes, types and "
               "descriptions naming the rail", nrails, NCOUNTERS, NLEVELS);
    return bad;
}

int main(int argc, char **argv)
{
    static unsigned long long before[MAX_RAILS][NCOUNTERS], after[MAX_RAILS][NCOUNTERS];
    unsigned long long d[NCOUNTERS] = {0}, last_rx_put = 0;
    char *small, *large;
    long bad = 0, setup_bad;
    int provided;

    /* before MPI_Init: MPI_T outlives MPI_Finalize (checked at the end) */
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mpit_init(&argc, &argv, "mpi_pvars");
    mpit_need_ranks(2);

    mpit_phase("looking up the pvars");
    setup_bad = setup_pvars();
    if (setup_bad < 0) {
        long madrail = is_madrail_library(), all = 0;
        MPIT_CALL(MPI_Allreduce(&madrail, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        if (!all)
            mpit_skip("no madrail_rails pvar and this MPI is not ch4:madrail");
        mpit_check(0, "no pvar madrail_rails: this ch4:madrail MPICH exports no pvars");
        return mpit_finish();
    }
    bad += setup_bad;

    small = mpit_malloc(SMALL * NSMALL);
    large = mpit_malloc(LARGE);
    mpit_fill(small, SMALL * NSMALL, 5);
    mpit_fill(large, LARGE, 6);

    /* connect both rails and settle: nothing of this is in the window */
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));

    /* Each rank reads its "before" values, then rank 1 says go: no data
     * can reach rank 1 before it has read (counted in progress, a message
     * could arrive while rank 1 is still finishing the barrier). */
    mpit_phase("traffic");
    read_all(before);
    if (mpit_rank == 0) {
        MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < NSMALL; i++)
            MPIT_CALL(MPI_Send(small + (size_t)i * SMALL, (int)SMALL, MPI_BYTE, 1, TAG_SMALL,
                               MPI_COMM_WORLD));
        for (int i = 0; i < NLARGE; i++)
            MPIT_CALL(MPI_Send(large, (int)LARGE, MPI_BYTE, 1, TAG_LARGE, MPI_COMM_WORLD));
    } else if (mpit_rank == 1) {
        char *rs = mpit_malloc(SMALL * NSMALL), *rl = mpit_malloc(LARGE);
        size_t nbad = 0, first;
        MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD));
        for (int i = 0; i < NSMALL; i++)
            MPIT_CALL(MPI_Recv(rs + (size_t)i * SMALL, (int)SMALL, MPI_BYTE, 0, TAG_SMALL,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < NLARGE; i++) {
            memset(rl, 0, LARGE);
            MPIT_CALL(MPI_Recv(rl, (int)LARGE, MPI_BYTE, 0, TAG_LARGE, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            nbad += mpit_verify(rl, LARGE, 6, &first);
        }
        nbad += mpit_verify(rs, SMALL * NSMALL, 5, &first);
        bad += !mpit_check(nbad == 0, "received data intact (%zu bad bytes)", nbad);
        free(rs);
        free(rl);
    }
    read_all(after);

    mpit_phase("checking the counters");
    if (mpit_rank <= 1) {
        const unsigned long long payload = NSMALL * SMALL + NLARGE * LARGE;
        const unsigned long long put_payload = NLARGE * LARGE;
        int sender = mpit_rank == 0;
        int tx = sender ? C_TX_BYTES : C_RX_BYTES;
        int tx_put = sender ? C_TX_PUT_BYTES : C_RX_PUT_BYTES;
        int tx_msgs = sender ? C_TX_MSGS : C_RX_MSGS;
        const char *dir = sender ? "sent" : "received";
        int rails_with_put = 0;

        for (int r = 0; r < nrails; r++) {
            unsigned long long p;
            for (int c = 0; c < NCOUNTERS; c++)
                d[c] += after[r][c] - before[r][c];
            p = after[r][tx_put] - before[r][tx_put];
            rails_with_put += p > 0;
            printf("# [r%d] rail %d: %s %llu bytes in %llu messages, %llu put bytes, "
                   "credit stalls %llu\n", mpit_rank, r, dir, after[r][tx] - before[r][tx],
                   after[r][tx_msgs] - before[r][tx_msgs], p,
                   after[r][C_CREDIT_STALLS] - before[r][C_CREDIT_STALLS]);
        }
        bad += !mpit_check(d[tx_put] == put_payload,
                           "put bytes %s over all rails: %llu, the large payload is %llu",
                           dir, d[tx_put], put_payload);
        bad += !mpit_check(rails_with_put == nrails,
                           "every rail carried part of the large messages (%d of %d)",
                           rails_with_put, nrails);
        bad += !mpit_check(d[tx] >= payload && d[tx] <= payload + OVERHEAD_MAX,
                           "bytes %s over all rails: %llu, payload %llu (+ at most %llu of "
                           "headers)", dir, d[tx], payload, OVERHEAD_MAX);
        bad += !mpit_check(d[tx_msgs] >= NSMALL && d[tx_msgs] <= NSMALL + 40 * NLARGE,
                           "messages %s: %llu, for %d small and %d large messages", dir,
                           d[tx_msgs], NSMALL, NLARGE);
        /* the other way: protocol messages only (CTS, credits, no payload) */
        {
            int ox = sender ? C_RX_BYTES : C_TX_BYTES;
            int oput = sender ? C_RX_PUT_BYTES : C_TX_PUT_BYTES;
            bad += !mpit_check(d[oput] == 0 && d[ox] <= OVERHEAD_MAX,
                               "the other way: %llu bytes, %llu of them put (protocol "
                               "messages only)", d[ox], d[oput]);
        }
        bad += !mpit_check(d[C_DOWN_EVENTS] == 0 && d[C_UP_EVENTS] == 0,
                           "no rail went down or up (%llu down, %llu up events)",
                           d[C_DOWN_EVENTS], d[C_UP_EVENTS]);
        {
            double share_sum = 0;
            int nstate_bad = 0, nthr = 0, nweight = 0;
            for (int r = 0; r < nrails; r++) {
                int state = -1;
                unsigned pd = 99;
                double share = read_level_d(r, L_SHARE), thr = read_level_d(r, L_THROUGHPUT);
                double w = read_level_d(r, L_WEIGHT);
                MPIT_CALL(MPI_T_pvar_read(session, levels[r][L_STATE].h, &state));
                MPIT_CALL(MPI_T_pvar_read(session, levels[r][L_PEERS_DOWN].h, &pd));
                printf("# [r%d] rail %d: state %d, peers down %u, weight %.3f, stripe share "
                       "%.3f, throughput %.1f MB/s\n", mpit_rank, r, state, pd, w, share, thr);
                nstate_bad += state != 0 || pd != 0;
                share_sum += share;
                nthr += thr > 0;
                nweight += w > 0;
            }
            bad += !mpit_check(nstate_bad == 0, "every rail is up (state 0, no peer down)");
            bad += !mpit_check(nweight == nrails, "every rail has a positive weight");
            if (sender) {
                bad += !mpit_check(share_sum > 0.99 && share_sum < 1.01,
                                   "the sender's stripe shares add up to 1 (%.3f)", share_sum);
                /* tcp puts complete at the socket write: only with put
                 * acknowledgements do they give throughput samples */
                const char *ack = getenv("MADRAIL_TCP_PUT_ACK");
                if (ack && strcmp(ack, "1") == 0)
                    bad += !mpit_check(nthr == nrails,
                                       "the sender measured a throughput on every rail (%d of "
                                       "%d)", nthr, nrails);
                else
                    printf("# [r0] throughput not checked: run with MADRAIL_TCP_PUT_ACK=1 for "
                           "tcp rails to measure it (%d of %d rails have one)\n", nthr, nrails);
            } else {
                bad += !mpit_check(share_sum == 0 && nthr == 0,
                                   "the receiver, which put nothing, has no stripe share "
                                   "(%.3f) and no throughput (%d rails)", share_sum, nthr);
            }
        }
        if (!sender)
            last_rx_put = read_counter(0, C_RX_PUT_BYTES);
    }
    (void)bad;
    free(small);
    free(large);

    {
        int rc = mpit_finish();
        /* MPI is finalized; the netmod's context is closed: the pvars give
         * the values it had last */
        if (mpit_rank == 1) {
            unsigned long long v = 0;
            int ok = MPI_T_pvar_read(session, counters[0][C_RX_PUT_BYTES].h, &v) == MPI_SUCCESS
                && v >= last_rx_put && last_rx_put > 0;
            printf("%s - [r1] after MPI_Finalize, madrail_rail0_rx_put_bytes reads %llu (%llu "
                   "before)\n", ok ? "ok" : "FAIL", v, last_rx_put);
            if (!ok)
                rc = 1;
        }
        MPI_T_pvar_session_free(&session);
        MPI_T_finalize();
        return rc;
    }
}
