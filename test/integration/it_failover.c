/*
 * it_failover: a checksummed stream from rank 0 to rank 1 for a given
 * time, for test/cluster/cl_failover.sh, which breaks rails under it.
 * Rank 0 sends rounds of an 8-byte header (1: a payload follows, 0: the
 * end) and a payload of SIZE bytes whose content depends on the round;
 * rank 1 checks every byte.  Both print, in wall-clock time (the nodes of
 * the namespace cluster share the clock), the receiver's throughput per
 * quarter second and the moment each rail first counts a failover, so the
 * script can measure detection time and the rate after failover; at the
 * end the receiver prints the stall: the longest gap between two
 * completed messages (after the first, so connection set-up is not one).
 *
 *   it_failover SECONDS ok      the stream must complete, byte-exact
 *   it_failover SECONDS error   a transfer must fail with an error (every
 *                               rail is broken): exit 0 when it does,
 *                               printing how long after the last progress
 *
 * A request that does not complete for 4 s (15 s with `error`: detecting
 * two black holes one after the other on a loaded machine, sanitizers on,
 * takes more than the 1.1-1.8 s it takes on a quiet one) is a stall: exit 1
 * (never a silent hang).
 *
 * Not a make-check program of its own: it needs the cluster.
 */
#include "mdr_config.h"

#include <sched.h>

#include "it_common.c"

#define SIZE ((size_t)1 << 20)
#define TAG_HDR ((uint64_t)0x464f0000ull << 32)
#define TAG_DATA ((uint64_t)0x464f0001ull << 32)

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t ups[8], put_at_up[8];

static void watch_rails(it_env_t *e, uint64_t *seen)
{
    int r, n = madrail_rail_count(e->ctx);
    for (r = 0; r < n && r < 8; r++) {
        madrail_rail_stats_t s;
        madrail_rail_state_t rs;
        if (madrail_rail_stats(e->ctx, r, &s) == MADRAIL_OK && s.failovers > seen[r]) {
            if (seen[r] == 0)
                printf("rank %d: rail %d down at %.3f (timeouts %llu)\n", e->rank, r, wall(),
                       (unsigned long long)s.timeouts);
            seen[r] = s.failovers;
        }
        if (madrail_rail_state(e->ctx, r, &rs) == MADRAIL_OK && rs.up_events > ups[r]) {
            printf("rank %d: rail %d up at %.3f\n", e->rank, r, wall());
            ups[r] = rs.up_events;
            put_at_up[r] = s.tx_put_bytes;
        }
    }
}

/* what each rail that came back put since (the sender's) */
static void report_rejoined(it_env_t *e)
{
    int r, n = madrail_rail_count(e->ctx);
    for (r = 0; r < n && r < 8; r++) {
        madrail_rail_stats_t s;
        if (ups[r] && madrail_rail_stats(e->ctx, r, &s) == MADRAIL_OK)
            printf("rank %d: rail %d put %.1f MB after it came back\n", e->rank, r,
                   (double)(s.tx_put_bytes - put_at_up[r]) / 1e6);
    }
}

/* Wait for req, watching the rails; a request that does not complete for
 * stall_s seconds is reported as a stall (MADRAIL_ERR_IO). */
static double stall_s = 4.0;
static int stalled;
static madrail_status_t wait_req(it_env_t *e, madrail_request_t *req, madrail_info_t *info,
                                 uint64_t *seen)
{
    double start = wall();
    madrail_status_t st;
    int flag = 0;
    unsigned spins = 0;

    for (;;) {
        st = madrail_test(req, &flag, info);
        watch_rails(e, seen);
        if (flag)
            return st;
        if (++spins % 64 == 0)
            sched_yield(); /* as madrail_wait: the peer may need this core */
        if (wall() - start > stall_s) {
            printf("rank %d: stalled: a request did not complete for %.0f s\n", e->rank, stall_s);
            stalled = 1;
            return MADRAIL_ERR_IO;
        }
    }
}

int main(int argc, char **argv)
{
    it_env_t e;
    double secs, t0, tb, last_ok, last_msg = 0, gap_max = 0, gap_end = 0;
    int expect_error, rc;
    uint64_t seen[8] = {0}, i = 0, bytes_b = 0, more, bad_total = 0;
    uint8_t *buf;
    madrail_status_t st = MADRAIL_OK;

    if (argc != 3 || (secs = atof(argv[1])) <= 0 ||
        (strcmp(argv[2], "ok") != 0 && strcmp(argv[2], "error") != 0)) {
        fprintf(stderr, "usage: it_failover SECONDS ok|error\n");
        return 2;
    }
    expect_error = strcmp(argv[2], "error") == 0;
    if (expect_error)
        stall_s = 15.0;
    rc = it_setup(&e, "it_failover", 2, NULL);
    if (rc != 0)
        return rc;
    buf = it_alloc(&e, SIZE);
    t0 = tb = last_ok = wall();
    printf("rank %d: stream starts at %.3f\n", e.rank, t0);
    fflush(stdout);
    for (;;) {
        madrail_request_t req;
        madrail_info_t info;
        if (e.rank == 0) {
            more = wall() - t0 < secs;
            st = madrail_isend(e.ctx, e.job.peers[1], &more, sizeof(more), TAG_HDR | i, 0, &req);
            if (st == MADRAIL_OK)
                st = wait_req(&e, &req, NULL, seen);
            if (st == MADRAIL_OK && more) {
                it_fill(buf, SIZE, it_seed(i, 7, 0));
                st = madrail_isend(e.ctx, e.job.peers[1], buf, SIZE, TAG_DATA | i, 0, &req);
                if (st == MADRAIL_OK)
                    st = wait_req(&e, &req, NULL, seen);
            }
        } else {
            st = madrail_irecv(e.ctx, e.job.peers[0], &more, sizeof(more), TAG_HDR | i, 0, &req);
            if (st == MADRAIL_OK)
                st = wait_req(&e, &req, &info, seen);
            if (st == MADRAIL_OK && more) {
                size_t first;
                st = madrail_irecv(e.ctx, e.job.peers[0], buf, SIZE, TAG_DATA | i, 0, &req);
                if (st == MADRAIL_OK)
                    st = wait_req(&e, &req, &info, seen);
                if (st == MADRAIL_OK) {
                    uint64_t bad = it_verify(buf, SIZE, it_seed(i, 7, 0), &first);
                    bad_total += bad;
                    if (bad || info.length != SIZE)
                        printf("rank 1: message %llu: %llu bad bytes, length %zu\n",
                               (unsigned long long)i, (unsigned long long)bad, info.length);
                    bytes_b += SIZE;
                    if (last_msg > 0 && wall() - last_msg > gap_max) {
                        gap_max = wall() - last_msg;
                        gap_end = wall();
                    }
                    last_msg = wall();
                }
            }
        }
        watch_rails(&e, seen);
        if (st != MADRAIL_OK)
            break;
        last_ok = wall();
        if (e.rank == 1 && last_ok - tb >= 0.25) {
            printf("rank 1: at %.3f: %.1f MB/s\n", last_ok, (double)bytes_b / (last_ok - tb) / 1e6);
            fflush(stdout);
            tb = last_ok;
            bytes_b = 0;
        }
        if (!more)
            break;
        i++;
    }
    watch_rails(&e, seen);
    if (st != MADRAIL_OK) {
        printf("rank %d: error at %.3f, %.3f s after the last completed operation: %s\n",
               e.rank, wall(), wall() - last_ok, madrail_status_str(st));
        if (stalled)
            printf("rank %d: FAIL - the stream stalled (no error within %.0f s)\n", e.rank,
                   stall_s);
        else
            printf("rank %d: %s - the stream %s\n", e.rank, expect_error ? "ok" : "FAIL",
                   expect_error ? "ended with an error" : "failed");
        fflush(stdout);
        /* A process that leaves without PMI finalize makes hydra kill the
         * others (SIGHUP): give the peer time to see its own error and
         * leave first (as mpi_failover does; seen in CI: rank 0 left 48
         * ms before rank 1, which printed its verdict and was killed
         * before its own _exit).  3 s is three 1 s timeouts. */
        if (expect_error && !stalled)
            sleep(3);
        _exit(expect_error && !stalled ? 0 : 1); /* no finalize barrier */
    }
    report_rejoined(&e);
    if (e.rank == 1)
        printf("rank 1: stall: the longest gap between completed messages was %.0f ms "
               "(ending at %.3f)\n", gap_max * 1e3, gap_end);
    it_check(&e, !expect_error, "the stream completed: %llu messages of 1 MiB%s",
             (unsigned long long)i, e.rank == 1 ? ", every byte checked" : "");
    if (e.rank == 1)
        it_check(&e, bad_total == 0, "0 bad bytes (%llu)", (unsigned long long)bad_total);
    free(buf);
    return it_finish(&e);
}
