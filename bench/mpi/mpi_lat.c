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
 * an optional byte check (--validate), and --p50 adds the median round
 * trip, which a shared machine moves much less than the mean.  What it shares with mpi_bw.c
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
#include <stdlib.h>
#include <string.h>

#define TAG_LAT 1

/* --p50: also the median of the timed round trips, halved */
static int lat_p50;
static double *lat_rtt; /* --p50: one round trip per timed iteration (rank 0) */
static long lat_rtt_cap;

static const mb_opt_t lat_opts[] = {
    {"--p50", MB_OPT_FLAG, &lat_p50, 0, 0},
    {NULL, MB_OPT_FLAG, NULL, 0, 0},
};

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                        [--factor F] [--sizes LIST] [--validate] [--p50] [-h]\n"
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
            "  --p50        a second column: the median of the timed round trips,\n"
            "               halved (each round trip timed on rank 0: two clock reads\n"
            "               per iteration); on a shared machine the mean moves with\n"
            "               every descheduled round trip, the median much less\n"
            "  -h, --help   this text\n",
            argv0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double lat_measure(mb_bench_t *b, size_t msg, long warmup, long iters)
{
    int n = (int)msg;
    double t0 = 0.0, t1;
    long i;

    mb_fill(b, b->sbuf, msg, (unsigned)(msg + (size_t)b->rank));
    if (lat_p50 && b->rank == 0 && iters > lat_rtt_cap) {
        free(lat_rtt);
        lat_rtt = malloc((size_t)iters * sizeof(*lat_rtt));
        if (lat_rtt == NULL) {
            fprintf(stderr, "mpi_lat: out of memory for %ld round trips\n", iters);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        lat_rtt_cap = iters;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup + iters; i++) {
        if (i == warmup)
            t0 = MPI_Wtime();
        if (b->rank == 0) {
            double ts = lat_p50 ? MPI_Wtime() : 0.0;
            MPI_Send(b->sbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(b->rbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (lat_p50 && i >= warmup)
                lat_rtt[i - warmup] = MPI_Wtime() - ts;
        } else {
            MPI_Recv(b->rbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b->sbuf, n, MPI_BYTE, b->peer, TAG_LAT, MPI_COMM_WORLD);
        }
    }
    t1 = MPI_Wtime();
    mb_check(b, b->rbuf, msg, (unsigned)(msg + (size_t)b->peer));
    if (lat_p50 && b->rank == 0 && iters > 0) {
        qsort(lat_rtt, (size_t)iters, sizeof(*lat_rtt), cmp_double);
        b->value2 = (iters % 2 ? lat_rtt[iters / 2]
                               : (lat_rtt[iters / 2 - 1] + lat_rtt[iters / 2]) / 2.0) *
                    1e6 / 2.0;
    }
    return (t1 - t0) * 1e6 / (2.0 * (double)iters);
}

static mb_prog_t lat_prog = {
    .title = "madrail MPI latency test (OSU osu_latency semantics: half round trip)",
    .column = "Latency (us)",
    .usage = usage,
    .own = lat_opts,
    .iters = {10000, 1000, 100},
    .warmup = {100, 10, 5},
    .zero_size = 1,
    .measure = lat_measure,
};

int main(int argc, char **argv)
{
    int i, rc;

    /* the column is known before mb_main parses the options */
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--p50") == 0)
            lat_prog.column2 = "Median (us)";
    rc = mb_main(argc, argv, &lat_prog);
    free(lat_rtt);
    return rc;
}
