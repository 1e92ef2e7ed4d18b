/*
 * mpi_ssend: a synchronous send completes only after the receive matched.
 *
 * An eager-capable transport is tempted to complete a small MPI_Ssend as
 * soon as the data left; ch4:madrail must instead wait for the receiver's
 * match (MPIDIG's SSEND_ACK).  The receiver sleeps 300 ms before posting
 * its receive; the sender's MPI_Ssend (or MPI_Issend + Wait) must take at
 * least 250 ms.  That is an ordering fact, not a performance gate: the
 * sleep starts when a notice the sender sent just before the Ssend
 * arrived, so a correct implementation always takes >= 300 ms.  MPI_Test on a pending Issend must
 * keep saying "not done" before the receive is posted.  When both ranks
 * run on one host (one monotonic clock), the test also checks the exact
 * order: send completion time >= receive post time.
 */
#include "mpit_common.c"

#define TAG_S 41
#define TAG_T 42
#define TAG_START 43
#define SLEEP_MS 300
#define MIN_S 0.250

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {0, 8, 4000, 100000, 4 * MPIT_MIB};
    char *buf;
    char host[MPI_MAX_PROCESSOR_NAME], peer_host[MPI_MAX_PROCESSOR_NAME];
    int len, same_host, i, nonblocking;

    mpit_init(&argc, &argv, "mpi_ssend");
    mpit_need_ranks(2);
    buf = mpit_malloc(4 * MPIT_MIB);
    memset(host, 0, sizeof(host));
    memset(peer_host, 0, sizeof(peer_host));
    MPI_Get_processor_name(host, &len);
    if (mpit_rank <= 1)
        MPIT_CALL(MPI_Sendrecv(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - mpit_rank, 0,
                               peer_host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - mpit_rank, 0,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    same_host = strcmp(host, peer_host) == 0;

    for (nonblocking = 0; nonblocking < 2; nonblocking++) {
        for (i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++) {
            size_t n = sizes[i];
            const char *call = nonblocking ? "Issend+Wait" : "Ssend";
            double t_posted = 0.0, t_done = 0.0;

            mpit_phase("%s of %zu bytes", call, n);
            if (mpit_rank == 0) {
                double t0, dt;
                mpit_fill(buf, n, mpit_seed(n, 1, (uint64_t)nonblocking));
                /* The receiver starts its 300 ms sleep only when this
                 * notice arrived, so no clock skew or scheduling delay can
                 * make a correct Ssend look shorter than 300 ms. */
                t0 = MPI_Wtime();
                MPIT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_START, MPI_COMM_WORLD));
                if (!nonblocking) {
                    MPIT_CALL(MPI_Ssend(buf, (int)n, MPI_BYTE, 1, TAG_S, MPI_COMM_WORLD));
                } else {
                    MPI_Request req;
                    int flag = 0, tests = 0, early = 0;
                    MPI_Status st;
                    MPIT_CALL(MPI_Issend(buf, (int)n, MPI_BYTE, 1, TAG_S, MPI_COMM_WORLD, &req));
                    /* for the first 150 ms the receive cannot be posted */
                    while (MPI_Wtime() - t0 < 0.150) {
                        MPIT_CALL(MPI_Test(&req, &flag, &st));
                        tests++;
                        if (flag) {
                            early = 1;
                            break;
                        }
                    }
                    mpit_check(!early, "Issend %zu: %d MPI_Test calls in the first %.0f ms "
                               "(receive not posted yet): %s", n, tests,
                               (MPI_Wtime() - t0) * 1e3,
                               early ? "the last one said DONE" : "all said not done");
                    if (!early)
                        MPIT_CALL(MPI_Wait(&req, &st));
                }
                t_done = mono_now();
                dt = MPI_Wtime() - t0;
                mpit_check(dt >= MIN_S, "%s of %zu bytes took %.0f ms (receiver posts after %d "
                           "ms; must be >= %.0f ms)", call, n, dt * 1e3, SLEEP_MS, MIN_S * 1e3);
                MPIT_CALL(MPI_Recv(&t_posted, 1, MPI_DOUBLE, 1, TAG_T, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                if (same_host)
                    mpit_check(t_done >= t_posted, "%s of %zu bytes completed %.1f ms after the "
                               "receive was posted (same host clock; must be >= 0)", call, n,
                               (t_done - t_posted) * 1e3);
            } else if (mpit_rank == 1) {
                MPI_Status st;
                size_t bad, first;
                int count = -1;
                MPIT_CALL(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_START, MPI_COMM_WORLD,
                                   MPI_STATUS_IGNORE));
                mpit_sleep_ms(SLEEP_MS);
                t_posted = mono_now();
                MPIT_CALL(MPI_Recv(buf, (int)n, MPI_BYTE, 0, TAG_S, MPI_COMM_WORLD, &st));
                MPI_Get_count(&st, MPI_BYTE, &count);
                bad = mpit_verify(buf, n, mpit_seed(n, 1, (uint64_t)nonblocking), &first);
                mpit_check(count == (int)n && bad == 0, "%s of %zu bytes received: count %d, "
                           "%zu bad bytes", call, n, count, bad);
                MPIT_CALL(MPI_Send(&t_posted, 1, MPI_DOUBLE, 0, TAG_T, MPI_COMM_WORLD));
            }
        }
    }

    free(buf);
    return mpit_finish();
}
