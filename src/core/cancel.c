/*
 * Cancel of a send: only the receiver knows whether a receive has taken
 * the message, so the sender asks it (CANCEL: the message's sequence
 * number and a request id to answer) and the receiver answers once
 * (CANCEL_ANS: dropped or not).  A message the receiver drops is one that
 * sits whole, in order and unmatched in its unexpected queue; its sequence
 * number was consumed when it came in order, so per-peer order and the
 * reorder window are untouched by the drop.  Anything else is answered
 * "not cancelled" and the message goes on normally: matched, probed with
 * improbe, answering a receiver-first offer (that is a match), or not
 * there at all (consumed long ago, or, rarely, not arrived because the
 * CANCEL overtook it on another rail: see below).  "Not cancelled" is
 * always a correct answer (MPI lets a cancel fail), so the receiver needs
 * no state beyond one pending CANCEL on a message that is still arriving
 * (some fragments there, out of order, or in order but not whole): the
 * decision is made when it becomes whole or is matched.
 *
 * The sender sends the CANCEL only once every fragment (or its RTS) was
 * handed to a driver, on the rail that took the last of them: a driver
 * keeps the order of one endpoint, so the CANCEL cannot overtake that
 * message (a medium message whose earlier fragments went on other rails
 * is the case the pending CANCEL above covers).  A send with a CANCEL out
 * does not complete before the answer (cancel_held): the answer names a
 * live request, so it is checked like every other reply (ctrl.c) and a
 * request id is never reused under it.
 *
 * A send that has completed (a small message completes once its bytes
 * left, usually before the user cancels) has no request left: its info
 * carries msg_id (sequence number and rail), and madrail_cancel_sent asks
 * with a request of its own.
 */
#include "mdr_config.h"

#include <string.h>

#include "core/core.h"

#define MDR_BIT(s) (1u << (s))

static const char *const mdr_cancel_names[] = {"NONE", "WANTED", "SENT", "ANSWERED"};

/* req->cancel: asked by the user (WANTED) or sent at once (SENT, from
 * NONE by madrail_cancel_sent); WANTED falls back to NONE when the
 * message matched before it could go; SENT is answered once. */
static const unsigned mdr_cancel_next[] = {
    [MDR_CANCEL_NONE] = MDR_BIT(MDR_CANCEL_WANTED) | MDR_BIT(MDR_CANCEL_SENT),
    [MDR_CANCEL_WANTED] = MDR_BIT(MDR_CANCEL_SENT) | MDR_BIT(MDR_CANCEL_NONE),
    [MDR_CANCEL_SENT] = MDR_BIT(MDR_CANCEL_ANSWERED),
    [MDR_CANCEL_ANSWERED] = 0,
};

static int mdr_cancel_set(mdr_req_t *req, enum mdr_cancel_state to)
{
    if (!(mdr_cancel_next[req->cancel] & MDR_BIT(to))) {
        mdr_state_illegal(req->ctx, "send cancel", req->id, mdr_cancel_names[req->cancel],
                          mdr_cancel_names[to]);
        return -1;
    }
    req->cancel = to;
    return 0;
}

/* Send a CANCEL of message seq answering to id: behind the message on
 * its rail when that rail takes it now, else on any rail. */
static madrail_status_t mdr_cancel_ask(mdr_peer_t *peer, int rail, uint64_t seq, uint64_t id)
{
    mdr_cancel_hdr_t c;

    memset(&c, 0, sizeof(c));
    c.h.type = MDR_MSG_CANCEL;
    c.seq = seq;
    c.id = id;
    if (!mdr_peer_reachable(peer))
        return MADRAIL_ERR_PEER_UNREACHABLE;
    if (rail >= 0 && rail < peer->ctx->nrails && mdr_peer_rail_usable(&peer->rails[rail]) &&
        mdr_ctrl_try_send(peer, rail, &c.h, sizeof(c), NULL, 0) == rail) {
        peer->rails[rail].untracked_sent = 1;
        return MADRAIL_OK;
    }
    return mdr_ctrl_send(peer, -1, &c.h, sizeof(c), NULL, 0);
}

/* Is req's message matched already, as far as the sender can tell? */
static int mdr_send_matched(const mdr_req_t *req)
{
    if (req->rfs_consumed || req->rndv == MDR_RNDV_PUTTING)
        return 1;
    /* a synchronous eager send whose ACK came */
    return (req->flags & MADRAIL_SEND_SYNC) && req->rndv == MDR_RNDV_NONE &&
           req->wait_ack != MDR_ACK_WAIT;
}

void mdr_cancel_kick(mdr_req_t *req)
{
    mdr_peer_t *peer;
    int ready;

    if (req->type != MDR_REQ_SEND || req->cancel != MDR_CANCEL_WANTED || req->complete)
        return;
    if (mdr_send_matched(req)) {
        mdr_cancel_set(req, MDR_CANCEL_NONE); /* too late: completes normally */
        return;
    }
    ready = (req->rndv == MDR_RNDV_NONE && req->frag_off > req->len) ||
            (req->rndv == MDR_RNDV_RTS_SENT && req->unsent_txq == 0);
    if (!ready)
        return;
    peer = mdr_peer_get(req->ctx, req->peer);
    if (!peer || mdr_cancel_ask(peer, (int)req->seq_last - 1, req->seq, req->id) != MADRAIL_OK) {
        mdr_cancel_set(req, MDR_CANCEL_NONE); /* the send completes (or fails) as it would */
        return;
    }
    mdr_cancel_set(req, MDR_CANCEL_SENT);
}

void mdr_cancel_send(mdr_req_t *req)
{
    if (req->complete || req->cancel != MDR_CANCEL_NONE || mdr_send_matched(req))
        return;
    mdr_cancel_set(req, MDR_CANCEL_WANTED);
    mdr_cancel_kick(req);
}

madrail_status_t madrail_cancel_sent(madrail_context_t ctx, madrail_peer_t peer_idx,
                                     uint64_t msg_id, madrail_request_t *req_p)
{
    mdr_peer_t *peer;
    mdr_req_t *req;
    uint64_t seq = msg_id >> 8;
    int rail = (int)(msg_id & 0xff) - 1;
    madrail_status_t st;

    if (!ctx || !req_p)
        return MADRAIL_ERR_INVALID;
    peer = mdr_peer_get(ctx, peer_idx);
    if (!peer || seq >= peer->next_send_seq || rail >= ctx->nrails) {
        mdr_error("cancel_sent: peer %u sent no message %#llx", peer_idx,
                  (unsigned long long)msg_id);
        return MADRAIL_ERR_INVALID;
    }
    req = mdr_req_alloc(ctx, MDR_REQ_SEND);
    if (!req)
        return MADRAIL_ERR_NOMEM;
    req->peer = peer_idx;
    req->seq = seq;
    req->frag_off = 1; /* nothing of its own to send */
    req->cancel_held = 1;
    st = mdr_cancel_ask(peer, rail, seq, req->id);
    if (st != MADRAIL_OK) {
        ctx->active_sends--;
        mdr_req_release(req);
        return st;
    }
    mdr_cancel_set(req, MDR_CANCEL_SENT);
    *req_p = req;
    return MADRAIL_OK;
}

/* ---------------- receiver side ---------------- */

static void mdr_cancel_answer(mdr_peer_t *peer, uint64_t id, int cancelled)
{
    mdr_cancel_ans_hdr_t a;

    memset(&a, 0, sizeof(a));
    a.h.type = MDR_MSG_CANCEL_ANS;
    a.id = id;
    a.cancelled = (uint64_t)cancelled;
    if (mdr_ctrl_send(peer, -1, &a.h, sizeof(a), NULL, 0) != MADRAIL_OK)
        mdr_warn("peer %u: cannot send CANCEL_ANS", peer->index);
}

void mdr_cancel_inmsg_taken(mdr_inmsg_t *m)
{
    if (!m->cancel_asked)
        return;
    m->cancel_asked = 0;
    mdr_cancel_answer(m->peer, m->cancel_id, 0);
}

static int mdr_inmsg_is_whole(const mdr_inmsg_t *m)
{
    return m->type == MDR_MSG_RTS || (m->type == MDR_MSG_EAGER && m->recvd == m->total);
}

int mdr_cancel_inmsg_whole(mdr_ctx_t *ctx, mdr_inmsg_t *m, int listed)
{
    mdr_peer_t *peer = m->peer;
    uint64_t id = m->cancel_id;

    if (!m->cancel_asked || !m->in_order || m->rreq || m->probed || !mdr_inmsg_is_whole(m))
        return 0;
    if (listed)
        mdr_list_del(&m->link);
    mdr_hash_del(&peer->inflight, m->seq);
    mdr_inmsg_free(ctx, m);
    mdr_cancel_answer(peer, id, 1);
    return 1;
}

static void mdr_handle_cancel(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_cancel_hdr_t *c = (const mdr_cancel_hdr_t *)hdr;
    mdr_peer_t *peer = pr->peer;
    mdr_ctx_t *ctx = peer->ctx;
    mdr_inmsg_t *m;

    (void)len;
    /* the sender asks only once its message started, and a started message
     * is never a window or more ahead (tag.c) */
    if (c->seq >= peer->expected_seq && c->seq - peer->expected_seq >= mdr_match_window(ctx)) {
        mdr_peer_proto_fail(pr, "CANCEL of message %llu, which it cannot have sent yet "
                            "(expected %llu, MADRAIL_CREDITS=%u x %d rails ahead at most)",
                            (unsigned long long)c->seq, (unsigned long long)peer->expected_seq,
                            ctx->cfg.credits, ctx->nrails);
        return;
    }
    m = mdr_hash_get(&peer->inflight, c->seq);
    if (!m || m->rreq || m->probed || m->cancel_asked ||
        (m->type != MDR_MSG_EAGER && m->type != MDR_MSG_RTS) ||
        (m->flags & (MDR_HF_RFS_CONSUMED | MDR_HF_AM | MDR_HF_INTERNAL))) {
        /* consumed, taken, asked before, or not a message a user can cancel */
        mdr_cancel_answer(peer, c->id, 0);
        return;
    }
    m->cancel_asked = 1;
    m->cancel_id = c->id;
    /* in order and whole: it is in ctx->unexpected; else decided when it
     * becomes whole or is matched (tag.c) */
    mdr_cancel_inmsg_whole(ctx, m, 1);
}

static void mdr_handle_cancel_ans(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    const mdr_cancel_ans_hdr_t *a = (const mdr_cancel_ans_hdr_t *)hdr;
    mdr_req_t *req;

    (void)len;
    req = mdr_req_for_reply(pr, "CANCEL_ANS", a->id, MDR_REQ_SEND);
    if (!req)
        return;
    if (req->cancel != MDR_CANCEL_SENT) {
        mdr_peer_proto_fail(pr, "CANCEL_ANS for send %llx, which asked for no cancel or had "
                            "its answer", (unsigned long long)a->id);
        return;
    }
    if (a->cancelled > 1) {
        mdr_peer_proto_fail(pr, "CANCEL_ANS for send %llx says %llu (0 or 1)",
                            (unsigned long long)a->id, (unsigned long long)a->cancelled);
        return;
    }
    if (a->cancelled && mdr_send_matched(req)) {
        mdr_peer_proto_fail(pr, "CANCEL_ANS: send %llx cancelled, but the peer matched it "
                            "(%s)", (unsigned long long)a->id,
                            req->rndv == MDR_RNDV_PUTTING ? "sent its CTS" : "sent its ACK");
        return;
    }
    mdr_cancel_set(req, MDR_CANCEL_ANSWERED);
    if (a->cancelled) {
        mdr_sendq_del(req);
        req->info.cancelled = 1;
        mdr_req_complete(req, MADRAIL_ERR_CANCELED);
    } else if (req->cancel_held) {
        mdr_req_complete(req, MADRAIL_OK);
    }
}

madrail_status_t mdr_cancel_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t cancel = {"CANCEL", sizeof(mdr_cancel_hdr_t), 0, 0,
                                              mdr_handle_cancel, 0};
    static const mdr_ctrl_handler_t ans = {"CANCEL_ANS", sizeof(mdr_cancel_ans_hdr_t), 0, 0,
                                           mdr_handle_cancel_ans, 0};
    madrail_status_t st = mdr_ctrl_register(ctx, MDR_MSG_CANCEL, &cancel);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_CANCEL_ANS, &ans);
    return st;
}

uint64_t mdr_cancel_msg_id(const mdr_req_t *req)
{
    return mdr_msg_id(req->seq, req->seq_last);
}
