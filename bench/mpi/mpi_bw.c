/*
 * mpi_bw: MPI streaming bandwidth between two ranks with osu_bw's
 * semantics, in our own code: per iteration rank 0 posts a window (default
 * 64) of MPI_Isend of one size and waits for them all, rank 1 posts the
 * same number of MPI_Irecv and waits, then answers with a 4-byte ack that
 * rank 0 receives; bandwidth = size * window * iterations / elapsed, in
 * MB/s with MB = 1e6 bytes, after untimed warm-up iterations.  Output uses
 * the OSU columns ("# Size      Bandwidth (MB/s)").
 *
 * --bibw has osu_bibw's semantics instead: per iteration both ranks post a
 * window of MPI_Irecv, then a window of MPI_Isend, and wait for all of
 * them (no ack); bandwidth counts the bytes of both directions,
 * 2 * size * window * iterations / elapsed on rank 0.  Compare it with the
 * one-way figure of the same run: on a full-duplex link it should be twice
 * as much.
 *
 * As in osu_bw, all messages of a window use one send and one receive
 * buffer (the receives overlap; every message carries the same bytes, so
 * --validate can still check the result).  Our own code rather than OSU's
 * for the reasons given in mpi_lat.c: same-run 1-rail/2-rail comparison,
 * 16 MiB messages with bounded iteration counts, optional byte check.
 * What it shares with mpi_lat.c (options, size sweep, output, validation)
 * is in mpi_bench.c.  Standalone: `mpicc mpi_bw.c mpi_bench.c`.
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

#define TAG_BW 100
#define TAG_ACK 101
#define DEFAULT_WINDOW 64

/* mpi_bw's own state: --window and the requests of one window. */
static struct {
    long window;
    int bibw; /* --bibw: both directions at once (osu_bibw) */
    MPI_Request *reqs; /* 2 * window: receives, then sends */
    MPI_Status *sts; /* not MPI_STATUSES_IGNORE: gcc 12 -Wstringop-overflow on MPICH's
                      * prototype; the cost is the same for all runs compared */
} bw = {DEFAULT_WINDOW, 0, NULL, NULL};

static const mb_opt_t bw_opts[] = {
    {"--window", MB_OPT_COUNT, &bw.window, 1, 100000},
    {"--bibw", MB_OPT_FLAG, &bw.bibw, 0, 0},
    {NULL, MB_OPT_FLAG, NULL, 0, 0},
};

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                       [--window N] [--bibw] [--factor F] [--sizes LIST]\n"
            "                       [--validate] [-h]\n"
            "Streaming bandwidth (MB/s, 1 MB = 1e6 bytes), OSU osu_bw semantics.\n"
            "  --min SIZE   smallest message (default 1), then x --factor\n"
            "  --max SIZE   largest message (default 16m); suffixes k, m, g (x1024)\n"
            "  --window N   messages in flight per iteration (default 64)\n"
            "  --bibw       both directions at once, osu_bibw semantics: each rank posts\n"
            "               a window of receives and a window of sends; MB/s counts the\n"
            "               bytes of both directions\n"
            "  --iters N    timed iterations (windows) for every size (default: 100 up\n"
            "               to 8 KiB, 20 up to 512 KiB, 5 from 1 MiB)\n"
            "  --warmup N   untimed iterations before (default: 10, 2, 1 likewise)\n"
            "  --factor F   next size = size * F (default 2: powers of two)\n"
            "  --sizes LIST only these sizes, in this order (e.g. 64k,1m,4m)\n"
            "  --validate   fill the messages with a pattern and check the last one\n"
            "               received of every size (not timed)\n"
            "  -h, --help   this text\n",
            argv0);
}

static void bw_header(FILE *f)
{
    fprintf(f, "window %ld; %s", bw.window,
            bw.bibw ? "bidirectional (osu_bibw: both directions counted); " : "");
}

static double bw_measure(mb_bench_t *b, size_t msg, long warmup, long iters)
{
    unsigned char ack[4] = {0, 0, 0, 0};
    int n = (int)msg;
    double t0 = 0.0, t1;
    long i, j;

    if (b->rank == 0 || bw.bibw)
        mb_fill(b, b->sbuf, msg, (unsigned)msg);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = MPI_Wtime();
        if (bw.bibw) {
            for (j = 0; j < bw.window; j++)
                MPI_Irecv(b->rbuf, n, MPI_BYTE, b->peer, TAG_BW, MPI_COMM_WORLD, &bw.reqs[j]);
            for (j = 0; j < bw.window; j++)
                MPI_Isend(b->sbuf, n, MPI_BYTE, b->peer, TAG_BW, MPI_COMM_WORLD,
                          &bw.reqs[bw.window + j]);
            MPI_Waitall((int)(2 * bw.window), bw.reqs, bw.sts);
        } else if (b->rank == 0) {
            for (j = 0; j < bw.window; j++)
                MPI_Isend(b->sbuf, n, MPI_BYTE, b->peer, TAG_BW, MPI_COMM_WORLD, &bw.reqs[j]);
            MPI_Waitall((int)bw.window, bw.reqs, bw.sts);
            MPI_Recv(ack, 4, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (j = 0; j < bw.window; j++)
                MPI_Irecv(b->rbuf, n, MPI_BYTE, b->peer, TAG_BW, MPI_COMM_WORLD, &bw.reqs[j]);
            MPI_Waitall((int)bw.window, bw.reqs, bw.sts);
            MPI_Send(ack, 4, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    t1 = MPI_Wtime();
    if (b->rank == 1 || bw.bibw)
        mb_check(b, b->rbuf, msg, (unsigned)msg);
    return (double)msg / 1e6 * (double)iters * (double)bw.window * (bw.bibw ? 2.0 : 1.0) /
           (t1 - t0);
}

static int bw_setup(mb_bench_t *b)
{
    (void)b;
    bw.reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)bw.window);
    bw.sts = malloc(sizeof(MPI_Status) * 2 * (size_t)bw.window);
    return bw.reqs && bw.sts ? 0 : -1;
}

static void bw_teardown(mb_bench_t *b)
{
    (void)b;
    free(bw.reqs);
    free(bw.sts);
    bw.reqs = NULL;
    bw.sts = NULL;
}

static const mb_prog_t bw_prog = {
    .title = "madrail MPI bandwidth test (OSU osu_bw semantics: window of Isend, 4-byte ack; "
             "MB = 1e6 B)",
    .column = "Bandwidth (MB/s)",
    .usage = usage,
    .own = bw_opts,
    .header = bw_header,
    .iters = {100, 20, 5},
    .warmup = {10, 2, 1},
    .zero_size = 0,
    .setup = bw_setup,
    .teardown = bw_teardown,
    .measure = bw_measure,
};

int main(int argc, char **argv)
{
    return mb_main(argc, argv, &bw_prog);
}
