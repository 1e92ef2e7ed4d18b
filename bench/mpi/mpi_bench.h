/*
 * mpi_bench: what the MPI benchmarks (mpi_lat.c, mpi_bw.c, mpi_bibw.c,
 * mpi_mbw_mr.c) share -- MPI start-up and the rank-count check (2 ranks,
 * or any even number of ranks in pairs), the options every benchmark takes (a table, plus each
 * program's own options as a second table), per-size iteration defaults,
 * the size sweep with OSU-style output, the --validate byte pattern, and
 * the closing validation verdict.  A program describes itself in an
 * mb_prog_t, supplies one measurement function and calls mb_main.
 * Built with each program by the MPI wrapper compiler:
 * `mpicc mpi_lat.c mpi_bench.c` (bench/run_mpi_rails.sh).
 */
#ifndef MDR_MPI_BENCH_H
#define MDR_MPI_BENCH_H

#include <stddef.h>
#include <stdio.h>

/* Largest value a count option (--iters, --warmup, ...) accepts at all. */
#define MB_COUNT_MAX 100000000L

typedef enum {
    MB_OPT_SIZE,  /* "64", "8k", "16m", "1g" (x1024), into a size_t */
    MB_OPT_COUNT, /* decimal in [lo, hi], into a long */
    MB_OPT_FLAG,  /* no value; sets an int to 1 */
    MB_OPT_SIZES  /* "8,1k,64k": a list of sizes, into an mb_sizes_t */
} mb_opt_kind_t;

/* One command-line option; a table ends with name == NULL. */
typedef struct mb_opt {
    const char *name; /* "--window" */
    mb_opt_kind_t kind;
    void *dst; /* size_t *, long * or int *, by kind */
    long lo, hi; /* MB_OPT_COUNT only */
} mb_opt_t;

/* --sizes: the message sizes measured instead of the --min/--factor/--max
 * sweep, in the order given. */
#define MB_SIZES_MAX 32
typedef struct mb_sizes {
    int n;
    size_t v[MB_SIZES_MAX];
} mb_sizes_t;

/* The options every benchmark takes (defaults set by mb_main). */
typedef struct mb_opts {
    size_t min, max;    /* --min (1), --max (16m) */
    long iters, warmup; /* --iters, --warmup; -1: by size (mb_prog_t) */
    long factor;        /* --factor (2): next size = size * factor */
    int validate;       /* --validate */
    mb_sizes_t sizes;   /* --sizes (n == 0: the sweep) */
} mb_opts_t;

struct mb_bench;

typedef struct mb_prog {
    const char *title;  /* first output line, without its "# " */
    const char *column; /* value column header, e.g. "Latency (us)" */
    void (*usage)(FILE *f, const char *argv0);
    const mb_opt_t *own; /* this program's own options, or NULL */
    /* Optional: prints its own parameters (e.g. "window 64; ") into the
     * "# iterations ..." header line, right after the "# ". */
    void (*header)(FILE *f);
    /* Defaults when --iters / --warmup are not given, by message size:
     * [0] up to 8 KiB, [1] below 1 MiB, [2] from 1 MiB. */
    long iters[3], warmup[3];
    int zero_size; /* 1: --min 0 measures 0-byte messages; 0: sweep from 1 */
    /* 0: exactly 2 ranks.  1: any even number of ranks, paired as in
     * osu_mbw_mr: rank i < n/2 with rank i + n/2 (with -ppn n/2 on two
     * nodes every pair spans the nodes). */
    int pairs;
    /* Optional second value column (e.g. "Messages/s"): measure sets
     * b->value2 and each row prints it after the first. */
    const char *column2;
    /* Optional: after the options and the message buffers, before the first
     * size: 0, or -1 when out of memory (reported and MPI_Abort'ed as for
     * the message buffers).  teardown: after the last size. */
    int (*setup)(struct mb_bench *b);
    void (*teardown)(struct mb_bench *b);
    /* One message size: untimed warm-up, then timed iterations, on both
     * ranks.  Returns the value printed for this size (used on rank 0). */
    double (*measure)(struct mb_bench *b, size_t msg, long warmup, long iters);
} mb_prog_t;

typedef struct mb_bench {
    const mb_prog_t *prog;
    const char *argv0;
    mb_opts_t o;
    int rank, peer;
    int nranks;                 /* MPI_COMM_WORLD's size */
    double value2;              /* second column of this size (column2) */
    unsigned char *sbuf, *rbuf; /* o.max bytes each (at least 1) */
    long errors;                /* sizes that failed --validate here */
} mb_bench_t;

/* The whole program: MPI_Init, options (-h answered), the rank-count
 * check, the message buffers, p->setup, header lines and p->measure for
 * every size with a row each on rank 0, p->teardown, the --validate
 * verdict over all ranks, a closing "# end of measurements" line (scripts
 * that must kill a job hanging in MPI_Finalize know from it that the
 * results are complete), MPI_Finalize.  Returns main's exit status. */
int mb_main(int argc, char **argv, const mb_prog_t *p);

/* --validate: fill p[0..n) with the pattern of seed / count the bytes that
 * differ from it, reporting and counting a failed size in b->errors.  Both
 * do nothing without --validate. */
void mb_fill(const mb_bench_t *b, unsigned char *p, size_t n, unsigned seed);
void mb_check(mb_bench_t *b, const unsigned char *p, size_t n, unsigned seed);

#endif /* MDR_MPI_BENCH_H */
