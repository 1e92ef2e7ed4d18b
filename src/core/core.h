/*
 * Core internals: the shared types (context, peers, requests, inbound
 * messages, protocol states) and the wire format of control messages.
 * The functions of each module are declared in its own header, included
 * at the end.  Everything here is private to libmadrail; the public face
 * is include/madrail.h.
 *
 * Wire format: every control message starts with mdr_hdr_t followed by a
 * per-type body; all integers are in host order (madrail assumes a
 * homogeneous job; the address carries a byte-order mark and a mismatch is
 * refused at peer_add).  Receivers validate every length against what
 * arrived and close the rail to that peer on a malformed message.
 */
#ifndef MDR_CORE_H
#define MDR_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "madrail.h"
#include "rails/rail.h"
#include "core/rcache.h"
#include "core/stripe.h"
#include "util/cfg.h"
#include "util/hash.h"
#include "util/list.h"
#include "util/log.h"
#include "util/pool.h"

#define MDR_MAX_RAILS 8

#include "core/health.h"

/* ---------------- wire format ---------------- */

enum {
    MDR_MSG_EAGER = 1,      /* sequenced: data fragment (whole small message or part of a medium one) */
    MDR_MSG_RTS = 2,        /* sequenced: rendezvous request to send */
    MDR_MSG_RFS_DATA = 3,   /* sequenced: envelope of a message sent into a receiver-first CTS */
    MDR_MSG_CTS = 4,        /* clear to send: buffer address + per-rail keys */
    MDR_MSG_FIN = 5,        /* puts on this rail for rreq are done */
    MDR_MSG_ACK = 6,        /* synchronous send matched */
    MDR_MSG_CREDIT = 7,     /* explicit credit return (reserved slot) */
    MDR_MSG_RFS = 8,        /* receiver-first CTS (request for sending) */
    MDR_MSG_RFS_NACK = 9,   /* sender declines/revokes an RFS */
    MDR_MSG_RFS_REVOKE = 10,/* receiver wants its RFS back (cancel) */
    MDR_MSG_PING = 11,      /* liveness probe of a rail (reserved slot, watch.c) */
    MDR_MSG_PONG = 12,      /* its answer (reserved slot) */
    MDR_MSG_CANCEL = 13,    /* sender asks the receiver to drop an unmatched message (cancel.c) */
    MDR_MSG_CANCEL_ANS = 14,/* the receiver's answer: dropped or not */
    MDR_MSG_EAGER_AM = 15,  /* sequenced: a whole small tagged message announced by an
                             * active message (madrail_am_isend): EAGER header with the AM
                             * id in .id, body = AM header then the data (am.c) */
    MDR_MSG_SHORT = 16,     /* sequenced: a whole message of one fragment that names no
                             * request (no SYNC, no offer spent, no AM): the low 32 bits
                             * of seq in h.len, then the tag; the payload is the rest
                             * (eager.c) */
    MDR_MSG_GONE = 17,      /* the sender gave its connection on another rail up
                             * (mdr_gone_hdr_t): fence it now (watch.c) */
    MDR_MSG_MAX
};

/* mdr_hdr_t.flags.  Which types may carry which flag is one table in
 * ctrl.c (mdr_msg_rules); any other bit, or a flag on a type it does not
 * apply to, is a protocol error. */
enum {
    MDR_HF_SYNC = 1u << 0,         /* EAGER: sender wants an ACK when matched */
    MDR_HF_INTERNAL = 1u << 1,     /* EAGER/RTS/RFS_DATA: internal tag space (pack pieces) */
    MDR_HF_RFS_CONSUMED = 1u << 2, /* EAGER: this message consumed RFS rreq_id */
    MDR_HF_AM = 1u << 3,           /* EAGER: active message, one fragment, for the handler;
                                    * RTS: it carries an active message (AM id, header) that
                                    * announces it (madrail_am_isend, am.c) */
    MDR_HF_RESENT = 1u << 4        /* any normal type: a copy re-sent after the rail it was
                                    * first sent on failed; that rail in bits 5-7, its index
                                    * there in .credits (replay.c) */
};

typedef struct mdr_hdr {
    uint8_t type;
    uint8_t flags;
    uint16_t credits; /* normal slots returned to the receiver of this message, this rail */
    uint32_t len;     /* total length of the control message, header included */
} mdr_hdr_t;

typedef struct mdr_gone_hdr {
    mdr_hdr_t h;
    uint32_t rail;   /* the rail given up (not the one this came on) */
    uint32_t pad;
} mdr_gone_hdr_t;

typedef struct mdr_eager_hdr {
    mdr_hdr_t h;
    uint64_t seq;
    uint64_t tag;
    uint64_t total;  /* message length */
    uint64_t offset; /* of this fragment's payload */
    uint64_t id;     /* SYNC: sender request id (for ACK); RFS_CONSUMED: receiver request id */
} mdr_eager_hdr_t;   /* payload follows */

/* SHORT: the EAGER header of a whole message without what it implies
 * (total = the payload's length, offset 0, no id), 16 bytes in all.  Its
 * h.len is not the length (that is what arrived) but the low 32 bits of
 * the sequence number: the receiver takes the one number at or after the
 * one it expects with those bits (a peer within its credits is never
 * 2^32 ahead), the sender the one nearest to its next start.  Why so
 * small: shared-memory transports carry the first bytes of a message in
 * the cache line they poll; a message that spills into a second line
 * costs the receiver one more transfer between cores (about 0.1 us a
 * message on loopback, docs/performance.md). */
typedef struct mdr_short_hdr {
    mdr_hdr_t h;  /* .len: the sequence number's low 32 bits */
    uint64_t tag;
} mdr_short_hdr_t;   /* payload follows */

/* The sequence number at or after `base` whose low 32 bits are `lo`. */
static inline uint64_t mdr_seq_from_lo(uint64_t base, uint32_t lo)
{
    return base + (uint32_t)(lo - (uint32_t)base);
}

typedef struct mdr_rts_hdr {
    mdr_hdr_t h;
    uint64_t seq;
    uint64_t tag;
    uint64_t total;
    uint64_t sreq_id;
} mdr_rts_hdr_t;

/* RFS_DATA: like RTS; the data moves by put into the RFS buffer. */
typedef struct mdr_rfs_data_hdr {
    mdr_hdr_t h;
    uint64_t seq;
    uint64_t tag;
    uint64_t total;    /* full message length (may exceed the receive buffer) */
    uint64_t rreq_id;
    uint64_t xfer_len; /* bytes that will be put (<= receive buffer) */
} mdr_rfs_data_hdr_t;

/* One rail's window on the receive buffer in CTS/RFS. */
typedef struct mdr_key_desc {
    uint8_t rail;
    uint8_t pad;
    uint16_t key_len;
    uint32_t pad2;
    uint64_t raddr; /* address of the buffer start on the receiver */
} mdr_key_desc_t;   /* key_len bytes of packed rkey follow, then 8-byte alignment padding */

typedef struct mdr_cts_hdr {
    mdr_hdr_t h;
    uint64_t sreq_id;
    uint64_t rreq_id;
    uint64_t xfer_len; /* bytes to put: min(message, receive buffer) */
    uint32_t nkeys;
    uint32_t pad;
} mdr_cts_hdr_t;     /* nkeys mdr_key_desc_t (+key) follow */

typedef struct mdr_rfs_hdr {
    mdr_hdr_t h;
    uint64_t rreq_id;
    uint64_t expected_seq; /* receiver's next expected sequence from the sender */
    uint64_t tag;
    uint64_t ignore;
    uint64_t buf_len;
    uint32_t nkeys;
    uint32_t space; /* enum mdr_rfs_space */
} mdr_rfs_hdr_t;    /* nkeys mdr_key_desc_t (+key) follow */

typedef struct mdr_fin_hdr {
    mdr_hdr_t h;
    uint64_t rreq_id;
    uint64_t bytes; /* bytes put on this rail */
} mdr_fin_hdr_t;

typedef struct mdr_id_hdr { /* ACK, RFS_NACK, RFS_REVOKE */
    mdr_hdr_t h;
    uint64_t id;
} mdr_id_hdr_t;

/* CANCEL: drop message seq if no receive has taken it; answer id. */
typedef struct mdr_cancel_hdr {
    mdr_hdr_t h;
    uint64_t seq; /* the message's sequence number (this sender -> that receiver) */
    uint64_t id;  /* the sender's request that waits for the answer */
} mdr_cancel_hdr_t;

/* CANCEL_ANS: the answer to CANCEL. */
typedef struct mdr_cancel_ans_hdr {
    mdr_hdr_t h;
    uint64_t id;        /* the id the CANCEL named */
    uint64_t cancelled; /* 1: dropped unmatched, the send is cancelled; 0: it goes on */
} mdr_cancel_ans_hdr_t;

/* ---------------- dispatch ---------------- */

typedef struct mdr_peer_rail mdr_peer_rail_t;

/* Handles a message that passed the checks of its type's entry. */
typedef void (*mdr_ctrl_handler_fn)(mdr_peer_rail_t *pr, const mdr_hdr_t *hdr, size_t len);

/* One message type, as its module registers it (mdr_ctrl_register). */
typedef struct mdr_ctrl_handler {
    const char *name;       /* NULL: not registered, an unknown type */
    size_t len;             /* exact length, or the minimum when body */
    int body;               /* a variable-length body follows */
    uint8_t flags;          /* MDR_HF_* the type may carry */
    mdr_ctrl_handler_fn fn; /* NULL: taken by ctrl.c itself (CREDIT) */
    int reserved;           /* travels in a reserved slot: no credit spent or returned
                             * (CREDIT, PING, PONG) */
} mdr_ctrl_handler_t;

/* ---------------- configuration ---------------- */

typedef struct mdr_core_config {
    char *rails;         /* MADRAIL_RAILS */
    size_t slot_size;    /* MADRAIL_SLOT_SIZE */
    unsigned credits;    /* MADRAIL_CREDITS: normal slots per peer per rail */
    size_t rndv_thresh;  /* MADRAIL_RNDV_THRESH */
    size_t stripe_min;   /* MADRAIL_STRIPE_MIN_CHUNK */
    size_t stripe_align; /* MADRAIL_STRIPE_ALIGN */
    char *rail_weights;  /* MADRAIL_RAIL_WEIGHTS */
    int recv_first;      /* MADRAIL_RNDV_RECV_FIRST */
    int rcache;          /* MADRAIL_RCACHE */
    unsigned rcache_max; /* MADRAIL_RCACHE_MAX */
    size_t pack_inline;  /* MADRAIL_PACK_INLINE_MAX */
    size_t recv_mem_max; /* MADRAIL_RECV_MEM_MAX: bytes held per peer for unmatched messages */
    size_t recv_mem_total_max; /* MADRAIL_RECV_MEM_TOTAL_MAX: the same, all peers together */
    unsigned job_size;   /* MADRAIL_JOB_SIZE: processes in the job, 0: unknown */
    unsigned peer_slack; /* MADRAIL_PEER_SLACK: peers allowed beyond the job size */
    int adapt;           /* MADRAIL_ADAPT: stripe weights and rail choice from measurements */
    double adapt_gain;   /* MADRAIL_ADAPT_GAIN: EWMA gain per throughput sample */
    unsigned adapt_probe;/* MADRAIL_ADAPT_PROBE: plans between probes of a starved rail */
    double adapt_sample; /* MADRAIL_ADAPT_SAMPLE: busy seconds per throughput sample */
    double put_ahead;    /* MADRAIL_PUT_AHEAD: seconds of puts a rail's driver may hold */
    double rail_timeout; /* MADRAIL_RAIL_TIMEOUT: seconds of silence that take a rail down, 0: off */
    double rail_timeout_min; /* MADRAIL_RAIL_TIMEOUT_MIN: floor of a timeout from the RTO, 0: off */
    double rail_rejoin;  /* MADRAIL_RAIL_REJOIN: longest back-off between reconnections, 0: off */
    double rail_flap;    /* MADRAIL_RAIL_FLAP: a down this soon after an up is a flap, 0: off */
    double rail_hold_max;/* MADRAIL_RAIL_HOLD_MAX: longest hold-down of a flapping rail */
    int stats;           /* MADRAIL_STATS */
    char *log_level;     /* MADRAIL_LOG_LEVEL */
    char *job_key;       /* MADRAIL_JOB_KEY: 32 hex digits or empty */
} mdr_core_config_t;

/* Bytes of key descriptors in one CTS/RFS. */
#define MDR_KEYS_MAX 4096

static inline size_t mdr_pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Number of reserved slots per ring: with credit returns sent once
 * ceil(credits/2) are owed (and each CREDIT carrying all of them), at most
 * two CREDIT messages can be in flight (ctrl.c); at most MDR_PING_MAX
 * PINGs go unanswered and a PONG answers each at once, so as many PINGs
 * and PONGs (watch.c). */
#define MDR_PING_MAX 2
#define MDR_RESERVED_SLOTS (2 + 2 * MDR_PING_MAX)
#define MDR_EVENTS_MAX 64 /* rail events kept for madrail_rail_events */

/* Receiver-first offers to one peer that may be unanswered at once (and
 * offers from one peer a sender keeps): bounds both records. */
#define MDR_RFS_WAIT_MAX 4

/* ---------------- objects ---------------- */

typedef struct madrail_context mdr_ctx_t;
typedef struct mdr_peer mdr_peer_t;
typedef struct madrail_request mdr_req_t;

/* Internal flag for mdr_tagged_* : the internal tag space (pack pieces). */
#define MDR_FLAG_INTERNAL (1u << 8)

typedef struct mdr_rail_slot {
    const mdr_rail_ops_t *ops;
    mdr_rail_t *rail;
    mdr_rail_attr_t attr;
    mdr_rcache_t *rcache;
    double weight;
    madrail_rail_stats_t stats;
    uint64_t up_events; /* a peer reconnected on this rail after it failed (madrail_rail_state) */
    uint64_t rejoin_attempts; /* reconnections we dialled after it went down (rejoin.c) */
    int index;
    mdr_ctx_t *ctx;
} mdr_rail_slot_t;

/* One peer on one rail. */
struct mdr_peer_rail {
    mdr_peer_t *peer;
    int rail;          /* index in ctx->rails */
    mdr_ep_t *ep;      /* NULL until first traffic */
    unsigned credits;  /* normal slots we may still fill at the peer */
    unsigned ret_pending; /* messages we processed, credits not yet returned */
    unsigned held;     /* messages stored out of order: their credits are withheld
                        * until their sequence number comes up (tag.c) */
    unsigned credit_msgs; /* CREDIT messages we sent (statistics) */
    int down;          /* ep failed or closed: mdr_peer_rail_mark_down (peer.c);
                        * up again only on a reconnection (the accepted upcall) */
    int credit_queued; /* a CREDIT message waits in txq */
    int untracked_sent; /* this ep took a message no send request watches (AM, CTS, ACK...) */
    int have_addr;     /* the peer's address for this rail is known */
    uint8_t addr[256];
    size_t addr_len;
    mdr_health_rail_t health; /* measured throughput and latency (health.c) */
    /* liveness (watch.c) */
    uint64_t rx_ns;    /* last message received on it */
    uint64_t life_ns;  /* last sign of life: a message, or the transport's acknowledgements */
    uint64_t ping_ns;  /* when the last PING left */
    unsigned pings_out;/* PINGs sent, PONG not yet received (<= MDR_PING_MAX) */
    unsigned stale_pongs; /* PONGs to PINGs forgotten when the rail came back up, taken
                           * without complaint (at most MDR_PING_MAX + 1 a revival) */
    unsigned pongs_owed; /* PINGs received, PONG not yet handed to the driver */
    char last_error[300]; /* why it went down (logged once, named when the peer fails) */
    /* recovery (replay.c): copies of the normal messages sent on it whose
     * credit has not come back, oldest first (at most `credits`) */
    struct mdr_replay_copy **ring;
    unsigned ring_head, ring_n;
    uint64_t tx_count;  /* normal messages handed to the driver on it */
    uint64_t rx_count;  /* normal messages received and taken on it */
    uint64_t *rx_resent; /* once down: bit k = the re-sent copy of index rx_count + k was taken */
    int ring_broken;    /* a copy could not be kept: this rail cannot be recovered */
    int replay_ok;      /* went down and every copy was queued again: what it held unsent
                         * is not lost (request.c) */
    uint64_t down_ns;  /* when it last went down (mdr_peer_rail_mark_down) */
    /* rejoin (rejoin.c): ep is our reconnection attempt while probing */
    int rejoin_armed;  /* counted in ctx->nrejoin: attempts are scheduled */
    int probing;       /* ep is a reconnection attempt the peer has not answered */
    int probe_failed;  /* its driver reported it failed: dropped by the next scan */
    int probe_owed;    /* its PING waits: the driver said no resource (handshake under way) */
    int close_pending; /* down for a protocol error: its ep is closed by the next progress */
    uint64_t probe_ns; /* when the attempt started */
    uint64_t rejoin_at_ns;   /* next attempt */
    uint64_t rejoin_wait_ns; /* current back-off */
    uint64_t up_ns;    /* when it last came back up (revive), 0: never went down */
    unsigned flaps;    /* downs in a row each within MADRAIL_RAIL_FLAP of coming back */
    uint64_t hold_ns;  /* the hold-down of the last flap (0: none) */
};

/* An outbound control message that could not be sent at once (no credit or
 * driver said no-resource): copied, queued on the peer, sent by progress. */
typedef struct mdr_txq_item {
    mdr_list_t link;
    int rail;       /* -1: any rail; else this rail only (FIN) */
    int is_credit;  /* CREDIT: needs no credit */
    uint64_t sreq_id; /* the send this message is part of (RTS, RFS_DATA, FIN), 0: none */
    int part;       /* FIN: its chunk in the send's puts, else -1 */
    int replay;     /* a re-sent copy (replay.c): pinned to rail, moved if that one fails */
    size_t len;
    uint8_t data[]; /* header + body */
} mdr_txq_item_t;

struct mdr_peer {
    madrail_peer_t index;
    uint64_t uuid;
    mdr_ctx_t *ctx;
    int nrails;                            /* rails usable with this peer */
    mdr_peer_rail_t rails[MDR_MAX_RAILS];
    uint64_t next_send_seq;
    uint64_t tx_seq_started;               /* every sequence number below this one has sent
                                            * a first fragment (ctrl.c: they start in order) */
    uint64_t expected_seq;
    size_t held_bytes;                     /* memory held for its messages no receive has
                                            * taken (MADRAIL_RECV_MEM_MAX, tag.c) */
    mdr_hash_t inflight;                   /* seq -> mdr_inmsg_t arrived, not done */
    mdr_list_t txq;                        /* mdr_txq_item_t waiting */
    mdr_list_t sendq;                      /* send requests with fragments left */
    unsigned rr;                           /* round-robin cursor for eager rail choice */
    unsigned stripe_rot;                   /* rotation of the rails' order in stripe plans */
    /* receiver-first rendezvous */
    mdr_list_t rfs_stored;                 /* sender side: mdr_rfs_t offered by this peer */
    unsigned nrfs_stored;
    uint64_t rfs_offers_in;                /* sender side: RFS received from this peer */
    uint64_t rfs_revokes_in;               /* sender side: RFS_REVOKE received from it */
    mdr_req_t *rfs_out;                    /* receiver side: our receive with an RFS out */
    uint64_t rfs_wait[MDR_RFS_WAIT_MAX];   /* receiver side: ids of our offers to this */
    unsigned nrfs_wait;                    /*   peer that it has not answered yet */
    mdr_list_t active_link;                /* in ctx->active while txq/sendq not empty */
    int active;
    int anonymous;                         /* connected to us before we knew its address */
    int index_shown;                       /* its index was given to the user (a message
                                            * received, probed, an active message) */
    uint32_t pack_next_id;                 /* pack API: next message id to this peer */
    mdr_list_t dead_eps;                   /* failed eps replaced by a reconnection */
    int unreachable_pending;               /* last rail lost outside an upcall: fail at progress */
    int broken;                            /* given up: a message to it was lost unsent */
    unsigned nreplay;                      /* re-sent copies in txq: other messages wait
                                            * behind them (replay.c) */
    unsigned resent_out;                   /* re-sent copies sent, not yet acknowledged */
    uint64_t resent_ns;                    /* when the last one left (replay.c: no rail
                                            * rejoins while copies may be on their way) */
    mdr_list_t retired_link;               /* ctx->retired once retired (peer.c)    */
    mdr_health_peer_t health;              /* stripe weights, probes (health.c) */
    uint64_t watch_gen;                    /* watch.c: a request waits on it at that scan */
};

/* A failed ep kept until finalize (never destroyed inside a driver upcall). */
typedef struct mdr_dead_ep {
    mdr_list_t link;
    int rail;
    mdr_ep_t *ep;
} mdr_dead_ep_t;

/* Sender-side record of a receiver-first CTS. */
typedef struct mdr_rfs {
    mdr_list_t link;
    uint64_t rreq_id, tag, ignore, buf_len;
    uint32_t space;
    uint32_t nkeys;
    size_t keys_len;
    uint8_t keys[]; /* nkeys descriptors as received */
} mdr_rfs_t;

enum { MDR_REQ_SEND = 1, MDR_REQ_RECV = 2 };

/* Protocol states of a request.  Each machine's allowed transitions are a
 * table in the module that owns it, and every change goes through its
 * setter: mdr_rndv_set and mdr_put_set (rndv.c), mdr_rfs_set (rfs.c),
 * mdr_ack_set (eager.c).  What a peer may answer in each state is checked
 * by the handlers before they change anything, so a refused transition is
 * a bug in the core, never a peer's doing: it is logged, counted
 * (ctx->state_errors) and the state stays. */

/* req->rndv: where a rendezvous stands, on either side. */
enum mdr_rndv_state {
    MDR_RNDV_NONE = 0,  /* send: eager/medium; receive: no rendezvous (yet) */
    MDR_RNDV_RTS_SENT,  /* send: RTS out, waiting for the CTS */
    MDR_RNDV_PUTTING,   /* send: puts planned from a CTS or a receiver-first offer */
    MDR_RNDV_CTS_SENT,  /* receive: CTS out, FINs expected for xfer_len bytes */
    MDR_RNDV_RFS_DATA   /* receive: RFS_DATA arrived, FINs expected for xfer_len bytes */
};

/* req->rfs_state: a receive's receiver-first offer. */
enum mdr_rfs_state {
    MDR_RFS_NONE = 0,  /* no offer out (never made, or declined by RFS_NACK) */
    MDR_RFS_OUT,       /* offered, unanswered: its FINs may come before its RFS_DATA */
    MDR_RFS_CONSUMED,  /* spent by the sender (RFS_DATA, or an RFS_CONSUMED eager) */
    MDR_RFS_STALE      /* matched by an earlier message: an RFS_NACK will follow */
};

/* req->wait_ack: a synchronous eager send's ACK (it may overtake fragments). */
enum mdr_ack_state {
    MDR_ACK_NONE = 0, /* not synchronous, or the ACK was taken */
    MDR_ACK_WAIT,     /* fragments going out, ACK not yet received */
    MDR_ACK_GOT       /* ACK received before the last fragment left */
};

/* req->cancel: a send's cancel (cancel.c). */
enum mdr_cancel_state {
    MDR_CANCEL_NONE = 0, /* not asked (or given up: the message matched first) */
    MDR_CANCEL_WANTED,   /* asked by the user; the CANCEL waits until the message is all out */
    MDR_CANCEL_SENT,     /* CANCEL out: the send completes only with its answer */
    MDR_CANCEL_ANSWERED  /* answered: cancelled (complete) or not (goes on normally) */
};

/* mdr_put_op_t.state: one chunk of a rendezvous. */
enum mdr_put_state {
    MDR_PUT_IDLE = 0, /* planned, not issued (or moved to another rail) */
    MDR_PUT_INFLIGHT, /* the driver has it and will report it */
    MDR_PUT_DONE      /* reported, or given up before it was issued */
};

/* mdr_rfs_hdr_t.space: the tag space an offer is for. */
enum mdr_rfs_space { MDR_RFS_SPACE_USER = 0, MDR_RFS_SPACE_INTERNAL = 1 };

/* Rendezvous put bookkeeping, one per chunk. */
typedef struct mdr_put_op {
    mdr_completion_t comp;
    mdr_req_t *req;
    int rail;
    enum mdr_put_state state; /* mdr_put_set (rndv.c) */
    unsigned tried; /* rails (bit per rail) this chunk could not be put on */
    uint64_t offset, len, raddr;
    const uint8_t *rkey;
    size_t rkey_len;
    uint32_t hgen; /* health.c: busy-time generation when issued */
    int timed;     /* health.c: counted as in flight */
} mdr_put_op_t;

struct madrail_request {
    mdr_list_t link;      /* posted queue / peer sendq */
    mdr_ctx_t *ctx;
    uint64_t id;          /* generation << 32 | table index */
    int type;             /* MDR_REQ_* */
    int complete;
    int freed_by_user;    /* set_callback / test done: free at completion */
    unsigned flags;       /* MADRAIL_SEND_SYNC | MDR_FLAG_INTERNAL */
    madrail_peer_t peer;  /* send: destination; recv: source or ANY */
    void *buf;
    size_t len;
    uint64_t tag, ignore;
    uint64_t seq;
    madrail_info_t info;
    madrail_callback_t cb;
    void *cb_arg;

    /* send progress */
    size_t frag_off;      /* next fragment offset (eager/medium) */
    enum mdr_ack_state wait_ack; /* mdr_ack_set (eager.c) */
    enum mdr_rndv_state rndv; /* send and receive: mdr_rndv_set (rndv.c) */
    int puts_left;        /* chunks not yet completed */
    int fins_left;        /* FINs not yet queued */
    int nputs;
    mdr_put_op_t *puts;   /* nputs entries, allocated for rendezvous only */
    uint8_t *cts;         /* copy of CTS/RFS key block (puts point into it) */
    size_t cts_len;       /* its bytes */
    uint32_t cts_nkeys;   /* its key descriptors */
    uint64_t peer_req_id; /* rendezvous: the other side's request id */
    int rfs_consumed;     /* send: this send consumed a receiver-first CTS */
    int has_am;           /* send: announced by an active message (madrail_am_isend) */
    uint64_t am_id;       /*   its id */
    void *am;             /*   its header, gathered (malloc; NULL when am_len is 0) */
    size_t am_len;        /*   its bytes */
    int queued;           /* send: in peer->sendq */
    /* send: data handed to drivers that may still be in this process
     * (request.c); the send completes only once it left or failed.  One
     * bit per rail. */
    uint8_t unsent_rails; /* eps that held bytes of it when last seen */
    uint8_t seq_unsent;   /* of those, holding a sequenced message (fragment, RTS, RFS_DATA) */
    uint8_t seq_rails;    /* rails that ever carried a sequenced message of it */
    uint8_t lost_rails;   /* rails that failed while holding bytes of it */
    uint8_t never_rails;  /* of those, rails whose connection was never made */
    uint16_t unsent_txq;  /* its messages still in the peer's txq */
    int proto_done;       /* protocol over: complete with success once nothing is unsent */
    int on_unsent;        /* in ctx->unsent by unsent_link */
    mdr_list_t unsent_link;
    uint64_t rts_ns;      /* send: when the RTS left (health.c: RTS -> CTS round trip) */
    int rts_rail;         /* send: the rail it left on */
    uint8_t seq_last;     /* send: 1 + rail of its last sequenced message handed to a driver
                           * (0: none); a CANCEL goes behind it on that rail */
    enum mdr_cancel_state cancel; /* send: mdr_cancel_set (cancel.c) */
    int cancel_held;      /* send: over with success, held until the CANCEL's answer; also
                           * set on a request made by madrail_cancel_sent (nothing else) */

    /* receive progress */
    int matched;
    int cancel_pending;
    struct mdr_inmsg *inmsg; /* matched message still arriving */
    uint64_t xfer_len;    /* rendezvous: bytes expected by put */
    uint64_t fin_bytes;   /* rendezvous: bytes reported by FINs */
    enum mdr_rfs_state rfs_state; /* mdr_rfs_set (rfs.c) */
    int rfs_rail;         /* rail the offer went on (its RFS_REVOKE follows it there) */
    int has_reg;          /* some reg[] was taken: mdr_rndv_reg_release has work */
    mdr_rcache_entry_t *reg[MDR_MAX_RAILS];
};

/* One stored fragment of a message no receive has taken yet: memory is
 * spent on what arrived, never on what a header claims (tag.c). */
typedef struct mdr_frag {
    struct mdr_frag *next;
    uint64_t off;
    uint32_t len;
    uint32_t alloc; /* bytes asked of the pool (header included) */
    uint64_t pad;   /* data 16-byte aligned */
    uint8_t data[];
} mdr_frag_t;

/* An arrived sequenced message (unexpected, out of order, or still
 * receiving fragments after it was matched). */
typedef struct mdr_inmsg {
    mdr_list_t link;      /* ctx->unexpected when in order and unmatched */
    mdr_peer_t *peer;
    uint64_t seq;
    uint64_t tag;
    uint64_t total;
    uint64_t id;          /* sreq id (SYNC ack, RTS) or rreq id (RFS) */
    uint8_t type;         /* MDR_MSG_EAGER / RTS / RFS_DATA */
    uint8_t flags;        /* MDR_HF_* */
    int in_order;         /* its sequence number has come up */
    int probed;           /* taken by improbe */
    size_t recvd;         /* eager bytes arrived */
    uint64_t got_lo;      /* eager, arrived in one range: [got_lo, got_lo + recvd) */
    struct mdr_ranges *got; /* eager, in several: the ranges (tag.c), else NULL */
    mdr_frag_t *frags;    /* eager: fragments stored until matched */
    size_t charged;       /* bytes counted in peer->held_bytes for this message */
    uint16_t held[MDR_MAX_RAILS]; /* per rail: fragments whose credit is withheld */
    mdr_req_t *rreq;      /* matched receive */
    uint64_t xfer_len;    /* RFS_DATA */
    int cancel_asked;     /* its sender's CANCEL waits for it to arrive whole (cancel.c) */
    uint64_t cancel_id;   /*   and names this request of the sender */
    int has_am;           /* EAGER_AM, or RTS with AM: an active message announces it,
                           * delivered once it is matched or stored (tag.c, am.c) */
    uint64_t am_id;       /*   its id */
    void *am;             /*   its header (malloc, charged; NULL when am_len is 0) */
    size_t am_len;
} mdr_inmsg_t;

struct madrail_message { /* improbe handle == inmsg */
    int unused;
};

struct madrail_context {
    mdr_core_config_t cfg;
    uint64_t uuid;
    int nrails;
    mdr_rail_slot_t rails[MDR_MAX_RAILS];
    mdr_rail_upcalls_t upcalls;
    mdr_stripe_params_t stripe;
    size_t eager_max;              /* payload bytes in one slot */
    mdr_peer_t **peers;
    uint32_t npeers, peers_cap;
    mdr_list_t posted;             /* receive requests not yet matched */
    mdr_list_t unexpected;         /* mdr_inmsg_t in order, unmatched */
    mdr_req_t **reqtab;            /* id -> request */
    uint32_t *reqgen;
    uint32_t reqtab_cap;
    uint32_t *reqfree;             /* free index stack */
    uint32_t nreqfree;
    mdr_pool_t pool;
    mdr_hash_t peer_by_uuid;       /* uuid -> mdr_peer_t */
    mdr_list_t active;             /* peers with queued work */
    int rail_order[MDR_MAX_RAILS]; /* rails by profile latency, lowest first */
    uint64_t active_sends;         /* send requests not complete */
    /* rendezvous protocol counters (MADRAIL_STATS): RTS sent, sends put
     * into a receiver-first offer instead (no RTS), offers made, offers
     * this side declined (RFS_NACK sent) */
    uint64_t n_rts, n_rfs_used, n_rfs_offered, n_rfs_nacked;
    mdr_list_t unsent;             /* send requests with data perhaps still in a driver */
    mdr_req_t *req_cache;          /* released requests kept for reuse */
    unsigned nreq_cache;
    const char *const *overrides;
    int in_progress;               /* progress recursion guard */
    int tail_deferred;             /* the last pass left its upkeep to this one (progress.c) */
    mdr_ctrl_handler_t handlers[MDR_MSG_MAX]; /* by message type (ctrl.c dispatch) */
    madrail_am_handler_t am_cb;    /* active-message handler */
    void *am_arg;
    uint8_t *am_scratch;           /* gathers an active message (slot_size bytes) */
    int finalizing;
    uint64_t state_errors;         /* transitions the state machines refused (bugs) */
    uint64_t tx_sreq_id;           /* while a message of a send request is handed to a
                                    * driver: that send (its copy names it, replay.c) */
    int rx_resent_rail;            /* while a re-sent message is handled: the rail it was
                                    * first sent on, else -1 (a FIN's key check, rndv.c) */
    unsigned fault_nomem;          /* tests: the Nth allocation of the receive path fails */
    unsigned fault_reg;            /* tests: bit r: local registrations for puts on rail r fail */
    size_t held_bytes;             /* sum of the peers' held_bytes */
    uint8_t job_key[MADRAIL_JOB_KEY_LEN]; /* every rail handshake carries it */
    madrail_job_key_origin_t job_key_origin;
    mdr_list_t retired;            /* anonymous peers that failed unused: freed by progress */
    uint32_t *peer_free;           /* indices of retired peers, never shown to the user */
    uint32_t npeer_free, peer_free_cap;
    uint32_t job_size;             /* processes in the job (madrail_context_set_job_size,
                                    * MADRAIL_JOB_SIZE), 0: unknown; bounds the peers
                                    * connections may create (peer.c) */
    double peer_refused_logged;    /* time of the last "peer refused" line, 0: none */
    unsigned long peer_refused_unlogged; /* refusals since that line */
    uint64_t watch_next_ns;        /* watch.c: next liveness scan */
    uint64_t pass_coarse_ns;       /* the coarse clock at the start of this progress pass
                                    * (with MADRAIL_RAIL_TIMEOUT): arrivals' life stamps */
    uint64_t watch_gen;            /* its count */
    uint32_t nrejoin;              /* rejoin.c: peer-rails with reconnections scheduled */
    uint32_t nclose_pending;       /* watch.c: peer-rails whose ep waits to be closed */
    madrail_rail_event_t events[MDR_EVENTS_MAX]; /* the last rail down/up events (peer.c) */
    uint64_t nevents;              /* events recorded in all (ring index: % MDR_EVENTS_MAX) */
    uint64_t n_replanned_bytes;    /* stripe bytes moved off the rail they were planned on */
    uint64_t rejoin_next_ns;       /* rejoin.c: next scan */
};

/* Tests make the receive path run out of memory: with ctx->fault_nomem = N
 * the Nth allocation there (a message record, a fragment, a reorder-table
 * slot, an aligned copy) fails; 0: never (the default). */
static inline int mdr_fault_nomem(mdr_ctx_t *ctx)
{
    return ctx->fault_nomem && --ctx->fault_nomem == 0;
}

/* ---------------- modules ---------------- */

/* Config table of the core */
extern const mdr_cfg_table_t mdr_core_cfg_table;

/* Each module declares its functions in its own header (docs/protocol.md,
 * "Inside the core", has the map). */
#include "core/peer.h"
#include "core/ctrl.h"
#include "core/request.h"
#include "core/tag.h"
#include "core/eager.h"
#include "core/rndv.h"
#include "core/rfs.h"
#include "core/am.h"
#include "core/watch.h"
#include "core/replay.h"
#include "core/rejoin.h"
#include "core/cancel.h"

#endif /* MDR_CORE_H */
