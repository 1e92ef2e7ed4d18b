/*
 * it_sizes: every message size around each protocol edge, between two
 * processes, both directions, byte-exact with a checksum.
 *
 * The edges are the core's: the eager payload limit (slot size minus the
 * eager header, which is private, so a whole range slot-64..slot+64 is
 * sent), the medium/bounce range, the rendezvous threshold, stripe chunk
 * edges, and one 64 MiB message.  The thresholds are fixed here through
 * context overrides (and the wrapper exports the same values), so the test
 * knows them without reading library internals.
 *
 * Each size goes both ways, and each way twice: once with the receive
 * posted before the message exists (expected path, receiver-first
 * rendezvous) and once unexpected (the sender sends, then a small notice;
 * the receiver posts only after the notice matched, which by the
 * non-overtaking rule means the data message is already in the unexpected
 * queue).  The receive buffer is 64 bytes larger than the message and
 * those bytes must stay untouched.
 */
#include "mdr_config.h"

#include "it_common.c"

#define SLOT ((size_t)8192)
#define RNDV ((size_t)65536)
#define CANARY 64
#define BIG ((size_t)64 << 20)

#define TAG_READY  ((uint64_t)0x52454144ull << 32)
#define TAG_NOTICE ((uint64_t)0x4e4f5449ull << 32)
#define TAG_CSUM   ((uint64_t)0x4353554dull << 32)

static const char *const overrides[] = {"MADRAIL_SLOT_SIZE=8k", "MADRAIL_RNDV_THRESH=64k",
                                        NULL};

static size_t build_sizes(size_t *s)
{
    static const size_t fixed[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 256, 257,
                                   1023, 1024, 1025, 4095, 4096, 4097};
    size_t n = 0, i;

    for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        s[n++] = fixed[i];
    for (i = SLOT - 64; i <= SLOT + 64; i++)
        s[n++] = i;
    s[n++] = 2 * SLOT - 1;
    s[n++] = 2 * SLOT;
    s[n++] = 2 * SLOT + 1;
    s[n++] = 3 * SLOT + 5;
    s[n++] = RNDV / 2 + 1;
    s[n++] = RNDV - SLOT;
    s[n++] = RNDV - 1;
    s[n++] = RNDV;
    s[n++] = RNDV + 1;
    s[n++] = RNDV + SLOT + 3;
    s[n++] = 2 * RNDV + 1;
    s[n++] = ((size_t)1 << 20) - 1;
    s[n++] = (size_t)1 << 20;
    s[n++] = ((size_t)1 << 20) + 1;
    s[n++] = ((size_t)4 << 20) + 4097;
    s[n++] = ((size_t)16 << 20) + 3;
    s[n++] = BIG;
    return n;
}

/* One transfer of size bytes from rank `from` to the other of ranks 0/1. */
static void transfer(it_env_t *e, size_t size, int from, int unexpected, uint8_t *sbuf,
                     uint8_t *rbuf)
{
    int to = 1 - from;
    madrail_peer_t peer = e->job.peers[from == e->rank ? to : from];
    uint64_t tag = ((uint64_t)size << 8) | (uint64_t)(from << 1) | (uint64_t)unexpected;
    uint64_t seed = it_seed(size, (uint64_t)from, (uint64_t)unexpected), csum;
    madrail_request_t req = NULL;
    madrail_info_t info;
    madrail_status_t st;
    const char *mode = unexpected ? "unexpected" : "posted";

    if (e->rank == from) {
        it_fill(sbuf, size, seed);
        csum = it_checksum(sbuf, size);
        if (unexpected) {
            IT_CALL(e, madrail_isend(e->ctx, peer, sbuf, size, tag, 0, &req));
            IT_CALL(e, madrail_send(e->ctx, peer, NULL, 0, TAG_NOTICE | tag, 0));
        } else {
            IT_CALL(e, madrail_recv(e->ctx, peer, NULL, 0, TAG_READY | tag, MADRAIL_TAG_EXACT,
                                    NULL));
            IT_CALL(e, madrail_isend(e->ctx, peer, sbuf, size, tag, 0, &req));
        }
        st = madrail_wait(&req, &info);
        it_expect(e, st == MADRAIL_OK, "size %zu %d->%d %s: send completed with %s", size, from,
                  to, mode, madrail_status_str(st));
        it_expect(e, info.length == size, "size %zu %d->%d %s: send info.length %zu", size,
                  from, to, mode, info.length);
        IT_CALL(e, madrail_send(e->ctx, peer, &csum, sizeof(csum), TAG_CSUM | tag, 0));
        return;
    }
    if (e->rank != to)
        return;

    memset(rbuf, 0xa5, size + CANARY);
    if (unexpected) {
        IT_CALL(e, madrail_recv(e->ctx, peer, NULL, 0, TAG_NOTICE | tag, MADRAIL_TAG_EXACT,
                                NULL));
        IT_CALL(e, madrail_irecv(e->ctx, peer, rbuf, size + CANARY, tag, MADRAIL_TAG_EXACT,
                                 &req));
    } else {
        IT_CALL(e, madrail_irecv(e->ctx, peer, rbuf, size + CANARY, tag, MADRAIL_TAG_EXACT,
                                 &req));
        IT_CALL(e, madrail_send(e->ctx, peer, NULL, 0, TAG_READY | tag, 0));
    }
    memset(&info, 0, sizeof(info));
    st = madrail_wait(&req, &info);
    it_expect(e, st == MADRAIL_OK, "size %zu %d->%d %s: receive completed with %s", size, from,
              to, mode, madrail_status_str(st));
    it_expect(e, info.length == size && info.sent_length == size,
              "size %zu %d->%d %s: info.length %zu sent_length %zu", size, from, to, mode,
              info.length, info.sent_length);
    it_expect(e, info.source == peer && info.tag == tag,
              "size %zu %d->%d %s: info.source %u tag 0x%llx (expected %u 0x%llx)", size, from,
              to, mode, info.source, (unsigned long long)info.tag, peer,
              (unsigned long long)tag);
    {
        size_t first, bad = it_verify(rbuf, size, seed, &first), i, over = 0;
        uint64_t want = 0, got = it_checksum(rbuf, size);
        it_expect(e, bad == 0, "size %zu %d->%d %s: %zu bad bytes, first at offset %zu", size,
                  from, to, mode, bad, first);
        for (i = size; i < size + CANARY; i++)
            over += rbuf[i] != 0xa5;
        it_expect(e, over == 0, "size %zu %d->%d %s: %zu bytes written past the message",
                  size, from, to, mode, over);
        IT_CALL(e, madrail_recv(e->ctx, peer, &want, sizeof(want), TAG_CSUM | tag,
                                MADRAIL_TAG_EXACT, NULL));
        it_expect(e, want == got, "size %zu %d->%d %s: checksum 0x%016llx, sender's 0x%016llx",
                  size, from, to, mode, (unsigned long long)got, (unsigned long long)want);
    }
}

int main(void)
{
    it_env_t e;
    size_t sizes[256], n, i;
    uint8_t *sbuf, *rbuf;
    int rc;

    rc = it_setup(&e, "it_sizes", 2, overrides);
    if (rc != 0)
        return rc;
    n = build_sizes(sizes);
    sbuf = it_alloc(&e, BIG + CANARY);
    rbuf = it_alloc(&e, BIG + CANARY);
    if (e.rank < 2) {
        for (i = 0; i < n; i++) {
            unsigned before = e.failures;
            int from, unexpected;
            for (from = 0; from < 2; from++)
                for (unexpected = 0; unexpected < 2; unexpected++)
                    transfer(&e, sizes[i], from, unexpected, sbuf, rbuf);
            if (e.failures != before || sizes[i] <= 17 || sizes[i] == SLOT - 64 ||
                sizes[i] >= RNDV - 1)
                it_check(&e, e.failures == before,
                         "size %zu: both directions, posted and unexpected", sizes[i]);
        }
        it_check(&e, e.failures == 0, "%zu sizes from 0 to %zu, 4 transfers each", n, BIG);
    }
    free(sbuf);
    free(rbuf);
    return it_finish(&e);
}
