/*
 * mpi_acc_large: MPI_Accumulate of a large non-contiguous origin buffer.
 *
 * Why: the madrail netmod sends a large non-contiguous active-message
 * payload (here MPIDIG's accumulate data) as a pipeline of chunks, and the
 * target copies each chunk into the buffer MPIDIG's accumulate callback set
 * up.  That callback only initializes its receive (MPIDIG_recv_init); the
 * chunk copy also needs MPIDIG_recv_setup, without which every chunk went
 * nowhere and the target kept its old values (MPICH's
 * rma/derived_acc_flush_local and rma/strided_acc_subarray).  Rank 1
 * accumulates (MPI_SUM) a strided vector of 300,000 ints (1.2 MB, more than
 * one 1 MiB chunk) into rank 0's window REPS times, with flush_local after
 * each, then a contiguous one for comparison; rank 0 checks every element.
 */
#include "mpit_common.c"

#define N 300000
#define REPS 5

int main(int argc, char **argv)
{
    MPI_Win win;
    MPI_Datatype vec;
    int *win_buf, *orig;
    long bad = 0;

    mpit_init(&argc, &argv, "mpi_acc_large");
    mpit_need_ranks(2);
    win_buf = mpit_malloc(2 * N * sizeof(int));
    orig = mpit_malloc(2 * N * sizeof(int));
    for (int i = 0; i < 2 * N; i++) {
        win_buf[i] = -1;
        orig[i] = (i % 2) ? 1000000 : i % 1000;   /* odd elements are not sent */
    }
    /* N blocks of one int, stride 2: the even elements */
    MPIT_CALL(MPI_Type_vector(N, 1, 2, MPI_INT, &vec));
    MPIT_CALL(MPI_Type_commit(&vec));
    MPIT_CALL(MPI_Win_create(win_buf, 2 * N * sizeof(int), sizeof(int), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win));

    mpit_phase("strided accumulates");
    if (mpit_rank == 1) {
        MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int r = 0; r < REPS; r++) {
            MPIT_CALL(MPI_Accumulate(orig, 1, vec, 0, 0, N, MPI_INT, MPI_SUM, win));
            MPIT_CALL(MPI_Win_flush_local(0, win));
        }
        /* contiguous origin into the second half */
        MPIT_CALL(MPI_Accumulate(orig, N, MPI_INT, 0, N, N, MPI_INT, MPI_SUM, win));
        MPIT_CALL(MPI_Win_unlock(0, win));
    }
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
    if (mpit_rank == 0) {
        MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int i = 0; i < N; i++) {
            int want = -1 + REPS * ((2 * i) % 1000);
            if (!mpit_expect(win_buf[i] == want, "strided: element %d is %d, want %d", i,
                             win_buf[i], want))
                bad++;
        }
        for (int i = 0; i < N; i++) {
            int want = -1 + orig[i];
            if (!mpit_expect(win_buf[N + i] == want, "contiguous: element %d is %d, want %d", i,
                             win_buf[N + i], want))
                bad++;
        }
        MPIT_CALL(MPI_Win_unlock(0, win));
    }
    mpit_check_all(bad, "%d accumulates of a 1.2 MB strided origin and one contiguous: "
                   "every target element right", REPS);
    MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Win_free(&win);
    MPI_Type_free(&vec);
    free(orig);
    free(win_buf);
    return mpit_finish();
}
