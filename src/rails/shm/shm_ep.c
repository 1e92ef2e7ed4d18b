/*
 * Endpoints of the shm driver: the sending ring (claimed in the peer's
 * segment on first traffic), the receiving ring (claimed by the peer in
 * ours, attached when progress discovers it), and the two put paths.
 *
 * The message path has no lock and no system call: ctrl_send reserves a
 * record at the producer's private tail, copies the iovecs and publishes
 * the new tail with a release store; the receiver's progress loads the tail
 * with acquire, hands each control message to the core in place and
 * publishes its head with release after each record.  A full ring is
 * MADRAIL_ERR_NORESOURCE: nothing is queued for control messages, the core
 * holds them (its credits keep this rare: a ring holds all its slots).
 *
 * Puts: with CMA, the writer checks the key against the mirror of the
 * peer's registrations in its segment and writes with process_vm_writev;
 * the data is in place when put() returns MADRAIL_OK, so any control
 * message sent afterwards is seen after it.  Without CMA, the data goes
 * through the ring in fragments (target address + key + bytes), and the
 * put completes once its last fragment is in the ring: a control message
 * sent afterwards sits behind it in the same FIFO, and the receiver places
 * every fragment (after checking the key, as tcp_mem.c does) before it
 * reads that message.  Both keep rail.h's ordering promise.
 *
 * A failure (ours or the peer's, refusal, close, death) closes both rings
 * with flags the other side reads; our side reports ep_failed and the
 * pending put completions with an error from progress.
 */
#include "mdr_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rails/common/drv.h"
#include "rails/shm/shm.h"
#include "util/log.h"

/* ---------------- endpoints ---------------- */

madrail_status_t mdr_shm_ep_alloc(mdr_rail_t *rail, uint64_t uuid, void *cookie,
                                  mdr_ep_t **ep_p)
{
    madrail_status_t st;
    mdr_ep_t *ep;

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return MADRAIL_ERR_NOMEM;
    ep->rail = rail;
    ep->pidfd = -1;
    mdr_list_init(&ep->putq);
    mdr_list_init(&ep->doneq);
    st = mdr_rail_ep_init(&rail->base, &ep->base, uuid, cookie, 1);
    if (st != MADRAIL_OK || !ep->base.mapped) {
        if (st == MADRAIL_OK) {
            mdr_list_del(&ep->base.link);
            st = MADRAIL_ERR_INVALID; /* the callers checked: cannot be */
        }
        free(ep);
        return st;
    }
    ep->in_all = 1;
    rail->neps++;
    *ep_p = ep;
    return MADRAIL_OK;
}

static void mdr_shm_free_puts(mdr_list_t *list)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(list)) != NULL)
        free(mdr_container_of(l, mdr_shm_put_t, link));
}

/* Stop using both rings: the other side reads the flags. */
static void mdr_shm_ep_close_rings(mdr_ep_t *ep, madrail_status_t status, const char *reason)
{
    mdr_rail_t *rail = ep->rail;
    uint32_t f = MDR_SHM_F_CLOSED;

    if (status != MADRAIL_OK && status != MADRAIL_ERR_RAIL_DOWN)
        f |= MDR_SHM_F_ERROR;
    if (ep->has_tx) {
        mdr_shm_ring_ctl_t *c = ep->tx.ctl;
        if (f & MDR_SHM_F_ERROR) {
            c->prod_status = status;
            snprintf(c->prod_reason, sizeof(c->prod_reason), "%s", reason);
        }
        atomic_fetch_or_explicit(&c->prod_flags, f, memory_order_release);
        ep->has_tx = 0;
    }
    if (ep->has_rx) {
        mdr_shm_ring_ctl_t *c = ep->rx.ctl;
        uint32_t i = ep->rx.index;
        if (f & MDR_SHM_F_ERROR) {
            c->cons_status = status;
            snprintf(c->cons_reason, sizeof(c->cons_reason), "%s", reason);
        }
        atomic_fetch_or_explicit(&c->cons_flags, f, memory_order_release);
        ep->has_rx = 0;
        rail->rx_eps[i] = NULL;
        if (atomic_load_explicit(&c->prod_flags, memory_order_acquire) & MDR_SHM_F_CLOSED) {
            rail->rx_state[i] = MDR_SHM_RX_ZOMBIE; /* released below */
            rail->nzombies++;
            mdr_shm_ring_release(rail, i);
        } else {
            rail->rx_state[i] = MDR_SHM_RX_ZOMBIE; /* until the producer lets go */
            rail->nzombies++;
        }
    }
}

void mdr_shm_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
{
    mdr_rail_t *rail = ep->rail;
    va_list ap;

    if (ep->failed || ep->base.destroyed)
        return;
    ep->failed = 1;
    va_start(ap, fmt);
    mdr_rail_ep_fail_set(&ep->base, status, fmt, ap);
    va_end(ap);
    mdr_debug("rail %s peer %016llx: failed: %s (%s)", rail->log_name,
              (unsigned long long)ep->base.uuid, ep->base.fail_reason, madrail_status_str(status));
    mdr_shm_ep_close_rings(ep, status, ep->base.fail_reason);
    mdr_shm_unwatch_peer(ep);
    /* queued puts now owe an error completion, reported after ep_failed */
    while (!mdr_list_empty(&ep->putq)) {
        mdr_shm_put_t *p = mdr_container_of(mdr_list_pop_head(&ep->putq), mdr_shm_put_t, link);
        p->status = MADRAIL_ERR_RAIL_DOWN;
        mdr_list_push_tail(&ep->doneq, &p->link);
    }
    ep->lost += ep->backlog;
    ep->backlog = 0;
}

void mdr_shm_ep_free(mdr_ep_t *ep)
{
    mdr_rail_ep_unmap(&ep->base);
    if (ep->in_all) {
        ep->in_all = 0;
        ep->rail->neps--;
    }
    mdr_list_del(&ep->base.link); /* eps_all or the zombies (or already off both) */
    mdr_rail_ep_fail_unqueue(&ep->base);
    mdr_shm_unwatch_peer(ep);
    mdr_shm_free_puts(&ep->putq);
    mdr_shm_free_puts(&ep->doneq);
    mdr_shm_pseg_put(ep->rail, ep->pseg);
    free(ep);
}

void mdr_shm_ep_free_base(mdr_rail_ep_t *base)
{
    mdr_shm_ep_free(mdr_container_of(base, mdr_ep_t, base));
}

void mdr_shm_ep_attach_rx(mdr_ep_t *ep, uint32_t index)
{
    mdr_rail_t *rail = ep->rail;
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, index);

    ep->rx.ctl = c;
    ep->rx.data = (uint8_t *)rail->seg_base + rail->lay.data_off + (uint64_t)index * rail->ring_bytes;
    ep->rx.cap = rail->ring_bytes;
    ep->rx.pos = atomic_load_explicit(&c->head, memory_order_relaxed);
    ep->rx.other = 0;
    ep->rx.index = index;
    ep->has_rx = 1;
    rail->rx_eps[index] = ep;
    rail->rx_state[index] = MDR_SHM_RX_ATTACHED;
    if (!(c->prod_caps & MDR_SHM_AF_CMA))
        ep->cma = 0;
    atomic_fetch_or_explicit(&c->cons_flags, MDR_SHM_F_ACCEPTED, memory_order_release);
}

madrail_status_t mdr_shm_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p)
{
    mdr_shm_pseg_t *ps = NULL;
    const char *why = NULL;
    char seg[MDR_SHM_NAME_MAX];
    madrail_status_t st;
    mdr_shm_addr_t a;
    mdr_ep_t *ep;

    if (rail == NULL || addr == NULL || ep_p == NULL)
        return MADRAIL_ERR_INVALID;
    if (len != sizeof(a)) {
        mdr_error("rail %s peer %016llx: address of %zu bytes (expected %zu)", rail->log_name,
                  (unsigned long long)remote_uuid, len, sizeof(a));
        return MADRAIL_ERR_INVALID;
    }
    memcpy(&a, addr, sizeof(a));
    if (a.mark != MDR_SHM_ADDR_MARK || a.version != MDR_SHM_VERSION || a.pid <= 0) {
        mdr_error("rail %s peer %016llx: not an shm address of this version", rail->log_name,
                  (unsigned long long)remote_uuid);
        return MADRAIL_ERR_INVALID;
    }
    if (remote_uuid == rail->uuid) {
        mdr_error("rail %s: ep_create toward our own uuid", rail->log_name);
        return MADRAIL_ERR_INVALID;
    }
    if (a.node != rail->node) {
        mdr_debug("rail %s peer %016llx: on another node (or another /dev/shm or pid "
                  "namespace): not reachable through shared memory",
                  rail->log_name, (unsigned long long)remote_uuid);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (mdr_rail_ep_lookup(&rail->base, remote_uuid) != NULL) {
        mdr_error("rail %s peer %016llx: ep_create while an endpoint to that peer exists",
                  rail->log_name, (unsigned long long)remote_uuid);
        return MADRAIL_ERR_INVALID;
    }
    mdr_shm_seg_name(seg, a.pidns, a.pid, a.start, a.tag);
    st = mdr_shm_pseg_get(rail, seg, a.tag, remote_uuid, &ps, &why);
    if (st != MADRAIL_OK) {
        mdr_debug("rail %s peer %016llx (pid %d): %s", rail->log_name,
                  (unsigned long long)remote_uuid, (int)a.pid, why);
        return st;
    }
    st = mdr_shm_ep_alloc(rail, remote_uuid, ep_cookie, &ep);
    if (st != MADRAIL_OK) {
        mdr_shm_pseg_put(rail, ps);
        return st;
    }
    ep->pseg = ps;
    ep->pid = a.pid;
    ep->start = a.start;
    ep->cma = rail->cma && (a.flags & MDR_SHM_AF_CMA);
    if (mdr_shm_watch_peer(ep) != 0) {
        mdr_debug("rail %s peer %016llx: process %d no longer exists", rail->log_name,
                  (unsigned long long)remote_uuid, (int)a.pid);
        mdr_shm_ep_free(ep);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    *ep_p = ep;
    return MADRAIL_OK;
}

void mdr_shm_ep_destroy(mdr_ep_t *ep)
{
    if (ep == NULL || ep->base.destroyed)
        return;
    ep->base.destroyed = 1; /* before closing the rings: no failure of its own */
    mdr_rail_ep_unmap(&ep->base);
    mdr_shm_ep_close_rings(ep, MADRAIL_ERR_RAIL_DOWN, "closed");
    mdr_shm_unwatch_peer(ep);
    mdr_shm_free_puts(&ep->putq); /* pending completions are dropped */
    mdr_shm_free_puts(&ep->doneq);
    ep->backlog = 0;
    if (ep->in_all) {
        ep->in_all = 0;
        ep->rail->neps--;
    }
    /* freed now, or at the end of progress, which may still hold a pointer to it */
    mdr_rail_ep_retire(&ep->base);
}

size_t mdr_shm_ep_backlog(mdr_ep_t *ep)
{
    return ep == NULL ? 0 : ep->backlog;
}

/* Only puts are ever held (a control message goes into the ring or is
 * refused): the bytes of queued puts, and once the ep failed what its put
 * queue held then.  The failure drops the queue at once, the core hears of
 * it only with the upcall, and until then must not take the drop for a
 * departure (rail.h; conformance failed-ep-keeps-unsent, shm with cma=0). */
size_t mdr_shm_ep_unsent(mdr_ep_t *ep)
{
    return ep == NULL ? 0 : ep->backlog + ep->lost;
}

int mdr_shm_ep_idle(mdr_ep_t *ep)
{
    return ep == NULL ||
           (mdr_list_empty(&ep->putq) && mdr_list_empty(&ep->doneq) && !ep->base.fail_queued);
}

/* ---------------- the sending ring ---------------- */

static uint64_t mdr_shm_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Claim our sending ring in the peer's segment (first traffic). */
static madrail_status_t mdr_shm_ensure_tx(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    mdr_shm_pseg_t *ps = ep->pseg;
    const mdr_shm_layout_t *lay;
    mdr_shm_seg_hdr_t *h;
    mdr_shm_ring_ctl_t *c = NULL;
    uint32_t n, i = 0, k, start;
    uint64_t w;

    if (ep->has_tx)
        return MADRAIL_OK;
    if (ep->failed || ep->base.destroyed || ps == NULL)
        return MADRAIL_ERR_RAIL_DOWN;
    h = ps->hdr;
    lay = &ps->lay;
    if (!atomic_load_explicit(&h->alive, memory_order_seq_cst)) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed its rail");
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (lay->ring_bytes < 4 * (MDR_SHM_PAD8(rail->slot_size) + MDR_SHM_REC_HDR) &&
        lay->ring_bytes < MDR_SHM_PAD8(rail->slot_size) + MDR_SHM_REC_HDR + MDR_SHM_PUT_EXT + 8) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN,
                        "the peer's rings (%llu bytes) cannot hold a %zu-byte message",
                        (unsigned long long)lay->ring_bytes, rail->slot_size);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    n = lay->nrings;
    start = (uint32_t)(mdr_shm_hash64(rail->uuid ^ rail->tag) % n);
    for (k = 0; k < n; k++) {
        i = (start + k) % n;
        c = mdr_shm_ring_ctl(ps->base, lay, i);
        w = atomic_load_explicit(&c->state, memory_order_relaxed);
        if (MDR_SHM_STATE(w) != MDR_SHM_RING_FREE)
            continue;
        if (atomic_compare_exchange_strong(&c->state, &w,
                                           MDR_SHM_MKSTATE(MDR_SHM_RING_CLAIMING, rail->pid)))
            break;
    }
    if (k == n) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN,
                        "no free ring in the peer's segment (all %u taken: raise "
                        "MADRAIL_SHM_MAX_PEERS)",
                        n);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    /* Allocate the ring's pages now: a full /dev/shm is an error, not a SIGBUS. */
    if (fallocate(ps->fd, 0, (off_t)(lay->data_off + (uint64_t)i * lay->ring_bytes),
                  (off_t)lay->ring_bytes) != 0 &&
        errno != EOPNOTSUPP) {
        int e = errno;
        atomic_store_explicit(&c->state, MDR_SHM_MKSTATE(MDR_SHM_RING_FREE, 0),
                              memory_order_release);
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "cannot allocate a %llu-byte ring in %s: %s",
                        (unsigned long long)lay->ring_bytes, MDR_SHM_DIR, strerror(e));
        return MADRAIL_ERR_RAIL_DOWN;
    }
    c->prod_uuid = rail->uuid;
    c->prod_start = rail->start;
    c->prod_tag = rail->tag;
    c->prod_pid = (int32_t)rail->pid;
    c->prod_caps = rail->cma ? MDR_SHM_AF_CMA : 0;
    snprintf(c->prod_seg, sizeof(c->prod_seg), "%s", rail->seg_name);
    memcpy(c->prod_key, rail->job_key, sizeof(c->prod_key));
    atomic_store_explicit(&c->tail, 0, memory_order_relaxed);
    atomic_store_explicit(&c->head, 0, memory_order_relaxed);
    atomic_store_explicit(&c->prod_flags, 0, memory_order_relaxed);
    atomic_store_explicit(&c->cons_flags, 0, memory_order_relaxed);
    c->prod_status = c->cons_status = 0;
    c->prod_reason[0] = c->cons_reason[0] = '\0';
    atomic_store_explicit(&c->state, MDR_SHM_MKSTATE(MDR_SHM_RING_OPEN, rail->pid),
                          memory_order_seq_cst);
    atomic_fetch_add_explicit(&h->claims, 1, memory_order_release);

    ep->tx.ctl = c;
    ep->tx.data = (uint8_t *)ps->base + lay->data_off + (uint64_t)i * lay->ring_bytes;
    ep->tx.cap = lay->ring_bytes;
    ep->tx.pos = 0;
    ep->tx.other = 0;
    ep->tx.index = i;
    ep->has_tx = 1;
    ep->frag = rail->frag;
    if (ep->frag > lay->ring_bytes / 4)
        ep->frag = (size_t)(lay->ring_bytes / 4);
    ep->frag &= ~(size_t)7;
    if (ep->frag < 8)
        ep->frag = 8;
    mdr_debug("rail %s peer %016llx: claimed ring %u in %s", rail->log_name,
              (unsigned long long)ep->base.uuid, i, ps->name);
    /* the owner may have closed between our check and the claim */
    if (!atomic_load_explicit(&h->alive, memory_order_seq_cst)) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed its rail");
        return MADRAIL_ERR_RAIL_DOWN;
    }
    return MADRAIL_OK;
}

/* Room for a record of len payload bytes: its address, or NULL if full. */
static uint8_t *mdr_shm_reserve(mdr_shm_ring_t *r, uint64_t len)
{
    uint64_t total = MDR_SHM_REC_HDR + MDR_SHM_PAD8(len);
    uint64_t off = r->pos % r->cap, waste = 0;
    mdr_shm_rec_t pad;

    if (r->cap - off < total)
        waste = r->cap - off;
    if (r->cap - (r->pos - r->other) < waste + total) {
        r->other = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
        if (r->pos - r->other > r->cap) /* nonsense from the consumer */
            r->other = r->pos;
        if (r->cap - (r->pos - r->other) < waste + total)
            return NULL;
    }
    if (waste > 0) {
        memset(&pad, 0, sizeof(pad));
        pad.len = (uint32_t)(waste - MDR_SHM_REC_HDR);
        pad.type = MDR_SHM_R_PAD;
        memcpy(r->data + off, &pad, sizeof(pad));
        r->pos += waste;
        off = 0;
    }
    return r->data + off;
}

/* Publish the record written at the reservation. */
static void mdr_shm_commit(mdr_shm_ring_t *r, uint64_t len)
{
    r->pos += MDR_SHM_REC_HDR + MDR_SHM_PAD8(len);
    atomic_store_explicit(&r->ctl->tail, r->pos, memory_order_release);
}

madrail_status_t mdr_shm_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt)
{
    mdr_shm_rec_t rec;
    madrail_status_t st;
    size_t total = 0, off;
    uint8_t *p;
    int i;

    if (ep == NULL || iovcnt < 0 || (iovcnt > 0 && iov == NULL))
        return MADRAIL_ERR_INVALID;
    st = mdr_drv_ctrl_len(iov, iovcnt, ep->rail->slot_size, ep->rail->log_name, &total);
    if (st != MADRAIL_OK)
        return st;
    if (ep->failed || ep->base.destroyed)
        return MADRAIL_ERR_RAIL_DOWN;
    st = mdr_shm_ensure_tx(ep);
    if (st != MADRAIL_OK)
        return MADRAIL_ERR_RAIL_DOWN;
    p = mdr_shm_reserve(&ep->tx, total);
    if (p == NULL)
        return MADRAIL_ERR_NORESOURCE;
    memset(&rec, 0, sizeof(rec));
    rec.len = (uint32_t)total;
    rec.type = MDR_SHM_R_CTRL;
    memcpy(p, &rec, sizeof(rec));
    for (i = 0, off = MDR_SHM_REC_HDR; i < iovcnt; i++) {
        if (iov[i].iov_len != 0)
            memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    mdr_shm_commit(&ep->tx, total);
    return MADRAIL_OK;
}

/* ---------------- puts ---------------- */

/* Copy fragments of p into the ring while there is room; 1 when all are in. */
static int mdr_shm_put_push(mdr_ep_t *ep, mdr_shm_put_t *p)
{
    mdr_shm_put_ext_t ext;
    mdr_shm_rec_t rec;
    size_t chunk;
    uint8_t *d;

    while (p->off < p->len) {
        chunk = p->len - p->off;
        if (chunk > ep->frag)
            chunk = ep->frag;
        d = mdr_shm_reserve(&ep->tx, MDR_SHM_PUT_EXT + chunk);
        if (d == NULL)
            return 0;
        memset(&rec, 0, sizeof(rec));
        rec.len = (uint32_t)(MDR_SHM_PUT_EXT + chunk);
        rec.type = MDR_SHM_R_PUT;
        ext.raddr = p->raddr + p->off;
        ext.key = p->key;
        ext.count = chunk;
        memcpy(d, &rec, sizeof(rec));
        memcpy(d + MDR_SHM_REC_HDR, &ext, sizeof(ext));
        memcpy(d + MDR_SHM_REC_HDR + MDR_SHM_PUT_EXT, p->src + p->off, chunk);
        mdr_shm_commit(&ep->tx, MDR_SHM_PUT_EXT + chunk);
        p->off += chunk;
    }
    return 1;
}

/* Write with CMA: 0, or an errno. */
static int mdr_shm_cma_write(mdr_ep_t *ep, const void *local, size_t len, uint64_t raddr)
{
#ifdef HAVE_PROCESS_VM_WRITEV
    size_t done = 0;
    ssize_t n;

    while (done < len) {
        struct iovec l = {(uint8_t *)local + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(raddr + done), len - done};
        n = process_vm_writev(ep->pid, &l, 1, &r, 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EFAULT;
        done += (size_t)n;
    }
    return 0;
#else
    (void)ep;
    (void)local;
    (void)len;
    (void)raddr;
    return ENOSYS;
#endif
}

madrail_status_t mdr_shm_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp)
{
    mdr_rail_t *rail;
    mdr_shm_put_t tmp, *p;
    mdr_shm_rkey_t k;
    const char *why = NULL;
    int e;

    if (ep == NULL || (local == NULL && len != 0) || comp == NULL || comp->cb == NULL)
        return MADRAIL_ERR_INVALID;
    rail = ep->rail;
    if (rkey == NULL || rkey_len != sizeof(k)) {
        mdr_error("rail %s: remote key of %zu bytes, expected %zu", rail->log_name, rkey_len,
                  sizeof(k));
        return MADRAIL_ERR_INVALID;
    }
    if (lmemh != NULL &&
        (lmemh->rail != rail ||
         !mdr_region_covers(lmemh->reg.base, lmemh->reg.len, (uintptr_t)local, len))) {
        mdr_error("rail %s: put source of %zu bytes is not covered by its registration",
                  rail->log_name, len);
        return MADRAIL_ERR_INVALID;
    }
    if (ep->failed || ep->base.destroyed)
        return MADRAIL_ERR_RAIL_DOWN;
    if (mdr_shm_ensure_tx(ep) != MADRAIL_OK)
        return MADRAIL_ERR_RAIL_DOWN;
    memcpy(&k, rkey, sizeof(k));
    if (k.tag != ep->pseg->tag) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                        "put with a remote key of another segment (tag %016llx)",
                        (unsigned long long)k.tag);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (len == 0)
        return MADRAIL_OK;

    if (ep->cma && (uint32_t)k.key < ep->pseg->lay.nregs) {
        if (mdr_shm_mem_check_remote(ep->pseg, k.key, raddr, len, rail->uuid, &why) != 0) {
            mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "put of %zu bytes rejected: %s", len,
                            why);
            return MADRAIL_ERR_RAIL_DOWN;
        }
        e = mdr_shm_cma_write(ep, local, len, raddr);
        if (e == 0) {
            rail->nput_cma++;
            return MADRAIL_OK;
        }
        if (e == EPERM || e == ENOSYS || e == EACCES) {
            mdr_debug("rail %s peer %016llx: process_vm_writev to pid %d: %s; copying puts "
                      "through the ring from now on",
                      rail->log_name, (unsigned long long)ep->base.uuid, (int)ep->pid,
                      strerror(e));
            ep->cma = 0;
        } else if (e == ESRCH) {
            mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "peer process %d exited", (int)ep->pid);
            return MADRAIL_ERR_RAIL_DOWN;
        } else {
            mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "put of %zu bytes: process_vm_writev: %s",
                            len, strerror(e));
            return MADRAIL_ERR_RAIL_DOWN;
        }
    }

    /* copy path */
    rail->nput_copy++;
    memset(&tmp, 0, sizeof(tmp));
    tmp.src = local;
    tmp.len = len;
    tmp.raddr = raddr;
    tmp.key = k.key;
    tmp.comp = comp;
    if (mdr_list_empty(&ep->putq) && mdr_shm_put_push(ep, &tmp))
        return MADRAIL_OK;
    p = malloc(sizeof(*p));
    if (p == NULL)
        return MADRAIL_ERR_NOMEM; /* what was written is rewritten by a retry */
    *p = tmp;
    mdr_list_push_tail(&ep->putq, &p->link);
    ep->backlog += p->len - p->off;
    return MADRAIL_INPROGRESS;
}

/* ---------------- progress of one endpoint ---------------- */

static madrail_status_t mdr_shm_peer_status(int32_t s)
{
    return s == MADRAIL_ERR_RAIL_PROTO ? MADRAIL_ERR_RAIL_PROTO : MADRAIL_ERR_RAIL_DOWN;
}

/* Deliver what the peer wrote; then look at its flags. */
static int mdr_shm_rx_drain(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    mdr_shm_ring_t *r = &ep->rx;
    mdr_shm_ring_ctl_t *c = r->ctl;
    mdr_shm_put_ext_t ext;
    mdr_shm_rec_t rec;
    uint64_t t, off, total;
    uint32_t pflags;
    const char *why;
    char reason[MDR_SHM_REASON_MAX];
    const mdr_region_t *reg;
    int n = 0;

    pflags = atomic_load_explicit(&c->prod_flags, memory_order_acquire);
    t = atomic_load_explicit(&c->tail, memory_order_acquire);
    if (t - r->pos > r->cap) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "ring %u: tail %llu beyond head %llu + %llu",
                        r->index, (unsigned long long)t, (unsigned long long)r->pos,
                        (unsigned long long)r->cap);
        return 1;
    }
    while (r->pos != t) {
        off = r->pos % r->cap;
        memcpy(&rec, r->data + off, sizeof(rec));
        total = MDR_SHM_REC_HDR + MDR_SHM_PAD8(rec.len);
        if (off + total > r->cap || total > t - r->pos ||
            (rec.type == MDR_SHM_R_PAD && off + total != r->cap)) {
            mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                            "ring %u: malformed record (type %u, %u bytes at offset %llu)",
                            r->index, rec.type, rec.len, (unsigned long long)off);
            return n + 1;
        }
        switch (rec.type) {
        case MDR_SHM_R_PAD:
            break;
        case MDR_SHM_R_CTRL:
            if (rec.len > rail->slot_size) {
                mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                                "control message of %u bytes, larger than a slot (%zu)", rec.len,
                                rail->slot_size);
                return n + 1;
            }
            rail->upcalls->ctrl_recv(ep->base.cookie, r->data + off + MDR_SHM_REC_HDR, rec.len);
            n++;
            if (ep->base.destroyed || ep->failed)
                return n; /* its rings were closed by the core's call */
            break;
        case MDR_SHM_R_PUT:
            if (rec.len < MDR_SHM_PUT_EXT) {
                mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "put record of %u bytes", rec.len);
                return n + 1;
            }
            memcpy(&ext, r->data + off + MDR_SHM_REC_HDR, sizeof(ext));
            why = "record length does not match its count";
            reg = ext.count == rec.len - MDR_SHM_PUT_EXT
                      ? mdr_region_check_put(&rail->regions, ext.key, ext.raddr, ext.count,
                                             ep->base.uuid, &why)
                      : NULL;
            if (reg == NULL) {
                mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                                "put of %llu bytes at %#llx rejected: %s",
                                (unsigned long long)ext.count, (unsigned long long)ext.raddr,
                                why);
                return n + 1;
            }
            memcpy((void *)(uintptr_t)ext.raddr,
                   r->data + off + MDR_SHM_REC_HDR + MDR_SHM_PUT_EXT, ext.count);
            n++;
            break;
        default:
            mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "ring %u: unknown record type %u",
                            r->index, rec.type);
            return n + 1;
        }
        r->pos += total;
        atomic_store_explicit(&c->head, r->pos, memory_order_release);
    }
    if (pflags & MDR_SHM_F_ERROR) {
        memcpy(reason, c->prod_reason, sizeof(reason));
        reason[sizeof(reason) - 1] = '\0';
        mdr_shm_ep_fail(ep, mdr_shm_peer_status(c->prod_status), "the peer failed: %s",
                        reason);
        return n + 1;
    }
    if (pflags & MDR_SHM_F_CLOSED) {
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection");
        return n + 1;
    }
    return n;
}

/* The consumer's verdict on our sending ring. */
static int mdr_shm_tx_check(mdr_ep_t *ep)
{
    mdr_shm_ring_ctl_t *c = ep->tx.ctl;
    uint32_t f = atomic_load_explicit(&c->cons_flags, memory_order_acquire);
    char reason[MDR_SHM_REASON_MAX];

    if (!(f & (MDR_SHM_F_REFUSED | MDR_SHM_F_CLOSED | MDR_SHM_F_ERROR)))
        return 0;
    memcpy(reason, c->cons_reason, sizeof(reason));
    reason[sizeof(reason) - 1] = '\0';
    if (f & MDR_SHM_F_REFUSED)
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer refused the connection%s%s",
                        reason[0] ? ": " : "", reason);
    else if (f & MDR_SHM_F_ERROR)
        mdr_shm_ep_fail(ep, mdr_shm_peer_status(c->cons_status), "the peer failed: %s", reason);
    else
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer closed the connection");
    return 1;
}

static int mdr_shm_report_done(mdr_ep_t *ep)
{
    int n = 0;

    while (!mdr_list_empty(&ep->doneq) && !ep->base.destroyed) {
        mdr_shm_put_t *p = mdr_container_of(mdr_list_pop_head(&ep->doneq), mdr_shm_put_t, link);
        mdr_completion_t *comp = p->comp;
        madrail_status_t st = p->status;
        free(p);
        comp->cb(comp, st);
        n++;
    }
    return n;
}

int mdr_shm_ep_progress(mdr_ep_t *ep)
{
    int n = 0;

    if (ep->failed || ep->base.destroyed)
        return 0;
    if (ep->has_rx) {
        n += mdr_shm_rx_drain(ep);
        if (ep->failed || ep->base.destroyed)
            return n;
    }
    if (ep->has_tx) {
        /* The consumer's flags share a cache line with its head, which it
         * moves at every message: read them now and then, not each time. */
        if (((++ep->ticks & 15) == 0 || !mdr_list_empty(&ep->putq)) && mdr_shm_tx_check(ep))
            return n + 1;
        while (!mdr_list_empty(&ep->putq)) {
            mdr_shm_put_t *p = mdr_container_of(ep->putq.next, mdr_shm_put_t, link);
            size_t before = p->off;
            int done = mdr_shm_put_push(ep, p);
            ep->backlog -= p->off - before;
            n += p->off != before;
            if (!done)
                break;
            mdr_list_del(&p->link);
            p->status = MADRAIL_OK;
            mdr_list_push_tail(&ep->doneq, &p->link);
        }
    }
    n += mdr_shm_report_done(ep);
    return n;
}

/* Report failures (from progress): ep_failed, then the error completions. */
/* inside ep_accepted (no cookie yet): report on the next pass */
static int mdr_shm_report_hold(mdr_rail_ep_t *base)
{
    return mdr_container_of(base, mdr_ep_t, base)->accepting;
}

static int mdr_shm_report_after(mdr_rail_ep_t *base)
{
    return mdr_shm_report_done(mdr_container_of(base, mdr_ep_t, base));
}

int mdr_shm_report(mdr_rail_t *rail)
{
    return mdr_rail_base_report(&rail->base, mdr_shm_report_hold, mdr_shm_report_after);
}
