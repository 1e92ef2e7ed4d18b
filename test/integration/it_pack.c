/*
 * it_pack: Madeleine-style incremental messages between two processes.
 *
 * Every message starts with an EXPRESS header piece that the receiver
 * reads first and uses to size and describe the rest (the classic
 * "header, then body sized from it" pattern).  Then:
 *   - one body piece for every send mode x receive mode x size
 *     (0 B .. 4 MiB), both directions, each mode's promise checked:
 *       SAFER    the sender overwrites its buffer right after pack();
 *       LATER    the sender writes the real data after pack(), before
 *                end_packing() (the value at end_packing is what goes);
 *       CHEAPER  the buffer is left alone until end_packing();
 *       EXPRESS  the data is checked as soon as unpack() returns;
 *       CHEAPER  (receive) checked after end_unpacking();
 *   - a message of 40 pieces with sizes and modes drawn from a seed the
 *     header carries;
 *   - a size mismatch between pack and unpack must be reported as
 *     MADRAIL_ERR_INVALID (never undefined).
 */
#include "mdr_config.h"

#include "it_common.c"

#define TAG_PACK ((uint64_t)0x5041434bull << 32)
#define MAXBODY ((size_t)4 << 20)
#define NPIECES 40
#define MAXPIECE 70000

typedef struct hdr {
    uint64_t magic;
    uint64_t kind; /* 0 single body, 1 many pieces, 2 mismatch */
    uint64_t len;
    uint64_t smode, rmode;
    uint64_t seed;
} hdr_t;

#define MAGIC 0x6d6164726169ull

static const size_t sizes[] = {0, 1, 100, 8000, 8300, 65536, 300000, MAXBODY};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
static const char *const sname[] = {"SAFER", "LATER", "CHEAPER"};
static const char *const rname[] = {"EXPRESS", "CHEAPER"};

static void piece_plan(uint64_t seed, int i, size_t *len_p, int *sm_p, int *rm_p)
{
    uint64_t st = seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
    uint64_t r = it_rand(&st);
    *len_p = (size_t)(r % 4 == 0 ? 0 : (r >> 8) % MAXPIECE);
    *sm_p = (int)((r >> 40) % 3);
    *rm_p = (int)((r >> 50) % 2);
}

/* ---------------------------------------------------------------- send */

static void send_single(it_env_t *e, madrail_peer_t peer, uint64_t tag, size_t len, int sm,
                        int rm, uint8_t *body)
{
    madrail_pack_t msg;
    hdr_t h = {MAGIC, 0, len, (uint64_t)sm, (uint64_t)rm, tag};
    uint64_t good = it_seed(tag, len, 1), stale = it_seed(tag, len, 2);

    it_fill(body, len, sm == MADRAIL_SEND_LATER ? stale : good);
    IT_CALL(e, madrail_begin_packing(e->ctx, peer, tag, &msg));
    IT_CALL(e, madrail_pack(msg, &h, sizeof(h), MADRAIL_SEND_SAFER, MADRAIL_RECEIVE_EXPRESS));
    memset(&h, 0xee, sizeof(h)); /* SAFER: already copied */
    IT_CALL(e, madrail_pack(msg, body, len, (madrail_send_mode_t)sm, (madrail_recv_mode_t)rm));
    if (sm == MADRAIL_SEND_SAFER)
        it_fill(body, len, stale); /* must not be what arrives */
    else if (sm == MADRAIL_SEND_LATER)
        it_fill(body, len, good); /* the value at end_packing is sent */
    IT_CALL(e, madrail_end_packing(msg));
    it_fill(body, len, stale); /* everything reusable now */
}

static void send_many(it_env_t *e, madrail_peer_t peer, uint64_t tag, uint8_t *area)
{
    madrail_pack_t msg;
    hdr_t h = {MAGIC, 1, NPIECES, 0, 0, it_seed(tag, 99, 3)};
    size_t off = 0, len;
    int i, sm, rm;

    IT_CALL(e, madrail_begin_packing(e->ctx, peer, tag, &msg));
    IT_CALL(e, madrail_pack(msg, &h, sizeof(h), MADRAIL_SEND_SAFER, MADRAIL_RECEIVE_EXPRESS));
    for (i = 0; i < NPIECES; i++) {
        piece_plan(h.seed, i, &len, &sm, &rm);
        it_fill(area + off, len, it_seed(h.seed, (uint64_t)i, 4));
        IT_CALL(e, madrail_pack(msg, area + off, len, (madrail_send_mode_t)sm,
                                (madrail_recv_mode_t)rm));
        off += len; /* distinct buffers: LATER/CHEAPER pieces stay intact */
    }
    IT_CALL(e, madrail_end_packing(msg));
}

static void send_mismatch(it_env_t *e, madrail_peer_t peer, uint64_t tag)
{
    madrail_pack_t msg;
    hdr_t h = {MAGIC, 2, 100, 0, 0, 0};
    uint8_t piece[100];

    memset(piece, 7, sizeof(piece));
    IT_CALL(e, madrail_begin_packing(e->ctx, peer, tag, &msg));
    IT_CALL(e, madrail_pack(msg, &h, sizeof(h), MADRAIL_SEND_SAFER, MADRAIL_RECEIVE_EXPRESS));
    IT_CALL(e, madrail_pack(msg, piece, sizeof(piece), MADRAIL_SEND_SAFER,
                            MADRAIL_RECEIVE_EXPRESS));
    IT_CALL(e, madrail_end_packing(msg));
}

/* ---------------------------------------------------------------- receive */

static void check_body(it_env_t *e, const char *when, const uint8_t *body, size_t len,
                       uint64_t seed, const char *what)
{
    size_t first, bad = it_verify(body, len, seed, &first);
    it_expect(e, bad == 0, "%s: %zu bad bytes %s (first at %zu)", what, bad, when, first);
}

/* Receive one message of any kind; returns 0, or -1 if the header is bad. */
static int recv_any(it_env_t *e, madrail_peer_t peer, uint64_t tag, uint8_t *body,
                    uint8_t *area)
{
    madrail_pack_t msg;
    madrail_info_t info;
    hdr_t h;
    char what[96];
    madrail_status_t st;

    memset(&info, 0, sizeof(info));
    IT_CALL(e, madrail_begin_unpacking(e->ctx, peer, tag, MADRAIL_TAG_EXACT, &msg, &info));
    it_expect(e, info.source == peer && info.tag == tag,
              "begin_unpacking: source %u tag 0x%llx", info.source,
              (unsigned long long)info.tag);
    memset(&h, 0, sizeof(h));
    IT_CALL(e, madrail_unpack(msg, &h, sizeof(h), MADRAIL_SEND_SAFER, MADRAIL_RECEIVE_EXPRESS));
    if (!it_expect(e, h.magic == MAGIC && h.kind <= 2,
                   "EXPRESS header not in place when unpack returned (magic 0x%llx)",
                   (unsigned long long)h.magic)) {
        madrail_end_unpacking(msg);
        return -1;
    }
    if (h.kind == 0) {
        int sm = (int)h.smode, rm = (int)h.rmode;
        uint64_t good = it_seed(tag, h.len, 1);
        snprintf(what, sizeof(what), "%zu B send %s receive %s", (size_t)h.len,
                 sname[sm % 3], rname[rm % 2]);
        memset(body, 0, h.len);
        IT_CALL(e, madrail_unpack(msg, body, h.len, (madrail_send_mode_t)sm,
                                  (madrail_recv_mode_t)rm));
        if (rm == MADRAIL_RECEIVE_EXPRESS)
            check_body(e, "when unpack returned (EXPRESS)", body, h.len, good, what);
        IT_CALL(e, madrail_end_unpacking(msg));
        check_body(e, "after end_unpacking", body, h.len, good, what);
    } else if (h.kind == 1) {
        size_t off = 0, len[NPIECES];
        int i, sm, rm;
        for (i = 0; i < NPIECES; i++) {
            piece_plan(h.seed, i, &len[i], &sm, &rm);
            memset(area + off, 0, len[i]);
            IT_CALL(e, madrail_unpack(msg, area + off, len[i], (madrail_send_mode_t)sm,
                                      (madrail_recv_mode_t)rm));
            if (rm == MADRAIL_RECEIVE_EXPRESS) {
                snprintf(what, sizeof(what), "piece %d (%zu B, %s/%s)", i, len[i],
                         sname[sm], rname[rm]);
                check_body(e, "when unpack returned (EXPRESS)", area + off, len[i],
                           it_seed(h.seed, (uint64_t)i, 4), what);
            }
            off += len[i];
        }
        IT_CALL(e, madrail_end_unpacking(msg));
        for (i = 0, off = 0; i < NPIECES; off += len[i], i++) {
            snprintf(what, sizeof(what), "piece %d of %d (%zu B)", i, NPIECES, len[i]);
            check_body(e, "after end_unpacking", area + off, len[i],
                       it_seed(h.seed, (uint64_t)i, 4), what);
        }
    } else {
        uint8_t piece[200];
        st = madrail_unpack(msg, piece, sizeof(piece), MADRAIL_SEND_SAFER,
                            MADRAIL_RECEIVE_EXPRESS);
        it_check(e, st == MADRAIL_ERR_INVALID,
                 "unpack of 200 B where 100 B were packed: %s (expected %s)",
                 madrail_status_str(st), madrail_status_str(MADRAIL_ERR_INVALID));
        st = madrail_end_unpacking(msg);
        printf("rank %d: info - end_unpacking after the mismatch returned %s\n", e->rank,
               madrail_status_str(st));
    }
    return 0;
}

int main(void)
{
    it_env_t e;
    int rc, from, sm, rm;
    size_t si;
    uint8_t *body, *area;
    uint64_t tag;

    rc = it_setup(&e, "it_pack", 2, NULL);
    if (rc != 0)
        return rc;
    if (e.rank > 1)
        return it_finish(&e);
    body = it_alloc(&e, MAXBODY);
    area = it_alloc(&e, (size_t)NPIECES * MAXPIECE);

    for (from = 0; from < 2; from++) {
        madrail_peer_t peer = e.job.peers[1 - e.rank];
        unsigned before = e.failures;
        tag = TAG_PACK | ((uint64_t)from << 24);
        for (sm = 0; sm < 3; sm++)
            for (rm = 0; rm < 2; rm++) {
                unsigned b2 = e.failures;
                for (si = 0; si < NSIZES; si++) {
                    tag++;
                    if (e.rank == from)
                        send_single(&e, peer, tag, sizes[si], sm, rm, body);
                    else
                        recv_any(&e, peer, tag, body, area);
                }
                if (e.rank != from)
                    it_check(&e, e.failures == b2,
                             "rank %d -> %d: send %s / receive %s, %zu sizes 0 B .. 4 MiB",
                             from, 1 - from, sname[sm], rname[rm], NSIZES);
            }
        tag++;
        if (e.rank == from)
            send_many(&e, peer, tag, area);
        else {
            unsigned b2 = e.failures;
            recv_any(&e, peer, tag, body, area);
            it_check(&e, e.failures == b2,
                     "rank %d -> %d: one message of %d pieces, mixed sizes and modes", from,
                     1 - from, NPIECES);
        }
        if (e.rank != from)
            it_check(&e, e.failures == before, "rank %d -> %d: all pack/unpack messages",
                     from, 1 - from);
    }
    /* last: the mismatch (may leave the message in an error state) */
    tag = TAG_PACK | 0xffffff;
    if (e.rank == 0)
        send_mismatch(&e, e.job.peers[1], tag);
    else
        recv_any(&e, e.job.peers[0], tag, body, area);

    free(body);
    free(area);
    return it_finish(&e);
}
