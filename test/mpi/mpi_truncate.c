/*
 * mpi_truncate: a message longer than the receive buffer.
 *
 * MPI says the receive fails with an error of class MPI_ERR_TRUNCATE (the
 * buffer's contents are then undefined).  ch4:madrail, like MPICH's generic
 * ch4 path (MPIDIG), also reports in the status the source, the tag and as
 * count the bytes that were delivered (the buffer's size), and the buffer
 * holds the start of the message: checked when the library is ch4:madrail
 * (MPI_Get_library_version), only printed otherwise (Debian's ch4:ucx
 * delivers nothing and leaves the count unset).  The message is consumed: the next one with the same
 * signature goes to the next receive.  Tried at an eager and a rendezvous
 * size, into a contiguous and a strided buffer, with a named and a
 * wildcard source, with MPI_Recv and MPI_Irecv+MPI_Wait and MPI_Mrecv.
 * Rank 1 sends, rank 0 receives; errors are returned (MPI_ERRORS_RETURN).
 */
#include "mpit_common.c"

#define TAG_T 51
#define TAG_AFTER 52

static const size_t sizes[] = {1000, 600000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
/* variants: bit 0 strided buffer, bit 1 ANY_SOURCE, bits 2-3: 0 Recv,
 * 1 Irecv+Wait, 2 Mprobe+Mrecv */
#define NVAR 12

static uint64_t seed_of(size_t sz, int v)
{
    return mpit_seed(sz, (uint64_t)v, 51);
}

int main(int argc, char **argv)
{
    const size_t maxsz = 600000;
    char *buf, *big;
    MPI_Datatype strided;

    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int vlen = 0, strict;

    mpit_init(&argc, &argv, "mpi_truncate");
    MPIT_CALL(MPI_Get_library_version(version, &vlen));
    strict = strstr(version, "madrail") != NULL;
    mpit_need_ranks(2);
    buf = mpit_malloc(maxsz);
    big = mpit_malloc(2 * maxsz);
    /* one byte out of two */
    MPIT_CALL(MPI_Type_vector(1, 1, 2, MPI_BYTE, &strided));
    MPIT_CALL(MPI_Type_create_resized(strided, 0, 2, &strided));
    MPIT_CALL(MPI_Type_commit(&strided));

    for (size_t si = 0; si < NSIZES; si++) {
        for (int v = 0; v < NVAR; v++) {
            size_t sz = sizes[si], keep = sz / 2 + 3;
            int is_strided = v & 1, any = (v >> 1) & 1, how = v >> 2;
            mpit_phase("size %zu variant %d", sz, v);
            if (mpit_rank == 1) {
                mpit_fill(buf, sz, seed_of(sz, v));
                MPIT_CALL(MPI_Send(buf, (int)sz, MPI_BYTE, 0, TAG_T, MPI_COMM_WORLD));
                MPIT_CALL(MPI_Send(buf, 10, MPI_BYTE, 0, TAG_AFTER, MPI_COMM_WORLD));
            } else if (mpit_rank == 0) {
                MPI_Status st;
                MPI_Request r;
                MPI_Message m;
                int rc, cls = -1, cnt = -1, src = any ? MPI_ANY_SOURCE : 1;
                void *rb = is_strided ? (void *)big : (void *)buf;
                MPI_Datatype dt = is_strided ? strided : MPI_BYTE;
                size_t bad = 0;

                memset(&st, 0, sizeof(st));
                st.MPI_SOURCE = st.MPI_TAG = -1;
                memset(big, 0, 2 * maxsz);
                memset(buf, 0, maxsz);
                if (how == 0) {
                    rc = MPI_Recv(rb, (int)keep, dt, src, TAG_T, MPI_COMM_WORLD, &st);
                } else if (how == 1) {
                    MPIT_CALL(MPI_Irecv(rb, (int)keep, dt, src, TAG_T, MPI_COMM_WORLD, &r));
                    rc = MPI_Wait(&r, &st);
                } else {
                    MPI_Status pst;
                    MPIT_CALL(MPI_Mprobe(src, TAG_T, MPI_COMM_WORLD, &m, &pst));
                    MPIT_CALL(MPI_Get_count(&pst, MPI_BYTE, &cnt));
                    mpit_expect(cnt == (int)sz, "size %zu variant %d: Mprobe count %d", sz, v,
                                cnt);
                    rc = MPI_Mrecv(rb, (int)keep, dt, &m, &st);
                }
                MPI_Error_class(rc, &cls);
                if (cls != MPI_ERR_TRUNCATE) {
                    /* Irecv+Wait: the error is the status's */
                    MPI_Error_class(st.MPI_ERROR, &cls);
                }
                MPIT_CALL(MPI_Get_count(&st, MPI_BYTE, &cnt));
                if (is_strided) {
                    char *want = mpit_malloc(sz);
                    mpit_fill(want, sz, seed_of(sz, v));
                    for (size_t i = 0; i < keep; i++)
                        if (big[2 * i] != want[i] || big[2 * i + 1] != 0)
                            bad++;
                    if (big[2 * keep] != 0)
                        bad++;
                    free(want);
                } else {
                    bad = mpit_verify(buf, keep, seed_of(sz, v), NULL);
                    if (mpit_count_not(buf + keep, maxsz - keep, 0) != 0)
                        bad++;
                }
                mpit_check(rc != MPI_SUCCESS && cls == MPI_ERR_TRUNCATE &&
                           (!strict || (st.MPI_SOURCE == 1 && st.MPI_TAG == TAG_T &&
                                        cnt == (int)keep && bad == 0)),
                           "%zu B into %zu B (%s, %s, %s): rc %s, class %s, source %d, tag %d, "
                           "count %d, %zu wrong bytes", sz, keep,
                           is_strided ? "strided" : "contiguous", any ? "ANY_SOURCE" : "source 1",
                           how == 0 ? "Recv" : how == 1 ? "Irecv+Wait" : "Mprobe+Mrecv",
                           rc == MPI_SUCCESS ? "success" : "error",
                           cls == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "other", st.MPI_SOURCE,
                           st.MPI_TAG, cnt, bad);
                /* the truncated message is gone; the next one arrives */
                MPIT_CALL(MPI_Recv(buf, 10, MPI_BYTE, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                mpit_expect(st.MPI_TAG == TAG_AFTER, "size %zu variant %d: next message has tag "
                            "%d, want %d", sz, v, st.MPI_TAG, TAG_AFTER);
            }
        }
    }

    MPI_Type_free(&strided);
    free(big);
    free(buf);
    return mpit_finish();
}
