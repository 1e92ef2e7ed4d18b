/*
 * Rail health: per peer and per rail, what the rail really delivers, so
 * that stripes follow rails whose speed differs from their profile or
 * changes during a job (a virtual link that reports 10 Gbit/s whatever it
 * is shaped to, a link shared with storage traffic).
 *
 * Throughput is measured on the put path only, never per small message:
 * each put costs two clock reads.  A peer-rail is "busy" while it has puts
 * in flight; the sample is the bytes its puts completed over those busy
 * intervals, so a rail that waits for its slower sibling (idle) does not
 * read as slow, and overlapping puts are not counted twice.  Within a busy
 * period the clock runs from its first completion on (mdr_health_busy_done
 * says why), so the rail's latency is left out and the completions are
 * paced by what it delivers.  A
 * sample is taken once MADRAIL_ADAPT_SAMPLE of busy time has gathered:
 * completions reported in one burst (several in one progress call) would
 * otherwise read as an absurd rate.  Each sample is clamped to
 * [profile/1024, profile x 64] (a virtual link's profile is often 100x its
 * shaped rate, so the floor is wide; the clamp only stops a clock oddity),
 * then goes through a median of the last 3 (one outlier never moves the
 * estimate), then an EWMA with gain MADRAIL_ADAPT_GAIN (docs/configuration.md
 * gives the measurements behind the defaults) -- except that when the
 * last 3 samples all lie more than MDR_HEALTH_JUMP times below the
 * estimate, their median replaces it: a rail that slowed that much is
 * slow once three samples in a row show it, and the EWMA would take tens
 * of samples to follow it while the rail holds every stripe up.
 *
 * The stripe planner takes a rail's measured speed as its weight once it
 * has MDR_HEALTH_MIN_SAMPLES samples; a rail without them keeps its static
 * weight, rescaled to the measured rails' units (times their measured sum
 * over their static sum), so it still gets chunks and samples.  Before any
 * rail has them, with MADRAIL_ADAPT=0, or when MADRAIL_RAIL_WEIGHTS is
 * set, the static weights stand.  A rail whose share is so small that the planner would drop it
 * gets no samples, so it could never be seen to speed up: every
 * MADRAIL_ADAPT_PROBE plans, such a rail gets one minimum chunk.
 *
 * Control-message latency is half the smallest of the last 8 RTS -> CTS
 * round trips that went and came on one rail, timed only when the RTS
 * found the rail idle (the peer's matching delay only ever adds, so the
 * minimum is the wire; a queue is counted apart).  Small messages pick the
 * rail with the shortest expected completion: queued bytes over speed plus
 * latency plus the message's own length over speed.  A rail without a
 * credit is a candidate too (its credits come back as its backlog drains,
 * counted as the time they took to come back the last times they ran out,
 * at least one round trip: on a rail carrying the peer's puts towards us
 * the credits come back behind them, milliseconds later, and counting a
 * round trip there made control messages wait for them while another
 * rail had credits): when it still wins, the message waits
 * for it rather than going on a rail that would deliver it later.  That
 * matters when the sender has more in flight than the fast rail's
 * credits: sending the surplus on the slow rail makes the fast rail's
 * later messages arrive ahead of it, and the receiver withholds their
 * credits until it comes (tag.c), which starves the fast rail further
 * (measured on loop rails capped 3:1: the fast rail carried 53% of
 * 32 KiB messages with 32 in flight, 75% with waiting).  Rails are
 * visited by increasing latency and the search stops when a rail's
 * latency alone exceeds the best cost found; a rail that could not win
 * even when idle is not asked for its backlog.  So the common case (the
 * lowest-latency rail is idle) asks one driver for its backlog, as the
 * static choice did.  Which rail a sequenced message takes does
 * not change the reorder bound (tag.c): that counts credits, and the
 * message only goes on a rail with one.
 */
#include "mdr_config.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "util/clock.h"
#include "util/compiler.h"

#if MDR_MAX_RAILS > MDR_HEALTH_MAX_RAILS
#error "health.h: MDR_HEALTH_MAX_RAILS is smaller than MDR_MAX_RAILS"
#endif

/* Samples a rail needs before its measured speed replaces its static
 * weight: the median filter is full. */
#define MDR_HEALTH_MIN_SAMPLES MDR_HEALTH_MEDIAN
/* Clamp range of a sample, relative to the profile bandwidth. */
#define MDR_HEALTH_CLAMP_LO (1.0 / 1024.0)
#define MDR_HEALTH_CLAMP_HI 64.0
/* When the last 3 samples all lie this many times below the estimate,
 * their median replaces it instead of going through the moving average: a
 * rail cut from 1 Gbit to 300 Mbit would otherwise take 25 samples at gain
 * 0.1 to be believed, while the stripes it is given in the meantime are
 * held up by the slow rail (on the namespace cluster the 1 Gbit /
 * 300 Mbit swap took about 1 s of traffic and 80 messages of 1 MiB to
 * settle, at half the bandwidth).  Three, not the two a median needs: on a
 * loaded machine (load 10 on 2 cores) two samples in a row off by 2x were
 * seen on a rail whose rate had not changed.  Only down: a rail that got
 * too small a share idles between its chunks, and its next chunk starts
 * at line rate into the link's buffers (a tbf bucket fills in the idle
 * time: 128 KB are 10 ms of a 100 Mbit rail), so it reads faster than it
 * is; believing that at once gave it too large a share, made it the
 * bottleneck, and the split oscillated (1 Gbit + 200 Mbit, bench
 * ratechange).  Overloading a slow rail costs far more than underloading
 * a fast one, so bad news is believed at once and good news at the
 * moving average's pace. */
#define MDR_HEALTH_JUMP 2.0
/* Gain of the moving average of how long a rail's credits take to come
 * back once they ran out. */
#define MDR_HEALTH_CREDIT_GAIN 0.25
/* Profile bandwidth assumed when a driver reports none (MB/s). */
#define MDR_HEALTH_DEFAULT_MBS 1000.0
/* A weight change is logged (info) when a rail's share moved by this much
 * since the last log line for the peer, at most once per interval. */
#define MDR_HEALTH_LOG_SHARE 0.10
#define MDR_HEALTH_LOG_NS 1000000000ull

/* ---------------- estimator pieces ---------------- */

void mdr_health_busy_issue(mdr_health_busy_t *b, uint64_t now_ns)
{
    if (b->inflight == 0) {
        b->mark_ns = now_ns; /* idle until now: not counted */
        b->lead = 1;         /* a busy period starts: its first completion leads */
    }
    b->inflight++;
}

int mdr_health_busy_done(mdr_health_busy_t *b, uint64_t now_ns, uint64_t bytes, int ok,
                         uint64_t min_ns, double *mbs_p)
{
    if (b->inflight == 0)
        return 0;
    b->inflight--;
    if (!ok) {
        b->mark_ns = now_ns;
        b->acc_ns = 0;
        b->acc_bytes = 0;
        return 0;
    }
    if (b->lead && b->inflight > 0) {
        /* The first completion of a busy period with more puts behind it:
         * the time up to it holds the path's latency (and, on a link
         * carrying the peer's data the other way, the wait of the
         * completion behind that data), which a longer period would
         * dilute and a shorter one not: the rail with the larger share
         * would read faster, get a larger share still, and the split
         * would drift away from the rails' real speeds.  The clock
         * starts here instead; the completions that follow are paced by
         * what the rail delivers.  A busy period of one put has nothing
         * else to go by and counts from its issue. */
        b->lead = 0;
        b->mark_ns = now_ns;
        return 0;
    }
    b->lead = 0;
    if (now_ns > b->mark_ns)
        b->acc_ns += now_ns - b->mark_ns;
    b->mark_ns = now_ns;
    b->acc_bytes += bytes;
    if (b->acc_ns == 0 || b->acc_ns < min_ns)
        return 0;
    *mbs_p = (double)b->acc_bytes * 1e3 / (double)b->acc_ns; /* bytes/us = MB/s */
    b->acc_ns = 0;
    b->acc_bytes = 0;
    return 1;
}

void mdr_health_busy_reset(mdr_health_busy_t *b)
{
    b->gen++;
    b->inflight = 0;
    b->acc_ns = 0;
    b->acc_bytes = 0;
}

void mdr_health_clamp_range(double profile_mbs, double *lo_p, double *hi_p)
{
    if (!(profile_mbs > 0.0) || !isfinite(profile_mbs))
        profile_mbs = MDR_HEALTH_DEFAULT_MBS;
    *lo_p = profile_mbs * MDR_HEALTH_CLAMP_LO;
    *hi_p = profile_mbs * MDR_HEALTH_CLAMP_HI;
}

/* The last MDR_HEALTH_MEDIAN samples all lie below the estimate divided
 * by MDR_HEALTH_JUMP. */
static int mdr_health_jumped(const double *raw, double est)
{
    int i;

    for (i = 0; i < MDR_HEALTH_MEDIAN; i++)
        if (!(raw[i] * MDR_HEALTH_JUMP < est))
            return 0;
    return 1;
}

static double mdr_health_median3(double a, double b, double c)
{
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    /* a <= b */
    if (c <= a)
        return a;
    if (c >= b)
        return b;
    return c;
}

double mdr_health_est_add(mdr_health_est_t *e, double sample_mbs, double profile_mbs,
                          double gain)
{
    double lo, hi, s = sample_mbs, m;

    mdr_health_clamp_range(profile_mbs, &lo, &hi);
    if (!(s >= lo)) /* also NaN */
        s = lo;
    if (s > hi)
        s = hi;
    e->raw[e->n % MDR_HEALTH_MEDIAN] = s;
    e->n++;
    if (e->n == 1) {
        e->mbs = s;
    } else if (e->n == 2) {
        e->mbs = (e->raw[0] + e->raw[1]) / 2.0;
    } else {
        m = mdr_health_median3(e->raw[0], e->raw[1], e->raw[2]);
        if (e->n == MDR_HEALTH_MEDIAN)
            e->mbs = m; /* the first value the planner may use: a full median */
        else if (mdr_health_jumped(e->raw, e->mbs))
            e->mbs = m; /* three samples in a row agree: the rail slowed */
        else
            e->mbs += gain * (m - e->mbs);
    }
    return e->mbs;
}

double mdr_health_lat_add(mdr_health_lat_t *l, double rtt_us)
{
    double m;
    unsigned i;

    if (!(rtt_us >= 0.0) || !isfinite(rtt_us))
        return l->us;
    l->rtt_us[l->pos] = rtt_us;
    l->pos = (l->pos + 1) % MDR_HEALTH_LAT_WIN;
    if (l->n < MDR_HEALTH_LAT_WIN)
        l->n++;
    m = l->rtt_us[0];
    for (i = 1; i < l->n; i++)
        if (l->rtt_us[i] < m)
            m = l->rtt_us[i];
    l->us = m / 2.0;
    return l->us;
}

/* ---------------- helpers ---------------- */

static double mdr_health_profile_mbs(const mdr_ctx_t *ctx, int r)
{
    double p = ctx->rails[r].attr.bandwidth_mbs;
    return p > 0.0 && isfinite(p) ? p : MDR_HEALTH_DEFAULT_MBS;
}

static int mdr_health_user_weights(const mdr_ctx_t *ctx)
{
    return ctx->cfg.rail_weights && ctx->cfg.rail_weights[0];
}

static int mdr_health_has_speed(const mdr_health_rail_t *h)
{
    return h->bw.n >= MDR_HEALTH_MIN_SAMPLES && h->bw.mbs > 0.0;
}

/* Speed used for the small-message choice, bytes per microsecond. */
static double mdr_health_speed(const mdr_ctx_t *ctx, const mdr_peer_rail_t *pr)
{
    if (mdr_health_has_speed(&pr->health))
        return pr->health.bw.mbs;
    return mdr_health_profile_mbs(ctx, pr->rail);
}

static double mdr_health_latency(const mdr_ctx_t *ctx, const mdr_peer_t *peer,
                                 const mdr_peer_rail_t *pr)
{
    if (peer->health.order_valid && pr->health.lat.n > 0)
        return pr->health.lat.us;
    return ctx->rails[pr->rail].attr.latency_us;
}

static int mdr_health_usable(const mdr_peer_rail_t *pr)
{
    return !pr->down && (pr->ep || pr->have_addr);
}

/* ---------------- puts ---------------- */

void mdr_health_put_issued(mdr_peer_rail_t *pr, mdr_put_op_t *op)
{
    mdr_health_busy_issue(&pr->health.busy, mdr_time_ns());
    op->hgen = pr->health.busy.gen;
    op->timed = 1;
    pr->health.out_bytes += op->len;
}

void mdr_health_put_done(mdr_peer_rail_t *pr, mdr_put_op_t *op, int ok)
{
    mdr_ctx_t *ctx = pr->peer->ctx;
    mdr_health_rail_t *h = &pr->health;
    double mbs;

    if (!op->timed || op->hgen != h->busy.gen)
        return;
    op->timed = 0;
    h->out_bytes -= op->len < h->out_bytes ? op->len : h->out_bytes;
    if (!mdr_health_busy_done(&h->busy, mdr_time_ns(), op->len, ok,
                              (uint64_t)(ctx->cfg.adapt_sample * 1e9), &mbs))
        return;
    mdr_health_est_add(&h->bw, mbs, mdr_health_profile_mbs(ctx, pr->rail),
                       ctx->cfg.adapt_gain);
    mdr_debug("rail %s peer %u: put throughput sample %.1f MB/s, estimate %.1f MB/s (%llu "
              "samples)",
              ctx->rails[pr->rail].attr.name, pr->peer->index, mbs, h->bw.mbs,
              (unsigned long long)h->bw.n);
}

void mdr_health_rail_reset(mdr_peer_rail_t *pr)
{
    mdr_health_busy_reset(&pr->health.busy);
    pr->health.out_bytes = 0;
    pr->health.dry_ns = 0;
}

/* ---------------- credits ---------------- */

MDR_HOT void mdr_health_credits_out(mdr_peer_rail_t *pr)
{
    pr->health.dry_ns = mdr_time_ns();
}

MDR_HOT void mdr_health_credits_back(mdr_peer_rail_t *pr)
{
    mdr_health_rail_t *h = &pr->health;
    double us;

    if (h->dry_ns == 0)
        return;
    us = (double)(mdr_time_ns() - h->dry_ns) / 1e3;
    h->dry_ns = 0;
    h->credit_us = h->credit_us > 0.0 ? h->credit_us + MDR_HEALTH_CREDIT_GAIN * (us - h->credit_us)
                                      : us;
}

/* ---------------- put-ahead ---------------- */

static int mdr_health_ahead_on(const mdr_ctx_t *ctx)
{
    return ctx->cfg.put_ahead > 0.0 && ctx->cfg.adapt && !mdr_health_user_weights(ctx) &&
           ctx->nrails >= 2;
}

int mdr_health_put_room(const mdr_peer_rail_t *pr)
{
    const mdr_ctx_t *ctx = pr->peer->ctx;

    if (pr->health.out_bytes == 0 || !mdr_health_ahead_on(ctx))
        return 1; /* one put is always allowed: a rail never waits for nothing */
    return (double)pr->health.out_bytes < mdr_health_speed(ctx, pr) * ctx->cfg.put_ahead * 1e6;
}

double mdr_health_put_eta(const mdr_peer_rail_t *pr, size_t len)
{
    double speed = mdr_health_speed(pr->peer->ctx, pr); /* bytes per microsecond */
    return (double)(pr->health.out_bytes + len) / (speed > 0.0 ? speed : 1.0);
}

/* ---------------- stripe weights ---------------- */

static void mdr_health_log_plan(mdr_peer_t *peer, const int *rails, int n, const double *w,
                                double total)
{
    mdr_ctx_t *ctx = peer->ctx;
    char line[512];
    size_t off = 0;
    uint64_t now;
    int i, moved = 0;

    if (!peer->health.logged) { /* the first plan: the static weights madrail_info shows */
        for (i = 0; i < n; i++)
            peer->rails[rails[i]].health.logged_share = peer->rails[rails[i]].health.share;
        peer->health.logged = 1;
        return;
    }
    for (i = 0; i < n; i++) {
        mdr_health_rail_t *h = &peer->rails[rails[i]].health;
        if (fabs(h->share - h->logged_share) > MDR_HEALTH_LOG_SHARE)
            moved = 1;
    }
    if (!moved || mdr_log_level < MDR_LOG_INFO)
        return;
    now = mdr_time_ns();
    if (peer->health.last_log_ns && now - peer->health.last_log_ns < MDR_HEALTH_LOG_NS)
        return;
    peer->health.last_log_ns = now;
    for (i = 0; i < n && off < sizeof(line); i++) {
        mdr_peer_rail_t *pr = &peer->rails[rails[i]];
        int k = snprintf(line + off, sizeof(line) - off, "%s rail %s %.1f MB/s (%llu samples) "
                         "%.1f%%",
                         i ? "," : "", ctx->rails[rails[i]].attr.name, pr->health.bw.mbs,
                         (unsigned long long)pr->health.bw.n, 100.0 * w[i] / total);
        if (k < 0)
            break;
        off += (size_t)k;
        pr->health.logged_share = pr->health.share;
    }
    mdr_info("peer %u: stripe weights %s:%s", peer->index,
             peer->health.measured ? "measured" : "static", line);
}

void mdr_health_plan_weights(mdr_peer_t *peer, const int *rails, int n, size_t len, double *w)
{
    mdr_ctx_t *ctx = peer->ctx;
    double sum_m = 0.0, sum_s = 0.0, total = 0.0, scale;
    int i, nm = 0, adaptive = ctx->cfg.adapt && !mdr_health_user_weights(ctx) && n >= 2;

    for (i = 0; i < n; i++)
        w[i] = ctx->rails[rails[i]].weight;
    peer->health.plans++;
    if (adaptive) {
        for (i = 0; i < n; i++) {
            const mdr_health_rail_t *h = &peer->rails[rails[i]].health;
            if (mdr_health_has_speed(h)) {
                nm++;
                sum_m += h->bw.mbs;
                sum_s += w[i];
            }
        }
        if (nm > 0) {
            scale = sum_s > 0.0 ? sum_m / sum_s : 1.0;
            for (i = 0; i < n; i++) {
                const mdr_health_rail_t *h = &peer->rails[rails[i]].health;
                w[i] = mdr_health_has_speed(h) ? h->bw.mbs : w[i] * scale;
            }
        }
    }
    peer->health.measured = nm > 0;
    for (i = 0; i < n; i++)
        total += w[i] > 0.0 ? w[i] : 0.0;
    if (!(total > 0.0))
        return;
    for (i = 0; i < n; i++) {
        mdr_health_rail_t *h = &peer->rails[rails[i]].health;
        h->weight = w[i];
        h->share = w[i] / total;
    }
    if (!adaptive)
        return;
    mdr_health_log_plan(peer, rails, n, w, total);

    /* Probe: a rail below the share that gets a minimum chunk would carry
     * nothing and never be measured again; now and then give it exactly
     * that share (k starved rails of weight x each among the others' sum S
     * have share f when x = f S / (1 - k f)). */
    if (ctx->cfg.adapt_probe && peer->health.plans % ctx->cfg.adapt_probe == 0 && len > 0) {
        double f = (double)(ctx->stripe.min_chunk + 2 * ctx->stripe.align) / (double)len;
        double rest = 0.0;
        int k = 0;

        for (i = 0; i < n; i++) {
            if (w[i] / total < f)
                k++;
            else
                rest += w[i];
        }
        if (k > 0 && k < n && (double)k * f <= 0.5 && rest > 0.0) {
            for (i = 0; i < n; i++)
                if (w[i] / total < f)
                    w[i] = f * rest / (1.0 - (double)k * f);
            peer->health.probes++;
            mdr_debug("peer %u: probe plan: %d starved rail(s) get %.1f%% each", peer->index, k,
                      100.0 * f);
        }
    }
}

/* ---------------- latency ---------------- */

void mdr_health_rts_sent(mdr_req_t *req, int rail)
{
    mdr_ctx_t *ctx = req->ctx;
    mdr_peer_t *peer = mdr_peer_get(ctx, req->peer);
    mdr_peer_rail_t *pr;

    /* Timed only when the RTS found the rail idle: behind a queue of puts
     * the round trip measures the queue, which the rail choice counts
     * apart (queued bytes over speed). */
    if (!peer || rail < 0 || rail >= ctx->nrails)
        return;
    pr = &peer->rails[rail];
    if (pr->health.busy.inflight != 0 || !pr->ep ||
        ctx->rails[rail].ops->ep_backlog(pr->ep) > ctx->cfg.slot_size)
        return;
    req->rts_ns = mdr_time_ns();
    req->rts_rail = rail;
}

/* Sort the peer's rails by measured latency once every usable rail has one. */
static void mdr_health_sort(mdr_peer_t *peer)
{
    mdr_ctx_t *ctx = peer->ctx;
    int i, j, r;

    for (r = 0; r < ctx->nrails; r++)
        if (mdr_health_usable(&peer->rails[r]) && peer->rails[r].health.lat.n == 0)
            return;
    peer->health.order_valid = 1; /* the keys below are what pick_rail uses */
    for (i = 0; i < ctx->nrails; i++) {
        double key = mdr_health_latency(ctx, peer, &peer->rails[i]);
        r = i;
        for (j = i; j > 0 && mdr_health_latency(ctx, peer,
                                                &peer->rails[peer->health.order[j - 1]]) > key;
             j--)
            peer->health.order[j] = peer->health.order[j - 1];
        peer->health.order[j] = r;
    }
}

void mdr_health_cts_rcvd(mdr_req_t *req, mdr_peer_rail_t *pr)
{
    if (req->rts_ns != 0 && req->rts_rail == pr->rail) {
        mdr_health_lat_add(&pr->health.lat, (double)(mdr_time_ns() - req->rts_ns) / 1e3);
        mdr_health_sort(pr->peer);
    }
    req->rts_ns = 0;
}

/* ---------------- small messages ---------------- */

int mdr_health_pick_rail(mdr_peer_t *peer, size_t len)
{
    mdr_ctx_t *ctx = peer->ctx;
    const int *order = peer->health.order_valid ? peer->health.order : ctx->rail_order;
    double best_cost = HUGE_VAL;
    int i, best = -1;

    for (i = 0; i < ctx->nrails; i++) {
        mdr_peer_rail_t *pr = &peer->rails[order[i]];
        double lat, speed, cost;
        size_t q;

        if (!mdr_health_usable(pr))
            continue;
        lat = mdr_health_latency(ctx, peer, pr);
        if (lat >= best_cost)
            break; /* sorted by latency: no later rail can beat it */
        speed = mdr_health_speed(ctx, pr);
        cost = lat + (double)len / speed;
        if (pr->credits == 0) /* a credit must come back first */
            cost += pr->health.credit_us > 2.0 * lat ? pr->health.credit_us : 2.0 * lat;
        if (cost >= best_cost)
            continue; /* even idle it would lose: spare the driver call */
        q = pr->ep ? ctx->rails[pr->rail].ops->ep_backlog(pr->ep) : 0;
        if (q)
            cost += (double)q / speed;
        if (cost < best_cost) {
            best_cost = cost;
            best = pr->credits ? pr->rail : MDR_HEALTH_WAIT;
        }
    }
    return best;
}

/* ---------------- visibility ---------------- */

static const char *mdr_health_mode(const mdr_ctx_t *ctx, const mdr_peer_t *peer)
{
    if (!ctx->cfg.adapt)
        return "static: MADRAIL_ADAPT=0";
    if (mdr_health_user_weights(ctx))
        return "static: MADRAIL_RAIL_WEIGHTS";
    return peer->health.measured ? "measured" : "static: too few samples";
}

void mdr_health_stats_print(mdr_ctx_t *ctx, FILE *out, const char *prefix)
{
    uint32_t p;
    int r;

    for (p = 0; p < ctx->npeers; p++) {
        mdr_peer_t *peer = ctx->peers[p];
        int any = peer->health.plans > 0;

        for (r = 0; r < ctx->nrails; r++)
            if (peer->rails[r].health.bw.n || peer->rails[r].health.lat.n)
                any = 1;
        if (!any)
            continue;
        fprintf(out,
                "%s peer %u: %llu stripe plans (%llu probes), weights %s, %llu put bytes moved "
                "to a rail with room\n",
                prefix, peer->index, (unsigned long long)peer->health.plans,
                (unsigned long long)peer->health.probes, mdr_health_mode(ctx, peer),
                (unsigned long long)peer->health.moved_bytes);
        for (r = 0; r < ctx->nrails; r++) {
            const mdr_health_rail_t *h = &peer->rails[r].health;
            fprintf(out,
                    "%s peer %u rail %d %-16s measured %10.1f MB/s (%llu samples) latency "
                    "%8.1f us weight %10.2f (%5.1f%%)\n",
                    prefix, peer->index, r, ctx->rails[r].attr.name, h->bw.mbs,
                    (unsigned long long)h->bw.n, h->lat.us, h->weight, 100.0 * h->share);
        }
    }
}

madrail_status_t madrail_peer_rail_health(madrail_context_t ctx, madrail_peer_t peer, int rail,
                                          madrail_rail_health_t *health_p)
{
    mdr_peer_t *p;
    const mdr_health_rail_t *h;

    if (!ctx || !health_p || rail < 0 || rail >= ctx->nrails)
        return MADRAIL_ERR_INVALID;
    p = mdr_peer_get(ctx, peer);
    if (!p)
        return MADRAIL_ERR_INVALID;
    h = &p->rails[rail].health;
    memset(health_p, 0, sizeof(*health_p));
    health_p->measured_mbs = h->bw.mbs;
    health_p->samples = h->bw.n;
    health_p->latency_us = h->lat.us;
    health_p->weight = h->weight;
    health_p->share = h->share;
    health_p->measured = p->health.measured && ctx->cfg.adapt && !mdr_health_user_weights(ctx);
    health_p->plans = p->health.plans;
    health_p->probes = p->health.probes;
    return MADRAIL_OK;
}
