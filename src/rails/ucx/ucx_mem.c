/*
 * Registration and puts of the ucx driver.
 *
 * Memory is registered with ucp_mem_map (the core's registration cache sits
 * above mem_reg) and its key packed with ucp_rkey_pack, behind a small
 * header of ours: region id, generation, base and length.  The sender
 * unpacks a key once per ep and caches the ucp_rkey_h.
 *
 * Checked puts (the default; spec option check=0 turns them off): on the
 * transports of this machine (tcp, cma, posix) UCX writes wherever a put
 * says, even into a region that was deregistered, and the target's driver
 * never sees the put.  So before the first put with a key (or any put
 * outside what was approved) the sender asks the target (KEY_CHECK); the
 * target checks the region id, generation, access and range against its
 * registrations, answers KEY_OK or KEY_BAD and, on a bad one, fails its ep
 * with MADRAIL_ERR_RAIL_PROTO as a software put would.  Approved regions
 * are remembered by the target, which sends KEY_REVOKE when it deregisters
 * one, so a stale key is asked about again.  The cost is one round trip per
 * new key per ep; the core's registration cache makes keys repeat.  With
 * check=0 the rail says MDR_RAIL_CAP_PUT_HW: only range checks against the
 * key's header are made, locally, as on hardware RDMA.
 *
 * Completion and the rail.h ordering promise (a control message sent after
 * the put's completion is delivered after the data is visible): the
 * completion of ucp_put_nbx is local (the source is reusable), not remote.
 * Two ways, chosen per rail (spec option order=):
 *   flush  every put is followed by ucp_ep_flush_nbx and completes when
 *          both did: remote completion, whatever lanes UCX uses.  One
 *          round trip more per put.  The default on RDMA devices, where
 *          UCX may carry puts and active messages on different lanes (an
 *          RC lane for RMA, another for AM) that nothing orders.
 *   lane   the put completes at local completion.  Correct when the put and
 *          the later message travel one ordered path, which is what UCX
 *          1.13 does here: on tcp the memory domain cannot register memory,
 *          so ucp emulates the put with active messages on the AM lane (one
 *          TCP stream, applied in order by the target's progress); on
 *          shared memory a put to user memory is emulated the same way over
 *          the AM FIFO (or is a synchronous CPU copy).  The default on tcp
 *          and shm; the conformance check put-then-ctrl-order tests it.
 *          Local completion does not say the data is in place, though, and
 *          a target may free its buffer once our ep is idle: the next
 *          message after a put (the FIN, normally) carries a SYNC flag, the
 *          peer answers SYNC_ACK when it delivers it, and the ep stays
 *          non-idle until then.  The FIN is not delayed; an explicit SYNC
 *          goes out only when progress finds no message carried the flag.
 * What carries a put on shared memory (UCX 1.13, UCX_PROTO_ENABLE=y
 * UCX_PROTO_INFO=y shows it): "software emulation" on sysv/memory for
 * every size, i.e. active messages of one mm segment each through the
 * peer's FIFO (the sender copies into it, the target's ucp_put_handler
 * copies out, and answers each with a completion message); cma is never an
 * RMA lane (it has zero-copy only).  ucx_perftest's ucp_put_bw is faster
 * because its buffers come from ucp_mem_map(ALLOCATE), i.e. a sysv segment
 * the sender maps: one memcpy ("short").  With UCX_ALLOC_PRIO=heap the tool
 * takes our path and is slower than this driver.  Hence the larger mm
 * segment on shm rails (seg=, ucx.h), not a different put.
 *
 * ucp_worker_fence would not do: in UCX 1.13 it only asks each transport
 * to order its own operations.  A further reason to avoid flush on tcp:
 * UCX 1.13 implements a tcp flush as a zero-length PUT that the peer
 * acknowledges, and an acknowledgement read after the connection was seen
 * broken trips an assertion that aborts the process (seen in the
 * conformance check peer-closes with order=flush and check=0).
 */
#include "mdr_config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rails/ucx/ucx.h"
#include "util/list.h"
#include "util/log.h"

/* ---------------- registrations ---------------- */

static madrail_status_t mdr_ucx_map(mdr_rail_t *rail, void *addr, size_t len, ucp_mem_h *mh_p)
{
    ucp_mem_map_params_t mp;
    ucs_status_t us;

    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len;
    us = ucp_mem_map(rail->ctx, &mp, mh_p);
    if (us != UCS_OK) {
        mdr_error("rail %s: ucp_mem_map of %zu bytes at %p: %s", rail->name, len, addr,
                  ucs_status_string(us));
        return us == UCS_ERR_NO_MEMORY ? MADRAIL_ERR_NOMEM : MADRAIL_ERR_IO;
    }
    return MADRAIL_OK;
}

madrail_status_t mdr_ucx_rkey_probe(mdr_rail_t *rail, size_t *len_p)
{
    static uint64_t probe[512];
    ucp_mem_h mh;
    void *packed;
    size_t len;
    ucs_status_t us;
    madrail_status_t st;

    st = mdr_ucx_map(rail, probe, sizeof(probe), &mh);
    if (st != MADRAIL_OK)
        return st;
    us = ucp_rkey_pack(rail->ctx, mh, &packed, &len);
    if (us != UCS_OK) {
        mdr_error("rail %s: ucp_rkey_pack: %s", rail->name, ucs_status_string(us));
        ucp_mem_unmap(rail->ctx, mh);
        return MADRAIL_ERR_IO;
    }
    ucp_rkey_buffer_release(packed);
    ucp_mem_unmap(rail->ctx, mh);
    *len_p = len;
    return MADRAIL_OK;
}

madrail_status_t mdr_ucx_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    madrail_status_t st;
    mdr_memh_t *mh;
    void *p;

    if (rail == NULL)
        return MADRAIL_ERR_INVALID;
    st = mdr_sw_reg_new(&rail->regions, rail->name, addr, len, access, sizeof(*mh),
                        offsetof(mdr_memh_t, reg), &p);
    if (st != MADRAIL_OK)
        return st;
    mh = p;
    if (len > 0) {
        st = mdr_ucx_map(rail, addr, len, &mh->ucp);
        if (st != MADRAIL_OK)
            goto err_region;
    }
    mh->rail = rail;
    *memh_p = mh;
    return MADRAIL_OK;

err_region:
    (void)mdr_region_remove(&rail->regions, &mh->reg);
    free(mh);
    return st;
}

static void mdr_ucx_memh_free(mdr_rail_t *rail, mdr_memh_t *mh)
{
    if (mh->packed != NULL)
        ucp_rkey_buffer_release(mh->packed);
    if (mh->ucp != NULL)
        ucp_mem_unmap(rail->ctx, mh->ucp);
    free(mh->exported);
    free(mh);
}

void mdr_ucx_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    mdr_ucx_revoke_t rv;
    unsigned i;

    if (rail == NULL || !mdr_sw_reg_known(&rail->regions, memh != NULL ? &memh->reg : NULL,
                                          rail->name))
        return;
    (void)mdr_region_remove(&rail->regions, &memh->reg);
    /* The peers that were allowed to put here must ask again. */
    rv.id = memh->reg.id;
    rv.gen = memh->reg.gen;
    for (i = 0; i < memh->nexported && !rail->closing_rail; i++) {
        mdr_ep_t *ep = mdr_ucx_ep_lookup(rail, memh->exported[i]);
        if (ep != NULL && ep->state == MDR_UCX_EP_OPEN)
            (void)mdr_ucx_send(ep, MDR_UCX_M_KEY_REVOKE, 0, &rv, sizeof(rv), NULL, 0);
    }
    mdr_ucx_memh_free(rail, memh);
}

madrail_status_t mdr_ucx_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p)
{
    mdr_ucx_rkey_hdr_t h;
    ucs_status_t us;
    size_t room;

    /* Not bound: UCX lets any ep holding the packed key write inside the
     * mapping, and the target's KEY_CHECK cannot stop a sender that skips
     * it (docs/security.md). */
    (void)peer;
    if (rail == NULL || memh == NULL || buf == NULL || len_p == NULL ||
        !mdr_region_owned(&rail->regions, &memh->reg))
        return MADRAIL_ERR_INVALID;
    if (memh->packed == NULL && memh->ucp != NULL) {
        us = ucp_rkey_pack(rail->ctx, memh->ucp, &memh->packed, &memh->packed_len);
        if (us != UCS_OK) {
            mdr_error("rail %s: ucp_rkey_pack: %s", rail->name, ucs_status_string(us));
            memh->packed = NULL;
            return MADRAIL_ERR_IO;
        }
    }
    /* rail.h: buf has room for at least attr.max_rkey bytes, whatever *len_p
     * says (callers may pass 0 and rely on that) */
    room = *len_p > rail->max_rkey ? *len_p : rail->max_rkey;
    if (room < sizeof(h) + memh->packed_len) {
        mdr_error("rail %s: packed key of %zu bytes exceeds max_rkey %zu", rail->name,
                  sizeof(h) + memh->packed_len, room);
        return MADRAIL_ERR_INVALID;
    }
    memset(&h, 0, sizeof(h));
    h.mark = MDR_UCX_RKEY_MARK;
    h.ucp_len = (uint32_t)memh->packed_len;
    h.id = memh->reg.id;
    h.gen = memh->reg.gen;
    h.base = memh->reg.base;
    h.len = memh->reg.len;
    memcpy(buf, &h, sizeof(h));
    if (memh->packed_len > 0)
        memcpy((uint8_t *)buf + sizeof(h), memh->packed, memh->packed_len);
    *len_p = sizeof(h) + memh->packed_len;
    return MADRAIL_OK;
}

static void mdr_ucx_mem_release(mdr_region_t *r, void *rail)
{
    mdr_ucx_memh_free(rail, mdr_container_of(r, mdr_memh_t, reg));
}

void mdr_ucx_mem_cleanup(mdr_rail_t *rail)
{
    mdr_region_tab_cleanup(&rail->regions, mdr_ucx_mem_release, rail);
}

/* ---------------- remote keys (sender side) ---------------- */

static void mdr_ucx_rkey_unref(mdr_ucx_rkey_t *rk)
{
    if (--rk->refs == 0 && rk->dead) {
        ucp_rkey_destroy(rk->h);
        free(rk);
    }
}

static void mdr_ucx_rkey_kill(mdr_ucx_rkey_t *rk)
{
    rk->dead = 1;
    if (rk->refs == 0) {
        ucp_rkey_destroy(rk->h);
        free(rk);
    }
}

void mdr_ucx_ep_drop_rkeys(mdr_ep_t *ep)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&ep->rkey_list)) != NULL) {
        mdr_ucx_rkey_t *rk = mdr_container_of(l, mdr_ucx_rkey_t, link);
        mdr_hash_del(&ep->rkeys, rk->key);
        mdr_ucx_rkey_kill(rk);
    }
}

/* ---------------- puts ---------------- */

static void mdr_ucx_op_free(mdr_ucx_op_t *op)
{
    free(op->ucp_rkey);
    free(op);
}

void mdr_ucx_free_orphan_ops(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->orphan_ops)) != NULL) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        if (op->rk != NULL) {
            mdr_ucx_rkey_unref(op->rk);
            op->rk = NULL;
        }
        mdr_ucx_op_free(op);
    }
}

/* op's status is known: queue its completion (or free it if nobody waits). */
static void mdr_ucx_op_finish(mdr_ucx_op_t *op)
{
    mdr_rail_t *rail = op->rail;

    op->state = MDR_UCX_OP_DONE;
    if (op->rk != NULL) {
        mdr_ucx_rkey_unref(op->rk);
        op->rk = NULL;
    }
    mdr_list_del(&op->link);
    if (op->ep == NULL) { /* orphan: its ep is gone */
        mdr_ucx_op_free(op);
        return;
    }
    op->ep->backlog -= op->len;
    /* failed with its ep: still unsent to the core (a put the target
     * refused fails alone, and its ep must still drain to 0) */
    if (op->status != MADRAIL_OK && op->ep->state == MDR_UCX_EP_FAILED)
        op->ep->lost += op->len;
    if (!rail->order_flush && op->status == MADRAIL_OK && op->len > 0)
        mdr_ucx_ep_want_sync(op->ep);
    op->in_doneq = 1;
    mdr_list_push_tail(&rail->doneq, &op->link);
}

static void mdr_ucx_op_cb(void *request, ucs_status_t status, void *user_data)
{
    mdr_ucx_op_t *op = user_data;

    ucp_request_free(request);
    if (status != UCS_OK && op->status == MADRAIL_OK)
        op->status = status == UCS_ERR_CANCELED ? MADRAIL_ERR_RAIL_DOWN : mdr_ucx_status(status);
    if (--op->ucx_pending == 0)
        mdr_ucx_op_finish(op);
}

int mdr_ucx_report_done(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int n = 0;

    while ((l = mdr_list_pop_head(&rail->doneq)) != NULL) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        mdr_completion_t *comp = op->comp;
        madrail_status_t st = op->status;

        if (op->ep != NULL && op->ep->nops > 0)
            op->ep->nops--;
        mdr_ucx_op_free(op);
        if (comp != NULL && !rail->closing_rail)
            comp->cb(comp, st);
        n++;
    }
    return n;
}

/* Start the put and the flush behind it.  Returns OK (both done at once),
 * INPROGRESS (callbacks follow), NORESOURCE (nothing issued) or an error. */
static madrail_status_t mdr_ucx_op_issue(mdr_ucx_op_t *op)
{
    mdr_ep_t *ep = op->ep;
    ucp_request_param_t prm;
    void *req;
    ucs_status_t us;

    if (op->len == 0)
        return MADRAIL_OK;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.send = mdr_ucx_op_cb;
    prm.user_data = op;
    if (op->lmemh != NULL) {
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = op->lmemh;
    }
    req = ucp_put_nbx(ep->uep->h, op->local, op->len, op->raddr, op->rk->h, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        us = UCS_PTR_STATUS(req);
        if (us == UCS_ERR_NO_RESOURCE)
            return MADRAIL_ERR_NORESOURCE;
        mdr_error("rail %s peer %016llx: ucp_put_nbx of %zu bytes: %s", ep->rail->name,
                  (unsigned long long)ep->base.uuid, op->len, ucs_status_string(us));
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (req != NULL)
        op->ucx_pending++;
    if (!ep->rail->order_flush)
        return op->ucx_pending > 0 ? MADRAIL_INPROGRESS : MADRAIL_OK;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    req = ucp_ep_flush_nbx(ep->uep->h, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        /* the put is out; its failure will show as the ep's */
        if (op->status == MADRAIL_OK)
            op->status = MADRAIL_ERR_RAIL_DOWN;
        mdr_error("rail %s peer %016llx: ucp_ep_flush_nbx: %s", ep->rail->name,
                  (unsigned long long)ep->base.uuid, ucs_status_string(UCS_PTR_STATUS(req)));
    } else if (req != NULL) {
        op->ucx_pending++;
    }
    return op->ucx_pending > 0 ? MADRAIL_INPROGRESS : op->status;
}

/* Find or unpack the key of op on its ep (the target approved it). */
static madrail_status_t mdr_ucx_op_rkey(mdr_ucx_op_t *op, uint64_t base, uint64_t len)
{
    mdr_ep_t *ep = op->ep;
    mdr_ucx_rkey_t *rk = mdr_hash_get(&ep->rkeys, op->key);
    ucs_status_t us;

    if (rk == NULL) {
        rk = calloc(1, sizeof(*rk));
        if (rk == NULL)
            return MADRAIL_ERR_NOMEM;
        us = ucp_ep_rkey_unpack(ep->uep->h, op->ucp_rkey, &rk->h);
        if (us != UCS_OK) {
            mdr_error("rail %s peer %016llx: ucp_ep_rkey_unpack: %s", ep->rail->name,
                      (unsigned long long)ep->base.uuid, ucs_status_string(us));
            free(rk);
            return MADRAIL_ERR_RAIL_PROTO;
        }
        rk->key = op->key;
        if (mdr_hash_put(&ep->rkeys, op->key, rk) != MADRAIL_OK) {
            ucp_rkey_destroy(rk->h);
            free(rk);
            return MADRAIL_ERR_NOMEM;
        }
        mdr_list_push_tail(&ep->rkey_list, &rk->link);
    }
    rk->base = base;
    rk->len = len;
    rk->refs++;
    op->rk = rk;
    return MADRAIL_OK;
}

static madrail_status_t mdr_ucx_op_check(mdr_ucx_op_t *op)
{
    mdr_ep_t *ep = op->ep;
    mdr_ucx_check_t c;
    madrail_status_t st;

    memset(&c, 0, sizeof(c));
    c.check_id = op->check_id = ++ep->next_check;
    c.id = (uint32_t)op->key;
    c.gen = (uint32_t)(op->key >> 32);
    c.base = op->base;
    c.len = op->rlen;
    c.raddr = op->raddr;
    c.count = op->len;
    st = mdr_ucx_send(ep, MDR_UCX_M_KEY_CHECK, 0, &c, sizeof(c), NULL, 0);
    if (st == MADRAIL_OK)
        op->state = MDR_UCX_OP_CHECK;
    return st;
}

madrail_status_t mdr_ucx_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp)
{
    mdr_rail_t *rail;
    mdr_ucx_rkey_hdr_t h;
    mdr_ucx_rkey_t *rk;
    mdr_ucx_op_t *op;
    madrail_status_t st;

    if (ep == NULL || ep->base.destroyed || (local == NULL && len > 0) || rkey == NULL ||
        comp == NULL)
        return MADRAIL_ERR_INVALID;
    rail = ep->rail;
    if (ep->state != MDR_UCX_EP_OPEN || mdr_ucx_ep_closed_check(ep))
        return MADRAIL_ERR_RAIL_DOWN;
    if (rkey_len < sizeof(h))
        return MADRAIL_ERR_RAIL_PROTO;
    memcpy(&h, rkey, sizeof(h));
    if (h.mark != MDR_UCX_RKEY_MARK || h.ucp_len > rkey_len - sizeof(h) ||
        (h.ucp_len == 0 && h.len > 0)) {
        mdr_error("rail %s peer %016llx: malformed remote key (%zu bytes)", rail->name,
                  (unsigned long long)ep->base.uuid, rkey_len);
        return MADRAIL_ERR_RAIL_PROTO;
    }
    if (!rail->check && !mdr_region_covers(h.base, h.len, raddr, len)) {
        mdr_error("rail %s peer %016llx: put of %zu bytes at %#llx is outside the region "
                  "[%#llx, +%llu) of its key",
                  rail->name, (unsigned long long)ep->base.uuid, len, (unsigned long long)raddr,
                  (unsigned long long)h.base, (unsigned long long)h.len);
        return MADRAIL_ERR_RAIL_PROTO;
    }
    if (len == 0 && !rail->check)
        return MADRAIL_OK;
    if (ep->backlog > MDR_UCX_QCAP)
        return MADRAIL_ERR_NORESOURCE;
    st = mdr_ucx_ep_connect(ep);
    if (st != MADRAIL_OK)
        return st;
    if (ep->hs != MDR_UCX_HS_OPEN)
        return MADRAIL_ERR_NORESOURCE; /* the peer has not proved the key yet (ucx_ep.c) */

    op = calloc(1, sizeof(*op));
    if (op == NULL)
        return MADRAIL_ERR_NOMEM;
    op->rail = rail;
    op->ep = ep;
    op->comp = comp;
    op->status = MADRAIL_OK;
    op->local = local;
    op->len = len;
    op->raddr = raddr;
    op->lmemh = lmemh != NULL ? lmemh->ucp : NULL;
    op->key = ((uint64_t)h.gen << 32) | h.id;
    op->base = h.base;
    op->rlen = h.len;

    rk = mdr_hash_get(&ep->rkeys, op->key);
    if (rk != NULL && (!rail->check || mdr_region_covers(rk->base, rk->len, raddr, len))) {
        rk->refs++;
        op->rk = rk;
    } else {
        op->ucp_rkey = malloc(h.ucp_len ? h.ucp_len : 1);
        if (op->ucp_rkey == NULL) {
            free(op);
            return MADRAIL_ERR_NOMEM;
        }
        memcpy(op->ucp_rkey, (const uint8_t *)rkey + sizeof(h), h.ucp_len);
        op->ucp_rkey_len = h.ucp_len;
        if (rail->check) {
            /* ask the target first; the put waits for its answer */
            st = mdr_ucx_op_check(op);
            if (st != MADRAIL_OK) {
                mdr_ucx_op_free(op);
                return st;
            }
            mdr_list_push_tail(&ep->ops, &op->link);
            ep->backlog += len;
            ep->nops++;
            return MADRAIL_INPROGRESS;
        }
        st = mdr_ucx_op_rkey(op, h.base, h.len);
        if (st != MADRAIL_OK) {
            mdr_ucx_op_free(op);
            return st;
        }
    }
    op->state = MDR_UCX_OP_FLIGHT;
    st = mdr_ucx_op_issue(op);
    if (st == MADRAIL_INPROGRESS) {
        mdr_list_push_tail(&ep->ops, &op->link);
        ep->backlog += len;
        ep->nops++;
        return st;
    }
    /* done at once, refused, or failed: nothing left in UCX's hands */
    if (st == MADRAIL_OK && !rail->order_flush && len > 0)
        mdr_ucx_ep_want_sync(ep);
    mdr_ucx_rkey_unref(op->rk);
    op->rk = NULL;
    mdr_ucx_op_free(op);
    if (st == MADRAIL_ERR_RAIL_DOWN)
        mdr_ucx_ep_fail(ep, st, "put failed");
    return st;
}

/* An approved op: issue it now (from progress; completions are queued). */
static void mdr_ucx_op_go(mdr_ucx_op_t *op)
{
    madrail_status_t st = mdr_ucx_op_issue(op);

    if (st == MADRAIL_INPROGRESS) {
        op->state = MDR_UCX_OP_FLIGHT;
        return;
    }
    if (st == MADRAIL_ERR_NORESOURCE) {
        op->state = MDR_UCX_OP_RETRY;
        mdr_list_del(&op->link);
        mdr_list_push_tail(&op->rail->retryq, &op->link);
        return;
    }
    op->status = st;
    if (st == MADRAIL_ERR_RAIL_DOWN)
        mdr_ucx_ep_fail(op->ep, st, "put failed");
    mdr_ucx_op_finish(op);
}

int mdr_ucx_retry_ops(mdr_rail_t *rail)
{
    mdr_list_t todo, *l;
    int n = 0;

    mdr_list_init(&todo);
    while ((l = mdr_list_pop_head(&rail->retryq)) != NULL)
        mdr_list_push_tail(&todo, l);
    while ((l = mdr_list_pop_head(&todo)) != NULL) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        mdr_list_push_tail(&op->ep->ops, &op->link);
        mdr_ucx_op_go(op);
        n++;
    }
    return n;
}

void mdr_ucx_ep_drop_ops(mdr_ep_t *ep, int report)
{
    mdr_rail_t *rail = ep->rail;
    mdr_list_t *l, *tmp;

    /* retried and finished ops sit on the rail's queues: bring this ep's back */
    mdr_list_for_each_safe(l, tmp, &rail->retryq) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        if (op->ep == ep) {
            mdr_list_del(&op->link);
            mdr_list_push_tail(&ep->ops, &op->link);
        }
    }
    mdr_list_for_each_safe(l, tmp, &rail->doneq) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        if (op->ep == ep) {
            mdr_list_del(&op->link);
            mdr_list_push_tail(&ep->ops, &op->link);
        }
    }
    while ((l = mdr_list_pop_head(&ep->ops)) != NULL) {
        mdr_ucx_op_t *op = mdr_container_of(l, mdr_ucx_op_t, link);
        mdr_completion_t *comp = op->comp;

        if (op->state != MDR_UCX_OP_DONE) {
            ep->backlog -= op->len;
            ep->lost += op->len;
        }
        op->ep = NULL;
        op->comp = NULL;
        op->in_doneq = 0;
        if (op->ucx_pending > 0) {
            mdr_list_push_tail(&rail->orphan_ops, &op->link);
        } else {
            if (op->rk != NULL)
                mdr_ucx_rkey_unref(op->rk);
            op->rk = NULL;
            mdr_ucx_op_free(op);
        }
        if (report && comp != NULL)
            comp->cb(comp, MADRAIL_ERR_RAIL_DOWN);
    }
    ep->nops = 0;
}

/* ---------------- key checks ---------------- */

void mdr_ucx_key_check(mdr_ep_t *ep, const mdr_ucx_rx_t *rx)
{
    mdr_rail_t *rail = ep->rail;
    mdr_ucx_check_t c;
    mdr_ucx_answer_t a;
    mdr_region_t *reg;
    mdr_memh_t *mh = NULL;
    const char *why = NULL;
    char text[MDR_UCX_REASON];
    unsigned i;

    if (rx->len < sizeof(c)) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "KEY_CHECK of %zu bytes", rx->len);
        return;
    }
    memcpy(&c, rx->data, sizeof(c));
    /* the checks of a software put (mdr_region_check_put), and one more
     * between them: the key's own idea of the region must be right, since
     * the sender's later puts are range-checked against it alone */
    reg = mdr_region_lookup(&rail->regions, ((uint64_t)c.gen << 32) | c.id, &why);
    if (reg != NULL) {
        mh = mdr_container_of(reg, mdr_memh_t, reg);
        if (c.base != reg->base || c.len != reg->len)
            why = "the key's region does not match the registration";
        else if (!mdr_region_covers(reg->base, reg->len, c.raddr, c.count))
            why = mdr_region_why_range;
    }
    memset(&a, 0, sizeof(a));
    a.check_id = c.check_id;
    a.id = c.id;
    a.gen = c.gen;
    if (why == NULL) {
        for (i = 0; i < mh->nexported && mh->exported[i] != ep->base.uuid; i++)
            ;
        if (i == mh->nexported) {
            if (mh->nexported == mh->exported_cap) {
                unsigned cap = mh->exported_cap ? 2 * mh->exported_cap : 4;
                uint64_t *n = realloc(mh->exported, cap * sizeof(*n));
                if (n == NULL) {
                    why = "out of memory";
                    goto bad;
                }
                mh->exported = n;
                mh->exported_cap = cap;
            }
            mh->exported[mh->nexported++] = ep->base.uuid;
        }
        (void)mdr_ucx_send(ep, MDR_UCX_M_KEY_OK, 0, &a, sizeof(a), NULL, 0);
        return;
    }
bad:
    /* a software put that fails its check: answer, then close as a bad put would */
    snprintf(text, sizeof(text), "put of %llu bytes at %#llx with key %u/%u: %s",
             (unsigned long long)c.count, (unsigned long long)c.raddr, c.id, c.gen, why);
    (void)mdr_ucx_send(ep, MDR_UCX_M_KEY_BAD, 0, &a, sizeof(a), text, strlen(text));
    if (ep->state == MDR_UCX_EP_OPEN) {
        static const char bye[] = "bad put";
        (void)mdr_ucx_send(ep, MDR_UCX_M_BYE, 0, bye, sizeof(bye) - 1, NULL, 0);
    }
    mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "%s", text);
}

void mdr_ucx_key_answer(mdr_ep_t *ep, const mdr_ucx_rx_t *rx, int ok)
{
    mdr_ucx_answer_t a;
    mdr_ucx_op_t *op = NULL;
    mdr_list_t *l;
    madrail_status_t st;

    if (rx->len < sizeof(a)) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "key answer of %zu bytes", rx->len);
        return;
    }
    memcpy(&a, rx->data, sizeof(a));
    mdr_list_for_each(l, &ep->ops) {
        mdr_ucx_op_t *o = mdr_container_of(l, mdr_ucx_op_t, link);
        if (o->state == MDR_UCX_OP_CHECK && o->check_id == a.check_id) {
            op = o;
            break;
        }
    }
    if (op == NULL) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "answer to an unknown key check %llu",
                        (unsigned long long)a.check_id);
        return;
    }
    if (!ok) {
        mdr_warn("rail %s peer %016llx: the target refused a put: %.*s", ep->rail->name,
                 (unsigned long long)ep->base.uuid,
                 (int)(rx->len - sizeof(a) < 150 ? rx->len - sizeof(a) : 150),
                 (const char *)rx->data + sizeof(a));
        op->status = MADRAIL_ERR_RAIL_PROTO;
        mdr_ucx_op_finish(op);
        return;
    }
    st = mdr_ucx_op_rkey(op, op->base, op->rlen);
    if (st != MADRAIL_OK) {
        op->status = st;
        mdr_ucx_op_finish(op);
        return;
    }
    mdr_ucx_op_go(op);
}

void mdr_ucx_key_revoke(mdr_ep_t *ep, const mdr_ucx_rx_t *rx)
{
    mdr_ucx_revoke_t rv;
    mdr_ucx_rkey_t *rk;

    if (rx->len < sizeof(rv)) {
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "KEY_REVOKE of %zu bytes", rx->len);
        return;
    }
    memcpy(&rv, rx->data, sizeof(rv));
    rk = mdr_hash_del(&ep->rkeys, ((uint64_t)rv.gen << 32) | rv.id);
    if (rk != NULL) {
        mdr_list_del(&rk->link);
        mdr_ucx_rkey_kill(rk);
    }
}
