/*
 * Requests and their ids.  A peer refers to one of our requests by a 64-bit
 * id (generation << 32 | table index) rather than by pointer, so a stale or
 * forged id from the wire is detected by a table lookup, never followed.
 * Completion either calls the user's callback (and frees the request) or
 * waits for test/wait to collect it.
 */
#include "mdr_config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define MDR_REQ_CACHE_MAX 1024 /* released requests kept for reuse */
#define MDR_WAIT_SPINS 64      /* idle polls in madrail_wait before sched_yield */

static int mdr_reqtab_grow(mdr_ctx_t *ctx)
{
    uint32_t cap = ctx->reqtab_cap ? ctx->reqtab_cap * 2 : 256, i;
    mdr_req_t **tab = realloc(ctx->reqtab, cap * sizeof(*tab));
    uint32_t *gen, *fr;
    if (!tab)
        return -1;
    ctx->reqtab = tab;
    gen = realloc(ctx->reqgen, cap * sizeof(*gen));
    if (!gen)
        return -1;
    ctx->reqgen = gen;
    fr = realloc(ctx->reqfree, cap * sizeof(*fr));
    if (!fr)
        return -1;
    ctx->reqfree = fr;
    for (i = ctx->reqtab_cap; i < cap; i++) {
        tab[i] = NULL;
        gen[i] = 1;
    }
    /* push new indices so that lower ones are popped first */
    for (i = cap; i > ctx->reqtab_cap; i--)
        fr[ctx->nreqfree++] = i - 1;
    ctx->reqtab_cap = cap;
    return 0;
}

mdr_req_t *mdr_req_alloc(mdr_ctx_t *ctx, int type)
{
    mdr_req_t *req;
    uint32_t idx;

    if (ctx->nreqfree == 0 && mdr_reqtab_grow(ctx) != 0)
        return NULL;
    if (ctx->req_cache) {
        req = ctx->req_cache;
        ctx->req_cache = *(mdr_req_t **)req;
        ctx->nreq_cache--;
        memset(req, 0, sizeof(*req));
    } else {
        req = calloc(1, sizeof(*req));
        if (!req)
            return NULL;
    }
    idx = ctx->reqfree[--ctx->nreqfree];
    ctx->reqtab[idx] = req;
    req->id = ((uint64_t)ctx->reqgen[idx] << 32) | idx;
    req->ctx = ctx;
    req->type = type;
    mdr_list_init(&req->link);
    if (type == MDR_REQ_SEND)
        ctx->active_sends++;
    return req;
}

mdr_req_t *mdr_req_lookup(mdr_ctx_t *ctx, uint64_t id)
{
    uint32_t idx = (uint32_t)id;
    if (idx >= ctx->reqtab_cap || !ctx->reqtab[idx] || ctx->reqtab[idx]->id != id)
        return NULL;
    return ctx->reqtab[idx];
}

void mdr_req_release(mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    uint32_t idx = (uint32_t)req->id;
    ctx->reqtab[idx] = NULL;
    ctx->reqgen[idx]++;
    if (ctx->reqgen[idx] == 0)
        ctx->reqgen[idx] = 1;
    ctx->reqfree[ctx->nreqfree++] = idx;
    mdr_rfs_release(req); /* a request released without completing (isend error) */
    free(req->cts);
    free(req->puts);
    if (ctx->nreq_cache < MDR_REQ_CACHE_MAX) {
        *(mdr_req_t **)req = ctx->req_cache;
        ctx->req_cache = req;
        ctx->nreq_cache++;
    } else {
        free(req);
    }
}

void mdr_req_cache_cleanup(mdr_ctx_t *ctx)
{
    while (ctx->req_cache) {
        mdr_req_t *req = ctx->req_cache;
        ctx->req_cache = *(mdr_req_t **)req;
        free(req);
    }
    ctx->nreq_cache = 0;
}

void mdr_req_complete(mdr_req_t *req, madrail_status_t status)
{
    if (req->complete)
        return;
    req->complete = 1;
    req->info.status = status;
    /* Registrations go back to the cache as soon as the transfer is over,
     * whatever its outcome: a send's local registrations (taken for its
     * puts), a receive's remote-write ones on paths that fail it without
     * mdr_recv_finish.  Every caller completes a request only once no put
     * of it is in flight.  Held past this point they would stay
     * referenced, hence never evicted, until the user collects the
     * request. */
    mdr_rfs_release(req);
    if (req->type == MDR_REQ_SEND) {
        req->ctx->active_sends--;
        if (status == MADRAIL_OK || status == MADRAIL_ERR_TRUNCATE)
            req->info.length = req->len;
    }
    if (req->cb) {
        req->cb(req, &req->info, req->cb_arg);
        mdr_req_release(req);
    } else if (req->freed_by_user) {
        mdr_req_release(req);
    }
}

/* A completed send may sit in a driver's coalescing buffer: push it out
 * before the application goes on (it may block elsewhere next). */
static void mdr_req_flush(const mdr_req_t *req)
{
    mdr_ctx_t *ctx = req->ctx;
    int r;
    if (req->type != MDR_REQ_SEND)
        return;
    for (r = 0; r < ctx->nrails; r++)
        ctx->rails[r].ops->flush(ctx->rails[r].rail);
}

madrail_status_t madrail_test(madrail_request_t *req_p, int *flag_p, madrail_info_t *info_p)
{
    mdr_req_t *req;
    madrail_status_t st;

    if (!req_p || !*req_p || !flag_p)
        return MADRAIL_ERR_INVALID;
    req = *req_p;
    if (!req->complete) {
        madrail_progress(req->ctx);
        if (!req->complete) {
            *flag_p = 0;
            return MADRAIL_OK;
        }
    }
    st = req->info.status;
    if (info_p)
        *info_p = req->info;
    mdr_req_flush(req);
    mdr_req_release(req);
    *req_p = NULL;
    *flag_p = 1;
    return st;
}

madrail_status_t madrail_wait(madrail_request_t *req_p, madrail_info_t *info_p)
{
    mdr_req_t *req;
    madrail_status_t st;
    unsigned idle = 0;

    if (!req_p || !*req_p)
        return MADRAIL_ERR_INVALID;
    req = *req_p;
    while (!req->complete) {
        /* Spin, but give the core away after a run of idle polls: with more
         * processes than cores (tests, shared nodes) the peer we wait for
         * may need this core to make progress. */
        if (madrail_progress(req->ctx) == 0 && ++idle == MDR_WAIT_SPINS) {
            sched_yield();
            idle = 0;
        }
    }
    st = req->info.status;
    if (info_p)
        *info_p = req->info;
    mdr_req_flush(req);
    mdr_req_release(req);
    *req_p = NULL;
    return st;
}

madrail_status_t madrail_request_set_callback(madrail_request_t req, madrail_callback_t cb,
                                              void *arg)
{
    if (!req || !cb)
        return MADRAIL_ERR_INVALID;
    if (req->complete) {
        cb(req, &req->info, arg);
        mdr_req_release(req);
        return MADRAIL_OK;
    }
    req->cb = cb;
    req->cb_arg = arg;
    return MADRAIL_OK;
}

madrail_status_t madrail_send(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                              size_t len, uint64_t tag, unsigned flags)
{
    madrail_request_t req;
    madrail_status_t st = madrail_isend(ctx, peer, buf, len, tag, flags, &req);
    if (st != MADRAIL_OK)
        return st;
    return madrail_wait(&req, NULL);
}

madrail_status_t madrail_recv(madrail_context_t ctx, madrail_peer_t src, void *buf, size_t len,
                              uint64_t tag, uint64_t ignore, madrail_info_t *info_p)
{
    madrail_request_t req;
    madrail_status_t st = madrail_irecv(ctx, src, buf, len, tag, ignore, &req);
    if (st != MADRAIL_OK)
        return st;
    return madrail_wait(&req, info_p);
}
