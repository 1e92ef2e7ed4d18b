/*
 * mpi_lat: MPI point-to-point latency between two ranks with osu_latency's
 * semantics, in our own code: rank 0 MPI_Send + MPI_Recv, rank 1 MPI_Recv
 * + MPI_Send, same size both ways; latency = elapsed / (2 * iterations),
 * i.e. half the round trip, after untimed warm-up iterations.  Output uses
 * the OSU columns ("# Size          Latency (us)") so existing OSU parsing
 * and plotting works on it.
 *
 * Our own rather than OSU's because the project compares ch4:madrail over
 * one and two rails in one run (bench/run_mpi_rails.sh), needs sizes up to
 * 16 MiB with iteration counts that stay bounded on a 2-core machine, and
 * an optional byte check (--validate).  What it shares with mpi_bw.c
 * (options, size sweep, output, validation) is in mpi_bench.c.
 * Standalone: `mpicc mpi_lat.c mpi_bench.c`.
 */
#if defined(__has_include)
#if __has_include("mdr_config.h")
#include "mdr_config.h"
#endif
#endif

#include "mpi_bench.h"

#include <mpi.h>

#include <stdio.h>

#define TAG_LAT 1

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                        [--factor F] [--sizes LIST] [--validate] [-h]\n"
            "Ping-pong latency (half round trip, microseconds), OSU osu_latency semantics.\n"
            "  --min SIZE   smallest message (default 1; 0 allowed), then x --factor\n"
            "  --max SIZE   largest message (default 16m); suffixes k, m, g (x1024)\n"
            "  --iters N    timed iterations for every size (default: 10000 up to 8 KiB,\n"
            "               1000 up to 512 KiB, 100 from 1 MiB)\n"
            "  --warmup N   untimed iterations before (default: 100, 10, 5 likewise)\n"
            "  --factor F   next size = size * F (default 2: powers of two)\n"
            "  --sizes LIST only these sizes, in this order (e.g. 64k,1m,4m)\n"
            "  --validate   fill each message with a pattern and check the last one of\n"
            "               every size on both ranks (not timed)\n"
            "  -h, --help   this text\n",
            argv0);
}

static double lat_measure(mb_bench_t *b, size_t msg, long warmup, long iters)
{
    int n = (int)msg;
    double t0 = 0.0, t1;
    long i;

    mb_fill(b, b->sbuf, msg, (unsigned)(msg + (size_t)b->rank));
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = MPI_Wtime();
        if (b->rank == 0) {
            MPI_Send(b->sbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(b->rbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b->rbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b->sbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD);
        }
    }
    t1 = MPI_Wtime();
    mb_check(b, b->rbuf, msg, (unsigned)(msg + (size_t)b->peer));
    return (t1 - t0) * 1e6 / (2.0 * (double)iters);
}

static const mb_prog_t lat_prog = {
    .title = "madrail MPI latency test (OSU osu_latency semantics: half round trip)",
    .column = "Latency (us)",
    .usage = usage,
    .iters = {10000, 1000, 100},
    .warmup = {100, 10, 5},
    .zero_size = 1,
    .measure = lat_measure,
};

int main(int argc, char **argv)
{
    return mb_main(argc, argv, &lat_prog);
}
