/*
 * mpi_bibw: MPI bidirectional streaming bandwidth between two ranks with
 * osu_bibw's semantics, in our own code: per iteration each rank posts a
 * window (default 64) of MPI_Irecv of one size from the other, then the
 * same number of MPI_Isend to it, and waits for all of them; bandwidth =
 * 2 * size * window * iterations / elapsed (both directions together), in
 * MB/s with MB = 1e6 bytes, after untimed warm-up iterations.  No ack: the
 * receives of the next window can only match the sends of the next window,
 * which the peer posts after its own Waitall.
 *
 * Why it exists next to mpi_bw: a full-duplex rail carries its rate in
 * each direction at once, so the limit of two 1 Gbit rails is about
 * 478 MB/s both ways together; a transport that serves one direction at a
 * time (one progress loop alternating, a put that blocks reads) shows as
 * half of that here while mpi_bw looks perfect.  Receives are posted
 * before sends so neither side's data waits for a receive to match.
 * What it shares with the other benchmarks is in mpi_bench.c.
 * Standalone: `mpicc mpi_bibw.c mpi_bench.c`.
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

#define TAG_BIBW 110
#define DEFAULT_WINDOW 64

/* mpi_bibw's own state: --window and the 2 x window requests. */
static struct {
    long window;
    MPI_Request *reqs; /* [0, window): receives; [window, 2 window): sends */
    MPI_Status *sts;
} bi = {DEFAULT_WINDOW, NULL, NULL};

static const mb_opt_t bibw_opts[] = {
    {"--window", MB_OPT_COUNT, &bi.window, 1, 100000},
    {NULL, MB_OPT_FLAG, NULL, 0, 0},
};

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                        [--window N] [--factor F] [--sizes LIST]\n"
            "                        [--validate] [-h]\n"
            "Bidirectional streaming bandwidth (MB/s both directions together,\n"
            "1 MB = 1e6 bytes), OSU osu_bibw semantics.\n"
            "  --min SIZE   smallest message (default 1), then x --factor\n"
            "  --max SIZE   largest message (default 16m); suffixes k, m, g (x1024)\n"
            "  --window N   messages in flight each way per iteration (default 64)\n"
            "  --iters N    timed iterations (windows) for every size (default: 100 up\n"
            "               to 8 KiB, 20 up to 512 KiB, 5 from 1 MiB)\n"
            "  --warmup N   untimed iterations before (default: 10, 2, 1 likewise)\n"
            "  --factor F   next size = size * F (default 2: powers of two)\n"
            "  --sizes LIST only these sizes, in this order (e.g. 64k,1m,4m)\n"
            "  --validate   fill the messages with a pattern and check the last one\n"
            "               received of every size on both ranks (not timed)\n"
            "  -h, --help   this text\n",
            argv0);
}

static void bibw_header(FILE *f)
{
    fprintf(f, "window %ld each way; ", bi.window);
}

static double bibw_measure(mb_bench_t *b, size_t msg, long warmup, long iters)
{
    int n = (int)msg, w = (int)bi.window;
    double t0 = 0.0, t1;
    long i, j;

    /* each rank sends its own pattern, so a message crossing over from
     * the wrong side (or not at all) fails the check */
    mb_fill(b, b->sbuf, msg, (unsigned)(msg + (size_t)b->rank));
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = MPI_Wtime();
        for (j = 0; j < w; j++)
            MPI_Irecv(b->rbuf, n, MPI_BYTE, b->peer, TAG_BIBW, MPI_COMM_WORLD, &bi.reqs[j]);
        for (j = 0; j < w; j++)
            MPI_Isend(b->sbuf, n, MPI_BYTE, b->peer, TAG_BIBW, MPI_COMM_WORLD, &bi.reqs[w + j]);
        MPI_Waitall(2 * w, bi.reqs, bi.sts);
    }
    t1 = MPI_Wtime();
    mb_check(b, b->rbuf, msg, (unsigned)(msg + (size_t)b->peer));
    /* rank 0's clock: it waited for its sends and for all the peer's data */
    return 2.0 * (double)msg / 1e6 * (double)iters * (double)w / (t1 - t0);
}

static int bibw_setup(mb_bench_t *b)
{
    (void)b;
    bi.reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)bi.window);
    bi.sts = malloc(sizeof(MPI_Status) * 2 * (size_t)bi.window);
    return bi.reqs && bi.sts ? 0 : -1;
}

static void bibw_teardown(mb_bench_t *b)
{
    (void)b;
    free(bi.reqs);
    free(bi.sts);
    bi.reqs = NULL;
    bi.sts = NULL;
}

static const mb_prog_t bibw_prog = {
    .title = "madrail MPI bidirectional bandwidth test (OSU osu_bibw semantics: windows of "
             "Irecv + Isend both ways; MB = 1e6 B, both directions summed)",
    .column = "Bandwidth (MB/s)",
    .usage = usage,
    .own = bibw_opts,
    .header = bibw_header,
    .iters = {100, 20, 5},
    .warmup = {10, 2, 1},
    .zero_size = 0,
    .setup = bibw_setup,
    .teardown = bibw_teardown,
    .measure = bibw_measure,
};

int main(int argc, char **argv)
{
    return mb_main(argc, argv, &bibw_prog);
}
