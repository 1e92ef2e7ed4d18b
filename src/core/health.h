/*
 * Rail health: what each rail delivers to each peer, measured at run time,
 * and the weights and rail choices made from it (health.c says why it is
 * built that way).  The estimator pieces (busy time, smoothing, latency
 * window) are plain structs with functions that take the time as an
 * argument, so the unit tests feed them synthetic samples.
 */
#ifndef MDR_HEALTH_H
#define MDR_HEALTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MDR_HEALTH_MEDIAN 3   /* samples in the outlier filter */
#define MDR_HEALTH_LAT_WIN 8  /* round trips in the latency window */
#define MDR_HEALTH_MAX_RAILS 8

/* ---------------- estimator pieces (no core types) ---------------- */

/* Busy time of a peer-rail (puts in flight), and the bytes its puts
 * completed, since the last sample.  In a busy period of several puts the
 * clock starts at the first completion, whose bytes are not counted: the
 * rest are paced by the rail's delivery, not by its latency (health.c). */
typedef struct mdr_health_busy {
    uint32_t inflight;  /* puts issued, not completed */
    uint32_t gen;       /* bumped by a reset: completions of older puts are ignored */
    int lead;           /* the busy period has had no completion yet */
    uint64_t mark_ns;   /* busy time before this instant is in acc_ns */
    uint64_t acc_ns;    /* busy time since the last sample */
    uint64_t acc_bytes; /* bytes completed since the last sample */
} mdr_health_busy_t;

/* A put was issued at now_ns. */
void mdr_health_busy_issue(mdr_health_busy_t *b, uint64_t now_ns);
/* A put of bytes completed at now_ns (ok = 0: it failed; its bytes do not
 * count and the partial sample is dropped).  Returns 1 with *mbs_p (bytes
 * per microsecond = MB/s) when at least min_ns of busy time has gathered. */
int mdr_health_busy_done(mdr_health_busy_t *b, uint64_t now_ns, uint64_t bytes, int ok,
                         uint64_t min_ns, double *mbs_p);
/* Forget what is in flight (its ep was replaced). */
void mdr_health_busy_reset(mdr_health_busy_t *b);

/* Smoothed throughput: clamp, median of the last 3, EWMA. */
typedef struct mdr_health_est {
    double raw[MDR_HEALTH_MEDIAN]; /* last clamped samples (ring) */
    uint64_t n;                    /* samples taken */
    double mbs;                    /* estimate, MB/s; 0 before the first sample */
} mdr_health_est_t;

/* Range a sample is clamped to, from the rail's profile bandwidth. */
void mdr_health_clamp_range(double profile_mbs, double *lo_p, double *hi_p);
/* Feed one sample; returns the new estimate. */
double mdr_health_est_add(mdr_health_est_t *e, double sample_mbs, double profile_mbs,
                          double gain);

/* Control-message latency: the smallest of the last MDR_HEALTH_LAT_WIN
 * round trips, halved (a round trip also holds the peer's reaction time,
 * which only ever adds). */
typedef struct mdr_health_lat {
    double rtt_us[MDR_HEALTH_LAT_WIN];
    unsigned n, pos;
    double us; /* one-way estimate; 0 before the first sample */
} mdr_health_lat_t;

double mdr_health_lat_add(mdr_health_lat_t *l, double rtt_us);

/* ---------------- per peer-rail and per peer state ---------------- */

typedef struct mdr_health_rail {
    mdr_health_busy_t busy;
    mdr_health_est_t bw;
    mdr_health_lat_t lat;
    double weight;       /* weight this rail had in the last plan to the peer */
    double share;        /* its share of that plan (0..1) */
    double logged_share; /* share when the last change was logged */
    uint64_t out_bytes;  /* put bytes handed to the driver and not completed (put-ahead) */
    uint64_t dry_ns;     /* when the rail ran out of credits to the peer; 0: it has some */
    double credit_us;    /* how long credits took to come back once out (moving average) */
} mdr_health_rail_t;

typedef struct mdr_health_peer {
    uint64_t plans;        /* stripe plans made for this peer (probe cadence) */
    uint64_t probes;       /* plans that gave a starved rail a probe share */
    uint64_t last_log_ns;  /* rate limit of the info log */
    uint64_t moved_bytes;  /* put bytes moved to a rail with room (put-ahead) */
    int measured;          /* the last plan used measured weights */
    int logged;            /* a plan was logged once */
    int order_valid;       /* order[] sorted by measured latency */
    int order[MDR_HEALTH_MAX_RAILS];
} mdr_health_peer_t;

/* ---------------- core hooks (health.c) ---------------- */

struct mdr_peer;
struct mdr_peer_rail;
struct madrail_request;
struct madrail_context;
struct mdr_put_op;

/* Puts: called by the rendezvous around every put it issues. */
void mdr_health_put_issued(struct mdr_peer_rail *pr, struct mdr_put_op *op);
void mdr_health_put_done(struct mdr_peer_rail *pr, struct mdr_put_op *op, int ok);
/* The ep of pr was replaced: forget its puts in flight. */
void mdr_health_rail_reset(struct mdr_peer_rail *pr);
/* Put-ahead (MADRAIL_PUT_AHEAD): whether pr's driver may take another put
 * now, and when pr would finish len more bytes (microseconds from now, at
 * its measured speed, behind what it has in flight). */
int mdr_health_put_room(const struct mdr_peer_rail *pr);
double mdr_health_put_eta(const struct mdr_peer_rail *pr, size_t len);

/* pr ran out of credits / got some back: times how long that takes, the
 * wait of a control message that waits for a credit (pick_rail). */
void mdr_health_credits_out(struct mdr_peer_rail *pr);
void mdr_health_credits_back(struct mdr_peer_rail *pr);

/* Weights for a stripe plan of len bytes to peer over rails[0..n). */
void mdr_health_plan_weights(struct mdr_peer *peer, const int *rails, int n, size_t len,
                             double *w);

/* RTS -> CTS round trips, when both went on the same rail. */
void mdr_health_rts_sent(struct madrail_request *req, int rail);
void mdr_health_cts_rcvd(struct madrail_request *req, struct mdr_peer_rail *pr);

/* Rail for a control message of len bytes to peer: the shortest expected
 * completion (queued bytes and len over speed, plus latency).  Returns a
 * rail with a credit, MDR_HEALTH_WAIT when a rail without one is still
 * expected to deliver first (the message waits for its credit), or -1
 * when no rail is usable. */
#define MDR_HEALTH_WAIT (-2)
int mdr_health_pick_rail(struct mdr_peer *peer, size_t len);

/* MADRAIL_STATS: measured throughput and weights per peer. */
void mdr_health_stats_print(struct madrail_context *ctx, FILE *out, const char *prefix);

#endif /* MDR_HEALTH_H */
