/*
 * Tag matching in per-peer sequence order.  Every matchable message (EAGER
 * fragment, RTS, RFS_DATA envelope) carries its sender's per-peer sequence
 * number; fragments of one message share it.  A message is offered to
 * matching only when its number comes up (peer->expected_seq), so messages
 * that overtook each other on different rails are matched in send order
 * and MPI's non-overtaking rule holds with wildcards.  Messages that
 * arrived early wait in the peer's `inflight` table keyed by sequence;
 * messages in order with no posted receive wait in ctx->unexpected.
 *
 * The common case — a one-fragment message that arrives in order and finds
 * a posted receive — is copied straight from the slot into the user buffer
 * without allocating anything.
 *
 * What a peer can make us hold is bounded, because a peer may be broken
 * or hostile:
 *  - Memory is spent on what arrived, never on what a header claims: an
 *    unmatched message keeps its fragments as they came (pool buffers of
 *    about a slot each), and a matched one writes into the user's buffer.
 *  - Out of order: a fragment stored ahead of the expected sequence number
 *    keeps its credit (ctrl.c withholds it) until its message comes in
 *    order.  Since sequenced messages also start in order at the sender
 *    (ctrl.c), every sequence number from the expected one (its first
 *    fragment still travelling) to the newest arrival owns at least one
 *    credit that has not come back: either a fragment in flight or one
 *    held here.  A peer has at most credits x rails of those, so a legit
 *    one is never credits x rails or more ahead, on any path (EAGER
 *    fragments, RTS, RFS_DATA: each is sequenced and spends a credit like
 *    any message; CTS, FIN, ACK and the RFS offer are not sequenced).
 *    Anything further ahead is refused, and the out-of-order store is
 *    bounded by credits x rails fragments.
 *  - In order but unexpected (no receive posted yet): that is MPI's
 *    unexpected queue, which a legit program may fill as far as it likes;
 *    MADRAIL_RECV_MEM_MAX caps the bytes held per peer (both kinds,
 *    counted in peer->held_bytes), and MADRAIL_RECV_MEM_TOTAL_MAX the bytes
 *    held for all peers together (ctx->held_bytes): without it, every new
 *    peer would bring a cap of its own.  Data a peer already sent cannot be
 *    refused without losing it, so passing either cap fails the peer whose
 *    message passed it, with an error naming the variable, and frees what
 *    it held.
 *  - The fragments of an EAGER message are tracked by the byte ranges that
 *    arrived, not by a count of bytes: one that overlaps a range already
 *    taken (sent twice), is empty, or lies outside its message is refused
 *    before it touches anything, so a message is whole only when every
 *    byte came once.  A re-sent copy that arrived already never gets here
 *    (replay.c drops it by its index on its first rail), so an overlap is
 *    never legit.  In order on one rail, a fragment just extends the one
 *    range (m->got_lo, m->recvd); only fragments that leave a gap between
 *    them (striped over rails, re-sent on another) allocate a short list.
 *  - An EAGER message at or above the rendezvous threshold is refused: a
 *    legit sender moves it by rendezvous (only a receiver-first offer sends
 *    a message eagerly above the threshold, and only up to one slot).
 *  - A peer that fails has its held messages freed at once, except whole
 *    unexpected messages of a peer that only became unreachable (it sent
 *    them; a receive may still take them) and messages the user took with
 *    improbe.
 *
 * A message that answers a receiver-first offer (RFS_DATA, or an EAGER
 * with RFS_CONSUMED) does not go through tag matching: it names the
 * receive that made the offer, and must be the answer to an offer of ours
 * to that peer that is still out (ctrl.c lists every such rule).
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

int mdr_match_fits(const mdr_req_t *req, const mdr_peer_t *peer, uint64_t tag, unsigned hflags)
{
    return mdr_match_test(req->peer, req->tag, req->ignore, req->flags, peer, tag, hflags);
}

static mdr_req_t *mdr_match_posted(mdr_ctx_t *ctx, mdr_peer_t *peer, uint64_t tag,
                                   unsigned hflags)
{
    mdr_list_t *it;
    mdr_list_for_each(it, &ctx->posted) {
        mdr_req_t *req = mdr_container_of(it, mdr_req_t, link);
        if (mdr_match_fits(req, peer, tag, hflags))
            return req;
    }
    return NULL;
}

/* Bytes one held message costs besides its fragments: the record, its
 * allocator header and its slot in the reorder table. */
#define MDR_INMSG_COST (sizeof(mdr_inmsg_t) + 32)

/* What mdr_pool_get(len) really takes. */
static size_t mdr_pool_cost(size_t len)
{
    int c = mdr_pool_class(len);
    return c < 0 ? len : (size_t)1 << (MDR_POOL_MIN_SHIFT + c);
}

/* Count n more bytes held for m's peer; 0 when MADRAIL_RECV_MEM_MAX (this
 * peer) or MADRAIL_RECV_MEM_TOTAL_MAX (all peers) says no. */
static int mdr_held_charge(mdr_inmsg_t *m, size_t n)
{
    mdr_peer_t *peer = m->peer;
    mdr_ctx_t *ctx = peer->ctx;
    if (n > ctx->cfg.recv_mem_max || peer->held_bytes > ctx->cfg.recv_mem_max - n)
        return 0;
    if (n > ctx->cfg.recv_mem_total_max || ctx->held_bytes > ctx->cfg.recv_mem_total_max - n)
        return 0;
    peer->held_bytes += n;
    ctx->held_bytes += n;
    m->charged += n;
    return 1;
}

static void mdr_held_uncharge(mdr_inmsg_t *m, size_t n)
{
    mdr_peer_t *peer = m->peer;
    peer->held_bytes -= n;
    peer->ctx->held_bytes -= n;
    m->charged -= n;
}

static void mdr_frags_free(mdr_ctx_t *ctx, mdr_inmsg_t *m)
{
    mdr_frag_t *f, *next;
    for (f = m->frags; f; f = next) {
        next = f->next;
        mdr_held_uncharge(m, mdr_pool_cost(f->alloc));
        mdr_pool_put(&ctx->pool, f, f->alloc);
    }
    m->frags = NULL;
}

/* Credits m still withholds: returned when it came in order (released),
 * forgotten when it is dropped. */
static void mdr_inmsg_unhold(mdr_inmsg_t *m, int released)
{
    int r;
    for (r = 0; r < m->peer->ctx->nrails; r++)
        if (m->held[r]) {
            unsigned n = m->held[r];
            m->held[r] = 0;
            mdr_ctrl_unhold(&m->peer->rails[r], n, released);
        }
}

void mdr_inmsg_free(mdr_ctx_t *ctx, mdr_inmsg_t *m)
{
    mdr_frags_free(ctx, m);
    free(m->got); /* its bytes go with m->charged */
    free(m->am);
    mdr_inmsg_unhold(m, 0);
    mdr_held_uncharge(m, m->charged);
    free(m);
}

/* What storing a fragment came to. */
enum mdr_store { MDR_STORE_NOMEM = -1, MDR_STORE_CAP = 0, MDR_STORE_OK = 1 };

/* Store a fragment of a message no receive has taken: MDR_STORE_CAP past
 * MADRAIL_RECV_MEM_MAX, MDR_STORE_NOMEM when memory ran out (the fragment
 * is lost: the caller fails the peer, mdr_peer_recv_nomem). */
static enum mdr_store mdr_frag_store(mdr_ctx_t *ctx, mdr_inmsg_t *m, uint64_t off,
                                     const uint8_t *pl, size_t plen)
{
    size_t alloc = sizeof(mdr_frag_t) + plen;
    mdr_frag_t *f;

    if (!mdr_held_charge(m, mdr_pool_cost(alloc)))
        return MDR_STORE_CAP;
    f = mdr_fault_nomem(ctx) ? NULL : mdr_pool_get(&ctx->pool, alloc);
    if (!f) {
        mdr_held_uncharge(m, mdr_pool_cost(alloc));
        return MDR_STORE_NOMEM;
    }
    f->off = off;
    f->len = (uint32_t)plen;
    f->alloc = (uint32_t)alloc;
    memcpy(f->data, pl, plen);
    f->next = m->frags;
    m->frags = f;
    return MDR_STORE_OK;
}

/* The byte ranges of an EAGER message that arrived, once they are more
 * than one: sorted, disjoint, neighbours merged.  A legit sender uses our
 * slot size (every process must use the same MADRAIL_SLOT_SIZE), so there
 * are never more ranges than the message has fragments, at most
 * total / eager_max + 1: more is refused, which keeps the list a few
 * entries long and a fragment's walk of it short.  Its bytes are charged
 * to the peer like the fragments'. */
struct mdr_ranges {
    uint32_t n, cap;
    struct {
        uint64_t lo, hi; /* [lo, hi) */
    } r[];
};

/* What taking a fragment's range came to. */
enum mdr_range {
    MDR_RANGE_OK,
    MDR_RANGE_TAKEN,  /* it overlaps bytes that arrived already, or is empty */
    MDR_RANGE_MANY,   /* more ranges than the message has fragments */
    MDR_RANGE_CAP,    /* its record would pass MADRAIL_RECV_MEM_MAX */
    MDR_RANGE_NOMEM
};

/* Room for at least one more range in m->got. */
static enum mdr_range mdr_ranges_room(mdr_ctx_t *ctx, mdr_inmsg_t *m)
{
    struct mdr_ranges *g = m->got, *ng;
    uint32_t cap = g ? g->cap * 2 : 4;
    size_t have = g ? sizeof(*g) + g->cap * sizeof(g->r[0]) : 0;
    size_t want = sizeof(*g) + cap * sizeof(g->r[0]);

    if (g && g->n < g->cap)
        return MDR_RANGE_OK;
    if (!mdr_held_charge(m, want - have))
        return MDR_RANGE_CAP;
    ng = mdr_fault_nomem(ctx) ? NULL : realloc(g, want);
    if (!ng) {
        mdr_held_uncharge(m, want - have);
        return MDR_RANGE_NOMEM;
    }
    if (!g)
        ng->n = 0;
    ng->cap = cap;
    m->got = ng;
    return MDR_RANGE_OK;
}

/* Take [off, off + plen) as arrived in m, an EAGER message that has its
 * first fragment (off + plen <= total was checked); m->recvd is counted by
 * the store that follows.  Anything but MDR_RANGE_OK changes nothing. */
MDR_HOT static enum mdr_range mdr_range_take(mdr_ctx_t *ctx, mdr_inmsg_t *m, uint64_t off,
                                             size_t plen)
{
    uint64_t end = off + plen;
    struct mdr_ranges *g = m->got;
    uint32_t i, lo, hi;
    int join_prev, join_next;
    enum mdr_range st;

    if (plen == 0) /* only an empty message has an empty fragment, its only one */
        return MDR_RANGE_TAKEN;
    if (!g) {
        uint64_t top = m->got_lo + m->recvd;
        if (off == top) /* the next one: the common case */
            return MDR_RANGE_OK;
        if (end == m->got_lo) {
            m->got_lo = off;
            return MDR_RANGE_OK;
        }
        if (off < top && end > m->got_lo)
            return MDR_RANGE_TAKEN;
        /* a gap between them: a list from now on */
        if (m->total / ctx->eager_max + 1 < 2)
            return MDR_RANGE_MANY;
        st = mdr_ranges_room(ctx, m);
        if (st != MDR_RANGE_OK)
            return st;
        g = m->got;
        i = off < m->got_lo;
        g->r[!i].lo = off;
        g->r[!i].hi = end;
        g->r[i].lo = m->got_lo;
        g->r[i].hi = top;
        g->n = 2;
        return MDR_RANGE_OK;
    }
    /* i: the first range that starts after off */
    for (lo = 0, hi = g->n; lo < hi;) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g->r[mid].lo <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    i = lo;
    if ((i > 0 && g->r[i - 1].hi > off) || (i < g->n && g->r[i].lo < end))
        return MDR_RANGE_TAKEN;
    join_prev = i > 0 && g->r[i - 1].hi == off;
    join_next = i < g->n && g->r[i].lo == end;
    if (join_prev && join_next) { /* it fills a gap: two ranges become one */
        g->r[i - 1].hi = g->r[i].hi;
        memmove(&g->r[i], &g->r[i + 1], (g->n - i - 1) * sizeof(g->r[0]));
        g->n--;
    } else if (join_prev) {
        g->r[i - 1].hi = end;
    } else if (join_next) {
        g->r[i].lo = off;
    } else {
        if ((uint64_t)g->n + 1 > m->total / ctx->eager_max + 1)
            return MDR_RANGE_MANY;
        st = mdr_ranges_room(ctx, m);
        if (st != MDR_RANGE_OK)
            return st;
        g = m->got;
        memmove(&g->r[i + 1], &g->r[i], (g->n - i) * sizeof(g->r[0]));
        g->r[i].lo = off;
        g->r[i].hi = end;
        g->n++;
    }
    return MDR_RANGE_OK;
}

/* The cap was reached: fail the peer (all its rails) and free what it held. */
static void mdr_recv_mem_fail(mdr_peer_t *peer, size_t more)
{
    mdr_ctx_t *ctx = peer->ctx;
    int r;

    if (more <= ctx->cfg.recv_mem_max && peer->held_bytes <= ctx->cfg.recv_mem_max - more)
        mdr_error("peer %u: %zu bytes held in its messages and %zu in all peers' that no "
                  "receive has taken yet (unexpected or out of order); %zu more would pass "
                  "MADRAIL_RECV_MEM_TOTAL_MAX=%zu: failing this peer (post receives earlier, "
                  "or raise MADRAIL_RECV_MEM_TOTAL_MAX)",
                  peer->index, peer->held_bytes, ctx->held_bytes, more,
                  ctx->cfg.recv_mem_total_max);
    else
        mdr_error("peer %u: %zu bytes held in its messages that no receive has taken yet "
                  "(unexpected or out of order); %zu more would pass MADRAIL_RECV_MEM_MAX=%zu: "
                  "failing this peer (post receives earlier, or raise MADRAIL_RECV_MEM_MAX)",
                  peer->index, peer->held_bytes, more, ctx->cfg.recv_mem_max);
    for (r = 0; r < ctx->nrails; r++)
        mdr_peer_rail_mark_down(&peer->rails[r], 1);
    mdr_peer_fail(peer, MADRAIL_ERR_NOMEM);
}

MDR_HOT void mdr_recv_set_info(mdr_req_t *req, mdr_peer_t *peer, uint64_t tag, uint64_t total)
{
    req->matched = 1;
    req->info.source = peer->index;
    peer->index_shown = 1; /* peer.c: never retired now */
    req->info.tag = tag;
    req->info.sent_length = total;
    req->info.length = total < req->len ? total : req->len;
}

/* An eager message for req finished arriving. */
static void mdr_eager_done(mdr_req_t *req, mdr_inmsg_t *m)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_hash_del(&m->peer->inflight, m->seq);
    req->inmsg = NULL;
    mdr_inmsg_free(ctx, m);
    mdr_recv_finish(req, req->info.sent_length > req->len ? MADRAIL_ERR_TRUNCATE : MADRAIL_OK);
}

/* The receive an in-order EAGER or RTS goes to (NULL: none posted).  An
 * RFS_CONSUMED eager names the receive whose offer it spent: that offer
 * must be ours to this peer and unanswered, and the receive the first
 * posted one the message fits; else it is a protocol error (-1, the rail
 * is closed and nothing is touched). */
MDR_HOT static int mdr_match_target(mdr_ctx_t *ctx, mdr_peer_rail_t *pr, uint64_t tag, unsigned hflags,
                                    uint64_t id, mdr_req_t **req_p)
{
    mdr_peer_t *peer = pr->peer;
    mdr_req_t *req = mdr_match_posted(ctx, peer, tag, hflags);

    if (hflags & MDR_HF_RFS_CONSUMED) {
        if (!mdr_rfs_wait_has(peer, id) || !req || req->id != id ||
            req->rfs_state != MDR_RFS_OUT || req->peer != peer->index) {
            mdr_peer_proto_fail(pr, "EAGER spends offer %llx, which is not an open offer of ours "
                               "to this peer that the message fits",
                                (unsigned long long)id);
            return -1;
        }
    }
    *req_p = req;
    return 0;
}

/* Bind an in-order message to a receive. */
static void mdr_bind(mdr_ctx_t *ctx, mdr_inmsg_t *m, mdr_req_t *req)
{
    mdr_peer_t *peer = m->peer;

    if (!mdr_list_empty(&req->link))
        mdr_list_del(&req->link);
    mdr_cancel_inmsg_taken(m); /* a CANCEL waiting for it: too late */
    mdr_recv_set_info(req, peer, m->tag, m->total);
    mdr_rfs_on_match(req, peer, m);
    m->rreq = req;

    switch (m->type) {
    case MDR_MSG_EAGER:
        if (m->flags & MDR_HF_SYNC)
            mdr_eager_send_ack(peer, m->id);
        {
            mdr_frag_t *f;
            for (f = m->frags; f; f = f->next) /* mdr_match_incoming checked off + len <= total */
                if (f->off < req->len)
                    memcpy((uint8_t *)req->buf + f->off, f->data,
                           req->len - f->off < f->len ? req->len - f->off : f->len);
            mdr_frags_free(ctx, m);
        }
        if (m->recvd == m->total)
            mdr_eager_done(req, m);
        else
            req->inmsg = m;
        break;
    case MDR_MSG_RTS:
        mdr_hash_del(&peer->inflight, m->seq);
        mdr_rndv_recv_start(req, peer, m->id, m->total);
        mdr_inmsg_free(ctx, m);
        break;
    default:
        break;
    }
}

/* m's sequence number has come up: match it or park it as unexpected. */
static void mdr_in_order(mdr_ctx_t *ctx, mdr_peer_rail_t *pr, mdr_inmsg_t *m)
{
    mdr_peer_t *peer = m->peer;
    mdr_req_t *req;

    void *am;
    size_t am_len;
    uint64_t am_id;
    int has_am;

    m->in_order = 1;
    peer->expected_seq++;
    mdr_inmsg_unhold(m, 1);
    if (m->type == MDR_MSG_EAGER && (m->flags & MDR_HF_AM)) {
        static const uint64_t none = 0;
        mdr_hash_del(&peer->inflight, m->seq);
        /* one fragment (checked on arrival), or none for an empty one */
        mdr_am_deliver(ctx, peer, m->tag, m->frags ? (const void *)m->frags->data : &none,
                       m->total);
        mdr_inmsg_free(ctx, m);
        return;
    }
    if (m->type == MDR_MSG_RFS_DATA) {
        mdr_hash_del(&peer->inflight, m->seq);
        mdr_rfs_data_in_order(pr, m);
        return;
    }
    /* an announced message (EAGER_AM, RTS with AM): its active message is
     * taken out first, as m may be freed once it is bound */
    has_am = m->has_am;
    am = m->am;
    am_len = m->am_len;
    am_id = m->am_id;
    if (has_am) {
        m->has_am = 0;
        m->am = NULL;
        mdr_held_uncharge(m, am_len);
    }
    if (mdr_match_target(ctx, pr, m->tag, m->flags, m->id, &req) != 0) {
        mdr_hash_del(&peer->inflight, m->seq);
        mdr_inmsg_free(ctx, m);
        free(am);
        return;
    }
    if (req)
        mdr_bind(ctx, m, req);
    else if (mdr_cancel_inmsg_whole(ctx, m, 0)) /* dropped if its sender cancelled it */
        has_am = 0;                             /* and its announcement with it */
    else
        mdr_list_push_tail(&ctx->unexpected, &m->link);
    /* matched or stored: now the handler, at this message's place in the
     * peer's order; a receive it posts takes the message at once (am.c) */
    if (has_am) {
        static const uint64_t none = 0;
        mdr_am_deliver(ctx, peer, am_id, am ? am : (const void *)&none, am_len);
    }
    free(am);
}

/* Keep the active message that announces m until m's turn comes. */
static enum mdr_store mdr_am_keep(mdr_ctx_t *ctx, mdr_inmsg_t *m, uint64_t am_id,
                                  const uint8_t *am, size_t am_len)
{
    m->has_am = 1;
    m->am_id = am_id;
    m->am_len = am_len;
    if (!am_len)
        return MDR_STORE_OK;
    if (!mdr_held_charge(m, am_len))
        return MDR_STORE_CAP;
    m->am = mdr_fault_nomem(ctx) ? NULL : malloc(am_len);
    if (!m->am)
        return MDR_STORE_NOMEM;
    memcpy(m->am, am, am_len);
    return MDR_STORE_OK;
}

MDR_HOT static void mdr_drain_reorder(mdr_ctx_t *ctx, mdr_peer_rail_t *pr)
{
    mdr_peer_t *peer = pr->peer;
    mdr_inmsg_t *m;
    while (peer->inflight.count && (m = mdr_hash_get(&peer->inflight, peer->expected_seq)) &&
           !m->in_order)
        mdr_in_order(ctx, pr, m);
}

/* Store an eager fragment into m (unmatched: a fragment of its own;
 * matched: the user's buffer).  MDR_STORE_CAP when MADRAIL_RECV_MEM_MAX or
 * MADRAIL_RECV_MEM_TOTAL_MAX refused it. */
static enum mdr_store mdr_eager_store(mdr_ctx_t *ctx, mdr_inmsg_t *m, uint64_t off,
                                      const uint8_t *pl, size_t plen)
{
    if (m->rreq) {
        mdr_req_t *req = m->rreq;
        if (off < req->len) {
            size_t n = plen;
            if (off + n > req->len)
                n = req->len - off;
            memcpy((uint8_t *)req->buf + off, pl, n);
        }
    } else if (plen) {
        enum mdr_store st = mdr_frag_store(ctx, m, off, pl, plen);
        if (st != MDR_STORE_OK)
            return st;
    }
    m->recvd += plen;
    if (m->rreq && m->recvd == m->total)
        mdr_eager_done(m->rreq, m);
    else if (m->in_order && !m->rreq && !m->probed && m->recvd == m->total)
        mdr_cancel_inmsg_whole(ctx, m, 1); /* unexpected, now whole: cancelled? */
    return MDR_STORE_OK;
}

uint64_t mdr_match_window(const mdr_ctx_t *ctx)
{
    return (uint64_t)ctx->cfg.credits * (uint64_t)ctx->nrails;
}

/* What a peer may make us hold within its credits, out of order: a
 * fragment per credit, each possibly a message of its own. */
static size_t mdr_ooo_bound(const mdr_ctx_t *ctx)
{
    return (size_t)mdr_match_window(ctx) *
           (mdr_pool_cost(sizeof(mdr_frag_t) + ctx->eager_max) + MDR_INMSG_COST);
}

madrail_status_t mdr_match_check_config(const mdr_ctx_t *ctx)
{
    /* out of order within the credits, plus one whole medium message */
    size_t frag = mdr_pool_cost(sizeof(mdr_frag_t) + ctx->eager_max);
    size_t nfrag = ctx->cfg.rndv_thresh / ctx->eager_max + 1;
    /* its fragments, its record, and its list of ranges when they came
     * with gaps (at most one per fragment, the list doubling from 4); out
     * of order, a message's list costs less than the records of the
     * messages its fragments could otherwise be */
    size_t medium = nfrag * frag + MDR_INMSG_COST + sizeof(struct mdr_ranges) +
                    (2 * nfrag + 4) * sizeof(((struct mdr_ranges *)0)->r[0]);
    size_t need = mdr_ooo_bound(ctx) + medium;

    if (ctx->cfg.recv_mem_max < need) {
        mdr_error("MADRAIL_RECV_MEM_MAX=%zu: a peer may make us hold %zu bytes within its "
                  "credits (MADRAIL_CREDITS=%u x %d rails, MADRAIL_SLOT_SIZE=%zu) plus one "
                  "unexpected message below MADRAIL_RNDV_THRESH=%zu: at least %zu needed",
                  ctx->cfg.recv_mem_max, mdr_ooo_bound(ctx), ctx->cfg.credits, ctx->nrails,
                  ctx->cfg.slot_size, ctx->cfg.rndv_thresh, need);
        return MADRAIL_ERR_CONFIG;
    }
    /* the total may be below the per-peer cap (then it is the tighter one),
     * but a single peer must still fit in it */
    if (ctx->cfg.recv_mem_total_max < need) {
        mdr_error("MADRAIL_RECV_MEM_TOTAL_MAX=%zu: a single peer may make us hold %zu bytes "
                  "within its credits plus one unexpected message below "
                  "MADRAIL_RNDV_THRESH=%zu: at least %zu needed",
                  ctx->cfg.recv_mem_total_max, mdr_ooo_bound(ctx), ctx->cfg.rndv_thresh, need);
        return MADRAIL_ERR_CONFIG;
    }
    return MADRAIL_OK;
}

MDR_HOT void mdr_match_incoming(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    uint64_t seq, tag, total, id, off = 0, xfer = 0, am_id = 0;
    const uint8_t *pl = NULL, *am = NULL;
    size_t plen = 0, am_len = 0;
    int has_am = 0;
    uint8_t type = hdr->type, mflags = hdr->flags;
    mdr_inmsg_t *m;

    switch (hdr->type) {
    /* lengths and flags were checked against ctrl.c's table */
    case MDR_MSG_EAGER: {
        const mdr_eager_hdr_t *e = (const mdr_eager_hdr_t *)hdr;
        seq = e->seq;
        tag = e->tag;
        total = e->total;
        off = e->offset;
        id = e->id;
        pl = (const uint8_t *)(e + 1);
        plen = len - sizeof(*e);
        if ((hdr->flags & MDR_HF_AM) && (off != 0 || plen != total)) {
            mdr_peer_proto_fail(pr, "active message in fragments");
            return;
        }
        if (total >= ctx->cfg.rndv_thresh && total > ctx->eager_max) {
            mdr_peer_proto_fail(pr, "EAGER message of %llu bytes: at or above "
                                "MADRAIL_RNDV_THRESH=%zu a sender uses rendezvous (every "
                                "process must use the same value)",
                                (unsigned long long)total, ctx->cfg.rndv_thresh);
            return;
        }
        if (off > total || plen > total - off || (plen == 0 && total != 0)) {
            mdr_peer_proto_fail(pr, "EAGER fragment %llu+%zu of a %llu-byte message",
                                (unsigned long long)off, plen, (unsigned long long)total);
            return;
        }
        break;
    }
    case MDR_MSG_SHORT: {
        /* a whole message of one fragment: EAGER with total = payload,
         * offset 0 and no id */
        const mdr_short_hdr_t *sh = (const mdr_short_hdr_t *)hdr;
        seq = mdr_seq_from_lo(peer->expected_seq, sh->h.len); /* core.h */
        tag = sh->tag;
        id = 0;
        pl = (const uint8_t *)(sh + 1);
        plen = len - sizeof(*sh);
        total = plen;
        if (plen > ctx->eager_max) {
            mdr_peer_proto_fail(pr, "SHORT message of %zu bytes: more than one fragment's "
                                "%zu (MADRAIL_SLOT_SIZE=%zu)",
                                plen, ctx->eager_max, ctx->cfg.slot_size);
            return;
        }
        type = MDR_MSG_EAGER;
        break;
    }
    case MDR_MSG_EAGER_AM: {
        /* a whole small message after the header of the active message
         * that announces it; matched as an EAGER message */
        const mdr_eager_hdr_t *e = (const mdr_eager_hdr_t *)hdr;
        size_t blen = len - sizeof(*e);
        seq = e->seq;
        tag = e->tag;
        total = e->total;
        id = 0;
        if (e->offset != 0 || total > blen) {
            mdr_peer_proto_fail(pr, "EAGER_AM with %llu data bytes at offset %llu in a body of "
                                "%zu bytes (one fragment: the AM header, then all the data)",
                                (unsigned long long)total, (unsigned long long)e->offset, blen);
            return;
        }
        has_am = 1;
        am_id = e->id;
        am = (const uint8_t *)(e + 1);
        am_len = blen - (size_t)total;
        pl = am + am_len;
        plen = (size_t)total;
        type = MDR_MSG_EAGER;
        break;
    }
    case MDR_MSG_RTS: {
        const mdr_rts_hdr_t *r = (const mdr_rts_hdr_t *)hdr;
        seq = r->seq;
        tag = r->tag;
        total = r->total;
        id = r->sreq_id;
        if (hdr->flags & MDR_HF_AM) { /* body: AM id, then the AM header */
            if (len < sizeof(*r) + sizeof(am_id)) {
                mdr_peer_proto_fail(pr, "RTS with AM of %zu bytes: no AM id", len);
                return;
            }
            memcpy(&am_id, r + 1, sizeof(am_id));
            has_am = 1;
            am = (const uint8_t *)(r + 1) + sizeof(am_id);
            am_len = len - sizeof(*r) - sizeof(am_id);
            mflags = hdr->flags & ~MDR_HF_AM;
        } else if (len != sizeof(*r)) {
            mdr_peer_proto_fail(pr, "RTS of %zu bytes (%zu without an active message)", len,
                                sizeof(*r));
            return;
        }
        break;
    }
    case MDR_MSG_RFS_DATA: {
        const mdr_rfs_data_hdr_t *r = (const mdr_rfs_data_hdr_t *)hdr;
        seq = r->seq;
        tag = r->tag;
        total = r->total;
        id = r->rreq_id;
        xfer = r->xfer_len;
        break;
    }
    default:
        return;
    }

    m = peer->inflight.count ? mdr_hash_get(&peer->inflight, seq) : NULL; /* empty: common */
    if (m) {
        /* another fragment of a known message */
        if (hdr->type != MDR_MSG_EAGER || m->type != MDR_MSG_EAGER || m->has_am || m->tag != tag ||
            m->total != total || m->flags != hdr->flags || m->id != id) {
            mdr_peer_proto_fail(pr, "fragment of message %llu does not fit it",
                                (unsigned long long)seq);
            return;
        }
        switch (mdr_range_take(ctx, m, off, plen)) {
        case MDR_RANGE_OK:
            break;
        case MDR_RANGE_TAKEN:
            mdr_peer_proto_fail(pr, "EAGER fragment %llu+%zu of message %llu (%llu bytes) "
                                "overlaps bytes of it that arrived already (sent twice?)",
                                (unsigned long long)off, plen, (unsigned long long)seq,
                                (unsigned long long)total);
            return;
        case MDR_RANGE_MANY:
            mdr_peer_proto_fail(pr, "EAGER fragment %llu+%zu of message %llu (%llu bytes): "
                                "more separate pieces than a message of that size has "
                                "fragments of %zu bytes (MADRAIL_SLOT_SIZE=%zu; every process "
                                "must use the same value)",
                                (unsigned long long)off, plen, (unsigned long long)seq,
                                (unsigned long long)total, ctx->eager_max, ctx->cfg.slot_size);
            return;
        case MDR_RANGE_CAP:
            /* what mdr_ranges_room asked for: the list doubled, or a new one of 4 */
            mdr_recv_mem_fail(peer, m->got ? m->got->cap * sizeof(m->got->r[0])
                                           : sizeof(struct mdr_ranges) + 4 * sizeof(m->got->r[0]));
            return;
        case MDR_RANGE_NOMEM:
            mdr_peer_recv_nomem(pr, "the record of which bytes of a message arrived");
            return;
        }
        if (!m->in_order && mdr_ctrl_hold(pr))
            m->held[pr->rail]++;
        switch (mdr_eager_store(ctx, m, off, pl, plen)) {
        case MDR_STORE_CAP:
            mdr_recv_mem_fail(peer, mdr_pool_cost(sizeof(mdr_frag_t) + plen));
            break;
        case MDR_STORE_NOMEM:
            mdr_peer_recv_nomem(pr, "a fragment of a message that arrived");
            break;
        default:
            break;
        }
        return;
    }
    if (seq < peer->expected_seq || seq - peer->expected_seq >= mdr_match_window(ctx)) {
        /* see the top of this file: a peer within its credits is never that far ahead */
        mdr_peer_proto_fail(pr, "sequence %llu, expected %llu to %llu (MADRAIL_CREDITS=%u x %d "
                            "rails ahead at most)",
                            (unsigned long long)seq, (unsigned long long)peer->expected_seq,
                            (unsigned long long)(peer->expected_seq + mdr_match_window(ctx) - 1),
                            ctx->cfg.credits, ctx->nrails);
        return;
    }

    if (seq == peer->expected_seq && hdr->type == MDR_MSG_EAGER && (hdr->flags & MDR_HF_AM)) {
        peer->expected_seq++;
        mdr_am_deliver(ctx, peer, tag, pl, plen);
        mdr_drain_reorder(ctx, pr);
        return;
    }

    /* fast path: whole message, in order, receive posted */
    if (seq == peer->expected_seq && type == MDR_MSG_EAGER && plen == total) {
        mdr_req_t *req;
        if (mdr_match_target(ctx, pr, tag, hdr->flags, id, &req) != 0)
            return;
        if (req) {
            mdr_list_del(&req->link);
            mdr_recv_set_info(req, peer, tag, total);
            if (req->rfs_state == MDR_RFS_OUT) {
                mdr_inmsg_t tmp;
                memset(&tmp, 0, sizeof(tmp));
                tmp.type = MDR_MSG_EAGER;
                tmp.flags = hdr->flags;
                mdr_rfs_on_match(req, peer, &tmp);
            }
            if (req->info.length)
                memcpy(req->buf, pl, req->info.length);
            peer->expected_seq++;
            if (hdr->flags & MDR_HF_SYNC)
                mdr_eager_send_ack(peer, id);
            mdr_recv_finish(req, total > req->len ? MADRAIL_ERR_TRUNCATE : MADRAIL_OK);
            if (has_am) { /* matched: now its active message (see mdr_in_order) */
                static const uint64_t none = 0;
                mdr_am_deliver(ctx, peer, am_id, am_len ? (const void *)am : &none, am_len);
            }
            mdr_drain_reorder(ctx, pr);
            return;
        }
    }

    m = mdr_fault_nomem(ctx) ? NULL : calloc(1, sizeof(*m));
    if (!m) {
        mdr_peer_recv_nomem(pr, "the record of a message that arrived");
        return;
    }
    mdr_list_init(&m->link);
    m->peer = peer;
    m->seq = seq;
    m->tag = tag;
    m->total = total;
    m->id = id;
    m->type = type;
    m->flags = mflags;
    m->xfer_len = xfer;
    m->got_lo = off; /* its first range (EAGER) */
    {
        enum mdr_store st = !mdr_held_charge(m, MDR_INMSG_COST) ? MDR_STORE_CAP : MDR_STORE_OK;
        if (st == MDR_STORE_OK && has_am)
            st = mdr_am_keep(ctx, m, am_id, am, am_len);
        if (st == MDR_STORE_OK && type == MDR_MSG_EAGER)
            st = mdr_eager_store(ctx, m, off, pl, plen);
        if (st == MDR_STORE_CAP) {
            size_t more = MDR_INMSG_COST + am_len +
                          (plen ? mdr_pool_cost(sizeof(mdr_frag_t) + plen) : 0);
            mdr_inmsg_free(ctx, m);
            mdr_recv_mem_fail(peer, more);
            return;
        }
        if (st == MDR_STORE_NOMEM) {
            mdr_inmsg_free(ctx, m);
            mdr_peer_recv_nomem(pr, "a fragment of a message that arrived");
            return;
        }
    }
    if (mdr_fault_nomem(ctx) || mdr_hash_put(&peer->inflight, seq, m) != MADRAIL_OK) {
        mdr_inmsg_free(ctx, m);
        mdr_peer_recv_nomem(pr, "the reorder-table slot of a message that arrived");
        return;
    }
    if (seq != peer->expected_seq && mdr_ctrl_hold(pr))
        m->held[pr->rail]++;
    if (seq == peer->expected_seq) {
        mdr_in_order(ctx, pr, m);
        mdr_drain_reorder(ctx, pr);
    }
}

/* ---------------- user-facing operations ---------------- */

/* A send request for buf (not started). */
static mdr_req_t *mdr_send_req_new(mdr_ctx_t *ctx, madrail_peer_t peer_idx, const void *buf,
                                   size_t len, uint64_t tag, unsigned flags)
{
    mdr_req_t *req = mdr_req_alloc(ctx, MDR_REQ_SEND);

    if (req) {
        req->peer = peer_idx;
        req->buf = (void *)buf;
        req->len = len;
        req->tag = tag;
        req->flags = flags;
    }
    return req;
}

madrail_status_t mdr_tagged_isend(mdr_ctx_t *ctx, madrail_peer_t peer_idx, const void *buf,
                                  size_t len, uint64_t tag, unsigned flags, mdr_req_t **req_p)
{
    mdr_peer_t *peer;
    mdr_req_t *req;

    if (!ctx || !req_p || (len && !buf))
        return MADRAIL_ERR_INVALID;
    peer = mdr_peer_get(ctx, peer_idx);
    if (!peer) {
        mdr_error("isend: no peer %u", peer_idx);
        return MADRAIL_ERR_INVALID;
    }
    req = mdr_send_req_new(ctx, peer_idx, buf, len, tag, flags);
    if (!req)
        return MADRAIL_ERR_NOMEM;
    return mdr_send_launch(peer, req, req_p);
}

madrail_status_t madrail_isend(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                               size_t len, uint64_t tag, unsigned flags,
                               madrail_request_t *req_p)
{
    if (flags & ~(unsigned)MADRAIL_SEND_SYNC) {
        mdr_error("isend: unknown flags 0x%x", flags);
        return MADRAIL_ERR_INVALID;
    }
    return mdr_tagged_isend(ctx, peer, buf, len, tag, flags, req_p);
}

MDR_HOT madrail_status_t madrail_isend_nb(madrail_context_t ctx, madrail_peer_t peer_idx,
                                          const void *buf, size_t len, uint64_t tag, unsigned flags,
                                          madrail_request_t *req_p, uint64_t *msg_id_p)
{
    mdr_peer_t *peer;
    mdr_peer_rail_t *pr;
    mdr_req_t *req;
    uint64_t seq;
    int used;

    if (!ctx || !req_p || !msg_id_p || (len && !buf) || flags & ~(unsigned)MADRAIL_SEND_SYNC)
        return madrail_isend(ctx, peer_idx, buf, len, tag, flags, req_p); /* its errors */
    peer = (flags & MADRAIL_SEND_SYNC) ? NULL : mdr_peer_get(ctx, peer_idx);
    used = peer ? mdr_eager_send_now(peer, buf, len, tag, &seq) : -1;
    if (used < 0)
        return madrail_isend(ctx, peer_idx, buf, len, tag, flags, req_p);
    pr = &peer->rails[used];
    if (ctx->rails[used].ops->ep_unsent(pr->ep) == 0) {
        *req_p = NULL; /* complete: nothing of it is left in this process */
        *msg_id_p = mdr_msg_id(seq, (uint8_t)(used + 1));
        return MADRAIL_OK;
    }
    /* The rail keeps bytes of it for now: a request watches them, as
     * madrail_isend's would (the send completes once they left, and its
     * copy for a failed rail names it). */
    req = mdr_send_req_new(ctx, peer_idx, buf, len, tag, 0);
    if (!req) {
        /* it went: what is lost is only the watch over its last bytes */
        *req_p = NULL;
        *msg_id_p = mdr_msg_id(seq, (uint8_t)(used + 1));
        return MADRAIL_OK;
    }
    req->seq = seq;
    req->frag_off = len + 1; /* all sent */
    mdr_send_note(req, used);
    mdr_replay_name_last(pr, req->id);
    *req_p = req;
    mdr_send_done(req);
    return MADRAIL_OK;
}

MDR_HOT static mdr_inmsg_t *mdr_match_unexpected(mdr_ctx_t *ctx, madrail_peer_t src, uint64_t tag,
                                                 uint64_t ignore, unsigned flags)
{
    mdr_list_t *it;
    mdr_list_for_each(it, &ctx->unexpected) {
        mdr_inmsg_t *m = mdr_container_of(it, mdr_inmsg_t, link);
        if (mdr_match_test(src, tag, ignore, flags, m->peer, m->tag, m->flags))
            return m;
    }
    return NULL;
}

MDR_HOT madrail_status_t mdr_tagged_irecv(mdr_ctx_t *ctx, madrail_peer_t src, void *buf, size_t len,
                                          uint64_t tag, uint64_t ignore, unsigned flags,
                                          mdr_req_t **req_p)
{
    mdr_req_t *req;
    mdr_inmsg_t *m;

    if (!ctx || !req_p || (len && !buf))
        return MADRAIL_ERR_INVALID;
    if (src != MADRAIL_ANY_PEER && !mdr_peer_get(ctx, src)) {
        mdr_error("irecv: no peer %u", src);
        return MADRAIL_ERR_INVALID;
    }
    req = mdr_req_alloc(ctx, MDR_REQ_RECV);
    if (!req)
        return MADRAIL_ERR_NOMEM;
    req->peer = src;
    req->buf = buf;
    req->len = len;
    req->tag = tag;
    req->ignore = ignore;
    req->flags = flags;
    *req_p = req;
    m = mdr_match_unexpected(ctx, src, tag, ignore, flags);
    if (m) {
        mdr_list_del(&m->link);
        mdr_bind(ctx, m, req);
        return MADRAIL_OK;
    }
    mdr_list_push_tail(&ctx->posted, &req->link);
    mdr_rfs_maybe_offer(ctx, req);
    return MADRAIL_OK;
}

MDR_HOT madrail_status_t madrail_irecv(madrail_context_t ctx, madrail_peer_t src, void *buf, size_t len,
                                       uint64_t tag, uint64_t ignore, madrail_request_t *req_p)
{
    return mdr_tagged_irecv(ctx, src, buf, len, tag, ignore, 0, req_p);
}

static void mdr_probe_info(const mdr_inmsg_t *m, madrail_info_t *info_p)
{
    if (!info_p)
        return;
    memset(info_p, 0, sizeof(*info_p));
    info_p->status = MADRAIL_OK;
    info_p->source = m->peer->index;
    m->peer->index_shown = 1;
    info_p->tag = m->tag;
    info_p->length = m->total;
    info_p->sent_length = m->total;
}

madrail_status_t madrail_iprobe(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                uint64_t ignore, int *flag_p, madrail_info_t *info_p)
{
    mdr_inmsg_t *m;
    if (!ctx || !flag_p)
        return MADRAIL_ERR_INVALID;
    m = mdr_match_unexpected(ctx, src, tag, ignore, 0);
    if (!m) {
        madrail_progress(ctx);
        m = mdr_match_unexpected(ctx, src, tag, ignore, 0);
    }
    *flag_p = m != NULL;
    if (m)
        mdr_probe_info(m, info_p);
    return MADRAIL_OK;
}

madrail_status_t mdr_tagged_improbe(mdr_ctx_t *ctx, madrail_peer_t src, uint64_t tag,
                                    uint64_t ignore, unsigned flags, madrail_message_t *msg_p,
                                    madrail_info_t *info_p)
{
    mdr_inmsg_t *m;
    if (!ctx || !msg_p)
        return MADRAIL_ERR_INVALID;
    m = mdr_match_unexpected(ctx, src, tag, ignore, flags);
    if (!m) {
        madrail_progress(ctx);
        m = mdr_match_unexpected(ctx, src, tag, ignore, flags);
    }
    if (!m) {
        *msg_p = NULL;
        return MADRAIL_OK;
    }
    mdr_list_del(&m->link);
    m->probed = 1;
    mdr_cancel_inmsg_taken(m);
    mdr_probe_info(m, info_p);
    *msg_p = (madrail_message_t)m;
    return MADRAIL_OK;
}

madrail_status_t madrail_improbe(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                 uint64_t ignore, madrail_message_t *msg_p,
                                 madrail_info_t *info_p)
{
    return mdr_tagged_improbe(ctx, src, tag, ignore, 0, msg_p, info_p);
}

madrail_status_t madrail_imrecv(madrail_context_t ctx, madrail_message_t msg, void *buf,
                                size_t len, madrail_request_t *req_p)
{
    mdr_inmsg_t *m = (mdr_inmsg_t *)msg;
    mdr_req_t *req;

    if (!ctx || !m || !req_p || (len && !buf) || !m->probed)
        return MADRAIL_ERR_INVALID;
    req = mdr_req_alloc(ctx, MDR_REQ_RECV);
    if (!req)
        return MADRAIL_ERR_NOMEM;
    req->peer = m->peer->index;
    req->buf = buf;
    req->len = len;
    req->tag = m->tag;
    req->flags = (m->flags & MDR_HF_INTERNAL) ? MDR_FLAG_INTERNAL : 0;
    m->probed = 0;
    *req_p = req;
    mdr_bind(ctx, m, req);
    return MADRAIL_OK;
}

madrail_status_t madrail_cancel(madrail_context_t ctx, madrail_request_t req)
{
    if (!ctx || !req)
        return MADRAIL_ERR_INVALID;
    if (req->type == MDR_REQ_SEND) { /* asks the receiver (cancel.c) */
        mdr_cancel_send(req);
        return MADRAIL_OK;
    }
    if (req->matched || req->complete)
        return MADRAIL_OK; /* too late: completes normally */
    if (req->rfs_state == MDR_RFS_OUT) { /* completes when the sender answers */
        mdr_rfs_revoke(req);
        return MADRAIL_OK;
    }
    mdr_list_del(&req->link);
    req->info.cancelled = 1;
    mdr_req_complete(req, MADRAIL_ERR_CANCELED);
    return MADRAIL_OK;
}

void mdr_match_peer_release(mdr_peer_t *peer, int all, int keep_complete)
{
    mdr_ctx_t *ctx = peer->ctx;
    mdr_hash_t *h = &peer->inflight;
    mdr_inmsg_t **ms;
    size_t i, n = 0;

    if (h->count == 0)
        return;
    /* collect first: freeing deletes from the table being walked */
    ms = malloc(h->count * sizeof(*ms));
    if (!ms) {
        mdr_error("peer %u: out of memory releasing its messages", peer->index);
        return;
    }
    for (i = 0; i < h->cap && n < h->count; i++) {
        mdr_inmsg_t *m = h->vals[i];
        if (m && mdr_hash_get(h, h->keys[i]) == m)
            ms[n++] = m;
    }
    for (i = 0; i < n; i++) {
        mdr_inmsg_t *m = ms[i];
        int unexpected = m->in_order && !m->rreq && !m->probed;
        if (!all && (m->probed ||
                     (keep_complete && unexpected && m->recvd == m->total) ||
                     (keep_complete && unexpected && m->type != MDR_MSG_EAGER)))
            continue;
        mdr_hash_del(h, m->seq);
        if (unexpected)
            mdr_list_del(&m->link);
        if (m->rreq && m->rreq->inmsg == m)
            m->rreq->inmsg = NULL; /* the receive is failed with the peer */
        mdr_inmsg_free(ctx, m);
    }
    free(ms);
}

void mdr_match_rail_reset(mdr_peer_t *peer, int rail)
{
    mdr_hash_t *h = &peer->inflight;
    size_t i;
    for (i = 0; i < h->cap; i++) {
        mdr_inmsg_t *m = h->vals[i];
        if (m && mdr_hash_get(h, h->keys[i]) == m)
            m->held[rail] = 0;
    }
    peer->rails[rail].held = 0;
}


void mdr_match_release_held(mdr_peer_t *peer)
{
    mdr_hash_t *h = &peer->inflight;
    size_t i;
    for (i = 0; i < h->cap; i++) {
        mdr_inmsg_t *m = h->vals[i];
        if (m && mdr_hash_get(h, h->keys[i]) == m)
            mdr_inmsg_unhold(m, 1); /* a down rail's share is dropped by mdr_ctrl_unhold */
    }
}

/* The sequenced messages all go through matching in sequence order (their
 * rules beyond length and flags are checked by mdr_match_incoming). */
madrail_status_t mdr_tag_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t eager = {
        "EAGER", sizeof(mdr_eager_hdr_t), 1,
        MDR_HF_SYNC | MDR_HF_INTERNAL | MDR_HF_RFS_CONSUMED | MDR_HF_AM, mdr_match_incoming, 0};
    /* RTS: a body only with AM (checked in mdr_match_incoming) */
    static const mdr_ctrl_handler_t rts = {"RTS", sizeof(mdr_rts_hdr_t), 1,
                                           MDR_HF_INTERNAL | MDR_HF_AM, mdr_match_incoming, 0};
    static const mdr_ctrl_handler_t eager_am = {"EAGER_AM", sizeof(mdr_eager_hdr_t), 1, 0,
                                                mdr_match_incoming, 0};
    static const mdr_ctrl_handler_t short_msg = {"SHORT", sizeof(mdr_short_hdr_t), 1,
                                                 MDR_HF_INTERNAL, mdr_match_incoming, 0};
    static const mdr_ctrl_handler_t rfs_data = {"RFS_DATA", sizeof(mdr_rfs_data_hdr_t), 0,
                                                MDR_HF_INTERNAL, mdr_match_incoming, 0};
    madrail_status_t st = mdr_ctrl_register(ctx, MDR_MSG_EAGER, &eager);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_RTS, &rts);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_RFS_DATA, &rfs_data);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_EAGER_AM, &eager_am);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_SHORT, &short_msg);
    return st;
}
