/*
 * Cancel of sends (issue 13 item 2, src/core/cancel.c): two contexts of
 * this process on loop rails, driven from this thread, so that each race
 * (a CANCEL before the receiver matched, crossing its CTS or ACK, ahead of
 * fragments still travelling on a slower rail) is taken on purpose.
 *
 * What a cancelled send must show: completion with info.cancelled and
 * MADRAIL_ERR_CANCELED, nothing held at the receiver, and the receiver's
 * next message from that sender matched in order (the dropped message's
 * sequence number consumed).  What a send the receiver matched must show:
 * normal completion, not cancelled, and its data delivered whole.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pair.h"

#define SPIN 200000

static void progress2(pair_t *p)
{
    madrail_progress(p->a);
    madrail_progress(p->b);
}

/* Progress both until *req completes; 0 when it did (info filled). */
static int wait2(pair_t *p, madrail_request_t *req, madrail_info_t *info, madrail_status_t *st)
{
    int i, flag = 0;
    for (i = 0; i < SPIN && !flag; i++) {
        madrail_progress(p->b);
        *st = madrail_test(req, &flag, info);
    }
    return flag ? 0 : -1;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        b[i] = (uint8_t)(seed + i * 7);
}

static int same(const uint8_t *b, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (b[i] != (uint8_t)(seed + i * 7))
            return 0;
    return 1;
}

static size_t held(madrail_context_t c)
{
    return ((mdr_ctx_t *)c)->held_bytes;
}

/* After a cancelled message with tag: nothing of it is left at b, and the
 * next message a sends with the same tag is the one b receives. */
static void check_next_matches(pair_t *p, const char *what, uint64_t tag, size_t len)
{
    uint8_t *sb = malloc(len), *rb = calloc(1, len);
    madrail_request_t s, r;
    madrail_info_t si, ri;
    madrail_status_t sst = MADRAIL_OK;
    int flag = 1, i;

    for (i = 0; i < 200; i++)
        progress2(p);
    madrail_iprobe(p->b, p->b2a, tag, 0, &flag, NULL);
    CHECK(flag == 0, "%s: the cancelled message is gone from the receiver", what);
    CHECK(held(p->b) == 0, "%s: the receiver holds nothing for it (%zu bytes)", what, held(p->b));
    fill(sb, len, 99);
    if (madrail_irecv(p->b, p->b2a, rb, len, tag, 0, &r) != MADRAIL_OK ||
        madrail_isend(p->a, p->a2b, sb, len, tag, 0, &s) != MADRAIL_OK) {
        CHECK(0, "%s: the next send and receive start", what);
        goto out;
    }
    CHECK(wait2(p, &s, &si, &sst) == 0 && sst == MADRAIL_OK, "%s: the next send completes", what);
    for (i = 0; i < SPIN && madrail_test(&r, &flag, &ri) == MADRAIL_OK && !flag; i++)
        madrail_progress(p->a);
    CHECK(flag && ri.length == len && same(rb, len, 99),
          "%s: the receiver gets the next message (%zu bytes, its data), in order", what,
          ri.length);
out:
    free(sb);
    free(rb);
}

/* An eager send that completed (its bytes left) and waits unexpected at
 * the receiver: madrail_cancel_sent with its msg_id drops it.  len above
 * the slot size makes it a medium message in fragments; with a slow rail
 * the CANCEL can come before the last fragments. */
static void test_eager_unmatched(const char *rails, size_t len, const char *what)
{
    const char *ov[] = {rails, "MADRAIL_SLOT_SIZE=1k", "MADRAIL_RNDV_THRESH=16k", NULL};
    pair_t p;
    uint8_t *sb = malloc(len);
    madrail_request_t s, c;
    madrail_info_t si, ci;
    madrail_status_t st = MADRAIL_OK;
    int i, flag;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "%s: contexts open", what);
        return;
    }
    fill(sb, len, 1);
    CHECK(madrail_isend(p.a, p.a2b, sb, len, 0x51, 0, &s) == MADRAIL_OK, "%s: isend", what);
    for (i = 0, flag = 0; i < SPIN && !flag; i++) /* only the sender progresses */
        st = madrail_test(&s, &flag, &si);
    CHECK(flag && st == MADRAIL_OK && !si.cancelled, "%s: the send completes once its bytes left",
          what);
    for (i = 0; i < 3; i++) /* some fragments in, maybe not all */
        madrail_progress(p.b);
    if (len > 1024) { /* the case of a CANCEL that must wait for the message to be whole */
        mdr_peer_t *from_a = ((mdr_ctx_t *)p.b)->peers[p.b2a];
        mdr_inmsg_t *m = mdr_hash_get(&from_a->inflight, 0);
        CHECK(m && m->recvd < m->total, "%s: the message is still arriving (%zu of %zu bytes)",
              what, m ? m->recvd : 0, len);
    }
    CHECK(madrail_cancel_sent(p.a, p.a2b, si.msg_id, &c) == MADRAIL_OK,
          "%s: cancel_sent of msg_id %#llx", what, (unsigned long long)si.msg_id);
    CHECK(wait2(&p, &c, &ci, &st) == 0, "%s: the cancel completes", what);
    CHECK(ci.cancelled == 1 && st == MADRAIL_ERR_CANCELED,
          "%s: the receiver dropped it (cancelled %d, %s)", what, ci.cancelled,
          madrail_status_str(st));
    check_next_matches(&p, what, 0x51, 64);
    CHECK(((mdr_ctx_t *)p.a)->state_errors == 0 && ((mdr_ctx_t *)p.b)->state_errors == 0,
          "%s: no refused state transition", what);
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
    free(sb);
}

/* A send still in flight at the sender: a synchronous eager send (waits
 * for its ACK) or a rendezvous one (RTS out, no CTS): madrail_cancel on
 * the live request, answered by the receiver that had not matched it. */
static void test_live_unmatched(size_t len, unsigned flags, const char *what)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:lu0,loop:lu1", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", NULL};
    pair_t p;
    uint8_t *sb = malloc(len);
    madrail_request_t s;
    madrail_info_t si;
    madrail_status_t st = MADRAIL_OK;
    int i, flag = 0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "%s: contexts open", what);
        return;
    }
    fill(sb, len, 2);
    CHECK(madrail_isend(p.a, p.a2b, sb, len, 0x52, flags, &s) == MADRAIL_OK, "%s: isend", what);
    for (i = 0; i < 50; i++)
        progress2(&p);
    madrail_iprobe(p.b, p.b2a, 0x52, 0, &flag, NULL);
    CHECK(flag == 1, "%s: the message waits unexpected at the receiver", what);
    CHECK(s != NULL && !s->complete, "%s: the send waits for the receiver", what);
    CHECK(madrail_cancel(p.a, s) == MADRAIL_OK, "%s: madrail_cancel", what);
    CHECK(wait2(&p, &s, &si, &st) == 0, "%s: the send completes", what);
    CHECK(si.cancelled == 1 && st == MADRAIL_ERR_CANCELED && si.length == 0,
          "%s: cancelled (cancelled %d, %s, length %zu)", what, si.cancelled,
          madrail_status_str(st), si.length);
    check_next_matches(&p, what, 0x52, len);
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
    free(sb);
}

/* The receiver matched the send before the CANCEL came: the send is not
 * cancelled and the data arrives whole.  mode 0: completed eager send,
 * received, then cancel_sent; 1: rendezvous whose CTS crosses the CANCEL;
 * 2: synchronous eager send whose ACK crosses the CANCEL. */
static void test_matched(int mode, const char *what)
{
    const char *ov[] = {"MADRAIL_RAILS=loop:ma0,loop:ma1", "MADRAIL_SLOT_SIZE=1k",
                        "MADRAIL_RNDV_THRESH=16k", "MADRAIL_RNDV_RECV_FIRST=0", NULL};
    size_t len = mode == 1 ? 100000 : 200;
    pair_t p;
    uint8_t *sb = malloc(len), *rb = calloc(1, len);
    madrail_request_t s, r, c;
    madrail_info_t si, ri, ci;
    madrail_status_t st = MADRAIL_OK;
    int i, flag = 0;

    if (pair_open(&p, ov) != 0) {
        CHECK(0, "%s: contexts open", what);
        return;
    }
    fill(sb, len, 3);
    CHECK(madrail_isend(p.a, p.a2b, sb, len, 0x53, mode == 2 ? MADRAIL_SEND_SYNC : 0, &s) ==
              MADRAIL_OK,
          "%s: isend", what);
    if (mode == 0) {
        CHECK(wait2(&p, &s, &si, &st) == 0 && st == MADRAIL_OK, "%s: the send completes", what);
    } else {
        for (i = 0; i < 20; i++)
            madrail_progress(p.a); /* RTS or message out */
    }
    CHECK(madrail_irecv(p.b, p.b2a, rb, len, 0x53, 0, &r) == MADRAIL_OK, "%s: irecv", what);
    for (i = 0; i < 20; i++)
        madrail_progress(p.b); /* matched: CTS or ACK out, or received */
    if (mode == 0) {
        CHECK(madrail_cancel_sent(p.a, p.a2b, si.msg_id, &c) == MADRAIL_OK, "%s: cancel_sent",
              what);
        CHECK(wait2(&p, &c, &ci, &st) == 0, "%s: the cancel completes", what);
    } else {
        CHECK(s != NULL && !s->complete, "%s: the send is still in flight", what);
        CHECK(madrail_cancel(p.a, s) == MADRAIL_OK, "%s: madrail_cancel", what);
        CHECK(wait2(&p, &s, &ci, &st) == 0, "%s: the send completes", what);
    }
    CHECK(ci.cancelled == 0 && st == MADRAIL_OK,
          "%s: not cancelled (cancelled %d, %s)", what, ci.cancelled, madrail_status_str(st));
    for (i = 0; i < SPIN && madrail_test(&r, &flag, &ri) == MADRAIL_OK && !flag; i++)
        madrail_progress(p.a);
    CHECK(flag && ri.length == len && !ri.cancelled && same(rb, len, 3),
          "%s: the receive got the whole message (%zu of %zu bytes)", what,
          flag ? ri.length : 0, len);
    CHECK(((mdr_ctx_t *)p.a)->state_errors == 0 && ((mdr_ctx_t *)p.b)->state_errors == 0,
          "%s: no refused state transition", what);
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
    free(sb);
    free(rb);
}

int main(void)
{
    test_eager_unmatched("MADRAIL_RAILS=loop:eu0", 100, "eager unmatched");
    test_eager_unmatched("MADRAIL_RAILS=loop:em0,loop:em1;delay=3", 10000,
                         "medium unmatched, fragments behind the CANCEL");
    test_live_unmatched(100000, 0, "rendezvous unmatched");
    test_live_unmatched(100, MADRAIL_SEND_SYNC, "synchronous eager unmatched");
    test_matched(0, "eager matched");
    test_matched(1, "rendezvous matched, CTS crossing the CANCEL");
    test_matched(2, "synchronous eager matched, ACK crossing the CANCEL");
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
