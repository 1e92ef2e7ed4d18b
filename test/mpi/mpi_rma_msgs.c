/*
 * mpi_rma_msgs: what a large MPI_Put and a large MPI_Get cost in madrail
 * control messages (issue 13 item 3), counted through the netmod's MPI_T
 * pvars (madrail_rail<N>_tx_msgs).
 *
 * A large MPIDIG active message (here the PUT of 1 MiB, and the GET's
 * reply of 1 MiB) goes as one madrail_am_isend: its RTS carries the
 * header, the target answers CTS, the data are put and a FIN follows on
 * each rail used.  Before, a separate active message announced the
 * payload: 3 messages or more from the data's sender per transfer.  Rank 0
 * puts NOPS times then gets NOPS times from rank 1, each followed by
 * MPI_Win_flush (one transfer at a time, the case that shows every extra
 * message); each phase is counted on both ranks between barriers, and
 * the data are checked.
 *
 * Limits per transfer: the data's sender at most 1 (RTS) + rails (FINs)
 * + the request/acknowledgement MPIDIG adds (the GET request, or the PUT's
 * acknowledgement from the target), counted on the side that sends it.
 * The explicit credit returns of the credit protocol would add at most one
 * message per 16 (default credits 32); they are allowed for.
 *
 * On an MPICH without the madrail netmod (Debian's) the program skips.
 */
#include "mpit_common.c"

#define LEN ((size_t)1 << 20)
#define NOPS 40
#define MAX_RAILS 16

static int nrails;
static MPI_T_pvar_session session;
static MPI_T_pvar_handle tx[MAX_RAILS];

static int find_pvar(const char *name)
{
    int num = 0;
    MPIT_CALL(MPI_T_pvar_get_num(&num));
    for (int i = 0; i < num; i++) {
        char n[128], desc[8];
        int nlen = sizeof(n), dlen = sizeof(desc), verb, cls, bind, ro, cont, atomic;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, n, &nlen, &verb, &cls, &dt, &en, desc, &dlen, &bind, &ro,
                                &cont, &atomic) == MPI_SUCCESS &&
            strcmp(n, name) == 0)
            return i;
    }
    return -1;
}

static unsigned long long tx_msgs(void)
{
    unsigned long long sum = 0;
    for (int r = 0; r < nrails; r++) {
        unsigned long long v = 0;
        MPIT_CALL(MPI_T_pvar_read(session, tx[r], &v));
        sum += v;
    }
    return sum;
}

static int setup(void)
{
    int idx = find_pvar("madrail_rails"), count;
    unsigned nr = 0;
    MPI_T_pvar_handle h;

    if (idx < 0)
        return -1;
    MPIT_CALL(MPI_T_pvar_session_create(&session));
    MPIT_CALL(MPI_T_pvar_handle_alloc(session, idx, NULL, &h, &count));
    MPIT_CALL(MPI_T_pvar_read(session, h, &nr));
    MPIT_CALL(MPI_T_pvar_handle_free(session, &h));
    nrails = (int)nr;
    if (nrails < 1 || nrails > MAX_RAILS)
        return -1;
    for (int r = 0; r < nrails; r++) {
        char name[64];
        snprintf(name, sizeof(name), "madrail_rail%d_tx_msgs", r);
        idx = find_pvar(name);
        if (idx < 0)
            return -1;
        MPIT_CALL(MPI_T_pvar_handle_alloc(session, idx, NULL, &tx[r], &count));
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *win_buf, *buf;
    MPI_Win win;
    unsigned long long t0, t1, t2, t3, d_put, d_get;
    unsigned long long all[2][2];
    long bad = 0;
    int provided, have, have_all;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mpit_init(&argc, &argv, "mpi_rma_msgs");
    mpit_need_ranks(2);
    have = setup() == 0;
    MPIT_CALL(MPI_Allreduce(&have, &have_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!have_all)
        mpit_skip("no madrail pvars: not ch4:madrail");

    MPIT_CALL(MPI_Win_allocate((MPI_Aint)LEN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win_buf, &win));
    buf = mpit_malloc(LEN);
    memset(win_buf, 0, LEN);
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));

    mpit_phase("%d puts of %zu bytes", NOPS, LEN);
    t0 = tx_msgs();
    if (mpit_rank == 0) {
        MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        for (int i = 0; i < NOPS; i++) {
            mpit_fill(buf, LEN, (uint64_t)i);
            MPIT_CALL(MPI_Put(buf, (int)LEN, MPI_BYTE, 1, 0, (int)LEN, MPI_BYTE, win));
            MPIT_CALL(MPI_Win_flush(1, win));
        }
        MPIT_CALL(MPI_Win_unlock(1, win));
    }
    /* read after a barrier: the target's messages of the phase are sent */
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
    t1 = tx_msgs();
    if (mpit_rank == 1)
        bad += !mpit_check(mpit_verify(win_buf, LEN, NOPS - 1, NULL) == 0,
                           "the target holds the last put's %zu bytes", LEN);
    if (mpit_rank == 1)
        mpit_fill(win_buf, LEN, 777);
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));

    mpit_phase("%d gets of %zu bytes", NOPS, LEN);
    t2 = tx_msgs();
    if (mpit_rank == 0) {
        long wrong = 0;
        MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        for (int i = 0; i < NOPS; i++) {
            memset(buf, 0, LEN);
            MPIT_CALL(MPI_Get(buf, (int)LEN, MPI_BYTE, 1, 0, (int)LEN, MPI_BYTE, win));
            MPIT_CALL(MPI_Win_flush(1, win));
            wrong += mpit_verify(buf, LEN, 777, NULL) != 0;
        }
        MPIT_CALL(MPI_Win_unlock(1, win));
        bad += !mpit_check(wrong == 0, "every get returned the target's %zu bytes (%ld did not)",
                           LEN, wrong);
    }
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
    t3 = tx_msgs();

    /* the lock, unlock and barrier add a few messages to each phase */
    d_put = t1 - t0;
    d_get = t3 - t2;
    {
        unsigned long long mine[2] = {d_put, d_get};
        MPIT_CALL(MPI_Allgather(mine, 2, MPI_UNSIGNED_LONG_LONG, all, 2, MPI_UNSIGNED_LONG_LONG,
                                MPI_COMM_WORLD));
    }
    if (mpit_rank == 0) {
        /* data's sender: RTS + a FIN per rail; the other side: CTS + the
         * request or acknowledgement MPIDIG sends; + credits and lock */
        unsigned long long send_max = (unsigned long long)NOPS * (1 + (unsigned)nrails) +
                                      NOPS / 16 + 8;
        unsigned long long other_max = (unsigned long long)NOPS * 2 + NOPS / 16 + 8;
        printf("# mpi_rma_msgs: %d rails; %d puts: origin sent %llu control messages, target "
               "%llu; %d gets: origin %llu, target %llu\n",
               nrails, NOPS, all[0][0], all[1][0], NOPS, all[0][1], all[1][1]);
        bad += !mpit_check(all[0][0] <= send_max && all[1][0] <= other_max,
                           "puts: origin %.2f control messages per put (at most %u + rails %d), "
                           "target %.2f (at most 2)",
                           (double)all[0][0] / NOPS, 1, nrails, (double)all[1][0] / NOPS);
        bad += !mpit_check(all[1][1] <= send_max && all[0][1] <= other_max,
                           "gets: target %.2f control messages per get (at most %u + rails %d), "
                           "origin %.2f (at most 2)",
                           (double)all[1][1] / NOPS, 1, nrails, (double)all[0][1] / NOPS);
    }
    (void)bad;
    MPIT_CALL(MPI_Win_free(&win));
    free(buf);
    MPIT_CALL(MPI_T_pvar_session_free(&session));
    return mpit_finish();
}
