/*
 * The context: configuration, rails, addresses and statistics.  Rails are
 * opened once at init from MADRAIL_RAILS; madrail_peer_add only parses a
 * peer's address and records it (peer.c connects on first traffic).
 *
 * Address format (what madrail_context_address packs):
 *   u32 magic 'MDRA' | u16 version | u16 byte-order mark | u64 uuid |
 *   u8 nrails | then per rail: char driver[8] | u16 len | len bytes
 * Rail i of one process pairs with rail i of the other when both use the
 * same driver; a rail the other side lacks is not used with that peer.
 *
 * The job key lives here and nowhere else: the drivers get a pointer to it
 * and read it at each handshake, so replacing it (set_job_key, allowed
 * until the first peer exists) needs no call into them.  The address does
 * not carry it: addresses travel through the process manager and may be
 * printed; the key is only ever sent in a rail handshake.
 */
#include "mdr_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/core.h"
#include "core/discover.h"
#include "util/clock.h"

#define MDR_ADDR_MAGIC 0x4152444du /* "MDRA" */
#define MDR_ADDR_VERSION 1
#define MDR_ADDR_BOM 0x0102

#define CFG_ENTRY(...) MDR_CFG_ENTRY(mdr_core_config_t, __VA_ARGS__)

static const mdr_cfg_entry_t core_entries[] = {
    CFG_ENTRY("MADRAIL_RAILS", MDR_CFG_STRING, "auto", 1, 0, rails,
              "Comma-separated rails, each driver[:spec]: tcp:lo, tcp:eth1, tcp:10.0.0.1, "
              "loop:fabric;delay=2, shm. An empty element, a ':' with nothing after it, or a "
              "device that does not exist is an error. auto (or empty): discover the NICs "
              "that are up, near the process first, fastest first, weighted by link speed "
              "(MADRAIL_AUTO_*; madrail_info -r shows the choice)."),
    CFG_ENTRY("MADRAIL_SLOT_SIZE", MDR_CFG_SIZE, "8k", 256, 1024 * 1024, slot_size,
              "Size of one control-message slot; messages up to the slot payload (slot minus "
              "a 48-byte header) go eagerly in one slot."),
    CFG_ENTRY("MADRAIL_CREDITS", MDR_CFG_UINT, "64", 1, 32768, credits,
              "Control slots per peer per rail a sender may fill before the receiver returns "
              "credits (6 more are reserved: credit returns and PING/PONG). At most 32768: a "
              "message re-sent after its rail failed names its index there modulo 2^16."),
    CFG_ENTRY("MADRAIL_RNDV_THRESH", MDR_CFG_SIZE, "64k", 1, 1ull << 40, rndv_thresh,
              "Messages of this size and larger use the remote-write rendezvous (striped over "
              "rails); smaller ones are sent as slot-sized fragments."),
    CFG_ENTRY("MADRAIL_STRIPE_MIN_CHUNK", MDR_CFG_SIZE, "16k", 1, 1ull << 40, stripe_min,
              "No stripe chunk is smaller than this; short messages use fewer rails."),
    CFG_ENTRY("MADRAIL_STRIPE_ALIGN", MDR_CFG_SIZE, "4k", 1, 1 << 30, stripe_align,
              "Alignment of stripe chunk edges (a power of two, usually the page size)."),
    CFG_ENTRY("MADRAIL_RAIL_WEIGHTS", MDR_CFG_STRING, "", 1, 0, rail_weights,
              "Striping weights, one per rail in MADRAIL_RAILS order (e.g. 3,1). Empty: the "
              "drivers' bandwidth profiles."),
    CFG_ENTRY("MADRAIL_RNDV_RECV_FIRST", MDR_CFG_BOOL, "1", 1, 0, recv_first,
              "Let a receive posted with a known source send its buffer address first "
              "(receiver-first CTS), saving the sender's RTS round trip."),
    CFG_ENTRY("MADRAIL_RCACHE", MDR_CFG_BOOL, "1", 1, 0, rcache,
              "Cache memory registrations on rails where registering is expensive."),
    CFG_ENTRY("MADRAIL_RCACHE_MAX", MDR_CFG_UINT, "1024", 1, 1u << 30, rcache_max,
              "Most cached registrations kept per rail."),
    CFG_ENTRY("MADRAIL_PACK_INLINE_MAX", MDR_CFG_SIZE, "1k", 0, 1024 * 1024, pack_inline,
              "Pack API: pieces up to this size travel inside the message head."),
    CFG_ENTRY("MADRAIL_RECV_MEM_MAX", MDR_CFG_SIZE, "256m", 64 * 1024, 1ull << 50, recv_mem_max,
              "Bytes held per peer for its messages that no receive has taken yet (arrived "
              "before the receive was posted, or ahead of an earlier message). A peer that "
              "passes it is failed with an error naming this variable: data it already sent "
              "cannot be refused without losing it. 256m keeps about 4,000 unexpected messages "
              "just below MADRAIL_RNDV_THRESH from each peer (larger ones wait as ~160-byte "
              "rendezvous envelopes); out-of-order data is bounded by the credits anyway."),
    CFG_ENTRY("MADRAIL_RECV_MEM_TOTAL_MAX", MDR_CFG_SIZE, "1g", 64 * 1024, 1ull << 50,
              recv_mem_total_max,
              "Bytes held for all peers together for their messages that no receive has taken "
              "yet (MADRAIL_RECV_MEM_MAX is per peer). The peer whose message would pass it is "
              "failed, as at the per-peer cap. 1g: four peers at the per-peer default, or "
              "about 16,000 unexpected messages just below MADRAIL_RNDV_THRESH; without it "
              "every new peer brings a cap of its own."),
    CFG_ENTRY("MADRAIL_JOB_SIZE", MDR_CFG_UINT, "0", 0, 1u << 31, job_size,
              "Processes in the job, if the launcher gives no process manager that "
              "madrail_pmi_wireup or the MPICH netmod read it from "
              "(madrail_context_set_job_size); 0: unknown. Bounds the peers that "
              "connections may create (MADRAIL_PEER_SLACK)."),
    CFG_ENTRY("MADRAIL_PEER_SLACK", MDR_CFG_UINT, "32", 0, 1u << 31, peer_slack,
              "With the job size known: a connection from a process we do not know yet is "
              "refused while the context has the job size plus this many peers."),
    CFG_ENTRY("MADRAIL_ADAPT", MDR_CFG_BOOL, "1", 1, 0, adapt,
              "Measure each rail's delivered put throughput per peer and stripe by it once "
              "enough samples exist; small messages take the rail with the shortest expected "
              "completion. 0: static weights (profile or MADRAIL_RAIL_WEIGHTS, which wins "
              "anyway) and the lowest-latency idle rail."),
    CFG_ENTRY("MADRAIL_ADAPT_GAIN", MDR_CFG_DOUBLE, "0.1", 0.01, 1, adapt_gain,
              "Weight of a new throughput sample in the moving average (after a median of 3)."),
    CFG_ENTRY("MADRAIL_ADAPT_PROBE", MDR_CFG_UINT, "32", 0, 1u << 30, adapt_probe,
              "Every this many stripe plans to a peer, a rail whose measured share is too "
              "small for a chunk gets one minimum chunk, so a rail that sped up is noticed; "
              "0: never."),
    CFG_ENTRY("MADRAIL_ADAPT_SAMPLE", MDR_CFG_TIME, "5ms", 0, 10, adapt_sample,
              "Busy time (puts in flight) gathered into one throughput sample."),
    CFG_ENTRY("MADRAIL_PUT_AHEAD", MDR_CFG_TIME, "50ms", 0, 10, put_ahead,
              "With adaptation on (MADRAIL_ADAPT=1, no MADRAIL_RAIL_WEIGHTS, more than one "
              "rail), a rail's driver is handed at most this much put work ahead, in time at "
              "the rail's measured speed (one put always); the rest of a stripe waits in the "
              "core and goes to whichever rail of its transfer would finish it first, so work "
              "queued on a rail that slows down is small and the others take the rest. 0: "
              "every put goes to its driver at once."),
    CFG_ENTRY("MADRAIL_RAIL_TIMEOUT", MDR_CFG_TIME, "1s", 0, 3600, rail_timeout,
              "A rail to a peer that gives no sign of life this long while something waits on "
              "the peer is taken down for it (logged once, with the reason): idle rails are "
              "probed with PING/PONG every quarter of it, any message received counts, and "
              "so do the transport's acknowledgements (a busy slow link is alive, a black "
              "hole is not). Only on drivers that report acknowledgements (tcp, loop, and "
              "ofi and ucx over kernel TCP); where the driver knows its path's retransmission "
              "timeout, the upper bound of the timeout derived from it "
              "(MADRAIL_RAIL_TIMEOUT_MIN). 0: off, driver errors only. Must exceed how long "
              "the network may stall."),
    CFG_ENTRY("MADRAIL_RAIL_TIMEOUT_MIN", MDR_CFG_TIME, "250ms", 0, 3600, rail_timeout_min,
              "On a rail whose driver knows its path's retransmission timeout (tcp, and ofi "
              "and ucx over kernel TCP) the rail timeout is 1.25 times that timeout (TCP's "
              "RTO without back-off: 200 ms at least on Linux), at least this and at most "
              "MADRAIL_RAIL_TIMEOUT: a black hole is found in about a quarter of a second "
              "(a stall of 257-287 ms measured) instead of MADRAIL_RAIL_TIMEOUT. Raise it "
              "where the network may stall longer than this without failing. 0: off, always "
              "MADRAIL_RAIL_TIMEOUT."),
    CFG_ENTRY("MADRAIL_RAIL_REJOIN", MDR_CFG_TIME, "1s", 0, 3600, rail_rejoin,
              "A rail that went down to a peer (its connection failed or it timed out) is "
              "dialled again in the background, by the side with the smaller context id, "
              "and carries traffic again once the peer answers on the new connection. The "
              "wait between attempts doubles from an eighth of this value up to it: a link "
              "that returns is back in use within about this long. 0: a rail that went down "
              "stays down. A rail closed because the peer sent a malformed message is never "
              "dialled again."),
    CFG_ENTRY("MADRAIL_RAIL_FLAP", MDR_CFG_TIME, "10s", 0, 3600, rail_flap,
              "A rail that goes down again less than this long after it came back up is "
              "flapping: it is held down before it is dialled again, for MADRAIL_RAIL_REJOIN "
              "times 2 to the number of flaps in a row, at most MADRAIL_RAIL_HOLD_MAX (an "
              "event 'held down' says how long). A rail up for longer than this starts "
              "afresh. 0: no hold-down."),
    CFG_ENTRY("MADRAIL_RAIL_HOLD_MAX", MDR_CFG_TIME, "60s", 0, 3600, rail_hold_max,
              "The longest hold-down of a flapping rail (MADRAIL_RAIL_FLAP)."),
    CFG_ENTRY("MADRAIL_STATS", MDR_CFG_BOOL, "0", 1, 0, stats,
              "Print per-rail statistics to stderr at finalize, and per peer each rail's "
              "measured throughput and stripe weight."),
    CFG_ENTRY("MADRAIL_LOG_LEVEL", MDR_CFG_STRING, "warn", 1, 0, log_level,
              "Log level: error, warn, info, debug, trace."),
    CFG_ENTRY("MADRAIL_JOB_KEY", MDR_CFG_STRING, "", 1, 0, job_key,
              "The job's key, 32 hex digits (16 random bytes, not all zero), the same in every "
              "process of the job: rail handshakes without it are refused. Empty: the "
              "application's key (madrail_context_params_t.job_key) or a random one, replaced "
              "by rank 0's through the process manager at madrail_pmi_wireup and in the MPICH "
              "netmod. Secret: see docs/security.md."),
};

const mdr_cfg_table_t mdr_core_cfg_table = MDR_CFG_TABLE("core", core_entries);

static uint64_t mdr_make_uuid(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = mdr_time_ns() ^ ((uint64_t)getpid() << 32);
    return v ? v : 1;
}

static int mdr_key_is_zero(const uint8_t *key)
{
    unsigned acc = 0;
    int i;

    for (i = 0; i < MADRAIL_JOB_KEY_LEN; i++)
        acc |= key[i];
    return acc == 0;
}

static int mdr_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* MADRAIL_JOB_KEY: exactly 32 hex digits, not all zero.  The error names
 * what is wrong, never the value (a near miss would show most of the key). */
static madrail_status_t mdr_job_key_parse(const char *text, uint8_t *key)
{
    size_t len = strlen(text), i;
    uint8_t k[MADRAIL_JOB_KEY_LEN];

    if (len != 2 * MADRAIL_JOB_KEY_LEN) {
        mdr_error("MADRAIL_JOB_KEY: %zu characters, expected %d hex digits (16 bytes)", len,
                  2 * MADRAIL_JOB_KEY_LEN);
        return MADRAIL_ERR_CONFIG;
    }
    for (i = 0; i < len; i += 2) {
        int hi = mdr_hexval(text[i]), lo = mdr_hexval(text[i + 1]);
        if (hi < 0 || lo < 0) {
            mdr_error("MADRAIL_JOB_KEY: character %zu is not a hex digit (expected %d hex "
                      "digits)",
                      hi < 0 ? i + 1 : i + 2, 2 * MADRAIL_JOB_KEY_LEN);
            memset(k, 0, sizeof(k));
            return MADRAIL_ERR_CONFIG;
        }
        k[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    if (mdr_key_is_zero(k)) {
        mdr_error("MADRAIL_JOB_KEY: all zero; use 16 random bytes (e.g. od -An -tx1 -N16 "
                  "/dev/urandom | tr -d ' ')");
        return MADRAIL_ERR_CONFIG;
    }
    memcpy(key, k, sizeof(k));
    memset(k, 0, sizeof(k));
    return MADRAIL_OK;
}

/* The key from params, MADRAIL_JOB_KEY, or random, in that order. */
static madrail_status_t mdr_job_key_init(mdr_ctx_t *ctx, const madrail_context_params_t *params)
{
    madrail_status_t st = MADRAIL_OK;
    size_t n;

    if (params && params->job_key) {
        if (mdr_key_is_zero(params->job_key)) {
            mdr_error("madrail_context_params_t.job_key is all zero");
            return MADRAIL_ERR_INVALID;
        }
        memcpy(ctx->job_key, params->job_key, MADRAIL_JOB_KEY_LEN);
        ctx->job_key_origin = MADRAIL_JOB_KEY_PARAMS;
    } else if (ctx->cfg.job_key && ctx->cfg.job_key[0]) {
        st = mdr_job_key_parse(ctx->cfg.job_key, ctx->job_key);
        ctx->job_key_origin = MADRAIL_JOB_KEY_ENV;
    } else {
        if (getrandom(ctx->job_key, MADRAIL_JOB_KEY_LEN, 0) != MADRAIL_JOB_KEY_LEN) {
            mdr_error("getrandom for the job key: %m");
            return MADRAIL_ERR_IO;
        }
        if (mdr_key_is_zero(ctx->job_key))
            ctx->job_key[0] = 1;
        ctx->job_key_origin = MADRAIL_JOB_KEY_RANDOM;
    }
    /* the configuration copy of the key is not needed any more */
    if (ctx->cfg.job_key)
        for (n = strlen(ctx->cfg.job_key); n > 0; n--)
            ((volatile char *)ctx->cfg.job_key)[n - 1] = '\0';
    return st;
}

madrail_status_t madrail_context_job_key(madrail_context_t ctx, uint8_t *key,
                                         madrail_job_key_origin_t *origin_p)
{
    if (!ctx || !key)
        return MADRAIL_ERR_INVALID;
    memcpy(key, ctx->job_key, MADRAIL_JOB_KEY_LEN);
    if (origin_p)
        *origin_p = ctx->job_key_origin;
    return MADRAIL_OK;
}

madrail_status_t madrail_context_set_job_size(madrail_context_t ctx, uint32_t size)
{
    if (!ctx)
        return MADRAIL_ERR_INVALID;
    if (size == 0) {
        mdr_error("madrail_context_set_job_size: a job of 0 processes");
        return MADRAIL_ERR_INVALID;
    }
    ctx->job_size = size;
    return MADRAIL_OK;
}

madrail_status_t madrail_context_set_job_key(madrail_context_t ctx, const void *key, size_t len)
{
    if (!ctx || !key)
        return MADRAIL_ERR_INVALID;
    if (len != MADRAIL_JOB_KEY_LEN) {
        mdr_error("madrail_context_set_job_key: a key of %zu bytes (a job key has %d)", len,
                  MADRAIL_JOB_KEY_LEN);
        return MADRAIL_ERR_INVALID;
    }
    if (mdr_key_is_zero(key)) {
        mdr_error("madrail_context_set_job_key: the key is all zero");
        return MADRAIL_ERR_INVALID;
    }
    if (ctx->npeers > ctx->npeer_free) {
        mdr_error("madrail_context_set_job_key: the context already has %u peer(s); the key "
                  "can only be replaced before the first one",
                  ctx->npeers - ctx->npeer_free);
        return MADRAIL_ERR_INVALID;
    }
    memcpy(ctx->job_key, key, MADRAIL_JOB_KEY_LEN);
    ctx->job_key_origin = MADRAIL_JOB_KEY_SET;
    return MADRAIL_OK;
}

static void mdr_close_rails(mdr_ctx_t *ctx)
{
    int i;
    for (i = ctx->nrails - 1; i >= 0; i--) {
        if (ctx->rails[i].rcache)
            mdr_rcache_destroy(ctx->rails[i].rcache);
        ctx->rails[i].ops->close(ctx->rails[i].rail);
    }
    ctx->nrails = 0;
}

typedef struct mdr_name_list {
    char *buf;
    size_t len, off;
} mdr_name_list_t;

static void mdr_name_list_add(const mdr_rail_ops_t *ops, void *arg)
{
    mdr_name_list_t *l = arg;
    int n;
    if (l->off >= l->len)
        return;
    n = snprintf(l->buf + l->off, l->len - l->off, "%s%s", l->off ? ", " : "", ops->name);
    if (n > 0)
        l->off += (size_t)n;
}

/* "tcp, loop, shm, ucx": the drivers built into this library. */
static void mdr_built_drivers(char *buf, size_t len)
{
    mdr_name_list_t l = {buf, len, 0};
    buf[0] = '\0';
    mdr_rail_foreach(mdr_name_list_add, &l);
}

/*
 * Open the rails of rails_list.  auto_w (MADRAIL_RAILS=auto) holds one
 * discovered weight per listed rail; a discovered rail that fails to open
 * is then skipped with a warning rather than failing the context, and the
 * weights of the rails that opened are written to weights_p[rail index].
 */
static madrail_status_t mdr_open_rails(mdr_ctx_t *ctx, const char *rails_list,
                                       const double *auto_w, double *weights_p)
{
    madrail_status_t st = MADRAIL_OK;
    char *list, *tok, *next;
    mdr_rail_params_t params;
    int ntok = 0;

    list = strdup(rails_list);
    if (!list)
        return MADRAIL_ERR_NOMEM;
    memset(&params, 0, sizeof(params));
    params.uuid = ctx->uuid;
    params.upcalls = &ctx->upcalls;
    params.slot_size = ctx->cfg.slot_size;
    params.slots = ctx->cfg.credits + MDR_RESERVED_SLOTS;
    params.overrides = ctx->overrides;
    params.job_key = ctx->job_key;
    /* stripes over more than one rail follow measured put throughput */
    params.measure_puts = ctx->cfg.adapt && !(ctx->cfg.rail_weights && ctx->cfg.rail_weights[0]) &&
                          strchr(rails_list, ',') != NULL;
    /* failover re-sends a lost FIN only for puts placed at the target */
    params.failover = strchr(rails_list, ',') != NULL;

    /* Split by hand, not with strtok: it skips empty elements, and
     * "tcp:lo,,tcp:lo" or a trailing comma is a typing mistake to report,
     * not a list of fewer rails. */
    for (tok = list; tok; tok = next, ntok++) {
        char *spec, *colon, *end;
        const mdr_rail_ops_t *ops;
        mdr_rail_slot_t *rs;

        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        while (*tok == ' ' || *tok == '\t')
            tok++;
        end = tok + strlen(tok);
        while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (*tok == '\0') {
            mdr_error("MADRAIL_RAILS=%s: rail %d of the list is empty (two commas in a row, or "
                      "a comma at the start or the end)",
                      ctx->cfg.rails, ntok + 1);
            st = MADRAIL_ERR_CONFIG;
            goto err_close;
        }
        if (ctx->nrails == MDR_MAX_RAILS) {
            mdr_error("MADRAIL_RAILS=%s: more than %d rails", ctx->cfg.rails, MDR_MAX_RAILS);
            st = MADRAIL_ERR_CONFIG;
            goto err_close;
        }
        colon = strchr(tok, ':');
        spec = colon ? colon + 1 : tok + strlen(tok);
        if (colon && *spec == '\0') {
            mdr_error("MADRAIL_RAILS=%s: rail spec %s: nothing after ':' (name the device, "
                      "e.g. tcp:eth1, or leave the ':' out where the driver has a default)",
                      ctx->cfg.rails, tok);
            st = MADRAIL_ERR_CONFIG;
            goto err_close;
        }
        if (colon)
            *colon = '\0';
        ops = mdr_rail_find(tok);
        if (!ops) {
            char built[128];
            mdr_built_drivers(built, sizeof(built));
            mdr_error("MADRAIL_RAILS=%s: unknown driver '%s' (built: %s)", ctx->cfg.rails, tok,
                      built);
            st = MADRAIL_ERR_CONFIG;
            goto err_close;
        }
        rs = &ctx->rails[ctx->nrails];
        memset(rs, 0, sizeof(*rs));
        rs->ops = ops;
        rs->ctx = ctx;
        rs->index = ctx->nrails;
        params.rail_cookie = rs;
        st = ops->open(spec, &params, &rs->rail);
        if (st != MADRAIL_OK && auto_w) {
            mdr_warn("MADRAIL_RAILS=%s: cannot open discovered rail %s:%s: %s; skipped",
                     ctx->cfg.rails, tok, spec, madrail_status_str(st));
            st = MADRAIL_OK;
            continue;
        }
        if (st != MADRAIL_OK) {
            mdr_error("MADRAIL_RAILS=%s: cannot open rail %s:%s: %s", ctx->cfg.rails, tok,
                      spec, madrail_status_str(st));
            goto err_close;
        }
        if (auto_w)
            weights_p[ctx->nrails] = auto_w[ntok];
        ops->query(rs->rail, &rs->attr);
        ctx->nrails++;
        if (rs->attr.max_ctrl < ctx->cfg.slot_size) {
            mdr_error("rail %s carries control messages of at most %zu bytes, less than "
                      "MADRAIL_SLOT_SIZE=%zu",
                      rs->attr.name, rs->attr.max_ctrl, ctx->cfg.slot_size);
            st = MADRAIL_ERR_CONFIG;
            goto err_close;
        }
        st = mdr_rcache_create(ops, rs->rail, ctx->cfg.rcache, ctx->cfg.rcache_max,
                               &rs->rcache);
        if (st != MADRAIL_OK)
            goto err_close;
    }
    if (ctx->nrails == 0) {
        mdr_error("MADRAIL_RAILS=%s: no rail", ctx->cfg.rails);
        st = MADRAIL_ERR_CONFIG;
        goto err_close;
    }
    free(list);
    return MADRAIL_OK;

err_close:
    mdr_close_rails(ctx);
    free(list);
    return st;
}

static void mdr_ctx_wipe_key(mdr_ctx_t *ctx)
{
    volatile uint8_t *k = ctx->job_key;
    int i;

    for (i = 0; i < MADRAIL_JOB_KEY_LEN; i++)
        k[i] = 0;
}

/* auto_w: discovered weights per rail (MADRAIL_RAILS=auto), or NULL. */
static madrail_status_t mdr_set_weights(mdr_ctx_t *ctx, const double *auto_w)
{
    double w[MDR_MAX_RAILS];
    const char *why = NULL;
    int i, j, n;

    if (ctx->cfg.rail_weights && ctx->cfg.rail_weights[0]) {
        n = mdr_stripe_parse_weights(ctx->cfg.rail_weights, w, MDR_MAX_RAILS, &why);
        if (n < 0) {
            mdr_error("MADRAIL_RAIL_WEIGHTS=%s: %s", ctx->cfg.rail_weights, why);
            return MADRAIL_ERR_CONFIG;
        }
        if (n != ctx->nrails) {
            mdr_error("MADRAIL_RAIL_WEIGHTS=%s: %d weights for %d rails (MADRAIL_RAILS=%s)",
                      ctx->cfg.rail_weights, n, ctx->nrails, ctx->cfg.rails);
            return MADRAIL_ERR_CONFIG;
        }
        for (i = 0; i < n; i++)
            ctx->rails[i].weight = w[i];
    } else if (auto_w) {
        for (i = 0; i < ctx->nrails; i++)
            ctx->rails[i].weight = auto_w[i] > 0 ? auto_w[i] : 1.0;
    } else {
        for (i = 0; i < ctx->nrails; i++)
            ctx->rails[i].weight =
                ctx->rails[i].attr.bandwidth_mbs > 0 ? ctx->rails[i].attr.bandwidth_mbs : 1.0;
    }
    /* rails by latency for the eager rail choice (insertion sort, <= 8) */
    for (i = 0; i < ctx->nrails; i++) {
        int r = i;
        for (j = i; j > 0 && ctx->rails[ctx->rail_order[j - 1]].attr.latency_us >
                                 ctx->rails[r].attr.latency_us;
             j--)
            ctx->rail_order[j] = ctx->rail_order[j - 1];
        ctx->rail_order[j] = r;
    }
    return MADRAIL_OK;
}

/* MADRAIL_RAILS unset (default "auto"), "auto" or empty: discover. */
static int mdr_rails_auto(const char *rails)
{
    const char *p = rails ? rails : "";
    while (*p == ' ')
        p++;
    return *p == '\0' || strcasecmp(p, "auto") == 0;
}

/* Discovery for MADRAIL_RAILS=auto: the rail list and one weight per rail
 * (its link speed), every verdict at info level, warnings as warnings. */
static madrail_status_t mdr_discover_rails(mdr_ctx_t *ctx, char **list_p, double *weights)
{
    mdr_discover_t disc;
    madrail_status_t st;
    int i;

    st = mdr_discover_run(ctx->overrides, &disc);
    if (st != MADRAIL_OK)
        return st;
    for (i = 0; i < disc.ndev; i++) {
        const mdr_netdev_t *d = &disc.devs[i];
        if (d->kind == MDR_NETDEV_HCA)
            mdr_info("rail discovery: %s port %u: %s", d->name, d->port, disc.verdict[i].why);
        else
            mdr_info("rail discovery: %s: %s", d->name, disc.verdict[i].why);
    }
    for (i = 0; i < disc.res.nwarn; i++)
        mdr_warn("rail discovery: %s", disc.res.warn[i].text);
    if (disc.res.nrails == 0) {
        mdr_error("MADRAIL_RAILS=%s: rail discovery found no usable network device (not even "
                  "loopback); name the rails in MADRAIL_RAILS (madrail_info -r shows why each "
                  "device was rejected)",
                  ctx->cfg.rails);
        mdr_discover_release(&disc);
        return MADRAIL_ERR_CONFIG;
    }
    st = mdr_discover_rails_string(&disc, list_p);
    if (st == MADRAIL_OK) {
        for (i = 0; i < disc.res.nrails && i < MDR_MAX_RAILS; i++)
            weights[i] = disc.res.rails[i].weight;
        mdr_info("rail discovery: MADRAIL_RAILS=%s", *list_p);
    }
    mdr_discover_release(&disc);
    return st;
}

madrail_status_t madrail_context_init(const madrail_context_params_t *params,
                                      madrail_context_t *ctx_p)
{
    madrail_status_t st;
    mdr_ctx_t *ctx;
    int lvl;

    if (!ctx_p)
        return MADRAIL_ERR_INVALID;
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return MADRAIL_ERR_NOMEM;
    ctx->overrides = params ? params->overrides : NULL;
    ctx->rx_resent_rail = -1;

    st = mdr_cfg_parse(&mdr_core_cfg_table, ctx->overrides, &ctx->cfg);
    if (st != MADRAIL_OK)
        goto err_cfg;
    lvl = mdr_log_level_parse(ctx->cfg.log_level);
    if (lvl < 0) {
        mdr_error("MADRAIL_LOG_LEVEL=%s: not a level (expected error, warn, info, debug, "
                  "trace)",
                  ctx->cfg.log_level);
        st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }
    mdr_log_set_level(lvl);
    mdr_cfg_check_unknown(ctx->overrides);
    ctx->job_size = ctx->cfg.job_size;
    if (ctx->cfg.stripe_align & (ctx->cfg.stripe_align - 1)) {
        mdr_error("MADRAIL_STRIPE_ALIGN=%zu: not a power of two", ctx->cfg.stripe_align);
        st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }
    if (ctx->cfg.slot_size < sizeof(mdr_eager_hdr_t) + 64) {
        mdr_error("MADRAIL_SLOT_SIZE=%zu: too small", ctx->cfg.slot_size);
        st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }

    st = mdr_job_key_init(ctx, params);
    if (st != MADRAIL_OK)
        goto err_cfg;
    ctx->uuid = mdr_make_uuid();
    ctx->eager_max = ctx->cfg.slot_size - sizeof(mdr_eager_hdr_t);
    ctx->am_scratch = malloc(ctx->cfg.slot_size);
    if (!ctx->am_scratch) {
        st = MADRAIL_ERR_NOMEM;
        goto err_cfg;
    }
    ctx->stripe.align = ctx->cfg.stripe_align;
    ctx->stripe.min_chunk = ctx->cfg.stripe_min;
    /* the message types and their handlers, before any rail can deliver */
    st = mdr_ctrl_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_tag_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_eager_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_rndv_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_rfs_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_watch_init(ctx);
    if (st == MADRAIL_OK)
        st = mdr_cancel_init(ctx);
    if (st != MADRAIL_OK)
        goto err_cfg;
    ctx->upcalls.ctrl_recv = mdr_ctrl_recv_upcall;
    ctx->upcalls.ep_accepted = mdr_ep_accepted_upcall;
    ctx->upcalls.ep_failed = mdr_ep_failed_upcall;
    mdr_list_init(&ctx->posted);
    mdr_list_init(&ctx->unexpected);
    mdr_list_init(&ctx->active);
    mdr_list_init(&ctx->unsent);
    mdr_list_init(&ctx->retired);
    mdr_pool_init(&ctx->pool, 64);
    st = mdr_hash_init(&ctx->peer_by_uuid, 64);
    if (st != MADRAIL_OK)
        goto err_pool;

    if (mdr_rails_auto(ctx->cfg.rails)) {
        double found_w[MDR_MAX_RAILS], open_w[MDR_MAX_RAILS];
        char *list = NULL;

        st = mdr_discover_rails(ctx, &list, found_w);
        if (st != MADRAIL_OK)
            goto err_hash;
        st = mdr_open_rails(ctx, list, found_w, open_w);
        free(list);
        if (st == MADRAIL_OK)
            st = mdr_set_weights(ctx, open_w);
    } else {
        st = mdr_open_rails(ctx, ctx->cfg.rails, NULL, NULL);
        if (st == MADRAIL_OK)
            st = mdr_set_weights(ctx, NULL);
    }
    if (st != MADRAIL_OK) {
        if (ctx->nrails > 0) /* opened but the weights were refused */
            goto err_rails;
        goto err_hash;
    }
    st = mdr_match_check_config(ctx);
    if (st != MADRAIL_OK)
        goto err_rails;
    {
        int i;
        for (i = 0; i < ctx->nrails; i++)
            mdr_info("rail %d: %s latency %.1f us bandwidth %.0f MB/s weight %.2f", i,
                     ctx->rails[i].attr.name, ctx->rails[i].attr.latency_us,
                     ctx->rails[i].attr.bandwidth_mbs, ctx->rails[i].weight);
    }
    *ctx_p = ctx;
    return MADRAIL_OK;

err_rails:
    mdr_close_rails(ctx);
err_hash:
    mdr_hash_cleanup(&ctx->peer_by_uuid);
err_pool:
    mdr_pool_cleanup(&ctx->pool);
err_cfg:
    free(ctx->am_scratch);
    mdr_cfg_release(&mdr_core_cfg_table, &ctx->cfg);
    mdr_ctx_wipe_key(ctx);
    free(ctx);
    return st;
}

/* Everything we started has finished and every rail has delivered it. */
static int mdr_quiet(mdr_ctx_t *ctx)
{
    uint32_t p;
    int r;
    if (ctx->active_sends || !mdr_list_empty(&ctx->active))
        return 0;
    for (p = 0; p < ctx->npeers; p++) {
        mdr_peer_t *peer = ctx->peers[p];
        if (!peer)
            continue;
        for (r = 0; r < ctx->nrails; r++) {
            mdr_peer_rail_t *pr = &peer->rails[r];
            if (pr->ep && !pr->down && !ctx->rails[r].ops->ep_idle(pr->ep))
                return 0;
        }
    }
    return 1;
}

madrail_status_t madrail_context_finalize(madrail_context_t ctx)
{
    double deadline;
    uint32_t p;

    if (!ctx)
        return MADRAIL_ERR_INVALID;
    ctx->finalizing = 1;
    deadline = mdr_time_sec() + 30.0;
    while (!mdr_quiet(ctx)) {
        madrail_progress(ctx);
        if (mdr_time_sec() > deadline) {
            mdr_warn("finalize: %llu sends still in flight after 30 s; closing anyway",
                     (unsigned long long)ctx->active_sends);
            break;
        }
    }
    if (ctx->cfg.stats)
        madrail_stats_print(ctx, stderr);

    /* unmatched inbound messages: free their buffers */
    mdr_peer_reap_retired(ctx);
    for (p = 0; p < ctx->npeers; p++) {
        if (!ctx->peers[p])
            continue; /* retired: destroyed above */
        mdr_match_peer_release(ctx->peers[p], 1, 0);
        mdr_peer_destroy(ctx, ctx->peers[p]);
    }
    free(ctx->peers);
    free(ctx->peer_free);
    /* requests the user never completed */
    {
        uint32_t i;
        for (i = 0; i < ctx->reqtab_cap; i++)
            if (ctx->reqtab[i]) {
                mdr_req_t *req = ctx->reqtab[i];
                free(req->cts);
                free(req->puts);
                free(req->am);
                free(req);
            }
        free(ctx->reqtab);
        free(ctx->reqgen);
        free(ctx->reqfree);
        mdr_req_cache_cleanup(ctx);
    }
    mdr_close_rails(ctx);
    mdr_hash_cleanup(&ctx->peer_by_uuid);
    mdr_pool_cleanup(&ctx->pool);
    mdr_cfg_release(&mdr_core_cfg_table, &ctx->cfg);
    free(ctx->am_scratch);
    mdr_ctx_wipe_key(ctx);
    free(ctx);
    return MADRAIL_OK;
}

madrail_status_t madrail_context_address(madrail_context_t ctx, void *buf, size_t *len_p)
{
    size_t need = 4 + 2 + 2 + 8 + 1;
    uint8_t *p;
    int i;

    if (!ctx || !len_p)
        return MADRAIL_ERR_INVALID;
    for (i = 0; i < ctx->nrails; i++)
        need += 8 + 2 + ctx->rails[i].attr.addr_len;
    if (!buf || *len_p < need) {
        *len_p = need;
        return buf ? MADRAIL_ERR_NORESOURCE : MADRAIL_OK;
    }
    p = buf;
    {
        uint32_t magic = MDR_ADDR_MAGIC;
        uint16_t ver = MDR_ADDR_VERSION, bom = MDR_ADDR_BOM;
        memcpy(p, &magic, 4);
        memcpy(p + 4, &ver, 2);
        memcpy(p + 6, &bom, 2);
        memcpy(p + 8, &ctx->uuid, 8);
        p[16] = (uint8_t)ctx->nrails;
        p += 17;
    }
    for (i = 0; i < ctx->nrails; i++) {
        uint16_t alen = (uint16_t)ctx->rails[i].attr.addr_len;
        madrail_status_t st;
        memset(p, 0, 8);
        strncpy((char *)p, ctx->rails[i].ops->name, 8);
        memcpy(p + 8, &alen, 2);
        st = ctx->rails[i].ops->addr_pack(ctx->rails[i].rail, p + 10, alen);
        if (st != MADRAIL_OK)
            return st;
        p += 10 + alen;
    }
    *len_p = need;
    return MADRAIL_OK;
}

madrail_status_t madrail_peer_add(madrail_context_t ctx, const void *addr, size_t len,
                                  madrail_peer_t *peer_p)
{
    const uint8_t *p = addr, *end;
    uint32_t magic;
    uint16_t ver, bom;
    uint64_t uuid;
    int nr, r;
    mdr_peer_t *peer;
    madrail_status_t st;
    struct {
        const uint8_t *a;
        uint16_t len;
        char drv[9];
    } ra[MDR_MAX_RAILS];

    if (!ctx || !addr || !peer_p)
        return MADRAIL_ERR_INVALID;
    if (len < 17) {
        mdr_error("peer address of %zu bytes is too short", len);
        return MADRAIL_ERR_INVALID;
    }
    end = p + len;
    memcpy(&magic, p, 4);
    memcpy(&ver, p + 4, 2);
    memcpy(&bom, p + 6, 2);
    memcpy(&uuid, p + 8, 8);
    nr = p[16];
    if (magic != MDR_ADDR_MAGIC || ver != MDR_ADDR_VERSION) {
        mdr_error("peer address: not a madrail address (magic 0x%08x version %u)", magic, ver);
        return MADRAIL_ERR_INVALID;
    }
    if (bom != MDR_ADDR_BOM) {
        mdr_error("peer address: other byte order (heterogeneous jobs are not supported)");
        return MADRAIL_ERR_UNSUPPORTED;
    }
    if (uuid == ctx->uuid) {
        mdr_error("peer address is this context's own: no self peer");
        return MADRAIL_ERR_INVALID;
    }
    if (nr > MDR_MAX_RAILS) {
        mdr_error("peer address: %d rails (at most %d)", nr, MDR_MAX_RAILS);
        return MADRAIL_ERR_INVALID;
    }
    p += 17;
    for (r = 0; r < nr; r++) {
        if (end - p < 10) {
            mdr_error("peer address truncated in rail %d", r);
            return MADRAIL_ERR_INVALID;
        }
        memcpy(ra[r].drv, p, 8);
        ra[r].drv[8] = '\0';
        memcpy(&ra[r].len, p + 8, 2);
        ra[r].a = p + 10;
        if ((size_t)(end - ra[r].a) < ra[r].len || ra[r].len > sizeof(peer->rails[0].addr)) {
            mdr_error("peer address: rail %d address of %u bytes does not fit", r, ra[r].len);
            return MADRAIL_ERR_INVALID;
        }
        p = ra[r].a + ra[r].len;
    }
    st = mdr_peer_lookup_or_create(ctx, uuid, &peer);
    if (st != MADRAIL_OK)
        return st;
    peer->anonymous = 0;
    for (r = 0; r < ctx->nrails && r < nr; r++) {
        mdr_peer_rail_t *pr = &peer->rails[r];
        if (strcmp(ra[r].drv, ctx->rails[r].ops->name) != 0) {
            mdr_warn("peer %u rail %d is %s, ours is %s: not used with this peer", peer->index,
                     r, ra[r].drv, ctx->rails[r].ops->name);
            continue;
        }
        if (ra[r].len != ctx->rails[r].attr.addr_len) {
            mdr_warn("peer %u rail %d: address of %u bytes, expected %zu: not used",
                     peer->index, r, ra[r].len, ctx->rails[r].attr.addr_len);
            continue;
        }
        memcpy(pr->addr, ra[r].a, ra[r].len);
        pr->addr_len = ra[r].len;
        pr->have_addr = 1;
    }
    if (nr != ctx->nrails)
        mdr_warn("peer %u has %d rails, we have %d: using the first %d", peer->index, nr,
                 ctx->nrails, nr < ctx->nrails ? nr : ctx->nrails);
    *peer_p = peer->index;
    return MADRAIL_OK;
}

int madrail_rail_count(madrail_context_t ctx)
{
    return ctx ? ctx->nrails : 0;
}

madrail_status_t madrail_rail_info(madrail_context_t ctx, int index, madrail_rail_info_t *info_p)
{
    mdr_rail_slot_t *rs;
    if (!ctx || !info_p || index < 0 || index >= ctx->nrails)
        return MADRAIL_ERR_INVALID;
    rs = &ctx->rails[index];
    memset(info_p, 0, sizeof(*info_p));
    snprintf(info_p->name, sizeof(info_p->name), "%s", rs->attr.name);
    snprintf(info_p->driver, sizeof(info_p->driver), "%s", rs->ops->name);
    info_p->latency_us = rs->attr.latency_us;
    info_p->bandwidth_mbs = rs->attr.bandwidth_mbs;
    info_p->weight = rs->weight;
    info_p->max_ctrl = rs->attr.max_ctrl;
    return MADRAIL_OK;
}

madrail_status_t madrail_rail_stats(madrail_context_t ctx, int index,
                                    madrail_rail_stats_t *stats_p)
{
    if (!ctx || !stats_p || index < 0 || index >= ctx->nrails)
        return MADRAIL_ERR_INVALID;
    *stats_p = ctx->rails[index].stats;
    return MADRAIL_OK;
}

madrail_status_t madrail_rail_state(madrail_context_t ctx, int index,
                                    madrail_rail_state_t *state_p)
{
    uint32_t p;

    if (!ctx || !state_p || index < 0 || index >= ctx->nrails)
        return MADRAIL_ERR_INVALID;
    memset(state_p, 0, sizeof(*state_p));
    for (p = 0; p < ctx->npeers; p++) {
        const mdr_peer_t *peer = ctx->peers[p];
        /* tried at least once: connected, or failed (even to connect) */
        if (!peer || (!peer->rails[index].ep && !peer->rails[index].down))
            continue;
        state_p->peers++;
        state_p->peers_down += peer->rails[index].down != 0;
    }
    state_p->down_events = ctx->rails[index].stats.failovers;
    state_p->up_events = ctx->rails[index].up_events;
    return MADRAIL_OK;
}

int madrail_rail_events(madrail_context_t ctx, madrail_rail_event_t *ev, int max,
                        uint64_t *total_p)
{
    uint64_t first, i;
    int n = 0;

    if (total_p)
        *total_p = ctx ? ctx->nevents : 0;
    if (!ctx || !ev || max <= 0)
        return 0;
    first = ctx->nevents > MDR_EVENTS_MAX ? ctx->nevents - MDR_EVENTS_MAX : 0;
    if (ctx->nevents - first > (uint64_t)max)
        first = ctx->nevents - (uint64_t)max;
    for (i = first; i < ctx->nevents; i++)
        ev[n++] = ctx->events[i % MDR_EVENTS_MAX];
    return n;
}

/* The rail events and what failover moved, for madrail_stats_print. */
static void mdr_stats_print_events(mdr_ctx_t *ctx, FILE *out, const char *host)
{
    uint64_t first = ctx->nevents > MDR_EVENTS_MAX ? ctx->nevents - MDR_EVENTS_MAX : 0, i;

    if (ctx->nevents == 0 && ctx->n_replanned_bytes == 0)
        return;
    fprintf(out,
            "[%s:%d] madrail stats: failover: %llu rail events (down or up), %llu stripe bytes "
            "moved off the rail they were planned on\n",
            host, (int)getpid(), (unsigned long long)ctx->nevents,
            (unsigned long long)ctx->n_replanned_bytes);
    if (first)
        fprintf(out, "[%s:%d] madrail stats: event: (%llu earlier events not kept)\n", host,
                (int)getpid(), (unsigned long long)first);
    for (i = first; i < ctx->nevents; i++) {
        const madrail_rail_event_t *ev = &ctx->events[i % MDR_EVENTS_MAX];
        time_t sec = (time_t)ev->time;
        struct tm tm;
        char when[32] = "?";
        if (gmtime_r(&sec, &tm))
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        fprintf(out, "[%s:%d] madrail stats: event: %s.%03dZ rail %d %s peer %u %s: %s\n", host,
                (int)getpid(), when, (int)((ev->time - (double)sec) * 1000.0), ev->rail,
                ev->rail < ctx->nrails ? ctx->rails[ev->rail].attr.name : "?", ev->peer,
                ev->up ? "up" : "down", ev->what);
    }
}

void madrail_stats_print(madrail_context_t ctx, FILE *out)
{
    char host[64] = "?";
    uint64_t put_total = 0;
    int i;

    if (!ctx || !out)
        return;
    gethostname(host, sizeof(host) - 1);
    for (i = 0; i < ctx->nrails; i++)
        put_total += ctx->rails[i].stats.tx_put_bytes;
    fprintf(out,
            "[%s:%d] madrail stats: %-4s %-16s %10s %14s %14s %7s %10s %14s %14s %8s %9s %8s "
            "%8s\n",
            host, (int)getpid(), "rail", "name", "tx_msgs", "tx_bytes", "tx_put_bytes",
            "put%", "rx_msgs", "rx_bytes", "rx_put_bytes", "stalls", "failovers", "pings",
            "timeouts");
    for (i = 0; i < ctx->nrails; i++) {
        const madrail_rail_stats_t *s = &ctx->rails[i].stats;
        fprintf(out,
                "[%s:%d] madrail stats: %-4d %-16s %10llu %14llu %14llu %6.1f%% %10llu %14llu "
                "%14llu %8llu %9llu %8llu %8llu\n",
                host, (int)getpid(), i, ctx->rails[i].attr.name,
                (unsigned long long)s->tx_msgs, (unsigned long long)s->tx_bytes,
                (unsigned long long)s->tx_put_bytes,
                put_total ? 100.0 * (double)s->tx_put_bytes / (double)put_total : 0.0,
                (unsigned long long)s->rx_msgs, (unsigned long long)s->rx_bytes,
                (unsigned long long)s->rx_put_bytes, (unsigned long long)s->credit_stalls,
                (unsigned long long)s->failovers, (unsigned long long)s->pings,
                (unsigned long long)s->timeouts);
    }
    for (i = 0; i < ctx->nrails; i++) {
        const madrail_rail_stats_t *s = &ctx->rails[i].stats;
        if (s->resent_msgs || s->resent_dups) /* not a rail row, as below */
            fprintf(out,
                    "[%s:%d] madrail stats: recovery: rail %d %s: %llu control messages re-sent "
                    "on another rail after it failed, %llu re-sent copies from the peer dropped "
                    "as duplicates\n",
                    host, (int)getpid(), i, ctx->rails[i].attr.name,
                    (unsigned long long)s->resent_msgs, (unsigned long long)s->resent_dups);
    }
    /* not a rail row: the parsers of the rows above want a number after "stats:" */
    fprintf(out,
            "[%s:%d] madrail stats: rendezvous: %llu RTS sent, %llu sends into a "
            "receiver-first offer (no RTS); %llu offers made, %llu offers declined\n",
            host, (int)getpid(), (unsigned long long)ctx->n_rts,
            (unsigned long long)ctx->n_rfs_used, (unsigned long long)ctx->n_rfs_offered,
            (unsigned long long)ctx->n_rfs_nacked);
    mdr_stats_print_events(ctx, out, host);
    {
        char prefix[128];
        snprintf(prefix, sizeof(prefix), "[%s:%d] madrail stats:", host, (int)getpid());
        mdr_health_stats_print(ctx, out, prefix);
    }
    fflush(out);
}
