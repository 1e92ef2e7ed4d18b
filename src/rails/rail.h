/*
 * The driver interface.  A driver knows nothing of striping, credits,
 * matching or MPI: it moves control messages (each fits one receiver slot)
 * and puts (remote writes into registered memory) between endpoints, and
 * reports what it can do in a profile.  Every operation is non-blocking and
 * returns done, in-progress (a completion follows) or no-resource (the core
 * queues and may re-plan on another rail).  A driver never aborts on what a
 * peer sends: it closes that endpoint and reports the reason upward.
 *
 * Object model:
 *   mdr_rail_t  one driver instance on one device (private to the driver)
 *   mdr_ep_t    that rail's connection to one peer (private to the driver)
 *   mdr_memh_t  a registration of local memory on one rail
 * The core hands the driver opaque cookies (one per rail, one per ep) that
 * the driver passes back in upcalls.
 */
#ifndef MDR_RAIL_H
#define MDR_RAIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "madrail.h"

typedef struct mdr_rail mdr_rail_t;
typedef struct mdr_ep mdr_ep_t;
typedef struct mdr_memh mdr_memh_t;

/* Capability bits.  A driver's ops->caps lists every bit one of its rails
 * may report; each rail reports its own in attr.caps (a subset: a rail's
 * configuration may switch a bit off).  The bits name what the driver
 * really wires in: mdr_rail_ops_check refuses a driver whose PUT or FLUSH
 * bit disagrees with its operations, and the conformance suite checks
 * each rail's bits against what the rail does. */
enum {
    MDR_RAIL_CAP_PUT = 1u << 0,      /* put() works (in hardware or software) */
    MDR_RAIL_CAP_PUT_HW = 1u << 1,   /* put() is hardware RDMA (no remote CPU) */
    MDR_RAIL_CAP_REG_CHEAP = 1u << 2,/* mem_reg() is cheap: the core need not cache
                                      * (without it, registration is needed and costs) */
    MDR_RAIL_CAP_PUT_REMOTE = 1u << 3,/* a put's completion says the data is in the
                                      * target memory (remote completion); without it,
                                      * only that the source may be reused (local) */
    MDR_RAIL_CAP_CMA = 1u << 4,      /* puts to a process of this node are one copy
                                      * by the sender (process_vm_writev) */
    MDR_RAIL_CAP_FLUSH = 1u << 5     /* ctrl_send may keep messages back: flush() does
                                      * work (without it, flush is mdr_rail_noop_flush) */
};
#define MDR_RAIL_CAP_ALL 0x3fu

/* What the core learns about a rail after open(). */
typedef struct mdr_rail_attr {
    char name[64];        /* "tcp:lo", "loop:f0" */
    uint32_t caps;        /* MDR_RAIL_CAP_* */
    double latency_us;    /* profile: one-way small-message latency */
    double bandwidth_mbs; /* profile: MB/s for large transfers */
    size_t max_ctrl;      /* largest control message (>= params->slot_size) */
    size_t addr_len;      /* bytes addr_pack() writes */
    size_t max_rkey;      /* largest packed remote key */
} mdr_rail_attr_t;

/* Upcalls from driver to core.  They may be called only from inside the
 * driver's progress() (never from inside ctrl_send/put/ep_create).  An
 * upcall may call the driver back: ctrl_send, put, ep_create and
 * ep_destroy, also of the ep it names (the core answers messages, returns
 * credits and closes eps from upcalls); never progress, flush or close.
 * A driver that delivers from inside its network library's own callback
 * must make those calls safe there (ucx defers ucp_ep closes). */
typedef struct mdr_rail_upcalls {
    /* A control message arrived on ep.  data is 8-byte aligned and valid
     * only during the call; the core copies what it keeps.  This frees the
     * slot at once. */
    void (*ctrl_recv)(void *ep_cookie, const void *data, size_t len);
    /* A peer we have no ep for connected to us (identified by the uuid it
     * gave at its rail open) and proved the job key.  The driver created
     * new_ep; the core returns the ep cookie, or NULL to refuse (the driver
     * then destroys new_ep).  A handshake naming a uuid the driver has a
     * live ep for replaces that ep only after it proved the key: the driver
     * fails the old ep first ("the peer reconnected"), then offers the new
     * one here, so the core sees both in order. */
    void *(*ep_accepted)(void *rail_cookie, uint64_t remote_uuid, mdr_ep_t *new_ep);
    /* The ep failed (connection lost, malformed frame, ...): reason is a
     * human-readable string.  After this the ep delivers nothing more and
     * its pending put completions are reported with an error status.
     * MADRAIL_ERR_RAIL_CONNECT says the connection was never made, so
     * nothing ctrl_send or put accepted on this ep reached the peer (the
     * core may send it again elsewhere); a driver that cannot be sure of
     * that reports MADRAIL_ERR_RAIL_DOWN. */
    void (*ep_failed)(void *ep_cookie, madrail_status_t status, const char *reason);
} mdr_rail_upcalls_t;

/* What the core gives a driver at open(). */
typedef struct mdr_rail_params {
    uint64_t uuid;                     /* unique id of the owning context */
    const mdr_rail_upcalls_t *upcalls; /* where to report */
    void *rail_cookie;                 /* passed back in ep_accepted */
    size_t slot_size;                  /* largest control message the core will send */
    unsigned slots;                    /* ring depth the core uses (credits + reserved) */
    const char *const *overrides;      /* MADRAIL_* overrides for the driver's config */
    /* MDR_JOB_KEY_LEN bytes owned by the core, valid until close: every
     * handshake carries them and a handshake that does not is refused
     * (mdr_drv_key_equal, mdr_drv_refusal in rails/common/drv.h).  Read at
     * each handshake: the core may change the bytes before its first peer.
     * Required (open fails with MADRAIL_ERR_INVALID without it). */
    const uint8_t *job_key;
    /* 1: the core measures this rail's put throughput (rail adaptation,
     * MADRAIL_ADAPT, with more than one rail and no MADRAIL_RAIL_WEIGHTS):
     * a driver whose local completion comes long before the data crossed
     * the link (tcp: at the socket write) should, unless its user chose
     * otherwise, complete puts when the target has them, or the rail reads
     * as fast as its send buffer (core/health.c). */
    int measure_puts;
    /* 1: the context has more than one rail, so the core recovers what a
     * failed rail took with it on the others (core/replay.c, rndv.c),
     * which needs a put's completion to mean the target has its data (a
     * FIN sent after it is then true, and re-sent if lost): a driver whose
     * local completion comes earlier should, unless its user chose
     * otherwise, complete puts when the target has them. */
    int failover;
} mdr_rail_params_t;

#define MDR_JOB_KEY_LEN MADRAIL_JOB_KEY_LEN

/* Completion of an in-progress put.  The driver calls cb once, from
 * progress(), with MADRAIL_OK or an error status. */
typedef struct mdr_completion mdr_completion_t;
struct mdr_completion {
    void (*cb)(mdr_completion_t *comp, madrail_status_t status);
};

/* Access flags of mem_reg(). */
enum { MDR_MEM_LOCAL = 1u << 0, MDR_MEM_REMOTE_WRITE = 1u << 1 };

typedef struct mdr_rail_ops {
    /* sizeof(mdr_rail_ops_t) as the driver was compiled: a driver built
     * against another version of this header is refused (MDR_RAIL_OPS_SIZE). */
    size_t size;
    uint32_t caps;    /* MDR_RAIL_CAP_* that some rail of this driver may report */
    const char *name; /* driver name, the part of a rail spec before ':' */

    /* Open a rail from the part of the spec after "name:" (e.g. "lo",
     * "10.0.0.1", "f0;delay=2").  A bad spec fails with MADRAIL_ERR_CONFIG
     * after logging a message that names it. */
    madrail_status_t (*open)(const char *spec, const mdr_rail_params_t *params,
                             mdr_rail_t **rail_p);
    /* Close: destroys remaining eps, frees everything. */
    void (*close)(mdr_rail_t *rail);
    void (*query)(mdr_rail_t *rail, mdr_rail_attr_t *attr);
    /* Pack this rail's address (attr.addr_len bytes) into buf. */
    madrail_status_t (*addr_pack)(mdr_rail_t *rail, void *buf, size_t len);

    /* Create the ep to a peer from the address its rail packed.  May return
     * before the connection is up: ctrl_send/put are queued until then.
     * The driver must also accept that the peer connects to us first (it
     * then uses one connection per peer per rail, merging the two). */
    madrail_status_t (*ep_create)(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                  size_t len, void *ep_cookie, mdr_ep_t **ep_p);
    /* Pending put completions of a destroyed ep are dropped, never called. */
    void (*ep_destroy)(mdr_ep_t *ep);
    /* Bytes accepted by ctrl_send/put but not yet handed to the network. */
    size_t (*ep_backlog)(mdr_ep_t *ep);
    /* Bytes of accepted control messages still held by this process: queued
     * until the connection is up, behind a full socket, owned by the
     * provider until its send completes.  A failure of the ep loses them
     * unsent.  The core reports a send complete only once every ep it used
     * is back at 0, so this must fall to 0 through this side's flush and
     * progress alone while the peer can take the data (flow control, a full
     * socket or fifo, waits for the peer; so does a provider that completes
     * a send on the peer's acknowledgement).  Equal to ep_backlog unless the
     * driver counts the network's own in-flight bytes there (loop), or the
     * ep failed: what a failed ep dropped never left, and stays counted
     * (the core hears of the failure only with the failure upcall, and
     * until then must not take the drop for a departure: tcp). */
    size_t (*ep_unsent)(mdr_ep_t *ep);
    /* True once nothing is queued and every completion was reported. */
    int (*ep_idle)(mdr_ep_t *ep);
    /* Liveness as the transport sees it, for the core's rail timeout
     * (MADRAIL_RAIL_TIMEOUT): *quiet_ns_p = for how long bytes of ours
     * that left this process have been waiting for the peer's transport
     * to acknowledge them with no acknowledgement at all (0 when nothing
     * waits for one, or acknowledgements keep coming: a busy, slow link
     * is alive; a peer whose receive window is full but who answers is
     * alive; a black hole is not).  Returns 0, or -1 when the driver
     * cannot tell: the core then never times the rail out (it relies on
     * the driver's errors), so a peer process that is merely slow to call
     * progress is never taken for a dead link. */
    int (*ep_link_quiet)(mdr_ep_t *ep, uint64_t *quiet_ns_p);
    /* The core gives ep up for a failure its driver did not report (a rail
     * timeout, a link event, the peer's word) and calls this before
     * ep_destroy: once it returns, nothing sent earlier on ep's connection,
     * in either direction, may still be delivered into this process's
     * memory or upcalls, nor into the peer's memory (a put that a dead
     * link held and that lands after its buffer was handed back would
     * write into a buffer that belongs to another message).  Drivers whose
     * puts the target checks against a region it revokes (tcp, shm, loop),
     * or whose connection cannot outlive the destroy, use
     * mdr_rail_noop_fence. */
    void (*ep_fence)(mdr_ep_t *ep);
    /* The transport's own retransmission timeout for ep's path, without
     * back-off (TCP: tcpi_rto >> tcpi_backoff, at least 200 ms on Linux),
     * in *rto_ns_p: the core's rail timeout for the path is derived from
     * it (MADRAIL_RAIL_TIMEOUT_MIN, watch.c).  Returns 0, or -1 when the
     * driver cannot tell (the core then uses MADRAIL_RAIL_TIMEOUT). */
    int (*ep_link_rto)(mdr_ep_t *ep, uint64_t *rto_ns_p);

    /* Send a control message (total <= slot_size).  The buffers are
     * reusable on return.  Messages on one ep are delivered in order.
     * Returns MADRAIL_OK, MADRAIL_ERR_NORESOURCE (nothing was sent, try
     * later) or MADRAIL_ERR_RAIL_DOWN (the ep has failed; ep_failed is or
     * will be reported from progress). */
    madrail_status_t (*ctrl_send)(mdr_ep_t *ep, const struct iovec *iov, int iovcnt);

    /* Register memory for puts (local source or remote target). */
    madrail_status_t (*mem_reg)(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                mdr_memh_t **memh_p);
    void (*mem_dereg)(mdr_rail_t *rail, mdr_memh_t *memh);
    /* Offer memh to the peer of uuid peer (the uuid ep_create was given,
     * or ep_accepted reported) and pack its remote key into buf (room for
     * *len_p bytes, at least attr.max_rkey); on success *len_p = bytes
     * written.  A driver that checks puts itself (tcp, shm, loop) then
     * takes puts into memh from that peer alone, on this rail, until
     * mem_dereg; offering memh again moves it to the new peer.  So such a
     * driver reports MDR_RAIL_CAP_REG_CHEAP: the core then registers per
     * transfer and never shares one registration between two peers' live
     * transfers.  ofi and ucx leave the binding to the provider, which
     * makes none (docs/security.md). */
    madrail_status_t (*rkey_pack)(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                  void *buf, size_t *len_p);

    /* Write len bytes from local (covered by lmemh, may be NULL when the
     * rail has MDR_RAIL_CAP_REG_CHEAP) to the peer's raddr, inside the
     * region of the packed rkey.  Returns MADRAIL_OK (done, comp not
     * called), MADRAIL_INPROGRESS (comp->cb follows) or
     * MADRAIL_ERR_NORESOURCE, or MADRAIL_ERR_RAIL_DOWN on a failed ep.
     * Ordering promise: once comp reports OK, a
     * control message sent later on the same ep is delivered after the data
     * is visible in the target memory. */
    madrail_status_t (*put)(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                            uint64_t raddr, const void *rkey, size_t rkey_len,
                            mdr_completion_t *comp);

    /* Make progress; returns the number of events handled. */
    int (*progress)(mdr_rail_t *rail);

    /* Hand to the network what ctrl_send accepted but kept back to send
     * together with later messages (coalescing), without polling for
     * input.  The core calls it when the application collects a completed
     * send, so a blocking send's data leaves before the caller goes idle.
     * Drivers that keep nothing back use mdr_rail_noop_flush. */
    int (*flush)(mdr_rail_t *rail);
} mdr_rail_ops_t;

#define MDR_RAIL_OPS_SIZE sizeof(mdr_rail_ops_t)

/* Is ops a driver the core can use?  size == sizeof(mdr_rail_ops_t), a
 * name, no NULL operation, caps within MDR_RAIL_CAP_ALL, every put-related
 * bit with MDR_RAIL_CAP_PUT, MDR_RAIL_CAP_PUT exactly when put, mem_reg and
 * rkey_pack are not the unsupported stubs, MDR_RAIL_CAP_FLUSH exactly when
 * flush is not mdr_rail_noop_flush.  MADRAIL_OK, or MADRAIL_ERR_INVALID
 * after logging which rule the driver broke. */
madrail_status_t mdr_rail_ops_check(const mdr_rail_ops_t *ops);

/* Registry of built drivers: each is checked with mdr_rail_ops_check when
 * first looked up, and a driver that fails is never handed out. */
const mdr_rail_ops_t *mdr_rail_find(const char *name);
/* Visit each usable built driver in a fixed order; returns the count. */
int mdr_rail_foreach(void (*fn)(const mdr_rail_ops_t *ops, void *arg), void *arg);

/* Missing operations point at these; they return MADRAIL_ERR_UNSUPPORTED. */
madrail_status_t mdr_rail_unsup_mem_reg(mdr_rail_t *rail, void *addr, size_t len,
                                        unsigned access, mdr_memh_t **memh_p);
void mdr_rail_unsup_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh);
madrail_status_t mdr_rail_unsup_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                          void *buf, size_t *len_p);
madrail_status_t mdr_rail_unsup_put(mdr_ep_t *ep, const void *local, size_t len,
                                    mdr_memh_t *lmemh, uint64_t raddr, const void *rkey,
                                    size_t rkey_len, mdr_completion_t *comp);

int mdr_rail_noop_flush(mdr_rail_t *rail);
/* ep_fence of a driver that needs none. */
void mdr_rail_noop_fence(mdr_ep_t *ep);
/* ep_link_rto of a driver that cannot tell: -1. */
int mdr_rail_unknown_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p);
/* ep_link_quiet of a driver that cannot tell: -1. */
int mdr_rail_unknown_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p);

/* The drivers. */
extern const mdr_rail_ops_t mdr_tcp_ops;
extern const mdr_rail_ops_t mdr_loop_ops;
/* loop rails only: the rail dies now (as after MADRAIL_LOOP_FAIL_AFTER operations). */
void mdr_loop_rail_kill(mdr_rail_t *rail, const char *reason);
/* loop rails only: on != 0 turns the rail into a black hole (nothing sent
 * to or from it is delivered, nothing fails: a link under an nftables drop
 * rule); 0 delivers again. */
void mdr_loop_rail_blackhole(mdr_rail_t *rail, int on);
/* Test hook: with on, the operations of an ep ep_create made answer
 * MADRAIL_ERR_NORESOURCE for its first 20 ms, as a driver does while its handshake is
 * under way (ofi, ucx: nothing but the handshake before the peer proved
 * the job key). */
void mdr_loop_rail_nores_fresh(mdr_rail_t *rail, int on);
extern const mdr_rail_ops_t mdr_shm_ops; /* when MDR_HAVE_SHM */
extern const mdr_rail_ops_t mdr_ucx_ops; /* built when configure found UCX (HAVE_UCX) */
extern const mdr_rail_ops_t mdr_ofi_ops; /* built when configure found libfabric */

#endif /* MDR_RAIL_H */
