/*
 * it_rndv_many: 300 rendezvous sends (64 KiB .. 1 MiB, odd sizes included)
 * in flight at once from rank 0, each with its own tag; rank 1 posts the
 * receives in a shuffled order, half before the sends start and half
 * after, so some meet the RTS as expected receives (and may go
 * receiver-first) and some find it waiting unexpected.  Every byte of
 * every message is checked, and each send must complete OK.  The sender
 * overwrites each buffer as soon as its send completed: a completed send
 * must not depend on the buffer any more.
 */
#include "mdr_config.h"

#include "it_common.c"

#define NMSG 300
#define MINSZ ((size_t)64 << 10)
#define MAXSZ ((size_t)1 << 20)
#define TAG_BASE ((uint64_t)0x524e4456ull << 32)

static size_t msg_size(int i)
{
    uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1);
    size_t s = MINSZ + (size_t)(it_rand(&st) % (MAXSZ - MINSZ + 1));
    if (i % 10 == 0)
        s = MINSZ; /* the exact edge */
    if (i % 10 == 1)
        s = MAXSZ;
    return s;
}

int main(void)
{
    it_env_t e;
    int rc, i;
    uint8_t *bufs[NMSG];
    madrail_request_t reqs[NMSG];
    size_t total = 0;

    rc = it_setup(&e, "it_rndv_many", 2, NULL);
    if (rc != 0)
        return rc;
    if (e.rank > 1) { /* extra ranks only join the job-wide barriers */
        IT_CALL(&e, madrail_pmi_barrier());
        IT_CALL(&e, madrail_pmi_barrier());
        return it_finish(&e);
    }
    for (i = 0; i < NMSG; i++) {
        bufs[i] = it_alloc(&e, msg_size(i));
        total += msg_size(i);
    }

    if (e.rank == 0) {
        madrail_peer_t peer = e.job.peers[1];
        unsigned before = e.failures;
        double t0;
        for (i = 0; i < NMSG; i++)
            it_fill(bufs[i], msg_size(i), it_seed((uint64_t)i, 300, 0));
        IT_CALL(&e, madrail_pmi_barrier()); /* rank 1 posted the first half */
        t0 = it_now();
        for (i = 0; i < NMSG; i++)
            IT_CALL(&e, madrail_isend(e.ctx, peer, bufs[i], msg_size(i),
                                      TAG_BASE | (uint64_t)i, 0, &reqs[i]));
        IT_CALL(&e, madrail_pmi_barrier()); /* all issued before rank 1 posts the rest */
        for (i = 0; i < NMSG; i++) {
            madrail_info_t info;
            madrail_status_t st = madrail_wait(&reqs[i], &info);
            it_expect(&e, st == MADRAIL_OK && info.length == msg_size(i),
                      "send %d (%zu B): %s, length %zu", i, msg_size(i),
                      madrail_status_str(st), info.length);
        }
        it_check(&e, e.failures == before, "%d rendezvous sends in flight at once (%zu MiB in "
                 "%.2f s) completed",
                 NMSG, total >> 20, it_now() - t0);
        /* A completed send's buffer is the user's again: scribbling on it
         * must not change what the receiver gets, even if the data is
         * still on its way (rank 1 checks). */
        for (i = 0; i < NMSG; i++)
            memset(bufs[i], 0xdd, msg_size(i));
    } else {
        madrail_peer_t peer = e.job.peers[0];
        int order[NMSG], k, bad_msgs = 0;
        uint64_t st_rng = 12345;
        for (i = 0; i < NMSG; i++)
            order[i] = i;
        it_shuffle(order, NMSG, &st_rng);
        for (k = 0; k < NMSG / 2; k++) {
            i = order[k];
            memset(bufs[i], 0, msg_size(i));
            IT_CALL(&e, madrail_irecv(e.ctx, peer, bufs[i], msg_size(i), TAG_BASE | (uint64_t)i,
                                      MADRAIL_TAG_EXACT, &reqs[i]));
        }
        IT_CALL(&e, madrail_pmi_barrier());
        IT_CALL(&e, madrail_pmi_barrier());
        it_sleep_ms(100);
        for (; k < NMSG; k++) {
            i = order[k];
            IT_CALL(&e, madrail_irecv(e.ctx, peer, bufs[i], msg_size(i), TAG_BASE | (uint64_t)i,
                                      MADRAIL_TAG_EXACT, &reqs[i]));
        }
        /* wait in yet another order: the shuffle reversed */
        for (k = NMSG - 1; k >= 0; k--) {
            madrail_info_t info;
            madrail_status_t st;
            size_t first, bad;
            i = order[k];
            st = madrail_wait(&reqs[i], &info);
            if (!it_expect(&e, st == MADRAIL_OK, "receive %d: %s", i, madrail_status_str(st))) {
                bad_msgs++;
                continue;
            }
            it_expect(&e, info.length == msg_size(i) && info.tag == (TAG_BASE | (uint64_t)i),
                      "receive %d: length %zu (expected %zu), tag 0x%llx", i, info.length,
                      msg_size(i), (unsigned long long)info.tag);
            bad = it_verify(bufs[i], msg_size(i), it_seed((uint64_t)i, 300, 0), &first);
            if (!it_expect(&e, bad == 0, "receive %d (%zu B): %zu bad bytes from offset %zu", i,
                           msg_size(i), bad, first))
                bad_msgs++;
        }
        it_check(&e, bad_msgs == 0,
                 "%d receives posted in shuffled order (half late), %zu MiB byte-exact "
                 "(%d bad messages)",
                 NMSG, total >> 20, bad_msgs);
    }
    for (i = 0; i < NMSG; i++)
        free(bufs[i]);
    return it_finish(&e);
}
