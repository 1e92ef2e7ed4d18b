/*
 * mpi_probe: MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe with
 * MPI_Mrecv/MPI_Imrecv, at eager, medium and rendezvous sizes.
 *
 * Why these checks: a probe must report the full size of a message whose
 * data has not moved yet (a rendezvous RTS carries only the size), must not
 * consume it, and a matched probe (mprobe) must take the message out of
 * matching so that a later receive cannot steal it and two matched
 * messages can be received in either order.  Rank 1 sends, rank 0 probes;
 * each message is announced by nothing but its arrival.
 */
#include "mpit_common.c"

#define TAG_P 21   /* Probe then Recv(ANY_TAG) */
#define TAG_IP 22  /* Iprobe loop then Recv */
#define TAG_M 23   /* two messages, Mprobe both, Mrecv in reverse order */
#define TAG_IM 24  /* Improbe loop + Imrecv */
#define TAG_SYNC 25
#define TAG_NEVER 26

static const size_t sizes[] = {0, 100, 8000, 100000, 4 * MPIT_MIB + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t seed_of(int tag, size_t size, int k)
{
    return mpit_seed((uint64_t)tag, size, (uint64_t)k);
}

/* Isend: the sender must not block on one rendezvous message while the
 * receiver mprobes the next one. */
static void send_msg(char *buf, size_t size, int tag, int k, MPI_Request *req)
{
    mpit_fill(buf, size, seed_of(tag, size, k));
    MPIT_CALL(MPI_Isend(buf, (int)size, MPI_BYTE, 0, tag, MPI_COMM_WORLD, req));
}

static int status_is(const MPI_Status *st, int src, int tag, size_t size, const char *what)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    return mpit_check(st->MPI_SOURCE == src && st->MPI_TAG == tag && count == (int)size,
                      "%s: status source %d tag %d count %d (want %d %d %zu)", what,
                      st->MPI_SOURCE, st->MPI_TAG, count, src, tag, size);
}

static int data_is(const char *buf, size_t size, int tag, int k, const char *what)
{
    size_t first, bad = mpit_verify(buf, size, seed_of(tag, size, k), &first);
    return mpit_check(bad == 0, "%s: %zu bytes received, %zu bad (first at %zu)", what, size,
                      bad, first);
}

int main(int argc, char **argv)
{
    const size_t maxsize = 4 * MPIT_MIB + 16;
    char *buf, *buf2, *sbufs[5];
    size_t i;
    int k;

    mpit_init(&argc, &argv, "mpi_probe");
    mpit_need_ranks(2);
    buf = mpit_malloc(maxsize);
    buf2 = mpit_malloc(maxsize);
    for (k = 0; k < 5; k++)
        sbufs[k] = mpit_rank == 1 ? mpit_malloc(maxsize) : NULL;

    for (i = 0; i < NSIZES; i++) {
        size_t n = sizes[i];
        char what[96];

        if (mpit_rank == 1) {
            MPI_Request reqs[5];
            mpit_phase("sender, size %zu", n);
            send_msg(sbufs[0], n, TAG_P, 0, &reqs[0]);
            send_msg(sbufs[1], n, TAG_IP, 0, &reqs[1]);
            /* two messages with the same tag, different contents */
            send_msg(sbufs[2], n, TAG_M, 1, &reqs[2]);
            send_msg(sbufs[3], n + 1, TAG_M, 2, &reqs[3]);
            send_msg(sbufs[4], n, TAG_IM, 0, &reqs[4]);
            mpit_waitall(5, reqs);
            MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_SYNC, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        } else if (mpit_rank == 0) {
            MPI_Status st, st2;
            MPI_Message m1, m2;
            MPI_Request req;
            int flag = 0, spins;

            /* Probe(ANY_SOURCE, ANY_TAG) sees the first message, then a
             * Recv(ANY_TAG) receives that same message. */
            mpit_phase("probe, size %zu", n);
            snprintf(what, sizeof(what), "size %zu Probe(ANY,ANY)", n);
            MPIT_CALL(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            status_is(&st, 1, TAG_P, n, what);
            /* probing again reports the same message: not consumed */
            MPIT_CALL(MPI_Probe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "size %zu second Probe(1,ANY)", n);
            status_is(&st, 1, TAG_P, n, what);
            MPIT_CALL(MPI_Recv(buf, (int)maxsize, MPI_BYTE, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "size %zu Recv(1,ANY) after Probe", n);
            status_is(&st, 1, TAG_P, n, what);
            data_is(buf, n, TAG_P, 0, what);

            /* Iprobe loop for a given tag */
            mpit_phase("iprobe, size %zu", n);
            for (spins = 0; !flag; spins++)
                MPIT_CALL(MPI_Iprobe(1, TAG_IP, MPI_COMM_WORLD, &flag, &st));
            snprintf(what, sizeof(what), "size %zu Iprobe(1,%d) after %d calls", n, TAG_IP,
                     spins);
            status_is(&st, 1, TAG_IP, n, what);
            MPIT_CALL(MPI_Recv(buf, (int)n, MPI_BYTE, 1, TAG_IP, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "size %zu Recv after Iprobe", n);
            data_is(buf, n, TAG_IP, 0, what);

            /* Mprobe both TAG_M messages (in send order), receive the
             * second one first. */
            mpit_phase("mprobe, size %zu", n);
            MPIT_CALL(MPI_Mprobe(1, TAG_M, MPI_COMM_WORLD, &m1, &st));
            snprintf(what, sizeof(what), "size %zu first Mprobe", n);
            status_is(&st, 1, TAG_M, n, what);
            MPIT_CALL(MPI_Mprobe(MPI_ANY_SOURCE, TAG_M, MPI_COMM_WORLD, &m2, &st2));
            snprintf(what, sizeof(what), "size %zu second Mprobe (the first is not seen again)",
                     n);
            status_is(&st2, 1, TAG_M, n + 1, what);
            /* a matched message is invisible to probes */
            MPIT_CALL(MPI_Iprobe(1, TAG_M, MPI_COMM_WORLD, &flag, &st));
            mpit_check(!flag, "size %zu Iprobe(TAG_M) after both were mprobed: flag %d", n, flag);
            MPIT_CALL(MPI_Mrecv(buf2, (int)(n + 1), MPI_BYTE, &m2, &st2));
            mpit_check(m2 == MPI_MESSAGE_NULL, "size %zu Mrecv sets the handle to MESSAGE_NULL",
                       n);
            snprintf(what, sizeof(what), "size %zu Mrecv of the second message first", n);
            status_is(&st2, 1, TAG_M, n + 1, what);
            data_is(buf2, n + 1, TAG_M, 2, what);
            MPIT_CALL(MPI_Mrecv(buf, (int)n, MPI_BYTE, &m1, &st));
            snprintf(what, sizeof(what), "size %zu Mrecv of the first message second", n);
            status_is(&st, 1, TAG_M, n, what);
            data_is(buf, n, TAG_M, 1, what);

            /* Improbe loop + Imrecv */
            mpit_phase("improbe, size %zu", n);
            flag = 0;
            for (spins = 0; !flag; spins++)
                MPIT_CALL(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m1,
                                      &st));
            snprintf(what, sizeof(what), "size %zu Improbe(ANY,ANY) after %d calls", n, spins);
            status_is(&st, 1, TAG_IM, n, what);
            MPIT_CALL(MPI_Imrecv(buf, (int)n, MPI_BYTE, &m1, &req));
            MPIT_CALL(MPI_Wait(&req, &st));
            snprintf(what, sizeof(what), "size %zu Imrecv+Wait", n);
            status_is(&st, 1, TAG_IM, n, what);
            data_is(buf, n, TAG_IM, 0, what);

            /* nothing else is pending: non-matching probes say so */
            MPIT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            mpit_check(!flag, "size %zu Iprobe(ANY,ANY) with nothing pending: flag %d", n, flag);
            MPIT_CALL(MPI_Improbe(1, TAG_NEVER, MPI_COMM_WORLD, &flag, &m1, &st));
            mpit_check(!flag && m1 == MPI_MESSAGE_NULL,
                       "size %zu Improbe of an unsent tag: flag %d, handle null %d", n, flag,
                       m1 == MPI_MESSAGE_NULL);
            MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_SYNC, MPI_COMM_WORLD));
        }
    }

    /* MPI_PROC_NULL */
    if (mpit_rank == 0) {
        MPI_Status st;
        MPI_Message m = MPI_MESSAGE_NULL;
        int count = -1;
        MPIT_CALL(MPI_Probe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_BYTE, &count);
        mpit_check(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
                   "Probe(PROC_NULL): source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
                   count);
        MPIT_CALL(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
        mpit_check(m == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL) gives MPI_MESSAGE_NO_PROC");
        MPIT_CALL(MPI_Mrecv(buf, 10, MPI_BYTE, &m, &st));
        mpit_check(st.MPI_SOURCE == MPI_PROC_NULL, "Mrecv(MESSAGE_NO_PROC) completes at once");
    }

    free(buf);
    free(buf2);
    for (k = 0; k < 5; k++)
        free(sbufs[k]);
    return mpit_finish();
}
