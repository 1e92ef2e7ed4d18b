/*
 * it_flood: 100,000 small messages from rank 0 to a slow rank 1, with few
 * credits (MADRAIL_CREDITS=4), so the sender runs out of slots again and
 * again and must queue, never drop or overwrite.
 *
 * Rank 1 is slow on purpose: it sleeps before posting any receive (no
 * progress, so no credit comes back), then posts in batches with pauses.
 * Every message carries its sequence number in its payload and tag; rank
 * 1 checks each one arrives, once, in order, with the right bytes.  Rank 0
 * then reads madrail_rail_stats(): credit_stalls summed over the rails
 * must be > 0 (the test would prove nothing if credits never ran out).
 */
#include "mdr_config.h"

#include "it_common.c"

#define NMSG 100000
#define BATCH 1000
#define MAXLEN 72
#define TAG_FLOOD ((uint64_t)0x464c4f4full << 32)
#define TAG_DONE  ((uint64_t)0x444f4e45ull << 32)

static const char *const overrides[] = {"MADRAIL_CREDITS=4", NULL};

static size_t flood_len(int i)
{
    return 8 + (size_t)(i % 57);
}

int main(void)
{
    it_env_t e;
    int rc, i;

    rc = it_setup(&e, "it_flood", 2, overrides);
    if (rc != 0)
        return rc;

    if (e.rank == 0) {
        madrail_peer_t peer = e.job.peers[1];
        uint8_t msg[MAXLEN];
        uint64_t stalls = 0, sent = 0;
        double t0 = it_now();
        int n = madrail_rail_count(e.ctx), r;
        uint8_t done;

        for (i = 0; i < NMSG; i++) {
            size_t len = flood_len(i);
            uint64_t seq = (uint64_t)i;
            it_fill(msg, len, it_seed((uint64_t)i, 77, 0));
            memcpy(msg, &seq, sizeof(seq));
            /* blocking send: it returns once the message is handed over or
             * queued; a queued copy must survive msg being reused */
            IT_CALL(&e, madrail_send(e.ctx, peer, msg, len, TAG_FLOOD | (uint64_t)i, 0));
        }
        IT_CALL(&e, madrail_recv(e.ctx, peer, &done, 1, TAG_DONE, MADRAIL_TAG_EXACT, NULL));
        it_check(&e, done == 1, "rank 1 reports all %d messages received in order (%.1f s)",
                 NMSG, it_now() - t0);
        for (r = 0; r < n; r++) {
            madrail_rail_stats_t s;
            IT_CALL(&e, madrail_rail_stats(e.ctx, r, &s));
            printf("rank 0: rail %d: tx_msgs %llu credit_stalls %llu\n", r,
                   (unsigned long long)s.tx_msgs, (unsigned long long)s.credit_stalls);
            stalls += s.credit_stalls;
            sent += s.tx_msgs;
        }
        it_check(&e, stalls > 0, "credit_stalls summed over %d rails = %llu (> 0)", n,
                 (unsigned long long)stalls);
        it_check(&e, sent >= NMSG, "tx_msgs summed over rails = %llu (>= %d)",
                 (unsigned long long)sent, NMSG);
    } else if (e.rank == 1) {
        madrail_peer_t peer = e.job.peers[0];
        static uint8_t bufs[BATCH][MAXLEN + 8];
        madrail_request_t reqs[BATCH];
        int base, errors_before = (int)e.failures;
        uint8_t done;

        it_sleep_ms(1500); /* no progress: the sender's credits run dry */
        for (base = 0; base < NMSG; base += BATCH) {
            int nb = NMSG - base < BATCH ? NMSG - base : BATCH;
            /* post a batch (late: most messages are already unexpected) */
            for (i = 0; i < nb; i++)
                IT_CALL(&e, madrail_irecv(e.ctx, peer, bufs[i], sizeof(bufs[i]), TAG_FLOOD,
                                          0xffffffffull, &reqs[i]));
            for (i = 0; i < nb; i++) {
                madrail_info_t info;
                madrail_status_t st = madrail_wait(&reqs[i], &info);
                int seq = base + i;
                uint64_t got = ~0ull;
                size_t first, bad;
                if (!it_expect(&e, st == MADRAIL_OK, "message %d: %s", seq,
                               madrail_status_str(st)))
                    continue;
                if (info.length >= 8)
                    memcpy(&got, bufs[i], 8);
                it_expect(&e, info.tag == (TAG_FLOOD | (uint64_t)seq) && got == (uint64_t)seq,
                          "message %d: tag seq %llu, payload seq %llu (lost, duplicated or "
                          "reordered)",
                          seq, (unsigned long long)(info.tag & 0xffffffffu),
                          (unsigned long long)got);
                it_expect(&e, info.length == flood_len(seq),
                          "message %d: length %zu, expected %zu", seq, info.length,
                          flood_len(seq));
                if (info.length == flood_len(seq)) {
                    uint8_t want[MAXLEN];
                    it_fill(want, info.length, it_seed((uint64_t)seq, 77, 0));
                    bad = 0;
                    first = 0;
                    for (size_t k = 8; k < info.length; k++)
                        if (bufs[i][k] != want[k] && bad++ == 0)
                            first = k;
                    it_expect(&e, bad == 0, "message %d: %zu bad bytes from offset %zu", seq,
                              bad, first);
                }
            }
            if (base % (20 * BATCH) == 0)
                it_sleep_ms(20); /* stay slow */
        }
        it_check(&e, (int)e.failures == errors_before,
                 "%d messages received, each once, in order, byte-exact", NMSG);
        done = e.failures == 0;
        IT_CALL(&e, madrail_send(e.ctx, peer, &done, 1, TAG_DONE, 0));
    }
    return it_finish(&e);
}
