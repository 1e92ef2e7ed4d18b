/*
 * Madeleine-style incremental messages (begin_packing / pack / end_packing
 * and the unpacking mirror), built only on the core's tagged API so that
 * pieces inherit eager/rendezvous/striping and ordering for free.
 *
 * A message is one "head" in the user's tag space plus one internal-space
 * tagged message per large piece.  Small pieces (<= MADRAIL_PACK_INLINE_MAX)
 * travel inside the head, so a typical "length, then body" message costs
 * one head (+ one rendezvous for a large body).  Large pieces carry the tag
 * (msg id << 32 | piece index) and are received straight into the user's
 * buffer: the core's receiver-side rendezvous then writes into it with no
 * copy.  Head layout (host byte order, like all madrail wire formats):
 *
 *   mdr_pack_wire_hdr_t | npieces x mdr_pack_wire_piece_t | inline bytes
 *
 * The sender sends everything at end_packing (the head first, so that the
 * receiver learns the piece list while the large pieces are in flight),
 * which is what gives LATER its meaning and lets SAFER large pieces be
 * copied once.  Message ids are counted per (context, peer) in a small
 * table here, because struct madrail_context has no slot for pack state;
 * the table is locked since two contexts may live in two threads.
 *
 * The receiver never trusts the head: every length is checked against what
 * arrived before anything is copied, and a bad head is an error, not a
 * crash.  A piece the application did not unpack is still received (into
 * a scratch buffer) at end_unpacking, so nothing stays queued in the core.
 */
#include "mdr_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define MDR_PACK_MAGIC 0x5044524du /* "MRDP" in memory order on little endian */
#define MDR_PACK_VERSION 1u

typedef struct mdr_pack_wire_hdr {
    uint32_t magic;
    uint32_t msgid;
    uint64_t inline_max; /* threshold the sender used */
    uint32_t npieces;
    uint32_t version;
} mdr_pack_wire_hdr_t;

typedef struct mdr_pack_wire_piece {
    uint64_t len;
    uint32_t mode; /* MDR_PACK_M_* */
    uint32_t pad;
} mdr_pack_wire_piece_t;

/* The head layout is a wire format: no hidden padding. */
_Static_assert(sizeof(mdr_pack_wire_hdr_t) == 24, "pack header layout");
_Static_assert(sizeof(mdr_pack_wire_piece_t) == 16, "pack piece descriptor layout");

enum {
    MDR_PACK_M_SMODE = 0x3,      /* madrail_send_mode_t */
    MDR_PACK_M_RMODE_SHIFT = 2,  /* madrail_recv_mode_t in bit 2 */
    MDR_PACK_M_RMODE = 0x4,
    MDR_PACK_M_INLINE = 0x8,     /* bytes are in the head */
    MDR_PACK_M_ALL = 0xf
};

typedef struct mdr_pack_piece {
    uint64_t len;
    const void *src;  /* sender: user buffer, read at end_packing (LATER/CHEAPER) */
    void *copy;       /* sender: private copy of a large SAFER piece */
    size_t inl_off;   /* offset of the inline bytes (sender: msg->inl; receiver: inline area) */
    uint8_t smode, rmode, is_inline;
    mdr_req_t *req;   /* receiver: CHEAPER piece still arriving */
} mdr_pack_piece_t;

struct madrail_pack {
    mdr_ctx_t *ctx;
    int sending;
    madrail_peer_t peer;   /* destination, or the source of the head */
    uint64_t tag;
    uint32_t msgid;
    uint64_t inline_max;
    mdr_pack_piece_t *pieces;
    uint32_t npieces, cap;
    madrail_status_t error; /* sender: first failure of pack(), sticky */

    /* sender: inline bytes staged at pack time (SAFER) or reserved (others) */
    uint8_t *inl;
    size_t inl_len, inl_cap;

    /* receiver */
    uint8_t *head;
    size_t head_len;
    const uint8_t *inline_area;
    uint32_t next;          /* next piece to unpack */
};

/* Message ids are counted per peer (in the peer record): the pieces of a
 * message are tagged with its id, so ids only need to be unique between one
 * sender and one receiver. */
static madrail_status_t mdr_pack_next_id(mdr_ctx_t *ctx, madrail_peer_t peer, uint32_t *id_p)
{
    mdr_peer_t *p = mdr_peer_get(ctx, peer);
    if (!p)
        return MADRAIL_ERR_INVALID;
    *id_p = p->pack_next_id++;
    return MADRAIL_OK;
}

static uint64_t mdr_pack_piece_tag(uint32_t msgid, uint32_t index)
{
    return ((uint64_t)msgid << 32) | index;
}

static void mdr_pack_free(madrail_pack_t msg)
{
    uint32_t i;
    for (i = 0; i < msg->npieces; i++)
        free(msg->pieces[i].copy);
    free(msg->pieces);
    free(msg->inl);
    free(msg->head);
    free(msg);
}

/* ---------------- sender ---------------- */

madrail_status_t madrail_begin_packing(madrail_context_t ctx, madrail_peer_t peer, uint64_t tag,
                                       madrail_pack_t *msg_p)
{
    madrail_pack_t msg;
    madrail_status_t st;

    if (!ctx || !msg_p)
        return MADRAIL_ERR_INVALID;
    if (!mdr_peer_get(ctx, peer)) {
        mdr_error("begin_packing: no peer %u", peer);
        return MADRAIL_ERR_INVALID;
    }
    msg = calloc(1, sizeof(*msg));
    if (!msg) {
        mdr_error("begin_packing: out of memory");
        return MADRAIL_ERR_NOMEM;
    }
    st = mdr_pack_next_id(ctx, peer, &msg->msgid);
    if (st != MADRAIL_OK)
        goto err_msg;
    msg->ctx = ctx;
    msg->sending = 1;
    msg->peer = peer;
    msg->tag = tag;
    msg->inline_max = ctx->cfg.pack_inline;
    *msg_p = msg;
    return MADRAIL_OK;

err_msg:
    free(msg);
    return st;
}

static int mdr_pack_modes_valid(madrail_send_mode_t smode, madrail_recv_mode_t rmode)
{
    return (smode == MADRAIL_SEND_SAFER || smode == MADRAIL_SEND_LATER ||
            smode == MADRAIL_SEND_CHEAPER) &&
           (rmode == MADRAIL_RECEIVE_EXPRESS || rmode == MADRAIL_RECEIVE_CHEAPER);
}

madrail_status_t madrail_pack(madrail_pack_t msg, const void *buf, size_t len,
                              madrail_send_mode_t smode, madrail_recv_mode_t rmode)
{
    mdr_pack_piece_t *p;
    madrail_status_t st;

    if (!msg || !msg->sending) {
        mdr_error("pack: not a message being packed");
        return MADRAIL_ERR_INVALID;
    }
    if (!mdr_pack_modes_valid(smode, rmode) || (len && !buf)) {
        mdr_error("pack: piece %u: bad arguments (buf %p, len %zu, send mode %d, receive "
                  "mode %d)",
                  msg->npieces, buf, len, (int)smode, (int)rmode);
        return MADRAIL_ERR_INVALID;
    }
    if (msg->error != MADRAIL_OK)
        return msg->error;
    if (msg->npieces == UINT32_MAX) {
        mdr_error("pack: too many pieces in one message");
        st = MADRAIL_ERR_INVALID;
        goto err;
    }
    if (msg->npieces == msg->cap) {
        uint32_t cap = msg->cap ? 2 * msg->cap : 8;
        mdr_pack_piece_t *t;
        if (cap < msg->cap)
            cap = UINT32_MAX;
        t = realloc(msg->pieces, (size_t)cap * sizeof(*t));
        if (!t) {
            st = MADRAIL_ERR_NOMEM;
            goto err_nomem;
        }
        msg->pieces = t;
        msg->cap = cap;
    }
    p = &msg->pieces[msg->npieces];
    memset(p, 0, sizeof(*p));
    p->len = len;
    p->smode = (uint8_t)smode;
    p->rmode = (uint8_t)rmode;
    p->src = buf;

    if (len <= msg->inline_max) {
        /* offsets count every inline piece (they are the offsets in the
         * head); only SAFER bytes need staging memory now */
        p->is_inline = 1;
        if (smode == MADRAIL_SEND_SAFER && msg->inl_len + len > msg->inl_cap) {
            size_t cap = msg->inl_cap ? msg->inl_cap : 256;
            uint8_t *t;
            while (cap < msg->inl_len + len)
                cap *= 2;
            t = realloc(msg->inl, cap);
            if (!t) {
                st = MADRAIL_ERR_NOMEM;
                goto err_nomem;
            }
            msg->inl = t;
            msg->inl_cap = cap;
        }
        p->inl_off = msg->inl_len;
        if (smode == MADRAIL_SEND_SAFER && len)
            memcpy(msg->inl + p->inl_off, buf, len);
        msg->inl_len += len;
    } else if (smode == MADRAIL_SEND_SAFER) {
        p->copy = malloc(len);
        if (!p->copy) {
            st = MADRAIL_ERR_NOMEM;
            goto err_nomem;
        }
        memcpy(p->copy, buf, len);
    }
    msg->npieces++;
    return MADRAIL_OK;

err_nomem:
    mdr_error("pack: piece %u of %zu bytes: out of memory", msg->npieces, len);
err:
    msg->error = st;
    return st;
}

madrail_status_t madrail_end_packing(madrail_pack_t msg)
{
    mdr_pack_wire_hdr_t hdr;
    mdr_pack_wire_piece_t *desc;
    mdr_req_t *hreq = NULL;
    madrail_status_t st, first = MADRAIL_OK;
    size_t head_len;
    uint8_t *inl_dst;
    uint32_t i;

    if (!msg || !msg->sending) {
        mdr_error("end_packing: not a message being packed");
        return MADRAIL_ERR_INVALID;
    }
    if (msg->error != MADRAIL_OK) {
        st = msg->error;
        mdr_error("end_packing: message to peer %u not sent: a piece failed earlier (%s)",
                  msg->peer, madrail_status_str(st));
        goto out;
    }

    /* Assemble the head: LATER/CHEAPER inline bytes are read now. */
    head_len = sizeof(hdr) + (size_t)msg->npieces * sizeof(*desc) + msg->inl_len;
    msg->head = malloc(head_len);
    if (!msg->head) {
        mdr_error("end_packing: out of memory for a %zu-byte head", head_len);
        st = MADRAIL_ERR_NOMEM;
        goto out;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.magic = MDR_PACK_MAGIC;
    hdr.msgid = msg->msgid;
    hdr.inline_max = msg->inline_max;
    hdr.npieces = msg->npieces;
    hdr.version = MDR_PACK_VERSION;
    memcpy(msg->head, &hdr, sizeof(hdr));
    desc = (mdr_pack_wire_piece_t *)(msg->head + sizeof(hdr));
    inl_dst = msg->head + sizeof(hdr) + (size_t)msg->npieces * sizeof(*desc);
    for (i = 0; i < msg->npieces; i++) {
        mdr_pack_piece_t *p = &msg->pieces[i];
        mdr_pack_wire_piece_t d;
        d.len = p->len;
        d.mode = (uint32_t)p->smode | ((uint32_t)p->rmode << MDR_PACK_M_RMODE_SHIFT) |
                 (p->is_inline ? (uint32_t)MDR_PACK_M_INLINE : 0u);
        d.pad = 0;
        memcpy(&desc[i], &d, sizeof(d));
        if (p->is_inline && p->len) {
            const void *from = p->smode == MADRAIL_SEND_SAFER ? msg->inl + p->inl_off : p->src;
            memcpy(inl_dst + p->inl_off, from, p->len);
        }
    }

    st = mdr_tagged_isend(msg->ctx, msg->peer, msg->head, head_len, msg->tag, 0, &hreq);
    if (st != MADRAIL_OK) {
        mdr_error("end_packing: cannot send the head to peer %u: %s", msg->peer,
                  madrail_status_str(st));
        goto out;
    }
    for (i = 0; i < msg->npieces; i++) {
        mdr_pack_piece_t *p = &msg->pieces[i];
        if (p->is_inline)
            continue;
        st = mdr_tagged_isend(msg->ctx, msg->peer, p->copy ? p->copy : p->src, p->len,
                              mdr_pack_piece_tag(msg->msgid, i), MDR_FLAG_INTERNAL, &p->req);
        if (st != MADRAIL_OK) {
            /* The receiver will miss this piece; it learns of the failure
             * from the peer error the core reports, if any. */
            mdr_error("end_packing: cannot send piece %u (%llu bytes) to peer %u: %s", i,
                      (unsigned long long)p->len, msg->peer, madrail_status_str(st));
            p->req = NULL;
            first = st;
            break;
        }
    }

    /* Every buffer may be reused on return: wait for everything sent. */
    st = madrail_wait(&hreq, NULL);
    if (st != MADRAIL_OK && first == MADRAIL_OK) {
        mdr_error("end_packing: head to peer %u failed: %s", msg->peer, madrail_status_str(st));
        first = st;
    }
    for (i = 0; i < msg->npieces; i++) {
        mdr_pack_piece_t *p = &msg->pieces[i];
        if (!p->req)
            continue;
        st = madrail_wait(&p->req, NULL);
        if (st != MADRAIL_OK && first == MADRAIL_OK) {
            mdr_error("end_packing: piece %u to peer %u failed: %s", i, msg->peer,
                      madrail_status_str(st));
            first = st;
        }
    }
    st = first;
out:
    mdr_pack_free(msg);
    return st;
}

/* ---------------- receiver ---------------- */

/* Check a received head; returns NULL if sound, else why not (in why[]). */
#define MDR_PACK_WHY_LEN 160
static const char *mdr_pack_validate(const uint8_t *head, size_t len, mdr_pack_wire_hdr_t *hdr_p,
                                     char *why)
{
    const size_t wlen = MDR_PACK_WHY_LEN;
    mdr_pack_wire_hdr_t hdr;
    size_t room, inl_total = 0;
    uint32_t i;

    if (len < sizeof(hdr)) {
        snprintf(why, wlen, "%zu bytes, shorter than the %zu-byte pack header", len,
                 sizeof(hdr));
        return why;
    }
    memcpy(&hdr, head, sizeof(hdr));
    if (hdr.magic != MDR_PACK_MAGIC) {
        snprintf(why, wlen, "not a packed message (magic 0x%08x, expected 0x%08x)",
                 hdr.magic, MDR_PACK_MAGIC);
        return why;
    }
    if (hdr.version != MDR_PACK_VERSION) {
        snprintf(why, wlen, "pack format version %u, this library speaks %u",
                 hdr.version, MDR_PACK_VERSION);
        return why;
    }
    room = len - sizeof(hdr);
    if (hdr.npieces > room / sizeof(mdr_pack_wire_piece_t)) {
        snprintf(why, wlen, "declares %u pieces, but %zu bytes hold at most %zu",
                 hdr.npieces, len, room / sizeof(mdr_pack_wire_piece_t));
        return why;
    }
    room -= (size_t)hdr.npieces * sizeof(mdr_pack_wire_piece_t);
    for (i = 0; i < hdr.npieces; i++) {
        mdr_pack_wire_piece_t d;
        int is_inline;
        memcpy(&d, head + sizeof(hdr) + (size_t)i * sizeof(d), sizeof(d));
        is_inline = (d.mode & MDR_PACK_M_INLINE) != 0;
        if ((d.mode & ~(uint32_t)MDR_PACK_M_ALL) || (d.mode & MDR_PACK_M_SMODE) > 2) {
            snprintf(why, wlen, "piece %u has bad mode bits 0x%x", i, d.mode);
            return why;
        }
        if (is_inline != (d.len <= hdr.inline_max)) {
            snprintf(why, wlen,
                     "piece %u of %llu bytes is %s, but the inline limit is %llu", i,
                     (unsigned long long)d.len, is_inline ? "inline" : "separate",
                     (unsigned long long)hdr.inline_max);
            return why;
        }
        if (is_inline) {
            if (d.len > room - inl_total) {
                snprintf(why, wlen, "inline piece %u of %llu bytes overruns the head", i,
                         (unsigned long long)d.len);
                return why;
            }
            inl_total += (size_t)d.len;
        } else if (d.len > (uint64_t)SIZE_MAX) {
            snprintf(why, wlen, "piece %u of %llu bytes cannot be addressed", i,
                     (unsigned long long)d.len);
            return why;
        }
    }
    if (inl_total != room) {
        snprintf(why, wlen, "%zu bytes of inline data for pieces totalling %zu", room,
                 inl_total);
        return why;
    }
    *hdr_p = hdr;
    return NULL;
}

madrail_status_t madrail_begin_unpacking(madrail_context_t ctx, madrail_peer_t src, uint64_t tag,
                                         uint64_t ignore, madrail_pack_t *msg_p,
                                         madrail_info_t *info_p)
{
    madrail_message_t m = NULL;
    madrail_info_t pinfo, rinfo;
    mdr_req_t *req = NULL;
    mdr_pack_wire_hdr_t hdr;
    madrail_pack_t msg;
    madrail_status_t st;
    char whybuf[MDR_PACK_WHY_LEN];
    const char *why;
    size_t size, off = 0;
    uint64_t total = 0;
    uint32_t i;

    if (!ctx || !msg_p)
        return MADRAIL_ERR_INVALID;
    if (src != MADRAIL_ANY_PEER && !mdr_peer_get(ctx, src)) {
        mdr_error("begin_unpacking: no peer %u", src);
        return MADRAIL_ERR_INVALID;
    }
    msg = calloc(1, sizeof(*msg));
    if (!msg) {
        mdr_error("begin_unpacking: out of memory");
        return MADRAIL_ERR_NOMEM;
    }

    /* improbe makes progress itself when nothing matches */
    for (;;) {
        memset(&pinfo, 0, sizeof(pinfo));
        st = mdr_tagged_improbe(ctx, src, tag, ignore, 0, &m, &pinfo);
        if (st != MADRAIL_OK)
            goto err_msg;
        if (m)
            break;
    }
    size = pinfo.sent_length ? pinfo.sent_length : pinfo.length;
    msg->head = malloc(size ? size : 1);
    if (!msg->head) {
        /* the message is taken: receive it truncated so the core lets go */
        mdr_error("begin_unpacking: out of memory for a %zu-byte head from peer %u", size,
                  pinfo.source);
        if (madrail_imrecv(ctx, m, NULL, 0, &req) == MADRAIL_OK)
            madrail_wait(&req, NULL);
        st = MADRAIL_ERR_NOMEM;
        goto err_msg;
    }
    st = madrail_imrecv(ctx, m, msg->head, size, &req);
    if (st != MADRAIL_OK) {
        mdr_error("begin_unpacking: cannot receive the head from peer %u: %s", pinfo.source,
                  madrail_status_str(st));
        goto err_msg;
    }
    memset(&rinfo, 0, sizeof(rinfo));
    st = madrail_wait(&req, &rinfo);
    if (st != MADRAIL_OK) {
        mdr_error("begin_unpacking: head from peer %u failed: %s", pinfo.source,
                  madrail_status_str(st));
        goto err_msg;
    }
    if (rinfo.length != size) {
        mdr_error("begin_unpacking: head from peer %u: %zu bytes arrived, %zu announced",
                  pinfo.source, rinfo.length, size);
        st = MADRAIL_ERR_INVALID;
        goto err_msg;
    }
    why = mdr_pack_validate(msg->head, size, &hdr, whybuf);
    if (why) {
        mdr_error("begin_unpacking: bad message from peer %u (tag 0x%llx): %s", pinfo.source,
                  (unsigned long long)pinfo.tag, why);
        st = MADRAIL_ERR_INVALID;
        goto err_msg;
    }
    if (hdr.npieces) {
        msg->pieces = calloc(hdr.npieces, sizeof(*msg->pieces));
        if (!msg->pieces) {
            mdr_error("begin_unpacking: out of memory for %u pieces", hdr.npieces);
            st = MADRAIL_ERR_NOMEM;
            goto err_msg;
        }
    }
    for (i = 0; i < hdr.npieces; i++) {
        mdr_pack_wire_piece_t d;
        mdr_pack_piece_t *p = &msg->pieces[i];
        memcpy(&d, msg->head + sizeof(hdr) + (size_t)i * sizeof(d), sizeof(d));
        p->len = d.len;
        p->smode = (uint8_t)(d.mode & MDR_PACK_M_SMODE);
        p->rmode = (uint8_t)((d.mode & MDR_PACK_M_RMODE) >> MDR_PACK_M_RMODE_SHIFT);
        p->is_inline = (d.mode & MDR_PACK_M_INLINE) != 0;
        if (p->is_inline) {
            p->inl_off = off;
            off += (size_t)d.len;
        }
        total += d.len;
    }
    msg->ctx = ctx;
    msg->sending = 0;
    msg->peer = pinfo.source;
    msg->tag = pinfo.tag;
    msg->msgid = hdr.msgid;
    msg->inline_max = hdr.inline_max;
    msg->npieces = hdr.npieces;
    msg->cap = hdr.npieces;
    msg->head_len = size;
    msg->inline_area = msg->head + sizeof(hdr) + (size_t)hdr.npieces * sizeof(mdr_pack_wire_piece_t);
    if (info_p) {
        memset(info_p, 0, sizeof(*info_p));
        info_p->status = MADRAIL_OK;
        info_p->source = pinfo.source;
        info_p->tag = pinfo.tag;
        info_p->length = (size_t)total;
        info_p->sent_length = (size_t)total;
    }
    *msg_p = msg;
    return MADRAIL_OK;

err_msg:
    mdr_pack_free(msg);
    return st;
}

static const char *mdr_pack_smode_name(int m)
{
    return m == MADRAIL_SEND_SAFER ? "SAFER" : m == MADRAIL_SEND_LATER ? "LATER" : "CHEAPER";
}

static const char *mdr_pack_rmode_name(int m)
{
    return m == MADRAIL_RECEIVE_EXPRESS ? "EXPRESS" : "CHEAPER";
}

/* Check a completed piece receive. */
static madrail_status_t mdr_pack_piece_done(madrail_pack_t msg, uint32_t i, madrail_status_t st,
                                            const madrail_info_t *info)
{
    if (st != MADRAIL_OK) {
        mdr_error("unpack: piece %u from peer %u failed: %s", i, msg->peer,
                  madrail_status_str(st));
        return st;
    }
    if (info->length != msg->pieces[i].len) {
        mdr_error("unpack: piece %u from peer %u: %zu bytes arrived, %llu announced", i,
                  msg->peer, info->length, (unsigned long long)msg->pieces[i].len);
        return MADRAIL_ERR_PEER_PROTO;
    }
    return MADRAIL_OK;
}

madrail_status_t madrail_unpack(madrail_pack_t msg, void *buf, size_t len,
                                madrail_send_mode_t smode, madrail_recv_mode_t rmode)
{
    mdr_pack_piece_t *p;
    madrail_info_t info;
    madrail_status_t st;
    uint32_t i;

    if (!msg || msg->sending) {
        mdr_error("unpack: not a message being unpacked");
        return MADRAIL_ERR_INVALID;
    }
    if (!mdr_pack_modes_valid(smode, rmode) || (len && !buf)) {
        mdr_error("unpack: bad arguments (buf %p, len %zu, send mode %d, receive mode %d)", buf,
                  len, (int)smode, (int)rmode);
        return MADRAIL_ERR_INVALID;
    }
    i = msg->next;
    if (i >= msg->npieces) {
        mdr_error("unpack: message from peer %u has only %u piece(s); unpack of %zu bytes "
                  "asks for piece %u",
                  msg->peer, msg->npieces, len, i);
        return MADRAIL_ERR_INVALID;
    }
    p = &msg->pieces[i];
    if (p->len != len) {
        mdr_error("unpack: piece %u from peer %u: unpack of %zu bytes, but the sender packed "
                  "%llu bytes",
                  i, msg->peer, len, (unsigned long long)p->len);
        return MADRAIL_ERR_INVALID;
    }
    if (p->smode != (uint8_t)smode || p->rmode != (uint8_t)rmode) {
        mdr_error("unpack: piece %u from peer %u: modes %s/%s, but the sender packed %s/%s", i,
                  msg->peer, mdr_pack_smode_name(smode), mdr_pack_rmode_name(rmode),
                  mdr_pack_smode_name(p->smode), mdr_pack_rmode_name(p->rmode));
        return MADRAIL_ERR_INVALID;
    }
    msg->next++;
    if (p->is_inline) {
        if (len)
            memcpy(buf, msg->inline_area + p->inl_off, len);
        return MADRAIL_OK;
    }
    st = mdr_tagged_irecv(msg->ctx, msg->peer, buf, len, mdr_pack_piece_tag(msg->msgid, i),
                          MADRAIL_TAG_EXACT, MDR_FLAG_INTERNAL, &p->req);
    if (st != MADRAIL_OK) {
        mdr_error("unpack: cannot post piece %u from peer %u: %s", i, msg->peer,
                  madrail_status_str(st));
        p->req = NULL;
        return st;
    }
    if (rmode == MADRAIL_RECEIVE_CHEAPER)
        return MADRAIL_OK;
    memset(&info, 0, sizeof(info));
    st = madrail_wait(&p->req, &info);
    return mdr_pack_piece_done(msg, i, st, &info);
}

madrail_status_t madrail_end_unpacking(madrail_pack_t msg)
{
    madrail_status_t st, first = MADRAIL_OK;
    madrail_info_t info;
    uint32_t i, left;

    if (!msg || msg->sending) {
        mdr_error("end_unpacking: not a message being unpacked");
        return MADRAIL_ERR_INVALID;
    }
    for (i = 0; i < msg->next; i++) {
        mdr_pack_piece_t *p = &msg->pieces[i];
        if (!p->req)
            continue;
        memset(&info, 0, sizeof(info));
        st = madrail_wait(&p->req, &info);
        st = mdr_pack_piece_done(msg, i, st, &info);
        if (st != MADRAIL_OK && first == MADRAIL_OK)
            first = st;
    }
    left = msg->npieces - msg->next;
    if (left) {
        mdr_error("end_unpacking: message from peer %u had %u piece(s), %u left unpacked "
                  "(discarded)",
                  msg->peer, msg->npieces, left);
        if (first == MADRAIL_OK)
            first = MADRAIL_ERR_INVALID;
    }
    /* Receive what was not unpacked, so the core holds nothing for it. */
    for (i = msg->next; i < msg->npieces; i++) {
        mdr_pack_piece_t *p = &msg->pieces[i];
        void *scratch;
        size_t slen;
        if (p->is_inline)
            continue;
        slen = (size_t)p->len;
        scratch = malloc(slen);
        if (!scratch)
            slen = 0; /* a truncated receive drains it too */
        st = mdr_tagged_irecv(msg->ctx, msg->peer, scratch, slen,
                              mdr_pack_piece_tag(msg->msgid, i), MADRAIL_TAG_EXACT,
                              MDR_FLAG_INTERNAL, &p->req);
        if (st == MADRAIL_OK)
            madrail_wait(&p->req, NULL);
        else
            mdr_error("end_unpacking: cannot drain piece %u from peer %u: %s", i, msg->peer,
                      madrail_status_str(st));
        free(scratch);
    }
    mdr_pack_free(msg);
    return first;
}
