/*
 * mpi_coll: the common collectives over the netmod, at any number of ranks
 * (the runner uses 2, 3 and 4), with a small and a 4 MiB payload.
 *
 * With shared memory off, MPICH's collective algorithms turn into many
 * point-to-point messages between every pair of ranks, concurrently, at
 * sizes that cross every protocol edge (e.g. Allreduce's reduce-scatter
 * chunks, Bcast's scatter+allgather pieces): a sturdier mix than a
 * hand-written pattern.  Every result is checked exactly (64-bit integer
 * sums), every root is tried, and Gatherv leaves gaps that must stay
 * untouched.  Barrier is checked as an ordering fact when all ranks share
 * a host clock: nobody leaves before the last one entered.
 */
#include "mpit_common.c"

#define BIG ((size_t)4 * 1024 * 1024)
#define GAPV ((int64_t)-7)

static int64_t val(uint64_t seed, size_t i)
{
    return (int64_t)(mpit_mix(seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull)) >> 24);
}

static uint64_t sd(int op, int rank, size_t n)
{
    return mpit_seed((uint64_t)op, (uint64_t)rank + 1, n);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int same_host(void)
{
    char host[MPI_MAX_PROCESSOR_NAME], *all;
    int len, r, same = 1;
    memset(host, 0, sizeof(host));
    MPI_Get_processor_name(host, &len);
    all = mpit_malloc((size_t)mpit_size * MPI_MAX_PROCESSOR_NAME);
    MPIT_CALL(MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                            MPI_CHAR, MPI_COMM_WORLD));
    for (r = 0; r < mpit_size; r++)
        same &= strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, host) == 0;
    free(all);
    return same;
}

static void test_barrier(void)
{
    int k, local = same_host();
    long bad = 0;
    double t[2], *all = mpit_malloc(sizeof(double) * 2 * (size_t)mpit_size);

    for (k = 0; k < 5; k++) {
        int r;
        double max_in = 0, min_out = 1e300;
        mpit_phase("barrier %d", k);
        /* a different rank arrives last each time */
        if (mpit_rank == k % mpit_size)
            mpit_sleep_ms(60);
        t[0] = mono_now();
        MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
        t[1] = mono_now();
        MPIT_CALL(MPI_Allgather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD));
        for (r = 0; r < mpit_size; r++) {
            if (all[2 * r] > max_in)
                max_in = all[2 * r];
            if (all[2 * r + 1] < min_out)
                min_out = all[2 * r + 1];
        }
        if (local && mpit_rank == 0)
            bad += !mpit_expect(min_out >= max_in, "Barrier %d: a rank left %.3f ms before the "
                                "last one entered", k, (max_in - min_out) * 1e3);
    }
    free(all);
    mpit_check_all(bad, "Barrier x5%s", local ? " (exit after last entry, one host clock)"
                                                : " (no ordering check: ranks on several hosts)");
}

static void test_bcast(size_t nbytes, char *buf)
{
    int root;
    long bad = 0;
    for (root = 0; root < mpit_size; root++) {
        size_t nb, first;
        mpit_phase("bcast %zu root %d", nbytes, root);
        if (mpit_rank == root)
            mpit_fill(buf, nbytes, sd(1, root, nbytes));
        else
            memset(buf, 0, nbytes);
        MPIT_CALL(MPI_Bcast(buf, (int)nbytes, MPI_BYTE, root, MPI_COMM_WORLD));
        nb = mpit_verify(buf, nbytes, sd(1, root, nbytes), &first);
        bad += !mpit_expect(nb == 0, "Bcast %zu bytes root %d: %zu bad bytes from %zu", nbytes,
                            root, nb, first);
    }
    mpit_check_all(bad, "Bcast %zu bytes from every root", nbytes);
}

static size_t check_sum(const int64_t *p, size_t n, int op, int nranks, size_t *first_p,
                        int is_max)
{
    size_t i, bad = 0;
    *first_p = n;
    for (i = 0; i < n; i++) {
        int64_t want = is_max ? INT64_MIN : 0;
        int r;
        for (r = 0; r < nranks; r++) {
            int64_t v = val(sd(op, r, n), i);
            if (is_max)
                want = v > want ? v : want;
            else
                want += v;
        }
        if (p[i] != want) {
            if (*first_p == n)
                *first_p = i;
            bad++;
        }
    }
    return bad;
}

static void fill64(int64_t *p, size_t n, uint64_t seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = val(seed, i);
}

static void test_reduce(size_t n, int64_t *sb, int64_t *rb)
{
    int root;
    long bad = 0;
    size_t nb, first;

    for (root = 0; root < mpit_size; root++) {
        mpit_phase("reduce %zu root %d", n, root);
        fill64(sb, n, sd(2, mpit_rank, n));
        memset(rb, 0, n * sizeof(int64_t));
        MPIT_CALL(MPI_Reduce(sb, rb, (int)n, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD));
        if (mpit_rank == root) {
            nb = check_sum(rb, n, 2, mpit_size, &first, 0);
            bad += !mpit_expect(nb == 0, "Reduce(SUM) %zu int64 root %d: %zu wrong from %zu", n,
                                root, nb, first);
        }
    }
    mpit_check_all(bad, "Reduce(SUM) %zu int64 (%zu bytes) to every root", n, n * 8);

    bad = 0;
    mpit_phase("allreduce sum %zu", n);
    fill64(sb, n, sd(3, mpit_rank, n));
    MPIT_CALL(MPI_Allreduce(sb, rb, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    nb = check_sum(rb, n, 3, mpit_size, &first, 0);
    bad += !mpit_expect(nb == 0, "Allreduce(SUM) %zu int64: %zu wrong from %zu", n, nb, first);
    mpit_phase("allreduce max in place %zu", n);
    fill64(rb, n, sd(4, mpit_rank, n));
    MPIT_CALL(MPI_Allreduce(MPI_IN_PLACE, rb, (int)n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    nb = check_sum(rb, n, 4, mpit_size, &first, 1);
    bad += !mpit_expect(nb == 0, "Allreduce(MAX, IN_PLACE) %zu int64: %zu wrong from %zu", n, nb,
                        first);
    mpit_check_all(bad, "Allreduce SUM and MAX/IN_PLACE, %zu int64 (%zu bytes)", n, n * 8);
}

/* block: bytes per rank pair */
static void test_alltoall(size_t block, char *sb, char *rb)
{
    int r;
    long bad = 0;
    size_t nb, first;

    mpit_phase("alltoall %zu", block);
    for (r = 0; r < mpit_size; r++)
        mpit_fill(sb + (size_t)r * block, block, mpit_seed(5, (uint64_t)mpit_rank * 64 + (uint64_t)r, block));
    memset(rb, 0, block * (size_t)mpit_size);
    MPIT_CALL(MPI_Alltoall(sb, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, MPI_COMM_WORLD));
    for (r = 0; r < mpit_size; r++) {
        nb = mpit_verify(rb + (size_t)r * block, block,
                         mpit_seed(5, (uint64_t)r * 64 + (uint64_t)mpit_rank, block), &first);
        bad += !mpit_expect(nb == 0, "Alltoall %zu bytes/pair: block from rank %d: %zu bad from "
                            "%zu", block, r, nb, first);
    }
    mpit_check_all(bad, "Alltoall %zu bytes per pair (%zu per rank)", block,
                   block * (size_t)mpit_size);

    bad = 0;
    mpit_phase("allgather %zu", block);
    mpit_fill(sb, block, sd(6, mpit_rank, block));
    memset(rb, 0, block * (size_t)mpit_size);
    MPIT_CALL(MPI_Allgather(sb, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, MPI_COMM_WORLD));
    for (r = 0; r < mpit_size; r++) {
        nb = mpit_verify(rb + (size_t)r * block, block, sd(6, r, block), &first);
        bad += !mpit_expect(nb == 0, "Allgather %zu bytes: block of rank %d: %zu bad from %zu",
                            block, r, nb, first);
    }
    mpit_check_all(bad, "Allgather %zu bytes per rank", block);
}

/* Gatherv: rank r contributes base + r*step int64 (rank 1 contributes 0
 * when `zero1`); the root leaves a gap of 3 elements between blocks. */
static void test_gatherv(size_t base, size_t step, int64_t *sb, int64_t *rb)
{
    int *counts = mpit_malloc(sizeof(int) * (size_t)mpit_size);
    int *displs = mpit_malloc(sizeof(int) * (size_t)mpit_size);
    size_t total = 0, i, nb;
    int r, root;
    long bad = 0;

    for (r = 0; r < mpit_size; r++) {
        counts[r] = r == 1 ? 0 : (int)(base + (size_t)r * step);
        displs[r] = (int)total + 3 * r;
        total += (size_t)counts[r];
    }
    total += 3 * (size_t)mpit_size;
    for (root = 0; root < mpit_size; root++) {
        mpit_phase("gatherv base %zu root %d", base, root);
        fill64(sb, (size_t)counts[mpit_rank], sd(7, mpit_rank, base));
        for (i = 0; i < total; i++)
            rb[i] = GAPV;
        MPIT_CALL(MPI_Gatherv(sb, counts[mpit_rank], MPI_INT64_T, rb, counts, displs, MPI_INT64_T,
                              root, MPI_COMM_WORLD));
        if (mpit_rank != root)
            continue;
        nb = 0;
        for (r = 0; r < mpit_size; r++) {
            size_t end = r + 1 < mpit_size ? (size_t)displs[r + 1] : total;
            for (i = (size_t)displs[r]; i < end; i++) {
                size_t k = i - (size_t)displs[r];
                int64_t want = k < (size_t)counts[r] ? val(sd(7, r, base), k) : GAPV;
                nb += rb[i] != want;
            }
        }
        bad += !mpit_expect(nb == 0, "Gatherv (%zu + r*%zu int64, rank 1 empty) root %d: %zu "
                            "wrong elements (data or gaps)", base, step, root, nb);
    }
    mpit_check_all(bad, "Gatherv %zu + r*%zu int64 per rank, rank 1 sends 0, gaps kept, every "
                   "root", base, step);
    free(counts);
    free(displs);
}

int main(int argc, char **argv)
{
    char *b1, *b2;
    double t0;

    mpit_init(&argc, &argv, "mpi_coll");
    if (mpit_rank == 0)
        printf("# %d ranks\n", mpit_size);
    b1 = mpit_malloc(BIG + 64 * sizeof(int64_t));
    b2 = mpit_malloc(BIG * 2 + 64 * sizeof(int64_t));

    t0 = MPI_Wtime();
    test_barrier();

    test_bcast(1, b1);
    test_bcast(1000, b1);
    test_bcast(BIG, b1);

    test_reduce(37, (int64_t *)b1, (int64_t *)b2);
    test_reduce(BIG / 8, (int64_t *)b1, (int64_t *)b2);

    test_alltoall(13, b1, b2);
    /* 4 MiB per rank in total, split over the peers */
    test_alltoall(BIG / (size_t)mpit_size, b1, b2);

    test_gatherv(5, 2, (int64_t *)b1, (int64_t *)b2);
    /* largest contribution (rank size-1) below 2 MiB of int64, root total
     * about 4 MiB at 4 ranks */
    test_gatherv(BIG / 8 / 4, 1024, (int64_t *)b1, (int64_t *)b2);

    if (mpit_rank == 0)
        printf("# %d ranks: %.2f s\n", mpit_size, MPI_Wtime() - t0);
    free(b1);
    free(b2);
    return mpit_finish();
}
