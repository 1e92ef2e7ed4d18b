/*
 * mpi_stream: a long one-way MPI stream between two ranks for the fault
 * cases of the cluster benchmark suite (bench/cluster/run.sh): rank 0
 * keeps --window messages of --size in flight (MPI_Isend, each from its
 * own buffer, refilled as one completes), rank 1 keeps as many MPI_Irecv
 * posted, each into its own buffer, and takes them as they complete
 * (MPI_Waitany).  What a fault does to a stream shows at the receiver:
 *  - the stall: the longest gap between two completed receives (a rail
 *    that dies holds the messages striped over it until the survivors
 *    carry them again; nothing else in this program pauses), from the
 *    --skip'th completion on (default 16: connections are made and rail
 *    weights measured in the first messages, a pause there is start-up);
 *  - the rate over the whole stream, and over the part after the stall;
 *  - with --validate, every byte of every message checked against the
 *    pattern its index gives (a fault may cost time, never bytes).
 * Rank 1 sends its figures to rank 0, which prints them:
 *   # mpi_stream: size S, window W, messages N
 *   # stall_ms X at_s T      (the gap, and when it began, from the first
 *                             completion)
 *   # after_stall_MBps R     (rate from the end of the stall to the end)
 *   # bad_messages E         (with --validate)
 *   S R_total                (OSU-style line: size, MB/s, MB = 1e6 B)
 *   # end of measurements
 * --announce: each rank prints "rank N: stream starts at T" (MPI_Wtime) as
 * the stream begins, for a harness that times a fault into the stream
 * (test/cluster/cl_mpi_failover.sh).  Exit status 1 when a message was
 * wrong.  Our own program (not OSU's):
 * OSU has no stream of this kind.  Standalone: `mpicc mpi_stream.c`.
 */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_STREAM 300
#define TAG_RESULT 301

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--size SIZE] [--window N] [--iters N] [--validate]\n"
            "       [--skip N] [--announce]\n"
            "A one-way stream of --iters messages of --size bytes (default 4m; k, m, g\n"
            "= x1024) from rank 0 to rank 1, --window (default 8) in flight; prints the\n"
            "longest gap between completed receives after the first --skip (default 16)\n"
            "(the stall), the rate, and with\n"
            "--validate the number of messages whose bytes were wrong.  --announce: each\n"
            "rank prints \"rank N: stream starts at T\" when the stream begins.\n",
            argv0);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-')
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    else if (*end == 'g' || *end == 'G')
        v <<= 30, end++;
    if (*end != '\0' || v < 8 || v > (1ull << 30))
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Message i's bytes: 64-bit words from its index, cheap to fill and check. */
static void fill(uint64_t *w, size_t n, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < n; k++)
        w[k] = x + k;
}

static int check(const uint64_t *w, size_t n, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < n; k++)
        if (w[k] != x + k)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    size_t size = 4u << 20, words;
    long window = 8, iters = 200, skip = 16;
    int validate = 0, announce = 0, rank, np, a;
    char **bufs;
    MPI_Request *reqs;
    double res[5] = {0, 0, 0, 0, 0}; /* stall s, stall start s, total s, after-stall s, bad */

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        int bad = 0;
        if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            if (rank == 0)
                usage(stdout, argv[0]);
            MPI_Finalize();
            return 0;
        } else if (!strcmp(argv[a], "--validate")) {
            validate = 1;
            continue;
        } else if (!strcmp(argv[a], "--announce")) {
            announce = 1;
            continue;
        } else if (!strcmp(argv[a], "--size")) {
            bad = !v || parse_size(v, &size) != 0;
        } else if (!strcmp(argv[a], "--window")) {
            bad = !v || parse_count(v, 1, 1024, &window) != 0;
        } else if (!strcmp(argv[a], "--iters")) {
            bad = !v || parse_count(v, 1, 100000000, &iters) != 0;
        } else if (!strcmp(argv[a], "--skip")) {
            bad = !v || parse_count(v, 0, 100000000, &skip) != 0;
        } else {
            if (rank == 0) {
                fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[a]);
                usage(stderr, argv[0]);
            }
            MPI_Finalize();
            return 2;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "%s: bad value for %s: '%s' (size 8..1g, window 1..1024, "
                        "iters 1..100000000, skip 0..100000000)\n", argv[0], argv[a], v ? v : "(none)");
            MPI_Finalize();
            return 2;
        }
        a++;
    }
    if (np != 2) {
        if (rank == 0)
            fprintf(stderr, "%s: needs exactly 2 ranks (got %d)\n", argv[0], np);
        MPI_Finalize();
        return 2;
    }
    size &= ~(size_t)7;
    words = size / 8;
    bufs = calloc((size_t)window, sizeof(*bufs));
    reqs = calloc((size_t)window, sizeof(*reqs));
    for (a = 0; bufs && a < window; a++)
        bufs[a] = malloc(size);
    if (!bufs || !reqs || !bufs[window - 1]) {
        fprintf(stderr, "%s: rank %d: out of memory for %ld buffers of %zu bytes\n", argv[0],
                rank, window, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (announce) {
        printf("rank %d: stream starts at %.3f\n", rank, MPI_Wtime());
        fflush(stdout);
    }
    if (rank == 0) {
        long next = 0, done = 0;
        int idx;
        for (a = 0; a < window && next < iters; a++, next++) {
            fill((uint64_t *)bufs[a], words, (uint64_t)next);
            MPI_Isend(bufs[a], (int)size, MPI_BYTE, 1, TAG_STREAM, MPI_COMM_WORLD, &reqs[a]);
        }
        for (; a < window; a++)
            reqs[a] = MPI_REQUEST_NULL;
        while (done < iters) {
            MPI_Waitany((int)window, reqs, &idx, MPI_STATUS_IGNORE);
            done++;
            if (next < iters) {
                fill((uint64_t *)bufs[idx], words, (uint64_t)next++);
                MPI_Isend(bufs[idx], (int)size, MPI_BYTE, 1, TAG_STREAM, MPI_COMM_WORLD,
                          &reqs[idx]);
            }
        }
        MPI_Recv(res, 5, MPI_DOUBLE, 1, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("# mpi_stream: size %zu, window %ld, messages %ld\n", size, window, iters);
        printf("# stall_ms %.1f at_s %.3f\n", res[0] * 1e3, res[1]);
        printf("# after_stall_MBps %.1f\n", res[3]);
        printf("# bad_messages %.0f%s\n", res[4], validate ? "" : " (not validated)");
        printf("%-10zu %.2f\n", size, res[2] > 0 ? (double)size * (double)iters / res[2] / 1e6 : 0);
        printf("# end of measurements\n");
        fflush(stdout);
    } else {
        long posted = 0, done = 0, *slot_msg = calloc((size_t)window, sizeof(long));
        double t_first = 0, t_last = 0, t, gap, stall = 0, stall_at = 0, stall_end = 0;
        long bad = 0, after_n = 0;
        int idx;
        MPI_Status st;
        if (!slot_msg)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (a = 0; a < window && posted < iters; a++, posted++) {
            slot_msg[a] = posted;
            MPI_Irecv(bufs[a], (int)size, MPI_BYTE, 0, TAG_STREAM, MPI_COMM_WORLD, &reqs[a]);
        }
        for (; a < window; a++)
            reqs[a] = MPI_REQUEST_NULL;
        while (done < iters) {
            MPI_Waitany((int)window, reqs, &idx, &st);
            t = MPI_Wtime();
            if (done == 0) {
                t_first = t;
            } else if (done >= skip) {
                gap = t - t_last;
                if (gap > stall) {
                    stall = gap;
                    stall_at = t_last - t_first;
                    stall_end = t;
                    after_n = 0;
                }
            }
            after_n++;
            t_last = t;
            done++;
            /* the receives of one source and tag match in the order posted */
            if (validate && !check((const uint64_t *)bufs[idx], words, (uint64_t)slot_msg[idx]))
                bad++;
            if (posted < iters) {
                slot_msg[idx] = posted++;
                MPI_Irecv(bufs[idx], (int)size, MPI_BYTE, 0, TAG_STREAM, MPI_COMM_WORLD,
                          &reqs[idx]);
            }
        }
        res[0] = stall;
        res[1] = stall_at;
        /* the total counts from the first completion: the messages after it */
        res[2] = iters > 1 ? (t_last - t_first) * (double)iters / (double)(iters - 1) : 0;
        res[3] = stall_end > 0 && t_last > stall_end
                     ? (double)size * (double)(after_n - 1) / (t_last - stall_end) / 1e6 : 0;
        res[4] = (double)bad;
        MPI_Send(res, 5, MPI_DOUBLE, 0, TAG_RESULT, MPI_COMM_WORLD);
        free(slot_msg);
    }
    for (a = 0; a < window; a++)
        free(bufs[a]);
    free(bufs);
    free(reqs);
    MPI_Finalize();
    return res[4] > 0 ? 1 : 0;
}
