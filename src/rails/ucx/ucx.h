/*
 * Private header of the ucx driver (UCX's ucp layer).  Split in three
 * files: ucx_rail.c (spec, open/close, the receive queue and progress),
 * ucx_ep.c (endpoints, control messages, the connection handshake,
 * failures) and ucx_mem.c (registration, remote keys, checked puts).
 *
 * One rail = one ucp_context + one ucp_worker, restricted to one device and
 * transport set through that context's own ucp_config (ucp_config_modify:
 * TLS, NET_DEVICES), so two ucx rails of one process drive two devices.
 *
 * Endpoints are one-directional in UCX terms: each side sends on the
 * ucp_ep it created from the peer's packed worker address, and the
 * receiver finds the sender by the uuid every message carries.  The first
 * message on a ucp_ep is a HELLO with the sender's uuid and worker address;
 * once the sender proved the job key (CHALLENGE, PROOF, ACK: see
 * mdr_ucx_hello_t), a receiver that has no ep for that uuid creates one,
 * whose connection back is the ucp_ep it challenged on, and offers it to
 * the core (ep_accepted); a receiver that has one (both sides connected)
 * simply attaches the incoming stream to it, which is the "merge" of
 * rail.h.  Every message also carries the sender's connection
 * id and a sequence number, and the receiver delivers each connection's
 * messages in sequence order whatever lane UCX used.
 *
 * The short form.  A receiver that joins an incoming connection gives it
 * an active-message id of its own (MDR_UCX_AM_SHORT_BASE + a slot) and
 * tells the sender so (SHORT_ID, on its own connection).  From then on the
 * sender's control messages that UCX completes in the call go with that id
 * and a 4-byte header (the low bits of seq and conn) instead of the 24-byte
 * one: the id says who sent it, and the receiver rebuilds the full header
 * from its ep.  Why: UCX's shared-memory transports carry the first 28
 * bytes of a message (header and data) in the cache line the receiver
 * polls; 8 bytes of payload, the core's 16 and our 24 spilled into a
 * second line, which costs one more transfer between cores a message.
 */
#ifndef MDR_UCX_H
#define MDR_UCX_H

/* Sends of at most this many bytes are tried first as one that UCX
 * completes in the call, without the pooled copy (ucx_ep.c). */
#define MDR_UCX_IMM_MAX 2048

#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "rails/common/drv.h"
#include "rails/common/rail_ep.h"
#include "rails/common/linkwatch.h"
#include "rails/common/tcp_path.h"
#include "rails/common/region.h"
#include "rails/common/sw_reg.h"
#include "rails/rail.h"
#include "util/hash.h"
#include "util/list.h"
#include "util/pool.h"

/* ---------------- wire format (host byte order, homogeneous job) ---------------- */

#define MDR_UCX_AM_ID 7        /* the active-message id of the full form */
#define MDR_UCX_AM_SHORT_BASE 8 /* short form: id 8 + the receiver's slot for the connection */
#define MDR_UCX_SHORT_SLOTS 1024 /* incoming connections of a rail with a short form; more
                                  * (at once) use the full form */
#define MDR_UCX_VERSION 4 /* 2: the HELLO carries the job key; 3: SHORT_ID and the short form;
                           * 4: the key proves itself without being sent (CHALLENGE, PROOF,
                           * ACK; no key in the HELLO) */

enum {
    MDR_UCX_M_HELLO = 1,      /* first on a connection: mdr_ucx_hello_t + worker address */
    MDR_UCX_M_CTRL = 2,       /* a control message of the core */
    MDR_UCX_M_BYE = 3,        /* the sender destroyed its ep / closed its rail (reason text) */
    MDR_UCX_M_REFUSE = 4,     /* unsequenced: the connection hdr.aux was refused */
    MDR_UCX_M_KEY_CHECK = 5,  /* mdr_ucx_check_t: may the sender put there? */
    MDR_UCX_M_KEY_OK = 6,     /* mdr_ucx_answer_t */
    MDR_UCX_M_KEY_BAD = 7,    /* mdr_ucx_answer_t, then a reason text */
    MDR_UCX_M_KEY_REVOKE = 8, /* mdr_ucx_revoke_t: the region was deregistered */
    MDR_UCX_M_SYNC = 9,       /* nothing but MDR_UCX_HF_SYNC, when no other message carries it */
    MDR_UCX_M_SYNC_ACK = 10,  /* uint32_t: the sync number answered */
    MDR_UCX_M_SHORT_ID = 11,  /* mdr_ucx_short_id_t: send your connection's control
                               * messages to me in the short form, with this id */
    MDR_UCX_M_CHALLENGE = 12, /* acceptor -> initiator, unsequenced: the acceptor's nonce;
                               * hdr.aux = the initiator's connection, hdr.conn = the
                               * acceptor's connection back if the handshake succeeds */
    MDR_UCX_M_PROOF = 13,     /* initiator -> acceptor, on its connection, sequence 0:
                               * mdr_ucx_proof_t */
    MDR_UCX_M_ACK = 14,       /* acceptor -> initiator: mdr_ucx_ack_t; hdr.aux = the
                               * initiator's connection; hdr.conn != 0: sequence 0 of the
                               * acceptor's connection back (it starts here) */
    MDR_UCX_M_MAX
};

/* The active-message header (UCX carries it apart from the data). */
typedef struct mdr_ucx_hdr {
    uint8_t type;
    uint8_t version;
    uint16_t flags; /* MDR_UCX_HF_* */
    uint32_t conn;  /* sender's connection id (0: unsequenced) */
    uint32_t seq;   /* position in that connection, HELLO = 0 */
    uint32_t aux;   /* REFUSE: the refused connection id; HF_SYNC: the sync number */
    uint64_t uuid;  /* sender's uuid */
} mdr_ucx_hdr_t;

/* The short form's header (an active message of id MDR_UCX_AM_SHORT_BASE +
 * slot): a control message of the core, no flags, sequenced.  The receiver
 * takes the sequence number at or after the one it expects to deliver next
 * with these low bits (a sender never has 2^16 messages undelivered: the
 * core's credits bound them far lower), and drops one whose conn bits are
 * not its connection's (a late message of a connection the slot served
 * before). */
typedef struct mdr_ucx_short_hdr {
    uint16_t seq;  /* low 16 bits of the full header's seq */
    uint16_t conn; /* low 16 bits of the sender's connection id */
} mdr_ucx_short_hdr_t;

/* SHORT_ID: sent by the receiver of connection `conn` (the sender ignores
 * it unless conn is its current one). */
typedef struct mdr_ucx_short_id {
    uint32_t conn;
    uint32_t am_id; /* MDR_UCX_AM_SHORT_BASE .. + MDR_UCX_SHORT_SLOTS - 1 */
} mdr_ucx_short_id_t;

/* A receive slot of the short form: its id's handler argument. */
typedef struct mdr_ucx_short_slot {
    mdr_rail_t *rail;
    mdr_ep_t *ep;    /* the ep whose incoming connection it serves, or NULL */
    int registered;  /* its handler is set on the worker (every slot's, at open) */
} mdr_ucx_short_slot_t;

/* mdr_ucx_hdr_t.flags */
enum {
    /* answer SYNC_ACK(aux) on delivery: every put the sender made before
     * this message (order=lane) is in place by then */
    MDR_UCX_HF_SYNC = 1u << 0
};

/* The handshake (version 4; rails/common/auth.h).  The initiator sends a
 * HELLO with a fresh nonce and its worker address, never the key.  The
 * acceptor checks the sizes, the worker address's format, target == its
 * uuid and that the sender's uuid is not its own (a HELLO that fails is
 * dropped without an answer, logged through mdr_drv_refusal), keeps the
 * half-open handshake in a small table with a short deadline (no ep, no
 * core state) and answers CHALLENGE with its own nonce on a ucp_ep to the
 * HELLO's worker address.  The initiator answers PROOF: its MAC of the
 * transcript under the job key, and, when it knows one, a continuity proof
 * under the session secret of the connection it replaces.  Only a PROOF
 * that verifies makes an ep; only then may the acceptor REFUSE out loud.
 * ACK carries the acceptor's MAC, which the initiator verifies before it
 * sends anything else on the connection (until then its messages are held
 * locally).  The transcript's rail bytes are the acceptor's worker address
 * followed by the initiator's (the HELLO's): both sides know both, and the
 * address the acceptor will send to is bound to the proof. */
typedef struct mdr_ucx_hello {
    uint64_t target;   /* the uuid the sender means to reach */
    uint32_t addr_len; /* worker address bytes that follow */
    uint32_t inet4;    /* the sender's rail IPv4 address, network order (0: none;
                        * MDR_UCX_ADDR_INET_OFF) */
    uint16_t probe_port; /* its probe port, network order (0: none) */
    uint16_t pad[3];
    uint8_t nonce[16]; /* the initiator's nonce (MDR_AUTH_NONCE_LEN) */
} mdr_ucx_hello_t;

/* PROOF: mac = mdr_auth_mac(job key, MDR_AUTH_INITIATOR, T); cont =
 * mdr_auth_mac(S_old, MDR_AUTH_CONTINUITY, T) when the initiator has a
 * session secret with the acceptor on this rail, else zeros. */
typedef struct mdr_ucx_proof {
    uint8_t mac[32];
    uint8_t cont[32];
} mdr_ucx_proof_t;

/* ACK: mac = mdr_auth_mac(job key, MDR_AUTH_ACCEPTOR, T). */
typedef struct mdr_ucx_ack {
    uint8_t mac[32];
} mdr_ucx_ack_t;

/* A handshake the acceptor answered with CHALLENGE and whose PROOF has not
 * come yet: all it keeps of a stranger.  At most MDR_UCX_PENDING_MAX at
 * once (MDR_UCX_PENDING_PER_UUID per claimed uuid), each for
 * MDR_UCX_PENDING_WAIT seconds; the ucp_ep to the stranger's worker
 * address is closed (non-blocking, as every close) when the handshake
 * fails or expires, or becomes the accepted ep's connection back. */
typedef struct mdr_ucx_pending {
    int used;
    uint64_t uuid;          /* what the HELLO claims */
    uint32_t conn_i;        /* the initiator's connection */
    uint32_t conn_a;        /* ours back, named in the CHALLENGE */
    uint8_t nonce_i[16], nonce_a[16];
    uint8_t waddr[256];
    size_t waddr_len;
    uint32_t inet4;
    uint16_t probe_port;
    struct mdr_ucx_uep *uep;
    double deadline;
} mdr_ucx_pending_t;
#define MDR_UCX_PENDING_MAX 32
#define MDR_UCX_PENDING_PER_UUID 4
#define MDR_UCX_PENDING_WAIT 5.0 /* seconds the acceptor waits for a PROOF */
#define MDR_UCX_HS_WAIT 10.0     /* seconds the initiator waits for CHALLENGE and ACK */

/* The initiator's side of its connection's handshake (mdr_ep_t.hs). */
enum {
    MDR_UCX_HS_NONE = 0, /* no connection yet (or failed) */
    MDR_UCX_HS_HELLO,    /* HELLO sent, waiting for CHALLENGE */
    MDR_UCX_HS_PROOF,    /* PROOF sent, waiting for ACK */
    MDR_UCX_HS_ACK_DUE,  /* acceptor: the connection back was handed over, ACK not yet sent */
    MDR_UCX_HS_OPEN      /* the peer proved the key: messages go out */
};

/* Test hook: when set, called with every message the driver frames with
 * the full header (HELLO, CHALLENGE, PROOF, ACK, REFUSE, BYE, ...; the
 * short form and the immediate control path are not), before it is sent.
 * test/rail/test_ucx_driver.c checks that the job key is in none. */
extern void (*mdr_ucx_tx_hook)(const mdr_ucx_hdr_t *hdr, const struct iovec *iov, int iovcnt);

typedef struct mdr_ucx_check {
    uint64_t check_id;
    uint32_t id, gen;    /* region at the target */
    uint64_t base, len;  /* what the packed key claims the region is */
    uint64_t raddr, count; /* the put waiting for the answer */
} mdr_ucx_check_t;

typedef struct mdr_ucx_answer {
    uint64_t check_id;
    uint32_t id, gen;
} mdr_ucx_answer_t;

typedef struct mdr_ucx_revoke {
    uint32_t id, gen;
} mdr_ucx_revoke_t;

/* Packed address: mark(4) version(1) pad(1) worker-address length(2),
 * the worker address, zeros up to MDR_UCX_ADDR_LEN.  A fixed size, because
 * the core wants every process's address of a rail to have one length and
 * a worker address's length depends on the transports UCX found.  On shm
 * rails the last 4 bytes hold the shared-memory segment size (seg=): UCX's
 * posix/sysv sender copies up to its own segment size into the receiver's
 * buffers, so two processes with different sizes must not connect (0 on
 * other rails, and from builds before the field). */
#define MDR_UCX_ADDR_LEN 256
#define MDR_UCX_ADDR_HDR 8
#define MDR_UCX_ADDR_SEG_OFF (MDR_UCX_ADDR_LEN - 4)
/* On tcp rails bound to an interface, the interface's IPv4 address (4
 * bytes, network order) sits before the last 4, and the pad byte (5) has
 * MDR_UCX_ADDR_F_INET: the peer's end of the path whose kernel TCP state
 * tells the rail's liveness (rails/common/tcp_path.h).  Without the flag
 * (a worker address too long to leave room, another transport, a build
 * before the field) the rail cannot tell, as before. */
#define MDR_UCX_ADDR_INET_OFF (MDR_UCX_ADDR_LEN - 8)
#define MDR_UCX_ADDR_F_INET 0x01
/* ... and with MDR_UCX_ADDR_F_PROBE the last 2 bytes hold the port of its
 * probe socket (tcp_path.h: what the rail asks before a ucp_ep_create,
 * whose tcp connect blocks), network order */
#define MDR_UCX_ADDR_F_PROBE 0x02
#define MDR_UCX_ADDR_PROBE_OFF (MDR_UCX_ADDR_LEN - 2)
/* How long a reconnection waits for the peer's probe port to answer
 * before it gives the attempt up (the core tries again later). */
#define MDR_UCX_PROBE_MS 20
#define MDR_UCX_ADDR_MARK 0x31584355u /* "UCX1" in host order: byte-order mark */

/* Packed remote key: this header, then the ucp_rkey_pack bytes. */
typedef struct mdr_ucx_rkey_hdr {
    uint32_t mark;     /* MDR_UCX_RKEY_MARK */
    uint32_t ucp_len;  /* ucp bytes that follow */
    uint32_t id, gen;  /* region id and generation at the target */
    uint64_t base;     /* registered region */
    uint64_t len;
} mdr_ucx_rkey_hdr_t;
#define MDR_UCX_RKEY_MARK 0x4b584355u /* "UCXK" */

/* ---------------- tunables ---------------- */

#define MDR_UCX_QCAP ((size_t)64 << 20) /* bytes in flight per ep before NORESOURCE */
#define MDR_UCX_PROGRESS_SPINS 8         /* ucp_worker_progress calls per progress() at most */
#define MDR_UCX_CLOSE_WAIT 2.0           /* seconds close() waits for sends to leave */
#define MDR_UCX_CLOSE_GRACE 0.2          /* then for the peers to acknowledge the closes */
#define MDR_UCX_LINGER 30.0              /* seconds a destroyed ep's connection waits for the
                                          * peer's close before it is closed in order anyway */
#define MDR_UCX_REASON 160
/* UCX tcp send segment size on tcp rails (spec option seg=; UCX's
 * UCX_TCP_TX_SEG_SIZE, 8 KiB by default): a control slot (8 KiB) and our
 * headers go in one eager message instead of two fragments, and the put
 * emulation moves 64 KiB per active message.  UCX's receive segment is
 * 64 KiB already. */
#define MDR_UCX_TCP_SEG (64 * 1024)
/* The same option on shm rails sets the segment of UCX's posix/sysv
 * transports (UCX_MM_SEG_SIZE, 8256 bytes by default).  UCX emulates a put
 * into memory it did not allocate with active messages through that FIFO,
 * one segment per message and one completion message back for each; with
 * 64 KiB instead of 8 KiB a 4 MiB put on loopback went from about 6000 to
 * 8900 MB/s.  At most 65535: the FIFO element's length is 16 bits and UCX
 * (1.13) does not check it, a segment of 65536 truncates the length to 0
 * and the target writes outside the put (seen in conformance put-sizes).
 * The default is 64 KiB less a cache line.  The receive buffers grow by
 * MDR_UCX_MM_RX_BYTES / segment at a time (UCX: 512 of them), which keeps
 * the first chunk of a rail's shared memory at UCX's default 4 MiB per
 * process instead of 32 MiB. */
#define MDR_UCX_MM_SEG (64 * 1024 - 64)
#define MDR_UCX_MM_SEG_MAX 65535
#define MDR_UCX_MM_RX_BYTES (512 * 8256)

/* ---------------- objects ---------------- */

/* A registration; its id indexes rail->regions. */
struct mdr_memh {
    mdr_region_t reg;    /* id, generation, range and access */
    mdr_rail_t *rail;
    ucp_mem_h ucp;       /* NULL for an empty region */
    void *packed;        /* ucp_rkey_pack output (packed once, on first rkey_pack) */
    size_t packed_len;
    uint64_t *exported;  /* uuids of the peers allowed to put here (KEY_OK sent) */
    unsigned nexported, exported_cap;
};

/* A ucp_ep and the ep it serves.  It outlives the ep: UCX may still call
 * the error handler or complete the close after the ep is destroyed. */
typedef struct mdr_ucx_uep {
    mdr_rail_t *rail;
    mdr_ep_t *ep;      /* NULL once detached (ep destroyed, or a one-shot REFUSE ep) */
    ucp_ep_h h;        /* NULL once closed */
    void *close_req;
    mdr_list_t link;   /* rail->closing while the close runs (rail->close_later before),
                        * or rail->lingering */
    int failed;        /* UCX reported an error */
    int peer_done;     /* on rail->lingering (ep destroyed, BYE sent, ucp_ep still open),
                        * and the peer's BYE came: it sends no more */
    uint64_t peer_uuid;/* lingering: whose BYE ends it, on which of its connections */
    uint32_t peer_conn;
    double linger_until;
    void *flush_req;   /* lingering, closing by force: the flush of what we sent */
    int close_force;   /* the close deferred in rail->close_later forces */
} mdr_ucx_uep_t;

/* A sent control message whose send UCX has not completed yet. */
typedef struct mdr_ucx_tx {
    mdr_list_t link;  /* ep->txs */
    mdr_ep_t *ep;     /* NULL once the ep is destroyed */
    mdr_rail_t *rail;
    size_t len, cap;  /* payload bytes; pool class of the buffer */
    mdr_ucx_hdr_t hdr;
    uint8_t data[] __attribute__((aligned(8))); /* payload */
} mdr_ucx_tx_t;

/* An arrived message, copied out of UCX's buffer (8-byte aligned). */
typedef struct mdr_ucx_rx {
    mdr_list_t link; /* rail->rxq, then ep->ooo while out of order */
    mdr_ucx_hdr_t hdr;
    size_t len, cap;
    int ready;       /* data in place (a rendezvous receive may still run) */
    int dead;        /* close() came before the rendezvous receive finished */
    uint8_t data[] __attribute__((aligned(8)));
} mdr_ucx_rx_t;

/* A remote key of one peer's region, unpacked on this ep's ucp_ep. */
typedef struct mdr_ucx_rkey {
    mdr_list_t link;    /* ep->rkey_list */
    uint64_t key;       /* gen << 32 | id */
    ucp_rkey_h h;
    uint64_t base, len; /* the region the target approved */
    unsigned refs;      /* puts in flight with it */
    int dead;           /* revoked or its ep went away: destroy at refs == 0 */
} mdr_ucx_rkey_t;

typedef enum {
    MDR_UCX_OP_CHECK,   /* waiting for the target's KEY_OK / KEY_BAD */
    MDR_UCX_OP_RETRY,   /* approved, UCX said no-resource: issue again from progress */
    MDR_UCX_OP_FLIGHT,  /* ucp_put_nbx + ucp_ep_flush_nbx issued */
    MDR_UCX_OP_DONE     /* status known, completion due */
} mdr_ucx_op_state_t;

/* One put. */
typedef struct mdr_ucx_op {
    mdr_list_t link;       /* ep->ops; rail->retryq or rail->doneq; rail->orphan_ops */
    mdr_rail_t *rail;
    mdr_ep_t *ep;          /* NULL once orphaned (ep destroyed or failed; completion dropped/reported) */
    mdr_completion_t *comp;
    mdr_ucx_op_state_t state;
    madrail_status_t status;
    const void *local;
    size_t len;
    uint64_t raddr;
    ucp_mem_h lmemh;
    uint64_t key;          /* gen << 32 | id */
    uint64_t base, rlen;   /* region claimed by the packed key */
    uint64_t check_id;
    void *ucp_rkey;        /* copy of the packed ucp bytes, until unpacked */
    size_t ucp_rkey_len;
    mdr_ucx_rkey_t *rk;    /* held while in flight */
    int ucx_pending;       /* UCX callbacks still to come */
    int in_doneq;
} mdr_ucx_op_t;

typedef enum {
    MDR_UCX_EP_OPEN,
    MDR_UCX_EP_FAILED   /* failure queued or reported: nothing more is sent or delivered */
} mdr_ucx_ep_state_t;

struct mdr_ep {
    mdr_rail_ep_t base;  /* peer uuid, core cookie, uuid table, failure queue, zombie */
    mdr_rail_t *rail;
    mdr_ucx_ep_state_t state;

    uint8_t waddr[MDR_UCX_ADDR_LEN]; /* the peer's worker address */
    size_t waddr_len;

    /* sending side */
    mdr_ucx_uep_t *uep;  /* NULL until the first send (lazy) */
    uint32_t tx_conn, tx_seq;
    mdr_list_t txs;      /* mdr_ucx_tx_t not completed by UCX */
    size_t backlog;      /* bytes of txs and of puts not yet completed */
    size_t lost;         /* bytes of txs and puts that failed, were cancelled or were
                          * dropped with the failed ep: they never left, so
                          * ep_unsent keeps counting them */
    mdr_list_t ops;      /* mdr_ucx_op_t not yet done */
    unsigned nops;       /* puts whose completion is not yet reported */
    uint64_t next_check;
    mdr_hash_t rkeys;    /* key -> mdr_ucx_rkey_t */
    mdr_list_t rkey_list; /* the same keys, for teardown */

    /* puts completed locally (order=lane) but not yet known to be in place:
     * the next message carries MDR_UCX_HF_SYNC behind them and the peer's
     * SYNC_ACK proves it */
    int need_sync;
    uint32_t sync_sent, sync_acked;
    mdr_list_t sync_link; /* rail->syncq while need_sync */

    /* receiving side */
    uint32_t rx_conn;    /* the peer's connection we listen to (0: none yet) */
    uint32_t rx_seq;     /* next expected sequence number */
    mdr_list_t ooo;      /* mdr_ucx_rx_t that came early, by seq */

    /* short form (see the top): tx_short_am is the id the peer gave our
     * connection (0: none yet, the full form); rx_short our slot + 1 for
     * its connection (0: none), short_owed: its SHORT_ID still to send */
    uint32_t tx_short_am;
    unsigned rx_short;
    int short_owed;

    /* the peer said BYE while nothing was pending: reported as a failure
     * only when the ep is used again (an orderly close is not an error) */
    int peer_closed;
    char closed_reason[MDR_UCX_REASON];
    mdr_tcp_path_t path; /* the peer's address for ep_link_quiet (rail->tcpdiag) */
    uint16_t probe_port; /* the peer's probe port (network order; 0: none) */

    /* handshake (ucx.h, mdr_ucx_pending_t): hs of our connection; what we
     * expect of the acceptor's ACK; held: our messages sent before the
     * peer proved the key (mdr_ucx_tx_t, in order, numbered) */
    int hs;
    double hs_deadline;
    uint8_t nonce_i[16];
    uint8_t mac_a_want[32], sess_want[32];
    mdr_list_t held;
    /* session secrets: of our connection (we initiated) and of the peer's
     * (we accepted); a reconnection proves continuity with one of them */
    uint8_t sess_tx[32], sess_rx[32];
    int has_sess_tx, has_sess_rx;
};

struct mdr_rail {
    char name[64];           /* attr.name: "ucx:lo" */
    char tls[64];            /* UCX_TLS of the context */
    char dev[64];            /* UCX_NET_DEVICES, "" when not set */
    ucp_context_h ctx;
    ucp_worker_h worker;
    uint8_t addr[MDR_UCX_ADDR_LEN]; /* our packed address */
    size_t waddr_len;
    int check;               /* targets check each new key before a put (spec check=) */
    int order_flush;         /* a put completes after ucp_ep_flush_nbx (spec order=flush) */
    uint64_t uuid;
    const uint8_t *job_key; /* the core's */
    mdr_drv_refusals_t refusals;
    const mdr_rail_upcalls_t *upcalls;
    size_t slot_size;
    int shm;                 /* a shared-memory rail (ucx:shm): UCX 1.13's shared-memory
                              * transports have no peer-failure handling (an ep asking
                              * for UCP_ERR_HANDLING_MODE_PEER is "unreachable" there),
                              * so failures are learned from BYE messages instead */
    uint32_t mm_seg;         /* shm rails: UCX_MM_SEG_SIZE set (0: UCX's default) */
    double latency_us, bandwidth_mbs;
    size_t max_rkey;

    mdr_rail_base_t base;    /* eps by uuid, every ep, zombies, failure queue */
    mdr_list_t doneq;        /* ops whose completion is due */
    mdr_list_t retryq;       /* ops to issue again */
    mdr_list_t syncq;        /* eps that owe a SYNC */
    mdr_list_t rxq;          /* arrived messages in arrival order */
    mdr_list_t closing;      /* ueps whose ucp_ep close runs */
    mdr_list_t lingering;    /* ueps of destroyed healthy eps (ucx_ep.c, mdr_ucx_linger) */
    mdr_list_t orphan_ops;   /* ops of gone eps whose UCX callbacks are still due */
    mdr_list_t orphan_txs;   /* the same for sends */
    uint32_t next_conn;
    unsigned ntx;            /* sends UCX has not completed (every ep, and orphans) */
    int closing_rail;        /* close() runs: no upcalls, arrivals dropped */
    int in_worker;           /* progress() runs ucp_worker_progress: an in-order control
                              * message goes up from the handler (ucx_rail.c) */
    unsigned direct_n;       /* messages that went up so, this progress call */
    int tail_deferred;       /* the last progress call left its upkeep to this one */
    mdr_list_t close_later;  /* ueps closed by an upcall inside the worker's progress */
    uint8_t *rx_scratch;     /* slot_size bytes: an unaligned message realigned for its upcall */
    mdr_ucx_short_slot_t *short_slots; /* MDR_UCX_SHORT_SLOTS, handlers set at open */
    unsigned short_next;     /* where the search for a free slot starts (oldest freed first) */
    uint64_t short_tx, short_rx; /* messages sent and received in the short form */
    mdr_pool_t pool;         /* tx and rx buffers */

    mdr_region_tab_t regions; /* registrations (mdr_memh_t.reg) */
    mdr_tcp_diag_t tcpdiag;  /* kernel TCP liveness: tcp rails on an interface with an
                              * IPv4 address (family 0 otherwise: cannot tell) */
    mdr_link_watch_t lw;     /* dev's link events (linkwatch.h) */
    int probe_fd;            /* bound, never listening: peers probe the path here (-1) */
    mdr_ucx_pending_t pending[MDR_UCX_PENDING_MAX]; /* half-open handshakes (acceptor) */
    unsigned npending;
    unsigned nhs;            /* eps waiting for CHALLENGE or ACK (or to send ACK) */
    int held_stuck;          /* an ep's held messages met no-resource: progress retries */
    double hs_next;          /* when progress next walks the eps for handshake deadlines */
};

/* ucx_rail.c */
/* The worker's active-message handler (arg = the rail): inside progress(),
 * an in-order control message goes up at once from UCX's buffer; anything
 * else is copied out and queued for progress() to handle.
 * test/fuzz/fuzz_ucx calls it (outside progress: every message queued). */
ucs_status_t mdr_ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param);
/* The handler of a short-form id (arg = its mdr_ucx_short_slot_t): the full
 * header rebuilt from the slot's ep, then as mdr_ucx_am_cb. */
ucs_status_t mdr_ucx_short_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param);
/* Give ep's incoming connection a short-form slot (SHORT_ID sent when ep
 * can send); none when every slot is taken.  Release it (ep destroyed). */
void mdr_ucx_short_assign(mdr_ep_t *ep);
void mdr_ucx_short_release(mdr_ep_t *ep);
void mdr_ucx_rx_free(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
/* Handle one in-order message of ep's incoming connection. */
void mdr_ucx_dispatch(mdr_ep_t *ep, mdr_ucx_rx_t *rx);
/* Is spec (what follows "ucx:") one open() accepts?  Parsed exactly as
 * open() parses it, nothing opened; MADRAIL_ERR_CONFIG (logged) when
 * refused.  Rail discovery's tests check the specs it makes with it. */
madrail_status_t mdr_ucx_spec_check(const char *spec);

/* ucx_ep.c */
madrail_status_t mdr_ucx_ep_alloc(mdr_rail_t *rail, uint64_t uuid, const void *waddr,
                                  size_t waddr_len, void *cookie, mdr_ep_t **ep_p);
madrail_status_t mdr_ucx_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p);
void mdr_ucx_ep_destroy(mdr_ep_t *ep);
void mdr_ucx_ep_free(mdr_rail_ep_t *base);
/* The live ep of a peer, or NULL. */
mdr_ep_t *mdr_ucx_ep_lookup(mdr_rail_t *rail, uint64_t uuid);
size_t mdr_ucx_ep_backlog(mdr_ep_t *ep);
size_t mdr_ucx_ep_unsent(mdr_ep_t *ep);
int mdr_ucx_ep_idle(mdr_ep_t *ep);
int mdr_ucx_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p);
void mdr_ucx_ep_fence(mdr_ep_t *ep);
int mdr_ucx_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p);
madrail_status_t mdr_ucx_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt);
/* Send ep's SHORT_ID if it is owed and ep is connected. */
void mdr_ucx_short_offer(mdr_ep_t *ep);
/* A SHORT_ID arrived on ep's incoming connection. */
void mdr_ucx_short_id_got(mdr_ep_t *ep, const mdr_ucx_rx_t *rx);
/* Connect ep's ucp_ep if not yet done (sends the HELLO). */
madrail_status_t mdr_ucx_ep_connect(mdr_ep_t *ep);
/* A put of ep completed locally in order=lane mode: a SYNC must follow. */
void mdr_ucx_ep_want_sync(mdr_ep_t *ep);
/* Send a SYNC on the eps whose puts no message has followed; returns how many. */
int mdr_ucx_send_syncs(mdr_rail_t *rail);
/* Send one driver message (type, body) on ep's connection, sequenced. */
madrail_status_t mdr_ucx_send(mdr_ep_t *ep, int type, uint32_t aux, const void *body,
                              size_t body_len, const void *extra, size_t extra_len);
void mdr_ucx_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A BYE arrived (reason text): fail ep now if something is pending, else
 * remember it for the next use. */
void mdr_ucx_ep_bye(mdr_ep_t *ep, const char *reason, size_t len);
/* The ep is about to be used: a remembered BYE fails it now.  1 if it did. */
int mdr_ucx_ep_closed_check(mdr_ep_t *ep);
/* Report queued failures (ep_failed, then the ep's pending put completions). */
int mdr_ucx_report_failures(mdr_rail_t *rail);
/* A HELLO arrived (rx holds it). */
void mdr_ucx_hello(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
/* CHALLENGE, PROOF, ACK of the handshake. */
void mdr_ucx_challenge(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
void mdr_ucx_proof(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
void mdr_ucx_ack(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
/* Deadlines of handshakes (both sides) and held messages to send; from
 * progress while any is due.  all: the rail closes (pending ones end). */
int mdr_ucx_hs_poll(mdr_rail_t *rail, int all);
/* REFUSE for one of our connections. */
void mdr_ucx_refused(mdr_rail_t *rail, mdr_ucx_rx_t *rx);
/* Poll ueps whose close runs; frees the finished ones.  Returns how many finished. */
int mdr_ucx_closing_poll(mdr_rail_t *rail);
/* Close the ueps an upcall closed inside the worker's progress. */
void mdr_ucx_close_later(mdr_rail_t *rail);
/* Close a uep's ucp_ep (force: without flushing) and detach it. */
void mdr_ucx_uep_close(mdr_ucx_uep_t *uep, int force);
/* Close the lingering ueps whose peer closed or whose time ran out (all:
 * the rail closes).  Returns how many it closed. */
int mdr_ucx_linger_poll(mdr_rail_t *rail, int all);
/* A BYE from uuid on its connection conn found no ep: a lingering uep of
 * ours it answers may close now. */
void mdr_ucx_linger_bye(mdr_rail_t *rail, uint64_t uuid, uint32_t conn);
const char *mdr_ucx_type_str(int type);

/* ucx_mem.c */
madrail_status_t mdr_ucx_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p);
void mdr_ucx_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh);
madrail_status_t mdr_ucx_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p);
madrail_status_t mdr_ucx_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp);
void mdr_ucx_mem_cleanup(mdr_rail_t *rail);
/* Size of a packed ucp key on this context (probed at open). */
madrail_status_t mdr_ucx_rkey_probe(mdr_rail_t *rail, size_t *len_p);
/* Target side of KEY_CHECK; sender side of KEY_OK / KEY_BAD / KEY_REVOKE. */
void mdr_ucx_key_check(mdr_ep_t *ep, const mdr_ucx_rx_t *rx);
void mdr_ucx_key_answer(mdr_ep_t *ep, const mdr_ucx_rx_t *rx, int ok);
void mdr_ucx_key_revoke(mdr_ep_t *ep, const mdr_ucx_rx_t *rx);
/* Report completed puts; returns how many. */
int mdr_ucx_report_done(mdr_rail_t *rail);
/* Issue puts that UCX refused for lack of resources. */
int mdr_ucx_retry_ops(mdr_rail_t *rail);
/* The ep went away (destroyed) or failed (report errors): detach its puts and keys. */
void mdr_ucx_ep_drop_ops(mdr_ep_t *ep, int report);
void mdr_ucx_ep_drop_rkeys(mdr_ep_t *ep);
/* Free orphaned ops (after the worker is destroyed). */
void mdr_ucx_free_orphan_ops(mdr_rail_t *rail);
void mdr_ucx_free_orphan_txs(mdr_rail_t *rail);
/* Map a UCX status to ours. */
madrail_status_t mdr_ucx_status(ucs_status_t st);

#endif /* MDR_UCX_H */
