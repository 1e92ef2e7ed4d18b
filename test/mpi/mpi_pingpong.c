/*
 * mpi_pingpong: every message size around each protocol edge a message
 * crosses on its way through ch4:madrail, byte-exact, both directions.
 *
 * The edges: 0 and 1 byte; the eager slot payload (MADRAIL_SLOT_SIZE 8 KiB
 * minus the core's 48-byte header minus the netmod's and MPIDIG's headers,
 * whose sizes the test does not know, so every size 7900..8300 is sent);
 * MADRAIL_RNDV_THRESH (64 KiB +-64); MPICH's CH4 AM pack buffer (69632
 * +-64, the largest payload MPIDIG accepts unexpected without rendezvous);
 * and 1, 4, 16, 64 MiB (striped).  The default thresholds are assumed: a
 * run with other MADRAIL_* values still passes, it just probes elsewhere.
 *
 * Each size is a ping-pong (rank 0 -> 1, then 1 -> 0 with another pattern)
 * done twice: "expected" (receive posted before the message is sent,
 * aligned buffers) and "unexpected" (the message and then a notice are
 * sent; the receiver first waits for the notice, so by non-overtaking the
 * data is already queued unmatched; buffers at odd offsets).  The receiver
 * checks the pattern, a checksum sent in the notice, count/source/tag of
 * the status, and 64 canary bytes after the buffer.
 */
#include "mpit_common.c"

#define CANARY 64
#define CANARY_BYTE 0xa5
#define TAG_DATA 11
#define TAG_NOTE 12
#define TAG_GO 13

static char *sbuf_base, *rbuf_base;

typedef struct {
    unsigned checks, bad;
} group_t;

/* Receive `size` bytes from `peer` in `mode` and check them. */
static int recv_and_check(size_t size, int peer, int unexpected, uint64_t seed, const char *what)
{
    char *rbuf = rbuf_base + (unexpected ? 5 : 0);
    MPI_Status st;
    MPI_Request req = MPI_REQUEST_NULL;
    uint64_t note[2] = {0, 0};
    size_t first, bad, canary_bad;
    int count = -1, ok = 1;

    memset(rbuf, CANARY_BYTE, size + CANARY);
    if (!unexpected) {
        MPIT_CALL(MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req));
        MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD));
        MPIT_CALL(MPI_Wait(&req, &st));
        MPIT_CALL(MPI_Recv(note, 2, MPI_UINT64_T, peer, TAG_NOTE, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    } else {
        MPIT_CALL(MPI_Recv(note, 2, MPI_UINT64_T, peer, TAG_NOTE, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        /* The data message was sent before the notice: it is queued. */
        MPIT_CALL(MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &st));
    }
    MPI_Get_count(&st, MPI_BYTE, &count);
    ok &= mpit_expect(count == (int)size && st.MPI_SOURCE == peer && st.MPI_TAG == TAG_DATA,
                      "%s size %zu: status count %d source %d tag %d (want %zu %d %d)", what,
                      size, count, st.MPI_SOURCE, st.MPI_TAG, size, peer, TAG_DATA);
    ok &= mpit_expect(note[0] == size, "%s size %zu: notice says size %llu", what, size,
                      (unsigned long long)note[0]);
    bad = mpit_verify(rbuf, size, seed, &first);
    ok &= mpit_expect(bad == 0, "%s size %zu: %zu bad bytes, first at offset %zu", what, size,
                      bad, first);
    ok &= mpit_expect(mpit_checksum(rbuf, size) == note[1], "%s size %zu: checksum mismatch",
                      what, size);
    canary_bad = mpit_count_not(rbuf + size, CANARY, CANARY_BYTE);
    ok &= mpit_expect(canary_bad == 0, "%s size %zu: %zu canary bytes after the buffer changed",
                      what, size, canary_bad);
    return ok;
}

static void send_one(size_t size, int peer, int unexpected, uint64_t seed)
{
    char *sbuf = sbuf_base + (unexpected ? 3 : 0);
    uint64_t note[2];
    MPI_Request req;

    mpit_fill(sbuf, size, seed);
    note[0] = size;
    note[1] = mpit_checksum(sbuf, size);
    if (!unexpected) {
        MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPIT_CALL(MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
        MPIT_CALL(MPI_Send(note, 2, MPI_UINT64_T, peer, TAG_NOTE, MPI_COMM_WORLD));
    } else {
        /* Isend: a rendezvous send cannot complete before the receive is
         * posted, and the receive waits for the notice. */
        MPIT_CALL(MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req));
        MPIT_CALL(MPI_Send(note, 2, MPI_UINT64_T, peer, TAG_NOTE, MPI_COMM_WORLD));
        MPIT_CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
}

/* One size, both modes, both directions.  Returns the number of failed
 * receives on this rank. */
static unsigned pingpong(size_t size)
{
    unsigned bad = 0;
    int mode;

    for (mode = 0; mode < 2; mode++) {
        const char *what = mode ? "unexpected" : "expected";
        uint64_t s01 = mpit_seed(size, 1, (uint64_t)mode), s10 = mpit_seed(size, 2, (uint64_t)mode);

        mpit_phase("pingpong %s size %zu", what, size);
        if (mpit_rank == 0) {
            send_one(size, 1, mode, s01);
            bad += !recv_and_check(size, 1, mode, s10, mode ? "unexpected 1->0" : "expected 1->0");
        } else if (mpit_rank == 1) {
            bad += !recv_and_check(size, 0, mode, s01, mode ? "unexpected 0->1" : "expected 0->1");
            send_one(size, 0, mode, s10);
        }
    }
    return bad;
}

static void range(size_t lo, size_t hi, size_t step, const char *label)
{
    unsigned bad = 0, n = 0;
    size_t s;
    double t0 = MPI_Wtime();

    for (s = lo; s <= hi; s += step, n++)
        bad += pingpong(s);
    mpit_check_all(bad, "%s: sizes %zu..%zu step %zu (%u sizes x 2 modes x 2 directions), "
                   "%.2f s", label, lo, hi, step, n, MPI_Wtime() - t0);
}

int main(int argc, char **argv)
{
    static const size_t small[] = {0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                   127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024,
                                   1025, 2047, 2048, 2049, 4095, 4096, 4097};
    static const size_t mid[] = {8192 + 1024, 12288, 16383, 16384, 16385, 32767, 32768, 32769,
                                 49152, 131071, 131072, 131073, 262144, 524288 + 3};
    static const size_t big[] = {MPIT_MIB - 1, MPIT_MIB, MPIT_MIB + 1, 4 * MPIT_MIB,
                                 4 * MPIT_MIB + 4095, 16 * MPIT_MIB, 16 * MPIT_MIB + 1,
                                 64 * MPIT_MIB};
    const size_t maxsize = 64 * MPIT_MIB + 1;
    unsigned bad;
    size_t i;

    mpit_init(&argc, &argv, "mpi_pingpong");
    mpit_need_ranks(2);
    sbuf_base = mpit_malloc(maxsize + CANARY + 8);
    rbuf_base = mpit_malloc(maxsize + CANARY + 8);

    for (i = 0, bad = 0; i < sizeof(small) / sizeof(small[0]); i++)
        bad += pingpong(small[i]);
    mpit_check_all(bad, "small sizes 0..4097 (%zu sizes x 2 modes x 2 directions)",
                   sizeof(small) / sizeof(small[0]));

    range(7900, 8300, 1, "eager slot edge (8 KiB slot - headers)");
    range(65536 - 64, 65536 + 64, 1, "rendezvous threshold 64 KiB");
    range(69632 - 64, 69632 + 64, 1, "CH4 AM pack buffer 69632");

    for (i = 0, bad = 0; i < sizeof(mid) / sizeof(mid[0]); i++)
        bad += pingpong(mid[i]);
    mpit_check_all(bad, "medium sizes 9 KiB..512 KiB (%zu sizes x 2 modes x 2 directions)",
                   sizeof(mid) / sizeof(mid[0]));

    for (i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        double t0 = MPI_Wtime();
        bad = pingpong(big[i]);
        mpit_check_all(bad, "size %zu (%.1f MiB), both modes, both directions, %.2f s",
                       big[i], (double)big[i] / (double)MPIT_MIB, MPI_Wtime() - t0);
    }

    free(sbuf_base);
    free(rbuf_base);
    return mpit_finish();
}
