/*
 * mpi_many_isend: 1,000 outstanding MPI_Isend of mixed sizes in each
 * direction at once, with 1,000 matching MPI_Irecv, one MPI_Waitall.
 *
 * This is the load that runs a transport out of eager slots and credits
 * and keeps many rendezvous open at once: it must queue, never drop, and
 * every byte must land in the right buffer.  Round 1 gives every message
 * its own tag and posts half the receives before the sends and half after
 * (some expected, some unexpected); round 2 sends everything on one tag,
 * so only non-overtaking decides which receive gets which message.  Size
 * mix: 70% 0..1 KiB, 20% up to 70 KiB (eager edge, rendezvous threshold,
 * AM pack buffer), 10% up to 512 KiB.
 */
#include "mpit_common.c"

#define NMSG 1000
#define TAG_ONE 7

static size_t size_of(int i, int dir)
{
    uint64_t r = mpit_seed((uint64_t)i, (uint64_t)dir, 99);
    unsigned cls = (unsigned)(r % 10);
    r >>= 8;
    if (cls < 7)
        return (size_t)(r % 1025);
    if (cls < 9)
        return 1025 + (size_t)(r % (70 * 1024));
    return 70 * 1024 + (size_t)(r % (442 * 1024));
}

static long one_round(int round)
{
    int peer = 1 - mpit_rank, i, half = NMSG / 2;
    MPI_Request *reqs = mpit_malloc(sizeof(MPI_Request) * 2 * NMSG);
    MPI_Status *sts = mpit_malloc_sts(2 * NMSG);
    char **sbufs = mpit_malloc(sizeof(char *) * NMSG), **rbufs = mpit_malloc(sizeof(char *) * NMSG);
    size_t total = 0;
    long bad = 0;
    double t0 = MPI_Wtime();

    /* this rank sends in direction `mpit_rank`, receives direction `peer` */
    for (i = 0; i < NMSG; i++) {
        size_t sn = size_of(i, mpit_rank), rn = size_of(i, peer);
        sbufs[i] = mpit_malloc(sn);
        rbufs[i] = mpit_malloc(rn + 8);
        mpit_fill(sbufs[i], sn, mpit_seed((uint64_t)i, (uint64_t)mpit_rank, (uint64_t)round));
        memset(rbufs[i], 0xee, rn + 8);
        total += sn;
    }
#define RTAG(i) (round == 1 ? 100 + (i) : TAG_ONE)
    mpit_phase("round %d: posting", round);
    for (i = 0; i < half; i++)
        MPIT_CALL(MPI_Irecv(rbufs[i], (int)size_of(i, peer), MPI_BYTE, peer, RTAG(i),
                            MPI_COMM_WORLD, &reqs[NMSG + i]));
    for (i = 0; i < NMSG; i++)
        MPIT_CALL(MPI_Isend(sbufs[i], (int)size_of(i, mpit_rank), MPI_BYTE, peer,
                            RTAG(i), MPI_COMM_WORLD, &reqs[i]));
    for (i = half; i < NMSG; i++)
        MPIT_CALL(MPI_Irecv(rbufs[i], (int)size_of(i, peer), MPI_BYTE, peer, RTAG(i),
                            MPI_COMM_WORLD, &reqs[NMSG + i]));
    mpit_phase("round %d: waitall of %d requests", round, 2 * NMSG);
    MPIT_CALL(MPI_Waitall(2 * NMSG, reqs, sts));
    for (i = 0; i < NMSG; i++) {
        size_t rn = size_of(i, peer), nbad, first;
        int count = -1;
        MPI_Get_count(&sts[NMSG + i], MPI_BYTE, &count);
        if (!mpit_expect(count == (int)rn && sts[NMSG + i].MPI_SOURCE == peer &&
                             sts[NMSG + i].MPI_TAG == RTAG(i),
                         "round %d recv %d: count %d source %d tag %d (want %zu %d %d)", round, i,
                         count, sts[NMSG + i].MPI_SOURCE, sts[NMSG + i].MPI_TAG, rn, peer,
                         RTAG(i)))
            bad++;
        nbad = mpit_verify(rbufs[i], rn, mpit_seed((uint64_t)i, (uint64_t)peer, (uint64_t)round),
                           &first);
        if (!mpit_expect(nbad == 0, "round %d recv %d (%zu bytes): %zu bad bytes from %zu",
                         round, i, rn, nbad, first))
            bad++;
        if (!mpit_expect(mpit_count_not(rbufs[i] + rn, 8, 0xee) == 0,
                         "round %d recv %d: bytes after the message were written", round, i))
            bad++;
    }
#undef RTAG
    if (mpit_rank == 0)
        printf("# round %d: %d+%d messages, %.1f MiB sent by rank 0, %.2f s\n", round, NMSG,
               NMSG, (double)total / (double)MPIT_MIB, MPI_Wtime() - t0);
    for (i = 0; i < NMSG; i++) {
        free(sbufs[i]);
        free(rbufs[i]);
    }
    free(sbufs);
    free(rbufs);
    free(sts);
    free(reqs);
    return bad;
}

int main(int argc, char **argv)
{
    long bad;

    mpit_init(&argc, &argv, "mpi_many_isend");
    mpit_need_ranks(2);
    if (mpit_size > 2 && mpit_rank == 0)
        printf("# only ranks 0 and 1 take part\n");

    bad = mpit_rank <= 1 ? one_round(1) : 0;
    mpit_check_all(bad, "round 1: %d Isend + %d Irecv per rank in flight, distinct tags, half "
                   "the receives posted late, byte-exact", NMSG, NMSG);
    bad = mpit_rank <= 1 ? one_round(2) : 0;
    mpit_check_all(bad, "round 2: same on one tag: receives matched in send order, byte-exact");
    return mpit_finish();
}
