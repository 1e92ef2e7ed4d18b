/*
 * mpi_cluster: every rank exchanges checksummed messages with every other
 * rank, across the nodes of the namespace cluster (test/cluster/cluster.sh),
 * so that the same job moves data both inside a node (MPICH's shared
 * memory) and between nodes (the netmod: madrail's rails).
 *
 *   mpiexec ... -n NODES*PPN -ppn PPN mpi_cluster NODES PPN [MAXSIZE_KIB]
 *
 * First the placement is checked, because a cluster whose nodes share a
 * host name would let shared memory carry everything and prove nothing:
 * the processor names must be NODES distinct names with PPN ranks each,
 * and MPI_Comm_split_type(SHARED) must group exactly the ranks of one name.
 * Then two rounds of an all-pairs exchange (sizes 1 B to MAXSIZE, default
 * 4 MiB, all in flight at once): every byte is checked against its pattern
 * and the FNV-1a checksum the sender ships in a second message.  Each rank
 * counts how many payload bytes it sent to other nodes and inside its node,
 * and rank 0 prints them, a line a rank:
 *   mpi_cluster: rank R host H pid P inter_bytes N intra_bytes M
 * which the runner (cl_mpi.sh) sets against the per-rail statistics that
 * libmadrail prints at finalize (MADRAIL_STATS=1): the rails must carry
 * the inter-node bytes and not the intra-node ones.  Plain MPI-3: it also
 * runs on Debian's MPICH and Open MPI (cl_peers.sh).
 */
#include "../mpi/mpit_common.c"

#define TAG_DATA 71
#define TAG_SUM 72
#define ROUNDS 2
#define NAMELEN MPI_MAX_PROCESSOR_NAME

int main(int argc, char **argv)
{
    static const size_t base_sizes[] = {1, 8, 1000, 4096, 65536, 262144, 1048576, 4194304};
    size_t sizes[sizeof(base_sizes) / sizeof(base_sizes[0])];
    int nsizes = 0, nodes, ppn, i, round, s;
    size_t maxsize = (size_t)4 << 20;
    char name[NAMELEN + 1] = "", *names;
    int namelen = 0, nlocal = 0;
    unsigned long long inter = 0, intra = 0;
    MPI_Comm shm;

    mpit_init(&argc, &argv, "mpi_cluster");
    if (argc < 3 || (nodes = atoi(argv[1])) < 1 || (ppn = atoi(argv[2])) < 1) {
        if (mpit_rank == 0)
            printf("usage: mpi_cluster NODES PPN [MAXSIZE_KIB]\n");
        mpit_skip("bad arguments");
    }
    if (argc > 3 && atol(argv[3]) > 0)
        maxsize = (size_t)atol(argv[3]) << 10;
    for (s = 0; s < (int)(sizeof(base_sizes) / sizeof(base_sizes[0])); s++)
        if (base_sizes[s] <= maxsize)
            sizes[nsizes++] = base_sizes[s];

    /* ---------------------------------------------------- placement */
    mpit_phase("placement");
    MPIT_CALL(MPI_Get_processor_name(name, &namelen));
    names = mpit_malloc((size_t)mpit_size * (NAMELEN + 1));
    MPIT_CALL(MPI_Allgather(name, NAMELEN + 1, MPI_CHAR, names, NAMELEN + 1, MPI_CHAR,
                            MPI_COMM_WORLD));
    {
        int distinct = 0, max_per = 0, min_per = mpit_size, j;
        for (i = 0; i < mpit_size; i++) {
            int first = 1, cnt = 0;
            for (j = 0; j < mpit_size; j++) {
                if (strcmp(names + (size_t)i * (NAMELEN + 1), names + (size_t)j * (NAMELEN + 1)) == 0) {
                    cnt++;
                    if (j < i)
                        first = 0;
                }
            }
            if (first) {
                distinct++;
                if (cnt > max_per)
                    max_per = cnt;
                if (cnt < min_per)
                    min_per = cnt;
            }
            if (strcmp(names + (size_t)i * (NAMELEN + 1), name) == 0)
                nlocal++;
        }
        if (mpit_rank == 0)
            mpit_check(distinct == nodes && min_per == ppn && max_per == ppn,
                       "%d ranks on %d hosts (expected %d), %d..%d ranks a host (expected %d)",
                       mpit_size, distinct, nodes, min_per, max_per, ppn);
    }
    MPIT_CALL(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm));
    {
        int shm_size = 0;
        long bad;
        MPIT_CALL(MPI_Comm_size(shm, &shm_size));
        bad = shm_size != nlocal;
        if (bad)
            printf("FAIL - [r%d] shared-memory communicator has %d ranks, host %s has %d\n",
                   mpit_rank, shm_size, name, nlocal);
        mpit_check_all(bad, "MPI_COMM_TYPE_SHARED groups exactly the ranks of one host");
        MPIT_CALL(MPI_Comm_free(&shm));
    }

    /* ---------------------------------------------------- all pairs */
    {
        int npeers = mpit_size - 1, k;
        size_t total = 0;
        uint8_t **sbuf = calloc((size_t)mpit_size, sizeof(*sbuf));
        uint8_t **rbuf = calloc((size_t)mpit_size, sizeof(*rbuf));
        uint64_t *ssum = calloc((size_t)mpit_size, sizeof(*ssum));
        uint64_t *rsum = calloc((size_t)mpit_size, sizeof(*rsum));
        MPI_Request *reqs = calloc((size_t)4 * (size_t)mpit_size, sizeof(*reqs));
        long bad = 0;

        if (!sbuf || !rbuf || !ssum || !rsum || !reqs) {
            printf("FAIL - [r%d] out of memory\n", mpit_rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (s = 0; s < nsizes; s++)
            total += sizes[s];
        for (i = 0; i < mpit_size; i++) {
            if (i == mpit_rank)
                continue;
            sbuf[i] = mpit_malloc(total);
            rbuf[i] = mpit_malloc(total);
        }
        for (round = 0; round < ROUNDS; round++) {
            for (s = 0; s < nsizes; s++) {
                size_t sz = sizes[s];
                int nreq = 0;
                mpit_phase("round %d, size %zu: all pairs", round, sz);
                for (i = 0; i < mpit_size; i++) {
                    if (i == mpit_rank)
                        continue;
                    memset(rbuf[i], 0, sz);
                    MPIT_CALL(MPI_Irecv(rbuf[i], (int)sz, MPI_BYTE, i, TAG_DATA, MPI_COMM_WORLD,
                                        &reqs[nreq++]));
                    MPIT_CALL(MPI_Irecv(&rsum[i], 1, MPI_UINT64_T, i, TAG_SUM, MPI_COMM_WORLD,
                                        &reqs[nreq++]));
                }
                for (k = 1; k <= npeers; k++) {
                    /* a different first peer for every rank */
                    int to = (mpit_rank + k) % mpit_size;
                    mpit_fill(sbuf[to], sz, mpit_seed(sz, (uint64_t)mpit_rank * 64 + (uint64_t)to,
                                                      (uint64_t)round));
                    ssum[to] = mpit_checksum(sbuf[to], sz);
                    MPIT_CALL(MPI_Isend(sbuf[to], (int)sz, MPI_BYTE, to, TAG_DATA, MPI_COMM_WORLD,
                                        &reqs[nreq++]));
                    MPIT_CALL(MPI_Isend(&ssum[to], 1, MPI_UINT64_T, to, TAG_SUM, MPI_COMM_WORLD,
                                        &reqs[nreq++]));
                    if (strcmp(names + (size_t)to * (NAMELEN + 1), name) == 0)
                        intra += sz;
                    else
                        inter += sz;
                }
                mpit_waitall(nreq, reqs);
                for (i = 0; i < mpit_size; i++) {
                    size_t first = 0, nbad;
                    uint64_t want = mpit_seed(sz, (uint64_t)i * 64 + (uint64_t)mpit_rank,
                                              (uint64_t)round);
                    if (i == mpit_rank)
                        continue;
                    nbad = mpit_verify(rbuf[i], sz, want, &first);
                    bad += !mpit_expect(nbad == 0,
                                        "round %d: %zu B from rank %d (%s): %zu bad bytes, first at %zu",
                                        round, sz, i, names + (size_t)i * (NAMELEN + 1), nbad, first);
                    bad += !mpit_expect(mpit_checksum(rbuf[i], sz) == rsum[i],
                                        "round %d: %zu B from rank %d: checksum %016llx, sender's %016llx",
                                        round, sz, i, (unsigned long long)mpit_checksum(rbuf[i], sz),
                                        (unsigned long long)rsum[i]);
                }
            }
        }
        mpit_check_all(bad, "%d rounds of all-pairs exchange, %d sizes 1 B..%zu B: every byte and "
                       "checksum right", ROUNDS, nsizes, sizes[nsizes - 1]);
        for (i = 0; i < mpit_size; i++) {
            free(sbuf[i]);
            free(rbuf[i]);
        }
        free(sbuf);
        free(rbuf);
        free(ssum);
        free(rsum);
        free(reqs);
    }

    /* ---------------------------------------------------- a collective */
    /* (small: what it moves between nodes, which the runner cannot
     * attribute, stays far below the intra-node payload) */
    {
        size_t n = (maxsize < ((size_t)256 << 10) ? maxsize : ((size_t)256 << 10)) / sizeof(int64_t), j;
        int64_t *v = mpit_malloc(n * sizeof(*v)), *r = mpit_malloc(n * sizeof(*r));
        long bad = 0;
        mpit_phase("allreduce of %zu int64", n);
        for (j = 0; j < n; j++)
            v[j] = (int64_t)(j % 1000003) * (mpit_rank + 1);
        MPIT_CALL(MPI_Allreduce(v, r, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
        for (j = 0; j < n; j++)
            bad += r[j] != (int64_t)(j % 1000003) * mpit_size * (mpit_size + 1) / 2;
        mpit_check_all(bad, "MPI_Allreduce of %zu int64 exact", n);
        free(v);
        free(r);
    }

    /* one line a rank, all printed by rank 0 (lines that several
     * processes print at once may come out interleaved) */
    {
        unsigned long long mine[3] = {(unsigned long long)getpid(), inter, intra};
        unsigned long long *all = mpit_malloc((size_t)mpit_size * sizeof(mine));
        MPIT_CALL(MPI_Gather(mine, 3, MPI_UNSIGNED_LONG_LONG, all, 3, MPI_UNSIGNED_LONG_LONG, 0,
                             MPI_COMM_WORLD));
        for (i = 0; mpit_rank == 0 && i < mpit_size; i++)
            printf("mpi_cluster: rank %d host %s pid %llu inter_bytes %llu intra_bytes %llu\n", i,
                   names + (size_t)i * (NAMELEN + 1), all[3 * i], all[3 * i + 1], all[3 * i + 2]);
        free(all);
    }
    free(names);
    return mpit_finish();
}
