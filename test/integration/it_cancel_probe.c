/*
 * it_cancel_probe: the MPI-facing corners of matching between two
 * processes: probe, matched probe, cancel and synchronous send.
 *
 *  1. iprobe reports source, tag and length without consuming; the first
 *     match in send order is reported; after the receive it is gone.
 *  2. improbe takes a message out of matching: a later irecv with the same
 *     tag gets the NEXT message; imrecv then gets the probed one (eager
 *     and rendezvous).
 *  3. cancel of an unmatched receive completes with info.cancelled = 1 and
 *     does not swallow a later message with that tag.
 *  4. cancel of a send the receiver has not matched takes effect: a
 *     rendezvous send in flight (madrail_cancel) and an eager send that
 *     already completed (madrail_cancel_sent with its info.msg_id) complete
 *     cancelled and their messages never arrive; a send the receiver
 *     matched is not cancelled and its data arrived.
 *  5. MADRAIL_SEND_SYNC does not complete before the receiver posts (the
 *     receiver sleeps 300 ms first): an ordering fact, not a speed gate.
 *
 * Rank 0 sends, rank 1 receives; small sync messages align the steps.
 */
#include "mdr_config.h"

#include "it_common.c"

#define T_A 0x10
#define T_B 0x11
#define T_C 0x20
#define T_E 0x21
#define T_CANCEL 0x30
#define T_ANYCANCEL 0x31
#define T_F 0x40
#define T_G 0x41
#define T_F2 0x42
#define T_GO 0x50
#define T_SYNC_SMALL 0x51
#define T_SYNC_LARGE 0x52
#define T_PLAIN 0x53
#define T_STEP 0x60

#define SZ_A 100
#define SZ_B 100000
#define SZ_C 5000
#define SZ_D 3000
#define SZ_E (200 * 1024)
#define SZ_F 1000
#define SZ_G (200 * 1024)
#define BUFSZ (256 * 1024)

static uint8_t sbuf[8][BUFSZ], rbuf[2][BUFSZ];

static uint64_t seed_of(int tag, size_t size)
{
    return it_seed((uint64_t)tag, size, 42);
}

/* Poll iprobe until a match or timeout; returns flag. */
static int probe_wait(it_env_t *e, madrail_peer_t src, uint64_t tag, madrail_info_t *info)
{
    double t0 = it_now();
    int flag = 0;

    while (!flag && it_now() - t0 < 20.0)
        IT_CALL(e, madrail_iprobe(e->ctx, src, tag, MADRAIL_TAG_EXACT, &flag, info));
    return flag;
}

static madrail_message_t mprobe_wait(it_env_t *e, madrail_peer_t src, uint64_t tag,
                                     madrail_info_t *info)
{
    double t0 = it_now();
    madrail_message_t msg = NULL;

    while (msg == NULL && it_now() - t0 < 20.0)
        IT_CALL(e, madrail_improbe(e->ctx, src, tag, MADRAIL_TAG_EXACT, &msg, info));
    return msg;
}

static void check_data(it_env_t *e, const char *what, const uint8_t *buf,
                       const madrail_info_t *info, int tag, size_t size)
{
    size_t first, bad;

    if (!it_check(e, info->length == size && info->tag == (uint64_t)tag,
                  "%s: %zu bytes with tag 0x%llx (expected %zu, 0x%x)", what, info->length,
                  (unsigned long long)info->tag, size, tag))
        return;
    bad = it_verify(buf, size, seed_of(tag, size), &first);
    if (bad == 0)
        it_check(e, 1, "%s: content byte-exact", what);
    else
        it_check(e, 0, "%s: %zu bad bytes, first at offset %zu", what, bad, first);
}

static void step_sync(it_env_t *e, madrail_peer_t peer, int step)
{
    uint8_t b = (uint8_t)step, got = 0;
    madrail_request_t r;
    IT_CALL(e, madrail_irecv(e->ctx, peer, &got, 1, T_STEP, MADRAIL_TAG_EXACT, &r));
    IT_CALL(e, madrail_send(e->ctx, peer, &b, 1, T_STEP, 0));
    IT_CALL(e, madrail_wait(&r, NULL));
    if (got != b)
        it_check(e, 0, "step sync: peer at step %d, we are at %d", got, step);
}

static void sender(it_env_t *e)
{
    madrail_peer_t peer = e->job.peers[1];
    madrail_request_t r[4];
    madrail_info_t info;
    madrail_status_t st;
    double t0, dt;
    uint8_t go;
    int i;

    for (i = 0; i < 8; i++)
        memset(sbuf[i], 0, BUFSZ);
    /* 1 */
    it_fill(sbuf[0], SZ_A, seed_of(T_A, SZ_A));
    it_fill(sbuf[1], SZ_B, seed_of(T_B, SZ_B));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[0], SZ_A, T_A, 0, &r[0]));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[1], SZ_B, T_B, 0, &r[1]));
    IT_CALL(e, madrail_wait(&r[0], NULL));
    IT_CALL(e, madrail_wait(&r[1], NULL));
    step_sync(e, peer, 1);

    /* 2: C and D share a tag; E is rendezvous */
    it_fill(sbuf[2], SZ_C, seed_of(T_C, SZ_C));
    it_fill(sbuf[3], SZ_D, seed_of(T_C, SZ_D));
    it_fill(sbuf[4], SZ_E, seed_of(T_E, SZ_E));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[2], SZ_C, T_C, 0, &r[0]));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[3], SZ_D, T_C, 0, &r[1]));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[4], SZ_E, T_E, 0, &r[2]));
    for (i = 0; i < 3; i++)
        IT_CALL(e, madrail_wait(&r[i], NULL));
    step_sync(e, peer, 2);

    /* 3: after rank 1 cancelled its receives, send with those tags */
    step_sync(e, peer, 3);
    it_fill(sbuf[5], 64, seed_of(T_CANCEL, 64));
    IT_CALL(e, madrail_send(e->ctx, peer, sbuf[5], 64, T_CANCEL, 0));
    step_sync(e, peer, 30);

    /* 4: cancel of sends the receiver has not matched (it is in step_sync,
     * progressing): an eager one that completed, a rendezvous one in flight */
    it_fill(sbuf[6], SZ_F, seed_of(T_F, SZ_F));
    it_fill(sbuf[7], SZ_G, seed_of(T_G, SZ_G));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[6], SZ_F, T_F, 0, &r[0]));
    memset(&info, 0, sizeof(info));
    IT_CALL(e, madrail_wait(&r[0], &info));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[7], SZ_G, T_G, 0, &r[1]));
    st = madrail_cancel(e->ctx, r[1]);
    it_check(e, st == MADRAIL_OK, "cancel of a rendezvous send returns %s",
             madrail_status_str(st));
    st = madrail_cancel_sent(e->ctx, peer, info.msg_id, &r[0]);
    it_check(e, st == MADRAIL_OK, "cancel_sent of a completed eager send returns %s",
             madrail_status_str(st));
    for (i = 0; i < 2; i++) {
        memset(&info, 0, sizeof(info));
        st = madrail_wait(&r[i], &info);
        it_check(e, st == MADRAIL_ERR_CANCELED && info.cancelled == 1 && info.length == 0,
                 "unmatched %s send is cancelled (%s, cancelled=%d, length %zu)",
                 i == 0 ? "eager" : "rendezvous", madrail_status_str(st), info.cancelled,
                 info.length);
    }
    step_sync(e, peer, 4);
    /* 4b: a send the receiver matched (before step 41) is not cancelled */
    it_fill(sbuf[6], SZ_F, seed_of(T_F2, SZ_F));
    IT_CALL(e, madrail_isend(e->ctx, peer, sbuf[6], SZ_F, T_F2, 0, &r[0]));
    memset(&info, 0, sizeof(info));
    IT_CALL(e, madrail_wait(&r[0], &info));
    step_sync(e, peer, 41);
    IT_CALL(e, madrail_cancel_sent(e->ctx, peer, info.msg_id, &r[0]));
    memset(&info, 0, sizeof(info));
    st = madrail_wait(&r[0], &info);
    it_check(e, st == MADRAIL_OK && info.cancelled == 0,
             "cancel_sent of an eager send the receiver got: not cancelled (%s, cancelled=%d)",
             madrail_status_str(st), info.cancelled);
    step_sync(e, peer, 42); /* the receiver progressed (answered) in this one */

    /* 5: synchronous sends wait for the (sleeping) receiver */
    {
        static const struct { int tag; size_t size; unsigned flags; const char *what; } cases[] = {
            {T_SYNC_SMALL, 100, MADRAIL_SEND_SYNC, "eager SYNC send"},
            {T_SYNC_LARGE, SZ_E, MADRAIL_SEND_SYNC, "rendezvous SYNC send"},
            {T_PLAIN, 100, 0, "plain eager send"}};
        for (i = 0; i < 3; i++) {
            it_fill(sbuf[0], cases[i].size, seed_of(cases[i].tag, cases[i].size));
            IT_CALL(e, madrail_recv(e->ctx, peer, &go, 1, T_GO, MADRAIL_TAG_EXACT, NULL));
            t0 = it_now();
            IT_CALL(e, madrail_send(e->ctx, peer, sbuf[0], cases[i].size, (uint64_t)cases[i].tag,
                                    cases[i].flags));
            dt = it_now() - t0;
            if (cases[i].flags & MADRAIL_SEND_SYNC)
                it_check(e, dt >= 0.25,
                         "%s completed after %.0f ms (receiver posts after 300 ms: >= 250)",
                         cases[i].what, dt * 1e3);
            else
                printf("rank 0: info - %s completed after %.1f ms (not checked)\n",
                       cases[i].what, dt * 1e3);
        }
    }
    step_sync(e, peer, 5);
}

static void receiver(it_env_t *e)
{
    madrail_peer_t peer = e->job.peers[0];
    madrail_info_t info, info2;
    madrail_message_t msg;
    madrail_request_t r, r2;
    madrail_status_t st;
    uint8_t go = 1;
    int flag, i;

    /* 1: probe */
    memset(&info, 0, sizeof(info));
    flag = probe_wait(e, peer, T_A, &info);
    it_check(e, flag && info.source == peer && info.tag == T_A && info.sent_length == SZ_A,
             "iprobe(source, tag A): flag %d source %u tag 0x%llx sent_length %zu", flag,
             info.source, (unsigned long long)info.tag, info.sent_length);
    memset(&info, 0, sizeof(info));
    IT_CALL(e, madrail_iprobe(e->ctx, peer, T_A, MADRAIL_TAG_EXACT, &flag, &info));
    it_check(e, flag && info.sent_length == SZ_A, "iprobe again: still there (not consumed)");
    memset(&info, 0, sizeof(info));
    flag = probe_wait(e, MADRAIL_ANY_PEER, T_B, &info);
    it_check(e, flag && info.source == peer && info.sent_length == SZ_B,
             "iprobe(ANY_PEER, tag B): rendezvous message, sent_length %zu", info.sent_length);
    IT_CALL(e, madrail_iprobe(e->ctx, MADRAIL_ANY_PEER, 0, MADRAIL_TAG_ANY, &flag, &info));
    it_check(e, flag && info.tag == T_A,
             "iprobe(ANY_PEER, TAG_ANY) reports the first message in order (tag 0x%llx)",
             (unsigned long long)info.tag);
    IT_CALL(e, madrail_iprobe(e->ctx, peer, 0x999, MADRAIL_TAG_EXACT, &flag, NULL));
    it_check(e, flag == 0, "iprobe for a tag never sent: flag 0");
    IT_CALL(e, madrail_recv(e->ctx, peer, rbuf[0], BUFSZ, T_A, MADRAIL_TAG_EXACT, &info));
    check_data(e, "receive after probe (A)", rbuf[0], &info, T_A, SZ_A);
    IT_CALL(e, madrail_recv(e->ctx, MADRAIL_ANY_PEER, rbuf[0], BUFSZ, T_B, MADRAIL_TAG_EXACT,
                            &info));
    check_data(e, "receive after probe (B)", rbuf[0], &info, T_B, SZ_B);
    IT_CALL(e, madrail_iprobe(e->ctx, peer, T_A, MADRAIL_TAG_EXACT, &flag, NULL));
    it_check(e, flag == 0, "iprobe after the receive: gone");
    step_sync(e, peer, 1);

    /* 2: matched probe */
    memset(&info, 0, sizeof(info));
    msg = mprobe_wait(e, peer, T_C, &info);
    if (!it_check(e, msg != NULL && info.sent_length == SZ_C && info.source == peer,
                  "improbe(tag C): first of two same-tag messages, sent_length %zu",
                  info.sent_length))
        it_die(e, "improbe", MADRAIL_ERR_NOT_FOUND);
    memset(&info2, 0, sizeof(info2));
    IT_CALL(e, madrail_irecv(e->ctx, peer, rbuf[1], BUFSZ, T_C, MADRAIL_TAG_EXACT, &r2));
    IT_CALL(e, madrail_wait(&r2, &info2));
    it_check(e, info2.length == SZ_D, "irecv after improbe gets the NEXT message (%zu bytes, "
             "expected %d)", info2.length, SZ_D);
    check_data(e, "irecv after improbe", rbuf[1], &info2, T_C, SZ_D);
    IT_CALL(e, madrail_imrecv(e->ctx, msg, rbuf[0], BUFSZ, &r));
    IT_CALL(e, madrail_wait(&r, &info));
    check_data(e, "imrecv of the probed eager message", rbuf[0], &info, T_C, SZ_C);
    memset(&info, 0, sizeof(info));
    msg = mprobe_wait(e, MADRAIL_ANY_PEER, T_E, &info);
    it_check(e, msg != NULL && info.sent_length == SZ_E,
             "improbe(ANY_PEER, tag E): rendezvous message, sent_length %zu", info.sent_length);
    if (msg == NULL)
        it_die(e, "improbe", MADRAIL_ERR_NOT_FOUND);
    IT_CALL(e, madrail_iprobe(e->ctx, MADRAIL_ANY_PEER, T_E, MADRAIL_TAG_EXACT, &flag, NULL));
    it_check(e, flag == 0, "iprobe after improbe: the message is out of matching");
    IT_CALL(e, madrail_imrecv(e->ctx, msg, rbuf[0], BUFSZ, &r));
    IT_CALL(e, madrail_wait(&r, &info));
    check_data(e, "imrecv of the probed rendezvous message", rbuf[0], &info, T_E, SZ_E);
    step_sync(e, peer, 2);

    /* 3: cancel unmatched receives (named source and wildcard) */
    IT_CALL(e, madrail_irecv(e->ctx, peer, rbuf[0], BUFSZ, T_CANCEL, MADRAIL_TAG_EXACT, &r));
    IT_CALL(e, madrail_irecv(e->ctx, MADRAIL_ANY_PEER, rbuf[1], BUFSZ, T_ANYCANCEL,
                             MADRAIL_TAG_EXACT, &r2));
    st = madrail_cancel(e->ctx, r);
    it_check(e, st == MADRAIL_OK, "cancel of an unmatched receive returns %s",
             madrail_status_str(st));
    st = madrail_cancel(e->ctx, r2);
    it_check(e, st == MADRAIL_OK, "cancel of an unmatched ANY_PEER receive returns %s",
             madrail_status_str(st));
    memset(&info, 0, sizeof(info));
    st = madrail_wait(&r, &info);
    it_check(e, info.cancelled == 1, "cancelled receive: info.cancelled = %d (status %s)",
             info.cancelled, madrail_status_str(st));
    memset(&info, 0, sizeof(info));
    st = madrail_wait(&r2, &info);
    it_check(e, info.cancelled == 1, "cancelled ANY_PEER receive: info.cancelled = %d (%s)",
             info.cancelled, madrail_status_str(st));
    step_sync(e, peer, 3);
    IT_CALL(e, madrail_recv(e->ctx, peer, rbuf[0], BUFSZ, T_CANCEL, MADRAIL_TAG_EXACT, &info));
    check_data(e, "message with the cancelled receive's tag reaches a new receive", rbuf[0],
               &info, T_CANCEL, 64);
    step_sync(e, peer, 30);

    /* 4: the cancelled sends never arrive; the next one does */
    step_sync(e, peer, 4);
    {
        static const int tags[] = {T_F, T_G};
        for (i = 0; i < 2; i++) {
            int flag = 1;
            IT_CALL(e, madrail_iprobe(e->ctx, peer, (uint64_t)tags[i], MADRAIL_TAG_EXACT, &flag,
                                      NULL));
            it_check(e, flag == 0, "the cancelled %s send's message never arrives (flag %d)",
                     i == 0 ? "eager" : "rendezvous", flag);
        }
    }
    IT_CALL(e, madrail_recv(e->ctx, peer, rbuf[0], BUFSZ, T_F2, MADRAIL_TAG_EXACT, &info));
    check_data(e, "eager send matched before its cancel arrives", rbuf[0], &info, T_F2, SZ_F);
    step_sync(e, peer, 41);
    step_sync(e, peer, 42);

    /* 5: sleep 300 ms, then post */
    {
        static const int tags[] = {T_SYNC_SMALL, T_SYNC_LARGE, T_PLAIN};
        static const size_t sizes[] = {100, SZ_E, 100};
        for (i = 0; i < 3; i++) {
            IT_CALL(e, madrail_send(e->ctx, peer, &go, 1, T_GO, 0));
            it_sleep_ms(300);
            IT_CALL(e, madrail_recv(e->ctx, peer, rbuf[0], BUFSZ, (uint64_t)tags[i],
                                    MADRAIL_TAG_EXACT, &info));
            check_data(e, i == 2 ? "plain send after sleep" : "SYNC send after sleep", rbuf[0],
                       &info, tags[i], sizes[i]);
        }
    }
    step_sync(e, peer, 5);
}

int main(void)
{
    it_env_t e;
    int rc;

    rc = it_setup(&e, "it_cancel_probe", 2, NULL);
    if (rc != 0)
        return rc;
    if (e.rank == 0)
        sender(&e);
    else if (e.rank == 1)
        receiver(&e);
    return it_finish(&e);
}
