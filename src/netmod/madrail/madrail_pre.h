/*
 * madrail ch4 netmod: the per-object state ch4 embeds in its requests,
 * communicators, windows, datatypes, ops, partitioned requests and address
 * vectors (include/netmodpre.h.in declares one member named "madrail" of
 * each type).
 *
 * This header is included by every MPICH object file, so it stays small and
 * includes nothing: libmadrail's types appear here only as fixed-width
 * integers.  MPIDI_MADRAIL_am_request_t lives inside every request; the
 * address entry (one per rank) is 4 bytes.
 */

#ifndef MADRAIL_PRE_H_INCLUDED
#define MADRAIL_PRE_H_INCLUDED

struct MPIR_Request;

/* Active-message state of a request (req->dev.ch4.am.netmod_am.madrail).
 * The send and receive halves are separate: MPIDIG reuses an RMA request
 * for the reply to its own request (get_accumulate), so a large send may
 * still be finishing when the large reply arrives. */
typedef struct {
    /* send half */
    void *pack_buffer;          /* payload packed for a large send, freed at its end */
    void *send_pipe;            /* pipelined large send (MPIDI_MADRAIL_pipe_t), or NULL */
    int handler_id;             /* MPIDIG handler of the large send */

    /* receive half */
    unsigned recv_flags;        /* MPIDI_MADRAIL_RECV_* */
    void *recv_buffer;          /* bounce buffer, unpacked at the end */
    void *recv_pipe;            /* pipelined large receive (MPIDI_MADRAIL_pipe_t), or NULL */
    MPI_Aint in_chunk;          /* sender's pipeline chunk (0: one message) */
    MPI_Aint in_data_sz;        /* bytes the sender sends */
    MPI_Aint recv_sz;           /* size of the user buffer received into directly */
    union {
        struct {
            uint64_t tag;       /* madrail tag carrying the payload */
            uint32_t src;       /* madrail peer it comes from */
        } net;
        struct {
            const void *data;   /* sender's payload (this process) */
            struct MPIR_Request *sreq;  /* sender's request, completed after the copy */
        } self;
    } u;
} MPIDI_MADRAIL_am_request_t;

/* Native point-to-point state of a request (req->dev.ch4.netmod.madrail):
 * a send, receive or matched-probe message carried by libmadrail's own
 * tagged messages (madrail_p2p.c).  It shares a union with MPIDIG's request
 * fields and must end before MPIDIG_REQUEST(req, req), which ch4 tests on
 * every completion: it is smaller than MPIDI_MADRAIL_am_request_t
 * (checked at compile time in madrail_p2p.c). */
typedef struct {
    void *mreq;                 /* madrail_request_t in flight, NULL once done */
    void *msg;                  /* MPROBE: madrail_message_t taken by madrail_improbe */
    void *pack_buf;             /* non-contiguous or device data, packed whole */
    void *user_buf;             /* receive into pack_buf: unpacked here at the end */
    MPI_Aint user_count;
    MPI_Datatype user_datatype;
    unsigned flags;             /* MPIDI_MADRAIL_P2P_* */
    uint32_t sent_peer;         /* send: its destination peer, and once it completed */
    uint64_t sent_msg;          /*   the message's id, for MPI_Cancel (P2P_SENT) */
} MPIDI_MADRAIL_request_t;

typedef struct {
    int dummy;
} MPIDI_MADRAIL_comm_t;

typedef struct {
    int dummy;
} MPIDI_MADRAIL_dt_t;

typedef struct {
    int dummy;
} MPIDI_MADRAIL_op_t;

typedef struct {
    int dummy;
} MPIDI_MADRAIL_win_t;

typedef struct {
    int dummy;
} MPIDI_MADRAIL_part_t;

/* Address vector entry: the libmadrail peer index of the rank
 * (MPIDI_MADRAIL_PEER_SELF for this process). */
typedef struct {
    uint32_t peer;
} MPIDI_MADRAIL_addr_t;

#endif /* MADRAIL_PRE_H_INCLUDED */
