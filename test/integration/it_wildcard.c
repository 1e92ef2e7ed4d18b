/*
 * it_wildcard: MPI's non-overtaking rule through wildcard receives, with
 * two or more senders interleaving small, medium and rendezvous messages
 * into rank 0 (run with 3 ranks).
 *
 * The sequence number and sender are carried in the tag, so rank 0 can
 * check that each source's messages arrive in send order, none missing,
 * whatever the interleaving between sources and whatever rail each
 * message took:
 *   1. receives posted before anything is sent, ANY_PEER + TAG_ANY;
 *   2. unexpected messages (sent first, received after), ANY_PEER + TAG_ANY;
 *   3. ignore masks: two tag classes interleaved; all of class B is
 *      received first with a masked tag, then class A;
 *   4. a named source with TAG_ANY: all of one sender, then the next.
 */
#include "mdr_config.h"

#include "it_common.c"

#define K 40               /* messages per sender per phase */
#define MAXMSG 300000
#define SEQ_BITS 32
#define SENDER_SHIFT 32    /* 8 bits of sender rank */
#define CLASS_BIT ((uint64_t)1 << 40)
#define PHASE_SHIFT 44

static const size_t size_cycle[] = {0, 5, 100, 3000, 8100, 20000, 70000, 300000};

static size_t msg_size(int sender, int phase, int seq)
{
    return size_cycle[(size_t)(seq * 7 + sender + phase) % 8];
}

static uint64_t msg_tag(int sender, int phase, int cls, int seq)
{
    return ((uint64_t)phase << PHASE_SHIFT) | (cls ? CLASS_BIT : 0) |
           ((uint64_t)sender << SENDER_SHIFT) | (uint64_t)seq;
}

static int rank_of(const it_env_t *e, madrail_peer_t p)
{
    int r;
    for (r = 0; r < e->size; r++)
        if (r != e->rank && e->job.peers[r] == p)
            return r;
    return -1;
}

/* Check one received message; next[] is the per-sender next sequence. */
static void check_msg(it_env_t *e, int phase, const madrail_info_t *info, madrail_status_t st,
                      const uint8_t *buf, int *next, int want_cls, int want_sender)
{
    int src = rank_of(e, info->source);
    int sender = (int)((info->tag >> SENDER_SHIFT) & 0xff);
    int seq = (int)(info->tag & 0xffffffffu);
    int cls = (info->tag & CLASS_BIT) != 0;
    int tphase = (int)(info->tag >> PHASE_SHIFT);
    size_t first, bad;

    if (!it_expect(e, st == MADRAIL_OK, "phase %d: receive completed with %s", phase,
                   madrail_status_str(st)))
        return;
    if (!it_expect(e, src > 0 && src == sender && tphase == phase,
                   "phase %d: source peer %u (rank %d) but tag 0x%llx says sender %d phase %d",
                   phase, info->source, src, (unsigned long long)info->tag, sender, tphase))
        return;
    if (want_cls >= 0)
        it_expect(e, cls == want_cls, "phase %d: masked receive for class %d got class %d",
                  phase, want_cls, cls);
    if (want_sender >= 0)
        it_expect(e, sender == want_sender, "phase %d: receive from rank %d got rank %d",
                  phase, want_sender, sender);
    it_expect(e, seq == next[sender],
              "phase %d: from rank %d got seq %d, expected %d (overtaken or lost)", phase,
              sender, seq, next[sender]);
    next[sender] = seq + 1;
    it_expect(e, info->length == msg_size(sender, phase, seq),
              "phase %d: rank %d seq %d: length %zu, expected %zu", phase, sender, seq,
              info->length, msg_size(sender, phase, seq));
    bad = it_verify(buf, info->length, it_seed((uint64_t)sender, (uint64_t)phase, (uint64_t)seq),
                    &first);
    it_expect(e, bad == 0, "phase %d: rank %d seq %d: %zu bad bytes from offset %zu", phase,
              sender, seq, bad, first);
}

/* Sender side of a phase: isend all (class interleaved when cls_mix),
 * optionally barrier before waiting. */
static void send_phase(it_env_t *e, int phase, int cls_mix, int barrier_first, uint8_t **bufs)
{
    madrail_request_t reqs[K];
    madrail_peer_t root = e->job.peers[0];
    int i, seqn[2] = {0, 0};

    if (!barrier_first)
        IT_CALL(e, madrail_pmi_barrier());
    for (i = 0; i < K; i++) {
        int cls = cls_mix ? (i % 2) : 0;
        int seq = cls_mix ? seqn[cls]++ : i;
        size_t len = msg_size(e->rank, phase, seq);
        it_fill(bufs[i], len, it_seed((uint64_t)e->rank, (uint64_t)phase, (uint64_t)seq));
        IT_CALL(e, madrail_isend(e->ctx, root, bufs[i], len, msg_tag(e->rank, phase, cls, seq),
                                 0, &reqs[i]));
    }
    if (barrier_first)
        IT_CALL(e, madrail_pmi_barrier());
    for (i = 0; i < K; i++) {
        madrail_info_t info;
        madrail_status_t st = madrail_wait(&reqs[i], &info);
        it_expect(e, st == MADRAIL_OK, "phase %d: send %d completed with %s", phase, i,
                  madrail_status_str(st));
    }
    IT_CALL(e, madrail_pmi_barrier()); /* end of phase */
}

static void drain_progress(it_env_t *e, double secs)
{
    double t = it_now();
    while (it_now() - t < secs)
        madrail_progress(e->ctx);
}

int main(void)
{
    it_env_t e;
    int rc, i, r, nsend, total;
    uint8_t **bufs;

    rc = it_setup(&e, "it_wildcard", 3, NULL);
    if (rc != 0)
        return rc;
    nsend = e.size - 1;
    total = nsend * K;
    if (e.size > 255) {
        printf("it_wildcard: FAIL - at most 255 ranks (8 tag bits for the sender)\n");
        return 1;
    }
    bufs = calloc((size_t)total, sizeof(*bufs));
    if (bufs == NULL)
        return 1;
    for (i = 0; i < (e.rank == 0 ? total : K); i++)
        bufs[i] = it_alloc(&e, MAXMSG);

    if (e.rank != 0) {
        send_phase(&e, 1, 0, 0, bufs); /* receives are posted before the barrier */
        send_phase(&e, 2, 0, 1, bufs);
        send_phase(&e, 3, 1, 1, bufs);
        send_phase(&e, 4, 0, 1, bufs);
    } else {
        madrail_request_t *reqs = calloc((size_t)total, sizeof(*reqs));
        int *next = calloc((size_t)e.size, sizeof(int));
        unsigned before;
        if (reqs == NULL || next == NULL)
            return 1;

        /* 1: pre-posted wildcard receives */
        before = e.failures;
        for (i = 0; i < total; i++)
            IT_CALL(&e, madrail_irecv(e.ctx, MADRAIL_ANY_PEER, bufs[i], MAXMSG, 0,
                                      MADRAIL_TAG_ANY, &reqs[i]));
        IT_CALL(&e, madrail_pmi_barrier());
        for (i = 0; i < total; i++) {
            madrail_info_t info;
            madrail_status_t st = madrail_wait(&reqs[i], &info);
            check_msg(&e, 1, &info, st, bufs[i], next, -1, -1);
        }
        for (r = 1; r < e.size; r++)
            it_expect(&e, next[r] == K, "phase 1: %d of %d messages from rank %d", next[r], K, r);
        it_check(&e, e.failures == before,
                 "phase 1: %d pre-posted ANY_PEER/TAG_ANY receives, per-source order kept",
                 total);
        IT_CALL(&e, madrail_pmi_barrier());

        /* 2: unexpected, received with wildcards */
        before = e.failures;
        memset(next, 0, (size_t)e.size * sizeof(int));
        IT_CALL(&e, madrail_pmi_barrier());
        drain_progress(&e, 0.2); /* let messages pile up as unexpected */
        for (i = 0; i < total; i++) {
            madrail_info_t info;
            madrail_status_t st = madrail_recv(e.ctx, MADRAIL_ANY_PEER, bufs[0], MAXMSG, 0,
                                               MADRAIL_TAG_ANY, &info);
            check_msg(&e, 2, &info, st, bufs[0], next, -1, -1);
        }
        for (r = 1; r < e.size; r++)
            it_expect(&e, next[r] == K, "phase 2: %d of %d messages from rank %d", next[r], K, r);
        it_check(&e, e.failures == before,
                 "phase 2: %d unexpected messages via ANY_PEER/TAG_ANY, per-source order kept",
                 total);
        IT_CALL(&e, madrail_pmi_barrier());

        /* 3: ignore masks: class B first, then class A */
        before = e.failures;
        IT_CALL(&e, madrail_pmi_barrier());
        drain_progress(&e, 0.1);
        {
            int cls;
            uint64_t ignore = ((uint64_t)1 << 40) - 1; /* sender and seq bits */
            for (cls = 1; cls >= 0; cls--) {
                memset(next, 0, (size_t)e.size * sizeof(int));
                for (i = 0; i < total / 2; i++) {
                    madrail_info_t info;
                    madrail_status_t st =
                        madrail_recv(e.ctx, MADRAIL_ANY_PEER, bufs[0], MAXMSG,
                                     msg_tag(0, 3, cls, 0), ignore, &info);
                    check_msg(&e, 3, &info, st, bufs[0], next, cls, -1);
                }
                for (r = 1; r < e.size; r++)
                    it_expect(&e, next[r] == K / 2, "phase 3: class %d: %d of %d from rank %d",
                              cls, next[r], K / 2, r);
            }
        }
        it_check(&e, e.failures == before,
                 "phase 3: masked tag receives took class B before class A, order kept");
        IT_CALL(&e, madrail_pmi_barrier());

        /* 4: named sources, TAG_ANY, last sender first */
        before = e.failures;
        memset(next, 0, (size_t)e.size * sizeof(int));
        IT_CALL(&e, madrail_pmi_barrier());
        for (r = e.size - 1; r >= 1; r--) {
            for (i = 0; i < K; i++) {
                madrail_info_t info;
                madrail_status_t st = madrail_recv(e.ctx, e.job.peers[r], bufs[0], MAXMSG, 0,
                                                   MADRAIL_TAG_ANY, &info);
                check_msg(&e, 4, &info, st, bufs[0], next, -1, r);
            }
        }
        it_check(&e, e.failures == before,
                 "phase 4: per-source TAG_ANY receives, senders in reverse rank order");
        IT_CALL(&e, madrail_pmi_barrier());
        free(reqs);
        free(next);
    }
    for (i = 0; i < (e.rank == 0 ? total : K); i++)
        free(bufs[i]);
    free(bufs);
    return it_finish(&e);
}
