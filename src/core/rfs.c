/*
 * Receiver-first rendezvous: a receive posted with a known source, for a
 * peer from which nothing else could match first, offers its buffer (RFS)
 * before any RTS (the SSS-CORE "request for sending").  The sender keeps
 * the offer only if it has sent nothing since the receiver's view
 * (expected sequence), and spends it on its next send that matches: an
 * RFS_DATA envelope (sequenced) and puts, no RTS round trip.  Otherwise it
 * declines (RFS_NACK).  A cancel revokes (RFS_REVOKE, on the offer's rail,
 * behind it, so that the sender can count offers against revokes).
 *
 * The offer is a shortcut, never a requirement: with no credit at once,
 * no offer; with any doubt that the offered receive is the one the next
 * message matches, the sender declines.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/compiler.h"

/* ---------------- states ---------------- */

#define MDR_BIT(s) (1u << (s))

static const char *const mdr_rfs_names[] = {"NONE", "OUT", "CONSUMED", "STALE"};

/* req->rfs_state: an offer goes out; the sender spends it (RFS_DATA or an
 * RFS_CONSUMED eager) or declines it (RFS_NACK), or an earlier message
 * matches the receive first (STALE: the NACK that follows only clears it). */
static const unsigned mdr_rfs_next[] = {
    [MDR_RFS_NONE] = MDR_BIT(MDR_RFS_OUT),
    [MDR_RFS_OUT] = MDR_BIT(MDR_RFS_NONE) | MDR_BIT(MDR_RFS_CONSUMED) | MDR_BIT(MDR_RFS_STALE),
    [MDR_RFS_CONSUMED] = 0,
    [MDR_RFS_STALE] = MDR_BIT(MDR_RFS_NONE),
};

int mdr_rfs_set(mdr_req_t *req, enum mdr_rfs_state to)
{
    if (!(mdr_rfs_next[req->rfs_state] & MDR_BIT(to))) {
        mdr_state_illegal(req->ctx, "receiver-first offer", req->id,
                          mdr_rfs_names[req->rfs_state], mdr_rfs_names[to]);
        return -1;
    }
    req->rfs_state = to;
    return 0;
}

static int mdr_rfs_fits(const mdr_rfs_t *o, const mdr_req_t *req)
{
    return (o->space == MDR_RFS_SPACE_INTERNAL) == !!(req->flags & MDR_FLAG_INTERNAL) &&
           ((o->tag ^ req->tag) & ~o->ignore) == 0;
}

MDR_HOT void mdr_rfs_maybe_offer(mdr_ctx_t *ctx, mdr_req_t *req)
{
    mdr_peer_t *peer;
    mdr_list_t *it;
    struct {
        mdr_rfs_hdr_t r;
        uint8_t keys[MDR_KEYS_MAX];
    } msg;
    size_t klen = 0;
    uint32_t nkeys = 0;

    if (!ctx->cfg.recv_first || req->peer == MADRAIL_ANY_PEER || req->len < ctx->cfg.rndv_thresh)
        return;
    peer = mdr_peer_get(ctx, req->peer);
    if (!peer || peer->rfs_out || peer->inflight.count != 0 ||
        peer->nrfs_wait == MDR_RFS_WAIT_MAX)
        return;
    /* req must be the only posted receive that could take this peer's messages */
    mdr_list_for_each(it, &ctx->posted) {
        mdr_req_t *o = mdr_container_of(it, mdr_req_t, link);
        if (o != req && (o->peer == MADRAIL_ANY_PEER || o->peer == req->peer))
            return;
    }
    mdr_list_for_each(it, &ctx->unexpected) {
        mdr_inmsg_t *m = mdr_container_of(it, mdr_inmsg_t, link);
        if (m->peer == peer)
            return;
    }
    if (mdr_rndv_build_keys(peer, req, req->len, msg.keys, &klen, &nkeys) != MADRAIL_OK ||
        nkeys == 0) {
        mdr_rndv_reg_release(req);
        return;
    }
    memset(&msg.r, 0, sizeof(msg.r));
    msg.r.h.type = MDR_MSG_RFS;
    msg.r.rreq_id = req->id;
    msg.r.expected_seq = peer->expected_seq;
    msg.r.tag = req->tag;
    msg.r.ignore = req->ignore;
    msg.r.buf_len = req->len;
    msg.r.nkeys = nkeys;
    msg.r.space = (req->flags & MDR_FLAG_INTERNAL) ? MDR_RFS_SPACE_INTERNAL : MDR_RFS_SPACE_USER;
    /* Only straight to a rail (no queueing): a cancel's RFS_REVOKE must
     * follow the offer on that same rail, so that it never arrives first
     * (the sender counts offers against revokes).  With no credit now,
     * no offer: it is only a shortcut. */
    req->rfs_rail = mdr_ctrl_try_send(peer, -1, &msg.r.h, sizeof(msg.r), msg.keys, klen);
    if (req->rfs_rail < 0) {
        mdr_rndv_reg_release(req);
        return;
    }
    mdr_rfs_set(req, MDR_RFS_OUT);
    peer->ctx->n_rfs_offered++;
    peer->rfs_out = req;
    peer->rfs_wait[peer->nrfs_wait++] = req->id;
}

int mdr_rfs_wait_has(const mdr_peer_t *peer, uint64_t rreq_id)
{
    unsigned i;
    for (i = 0; i < peer->nrfs_wait; i++)
        if (peer->rfs_wait[i] == rreq_id)
            return 1;
    return 0;
}

void mdr_rfs_wait_del(mdr_peer_t *peer, uint64_t rreq_id)
{
    unsigned i;
    for (i = 0; i < peer->nrfs_wait; i++)
        if (peer->rfs_wait[i] == rreq_id) {
            peer->rfs_wait[i] = peer->rfs_wait[--peer->nrfs_wait];
            return;
        }
}

static void mdr_send_nack(mdr_peer_t *peer, uint64_t rreq_id)
{
    mdr_id_hdr_t n;
    memset(&n, 0, sizeof(n));
    n.h.type = MDR_MSG_RFS_NACK;
    n.id = rreq_id;
    peer->ctx->n_rfs_nacked++;
    mdr_ctrl_send(peer, -1, &n.h, sizeof(n), NULL, 0);
}

static void mdr_handle_rfs(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    const mdr_rfs_hdr_t *r = (const mdr_rfs_hdr_t *)hdr;
    mdr_list_t *it;
    mdr_rfs_t *o;
    size_t klen = len - sizeof(*r);

    if (r->buf_len == 0 || r->space > MDR_RFS_SPACE_INTERNAL) {
        mdr_peer_proto_fail(pr, "RFS of %llu bytes in tag space %u", (unsigned long long)r->buf_len,
                            r->space);
        return;
    }
    if (mdr_rndv_keys_check(pr, "RFS", (const uint8_t *)(r + 1), klen, r->nkeys, r->buf_len) != 0)
        return;
    if (peer->nrfs_stored >= MDR_RFS_WAIT_MAX) {
        mdr_peer_proto_fail(pr, "RFS beyond the %d offers a peer may have out", MDR_RFS_WAIT_MAX);
        return;
    }
    mdr_list_for_each(it, &peer->rfs_stored) {
        if (mdr_container_of(it, mdr_rfs_t, link)->rreq_id == r->rreq_id) {
            mdr_peer_proto_fail(pr, "RFS %llx offered twice", (unsigned long long)r->rreq_id);
            return;
        }
    }
    peer->rfs_offers_in++;
    if (r->expected_seq != peer->next_send_seq) {
        /* we sent since the receiver's view: a sent message may match first */
        mdr_send_nack(peer, r->rreq_id);
        return;
    }
    o = malloc(sizeof(*o) + klen);
    if (!o) {
        mdr_send_nack(peer, r->rreq_id);
        return;
    }
    o->rreq_id = r->rreq_id;
    o->tag = r->tag;
    o->ignore = r->ignore;
    o->buf_len = r->buf_len;
    o->space = r->space;
    o->nkeys = r->nkeys;
    o->keys_len = klen;
    memcpy(o->keys, r + 1, klen);
    mdr_list_push_tail(&peer->rfs_stored, &o->link);
    peer->nrfs_stored++;
}

static void mdr_handle_nack(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    const mdr_id_hdr_t *n = (const mdr_id_hdr_t *)hdr;
    mdr_req_t *req;

    (void)len;
    if (!mdr_rfs_wait_has(pr->peer, n->id)) {
        mdr_peer_proto_fail(pr, "RFS_NACK for %llx: no offer of ours to this peer waits for an "
                            "answer",
                            (unsigned long long)n->id);
        return;
    }
    mdr_rfs_wait_del(pr->peer, n->id);
    req = mdr_req_lookup(ctx, n->id);
    if (!req || req->type != MDR_REQ_RECV || req->peer != pr->peer->index)
        return; /* the receive completed and was collected: nothing to undo */
    if (pr->peer->rfs_out == req)
        pr->peer->rfs_out = NULL;
    if (req->rfs_state == MDR_RFS_STALE) {
        mdr_rfs_set(req, MDR_RFS_NONE); /* registrations now serve the CTS */
        return;
    }
    if (req->rfs_state != MDR_RFS_OUT)
        return;
    mdr_rfs_set(req, MDR_RFS_NONE);
    mdr_rndv_reg_release(req);
    if (req->cancel_pending && !req->matched) {
        mdr_list_del(&req->link);
        req->info.cancelled = 1;
        mdr_req_complete(req, MADRAIL_ERR_CANCELED);
    }
}

static void mdr_handle_revoke(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len)
{
    mdr_peer_t *peer = pr->peer;
    const mdr_id_hdr_t *v = (const mdr_id_hdr_t *)hdr;
    mdr_list_t *it;

    (void)len;
    /* Each revoke follows its offer on one rail (mdr_rfs_maybe_offer), and
     * a receive revokes once: never more revokes than offers. */
    if (peer->rfs_revokes_in >= peer->rfs_offers_in) {
        mdr_peer_proto_fail(pr, "RFS_REVOKE %llx: %llu offers from this peer, all revoked",
                            (unsigned long long)v->id, (unsigned long long)peer->rfs_offers_in);
        return;
    }
    peer->rfs_revokes_in++;
    mdr_list_for_each(it, &peer->rfs_stored) {
        mdr_rfs_t *o = mdr_container_of(it, mdr_rfs_t, link);
        if (o->rreq_id == v->id) {
            mdr_list_del(it);
            peer->nrfs_stored--;
            free(o);
            mdr_send_nack(peer, v->id);
            return;
        }
    }
    /* already spent or declined: the answer is on its way */
}

/* If this receive had offered its buffer first, take the offer back. */
void mdr_rfs_on_match(mdr_req_t *req, mdr_peer_t *peer, const mdr_inmsg_t *m)
{
    if (req->rfs_state != MDR_RFS_OUT)
        return;
    if (m->type == MDR_MSG_EAGER && (m->flags & MDR_HF_RFS_CONSUMED)) {
        /* the sender used our offer for a small message: nothing will be
         * put (mdr_match_target checked it answers this receive's offer) */
        mdr_rfs_set(req, MDR_RFS_CONSUMED);
        mdr_rfs_wait_del(peer, req->id);
        if (peer->rfs_out == req)
            peer->rfs_out = NULL;
        mdr_rndv_reg_release(req);
    } else {
        /* matched by a message the sender sent before it saw our offer: it
         * will answer RFS_NACK; keep the registrations for the CTS */
        mdr_rfs_set(req, MDR_RFS_STALE);
    }
}

/* The first stored offer of peer that req fits, taken off the list (the
 * caller owns it), or NULL. */
mdr_rfs_t *mdr_rfs_take(mdr_peer_t *peer, const mdr_req_t *req)
{
    mdr_list_t *it;

    mdr_list_for_each(it, &peer->rfs_stored) {
        mdr_rfs_t *o = mdr_container_of(it, mdr_rfs_t, link);
        if (mdr_rfs_fits(o, req)) {
            mdr_list_del(&o->link);
            peer->nrfs_stored--;
            return o;
        }
    }
    return NULL;
}

/* Spend offer (taken by mdr_rfs_take, freed here) on rendezvous send req:
 * the RFS_DATA envelope and the puts, no RTS. */
madrail_status_t mdr_rfs_send_data(mdr_peer_t *peer, mdr_req_t *req, mdr_rfs_t *offer)
{
    mdr_rfs_data_hdr_t d;
    uint64_t xfer = req->len < offer->buf_len ? req->len : offer->buf_len;
    madrail_status_t st;

    memset(&d, 0, sizeof(d));
    d.h.type = MDR_MSG_RFS_DATA;
    d.h.flags = (req->flags & MDR_FLAG_INTERNAL) ? MDR_HF_INTERNAL : 0;
    d.seq = req->seq;
    d.tag = req->tag;
    d.total = req->len;
    d.rreq_id = offer->rreq_id;
    d.xfer_len = xfer;
    st = mdr_rndv_plan_puts(peer, req, offer->keys, offer->keys_len, offer->nkeys, xfer);
    free(offer);
    if (st != MADRAIL_OK)
        return st;
    st = mdr_ctrl_send_req(peer, -1, req, -1, &d.h, sizeof(d), NULL, 0);
    if (st != MADRAIL_OK)
        return st;
    peer->ctx->n_rfs_used++;
    mdr_rndv_set(req, MDR_RNDV_PUTTING);
    if (req->nputs == 0) {
        mdr_send_done(req);
        return MADRAIL_OK;
    }
    mdr_rndv_issue_puts(req);
    return MADRAIL_OK;
}

/* The RFS_DATA envelope m (taken out of the reorder table) came in order:
 * it must answer an offer of ours to its peer that is still out, and the
 * receive that made it starts waiting for the puts' FINs (which may have
 * come already).  m is freed. */
void mdr_rfs_data_in_order(mdr_peer_rail_t *pr, mdr_inmsg_t *m)
{
    mdr_peer_t *peer = m->peer;
    mdr_ctx_t *ctx = peer->ctx;
    mdr_req_t *req;
    uint64_t xfer;

    req = mdr_req_lookup(ctx, m->id);
    if (!mdr_rfs_wait_has(peer, m->id) || !req || req->type != MDR_REQ_RECV ||
        req->complete || req->peer != peer->index || req->rfs_state != MDR_RFS_OUT ||
        req->matched || !mdr_match_fits(req, peer, m->tag, m->flags)) {
        mdr_peer_proto_fail(pr, "RFS_DATA for %llx, which is not an open offer of ours to this "
                           "peer that the message fits",
                            (unsigned long long)m->id);
        mdr_inmsg_free(ctx, m);
        return;
    }
    xfer = m->total < req->len ? m->total : req->len;
    if (m->xfer_len != xfer || req->fin_bytes > xfer) {
        mdr_peer_proto_fail(pr, "RFS_DATA puts %llu bytes of %llu into a %zu-byte buffer "
                           "(FINs reported %llu)",
                            (unsigned long long)m->xfer_len, (unsigned long long)m->total,
                            req->len, (unsigned long long)req->fin_bytes);
        mdr_inmsg_free(ctx, m);
        return;
    }
    if (!mdr_list_empty(&req->link))
        mdr_list_del(&req->link);
    mdr_recv_set_info(req, peer, m->tag, m->total);
    mdr_rfs_set(req, MDR_RFS_CONSUMED);
    mdr_rndv_set(req, MDR_RNDV_RFS_DATA);
    mdr_rfs_wait_del(peer, req->id);
    if (peer->rfs_out == req)
        peer->rfs_out = NULL;
    req->xfer_len = m->xfer_len;
    mdr_inmsg_free(ctx, m);
    if (req->fin_bytes == req->xfer_len)
        mdr_recv_finish(req, req->info.sent_length > req->len ? MADRAIL_ERR_TRUNCATE
                                                              : MADRAIL_OK);
}

/* Cancel of a receive whose offer is out: ask for it back (once); the
 * receive completes as cancelled when the sender's RFS_NACK comes. */
void mdr_rfs_revoke(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    mdr_id_hdr_t rv;

    if (!req->cancel_pending && peer) {
        memset(&rv, 0, sizeof(rv));
        rv.h.type = MDR_MSG_RFS_REVOKE;
        rv.id = req->id;
        req->cancel_pending = 1;
        /* on the offer's rail, behind it (the sender counts on it) */
        if (mdr_ctrl_send(peer, req->rfs_rail, &rv.h, sizeof(rv), NULL, 0) != MADRAIL_OK)
            req->cancel_pending = 0;
    }
}

madrail_status_t mdr_rfs_init(mdr_ctx_t *ctx)
{
    static const mdr_ctrl_handler_t rfs = {"RFS", sizeof(mdr_rfs_hdr_t), 1, 0, mdr_handle_rfs, 0};
    static const mdr_ctrl_handler_t nack = {"RFS_NACK", sizeof(mdr_id_hdr_t), 0, 0,
                                            mdr_handle_nack, 0};
    static const mdr_ctrl_handler_t revoke = {"RFS_REVOKE", sizeof(mdr_id_hdr_t), 0, 0,
                                              mdr_handle_revoke, 0};
    madrail_status_t st = mdr_ctrl_register(ctx, MDR_MSG_RFS, &rfs);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_RFS_NACK, &nack);
    if (st == MADRAIL_OK)
        st = mdr_ctrl_register(ctx, MDR_MSG_RFS_REVOKE, &revoke);
    return st;
}
