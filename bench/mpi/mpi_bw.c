/*
 * mpi_bw: MPI streaming bandwidth between two ranks with osu_bw's
 * semantics, in our own code: per iteration rank 0 posts a window (default
 * 64) of MPI_Isend of one size and waits for them all, rank 1 posts the
 * same number of MPI_Irecv and waits, then answers with a 4-byte ack that
 * rank 0 receives; bandwidth = size * window * iterations / elapsed, in
 * MB/s with MB = 1e6 bytes, after untimed warm-up iterations.  Output uses
 * the OSU columns ("# Size      Bandwidth (MB/s)").
 *
 * As in osu_bw, all messages of a window use one send and one receive
 * buffer (the receives overlap; every message carries the same bytes, so
 * --validate can still check the result).  Our own code rather than OSU's
 * for the reasons given in mpi_lat.c: same-run 1-rail/2-rail comparison,
 * 16 MiB messages with bounded iteration counts, optional byte check.
 */
#if defined(__has_include)
#if __has_include("mdr_config.h")
#include "mdr_config.h"
#endif
#endif

#include <mpi.h>

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_BW 100
#define TAG_ACK 101
#define DEFAULT_WINDOW 64
#define DEFAULT_MAX ((size_t)16 << 20)

typedef struct {
    size_t min, max;
    long iters, warmup; /* -1: by size */
    long window;
    long factor; /* next size = size * factor */
    int validate;
} opts_t;

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "Usage: mpiexec -n 2 %s [--min SIZE] [--max SIZE] [--iters N] [--warmup N]\n"
            "                       [--window N] [--factor F] [--validate] [-h]\n"
            "Streaming bandwidth (MB/s, 1 MB = 1e6 bytes), OSU osu_bw semantics.\n"
            "  --min SIZE   smallest message (default 1), then x --factor\n"
            "  --max SIZE   largest message (default 16m); suffixes k, m, g (x1024)\n"
            "  --window N   messages in flight per iteration (default 64)\n"
            "  --iters N    timed iterations (windows) for every size (default: 100 up\n"
            "               to 8 KiB, 20 up to 512 KiB, 5 from 1 MiB)\n"
            "  --warmup N   untimed iterations before (default: 10, 2, 1 likewise)\n"
            "  --factor F   next size = size * F (default 2: powers of two)\n"
            "  --validate   fill the messages with a pattern and check the last one\n"
            "               received of every size (not timed)\n"
            "  -h, --help   this text\n",
            argv0);
}

/* "64", "8k", "16m", "1g" -> bytes; 0 on success. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    size_t mult = 1;

    if (!s || !isdigit((unsigned char)*s))
        return -1;
    v = strtoull(s, &end, 10);
    if (*end) {
        switch (tolower((unsigned char)*end)) {
        case 'k': mult = (size_t)1 << 10; break;
        case 'm': mult = (size_t)1 << 20; break;
        case 'g': mult = (size_t)1 << 30; break;
        default: return -1;
        }
        if (end[1] && !(tolower((unsigned char)end[1]) == 'b' && !end[2]) &&
            !(tolower((unsigned char)end[1]) == 'i' && tolower((unsigned char)end[2]) == 'b' &&
              !end[3]))
            return -1;
    }
    if (v > (unsigned long long)INT32_MAX / mult)
        return -1;
    *out = (size_t)v * mult;
    return 0;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    long v;
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 100000000L)
        return -1;
    *out = v;
    return 0;
}

/* 0 ok, 1 help shown, -1 error (message written) */
static int parse_args(int argc, char **argv, opts_t *o, int rank)
{
    int i;
    o->min = 1;
    o->max = DEFAULT_MAX;
    o->iters = -1;
    o->warmup = -1;
    o->validate = 0;
    o->factor = 2;
    o->window = DEFAULT_WINDOW;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (rank == 0)
                usage(stdout, argv[0]);
            return 1;
        } else if (!strcmp(a, "--min")) {
            bad = parse_size(v, &o->min), i++;
        } else if (!strcmp(a, "--max")) {
            bad = parse_size(v, &o->max), i++;
        } else if (!strcmp(a, "--iters")) {
            bad = parse_long(v, &o->iters) || o->iters < 1, i++;
        } else if (!strcmp(a, "--warmup")) {
            bad = parse_long(v, &o->warmup), i++;
        } else if (!strcmp(a, "--window")) {
            bad = parse_long(v, &o->window) || o->window < 1 || o->window > 100000, i++;
        } else if (!strcmp(a, "--factor")) {
            bad = parse_long(v, &o->factor) || o->factor < 2 || o->factor > 1024, i++;
        } else if (!strcmp(a, "--validate")) {
            o->validate = 1;
        } else {
            if (rank == 0)
                fprintf(stderr, "%s: unknown option '%s' (see -h)\n", argv[0], a);
            return -1;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "%s: bad or missing value for %s: '%s'\n", argv[0], a,
                        v ? v : "");
            return -1;
        }
    }
    if (o->min > o->max) {
        if (rank == 0)
            fprintf(stderr, "%s: --min %zu is larger than --max %zu\n", argv[0], o->min, o->max);
        return -1;
    }
    return 0;
}

static long iters_for(const opts_t *o, size_t size)
{
    if (o->iters > 0)
        return o->iters;
    return size <= 8192 ? 100 : size < ((size_t)1 << 20) ? 20 : 5;
}

static long warmup_for(const opts_t *o, size_t size)
{
    if (o->warmup >= 0)
        return o->warmup;
    return size <= 8192 ? 10 : size < ((size_t)1 << 20) ? 2 : 1;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

static size_t count_bad(const unsigned char *p, size_t n, unsigned seed)
{
    size_t i, bad = 0;
    for (i = 0; i < n; i++)
        bad += p[i] != (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
    return bad;
}

static void print_library(void)
{
    char s[MPI_MAX_LIBRARY_VERSION_STRING], *line, *save = NULL;
    int len = 0;
    MPI_Get_library_version(s, &len);
    for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (!strncmp(line, "MPICH Version:", 14) || !strncmp(line, "MPICH Device:", 13) ||
            !strncmp(line, "Open MPI", 8))
            printf("# %s\n", line);
}

int main(int argc, char **argv)
{
    opts_t o;
    int rank, size, rc, peer;
    unsigned char *sbuf = NULL, *rbuf = NULL, ack[4] = {0, 0, 0, 0};
    MPI_Request *reqs = NULL;
    MPI_Status *sts = NULL; /* not MPI_STATUSES_IGNORE: gcc 12 -Wstringop-overflow on MPICH's
                             * prototype; the cost is the same for all runs compared */
    size_t msg;
    long errors = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rc = parse_args(argc, argv, &o, rank);
    if (rc != 0) {
        MPI_Finalize();
        return rc > 0 ? 0 : 1;
    }
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "%s: needs exactly 2 ranks (mpiexec -n 2), got %d\n", argv[0], size);
        MPI_Finalize();
        return 1;
    }
    peer = 1 - rank;
    sbuf = malloc(o.max ? o.max : 1);
    rbuf = malloc(o.max ? o.max : 1);
    reqs = malloc(sizeof(MPI_Request) * (size_t)o.window);
    sts = malloc(sizeof(MPI_Status) * (size_t)o.window);
    if (!sbuf || !rbuf || !reqs || !sts) {
        fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", argv[0], rank, o.max);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    memset(sbuf, 'a', o.max);
    memset(rbuf, 'b', o.max);

    if (rank == 0) {
        printf("# madrail MPI bandwidth test (OSU osu_bw semantics: window of Isend, 4-byte "
               "ack; MB = 1e6 B)\n");
        print_library();
        printf("# window %ld; iterations ", o.window);
        if (o.iters > 0)
            printf("%ld", o.iters);
        else
            printf("100/20/5 (<=8 KiB / <1 MiB / >=1 MiB)");
        if (o.warmup >= 0)
            printf(", warm-up %ld\n", o.warmup);
        else
            printf(", warm-up 10/2/1 by size\n");
        printf("%-10s%18s\n", "# Size", "Bandwidth (MB/s)");
        fflush(stdout);
    }

    for (msg = o.min ? o.min : 1;; msg *= (size_t)o.factor) {
        long iters = iters_for(&o, msg), warmup = warmup_for(&o, msg), i, j;
        double t0 = 0.0, t1;
        int n = (int)msg;

        if (msg > o.max)
            break;
        if (o.validate && rank == 0)
            fill(sbuf, msg, (unsigned)msg);
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < warmup + iters; i++) {
            if (i == warmup)
                t0 = MPI_Wtime();
            if (rank == 0) {
                for (j = 0; j < o.window; j++)
                    MPI_Isend(sbuf, n, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)o.window, reqs, sts);
                MPI_Recv(ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (j = 0; j < o.window; j++)
                    MPI_Irecv(rbuf, n, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall((int)o.window, reqs, sts);
                MPI_Send(ack, 4, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
            }
        }
        t1 = MPI_Wtime();
        if (o.validate && rank == 1) {
            size_t bad = count_bad(rbuf, msg, (unsigned)msg);
            if (bad) {
                fprintf(stderr, "# rank %d: size %zu: %zu bad bytes received\n", rank, msg, bad);
                errors++;
            }
        }
        if (rank == 0) {
            double mb = (double)msg / 1e6 * (double)iters * (double)o.window;
            printf("%-10zu%18.2f\n", msg, mb / (t1 - t0));
            fflush(stdout);
        }
        if (msg >= o.max)
            break;
    }

    {
        long total = 0;
        MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (o.validate && rank == 0)
            printf("# validation: %s\n", total ? "FAILED" : "all sizes byte-exact");
        errors = total;
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
    free(sts);
    MPI_Finalize();
    return errors ? 1 : 0;
}
