/*
 * mpi_anysrc: MPI_ANY_SOURCE and MPI_ANY_TAG when some senders share the
 * receiver's node (shared memory) and others do not (the netmod).
 *
 * Why: with native point-to-point the netmod matches its own messages and
 * MPICH's shared memory matches the others, so a wildcard receive is
 * posted in both and the first to match must withdraw the other (MPICH's
 * any-source partner requests).  Errors show up as a message received
 * twice, a receive completed with nothing, a lost message or a hang.  Run
 * with 4 ranks split into two "nodes" (MPIR_CVAR_NUM_CLIQUES=2,
 * MPIR_CVAR_NOLOCAL=0), so rank 0 has one sender in shared memory and two
 * through the netmod; the test checks that split first.
 *
 * Checks, rank 0 receiving from ranks 1-3:
 *   A. 3 x 240 messages (eager and rendezvous sizes, tags 0..6) received
 *      with (ANY_SOURCE, ANY_TAG) receives, some posted before the
 *      messages arrive and some after: every message exactly once, each
 *      sender's in its send order (non-overtaking), tag, size and data
 *      right;
 *   B. (ANY_SOURCE, tag t) receives pick the one sender using tag t;
 *   C. Mprobe(ANY_SOURCE, ANY_TAG) takes three messages out of matching,
 *      Mrecv gets them in reverse order; then Iprobe(ANY_SOURCE, tag)
 *      reports the right source and size;
 *   D. a cancelled (ANY_SOURCE) receive is cancelled and swallows none of
 *      the messages sent after it.
 */
#include "mpit_common.c"

#define NMSG 240
#define MAXSZ (300 * 1000)
#define WIN 8
#define TAG_B 100
#define TAG_C 200
#define TAG_C2 300
#define TAG_D 400
#define TAG_GO 500

static size_t size_of(int src, int k)
{
    if (k % 20 == 7)
        return MAXSZ - (size_t)src * 1000;      /* rendezvous */
    if (k % 5 == 3)
        return 0;
    return 8 + (size_t)((k * 37 + src * 11) % 3000);
}

static uint64_t seed_of(int src, int k)
{
    return mpit_seed((uint64_t)src, (uint64_t)k, 77);
}

int main(int argc, char **argv)
{
    MPI_Comm node;
    int node_size, node_rank, zero_local = 0;
    char *buf;

    mpit_init(&argc, &argv, "mpi_anysrc");
    mpit_need_ranks(4);
    buf = mpit_malloc(MAXSZ * WIN);

    /* the split the test needs: rank 0 shares its node with exactly one
     * other rank (which must be local to it) */
    MPIT_CALL(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPIT_CALL(MPI_Comm_size(node, &node_size));
    MPIT_CALL(MPI_Comm_rank(node, &node_rank));
    {
        int world0 = 0, any = 0;
        MPI_Group g, wg;
        MPIT_CALL(MPI_Comm_group(node, &g));
        MPIT_CALL(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        MPIT_CALL(MPI_Group_translate_ranks(wg, 1, &world0, g, &any));
        zero_local = any != MPI_UNDEFINED;
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
    }
    {
        int mine = zero_local && mpit_rank != 0, locals = 0;
        MPIT_CALL(MPI_Allreduce(&mine, &locals, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (mpit_rank == 0)
            mpit_check(node_size == 2 && locals == 1,
                       "rank 0's node has %d ranks, %d sender(s) in shared memory (want 2, 1: "
                       "run with MPIR_CVAR_NUM_CLIQUES=2 MPIR_CVAR_NOLOCAL=0)", node_size, locals);
    }

    /* ---- A: every message once, in each sender's order */
    mpit_phase("A");
    if (mpit_rank == 0) {
        int next[4] = {0, 0, 0, 0};
        long bad = 0;
        int got = 0, round = 0;
        MPI_Request reqs[WIN];
        MPI_Status sts[WIN];
        char *rb = buf;
        while (got < 3 * NMSG) {
            int n = 3 * NMSG - got < WIN ? 3 * NMSG - got : WIN;
            for (int i = 0; i < n; i++)
                MPIT_CALL(MPI_Irecv(rb + (size_t)i * MAXSZ, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE,
                                    MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[i]));
            if (++round % 3 == 0)
                mpit_sleep_ms(2);   /* let messages arrive before some receives match */
            MPIT_CALL(MPI_Waitall(n, reqs, sts));
            for (int i = 0; i < n; i++) {
                int src = sts[i].MPI_SOURCE, cnt = -1;
                size_t first = 0;
                MPIT_CALL(MPI_Get_count(&sts[i], MPI_BYTE, &cnt));
                if (!mpit_expect(src >= 1 && src <= 3, "A: receive %d: source %d", got + i, src)) {
                    bad++;
                    continue;
                }
                int k = next[src]++;
                if (!mpit_expect(k < NMSG && sts[i].MPI_TAG == k % 7 &&
                                 (size_t)cnt == size_of(src, k),
                                 "A: from %d message %d: tag %d size %d, want tag %d size %zu "
                                 "(out of order, lost or duplicated)", src, k, sts[i].MPI_TAG,
                                 cnt, k % 7, k < NMSG ? size_of(src, k) : 0)) {
                    bad++;
                    continue;
                }
                if (!mpit_expect(mpit_verify(rb + (size_t)i * MAXSZ, (size_t)cnt,
                                             seed_of(src, k), &first) == 0,
                                 "A: from %d message %d: wrong data at byte %zu", src, k, first))
                    bad++;
            }
            got += n;
        }
        mpit_check(bad == 0 && next[1] == NMSG && next[2] == NMSG && next[3] == NMSG,
                   "A: %d wildcard receives got %d/%d/%d messages from ranks 1/2/3, in order, "
                   "data right", 3 * NMSG, next[1], next[2], next[3]);
    } else {
        MPI_Request *reqs = malloc(NMSG * sizeof(*reqs));
        char *sb = mpit_malloc(MAXSZ);
        char **bufs = malloc(NMSG * sizeof(*bufs));
        for (int k = 0; k < NMSG; k++) {
            size_t sz = size_of(mpit_rank, k);
            bufs[k] = mpit_malloc(sz ? sz : 1);
            mpit_fill(bufs[k], sz, seed_of(mpit_rank, k));
            MPIT_CALL(MPI_Isend(bufs[k], (int)sz, MPI_BYTE, 0, k % 7, MPI_COMM_WORLD, &reqs[k]));
        }
        mpit_waitall(NMSG, reqs);
        for (int k = 0; k < NMSG; k++)
            free(bufs[k]);
        free(bufs);
        free(sb);
        free(reqs);
    }
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- B: (ANY_SOURCE, tag) picks the sender with that tag */
    mpit_phase("B");
    if (mpit_rank == 0) {
        long bad = 0;
        for (int s = 3; s >= 1; s--) {
            MPI_Status st;
            int cnt = -1;
            MPIT_CALL(MPI_Recv(buf, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, TAG_B + s, MPI_COMM_WORLD,
                               &st));
            MPIT_CALL(MPI_Get_count(&st, MPI_BYTE, &cnt));
            if (!mpit_expect(st.MPI_SOURCE == s && st.MPI_TAG == TAG_B + s && cnt == 1000 * s &&
                             mpit_verify(buf, (size_t)cnt, seed_of(s, TAG_B), NULL) == 0,
                             "B: tag %d came from %d (size %d)", TAG_B + s, st.MPI_SOURCE, cnt))
                bad++;
        }
        mpit_check(bad == 0, "B: (ANY_SOURCE, tag) receives each matched the one right sender");
    } else {
        size_t sz = 1000 * (size_t)mpit_rank;
        mpit_fill(buf, sz, seed_of(mpit_rank, TAG_B));
        MPIT_CALL(MPI_Send(buf, (int)sz, MPI_BYTE, 0, TAG_B + mpit_rank, MPI_COMM_WORLD));
    }

    /* ---- C: matched probes with wildcards, received in reverse */
    mpit_phase("C");
    if (mpit_rank == 0) {
        MPI_Message msgs[3];
        MPI_Status pst[3];
        int seen[4] = {0, 0, 0, 0}, cnt[3];
        long bad = 0;
        for (int i = 0; i < 3; i++) {
            /* a probe leaves the status's error field alone */
            pst[i].MPI_ERROR = MPI_ERR_DIMS;
            MPIT_CALL(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msgs[i], &pst[i]));
            if (!mpit_expect(pst[i].MPI_ERROR == MPI_ERR_DIMS, "C: Mprobe changed MPI_ERROR"))
                bad++;
            MPIT_CALL(MPI_Get_count(&pst[i], MPI_BYTE, &cnt[i]));
            if (pst[i].MPI_SOURCE >= 1 && pst[i].MPI_SOURCE <= 3)
                seen[pst[i].MPI_SOURCE]++;
        }
        for (int i = 2; i >= 0; i--) {
            MPI_Status st;
            int c = -1, s = pst[i].MPI_SOURCE;
            char *p = buf + (size_t)i * MAXSZ;
            MPIT_CALL(MPI_Mrecv(p, MAXSZ, MPI_BYTE, &msgs[i], &st));
            MPIT_CALL(MPI_Get_count(&st, MPI_BYTE, &c));
            if (!mpit_expect(st.MPI_SOURCE == s && st.MPI_TAG == TAG_C && c == cnt[i] &&
                             c == (int)(s == 2 ? MAXSZ : 5000 + s) &&
                             mpit_verify(p, (size_t)c, seed_of(s, TAG_C), NULL) == 0,
                             "C: Mrecv of probed message %d: src %d/%d tag %d size %d/%d", i,
                             st.MPI_SOURCE, s, st.MPI_TAG, c, cnt[i]))
                bad++;
        }
        mpit_check(bad == 0 && seen[1] == 1 && seen[2] == 1 && seen[3] == 1,
                   "C: Mprobe(ANY_SOURCE, ANY_TAG) took one message from each of 1/2/3 "
                   "(%d/%d/%d), Mrecv in reverse order got them whole", seen[1], seen[2],
                   seen[3]);
        /* Iprobe with a wildcard source, then the receive */
        MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
        {
            int flag = 0, c = -1;
            MPI_Status st;
            while (!flag)
                MPIT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, TAG_C2, MPI_COMM_WORLD, &flag, &st));
            MPIT_CALL(MPI_Get_count(&st, MPI_BYTE, &c));
            mpit_check(st.MPI_SOURCE == 3 && st.MPI_TAG == TAG_C2 && c == 4321,
                       "C: Iprobe(ANY_SOURCE, %d): source %d size %d (want 3, 4321)", TAG_C2,
                       st.MPI_SOURCE, c);
            MPIT_CALL(MPI_Recv(buf, MAXSZ, MPI_BYTE, st.MPI_SOURCE, TAG_C2, MPI_COMM_WORLD, &st));
        }
    } else {
        size_t sz = mpit_rank == 2 ? MAXSZ : 5000 + (size_t)mpit_rank;
        mpit_fill(buf, sz, seed_of(mpit_rank, TAG_C));
        MPIT_CALL(MPI_Send(buf, (int)sz, MPI_BYTE, 0, TAG_C, MPI_COMM_WORLD));
        MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
        if (mpit_rank == 3)
            MPIT_CALL(MPI_Send(buf, 4321, MPI_BYTE, 0, TAG_C2, MPI_COMM_WORLD));
    }
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- D: a cancelled wildcard receive swallows nothing */
    mpit_phase("D");
    if (mpit_rank == 0) {
        MPI_Request r;
        MPI_Status st;
        int c = 0, from[4] = {0, 0, 0, 0};
        MPIT_CALL(MPI_Irecv(buf, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, TAG_D, MPI_COMM_WORLD, &r));
        MPIT_CALL(MPI_Cancel(&r));
        MPIT_CALL(MPI_Wait(&r, &st));
        MPIT_CALL(MPI_Test_cancelled(&st, &c));
        mpit_check(c, "D: unmatched Irecv(ANY_SOURCE, %d) cancelled", TAG_D);
        MPIT_CALL(MPI_Bcast(&c, 1, MPI_INT, 0, MPI_COMM_WORLD));
        for (int i = 0; i < 3; i++) {
            MPIT_CALL(MPI_Recv(buf, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE, TAG_D, MPI_COMM_WORLD, &st));
            if (st.MPI_SOURCE >= 1 && st.MPI_SOURCE <= 3)
                from[st.MPI_SOURCE]++;
        }
        mpit_check(from[1] == 1 && from[2] == 1 && from[3] == 1,
                   "D: the 3 messages sent after the cancel all arrived (%d/%d/%d)", from[1],
                   from[2], from[3]);
    } else {
        int c;
        MPIT_CALL(MPI_Bcast(&c, 1, MPI_INT, 0, MPI_COMM_WORLD));
        MPIT_CALL(MPI_Send(buf, 100 * mpit_rank, MPI_BYTE, 0, TAG_D, MPI_COMM_WORLD));
    }

    MPI_Comm_free(&node);
    free(buf);
    return mpit_finish();
}
