/*
 * Private header of the tcp driver.  The driver is split into three files:
 * tcp_rail.c (open/close, the listener, the epoll loop, handshake
 * arbitration), tcp_ep.c (connections, framing, send queues, receive
 * parsing) and tcp_mem.c (registrations behind software puts, kept in the
 * region table of rails/common/region.h).
 *
 * A connection (mdr_tcp_conn_t) is kept apart from an endpoint (mdr_ep_t)
 * because during a simultaneous connect an endpoint briefly owns two
 * connections (its own outgoing one and the peer's incoming one) and keeps
 * exactly one.  Queued data always lives in the endpoint, never in a
 * connection, so whichever connection survives carries it.
 */
#ifndef MDR_TCP_H
#define MDR_TCP_H

#include <netinet/in.h>
#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rails/common/auth.h"
#include "rails/common/linkwatch.h"
#include "rails/common/drv.h"
#include "rails/common/rail_ep.h"
#include "rails/common/region.h"
#include "rails/common/sw_reg.h"
#include "rails/rail.h"
#include "util/cfg.h"
#include "util/hash.h"
#include "util/list.h"

/* ---------------- wire format (host byte order, homogeneous job) ---------------- */

enum {
    MDR_TCP_F_CTRL = 1,      /* control message: hdr.len payload bytes follow */
    MDR_TCP_F_PUT = 2,       /* put: mdr_tcp_put_ext_t, then count data bytes */
    MDR_TCP_F_HELLO = 3,     /* first frame of an outgoing connection */
    MDR_TCP_F_HELLO_ACK = 4, /* acceptor's answer to PROOF: its own proof, the outcome */
    MDR_TCP_F_PUT_ACK = 5,   /* receiver placed hdr.len more puts (in order) */
    MDR_TCP_F_CHALLENGE = 6, /* acceptor's answer to HELLO: its nonce */
    MDR_TCP_F_PROOF = 7      /* initiator's answer to CHALLENGE: its proofs */
};

/* PUT flag: the frame continues the put of the previous PUT frame on this
 * connection (same key, raddr = its end).  If the region was deregistered
 * since, the receiver drops it, as it drops the rest of a frame whose
 * region goes away while it arrives; anything else about it is checked as
 * for a first frame. */
#define MDR_TCP_PUT_F_CONT 1

/* Every frame starts with this header and is padded to a multiple of 8
 * bytes, so each frame (and each control payload) starts 8-byte aligned in
 * the receive buffer: the core reads its headers in place. */
typedef struct mdr_tcp_hdr {
    uint8_t type;
    uint8_t flags;
    uint16_t pad;
    uint32_t len; /* CTRL: payload bytes; PUT/HELLO/HELLO_ACK: extension bytes;
                   * PUT_ACK: number of puts acknowledged */
} mdr_tcp_hdr_t;

typedef struct mdr_tcp_put_ext {
    uint64_t raddr; /* target address in the receiver's memory */
    uint64_t rkey;  /* packed key: generation << 32 | key id */
    uint64_t count; /* data bytes that follow (then padding to 8) */
} mdr_tcp_put_ext_t;

/* Handshake frames (HELLO, CHALLENGE, PROOF, HELLO_ACK): the body starts
 * with this 24-byte part, then per type (rails/common/auth.h makes the
 * proofs; T is the transcript: "tcp", both uuids, both nonces, and the
 * acceptor's listen address, ip(4) port(2) in network order, as published
 * by addr_pack):
 *
 *   HELLO      i -> a   nonce_i(16)                               body 40
 *   CHALLENGE  a -> i   nonce_a(16)                               body 40
 *   PROOF      i -> a   mac_i(32) cont0(32) cont1(32)             body 120
 *   HELLO_ACK  a -> i   mac_a(32), status says the outcome        body 56
 *
 * mac_i and mac_a are HMACs of T keyed by the job key under the
 * initiator's and the acceptor's label; cont0/cont1 prove continuity with
 * an earlier session of the pair on this rail (HMAC of T keyed by that
 * session's secret, zeros when the initiator has none): see tcp_rail.c.
 * The key itself is never sent.  The acceptor checks a HELLO in this
 * order and answers nothing but a closed connection on failure: magic,
 * version, target == its uuid, uuid != its own; a PROOF: same uuids,
 * mac_i; only then may it answer HELLO_ACK, create an ep or let the
 * connection replace a live one (which also needs a continuity proof). */
typedef struct mdr_tcp_hello {
    uint32_t magic;  /* MDR_TCP_MAGIC: also a byte-order check */
    uint16_t version;
    uint16_t status; /* HELLO_ACK: MDR_TCP_ACK_* */
    uint64_t uuid;   /* sender's uuid */
    uint64_t target; /* uuid the sender expects at the other end */
    uint8_t data[96]; /* per type, above (only the type's length is sent) */
} mdr_tcp_hello_t;

enum {
    MDR_TCP_ACK_OK = 0,      /* connection accepted: data may flow */
    MDR_TCP_ACK_LOST = 1,    /* simultaneous connect: our own connection wins */
    MDR_TCP_ACK_REFUSED = 2  /* the acceptor's core refused the peer */
};

#define MDR_TCP_MAGIC 0x4d445254u /* "MDRT" */
#define MDR_TCP_VERSION 3 /* 2: HELLO carried the job key; 3: challenge-response */
#define MDR_TCP_HDR_LEN 8
#define MDR_TCP_PUT_HDR_LEN (MDR_TCP_HDR_LEN + 24)
#define MDR_TCP_HS_BASE 24                        /* magic .. target */
#define MDR_TCP_HS_NONCE_BODY (MDR_TCP_HS_BASE + 16) /* HELLO, CHALLENGE */
#define MDR_TCP_HS_PROOF_BODY (MDR_TCP_HS_BASE + 96) /* PROOF */
#define MDR_TCP_HS_ACK_BODY (MDR_TCP_HS_BASE + 32)   /* HELLO_ACK */
#define MDR_TCP_HELLO_LEN (MDR_TCP_HDR_LEN + MDR_TCP_HS_NONCE_BODY)
/* Longest handshake body a connection reads before it knows the version
 * (an older or newer handshake frame is read whole, then refused by its
 * version); also the longest of this version's (PROOF). */
#define MDR_TCP_HELLO_MAX 128
#define MDR_TCP_HS_MAX (MDR_TCP_HDR_LEN + MDR_TCP_HELLO_MAX)
/* Receive buffer of a connection before its handshake: one handshake
 * frame, no more (a stranger's connection costs this until the connect
 * timeout). */
#define MDR_TCP_PART_HS (MDR_TCP_HDR_LEN + MDR_TCP_HELLO_MAX)
#define MDR_TCP_PAD8(_n) ((8 - ((_n) & 7)) & 7)

/* Packed address: mark(4) ip(4, network order) port(2, network order)
 * version(1) pad(1). */
#define MDR_TCP_ADDR_LEN 12
#define MDR_TCP_ADDR_MARK 0x54435031u /* "TCP1" in host order: byte-order mark */
#define MDR_TCP_RKEY_LEN MDR_SW_RKEY_LEN

/* ---------------- tunables ---------------- */

#define MDR_TCP_RBUF_MIN (256 * 1024)       /* shared receive buffer per rail */
#define MDR_TCP_RX_BUDGET (2u * 1024 * 1024) /* bytes read per connection per progress */
#define MDR_TCP_TX_BUDGET (2u * 1024 * 1024) /* bytes written per ep per progress */
#define MDR_TCP_QCHUNK (64 * 1024)          /* copy-chunk size of the send queue */
#define MDR_TCP_QCAP ((size_t)64 << 20)     /* copied bytes queued per ep before NORESOURCE */
/* Control frames up to MADRAIL_TCP_COALESCE bytes are coalesced: queued and written together
 * by the rail's next progress (one writev for a burst of small messages);
 * a larger one, or a queue reaching MDR_TCP_COALESCE_FLUSH, is written at once. */
#define MDR_TCP_COALESCE_FLUSH (64 * 1024)
#define MDR_TCP_MAX_IOV 64
#define MDR_TCP_MAX_EVENTS 64
/* Direct polling (tcp_rail.c): at most this many connections read per
 * pass without epoll (MADRAIL_TCP_DIRECT_POLL's bound), and the epoll set
 * still waited on every this many passes, and once per tick of the coarse
 * clock (new connections, anything the reads do not see). */
#define MDR_TCP_DIRECT_MAX 8
#define MDR_TCP_DIRECT_EPOLL_EVERY 16

/* A put's payload leaves in frames of at most MADRAIL_TCP_PUT_FRAME bytes
 * (each with its own PUT header), so a control frame waits for at most one
 * of them, never for a whole stripe. */
#define MDR_TCP_PUT_FRAME_MIN 4096
/* A connection counts as carrying puts both ways for this long (seconds)
 * after the peer's last put frame arrived (see mdr_tcp_conn_duplex). */
#define MDR_TCP_DUPLEX_HOLD 0.1

typedef struct mdr_tcp_config {
    size_t sndbuf;          /* MADRAIL_TCP_SNDBUF, 0 = kernel default */
    size_t rcvbuf;          /* MADRAIL_TCP_RCVBUF */
    int nodelay;            /* MADRAIL_TCP_NODELAY */
    double latency_us;      /* MADRAIL_TCP_LATENCY_US, 0 = built-in profile */
    double bandwidth;       /* MADRAIL_TCP_BANDWIDTH (MB/s), 0 = from the interface */
    double connect_timeout; /* MADRAIL_TCP_CONNECT_TIMEOUT, seconds */
    char *put_ack_s;        /* MADRAIL_TCP_PUT_ACK: auto, or a bool */
    int put_ack;            /* from it: complete puts when the peer placed them */
    size_t coalesce;        /* MADRAIL_TCP_COALESCE: largest coalesced control frame, 0 = off */
    size_t put_frame;       /* MADRAIL_TCP_PUT_FRAME: put payload bytes per frame */
    size_t notsent_lowat;   /* MADRAIL_TCP_NOTSENT_LOWAT: TCP_NOTSENT_LOWAT while puts flow
                             * both ways, 0 = never set */
    int shared_poll;        /* MADRAIL_TCP_SHARED_POLL: one epoll set for the context's rails */
    int direct_first;       /* MADRAIL_TCP_DIRECT_FIRST: first small frame per pass written at once */
    unsigned direct_poll;   /* MADRAIL_TCP_DIRECT_POLL: most connections read without epoll */
    double hello_timeout;   /* MADRAIL_TCP_HELLO_TIMEOUT: accepted, no handshake yet, seconds */
    unsigned hello_max;     /* MADRAIL_TCP_HELLO_MAX: such connections per rail */
    unsigned hello_max_src; /* MADRAIL_TCP_HELLO_MAX_PER_SOURCE: ... from one address */
} mdr_tcp_config_t;

/* The tcp rails of one context (same params->uuid) that share one epoll
 * set: one epoll_wait per progress pass serves them all (tcp_rail.c). */
typedef struct mdr_tcp_group {
    uint64_t uuid;
    int epfd;
    unsigned nrails;
    mdr_list_t rails;           /* mdr_rail_t.group_link */
    unsigned long polls;        /* epoll_wait calls on the set so far */
    unsigned nconns;            /* connections in the set (live, any state) */
    struct mdr_tcp_group *next; /* registry of every group in the process */
} mdr_tcp_group_t;

/* ---------------- objects ---------------- */

/* A registration; its key id indexes rail->regions. */
struct mdr_memh {
    mdr_region_t reg; /* id, generation, range and access */
    mdr_rail_t *rail;
    unsigned refs; /* connections writing a put payload into it right now */
    int dead;      /* deregistered while refs > 0: freed when refs drops to 0 */
};

typedef enum {
    MDR_TCP_CONN_CONNECTING, /* outgoing, non-blocking connect in progress */
    MDR_TCP_CONN_HS_SENT,    /* outgoing, HELLO written (or queued), waiting for
                              * CHALLENGE, then (hs_step 1) PROOF sent, waiting for ACK */
    MDR_TCP_CONN_WAIT_HELLO, /* incoming, accepted, no valid PROOF yet (hs_step 1:
                              * CHALLENGE sent), no ep */
    MDR_TCP_CONN_OPEN,       /* attached to its ep, data flows */
    MDR_TCP_CONN_CLOSED      /* fd closed, waiting to be freed */
} mdr_tcp_conn_state_t;

typedef struct mdr_tcp_conn {
    mdr_rail_t *rail;
    mdr_ep_t *ep; /* NULL while WAIT_HELLO */
    int fd;
    int outgoing;           /* we initiated it */
    mdr_tcp_conn_state_t state;
    uint32_t ev_mask;       /* events currently registered with epoll */
    double deadline;        /* WAIT_HELLO: give up after this */
    mdr_list_t link;        /* rail->conns (live) or rail->zombie_conns */
    char peer_str[32];      /* "ip:port" of the remote end */
    char peer_ip[16];       /* its address alone (refusals are logged per address) */

    /* handshake output, written before anything from the ep */
    uint8_t hs_out[MDR_TCP_HS_MAX];
    size_t hs_len, hs_off;
    /* handshake state (tcp_rail.c): nonces, the peer's uuid (acceptor: as
     * its HELLO named it), the proof expected from (initiator) or owed to
     * (acceptor) the other side, and the new session's secret */
    int hs_step;            /* acceptor: 1 = CHALLENGE sent; initiator: 1 = PROOF sent */
    int hs_cont;            /* acceptor: secret the PROOF proved continuity with
                             * (MDR_TCP_SEC_*), -1 none */
    int hs_confirm;         /* acceptor: the initiator's first data frame confirms
                             * the session (mdr_tcp_secret_confirm) */
    uint64_t hs_peer;
    uint8_t nonce_i[MDR_AUTH_NONCE_LEN], nonce_a[MDR_AUTH_NONCE_LEN];
    uint8_t hs_mac[MDR_AUTH_MAC_LEN];
    uint8_t hs_session[MDR_AUTH_MAC_LEN];

    /* receive state */
    uint8_t *part;          /* start of an incomplete frame carried between reads */
    size_t part_len, part_cap;
    mdr_memh_t *put_mh;     /* put payload being received (holds a ref) */
    uint8_t *put_dst;       /* where the next payload byte goes; NULL: discard */
    uint64_t put_left;      /* payload bytes still to read */
    size_t put_pad;         /* padding after the payload */
    size_t skip;            /* padding bytes to skip */
    uint64_t rx_pos;        /* bytes read so far: frame starts are at 0 mod 8 */
    uint32_t acks_owed;     /* puts placed, PUT_ACK not yet sent */

    /* put continuation: where a CONT frame must start, with which key */
    uint64_t cont_raddr;
    uint64_t cont_rkey;
    int cont_ok;            /* a PUT frame was seen: a CONT frame may follow */

    /* duplex detection: the peer's put frames seen, TCP_NOTSENT_LOWAT state */
    uint64_t rx_put_frames; /* put frames received */
    uint64_t rx_put_seen;   /* rx_put_frames at the last check */
    double duplex_until;    /* the short kernel queue stays until then */
    int duplex;             /* puts flow both ways: frames, short kernel queue */
    int lowat_failed;       /* setting TCP_NOTSENT_LOWAT failed: not tried again */
} mdr_tcp_conn_t;

typedef enum {
    MDR_TCP_EP_IDLE,       /* created, no traffic yet: no connection (lazy) */
    MDR_TCP_EP_CONNECTING, /* outgoing connection in progress / HELLO sent */
    MDR_TCP_EP_WAIT_PEER,  /* lost a simultaneous connect: waiting for the peer's HELLO */
    MDR_TCP_EP_ACCEPTING,  /* accepted, inside ep_accepted, ACK not yet sent */
    MDR_TCP_EP_OPEN,
    MDR_TCP_EP_FAILED      /* connection gone; failure reported (or about to be) */
} mdr_tcp_ep_state_t;

/* One queued piece of output: control bytes (copied) or one put. */
typedef struct mdr_tcp_sitem {
    mdr_list_t link;
    mdr_ep_t *ep;
    int is_put;
    size_t off;   /* bytes of this item already written */
    size_t total; /* bytes of this item */
    /* copy item: raw frame bytes */
    uint8_t *buf;
    size_t cap;
    /* put item: `frames` frames, frame k = PUT header (raddr + k * frame) +
     * payload [k * frame, ...) of the user data (not copied); the last one
     * also carries the padding.  Headers are built when written. */
    const uint8_t *data;
    size_t dlen;
    size_t pad;
    size_t frame;       /* payload bytes per frame (a multiple of 8) */
    uint64_t raddr;
    uint64_t rkey;
    uint32_t frames;
    uint32_t acks_left; /* in ep->acks: PUT_ACKs still due (one per frame) */
    mdr_completion_t *comp; /* NULL when put() completed it directly */
} mdr_tcp_sitem_t;

struct mdr_ep {
    mdr_rail_ep_t base;   /* peer uuid, core cookie, uuid table, failure queue, zombie */
    mdr_rail_t *rail;
    mdr_tcp_ep_state_t state;
    int was_open;         /* reached OPEN: data frames may have been written */
    mdr_tcp_conn_t *conn; /* active (or handshaking outgoing) connection */
    struct sockaddr_in raddr;
    double deadline;      /* connect/handshake deadline */
    mdr_list_t hs_link;   /* rail->hs_eps while CONNECTING/WAIT_PEER */
    int in_hs_list;

    mdr_list_t ctrlq;     /* copy items: control frames and PUT_ACKs, in order */
    mdr_list_t putq;      /* put items, in order; a control frame passes them
                           * at the next frame boundary */
    size_t backlog;       /* bytes queued, not yet written */
    size_t lost;          /* bytes that were queued when the ep failed: they never
                           * left, so ep_unsent keeps counting them (below) */
    uint64_t link_wait_ns;/* ep_link_quiet: unacknowledged segments seen since */
    size_t qcopied;       /* bytes of copy items (memory held) */
    unsigned puts_pending;/* put completions not yet reported */
    mdr_list_t acks;      /* written puts waiting for the peer's PUT_ACK */
    uint32_t out_events;  /* EPOLLOUT wanted */
    mdr_list_t flush_link;/* rail->flushq: small messages queued for one writev */
    int in_flushq;
    unsigned long direct_pass; /* rail->passes when a frame last skipped the coalescing */
};

struct mdr_rail {
    char name[64];      /* attr.name: "tcp:lo" */
    char log_name[96];  /* "tcp:lo(127.0.0.1:4711)" for messages */
    char ifname[IF_NAMESIZE];
    mdr_link_watch_t lw;  /* ifname's link events (rails/common/linkwatch.h) */
    struct sockaddr_in local; /* listen address (port filled after bind) */
    int listen_fd;
    int epfd;                 /* group->epfd when in a group, else its own */
    mdr_tcp_group_t *group;   /* NULL: alone (MADRAIL_TCP_SHARED_POLL=0) */
    mdr_list_t group_link;
    unsigned long seen_polls; /* group->polls at this rail's last progress */
    unsigned long passes;     /* progress calls (ep->direct_pass) */
    unsigned nconns;          /* connections in its own epoll set (no group) */
    unsigned direct_polls;    /* passes that read directly since the last epoll_wait */
    uint64_t wait_tick;       /* the coarse clock at the last epoll_wait (direct polling) */
    uint64_t uuid;
    const uint8_t *job_key; /* the core's, MDR_JOB_KEY_LEN bytes */
    mdr_hash_t secrets;     /* peer uuid -> mdr_tcp_secret_t (tcp_rail.c) */
    mdr_list_t secrets_all; /* every mdr_tcp_secret_t, to free them */
    mdr_drv_refusals_t refusals;
    const mdr_rail_upcalls_t *upcalls;
    size_t slot_size;
    mdr_tcp_config_t cfg;
    double latency_us, bandwidth_mbs;

    mdr_rail_base_t base;    /* eps by uuid, every ep, zombies, failure queue */
    mdr_list_t hs_eps;       /* eps waiting for a handshake (timeouts) */
    mdr_list_t conns;        /* every live connection */
    mdr_list_t zombie_conns; /* closed, freed at the end of progress */
    mdr_list_t doneq;        /* written put items whose completion is due */
    mdr_list_t flushq;       /* eps with coalesced control messages to write */
    unsigned nwait_hello;    /* connections in WAIT_HELLO (timeouts) */
    int reserve_fd;          /* /dev/null, given up to refuse a connection when out of
                              * descriptors (mdr_tcp_accept_failed) */
    double accept_resume;    /* listener out of the epoll set until then; 0: polled */
    mdr_drv_ratelog_t accept_log[3]; /* failed accepts, by cause (tcp_rail.c) */
    double next_timeout_check;

    uint8_t *rbuf; /* shared receive buffer, 8-byte aligned */
    size_t rbuf_len;

    mdr_region_tab_t regions; /* registrations (mdr_memh_t.reg) */
};

/* epoll data of a listener: the rail's address with the low bit set
 * (conn pointers, malloc'ed, have it clear). */
#define MDR_TCP_LISTENER_BIT ((uintptr_t)1)

/* The count of connections in the epoll set rail's sockets go to (its
 * group's, or its own): kept as they are added and closed, read by every
 * progress pass (direct polling, tcp_rail.c). */
static inline unsigned *mdr_tcp_set_nconns(mdr_rail_t *rail)
{
    return rail->group != NULL ? &rail->group->nconns : &rail->nconns;
}

/* Session secrets of a rail, one entry per peer uuid with which a
 * handshake completed on it (tcp_rail.c): the confirmed one (both sides
 * hold it) and a pending one (this side answered OK, the initiator has
 * not shown yet that it got the answer).  Kept for the rail's life. */
enum { MDR_TCP_SEC_CONFIRMED = 0, MDR_TCP_SEC_PENDING = 1 };
typedef struct mdr_tcp_secret {
    mdr_list_t link; /* rail->secrets_all */
    uint64_t uuid;
    int have[2];
    uint8_t s[2][MDR_AUTH_MAC_LEN];
} mdr_tcp_secret_t;

/* tcp_rail.c */
void mdr_tcp_hello_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h);
void mdr_tcp_proof_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h);
/* The handshake transcript of conn (rail_id: 6 bytes of storage for it). */
void mdr_tcp_hs_transcript(const mdr_tcp_conn_t *conn, uint64_t uuid_i, uint64_t uuid_a,
                           const struct sockaddr_in *acceptor, uint8_t rail_id[6],
                           mdr_auth_transcript_t *t);
/* Continuity proofs for a handshake with uuid (zeros where no secret). */
void mdr_tcp_secret_conts(mdr_rail_t *rail, uint64_t uuid, const mdr_auth_transcript_t *t,
                          uint8_t cont[2][MDR_AUTH_MAC_LEN]);
/* A handshake completed: secret is the session's; keep (MDR_TCP_SEC_*
 * or -1) the one the handshake proved continuity with, which both sides
 * hold.  pending: this side cannot know yet that the other got it. */
void mdr_tcp_secret_commit(mdr_rail_t *rail, uint64_t uuid, const uint8_t *secret, int keep,
                           int pending);
/* The initiator of conn (accepted by us) sent data: it has the session. */
void mdr_tcp_secret_confirm(mdr_tcp_conn_t *conn);

/* tcp_ep.c */
/* "a.b.c.d:port" (thread-safe, unlike inet_ntoa); returns buf. */
char *mdr_tcp_addr_str(const struct sockaddr_in *sin, char *buf, size_t len);
madrail_status_t mdr_tcp_conn_new(mdr_rail_t *rail, int fd, int outgoing, mdr_tcp_conn_t **conn_p);
void mdr_tcp_conn_close(mdr_tcp_conn_t *conn);
void mdr_tcp_conn_set_events(mdr_tcp_conn_t *conn, uint32_t events);
void mdr_tcp_conn_handle(mdr_tcp_conn_t *conn, uint32_t events);
void mdr_tcp_conn_free(mdr_tcp_conn_t *conn);
/* A handshake frame into frame (MDR_TCP_HS_MAX bytes): data is the
 * type's part after the 24 common bytes (len bytes, at most 96).  Returns
 * its length.  _fill: into conn->hs_out, to be written from its start. */
size_t mdr_tcp_hs_frame(uint8_t *frame, int type, uint16_t status, uint64_t uuid,
                        uint64_t target, const void *data, size_t len);
void mdr_tcp_hs_fill(mdr_tcp_conn_t *conn, int type, uint16_t status, uint64_t uuid,
                     uint64_t target, const void *data, size_t len);
/* Close a connection that has not proven the job key, telling it nothing;
 * the reason goes to the rail's rate-limited refusal log. */
void mdr_tcp_conn_refuse(mdr_tcp_conn_t *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Give an accepted connection its full receive buffer (handshake done). */
madrail_status_t mdr_tcp_conn_grow(mdr_tcp_conn_t *conn);
int mdr_tcp_conn_send_hs(mdr_tcp_conn_t *conn);
void mdr_tcp_ep_start(mdr_ep_t *ep);
madrail_status_t mdr_tcp_ep_alloc(mdr_rail_t *rail, uint64_t uuid, void *cookie, mdr_ep_t **ep_p);
void mdr_tcp_ep_attach(mdr_ep_t *ep, mdr_tcp_conn_t *conn);
void mdr_tcp_ep_open(mdr_ep_t *ep);
void mdr_tcp_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mdr_tcp_ep_report_failures(mdr_rail_t *rail);
int mdr_tcp_report_done(mdr_rail_t *rail);
/* Write what ctrl_send coalesced (from progress). */
int mdr_tcp_flush_coalesced(mdr_rail_t *rail);
void mdr_tcp_ep_hs_list(mdr_ep_t *ep, int on);
void mdr_tcp_ep_free(mdr_rail_ep_t *base);
void mdr_tcp_sockopts(mdr_rail_t *rail, int fd);

madrail_status_t mdr_tcp_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p);
void mdr_tcp_ep_destroy(mdr_ep_t *ep);
size_t mdr_tcp_ep_backlog(mdr_ep_t *ep);
size_t mdr_tcp_ep_unsent(mdr_ep_t *ep);
int mdr_tcp_ep_idle(mdr_ep_t *ep);
int mdr_tcp_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p);
int mdr_tcp_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p);
/* tcp_info.c: 1 when the peer's window takes at least a segment, 0 when
 * not, -1 when the kernel does not say. */
int mdr_tcp_window_open(int fd);
madrail_status_t mdr_tcp_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt);
madrail_status_t mdr_tcp_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp);

/* tcp_mem.c */
madrail_status_t mdr_tcp_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p);
void mdr_tcp_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh);
madrail_status_t mdr_tcp_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p);
void mdr_tcp_mem_unref(mdr_memh_t *memh);
void mdr_tcp_mem_cleanup(mdr_rail_t *rail);

#endif /* MDR_TCP_H */
