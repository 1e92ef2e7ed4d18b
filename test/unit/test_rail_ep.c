/*
 * The drivers' base endpoint (rails/common/rail_ep.c) on its own, with a
 * fake driver around it: the order rules four drivers rely on (a failure
 * reported once, never for a destroyed ep, held while the hold hook says
 * so; an ep destroyed during progress freed only at the reap; the offer of
 * an accepted ep and its three outcomes), without a network.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/rail_ep.h"
#include "unit_check.h"

/* the fake driver's ep embeds the base, as the real ones do */
struct mdr_ep {
    mdr_rail_ep_t base;
    int hold;
    int afters;
};

static int nfreed, nfailed, naccepted;
static char last_reason[MDR_RAIL_EP_REASON];
static madrail_status_t last_status;
static mdr_ep_t *destroy_in_upcall; /* the upcalls destroy this ep */
static void *accept_answer;

static void fake_free(mdr_rail_ep_t *b)
{
    nfreed++;
    free(mdr_container_of(b, mdr_ep_t, base));
}

static void up_ctrl(void *c, const void *d, size_t l)
{
    (void)c; (void)d; (void)l;
}

static void up_failed(void *cookie, madrail_status_t st, const char *reason)
{
    (void)cookie;
    nfailed++;
    last_status = st;
    snprintf(last_reason, sizeof(last_reason), "%s", reason);
    if (destroy_in_upcall != NULL)
        mdr_rail_ep_retire(&destroy_in_upcall->base);
}

static void *up_accepted(void *rc, uint64_t uuid, mdr_ep_t *ep)
{
    (void)rc; (void)uuid;
    naccepted++;
    if (destroy_in_upcall == ep)
        mdr_rail_ep_retire(&ep->base);
    return accept_answer;
}

static const mdr_rail_upcalls_t ups = {up_ctrl, up_accepted, up_failed};

static int hold(mdr_rail_ep_t *b)
{
    return mdr_container_of(b, mdr_ep_t, base)->hold;
}

static int after(mdr_rail_ep_t *b)
{
    mdr_container_of(b, mdr_ep_t, base)->afters++;
    return 10;
}

static mdr_ep_t *new_ep(mdr_rail_base_t *rb, uint64_t uuid, void *cookie, int map)
{
    mdr_ep_t *ep = calloc(1, sizeof(*ep));
    if (ep != NULL && mdr_rail_ep_init(rb, &ep->base, uuid, cookie, map) != MADRAIL_OK) {
        free(ep);
        ep = NULL;
    }
    return ep;
}

int main(void)
{
    mdr_rail_params_t params;
    mdr_rail_base_t rb;
    mdr_ep_t *a, *b, *c;
    int cookie, n;

    memset(&params, 0, sizeof(params));
    params.upcalls = &ups;
    check(mdr_rail_base_init(&rb, "fake:0", &params, fake_free) == MADRAIL_OK, "base init");

    a = new_ep(&rb, 7, &cookie, 1);
    b = new_ep(&rb, 7, &cookie, 1);
    check(a && b && a->base.mapped && !b->base.mapped &&
              mdr_rail_ep_lookup(&rb, 7) == &a->base,
          "first ep of a uuid is the mapped one, a second stays unmapped");

    /* failure: unmapped at once, reported once, from report only */
    mdr_rail_ep_fail_setf(&a->base, MADRAIL_ERR_RAIL_DOWN, "lost %d", 1);
    mdr_rail_ep_fail_setf(&a->base, MADRAIL_ERR_RAIL_DOWN, "lost %d", 2);
    check(!a->base.mapped && mdr_rail_ep_lookup(&rb, 7) == NULL && nfailed == 0,
          "a failed ep leaves the table; nothing reported before progress");
    mdr_rail_ep_map(&b->base);
    check(b->base.mapped && mdr_rail_ep_lookup(&rb, 7) == &b->base,
          "the second ep takes the uuid once the first failed");
    n = mdr_rail_base_report(&rb, hold, after);
    check(n == 11 && nfailed == 1 && a->afters == 1 && last_status == MADRAIL_ERR_RAIL_DOWN &&
              strcmp(last_reason, "lost 2") == 0,
          "reported once, with the last reason, then the after hook (n %d, failed %d)", n,
          nfailed);
    check(mdr_rail_base_report(&rb, hold, after) == 0 && nfailed == 1, "not reported twice");

    /* destroyed before the report: no upcall; freed now outside progress */
    mdr_rail_ep_fail_setf(&b->base, MADRAIL_ERR_RAIL_PROTO, "bad frame");
    mdr_rail_ep_retire(&b->base);
    check(nfreed == 1 && mdr_rail_base_report(&rb, hold, after) == 0 && nfailed == 1,
          "an ep destroyed before its report: freed at once (outside progress), no upcall");

    /* held while the hold hook says so */
    c = new_ep(&rb, 9, &cookie, 1);
    c->hold = 1;
    mdr_rail_ep_fail_setf(&c->base, MADRAIL_ERR_RAIL_DOWN, "held");
    check(mdr_rail_base_report(&rb, hold, after) == 0 && c->base.fail_queued,
          "a held failure stays queued");
    c->hold = 0;
    destroy_in_upcall = c; /* the core destroys it inside ep_failed, during progress */
    rb.in_progress = 1;
    n = mdr_rail_base_report(&rb, hold, after);
    check(n == 1 && nfailed == 2 && nfreed == 1,
          "released: reported; destroyed inside the upcall: no after hook, not freed yet");
    mdr_rail_base_reap(&rb);
    rb.in_progress = 0;
    destroy_in_upcall = NULL;
    check(nfreed == 2, "the zombie is freed at the reap");

    /* the offer of an accepted ep */
    accept_answer = &cookie;
    c = new_ep(&rb, 11, NULL, 1);
    check(mdr_rail_ep_offer(&c->base, c) == MDR_RAIL_OFFER_ACCEPTED && c->base.cookie == &cookie,
          "offer accepted: the core's cookie is kept");
    accept_answer = NULL;
    b = new_ep(&rb, 12, NULL, 1);
    check(mdr_rail_ep_offer(&b->base, b) == MDR_RAIL_OFFER_REFUSED && b->base.cookie == NULL,
          "offer refused");
    mdr_rail_ep_retire(&b->base);
    rb.in_progress = 1;
    b = new_ep(&rb, 13, NULL, 1);
    destroy_in_upcall = b;
    check(mdr_rail_ep_offer(&b->base, b) == MDR_RAIL_OFFER_GONE && naccepted == 3,
          "offer: destroyed inside ep_accepted is GONE");
    destroy_in_upcall = NULL;
    rb.in_progress = 0;

    /* the last ep looked up answers first: never once it left the table */
    {
        mdr_ep_t *x = new_ep(&rb, 21, &cookie, 1), *y = new_ep(&rb, 22, &cookie, 1), *x2;
        int ok = x && y && mdr_rail_ep_lookup(&rb, 21) == &x->base &&
                 mdr_rail_ep_lookup(&rb, 22) == &y->base &&
                 mdr_rail_ep_lookup(&rb, 21) == &x->base &&
                 mdr_rail_ep_lookup(&rb, 21) == &x->base && rb.hot == &x->base;
        check(ok, "lookups alternate between two uuids and repeat (hot %p)", (void *)rb.hot);
        mdr_rail_ep_fail_setf(&x->base, MADRAIL_ERR_RAIL_DOWN, "gone");
        check(rb.hot == NULL && mdr_rail_ep_lookup(&rb, 21) == NULL,
              "a failed ep that was the last looked up is not found any more");
        x2 = new_ep(&rb, 21, &cookie, 1);
        check(x2 && mdr_rail_ep_lookup(&rb, 21) == &x2->base && rb.hot == &x2->base,
              "its successor is");
        mdr_rail_ep_retire(&x2->base);
        check(rb.hot == NULL && mdr_rail_ep_lookup(&rb, 21) == NULL &&
                  mdr_rail_ep_lookup(&rb, 22) == &y->base,
              "a retired ep is not found either");
        rb.in_progress = 1;
        n = mdr_rail_base_report(&rb, hold, after); /* x's failure */
        rb.in_progress = 0;
        mdr_rail_ep_retire(&x->base);
        mdr_rail_ep_retire(&y->base);
        check(rb.hot == NULL && mdr_rail_ep_lookup(&rb, 22) == NULL, "nor the last one");
    }

    mdr_rail_ep_retire(&a->base);
    mdr_rail_ep_retire(&c->base);
    mdr_rail_base_cleanup(&rb); /* frees the zombie of the GONE offer */
    check(nfreed == 9, "every ep freed once (%d)", nfreed);

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
