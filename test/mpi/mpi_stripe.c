/*
 * mpi_stripe: rank 0 sends several 16 MiB messages to rank 1, which checks
 * every byte and acknowledges each one.
 *
 * The point is what happens underneath, which an MPI program cannot see:
 * on ch4:madrail with two rails (MADRAIL_RAILS=tcp:lo,tcp:lo) each message
 * must be striped over both.  The runner (run_mpi_tests.sh) sets
 * MADRAIL_STATS=1 and checks the per-rail statistics that libmadrail
 * prints to stderr at finalize: on the sender, each rail must carry 30% to
 * 70% of the put bytes.  On another MPI (no madrail) that check is skipped
 * and this program is a plain large-message correctness test.  Both
 * expected (receive pre-posted) and unexpected (receive posted late)
 * messages are sent, since the netmod may take different rendezvous paths.
 */
#include "mpit_common.c"

#define NMSG 6
#define MSG ((size_t)16 * 1024 * 1024)
#define TAG_DATA 61
#define TAG_ACK 62
#define TAG_GO 63

int main(int argc, char **argv)
{
    char *buf;
    int i;
    long bad = 0;
    double t0;

    mpit_init(&argc, &argv, "mpi_stripe");
    mpit_need_ranks(2);
    buf = mpit_malloc(MSG);

    t0 = MPI_Wtime();
    for (i = 0; i < NMSG; i++) {
        int unexpected = i % 2;
        uint64_t seed = mpit_seed(MSG, (uint64_t)i, 3);
        mpit_phase("message %d (%s)", i, unexpected ? "unexpected" : "expected");
        if (mpit_rank == 0) {
            int ack = -1;
            mpit_fill(buf, MSG, seed);
            if (!unexpected)
                MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
            MPIT_CALL(MPI_Send(buf, (int)MSG, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
            MPIT_CALL(MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            bad += !mpit_expect(ack == 0, "message %d: receiver reports %d bad bytes", i, ack);
        } else if (mpit_rank == 1) {
            MPI_Request req;
            MPI_Status st;
            size_t nbad, first;
            int count = -1, ack;
            memset(buf, 0, MSG);
            if (!unexpected) {
                MPIT_CALL(MPI_Irecv(buf, (int)MSG, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req));
                MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD));
                MPIT_CALL(MPI_Wait(&req, &st));
            } else {
                mpit_sleep_ms(50);
                MPIT_CALL(MPI_Recv(buf, (int)MSG, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &st));
            }
            MPI_Get_count(&st, MPI_BYTE, &count);
            nbad = mpit_verify(buf, MSG, seed, &first);
            bad += !mpit_expect(count == (int)MSG && nbad == 0,
                                "message %d (%s): count %d, %zu bad bytes from %zu", i,
                                unexpected ? "unexpected" : "expected", count, nbad, first);
            ack = nbad > (size_t)0x7fffffff ? 0x7fffffff : (int)nbad;
            MPIT_CALL(MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD));
        }
    }
    mpit_check_all(bad, "%d x 16 MiB from rank 0 to rank 1 (expected and unexpected), "
                   "byte-exact, %.2f s", NMSG, MPI_Wtime() - t0);
    if (mpit_rank == 0)
        printf("# stripe: sender rank 0 sent %d x %zu bytes; rail split is checked by the "
               "runner from MADRAIL_STATS output\n", NMSG, MSG);
    free(buf);
    return mpit_finish();
}
