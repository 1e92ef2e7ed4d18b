/*
 * The base endpoint of the connection drivers (rail_ep.h).  The order of
 * events is what matters here and was easy to get subtly different in
 * four copies: a failure is reported once, never for a destroyed ep, and
 * never from inside ctrl_send, put or ep_create; an ep destroyed inside an
 * upcall is freed only when progress returns; the report of one ep may
 * destroy or fail others (the upcalls may), so the queue is popped one ep
 * at a time and never walked with a saved next pointer.
 */
#include "mdr_config.h"

#include <stdio.h>

#include "rails/common/rail_ep.h"
#include "util/compiler.h"

madrail_status_t mdr_rail_base_init(mdr_rail_base_t *rb, const char *log_name,
                                    const mdr_rail_params_t *params,
                                    void (*ep_free)(mdr_rail_ep_t *ep))
{
    madrail_status_t st;

    rb->log_name = log_name;
    rb->upcalls = params->upcalls;
    rb->rail_cookie = params->rail_cookie;
    rb->ep_free = ep_free;
    rb->in_progress = 0;
    rb->hot = NULL;
    mdr_list_init(&rb->eps_all);
    mdr_list_init(&rb->zombie_eps);
    mdr_list_init(&rb->failq);
    st = mdr_hash_init(&rb->eps, 16);
    return st;
}

MDR_HOT void mdr_rail_base_reap(mdr_rail_base_t *rb)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rb->zombie_eps)) != NULL) {
        mdr_rail_ep_t *ep = mdr_container_of(l, mdr_rail_ep_t, link);
        if (rb->hot == ep) /* freed mapped (a driver's teardown): never named again */
            rb->hot = NULL;
        rb->ep_free(ep);
    }
}

void mdr_rail_base_cleanup(mdr_rail_base_t *rb)
{
    mdr_rail_base_reap(rb);
    rb->hot = NULL;
    mdr_hash_cleanup(&rb->eps);
}

madrail_status_t mdr_rail_ep_init(mdr_rail_base_t *rb, mdr_rail_ep_t *ep, uint64_t uuid,
                                  void *cookie, int map)
{
    ep->rb = rb;
    ep->uuid = uuid;
    ep->cookie = cookie;
    mdr_list_init(&ep->link); /* mdr_list_del is harmless even when nothing is filed */
    mdr_list_init(&ep->fail_link);
    if (map && mdr_hash_get(&rb->eps, uuid) == NULL) {
        madrail_status_t st = mdr_hash_put(&rb->eps, uuid, ep);
        if (st != MADRAIL_OK)
            return st;
        ep->mapped = 1;
    }
    mdr_list_push_tail(&rb->eps_all, &ep->link);
    return MADRAIL_OK;
}

mdr_rail_ep_t *mdr_rail_ep_lookup(mdr_rail_base_t *rb, uint64_t uuid)
{
    mdr_rail_ep_t *ep = rb->hot;

    if (ep != NULL && ep->uuid == uuid)
        return ep; /* mapped under uuid: unmapping clears hot */
    ep = mdr_hash_get(&rb->eps, uuid);
    if (ep != NULL)
        rb->hot = ep;
    return ep;
}

void mdr_rail_ep_map(mdr_rail_ep_t *ep)
{
    if (ep->mapped || mdr_hash_get(&ep->rb->eps, ep->uuid) != NULL)
        return;
    if (mdr_hash_put(&ep->rb->eps, ep->uuid, ep) == MADRAIL_OK)
        ep->mapped = 1;
}

void mdr_rail_ep_unmap(mdr_rail_ep_t *ep)
{
    if (!ep->mapped)
        return;
    if (mdr_hash_get(&ep->rb->eps, ep->uuid) == ep)
        mdr_hash_del(&ep->rb->eps, ep->uuid);
    if (ep->rb->hot == ep)
        ep->rb->hot = NULL;
    ep->mapped = 0;
}

void mdr_rail_ep_fail_set(mdr_rail_ep_t *ep, madrail_status_t status, const char *fmt,
                          va_list ap)
{
    ep->fail_status = status;
    vsnprintf(ep->fail_reason, sizeof(ep->fail_reason), fmt, ap);
    mdr_rail_ep_unmap(ep);
    if (!ep->fail_queued) {
        ep->fail_queued = 1;
        mdr_list_push_tail(&ep->rb->failq, &ep->fail_link);
    }
}

void mdr_rail_ep_fail_setf(mdr_rail_ep_t *ep, madrail_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    mdr_rail_ep_fail_set(ep, status, fmt, ap);
    va_end(ap);
}

void mdr_rail_ep_fail_unqueue(mdr_rail_ep_t *ep)
{
    if (ep->fail_queued) {
        mdr_list_del(&ep->fail_link);
        ep->fail_queued = 0;
    }
}

void mdr_rail_ep_retire(mdr_rail_ep_t *ep)
{
    mdr_rail_base_t *rb = ep->rb;

    ep->destroyed = 1;
    mdr_rail_ep_unmap(ep);
    mdr_rail_ep_fail_unqueue(ep);
    mdr_list_del(&ep->link);
    if (rb->in_progress)
        mdr_list_push_tail(&rb->zombie_eps, &ep->link);
    else
        rb->ep_free(ep);
}

MDR_HOT int mdr_rail_base_report(mdr_rail_base_t *rb, int (*hold)(mdr_rail_ep_t *ep),
                                 int (*after)(mdr_rail_ep_t *ep))
{
    mdr_list_t later, *l;
    int n = 0;

    mdr_list_init(&later);
    while ((l = mdr_list_pop_head(&rb->failq)) != NULL) {
        mdr_rail_ep_t *ep = mdr_container_of(l, mdr_rail_ep_t, fail_link);
        if (hold != NULL && hold(ep)) {
            mdr_list_push_tail(&later, &ep->fail_link);
            continue;
        }
        ep->fail_queued = 0;
        if (ep->destroyed)
            continue;
        n++;
        if (ep->cookie != NULL)
            rb->upcalls->ep_failed(ep->cookie, ep->fail_status, ep->fail_reason);
        if (!ep->destroyed && after != NULL)
            n += after(ep);
    }
    while ((l = mdr_list_pop_head(&later)) != NULL)
        mdr_list_push_tail(&rb->failq, l);
    return n;
}

mdr_rail_offer_t mdr_rail_ep_offer(mdr_rail_ep_t *ep, mdr_ep_t *drv_ep)
{
    mdr_rail_base_t *rb = ep->rb;
    void *cookie = rb->upcalls->ep_accepted(rb->rail_cookie, ep->uuid, drv_ep);

    if (ep->destroyed)
        return MDR_RAIL_OFFER_GONE;
    if (cookie == NULL)
        return MDR_RAIL_OFFER_REFUSED;
    ep->cookie = cookie;
    return MDR_RAIL_OFFER_ACCEPTED;
}
