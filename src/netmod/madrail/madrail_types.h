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
 *   - LARGE: MPIDI_MADRAIL_large_t {data size, tag}.  The data itself follows
 *     as a libmadrail tagged message with that tag, sent right after the
 *     active message (so it is sequenced after it); the receiver posts a
 *     madrail_irecv for it once MPIDIG has a buffer, and libmadrail runs its
 *     rendezvous (receiver's buffer, striped over the rails).
 *
 * Tags: bit 63 marks LARGE payloads (a process-wide counter below it, unique
 * per sender, which is all an exact (source, tag) match needs); bit 62 marks
 * the finalize barrier.  The netmod uses no other tagged traffic.
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
} MPIDI_MADRAIL_large_t;

#define MPIDI_MADRAIL_TAG_LARGE   ((uint64_t) 1 << 63)
#define MPIDI_MADRAIL_TAG_BARRIER ((uint64_t) 1 << 62)

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
    MPIDI_MADRAIL_DEFER_SELF_COPY       /* copy a large payload from this process */
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
    int pending_errno;          /* first error raised inside a callback */
    char *rails_override;       /* "MADRAIL_RAILS=<cvar>" */
    const char *overrides[2];   /* madrail_context_params_t.overrides (kept by the context) */
} MPIDI_MADRAIL_global_t;

extern MPIDI_MADRAIL_global_t MPIDI_MADRAIL_global;

#define MPIDI_MADRAIL_AV(av)    ((av)->netmod.madrail)
#define MPIDI_MADRAIL_AMREQ(req) ((req)->dev.ch4.am.netmod_am.madrail)

#endif /* MADRAIL_TYPES_H_INCLUDED */
