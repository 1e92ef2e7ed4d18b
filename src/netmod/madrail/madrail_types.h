/*
 * madrail ch4 netmod: global state and the wire format of its active
 * messages.
 *
 * Every MPIDIG active message travels as ONE libmadrail active message
 * (madrail_am_send), so messages to a peer stay in send order whatever rail
 * they take.  The 64-bit madrail id carries the netmod header:
 *
 *     bits  0..7   MPIDIG handler id
 *     bits  8..15  flags (MPIDI_MADRAIL_AM_F_*)
 *     bits 16..23  source vci
 *     bits 24..31  destination vci
 *     bits 32..63  size of the MPIDIG header (am_hdr_sz)
 *
 * and the madrail payload is the MPIDIG header, padded to 8 bytes, then
 *   - eager: the data (so it is 8-byte aligned at the receiver);
 *   - LARGE: MPIDI_MADRAIL_large_t {data size, tag, chunk}.  The data itself
 *     follows as a libmadrail tagged message with that tag, sent right after
 *     the active message (so it is sequenced after it); the receiver posts a
 *     madrail_irecv for it once MPIDIG has a buffer, and libmadrail runs its
 *     rendezvous (receiver's buffer, striped over the rails).  When chunk is
 *     not 0 (non-contiguous or device data), the data follows instead as
 *     ceil(data size / chunk) tagged messages of chunk bytes (the last one
 *     shorter), all with that tag, in order: the sender packs chunk k+depth
 *     once chunk k has gone, the receiver unpacks chunk k while later ones
 *     are on the wire (MPIDI_MADRAIL_pipe_t).
 *
 * Tags: bit 63 marks LARGE payloads (a process-wide counter below it, unique
 * per sender, which is all an exact (source, tag) match needs); bit 62 marks
 * the finalize barrier.  Native point-to-point messages (below) have both
 * bits clear.
 */

#ifndef MADRAIL_TYPES_H_INCLUDED
#define MADRAIL_TYPES_H_INCLUDED

#include <madrail.h>
#include "mpiimpl.h"

#define MPIDI_MADRAIL_AM_F_LARGE 0x1u

#define MPIDI_MADRAIL_AM_ID(handler_id_, flags_, src_vci_, dst_vci_, hdr_sz_)     \
    ((uint64_t) ((handler_id_) & 0xff) | ((uint64_t) ((flags_) & 0xff) << 8) |   \
     ((uint64_t) ((src_vci_) & 0xff) << 16) | ((uint64_t) ((dst_vci_) & 0xff) << 24) | \
     ((uint64_t) (uint32_t) (hdr_sz_) << 32))
#define MPIDI_MADRAIL_AM_ID_HANDLER(id_) ((int) ((id_) & 0xff))
#define MPIDI_MADRAIL_AM_ID_FLAGS(id_)   ((unsigned) (((id_) >> 8) & 0xff))
#define MPIDI_MADRAIL_AM_ID_SRC_VCI(id_) ((int) (((id_) >> 16) & 0xff))
#define MPIDI_MADRAIL_AM_ID_DST_VCI(id_) ((int) (((id_) >> 24) & 0xff))
#define MPIDI_MADRAIL_AM_ID_HDR_SZ(id_)  ((MPI_Aint) ((id_) >> 32))

/* MPIDIG header rounded up so that what follows it is 8-byte aligned */
#define MPIDI_MADRAIL_ALIGN8(sz_) (((sz_) + 7) & ~((MPI_Aint) 7))

/* Descriptor of a LARGE payload, after the padded MPIDIG header. */
typedef struct {
    uint64_t data_sz;
    uint64_t tag;
    uint64_t chunk;             /* 0: one message; else the pipeline's chunk size */
} MPIDI_MADRAIL_large_t;

/* Most chunks of one pipelined transfer in flight at once. */
#define MPIDI_MADRAIL_PIPE_DEPTH_MAX 16

struct MPIDI_MADRAIL_pipe;

/* One staging slot of a pipeline: the callback argument of its transfer. */
typedef struct {
    struct MPIDI_MADRAIL_pipe *pipe;
    int idx;                    /* slot number */
    int busy;                   /* a chunk is being sent or received in it */
    int done;                   /* receive: the chunk is in, not yet unpacked */
    MPI_Aint len;               /* bytes of that chunk */
    madrail_status_t status;    /* its completion status */
} MPIDI_MADRAIL_pipe_slot_t;

/* A pipelined LARGE transfer: `depth` slots of `chunk` bytes in `ring`.
 * Chunk k uses slot k % depth; chunks are packed, sent, received and
 * unpacked in order, so a slot is reused only when its chunk is done. */
typedef struct MPIDI_MADRAIL_pipe {
    MPIR_Request *req;
    uint32_t peer;
    uint64_t tag;
    MPI_Aint total;             /* bytes of the whole payload */
    MPI_Aint chunk;
    int depth;
    int is_send;                /* 1: sender's pipeline, 0: receiver's */
    int queued;                 /* a step is queued for the next progress */
    MPI_Aint next_off;          /* send: next byte to pack; receive: next chunk to post */
    MPI_Aint done_off;          /* send: bytes whose chunk completed; receive: unpacked */
    int inflight;               /* chunks posted and not completed */
    madrail_status_t status;    /* first error, MADRAIL_OK otherwise */
    /* send: the user's data, packed chunk by chunk */
    const void *buf;
    MPI_Aint count;
    MPI_Datatype datatype;
    /* receive into a non-contiguous MPI buffer: the chunks are gathered
     * here in order and unpacked in one call at the end (4.0.2's dataloop
     * engine cannot unpack from an arbitrary offset of a nested type) */
    char *whole;
    /* send, while the first chunk is posted: the announcement it carries
     * (madrail_am_isend; points into the caller's frame, NULL after) */
    const struct iovec *am_iov;
    int am_iovcnt;
    uint64_t am_id;
    MPIDI_MADRAIL_pipe_slot_t slots[MPIDI_MADRAIL_PIPE_DEPTH_MAX];
    char *ring;                 /* depth * chunk bytes */
} MPIDI_MADRAIL_pipe_t;

#define MPIDI_MADRAIL_TAG_LARGE   ((uint64_t) 1 << 63)
#define MPIDI_MADRAIL_TAG_BARRIER ((uint64_t) 1 << 62)

/* Native point-to-point (madrail_p2p.c): an MPI message is one libmadrail
 * tagged message whose 64 match bits are
 *
 *     bits  0..25  MPI tag (with MPICH's error and collective bits on top)
 *     bits 26..45  the sender's rank in the communicator
 *     bits 46..61  context id (+ context offset)
 *     bits 62..63  0 (the netmod's LARGE payloads and finalize barrier set
 *                  one of them, and no MPI receive ignores them)
 *
 * A receive ignores the source bits for MPI_ANY_SOURCE, the usable tag bits
 * for MPI_ANY_TAG (not the collective bit, as ch4:ucx), and always the two
 * error bits. */
#define MPIDI_MADRAIL_P2P_TAG_BITS  26
#define MPIDI_MADRAIL_P2P_RANK_BITS 20
#define MPIDI_MADRAIL_P2P_RANK_SHIFT MPIDI_MADRAIL_P2P_TAG_BITS
#define MPIDI_MADRAIL_P2P_CTX_SHIFT (MPIDI_MADRAIL_P2P_TAG_BITS + MPIDI_MADRAIL_P2P_RANK_BITS)
#define MPIDI_MADRAIL_P2P_TAG_MASK  (((uint64_t) 1 << MPIDI_MADRAIL_P2P_TAG_BITS) - 1)
#define MPIDI_MADRAIL_P2P_RANK_MASK \
    ((((uint64_t) 1 << MPIDI_MADRAIL_P2P_RANK_BITS) - 1) << MPIDI_MADRAIL_P2P_RANK_SHIFT)
#define MPIDI_MADRAIL_P2P_MATCH(ctx_, rank_, tag_)                             \
    (((uint64_t) (uint16_t) (ctx_) << MPIDI_MADRAIL_P2P_CTX_SHIFT) |          \
     (((uint64_t) (uint32_t) (rank_) << MPIDI_MADRAIL_P2P_RANK_SHIFT) & MPIDI_MADRAIL_P2P_RANK_MASK) | \
     ((uint64_t) (uint32_t) (tag_) & MPIDI_MADRAIL_P2P_TAG_MASK))
#define MPIDI_MADRAIL_P2P_GET_TAG(bits_)  ((int) ((bits_) & MPIDI_MADRAIL_P2P_TAG_MASK))
#define MPIDI_MADRAIL_P2P_GET_RANK(bits_) \
    ((int) (((bits_) & MPIDI_MADRAIL_P2P_RANK_MASK) >> MPIDI_MADRAIL_P2P_RANK_SHIFT))

/* MPIDI_MADRAIL_request_t.flags */
#define MPIDI_MADRAIL_P2P_INLINE_DONE 0x1u      /* finished inside the call that posted it */
#define MPIDI_MADRAIL_P2P_UNPACK      0x2u      /* receive: unpack pack_buf into user_buf */
#define MPIDI_MADRAIL_P2P_SENT        0x4u      /* send: completed, sent_msg names it (cancel) */

/* The address-vector value of this process's own rank: libmadrail has no
 * self peer, the netmod delivers those messages itself. */
#define MPIDI_MADRAIL_PEER_SELF ((uint32_t) MADRAIL_ANY_PEER)

/* MPIDI_MADRAIL_am_request_t.recv_flags */
#define MPIDI_MADRAIL_RECV_LARGE  0x1u  /* a LARGE payload is (to be) received */
#define MPIDI_MADRAIL_RECV_SELF   0x2u  /* it comes from this process (memcpy) */
#define MPIDI_MADRAIL_RECV_BOUNCE 0x4u  /* received into recv_buffer, unpacked at the end */

/* Work that progress finishes for a callback that ran outside it
 * (libmadrail completes a request inside madrail_isend/irecv when it can,
 * and MPIDIG may call data_copy_cb from MPI_Irecv). */
typedef enum {
    MPIDI_MADRAIL_DEFER_SEND_DONE,      /* large send finished */
    MPIDI_MADRAIL_DEFER_RECV_DONE,      /* large receive finished */
    MPIDI_MADRAIL_DEFER_SELF_COPY,      /* copy a large payload from this process */
    MPIDI_MADRAIL_DEFER_PIPE_SEND,      /* a chunk of a pipelined send finished */
    MPIDI_MADRAIL_DEFER_PIPE_RECV       /* a chunk of a pipelined receive finished */
} MPIDI_MADRAIL_defer_kind_t;

typedef struct MPIDI_MADRAIL_deferred {
    struct MPIDI_MADRAIL_deferred *next;
    MPIR_Request *req;
    MPIDI_MADRAIL_defer_kind_t kind;
    madrail_status_t status;
} MPIDI_MADRAIL_deferred_t;

/* A message from this process to itself, delivered by progress. */
typedef struct MPIDI_MADRAIL_self_msg {
    struct MPIDI_MADRAIL_self_msg *next;
    int handler_id;
    int src_vci;
    int dst_vci;
    int is_large;
    MPI_Aint am_hdr_sz;
    MPI_Aint data_sz;
    const void *data;           /* LARGE: sender's payload, valid until sreq completes */
    MPIR_Request *sreq;         /* LARGE: sender's request */
    /* header (padded to 8 bytes), then the eager data */
    uint64_t buf[];
} MPIDI_MADRAIL_self_msg_t;

typedef struct {
    madrail_context_t ctx;
    int rank;
    int size;
    MPI_Aint am_max;            /* madrail_am_max(): bytes in one active message */
    MPI_Aint hdr_max;           /* largest MPIDIG header the netmod accepts */
    uint64_t next_tag;          /* LARGE payload tags */
    int progress_depth;         /* > 0 while inside the netmod's progress */
    int idle_polls;             /* progress calls in a row that found nothing */
    long inflight;              /* madrail requests posted and not yet finished */
    MPIDI_MADRAIL_deferred_t *deferred_head;    /* work for the next progress, in order */
    MPIDI_MADRAIL_deferred_t *deferred_tail;
    MPIDI_MADRAIL_self_msg_t *self_head;        /* messages to self, in send order */
    MPIDI_MADRAIL_self_msg_t *self_tail;
    void *pack_scratch;         /* packs non-contiguous eager data (am_max bytes) */
    MPI_Aint pipe_chunk;        /* MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE */
    int pipe_depth;             /* MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH */
    int pending_errno;          /* first error raised inside a callback */
    int native;                 /* point-to-point as libmadrail tagged messages
                                 * (MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P), else MPIDIG */
    MPIR_Request *posting;      /* native request whose madrail callback is being set */
    char *rails_override;       /* "MADRAIL_RAILS=<cvar>" */
    const char *overrides[2];   /* madrail_context_params_t.overrides (kept by the context) */
} MPIDI_MADRAIL_global_t;

extern MPIDI_MADRAIL_global_t MPIDI_MADRAIL_global;

#define MPIDI_MADRAIL_AV(av)    ((av)->netmod.madrail)
#define MPIDI_MADRAIL_AMREQ(req) ((req)->dev.ch4.am.netmod_am.madrail)
#define MPIDI_MADRAIL_REQ(req)   ((req)->dev.ch4.netmod.madrail)

#endif /* MADRAIL_TYPES_H_INCLUDED */
