/*
 * mpi_rfs: large messages whose receive was posted first.
 *
 * The usual halo-exchange case: rank 1 posts MPI_Irecv(1 MiB, source 0),
 * then tells rank 0 (a zero-byte message) that it may send; rank 0 sends.
 * With the netmod's native point-to-point the receive is a libmadrail
 * receive with a known source, posted before the sender's RTS, so
 * libmadrail offers its buffer first (receiver-first CTS: address and
 * keys) and the sender puts the data and sends its FIN without an RTS
 * round trip.  The program checks the data; the control messages are
 * counted by run_mpi_tests.sh from the MADRAIL_STATS=1 lines at finalize
 * (the maxmsgs and rfs flags of its entry): libmadrail must report no RTS
 * and 100 sends into receiver-first offers, and 4 messages per transfer
 * (the go message and the offer; the RFS_DATA envelope and the FIN)
 * against 7 when MPIDIG announces the message, the offer is declined and
 * libmadrail's RTS follows (MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P=0).  Run on
 * one rail, so that the offer and the go message travel in order.
 */
#include "mpit_common.c"

#define NITER 100
#define SZ MPIT_MIB
#define TAG_DATA 61
#define TAG_GO 62

int main(int argc, char **argv)
{
    char *buf;
    long bad = 0;

    mpit_init(&argc, &argv, "mpi_rfs");
    mpit_need_ranks(2);
    buf = mpit_malloc(SZ);

    for (int i = 0; i < NITER; i++) {
        mpit_phase("message %d", i);
        if (mpit_rank == 0) {
            mpit_fill(buf, SZ, mpit_seed(61, (uint64_t)i, 0));
            MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPIT_CALL(MPI_Send(buf, SZ, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
        } else if (mpit_rank == 1) {
            MPI_Request r;
            MPI_Status st;
            int cnt = -1;
            memset(buf, 0, SZ);
            MPIT_CALL(MPI_Irecv(buf, SZ, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &r));
            MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD));
            MPIT_CALL(MPI_Wait(&r, &st));
            MPIT_CALL(MPI_Get_count(&st, MPI_BYTE, &cnt));
            if (!mpit_expect(cnt == (int)SZ && mpit_verify(buf, SZ, mpit_seed(61, (uint64_t)i, 0),
                                                           NULL) == 0,
                             "message %d: count %d or data wrong", i, cnt))
                bad++;
        }
    }
    mpit_check_all(bad, "%d pre-posted 1 MiB receives got their data", NITER);
    free(buf);
    return mpit_finish();
}
