/*
 * mpi_datatype: derived, non-contiguous datatypes through the transport.
 *
 * Types: vector, indexed, a struct with padding gaps (resized to the C
 * struct), and a vector resized to a larger extent; each for a small
 * message and for one larger than 1 MiB (the netmod's pack/pipeline or
 * iov path, not its contiguous zero-copy path).  For every type three
 * transfers, each way between ranks 0 and 1:
 *   - non-contiguous send -> contiguous receive (a "dense" type with the
 *     same type signature: MPI_DOUBLE, or the struct without gaps);
 *   - contiguous send -> non-contiguous receive (gaps must stay untouched);
 *   - non-contiguous -> non-contiguous, same type.
 * The expected bytes are computed by the test from its own list of
 * (offset, length) blocks per element, not by MPI_Pack; MPI_Pack is checked
 * against that list separately, locally, so a pack bug and a transport bug
 * are told apart.
 */
#include "mpit_common.c"

#include <stddef.h>

#define TAG_DT 51
#define GAP 0xee

typedef struct {
    size_t off, len;
} blk_t;

typedef struct {
    const char *name;
    MPI_Datatype type;  /* one element */
    MPI_Datatype dense; /* same signature, no gaps: one element of it ... */
    int dense_per_elem; /* ... times this count per element of `type` */
    blk_t *blks;
    int nblk;
    size_t extent, size; /* bytes */
} layout_t;

struct rec {
    char c;
    double d;
    int i[3];
    short s;
};

static MPI_Datatype struct_dense;

static void add_blk(layout_t *l, size_t off, size_t len)
{
    l->blks[l->nblk].off = off;
    l->blks[l->nblk].len = len;
    l->nblk++;
    l->size += len;
}

/* vector(count, blocklen, stride) of doubles, optionally resized */
static void make_vector(layout_t *l, const char *name, int count, int blocklen, int stride,
                        size_t resized_extent)
{
    int k;
    memset(l, 0, sizeof(*l));
    l->name = name;
    l->blks = mpit_malloc(sizeof(blk_t) * (size_t)count);
    for (k = 0; k < count; k++)
        add_blk(l, (size_t)k * (size_t)stride * 8, (size_t)blocklen * 8);
    l->extent = ((size_t)(count - 1) * (size_t)stride + (size_t)blocklen) * 8;
    MPIT_CALL(MPI_Type_vector(count, blocklen, stride, MPI_DOUBLE, &l->type));
    if (resized_extent) {
        MPI_Datatype v = l->type;
        MPIT_CALL(MPI_Type_create_resized(v, 0, (MPI_Aint)resized_extent, &l->type));
        MPIT_CALL(MPI_Type_free(&v));
        l->extent = resized_extent;
    }
    MPIT_CALL(MPI_Type_commit(&l->type));
    l->dense = MPI_DOUBLE;
    l->dense_per_elem = count * blocklen;
}

static void make_indexed(layout_t *l)
{
    static int bl[] = {1, 3, 2, 5, 1}, dp[] = {0, 2, 7, 12, 20};
    int k;
    memset(l, 0, sizeof(*l));
    l->name = "indexed{1,3,2,5,1 @ 0,2,7,12,20 doubles}";
    l->blks = mpit_malloc(sizeof(blk_t) * 5);
    for (k = 0; k < 5; k++)
        add_blk(l, (size_t)dp[k] * 8, (size_t)bl[k] * 8);
    l->extent = 21 * 8;
    MPIT_CALL(MPI_Type_indexed(5, bl, dp, MPI_DOUBLE, &l->type));
    MPIT_CALL(MPI_Type_commit(&l->type));
    l->dense = MPI_DOUBLE;
    l->dense_per_elem = 12;
}

static void make_struct(layout_t *l)
{
    int bl[4] = {1, 1, 3, 1};
    MPI_Aint dp[4] = {offsetof(struct rec, c), offsetof(struct rec, d), offsetof(struct rec, i),
                      offsetof(struct rec, s)};
    MPI_Aint dd[4] = {0, 1, 9, 21};
    MPI_Datatype ty[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT};
    MPI_Datatype t;
    memset(l, 0, sizeof(*l));
    l->name = "struct{char; double; int[3]; short} with padding";
    l->blks = mpit_malloc(sizeof(blk_t) * 4);
    add_blk(l, offsetof(struct rec, c), 1);
    add_blk(l, offsetof(struct rec, d), 8);
    add_blk(l, offsetof(struct rec, i), 12);
    add_blk(l, offsetof(struct rec, s), 2);
    l->extent = sizeof(struct rec);
    MPIT_CALL(MPI_Type_create_struct(4, bl, dp, ty, &t));
    MPIT_CALL(MPI_Type_create_resized(t, 0, (MPI_Aint)sizeof(struct rec), &l->type));
    MPIT_CALL(MPI_Type_free(&t));
    MPIT_CALL(MPI_Type_commit(&l->type));
    /* the same signature packed without gaps: 23 bytes per element */
    MPIT_CALL(MPI_Type_create_struct(4, bl, dd, ty, &t));
    MPIT_CALL(MPI_Type_create_resized(t, 0, 23, &struct_dense));
    MPIT_CALL(MPI_Type_free(&t));
    MPIT_CALL(MPI_Type_commit(&struct_dense));
    l->dense = struct_dense;
    l->dense_per_elem = 1;
}

/* packed image of n elements of src */
static void pack_expected(const layout_t *l, const char *src, size_t n, char *out)
{
    size_t e, p = 0;
    int b;
    for (e = 0; e < n; e++)
        for (b = 0; b < l->nblk; b++) {
            memcpy(out + p, src + e * l->extent + l->blks[b].off, l->blks[b].len);
            p += l->blks[b].len;
        }
}

/* gap-filled buffer with the packed bytes scattered into the blocks */
static void unpack_expected(const layout_t *l, const char *packed, size_t n, char *out)
{
    size_t e, p = 0;
    int b;
    memset(out, GAP, n * l->extent);
    for (e = 0; e < n; e++)
        for (b = 0; b < l->nblk; b++) {
            memcpy(out + e * l->extent + l->blks[b].off, packed + p, l->blks[b].len);
            p += l->blks[b].len;
        }
}

static size_t first_diff(const char *a, const char *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

static long run_case(const layout_t *l, size_t n, const char *label)
{
    size_t span = n * l->extent, psize = n * l->size, d;
    char *src = mpit_malloc(span), *packed = mpit_malloc(psize), *rbuf = mpit_malloc(span + 8);
    char *expect = mpit_malloc(span);
    int dcount = (int)n * l->dense_per_elem, sender, xfer, tsize = 0, pos = 0;
    MPI_Aint lb = 0, ext = 0;
    long bad = 0;

    /* local self-checks of the layout and of MPI_Pack */
    MPI_Type_size(l->type, &tsize);
    MPI_Type_get_extent(l->type, &lb, &ext);
    if (!mpit_expect((size_t)tsize == l->size && lb == 0 && (size_t)ext == l->extent,
                     "%s: MPI says size %d lb %ld extent %ld, layout says %zu 0 %zu", l->name,
                     tsize, (long)lb, (long)ext, l->size, l->extent))
        bad++;
    mpit_fill(src, span, mpit_seed(n, l->size, 1));
    pack_expected(l, src, n, packed);
    MPIT_CALL(MPI_Pack(src, (int)n, l->type, rbuf, (int)psize, &pos, MPI_COMM_SELF));
    if (!mpit_expect(pos == (int)psize && memcmp(rbuf, packed, psize) == 0,
                     "%s x %zu: local MPI_Pack differs from the layout (pos %d of %zu, first "
                     "diff %zu) -- MPICH datatype engine, not transport",
                     l->name, n, pos, psize, first_diff(rbuf, packed, psize)))
        bad++;

    for (xfer = 0; xfer < 3; xfer++) {
        static const char *xname[] = {"noncontig -> contig", "contig -> noncontig",
                                      "noncontig -> noncontig"};
        for (sender = 0; sender <= 1; sender++) {
            int receiver = 1 - sender, count = -1;
            MPI_Status st;
            mpit_phase("%s x %zu (%s), %s, %d->%d", l->name, n, label, xname[xfer], sender,
                       receiver);
            if (mpit_rank == sender) {
                if (xfer == 1)
                    MPIT_CALL(MPI_Send(packed, dcount, l->dense, receiver, TAG_DT,
                                       MPI_COMM_WORLD));
                else
                    MPIT_CALL(MPI_Send(src, (int)n, l->type, receiver, TAG_DT, MPI_COMM_WORLD));
            } else if (mpit_rank == receiver) {
                if (sender == 1)
                    mpit_sleep_ms(20); /* one way mostly unexpected */
                memset(rbuf, GAP, span + 8);
                if (xfer == 0) {
                    MPIT_CALL(MPI_Recv(rbuf, dcount, l->dense, sender, TAG_DT, MPI_COMM_WORLD,
                                       &st));
                    MPI_Get_count(&st, l->dense, &count);
                    d = first_diff(rbuf, packed, psize);
                    if (!mpit_expect(count == dcount && d == psize,
                                     "%s x %zu %s %d->%d: count %d (want %d), first bad byte "
                                     "%zu of %zu", l->name, n, xname[xfer], sender, receiver,
                                     count, dcount, d, psize))
                        bad++;
                } else {
                    MPIT_CALL(MPI_Recv(rbuf, (int)n, l->type, sender, TAG_DT, MPI_COMM_WORLD,
                                       &st));
                    MPI_Get_count(&st, l->type, &count);
                    unpack_expected(l, packed, n, expect);
                    d = first_diff(rbuf, expect, span);
                    if (!mpit_expect(count == (int)n && d == span &&
                                         mpit_count_not(rbuf + span, 8, GAP) == 0,
                                     "%s x %zu %s %d->%d: count %d (want %zu), first bad byte "
                                     "%zu of %zu (%s)", l->name, n, xname[xfer], sender,
                                     receiver, count, n, d, span,
                                     d < span && (unsigned char)expect[d] == GAP
                                         ? "a gap was written"
                                         : "data"))
                        bad++;
                }
            }
        }
    }
    free(src);
    free(packed);
    free(rbuf);
    free(expect);
    return bad;
}

int main(int argc, char **argv)
{
    layout_t vsmall, vlarge, idx, st, rsz;
    struct {
        layout_t *l;
        size_t nsmall, nlarge;
    } cases[5];
    int c;

    mpit_init(&argc, &argv, "mpi_datatype");
    mpit_need_ranks(2);
    make_vector(&vsmall, "vector(5 x 2 doubles, stride 3)", 5, 2, 3, 0);
    make_vector(&vlarge, "vector(1024 x 16 doubles, stride 24)", 1024, 16, 24, 0);
    make_indexed(&idx);
    make_struct(&st);
    make_vector(&rsz, "vector(4 x 2 doubles, stride 3) resized to 112 bytes", 4, 2, 3, 112);
    cases[0].l = &vsmall, cases[0].nsmall = 3, cases[0].nlarge = 14000;  /* 1.12 MB */
    cases[1].l = &vlarge, cases[1].nsmall = 1, cases[1].nlarge = 10;     /* 1.31 MB */
    cases[2].l = &idx, cases[2].nsmall = 2, cases[2].nlarge = 12000;     /* 1.15 MB */
    cases[3].l = &st, cases[3].nsmall = 4, cases[3].nlarge = 50000;      /* 1.15 MB */
    cases[4].l = &rsz, cases[4].nsmall = 3, cases[4].nlarge = 20000;     /* 1.28 MB */

    for (c = 0; c < 5; c++) {
        layout_t *l = cases[c].l;
        long bad;
        if (mpit_rank <= 1) {
            bad = run_case(l, cases[c].nsmall, "small");
        } else {
            bad = 0;
        }
        mpit_check_all(bad, "%s x %zu (%zu bytes of data): 3 transfer kinds, both ways", l->name,
                       cases[c].nsmall, cases[c].nsmall * l->size);
        bad = mpit_rank <= 1 ? run_case(l, cases[c].nlarge, "large") : 0;
        mpit_check_all(bad, "%s x %zu (%zu bytes of data): 3 transfer kinds, both ways", l->name,
                       cases[c].nlarge, cases[c].nlarge * l->size);
    }

    for (c = 0; c < 5; c++) {
        MPI_Type_free(&cases[c].l->type);
        free(cases[c].l->blks);
    }
    MPI_Type_free(&struct_dense);
    return mpit_finish();
}
