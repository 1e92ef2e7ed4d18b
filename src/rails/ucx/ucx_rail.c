/*
 * The ucx driver: one rail = one ucp_context + one ucp_worker, limited to
 * one device and transport set by that context's own ucp_config (never the
 * environment: two ucx rails of one process must see different devices).
 * progress() is ucp_worker_progress plus the driver's own queues; nothing
 * runs in a thread of ours.
 *
 * Control messages are UCP active messages, sent with UCP_AM_SEND_FLAG_EAGER
 * so the handler sees the whole message; the handler only copies it into an
 * 8-byte aligned buffer and queues it.  Upcalls are made after
 * ucp_worker_progress returns, never from inside a UCX callback, so the core
 * may send, put or destroy eps from any upcall.  Active messages were chosen
 * over tagged messages because the receiver needs no posted buffers and no
 * unexpected-message handling: a tag receive would have to be re-posted per
 * message and its completion order is not its match order once rendezvous
 * is involved, while one AM handler sees the sender's messages in order.
 * Order is nevertheless not taken on trust: every message carries its
 * connection's sequence number and the receiver delivers in that order.
 *
 * Rail specs (docs/configuration.md): ucx:<device>[:<port>] or
 * ucx:<transports>:<device>[:<port>], ucx:shm; options lat=, bw=, check=,
 * order=, seg=.  The driver has no MADRAIL_UCX_* variable: everything that
 * differs between two ucx rails is in the spec.
 */
#include "mdr_config.h"

#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "rails/common/drv.h"
#include "rails/common/auth.h"
#include "rails/ucx/ucx.h"
#include "util/cfg.h"
#include "util/clock.h"
#include "util/compiler.h"
#include "util/log.h"

/* ---------------- rail spec ---------------- */

typedef struct mdr_ucx_spec {
    const char *spec;   /* for messages */
    char tls[64];       /* UCX_TLS value */
    char dev[64];       /* UCX_NET_DEVICES value, "" = leave UCX's default */
    int shm;            /* shared-memory transports only */
    int tcp;            /* tcp on a network interface */
    double latency_us;  /* lat= (0: built-in profile) */
    double bandwidth;   /* bw= MB/s (0: built-in profile) */
    int check;          /* check= */
    int order;          /* order=: -1 default, 0 lane, 1 flush */
    size_t seg_val;     /* seg=: UCX tcp / shared-memory segment size (0: UCX's default) */
    int seg_set;        /* seg= was given */
} mdr_ucx_spec_t;

/* UCX applies ucp_config_modify keys it does not know itself to the
 * transports; before 1.17 without the transport's prefix. */
#if UCP_API_VERSION >= UCP_VERSION(1, 17)
#define MDR_UCX_TCP_SEG_KEY "TCP_TX_SEG_SIZE"
#else
#define MDR_UCX_TCP_SEG_KEY "TX_SEG_SIZE"
#endif
/* posix and sysv read these from their "MM_" sub-table (UCX_MM_SEG_SIZE);
 * checked with UCX 1.13 only */
#define MDR_UCX_MM_SEG_KEY "MM_SEG_SIZE"
#define MDR_UCX_MM_GROW_KEY "MM_RX_BUFS_GROW"

#define MDR_UCX_SHM_TLS "posix,sysv,cma,self"

static madrail_status_t mdr_ucx_opt(const char *key, const char *val, void *arg)
{
    mdr_ucx_spec_t *s = arg;
    const char *why = NULL;

    if (strcmp(key, "lat") == 0 || strcmp(key, "bw") == 0) {
        double v;
        if (mdr_cfg_parse_value(MDR_CFG_DOUBLE, val, &v, &why) != MADRAIL_OK || !(v > 0)) {
            mdr_error("rail spec ucx:%s: %s=%s: %s (expected a positive number)", s->spec, key,
                      val, why ? why : "out of range");
            return MADRAIL_ERR_CONFIG;
        }
        if (key[0] == 'l')
            s->latency_us = v;
        else
            s->bandwidth = v;
        return MADRAIL_OK;
    }
    if (strcmp(key, "check") == 0) {
        int b;
        if (mdr_cfg_parse_value(MDR_CFG_BOOL, val, &b, &why) != MADRAIL_OK) {
            mdr_error("rail spec ucx:%s: check=%s: %s (expected 0 or 1)", s->spec, val,
                      why ? why : "not a boolean");
            return MADRAIL_ERR_CONFIG;
        }
        s->check = b;
        return MADRAIL_OK;
    }
    if (strcmp(key, "seg") == 0) {
        size_t v;
        if (mdr_cfg_parse_value(MDR_CFG_SIZE, val, &v, &why) != MADRAIL_OK ||
            (v != 0 && (v < 1024 || v > MDR_UCX_TCP_SEG))) {
            /* above UCX's receive segment (64 KiB) a peer could not take it */
            mdr_error("rail spec ucx:%s: seg=%s: %s (expected 1k..64k, or 0 for UCX's default)",
                      s->spec, val, why ? why : "out of range");
            return MADRAIL_ERR_CONFIG;
        }
        s->seg_val = v;
        s->seg_set = 1;
        return MADRAIL_OK;
    }
    if (strcmp(key, "order") == 0) {
        if (strcmp(val, "flush") == 0) {
            s->order = 1;
        } else if (strcmp(val, "lane") == 0) {
            s->order = 0;
        } else {
            mdr_error("rail spec ucx:%s: order=%s: expected flush or lane", s->spec, val);
            return MADRAIL_ERR_CONFIG;
        }
        return MADRAIL_OK;
    }
    mdr_error("rail spec ucx:%s: unknown option '%s' (known: lat, bw, check, order, seg)",
              s->spec, key);
    return MADRAIL_ERR_CONFIG;
}

static int mdr_ucx_all(const char *s, const char *allowed_extra, int digits_only)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++) {
        if (digits_only) {
            if (!isdigit((unsigned char)*s))
                return 0;
        } else if (!isalnum((unsigned char)*s) && strchr(allowed_extra, *s) == NULL) {
            return 0;
        }
    }
    return 1;
}

/* Is name one of UCX's shared-memory transports (or an alias of them)? */
static int mdr_ucx_is_shm_tl(const char *name)
{
    static const char *const shm[] = {"sm", "shm", "mm", "posix", "sysv", "cma",
                                      "xpmem", "knem", "self"};
    size_t i;
    for (i = 0; i < sizeof(shm) / sizeof(shm[0]); i++)
        if (strcmp(name, shm[i]) == 0)
            return 1;
    return 0;
}

/*
 * "<device>[:<port>]" or "<tls>:<device>[:<port>]" or "shm" or "<tls>:shm":
 *   lo, eth0           tcp on that interface
 *   tcp:lo             the same, transport named
 *   shm                posix, sysv, cma and self (this node only)
 *   mlx5_0:1           every transport UCX has for that device, no shared memory
 *   rc_x+ud_x:mlx5_0:1 those transports ('+' separates, ',' separates rails)
 */
static madrail_status_t mdr_ucx_spec_split(char *first, mdr_ucx_spec_t *s)
{
    char *part[3] = {NULL, NULL, NULL}, *next, *tok, *p;
    const char *tls = NULL, *dev = NULL, *port = NULL;
    int n = 0;

    /* split by hand: strtok would read "tcp::lo" or "lo:" as if the
     * empty part were not there */
    for (tok = first; first[0] != '\0' && tok != NULL; tok = next) {
        next = strchr(tok, ':');
        if (next != NULL)
            *next++ = '\0';
        if (n == 3) {
            mdr_error("rail spec ucx:%s: too many ':' (expected ucx:<device>[:<port>] or "
                      "ucx:<transports>:<device>[:<port>])",
                      s->spec);
            return MADRAIL_ERR_CONFIG;
        }
        if (tok[0] == '\0') {
            mdr_error("rail spec ucx:%s: empty part between ':' (expected ucx:<device>[:<port>] "
                      "or ucx:<transports>:<device>[:<port>])",
                      s->spec);
            return MADRAIL_ERR_CONFIG;
        }
        part[n++] = tok;
    }
    if (n == 0) {
        mdr_error("rail spec ucx:%s: no device (expected e.g. ucx:lo, ucx:tcp:lo, ucx:shm, "
                  "ucx:mlx5_0:1)",
                  s->spec);
        return MADRAIL_ERR_CONFIG;
    }
    if (n == 1) {
        dev = part[0];
    } else if (n == 2) {
        if (mdr_ucx_all(part[1], "", 1)) {
            dev = part[0];
            port = part[1];
        } else {
            tls = part[0];
            dev = part[1];
        }
    } else {
        tls = part[0];
        dev = part[1];
        port = part[2];
        if (!mdr_ucx_all(port, "", 1)) {
            mdr_error("rail spec ucx:%s: port '%s' is not a number", s->spec, port);
            return MADRAIL_ERR_CONFIG;
        }
    }
    if (!mdr_ucx_all(dev, "_-.", 0)) {
        mdr_error("rail spec ucx:%s: bad device name '%s'", s->spec, dev);
        return MADRAIL_ERR_CONFIG;
    }
    if (tls != NULL && !mdr_ucx_all(tls, "_+^", 0)) {
        mdr_error("rail spec ucx:%s: bad transport list '%s' (names joined with '+')", s->spec,
                  tls);
        return MADRAIL_ERR_CONFIG;
    }

    if (strcmp(dev, "shm") == 0) {
        if (port != NULL) {
            mdr_error("rail spec ucx:%s: shm takes no port", s->spec);
            return MADRAIL_ERR_CONFIG;
        }
        s->shm = 1;
        s->dev[0] = '\0';
        snprintf(s->tls, sizeof(s->tls), "%s", tls ? tls : MDR_UCX_SHM_TLS);
    } else {
        if (port != NULL)
            snprintf(s->dev, sizeof(s->dev), "%s:%s", dev, port);
        else
            snprintf(s->dev, sizeof(s->dev), "%s", dev);
        if (tls != NULL)
            snprintf(s->tls, sizeof(s->tls), "%s", tls);
        else if (port == NULL && if_nametoindex(dev) != 0)
            snprintf(s->tls, sizeof(s->tls), "tcp");
        else
            snprintf(s->tls, sizeof(s->tls), "^sm,self"); /* everything for that device */
        s->tcp = strcmp(s->tls, "tcp") == 0;
    }
    for (p = s->tls; *p; p++)
        if (*p == '+')
            *p = ',';
    if (tls != NULL && !s->shm) {
        /* a shared-memory transport in a device rail would let UCX bypass the device */
        char copy[64], *t, *sv = NULL;
        snprintf(copy, sizeof(copy), "%s", s->tls);
        for (t = strtok_r(copy, ",", &sv); t != NULL; t = strtok_r(NULL, ",", &sv))
            if (t[0] != '^' && mdr_ucx_is_shm_tl(t)) {
                mdr_error("rail spec ucx:%s: '%s' is a shared-memory transport; use "
                          "ucx:%s:shm for a shared-memory rail",
                          s->spec, t, tls);
                return MADRAIL_ERR_CONFIG;
            }
    }
    return MADRAIL_OK;
}

/* The whole spec (options and device part) as open() reads it, with its
 * defaults; nothing is opened.  MADRAIL_ERR_CONFIG (logged) when refused. */
static madrail_status_t mdr_ucx_spec_read(const char *spec, mdr_ucx_spec_t *s)
{
    madrail_status_t st;
    char *copy, *first = NULL;

    memset(s, 0, sizeof(*s));
    s->spec = spec;
    s->check = 1;
    s->order = -1;
    s->seg_val = MDR_UCX_TCP_SEG;
    st = mdr_drv_spec_split(spec, mdr_ucx_opt, s, &copy, &first);
    if (st == MADRAIL_OK) {
        st = mdr_ucx_spec_split(first, s);
        free(copy);
    }
    if (st != MADRAIL_OK)
        return st == MADRAIL_ERR_NOMEM ? st : MADRAIL_ERR_CONFIG;
    if (s->shm && !s->seg_set)
        s->seg_val = MDR_UCX_MM_SEG;
    else if (s->shm && s->seg_val > MDR_UCX_MM_SEG_MAX) {
        mdr_error("rail spec ucx:%s: seg=%zu: a shared-memory segment holds at most %d bytes "
                  "(UCX's posix/sysv message length is 16 bits)",
                  spec, s->seg_val, MDR_UCX_MM_SEG_MAX);
        return MADRAIL_ERR_CONFIG;
    }
    return MADRAIL_OK;
}

madrail_status_t mdr_ucx_spec_check(const char *spec)
{
    mdr_ucx_spec_t s;

    if (spec == NULL)
        return MADRAIL_ERR_INVALID;
    return mdr_ucx_spec_read(spec, &s);
}

/* ---------------- profile ---------------- */

static double mdr_ucx_read_double(const char *path)
{
    FILE *f = fopen(path, "r");
    double v = -1;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%lf", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

static void mdr_ucx_profile(mdr_rail_t *rail, const mdr_ucx_spec_t *s)
{
    char path[160], dev[64], *colon;
    double v;

    if (s->shm) {
        rail->latency_us = 1.0;
        rail->bandwidth_mbs = 8000.0;
    } else if (s->tcp) {
        unsigned long flags = 0;
        FILE *f;
        rail->latency_us = 20.0;
        snprintf(path, sizeof(path), "/sys/class/net/%s/flags", s->dev);
        f = fopen(path, "r");
        if (f != NULL) {
            if (fscanf(f, "%lx", &flags) != 1)
                flags = 0;
            fclose(f);
        }
        snprintf(path, sizeof(path), "/sys/class/net/%s/speed", s->dev);
        v = mdr_ucx_read_double(path);
        if (flags & IFF_LOOPBACK)
            rail->bandwidth_mbs = 5000.0;
        else
            rail->bandwidth_mbs = v > 0 ? v / 8.0 : 1000.0; /* Mbit/s -> MB/s */
    } else {
        /* an RDMA device "mlx5_0:1": the port's rate, "100 Gb/sec (4X EDR)" */
        rail->latency_us = 3.0;
        snprintf(dev, sizeof(dev), "%s", s->dev);
        colon = strchr(dev, ':');
        if (colon != NULL)
            *colon = '\0';
        snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%s/rate", dev,
                 colon != NULL ? colon + 1 : "1");
        v = mdr_ucx_read_double(path);
        rail->bandwidth_mbs = v > 0 ? v * 125.0 : 10000.0; /* Gbit/s -> MB/s */
    }
    if (s->latency_us > 0)
        rail->latency_us = s->latency_us;
    if (s->bandwidth > 0)
        rail->bandwidth_mbs = s->bandwidth;
}

/* ---------------- receiving ---------------- */

void mdr_ucx_rx_free(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    if (rx->cap == 0)
        free(rx);
    else
        mdr_pool_put(&rail->pool, rx, rx->cap);
}

static mdr_ucx_rx_t *mdr_ucx_rx_alloc(mdr_rail_t *rail, size_t len, int plain)
{
    size_t need = sizeof(mdr_ucx_rx_t) + len;
    mdr_ucx_rx_t *rx;

    if (plain || mdr_pool_class(need) < 0) {
        rx = malloc(need);
        if (rx != NULL)
            rx->cap = 0;
    } else {
        rx = mdr_pool_get(&rail->pool, need);
        if (rx != NULL)
            rx->cap = need;
    }
    if (rx != NULL) {
        rx->len = len;
        rx->ready = 1;
        rx->dead = 0;
    }
    return rx;
}

static void mdr_ucx_rndv_done(void *request, ucs_status_t status, size_t length,
                              void *user_data)
{
    mdr_ucx_rx_t *rx = user_data;

    (void)length;
    ucp_request_free(request);
    if (rx->dead) { /* the rail closed meanwhile */
        free(rx);
        return;
    }
    if (status != UCS_OK) {
        mdr_error("ucx: receiving a %zu-byte message from %016llx failed: %s", rx->len,
                  (unsigned long long)rx->hdr.uuid, ucs_status_string(status));
        rx->hdr.type = 0; /* the ep is failed when the message comes up */
    }
    rx->ready = 1;
}

/* An in-order control message of an open connection, called from the
 * handler inside progress(): up to the core at once, from UCX's buffer,
 * with no copy and no queue.  Only when nothing of the rail waits in rxq
 * (arrival order) and nothing of the ep in ooo, the message carries no
 * SYNC to answer.  UCX's buffer is 4-byte aligned here (UCX 1.13, shm):
 * such a message goes up from the rail's aligned scratch copy, which no
 * other upcall uses meanwhile (progress does not nest).  The upcall may send (UCX allows it from a handler) and
 * may close eps (mdr_ucx_uep_close defers the ucp_ep close until the
 * worker's progress returned); progress() itself, and flush(), cannot run
 * (in_progress).  Returns 1 when it went up.  This part is what both
 * forms share, once the message is known to be ep's next: the short form
 * comes here straight from its 4-byte header, without the full one. */
static inline int mdr_ucx_direct_ep(mdr_rail_t *rail, mdr_ep_t *ep, const void *data,
                                    size_t length)
{
    if (!rail->in_worker || length > rail->slot_size || !mdr_list_empty(&rail->rxq) ||
        ep->base.destroyed || ep->state != MDR_UCX_EP_OPEN || ep->rx_conn == 0 ||
        !mdr_list_empty(&ep->ooo) || ep->base.cookie == NULL)
        return 0;
    if (((uintptr_t)data & 7) != 0) {
        memcpy(rail->rx_scratch, data, length);
        data = rail->rx_scratch;
    }
    ep->rx_seq++;
    rail->direct_n++;
    rail->upcalls->ctrl_recv(ep->base.cookie, data, length); /* ep may be gone after */
    return 1;
}

static int mdr_ucx_direct(mdr_rail_t *rail, const mdr_ucx_hdr_t *hdr, const void *data,
                          size_t length)
{
    mdr_ep_t *ep;

    if (!rail->in_worker || hdr->type != MDR_UCX_M_CTRL || hdr->version != MDR_UCX_VERSION ||
        (hdr->flags & MDR_UCX_HF_SYNC))
        return 0;
    ep = mdr_ucx_ep_lookup(rail, hdr->uuid);
    if (ep == NULL || ep->rx_conn != hdr->conn || hdr->seq != ep->rx_seq)
        return 0;
    return mdr_ucx_direct_ep(rail, ep, data, length);
}

static ucs_status_t mdr_ucx_arrived(mdr_rail_t *rail, mdr_ucx_hdr_t hdr, void *data,
                                   size_t length, int rndv, mdr_ep_t *ep);

/* The active-message handler: an in-order control message goes up at once
 * (inside progress); anything else is copied out and queued.
 * (Not static: the fuzz target calls it as the worker does.) */
MDR_HOT ucs_status_t mdr_ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                                   size_t length, const ucp_am_recv_param_t *param)
{
    mdr_rail_t *rail = arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    mdr_ucx_hdr_t hdr;

    if (rail->closing_rail || header_length != sizeof(hdr)) {
        if (!rail->closing_rail)
            mdr_drv_refusal(&rail->refusals, rail->name, "?",
                            "active message with a %zu-byte header (want %zu)", header_length,
                            sizeof(hdr));
        if (rndv)
            ucp_am_data_release(rail->worker, data);
        return UCS_OK;
    }
    memcpy(&hdr, header, sizeof(hdr));
    return mdr_ucx_arrived(rail, hdr, data, length, rndv, NULL);
}

/* A message in the short form (ucx.h): the full header it stands for is
 * rebuilt from the slot's ep, then it is handled as any other. */
MDR_HOT ucs_status_t mdr_ucx_short_cb(void *arg, const void *header, size_t header_length, void *data,
                                      size_t length, const ucp_am_recv_param_t *param)
{
    mdr_ucx_short_slot_t *slot = arg;
    mdr_rail_t *rail = slot->rail;
    mdr_ep_t *ep = slot->ep;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    mdr_ucx_short_hdr_t sh;
    mdr_ucx_hdr_t hdr;

    if (rail->closing_rail || header_length != sizeof(sh) || rndv || ep == NULL ||
        ep->base.destroyed) {
        if (!rail->closing_rail && (header_length != sizeof(sh) || rndv))
            mdr_drv_refusal(&rail->refusals, rail->name, "?",
                            "short-form message with a %zu-byte header (want %zu)%s",
                            header_length, sizeof(sh), rndv ? " by rendezvous" : "");
        else if (!rail->closing_rail)
            mdr_debug("rail %s: short-form message for a free slot; dropped", rail->name);
        if (rndv)
            ucp_am_data_release(rail->worker, data);
        return UCS_OK;
    }
    memcpy(&sh, header, sizeof(sh));
    if (sh.conn != (uint16_t)ep->rx_conn) {
        mdr_debug("rail %s peer %016llx: short-form message of connection %#x, the slot "
                  "serves %u; dropped",
                  rail->name, (unsigned long long)ep->base.uuid, sh.conn, ep->rx_conn);
        return UCS_OK;
    }
    rail->short_rx++;
    /* the common case: ep's next message, up without the full header */
    if (sh.seq == (uint16_t)ep->rx_seq && mdr_ucx_direct_ep(rail, ep, data, length))
        return UCS_OK;
    hdr.type = MDR_UCX_M_CTRL;
    hdr.version = MDR_UCX_VERSION;
    hdr.flags = 0;
    hdr.conn = ep->rx_conn;
    hdr.seq = ep->rx_seq + (uint16_t)(sh.seq - (uint16_t)ep->rx_seq);
    hdr.aux = 0;
    hdr.uuid = ep->base.uuid;
    return mdr_ucx_arrived(rail, hdr, data, length, 0, ep);
}

/* At open: a handler for every short-form id.  All of them, not only
 * those given out: a SHORT_ID names an id of the peer's (a forged or
 * broken one any id in range), and UCX 1.13 crashes the receiver in
 * ucp_am_handler on an id without a handler (found by fuzz_ucx: V sent
 * to an id P never set).  With every id set, a wrong one reaches a slot
 * that drops it.  A failure leaves the ids set so far (their slots still
 * serve) and the rest to the full form. */
static void mdr_ucx_short_register(mdr_rail_t *rail)
{
    unsigned i;

    rail->short_slots = calloc(MDR_UCX_SHORT_SLOTS, sizeof(*rail->short_slots));
    if (rail->short_slots == NULL)
        return;
    for (i = 0; i < MDR_UCX_SHORT_SLOTS; i++) {
        mdr_ucx_short_slot_t *slot = &rail->short_slots[i];
        ucp_am_handler_param_t hp;
        ucs_status_t us;
        memset(&hp, 0, sizeof(hp));
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = MDR_UCX_AM_SHORT_BASE + i;
        hp.flags = UCP_AM_FLAG_WHOLE_MSG;
        hp.cb = mdr_ucx_short_cb;
        hp.arg = slot;
        slot->rail = rail;
        us = ucp_worker_set_am_recv_handler(rail->worker, &hp);
        if (us != UCS_OK) {
            mdr_warn("rail %s: ucp_worker_set_am_recv_handler(%u): %s; %u connections can "
                     "use the short form",
                     rail->name, hp.id, ucs_status_string(us), i);
            return;
        }
        slot->registered = 1;
    }
}

void mdr_ucx_short_assign(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    mdr_ucx_short_slot_t *slot = NULL;
    unsigned k, i = 0;

    if (ep->rx_short != 0 || ep->base.destroyed || ep->state != MDR_UCX_EP_OPEN)
        return;
    if (rail->short_slots == NULL)
        return; /* the full form (mdr_ucx_short_register failed) */
    /* the next free slot after the last one given: a freed slot is given
     * again as late as possible (a late message of its old connection then
     * finds it free, or serving a connection whose conn bits differ) */
    for (k = 0; k < MDR_UCX_SHORT_SLOTS; k++) {
        i = (rail->short_next + k) % MDR_UCX_SHORT_SLOTS;
        if (rail->short_slots[i].registered && rail->short_slots[i].ep == NULL) {
            slot = &rail->short_slots[i];
            break;
        }
    }
    if (slot == NULL)
        return; /* every slot taken: the full form */
    slot->ep = ep;
    ep->rx_short = i + 1;
    rail->short_next = (i + 1) % MDR_UCX_SHORT_SLOTS;
    ep->short_owed = 1;
    mdr_ucx_short_offer(ep); /* now if ep can send, else with its next control message */
}

void mdr_ucx_short_release(mdr_ep_t *ep)
{
    if (ep->rx_short != 0 && ep->rail->short_slots != NULL)
        ep->rail->short_slots[ep->rx_short - 1].ep = NULL;
    ep->rx_short = 0;
    ep->short_owed = 0;
}

/* Handle a message with its full header (given or rebuilt; ep: the one it
 * was rebuilt from, which already tried the direct way, else NULL). */
static ucs_status_t mdr_ucx_arrived(mdr_rail_t *rail, mdr_ucx_hdr_t hdr, void *data,
                                   size_t length, int rndv, mdr_ep_t *ep)
{
    size_t max_len = rail->slot_size + sizeof(mdr_ucx_hello_t) + MDR_UCX_ADDR_LEN + 256;
    mdr_ucx_rx_t *rx;

    if (!rndv && ep == NULL && mdr_ucx_direct(rail, &hdr, data, length))
        return UCS_OK;
    if (hdr.version != MDR_UCX_VERSION || length > max_len) {
        /* still queued, as an invalid message, so that the sender's ep fails in order */
        hdr.type = 0;
        length = 0;
        if (rndv)
            ucp_am_data_release(rail->worker, data);
        rndv = 0;
    }
    rx = mdr_ucx_rx_alloc(rail, length, rndv);
    if (rx == NULL) {
        mdr_error("rail %s: out of memory receiving %zu bytes from %016llx; dropped",
                  rail->name, length, (unsigned long long)hdr.uuid);
        if (rndv)
            ucp_am_data_release(rail->worker, data);
        return UCS_OK;
    }
    rx->hdr = hdr;
    if (rndv) {
        ucp_request_param_t prm;
        void *req;

        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        prm.cb.recv_am = mdr_ucx_rndv_done;
        prm.user_data = rx;
        rx->ready = 0;
        req = ucp_am_recv_data_nbx(rail->worker, data, rx->data, length, &prm);
        if (req == NULL) {
            rx->ready = 1;
        } else if (UCS_PTR_IS_ERR(req)) {
            mdr_error("rail %s: receiving a %zu-byte message from %016llx: %s", rail->name,
                      length, (unsigned long long)hdr.uuid,
                      ucs_status_string(UCS_PTR_STATUS(req)));
            rx->hdr.type = 0;
            rx->ready = 1;
        }
    } else if (length > 0) {
        memcpy(rx->data, data, length);
    }
    mdr_list_push_tail(&rail->rxq, &rx->link);
    return UCS_OK;
}

/* One message whose turn it is. */
static void mdr_ucx_deliver_one(mdr_ep_t *ep, mdr_ucx_rx_t *rx)
{
    if (rx->hdr.flags & MDR_UCX_HF_SYNC) {
        /* the sender's earlier puts came before this in the lane: in place */
        uint32_t n = rx->hdr.aux;
        (void)mdr_ucx_send(ep, MDR_UCX_M_SYNC_ACK, 0, &n, sizeof(n), NULL, 0);
    }
    mdr_ucx_dispatch(ep, rx);
}

/* Deliver rx (in order on ep's connection) and whatever it unblocks. */
static void mdr_ucx_deliver(mdr_ep_t *ep, mdr_ucx_rx_t *rx)
{
    mdr_rail_t *rail = ep->rail;
    int32_t ahead = (int32_t)(rx->hdr.seq - ep->rx_seq);
    mdr_list_t *l;

    if (ahead < 0) {
        mdr_debug("rail %s peer %016llx: duplicate message %u dropped", rail->name,
                  (unsigned long long)ep->base.uuid, rx->hdr.seq);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    if (ahead > 0) {
        /* early: keep it, sorted by sequence number */
        mdr_list_t *pos = ep->ooo.prev;
        while (pos != &ep->ooo &&
               (int32_t)(mdr_container_of(pos, mdr_ucx_rx_t, link)->hdr.seq - rx->hdr.seq) > 0)
            pos = pos->prev;
        mdr_list_insert_after(pos, &rx->link);
        return;
    }
    ep->rx_seq++;
    mdr_ucx_deliver_one(ep, rx);
    mdr_ucx_rx_free(rail, rx);
    while (!ep->base.destroyed && ep->state == MDR_UCX_EP_OPEN && !mdr_list_empty(&ep->ooo)) {
        mdr_ucx_rx_t *next = mdr_container_of(ep->ooo.next, mdr_ucx_rx_t, link);
        if (next->hdr.seq != ep->rx_seq)
            break;
        l = mdr_list_pop_head(&ep->ooo);
        (void)l;
        ep->rx_seq++;
        mdr_ucx_deliver_one(ep, next);
        mdr_ucx_rx_free(rail, next);
    }
}

void mdr_ucx_dispatch(mdr_ep_t *ep, mdr_ucx_rx_t *rx)
{
    switch (rx->hdr.type) {
    case MDR_UCX_M_CTRL:
        if (rx->len > ep->rail->slot_size) { /* the core's slots hold no more */
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                            "control message of %zu bytes exceeds the slot size %zu", rx->len,
                            ep->rail->slot_size);
            break;
        }
        if (ep->base.cookie != NULL)
            ep->rail->upcalls->ctrl_recv(ep->base.cookie, rx->data, rx->len);
        break;
    case MDR_UCX_M_BYE:
        mdr_ucx_ep_bye(ep, (const char *)rx->data, rx->len);
        break;
    case MDR_UCX_M_KEY_CHECK:
        mdr_ucx_key_check(ep, rx);
        break;
    case MDR_UCX_M_KEY_OK:
        mdr_ucx_key_answer(ep, rx, 1);
        break;
    case MDR_UCX_M_KEY_BAD:
        mdr_ucx_key_answer(ep, rx, 0);
        break;
    case MDR_UCX_M_KEY_REVOKE:
        mdr_ucx_key_revoke(ep, rx);
        break;
    case MDR_UCX_M_SYNC: /* only the flag, answered in mdr_ucx_deliver */
        break;
    case MDR_UCX_M_SHORT_ID:
        mdr_ucx_short_id_got(ep, rx);
        break;
    case MDR_UCX_M_SYNC_ACK: {
        uint32_t n;
        if (rx->len != sizeof(n)) {
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SYNC_ACK of %zu bytes", rx->len);
            break;
        }
        memcpy(&n, rx->data, sizeof(n));
        if ((int32_t)(n - ep->sync_acked) <= 0 || (int32_t)(n - ep->sync_sent) > 0)
            mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO, "SYNC_ACK %u, acknowledged %u, sent %u",
                            n, ep->sync_acked, ep->sync_sent);
        else
            ep->sync_acked = n;
        break;
    }
    default:
        mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_PROTO,
                        "malformed message (type %u, %zu bytes, version mismatch or too long)",
                        rx->hdr.type, rx->len);
        break;
    }
}

static void mdr_ucx_rx_handle(mdr_rail_t *rail, mdr_ucx_rx_t *rx)
{
    mdr_ep_t *ep;

    if (rx->hdr.type == MDR_UCX_M_HELLO) {
        mdr_ucx_hello(rail, rx);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    if (rx->hdr.type == MDR_UCX_M_REFUSE) {
        mdr_ucx_refused(rail, rx);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    if (rx->hdr.type == MDR_UCX_M_CHALLENGE || rx->hdr.type == MDR_UCX_M_PROOF ||
        rx->hdr.type == MDR_UCX_M_ACK) {
        if (rx->hdr.type == MDR_UCX_M_CHALLENGE)
            mdr_ucx_challenge(rail, rx);
        else if (rx->hdr.type == MDR_UCX_M_PROOF)
            mdr_ucx_proof(rail, rx);
        else
            mdr_ucx_ack(rail, rx);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    ep = mdr_ucx_ep_lookup(rail, rx->hdr.uuid);
    if (rx->hdr.version != MDR_UCX_VERSION &&
        (ep == NULL || ep->rx_conn == 0 || ep->rx_conn != rx->hdr.conn)) {
        char src[32];
        snprintf(src, sizeof(src), "uuid %016llx", (unsigned long long)rx->hdr.uuid);
        mdr_drv_refusal(&rail->refusals, rail->name, src,
                        "message of madrail ucx protocol version %u, this library speaks "
                        "version %u (processes of different madrail builds?)",
                        rx->hdr.version, MDR_UCX_VERSION);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    if (ep == NULL || ep->state != MDR_UCX_EP_OPEN || ep->rx_conn == 0 ||
        ep->rx_conn != rx->hdr.conn) {
        if (rx->hdr.type == MDR_UCX_M_BYE && !mdr_list_empty(&rail->lingering))
            mdr_ucx_linger_bye(rail, rx->hdr.uuid, rx->hdr.conn);
        mdr_debug("rail %s: %s message from %016llx (connection %u) has no endpoint; dropped",
                  rail->name, mdr_ucx_type_str(rx->hdr.type), (unsigned long long)rx->hdr.uuid,
                  rx->hdr.conn);
        mdr_ucx_rx_free(rail, rx);
        return;
    }
    mdr_ucx_deliver(ep, rx);
}

static int mdr_ucx_rx_process(mdr_rail_t *rail)
{
    int n = 0;

    while (!mdr_list_empty(&rail->rxq)) {
        mdr_ucx_rx_t *rx = mdr_container_of(rail->rxq.next, mdr_ucx_rx_t, link);
        if (!rx->ready)
            break;
        mdr_list_del(&rx->link);
        mdr_ucx_rx_handle(rail, rx);
        n++;
    }
    return n;
}

/* ---------------- open / close ---------------- */

madrail_status_t mdr_ucx_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return MADRAIL_OK;
    case UCS_INPROGRESS:
        return MADRAIL_INPROGRESS;
    case UCS_ERR_NO_RESOURCE:
        return MADRAIL_ERR_NORESOURCE;
    case UCS_ERR_NO_MEMORY:
        return MADRAIL_ERR_NOMEM;
    case UCS_ERR_INVALID_PARAM:
        return MADRAIL_ERR_INVALID;
    case UCS_ERR_UNSUPPORTED:
        return MADRAIL_ERR_UNSUPPORTED;
    case UCS_ERR_CANCELED:
        return MADRAIL_ERR_CANCELED;
    default:
        return MADRAIL_ERR_RAIL_DOWN;
    }
}

static madrail_status_t mdr_ucx_open(const char *spec, const mdr_rail_params_t *params,
                                     mdr_rail_t **rail_p)
{
    mdr_ucx_spec_t s;
    madrail_status_t st;
    ucs_status_t us;
    ucp_config_t *config;
    char seg[24];
    ucp_params_t up;
    ucp_worker_params_t wp;
    ucp_am_handler_param_t hp;
    ucp_address_t *waddr;
    size_t waddr_len, rkey_len;
    mdr_rail_t *rail;
    uint32_t mark = MDR_UCX_ADDR_MARK;
    uint16_t alen;

    if (!mdr_drv_open_args_ok(spec, params, rail_p, UINT32_MAX))
        return MADRAIL_ERR_INVALID;
    if (mdr_auth_init() != 0)
        return MADRAIL_ERR_CONFIG;
    st = mdr_ucx_spec_read(spec, &s);
    if (st != MADRAIL_OK)
        return st;

    rail = calloc(1, sizeof(*rail));
    if (rail == NULL)
        return MADRAIL_ERR_NOMEM;
    mdr_tcp_diag_init(&rail->tcpdiag, NULL);
    rail->probe_fd = -1;
    rail->lw.fd = -1;
    {
        const char *semi = strchr(spec, ';');
        int n = semi ? (int)(semi - spec) : (int)strlen(spec);
        snprintf(rail->name, sizeof(rail->name), "ucx:%.*s", n > 58 ? 58 : n, spec);
    }
    snprintf(rail->tls, sizeof(rail->tls), "%s", s.tls);
    snprintf(rail->dev, sizeof(rail->dev), "%s", s.dev);
    rail->uuid = params->uuid;
    rail->job_key = params->job_key;
    rail->upcalls = params->upcalls;
    rail->slot_size = params->slot_size;
    rail->check = s.check;
    /* Put ordering (see ucx_mem.c): on tcp and shared memory UCX emulates
     * puts to user memory over the active-message lane, so a message sent
     * after the put's local completion already comes after its data;
     * elsewhere (RDMA devices) the put may use another lane and only a
     * flush proves that the data is in place.  With more than one rail
     * (params->failover) or rail adaptation (params->measure_puts) a tcp
     * rail flushes too, unless order= says otherwise: a put that counts as
     * done at the socket write may die with the link while its FIN is
     * re-sent on a survivor (core/replay.c sends a FIN again only over a
     * rail whose puts complete in place), and the rail would measure as
     * fast as its send buffer. */
    rail->order_flush = s.order >= 0 ? s.order
                                     : !(s.tcp || s.shm) ||
                                           (s.tcp && (params->failover || params->measure_puts));
    rail->shm = s.shm;
    /* connection ids start at random: after the handshake, what a message
     * claims to come from is (uuid, connection), which a stranger never sees */
    if (getrandom(&rail->next_conn, sizeof(rail->next_conn), 0) != sizeof(rail->next_conn) ||
        rail->next_conn == 0)
        rail->next_conn = 1;
    mdr_list_init(&rail->doneq);
    mdr_list_init(&rail->retryq);
    mdr_list_init(&rail->syncq);
    mdr_list_init(&rail->rxq);
    mdr_list_init(&rail->closing);
    mdr_list_init(&rail->lingering);
    mdr_list_init(&rail->close_later);
    mdr_list_init(&rail->orphan_ops);
    mdr_list_init(&rail->orphan_txs);
    mdr_pool_init(&rail->pool, 64);
    rail->rx_scratch = malloc(rail->slot_size > 0 ? rail->slot_size : 1);
    if (rail->rx_scratch == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto err_free;
    }
    mdr_ucx_profile(rail, &s);
    st = mdr_rail_base_init(&rail->base, rail->name, params, mdr_ucx_ep_free);
    if (st != MADRAIL_OK)
        goto err_free;

    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK) {
        mdr_error("rail spec ucx:%s: ucp_config_read: %s", spec, ucs_status_string(us));
        st = MADRAIL_ERR_CONFIG;
        goto err_hash;
    }
    us = ucp_config_modify(config, "TLS", rail->tls);
    if (us == UCS_OK && rail->dev[0] != '\0')
        us = ucp_config_modify(config, "NET_DEVICES", rail->dev);
    snprintf(seg, sizeof(seg), "%zu", s.seg_val);
    if (us == UCS_OK && s.tcp && s.seg_val != 0)
        us = ucp_config_modify(config, MDR_UCX_TCP_SEG_KEY, seg);
    if (us == UCS_OK && s.shm && s.seg_val != 0) {
        char grow[24];
        size_t n = MDR_UCX_MM_RX_BYTES / s.seg_val;

        snprintf(grow, sizeof(grow), "%zu", n < 16 ? 16 : n);
        us = ucp_config_modify(config, MDR_UCX_MM_SEG_KEY, seg);
        if (us == UCS_OK)
            us = ucp_config_modify(config, MDR_UCX_MM_GROW_KEY, grow);
        rail->mm_seg = (uint32_t)s.seg_val;
    }
    if (us != UCS_OK) {
        mdr_error("rail spec ucx:%s: ucp_config_modify(TLS=%s, NET_DEVICES=%s): %s", spec,
                  rail->tls, rail->dev, ucs_status_string(us));
        ucp_config_release(config);
        st = MADRAIL_ERR_CONFIG;
        goto err_hash;
    }
    memset(&up, 0, sizeof(up));
    up.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    up.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    up.name = rail->name;
    us = ucp_init(&up, config, &rail->ctx);
    ucp_config_release(config);
    if (us != UCS_OK) {
        mdr_error("rail spec ucx:%s: UCX has no usable transport for it (UCX_TLS=%s%s%s): %s",
                  spec, rail->tls, rail->dev[0] ? " UCX_NET_DEVICES=" : "", rail->dev,
                  ucs_status_string(us));
        rail->ctx = NULL;
        st = MADRAIL_ERR_CONFIG;
        goto err_hash;
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    us = ucp_worker_create(rail->ctx, &wp, &rail->worker);
    if (us != UCS_OK) {
        mdr_error("rail %s: ucp_worker_create: %s", rail->name, ucs_status_string(us));
        rail->worker = NULL;
        st = MADRAIL_ERR_CONFIG;
        goto err_ctx;
    }
    us = ucp_worker_get_address(rail->worker, &waddr, &waddr_len);
    if (us != UCS_OK) {
        mdr_error("rail %s: ucp_worker_get_address: %s", rail->name, ucs_status_string(us));
        st = MADRAIL_ERR_IO;
        goto err_worker;
    }
    if (waddr_len > (size_t)(rail->shm ? MDR_UCX_ADDR_SEG_OFF : MDR_UCX_ADDR_LEN) -
                        MDR_UCX_ADDR_HDR) {
        mdr_error("rail %s: the worker address has %zu bytes, more than the %d a rail "
                  "address holds; name fewer transports in the rail spec",
                  rail->name, waddr_len,
                  (rail->shm ? MDR_UCX_ADDR_SEG_OFF : MDR_UCX_ADDR_LEN) - MDR_UCX_ADDR_HDR);
        ucp_worker_release_address(rail->worker, waddr);
        st = MADRAIL_ERR_CONFIG;
        goto err_worker;
    }
    alen = (uint16_t)waddr_len;
    memcpy(rail->addr, &mark, 4);
    rail->addr[4] = MDR_UCX_VERSION;
    rail->addr[5] = 0;
    memcpy(rail->addr + 6, &alen, 2);
    memcpy(rail->addr + MDR_UCX_ADDR_HDR, waddr, waddr_len);
    if (rail->shm)
        memcpy(rail->addr + MDR_UCX_ADDR_SEG_OFF, &rail->mm_seg, 4);
    if (!rail->shm)
        mdr_link_watch_init(&rail->lw, rail->dev);
    if (s.tcp && rail->dev[0] != '\0' && waddr_len <= MDR_UCX_ADDR_INET_OFF - MDR_UCX_ADDR_HDR) {
        mdr_tcp_addr_t local;
        if (mdr_tcp_addr_of_ifname(rail->dev, &local) == 0) {
            uint16_t port;
            mdr_tcp_diag_init(&rail->tcpdiag, &local);
            memcpy(rail->addr + MDR_UCX_ADDR_INET_OFF, local.a, 4);
            rail->addr[5] |= MDR_UCX_ADDR_F_INET;
            rail->probe_fd = mdr_tcp_probe_port_open(&local, &port);
            if (rail->probe_fd >= 0) {
                memcpy(rail->addr + MDR_UCX_ADDR_PROBE_OFF, &port, 2);
                rail->addr[5] |= MDR_UCX_ADDR_F_PROBE;
            }
        }
    }
    rail->waddr_len = waddr_len;
    ucp_worker_release_address(rail->worker, waddr);

    memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = MDR_UCX_AM_ID;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = mdr_ucx_am_cb;
    hp.arg = rail;
    us = ucp_worker_set_am_recv_handler(rail->worker, &hp);
    if (us != UCS_OK) {
        mdr_error("rail %s: ucp_worker_set_am_recv_handler: %s", rail->name,
                  ucs_status_string(us));
        st = MADRAIL_ERR_IO;
        goto err_worker;
    }
    mdr_ucx_short_register(rail);
    st = mdr_ucx_rkey_probe(rail, &rkey_len);
    if (st != MADRAIL_OK)
        goto err_worker;
    /* room for larger keys of other memory types */
    rail->max_rkey = sizeof(mdr_ucx_rkey_hdr_t) + rkey_len + 64;
    mdr_debug("rail %s: UCX_TLS=%s UCX_NET_DEVICES=%s, worker address %zu bytes, rkey %zu "
              "bytes, peer errors %s, put checks %s, put order by %s, profile %.1f us %.0f MB/s",
              rail->name, rail->tls, rail->dev[0] ? rail->dev : "(default)", waddr_len,
              rkey_len, rail->shm ? "off" : "on", rail->check ? "on" : "off",
              rail->order_flush ? "flush" : "lane", rail->latency_us, rail->bandwidth_mbs);
    *rail_p = rail;
    return MADRAIL_OK;

err_worker:
    ucp_worker_destroy(rail->worker);
err_ctx:
    ucp_cleanup(rail->ctx);
err_hash:
    mdr_rail_base_cleanup(&rail->base);
err_free:
    mdr_pool_cleanup(&rail->pool);
    free(rail->rx_scratch);
    free(rail->short_slots);
    free(rail);
    return st;
}

static void mdr_ucx_reap(mdr_rail_t *rail)
{
    mdr_rail_base_reap(&rail->base);
}

static void mdr_ucx_close(mdr_rail_t *rail)
{
    mdr_list_t *l;
    double deadline, grace;

    if (rail == NULL || mdr_drv_close_refused(rail->base.in_progress, rail->name))
        return;
    rail->closing_rail = 1;
    /* Every ep says BYE and flushes; give the flushes a bounded time. */
    while (!mdr_list_empty(&rail->base.eps_all))
        mdr_ucx_ep_destroy(mdr_container_of(rail->base.eps_all.next, mdr_ep_t, base.link));
    mdr_ucx_hs_poll(rail, 1); /* half-open handshakes end: their ucp_eps close */
    mdr_ucx_linger_poll(rail, 1);
    mdr_ucx_reap(rail);
    /* First until what we sent (the BYEs last) has left, then a short
     * grace for the peers to acknowledge the closes: a peer that does not
     * progress meanwhile must not hold us for long. */
    deadline = mdr_time_sec() + MDR_UCX_CLOSE_WAIT;
    while (!mdr_list_empty(&rail->orphan_txs) && mdr_time_sec() < deadline) {
        ucp_worker_progress(rail->worker);
        mdr_ucx_closing_poll(rail);
    }
    grace = mdr_time_sec() + MDR_UCX_CLOSE_GRACE;
    if (grace < deadline)
        deadline = grace;
    while (!mdr_list_empty(&rail->closing) && mdr_time_sec() < deadline) {
        ucp_worker_progress(rail->worker);
        mdr_ucx_closing_poll(rail);
    }
    if (!mdr_list_empty(&rail->closing))
        mdr_debug("rail %s: endpoint closes still running; closing anyway", rail->name);
    while ((l = mdr_list_pop_head(&rail->closing)) != NULL) {
        mdr_ucx_uep_t *uep = mdr_container_of(l, mdr_ucx_uep_t, link);
        if (uep->close_req != NULL)
            ucp_request_free(uep->close_req); /* the worker's destruction ends it */
        free(uep);
    }
    while ((l = mdr_list_pop_head(&rail->rxq)) != NULL) {
        mdr_ucx_rx_t *rx = mdr_container_of(l, mdr_ucx_rx_t, link);
        if (rx->ready)
            mdr_ucx_rx_free(rail, rx);
        else
            rx->dead = 1; /* its receive callback frees it */
    }
    mdr_ucx_mem_cleanup(rail);
    ucp_worker_destroy(rail->worker);
    /* after the worker (its destruction may still complete requests), before
     * the context (orphans may hold remote keys) */
    mdr_ucx_free_orphan_ops(rail);
    mdr_ucx_free_orphan_txs(rail);
    ucp_cleanup(rail->ctx);
    mdr_rail_base_cleanup(&rail->base);
    mdr_pool_cleanup(&rail->pool);
    mdr_tcp_diag_cleanup(&rail->tcpdiag);
    mdr_link_watch_cleanup(&rail->lw);
    if (rail->probe_fd >= 0)
        close(rail->probe_fd);
    free(rail->rx_scratch);
    free(rail->short_slots);
    free(rail);
}

static void mdr_ucx_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "%s", rail->name);
    attr->caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_FLUSH |
                 (rail->check ? 0 : MDR_RAIL_CAP_PUT_HW) |
                 (rail->order_flush ? MDR_RAIL_CAP_PUT_REMOTE : 0);
    attr->latency_us = rail->latency_us;
    attr->bandwidth_mbs = rail->bandwidth_mbs;
    attr->max_ctrl = rail->slot_size;
    attr->addr_len = MDR_UCX_ADDR_LEN;
    attr->max_rkey = rail->max_rkey;
}

static madrail_status_t mdr_ucx_addr_pack(mdr_rail_t *rail, void *buf, size_t len)
{
    if (rail == NULL || buf == NULL || len < MDR_UCX_ADDR_LEN)
        return MADRAIL_ERR_INVALID;
    memcpy(buf, rail->addr, MDR_UCX_ADDR_LEN);
    return MADRAIL_OK;
}

/* ---------------- progress ---------------- */

/* The rail's link went down (linkwatch.h): every open ep is fenced
 * (closed by force, stale bytes refused) and fails now, as after UCX's
 * error handler, instead of a rail timeout later. */
static void mdr_ucx_link_fail(mdr_rail_ep_t *b, const char *why)
{
    mdr_ep_t *ep = mdr_container_of(b, mdr_ep_t, base);

    if (ep->state != MDR_UCX_EP_OPEN)
        return;
    mdr_ucx_ep_fence(ep);
    mdr_ucx_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "%s", why);
}

MDR_HOT static int mdr_ucx_progress(mdr_rail_t *rail)
{
    int count = 0, i, n;

    if (rail == NULL || rail->base.in_progress || rail->closing_rail)
        return 0;
    rail->base.in_progress = 1;
    if (rail->lw.fd >= 0 && mdr_link_watch_poll(&rail->lw, mdr_time_coarse_ns()))
        mdr_link_watch_fail_eps(&rail->lw, &rail->base, rail->name, mdr_ucx_link_fail);
    /* Spin only while UCX makes progress that gives the core nothing yet
     * (a rendezvous, a flush, a send completing): once a message or a
     * completion is queued, deliver it at once.  Each ucp_worker_progress
     * on tcp is an epoll_wait system call; one more before a ping-pong's
     * message goes up cost about 0.4 us per one-way trip. */
    rail->direct_n = 0;
    for (i = 0; i < MDR_UCX_PROGRESS_SPINS; i++) {
        rail->in_worker = 1;
        n = (int)ucp_worker_progress(rail->worker);
        rail->in_worker = 0;
        count += n;
        if (n == 0 || rail->direct_n > 0 || !mdr_list_empty(&rail->rxq) ||
            !mdr_list_empty(&rail->doneq) || !mdr_list_empty(&rail->base.failq))
            break;
    }
    /* Messages went up from UCX's handler and nothing else is queued for the
     * core: return to it now, and leave the upkeep below (closes, retries,
     * SYNCs owed, zombie eps) to the next call, which comes while the
     * application waits for its next message.  Never twice in a row. */
    if (rail->direct_n > 0 && !rail->tail_deferred && mdr_list_empty(&rail->rxq) &&
        mdr_list_empty(&rail->doneq) && mdr_list_empty(&rail->base.failq)) {
        rail->tail_deferred = 1;
        rail->base.in_progress = 0;
        return count;
    }
    rail->tail_deferred = 0;
    if (!mdr_list_empty(&rail->close_later))
        mdr_ucx_close_later(rail);
    if (!mdr_list_empty(&rail->lingering))
        mdr_ucx_linger_poll(rail, 0);
    if (!mdr_list_empty(&rail->closing))
        mdr_ucx_closing_poll(rail);
    if (!mdr_list_empty(&rail->retryq))
        count += mdr_ucx_retry_ops(rail);
    if (rail->npending > 0 || rail->nhs > 0 || rail->held_stuck)
        count += mdr_ucx_hs_poll(rail, 0);
    /* upcalls may queue more of each: repeat until quiet (most passes
     * find all three queues empty) */
    while (!mdr_list_empty(&rail->rxq) || !mdr_list_empty(&rail->doneq) ||
           !mdr_list_empty(&rail->base.failq)) {
        n = mdr_ucx_rx_process(rail);
        n += mdr_ucx_report_done(rail);
        n += mdr_ucx_report_failures(rail);
        count += n;
        if (n == 0)
            break; /* a rendezvous receive not ready yet heads rxq */
    }
    if (!mdr_list_empty(&rail->syncq))
        count += mdr_ucx_send_syncs(rail);
    mdr_ucx_reap(rail);
    rail->base.in_progress = 0;
    return count;
}

/* Sends UCX could not hand to the transport at once wait in its pending
 * queues until the worker is progressed: push them out (the core calls this
 * when the application collects a completed send and may go idle).  What
 * arrives meanwhile is only queued; upcalls wait for progress(). */
static int mdr_ucx_flush(mdr_rail_t *rail)
{
    int i, n = 0;

    if (rail == NULL || rail->base.in_progress || rail->closing_rail || rail->ntx == 0)
        return 0;
    for (i = 0; i < MDR_UCX_PROGRESS_SPINS && rail->ntx > 0; i++)
        n += (int)ucp_worker_progress(rail->worker);
    return n;
}

const mdr_rail_ops_t mdr_ucx_ops = {
    .size = MDR_RAIL_OPS_SIZE,
    .caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_HW | MDR_RAIL_CAP_PUT_REMOTE |
            MDR_RAIL_CAP_FLUSH,
    .name = "ucx",
    .open = mdr_ucx_open,
    .close = mdr_ucx_close,
    .query = mdr_ucx_query,
    .addr_pack = mdr_ucx_addr_pack,
    .ep_create = mdr_ucx_ep_create,
    .ep_destroy = mdr_ucx_ep_destroy,
    .ep_backlog = mdr_ucx_ep_backlog,
    .ep_unsent = mdr_ucx_ep_unsent,
    .ep_idle = mdr_ucx_ep_idle,
    .ep_link_quiet = mdr_ucx_ep_link_quiet,
    .ep_fence = mdr_ucx_ep_fence,
    .ep_link_rto = mdr_ucx_ep_link_rto,
    .ctrl_send = mdr_ucx_ctrl_send,
    .mem_reg = mdr_ucx_mem_reg,
    .mem_dereg = mdr_ucx_mem_dereg,
    .rkey_pack = mdr_ucx_rkey_pack,
    .put = mdr_ucx_put,
    .progress = mdr_ucx_progress,
    .flush = mdr_ucx_flush,
};
