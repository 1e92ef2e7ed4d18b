/*
 * mpi_thread: MPI_THREAD_MULTIPLE with two threads per rank, each doing
 * its own send/receive traffic at the same time.
 *
 * The netmod must tolerate concurrent MPI calls (MPICH serialises them
 * with its global or per-VCI lock, but progress, callbacks and the
 * library's queues are then entered from two threads in turn) and must
 * not cross-deliver: thread t of rank 0 talks only to thread t of rank 1,
 * first on its own communicator (a dup per thread, same tag), then all on
 * MPI_COMM_WORLD with a tag per thread.  Sizes cycle through eager,
 * rendezvous and 1 MiB messages; every byte and every status is checked.
 * If the library provides less than MPI_THREAD_MULTIPLE the test skips
 * (exit 77) and says so.
 */
#include "mpit_common.c"

#include <pthread.h>

#define NTHREADS 2
#define ITERS 150

static const size_t sizes[] = {0, 8, 1000, 8100, 70000, 300000, MPIT_MIB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

typedef struct {
    int id;
    MPI_Comm comm;
    int tag;
    int phase;
    long bad;
    char *sbuf, *rbuf;
} targ_t;

static void *worker(void *p)
{
    targ_t *a = p;
    int peer = 1 - mpit_rank, it;

    for (it = 0; it < ITERS; it++) {
        size_t n = sizes[(size_t)(it + a->id) % NSIZES];
        uint64_t s_out = mpit_seed((uint64_t)(mpit_rank * 16 + a->id), (uint64_t)it,
                                   (uint64_t)a->phase);
        uint64_t s_in = mpit_seed((uint64_t)(peer * 16 + a->id), (uint64_t)it,
                                  (uint64_t)a->phase);
        MPI_Request reqs[2];
        MPI_Status sts[2];
        size_t nbad, first;
        int count = -1, rc;

        mpit_fill(a->sbuf, n, s_out);
        rc = MPI_Irecv(a->rbuf, (int)MPIT_MIB, MPI_BYTE, peer, a->tag, a->comm, &reqs[0]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(a->sbuf, (int)n, MPI_BYTE, peer, a->tag, a->comm, &reqs[1]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Waitall(2, reqs, sts);
        if (rc != MPI_SUCCESS) {
            mpit_expect(0, "thread %d phase %d iter %d: MPI call failed (%d)", a->id, a->phase,
                        it, rc);
            a->bad++;
            return NULL;
        }
        MPI_Get_count(&sts[0], MPI_BYTE, &count);
        if (!mpit_expect(count == (int)n && sts[0].MPI_SOURCE == peer &&
                             sts[0].MPI_TAG == a->tag,
                         "thread %d phase %d iter %d: count %d source %d tag %d (want %zu %d "
                         "%d)", a->id, a->phase, it, count, sts[0].MPI_SOURCE, sts[0].MPI_TAG,
                         n, peer, a->tag))
            a->bad++;
        nbad = mpit_verify(a->rbuf, n, s_in, &first);
        if (!mpit_expect(nbad == 0, "thread %d phase %d iter %d, %zu bytes: %zu bad from %zu "
                         "(cross-delivery between threads?)", a->id, a->phase, it, n, nbad,
                         first))
            a->bad++;
    }
    return NULL;
}

static long run_phase(int phase, MPI_Comm *comms, const int *tags, targ_t *args)
{
    pthread_t th[NTHREADS];
    long bad = 0;
    int t;

    mpit_phase("threads, phase %d", phase);
    for (t = 0; t < NTHREADS; t++) {
        args[t].id = t;
        args[t].comm = comms[t];
        args[t].tag = tags[t];
        args[t].phase = phase;
        args[t].bad = 0;
        if (pthread_create(&th[t], NULL, worker, &args[t]) != 0) {
            mpit_expect(0, "pthread_create failed");
            return 1;
        }
    }
    for (t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        bad += args[t].bad;
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Comm comms[NTHREADS], world[NTHREADS], pair;
    targ_t args[NTHREADS];
    int provided = MPI_THREAD_SINGLE, t;
    long bad;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mpit_setup("mpi_thread");
    if (provided < MPI_THREAD_MULTIPLE) {
        char why[128];
        snprintf(why, sizeof(why), "MPI_Init_thread provided level %d < MPI_THREAD_MULTIPLE (%d)",
                 provided, MPI_THREAD_MULTIPLE);
        mpit_skip(why);
    }
    mpit_need_ranks(2);
    MPIT_CALL(MPI_Comm_split(MPI_COMM_WORLD, mpit_rank <= 1 ? 0 : MPI_UNDEFINED, mpit_rank,
                             &pair));
    if (pair != MPI_COMM_NULL) {
        for (t = 0; t < NTHREADS; t++) {
            MPIT_CALL(MPI_Comm_dup(pair, &comms[t]));
            MPI_Comm_set_errhandler(comms[t], MPI_ERRORS_RETURN);
            world[t] = pair;
            args[t].sbuf = mpit_malloc(MPIT_MIB);
            args[t].rbuf = mpit_malloc(MPIT_MIB);
        }
    }

    if (pair != MPI_COMM_NULL) {
        static const int same_tag[NTHREADS] = {5, 5};
        bad = run_phase(1, comms, same_tag, args);
    } else {
        bad = 0;
    }
    mpit_check_all(bad, "%d threads per rank, one communicator each, same tag: %d exchanges "
                   "each, byte-exact, no cross-delivery", NTHREADS, ITERS);
    if (pair != MPI_COMM_NULL) {
        static const int own_tag[NTHREADS] = {6, 7};
        bad = run_phase(2, world, own_tag, args);
    } else {
        bad = 0;
    }
    mpit_check_all(bad, "%d threads per rank, one communicator, a tag each: %d exchanges each, "
                   "byte-exact, no cross-delivery", NTHREADS, ITERS);

    if (pair != MPI_COMM_NULL) {
        for (t = 0; t < NTHREADS; t++) {
            MPI_Comm_free(&comms[t]);
            free(args[t].sbuf);
            free(args[t].rbuf);
        }
        MPI_Comm_free(&pair);
    }
    return mpit_finish();
}
