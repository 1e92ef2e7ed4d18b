/*
 * Endpoints of the ucx driver: lazy ucp_eps, sequenced sends, the
 * handshake (HELLO, CHALLENGE, PROOF, ACK; REFUSE), and failures.
 *
 * An ep is created from the peer's packed address but its ucp_ep only on
 * the first send (a 10,000-rank job must not connect everything at init).
 * That first send is preceded by a HELLO carrying our uuid, worker address
 * and a nonce; the peer challenges it, and only once our PROOF of the job
 * key verified (ucx.h, mdr_ucx_pending_t) does it attach the connection to
 * the ep it has for our uuid (both sides connected: merged), or create one
 * and offer it to its core (ep_accepted); a refusal comes back as REFUSE.
 * Our messages wait in the ep (held) until the peer's ACK proved the key
 * in turn.
 *
 * Sends are copied into a pooled buffer before ucp_am_send_nbx, because
 * rail.h lets the caller reuse its buffers at once while UCX keeps a
 * pointer to the data until the request completes.  The copy is at most
 * one slot (8 KiB by default).  A message of at most MDR_UCX_IMM_MAX
 * bytes is first offered to UCX to complete inside the call
 * (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, from a stack gather): then no copy and
 * no request are needed, which is the common case of a small message on
 * an idle ep.
 *
 * Failures (UCX's error handler, a malformed message, a refused
 * connection) mark the ep failed at once, so nothing more is sent or
 * delivered, and are reported from progress: ep_failed first, then the
 * ep's pending put completions with an error.  A BYE (the peer destroyed
 * its ep or closed its rail: an orderly close) fails the ep at once only if
 * something is still pending on it; otherwise it is reported when the core
 * next uses the ep, so that processes finalizing at slightly different
 * times do not report each other as failed.  UCX objects may outlive the
 * ep: the ucp_ep's wrapper (uep) and in-flight send buffers are detached,
 * not freed, until UCX lets go of them.
 */
#include "mdr_config.h"

#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rails/common/auth.h"
#include "rails/common/drv.h"
#include "rails/ucx/ucx.h"
#include "util/clock.h"
#include "util/compiler.h"
#include "util/log.h"

const char *mdr_ucx_type_str(int type)
{
    static const char *const names[MDR_UCX_M_MAX] = {
        "invalid", "HELLO", "CTRL", "BYE", "REFUSE", "KEY_CHECK", "KEY_OK", "KEY_BAD",
        "KEY_REVOKE", "SYNC", "SYNC_ACK", "SHORT_ID", "CHALLENGE", "PROOF", "ACK"};
    return type > 0 && type < MDR_UCX_M_MAX ? names[type] : "invalid";
}

/* ---------------- ucp_ep wrappers ---------------- */

/* Is a BYE from ep's peer waiting in the receive queue? */
static int mdr_ucx_bye_queued(const mdr_ep_t *ep)
{
    mdr_list_t *l;

    mdr_list_for_each(l, &ep->rail->rxq) {
        const mdr_ucx_rx_t *rx = mdr_container_of(l, mdr_ucx_rx_t, link);
        if (rx->hdr.type == MDR_UCX_M_BYE && rx->hdr.uuid == ep->base.uuid)
            return 1;
    }
    return 0;
}

/* A peer that closed in order (BYE) and then exited also breaks the
 * connection, and UCX reports that too, often in the same progress call
 * that queued the BYE.  Then the BYE decides (failed at once if something
 * is pending, else when next used), as for a peer that is still alive:
 * otherwise a process whose peer finalized first while it still waited in
 * a barrier would report that peer as failed. */
static void mdr_ucx_err_cb(void *arg, ucp_ep_h h, ucs_status_t status)
{
    mdr_ucx_uep_t *uep = arg;
    mdr_ep_t *ep = uep->ep;

    (void)h;
    uep->failed = 1;
    if (ep == NULL)
        return;
    if (ep->peer_closed || mdr_ucx_bye_queued(ep)) {
        mdr_debug("rail %s peer %016llx: connection gone after the peer's BYE (%s)",
                  ep->rail->name, (unsigned long long)ep->base.uuid, ucs_status_string(status));
        return;
    }
    mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "UCX reports %s", ucs_status_string(status));
}

static madrail_status_t mdr_ucx_uep_open(mdr_rail_t *rail, const void *waddr, mdr_ep_t *ep,
                                         mdr_ucx_uep_t **uep_p, ucs_status_t *us_p)
{
    ucp_ep_params_t prm;
    mdr_ucx_uep_t *uep;
    ucs_status_t us;

    uep = calloc(1, sizeof(*uep));
    if (uep == NULL)
        return MADRAIL_ERR_NOMEM;
    uep->rail = rail;
    uep->ep = ep;
    mdr_list_init(&uep->link);
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                     UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.address = waddr;
    prm.err_mode = rail->shm ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    prm.err_handler.cb = mdr_ucx_err_cb;
    prm.err_handler.arg = uep;
    us = ucp_ep_create(rail->worker, &prm, &uep->h);
    if (us != UCS_OK) {
        free(uep);
        *us_p = us;
        return MADRAIL_ERR_RAIL_DOWN;
    }
    *uep_p = uep;
    return MADRAIL_OK;
}

void mdr_ucx_uep_close(mdr_ucx_uep_t *uep, int force)
{
    mdr_rail_t *rail = uep->rail;
    ucp_request_param_t prm;
    void *req;

    uep->ep = NULL;
    if (uep->h == NULL) {
        free(uep);
        return;
    }
    if (rail->in_worker) {
        /* an upcall from the active-message handler: no ucp_ep close
         * inside the worker's progress; progress() does it right after */
        uep->close_force = force;
        mdr_list_push_tail(&rail->close_later, &uep->link);
        return;
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    /* A failed ucp_ep must be closed by force; a healthy one flushes first
     * (what we sent, the BYE last, still goes out).  UCX allows force only
     * with peer error handling on both sides: without it (shared memory)
     * every close flushes, which there completes locally. */
    prm.flags = (force || uep->failed) && !rail->shm ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    req = ucp_ep_close_nbx(uep->h, &prm);
    uep->h = NULL;
    if (req != NULL && UCS_PTR_IS_PTR(req)) {
        uep->close_req = req;
        mdr_list_push_tail(&rail->closing, &uep->link);
        return;
    }
    free(uep);
}

/* A destroyed ep's connection.  UCX gives a connection back only when
 * the ucp_eps on it are closed by force, or the worker is destroyed: an
 * orderly close (flush) leaves it to the worker, and a job whose peers
 * come and go would run out of descriptors (test/rail/test_ucx_driver.c).
 * Forcing a close while the peer still sends could reset the connection
 * under data of its we have not read, and lose our last messages with
 * it.  So each side says BYE when it destroys its ep and keeps the ucp_ep
 * open ("lingers") until the peer's BYE came too (the first to destroy
 * finds it when it arrives; the second already had it): then neither
 * sends any more, and each flushes what it sent and closes by force.  A
 * connection UCX reports broken closes by force at once; one whose peer
 * stays silent closes in order after MDR_UCX_LINGER, as it always did.
 * Shared memory has no peer error handling, so no force: it closes in
 * order at once. */
static void mdr_ucx_linger(mdr_ep_t *ep, int peer_done)
{
    mdr_ucx_uep_t *uep = ep->uep;
    mdr_rail_t *rail = ep->rail;

    uep->ep = NULL;
    uep->peer_done = peer_done;
    uep->peer_uuid = ep->base.uuid;
    uep->peer_conn = ep->rx_conn;
    uep->linger_until = mdr_time_sec() + MDR_UCX_LINGER;
    mdr_list_push_tail(&rail->lingering, &uep->link);
}

/* The end of a lingering uep: off rail->lingering, its ucp_ep closed. */
static void mdr_ucx_linger_end(mdr_ucx_uep_t *uep, int force)
{
    mdr_list_del(&uep->link);
    mdr_list_init(&uep->link);
    if (uep->flush_req != NULL)
        ucp_request_free(uep->flush_req);
    uep->flush_req = NULL;
    mdr_ucx_uep_close(uep, force);
}

/* One lingering uep: 0 still waiting, 1 closed (freed or closing). */
static int mdr_ucx_linger_step(mdr_ucx_uep_t *uep, double now, int all)
{
    ucp_request_param_t prm;
    void *req;

    if (all || uep->failed || (!uep->peer_done && now >= uep->linger_until)) {
        mdr_ucx_linger_end(uep, uep->failed); /* in order, unless broken */
        return 1;
    }
    if (!uep->peer_done)
        return 0;
    if (uep->flush_req == NULL) {
        memset(&prm, 0, sizeof(prm));
        req = ucp_ep_flush_nbx(uep->h, &prm);
        if (UCS_PTR_IS_PTR(req)) {
            uep->flush_req = req;
            return 0;
        }
        if (UCS_PTR_IS_ERR(req))
            uep->failed = 1;
    } else if (ucp_request_check_status(uep->flush_req) == UCS_INPROGRESS) {
        return 0;
    }
    mdr_ucx_linger_end(uep, 1); /* both said BYE, ours has left: by force */
    return 1;
}

static madrail_status_t mdr_ucx_send_iov(mdr_ep_t *ep, int type, uint32_t aux,
                                         const struct iovec *iov, int iovcnt);

/* The ep gives up its ucp_ep.  An open connection (or one only the peer's
 * BYE failed: the connection itself is fine) gets our BYE and lingers on
 * tcp; on shared memory, or while the rail closes, a healthy one closes
 * in order (after the BYE), anything else by force. */
static void mdr_ucx_ep_let_go(mdr_ep_t *ep, const char *why)
{
    mdr_rail_t *rail = ep->rail;
    int open = ep->state == MDR_UCX_EP_OPEN && !ep->uep->failed;
    int healthy = open && !ep->peer_closed;
    int linger = (open || (ep->peer_closed && !ep->uep->failed)) && !rail->shm &&
                 !rail->closing_rail;

    if (healthy || linger) {
        struct iovec iov = {(void *)why, strlen(why)};
        (void)mdr_ucx_send_iov(ep, MDR_UCX_M_BYE, 0, &iov, 1);
    }
    if (linger)
        mdr_ucx_linger(ep, ep->peer_closed);
    else
        mdr_ucx_uep_close(ep->uep, !healthy);
    ep->uep = NULL;
}

int mdr_ucx_linger_poll(mdr_rail_t *rail, int all)
{
    mdr_list_t *l, *tmp;
    double now = mdr_time_sec();
    int n = 0;

    mdr_list_for_each_safe(l, tmp, &rail->lingering)
        n += mdr_ucx_linger_step(mdr_container_of(l, mdr_ucx_uep_t, link), now, all);
    return n;
}

void mdr_ucx_linger_bye(mdr_rail_t *rail, uint64_t uuid, uint32_t conn)
{
    mdr_list_t *l;

    mdr_list_for_each(l, &rail->lingering) {
        mdr_ucx_uep_t *uep = mdr_container_of(l, mdr_ucx_uep_t, link);
        if (uep->peer_uuid == uuid && uep->peer_conn == conn && conn != 0)
            uep->peer_done = 1;
    }
}

void mdr_ucx_close_later(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->close_later)) != NULL) {
        mdr_ucx_uep_t *uep = mdr_container_of(l, mdr_ucx_uep_t, link);
        mdr_list_init(&uep->link);
        mdr_ucx_uep_close(uep, uep->close_force);
    }
}

int mdr_ucx_closing_poll(mdr_rail_t *rail)
{
    mdr_list_t *l, *tmp;
    int n = 0;

    mdr_list_for_each_safe(l, tmp, &rail->closing) {
        mdr_ucx_uep_t *uep = mdr_container_of(l, mdr_ucx_uep_t, link);
        if (ucp_request_check_status(uep->close_req) == UCS_INPROGRESS)
            continue;
        ucp_request_free(uep->close_req);
        mdr_list_del(&uep->link);
        free(uep);
        n++;
    }
    return n;
}

/* ---------------- sending ---------------- */

static void mdr_ucx_tx_free(mdr_rail_t *rail, mdr_ucx_tx_t *tx)
{
    mdr_pool_put(&rail->pool, tx, tx->cap);
}

void mdr_ucx_free_orphan_txs(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->orphan_txs)) != NULL)
        mdr_ucx_tx_free(rail, mdr_container_of(l, mdr_ucx_tx_t, link));
}

static void mdr_ucx_tx_done(void *request, ucs_status_t status, void *user_data)
{
    mdr_ucx_tx_t *tx = user_data;
    mdr_ep_t *ep = tx->ep;

    ucp_request_free(request);
    mdr_list_del(&tx->link);
    tx->rail->ntx--;
    if (ep != NULL) {
        ep->backlog -= tx->len;
        /* did not leave: still unsent to the core, and the ep fails (an
         * error fails it here, a cancel comes from closing a failed or
         * destroyed ep's ucp_ep) */
        if (status != UCS_OK)
            ep->lost += tx->len;
        if (status != UCS_OK && status != UCS_ERR_CANCELED)
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "sending a %s message failed: %s",
                            mdr_ucx_type_str(tx->hdr.type), ucs_status_string(status));
    }
    mdr_ucx_tx_free(tx->rail, tx);
}

/* A message's copy for UCX to send (or for ep's held list): header and the
 * len bytes of iov gathered; NULL when the pool is out of memory. */
static mdr_ucx_tx_t *mdr_ucx_tx_copy(mdr_rail_t *rail, mdr_ep_t *ep, const mdr_ucx_hdr_t *hdr,
                                     const struct iovec *iov, int iovcnt, size_t len)
{
    size_t cap = sizeof(mdr_ucx_tx_t) + len, off = 0;
    mdr_ucx_tx_t *tx = mdr_pool_get(&rail->pool, cap);
    int i;

    if (tx == NULL)
        return NULL;
    tx->cap = cap;
    tx->len = len;
    tx->rail = rail;
    tx->ep = ep;
    tx->hdr = *hdr;
    for (i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > 0)
            memcpy(tx->data + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    return tx;
}

void (*mdr_ucx_tx_hook)(const mdr_ucx_hdr_t *hdr, const struct iovec *iov, int iovcnt);

/* Send hdr + the iov pieces on h; ep (may be NULL) accounts for it. */
static madrail_status_t mdr_ucx_am_send(mdr_rail_t *rail, ucp_ep_h h, mdr_ep_t *ep,
                                        const mdr_ucx_hdr_t *hdr, const struct iovec *iov,
                                        int iovcnt)
{
    ucp_request_param_t prm;
    mdr_ucx_tx_t *tx;
    size_t len = 0, off = 0;
    void *req;
    int i;

    if (mdr_ucx_tx_hook != NULL)
        mdr_ucx_tx_hook(hdr, iov, iovcnt);
    for (i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    /* First, from the caller's memory if UCX can finish it in the call (a
     * short message: it copies it into the transport at once); nothing is
     * sent when it cannot (UCS_ERR_NO_RESOURCE), and the copy below goes.
     * Only with nothing of this ep still in UCX's hands, so the order of
     * the ep's messages is UCX's order of calls either way. */
    if (ep != NULL && mdr_list_empty(&ep->txs) && len <= MDR_UCX_IMM_MAX) {
        /* gathered on the stack: UCX completes a contiguous short message
         * in the call, an iov one not (measured: UCX 1.13, shm) */
        uint64_t buf[MDR_UCX_IMM_MAX / sizeof(uint64_t)];
        const void *data = NULL;

        if (iovcnt == 1) {
            data = iov[0].iov_base;
        } else if (len > 0) {
            for (i = 0; i < iovcnt; i++) {
                if (iov[i].iov_len > 0)
                    memcpy((uint8_t *)buf + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
            }
            off = 0;
            data = buf;
        }
        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        req = ucp_am_send_nbx(h, MDR_UCX_AM_ID, hdr, sizeof(*hdr), data, len, &prm);
        if (req == NULL)
            return MADRAIL_OK; /* done: UCX has it */
        /* not possible now: the copy below */
    }
    tx = mdr_ucx_tx_copy(rail, NULL, hdr, iov, iovcnt, len);
    if (tx == NULL)
        return MADRAIL_ERR_NOMEM;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_AM_SEND_FLAG_EAGER;
    prm.cb.send = mdr_ucx_tx_done;
    prm.user_data = tx;
    req = ucp_am_send_nbx(h, MDR_UCX_AM_ID, &tx->hdr, sizeof(tx->hdr), tx->data, len, &prm);
    if (req == NULL) {
        mdr_ucx_tx_free(rail, tx);
        return MADRAIL_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        ucs_status_t us = UCS_PTR_STATUS(req);
        mdr_ucx_tx_free(rail, tx);
        if (us != UCS_ERR_NO_RESOURCE)
            mdr_debug("rail %s: ucp_am_send_nbx: %s", rail->name, ucs_status_string(us));
        return mdr_ucx_status(us);
    }
    rail->ntx++;
    if (ep != NULL) {
        tx->ep = ep;
        ep->backlog += len;
        mdr_list_push_tail(&ep->txs, &tx->link);
    } else {
        mdr_list_push_tail(&rail->orphan_txs, &tx->link);
    }
    return MADRAIL_OK;
}

/* The header of ep's next message of this type. */
static void mdr_ucx_hdr_init(const mdr_ep_t *ep, int type, uint32_t aux, mdr_ucx_hdr_t *hdr)
{
    hdr->type = (uint8_t)type;
    hdr->version = MDR_UCX_VERSION;
    hdr->flags = 0;
    hdr->conn = ep->tx_conn;
    hdr->seq = ep->tx_seq;
    hdr->aux = aux;
    hdr->uuid = ep->rail->uuid;
}

/* A message of ep's connection before the peer proved the key (or behind
 * such messages): numbered now, kept here, sent after the ACK
 * (mdr_ucx_held_send).  It counts as backlog, not yet in UCX's hands. */
static madrail_status_t mdr_ucx_hold(mdr_ep_t *ep, const mdr_ucx_hdr_t *hdr,
                                     const struct iovec *iov, int iovcnt)
{
    mdr_ucx_tx_t *tx;
    size_t len = 0;
    int i;

    for (i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    tx = mdr_ucx_tx_copy(ep->rail, ep, hdr, iov, iovcnt, len);
    if (tx == NULL)
        return MADRAIL_ERR_NOMEM;
    ep->backlog += len;
    mdr_list_push_tail(&ep->held, &tx->link);
    return MADRAIL_OK;
}

static void mdr_ucx_held_free(mdr_ep_t *ep)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&ep->held)) != NULL) {
        mdr_ucx_tx_t *tx = mdr_container_of(l, mdr_ucx_tx_t, link);
        ep->backlog -= tx->len;
        mdr_ucx_tx_free(ep->rail, tx);
    }
}

/* Send what ep held while its handshake ran; 1 when nothing is left. */
static int mdr_ucx_held_send(mdr_ep_t *ep)
{
    mdr_list_t *l;

    while (ep->state == MDR_UCX_EP_OPEN && ep->uep != NULL &&
           (l = mdr_list_pop_head(&ep->held)) != NULL) {
        mdr_ucx_tx_t *tx = mdr_container_of(l, mdr_ucx_tx_t, link);
        struct iovec iov = {tx->data, tx->len};
        madrail_status_t st;

        ep->backlog -= tx->len;
        st = mdr_ucx_am_send(ep->rail, ep->uep->h, ep, &tx->hdr, &iov, 1);
        if (st == MADRAIL_ERR_NORESOURCE || st == MADRAIL_ERR_NOMEM) {
            ep->backlog += tx->len; /* again from progress (mdr_ucx_hs_poll) */
            mdr_list_push_head(&ep->held, &tx->link);
            ep->rail->held_stuck = 1;
            return 0;
        }
        if (st != MADRAIL_OK) {
            ep->lost += tx->len;
            mdr_ucx_tx_free(ep->rail, tx);
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "sending a held %s message: %s",
                            mdr_ucx_type_str(tx->hdr.type), madrail_status_str(st));
            return 1;
        }
        mdr_ucx_tx_free(ep->rail, tx);
    }
    return mdr_list_empty(&ep->held);
}

/* ep's handshake state changes; rail->nhs counts the eps progress must
 * look at (a deadline, or held messages). */
static void mdr_ucx_hs_set(mdr_ep_t *ep, int hs)
{
    int was = ep->hs == MDR_UCX_HS_HELLO || ep->hs == MDR_UCX_HS_PROOF ||
              ep->hs == MDR_UCX_HS_ACK_DUE;
    int now = hs == MDR_UCX_HS_HELLO || hs == MDR_UCX_HS_PROOF || hs == MDR_UCX_HS_ACK_DUE;

    if (was && !now)
        ep->rail->nhs--;
    else if (!was && now)
        ep->rail->nhs++;
    ep->hs = hs;
}

static madrail_status_t mdr_ucx_send_iov(mdr_ep_t *ep, int type, uint32_t aux,
                                         const struct iovec *iov, int iovcnt)
{
    mdr_ucx_hdr_t hdr;
    madrail_status_t st;

    mdr_ucx_hdr_init(ep, type, aux, &hdr);
    if (ep->need_sync && type != MDR_UCX_M_HELLO) {
        /* behind the puts in the lane: the peer answers when it gets here */
        hdr.flags |= MDR_UCX_HF_SYNC;
        hdr.aux = ep->sync_sent + 1;
    }
    if (type != MDR_UCX_M_HELLO && (ep->hs != MDR_UCX_HS_OPEN || !mdr_list_empty(&ep->held)))
        st = mdr_ucx_hold(ep, &hdr, iov, iovcnt);
    else
        st = mdr_ucx_am_send(ep->rail, ep->uep->h, ep, &hdr, iov, iovcnt);
    if (st == MADRAIL_OK) {
        ep->tx_seq++;
        if (hdr.flags & MDR_UCX_HF_SYNC) {
            ep->sync_sent++;
            ep->need_sync = 0;
            mdr_list_del(&ep->sync_link);
        }
    } else if (st != MADRAIL_ERR_NORESOURCE && st != MADRAIL_ERR_NOMEM) {
        mdr_ucx_ep_fail(ep, st == MADRAIL_ERR_RAIL_DOWN ? st : MADRAIL_ERR_RAIL_DOWN,
                        "sending a %s message: %s", mdr_ucx_type_str(type),
                        madrail_status_str(st));
        st = MADRAIL_ERR_RAIL_DOWN;
    }
    return st;
}

madrail_status_t mdr_ucx_send(mdr_ep_t *ep, int type, uint32_t aux, const void *body,
                              size_t body_len, const void *extra, size_t extra_len)
{
    struct iovec iov[2];
    madrail_status_t st;

    if (ep->state != MDR_UCX_EP_OPEN || mdr_ucx_ep_closed_check(ep))
        return MADRAIL_ERR_RAIL_DOWN;
    st = mdr_ucx_ep_connect(ep);
    if (st != MADRAIL_OK)
        return st;
    iov[0].iov_base = (void *)body;
    iov[0].iov_len = body_len;
    iov[1].iov_base = (void *)extra;
    iov[1].iov_len = extra_len;
    return mdr_ucx_send_iov(ep, type, aux, iov, 2);
}

madrail_status_t mdr_ucx_ep_connect(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    mdr_ucx_hello_t hello;
    struct iovec iov[2];
    madrail_status_t st;
    ucs_status_t us = UCS_OK;

    if (ep->uep != NULL)
        return MADRAIL_OK;
    if (ep->state != MDR_UCX_EP_OPEN)
        return MADRAIL_ERR_RAIL_DOWN;
    if (ep->probe_port != 0 &&
        mdr_tcp_path_probe(&rail->tcpdiag.local, &ep->path.remote, ep->probe_port,
                           MDR_UCX_PROBE_MS) == 0) {
        /* ucp_ep_create would block in connect() until TCP gives up */
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_CONNECT,
                        "the peer's address did not answer within %d ms (probe before "
                        "UCX's blocking connect)", MDR_UCX_PROBE_MS);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    st = mdr_ucx_uep_open(rail, ep->waddr, ep, &ep->uep, &us);
    if (st != MADRAIL_OK) {
        if (st == MADRAIL_ERR_NOMEM)
            return st;
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "ucp_ep_create: %s", ucs_status_string(us));
        return MADRAIL_ERR_RAIL_DOWN;
    }
    memset(&hello, 0, sizeof(hello));
    hello.target = ep->base.uuid;
    hello.addr_len = (uint32_t)rail->waddr_len;
    if (rail->addr[5] & MDR_UCX_ADDR_F_INET)
        memcpy(&hello.inet4, rail->addr + MDR_UCX_ADDR_INET_OFF, 4);
    if (rail->addr[5] & MDR_UCX_ADDR_F_PROBE)
        memcpy(&hello.probe_port, rail->addr + MDR_UCX_ADDR_PROBE_OFF, 2);
    mdr_auth_nonce(ep->nonce_i);
    memcpy(hello.nonce, ep->nonce_i, sizeof(hello.nonce));
    iov[0].iov_base = &hello;
    iov[0].iov_len = sizeof(hello);
    iov[1].iov_base = rail->addr + MDR_UCX_ADDR_HDR;
    iov[1].iov_len = rail->waddr_len;
    ep->tx_seq = 0;
    st = mdr_ucx_send_iov(ep, MDR_UCX_M_HELLO, 0, iov, 2);
    if (st == MADRAIL_ERR_NORESOURCE || st == MADRAIL_ERR_NOMEM) {
        /* nothing went out: try again with the next send */
        mdr_ucx_uep_close(ep->uep, 1);
        ep->uep = NULL;
        return st;
    }
    if (st == MADRAIL_OK) {
        mdr_ucx_hs_set(ep, MDR_UCX_HS_HELLO);
        ep->hs_deadline = mdr_time_sec() + MDR_UCX_HS_WAIT;
        mdr_debug("rail %s peer %016llx: connecting (connection %u)", rail->name,
                  (unsigned long long)ep->base.uuid, ep->tx_conn);
    }
    return st;
}

/* ---------------- endpoints ---------------- */

madrail_status_t mdr_ucx_ep_alloc(mdr_rail_t *rail, uint64_t uuid, const void *waddr,
                                  size_t waddr_len, void *cookie, mdr_ep_t **ep_p)
{
    mdr_ep_t *ep;

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return MADRAIL_ERR_NOMEM;
    if (mdr_hash_init(&ep->rkeys, 8) != MADRAIL_OK) {
        free(ep);
        return MADRAIL_ERR_NOMEM;
    }
    ep->rail = rail;
    ep->state = MDR_UCX_EP_OPEN;
    memcpy(ep->waddr, waddr, waddr_len);
    ep->waddr_len = waddr_len;
    ep->tx_conn = rail->next_conn++;
    if (rail->next_conn == 0)
        rail->next_conn = 1;
    mdr_list_init(&ep->txs);
    mdr_list_init(&ep->ops);
    mdr_list_init(&ep->ooo);
    mdr_list_init(&ep->rkey_list);
    mdr_list_init(&ep->sync_link);
    mdr_list_init(&ep->held);
    /* a table full of memory leaves the ep unmapped: it still sends */
    (void)mdr_rail_ep_init(&rail->base, &ep->base, uuid, cookie, 0);
    if (mdr_rail_ep_lookup(&rail->base, uuid) == NULL) {
        mdr_rail_ep_map(&ep->base);
    } else {
        mdr_debug("rail %s peer %016llx: a second endpoint; the first keeps receiving",
                  rail->name, (unsigned long long)uuid);
    }
    *ep_p = ep;
    return MADRAIL_OK;
}

madrail_status_t mdr_ucx_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p)
{
    const uint8_t *a = addr;
    uint32_t mark;
    uint16_t alen;
    madrail_status_t st;

    if (rail == NULL || addr == NULL || ep_p == NULL)
        return MADRAIL_ERR_INVALID;
    if (len != MDR_UCX_ADDR_LEN) {
        mdr_error("rail %s peer %016llx: address of %zu bytes, expected %d", rail->name,
                  (unsigned long long)remote_uuid, len, MDR_UCX_ADDR_LEN);
        return MADRAIL_ERR_INVALID;
    }
    memcpy(&mark, a, 4);
    memcpy(&alen, a + 6, 2);
    if (mark != MDR_UCX_ADDR_MARK || a[4] != MDR_UCX_VERSION || alen == 0 ||
        alen > MDR_UCX_ADDR_LEN - MDR_UCX_ADDR_HDR) {
        mdr_error("rail %s peer %016llx: not a ucx rail address of this version and byte "
                  "order (mark %08x version %u length %u)",
                  rail->name, (unsigned long long)remote_uuid, mark, a[4], alen);
        return MADRAIL_ERR_INVALID;
    }
    if (rail->shm) {
        uint32_t seg;

        memcpy(&seg, a + MDR_UCX_ADDR_SEG_OFF, 4);
        if (alen > MDR_UCX_ADDR_SEG_OFF - MDR_UCX_ADDR_HDR || seg != rail->mm_seg) {
            /* UCX would copy our segments into smaller buffers of the peer */
            mdr_error("rail %s peer %016llx: its shared-memory segment is %u bytes, ours %u "
                      "(0: UCX's default); every process needs the same seg= on a ucx shm rail",
                      rail->name, (unsigned long long)remote_uuid, seg, rail->mm_seg);
            return MADRAIL_ERR_CONFIG;
        }
    }
    st = mdr_ucx_ep_alloc(rail, remote_uuid, a + MDR_UCX_ADDR_HDR, alen, ep_cookie, ep_p);
    if (st == MADRAIL_OK && (a[5] & MDR_UCX_ADDR_F_INET) &&
        alen <= MDR_UCX_ADDR_INET_OFF - MDR_UCX_ADDR_HDR) {
        (*ep_p)->path.remote.family = AF_INET;
        memcpy((*ep_p)->path.remote.a, a + MDR_UCX_ADDR_INET_OFF, 4);
        if (a[5] & MDR_UCX_ADDR_F_PROBE)
            memcpy(&(*ep_p)->probe_port, a + MDR_UCX_ADDR_PROBE_OFF, 2);
    }
    return st;
}

mdr_ep_t *mdr_ucx_ep_lookup(mdr_rail_t *rail, uint64_t uuid)
{
    mdr_rail_ep_t *b = mdr_rail_ep_lookup(&rail->base, uuid);
    return b != NULL ? mdr_container_of(b, mdr_ep_t, base) : NULL;
}

void mdr_ucx_ep_free(mdr_rail_ep_t *base)
{
    mdr_ep_t *ep = mdr_container_of(base, mdr_ep_t, base);

    mdr_hash_cleanup(&ep->rkeys);
    mdr_auth_wipe(ep, sizeof(*ep)); /* session secrets */
    free(ep);
}

void mdr_ucx_ep_destroy(mdr_ep_t *ep)
{
    mdr_rail_t *rail;
    mdr_list_t *l;

    if (ep == NULL || ep->base.destroyed)
        return;
    rail = ep->rail;
    ep->base.destroyed = 1;
    mdr_ucx_short_release(ep);
    mdr_rail_ep_fail_unqueue(&ep->base);
    mdr_list_del(&ep->sync_link);
    ep->need_sync = 0;
    mdr_rail_ep_unmap(&ep->base);
    mdr_ucx_ep_drop_ops(ep, 0); /* pending completions are dropped, never called */
    while ((l = mdr_list_pop_head(&ep->ooo)) != NULL)
        mdr_ucx_rx_free(rail, mdr_container_of(l, mdr_ucx_rx_t, link));
    mdr_ucx_ep_drop_rkeys(ep);
    if (ep->uep != NULL)
        mdr_ucx_ep_let_go(ep, "endpoint destroyed");
    mdr_ucx_hs_set(ep, MDR_UCX_HS_NONE);
    mdr_ucx_held_free(ep);
    /* sends still in UCX's hands: their buffers live on without the ep */
    while ((l = mdr_list_pop_head(&ep->txs)) != NULL) {
        mdr_ucx_tx_t *tx = mdr_container_of(l, mdr_ucx_tx_t, link);
        tx->ep = NULL;
        mdr_list_push_tail(&rail->orphan_txs, &tx->link);
    }
    ep->backlog = 0;
    mdr_rail_ep_retire(&ep->base);
}

MDR_HOT size_t mdr_ucx_ep_backlog(mdr_ep_t *ep)
{
    return ep == NULL ? 0 : ep->backlog;
}

/* What UCX holds of ours, and what it gave back without sending: a send
 * UCX completes with an error (its error handler, a keepalive timeout) or
 * cancels (the failed ep's ucp_ep closed by force after the upcall), and
 * a put dropped with the failed ep.  The first happens before the core
 * hears of the failure from the upcall, and until then must not look as
 * if it had left (rail.h; conformance failed-ep-keeps-unsent). */
MDR_HOT size_t mdr_ucx_ep_unsent(mdr_ep_t *ep)
{
    return ep == NULL ? 0 : ep->backlog + ep->lost;
}

/* UCX's tcp transport hides its sockets, and over a black hole its sends
 * neither fail nor complete while TCP retries (minutes; its keepalive
 * needs an idle connection): the kernel's view of the path
 * (rails/common/tcp_path.h) lets the core time such a rail out.  Other
 * transports, and a peer whose address did not say its IP, cannot tell. */
int mdr_ucx_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    *quiet_ns_p = 0;
    if (ep == NULL)
        return 0;
    return mdr_tcp_path_quiet(&ep->rail->tcpdiag, &ep->path, quiet_ns_p);
}

int mdr_ucx_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p)
{
    *rto_ns_p = 0;
    if (ep == NULL)
        return -1;
    return mdr_tcp_path_rto(&ep->rail->tcpdiag, &ep->path, rto_ns_p);
}

/* UCX's tcp transport writes a put into the target's memory from the
 * bytes that arrive, with no key the target could revoke: a put a dead
 * link held would land whenever the link delivers again, after the core
 * re-put its bytes elsewhere and handed the buffer back.  So the
 * connection's sockets are shut down here, on both sides of a failover
 * (the core calls this before the destroy, and the peer hears of it
 * before any re-put's FIN: core/watch.c, GONE): stale bytes that arrive
 * later reset the connection instead (rails/common/tcp_path.h).  The ucp
 * endpoint is closed by force at the destroy. */
void mdr_ucx_ep_fence(mdr_ep_t *ep)
{
    if (ep == NULL)
        return;
    if (ep->uep != NULL)
        ep->uep->failed = 1;
    mdr_tcp_path_fence_ep(&ep->rail->tcpdiag, &ep->path, ep->rail->name, ep->base.uuid,
                          MDR_TCP_FENCE_RESET);
}

int mdr_ucx_ep_idle(mdr_ep_t *ep)
{
    if (ep == NULL)
        return 1;
    if (!mdr_list_empty(&ep->txs) || !mdr_list_empty(&ep->held) || ep->nops > 0)
        return 0;
    /* order=lane: idle once the peer confirmed every put is in place */
    return ep->state != MDR_UCX_EP_OPEN || (!ep->need_sync && ep->sync_acked == ep->sync_sent);
}

void mdr_ucx_ep_want_sync(mdr_ep_t *ep)
{
    if (ep->need_sync || ep->base.destroyed || ep->state != MDR_UCX_EP_OPEN)
        return;
    ep->need_sync = 1;
    mdr_list_push_tail(&ep->rail->syncq, &ep->sync_link);
}

int mdr_ucx_send_syncs(mdr_rail_t *rail)
{
    mdr_list_t *l, *tmp;
    int n = 0;

    mdr_list_for_each_safe(l, tmp, &rail->syncq) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, sync_link);

        if (ep->state != MDR_UCX_EP_OPEN) {
            mdr_list_del(&ep->sync_link);
            ep->need_sync = 0;
            continue;
        }
        /* carries MDR_UCX_HF_SYNC and leaves the queue; on no-resource the
         * next progress tries again, a failure is reported */
        if (mdr_ucx_send(ep, MDR_UCX_M_SYNC, 0, NULL, 0, NULL, 0) == MADRAIL_OK)
            n++;
    }
    return n;
}

/* The common case of mdr_ucx_ctrl_send, in one piece: a message of at
 * most two pieces and MDR_UCX_IMM_MAX bytes on an open, connected ep with
 * nothing of it in UCX's hands and no SYNC owed, which UCX completes in
 * the call; in the short form once the peer gave us an id (ucx.h).
 * Returns MADRAIL_INPROGRESS when the case does not apply or UCX cannot
 * complete it now: the general path then does it all. */
MDR_HOT static madrail_status_t mdr_ucx_ctrl_send_imm(mdr_ep_t *ep, const struct iovec *iov,
                                                      int iovcnt)
{
    uint64_t buf[MDR_UCX_IMM_MAX / sizeof(uint64_t)];
    size_t l0, l1;
    ucp_request_param_t prm;
    mdr_ucx_hdr_t hdr;
    void *req;

    if (iovcnt < 1 || iovcnt > 2 || ep->base.destroyed || ep->state != MDR_UCX_EP_OPEN ||
        ep->peer_closed || ep->uep == NULL || ep->need_sync || ep->short_owed ||
        ep->hs != MDR_UCX_HS_OPEN || !mdr_list_empty(&ep->txs) || !mdr_list_empty(&ep->held))
        return MADRAIL_INPROGRESS;
    l0 = iov[0].iov_len;
    l1 = iovcnt == 2 ? iov[1].iov_len : 0;
    if (l0 + l1 > MDR_UCX_IMM_MAX || l0 + l1 > ep->rail->slot_size ||
        (l0 != 0 && iov[0].iov_base == NULL) || (l1 != 0 && iov[1].iov_base == NULL))
        return MADRAIL_INPROGRESS;
    if (l0 != 0)
        memcpy(buf, iov[0].iov_base, l0);
    if (l1 != 0)
        memcpy((uint8_t *)buf + l0, iov[1].iov_base, l1);
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    prm.flags = UCP_AM_SEND_FLAG_EAGER;
    if (ep->tx_short_am != 0) {
        mdr_ucx_short_hdr_t sh;
        sh.seq = (uint16_t)ep->tx_seq;
        sh.conn = (uint16_t)ep->tx_conn;
        req = ucp_am_send_nbx(ep->uep->h, ep->tx_short_am, &sh, sizeof(sh), buf, l0 + l1, &prm);
        if (req == NULL)
            ep->rail->short_tx++;
    } else {
        mdr_ucx_hdr_init(ep, MDR_UCX_M_CTRL, 0, &hdr);
        req = ucp_am_send_nbx(ep->uep->h, MDR_UCX_AM_ID, &hdr, sizeof(hdr), buf, l0 + l1, &prm);
    }
    if (req != NULL)
        return MADRAIL_INPROGRESS; /* not now (no resource): the general path */
    ep->tx_seq++;
    return MADRAIL_OK;
}

MDR_HOT madrail_status_t mdr_ucx_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt)
{
    madrail_status_t st;
    size_t len;

    if (ep != NULL && mdr_ucx_ctrl_send_imm(ep, iov, iovcnt) == MADRAIL_OK)
        return MADRAIL_OK;
    if (ep == NULL || ep->base.destroyed || iovcnt < 0 || (iovcnt > 0 && iov == NULL))
        return MADRAIL_ERR_INVALID;
    if (ep->state != MDR_UCX_EP_OPEN || mdr_ucx_ep_closed_check(ep))
        return MADRAIL_ERR_RAIL_DOWN;
    st = mdr_drv_ctrl_len(iov, iovcnt, ep->rail->slot_size, ep->rail->name, &len);
    if (st != MADRAIL_OK)
        return st;
    if (ep->backlog > MDR_UCX_QCAP)
        return MADRAIL_ERR_NORESOURCE;
    st = mdr_ucx_ep_connect(ep);
    if (st != MADRAIL_OK)
        return st;
    mdr_ucx_short_offer(ep);
    return mdr_ucx_send_iov(ep, MDR_UCX_M_CTRL, 0, iov, iovcnt);
}

void mdr_ucx_short_offer(mdr_ep_t *ep)
{
    mdr_ucx_short_id_t m;
    struct iovec iov;

    if (!ep->short_owed || ep->uep == NULL || ep->base.destroyed ||
        ep->state != MDR_UCX_EP_OPEN || ep->rx_short == 0)
        return;
    m.conn = ep->rx_conn;
    m.am_id = MDR_UCX_AM_SHORT_BASE + ep->rx_short - 1;
    iov.iov_base = &m;
    iov.iov_len = sizeof(m);
    if (mdr_ucx_send_iov(ep, MDR_UCX_M_SHORT_ID, 0, &iov, 1) == MADRAIL_OK)
        ep->short_owed = 0; /* else again with the next control message */
}

void mdr_ucx_short_id_got(mdr_ep_t *ep, const mdr_ucx_rx_t *rx)
{
    mdr_ucx_short_id_t m;

    if (rx->len != sizeof(m)) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SHORT_ID of %zu bytes", rx->len);
        return;
    }
    memcpy(&m, rx->data, sizeof(m));
    if (m.am_id < MDR_UCX_AM_SHORT_BASE ||
        m.am_id - MDR_UCX_AM_SHORT_BASE >= MDR_UCX_SHORT_SLOTS) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SHORT_ID with active-message id %u",
                        m.am_id);
        return;
    }
    if (m.conn != ep->tx_conn) {
        mdr_debug("rail %s peer %016llx: SHORT_ID for our connection %u, not %u; ignored",
                  ep->rail->name, (unsigned long long)ep->base.uuid, m.conn, ep->tx_conn);
        return;
    }
    ep->tx_short_am = m.am_id;
    mdr_debug("rail %s peer %016llx: small messages go in the short form (id %u)",
              ep->rail->name, (unsigned long long)ep->base.uuid, m.am_id);
}

/* ---------------- failures ---------------- */

void mdr_ucx_ep_bye(mdr_ep_t *ep, const char *reason, size_t len)
{
    int n = (int)(len < 100 ? len : 100);

    if (ep->nops > 0 || !mdr_list_empty(&ep->txs) || ep->need_sync ||
        ep->sync_acked != ep->sync_sent) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection (%.*s)", n,
                        reason);
        return;
    }
    ep->peer_closed = 1;
    snprintf(ep->closed_reason, sizeof(ep->closed_reason), "%.*s", n, reason);
    mdr_debug("rail %s peer %016llx: the peer closed the connection (%s); failed when used",
              ep->rail->name, (unsigned long long)ep->base.uuid, ep->closed_reason);
}

int mdr_ucx_ep_closed_check(mdr_ep_t *ep)
{
    if (!ep->peer_closed)
        return 0;
    mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection (%s)",
                    ep->closed_reason);
    return 1;
}

void mdr_ucx_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
{
    va_list ap;

    if (ep->base.destroyed || ep->state == MDR_UCX_EP_FAILED)
        return;
    ep->state = MDR_UCX_EP_FAILED;
    if (ep->hs != MDR_UCX_HS_OPEN) /* a handshake ends; an open one still says BYE */
        mdr_ucx_hs_set(ep, MDR_UCX_HS_NONE);
    va_start(ap, fmt);
    /* out of the table too: a later HELLO from the peer makes a new ep */
    mdr_rail_ep_fail_set(&ep->base, status, fmt, ap);
    va_end(ap);
    mdr_debug("rail %s peer %016llx: failed: %s", ep->rail->name, (unsigned long long)ep->base.uuid,
              ep->base.fail_reason);
}

int mdr_ucx_report_failures(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int n = 0;

    /* not mdr_rail_base_report: here the ep stops receiving before the
     * upcall, and a closing rail reports nothing */
    while ((l = mdr_list_pop_head(&rail->base.failq)) != NULL) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, base.fail_link);
        mdr_list_t *r;

        ep->base.fail_queued = 0;
        n++;
        mdr_list_del(&ep->sync_link);
        ep->need_sync = 0;
        /* nothing more is delivered: drop what waited for its turn */
        while ((r = mdr_list_pop_head(&ep->ooo)) != NULL)
            mdr_ucx_rx_free(rail, mdr_container_of(r, mdr_ucx_rx_t, link));
        if (rail->closing_rail)
            continue;
        if (ep->base.cookie != NULL)
            rail->upcalls->ep_failed(ep->base.cookie, ep->base.fail_status, ep->base.fail_reason);
        if (ep->base.destroyed) /* destroyed inside the upcall */
            continue;
        mdr_ucx_ep_drop_ops(ep, 1);
        mdr_ucx_ep_drop_rkeys(ep);
        if (ep->uep != NULL)
            mdr_ucx_ep_let_go(ep, "endpoint failed after the peer's goodbye");
    }
    return n;
}

/* ---------------- handshake ---------------- */

/* Send one unsequenced handshake message (CHALLENGE, ACK, REFUSE) on h. */
static void mdr_ucx_hs_send(mdr_rail_t *rail, ucp_ep_h h, int type, uint32_t conn,
                            uint32_t aux, const void *body, size_t len)
{
    mdr_ucx_hdr_t hdr;
    struct iovec iov = {(void *)body, len};

    memset(&hdr, 0, sizeof(hdr));
    hdr.type = (uint8_t)type;
    hdr.version = MDR_UCX_VERSION;
    hdr.conn = conn;
    hdr.aux = aux;
    hdr.uuid = rail->uuid;
    (void)mdr_ucx_am_send(rail, h, NULL, &hdr, &iov, len > 0 ? 1 : 0);
}

/* The transcript of a handshake (auth.h): rail bytes = the acceptor's
 * worker address, then the initiator's (rid: room for both). */
static void mdr_ucx_transcript(mdr_auth_transcript_t *t, uint8_t *rid, uint64_t uuid_i,
                               uint64_t uuid_a, const uint8_t *nonce_i, const uint8_t *nonce_a,
                               const void *waddr_a, size_t len_a, const void *waddr_i,
                               size_t len_i)
{
    memcpy(rid, waddr_a, len_a);
    memcpy(rid + len_a, waddr_i, len_i);
    t->driver = "ucx";
    t->uuid_i = uuid_i;
    t->uuid_a = uuid_a;
    t->nonce_i = nonce_i;
    t->nonce_a = nonce_a;
    t->rail_id = rid;
    t->rail_id_len = len_a + len_i;
}

/* The end of a half-open handshake: its ucp_ep (unless handed over)
 * closed in order, non-blocking (rail->closing), the slot freed. */
static void mdr_ucx_pending_end(mdr_rail_t *rail, mdr_ucx_pending_t *p)
{
    if (p->uep != NULL)
        mdr_ucx_uep_close(p->uep, 0);
    memset(p, 0, sizeof(*p));
    rail->npending--;
}

static mdr_ucx_pending_t *mdr_ucx_pending_find(mdr_rail_t *rail, uint64_t uuid, uint32_t conn)
{
    unsigned i;

    for (i = 0; i < MDR_UCX_PENDING_MAX && rail->npending > 0; i++)
        if (rail->pending[i].used && rail->pending[i].uuid == uuid &&
            rail->pending[i].conn_i == conn)
            return &rail->pending[i];
    return NULL;
}

void mdr_ucx_hello(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    uint64_t u = rx->hdr.uuid;
    uint32_t conn = rx->hdr.conn;
    mdr_ucx_hello_t h;
    const uint8_t *waddr;
    char src[32];
    mdr_ucx_pending_t *p = NULL;
    unsigned i, same = 0;
    ucs_status_t us = UCS_OK;

    snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)u);
    if (rx->len < sizeof(h)) {
        mdr_drv_refusal(&rail->refusals, rail->name, src, "HELLO of %zu bytes", rx->len);
        return;
    }
    memcpy(&h, rx->data, sizeof(h));
    waddr = rx->data + sizeof(h);
    if (h.addr_len == 0 || h.addr_len > MDR_UCX_ADDR_LEN - MDR_UCX_ADDR_HDR ||
        h.addr_len > rx->len - sizeof(h) || conn == 0 || rx->hdr.seq != 0) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "malformed HELLO (address %u bytes, connection %u, sequence %u)",
                        h.addr_len, conn, rx->hdr.seq);
        return;
    }
    /* UCX unpacks a worker address trusting it: a malformed one makes
     * ucp_ep_create abort the process (UCX 1.13: "Assertion `*addr_version
     * == UCP_OBJECT_VERSION_V2' failed").  Every process of a job runs the
     * same UCX, whose addresses start with the same header byte as ours. */
    if (waddr[0] != rail->addr[MDR_UCX_ADDR_HDR]) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "worker address of another UCX version or format (header %#x, ours "
                        "%#x)", waddr[0], rail->addr[MDR_UCX_ADDR_HDR]);
        return;
    }
    /* misdirected: no answer, which would name our uuid */
    if (h.target != rail->uuid || u == rail->uuid) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "HELLO meant for %016llx (we are %016llx)",
                        (unsigned long long)h.target, (unsigned long long)rail->uuid);
        return;
    }
    for (i = 0; i < MDR_UCX_PENDING_MAX; i++) {
        mdr_ucx_pending_t *q = &rail->pending[i];
        if (!q->used) {
            if (p == NULL)
                p = q;
            continue;
        }
        if (q->uuid == u && q->conn_i == conn)
            return; /* the same HELLO again: its CHALLENGE went out */
        same += q->uuid == u;
    }
    if (p == NULL || same >= MDR_UCX_PENDING_PER_UUID) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "HELLO while %u handshakes wait for their proof (%u for this id; at "
                        "most %d, %d)", rail->npending, same, MDR_UCX_PENDING_MAX,
                        MDR_UCX_PENDING_PER_UUID);
        return;
    }
    /* The CHALLENGE needs a ucp_ep to the stranger's worker address: on
     * tcp ucp_ep_create connects, blocking, so its probe port answers
     * first when it has one (as before our own connects). */
    if (h.inet4 != 0 && h.probe_port != 0 && rail->tcpdiag.local.family == AF_INET) {
        mdr_tcp_addr_t remote;
        memset(&remote, 0, sizeof(remote));
        remote.family = AF_INET;
        memcpy(remote.a, &h.inet4, 4);
        if (mdr_tcp_path_probe(&rail->tcpdiag.local, &remote, h.probe_port,
                               MDR_UCX_PROBE_MS) == 0) {
            mdr_drv_refusal(&rail->refusals, rail->name, src,
                            "HELLO whose address did not answer the probe");
            return;
        }
    }
    memset(p, 0, sizeof(*p));
    if (mdr_ucx_uep_open(rail, waddr, NULL, &p->uep, &us) != MADRAIL_OK) {
        mdr_debug("rail %s %s: cannot answer a HELLO: ucp_ep_create: %s", rail->name, src,
                  ucs_status_string(us));
        p->uep = NULL;
        return;
    }
    p->used = 1;
    rail->npending++;
    p->uuid = u;
    p->conn_i = conn;
    p->conn_a = rail->next_conn++;
    if (rail->next_conn == 0)
        rail->next_conn = 1;
    memcpy(p->nonce_i, h.nonce, sizeof(p->nonce_i));
    mdr_auth_nonce(p->nonce_a);
    memcpy(p->waddr, waddr, h.addr_len);
    p->waddr_len = h.addr_len;
    p->inet4 = h.inet4;
    p->probe_port = h.probe_port;
    p->deadline = mdr_time_sec() + MDR_UCX_PENDING_WAIT;
    mdr_ucx_hs_send(rail, p->uep->h, MDR_UCX_M_CHALLENGE, p->conn_a, conn, p->nonce_a,
                    sizeof(p->nonce_a));
    mdr_debug("rail %s %s: connection %u challenged", rail->name, src, conn);
}

/* Initiator: CHALLENGE for our connection -> PROOF. */
void mdr_ucx_challenge(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    mdr_ep_t *ep = mdr_ucx_ep_lookup(rail, rx->hdr.uuid), *old;
    uint8_t rid[2 * MDR_UCX_ADDR_LEN];
    mdr_auth_transcript_t t;
    mdr_ucx_proof_t pr;
    mdr_ucx_hdr_t hdr;
    struct iovec iov = {&pr, sizeof(pr)};
    const uint8_t *s_old = NULL;

    if (ep == NULL || ep->uep == NULL || ep->hs != MDR_UCX_HS_HELLO ||
        ep->tx_conn != rx->hdr.aux || rx->len != MDR_AUTH_NONCE_LEN ||
        ep->state != MDR_UCX_EP_OPEN) {
        mdr_debug("rail %s: CHALLENGE from %016llx for connection %u (%zu bytes) answers no "
                  "HELLO of ours; dropped",
                  rail->name, (unsigned long long)rx->hdr.uuid, rx->hdr.aux, rx->len);
        return;
    }
    mdr_ucx_transcript(&t, rid, rail->uuid, ep->base.uuid, ep->nonce_i, rx->data, ep->waddr,
                       ep->waddr_len, rail->addr + MDR_UCX_ADDR_HDR, rail->waddr_len);
    memset(&pr, 0, sizeof(pr));
    mdr_auth_mac(pr.mac, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    /* continuity with the session this connection replaces, if we still
     * have one (this ep's, or another ep's of the peer on this rail) */
    old = ep;
    if (!old->has_sess_tx && !old->has_sess_rx) {
        mdr_rail_ep_t *b = mdr_rail_ep_lookup(&rail->base, ep->base.uuid);
        old = b != NULL ? mdr_container_of(b, mdr_ep_t, base) : NULL;
    }
    if (old != NULL)
        s_old = old->has_sess_tx ? old->sess_tx : old->has_sess_rx ? old->sess_rx : NULL;
    if (s_old != NULL)
        mdr_auth_mac(pr.cont, s_old, MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, &t);
    mdr_auth_mac(ep->mac_a_want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    mdr_auth_mac(ep->sess_want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_UCX_M_PROOF;
    hdr.version = MDR_UCX_VERSION;
    hdr.conn = ep->tx_conn;
    hdr.seq = 0;
    hdr.uuid = rail->uuid;
    if (mdr_ucx_am_send(rail, ep->uep->h, ep, &hdr, &iov, 1) != MADRAIL_OK) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_CONNECT, "sending the handshake's PROOF failed");
        return;
    }
    mdr_ucx_hs_set(ep, MDR_UCX_HS_PROOF);
}

/* Is ep a working connection the peer has not given up? */
static int mdr_ucx_ep_live(const mdr_ep_t *ep)
{
    return ep->state == MDR_UCX_EP_OPEN && !ep->peer_closed && !ep->base.destroyed &&
           (ep->uep == NULL || !ep->uep->failed);
}

/* Acceptor, after a verified PROOF: ep (new or the core's) takes the
 * peer's connection; our connection back is the pending ucp_ep when ep
 * has none yet (ACK is its sequence 0), else ACK goes alone on it. */
static void mdr_ucx_accept_join(mdr_ep_t *ep, mdr_ucx_pending_t *p, const uint8_t *sess)
{
    ep->rx_conn = p->conn_i;
    ep->rx_seq = 1;
    memcpy(ep->sess_rx, sess, MDR_AUTH_MAC_LEN);
    ep->has_sess_rx = 1;
    if (ep->uep == NULL && ep->state == MDR_UCX_EP_OPEN) {
        ep->uep = p->uep;
        ep->uep->ep = ep;
        p->uep = NULL;
        ep->tx_conn = p->conn_a;
        ep->tx_seq = 1; /* 0 is the ACK, sent once the core took ep */
        memcpy(ep->sess_tx, sess, MDR_AUTH_MAC_LEN);
        ep->has_sess_tx = 1;
        mdr_ucx_hs_set(ep, MDR_UCX_HS_ACK_DUE);
    }
}

/* Send the ACK (mac) for p: on ep's connection back if it was handed over
 * (then its held messages follow), else alone on the pending ucp_ep. */
static void mdr_ucx_accept_ack(mdr_rail_t *rail, mdr_ep_t *ep, mdr_ucx_pending_t *p,
                               const mdr_ucx_ack_t *ack)
{
    if (ep != NULL && ep->hs == MDR_UCX_HS_ACK_DUE && ep->uep != NULL) {
        mdr_ucx_hs_send(rail, ep->uep->h, MDR_UCX_M_ACK, ep->tx_conn, p->conn_i, ack,
                        sizeof(*ack));
        mdr_ucx_hs_set(ep, MDR_UCX_HS_OPEN);
        (void)mdr_ucx_held_send(ep);
    } else if (p->uep != NULL) {
        mdr_ucx_hs_send(rail, p->uep->h, MDR_UCX_M_ACK, 0, p->conn_i, ack, sizeof(*ack));
    }
}

/* Acceptor: PROOF of a pending handshake. */
void mdr_ucx_proof(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    uint64_t u = rx->hdr.uuid;
    mdr_ucx_pending_t *p = mdr_ucx_pending_find(rail, u, rx->hdr.conn);
    uint8_t rid[2 * MDR_UCX_ADDR_LEN], want[MDR_AUTH_MAC_LEN], sess[MDR_AUTH_MAC_LEN];
    mdr_auth_transcript_t t;
    mdr_ucx_proof_t pr;
    mdr_ucx_ack_t ack;
    mdr_ep_t *ep;
    mdr_rail_offer_t offer;
    char src[32];
    int ok;

    snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)u);
    if (p == NULL) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "PROOF for connection %u, which no CHALLENGE of ours waits for",
                        rx->hdr.conn);
        return;
    }
    if (rx->len != sizeof(pr) || rx->hdr.seq != 0) {
        mdr_drv_refusal(&rail->refusals, rail->name, src, "malformed PROOF (%zu bytes)",
                        rx->len);
        mdr_ucx_pending_end(rail, p);
        return;
    }
    memcpy(&pr, rx->data, sizeof(pr));
    mdr_ucx_transcript(&t, rid, u, rail->uuid, p->nonce_i, p->nonce_a,
                       rail->addr + MDR_UCX_ADDR_HDR, rail->waddr_len, p->waddr, p->waddr_len);
    mdr_auth_mac(want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    ok = mdr_auth_mac_equal(want, pr.mac);
    if (!ok) {
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "PROOF without this job's key (or for another handshake)");
        mdr_ucx_pending_end(rail, p);
        return;
    }
    mdr_auth_mac(sess, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
    mdr_auth_mac(ack.mac, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    ep = mdr_ucx_ep_lookup(rail, u);
    if (ep != NULL && ep->rx_conn != 0 && ep->rx_conn != p->conn_i) {
        /* The id has a connection already.  While it is alive and has a
         * session, only a proof of that session replaces it (issue 28:
         * identities cannot be taken over); the live one stays as it is. */
        if (mdr_ucx_ep_live(ep) && (ep->has_sess_rx || ep->has_sess_tx)) {
            int cont = 0;
            if (ep->has_sess_rx) {
                mdr_auth_mac(want, ep->sess_rx, MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, &t);
                cont |= mdr_auth_mac_equal(want, pr.cont);
            }
            if (ep->has_sess_tx) {
                mdr_auth_mac(want, ep->sess_tx, MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, &t);
                cont |= mdr_auth_mac_equal(want, pr.cont);
            }
            if (!cont) {
                mdr_drv_refusal(&rail->refusals, rail->name, src,
                                "connection %u claims the id of a live peer without proving "
                                "continuity with its session; refused, the live one kept",
                                p->conn_i);
                mdr_ucx_hs_send(rail, p->uep->h, MDR_UCX_M_REFUSE, 0, p->conn_i, NULL, 0);
                mdr_ucx_pending_end(rail, p);
                mdr_auth_wipe(sess, sizeof(sess));
                return;
            }
            mdr_debug("rail %s %s: reconnection proved continuity", rail->name, src);
        }
        /* The peer started over: it gave up the old connection.  Report that
         * before offering the new one, so the core sees them in order. */
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer reconnected");
        mdr_ucx_report_failures(rail);
        ep = mdr_ucx_ep_lookup(rail, u);
    }
    if (ep != NULL && ep->rx_conn == 0) {
        /* ours, created by the core: the peer's stream joins it */
        mdr_ucx_accept_join(ep, p, sess);
        mdr_ucx_accept_ack(rail, ep, p, &ack);
        mdr_debug("rail %s peer %016llx: incoming connection %u joins our endpoint",
                  rail->name, (unsigned long long)u, p->conn_i);
        mdr_ucx_short_assign(ep);
        mdr_ucx_pending_end(rail, p);
        mdr_auth_wipe(sess, sizeof(sess));
        return;
    }
    if (ep != NULL) { /* cannot happen (the same connection twice); harmless */
        mdr_ucx_pending_end(rail, p);
        mdr_auth_wipe(sess, sizeof(sess));
        return;
    }
    if (mdr_ucx_ep_alloc(rail, u, p->waddr, p->waddr_len, NULL, &ep) != MADRAIL_OK) {
        mdr_error("rail %s: out of memory accepting %016llx", rail->name, (unsigned long long)u);
        mdr_ucx_hs_send(rail, p->uep->h, MDR_UCX_M_REFUSE, 0, p->conn_i, NULL, 0);
        mdr_ucx_pending_end(rail, p);
        mdr_auth_wipe(sess, sizeof(sess));
        return;
    }
    if (p->inet4 != 0) {
        ep->path.remote.family = AF_INET;
        memcpy(ep->path.remote.a, &p->inet4, 4);
        ep->probe_port = p->probe_port;
    }
    mdr_ucx_accept_join(ep, p, sess);
    mdr_auth_wipe(sess, sizeof(sess));
    offer = mdr_rail_ep_offer(&ep->base, ep);
    if (offer == MDR_RAIL_OFFER_GONE) { /* the core destroyed it inside the upcall */
        mdr_ucx_pending_end(rail, p);
        return;
    }
    if (offer == MDR_RAIL_OFFER_REFUSED) {
        mdr_ucx_uep_t *uep = ep->uep;
        mdr_debug("rail %s peer %016llx: refused by the core", rail->name,
                  (unsigned long long)u);
        if (uep != NULL) { /* the REFUSE goes on it, then it closes */
            ep->uep = NULL;
            uep->ep = NULL;
            mdr_ucx_hs_send(rail, uep->h, MDR_UCX_M_REFUSE, 0, p->conn_i, NULL, 0);
            mdr_ucx_uep_close(uep, 0);
        } else if (p->uep != NULL) {
            mdr_ucx_hs_send(rail, p->uep->h, MDR_UCX_M_REFUSE, 0, p->conn_i, NULL, 0);
        }
        mdr_ucx_ep_destroy(ep);
        mdr_ucx_pending_end(rail, p);
        return;
    }
    mdr_ucx_accept_ack(rail, ep, p, &ack);
    mdr_debug("rail %s peer %016llx: accepted connection %u", rail->name,
              (unsigned long long)u, p->conn_i);
    mdr_ucx_short_assign(ep);
    mdr_ucx_pending_end(rail, p);
}

/* Initiator: ACK of our PROOF.  The peer proved the key: our connection
 * opens (held messages go), and a connection back handed over in it
 * joins ep. */
void mdr_ucx_ack(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    mdr_ep_t *ep = mdr_ucx_ep_lookup(rail, rx->hdr.uuid);
    mdr_list_t *l;

    if (ep == NULL || ep->uep == NULL || ep->hs != MDR_UCX_HS_PROOF ||
        ep->tx_conn != rx->hdr.aux || rx->hdr.seq != 0 || ep->state != MDR_UCX_EP_OPEN) {
        mdr_debug("rail %s: ACK from %016llx for connection %u answers no PROOF of ours; "
                  "dropped", rail->name, (unsigned long long)rx->hdr.uuid, rx->hdr.aux);
        return;
    }
    if (rx->len != sizeof(mdr_ucx_ack_t) || !mdr_auth_mac_equal(ep->mac_a_want, rx->data)) {
        mdr_error("rail %s peer %016llx: its ACK does not prove the job key (%zu bytes): not "
                  "the peer, or not of this job",
                  rail->name, (unsigned long long)ep->base.uuid, rx->len);
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_CONNECT,
                        "the peer's ACK does not prove the job key");
        return;
    }
    memcpy(ep->sess_tx, ep->sess_want, MDR_AUTH_MAC_LEN);
    ep->has_sess_tx = 1;
    if (rx->hdr.conn != 0 && rx->hdr.conn != ep->rx_conn) {
        /* the acceptor's connection back starts with this ACK */
        while ((l = mdr_list_pop_head(&ep->ooo)) != NULL)
            mdr_ucx_rx_free(rail, mdr_container_of(l, mdr_ucx_rx_t, link));
        mdr_ucx_short_release(ep);
        ep->rx_conn = rx->hdr.conn;
        ep->rx_seq = 1;
        memcpy(ep->sess_rx, ep->sess_want, MDR_AUTH_MAC_LEN);
        ep->has_sess_rx = 1;
        mdr_ucx_short_assign(ep);
    }
    mdr_auth_wipe(ep->sess_want, sizeof(ep->sess_want));
    mdr_auth_wipe(ep->mac_a_want, sizeof(ep->mac_a_want));
    mdr_ucx_hs_set(ep, MDR_UCX_HS_OPEN);
    mdr_debug("rail %s peer %016llx: connection %u open (the peer proved the key)", rail->name,
              (unsigned long long)ep->base.uuid, ep->tx_conn);
    (void)mdr_ucx_held_send(ep);
    mdr_ucx_short_offer(ep);
}

int mdr_ucx_hs_poll(mdr_rail_t *rail, int all)
{
    double now = mdr_time_sec();
    mdr_list_t *l, *tmp;
    unsigned i;
    int n = 0;

    for (i = 0; i < MDR_UCX_PENDING_MAX && rail->npending > 0; i++) {
        mdr_ucx_pending_t *p = &rail->pending[i];
        if (!p->used || (!all && now < p->deadline))
            continue;
        if (!all) {
            char src[32];
            snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)p->uuid);
            mdr_drv_refusal(&rail->refusals, rail->name, src,
                            "no PROOF within %.0f s of the CHALLENGE", MDR_UCX_PENDING_WAIT);
        }
        mdr_ucx_pending_end(rail, p);
        n++;
    }
    /* the walk over every ep at most every 5 ms (deadlines are seconds),
     * at once when held messages wait for a send UCX refused */
    if (all || (rail->nhs == 0 && !rail->held_stuck) || (now < rail->hs_next && !rail->held_stuck))
        return n;
    rail->hs_next = now + 0.005;
    rail->held_stuck = 0;
    mdr_list_for_each_safe(l, tmp, &rail->base.eps_all) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, base.link);
        if (ep->base.destroyed || ep->state != MDR_UCX_EP_OPEN)
            continue;
        if ((ep->hs == MDR_UCX_HS_HELLO || ep->hs == MDR_UCX_HS_PROOF) &&
            now >= ep->hs_deadline) {
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_CONNECT,
                            "no %s from the peer within %.0f s of our %s",
                            ep->hs == MDR_UCX_HS_HELLO ? "CHALLENGE" : "ACK", MDR_UCX_HS_WAIT,
                            ep->hs == MDR_UCX_HS_HELLO ? "HELLO" : "PROOF");
            n++;
        } else if (ep->hs == MDR_UCX_HS_OPEN && !mdr_list_empty(&ep->held)) {
            if (!mdr_ucx_held_send(ep))
                rail->held_stuck = 1;
            n++;
        }
    }
    return n;
}

void mdr_ucx_refused(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    mdr_ep_t *ep = mdr_ucx_ep_lookup(rail, rx->hdr.uuid);

    if (ep == NULL || ep->tx_conn != rx->hdr.aux || ep->uep == NULL)
        return;
    mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer refused the connection");
}
