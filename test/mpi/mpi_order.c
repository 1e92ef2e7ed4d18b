/*
 * mpi_order: MPI's non-overtaking rule through wildcards, with messages of
 * mixed protocols in flight at once (3 ranks: 1 and 2 send, 0 receives).
 *
 * Why this matters for ch4:madrail: a small eager message can physically
 * arrive before a large striped one sent earlier (another rail was faster,
 * or the rendezvous is still running), yet it must match later.  Each
 * sender Isends a whole sequence of eager, medium and rendezvous-sized
 * messages at once; the receiver matches them with MPI_ANY_SOURCE and/or
 * MPI_ANY_TAG and checks that, per sender, sequence numbers come out in
 * order and every byte is right.
 *
 * Phases:
 *   A  receives posted late (everything unexpected), ANY_SOURCE+ANY_TAG;
 *   B  all receives pre-posted with ANY_SOURCE+ANY_TAG before any send;
 *   C  tag wildcards: two tags per sender, the receiver drains one tag with
 *      (ANY_SOURCE, tag) first, then the other with (sender, ANY_TAG);
 *   D  ANY_SOURCE with a fixed tag mixed with fixed-source receives.
 */
#include "mpit_common.c"

#define NMSG 40
#define TAG_BASE 1000
#define MAXMSG (MPIT_MIB + 16)

static const size_t sizes[] = {4, 8000, 9000, 70000, 200000, MPIT_MIB, 0, 64, 8100, 65536};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t msg_size(int src, int seq)
{
    return sizes[(size_t)(seq + 3 * src) % NSIZES];
}

/* Sender: NMSG Isends to rank 0, message seq has tag tag_of(seq), pattern
 * seeded by (src, seq, phase), a 16-byte header (src, seq) when it fits. */
static void send_all(int phase, int (*tag_of)(int), char **bufs)
{
    MPI_Request reqs[NMSG];
    int seq;

    for (seq = 0; seq < NMSG; seq++) {
        size_t n = msg_size(mpit_rank, seq);
        mpit_fill(bufs[seq], n, mpit_seed((uint64_t)mpit_rank, (uint64_t)seq, (uint64_t)phase));
        if (n >= 16) {
            int64_t hdr[2] = {mpit_rank, seq};
            memcpy(bufs[seq], hdr, 16);
        }
        MPIT_CALL(MPI_Isend(bufs[seq], (int)n, MPI_BYTE, 0, tag_of(seq), MPI_COMM_WORLD,
                            &reqs[seq]));
    }
    mpit_phase("phase %d: waitall of %d isends", phase, NMSG);
    mpit_waitall(NMSG, reqs);
}

/* Receiver side: check one received message against what (src, seq)
 * must have sent. Returns 1 if good. */
static int check_msg(int phase, char *buf, const MPI_Status *st, int want_src, int want_seq,
                     int want_tag)
{
    size_t n = msg_size(want_src, want_seq), first, bad;
    char tmp[16] = {0};
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    if (!mpit_expect(st->MPI_SOURCE == want_src && st->MPI_TAG == want_tag && count == (int)n,
                     "phase %d: got source %d tag %d count %d, want source %d seq %d tag %d "
                     "count %zu (order broken?)",
                     phase, st->MPI_SOURCE, st->MPI_TAG, count, want_src, want_seq, want_tag, n))
        return 0;
    if (n >= 16) {
        int64_t hdr[2];
        memcpy(hdr, buf, 16);
        if (!mpit_expect(hdr[0] == want_src && hdr[1] == want_seq,
                         "phase %d: payload header says (src %lld, seq %lld), want (%d, %d)",
                         phase, (long long)hdr[0], (long long)hdr[1], want_src, want_seq))
            return 0;
        /* check the rest against the pattern with the header put back */
        memcpy(tmp, buf, 16);
        mpit_fill(buf, 16,
                  mpit_seed((uint64_t)want_src, (uint64_t)want_seq, (uint64_t)phase));
    }
    bad = mpit_verify(buf, n, mpit_seed((uint64_t)want_src, (uint64_t)want_seq, (uint64_t)phase),
                      &first);
    if (n >= 16)
        memcpy(buf, tmp, 16);
    return mpit_expect(bad == 0, "phase %d: src %d seq %d size %zu: %zu bad bytes from %zu",
                       phase, want_src, want_seq, n, bad, first);
}

static int tag_distinct(int seq)
{
    return TAG_BASE + seq;
}

static int tag_two(int seq)
{
    return TAG_BASE + (seq % 2);
}

int main(int argc, char **argv)
{
    char *bufs[NMSG];
    int next[3], i, phase;
    long bad;

    mpit_init(&argc, &argv, "mpi_order");
    mpit_need_ranks(3);
    for (i = 0; i < NMSG; i++)
        bufs[i] = mpit_malloc(MAXMSG);

    /* ---- A: late receives, full wildcard */
    phase = 1;
    mpit_phase("phase A");
    bad = 0;
    if (mpit_rank == 1 || mpit_rank == 2) {
        send_all(phase, tag_distinct, bufs);
    } else if (mpit_rank == 0) {
        char *rb = bufs[0];
        mpit_sleep_ms(200); /* let the senders run ahead: most messages unexpected */
        next[1] = next[2] = 0;
        for (i = 0; i < 2 * NMSG; i++) {
            MPI_Status st;
            mpit_phase("phase A: receive %d of %d", i, 2 * NMSG);
            MPIT_CALL(MPI_Recv(rb, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                               &st));
            if (st.MPI_SOURCE != 1 && st.MPI_SOURCE != 2) {
                mpit_expect(0, "phase A: message from unexpected source %d", st.MPI_SOURCE);
                bad++;
                continue;
            }
            if (!check_msg(phase, rb, &st, st.MPI_SOURCE, next[st.MPI_SOURCE],
                           tag_distinct(next[st.MPI_SOURCE])))
                bad++;
            next[st.MPI_SOURCE]++;
        }
    }
    mpit_check_all(bad, "A: %d mixed-size messages from each of 2 senders, late "
                   "(ANY_SOURCE, ANY_TAG) receives, per-sender order and bytes", NMSG);

    /* ---- B: pre-posted wildcard receives */
    phase = 2;
    mpit_phase("phase B");
    bad = 0;
    if (mpit_rank == 0) {
        MPI_Request reqs[2 * NMSG];
        MPI_Status sts[2 * NMSG];
        char *rbufs[2 * NMSG];
        for (i = 0; i < 2 * NMSG; i++) {
            rbufs[i] = i < NMSG ? bufs[i] : mpit_malloc(MAXMSG);
            MPIT_CALL(MPI_Irecv(rbufs[i], MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                MPI_COMM_WORLD, &reqs[i]));
        }
        MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
        mpit_phase("phase B: waitall of %d wildcard irecvs", 2 * NMSG);
        MPIT_CALL(MPI_Waitall(2 * NMSG, reqs, sts));
        next[1] = next[2] = 0;
        /* Posted receives match in posting order: per sender, sequence
         * numbers must rise along the request array. */
        for (i = 0; i < 2 * NMSG; i++) {
            int src = sts[i].MPI_SOURCE;
            if (src != 1 && src != 2) {
                mpit_expect(0, "phase B: request %d from unexpected source %d", i, src);
                bad++;
                continue;
            }
            if (!check_msg(phase, rbufs[i], &sts[i], src, next[src], tag_distinct(next[src])))
                bad++;
            next[src]++;
        }
        for (i = NMSG; i < 2 * NMSG; i++)
            free(rbufs[i]);
    } else {
        MPIT_CALL(MPI_Barrier(MPI_COMM_WORLD));
        if (mpit_rank == 1 || mpit_rank == 2)
            send_all(phase, tag_distinct, bufs);
    }
    mpit_check_all(bad, "B: %d pre-posted (ANY_SOURCE, ANY_TAG) receives, matched in posting "
                   "order per sender", 2 * NMSG);

    /* ---- C: tag wildcards; two tags per sender */
    phase = 3;
    mpit_phase("phase C");
    bad = 0;
    if (mpit_rank == 1 || mpit_rank == 2) {
        send_all(phase, tag_two, bufs);
    } else if (mpit_rank == 0) {
        char *rb = bufs[0];
        int nexto[3], src;
        MPI_Status st;
        mpit_sleep_ms(100);
        /* all odd-seq messages (tag BASE+1), from any source */
        next[1] = next[2] = 1;
        for (i = 0; i < NMSG; i++) {
            mpit_phase("phase C: (ANY_SOURCE, tag %d) receive %d", TAG_BASE + 1, i);
            MPIT_CALL(MPI_Recv(rb, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, TAG_BASE + 1, MPI_COMM_WORLD,
                               &st));
            src = st.MPI_SOURCE;
            if (src != 1 && src != 2) {
                mpit_expect(0, "phase C: message from unexpected source %d", src);
                bad++;
                continue;
            }
            if (!check_msg(phase, rb, &st, src, next[src], TAG_BASE + 1))
                bad++;
            next[src] += 2;
        }
        /* then the even ones, per sender, with ANY_TAG: only even ones left */
        for (src = 1; src <= 2; src++) {
            nexto[src] = 0;
            for (i = 0; i < NMSG / 2; i++) {
                mpit_phase("phase C: (%d, ANY_TAG) receive %d", src, i);
                MPIT_CALL(MPI_Recv(rb, MAXMSG, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                if (!check_msg(phase, rb, &st, src, nexto[src], TAG_BASE))
                    bad++;
                nexto[src] += 2;
            }
        }
    }
    mpit_check_all(bad, "C: (ANY_SOURCE, tag) drains one tag in per-sender order, then "
                   "(source, ANY_TAG) gets the rest in order");

    /* ---- D: fixed-tag ANY_SOURCE and fixed-source receives interleaved */
    phase = 4;
    mpit_phase("phase D");
    bad = 0;
    if (mpit_rank == 1 || mpit_rank == 2) {
        send_all(phase, tag_distinct, bufs);
    } else if (mpit_rank == 0) {
        char *rb = bufs[0];
        MPI_Status st;
        int k;
        next[1] = next[2] = 0;
        /* alternately: (2, ANY_TAG), then (ANY_SOURCE, tag of whichever
         * sender's next message we name).  Exact tags make the match
         * deterministic. */
        for (k = 0; k < NMSG; k++) {
            mpit_phase("phase D: step %d", k);
            MPIT_CALL(MPI_Recv(rb, MAXMSG, MPI_BYTE, 2, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            if (!check_msg(phase, rb, &st, 2, next[2], tag_distinct(next[2])))
                bad++;
            next[2]++;
            /* tag_distinct(next[1]) now names exactly one pending message
             * from rank 1 (rank 2's message with that tag was consumed). */
            MPIT_CALL(MPI_Recv(rb, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, tag_distinct(next[1]),
                               MPI_COMM_WORLD, &st));
            if (!check_msg(phase, rb, &st, 1, next[1], tag_distinct(next[1])))
                bad++;
            next[1]++;
        }
    }
    mpit_check_all(bad, "D: (source, ANY_TAG) interleaved with (ANY_SOURCE, tag)");

    for (i = 0; i < NMSG; i++)
        free(bufs[i]);
    return mpit_finish();
}
