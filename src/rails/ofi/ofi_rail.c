/*
 * The ofi driver: a rail over one libfabric provider and domain, as
 * `ofi:<provider>[:<domain, interface or IPv4 address>]` (`ofi:tcp;ofi_rxm:lo`,
 * `ofi:shm`, `ofi:udp;ofi_rxd:lo`; an empty provider picks the first one
 * that qualifies).  The provider name may itself contain ';', so the spec
 * is split at ':' only.
 *
 * What a provider must offer: FI_EP_RDM with FI_MSG and FI_RMA (write),
 * send-after-send ordering (control messages on one ep arrive in order),
 * and FI_DELIVERY_COMPLETE on writes for the ordering promise of put():
 * the write completes once its data is visible at the target, so the FIN
 * the core sends after the completion cannot overtake it, and a write the
 * target rejects (stale key) fails at the initiator.  Providers that order
 * sends after writes (FI_ORDER_SAW) can complete writes one round trip
 * earlier (MADRAIL_OFI_PUT_COMPLETE=order), at the price of that error
 * report: measured on tcp;ofi_rxm, a rejected write then completes
 * successfully and only the connection's next send fails.  fi_getinfo is
 * asked with FI_MULTI_RECV first and without it after a refusal; every
 * attempt is logged at debug level and a refused provider is named with
 * what it lacks.
 *
 * Progress is the provider's: one completion queue for everything, read
 * with fi_cq_read in progress() (FI_PROGRESS_MANUAL providers move data
 * only then), errors read with fi_cq_readerr and explained with
 * fi_cq_strerror.
 */
#include "mdr_config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rails/common/auth.h"
#include "rails/common/drv.h"
#include "rails/ofi/ofi.h"
#include "util/clock.h"
#include "util/compiler.h"
#include "util/log.h"

#define MDR_OFI_API FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/* mr_mode bits the driver can work with. */
#define MDR_OFI_MR_MODES                                                                     \
    (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

/* ---------------- provider selection ---------------- */

typedef struct mdr_ofi_want {
    int saw;   /* ask for FI_ORDER_SAW */
    int mrecv; /* ask for FI_MULTI_RECV */
} mdr_ofi_want_t;

static struct fi_info *mdr_ofi_hints(const char *prov, const mdr_ofi_want_t *w)
{
    struct fi_info *h = fi_allocinfo();

    if (h == NULL)
        return NULL;
    h->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
    if (w->mrecv)
        h->caps |= FI_MULTI_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = MDR_OFI_MR_MODES;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->tx_attr->msg_order = FI_ORDER_SAS | (w->saw ? FI_ORDER_SAW : 0);
    h->rx_attr->msg_order = h->tx_attr->msg_order;
    if (prov != NULL && prov[0] != '\0') {
        h->fabric_attr->prov_name = strdup(prov);
        if (h->fabric_attr->prov_name == NULL) {
            fi_freeinfo(h);
            return NULL;
        }
    }
    return h;
}

/* Does info match the device part of the spec ("" = anything)? */
static int mdr_ofi_dev_match(const struct fi_info *i, const char *dev, int by_addr)
{
    if (dev[0] == '\0' || by_addr)
        return 1;
    return i->domain_attr->name != NULL && strcmp(i->domain_attr->name, dev) == 0;
}

static int mdr_ofi_is_ipv4(const char *s)
{
    unsigned a, b, c, d;
    char end;
    return sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &end) == 4 && a < 256 && b < 256 &&
           c < 256 && d < 256;
}

/* One fi_getinfo attempt; the chosen entry is duplicated into *info_p. */
static int mdr_ofi_try(const char *spec, const char *prov, const char *dev,
                       const mdr_ofi_want_t *w, struct fi_info **info_p)
{
    struct fi_info *hints, *list = NULL, *i, *best = NULL;
    int by_addr = mdr_ofi_is_ipv4(dev), ret;

    hints = mdr_ofi_hints(prov, w);
    if (hints == NULL)
        return -FI_ENOMEM;
    if (by_addr)
        hints->addr_format = FI_SOCKADDR_IN;
    ret = fi_getinfo(MDR_OFI_API, by_addr ? dev : NULL, NULL, by_addr ? FI_SOURCE : 0, hints,
                     &list);
    fi_freeinfo(hints);
    mdr_debug("ofi rail %s: fi_getinfo(provider %s, SAW %d, multi-recv %d): %s", spec,
              prov[0] ? prov : "any", w->saw, w->mrecv, ret == 0 ? "ok" : fi_strerror(-ret));
    if (ret != 0)
        return ret;
    /* the first entry of the device; IPv4 before other address formats */
    for (i = list; i != NULL; i = i->next) {
        if (!mdr_ofi_dev_match(i, dev, by_addr))
            continue;
        if (best == NULL || (best->addr_format != FI_SOCKADDR_IN &&
                             i->addr_format == FI_SOCKADDR_IN))
            best = i;
        if (best->addr_format == FI_SOCKADDR_IN)
            break;
    }
    if (best == NULL) {
        fi_freeinfo(list);
        return -FI_ENODEV;
    }
    *info_p = fi_dupinfo(best);
    fi_freeinfo(list);
    return *info_p != NULL ? 0 : -FI_ENOMEM;
}

/* Is s an item of the ", "-separated list in buf? */
static int mdr_ofi_list_has(const char *buf, const char *s)
{
    size_t k = strlen(s);
    const char *p = buf;

    while ((p = strstr(p, s)) != NULL) {
        if ((p == buf || p[-1] == ' ') && (p[k] == ',' || p[k] == '\0'))
            return 1;
        p += k;
    }
    return 0;
}

/* Append s to a ", "-separated list in buf unless it is there. */
static void mdr_ofi_list_add(char *buf, size_t size, const char *s)
{
    size_t n = strlen(buf), k = strlen(s);

    if (mdr_ofi_list_has(buf, s) || n + k + 3 >= size)
        return;
    snprintf(buf + n, size - n, "%s%s", n ? ", " : "", s);
}

/* Say why prov cannot carry a rail: what fi_getinfo has for it without
 * our requirements, compared with what we need. */
static void mdr_ofi_explain(const char *spec, const char *prov, const char *dev, int err)
{
    struct fi_info *hints, *list = NULL, *i;
    char provs[512] = "", doms[256] = "", lack[256] = "";
    int rdm = 0, msg = 0, rma = 0, sas = 0, ret;
    uint64_t bad_mr = 0, bad_mode = 0;

    hints = fi_allocinfo();
    if (hints == NULL)
        return;
    if (prov[0] != '\0')
        hints->fabric_attr->prov_name = strdup(prov);
    ret = fi_getinfo(MDR_OFI_API, NULL, NULL, 0, hints, &list);
    fi_freeinfo(hints);
    if (ret != 0 || list == NULL) {
        /* not there at all: list what libfabric has */
        if (fi_getinfo(MDR_OFI_API, NULL, NULL, 0, NULL, &list) == 0) {
            for (i = list; i != NULL; i = i->next)
                mdr_ofi_list_add(provs, sizeof(provs), i->fabric_attr->prov_name);
            fi_freeinfo(list);
        }
        mdr_error("rail spec ofi:%s: libfabric has no provider '%s' on this machine "
                  "(available: %s; see fi_info -l)", spec, prov, provs[0] ? provs : "none");
        return;
    }
    for (i = list; i != NULL; i = i->next) {
        if (i->domain_attr->name != NULL)
            mdr_ofi_list_add(doms, sizeof(doms), i->domain_attr->name);
        if (i->ep_attr->type != FI_EP_RDM)
            continue;
        rdm = 1;
        msg |= (i->caps & FI_MSG) != 0;
        rma |= (i->caps & FI_RMA) != 0 && (i->caps & (FI_WRITE | FI_REMOTE_WRITE)) != 0;
        sas |= (i->tx_attr->msg_order & FI_ORDER_SAS) != 0;
        bad_mr |= i->domain_attr->mr_mode & ~(uint64_t)MDR_OFI_MR_MODES;
        bad_mode |= i->mode & ~(uint64_t)(FI_CONTEXT | FI_CONTEXT2);
    }
    fi_freeinfo(list);
    if (!rdm)
        mdr_ofi_list_add(lack, sizeof(lack), "reliable datagram endpoints (FI_EP_RDM)");
    if (rdm && !msg)
        mdr_ofi_list_add(lack, sizeof(lack), "messages (FI_MSG)");
    if (rdm && !rma)
        mdr_ofi_list_add(lack, sizeof(lack), "remote writes (FI_RMA)");
    if (rdm && !sas)
        mdr_ofi_list_add(lack, sizeof(lack), "ordered sends (FI_ORDER_SAS)");
    if (lack[0] != '\0') {
        mdr_error("rail spec ofi:%s: provider '%s' lacks %s, which the ofi rail needs", spec,
                  prov, lack);
        return;
    }
    if (err == -FI_ENODEV) {
        mdr_error("rail spec ofi:%s: provider '%s' has no domain or address '%s' "
                  "(its domains: %s)", spec, prov, dev, doms[0] ? doms : "none");
        return;
    }
    if (bad_mr || bad_mode) {
        mdr_error("rail spec ofi:%s: provider '%s' requires memory-registration modes "
                  "%#llx or operation modes %#llx the ofi rail does not implement",
                  spec, prov, (unsigned long long)bad_mr, (unsigned long long)bad_mode);
        return;
    }
    mdr_error("rail spec ofi:%s: provider '%s' refused every combination of the ofi rail's "
              "requirements (%s); run with MADRAIL_LOG_LEVEL=debug to see the attempts",
              spec, prov, fi_strerror(-err));
}

/* The domains libfabric lists for prov, ", "-separated into buf; returns
 * how many (0 when it lists none, or on an error). */
static int mdr_ofi_prov_domains(const char *prov, char *buf, size_t size)
{
    struct fi_info *hints, *list = NULL, *i;
    int n = 0;

    buf[0] = '\0';
    hints = fi_allocinfo();
    if (hints == NULL)
        return 0;
    hints->fabric_attr->prov_name = strdup(prov);
    hints->ep_attr->type = FI_EP_RDM;
    if (hints->fabric_attr->prov_name != NULL &&
        fi_getinfo(MDR_OFI_API, NULL, NULL, 0, hints, &list) == 0) {
        for (i = list; i != NULL; i = i->next)
            if (i->domain_attr->name != NULL &&
                !mdr_ofi_list_has(buf, i->domain_attr->name)) {
                mdr_ofi_list_add(buf, size, i->domain_attr->name);
                n++;
            }
        fi_freeinfo(list);
    }
    fi_freeinfo(hints);
    return n;
}

/* Choose the provider entry: *info_p, whether writes need
 * FI_DELIVERY_COMPLETE, and whether FI_MULTI_RECV was granted. */
static madrail_status_t mdr_ofi_select(mdr_rail_t *rail, const char *spec, const char *prov,
                                       const char *dev, int quiet, struct fi_info **info_p)
{
    const char *pc = rail->cfg.put_complete;
    int saw, mrecv, ret = -FI_ENODATA;
    mdr_ofi_want_t w;

    if (strcmp(pc, "delivery") == 0) {
        saw = 0;
    } else if (strcmp(pc, "order") == 0) {
        saw = 1;
    } else {
        mdr_error("MADRAIL_OFI_PUT_COMPLETE=%s: not a mode (expected delivery or order)", pc);
        return MADRAIL_ERR_CONFIG;
    }
    for (mrecv = rail->cfg.multi_recv; mrecv >= 0; mrecv--) {
        w.saw = saw;
        w.mrecv = mrecv;
        ret = mdr_ofi_try(spec, prov, dev, &w, info_p);
        if (ret == 0) {
            rail->put_delivery = !saw;
            rail->multi_recv = mrecv;
            return MADRAIL_OK;
        }
        if (ret == -FI_ENOMEM)
            return MADRAIL_ERR_NOMEM;
        if (ret == -FI_ENODEV)
            goto fail; /* the provider is fine, the device is not */
    }
    if (saw) {
        /* does it qualify without send-after-write ordering? */
        w.saw = 0;
        w.mrecv = 0;
        if (mdr_ofi_try(spec, prov, dev, &w, info_p) == 0) {
            fi_freeinfo(*info_p);
            *info_p = NULL;
            if (!quiet)
                mdr_error("rail spec ofi:%s: MADRAIL_OFI_PUT_COMPLETE=order but provider '%s' "
                          "does not order sends after writes (FI_ORDER_SAW); use delivery",
                          spec, prov);
            return MADRAIL_ERR_CONFIG;
        }
    }
fail:
    if (!quiet)
        mdr_ofi_explain(spec, prov, dev, ret);
    return MADRAIL_ERR_CONFIG;
}

/* Empty provider: try each provider libfabric lists, in its order. */
static madrail_status_t mdr_ofi_select_any(mdr_rail_t *rail, const char *spec,
                                           const char *dev, struct fi_info **info_p)
{
    struct fi_info *hints, *list = NULL, *i;
    char tried[512] = "";
    madrail_status_t st;
    int ret;

    hints = fi_allocinfo();
    if (hints == NULL)
        return MADRAIL_ERR_NOMEM;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA;
    ret = fi_getinfo(MDR_OFI_API, NULL, NULL, 0, hints, &list);
    fi_freeinfo(hints);
    if (ret != 0) {
        mdr_error("rail spec ofi:%s: libfabric offers no provider with reliable datagram "
                  "endpoints, messages and remote writes (%s)", spec, fi_strerror(-ret));
        return MADRAIL_ERR_CONFIG;
    }
    for (i = list; i != NULL; i = i->next) {
        const char *p = i->fabric_attr->prov_name;
        if (p == NULL || mdr_ofi_list_has(tried, p))
            continue;
        mdr_ofi_list_add(tried, sizeof(tried), p);
        /* quiet while probing: a refusal here is not an error */
        st = mdr_ofi_select(rail, spec, p, dev, 1, info_p);
        mdr_debug("rail spec ofi:%s: provider %s %s", spec, p,
                  st == MADRAIL_OK ? "qualifies" : "does not qualify");
        if (st == MADRAIL_OK) {
            mdr_info("rail spec ofi:%s: chose provider %s (tried %s)", spec, p, tried);
            fi_freeinfo(list);
            return MADRAIL_OK;
        }
        if (st != MADRAIL_ERR_CONFIG) {
            fi_freeinfo(list);
            return st;
        }
    }
    fi_freeinfo(list);
    mdr_error("rail spec ofi:%s: no provider qualifies for device '%s' (tried %s); name one, "
              "e.g. ofi:tcp;ofi_rxm:lo, to see what it lacks", spec, dev, tried);
    return MADRAIL_ERR_CONFIG;
}

/* ---------------- shm rails of one process ---------------- */

/* libfabric 1.17's shm provider lets an endpoint use the shared-memory
 * region of another endpoint of the same process directly (no mapping of
 * its own), so once a rail closes, a rail of the same process that still
 * sends to it, reads a message it left or answers it touches unmapped
 * memory and crashes.  Across processes each side maps the region itself
 * and nothing of the sort happens.  So a closed shm rail keeps its
 * endpoint (and its region) until the last shm rail of the process
 * closes; the peers learn of the close from the goodbye it sent. */
static pthread_mutex_t mdr_ofi_shm_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned mdr_ofi_shm_live;
static mdr_list_t mdr_ofi_shm_parked = MDR_LIST_INIT(mdr_ofi_shm_parked);

/* ---------------- helpers ---------------- */

madrail_status_t mdr_ofi_reg_local(mdr_rail_t *rail, void *buf, size_t len, uint64_t access,
                                   struct fid_mr **mr_p, void **desc_p)
{
    struct fid_mr *mr = NULL;
    int ret;

    *mr_p = NULL;
    *desc_p = NULL;
    if (!(rail->mr_mode & FI_MR_LOCAL))
        return MADRAIL_OK;
    ret = fi_mr_reg(rail->domain, buf, len, access, 0,
                    (rail->mr_mode & FI_MR_PROV_KEY) ? 0 : rail->next_key++, 0, &mr, NULL);
    if (ret != 0) {
        mdr_warn("rail %s: fi_mr_reg of %zu local bytes: %s", rail->log_name, len,
                 fi_strerror(-ret));
        return MADRAIL_ERR_NORESOURCE;
    }
    if (rail->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(mr, &rail->ep->fid, 0);
        if (ret == 0)
            ret = fi_mr_enable(mr);
        if (ret != 0) {
            mdr_warn("rail %s: binding a local registration: %s", rail->log_name,
                     fi_strerror(-ret));
            fi_close(&mr->fid);
            return MADRAIL_ERR_NORESOURCE;
        }
    }
    *mr_p = mr;
    *desc_p = fi_mr_desc(mr);
    return MADRAIL_OK;
}

static uint32_t mdr_ofi_hash_str(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 16777619u;
    }
    return h;
}

static madrail_status_t mdr_ofi_post_rx(mdr_rail_t *rail, mdr_ofi_rxbuf_t *rxb)
{
    struct iovec iov = {rxb->buf, rxb->len};
    struct fi_msg msg;
    ssize_t ret;

    if (rail->multi_recv) {
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.desc = &rail->rx_desc;
        msg.iov_count = 1;
        msg.addr = FI_ADDR_UNSPEC;
        msg.context = &rxb->ctx.fctx;
        ret = fi_recvmsg(rail->ep, &msg, FI_MULTI_RECV);
    } else {
        ret = fi_recv(rail->ep, rxb->buf, rxb->len, rail->rx_desc, FI_ADDR_UNSPEC,
                      &rxb->ctx.fctx);
    }
    if (ret == 0) {
        rxb->posted = 1;
        return MADRAIL_OK;
    }
    if (ret == -FI_EAGAIN)
        return MADRAIL_ERR_NORESOURCE;
    mdr_error("rail %s: posting a receive buffer: %s", rail->log_name, fi_strerror((int)-ret));
    return MADRAIL_ERR_IO;
}

/* Post (again) a receive buffer, or keep it for the next progress. */
static void mdr_ofi_repost(mdr_rail_t *rail, mdr_ofi_rxbuf_t *rxb)
{
    rxb->posted = 0;
    if (rail->closing || mdr_ofi_post_rx(rail, rxb) != MADRAIL_OK)
        mdr_list_push_tail(&rail->rx_repost, &rxb->link);
}

static madrail_status_t mdr_ofi_rx_setup(mdr_rail_t *rail)
{
    size_t each, total;
    unsigned i, n;
    madrail_status_t st;

    if (rail->multi_recv) {
        n = rail->cfg.rx_bufs ? rail->cfg.rx_bufs : 4;
        each = rail->cfg.rx_buf_size;
        if (each < 8 * rail->msg_max)
            each = 8 * rail->msg_max;
    } else {
        n = rail->cfg.rx_bufs ? rail->cfg.rx_bufs : 2 * rail->slots;
        if (!rail->cfg.rx_bufs && n < 64)
            n = 64;
        each = rail->msg_max;
    }
    each = (each + 63) & ~(size_t)63;
    total = each * n;
    rail->rxb = calloc(n, sizeof(*rail->rxb));
    if (rail->rxb == NULL || posix_memalign((void **)&rail->rx_mem, 64, total) != 0) {
        rail->rx_mem = NULL;
        return MADRAIL_ERR_NOMEM;
    }
    st = mdr_ofi_reg_local(rail, rail->rx_mem, total, FI_RECV, &rail->rx_mr, &rail->rx_desc);
    if (st != MADRAIL_OK)
        return st;
    rail->nrx = n;
    for (i = 0; i < n; i++) {
        rail->rxb[i].ctx.kind = MDR_OFI_OP_RECV;
        rail->rxb[i].buf = rail->rx_mem + (size_t)i * each;
        rail->rxb[i].len = each;
        mdr_list_init(&rail->rxb[i].link);
    }
    mdr_debug("rail %s: %u receive buffers of %zu bytes%s", rail->log_name, n, each,
              rail->multi_recv ? " (FI_MULTI_RECV)" : "");
    return MADRAIL_OK;
}

static madrail_status_t mdr_ofi_rx_post_all(mdr_rail_t *rail)
{
    unsigned i;
    madrail_status_t st;

    for (i = 0; i < rail->nrx; i++) {
        st = mdr_ofi_post_rx(rail, &rail->rxb[i]);
        if (st == MADRAIL_ERR_NORESOURCE) {
            mdr_list_push_tail(&rail->rx_repost, &rail->rxb[i].link);
            continue;
        }
        if (st != MADRAIL_OK)
            return st;
    }
    return MADRAIL_OK;
}

static void mdr_ofi_profile(mdr_rail_t *rail)
{
    const struct fi_info *i = rail->info;
    const char *p = rail->prov;
    int lo = strcmp(rail->dom, "lo") == 0 || strncmp(p, "shm", 3) == 0;
    double lat, bw = 0;

    if (strncmp(p, "shm", 3) == 0)
        lat = 2;
    else if (strncmp(p, "tcp", 3) == 0 || strncmp(p, "sockets", 7) == 0 ||
             strncmp(p, "net", 3) == 0)
        lat = 20;
    else if (strncmp(p, "udp", 3) == 0)
        lat = 30;
    else
        lat = 5;
    if (i->nic != NULL && i->nic->link_attr != NULL && i->nic->link_attr->speed > 0)
        bw = (double)i->nic->link_attr->speed / 8e6; /* bit/s -> MB/s */
    if (bw <= 0 || lo)
        bw = lo ? 5000 : 1000;
    rail->latency_us = rail->cfg.latency_us > 0 ? rail->cfg.latency_us : lat;
    rail->bandwidth_mbs = rail->cfg.bandwidth > 0 ? rail->cfg.bandwidth : bw;
}

/* ---------------- open / close ---------------- */

static void mdr_ofi_close(mdr_rail_t *rail);

/* Does provider prov ("tcp;ofi_rxm", "sockets", "verbs;ofi_rxm") carry
 * its traffic over kernel TCP sockets?  Its core provider (the first
 * name) decides. */
static int mdr_ofi_prov_kernel_tcp(const char *prov)
{
    size_t n = strcspn(prov, ";");

    return (n == 3 && strncmp(prov, "tcp", 3) == 0) || (n == 7 && strncmp(prov, "sockets", 7) == 0);
}

static madrail_status_t mdr_ofi_open(const char *spec, const mdr_rail_params_t *params,
                                     mdr_rail_t **rail_p)
{
    char prov[128], dev[128];
    const char *colon;
    struct fi_av_attr av_attr;
    struct fi_cq_attr cq_attr;
    madrail_status_t st;
    mdr_rail_t *rail;
    size_t n;
    int ret;

    if (!mdr_drv_open_args_ok(spec, params, rail_p, UINT32_MAX))
        return MADRAIL_ERR_INVALID;
    if (mdr_auth_init() != 0)
        return MADRAIL_ERR_CONFIG;
    colon = strchr(spec, ':');
    n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (n >= sizeof(prov) || (colon && strlen(colon + 1) >= sizeof(dev)) ||
        (colon && strchr(colon + 1, ':') != NULL)) {
        mdr_error("rail spec ofi:%s: expected ofi:<provider>[:<domain, interface or IPv4 "
                  "address>], e.g. ofi:tcp;ofi_rxm:lo", spec);
        return MADRAIL_ERR_CONFIG;
    }
    memcpy(prov, spec, n);
    prov[n] = '\0';
    snprintf(dev, sizeof(dev), "%s", colon ? colon + 1 : "");
    if (strcmp(prov, "auto") == 0)
        prov[0] = '\0';
    /* Name a device wherever there is a choice: libfabric's first domain
     * is its enumeration order, not the user's network. */
    if (prov[0] == '\0' && dev[0] == '\0') {
        mdr_error("rail spec ofi:%s: names neither a provider nor a device (expected "
                  "ofi:<provider>[:<device>] or ofi::<device>, e.g. ofi:tcp;ofi_rxm:lo)",
                  spec);
        return MADRAIL_ERR_CONFIG;
    }
    if (dev[0] == '\0') {
        char doms[256];
        if (mdr_ofi_prov_domains(prov, doms, sizeof(doms)) > 1) {
            mdr_error("rail spec ofi:%s: provider '%s' has several domains (%s): name one, "
                      "e.g. ofi:%s:%.*s",
                      spec, prov, doms, prov, (int)strcspn(doms, ","), doms);
            return MADRAIL_ERR_CONFIG;
        }
    }

    rail = calloc(1, sizeof(*rail));
    if (rail == NULL)
        return MADRAIL_ERR_NOMEM;
    mdr_tcp_diag_init(&rail->tcpdiag, NULL);
    rail->lw.fd = -1;
    if (mdr_rail_base_init(&rail->base, rail->log_name, params, mdr_ofi_ep_free) !=
        MADRAIL_OK) {
        free(rail);
        return MADRAIL_ERR_NOMEM;
    }
    mdr_list_init(&rail->doneq);
    mdr_list_init(&rail->orphans);
    mdr_list_init(&rail->free_ops);
    mdr_list_init(&rail->memhs);
    mdr_list_init(&rail->peer_list);
    mdr_list_init(&rail->rx_repost);
    mdr_list_init(&rail->txb_free);
    mdr_list_init(&rail->txb_slabs);
    rail->uuid = params->uuid;
    rail->job_key = params->job_key;
    rail->upcalls = params->upcalls;
    rail->slot_size = params->slot_size;
    rail->slots = params->slots ? params->slots : 1;
    /* incarnation ids start at random: after the handshake, what a message
     * claims to come from is (uuid, epid), neither of which a stranger sees */
    if (getrandom(&rail->next_epid, sizeof(rail->next_epid), 0) != sizeof(rail->next_epid) ||
        rail->next_epid == 0)
        rail->next_epid = 1;
    rail->next_key = 1;
    /* the largest message: a slot, or a HELLO with the longest address */
    rail->msg_max = MDR_OFI_HDR_LEN + rail->slot_size + 8;
    if (rail->msg_max < MDR_OFI_HDR_LEN + sizeof(mdr_ofi_hello_t) + MDR_OFI_ADDR_HDR +
                            MDR_OFI_NAME_MAX + 8)
        rail->msg_max = MDR_OFI_HDR_LEN + sizeof(mdr_ofi_hello_t) + MDR_OFI_ADDR_HDR +
                        MDR_OFI_NAME_MAX + 8;
    rail->msg_max = (rail->msg_max + 7) & ~(size_t)7;
    rail->txb_size = (rail->msg_max + 63) & ~(size_t)63;
    snprintf(rail->log_name, sizeof(rail->log_name), "ofi:%s", spec);

    st = mdr_cfg_parse(&mdr_ofi_cfg_table, params->overrides, &rail->cfg);
    if (st != MADRAIL_OK)
        goto err;
    st = MADRAIL_ERR_NOMEM;
    if (mdr_hash_init(&rail->peers, 16) != MADRAIL_OK)
        goto err;
    rail->rx_scratch = malloc(rail->msg_max);
    if (rail->rx_scratch == NULL)
        goto err;

    if (prov[0] != '\0')
        st = mdr_ofi_select(rail, spec, prov, dev, 0, &rail->info);
    else
        st = mdr_ofi_select_any(rail, spec, dev, &rail->info);
    if (st != MADRAIL_OK)
        goto err;
    snprintf(rail->prov, sizeof(rail->prov), "%s", rail->info->fabric_attr->prov_name);
    snprintf(rail->dom, sizeof(rail->dom), "%s",
             rail->info->domain_attr->name ? rail->info->domain_attr->name : "?");
    /* attr.name holds 63 characters: a very long provider name is cut */
    snprintf(rail->name, sizeof(rail->name), "ofi:%.29s:%.29s", rail->prov, rail->dom);
    snprintf(rail->log_name, sizeof(rail->log_name), "%s", rail->name);
    rail->prov_hash = mdr_ofi_hash_str(rail->prov);
    rail->mr_mode = rail->info->domain_attr->mr_mode;
    rail->mr_key_size = rail->info->domain_attr->mr_key_size;
    rail->max_msg = rail->info->ep_attr->max_msg_size;
    rail->tx_size = rail->info->tx_attr->size ? rail->info->tx_attr->size : 256;
    /* fi_inject only where it completes in the call: shm places the
     * message in the peer's queue (or says -FI_EAGAIN), so nothing is
     * held and no completion is owed; elsewhere (rxm) an inject to a dead
     * peer is taken and lost silently, a completion is where it shows */
    if (rail->cfg.inject && strcmp(rail->prov, "shm") == 0) {
        rail->inject_max = rail->info->tx_attr->inject_size;
        if (rail->inject_max > MDR_OFI_INJECT_MAX)
            rail->inject_max = MDR_OFI_INJECT_MAX;
    }
    /* the short form (ofi.h): its CQ data must arrive whole */
    rail->short_form = rail->inject_max > 0 && rail->info->domain_attr->cq_data_size >= 8;
    if (rail->max_msg < rail->msg_max) {
        mdr_error("rail %s: the provider's largest message (%zu bytes) is smaller than a "
                  "slot (MADRAIL_SLOT_SIZE=%zu)", rail->name, rail->max_msg, rail->slot_size);
        st = MADRAIL_ERR_CONFIG;
        goto err;
    }
    if (rail->mr_key_size > 8) {
        mdr_error("rail %s: the provider's keys are %zu bytes (FI_MR_RAW), not supported",
                  rail->name, rail->mr_key_size);
        st = MADRAIL_ERR_CONFIG;
        goto err;
    }
    if (rail->mr_key_size == 0)
        rail->mr_key_size = 8;

    st = MADRAIL_ERR_IO;
    ret = fi_fabric(rail->info->fabric_attr, &rail->fabric, NULL);
    if (ret != 0) {
        mdr_error("rail %s: fi_fabric: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    ret = fi_domain(rail->fabric, rail->info, &rail->domain, NULL);
    if (ret != 0) {
        mdr_error("rail %s: fi_domain: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    memset(&av_attr, 0, sizeof(av_attr));
    av_attr.type = rail->info->domain_attr->av_type != FI_AV_UNSPEC
                       ? rail->info->domain_attr->av_type
                       : FI_AV_MAP;
    ret = fi_av_open(rail->domain, &av_attr, &rail->av, NULL);
    if (ret != 0) {
        mdr_error("rail %s: fi_av_open: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    memset(&cq_attr, 0, sizeof(cq_attr));
    cq_attr.format = FI_CQ_FORMAT_DATA;
    cq_attr.wait_obj = FI_WAIT_NONE;
    ret = fi_cq_open(rail->domain, &cq_attr, &rail->cq, NULL);
    if (ret != 0) {
        mdr_error("rail %s: fi_cq_open: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    ret = fi_endpoint(rail->domain, rail->info, &rail->ep, NULL);
    if (ret != 0) {
        mdr_error("rail %s: fi_endpoint: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    ret = fi_ep_bind(rail->ep, &rail->av->fid, 0);
    if (ret == 0)
        ret = fi_ep_bind(rail->ep, &rail->cq->fid, FI_TRANSMIT | FI_RECV);
    if (ret != 0) {
        mdr_error("rail %s: fi_ep_bind: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    ret = fi_enable(rail->ep);
    if (ret != 0) {
        mdr_error("rail %s: fi_enable: %s", rail->name, fi_strerror(-ret));
        goto err;
    }
    if (rail->multi_recv) {
        /* After fi_enable: shm 1.17 dereferences its receive context, which
         * it creates at enable, and crashes when this comes before. */
        size_t min_mrecv = rail->msg_max;
        ret = fi_setopt(&rail->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_mrecv,
                        sizeof(min_mrecv));
        if (ret != 0) {
            mdr_info("rail %s: FI_OPT_MIN_MULTI_RECV: %s; using single-message receive "
                     "buffers", rail->name, fi_strerror(-ret));
            rail->multi_recv = 0;
        }
    }
    st = mdr_ofi_rx_setup(rail);
    if (st != MADRAIL_OK)
        goto err;
    st = MADRAIL_ERR_IO;
    rail->name_len = sizeof(rail->name_buf);
    ret = fi_getname(&rail->ep->fid, rail->name_buf, &rail->name_len);
    if (ret != 0 || rail->name_len == 0 || rail->name_len > MDR_OFI_NAME_MAX) {
        mdr_error("rail %s: fi_getname: %s (%zu bytes, at most %d fit)", rail->name,
                  ret ? fi_strerror(-ret) : "ok", rail->name_len, MDR_OFI_NAME_MAX);
        goto err;
    }
    st = mdr_ofi_rx_post_all(rail);
    if (st != MADRAIL_OK)
        goto err;
    mdr_link_watch_init(&rail->lw, dev);
    if (mdr_ofi_prov_kernel_tcp(rail->prov)) {
        mdr_tcp_addr_t local;
        if (mdr_tcp_addr_of_sockaddr(rail->name_buf, rail->name_len, &local) == 0)
            mdr_tcp_diag_init(&rail->tcpdiag, &local);
    }
    mdr_ofi_profile(rail);
    if (strcmp(rail->prov, "shm") == 0) {
        pthread_mutex_lock(&mdr_ofi_shm_lock);
        mdr_ofi_shm_live++;
        pthread_mutex_unlock(&mdr_ofi_shm_lock);
        rail->shm_counted = 1;
    }
    {
        char addr[64] = "";
        size_t alen = sizeof(addr);
        fi_av_straddr(rail->av, rail->name_buf, addr, &alen);
        mdr_debug("rail %s: address %s, mr_mode %#llx, tx %zu, puts complete by "
                  "%s, %s receives, profile %.1f us %.0f MB/s",
                  rail->name, addr, (unsigned long long)rail->mr_mode, rail->tx_size, rail->put_delivery ? "FI_DELIVERY_COMPLETE" : "FI_ORDER_SAW",
                  rail->multi_recv ? "FI_MULTI_RECV" : "single-buffer", rail->latency_us,
                  rail->bandwidth_mbs);
    }
    *rail_p = rail;
    return MADRAIL_OK;

err:
    mdr_ofi_close(rail);
    return st;
}

static void mdr_ofi_reap(mdr_rail_t *rail)
{
    mdr_rail_base_reap(&rail->base);
}

/* Closing every libfabric object of a rail and freeing it. */
static void mdr_ofi_teardown(mdr_rail_t *rail)
{
    mdr_list_t *l;

    /* registrations bound to the endpoint go before it */
    mdr_ofi_mem_cleanup(rail);
    if (rail->ep != NULL)
        fi_close(&rail->ep->fid);
    mdr_ofi_ops_cleanup(rail);
    while ((l = mdr_list_pop_head(&rail->txb_slabs)) != NULL) {
        mdr_ofi_txslab_t *slab = mdr_container_of(l, mdr_ofi_txslab_t, link);
        if (slab->mr != NULL)
            fi_close(&slab->mr->fid);
        free(slab->mem);
        free(slab);
    }
    if (rail->rx_mr != NULL)
        fi_close(&rail->rx_mr->fid);
    if (rail->cq != NULL)
        fi_close(&rail->cq->fid);
    if (rail->av != NULL)
        fi_close(&rail->av->fid);
    if (rail->domain != NULL)
        fi_close(&rail->domain->fid);
    if (rail->fabric != NULL)
        fi_close(&rail->fabric->fid);
    if (rail->info != NULL)
        fi_freeinfo(rail->info);
    free(rail->rx_mem);
    free(rail->rxb);
    free(rail->rx_scratch);
    free(rail->short_eps);
    mdr_ofi_hs_cleanup(rail); /* session secrets wiped */
    while ((l = mdr_list_pop_head(&rail->peer_list)) != NULL)
        free(mdr_container_of(l, mdr_ofi_peer_t, link));
    if (rail->peers.cap > 0)
        mdr_hash_cleanup(&rail->peers);
    mdr_rail_base_cleanup(&rail->base);
    mdr_tcp_diag_cleanup(&rail->tcpdiag);
    mdr_link_watch_cleanup(&rail->lw);
    mdr_cfg_release(&mdr_ofi_cfg_table, &rail->cfg);
    free(rail);
}

/* Parks a closed shm rail while other shm rails of the process are open;
 * returns 1 when it did.  When the last one closes, every parked rail is
 * torn down (before it, since they may point into its region). */
static int mdr_ofi_shm_park(mdr_rail_t *rail)
{
    mdr_list_t parked, *l;

    mdr_list_init(&parked);
    pthread_mutex_lock(&mdr_ofi_shm_lock);
    if (mdr_ofi_shm_live > 0)
        mdr_ofi_shm_live--;
    if (mdr_ofi_shm_live > 0) {
        mdr_list_push_tail(&mdr_ofi_shm_parked, &rail->park_link);
        pthread_mutex_unlock(&mdr_ofi_shm_lock);
        mdr_debug("rail %s: closed; its endpoint stays open while other shm rails of this "
                  "process may still point into its region", rail->log_name);
        return 1;
    }
    while ((l = mdr_list_pop_head(&mdr_ofi_shm_parked)) != NULL)
        mdr_list_push_tail(&parked, l);
    pthread_mutex_unlock(&mdr_ofi_shm_lock);
    while ((l = mdr_list_pop_head(&parked)) != NULL)
        mdr_ofi_teardown(mdr_container_of(l, mdr_rail_t, park_link));
    return 0;
}

static void mdr_ofi_close(mdr_rail_t *rail)
{
    mdr_list_t *l;
    double deadline;

    if (rail == NULL || mdr_drv_close_refused(rail->base.in_progress, rail->log_name))
        return;
    /* Tell every peer that knows us, then give the goodbyes a moment to
     * leave (the provider may need progress to send them). */
    mdr_list_for_each(l, &rail->base.eps_all) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, base.link);
        if (!ep->failed && !ep->peer_closed)
            mdr_ofi_send_bye(ep, MDR_OFI_BYE_CLOSED);
    }
    rail->closing = 1;
    while (!mdr_list_empty(&rail->base.eps_all))
        mdr_ofi_ep_destroy(mdr_container_of(rail->base.eps_all.next, mdr_ep_t, base.link));
    if (rail->cq != NULL && rail->byes_inflight > 0) {
        deadline = mdr_time_sec() + MDR_OFI_CLOSE_WAIT;
        while (rail->byes_inflight > 0 && mdr_time_sec() < deadline)
            mdr_ofi_poll_cq(rail, 1);
    }
    mdr_ofi_reap(rail);
    mdr_ofi_mem_cleanup(rail); /* the core's memory may go once we return */
    if (rail->shm_counted && mdr_ofi_shm_park(rail))
        return;
    mdr_ofi_teardown(rail);
}

static void mdr_ofi_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "%s", rail->name);
    attr->caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_HW |
                 (rail->put_delivery ? MDR_RAIL_CAP_PUT_REMOTE : 0);
    /* A provider that wants no registration of local buffers (FI_MR_LOCAL
     * unset: tcp, shm, udp, sockets) keeps registrations in a software
     * table: registering per transfer costs about a microsecond, less than
     * the core's cache bookkeeping, and put() takes unregistered sources. */
    if (!(rail->mr_mode & FI_MR_LOCAL))
        attr->caps |= MDR_RAIL_CAP_REG_CHEAP;
    attr->latency_us = rail->latency_us;
    attr->bandwidth_mbs = rail->bandwidth_mbs;
    attr->max_ctrl = rail->slot_size;
    attr->addr_len = MDR_OFI_ADDR_HDR + rail->name_len;
    attr->max_rkey = MDR_OFI_RKEY_LEN;
}

static madrail_status_t mdr_ofi_addr_pack(mdr_rail_t *rail, void *buf, size_t len)
{
    uint8_t *p = buf;
    uint32_t mark = MDR_OFI_ADDR_MARK;
    uint16_t nlen, zero = 0;

    if (rail == NULL || buf == NULL || len < MDR_OFI_ADDR_HDR + rail->name_len)
        return MADRAIL_ERR_INVALID;
    nlen = (uint16_t)rail->name_len;
    memcpy(p, &mark, 4);
    memcpy(p + 4, &rail->prov_hash, 4);
    memcpy(p + 8, &nlen, 2);
    memcpy(p + 10, &zero, 2);
    memcpy(p + MDR_OFI_ADDR_HDR, rail->name_buf, rail->name_len);
    return MADRAIL_OK;
}

/* ---------------- progress ---------------- */

static void mdr_ofi_handle(mdr_rail_t *rail, const struct fi_cq_data_entry *e, int quiet)
{
    mdr_ofi_ctx_t *ctx = e->op_context;

    if (ctx == NULL)
        return;
    if (ctx->kind == MDR_OFI_OP_RECV) {
        mdr_ofi_rxbuf_t *rxb = (mdr_ofi_rxbuf_t *)ctx;
        if ((e->flags & FI_RECV) && e->len > 0 && !quiet) {
            const uint8_t *data = rail->multi_recv ? e->buf : rxb->buf;
            if (data != NULL && (e->flags & FI_REMOTE_CQ_DATA))
                mdr_ofi_recv_short(rail, data, e->len, e->data);
            else if (data != NULL)
                mdr_ofi_recv_msg(rail, data, e->len);
        }
        if (!rail->multi_recv || (e->flags & FI_MULTI_RECV))
            mdr_ofi_repost(rail, rxb);
        return;
    }
    mdr_ofi_op_done(rail, (mdr_ofi_op_t *)ctx, MADRAIL_OK, NULL);
}

static void mdr_ofi_handle_err(mdr_rail_t *rail, int quiet)
{
    struct fi_cq_err_entry err;
    char buf[256];
    const char *prov_str;
    mdr_ofi_ctx_t *ctx;
    ssize_t ret;

    memset(&err, 0, sizeof(err));
    ret = fi_cq_readerr(rail->cq, &err, 0);
    if (ret != 1)
        return;
    ctx = err.op_context;
    prov_str = fi_cq_strerror(rail->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    if (ctx == NULL) {
        mdr_warn("rail %s: completion error without context: %s (%s)", rail->log_name,
                 fi_strerror(err.err), prov_str ? prov_str : "");
        return;
    }
    if (ctx->kind == MDR_OFI_OP_RECV) {
        mdr_ofi_rxbuf_t *rxb = (mdr_ofi_rxbuf_t *)ctx;
        if (err.err != FI_ECANCELED && !quiet)
            mdr_warn("rail %s: receive failed: %s (%s)", rail->log_name, fi_strerror(err.err),
                     prov_str ? prov_str : "");
        if (!rail->multi_recv || (err.flags & FI_MULTI_RECV) || err.err == FI_ECANCELED ||
            err.err == FI_ETRUNC)
            mdr_ofi_repost(rail, rxb);
        return;
    }
    {
        char why[320];
        snprintf(why, sizeof(why), "%s (%s)", fi_strerror(err.err), prov_str ? prov_str : "");
        mdr_ofi_op_done(rail, (mdr_ofi_op_t *)ctx, MADRAIL_ERR_RAIL_DOWN, why);
    }
}

MDR_HOT int mdr_ofi_poll_cq(mdr_rail_t *rail, int quiet)
{
    struct fi_cq_data_entry ent[MDR_OFI_CQ_BATCH];
    ssize_t n;
    int count = 0, i;

    while (count < MDR_OFI_CQ_BUDGET) {
        n = fi_cq_read(rail->cq, ent, MDR_OFI_CQ_BATCH);
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            mdr_ofi_handle_err(rail, quiet);
            count++;
            continue;
        }
        if (n < 0) {
            mdr_error("rail %s: fi_cq_read: %s", rail->log_name, fi_strerror((int)-n));
            break;
        }
        for (i = 0; i < n; i++)
            mdr_ofi_handle(rail, &ent[i], quiet);
        count += (int)n;
        if (n < MDR_OFI_CQ_BATCH)
            break;
    }
    return count;
}

/* The rail's link went down (linkwatch.h): every ep is fenced (what the
 * provider holds must never land later) and fails now, as after a
 * provider error, instead of a rail timeout later. */
static void mdr_ofi_link_fail(mdr_rail_ep_t *b, const char *why)
{
    mdr_ep_t *ep = mdr_container_of(b, mdr_ep_t, base);

    if (!ep->failed)
        mdr_ofi_ep_fence(ep);
    mdr_ofi_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "%s", why);
}

MDR_HOT static int mdr_ofi_progress(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int count;

    if (rail == NULL || rail->base.in_progress)
        return 0;
    rail->base.in_progress = 1;
    if (rail->lw.fd >= 0 && mdr_link_watch_poll(&rail->lw, mdr_time_coarse_ns()))
        mdr_link_watch_fail_eps(&rail->lw, &rail->base, rail->log_name, mdr_ofi_link_fail);
    while ((l = mdr_list_pop_head(&rail->rx_repost)) != NULL) {
        mdr_ofi_rxbuf_t *rxb = mdr_container_of(l, mdr_ofi_rxbuf_t, link);
        if (mdr_ofi_post_rx(rail, rxb) != MADRAIL_OK) {
            mdr_list_push_head(&rail->rx_repost, &rxb->link);
            break;
        }
    }
    count = mdr_ofi_poll_cq(rail, 0);
    if (rail->cfg.timeout > 0)
        mdr_ofi_check_timeouts(rail);
    if (rail->npend > 0 || rail->hs_waiting > 0)
        mdr_ofi_hs_tick(rail);
    count += mdr_ofi_report(rail);
    mdr_ofi_reap(rail);
    rail->base.in_progress = 0;
    return count;
}

const mdr_rail_ops_t mdr_ofi_ops = {
    .size = MDR_RAIL_OPS_SIZE,
    .caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_PUT_HW | MDR_RAIL_CAP_REG_CHEAP |
            MDR_RAIL_CAP_PUT_REMOTE,
    .name = "ofi",
    .open = mdr_ofi_open,
    .close = mdr_ofi_close,
    .query = mdr_ofi_query,
    .addr_pack = mdr_ofi_addr_pack,
    .ep_create = mdr_ofi_ep_create,
    .ep_destroy = mdr_ofi_ep_destroy,
    .ep_backlog = mdr_ofi_ep_backlog,
    .ep_unsent = mdr_ofi_ep_unsent,
    .ep_idle = mdr_ofi_ep_idle,
    .ep_link_quiet = mdr_ofi_ep_link_quiet,
    .ep_fence = mdr_ofi_ep_fence,
    .ep_link_rto = mdr_ofi_ep_link_rto,
    .ctrl_send = mdr_ofi_ctrl_send,
    .mem_reg = mdr_ofi_mem_reg,
    .mem_dereg = mdr_ofi_mem_dereg,
    .rkey_pack = mdr_ofi_rkey_pack,
    .put = mdr_ofi_put,
    .progress = mdr_ofi_progress,
    .flush = mdr_rail_noop_flush,
};
