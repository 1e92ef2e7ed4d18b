/*
 * mpi_bench: the code the MPI benchmarks share (see mpi_bench.h).  A
 * plain source file compiled together with each benchmark by the MPI
 * wrapper compiler, not a library: the benchmarks are built outside the
 * madrail build, against whichever MPI is being measured.
 */
#if defined(__has_include)
#if __has_include("mdr_config.h")
#include "mdr_config.h"
#endif
#endif

#include "mpi_bench.h"

#include <mpi.h>

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX ((size_t)16 << 20)

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

/* "8,1k,64k" -> sizes; 0 on success. */
static int parse_sizes(const char *s, mb_sizes_t *out)
{
    char buf[512], *tok, *save = NULL;

    if (!s || strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    out->n = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MB_SIZES_MAX || parse_size(tok, &out->v[out->n]))
            return -1;
        out->n++;
    }
    return out->n > 0 ? 0 : -1;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    long v;
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    v = strtol(s, &end, 10);
    if (*end || v < 0 || v > MB_COUNT_MAX)
        return -1;
    *out = v;
    return 0;
}

static const mb_opt_t *find_opt(const mb_opt_t *t, const char *name)
{
    for (; t && t->name; t++)
        if (!strcmp(t->name, name))
            return t;
    return NULL;
}

/* Sets *opt from its value v; nonzero if v is bad or missing. */
static int set_opt(const mb_opt_t *opt, const char *v)
{
    long *l = opt->dst;

    switch (opt->kind) {
    case MB_OPT_SIZE: return parse_size(v, opt->dst) != 0;
    case MB_OPT_COUNT: return parse_long(v, l) || *l < opt->lo || *l > opt->hi;
    case MB_OPT_FLAG: *(int *)opt->dst = 1; return 0;
    case MB_OPT_SIZES: return parse_sizes(v, opt->dst) != 0;
    }
    return 1;
}

/* 0 ok, 1 help shown, -1 error (message written) */
static int parse_args(int argc, char **argv, const mb_prog_t *p, mb_opts_t *o, int rank)
{
    const mb_opt_t common[] = {
        {"--min", MB_OPT_SIZE, &o->min, 0, 0},
        {"--max", MB_OPT_SIZE, &o->max, 0, 0},
        {"--iters", MB_OPT_COUNT, &o->iters, 1, MB_COUNT_MAX},
        {"--warmup", MB_OPT_COUNT, &o->warmup, 0, MB_COUNT_MAX},
        {"--factor", MB_OPT_COUNT, &o->factor, 2, 1024},
        {"--validate", MB_OPT_FLAG, &o->validate, 0, 0},
        {"--sizes", MB_OPT_SIZES, &o->sizes, 0, 0},
        {NULL, MB_OPT_FLAG, NULL, 0, 0},
    };
    int i;

    o->min = 1;
    o->max = DEFAULT_MAX;
    o->iters = -1;
    o->warmup = -1;
    o->validate = 0;
    o->factor = 2;
    o->sizes.n = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const mb_opt_t *opt;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (rank == 0)
                p->usage(stdout, argv[0]);
            return 1;
        }
        opt = find_opt(common, a);
        if (!opt)
            opt = find_opt(p->own, a);
        if (!opt) {
            if (rank == 0)
                fprintf(stderr, "%s: unknown option '%s' (see -h)\n", argv[0], a);
            return -1;
        }
        if (opt->kind != MB_OPT_FLAG)
            i++;
        if (set_opt(opt, v)) {
            if (rank == 0)
                fprintf(stderr, "%s: bad or missing value for %s: '%s'\n", argv[0], a,
                        v ? v : "");
            return -1;
        }
    }
    if (o->sizes.n > 0) {
        /* the buffers are o->max bytes: the largest size listed */
        o->max = 0;
        for (i = 0; i < o->sizes.n; i++) {
            if (o->sizes.v[i] == 0 && !p->zero_size) {
                if (rank == 0)
                    fprintf(stderr, "%s: --sizes: 0-byte messages are not measured here\n",
                            argv[0]);
                return -1;
            }
            if (o->sizes.v[i] > o->max)
                o->max = o->sizes.v[i];
        }
        o->min = o->max;
        for (i = 0; i < o->sizes.n; i++)
            if (o->sizes.v[i] < o->min)
                o->min = o->sizes.v[i];
    }
    if (o->min > o->max) {
        if (rank == 0)
            fprintf(stderr, "%s: --min %zu is larger than --max %zu\n", argv[0], o->min, o->max);
        return -1;
    }
    return 0;
}

static void nomem(const mb_bench_t *b);

/* MPI_Init, options, the 2-rank check, and the two message buffers.
 * Returns 0 to go on; otherwise MPI is finalized (or -h was answered) and
 * the program returns *status. */
static int begin(int *argc, char ***argv, const mb_prog_t *p, mb_bench_t *b, int *status)
{
    int size, rc;

    memset(b, 0, sizeof(*b));
    b->prog = p;
    MPI_Init(argc, argv);
    b->argv0 = (*argv)[0];
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    b->nranks = size;
    rc = parse_args(*argc, *argv, p, &b->o, b->rank);
    if (rc != 0) {
        MPI_Finalize();
        *status = rc > 0 ? 0 : 1;
        return -1;
    }
    if (p->pairs ? size < 2 || size % 2 : size != 2) {
        if (b->rank == 0)
            fprintf(stderr, "%s: needs %s, got %d\n", b->argv0,
                    p->pairs ? "an even number of ranks (pairs: rank i and i + n/2)"
                             : "exactly 2 ranks (mpiexec -n 2)",
                    size);
        MPI_Finalize();
        *status = 1;
        return -1;
    }
    b->peer = b->rank < size / 2 ? b->rank + size / 2 : b->rank - size / 2;
    b->sbuf = malloc(b->o.max ? b->o.max : 1);
    b->rbuf = malloc(b->o.max ? b->o.max : 1);
    if (!b->sbuf || !b->rbuf)
        nomem(b);
    memset(b->sbuf, 'a', b->o.max);
    memset(b->rbuf, 'b', b->o.max);
    return 0;
}

static void nomem(const mb_bench_t *b)
{
    fprintf(stderr, "%s: rank %d: cannot allocate 2 x %zu bytes\n", b->argv0, b->rank,
            b->o.max);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; this tells the compiler so */
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

static void print_header(const mb_bench_t *b)
{
    const mb_prog_t *p = b->prog;

    printf("# %s\n", p->title);
    print_library();
    printf("# ");
    if (p->header)
        p->header(stdout);
    printf("iterations ");
    if (b->o.iters > 0)
        printf("%ld", b->o.iters);
    else
        printf("%ld/%ld/%ld (<=8 KiB / <1 MiB / >=1 MiB)", p->iters[0], p->iters[1],
               p->iters[2]);
    if (b->o.warmup >= 0)
        printf(", warm-up %ld\n", b->o.warmup);
    else
        printf(", warm-up %ld/%ld/%ld by size\n", p->warmup[0], p->warmup[1], p->warmup[2]);
    if (p->pairs)
        printf("# %d ranks, %d pairs (rank i sends to rank i + %d)\n", b->nranks, b->nranks / 2,
               b->nranks / 2);
    printf("%-10s%18s", "# Size", p->column);
    if (p->column2)
        printf("%18s", p->column2);
    printf("\n");
    fflush(stdout);
}

/* The default of --iters or --warmup for one size: def[] by size class. */
static long by_size(const long def[3], size_t size)
{
    return size <= 8192 ? def[0] : size < ((size_t)1 << 20) ? def[1] : def[2];
}

/* p->measure for one size on every rank, and its row on rank 0. */
static void measure_one(mb_bench_t *b, size_t msg)
{
    const mb_prog_t *p = b->prog;
    long iters = b->o.iters > 0 ? b->o.iters : by_size(p->iters, msg);
    long warmup = b->o.warmup >= 0 ? b->o.warmup : by_size(p->warmup, msg);
    double v;

    b->value2 = 0.0;
    v = p->measure(b, msg, warmup, iters);
    if (b->rank == 0) {
        printf("%-10zu%18.2f", msg, v);
        if (p->column2)
            printf("%18.2f", b->value2);
        printf("\n");
        fflush(stdout);
    }
}

/* Header lines on rank 0, then a row for every size: the --sizes list in
 * its order, or --min, x --factor, ..., up to --max. */
static void sweep(mb_bench_t *b)
{
    const mb_prog_t *p = b->prog;
    size_t msg = b->o.min || p->zero_size ? b->o.min : 1;
    int i;

    if (b->rank == 0)
        print_header(b);
    if (b->o.sizes.n > 0) {
        for (i = 0; i < b->o.sizes.n; i++)
            measure_one(b, b->o.sizes.v[i]);
        return;
    }
    for (;; msg = msg ? msg * (size_t)b->o.factor : 1) {
        if (msg > b->o.max)
            break;
        measure_one(b, msg);
        if (msg >= b->o.max)
            break;
    }
}

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

void mb_fill(const mb_bench_t *b, unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    if (!b->o.validate)
        return;
    for (i = 0; i < n; i++)
        p[i] = pattern(i, seed);
}

void mb_check(mb_bench_t *b, const unsigned char *p, size_t n, unsigned seed)
{
    size_t i, bad = 0;
    if (!b->o.validate)
        return;
    for (i = 0; i < n; i++)
        bad += p[i] != pattern(i, seed);
    if (bad) {
        fprintf(stderr, "# rank %d: size %zu: %zu bad bytes received\n", b->rank, n, bad);
        b->errors++;
    }
}

/* Sums the errors of both ranks, prints the verdict under --validate, frees
 * the buffers and finalizes MPI.  Returns the exit status. */
static int end(mb_bench_t *b)
{
    long total = 0;

    MPI_Allreduce(&b->errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (b->o.validate && b->rank == 0)
        printf("# validation: %s\n", total ? "FAILED" : "all sizes byte-exact");
    if (b->rank == 0) {
        printf("# end of measurements\n");
        fflush(stdout);
    }
    free(b->sbuf);
    free(b->rbuf);
    b->sbuf = b->rbuf = NULL;
    MPI_Finalize();
    return total ? 1 : 0;
}

int mb_main(int argc, char **argv, const mb_prog_t *p)
{
    mb_bench_t b;
    int status;

    if (begin(&argc, &argv, p, &b, &status))
        return status;
    if (p->setup && p->setup(&b))
        nomem(&b);
    sweep(&b);
    if (p->teardown)
        p->teardown(&b);
    return end(&b);
}
