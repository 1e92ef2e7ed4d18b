/*
 * Private header of the ofi (libfabric) driver.  The driver is split into
 * ofi_rail.c (provider selection, open/close, the completion queue and
 * progress), ofi_ep.c (endpoints, the hello/bye protocol, control messages
 * and puts) and ofi_mem.c (registrations and remote keys).
 *
 * One rail = one fabric + domain + one FI_EP_RDM endpoint with one
 * address vector and one completion queue for sends, receives and writes.
 * RDM is connectionless, so what tcp learns from accept() arrives here as
 * messages: every message carries the sender's uuid and the incarnation of
 * its endpoint (epid); each endpoint introduces itself by a handshake that
 * starts with a HELLO carrying the sender's address (see "The handshake"
 * below: once the sender proved the job key, the receiver keeps the
 * address in its AV and, for an unknown uuid, creates the endpoint and
 * calls ep_accepted).  A BYE tells
 * one incarnation that the other side destroyed it, closed its rail or
 * refused it.  Messages of an incarnation the receiver does not know are
 * stale and dropped, which gives the ofi rail the same "new connection,
 * clean slate" behaviour as a tcp reconnect.
 *
 * The short form.  On a rail that injects (shm) and carries remote CQ
 * data, a receiver gives each peer incarnation it learned from a HELLO a
 * slot and tells it so (SHORT_ID).  The peer then injects its control
 * messages there without our 16-byte header: the completion's CQ data
 * says the slot, the low bits of its incarnation and the padding
 * (mdr_ofi_short_data).  Why: fi_pingpong's own latency on shm steps up
 * by about 0.15 us between 32 and 40 bytes (a second cache line, as on
 * ucx, is the likely reason; not probed here); an 8-byte message with the
 * core's 16-byte header and ours was 40, now 24.
 */
#ifndef MDR_OFI_H
#define MDR_OFI_H

#include <stddef.h>
#include <stdint.h>

#include "rails/ofi/ofi_dl.h" /* first: libfabric is loaded on demand */
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "rails/common/auth.h"
#include "rails/common/drv.h"
#include "rails/common/rail_ep.h"
#include "rails/common/linkwatch.h"
#include "rails/common/tcp_path.h"
#include "rails/ofi/ofi_cfg.h"
#include "rails/rail.h"
#include "util/hash.h"
#include "util/list.h"

/* ---------------- wire format (host byte order, homogeneous job) ---------------- */

enum {
    MDR_OFI_M_HELLO = 1, /* first message of an endpoint incarnation: mdr_ofi_hello_t + address */
    MDR_OFI_M_CTRL = 2,  /* a control message of the core */
    MDR_OFI_M_BYE = 3,   /* mdr_ofi_bye_t: the receiver's endpoint is gone at the sender */
    MDR_OFI_M_SHORT_ID = 4, /* mdr_ofi_short_id_t: inject to me in the short form, at this slot */
    MDR_OFI_M_CHALLENGE = 5, /* mdr_ofi_challenge_t: the acceptor's answer to a HELLO */
    MDR_OFI_M_PROOF = 6,     /* mdr_ofi_proof_t: the initiator proves the key */
    MDR_OFI_M_HELLO_ACK = 7  /* mdr_ofi_hello_ack_t: the acceptor proves the key, and says
                              * its own incarnation (the header's epid) */
};

/* SHORT_ID: for the receiver's incarnation target_epid (ignored by another). */
typedef struct mdr_ofi_short_id {
    uint32_t target_epid;
    uint32_t slot;       /* < MDR_OFI_SHORT_SLOTS */
} mdr_ofi_short_id_t;

/* The CQ data of a short-form message: mark (8 bits), padding bytes (8),
 * the sender's incarnation's low 16 bits, the receiver's slot (32). */
#define MDR_OFI_SHORT_MARK 0xa5u
#define MDR_OFI_SHORT_SLOTS 4096 /* incarnations a rail receives the short form from at once */
static inline uint64_t mdr_ofi_short_data(uint32_t slot, uint32_t epid, size_t pad)
{
    return ((uint64_t)MDR_OFI_SHORT_MARK << 56) | ((uint64_t)(pad & 0xff) << 48) |
           ((uint64_t)(epid & 0xffff) << 32) | slot;
}

enum {
    MDR_OFI_BYE_CLOSED = 1,    /* the sender closed its rail */
    MDR_OFI_BYE_DESTROYED = 2, /* the sender's core destroyed its endpoint */
    MDR_OFI_BYE_REFUSED = 3,   /* the sender's core refused us (ep_accepted said no) */
    MDR_OFI_BYE_PROTO = 4,     /* the sender saw a protocol error from us */
    MDR_OFI_BYE_FAILED = 5     /* the sender's endpoint failed (e.g. a send error) */
};

/* Every message starts with this header; messages are padded to a multiple
 * of 8 bytes so that consecutive messages in a FI_MULTI_RECV buffer (and
 * the payload after the header) stay 8-byte aligned. */
typedef struct mdr_ofi_hdr {
    uint8_t type;
    uint8_t pad;    /* padding bytes after the payload */
    uint16_t magic; /* MDR_OFI_MAGIC: version and byte order */
    uint32_t epid;  /* the sender's endpoint incarnation */
    uint64_t uuid;  /* the sender's uuid */
} mdr_ofi_hdr_t;

/* The handshake (docs/security.md, "ofi"): the job key proves itself
 * without being sent, by HMAC-SHA-256 over both sides' fresh nonces
 * (rails/common/auth.h).  Each endpoint incarnation introduces itself with
 * a HELLO (initiator i, the acceptor a is the receiver):
 *
 *   i -> a  HELLO {target uuid_a, nonce_i, i's address}
 *   a -> i  CHALLENGE {target_epid, nonce_i again, nonce_a}
 *   i -> a  PROOF {mac_i, cont}
 *   a -> i  HELLO_ACK {target_epid, mac_a}, from a's endpoint (its epid)
 *
 * with T = {"ofi", uuid_i, uuid_a, nonce_i, nonce_a, rail_id = a's
 * fi_getname() bytes, as its packed address publishes them}.  The
 * receiver of a HELLO checks target == its uuid and the sender's uuid is
 * not its own, and keeps only a pending entry (a bounded table, a short
 * deadline); to send the CHALLENGE the provider needs the sender's address
 * in the AV, so the entry holds one AV entry (bounded by the table).  It
 * creates an endpoint, or tells its core, only once mac_i is right; a
 * PROOF for a uuid that has a live, established endpoint of another
 * incarnation must carry cont = HMAC(old session secret, CONTINUITY, T),
 * else it is refused and the live endpoint is left as it was.  The HELLO
 * of an incarnation the receiver already knows (two endpoints that dialled
 * each other at once) needs no continuity.  An endpoint sends control
 * messages once its own handshake completed or it accepted the peer's. */
typedef struct mdr_ofi_hello {
    uint64_t target;   /* uuid the sender means to reach */
    uint32_t addr_len; /* the sender's packed address follows */
    uint32_t pad;
    uint8_t nonce[16]; /* nonce_i (MDR_AUTH_NONCE_LEN) */
} mdr_ofi_hello_t;

typedef struct mdr_ofi_challenge {
    uint32_t target_epid; /* the initiator's incarnation (its HELLO's epid) */
    uint32_t pad;
    uint8_t nonce_i[16];  /* the HELLO's nonce: a CHALLENGE answers that HELLO only */
    uint8_t nonce_a[16];
} mdr_ofi_challenge_t;

typedef struct mdr_ofi_proof {
    uint8_t mac[32];  /* mdr_auth_mac(job key, MDR_AUTH_INITIATOR, T) */
    uint8_t cont[32]; /* mdr_auth_mac(session secret, MDR_AUTH_CONTINUITY, T), or zeros */
} mdr_ofi_proof_t;

typedef struct mdr_ofi_hello_ack {
    uint32_t target_epid; /* the initiator's incarnation */
    uint32_t pad;
    uint8_t mac[32];      /* mdr_auth_mac(job key, MDR_AUTH_ACCEPTOR, T) */
} mdr_ofi_hello_ack_t;

typedef struct mdr_ofi_bye {
    uint32_t target_epid; /* the receiver's incarnation it is meant for; 0: the one that
                           * knows the sender's epid */
    uint32_t reason;      /* MDR_OFI_BYE_* */
} mdr_ofi_bye_t;

#define MDR_OFI_MAGIC 0x4f34u /* "O4": version 4, the challenge-response handshake (3: SHORT_ID
                                * and the short form; 2: the HELLO carried the job key) */
#define MDR_OFI_HDR_LEN 16
#define MDR_OFI_PAD8(_n) ((8 - ((_n) & 7)) & 7)
/* the longest message sent with fi_inject, from a stack buffer */
#define MDR_OFI_INJECT_MAX 256

/* Packed address: mark(4) provider-name hash(4) name length(2) pad(2),
 * then the provider's fi_getname() bytes. */
#define MDR_OFI_ADDR_MARK 0x3149464fu /* "OFI1" in host order: byte-order mark */
#define MDR_OFI_ADDR_HDR 12
#define MDR_OFI_NAME_MAX 200

/* Packed remote key: key, region base address, region length, flags. */
#define MDR_OFI_RKEY_LEN 32
#define MDR_OFI_RKEY_VIRT 1u /* the target's provider addresses by virtual address */

/* ---------------- tunables ---------------- */

#define MDR_OFI_CQ_BATCH 32     /* completions read per fi_cq_read */
#define MDR_OFI_CQ_BUDGET 512   /* completions handled per progress call */
#define MDR_OFI_TXB_SLAB 32     /* send buffers allocated (and registered) together */
#define MDR_OFI_TXB_MAX 512     /* send buffers per rail at most */
#define MDR_OFI_CLOSE_WAIT 0.25 /* seconds close() waits for its BYEs to leave */
#define MDR_OFI_PEND_MAX 32     /* handshakes waiting for their PROOF, per rail */
#define MDR_OFI_PEND_PER_UUID 2 /* ... of them for one claimed uuid */
#define MDR_OFI_PEND_EVICT 2.0  /* seconds after which a newer HELLO may take an entry's place */
#define MDR_OFI_PEND_TTL 30.0   /* seconds after which an entry is dropped anyway */
#define MDR_OFI_HS_TIMEOUT 30.0 /* seconds an endpoint waits for its handshake to complete */
#define MDR_OFI_HS_RETRY 1.0    /* seconds without a CHALLENGE after which the HELLO goes again */

/* ---------------- objects ---------------- */

enum { MDR_OFI_OP_RECV = 1, MDR_OFI_OP_SEND, MDR_OFI_OP_PUT };

/* What a completion's op_context points at: a provider scratch area (for
 * FI_CONTEXT / FI_CONTEXT2 providers) followed by what kind of work it was. */
typedef struct mdr_ofi_ctx {
    struct fi_context2 fctx;
    int kind;
} mdr_ofi_ctx_t;

typedef struct mdr_ofi_txbuf {
    mdr_list_t link; /* rail->txb_free */
    uint8_t *buf;
    void *desc;      /* fi_mr_desc of its slab, or NULL */
} mdr_ofi_txbuf_t;

typedef struct mdr_ofi_txslab {
    mdr_list_t link; /* rail->txb_slabs */
    uint8_t *mem;
    struct fid_mr *mr;
    mdr_ofi_txbuf_t bufs[MDR_OFI_TXB_SLAB];
} mdr_ofi_txslab_t;

/* A send or a write handed to the provider.  Always on exactly one list:
 * rail->free_ops, its ep's ops (in flight), rail->orphans (in flight, ep
 * destroyed) or rail->doneq (completed put, to be reported). */
typedef struct mdr_ofi_op {
    mdr_ofi_ctx_t ctx; /* first: the completion's op_context */
    mdr_list_t link;
    mdr_ep_t *ep;           /* NULL once the ep was destroyed */
    size_t bytes;
    mdr_completion_t *comp; /* put: reported from progress */
    madrail_status_t status;
    double posted;          /* when it was handed to the provider (MADRAIL_OFI_TIMEOUT) */
    mdr_ofi_txbuf_t *txb;   /* send: its buffer */
    struct fid_mr *tmp_mr;  /* put: registration made for it (FI_MR_LOCAL, no lmemh) */
    int is_bye;
} mdr_ofi_op_t;

typedef struct mdr_ofi_rxbuf {
    mdr_ofi_ctx_t ctx; /* first */
    uint8_t *buf;
    size_t len;
    int posted;
    mdr_list_t link;   /* rail->rx_repost while not posted */
} mdr_ofi_rxbuf_t;

/* A peer address inserted into the AV (kept until close: an endpoint that
 * is destroyed and created again reuses it), with the session secrets of
 * the last handshakes with that peer (kept as long as the record, so that
 * a reconnection after a failure proves continuity): one of the last
 * handshake we started, one of the last we accepted (two endpoints that
 * dial each other at once run both; the initiator of a reconnection proves
 * with the newer it has, the acceptor takes either). */
enum { MDR_OFI_SESS_INIT = 0, MDR_OFI_SESS_ACC = 1 };
typedef struct mdr_ofi_peer {
    mdr_list_t link; /* rail->peer_list */
    uint64_t uuid;
    fi_addr_t fa;
    size_t name_len;
    uint8_t name[MDR_OFI_NAME_MAX];
    uint8_t sess[2][32]; /* MDR_AUTH_MAC_LEN; wiped with the record */
    uint8_t has_sess[2];
    uint8_t newest;      /* MDR_OFI_SESS_* set last */
} mdr_ofi_peer_t;

/* A HELLO that was answered with a CHALLENGE and waits for its PROOF: no
 * endpoint, no peer record, nothing the core sees (ofi.h, the handshake). */
typedef struct mdr_ofi_pend {
    int used;
    int av_owned;       /* fa was inserted for this entry (removed with it) */
    uint64_t uuid;      /* claimed by the HELLO */
    uint32_t epid;
    fi_addr_t fa;
    double since;
    uint8_t nonce_i[16], nonce_a[16];
    size_t name_len;
    uint8_t name[MDR_OFI_NAME_MAX];
} mdr_ofi_pend_t;

struct mdr_memh {
    mdr_list_t link; /* rail->memhs */
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
    uintptr_t addr;
    size_t len;
};

struct mdr_ep {
    mdr_rail_ep_t base; /* peer uuid, core cookie, uuid table, failure queue, zombie */
    mdr_rail_t *rail;
    uint32_t epid;      /* ours */
    uint32_t peer_epid; /* the peer's incarnation, from its HELLO; 0 until then */
    mdr_ofi_peer_t *peer;
    int hello_sent;
    int bye_received;   /* the peer said goodbye: no goodbye back */
    int peer_closed;    /* ... an orderly one with nothing pending: failed when next used */
    uint32_t closed_reason; /* MDR_OFI_BYE_* of that goodbye */
    int failed;
    unsigned pending;   /* sends and puts not yet completed or not yet reported */
    size_t backlog;     /* bytes handed to the provider, not yet completed */
    size_t lost;        /* bytes whose operation failed, or was dropped when the ep
                         * failed: they never left, so ep_unsent keeps counting them */
    mdr_list_t ops;     /* in flight, oldest first */
    double last_done;   /* when an operation of this ep last completed */
    double nores_since; /* first of the current run of refused sends (MADRAIL_OFI_TIMEOUT) */
    /* short form (see the top): tx_short is the slot + 1 the peer gave our
     * incarnation (0: none, our header), rx_short our slot + 1 for the
     * peer's, short_owed: its SHORT_ID still to send */
    uint32_t tx_short;
    uint32_t rx_short;
    int short_owed;
    mdr_tcp_path_t path; /* the peer's address for ep_link_quiet (rail->tcpdiag) */
    /* the handshake (see above): ready once it may send control messages */
    int ready;
    int hs_state;        /* MDR_OFI_HS_* of the handshake this ep started */
    int accepted_hs;     /* it accepted the peer incarnation's handshake (once) */
    int proof_owed;      /* the PROOF could not be sent yet */
    int ack_owed;        /* the HELLO_ACK could not be sent yet */
    double hs_since;     /* the first HELLO (or the accepted PROOF) */
    double hs_last_hello;
    uint8_t nonce_i[16], nonce_a[16];
    uint8_t ack_mac[32]; /* the HELLO_ACK's mac while owed */
    uint8_t proof[64];   /* the PROOF while owed */
    int hs_counted;      /* counted in rail->hs_waiting */
};

enum { MDR_OFI_HS_NONE = 0, MDR_OFI_HS_HELLO_SENT, MDR_OFI_HS_PROOF_SENT, MDR_OFI_HS_DONE };

struct mdr_rail {
    char name[64];      /* attr.name: "ofi:tcp;ofi_rxm:lo" */
    char log_name[96];
    char prov[48];      /* provider name as libfabric reports it */
    char dom[48];       /* domain name */
    uint64_t uuid;
    const uint8_t *job_key; /* the core's */
    mdr_drv_refusals_t refusals;
    const mdr_rail_upcalls_t *upcalls;
    size_t slot_size;
    unsigned slots;
    mdr_ofi_config_t cfg;

    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;

    uint64_t mr_mode;   /* FI_MR_* bits the provider requires */
    size_t mr_key_size;
    size_t max_msg;     /* largest send/write */
    size_t tx_size;     /* outstanding operations the provider takes */
    int put_delivery;   /* writes carry FI_DELIVERY_COMPLETE */
    int multi_recv;
    size_t inject_max;  /* messages this long at most go with fi_inject (0: never) */
    int short_form;     /* injects and has remote CQ data: the short form (see the top) */
    mdr_ep_t **short_eps; /* MDR_OFI_SHORT_SLOTS, allocated with the first */
    uint32_t short_next;  /* where the search for a free slot starts */
    mdr_link_watch_t lw;    /* the interface's link events (linkwatch.h), when the
                             * spec names an interface */
    mdr_tcp_diag_t tcpdiag; /* kernel TCP liveness (tcp_path.h): a provider over kernel
                             * TCP sockets (tcp, sockets) with an IP address; else
                             * family 0 and ep_link_quiet cannot tell */
    uint64_t short_tx, short_rx; /* messages sent and received in the short form */
    double latency_us, bandwidth_mbs;

    uint8_t name_buf[MDR_OFI_NAME_MAX]; /* our fi_getname() */
    size_t name_len;
    uint32_t prov_hash;

    uint8_t *rx_scratch; /* realigns a received message the provider placed unaligned */
    size_t msg_max;     /* largest message we send or accept, header and padding included */

    mdr_rail_base_t base; /* eps by uuid, every ep, zombies, failure queue */
    mdr_hash_t peers;   /* uuid -> mdr_ofi_peer_t */
    mdr_list_t peer_list;
    mdr_list_t doneq;
    mdr_list_t orphans;
    mdr_list_t free_ops;
    mdr_list_t memhs;
    uint32_t next_epid;
    uint64_t next_key;
    unsigned tx_inflight;
    unsigned byes_inflight;
    int closing;
    double next_timeout_check;
    int shm_counted;     /* counted among the process's open shm rails */
    mdr_list_t park_link; /* closed shm rail kept open (ofi_rail.c) */
    mdr_ofi_pend_t pend[MDR_OFI_PEND_MAX]; /* handshakes waiting for their PROOF */
    unsigned npend;
    unsigned hs_waiting;  /* eps whose handshake has not completed (the deadline) */
    double next_hs_check;

    /* receive buffers */
    mdr_ofi_rxbuf_t *rxb;
    unsigned nrx;
    uint8_t *rx_mem;
    struct fid_mr *rx_mr;
    void *rx_desc;
    mdr_list_t rx_repost;

    /* send buffers: every control message is copied into one */
    mdr_list_t txb_free;
    mdr_list_t txb_slabs;
    size_t txb_size;
    unsigned ntxb;
};

/* ofi_rail.c */
/* Register buf for local use if the provider wants it (FI_MR_LOCAL): *mr_p
 * and *desc_p are NULL when it does not. */
madrail_status_t mdr_ofi_reg_local(mdr_rail_t *rail, void *buf, size_t len, uint64_t access,
                                   struct fid_mr **mr_p, void **desc_p);
/* Read completions; quiet (close): no upcalls, nothing reposted. */
int mdr_ofi_poll_cq(mdr_rail_t *rail, int quiet);

/* ofi_ep.c */
mdr_ofi_op_t *mdr_ofi_op_get(mdr_rail_t *rail);
void mdr_ofi_op_put(mdr_rail_t *rail, mdr_ofi_op_t *op);
void mdr_ofi_txb_release(mdr_rail_t *rail, mdr_ofi_txbuf_t *txb);
void mdr_ofi_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mdr_ofi_ep_free(mdr_rail_ep_t *base);
/* The live ep of a peer, or NULL. */
mdr_ep_t *mdr_ofi_ep_lookup(mdr_rail_t *rail, uint64_t uuid);
/* A BYE to the ep's peer, if the peer knows this incarnation (best effort). */
void mdr_ofi_send_bye(mdr_ep_t *ep, uint32_t reason);
/* One received message (from progress). */
void mdr_ofi_recv_msg(mdr_rail_t *rail, const uint8_t *buf, size_t len);
/* One received message in the short form, with its completion's CQ data. */
void mdr_ofi_recv_short(mdr_rail_t *rail, const uint8_t *buf, size_t len, uint64_t data);
/* A completion or an error completion of a send or a put. */
void mdr_ofi_op_done(mdr_rail_t *rail, mdr_ofi_op_t *op, madrail_status_t status,
                     const char *why);
/* Report failures, then completed puts (from progress). */
int mdr_ofi_report(mdr_rail_t *rail);
/* MADRAIL_OFI_TIMEOUT: fail eps whose operations stopped completing. */
void mdr_ofi_check_timeouts(mdr_rail_t *rail);
/* Free what close() found still allocated. */
void mdr_ofi_ops_cleanup(mdr_rail_t *rail);
/* Handshake deadlines: pending entries and eps that wait (from progress). */
void mdr_ofi_hs_tick(mdr_rail_t *rail);
/* Drop every pending handshake and wipe the peers' session secrets (close). */
void mdr_ofi_hs_cleanup(mdr_rail_t *rail);

madrail_status_t mdr_ofi_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p);
void mdr_ofi_ep_destroy(mdr_ep_t *ep);
size_t mdr_ofi_ep_backlog(mdr_ep_t *ep);
size_t mdr_ofi_ep_unsent(mdr_ep_t *ep);
int mdr_ofi_ep_idle(mdr_ep_t *ep);
int mdr_ofi_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p);
void mdr_ofi_ep_fence(mdr_ep_t *ep);
int mdr_ofi_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p);
madrail_status_t mdr_ofi_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt);
madrail_status_t mdr_ofi_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp);

/* ofi_mem.c */
madrail_status_t mdr_ofi_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p);
void mdr_ofi_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh);
madrail_status_t mdr_ofi_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p);
void mdr_ofi_mem_cleanup(mdr_rail_t *rail);

#endif /* MDR_OFI_H */
