/**
 * @file madrail.h
 * @brief madrail — multi-rail communication library, public API.
 *
 * One context drives every network rail between this process and its
 * peers at once.  Small messages ride the best idle rail, large messages
 * are striped across all rails in proportion to their speed.
 *
 * Threading: a context is not thread safe; callers serialize all calls on
 * one context (MPICH's global critical section does this).  Two contexts
 * may be used from two threads.
 *
 * Every function returns a ::madrail_status_t unless said otherwise;
 * outputs (parameters ending in `_p`) are written only on success.
 */
#ifndef MADRAIL_H
#define MADRAIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Library version, major. */
#define MADRAIL_VERSION_MAJOR 0
/** Library version, minor. */
#define MADRAIL_VERSION_MINOR 1

/**
 * @brief Status codes.
 *
 * 0 is success, 1 "still in progress"; negative values are errors.
 * -1..-99 are generic errors, -100..-199 rail-level failures (the rail is
 * dropped, traffic is re-planned on the others), -200..-299 peer-level
 * failures (the peer's requests fail).
 */
typedef enum {
    MADRAIL_OK = 0,                   /**< success */
    MADRAIL_INPROGRESS = 1,           /**< accepted, completes later */
    MADRAIL_ERR_NORESOURCE = -1,      /**< out of a transient resource; retry */
    MADRAIL_ERR_INVALID = -2,         /**< bad argument */
    MADRAIL_ERR_NOMEM = -3,           /**< memory allocation failed */
    MADRAIL_ERR_UNSUPPORTED = -4,     /**< operation not supported */
    MADRAIL_ERR_CONFIG = -5,          /**< bad MADRAIL_* configuration */
    MADRAIL_ERR_TRUNCATE = -6,        /**< message longer than receive buffer */
    MADRAIL_ERR_CANCELED = -7,        /**< request was cancelled */
    MADRAIL_ERR_IO = -8,              /**< system call failed */
    MADRAIL_ERR_NOT_FOUND = -9,       /**< no such object */
    MADRAIL_ERR_PMI = -10,            /**< process manager (PMI) failure */
    MADRAIL_ERR_RAIL_DOWN = -100,     /**< rail failed: re-plan on others */
    MADRAIL_ERR_RAIL_PROTO = -101,    /**< peer sent a malformed message on a rail */
    MADRAIL_ERR_RAIL_CONNECT = -102,  /**< a rail's connection was never made: nothing
                                           given to it reached the peer */
    MADRAIL_ERR_PEER_UNREACHABLE = -200, /**< no rail reaches the peer */
    MADRAIL_ERR_PEER_PROTO = -201     /**< peer violated the protocol */
} madrail_status_t;

/** @return a static, human-readable string for @p status. */
const char *madrail_status_str(madrail_status_t status);

/** Opaque context: the rails, peers and queues of one process. */
typedef struct madrail_context *madrail_context_t;
/** Opaque request handle for a non-blocking operation. */
typedef struct madrail_request *madrail_request_t;
/** Opaque handle of a message taken out of matching by madrail_improbe(). */
typedef struct madrail_message *madrail_message_t;
/** Peer index, dense from 0 in the order madrail_peer_add() returned them. */
typedef uint32_t madrail_peer_t;

/** Wildcard source for receives and probes. */
#define MADRAIL_ANY_PEER ((madrail_peer_t)0xffffffffu)

/** Bits of the tag a receive matches exactly are those NOT set in the ignore mask. */
#define MADRAIL_TAG_EXACT ((uint64_t)0)
/** Ignore mask matching any tag. */
#define MADRAIL_TAG_ANY (~(uint64_t)0)

/** Largest packed context address (all rails) in bytes. */
#define MADRAIL_ADDR_MAX 1024

/** Bytes of a job key (see madrail_context_job_key()). */
#define MADRAIL_JOB_KEY_LEN 16

/**
 * @brief Parameters of madrail_context_init(); all fields optional.
 *
 * Zero the whole structure before setting the fields you use
 * (`madrail_context_params_t p = {0};` or memset): fields are only ever
 * appended, and a zero (NULL) field means "not given".
 */
typedef struct {
    /**
     * NULL-terminated array of "MADRAIL_NAME=value" strings that take
     * precedence over the environment (tests open several contexts with
     * different settings in one process).  May be NULL.
     */
    const char *const *overrides;
    /**
     * ::MADRAIL_JOB_KEY_LEN bytes: the job key, taking precedence over
     * MADRAIL_JOB_KEY (copied at init; not all zero).  NULL: MADRAIL_JOB_KEY,
     * else a random key.
     */
    const uint8_t *job_key;
} madrail_context_params_t;

/**
 * @brief Create a context: parse MADRAIL_* configuration, open the rails.
 *
 * A bad value fails with ::MADRAIL_ERR_CONFIG and a message naming the
 * variable and the value; an unknown MADRAIL_* name only warns.
 * @param params   optional parameters, may be NULL
 * @param ctx_p    the new context
 */
madrail_status_t madrail_context_init(const madrail_context_params_t *params,
                                      madrail_context_t *ctx_p);

/**
 * @brief Drain every in-flight operation, print statistics if
 * MADRAIL_STATS is set, close rails and free the context.  Sends not yet
 * collected are driven until their data left the process or failed (at
 * most 30 s; the rails' own timeouts usually end it sooner).
 */
madrail_status_t madrail_context_finalize(madrail_context_t ctx);

/**
 * @brief Pack this context's address (every rail's address) into @p buf.
 * @param ctx    the context
 * @param buf    destination, may be NULL to query the size
 * @param len_p  in: size of @p buf; out: bytes used (or needed)
 * @return ::MADRAIL_ERR_NORESOURCE with *len_p set when @p buf is too small
 */
madrail_status_t madrail_context_address(madrail_context_t ctx, void *buf, size_t *len_p);

/**
 * @name Job key
 *
 * Every rail handshake carries the context's job key, and a context accepts
 * a connection only from a process that holds the same key: a process that
 * can reach a rail's port but is not part of the job cannot join it, pose
 * as one of its processes, or learn anything from the answer (it gets none:
 * the connection is closed).  The key travels in clear in each handshake;
 * it protects against strangers, not against someone who can read the
 * traffic (docs/security.md).
 *
 * A context takes its key, in this order, from madrail_context_params_t.job_key,
 * from MADRAIL_JOB_KEY (32 hex digits, given to every process of the job by
 * the launcher), else makes a random one: such a context is alone until its
 * key is replaced by the job's, which madrail_pmi_wireup() (and the MPICH
 * netmod) do by giving every process rank 0's key through the process
 * manager before any address is published.
 * @{ */

/** Where a context's job key came from. */
typedef enum {
    MADRAIL_JOB_KEY_RANDOM = 0, /**< made at random by madrail_context_init() */
    MADRAIL_JOB_KEY_PARAMS = 1, /**< madrail_context_params_t.job_key */
    MADRAIL_JOB_KEY_ENV = 2,    /**< the MADRAIL_JOB_KEY variable */
    MADRAIL_JOB_KEY_SET = 3     /**< madrail_context_set_job_key() */
} madrail_job_key_origin_t;

/**
 * @brief Read the context's job key.
 * @param ctx       the context
 * @param key       ::MADRAIL_JOB_KEY_LEN bytes to fill
 * @param origin_p  where the key came from; may be NULL.  A bootstrap that
 *                  shares one process's key with the others (as
 *                  madrail_pmi_wireup() does) replaces only a
 *                  ::MADRAIL_JOB_KEY_RANDOM key.
 */
madrail_status_t madrail_context_job_key(madrail_context_t ctx, uint8_t *key,
                                         madrail_job_key_origin_t *origin_p);

/**
 * @brief Replace the context's job key (its origin becomes
 * ::MADRAIL_JOB_KEY_SET).
 *
 * Allowed until the first peer exists (madrail_peer_add(), or a process of
 * the job connecting to this one): a connection is authenticated with the
 * key it was made with.
 * @param key  @p len bytes, not all zero
 * @param len  ::MADRAIL_JOB_KEY_LEN
 * @return ::MADRAIL_ERR_INVALID (logged) for another length, an all-zero key,
 *         or a context that already has a peer
 */
madrail_status_t madrail_context_set_job_key(madrail_context_t ctx, const void *key,
                                             size_t len);
/** @} */

/**
 * @brief Tell the context how many processes the job has.
 *
 * A process that connects to this one before it was added with
 * madrail_peer_add() gets a peer record of its own; with the job size
 * known, such a connection is refused while the context already has
 * @p size plus MADRAIL_PEER_SLACK peers, so that a process holding the job
 * key cannot make this one keep a record (and the unexpected messages it
 * leaves) for every identity it invents.  madrail_pmi_wireup() and the
 * MPICH netmod call it; MADRAIL_JOB_SIZE gives it without them.  May be
 * called again (a job that grew).
 * @param size  processes in the job, at least 1
 * @return ::MADRAIL_ERR_INVALID (logged) for 0
 */
madrail_status_t madrail_context_set_job_size(madrail_context_t ctx, uint32_t size);

/**
 * @brief Add a peer from its packed address.  No connection is made until
 * the first message (lazy connection).  Adding the same address twice
 * returns the same peer index.
 */
madrail_status_t madrail_peer_add(madrail_context_t ctx, const void *addr, size_t len,
                                  madrail_peer_t *peer_p);

/** Flags of madrail_isend(). */
enum {
    MADRAIL_SEND_SYNC = 1u << 0 /**< complete only once the receive matched (MPI_Ssend) */
};

/** Completion information of a request. */
typedef struct {
    madrail_status_t status; /**< final status of the operation */
    madrail_peer_t source;   /**< receives: the peer it came from */
    uint64_t tag;            /**< receives: the message's full tag */
    size_t length;           /**< receives: bytes delivered; sends: bytes sent */
    size_t sent_length;      /**< receives: length the sender sent (> length if truncated) */
    int cancelled;           /**< 1 if the request was cancelled */
    uint64_t msg_id;         /**< sends: names the message to its peer, for
                                  madrail_cancel_sent() once the request is gone */
} madrail_info_t;

/** Completion callback, called from progress (or madrail_request_set_callback). */
typedef void (*madrail_callback_t)(madrail_request_t req, const madrail_info_t *info, void *arg);

/**
 * @brief Non-blocking tagged send.
 *
 * The request completes with success once the data has left this process
 * (handed to the network, not just queued by a rail), with an error when
 * it cannot: a connection that is never made, a peer that died or closed
 * first.  Completion needs only this side's progress (madrail_wait and
 * madrail_test drive it), never the receiver's, except for
 * ::MADRAIL_SEND_SYNC and rendezvous sizes, which wait for the receiver.
 * Data lost in the network after it left is not detected here.
 * @param ctx    the context
 * @param peer   destination
 * @param buf    data; must stay untouched until the request completes
 * @param len    bytes (0 allowed)
 * @param tag    64 match bits
 * @param flags  0 or ::MADRAIL_SEND_SYNC
 * @param req_p  the request; complete it with madrail_test()/madrail_wait()
 */
madrail_status_t madrail_isend(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                               size_t len, uint64_t tag, unsigned flags,
                               madrail_request_t *req_p);

/**
 * @brief Tagged send that needs no request when it completes at once.
 *
 * Like madrail_isend(), with one difference: a message that fits one slot
 * (MADRAIL_SLOT_SIZE less its header) and leaves this process inside the
 * call, with nothing of the peer's waiting before it, completes there:
 * *req_p is set to NULL and *msg_id_p to the value madrail_cancel_sent()
 * takes (info.msg_id of a request).  Otherwise *req_p is a request as
 * madrail_isend() returns, and *msg_id_p is not set.  This spares a small
 * message's request (MPI_Send of a few bytes: the MPI library completes
 * its own request at once).  Errors are madrail_isend()'s.
 * @param msg_id_p  set when *req_p is NULL
 */
madrail_status_t madrail_isend_nb(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                                  size_t len, uint64_t tag, unsigned flags,
                                  madrail_request_t *req_p, uint64_t *msg_id_p);

/**
 * @brief Non-blocking tagged receive.
 * @param src     peer or ::MADRAIL_ANY_PEER
 * @param tag     match bits
 * @param ignore  bits set here are not compared (::MADRAIL_TAG_ANY: any tag)
 */
madrail_status_t madrail_irecv(madrail_context_t ctx, madrail_peer_t src, void *buf, size_t len,
                               uint64_t tag, uint64_t ignore, madrail_request_t *req_p);

/**
 * @brief Probe for a message without receiving it.  Makes progress.
 * @param flag_p  1 if a matching message is waiting, else 0
 * @param info_p  source, tag and length (sent_length) of the message; may be NULL
 */
madrail_status_t madrail_iprobe(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                uint64_t ignore, int *flag_p, madrail_info_t *info_p);

/**
 * @brief Matched probe: like madrail_iprobe() but removes the message from
 * matching; receive it with madrail_imrecv().  *msg_p is NULL if none.
 */
madrail_status_t madrail_improbe(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                 uint64_t ignore, madrail_message_t *msg_p,
                                 madrail_info_t *info_p);

/** @brief Receive a message taken by madrail_improbe(). */
madrail_status_t madrail_imrecv(madrail_context_t ctx, madrail_message_t msg, void *buf,
                                size_t len, madrail_request_t *req_p);

/**
 * @brief Try to cancel a request.  Completion is still reported by
 * test/wait (or the callback), with info.cancelled set and status
 * ::MADRAIL_ERR_CANCELED if it took effect, else as if no cancel was asked.
 *
 * A receive not yet matched is cancelled (at once, or once the sender
 * answers when it had made a receiver-first offer).  A send is cancelled
 * when its receiver has not matched it: the receiver is asked to drop the
 * message from its unexpected messages and the send completes with the
 * answer (a send asked to cancel does not complete before it).  A send
 * whose receiver matched it (or that went into a receiver-first offer,
 * which is a match) completes normally.
 */
madrail_status_t madrail_cancel(madrail_context_t ctx, madrail_request_t req);

/**
 * @brief Cancel a send that already completed (its data left, e.g. a small
 * message): ask @p peer to drop the message named by the send's
 * info.msg_id if no receive has taken it yet.  *req_p completes like a
 * cancelled send (info.cancelled = 1, ::MADRAIL_ERR_CANCELED) when the
 * message was dropped, with ::MADRAIL_OK when it was not (matched, probed,
 * or not arrived whole yet).  Ask at most once per message.
 */
madrail_status_t madrail_cancel_sent(madrail_context_t ctx, madrail_peer_t peer,
                                     uint64_t msg_id, madrail_request_t *req_p);

/**
 * @brief Test a request.  On completion *flag_p is 1, the request is freed
 * and *req_p set to NULL; the return value is the operation's final status.
 * @param info_p  may be NULL
 */
madrail_status_t madrail_test(madrail_request_t *req_p, int *flag_p, madrail_info_t *info_p);

/** @brief Progress until the request completes; frees it, sets *req_p to NULL. */
madrail_status_t madrail_wait(madrail_request_t *req_p, madrail_info_t *info_p);

/**
 * @brief Call @p cb when @p req completes (from inside progress), then free
 * the request.  If it has completed already, @p cb runs before this returns.
 * The caller must not use @p req after this call.
 */
madrail_status_t madrail_request_set_callback(madrail_request_t req, madrail_callback_t cb,
                                              void *arg);

/** @brief Drive every rail once.  @return the number of events handled (>= 0). */
int madrail_progress(madrail_context_t ctx);

/** @brief Blocking send (isend + wait). */
madrail_status_t madrail_send(madrail_context_t ctx, madrail_peer_t peer, const void *buf,
                              size_t len, uint64_t tag, unsigned flags);
/** @brief Blocking receive (irecv + wait). */
madrail_status_t madrail_recv(madrail_context_t ctx, madrail_peer_t src, void *buf, size_t len,
                              uint64_t tag, uint64_t ignore, madrail_info_t *info_p);

/* ------------------------------------------------------------------ */
/** @name Active messages
 *
 * For runtimes that match messages themselves (the MPICH netmod carries
 * MPIDIG's active messages this way).  An active message fits in one
 * control slot (madrail_am_max() bytes); it is delivered to the receiver's
 * handler from inside progress, in send order with respect to every other
 * active or tagged message from the same sender, whatever rail it took.
 * Larger payloads travel as tagged messages (rendezvous and striping),
 * announced by an active message in their first control message
 * (madrail_am_isend()).
 * @{ */

/**
 * Handler of incoming active messages.  @p data (8-byte aligned) is valid
 * only during the call.  The handler may send (active or tagged messages)
 * and post receives, but must not wait or call progress.
 */
typedef void (*madrail_am_handler_t)(void *arg, madrail_peer_t src, uint64_t id,
                                     const void *data, size_t len);

/** @brief Set the context's active-message handler (NULL: messages are dropped with a warning). */
madrail_status_t madrail_am_set_handler(madrail_context_t ctx, madrail_am_handler_t cb, void *arg);

/** @return the largest active-message payload in bytes. */
size_t madrail_am_max(madrail_context_t ctx);

/**
 * @brief Send an active message gathered from @p iov (total <= madrail_am_max()).
 * The buffers may be reused on return; the message leaves now or, without
 * credits, from progress (it is never dropped).
 * @param id  64 bits handed to the receiver's handler
 */
madrail_status_t madrail_am_send(madrail_context_t ctx, madrail_peer_t peer, uint64_t id,
                                 const struct iovec *iov, int iovcnt);

/**
 * @brief Send a tagged message announced by an active message that travels
 * inside the message's first control message.
 *
 * The receiver takes the message in send order like any tagged message
 * from this sender (matched by a posted receive, else stored unexpected)
 * and then, at that same place of the order, calls its handler with
 * (@p id, header).  A receive the handler posts for @p tag takes the
 * message at once: a large one costs one rendezvous (RTS carrying the
 * header, CTS, puts, FIN), with no separate announcement and no
 * receiver-first offer; header and data that fit one slot travel as one
 * message.  Between one slot and MADRAIL_RNDV_THRESH the header goes as an
 * active message just before the message's eager fragments (the handler
 * runs before the message has arrived: post a receive, do not probe).
 * Cancelling the send drops the announcement with the message if the
 * receiver has not taken it yet.
 *
 * @param id         64 bits handed to the receiver's handler
 * @param am_iov     the header, gathered; at most madrail_am_max() - 8
 *                   bytes; may be reused on return
 * @param am_iovcnt  entries in @p am_iov (0: an empty header)
 * @param buf        data; must stay untouched until the request completes
 * @param len        bytes (0 allowed)
 * @param tag        64 match bits of the tagged message
 * @param req_p      the send request; complete it with madrail_test()/madrail_wait()
 */
madrail_status_t madrail_am_isend(madrail_context_t ctx, madrail_peer_t peer, uint64_t id,
                                  const struct iovec *am_iov, int am_iovcnt, const void *buf,
                                  size_t len, uint64_t tag, madrail_request_t *req_p);
/** @} */

/* ------------------------------------------------------------------ */
/** @name Madeleine-style incremental messages
 *
 * A message is built piece by piece between begin_packing() and
 * end_packing(); the receiver unpacks the same sequence of piece sizes and
 * modes between begin_unpacking() and end_unpacking().
 * @{ */

/** Send-side semantics of a piece. */
typedef enum {
    MADRAIL_SEND_SAFER = 0,  /**< copied at pack time: buffer reusable at once */
    MADRAIL_SEND_LATER = 1,  /**< read at end_packing: value at that time is sent */
    MADRAIL_SEND_CHEAPER = 2 /**< library's choice; buffer untouched until end_packing */
} madrail_send_mode_t;

/** Receive-side semantics of a piece. */
typedef enum {
    MADRAIL_RECEIVE_EXPRESS = 0, /**< data is in the buffer when unpack returns */
    MADRAIL_RECEIVE_CHEAPER = 1  /**< data is in the buffer after end_unpacking */
} madrail_recv_mode_t;

/** Opaque message being packed or unpacked. */
typedef struct madrail_pack *madrail_pack_t;

/** @brief Start a message to @p peer with @p tag. */
madrail_status_t madrail_begin_packing(madrail_context_t ctx, madrail_peer_t peer, uint64_t tag,
                                       madrail_pack_t *msg_p);
/** @brief Append a piece to the message. */
madrail_status_t madrail_pack(madrail_pack_t msg, const void *buf, size_t len,
                              madrail_send_mode_t smode, madrail_recv_mode_t rmode);
/** @brief Send what is left; on return every packed buffer may be reused. */
madrail_status_t madrail_end_packing(madrail_pack_t msg);

/**
 * @brief Wait for the next message matching (src, tag, ignore) and start
 * unpacking it.
 * @param info_p  source and tag of the message; may be NULL
 */
madrail_status_t madrail_begin_unpacking(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                         uint64_t ignore, madrail_pack_t *msg_p,
                                         madrail_info_t *info_p);
/**
 * @brief Extract the next piece; sizes and modes must mirror the sender's.
 * A mismatch is reported as ::MADRAIL_ERR_INVALID (never undefined).
 */
madrail_status_t madrail_unpack(madrail_pack_t msg, void *buf, size_t len,
                                madrail_send_mode_t smode, madrail_recv_mode_t rmode);
/** @brief Finish: every CHEAPER piece is in place on return. */
madrail_status_t madrail_end_unpacking(madrail_pack_t msg);
/** @} */

/* ------------------------------------------------------------------ */
/** @name Rails and statistics
 * @{ */

/** Per-rail counters, both directions. */
typedef struct {
    uint64_t tx_msgs;       /**< control messages sent (eager, RTS, CTS, FIN, ...) */
    uint64_t tx_bytes;      /**< bytes sent: control messages plus put payload */
    uint64_t tx_put_bytes;  /**< rendezvous (striped) payload bytes put */
    uint64_t tx_puts;       /**< put operations (stripe chunks) issued */
    uint64_t rx_msgs;       /**< control messages received */
    uint64_t rx_bytes;      /**< bytes received: control messages plus put payload */
    uint64_t rx_put_bytes;  /**< rendezvous payload bytes received by put */
    uint64_t credit_stalls; /**< sends that waited for credits */
    uint64_t failovers;     /**< times traffic was moved off this rail */
    uint64_t pings;         /**< liveness PINGs sent (MADRAIL_RAIL_TIMEOUT) */
    uint64_t pongs;         /**< PONGs sent in answer to the peer's PINGs */
    uint64_t timeouts;      /**< times the rail was taken down for a peer after silence */
    uint64_t resent_msgs;   /**< control messages sent on this rail whose arrival was not
                                 confirmed when it failed, re-sent on another rail */
    uint64_t resent_dups;   /**< re-sent copies of messages first sent to us on this rail,
                                 dropped because the original had arrived */
} madrail_rail_stats_t;

/** Static description of a rail. */
typedef struct {
    char name[64];          /**< e.g. "tcp:lo" */
    char driver[16];        /**< e.g. "tcp" */
    double latency_us;      /**< profile latency */
    double bandwidth_mbs;   /**< profile bandwidth, MB/s */
    double weight;          /**< striping weight in use */
    size_t max_ctrl;        /**< largest control message (slot) */
} madrail_rail_info_t;

/** @return the number of rails the context opened. */
int madrail_rail_count(madrail_context_t ctx);
/** @brief Describe rail @p index. */
madrail_status_t madrail_rail_info(madrail_context_t ctx, int index, madrail_rail_info_t *info_p);
/** @brief Read rail @p index's counters (summed over peers). */
madrail_status_t madrail_rail_stats(madrail_context_t ctx, int index,
                                    madrail_rail_stats_t *stats_p);
/** @brief Print every rail's counters to @p out in a table. */
void madrail_stats_print(madrail_context_t ctx, FILE *out);

/**
 * Whether a rail works, over the peers it was used with.  A rail goes
 * down to a peer when its connection fails (or the peer sends it garbage)
 * and comes back up when the peer connects again on it.
 */
typedef struct {
    uint32_t peers;        /**< peers this rail has (had) a connection to */
    uint32_t peers_down;   /**< of which it is down to now */
    uint64_t down_events;  /**< times it went down to a peer (the failovers counter) */
    uint64_t up_events;    /**< times it came back up to a peer after going down */
} madrail_rail_state_t;

/** @brief Read whether rail @p index is up, down or down to some peers. */
madrail_status_t madrail_rail_state(madrail_context_t ctx, int index,
                                    madrail_rail_state_t *state_p);

/** A rail going down to a peer, or coming back up (MADRAIL_RAIL_REJOIN). */
typedef struct {
    double time;         /**< when, seconds since the Epoch (wall clock) */
    int rail;            /**< rail index */
    madrail_peer_t peer; /**< the peer it concerns */
    int up;              /**< 1: came back up; 0: went down */
    char what[160];      /**< down: why (the driver's error, or the silence the rail
                              timeout measured); up: how long it had been down */
} madrail_rail_event_t;

/**
 * @brief Copy the most recent rail events, oldest first: at most @p max
 * into @p ev (the context keeps the last 64).  @return how many were
 * copied; @p total_p (may be NULL) receives how many happened in all.
 */
int madrail_rail_events(madrail_context_t ctx, madrail_rail_event_t *ev, int max,
                        uint64_t *total_p);

/**
 * What rail adaptation measured for one peer on one rail, and the weight
 * it gave the rail (MADRAIL_ADAPT; docs/configuration.md).  Throughput is
 * measured at the sender, from its puts to that peer.
 */
typedef struct {
    double measured_mbs; /**< delivered put throughput, smoothed, MB/s (10^6 B/s); 0: none yet */
    uint64_t samples;    /**< throughput samples taken */
    double latency_us;   /**< control latency: half the smallest recent RTS->CTS round trip on
                              this rail; 0: none measured */
    double weight;       /**< the rail's weight in the last stripe plan to this peer */
    double share;        /**< that weight's share of the plan, 0..1 */
    int measured;        /**< 1: that plan used measured weights; 0: static ones */
    uint64_t plans;      /**< stripe plans made for this peer */
    uint64_t probes;     /**< of which gave a starved rail a probe share */
} madrail_rail_health_t;

/** @brief Read what adaptation knows of rail @p rail towards @p peer. */
madrail_status_t madrail_peer_rail_health(madrail_context_t ctx, madrail_peer_t peer, int rail,
                                          madrail_rail_health_t *health_p);

/** @} */

/* ------------------------------------------------------------------ */
/** @name Launch by a PMI-1 process manager (hydra mpiexec)
 *
 * Reads PMI_FD (or PMI_PORT), PMI_RANK and PMI_SIZE as hydra sets them and
 * speaks the PMI-1 wire protocol; madrail has no launcher of its own.
 * (Slurm serves PMI-1 only as a library, not on the wire: not supported.)
 * @{ */

/** The job as the process manager describes it. */
typedef struct {
    int rank;               /**< this process's rank */
    int size;               /**< number of processes */
    madrail_peer_t *peers;  /**< peers[r] for rank r; peers[rank] is MADRAIL_ANY_PEER (no self peer) */
} madrail_job_t;

/**
 * @brief Join the PMI-1 job, publish this context's address, fence, and add
 * every other rank as a peer (connections stay lazy).
 *
 * First every rank whose job key is its own random one
 * (::MADRAIL_JOB_KEY_RANDOM) takes rank 0's through the PMI key space, so
 * call it before madrail_peer_add() on @p ctx.  A rank without a key of its
 * own while rank 0 has one from MADRAIL_JOB_KEY or the application fails
 * with ::MADRAIL_ERR_CONFIG (give every rank the same MADRAIL_JOB_KEY).
 * Fails with ::MADRAIL_ERR_PMI and a message if no PMI server is reachable.
 */
madrail_status_t madrail_pmi_wireup(madrail_context_t ctx, madrail_job_t *job_p);
/**
 * @brief PMI barrier over the whole job.  While it waits it keeps driving
 * the context given to madrail_pmi_wireup() (peers may wait for this
 * side's replies, credit returns or sends not yet collected), so that
 * context must stay alive until madrail_pmi_finalize().
 */
madrail_status_t madrail_pmi_barrier(void);
/** @brief Leave the PMI job and free job->peers. */
madrail_status_t madrail_pmi_finalize(madrail_job_t *job);

/** @} */

/* ------------------------------------------------------------------ */
/** @name Configuration introspection (for madrail_info)
 * @{ */

/** @brief Print every MADRAIL_* variable with its type, default and help. */
void madrail_config_print(FILE *out);

/** Where the value of a MADRAIL_* variable comes from. */
typedef enum {
    MADRAIL_CONFIG_DEFAULT = 0, /**< not set: the built-in default */
    MADRAIL_CONFIG_ENV = 1      /**< set in the environment */
} madrail_config_source_t;

/** One MADRAIL_* variable as a context created now would read it
 * (madrail_config_var()).  The strings belong to the library (value to
 * the environment): do not free them, and do not keep them across a
 * change of the environment. */
typedef struct {
    const char *name;   /**< "MADRAIL_SLOT_SIZE" */
    const char *module; /**< its table: "core", "tcp", "discover", ... */
    const char *type;   /**< "size (bytes)", "unsigned", "bool", "number", "time (s)", "string" */
    const char *defval; /**< the default, as text ("" when empty) */
    const char *value;  /**< the value in effect, as text: the environment's, else the default */
    madrail_config_source_t source;
    const char *error;  /**< NULL when value is valid; else why a context would refuse it */
    char range[64];     /**< bounds of a numeric variable ("256..1m"), "" when none */
    const char *help;   /**< what it does */
} madrail_config_var_t;

/** @return the number of MADRAIL_* variables the library has. */
int madrail_config_count(void);
/** @brief Describe variable @p index (0 .. madrail_config_count() - 1). */
madrail_status_t madrail_config_var(int index, madrail_config_var_t *var_p);
/**
 * @brief The @p index-th name in the environment that starts with MADRAIL_
 * but is no variable of the library (a misspelling), copied into @p name
 * (@p len bytes), and the nearest known name in *@p nearest_p (NULL when
 * none).  ::MADRAIL_ERR_INVALID past the last one.
 */
madrail_status_t madrail_config_unknown(int index, char *name, size_t len,
                                        const char **nearest_p);

/** A network driver madrail has, built into this library or not. */
typedef struct {
    const char *name;   /**< as in rail specs: "tcp", "shm", "ofi", "ucx", "loop" */
    int built;          /**< 1 when this library has it (rail specs may name it) */
    const char *detail; /**< how configure found what it needs, or why it was not built */
} madrail_driver_info_t;

/** @return the number of drivers madrail has, built or not. */
int madrail_driver_count(void);
/** @brief Describe driver @p index (0 .. madrail_driver_count() - 1). */
madrail_status_t madrail_driver_info(int index, madrail_driver_info_t *info_p);

/** @return the library's version, "MAJOR.MINOR.PATCH". */
const char *madrail_version(void);
/** @return how this library was built: lines "key: value" (configure
 * arguments, hwloc, symbol versioning, sanitizers). */
const char *madrail_build_config(void);

/**
 * @brief Print the machine as madrail sees it: NUMA nodes, cores, this
 * process's binding (hwloc), each network device (interface or OpenFabrics
 * HCA port) with its PCI address, NUMA node, nearby processors, link speed
 * and state, then the rails MADRAIL_RAILS=auto would choose and one line
 * per device saying why it was chosen or rejected.
 */
void madrail_topology_print(FILE *out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* MADRAIL_H */
