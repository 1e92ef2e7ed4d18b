/*
 * mpi_mbw_mr: multi-pair bandwidth and message rate with osu_mbw_mr's
 * semantics, in our own code.  The n ranks (any even number) form n/2
 * pairs, rank i < n/2 sending to rank i + n/2; with two nodes and -ppn n/2
 * (block placement) every pair spans the nodes, so all pairs share the
 * rails at once.  Per iteration each sender posts a window (default 64) of
 * MPI_Isend of one size to its receiver and waits for them, then receives
 * a 4-byte ack; each receiver posts the window of MPI_Irecv, waits, and
 * sends the ack.  Each sender times its own timed iterations; the message
 * rate is the sum over the pairs of window * iterations / that pair's
 * elapsed time (messages per second), and the bandwidth that rate times
 * the size (MB/s, 1 MB = 1e6 bytes).
 *
 * Why: one pair of ranks cannot show what a network library does when
 * several processes of a node share its rails (per-process connections,
 * the CPU cost per message, contention in the progress engine); small
 * messages in flight from two pairs measure the per-message cost that a
 * bandwidth test hides.  What it shares with the other benchmarks is in
 * mpi_bench.c.  Standalone: `mpicc mpi_mbw_mr.c mpi_bench.c`.
 */
#if defined(__has_include)
#if __has_include("mdr_config.h")
#include "mdr_config.h"
#endif
#endif

#include "mpi_bench.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

#define TAG_MR 120
#define TAG_MR_ACK 121
#define DEFAULT_WINDOW 64

static struct {
    long window;
    MPI_Request *reqs;
    MPI_Status *sts;
} mr = {DEFAULT_WINDOW, NULL, NULL};

static const mb_opt_t mr_opts[] = {
    {"--window", MB_OPT_COUNT, &mr.window, 1, 100000},
    {NULL, MB_OPT_FLAG, NULL, 0, 0},
};

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n N %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                         [--window N] [--factor F] [--sizes LIST]\n"
            "                         [--validate] [-h]\n"
            "Multi-pair bandwidth and message rate, OSU osu_mbw_mr semantics: N (even)\n"
            "ranks in N/2 pairs, rank i sending to rank i + N/2 (on two nodes use\n"
            "-ppn N/2 so that every pair spans them).  Prints the sum over the pairs:\n"
            "MB/s (1 MB = 1e6 bytes) and messages per second.\n"
            "  --min SIZE   smallest message (default 1), then x --factor\n"
            "  --max SIZE   largest message (default 16m); suffixes k, m, g (x1024)\n"
            "  --window N   messages in flight per pair and iteration (default 64)\n"
            "  --iters N    timed iterations (windows) for every size (default: 100 up\n"
            "               to 8 KiB, 20 up to 512 KiB, 5 from 1 MiB)\n"
            "  --warmup N   untimed iterations before (default: 10, 2, 1 likewise)\n"
            "  --factor F   next size = size * F (default 2: powers of two)\n"
            "  --sizes LIST only these sizes, in this order (e.g. 64k,1m,4m)\n"
            "  --validate   fill the messages with a pattern and check the last one\n"
            "               every receiver got of every size (not timed)\n"
            "  -h, --help   this text\n",
            argv0);
}

static void mr_header(FILE *f)
{
    fprintf(f, "window %ld per pair; ", mr.window);
}

static double mr_measure(mb_bench_t *b, size_t msg, long warmup, long iters)
{
    unsigned char ack[4] = {0, 0, 0, 0};
    int n = (int)msg, w = (int)mr.window;
    int sender = b->rank < b->nranks / 2;
    double t0 = 0.0, t1, rate = 0.0, sum = 0.0;
    long i, j;

    if (sender)
        mb_fill(b, b->sbuf, msg, (unsigned)(msg + (size_t)b->rank));
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = MPI_Wtime();
        if (sender) {
            for (j = 0; j < w; j++)
                MPI_Isend(b->sbuf, n, MPI_BYTE, b->peer, TAG_MR, MPI_COMM_WORLD, &mr.reqs[j]);
            MPI_Waitall(w, mr.reqs, mr.sts);
            MPI_Recv(ack, 4, MPI_BYTE, b->peer, TAG_MR_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (j = 0; j < w; j++)
                MPI_Irecv(b->rbuf, n, MPI_BYTE, b->peer, TAG_MR, MPI_COMM_WORLD, &mr.reqs[j]);
            MPI_Waitall(w, mr.reqs, mr.sts);
            MPI_Send(ack, 4, MPI_BYTE, b->peer, TAG_MR_ACK, MPI_COMM_WORLD);
        }
    }
    t1 = MPI_Wtime();
    if (sender)
        rate = (double)w * (double)iters / (t1 - t0);
    else
        mb_check(b, b->rbuf, msg, (unsigned)(msg + (size_t)b->peer));
    MPI_Reduce(&rate, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    b->value2 = sum;
    return sum * (double)msg / 1e6;
}

static int mr_setup(mb_bench_t *b)
{
    (void)b;
    mr.reqs = malloc(sizeof(MPI_Request) * (size_t)mr.window);
    mr.sts = malloc(sizeof(MPI_Status) * (size_t)mr.window);
    return mr.reqs && mr.sts ? 0 : -1;
}

static void mr_teardown(mb_bench_t *b)
{
    (void)b;
    free(mr.reqs);
    free(mr.sts);
    mr.reqs = NULL;
    mr.sts = NULL;
}

static const mb_prog_t mr_prog = {
    .title = "madrail MPI multi-pair bandwidth and message rate test (OSU osu_mbw_mr "
             "semantics: windows of Isend per pair, 4-byte ack; sums over the pairs)",
    .column = "MB/s",
    .column2 = "Messages/s",
    .usage = usage,
    .own = mr_opts,
    .header = mr_header,
    .iters = {100, 20, 5},
    .warmup = {10, 2, 1},
    .zero_size = 0,
    .pairs = 1,
    .setup = mr_setup,
    .teardown = mr_teardown,
    .measure = mr_measure,
};

int main(int argc, char **argv)
{
    return mb_main(argc, argv, &mr_prog);
}
