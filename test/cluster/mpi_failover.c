/*
 * mpi_failover: an MPI stream from rank 0 to rank 1 of mixed-size,
 * checksummed messages received with wildcards, for
 * test/cluster/cl_mpi_failover.sh, which breaks rails under it.
 *
 *   mpi_failover SECONDS ok      the stream must complete, every byte right
 *   mpi_failover SECONDS error   every rail is broken: an MPI call must
 *                                return an error (MPI_ERRORS_RETURN)
 *
 * Each round: rank 0 sends an 8-byte header (the size of the message that
 * follows, -1: the end) and the message, whose bytes depend on the round;
 * rank 1 receives the header from MPI_ANY_SOURCE and the message with
 * MPI_ANY_SOURCE and MPI_ANY_TAG on odd rounds, checks the status and
 * every byte.  Rank 1 prints its throughput every quarter second, in wall
 * clock time (the nodes of the namespace cluster share the clock).
 *
 * A request that does not complete for 4 s (15 s with `error`) is a stall:
 * printed, exit 1, never a silent hang.  After an error a process leaves
 * with _exit (MPI_Finalize would wait for a peer it cannot reach).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define TAG_HDR 7
#define TAG_DATA 100
#define MAXSZ (4 << 20)

static const int sizes[] = {1, 200, 4000, 70000, 1 << 20, 3 << 20, 12345, MAXSZ};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static int rank;
static double stall_s = 4.0;

static double wall(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static unsigned char pattern(long round, long i)
{
    return (unsigned char)(i * 131 + round * 7 + (i >> 9));
}

/* Wait for req: MPI_SUCCESS, an MPI error, or -1 for a stall. */
static int wait_req(MPI_Request *req, MPI_Status *st)
{
    double start = wall();
    int flag = 0, err;

    for (;;) {
        err = MPI_Test(req, &flag, st);
        if (err != MPI_SUCCESS)
            return err;
        if (flag) /* (MPI_Test leaves status.MPI_ERROR alone: its return is the error) */
            return MPI_SUCCESS;
        if (wall() - start > stall_s) {
            printf("rank %d: stalled: a request did not complete for %.0f s\n", rank, stall_s);
            return -1;
        }
    }
}

static void end_with(int err, int expect_error, double last_ok)
{
    char msg[MPI_MAX_ERROR_STRING] = "stall";
    int len;

    if (err != -1)
        MPI_Error_string(err, msg, &len);
    printf("rank %d: error at %.3f, %.3f s after the last completed operation: %s\n", rank,
           wall(), wall() - last_ok, msg);
    if (err == -1)
        printf("rank %d: FAIL - the stream stalled (no error within %.0f s)\n", rank, stall_s);
    else
        printf("rank %d: %s - the stream %s\n", rank, expect_error ? "ok" : "FAIL",
               expect_error ? "ended with an MPI error" : "failed");
    fflush(stdout);
    /* A process that leaves without MPI_Finalize makes hydra kill the
     * others: give the peer time to see its own error first (its rails
     * may have shown life later than ours, so it may need up to a
     * quarter of MADRAIL_RAIL_TIMEOUT more; 3 s is three 1 s timeouts).
     * Seen in CI: rank 0 left 1.25 s after the fault and rank 1 was
     * killed before its error came. */
    if (expect_error && err != -1)
        sleep(3);
    _exit(expect_error && err != -1 ? 0 : 1);
}

int main(int argc, char **argv)
{
    double secs, t0, tb, last_ok;
    long round = 0, bytes_b = 0, bad_total = 0;
    int expect_error, nproc, err = MPI_SUCCESS;
    unsigned char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    if (argc != 3 || (secs = atof(argv[1])) <= 0 ||
        (strcmp(argv[2], "ok") != 0 && strcmp(argv[2], "error") != 0) || nproc != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 mpi_failover SECONDS ok|error\n");
        MPI_Finalize();
        return 2;
    }
    expect_error = strcmp(argv[2], "error") == 0;
    if (expect_error)
        stall_s = 15.0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    buf = malloc(MAXSZ);
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = tb = last_ok = wall();
    printf("rank %d: stream starts at %.3f\n", rank, t0);
    fflush(stdout);
    for (;; round++) {
        MPI_Request req;
        MPI_Status st;
        long hdr, i;
        if (rank == 0) {
            hdr = wall() - t0 < secs ? sizes[round % NSIZES] : -1;
            err = MPI_Isend(&hdr, 1, MPI_LONG, 1, TAG_HDR, MPI_COMM_WORLD, &req);
            if (err == MPI_SUCCESS)
                err = wait_req(&req, MPI_STATUS_IGNORE);
            if (err == MPI_SUCCESS && hdr >= 0) {
                for (i = 0; i < hdr; i++)
                    buf[i] = pattern(round, i);
                err = MPI_Isend(buf, (int)hdr, MPI_BYTE, 1, TAG_DATA + (int)(round % 5),
                                MPI_COMM_WORLD, &req);
                if (err == MPI_SUCCESS)
                    err = wait_req(&req, MPI_STATUS_IGNORE);
            }
        } else {
            err = MPI_Irecv(&hdr, 1, MPI_LONG, MPI_ANY_SOURCE, TAG_HDR, MPI_COMM_WORLD, &req);
            if (err == MPI_SUCCESS)
                err = wait_req(&req, &st);
            if (err == MPI_SUCCESS && hdr >= 0) {
                int any = round & 1, count = -1;
                err = MPI_Irecv(buf, MAXSZ, MPI_BYTE, any ? MPI_ANY_SOURCE : 0,
                                any ? MPI_ANY_TAG : TAG_DATA + (int)(round % 5), MPI_COMM_WORLD,
                                &req);
                if (err == MPI_SUCCESS)
                    err = wait_req(&req, &st);
                if (err == MPI_SUCCESS) {
                    long bad = 0;
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    for (i = 0; i < hdr && i < count; i++)
                        bad += buf[i] != pattern(round, i);
                    if (count != hdr || st.MPI_SOURCE != 0 ||
                        st.MPI_TAG != TAG_DATA + (int)(round % 5) || bad) {
                        printf("rank 1: round %ld: %ld bad bytes, length %d of %ld, source %d, "
                               "tag %d\n", round, bad, count, hdr, st.MPI_SOURCE, st.MPI_TAG);
                        bad_total += bad ? bad : 1;
                    }
                    bytes_b += count;
                }
            }
        }
        if (err != MPI_SUCCESS)
            end_with(err, expect_error, last_ok);
        last_ok = wall();
        if (rank == 1 && last_ok - tb >= 0.25) {
            printf("rank 1: at %.3f: %.1f MB/s\n", last_ok, (double)bytes_b / (last_ok - tb) / 1e6);
            fflush(stdout);
            tb = last_ok;
            bytes_b = 0;
        }
        if (hdr < 0)
            break;
    }
    printf("rank %d: %s - the stream completed: %ld messages%s\n", rank,
           expect_error ? "FAIL" : "ok", round, rank == 1 ? ", every byte checked" : "");
    if (rank == 1)
        printf("rank 1: %s - %ld bad bytes or statuses\n", bad_total ? "FAIL" : "ok", bad_total);
    fflush(stdout);
    free(buf);
    MPI_Finalize();
    return expect_error || bad_total ? 1 : 0;
}
