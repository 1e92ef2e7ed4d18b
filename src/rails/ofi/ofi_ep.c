/*
 * Endpoints of the ofi driver: the hello/bye protocol that gives a
 * connectionless RDM endpoint the connection semantics rail.h promises,
 * control messages (a copy into a pre-registered send buffer and fi_send
 * with a completion) and puts (fi_writemsg straight from the caller's
 * memory).  fi_inject only on shm (MADRAIL_OFI_INJECT), for a small
 * message when nothing of its ep is in flight: shm puts it in the peer's
 * queue inside the call, so the send is done there, where fi_send would
 * leave it held until a later progress call reads its completion (0.5 us
 * of an 8-byte ping-pong's 1.4).  Elsewhere no fi_inject: a completion is
 * where a dead peer shows (rxm takes fi_inject to a dead peer forever,
 * silently), and fi_sendmsg with FI_INJECT | FI_COMPLETION broke
 * send-after-send order in rxm 1.17 (conformance ctrl-burst).
 *
 * Nothing is queued inside the driver: when the provider says -FI_EAGAIN
 * the operation returns MADRAIL_ERR_NORESOURCE and the core retries after
 * progress, so ep_backlog only counts bytes the provider holds.  Ordering
 * of control messages is the provider's FI_ORDER_SAS (asked for at open);
 * a put's ordering promise is FI_ORDER_SAW or FI_DELIVERY_COMPLETE (see
 * ofi_rail.c).  Completions are reported from progress only; an ep
 * destroyed with operations in flight leaves them as orphans whose
 * completions are dropped when the provider returns them.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails/ofi/ofi.h"
#include "util/clock.h"
#include "util/compiler.h"
#include "util/log.h"

static void mdr_ofi_hs_count(mdr_ep_t *ep);
static void mdr_ofi_hs_uncount(mdr_ep_t *ep);

static const char *mdr_ofi_bye_str(uint32_t reason)
{
    switch (reason) {
    case MDR_OFI_BYE_CLOSED: return "the peer closed its rail";
    case MDR_OFI_BYE_DESTROYED: return "the peer destroyed its endpoint";
    case MDR_OFI_BYE_REFUSED: return "the peer refused the connection";
    case MDR_OFI_BYE_PROTO: return "the peer saw a protocol error from us";
    case MDR_OFI_BYE_FAILED: return "the peer's endpoint failed";
    }
    return "the peer said goodbye";
}

/* ---------------- small pools ---------------- */

mdr_ofi_op_t *mdr_ofi_op_get(mdr_rail_t *rail)
{
    mdr_list_t *l = mdr_list_pop_head(&rail->free_ops);
    mdr_ofi_op_t *op;

    if (l != NULL)
        op = mdr_container_of(l, mdr_ofi_op_t, link);
    else if ((op = malloc(sizeof(*op))) == NULL)
        return NULL;
    memset(op, 0, sizeof(*op));
    mdr_list_init(&op->link);
    return op;
}

void mdr_ofi_op_put(mdr_rail_t *rail, mdr_ofi_op_t *op)
{
    mdr_list_push_head(&rail->free_ops, &op->link);
}

static mdr_ofi_txbuf_t *mdr_ofi_txb_get(mdr_rail_t *rail)
{
    mdr_ofi_txslab_t *slab;
    mdr_list_t *l;
    unsigned i;

    l = mdr_list_pop_head(&rail->txb_free);
    if (l != NULL)
        return mdr_container_of(l, mdr_ofi_txbuf_t, link);
    if (rail->ntxb + MDR_OFI_TXB_SLAB > MDR_OFI_TXB_MAX)
        return NULL;
    slab = calloc(1, sizeof(*slab));
    if (slab == NULL)
        return NULL;
    if (posix_memalign((void **)&slab->mem, 64, rail->txb_size * MDR_OFI_TXB_SLAB) != 0) {
        free(slab);
        return NULL;
    }
    {
        void *desc = NULL;
        if (mdr_ofi_reg_local(rail, slab->mem, rail->txb_size * MDR_OFI_TXB_SLAB, FI_SEND,
                              &slab->mr, &desc) != MADRAIL_OK) {
            free(slab->mem);
            free(slab);
            return NULL;
        }
        for (i = 0; i < MDR_OFI_TXB_SLAB; i++) {
            slab->bufs[i].buf = slab->mem + (size_t)i * rail->txb_size;
            slab->bufs[i].desc = desc;
            if (i > 0)
                mdr_list_push_tail(&rail->txb_free, &slab->bufs[i].link);
        }
    }
    mdr_list_push_tail(&rail->txb_slabs, &slab->link);
    rail->ntxb += MDR_OFI_TXB_SLAB;
    return &slab->bufs[0];
}

void mdr_ofi_txb_release(mdr_rail_t *rail, mdr_ofi_txbuf_t *txb)
{
    mdr_list_push_head(&rail->txb_free, &txb->link);
}

/* ---------------- ep life cycle ---------------- */

static madrail_status_t mdr_ofi_ep_alloc(mdr_rail_t *rail, uint64_t uuid, void *cookie,
                                         mdr_ofi_peer_t *peer, mdr_ep_t **ep_p)
{
    mdr_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL)
        return MADRAIL_ERR_NOMEM;
    if (mdr_rail_ep_init(&rail->base, &ep->base, uuid, cookie, 1) != MADRAIL_OK ||
        !ep->base.mapped) {
        mdr_list_del(&ep->base.link); /* harmless when it was not filed */
        free(ep);
        return MADRAIL_ERR_NOMEM;
    }
    ep->rail = rail;
    ep->peer = peer;
    if (rail->tcpdiag.local.family != 0)
        (void)mdr_tcp_addr_of_sockaddr(peer->name, peer->name_len, &ep->path.remote);
    ep->epid = rail->next_epid++;
    if (rail->next_epid == 0)
        rail->next_epid = 1; /* 0 means "unknown" on the wire */
    mdr_list_init(&ep->ops);
    *ep_p = ep;
    return MADRAIL_OK;
}

mdr_ep_t *mdr_ofi_ep_lookup(mdr_rail_t *rail, uint64_t uuid)
{
    mdr_rail_ep_t *b = mdr_rail_ep_lookup(&rail->base, uuid);
    return b != NULL ? mdr_container_of(b, mdr_ep_t, base) : NULL;
}

void mdr_ofi_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
{
    mdr_rail_t *rail = ep->rail;
    va_list ap;

    if (ep->base.destroyed || ep->failed)
        return;
    va_start(ap, fmt);
    mdr_rail_ep_fail_set(&ep->base, status, fmt, ap);
    va_end(ap);
    if (status == MADRAIL_ERR_RAIL_PROTO)
        mdr_error("rail %s peer %016llx: %s; closing the endpoint", rail->log_name,
                  (unsigned long long)ep->base.uuid, ep->base.fail_reason);
    else
        mdr_info("rail %s peer %016llx: %s", rail->log_name, (unsigned long long)ep->base.uuid,
                 ep->base.fail_reason);
    ep->failed = 1;
    /* A connection that breaks breaks at both ends: tell the peer (best
     * effort; a peer that is gone will not hear it anyway). */
    if (!ep->bye_received)
        mdr_ofi_send_bye(ep, status == MADRAIL_ERR_RAIL_PROTO ? MDR_OFI_BYE_PROTO
                                                              : MDR_OFI_BYE_FAILED);
}

/* An ep whose peer said an orderly goodbye fails when used; returns 1 then. */
static int mdr_ofi_closed_check(mdr_ep_t *ep)
{
    if (!ep->peer_closed)
        return 0;
    mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "%s", mdr_ofi_bye_str(ep->closed_reason));
    return 1;
}

void mdr_ofi_ep_free(mdr_rail_ep_t *base)
{
    free(mdr_container_of(base, mdr_ep_t, base));
}

madrail_status_t mdr_ofi_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p)
{
    const uint8_t *a = addr;
    uint32_t mark, hash;
    uint16_t nlen;
    mdr_ofi_peer_t *peer;
    mdr_ep_t *old;
    madrail_status_t st;
    int ret;

    if (rail == NULL || addr == NULL || ep_p == NULL)
        return MADRAIL_ERR_INVALID;
    if (len < MDR_OFI_ADDR_HDR) {
        mdr_error("rail %s peer %016llx: address of %zu bytes is too short", rail->log_name,
                  (unsigned long long)remote_uuid, len);
        return MADRAIL_ERR_INVALID;
    }
    memcpy(&mark, a, 4);
    memcpy(&hash, a + 4, 4);
    memcpy(&nlen, a + 8, 2);
    if (mark != MDR_OFI_ADDR_MARK) {
        mdr_error("rail %s peer %016llx: address has a foreign byte order or version "
                  "(mark %08x)", rail->log_name, (unsigned long long)remote_uuid, mark);
        return MADRAIL_ERR_INVALID;
    }
    if (hash != rail->prov_hash) {
        mdr_error("rail %s peer %016llx: the peer's rail uses another libfabric provider "
                  "(ours is %s): give both processes the same ofi rail spec",
                  rail->log_name, (unsigned long long)remote_uuid, rail->prov);
        return MADRAIL_ERR_INVALID;
    }
    if (nlen == 0 || nlen > MDR_OFI_NAME_MAX || (size_t)nlen + MDR_OFI_ADDR_HDR != len) {
        mdr_error("rail %s peer %016llx: address of %zu bytes names %u bytes",
                  rail->log_name, (unsigned long long)remote_uuid, len, nlen);
        return MADRAIL_ERR_INVALID;
    }
    old = mdr_ofi_ep_lookup(rail, remote_uuid);
    if (old != NULL) {
        /* The core dials a peer again only once it gave the connection it
         * had up (a rail taken down on the peer's word, then rejoined); it
         * keeps the old ep for the completions still due on it, and the
         * new one is the peer's from now on (as a reconnection is). */
        mdr_debug("rail %s peer %016llx: endpoint %u superseded by a new one", rail->log_name,
                  (unsigned long long)remote_uuid, old->epid);
        mdr_rail_ep_unmap(&old->base);
    }
    peer = mdr_hash_get(&rail->peers, remote_uuid);
    if (peer == NULL || peer->name_len != nlen ||
        memcmp(peer->name, a + MDR_OFI_ADDR_HDR, nlen) != 0) {
        mdr_ofi_peer_t *np = peer;
        if (np == NULL && (np = calloc(1, sizeof(*np))) == NULL)
            return MADRAIL_ERR_NOMEM;
        ret = fi_av_insert(rail->av, a + MDR_OFI_ADDR_HDR, 1, &np->fa, 0, NULL);
        if (ret != 1) {
            mdr_error("rail %s peer %016llx: fi_av_insert: %s", rail->log_name,
                      (unsigned long long)remote_uuid,
                      ret < 0 ? fi_strerror(-ret) : "address not inserted");
            if (peer == NULL)
                free(np);
            return MADRAIL_ERR_IO;
        }
        np->uuid = remote_uuid;
        np->name_len = nlen;
        memcpy(np->name, a + MDR_OFI_ADDR_HDR, nlen);
        if (peer == NULL) {
            if (mdr_hash_put(&rail->peers, remote_uuid, np) != MADRAIL_OK) {
                fi_av_remove(rail->av, &np->fa, 1, 0);
                free(np);
                return MADRAIL_ERR_NOMEM;
            }
            mdr_list_push_tail(&rail->peer_list, &np->link);
        }
        peer = np;
    }
    st = mdr_ofi_ep_alloc(rail, remote_uuid, ep_cookie, peer, ep_p);
    if (st != MADRAIL_OK)
        return st;
    mdr_debug("rail %s peer %016llx: endpoint %u created", rail->log_name,
              (unsigned long long)remote_uuid, (*ep_p)->epid);
    return MADRAIL_OK;
}

/* Drop the ep's completed puts not yet reported (their ep is going). */
static void mdr_ofi_drop_done(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    mdr_list_t *l, *tmp;

    mdr_list_for_each_safe(l, tmp, &rail->doneq) {
        mdr_ofi_op_t *op = mdr_container_of(l, mdr_ofi_op_t, link);
        if (op->ep == ep) {
            mdr_list_del(&op->link);
            mdr_ofi_op_put(rail, op);
        }
    }
}

void mdr_ofi_ep_destroy(mdr_ep_t *ep)
{
    mdr_rail_t *rail;
    mdr_list_t *l;

    if (ep == NULL || ep->base.destroyed)
        return;
    rail = ep->rail;
    if (!ep->failed && !ep->peer_closed && !rail->closing)
        mdr_ofi_send_bye(ep, MDR_OFI_BYE_DESTROYED);
    ep->base.destroyed = 1;
    mdr_ofi_hs_uncount(ep);
    if (ep->rx_short != 0 && rail->short_eps != NULL)
        rail->short_eps[ep->rx_short - 1] = NULL; /* the slot is free */
    ep->rx_short = 0;
    mdr_rail_ep_unmap(&ep->base);
    while ((l = mdr_list_pop_head(&ep->ops)) != NULL) {
        mdr_ofi_op_t *op = mdr_container_of(l, mdr_ofi_op_t, link);
        op->ep = NULL;
        op->comp = NULL;
        mdr_list_push_tail(&rail->orphans, &op->link);
    }
    mdr_ofi_drop_done(ep);
    ep->pending = 0;
    ep->backlog = 0;
    mdr_rail_ep_retire(&ep->base);
}

MDR_HOT size_t mdr_ofi_ep_backlog(mdr_ep_t *ep)
{
    return ep != NULL ? ep->backlog : 0;
}

/* What the provider holds, and what an operation that failed or was
 * dropped with the failed ep held: a send the provider completes with an
 * error (the peer is gone) leaves the backlog before the core hears of the
 * failure from the upcall, and until then must not look as if it had left
 * (rail.h; conformance failed-ep-keeps-unsent). */
MDR_HOT size_t mdr_ofi_ep_unsent(mdr_ep_t *ep)
{
    return ep != NULL ? ep->backlog + ep->lost : 0;
}

int mdr_ofi_ep_idle(mdr_ep_t *ep)
{
    return ep == NULL || ep->pending == 0;
}

int mdr_ofi_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p)
{
    *rto_ns_p = 0;
    if (ep == NULL)
        return -1;
    return mdr_tcp_path_rto(&ep->rail->tcpdiag, &ep->path, rto_ns_p);
}

/* A provider over kernel TCP sockets (tcp;ofi_rxm) keeps a connection the
 * core gave up open underneath, and what it held there (a write into the
 * receive buffer, a message) lands when the link delivers again: seen as
 * wrong bytes in a later message on the namespace cluster (cl_failover_ofi
 * 'flapping').  So its sockets on this path are shut down here
 * (rails/common/tcp_path.h, mdr_tcp_path_fence: a shutdown, not the reset
 * the ucx rail makes, after which rxm never dialled the peer again);
 * other providers have none (nothing to do). */
void mdr_ofi_ep_fence(mdr_ep_t *ep)
{
    if (ep != NULL)
        mdr_tcp_path_fence_ep(&ep->rail->tcpdiag, &ep->path, ep->rail->log_name, ep->base.uuid,
                              MDR_TCP_FENCE_SHUTDOWN);
}

/* A provider over kernel TCP sockets hides them, and over a black hole it
 * neither fails nor completes for as long as TCP retries (minutes): the
 * kernel's view of the path (rails/common/tcp_path.h) is what lets the
 * core time such a rail out.  Other providers cannot tell (-1): their own
 * errors take them down. */
int mdr_ofi_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    *quiet_ns_p = 0;
    if (ep == NULL)
        return 0;
    return mdr_tcp_path_quiet(&ep->rail->tcpdiag, &ep->path, quiet_ns_p);
}

/* ---------------- sending ---------------- */

static void mdr_ofi_short_offer(mdr_ep_t *ep);

/* The pieces of iov, then pad zero bytes, into dst. */
MDR_HOT static void mdr_ofi_gather(const struct iovec *iov, int iovcnt, size_t pad, uint8_t *dst)
{
    size_t off = 0;
    int i;

    for (i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > 0)
            memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    memset(dst + off, 0, pad);
}

/* Lay out one message of incarnation epid in dst: header, the pieces of
 * iov, pad zero bytes. */
static void mdr_ofi_frame_raw(const mdr_rail_t *rail, uint32_t epid, uint8_t type,
                              const struct iovec *iov, int iovcnt, size_t pad, uint8_t *dst)
{
    mdr_ofi_hdr_t hdr;

    hdr.type = type;
    hdr.pad = (uint8_t)pad;
    hdr.magic = MDR_OFI_MAGIC;
    hdr.epid = epid;
    hdr.uuid = rail->uuid;
    memcpy(dst, &hdr, MDR_OFI_HDR_LEN);
    mdr_ofi_gather(iov, iovcnt, pad, dst + MDR_OFI_HDR_LEN);
}

static void mdr_ofi_frame(const mdr_ep_t *ep, uint8_t type, const struct iovec *iov, int iovcnt,
                          size_t pad, uint8_t *dst)
{
    mdr_ofi_frame_raw(ep->rail, ep->epid, type, iov, iovcnt, pad, dst);
}

/* A control message in the short form (ofi.h): the payload and its
 * padding injected with CQ data instead of our header.  Done when the
 * call returns, as mdr_ofi_inject_msg. */
static madrail_status_t mdr_ofi_inject_short(mdr_ep_t *ep, const struct iovec *iov, int iovcnt,
                                             size_t paylen, size_t pad)
{
    mdr_rail_t *rail = ep->rail;
    uint64_t buf[MDR_OFI_INJECT_MAX / sizeof(uint64_t)];
    ssize_t ret;

    mdr_ofi_gather(iov, iovcnt, pad, (uint8_t *)buf);
    ret = fi_injectdata(rail->ep, buf, paylen + pad,
                        mdr_ofi_short_data(ep->tx_short - 1, ep->epid, pad), ep->peer->fa);
    if (ret == 0) {
        rail->short_tx++;
        return MADRAIL_OK;
    }
    if (ret == -FI_EAGAIN)
        return MADRAIL_ERR_NORESOURCE;
    mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "fi_injectdata of %zu bytes: %s", paylen + pad,
                    fi_strerror((int)-ret));
    return MADRAIL_ERR_RAIL_DOWN;
}

/* A message of at most rail->inject_max bytes with fi_inject: done when
 * the call returns (shm only, see the top of the file).  The order with
 * the ep's other messages holds because nothing of it is in flight. */
static madrail_status_t mdr_ofi_inject_msg(mdr_ep_t *ep, uint8_t type, const struct iovec *iov,
                                           int iovcnt, size_t total, size_t pad)
{
    mdr_rail_t *rail = ep->rail;
    uint64_t buf[MDR_OFI_INJECT_MAX / sizeof(uint64_t)];
    ssize_t ret;

    mdr_ofi_frame(ep, type, iov, iovcnt, pad, (uint8_t *)buf);
    ret = fi_inject(rail->ep, buf, total, ep->peer->fa);
    if (ret == 0)
        return MADRAIL_OK;
    if (ret == -FI_EAGAIN)
        return MADRAIL_ERR_NORESOURCE;
    mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "fi_inject of %zu bytes: %s", total,
                    fi_strerror((int)-ret));
    return MADRAIL_ERR_RAIL_DOWN;
}

/* Send one message: header + the pieces of iov + padding to 8 bytes.
 * Returns OK, NORESOURCE (nothing sent) or RAIL_DOWN (ep failed). */
MDR_HOT static madrail_status_t mdr_ofi_send_msg(mdr_ep_t *ep, uint8_t type, const struct iovec *iov,
                                                 int iovcnt, size_t paylen, int is_bye)
{
    mdr_rail_t *rail = ep->rail;
    mdr_ofi_txbuf_t *txb;
    mdr_ofi_op_t *op;
    size_t pad = MDR_OFI_PAD8(paylen), total = MDR_OFI_HDR_LEN + paylen + pad;
    ssize_t ret;

    if (total > rail->msg_max)
        return MADRAIL_ERR_INVALID;
    /* not an empty one: the receive path drops completions of 0 bytes
     * (seen once the handshake made the short form ready before the first
     * message: conformance ctrl-sizes on shm) */
    if (type == MDR_OFI_M_CTRL && ep->tx_short != 0 && paylen != 0 &&
        paylen + pad <= rail->inject_max && ep->pending == 0)
        return mdr_ofi_inject_short(ep, iov, iovcnt, paylen, pad);
    if (total <= rail->inject_max && ep->pending == 0 && !is_bye)
        return mdr_ofi_inject_msg(ep, type, iov, iovcnt, total, pad);
    if (rail->tx_inflight >= rail->tx_size)
        return MADRAIL_ERR_NORESOURCE;
    txb = mdr_ofi_txb_get(rail);
    if (txb == NULL)
        return MADRAIL_ERR_NORESOURCE;
    op = mdr_ofi_op_get(rail);
    if (op == NULL) {
        mdr_ofi_txb_release(rail, txb);
        return MADRAIL_ERR_NORESOURCE;
    }
    mdr_ofi_frame(ep, type, iov, iovcnt, pad, txb->buf);

    op->ctx.kind = MDR_OFI_OP_SEND;
    op->ep = ep;
    op->bytes = total;
    op->txb = txb;
    op->is_bye = is_bye;
    ret = fi_send(rail->ep, txb->buf, total, txb->desc, ep->peer->fa, &op->ctx.fctx);
    if (ret != 0) {
        mdr_ofi_txb_release(rail, txb);
        op->txb = NULL;
        mdr_ofi_op_put(rail, op);
        if (ret == -FI_EAGAIN)
            return MADRAIL_ERR_NORESOURCE;
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "fi_send of %zu bytes: %s", total,
                        fi_strerror((int)-ret));
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (rail->cfg.timeout > 0)
        op->posted = mdr_time_sec();
    mdr_list_push_tail(&ep->ops, &op->link);
    rail->tx_inflight++;
    if (is_bye) {
        rail->byes_inflight++;
    } else {
        ep->pending++;
        ep->backlog += total;
    }
    return MADRAIL_OK;
}

static madrail_status_t mdr_ofi_send_hello(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    uint8_t addr[MDR_OFI_ADDR_HDR + MDR_OFI_NAME_MAX];
    uint32_t mark = MDR_OFI_ADDR_MARK;
    uint16_t nlen = (uint16_t)rail->name_len, zero = 0;
    mdr_ofi_hello_t h;
    struct iovec iov[2];
    madrail_status_t st;

    memcpy(addr, &mark, 4);
    memcpy(addr + 4, &rail->prov_hash, 4);
    memcpy(addr + 8, &nlen, 2);
    memcpy(addr + 10, &zero, 2);
    memcpy(addr + MDR_OFI_ADDR_HDR, rail->name_buf, rail->name_len);
    memset(&h, 0, sizeof(h));
    h.target = ep->base.uuid;
    h.addr_len = (uint32_t)(MDR_OFI_ADDR_HDR + rail->name_len);
    mdr_auth_nonce(ep->nonce_i);
    memcpy(h.nonce, ep->nonce_i, sizeof(h.nonce));
    iov[0].iov_base = &h;
    iov[0].iov_len = sizeof(h);
    iov[1].iov_base = addr;
    iov[1].iov_len = h.addr_len;
    st = mdr_ofi_send_msg(ep, MDR_OFI_M_HELLO, iov, 2, sizeof(h) + h.addr_len, 0);
    if (st == MADRAIL_OK) {
        ep->hs_last_hello = mdr_time_sec();
        if (!ep->hello_sent)
            ep->hs_since = ep->hs_last_hello;
        ep->hello_sent = 1;
        ep->hs_state = MDR_OFI_HS_HELLO_SENT;
        mdr_ofi_hs_count(ep);
        mdr_debug("rail %s peer %016llx: hello from endpoint %u", rail->log_name,
                  (unsigned long long)ep->base.uuid, ep->epid);
    }
    return st;
}

/* ---------------- the handshake (ofi.h) ---------------- */

/* ep needs the handshake tick (a deadline, or a message still owed). */
static void mdr_ofi_hs_count(mdr_ep_t *ep)
{
    if (!ep->hs_counted) {
        ep->hs_counted = 1;
        ep->rail->hs_waiting++;
    }
}

static void mdr_ofi_hs_uncount(mdr_ep_t *ep)
{
    if (ep->hs_counted) {
        ep->hs_counted = 0;
        ep->rail->hs_waiting--;
    }
}

static void mdr_ofi_transcript(mdr_auth_transcript_t *t, uint64_t uuid_i, uint64_t uuid_a,
                               const uint8_t *nonce_i, const uint8_t *nonce_a,
                               const uint8_t *rail_id, size_t rail_id_len)
{
    t->driver = "ofi";
    t->uuid_i = uuid_i;
    t->uuid_a = uuid_a;
    t->nonce_i = nonce_i;
    t->nonce_a = nonce_a;
    t->rail_id = rail_id;
    t->rail_id_len = rail_id_len;
}

/* Keep the session secret of a completed handshake with this peer. */
static void mdr_ofi_sess_keep(mdr_ofi_peer_t *peer, int which, const uint8_t *key,
                              const mdr_auth_transcript_t *t)
{
    mdr_auth_mac(peer->sess[which], key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, t);
    peer->has_sess[which] = 1;
    peer->newest = (uint8_t)which;
}

/* A message without an endpoint (the CHALLENGE: the acceptor has none
 * yet), best effort: its completion is dropped as an orphan's. */
static void mdr_ofi_send_raw(mdr_rail_t *rail, fi_addr_t fa, uint8_t type, const void *body,
                             size_t len)
{
    struct iovec iov = {(void *)body, len};
    size_t pad = MDR_OFI_PAD8(len), total = MDR_OFI_HDR_LEN + len + pad;
    mdr_ofi_txbuf_t *txb;
    mdr_ofi_op_t *op;
    ssize_t ret;

    if (rail->tx_inflight >= rail->tx_size || (txb = mdr_ofi_txb_get(rail)) == NULL)
        return;
    if ((op = mdr_ofi_op_get(rail)) == NULL) {
        mdr_ofi_txb_release(rail, txb);
        return;
    }
    mdr_ofi_frame_raw(rail, 0, type, &iov, 1, pad, txb->buf);
    op->ctx.kind = MDR_OFI_OP_SEND;
    op->bytes = total;
    op->txb = txb;
    ret = fi_send(rail->ep, txb->buf, total, txb->desc, fa, &op->ctx.fctx);
    if (ret != 0) {
        mdr_ofi_txb_release(rail, txb);
        op->txb = NULL;
        mdr_ofi_op_put(rail, op);
        mdr_debug("rail %s: handshake message not sent: %s", rail->log_name,
                  fi_strerror((int)-ret));
        return;
    }
    mdr_list_push_tail(&rail->orphans, &op->link);
    rail->tx_inflight++;
}

static void mdr_ofi_set_ready(mdr_ep_t *ep)
{
    ep->ready = 1;
}

/* Send what the handshake owes: the HELLO_ACK (then the ep is ready), the
 * PROOF.  OK once the ep may send control messages; NORESOURCE while the
 * handshake is under way; RAIL_DOWN when the ep failed. */
static madrail_status_t mdr_ofi_hs_push(mdr_ep_t *ep)
{
    madrail_status_t st;

    if (ep->ack_owed) {
        mdr_ofi_hello_ack_t a;
        struct iovec iov = {&a, sizeof(a)};
        memset(&a, 0, sizeof(a));
        a.target_epid = ep->peer_epid;
        memcpy(a.mac, ep->ack_mac, sizeof(a.mac));
        st = mdr_ofi_send_msg(ep, MDR_OFI_M_HELLO_ACK, &iov, 1, sizeof(a), 0);
        if (st != MADRAIL_OK)
            return st;
        ep->ack_owed = 0;
        mdr_ofi_set_ready(ep); /* the peer knows our incarnation before anything else */
    }
    if (ep->proof_owed) {
        struct iovec iov = {ep->proof, sizeof(ep->proof)};
        st = mdr_ofi_send_msg(ep, MDR_OFI_M_PROOF, &iov, 1, sizeof(ep->proof), 0);
        if (st == MADRAIL_OK)
            ep->proof_owed = 0;
        else if (st != MADRAIL_ERR_NORESOURCE)
            return st;
    }
    if (ep->ready)
        return MADRAIL_OK;
    if (!ep->hello_sent) {
        st = mdr_ofi_send_hello(ep);
        if (st != MADRAIL_OK)
            return st;
    }
    return ep->failed ? MADRAIL_ERR_RAIL_DOWN : MADRAIL_ERR_NORESOURCE;
}

void mdr_ofi_send_bye(mdr_ep_t *ep, uint32_t reason)
{
    mdr_ofi_bye_t b;
    struct iovec iov;
    madrail_status_t st;

    /* Only a peer that knows this incarnation has anything to forget. */
    if (!ep->hello_sent && ep->peer_epid == 0)
        return;
    b.target_epid = ep->peer_epid;
    b.reason = reason;
    iov.iov_base = &b;
    iov.iov_len = sizeof(b);
    st = mdr_ofi_send_msg(ep, MDR_OFI_M_BYE, &iov, 1, sizeof(b), 1);
    if (st != MADRAIL_OK)
        mdr_debug("rail %s peer %016llx: no goodbye sent (%s)", ep->rail->log_name,
                  (unsigned long long)ep->base.uuid, madrail_status_str(st));
}

/* A peer that stopped taking messages (shm: its queue is full because it
 * is gone) makes every send return -FI_EAGAIN and nothing stays in flight
 * for the completion watchdog to see: with MADRAIL_OFI_TIMEOUT set, a run
 * of refusals that long fails the ep too. */
MDR_HOT static madrail_status_t mdr_ofi_nores_check(mdr_ep_t *ep, madrail_status_t st)
{
    double now;

    if (st != MADRAIL_ERR_NORESOURCE) {
        if (st == MADRAIL_OK || st == MADRAIL_INPROGRESS)
            ep->nores_since = 0;
        return st;
    }
    if (ep->rail->cfg.timeout <= 0)
        return st;
    now = mdr_time_sec();
    if (ep->nores_since == 0) {
        ep->nores_since = now;
    } else if (now - ep->nores_since > ep->rail->cfg.timeout) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN,
                        "the provider has refused every send for %.1f s "
                        "(MADRAIL_OFI_TIMEOUT): the peer takes no messages",
                        now - ep->nores_since);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    return st;
}

MDR_HOT madrail_status_t mdr_ofi_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt)
{
    size_t len = 0;
    madrail_status_t st;
    int i;

    if (ep == NULL || ep->base.destroyed || (iovcnt > 0 && iov == NULL) || iovcnt < 0)
        return MADRAIL_ERR_INVALID;
    if (ep->failed || mdr_ofi_closed_check(ep))
        return MADRAIL_ERR_RAIL_DOWN;
    for (i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > ep->rail->slot_size) {
        mdr_error("rail %s peer %016llx: control message of %zu bytes exceeds the slot size "
                  "%zu", ep->rail->log_name, (unsigned long long)ep->base.uuid, len,
                  ep->rail->slot_size);
        return MADRAIL_ERR_INVALID;
    }
    if (__builtin_expect(!ep->ready || ep->ack_owed, 0)) {
        st = mdr_ofi_hs_push(ep);
        if (st != MADRAIL_OK)
            return mdr_ofi_nores_check(ep, st);
    }
    if (ep->short_owed)
        mdr_ofi_short_offer(ep);
    return mdr_ofi_nores_check(ep, mdr_ofi_send_msg(ep, MDR_OFI_M_CTRL, iov, iovcnt, len, 0));
}

/* A control message of ep's peer, in either form: at most a slot, handed
 * up 8-byte aligned. */
MDR_HOT static void mdr_ofi_deliver(mdr_ep_t *ep, const uint8_t *body, size_t blen)
{
    mdr_rail_t *rail = ep->rail;

    if (blen > rail->slot_size) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                        "control message of %zu bytes exceeds the slot size %zu", blen,
                        rail->slot_size);
        return;
    }
    if (((uintptr_t)body & 7) != 0) {
        /* the provider packed messages unaligned: the core reads headers in place */
        memcpy(rail->rx_scratch, body, blen);
        body = rail->rx_scratch;
    }
    if (ep->base.cookie != NULL)
        rail->upcalls->ctrl_recv(ep->base.cookie, body, blen);
}

/* ---------------- the short form (ofi.h) ---------------- */

/* Send ep's SHORT_ID if owed and the peer knows our incarnation (our HELLO
 * went before it); else it goes with the next control message. */
static void mdr_ofi_short_offer(mdr_ep_t *ep)
{
    mdr_ofi_short_id_t m;
    struct iovec iov;

    if (!ep->short_owed || !ep->ready || ep->failed || ep->base.destroyed || ep->rx_short == 0)
        return;
    m.target_epid = ep->peer_epid;
    m.slot = ep->rx_short - 1;
    iov.iov_base = &m;
    iov.iov_len = sizeof(m);
    if (mdr_ofi_send_msg(ep, MDR_OFI_M_SHORT_ID, &iov, 1, sizeof(m), 0) == MADRAIL_OK)
        ep->short_owed = 0;
}

/* ep learned the peer's incarnation from its HELLO: give it a slot (the one
 * it has, for a new incarnation: the SHORT_ID names the incarnation). */
static void mdr_ofi_short_assign(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    uint32_t k, i;

    if (!rail->short_form || ep->failed || ep->base.destroyed)
        return;
    if (ep->rx_short == 0) {
        if (rail->short_eps == NULL) {
            rail->short_eps = calloc(MDR_OFI_SHORT_SLOTS, sizeof(*rail->short_eps));
            if (rail->short_eps == NULL)
                return; /* our header, as before */
        }
        for (k = 0; k < MDR_OFI_SHORT_SLOTS; k++) {
            i = (rail->short_next + k) % MDR_OFI_SHORT_SLOTS;
            if (rail->short_eps[i] == NULL)
                break;
        }
        if (k == MDR_OFI_SHORT_SLOTS)
            return; /* every slot taken: our header */
        rail->short_eps[i] = ep;
        ep->rx_short = i + 1;
        rail->short_next = (i + 1) % MDR_OFI_SHORT_SLOTS;
    }
    ep->short_owed = 1;
    mdr_ofi_short_offer(ep);
}

static void mdr_ofi_short_id_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                      const uint8_t *body, size_t len)
{
    mdr_ofi_short_id_t m;
    mdr_ep_t *ep = mdr_ofi_ep_lookup(rail, hdr->uuid);

    if (ep == NULL || ep->peer_epid != hdr->epid || ep->failed) {
        mdr_debug("rail %s: SHORT_ID from %016llx endpoint %u dropped (no endpoint knows it)",
                  rail->log_name, (unsigned long long)hdr->uuid, hdr->epid);
        return;
    }
    if (len != sizeof(m)) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SHORT_ID of %zu bytes", len);
        return;
    }
    memcpy(&m, body, sizeof(m));
    if (m.slot >= MDR_OFI_SHORT_SLOTS) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SHORT_ID for slot %u (at most %u)", m.slot,
                        MDR_OFI_SHORT_SLOTS - 1);
        return;
    }
    if (m.target_epid != ep->epid) {
        mdr_debug("rail %s peer %016llx: SHORT_ID for our endpoint %u, not %u; ignored",
                  rail->log_name, (unsigned long long)hdr->uuid, m.target_epid, ep->epid);
        return;
    }
    ep->tx_short = m.slot + 1;
    mdr_debug("rail %s peer %016llx: small messages go in the short form (slot %u)",
              rail->log_name, (unsigned long long)hdr->uuid, m.slot);
}

MDR_HOT void mdr_ofi_recv_short(mdr_rail_t *rail, const uint8_t *buf, size_t len, uint64_t data)
{
    uint32_t slot = (uint32_t)data, epid16 = (uint32_t)(data >> 32) & 0xffff;
    size_t pad = (size_t)(data >> 48) & 0xff, blen;
    mdr_ep_t *ep;

    if ((data >> 56) != MDR_OFI_SHORT_MARK) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, "?",
                        "message with CQ data %016llx, not a short-form one",
                        (unsigned long long)data);
        return;
    }
    ep = rail->short_eps != NULL && slot < MDR_OFI_SHORT_SLOTS ? rail->short_eps[slot] : NULL;
    if (ep == NULL || ep->failed || ep->peer_closed || (ep->peer_epid & 0xffff) != epid16) {
        /* a slot given up, or an incarnation it no longer serves: stale */
        mdr_debug("rail %s: short-form message for slot %u (endpoint %#x) dropped (no "
                  "endpoint knows it)", rail->log_name, slot, epid16);
        return;
    }
    if (pad > 7 || pad > len) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "short-form message with %zu padding bytes",
                        pad);
        return;
    }
    blen = len - pad;
    if (blen <= rail->slot_size)
        rail->short_rx++;
    mdr_ofi_deliver(ep, buf, blen);
}

/* ---------------- puts ---------------- */

static madrail_status_t mdr_ofi_put_post(mdr_ep_t *ep, const void *local, size_t len,
                                         mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                         size_t rkey_len, mdr_completion_t *comp)
{
    mdr_rail_t *rail;
    const uint8_t *k = rkey;
    uint64_t key, base, rlen, target;
    uint32_t flags;
    struct fi_msg_rma msg;
    struct fi_rma_iov rma;
    struct iovec iov;
    void *desc = NULL;
    mdr_ofi_op_t *op;
    ssize_t ret;

    if (ep == NULL || ep->base.destroyed || comp == NULL || (local == NULL && len > 0) ||
        rkey == NULL)
        return MADRAIL_ERR_INVALID;
    rail = ep->rail;
    if (ep->failed || mdr_ofi_closed_check(ep))
        return MADRAIL_ERR_RAIL_DOWN;
    if (!ep->ready || ep->ack_owed) {
        /* the handshake first (a put before any control message: a test's) */
        madrail_status_t st = mdr_ofi_hs_push(ep);
        if (st != MADRAIL_OK)
            return st;
    }
    if (rkey_len != MDR_OFI_RKEY_LEN) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "remote key of %zu bytes (expected %d)",
                        rkey_len, MDR_OFI_RKEY_LEN);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    memcpy(&key, k, 8);
    memcpy(&base, k + 8, 8);
    memcpy(&rlen, k + 16, 8);
    memcpy(&flags, k + 24, 4);
    if (raddr < base || raddr - base > rlen || len > rlen - (raddr - base)) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                        "put of %zu bytes at %#llx outside the peer's region %#llx+%llu", len,
                        (unsigned long long)raddr, (unsigned long long)base,
                        (unsigned long long)rlen);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (len == 0)
        return MADRAIL_OK;
    if (len > rail->max_msg) {
        mdr_error("rail %s peer %016llx: put of %zu bytes exceeds the provider's largest "
                  "transfer (%zu)", rail->log_name, (unsigned long long)ep->base.uuid, len,
                  rail->max_msg);
        return MADRAIL_ERR_INVALID;
    }
    if (rail->tx_inflight >= rail->tx_size)
        return MADRAIL_ERR_NORESOURCE;
    op = mdr_ofi_op_get(rail);
    if (op == NULL)
        return MADRAIL_ERR_NORESOURCE;
    if (rail->mr_mode & FI_MR_LOCAL) {
        if (lmemh != NULL && (uintptr_t)local >= lmemh->addr &&
            (uintptr_t)local + len <= lmemh->addr + lmemh->len) {
            desc = lmemh->desc;
        } else if (mdr_ofi_reg_local(rail, (void *)local, len, FI_WRITE, &op->tmp_mr, &desc) !=
                   MADRAIL_OK) {
            mdr_ofi_op_put(rail, op);
            return MADRAIL_ERR_NORESOURCE;
        }
    }
    target = (flags & MDR_OFI_RKEY_VIRT) ? raddr : raddr - base;
    iov.iov_base = (void *)local;
    iov.iov_len = len;
    rma.addr = target;
    rma.len = len;
    rma.key = key;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = ep->peer->fa;
    msg.rma_iov = &rma;
    msg.rma_iov_count = 1;
    msg.context = &op->ctx.fctx;
    op->ctx.kind = MDR_OFI_OP_PUT;
    op->ep = ep;
    op->bytes = len;
    op->comp = comp;
    ret = fi_writemsg(rail->ep, &msg,
                      FI_COMPLETION | (rail->put_delivery ? FI_DELIVERY_COMPLETE : 0));
    if (ret != 0) {
        if (op->tmp_mr != NULL)
            fi_close(&op->tmp_mr->fid);
        mdr_ofi_op_put(rail, op);
        if (ret == -FI_EAGAIN)
            return MADRAIL_ERR_NORESOURCE;
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "fi_writemsg of %zu bytes: %s", len,
                        fi_strerror((int)-ret));
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (rail->cfg.timeout > 0)
        op->posted = mdr_time_sec();
    mdr_list_push_tail(&ep->ops, &op->link);
    rail->tx_inflight++;
    ep->pending++;
    ep->backlog += len;
    return MADRAIL_INPROGRESS;
}

madrail_status_t mdr_ofi_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp)
{
    madrail_status_t st = mdr_ofi_put_post(ep, local, len, lmemh, raddr, rkey, rkey_len, comp);
    return ep != NULL ? mdr_ofi_nores_check(ep, st) : st;
}

/* ---------------- completions ---------------- */

void mdr_ofi_op_done(mdr_rail_t *rail, mdr_ofi_op_t *op, madrail_status_t status,
                     const char *why)
{
    mdr_ep_t *ep = op->ep;
    int is_put = op->ctx.kind == MDR_OFI_OP_PUT;

    mdr_list_del(&op->link);
    if (rail->tx_inflight > 0)
        rail->tx_inflight--;
    if (op->is_bye && rail->byes_inflight > 0)
        rail->byes_inflight--;
    if (op->txb != NULL) {
        mdr_ofi_txb_release(rail, op->txb);
        op->txb = NULL;
    }
    if (op->tmp_mr != NULL) {
        fi_close(&op->tmp_mr->fid);
        op->tmp_mr = NULL;
    }
    if (ep != NULL && rail->cfg.timeout > 0)
        ep->last_done = mdr_time_sec();
    if (ep != NULL && !op->is_bye) {
        size_t gone = op->bytes < ep->backlog ? op->bytes : ep->backlog;
        ep->backlog -= gone;
        if (status != MADRAIL_OK) {
            ep->lost += gone; /* did not leave: still unsent to the core */
            mdr_ofi_ep_fail(ep, status, "%s of %zu bytes failed: %s", is_put ? "put" : "send",
                            op->bytes, why != NULL ? why : "error");
        }
    }
    if (ep != NULL && is_put && op->comp != NULL && !rail->closing) {
        op->status = status;
        mdr_list_push_tail(&rail->doneq, &op->link); /* reported after failures */
        return;
    }
    if (ep != NULL && !op->is_bye && ep->pending > 0)
        ep->pending--;
    mdr_ofi_op_put(rail, op);
}

/* After ep_failed: its puts in flight fail now, as on a broken
 * connection: the provider may never complete a write to a peer that is
 * gone.  Their completions, if they come, are dropped. */
static int mdr_ofi_report_ops(mdr_rail_ep_t *base)
{
    mdr_ep_t *ep = mdr_container_of(base, mdr_ep_t, base);
    mdr_rail_t *rail = ep->rail;
    mdr_list_t *l;
    int n = 0;

    while (!ep->base.destroyed && (l = mdr_list_pop_head(&ep->ops)) != NULL) {
        mdr_ofi_op_t *op = mdr_container_of(l, mdr_ofi_op_t, link);
        mdr_completion_t *comp = op->ctx.kind == MDR_OFI_OP_PUT ? op->comp : NULL;
        op->ep = NULL;
        op->comp = NULL;
        mdr_list_push_tail(&rail->orphans, &op->link);
        if (!op->is_bye && ep->pending > 0)
            ep->pending--;
        if (comp != NULL) {
            n++;
            comp->cb(comp, ep->base.fail_status);
        }
    }
    if (!ep->base.destroyed) {
        ep->lost += ep->backlog;
        ep->backlog = 0;
    }
    return n;
}

MDR_HOT int mdr_ofi_report(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int n = 0;

    for (;;) {
        n += mdr_rail_base_report(&rail->base, NULL, mdr_ofi_report_ops);
        l = mdr_list_pop_head(&rail->doneq);
        if (l == NULL)
            break;
        {
            mdr_ofi_op_t *op = mdr_container_of(l, mdr_ofi_op_t, link);
            mdr_ep_t *ep = op->ep;
            mdr_completion_t *comp = op->comp;
            madrail_status_t st = op->status;

            mdr_ofi_op_put(rail, op);
            if (ep == NULL || ep->base.destroyed || comp == NULL)
                continue;
            if (ep->pending > 0)
                ep->pending--;
            if (ep->failed && st == MADRAIL_OK)
                st = ep->base.fail_status;
            n++;
            comp->cb(comp, st);
        }
    }
    return n;
}

void mdr_ofi_check_timeouts(mdr_rail_t *rail)
{
    double now = mdr_time_sec(), ref, limit;
    mdr_list_t *l;

    if (now < rail->next_timeout_check)
        return;
    rail->next_timeout_check = now + 0.1;
    mdr_list_for_each(l, &rail->base.eps_all) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, base.link);
        mdr_ofi_op_t *op;
        if (ep->failed || mdr_list_empty(&ep->ops))
            continue;
        op = mdr_container_of(ep->ops.next, mdr_ofi_op_t, link);
        ref = op->posted > ep->last_done ? op->posted : ep->last_done;
        limit = rail->cfg.timeout + (double)op->bytes / 1e6;
        if (now - ref > limit)
            mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN,
                            "a %s of %zu bytes has not completed in %.1f s "
                            "(MADRAIL_OFI_TIMEOUT): the peer is gone or dropped it",
                            op->ctx.kind == MDR_OFI_OP_PUT ? "put" : "send", op->bytes,
                            now - op->posted);
    }
}

void mdr_ofi_ops_cleanup(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->orphans)) != NULL) {
        mdr_ofi_op_t *op = mdr_container_of(l, mdr_ofi_op_t, link);
        if (op->tmp_mr != NULL)
            fi_close(&op->tmp_mr->fid);
        free(op);
    }
    while ((l = mdr_list_pop_head(&rail->doneq)) != NULL)
        free(mdr_container_of(l, mdr_ofi_op_t, link));
    while ((l = mdr_list_pop_head(&rail->free_ops)) != NULL)
        free(mdr_container_of(l, mdr_ofi_op_t, link));
}

/* ---------------- receiving ---------------- */

/* Forget a pending handshake (and the AV entry it made). */
static void mdr_ofi_pend_drop(mdr_rail_t *rail, mdr_ofi_pend_t *e)
{
    if (!e->used)
        return;
    if (e->av_owned)
        fi_av_remove(rail->av, &e->fa, 1, 0);
    mdr_auth_wipe(e, sizeof(*e));
    rail->npend--;
}

/* Where a HELLO from (uuid, epid) waits for its PROOF: the entry that
 * incarnation already has, a free one, or one old enough to give up
 * (MDR_OFI_PEND_EVICT); NULL when the table is full of fresh ones. */
static mdr_ofi_pend_t *mdr_ofi_pend_slot(mdr_rail_t *rail, uint64_t uuid, uint32_t epid,
                                         double now)
{
    mdr_ofi_pend_t *free_e = NULL, *oldest = NULL, *oldest_same = NULL;
    unsigned same = 0, k;

    for (k = 0; k < MDR_OFI_PEND_MAX; k++) {
        mdr_ofi_pend_t *e = &rail->pend[k];
        if (!e->used) {
            if (free_e == NULL)
                free_e = e;
            continue;
        }
        if (e->uuid == uuid) {
            if (e->epid == epid)
                return e;
            same++;
            if (oldest_same == NULL || e->since < oldest_same->since)
                oldest_same = e;
        }
        if (oldest == NULL || e->since < oldest->since)
            oldest = e;
    }
    if (same >= MDR_OFI_PEND_PER_UUID)
        oldest = oldest_same, free_e = NULL;
    if (free_e != NULL)
        return free_e;
    if (oldest != NULL && now - oldest->since > MDR_OFI_PEND_EVICT) {
        mdr_ofi_pend_drop(rail, oldest);
        return oldest;
    }
    return NULL;
}

/* A HELLO: an incarnation asks to be known.  Checked, then answered with a
 * CHALLENGE; nothing but a pending entry exists until its PROOF. */
static void mdr_ofi_hello_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                   const uint8_t *body, size_t len)
{
    mdr_ofi_hello_t h;
    mdr_ofi_challenge_t c;
    mdr_ofi_pend_t *e;
    const uint8_t *a;
    char src[32];
    uint32_t mark, hash;
    uint16_t nlen;
    mdr_ofi_peer_t *peer;
    double now;
    int ret;

    snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)hdr->uuid);
    if (len < sizeof(h)) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src, "hello of %zu bytes", len);
        return;
    }
    memcpy(&h, body, sizeof(h));
    a = body + sizeof(h);
    if (h.addr_len < MDR_OFI_ADDR_HDR || h.addr_len > len - sizeof(h)) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello with a bad address length %u", h.addr_len);
        return;
    }
    memcpy(&mark, a, 4);
    memcpy(&hash, a + 4, 4);
    memcpy(&nlen, a + 8, 2);
    if (mark != MDR_OFI_ADDR_MARK || hash != rail->prov_hash || nlen == 0 ||
        nlen > MDR_OFI_NAME_MAX || (size_t)nlen + MDR_OFI_ADDR_HDR != h.addr_len) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello carrying an address we cannot use");
        return;
    }
    if (h.target != rail->uuid) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello meant for uuid %016llx (we are %016llx)",
                        (unsigned long long)h.target, (unsigned long long)rail->uuid);
        return;
    }
    if (hdr->uuid == rail->uuid) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src, "hello carrying our own uuid");
        return;
    }
    peer = mdr_hash_get(&rail->peers, hdr->uuid);
    if (peer != NULL &&
        (peer->name_len != nlen || memcmp(peer->name, a + MDR_OFI_ADDR_HDR, nlen) != 0)) {
        /* A context's rail keeps its address for its whole life: another
         * address under a known uuid is not that peer.  Re-pointing the
         * uuid's AV entry would send the peer's traffic there (and
         * tcp;ofi_rxm was seen to crash in fi_send after the address of a
         * uuid changed and changed back: seed hello-address-change-and-back-2
         * of test/fuzz/corpus/ofi). */
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello with another address than that peer's");
        return;
    }
    now = mdr_time_sec();
    e = mdr_ofi_pend_slot(rail, hdr->uuid, hdr->epid, now);
    if (e == NULL) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello while %u handshakes wait for their proof (at most %d, %d per "
                        "uuid)", rail->npend, MDR_OFI_PEND_MAX, MDR_OFI_PEND_PER_UUID);
        return;
    }
    if (e->used && (e->name_len != nlen || memcmp(e->name, a + MDR_OFI_ADDR_HDR, nlen) != 0))
        mdr_ofi_pend_drop(rail, e); /* the same incarnation from elsewhere: start over */
    if (!e->used) {
        if (peer != NULL) {
            e->fa = peer->fa;
            e->av_owned = 0;
        } else {
            /* RDM sends need the address in the AV: a stranger costs one
             * entry until its proof or its deadline (bounded by the table) */
            ret = fi_av_insert(rail->av, a + MDR_OFI_ADDR_HDR, 1, &e->fa, 0, NULL);
            if (ret != 1) {
                mdr_error("rail %s: fi_av_insert of peer %016llx: %s", rail->log_name,
                          (unsigned long long)hdr->uuid,
                          ret < 0 ? fi_strerror(-ret) : "address not inserted");
                return;
            }
            e->av_owned = 1;
        }
        e->used = 1;
        e->uuid = hdr->uuid;
        e->epid = hdr->epid;
        e->name_len = nlen;
        memcpy(e->name, a + MDR_OFI_ADDR_HDR, nlen);
        rail->npend++;
    }
    e->since = now;
    memcpy(e->nonce_i, h.nonce, sizeof(e->nonce_i));
    mdr_auth_nonce(e->nonce_a);
    memset(&c, 0, sizeof(c));
    c.target_epid = hdr->epid;
    memcpy(c.nonce_i, e->nonce_i, sizeof(c.nonce_i));
    memcpy(c.nonce_a, e->nonce_a, sizeof(c.nonce_a));
    mdr_ofi_send_raw(rail, e->fa, MDR_OFI_M_CHALLENGE, &c, sizeof(c));
    mdr_debug("rail %s: hello from %016llx endpoint %u, challenged", rail->log_name,
              (unsigned long long)hdr->uuid, hdr->epid);
}

/* A CHALLENGE for the HELLO our ep sent: prove the key (and continuity
 * with the last session, when we have one with this peer). */
static void mdr_ofi_challenge_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                       const uint8_t *body, size_t len)
{
    mdr_ofi_challenge_t c;
    mdr_auth_transcript_t t;
    mdr_ofi_peer_t *peer;
    mdr_ep_t *ep;

    if (len != sizeof(c))
        return;
    memcpy(&c, body, sizeof(c));
    ep = mdr_ofi_ep_lookup(rail, hdr->uuid);
    if (ep == NULL || ep->failed || ep->epid != c.target_epid ||
        ep->hs_state != MDR_OFI_HS_HELLO_SENT ||
        memcmp(c.nonce_i, ep->nonce_i, sizeof(c.nonce_i)) != 0) {
        mdr_debug("rail %s: challenge from %016llx for endpoint %u dropped (no handshake of "
                  "ours waits for it)", rail->log_name, (unsigned long long)hdr->uuid,
                  c.target_epid);
        return;
    }
    peer = ep->peer;
    memcpy(ep->nonce_a, c.nonce_a, sizeof(ep->nonce_a));
    mdr_ofi_transcript(&t, rail->uuid, ep->base.uuid, ep->nonce_i, ep->nonce_a, peer->name,
                       peer->name_len);
    mdr_auth_mac(ep->proof, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    if (peer->has_sess[peer->newest])
        mdr_auth_mac(ep->proof + MDR_AUTH_MAC_LEN, peer->sess[peer->newest], MDR_AUTH_MAC_LEN,
                     MDR_AUTH_CONTINUITY, &t);
    else
        memset(ep->proof + MDR_AUTH_MAC_LEN, 0, MDR_AUTH_MAC_LEN);
    ep->hs_state = MDR_OFI_HS_PROOF_SENT;
    ep->proof_owed = 1;
    mdr_ofi_hs_count(ep);
    (void)mdr_ofi_hs_push(ep);
}

/* cont proves continuity with a session we keep with this peer. */
static int mdr_ofi_cont_ok(const mdr_ofi_peer_t *peer, const uint8_t *cont,
                           const mdr_auth_transcript_t *t)
{
    uint8_t want[MDR_AUTH_MAC_LEN];
    int k, ok = 0;

    for (k = 0; k < 2; k++) {
        if (!peer->has_sess[k])
            continue;
        mdr_auth_mac(want, peer->sess[k], MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, t);
        ok |= mdr_auth_mac_equal(want, cont);
    }
    return ok;
}

/* The ep takes the handshake of the peer's incarnation: it owes the
 * HELLO_ACK, the first thing it sends (also when the core sends from
 * inside ep_accepted). */
static void mdr_ofi_hs_owe_ack(mdr_ep_t *ep, const mdr_auth_transcript_t *t)
{
    mdr_rail_t *rail = ep->rail;

    ep->accepted_hs = 1;
    mdr_auth_mac(ep->ack_mac, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, t);
    ep->ack_owed = 1;
    if (ep->hs_since == 0)
        ep->hs_since = mdr_time_sec();
    mdr_ofi_hs_count(ep);
}

/* ... and once it is accepted: keep the session secret, send the ack now
 * if it can go. */
static void mdr_ofi_hs_accepted(mdr_ep_t *ep, const mdr_auth_transcript_t *t)
{
    mdr_ofi_sess_keep(ep->peer, MDR_OFI_SESS_ACC, ep->rail->job_key, t);
    (void)mdr_ofi_hs_push(ep);
}

/* A PROOF: only now may the incarnation become an endpoint.  Then the
 * decisions a HELLO made before the handshake: learn the incarnation of
 * our own ep, replace a peer that started over, or accept a new one. */
static void mdr_ofi_proof_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                   const uint8_t *body, size_t len)
{
    mdr_ofi_proof_t pr;
    mdr_ofi_pend_t e;
    mdr_auth_transcript_t t;
    uint8_t want[MDR_AUTH_MAC_LEN];
    char src[32];
    mdr_ofi_peer_t *peer;
    mdr_ep_t *ep;
    mdr_rail_offer_t offer;
    unsigned k;

    snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)hdr->uuid);
    for (k = 0; k < MDR_OFI_PEND_MAX; k++)
        if (rail->pend[k].used && rail->pend[k].uuid == hdr->uuid &&
            rail->pend[k].epid == hdr->epid)
            break;
    if (k == MDR_OFI_PEND_MAX) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "proof without a challenge of ours (late, or a replay)");
        return;
    }
    if (len != sizeof(pr)) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src, "proof of %zu bytes", len);
        mdr_ofi_pend_drop(rail, &rail->pend[k]);
        return;
    }
    memcpy(&pr, body, sizeof(pr));
    e = rail->pend[k];
    mdr_ofi_transcript(&t, e.uuid, rail->uuid, e.nonce_i, e.nonce_a, rail->name_buf,
                       rail->name_len);
    mdr_auth_mac(want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    if (!mdr_auth_mac_equal(want, pr.mac)) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "proof without this job's key (another job, or a replay)");
        mdr_ofi_pend_drop(rail, &rail->pend[k]);
        return;
    }
    /* the entry's AV entry is the peer's from here (or given back below) */
    mdr_auth_wipe(&rail->pend[k], sizeof(rail->pend[k]));
    rail->npend--;
    peer = mdr_hash_get(&rail->peers, e.uuid);
    if (peer != NULL && (peer->name_len != e.name_len ||
                         memcmp(peer->name, e.name, e.name_len) != 0)) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "proof from another address than that peer's");
        goto drop_av;
    }
    ep = mdr_ofi_ep_lookup(rail, e.uuid);
    if (ep != NULL) {
        if (ep->peer_epid == 0 || ep->peer_epid == e.epid) {
            /* our own ep (created by the core, or accepted before): no accept */
            int known = ep->peer_epid == e.epid;
            if (known && ep->accepted_hs) {
                mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                                "second handshake of endpoint %u", e.epid);
                goto drop_av;
            }
            if (e.av_owned)
                fi_av_remove(rail->av, &e.fa, 1, 0); /* the peer record has it */
            ep->peer_epid = e.epid;
            mdr_debug("rail %s peer %016llx: endpoint %u knows the peer's endpoint %u",
                      rail->log_name, (unsigned long long)e.uuid, ep->epid, e.epid);
            mdr_ofi_hs_owe_ack(ep, &t);
            mdr_ofi_hs_accepted(ep, &t);
            if (!known)
                mdr_ofi_short_assign(ep);
            goto out;
        }
        if (!ep->failed && !ep->peer_closed && !mdr_ofi_cont_ok(ep->peer, pr.cont, &t)) {
            /* issue 28: the key alone does not make anyone this peer */
            mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                            "handshake of a new endpoint (%u) for a peer whose endpoint %u is "
                            "alive, without proof of continuity with its session; refused, "
                            "the live one is kept", e.epid, ep->peer_epid);
            goto drop_av;
        }
        /* the peer started over with a new endpoint: the old one is gone.
         * Report that before offering the new one, so the core sees them in order. */
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer reconnected");
        mdr_ofi_report(rail);
    }

    if (peer == NULL) {
        peer = calloc(1, sizeof(*peer));
        if (peer == NULL) {
            mdr_error("rail %s: out of memory accepting peer %016llx", rail->log_name,
                      (unsigned long long)e.uuid);
            goto drop_av;
        }
        if (!e.av_owned &&
            fi_av_insert(rail->av, e.name, 1, &e.fa, 0, NULL) != 1) { /* not expected */
            free(peer);
            goto out;
        }
        peer->fa = e.fa;
        peer->uuid = e.uuid;
        peer->name_len = e.name_len;
        memcpy(peer->name, e.name, e.name_len);
        if (mdr_hash_put(&rail->peers, e.uuid, peer) != MADRAIL_OK) {
            fi_av_remove(rail->av, &peer->fa, 1, 0);
            free(peer);
            goto out;
        }
        mdr_list_push_tail(&rail->peer_list, &peer->link);
    } else if (e.av_owned) {
        fi_av_remove(rail->av, &e.fa, 1, 0); /* the peer record has it */
    }
    if (mdr_ofi_ep_alloc(rail, e.uuid, NULL, peer, &ep) != MADRAIL_OK) {
        mdr_error("rail %s: out of memory accepting peer %016llx", rail->log_name,
                  (unsigned long long)e.uuid);
        goto out;
    }
    ep->peer_epid = e.epid;
    mdr_ofi_hs_owe_ack(ep, &t);
    offer = mdr_rail_ep_offer(&ep->base, ep);
    if (offer == MDR_RAIL_OFFER_GONE) /* the core destroyed it inside the upcall */
        goto out;
    if (offer == MDR_RAIL_OFFER_REFUSED) {
        mdr_debug("rail %s peer %016llx: refused by the core", rail->log_name,
                  (unsigned long long)e.uuid);
        ep->ack_owed = 0;
        mdr_ofi_send_bye(ep, MDR_OFI_BYE_REFUSED);
        ep->failed = 1; /* no second goodbye from destroy */
        mdr_ofi_ep_destroy(ep);
        goto out;
    }
    mdr_debug("rail %s peer %016llx: accepted (its endpoint %u, ours %u)", rail->log_name,
              (unsigned long long)e.uuid, e.epid, ep->epid);
    mdr_ofi_hs_accepted(ep, &t);
    mdr_ofi_short_assign(ep);
    goto out;
drop_av:
    if (e.av_owned)
        fi_av_remove(rail->av, &e.fa, 1, 0);
out:
    mdr_auth_wipe(&e, sizeof(e));
}

/* A HELLO_ACK: the acceptor proved the key; our ep is open, and knows the
 * peer's incarnation (the header's epid). */
static void mdr_ofi_ack_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                 const uint8_t *body, size_t len)
{
    mdr_ofi_hello_ack_t a;
    mdr_auth_transcript_t t;
    uint8_t want[MDR_AUTH_MAC_LEN];
    char src[32];
    mdr_ep_t *ep;
    int known;

    if (len != sizeof(a))
        return;
    memcpy(&a, body, sizeof(a));
    ep = mdr_ofi_ep_lookup(rail, hdr->uuid);
    if (ep == NULL || ep->failed || ep->epid != a.target_epid ||
        ep->hs_state != MDR_OFI_HS_PROOF_SENT || ep->proof_owed) {
        mdr_debug("rail %s: hello ack from %016llx for endpoint %u dropped (no handshake of "
                  "ours waits for it)", rail->log_name, (unsigned long long)hdr->uuid,
                  a.target_epid);
        return;
    }
    mdr_ofi_transcript(&t, rail->uuid, ep->base.uuid, ep->nonce_i, ep->nonce_a,
                       ep->peer->name, ep->peer->name_len);
    mdr_auth_mac(want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    if (!mdr_auth_mac_equal(want, a.mac)) {
        /* not the peer (one that took over its address?): wait for the
         * real answer, or the handshake's deadline */
        snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)hdr->uuid);
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "hello ack without this job's key");
        return;
    }
    if (ep->peer_epid != 0 && ep->peer_epid != hdr->epid) {
        mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                        "the peer answered our handshake from endpoint %u, it introduced %u",
                        hdr->epid, ep->peer_epid);
        return;
    }
    mdr_ofi_sess_keep(ep->peer, MDR_OFI_SESS_INIT, rail->job_key, &t);
    ep->hs_state = MDR_OFI_HS_DONE;
    mdr_auth_wipe(ep->nonce_i, sizeof(ep->nonce_i));
    mdr_auth_wipe(ep->nonce_a, sizeof(ep->nonce_a));
    known = ep->peer_epid == hdr->epid;
    ep->peer_epid = hdr->epid;
    mdr_ofi_set_ready(ep);
    mdr_debug("rail %s peer %016llx: handshake of endpoint %u done (the peer's is %u)",
              rail->log_name, (unsigned long long)hdr->uuid, ep->epid, hdr->epid);
    if (!known)
        mdr_ofi_short_assign(ep);
}

void mdr_ofi_hs_tick(mdr_rail_t *rail)
{
    double now = mdr_time_sec();
    mdr_list_t *l;
    unsigned k;

    if (rail->npend > 0)
        for (k = 0; k < MDR_OFI_PEND_MAX; k++)
            if (rail->pend[k].used && now - rail->pend[k].since > MDR_OFI_PEND_TTL)
                mdr_ofi_pend_drop(rail, &rail->pend[k]);
    if (rail->hs_waiting == 0)
        return;
    mdr_list_for_each(l, &rail->base.eps_all) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, base.link);
        if (!ep->hs_counted)
            continue;
        if (ep->failed || ep->base.destroyed) {
            mdr_ofi_hs_uncount(ep);
            continue;
        }
        if (ep->ack_owed || ep->proof_owed)
            (void)mdr_ofi_hs_push(ep);
        /* no CHALLENGE yet: the acceptor's table was full (or it had not
         * read our HELLO yet): a new HELLO with a new nonce (a CHALLENGE
         * for the old one is then ignored, it echoes the old nonce) */
        if (!ep->ready && ep->hs_state == MDR_OFI_HS_HELLO_SENT &&
            now - ep->hs_last_hello > MDR_OFI_HS_RETRY)
            (void)mdr_ofi_send_hello(ep);
        if (ep->ready && !ep->ack_owed && !ep->proof_owed) {
            mdr_ofi_hs_uncount(ep);
            continue;
        }
        if (!ep->ready && now - ep->hs_since > MDR_OFI_HS_TIMEOUT)
            mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN,
                            "no answer to our handshake in %.0f s: the peer is gone, or refused "
                            "it (another job's key, or it has a live endpoint of ours)",
                            now - ep->hs_since);
    }
}

void mdr_ofi_hs_cleanup(mdr_rail_t *rail)
{
    mdr_list_t *l;
    unsigned k;

    for (k = 0; k < MDR_OFI_PEND_MAX; k++)
        if (rail->pend[k].used) {
            rail->pend[k].av_owned = 0; /* the AV is closed already */
            mdr_ofi_pend_drop(rail, &rail->pend[k]);
        }
    mdr_list_for_each(l, &rail->peer_list) {
        mdr_ofi_peer_t *peer = mdr_container_of(l, mdr_ofi_peer_t, link);
        mdr_auth_wipe(peer->sess, sizeof(peer->sess));
    }
}

static void mdr_ofi_bye_received(mdr_rail_t *rail, const mdr_ofi_hdr_t *hdr,
                                 const uint8_t *body, size_t len)
{
    mdr_ofi_bye_t b;
    mdr_ep_t *ep;

    if (len < sizeof(b))
        return;
    memcpy(&b, body, sizeof(b));
    ep = mdr_ofi_ep_lookup(rail, hdr->uuid);
    if (ep == NULL)
        return;
    if (b.target_epid != 0 ? b.target_epid != ep->epid : ep->peer_epid != hdr->epid) {
        mdr_debug("rail %s peer %016llx: goodbye for another endpoint (%u) ignored",
                  rail->log_name, (unsigned long long)hdr->uuid, b.target_epid);
        return;
    }
    ep->bye_received = 1;
    /* An orderly goodbye (the peer closed its rail or dropped its endpoint,
     * as at finalize) with nothing of ours pending fails the endpoint only
     * when it is next used: processes that finalize at slightly different
     * times, one still waiting in a barrier, must not report each other as
     * failed. */
    if ((b.reason == MDR_OFI_BYE_CLOSED || b.reason == MDR_OFI_BYE_DESTROYED) &&
        ep->pending == 0 && !ep->failed) {
        ep->peer_closed = 1;
        ep->closed_reason = b.reason;
        mdr_rail_ep_unmap(&ep->base); /* a later HELLO from the peer makes a new ep */
        mdr_debug("rail %s peer %016llx: %s; failed when used", rail->log_name,
                  (unsigned long long)hdr->uuid, mdr_ofi_bye_str(b.reason));
        return;
    }
    mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "%s", mdr_ofi_bye_str(b.reason));
}

void mdr_ofi_recv_msg(mdr_rail_t *rail, const uint8_t *buf, size_t len)
{
    mdr_ofi_hdr_t hdr;
    const uint8_t *body;
    size_t blen;
    mdr_ep_t *ep;

    if (len < MDR_OFI_HDR_LEN) {
        mdr_drv_refusal(&rail->refusals, rail->log_name, "?",
                        "message of %zu bytes, shorter than a header", len);
        return;
    }
    memcpy(&hdr, buf, MDR_OFI_HDR_LEN);
    if (hdr.magic != MDR_OFI_MAGIC) {
        char src[32];
        snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)hdr.uuid);
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "message with magic %04x, this library speaks %04x (another madrail "
                        "version, or byte order)",
                        hdr.magic, MDR_OFI_MAGIC);
        return;
    }
    if (hdr.pad > 7 || hdr.pad > len - MDR_OFI_HDR_LEN) {
        ep = mdr_ofi_ep_lookup(rail, hdr.uuid);
        if (ep != NULL)
            mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "message with %u padding bytes",
                            hdr.pad);
        return;
    }
    blen = len - MDR_OFI_HDR_LEN - hdr.pad;
    body = buf + MDR_OFI_HDR_LEN;
    switch (hdr.type) {
    case MDR_OFI_M_HELLO:
        mdr_ofi_hello_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_BYE:
        mdr_ofi_bye_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_SHORT_ID:
        mdr_ofi_short_id_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_CHALLENGE:
        mdr_ofi_challenge_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_PROOF:
        mdr_ofi_proof_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_HELLO_ACK:
        mdr_ofi_ack_received(rail, &hdr, body, blen);
        return;
    case MDR_OFI_M_CTRL:
        break;
    default:
        ep = mdr_ofi_ep_lookup(rail, hdr.uuid);
        if (ep != NULL && ep->peer_epid == hdr.epid)
            mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "message of unknown type %u",
                            hdr.type);
        return;
    }
    ep = mdr_ofi_ep_lookup(rail, hdr.uuid);
    if (ep == NULL || ep->peer_epid != hdr.epid) {
        /* an incarnation we do not know (any more): stale, or refused */
        mdr_debug("rail %s: control message from %016llx endpoint %u dropped (no endpoint "
                  "knows it)", rail->log_name, (unsigned long long)hdr.uuid, hdr.epid);
        return;
    }
    mdr_ofi_deliver(ep, body, blen);
}
