/*
 * Private header of the shm driver (processes of one node).  Split in three
 * files: shm_rail.c (open/close, the segment, stale-segment cleanup, the
 * CMA probe, progress: ring discovery, liveness of peers), shm_ep.c
 * (endpoints, the rings, ctrl_send, put, receive) and shm_mem.c
 * (registrations behind both put paths: the region table of
 * rails/common/region.h and its CMA mirror).
 *
 * Shared memory layout.  Each rail owns one POSIX shared-memory segment
 * (/dev/shm/mdr-shm-<pidns>-<pid>-<starttime>-<tag>), sparse: a page of
 * header, a table of registrations (what a CMA writer checks an rkey
 * against), the control blocks of `nrings` rings, then their data.  A ring carries one direction of one
 * connection and lives in the RECEIVER's segment; it is claimed (CAS on its
 * state word) by the SENDER, which is its only producer, and read by the
 * segment's owner, its only consumer.  So each direction has exactly one
 * ring whoever connects first, and two sides that create their endpoints
 * at the same time need no arbitration: each claims its own sending ring
 * in the other's segment and each attaches the ring the other claimed to
 * the endpoint it already has for that uuid.
 *
 * A ring is a byte ring of 8-byte-aligned records (header + payload),
 * single producer / single consumer: the producer writes a record, then
 * publishes `tail` with a release store; the consumer reads up to `tail`
 * (acquire), hands control messages to the core in place (8-byte aligned)
 * and publishes `head` (release) after each record, which gives the space
 * back.  A record never wraps: a PAD record fills the end of the ring.
 */
#ifndef MDR_SHM_H
#define MDR_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rails/common/drv.h"
#include "rails/common/rail_ep.h"
#include "rails/common/region.h"
#include "rails/common/sw_reg.h"
#include "rails/rail.h"
#include "util/cfg.h"
#include "util/hash.h"
#include "util/list.h"

/* ---------------- shared layout (same binary on both sides) ---------------- */

#define MDR_SHM_MAGIC 0x4d48534du /* "MSHM" */
#define MDR_SHM_VERSION 3 /* 2: a ring claim carries the job key; 3: registrations
                           * name the peer they were offered to */
#define MDR_SHM_PAGE 4096u
#define MDR_SHM_NAME_MAX 80
#define MDR_SHM_PREFIX "mdr-shm-"  /* file name prefix in /dev/shm */
#define MDR_SHM_DIR "/dev/shm"
#define MDR_SHM_NREGS 4096u        /* shared registration entries (CMA-checkable keys) */
#define MDR_SHM_REASON_MAX 40

/* Record types. */
enum { MDR_SHM_R_CTRL = 1, MDR_SHM_R_PUT = 2, MDR_SHM_R_PAD = 3 };

typedef struct mdr_shm_rec {
    uint32_t len;  /* payload bytes after this header (PUT: extension + data) */
    uint8_t type;
    uint8_t pad[3];
} mdr_shm_rec_t;

#define MDR_SHM_REC_HDR 8u

typedef struct mdr_shm_put_ext {
    uint64_t raddr; /* target address in the receiver */
    uint64_t key;   /* generation << 32 | id */
    uint64_t count; /* data bytes that follow */
} mdr_shm_put_ext_t;

#define MDR_SHM_PUT_EXT 24u
#define MDR_SHM_PAD8(_n) (((_n) + 7u) & ~(uint64_t)7u)

/* Ring state word: low 8 bits the state, high 32 bits the claimer's pid
 * (so a claim abandoned by a dead process can be taken back). */
enum { MDR_SHM_RING_FREE = 0, MDR_SHM_RING_CLAIMING = 1, MDR_SHM_RING_OPEN = 2 };
#define MDR_SHM_STATE(_w) ((unsigned)((_w) & 0xffu))
#define MDR_SHM_STATE_PID(_w) ((pid_t)((_w) >> 32))
#define MDR_SHM_MKSTATE(_s, _pid) (((uint64_t)(uint32_t)(_pid) << 32) | (uint64_t)(_s))

/* Flags of either side of a ring. */
enum {
    MDR_SHM_F_CLOSED = 1u << 0,  /* this side is gone: it will not touch the ring again */
    MDR_SHM_F_ERROR = 1u << 1,   /* this side failed the connection: status + reason */
    MDR_SHM_F_REFUSED = 1u << 2, /* consumer only: the core refused the connection */
    MDR_SHM_F_ACCEPTED = 1u << 3 /* consumer only: attached to an endpoint */
};

/* The control block of a ring (384 bytes: claim, producer, consumer and
 * spare lines of 64-byte alignment). */
typedef struct mdr_shm_ring_ctl {
    /* claim line: written by the producer while CLAIMING, then read-only */
    _Atomic uint64_t state;
    uint64_t prod_uuid;
    uint64_t prod_start; /* producer's process start time (clock ticks since boot) */
    uint64_t prod_tag;   /* tag of the producer's own segment */
    int32_t prod_pid;
    uint32_t prod_caps; /* MDR_SHM_AF_* of the producer */
    char prod_seg[MDR_SHM_NAME_MAX]; /* the producer's segment, for the reverse direction */
    uint8_t prod_key[16]; /* the job key (MDR_JOB_KEY_LEN); wiped by the consumer once read */

    /* producer line */
    _Alignas(64) _Atomic uint64_t tail; /* bytes written since the claim */
    _Atomic uint32_t prod_flags;
    int32_t prod_status;
    char prod_reason[MDR_SHM_REASON_MAX];

    /* consumer line */
    _Alignas(64) _Atomic uint64_t head; /* bytes consumed */
    _Atomic uint32_t cons_flags;
    int32_t cons_status;
    char cons_reason[MDR_SHM_REASON_MAX];

    _Alignas(64) uint8_t spare[64];
} mdr_shm_ring_ctl_t;

/* One registration as a CMA writer sees it.  gen (the key's tag) changes
 * at deregistration, so a stale key never matches; addr/len/access and the
 * peer are written before the key is handed out (the message that carries
 * it orders them).  The writer checks itself: this stops a peer's mistake,
 * not a hostile process, which with the ptrace rights CMA needs could
 * write anywhere in ours anyway (docs/security.md). */
typedef struct mdr_shm_reg_ent {
    _Atomic uint32_t gen;
    uint32_t access;
    uint64_t addr;
    uint64_t len;
    uint64_t valid; /* 1 while registered */
    uint64_t bound; /* 1 once offered (rkey_pack) */
    uint64_t peer;  /* the uuid of the peer it was offered to */
} mdr_shm_reg_ent_t;

typedef struct mdr_shm_seg_hdr {
    uint32_t magic;
    uint32_t version;
    uint64_t uuid;  /* owner context */
    uint64_t tag;   /* random: names the segment, carried by rkeys */
    uint64_t start; /* owner's process start time */
    int32_t pid;
    uint32_t nrings;
    uint64_t ctl_off;    /* ring control blocks, one after the other */
    uint64_t data_off;   /* ring data, ring_bytes each, page aligned */
    uint64_t ring_bytes; /* data capacity of one ring */
    uint64_t reg_off;
    uint32_t nregs;
    uint32_t pad0;
    _Atomic uint32_t alive;  /* 1 while the owner's rail is open */
    _Atomic uint32_t claims; /* bumped after each claim: the owner rescans */
} mdr_shm_seg_hdr_t;

/* Where things are in a segment: a private copy, made when the segment
 * was created (ours) or mapped and checked (a peer's).  Every process that
 * maps a segment can write its header at any time, so offsets and counts
 * are never read from it again after that check. */
typedef struct mdr_shm_layout {
    uint64_t ctl_off, data_off, ring_bytes, reg_off;
    uint32_t nrings, nregs;
} mdr_shm_layout_t;

/* Packed address. */
typedef struct mdr_shm_addr {
    uint32_t mark; /* MDR_SHM_ADDR_MARK: also a byte-order check */
    uint16_t version;
    uint16_t flags; /* MDR_SHM_AF_* */
    int32_t pid;
    uint32_t pad0;
    uint64_t start;   /* process start time: a reused pid is not the peer */
    uint64_t node;    /* boot id, /dev/shm mount and pid namespace */
    uint64_t tag;     /* segment tag */
    uint64_t pidns;   /* with pid, start and tag: the segment's name */
} mdr_shm_addr_t;

#define MDR_SHM_ADDR_MARK 0x314d4853u /* "SHM1" */
#define MDR_SHM_AF_CMA 1u

/* Packed remote key. */
typedef struct mdr_shm_rkey {
    uint64_t key; /* generation << 32 | id */
    uint64_t tag; /* segment tag of the registering rail */
} mdr_shm_rkey_t;

/* ---------------- configuration ---------------- */

typedef struct mdr_shm_config {
    int cma;             /* MADRAIL_SHM_CMA */
    unsigned max_peers;  /* MADRAIL_SHM_MAX_PEERS: rings per segment */
    size_t ring_size;    /* MADRAIL_SHM_RING_SIZE: lower bound of a ring's bytes */
    size_t frag;         /* MADRAIL_SHM_FRAG: largest copied put fragment */
    double peer_check;   /* MADRAIL_SHM_PEER_CHECK: seconds between liveness checks */
    double latency_us;   /* MADRAIL_SHM_LATENCY_US, 0 = built in */
    double bandwidth;    /* MADRAIL_SHM_BANDWIDTH (MB/s), 0 = built in */
} mdr_shm_config_t;

/* Built-in profile (measured on the development machine, see
 * docs/configuration.md). */
#define MDR_SHM_LATENCY_US 0.5
#define MDR_SHM_BW_CMA 10000.0
#define MDR_SHM_BW_COPY 6000.0

/* ---------------- local objects ---------------- */

/* A peer's segment mapped here (shared by the endpoints that use it). */
typedef struct mdr_shm_pseg {
    mdr_list_t link; /* rail->psegs */
    unsigned refs;
    uint64_t tag;
    int fd;
    void *base;
    size_t len;
    mdr_shm_seg_hdr_t *hdr; /* shared: only its atomics and identity are read */
    mdr_shm_layout_t lay;   /* as checked when mapped */
    char name[MDR_SHM_NAME_MAX];
} mdr_shm_pseg_t;

/* The local view of one ring. */
typedef struct mdr_shm_ring {
    mdr_shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t cap;
    uint64_t pos;   /* producer: our tail; consumer: our head */
    uint64_t other; /* producer: last head read */
    uint32_t index;
} mdr_shm_ring_t;

/* A put being copied through the ring. */
typedef struct mdr_shm_put {
    mdr_list_t link;
    const uint8_t *src;
    size_t len, off;
    uint64_t raddr, key;
    mdr_completion_t *comp;
    madrail_status_t status; /* on ep->doneq: what to report */
} mdr_shm_put_t;

/* Local state of a ring of our segment. */
enum { MDR_SHM_RX_UNKNOWN = 0, MDR_SHM_RX_ATTACHED = 1, MDR_SHM_RX_ZOMBIE = 2 };

struct mdr_ep {
    mdr_rail_ep_t base;    /* peer uuid, core cookie, uuid table, failure queue, zombie */
    mdr_rail_t *rail;
    int accepting;         /* inside ep_accepted */
    int failed;

    pid_t pid;
    uint64_t start;
    int self;              /* the peer is this process */
    int pidfd;             /* -1: kill(pid, 0) instead */
    mdr_shm_pseg_t *pseg;  /* the peer's segment */
    int cma;               /* CMA toward this peer (cleared on EPERM) */

    int has_tx, has_rx;
    mdr_shm_ring_t tx, rx;
    size_t frag;           /* put fragment size for the peer's rings */
    unsigned ticks;        /* progress calls: the peer's flags are read every 16th */
    int in_all;            /* on rail->eps_all (counted in rail->neps) */

    mdr_list_t putq;       /* mdr_shm_put_t being copied */
    size_t backlog;        /* put bytes not yet in the ring */
    size_t lost;           /* bytes that were queued when the ep failed: they never
                            * left, so ep_unsent keeps counting them */
    mdr_list_t doneq;      /* completions to report */
};

struct mdr_rail {
    char name[64];
    char log_name[128];
    mdr_shm_config_t cfg;
    uint64_t uuid;
    const uint8_t *job_key;  /* the core's */
    mdr_drv_refusals_t refusals;
    const mdr_rail_upcalls_t *upcalls;
    size_t slot_size;
    unsigned slots;
    double latency_us, bandwidth_mbs;

    /* own segment */
    char seg_name[MDR_SHM_NAME_MAX];
    int seg_fd;
    void *seg_base;
    size_t seg_len;
    mdr_shm_seg_hdr_t *hdr; /* shared: only its atomics are read */
    mdr_shm_layout_t lay;   /* as created */
    uint64_t tag;
    uint32_t nrings;
    uint64_t ring_bytes;
    size_t frag;

    pid_t pid;
    uint64_t start;
    uint64_t node;
    uint64_t pidns;
    int cma;                 /* CMA usable from this process */

    mdr_ep_t **rx_eps;       /* ring index -> consuming ep */
    uint8_t *rx_state;       /* ring index -> MDR_SHM_RX_* */
    unsigned nzombies;
    uint32_t seen_claims;

    mdr_rail_base_t base;    /* eps by uuid, every ep, zombies, failure queue */
    mdr_list_t psegs;
    mdr_ep_t **scan;         /* snapshot of eps_all for one progress pass */
    size_t scan_cap;
    size_t neps;
    int epfd;                /* pidfds of peers (readable when they exit) */
    double next_check;
    int in_progress;
    uint64_t nput_cma, nput_copy; /* puts by path (tests read them) */

    /* registrations */
    mdr_shm_reg_ent_t *regtab; /* shared table in our segment */
    mdr_region_tab_t regions;  /* mdr_memh_t.reg */
};

struct mdr_memh {
    mdr_region_t reg; /* id, generation, range and access */
    mdr_rail_t *rail;
};

/* ---------------- functions ---------------- */

/* shm_rail.c */
int mdr_shm_proc_start(pid_t pid, uint64_t *start_p);
/* "/mdr-shm-<pidns>-<pid>-<start>-<tag>" into buf (MDR_SHM_NAME_MAX bytes). */
void mdr_shm_seg_name(char *buf, uint64_t pidns, pid_t pid, uint64_t start, uint64_t tag);
madrail_status_t mdr_shm_pseg_get(mdr_rail_t *rail, const char *name, uint64_t tag,
                                  uint64_t uuid, mdr_shm_pseg_t **pseg_p, const char **why_p);
void mdr_shm_pseg_put(mdr_rail_t *rail, mdr_shm_pseg_t *pseg);
/* Control block of ring i (< lay->nrings) of the segment mapped at base. */
mdr_shm_ring_ctl_t *mdr_shm_ring_ctl(void *base, const mdr_shm_layout_t *lay, uint32_t i);
void mdr_shm_ring_release(mdr_rail_t *rail, uint32_t i);
int mdr_shm_watch_peer(mdr_ep_t *ep);
void mdr_shm_unwatch_peer(mdr_ep_t *ep);

/* shm_ep.c */
madrail_status_t mdr_shm_ep_alloc(mdr_rail_t *rail, uint64_t uuid, void *cookie,
                                  mdr_ep_t **ep_p);
void mdr_shm_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mdr_shm_ep_free(mdr_ep_t *ep);
void mdr_shm_ep_free_base(mdr_rail_ep_t *base); /* the base's ep_free */
/* The live ep of a peer, or NULL. */
static inline mdr_ep_t *mdr_shm_ep_lookup(mdr_rail_t *rail, uint64_t uuid)
{
    mdr_rail_ep_t *b = mdr_rail_ep_lookup(&rail->base, uuid);
    return b != NULL ? mdr_container_of(b, mdr_ep_t, base) : NULL;
}
void mdr_shm_ep_attach_rx(mdr_ep_t *ep, uint32_t index);
int mdr_shm_ep_progress(mdr_ep_t *ep);
int mdr_shm_report(mdr_rail_t *rail);

madrail_status_t mdr_shm_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p);
void mdr_shm_ep_destroy(mdr_ep_t *ep);
size_t mdr_shm_ep_backlog(mdr_ep_t *ep);
size_t mdr_shm_ep_unsent(mdr_ep_t *ep);
int mdr_shm_ep_idle(mdr_ep_t *ep);
madrail_status_t mdr_shm_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt);
madrail_status_t mdr_shm_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp);

/* shm_mem.c */
madrail_status_t mdr_shm_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p);
void mdr_shm_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh);
madrail_status_t mdr_shm_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p);
/* Check a CMA put from the rail of uuid from against the peer's shared
 * table; 0 ok, -1 with *why_p. */
int mdr_shm_mem_check_remote(const mdr_shm_pseg_t *pseg, uint64_t key, uint64_t raddr,
                             uint64_t count, uint64_t from, const char **why_p);
void mdr_shm_mem_cleanup(mdr_rail_t *rail);

#endif /* MDR_SHM_H */
