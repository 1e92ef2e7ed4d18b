/*
 * mpi_rma: one-sided MPI_Put, MPI_Get and MPI_Accumulate(MPI_SUM) between
 * two ranks, with active-target (fence) and passive-target (lock/unlock,
 * flush) synchronisation, for 64 elements and for 8 MiB.
 *
 * On ch4:madrail RMA goes through MPIDIG active messages whose payload is
 * the whole transfer (MPIDIG never segments), so the 8 MiB cases exercise
 * the netmod's large-AM path; accumulate also checks that concurrent
 * updates from two origins to one target are all applied (element-wise
 * atomicity of MPI_SUM).  Values are 64-bit integers so sums are exact;
 * each window region beyond the transfer is checked untouched.
 */
#include "mpit_common.c"

#define NLARGE ((size_t)1 << 20) /* int64 elements: 8 MiB */
#define SPARE 64                 /* untouched elements after each transfer */

static int64_t val(uint64_t seed, size_t i)
{
    return (int64_t)(mpit_mix(seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull)) >> 20);
}

static void fill_vals(int64_t *p, size_t n, uint64_t seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = val(seed, i);
}

/* elements in [0,n) of p that differ from sum of vals of the seeds */
static size_t check_vals(const int64_t *p, size_t n, const uint64_t *seeds, int nseeds,
                         size_t *first_p)
{
    size_t i, bad = 0, first = n;
    for (i = 0; i < n; i++) {
        int64_t want = 0;
        int k;
        for (k = 0; k < nseeds; k++)
            want += val(seeds[k], i);
        if (p[i] != want) {
            if (first == n)
                first = i;
            bad++;
        }
    }
    *first_p = first;
    return bad;
}

static int64_t *win_base;
static MPI_Win win;
static int64_t *obuf, *gbuf;
static MPI_Comm pcomm; /* ranks 0 and 1 */

static uint64_t sd(int rank, int stage, size_t n)
{
    return mpit_seed((uint64_t)rank + 1, (uint64_t)stage, n);
}

/* Local stores into the own window, in a passive epoch on self. */
static void init_window(size_t n, uint64_t seed)
{
    MPIT_CALL(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mpit_rank, 0, win));
    fill_vals(win_base, n + SPARE, seed);
    MPIT_CALL(MPI_Win_unlock(mpit_rank, win));
}

/* Check the own window: [0,n) == sum(seeds), [n, n+SPARE) == spare seed. */
static long check_window(size_t n, const uint64_t *seeds, int nseeds, uint64_t spare_seed,
                         const char *what)
{
    size_t bad, first, sbad, sfirst;
    long fails = 0;
    MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, mpit_rank, 0, win));
    bad = check_vals(win_base, n, seeds, nseeds, &first);
    sbad = 0;
    sfirst = SPARE;
    {
        size_t i;
        for (i = n; i < n + SPARE; i++)
            if (win_base[i] != val(spare_seed, i)) {
                if (sfirst == SPARE)
                    sfirst = i - n;
                sbad++;
            }
    }
    MPIT_CALL(MPI_Win_unlock(mpit_rank, win));
    if (!mpit_expect(bad == 0, "%s, %zu elements: %zu wrong in the target window, first at %zu",
                     what, n, bad, first))
        fails++;
    if (!mpit_expect(sbad == 0, "%s, %zu elements: %zu elements past the end were written",
                     what, n, sbad))
        fails++;
    return fails;
}

static long run_size(size_t n)
{
    int peer = 1 - mpit_rank, me = mpit_rank;
    long fails = 0;
    size_t first, bad;
    uint64_t seeds[3];
    int cnt = (int)n;
    char what[128];

    /* ---- fence: Put */
    mpit_phase("fence put %zu", n);
    init_window(n, sd(me, 1, n));
    fill_vals(obuf, n, sd(me, 2, n));
    MPIT_CALL(MPI_Win_fence(0, win));
    MPIT_CALL(MPI_Put(obuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
    MPIT_CALL(MPI_Win_fence(0, win));
    seeds[0] = sd(peer, 2, n);
    fails += check_window(n, seeds, 1, sd(me, 1, n), "fence Put");

    /* ---- fence: Get */
    mpit_phase("fence get %zu", n);
    init_window(n, sd(me, 3, n));
    memset(gbuf, 0, n * sizeof(int64_t));
    MPIT_CALL(MPI_Win_fence(0, win));
    MPIT_CALL(MPI_Get(gbuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
    MPIT_CALL(MPI_Win_fence(0, win));
    seeds[0] = sd(peer, 3, n);
    bad = check_vals(gbuf, n, seeds, 1, &first);
    if (!mpit_expect(bad == 0, "fence Get, %zu elements: %zu wrong, first at %zu", n, bad, first))
        fails++;

    /* ---- fence: Accumulate(SUM) from both ranks into both windows */
    mpit_phase("fence accumulate %zu", n);
    init_window(n, sd(me, 4, n));
    fill_vals(obuf, n, sd(me, 5, n));
    MPIT_CALL(MPI_Win_fence(0, win));
    MPIT_CALL(MPI_Accumulate(obuf, cnt, MPI_INT64_T, 0, 0, cnt, MPI_INT64_T, MPI_SUM, win));
    MPIT_CALL(MPI_Accumulate(obuf, cnt, MPI_INT64_T, 1, 0, cnt, MPI_INT64_T, MPI_SUM, win));
    MPIT_CALL(MPI_Win_fence(0, win));
    seeds[0] = sd(me, 4, n);
    seeds[1] = sd(0, 5, n);
    seeds[2] = sd(1, 5, n);
    fails += check_window(n, seeds, 3, sd(me, 4, n), "fence Accumulate(SUM) from 2 origins");

    /* ---- lock exclusive: Put, one origin at a time */
    {
        int origin;
        for (origin = 0; origin <= 1; origin++) {
            mpit_phase("lock put %zu from %d", n, origin);
            init_window(n, sd(me, 6, n));
            MPIT_CALL(MPI_Barrier(pcomm));
            if (me == origin) {
                fill_vals(obuf, n, sd(me, 7, n));
                MPIT_CALL(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win));
                MPIT_CALL(MPI_Put(obuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
                MPIT_CALL(MPI_Win_unlock(peer, win));
            }
            MPIT_CALL(MPI_Barrier(pcomm));
            if (me != origin) {
                seeds[0] = sd(origin, 7, n);
                snprintf(what, sizeof(what), "lock(EXCLUSIVE)/Put/unlock by rank %d", origin);
                fails += check_window(n, seeds, 1, sd(me, 6, n), what);
            }
        }
    }

    /* ---- lock shared: Get from both at once */
    mpit_phase("lock get %zu", n);
    init_window(n, sd(me, 8, n));
    MPIT_CALL(MPI_Barrier(pcomm));
    memset(gbuf, 0, n * sizeof(int64_t));
    MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win));
    MPIT_CALL(MPI_Get(gbuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
    MPIT_CALL(MPI_Win_unlock(peer, win));
    seeds[0] = sd(peer, 8, n);
    bad = check_vals(gbuf, n, seeds, 1, &first);
    if (!mpit_expect(bad == 0, "lock(SHARED)/Get/unlock, %zu elements: %zu wrong, first at %zu",
                     n, bad, first))
        fails++;
    MPIT_CALL(MPI_Barrier(pcomm));

    /* ---- lock shared: concurrent Accumulate(SUM) from both into both */
    mpit_phase("lock accumulate %zu", n);
    init_window(n, sd(me, 9, n));
    fill_vals(obuf, n, sd(me, 10, n));
    MPIT_CALL(MPI_Barrier(pcomm));
    {
        int t;
        for (t = 0; t <= 1; t++) {
            int target = (me + t) % 2; /* rank 0 starts at 0, rank 1 at 1 */
            MPIT_CALL(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
            MPIT_CALL(MPI_Accumulate(obuf, cnt, MPI_INT64_T, target, 0, cnt, MPI_INT64_T,
                                     MPI_SUM, win));
            MPIT_CALL(MPI_Win_unlock(target, win));
        }
    }
    MPIT_CALL(MPI_Barrier(pcomm));
    seeds[0] = sd(me, 9, n);
    seeds[1] = sd(0, 10, n);
    seeds[2] = sd(1, 10, n);
    fails += check_window(n, seeds, 3, sd(me, 9, n),
                          "lock(SHARED)/Accumulate(SUM)/unlock from 2 origins at once");

    /* ---- flush: Put then Get in one epoch, the Get sees the Put */
    mpit_phase("lock put+flush+get %zu", n);
    init_window(n, sd(me, 11, n));
    MPIT_CALL(MPI_Barrier(pcomm));
    if (me == 0) {
        fill_vals(obuf, n, sd(me, 12, n));
        memset(gbuf, 0, n * sizeof(int64_t));
        MPIT_CALL(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win));
        MPIT_CALL(MPI_Put(obuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
        MPIT_CALL(MPI_Win_flush(peer, win));
        MPIT_CALL(MPI_Get(gbuf, cnt, MPI_INT64_T, peer, 0, cnt, MPI_INT64_T, win));
        MPIT_CALL(MPI_Win_unlock(peer, win));
        seeds[0] = sd(me, 12, n);
        bad = check_vals(gbuf, n, seeds, 1, &first);
        if (!mpit_expect(bad == 0, "Put, flush, Get in one epoch, %zu elements: the Get saw %zu "
                         "stale elements, first at %zu", n, bad, first))
            fails++;
    }
    MPIT_CALL(MPI_Barrier(pcomm));
    return fails;
}

/* A window over user memory (MPI_Win_create) rather than MPI-allocated. */
static long run_win_create(void)
{
    size_t n = 4096 + 3;
    int64_t *mem = mpit_malloc((n + SPARE) * sizeof(int64_t));
    int peer = 1 - mpit_rank;
    MPI_Win w;
    long fails = 0;
    size_t i, bad = 0;

    mpit_phase("win_create");
    fill_vals(mem, n + SPARE, sd(mpit_rank, 20, n));
    MPIT_CALL(MPI_Win_create(mem, (MPI_Aint)((n + SPARE) * sizeof(int64_t)), sizeof(int64_t),
                             MPI_INFO_NULL, pcomm, &w));
    fill_vals(obuf, n, sd(mpit_rank, 21, n));
    MPIT_CALL(MPI_Win_fence(0, w));
    MPIT_CALL(MPI_Put(obuf, (int)n, MPI_INT64_T, peer, 0, (int)n, MPI_INT64_T, w));
    MPIT_CALL(MPI_Win_fence(0, w));
    for (i = 0; i < n + SPARE; i++)
        bad += mem[i] != (i < n ? val(sd(peer, 21, n), i) : val(sd(mpit_rank, 20, n), i));
    if (!mpit_expect(bad == 0, "Win_create window, fence Put of %zu elements: %zu wrong", n, bad))
        fails++;
    MPIT_CALL(MPI_Win_free(&w));
    free(mem);
    return fails;
}

int main(int argc, char **argv)
{
    MPI_Comm pair;
    long fails;


    mpit_init(&argc, &argv, "mpi_rma");
    mpit_need_ranks(2);
    MPIT_CALL(MPI_Comm_split(MPI_COMM_WORLD, mpit_rank <= 1 ? 0 : MPI_UNDEFINED, mpit_rank,
                             &pair));
    if (pair != MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN);
        pcomm = pair;
        obuf = mpit_malloc(NLARGE * sizeof(int64_t));
        gbuf = mpit_malloc(NLARGE * sizeof(int64_t));
        MPIT_CALL(MPI_Win_allocate((MPI_Aint)((NLARGE + SPARE) * sizeof(int64_t)),
                                   sizeof(int64_t), MPI_INFO_NULL, pair, &win_base, &win));
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    }

    fails = pair != MPI_COMM_NULL ? run_size(64) : 0;
    mpit_check_all(fails, "64 int64: fence Put/Get/Accumulate, lock Put/Get/Accumulate, flush");
    fails = pair != MPI_COMM_NULL ? run_size(NLARGE) : 0;
    mpit_check_all(fails, "8 MiB (%zu int64): fence Put/Get/Accumulate, lock Put/Get/"
                   "Accumulate, flush", NLARGE);
    fails = pair != MPI_COMM_NULL ? run_win_create() : 0;
    mpit_check_all(fails, "MPI_Win_create over malloc'd memory: fence Put");

    if (pair != MPI_COMM_NULL) {
        MPIT_CALL(MPI_Win_free(&win));
        MPI_Comm_free(&pair);
        free(obuf);
        free(gbuf);
    }
    return mpit_finish();
}
