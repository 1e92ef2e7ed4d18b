/*
 * Tag matching (tag.c): posted and unexpected queues, per-peer reorder by
 * sequence number, match, probe, cancel, and the tagged send/receive
 * entry points.
 */
#ifndef MDR_TAG_H
#define MDR_TAG_H

#include "core/core.h"

madrail_status_t mdr_tag_init(mdr_ctx_t *ctx);

/* Tagged operations with internal flags (MDR_FLAG_INTERNAL selects the
 * internal tag space, which never matches user messages). */
madrail_status_t mdr_tagged_isend(mdr_ctx_t *ctx, madrail_peer_t peer, const void *buf,
                                  size_t len, uint64_t tag, unsigned flags, mdr_req_t **req_p);
madrail_status_t mdr_tagged_irecv(mdr_ctx_t *ctx, madrail_peer_t src, void *buf, size_t len,
                                  uint64_t tag, uint64_t ignore, unsigned flags,
                                  mdr_req_t **req_p);
madrail_status_t mdr_tagged_improbe(mdr_ctx_t *ctx, madrail_peer_t src, uint64_t tag,
                                    uint64_t ignore, unsigned flags, madrail_message_t *msg_p,
                                    madrail_info_t *info_p);

/* The handler of the sequenced types (EAGER, EAGER_AM, SHORT, RTS,
 * RFS_DATA): what mdr_ctrl_recv_upcall hands on once the message passed
 * ctrl.c's checks and its credit is counted. */
void mdr_match_incoming(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len);

int mdr_match_fits(const mdr_req_t *req, const mdr_peer_t *peer, uint64_t tag, unsigned hflags);
/* The same test from the receive's fields (no request needed). */
static inline int mdr_match_test(madrail_peer_t src, uint64_t rtag, uint64_t ignore,
                                 unsigned rflags, const mdr_peer_t *peer, uint64_t tag,
                                 unsigned hflags)
{
    if (src != MADRAIL_ANY_PEER && src != peer->index)
        return 0;
    if (!!(rflags & MDR_FLAG_INTERNAL) != !!(hflags & MDR_HF_INTERNAL))
        return 0;
    return ((rtag ^ tag) & ~ignore) == 0;
}
/* A receive was matched by peer's message (tag, total bytes). */
void mdr_recv_set_info(mdr_req_t *req, mdr_peer_t *peer, uint64_t tag, uint64_t total);
/* Free an arrived message record, its fragments and withheld credits. */
void mdr_inmsg_free(mdr_ctx_t *ctx, mdr_inmsg_t *m);
/* How far ahead of the expected sequence number a message may be. */
uint64_t mdr_match_window(const mdr_ctx_t *ctx);
/* MADRAIL_RECV_MEM_MAX must leave room for what a peer may send within its
 * credits; called once the rails are open. */
madrail_status_t mdr_match_check_config(const mdr_ctx_t *ctx);
/* Free the messages held for peer: all of them (finalize, all = 1), or the
 * ones no receive can take any more (all = 0: out of order, partly arrived;
 * keep_complete = 0 also drops whole unexpected messages).  Messages taken
 * by improbe belong to the user and stay, except at finalize. */
void mdr_match_peer_release(mdr_peer_t *peer, int all, int keep_complete);
/* A rail to peer restarted its credit accounting (reconnection): credits
 * withheld on the old connection are forgotten. */
void mdr_match_rail_reset(mdr_peer_t *peer, int rail);
/* A rail to peer went down: return the credits withheld for its messages
 * stored out of order (replay.c: the copies that fill the hole need those
 * slots, and would wait for them for good). */
void mdr_match_release_held(mdr_peer_t *peer);

#endif /* MDR_TAG_H */
