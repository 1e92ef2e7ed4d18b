/*
 * Fuzz target: the tcp driver's receive side (handshake, frame reassembly,
 * control frames, puts into registered memory, put acknowledgements), as
 * a stranger or a broken peer on the other end of a real connection sees
 * it.
 *
 * No refactor of the driver was needed: the harness is the other end of a
 * loopback TCP connection to a real rail V (127.0.0.1 only).  In "incoming"
 * mode it connects to V's listener as a client would; in "outgoing" mode V
 * connects (its ep was created with the address of a second rail H, whose
 * listening socket the harness accepts on instead of H).  The input is a
 * setup byte and operations; the main one writes input bytes into the
 * connection and runs V's progress, so the stream is cut where the input
 * says and V reassembles it as it does from the network.  Other
 * operations are what V's core does meanwhile (control messages, puts,
 * deregistration, destroying the ep), and what the other end does (read
 * V's output, half-close).
 *
 * The harness is V's core: its upcalls check what the driver promises
 * (control data 8-byte aligned and no longer than a slot, no upcall on a
 * destroyed ep) and read every byte they are given.  Put targets live in a
 * fixed-address arena, so inputs can name them.
 *
 * The handshake frames come from the driver's own mdr_tcp_hs_frame(); the
 * section "the one place that knows the handshake" below makes them and
 * their proofs (rails/common/auth.h, with the job key of every run), so
 * the harness can complete a handshake (FZ_S_HANDSHAKE, and the ops that
 * answer V's HELLO or reconnect with or without a continuity proof) and
 * the input reaches what lies behind it; without them the input's own
 * CHALLENGE, PROOF and HELLO_ACK frames reach the parser and the proof
 * checks.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rails/tcp/tcp.h"
#include "util/log.h"
#include "fuzz_common.h"

FZ_DEFINE_GETRANDOM

#define FZ_V_UUID 0x1111111111111111ull /* the rail under test */
#define FZ_P_UUID 0x2222222222222222ull /* the harness as a peer connecting to V */
#define FZ_H_UUID 0x3333333333333333ull /* the rail V connects to (the harness answers) */
#define FZ_SLOT 1024u
#define FZ_REGION_OFF 4096u  /* registered window in the arena */
#define FZ_REGION_LEN 65536u
#define FZ_MAXOPS 128

enum {
    FZ_S_OUTGOING = 1,  /* V connects to the harness (else the harness connects to V) */
    FZ_S_HANDSHAKE = 2, /* the harness completes the handshake before the input's bytes */
    FZ_S_PUT_ACK = 4,   /* MADRAIL_TCP_PUT_ACK=1 */
    FZ_S_NO_COALESCE = 8,
    FZ_S_REGION = 16,   /* V registers [arena+4096, +64 KiB) for remote writes */
    FZ_S_REFUSE = 32,   /* V's core refuses the connection (ep_accepted says no) */
    FZ_S_REPLY = 64     /* V's core answers every control message with one */
};

enum {
    FZ_OP_WRITE = 0,    /* len(u16) bytes: into the connection, then progress */
    FZ_OP_PROGRESS = 1, /* n(u8) */
    FZ_OP_CTRL = 2,     /* len(u16): V sends a control message */
    FZ_OP_PUT = 3,      /* len(u16) raddr(u64) rkey(u64): V puts to the peer */
    FZ_OP_DEREG = 4,    /* V deregisters its region (a put may be arriving) */
    FZ_OP_SHUT = 5,     /* the harness half-closes (EOF for V) */
    FZ_OP_DRAIN = 6,    /* the harness reads what V wrote */
    FZ_OP_DESTROY = 7   /* V's core destroys the ep; with (op >> 3) & 3 = 1: the
                         * harness reconnects as the same peer (incoming; with a
                         * continuity proof if op & 32); 2: the harness answers
                         * V's HELLO (outgoing: CHALLENGE if not yet, then a
                         * HELLO_ACK with status u8, proven); 3: CHALLENGE only */
};

typedef struct fz_tcp {
    mdr_rail_t *v, *h;
    mdr_ep_t *ep;      /* V's ep to the peer (created, or accepted) */
    int ep_failed;
    int fd;            /* the harness's end */
    uint8_t setup;
    mdr_memh_t *region;
    uint64_t sum;
    unsigned puts, puts_done;
    mdr_completion_t comp[16];
    uint8_t put_src[4096];
    /* the harness's side of the handshake */
    uint8_t nonce_i[MDR_AUTH_NONCE_LEN], nonce_a[MDR_AUTH_NONCE_LEN];
    uint8_t mac_a[MDR_AUTH_MAC_LEN], session[MDR_AUTH_MAC_LEN];
    int challenged, have_session;
} fz_tcp_t;

static fz_tcp_t *fz_cur;

/* (the handshake section comes after the harness's socket helpers) */

/* ---------------- V's core ---------------- */

static void fz_ctrl_recv(void *cookie, const void *data, size_t len)
{
    fz_tcp_t *s = cookie;
    const uint8_t *p = data;
    size_t i;

    if (s != fz_cur || s->ep == NULL) {
        fprintf(stderr, "fuzz: control message for a destroyed endpoint\n");
        __builtin_trap();
    }
    if (((uintptr_t)data & 7) != 0 || len > FZ_SLOT) {
        fprintf(stderr, "fuzz: control message of %zu bytes at %p (slot %u, must be 8-byte "
                "aligned)\n", len, data, FZ_SLOT);
        __builtin_trap();
    }
    for (i = 0; i < len; i++)
        s->sum = s->sum * 31 + p[i];
    if ((s->setup & FZ_S_REPLY) && s->ep != NULL && !s->ep_failed) {
        struct iovec iov = {(void *)data, len < 64 ? len : 64};
        (void)mdr_tcp_ops.ctrl_send(s->ep, &iov, 1);
    }
}

static void *fz_ep_accepted(void *rail_cookie, uint64_t uuid, mdr_ep_t *ep)
{
    fz_tcp_t *s = rail_cookie;

    (void)uuid;
    if ((s->setup & FZ_S_REFUSE) || (s->ep != NULL && !s->ep_failed))
        return NULL; /* one live ep per peer, as the core keeps */
    if (s->ep != NULL) /* the peer reconnected after its ep failed: the new one */
        mdr_tcp_ops.ep_destroy(s->ep);
    s->ep = ep;
    s->ep_failed = 0;
    return s;
}

static void fz_ep_failed(void *cookie, madrail_status_t status, const char *reason)
{
    fz_tcp_t *s = cookie;

    (void)status;
    if (s != fz_cur || s->ep == NULL) {
        fprintf(stderr, "fuzz: failure reported for a destroyed endpoint: %s\n", reason);
        __builtin_trap();
    }
    s->ep_failed = 1;
}

static const mdr_rail_upcalls_t fz_upcalls = {fz_ctrl_recv, fz_ep_accepted, fz_ep_failed};

static void fz_put_done(mdr_completion_t *comp, madrail_status_t status)
{
    (void)comp;
    (void)status;
    fz_cur->puts_done++;
}

/* ---------------- the harness's end ---------------- */

static void fz_progress(fz_tcp_t *s, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        mdr_tcp_ops.progress(s->v);
        if (s->h != NULL)
            mdr_tcp_ops.progress(s->h);
    }
}

static void fz_write(fz_tcp_t *s, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    ssize_t n;

    while (len > 0 && s->fd >= 0) {
        n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                /* V is not reading (closed, or back-pressure): let it run */
                fz_progress(s, 1);
                {
                    uint8_t sink[4096];
                    while (recv(s->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
                        ;
                }
                n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n <= 0)
                    return; /* dropped: V stopped reading */
            } else {
                return;
            }
        }
        p += n;
        len -= (size_t)n;
    }
}

static void fz_drain(fz_tcp_t *s)
{
    uint8_t sink[4096];

    if (s->fd < 0)
        return;
    while (recv(s->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
        ;
}

/* Read exactly len bytes from V (progressing it), or give up. */
static int fz_read(fz_tcp_t *s, uint8_t *buf, size_t len)
{
    size_t got = 0;
    int tries;

    for (tries = 0; tries < 1000 && got < len; tries++) {
        ssize_t n = recv(s->fd, buf + got, len - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0)
            return -1;
        else
            fz_progress(s, 1);
    }
    return got == len ? 0 : -1;
}

static mdr_rail_t *fz_rail_open(uint64_t uuid, uint8_t setup, void *cookie)
{
    const char *ov[] = {(setup & FZ_S_PUT_ACK) ? "MADRAIL_TCP_PUT_ACK=1" : "MADRAIL_TCP_PUT_ACK=0",
                        (setup & FZ_S_NO_COALESCE) ? "MADRAIL_TCP_COALESCE=0"
                                                   : "MADRAIL_TCP_COALESCE=16k",
                        NULL};
    mdr_rail_params_t prm;
    mdr_rail_t *rail = NULL;

    memset(&prm, 0, sizeof(prm));
    prm.uuid = uuid;
    prm.upcalls = &fz_upcalls;
    prm.rail_cookie = cookie;
    prm.slot_size = FZ_SLOT;
    prm.slots = 10;
    prm.overrides = ov;
    prm.job_key = fz_job_key;
    if (mdr_tcp_ops.open("lo", &prm, &rail) != MADRAIL_OK)
        return NULL;
    return rail;
}

/* ---------------- the one place that knows the handshake ---------------- */

/* A handshake frame into buf (MDR_TCP_HS_MAX bytes); returns its length. */
static size_t fz_hs(uint8_t *buf, int type, uint16_t status, uint64_t uuid, uint64_t target,
                    const void *data, size_t len)
{
    return mdr_tcp_hs_frame(buf, type, status, uuid, target, data, len);
}

/* The transcript of a handshake whose acceptor listens at acc. */
static void fz_transcript(fz_tcp_t *s, uint64_t uuid_i, uint64_t uuid_a,
                          const struct sockaddr_in *acc, uint8_t rail_id[6],
                          mdr_auth_transcript_t *t)
{
    memcpy(rail_id, &acc->sin_addr.s_addr, 4);
    memcpy(rail_id + 4, &acc->sin_port, 2);
    t->driver = "tcp";
    t->uuid_i = uuid_i;
    t->uuid_a = uuid_a;
    t->nonce_i = s->nonce_i;
    t->nonce_a = s->nonce_a;
    t->rail_id = rail_id;
    t->rail_id_len = 6;
}

/* Incoming: the harness, as peer P, handshakes with V on its connection:
 * HELLO, V's CHALLENGE, PROOF (with a continuity proof from the session of
 * its last handshake when cont), V's HELLO_ACK.  Keeps the new session
 * when V answered OK with a valid proof. */
static void fz_client_handshake(fz_tcp_t *s, int cont)
{
    uint8_t f[MDR_TCP_HS_MAX], in[MDR_TCP_HS_MAX], proof[3 * MDR_AUTH_MAC_LEN], rail_id[6];
    mdr_auth_transcript_t t;
    uint16_t status;

    mdr_auth_nonce(s->nonce_i);
    fz_write(s, f, fz_hs(f, MDR_TCP_F_HELLO, 0, FZ_P_UUID, FZ_V_UUID, s->nonce_i,
                         MDR_AUTH_NONCE_LEN));
    fz_progress(s, 1);
    if (fz_read(s, in, MDR_TCP_HELLO_LEN) != 0 || in[0] != MDR_TCP_F_CHALLENGE)
        return; /* refused: the input's bytes go to a closed connection */
    memcpy(s->nonce_a, in + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE, MDR_AUTH_NONCE_LEN);
    fz_transcript(s, FZ_P_UUID, FZ_V_UUID, &s->v->local, rail_id, &t);
    memset(proof, 0, sizeof(proof));
    mdr_auth_mac(proof, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    if (cont && s->have_session)
        mdr_auth_mac(proof + MDR_AUTH_MAC_LEN, s->session, MDR_AUTH_MAC_LEN,
                     MDR_AUTH_CONTINUITY, &t);
    fz_write(s, f, fz_hs(f, MDR_TCP_F_PROOF, 0, FZ_P_UUID, FZ_V_UUID, proof, sizeof(proof)));
    fz_progress(s, 1);
    if (fz_read(s, in, MDR_TCP_HDR_LEN + MDR_TCP_HS_ACK_BODY) != 0)
        return;
    memcpy(&status, in + MDR_TCP_HDR_LEN + 6, 2);
    mdr_auth_mac(s->mac_a, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    if (in[0] == MDR_TCP_F_HELLO_ACK && status == MDR_TCP_ACK_OK &&
        mdr_auth_mac_equal(s->mac_a, in + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE)) {
        mdr_auth_mac(s->session, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
        s->have_session = 1;
    }
}

/* Outgoing: the harness, as rail H, takes V's HELLO and answers CHALLENGE,
 * then reads V's PROOF and keeps the proof it owes V in its HELLO_ACK. */
static void fz_server_challenge(fz_tcp_t *s)
{
    uint8_t f[MDR_TCP_HS_MAX], rail_id[6];
    mdr_auth_transcript_t t;

    if (s->challenged || s->h == NULL)
        return;
    s->challenged = 1;
    if (fz_read(s, f, MDR_TCP_HELLO_LEN) != 0 || f[0] != MDR_TCP_F_HELLO)
        return;
    memcpy(s->nonce_i, f + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE, MDR_AUTH_NONCE_LEN);
    mdr_auth_nonce(s->nonce_a);
    fz_write(s, f, fz_hs(f, MDR_TCP_F_CHALLENGE, 0, FZ_H_UUID, FZ_V_UUID, s->nonce_a,
                         MDR_AUTH_NONCE_LEN));
    fz_progress(s, 1);
    if (fz_read(s, f, MDR_TCP_HDR_LEN + MDR_TCP_HS_PROOF_BODY) != 0)
        return;
    fz_transcript(s, FZ_V_UUID, FZ_H_UUID, &s->h->local, rail_id, &t);
    mdr_auth_mac(s->mac_a, fz_job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
}

/* Outgoing: a HELLO_ACK with status and the harness's proof. */
static void fz_server_ack(fz_tcp_t *s, uint16_t status)
{
    uint8_t f[MDR_TCP_HS_MAX];

    fz_server_challenge(s);
    fz_write(s, f, fz_hs(f, MDR_TCP_F_HELLO_ACK, status, FZ_H_UUID, FZ_V_UUID, s->mac_a,
                         MDR_AUTH_MAC_LEN));
    fz_progress(s, 1);
}

/* A connection of the harness to V's listener, on s->fd. */
static int fz_dial(fz_tcp_t *s)
{
    struct linger lg = {1, 0}; /* close with a reset: no TIME_WAIT per input */
    int one = 1;

    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return -1;
    setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(s->fd, (struct sockaddr *)&s->v->local, sizeof(s->v->local)) != 0)
        return -1;
    fz_progress(s, 1); /* V accepts */
    return 0;
}

/* Incoming: the harness reconnects as P (its old connection stays open
 * until the new handshake is done, then closes). */
static void fz_reconnect(fz_tcp_t *s, int cont)
{
    int old = s->fd;

    if ((s->setup & FZ_S_OUTGOING) || fz_dial(s) != 0) {
        if (s->fd >= 0 && s->fd != old)
            close(s->fd);
        s->fd = old;
        return;
    }
    fz_client_handshake(s, cont);
    if (old >= 0)
        close(old);
    fz_progress(s, 1);
}

static int fz_connect(fz_tcp_t *s)
{
    struct linger lg = {1, 0}; /* close with a reset: no TIME_WAIT per input */
    int one = 1;

    if (!(s->setup & FZ_S_OUTGOING)) {
        if (fz_dial(s) != 0)
            return -1;
        if (s->setup & FZ_S_HANDSHAKE)
            fz_client_handshake(s, 0);
        return 0;
    }
    /* outgoing: V's ep to H's address; the harness takes H's listener */
    {
        uint8_t addr[MDR_TCP_ADDR_LEN], msg[16];
        struct iovec iov = {msg, sizeof(msg)};
        int i;

        s->h = fz_rail_open(FZ_H_UUID, s->setup, s);
        if (s->h == NULL || mdr_tcp_ops.addr_pack(s->h, addr, sizeof(addr)) != MADRAIL_OK ||
            mdr_tcp_ops.ep_create(s->v, FZ_H_UUID, addr, sizeof(addr), s, &s->ep) != MADRAIL_OK)
            return -1;
        memset(msg, 0, sizeof(msg));
        (void)mdr_tcp_ops.ctrl_send(s->ep, &iov, 1); /* connections are lazy: connect now */
        for (i = 0; i < 100 && s->fd < 0; i++) {
            mdr_tcp_ops.progress(s->v);
            s->fd = accept4(s->h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        }
        if (s->fd < 0)
            return -1;
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (s->setup & FZ_S_HANDSHAKE)
            fz_server_ack(s, MDR_TCP_ACK_OK);
        return 0;
    }
}

static void fz_tcp_run(const uint8_t *data, size_t size)
{
    static uint8_t buf[65536 + 8];
    fz_in_t in = {data, size};
    fz_tcp_t *s = calloc(1, sizeof(*s));
    uint8_t *arena = fz_arena();
    int nops = 0;

    if (s == NULL)
        return;
    fz_cur = s;
    fz_rand_reset();
    s->fd = -1;
    s->setup = fz_u8(&in);
    s->v = fz_rail_open(FZ_V_UUID, s->setup, s);
    if (s->v == NULL)
        goto out;
    if ((s->setup & FZ_S_REGION) && arena != NULL &&
        mdr_tcp_ops.mem_reg(s->v, arena + FZ_REGION_OFF, FZ_REGION_LEN,
                            MDR_MEM_LOCAL | MDR_MEM_REMOTE_WRITE, &s->region) != MADRAIL_OK)
        s->region = NULL;
    if (fz_connect(s) != 0)
        goto out;
    if (s->region != NULL) { /* offered to the harness, whichever side it plays */
        uint64_t k;
        size_t klen = sizeof(k);
        (void)mdr_tcp_ops.rkey_pack(s->v, s->region,
                                    (s->setup & FZ_S_OUTGOING) ? FZ_H_UUID : FZ_P_UUID, &k, &klen);
    }

    while (fz_left(&in) > 0 && nops++ < FZ_MAXOPS) {
        uint8_t op = fz_u8(&in);
        switch (op & 7) {
        case FZ_OP_WRITE: {
            size_t len = fz_u16(&in);
            if (len > fz_left(&in))
                len = fz_left(&in);
            fz_bytes(&in, buf, len);
            fz_write(s, buf, len);
            fz_progress(s, 1 + (op >> 3 & 3));
            break;
        }
        case FZ_OP_PROGRESS:
            fz_progress(s, 1 + (fz_u8(&in) & 15));
            break;
        case FZ_OP_CTRL: {
            size_t len = fz_u16(&in) % (FZ_SLOT + 1);
            struct iovec iov = {buf, len};
            memset(buf, 0x6c, len);
            if (s->ep != NULL && !s->ep_failed)
                (void)mdr_tcp_ops.ctrl_send(s->ep, &iov, 1);
            break;
        }
        case FZ_OP_PUT: {
            size_t len = fz_u16(&in) % (sizeof(s->put_src) + 1);
            uint64_t raddr = fz_u64(&in), rkey = fz_u64(&in);
            madrail_status_t st;
            if (s->ep == NULL || s->ep_failed || s->puts >= 16)
                break;
            memset(s->put_src, 0x70, len);
            s->comp[s->puts].cb = fz_put_done;
            st = mdr_tcp_ops.put(s->ep, s->put_src, len, NULL, raddr, &rkey, sizeof(rkey),
                                 &s->comp[s->puts]);
            if (st == MADRAIL_INPROGRESS)
                s->puts++;
            break;
        }
        case FZ_OP_DEREG:
            if (s->region != NULL) {
                mdr_tcp_ops.mem_dereg(s->v, s->region);
                s->region = NULL;
            }
            break;
        case FZ_OP_SHUT:
            if (s->fd >= 0)
                shutdown(s->fd, SHUT_WR);
            fz_progress(s, 2);
            break;
        case FZ_OP_DRAIN:
            fz_drain(s);
            break;
        default:
            switch (op >> 3 & 3) {
            case 1:
                fz_reconnect(s, (op & 32) != 0);
                break;
            case 2:
                if (s->setup & FZ_S_OUTGOING)
                    fz_server_ack(s, fz_u8(&in) & 3);
                break;
            case 3:
                if (s->setup & FZ_S_OUTGOING)
                    fz_server_challenge(s);
                break;
            default:
                if (s->ep != NULL) {
                    mdr_tcp_ops.ep_destroy(s->ep);
                    s->ep = NULL;
                }
                break;
            }
            break;
        }
    }
    fz_progress(s, 2);

out:
    if (s->ep != NULL)
        mdr_tcp_ops.ep_destroy(s->ep);
    s->ep = NULL;
    if (s->region != NULL)
        mdr_tcp_ops.mem_dereg(s->v, s->region);
    if (s->v != NULL)
        mdr_tcp_ops.close(s->v);
    if (s->h != NULL)
        mdr_tcp_ops.close(s->h);
    if (s->fd >= 0)
        close(s->fd);
    fz_cur = NULL;
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_tcp_run(data, size);
    return 0;
}

/* ---------------- the seed corpus ---------------- */

typedef struct fz_seed {
    uint8_t buf[16384];
    size_t len;
} fz_seed_t;

static void sd_put(fz_seed_t *sd, const void *p, size_t n)
{
    if (n > 0 && sd->len + n <= sizeof(sd->buf)) {
        memcpy(sd->buf + sd->len, p, n);
        sd->len += n;
    }
}

static void sd_u8(fz_seed_t *sd, uint8_t v) { sd_put(sd, &v, 1); }

static void sd_u16(fz_seed_t *sd, uint16_t v) { sd_put(sd, &v, 2); }

static void sd_u64(fz_seed_t *sd, uint64_t v) { sd_put(sd, &v, 8); }

/* A write op carrying bytes. */
static void sd_write(fz_seed_t *sd, const void *p, size_t n)
{
    sd_u8(sd, FZ_OP_WRITE);
    sd_u16(sd, (uint16_t)n);
    sd_put(sd, p, n);
}

/* A frame (header + body + padding) into f; returns its length. */
static size_t sd_frame(uint8_t *f, uint8_t type, uint32_t hlen, const void *body, size_t blen)
{
    mdr_tcp_hdr_t h;
    size_t pad = MDR_TCP_PAD8(blen);

    memset(&h, 0, sizeof(h));
    h.type = type;
    h.len = hlen;
    memcpy(f, &h, sizeof(h));
    if (blen > 0)
        memcpy(f + sizeof(h), body, blen);
    memset(f + sizeof(h) + blen, 0, pad);
    return sizeof(h) + blen + pad;
}

static size_t sd_put_frame(uint8_t *f, uint64_t raddr, uint64_t rkey, uint64_t count,
                           uint8_t fill)
{
    mdr_tcp_put_ext_t e;
    size_t n;

    e.raddr = raddr;
    e.rkey = rkey;
    e.count = count;
    n = sd_frame(f, MDR_TCP_F_PUT, sizeof(e), &e, sizeof(e));
    if (count <= 4096) {
        memset(f + n, fill, count);
        memset(f + n + count, 0, MDR_TCP_PAD8(count));
        n += count + MDR_TCP_PAD8(count);
    }
    return n;
}

static int sd_save(const char *dir, const char *name, const fz_seed_t *sd)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(sd->buf, 1, sd->len, f) != sd->len) {
        fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

static int fz_tcp_seeds(const char *dir)
{
    static uint8_t f[8192];
    const uint64_t base = FZ_ARENA_ADDR + FZ_REGION_OFF;
    uint64_t key = 0;
    fz_seed_t sd;
    size_t n;
    int rc = 0, k;
    uint8_t ctl[FZ_SLOT + 8];
    static const uint8_t zero[3 * MDR_AUTH_MAC_LEN];

    memset(ctl, 0x43, sizeof(ctl));
    /* the key of the region a run registers, as V packs it (its random tag
     * comes from the harness's getrandom, the same stream as in a run) */
    {
        mdr_rail_t *v;
        mdr_memh_t *mh = NULL;
        size_t klen = sizeof(key);
        fz_rand_reset();
        v = fz_rail_open(FZ_V_UUID, 0, NULL);
        if (v == NULL || fz_arena() == NULL ||
            mdr_tcp_ops.mem_reg(v, fz_arena() + FZ_REGION_OFF, FZ_REGION_LEN,
                                MDR_MEM_LOCAL | MDR_MEM_REMOTE_WRITE, &mh) != MADRAIL_OK ||
            mdr_tcp_ops.rkey_pack(v, mh, FZ_P_UUID, &key, &klen) != MADRAIL_OK || klen != sizeof(key)) {
            fprintf(stderr, "gen_seeds: cannot open a tcp rail on lo and register memory\n");
            return -1;
        }
        mdr_tcp_ops.mem_dereg(v, mh);
        mdr_tcp_ops.close(v);
    }

    /* incoming, harness handshake: control frames of edge sizes, cut anywhere */
    {
        const size_t sizes[] = {0, 1, 7, 8, 9, 24, FZ_SLOT - 1, FZ_SLOT, FZ_SLOT + 1};
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REGION);
        for (k = 0; k < (int)(sizeof(sizes) / sizeof(sizes[0])); k++) {
            n = sd_frame(f, MDR_TCP_F_CTRL, (uint32_t)sizes[k], ctl, sizes[k]);
            sd_write(&sd, f, n);
        }
        rc |= sd_save(dir, "ctrl-sizes", &sd);

        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REPLY | FZ_S_NO_COALESCE);
        n = sd_frame(f, MDR_TCP_F_CTRL, 40, ctl, 40);
        n += sd_frame(f + n, MDR_TCP_F_CTRL, 100, ctl, 100);
        sd_write(&sd, f, 3);         /* part of a header */
        sd_write(&sd, f + 3, 20);    /* rest of it, part of the body */
        sd_write(&sd, f + 23, n - 23);
        sd_u8(&sd, FZ_OP_DRAIN);
        rc |= sd_save(dir, "ctrl-split", &sd);
    }
    /* puts: inside the region, at its edges, outside, with stale keys, count 0, huge */
    {
        struct {
            uint64_t raddr, key, count;
            const char *name;
        } puts[] = {
            {base, key, 100, "put-ok"},
            {base + FZ_REGION_LEN - 8, key, 8, "put-edge"},
            {base + FZ_REGION_LEN - 8, key, 9, "put-past-end"},
            {base - 1, key, 4, "put-before"},
            {base, key + (1ull << 32), 16, "put-stale-key"},
            {base, key | 7, 16, "put-bad-id"},
            {base, key, 0, "put-empty"},
            {base, key, 1ull << 40, "put-huge"},
            {base + 8, key, 4096, "put-4k"},
        };
        for (k = 0; k < (int)(sizeof(puts) / sizeof(puts[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REGION | (k & 1 ? FZ_S_PUT_ACK : 0));
            n = sd_put_frame(f, puts[k].raddr, puts[k].key, puts[k].count, (uint8_t)k);
            if (puts[k].count == 4096) { /* payload in pieces, deregistered half way */
                sd_write(&sd, f, 200);
                sd_u8(&sd, FZ_OP_DEREG);
                sd_write(&sd, f + 200, n - 200);
            } else {
                sd_write(&sd, f, n);
            }
            n = sd_frame(f, MDR_TCP_F_CTRL, 16, ctl, 16);
            sd_write(&sd, f, n);
            sd_u8(&sd, FZ_OP_DRAIN);
            rc |= sd_save(dir, puts[k].name, &sd);
        }
    }
    /* put acknowledgements: for puts V made, more than it made, none made */
    for (k = 0; k < 3; k++) {
        char name[32];
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_PUT_ACK);
        if (k < 2) {
            sd_u8(&sd, FZ_OP_PUT);
            sd_u16(&sd, 100);
            sd_u64(&sd, 0x1000);
            sd_u64(&sd, 1ull << 32);
            sd_u8(&sd, FZ_OP_PROGRESS);
            sd_u8(&sd, 2);
        }
        n = sd_frame(f, MDR_TCP_F_PUT_ACK, k == 1 ? 2 : 1, NULL, 0);
        sd_write(&sd, f, n);
        snprintf(name, sizeof(name), "put-ack-%d", k);
        rc |= sd_save(dir, name, &sd);
    }
    /* incoming without the harness's handshake: HELLOs good and bad */
    {
        struct {
            uint64_t uuid, target;
            uint8_t type, setup;
            int corrupt;
            const char *name;
        } h[] = {
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_HELLO, 0, 0, "hello-ok"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_HELLO, FZ_S_REFUSE, 0, "hello-refused"},
            {FZ_P_UUID, FZ_P_UUID, MDR_TCP_F_HELLO, 0, 0, "hello-wrong-target"},
            {FZ_V_UUID, FZ_V_UUID, MDR_TCP_F_HELLO, 0, 0, "hello-own-uuid"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_HELLO, 0, 1, "hello-bad-magic"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_HELLO_ACK, 0, 0, "hello-ack-unasked"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_HELLO, 0, 2, "hello-short-len"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_PROOF, 0, 0, "proof-before-hello"},
            {FZ_P_UUID, FZ_V_UUID, MDR_TCP_F_CHALLENGE, 0, 0, "challenge-unasked"},
        };
        for (k = 0; k < (int)(sizeof(h) / sizeof(h[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, h[k].setup | FZ_S_REGION);
            n = fz_hs(f, h[k].type, 0, h[k].uuid, h[k].target, zero,
                      h[k].type == MDR_TCP_F_HELLO_ACK ? MDR_AUTH_MAC_LEN : MDR_AUTH_NONCE_LEN);
            if (h[k].corrupt == 1)
                f[MDR_TCP_HDR_LEN] ^= 0xff;
            if (h[k].corrupt == 2)
                f[4] = 8;
            sd_write(&sd, f, n);
            /* a PROOF the input cannot make right: refused at the proof */
            n = fz_hs(f, MDR_TCP_F_PROOF, 0, h[k].uuid, h[k].target, zero, 3 * MDR_AUTH_MAC_LEN);
            sd_write(&sd, f, n);
            n = sd_frame(f, MDR_TCP_F_CTRL, 24, ctl, 24);
            sd_write(&sd, f, n);
            /* a second HELLO on the open connection */
            n = fz_hs(f, MDR_TCP_F_HELLO, 0, h[k].uuid, h[k].target, zero, MDR_AUTH_NONCE_LEN);
            sd_write(&sd, f, n);
            sd_u8(&sd, FZ_OP_DRAIN);
            rc |= sd_save(dir, h[k].name, &sd);
        }
        /* data before any handshake; a frame of an unknown type; EOF mid-frame */
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, 0);
        n = sd_frame(f, MDR_TCP_F_CTRL, 16, ctl, 16);
        sd_write(&sd, f, n);
        rc |= sd_save(dir, "data-before-hello", &sd);
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE);
        n = sd_frame(f, 99, 0, NULL, 0);
        sd_write(&sd, f, n);
        rc |= sd_save(dir, "unknown-type", &sd);
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REGION);
        n = sd_put_frame(f, base, key, 1000, 1);
        sd_write(&sd, f, 500);
        sd_u8(&sd, FZ_OP_SHUT);
        rc |= sd_save(dir, "eof-mid-put", &sd);
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REGION);
        n = sd_put_frame(f, base, key, 1000, 1);
        sd_write(&sd, f, 500);
        sd_u8(&sd, FZ_OP_DESTROY);
        sd_write(&sd, f + 500, n - 500);
        rc |= sd_save(dir, "destroy-mid-put", &sd);
    }
    /* outgoing: the harness answers V's HELLO */
    {
        struct {
            uint16_t status;
            uint64_t uuid, target;
            int proven;
            const char *name;
        } a[] = {
            {MDR_TCP_ACK_OK, FZ_H_UUID, FZ_V_UUID, 1, "ack-ok"},
            {MDR_TCP_ACK_LOST, FZ_H_UUID, FZ_V_UUID, 1, "ack-lost"},
            {MDR_TCP_ACK_REFUSED, FZ_H_UUID, FZ_V_UUID, 1, "ack-refused"},
            {3, FZ_H_UUID, FZ_V_UUID, 1, "ack-bad-status"},
            {MDR_TCP_ACK_OK, FZ_P_UUID, FZ_V_UUID, 0, "ack-wrong-uuid"},
            {MDR_TCP_ACK_OK, FZ_H_UUID, FZ_H_UUID, 0, "ack-wrong-target"},
            {MDR_TCP_ACK_OK, FZ_H_UUID, FZ_V_UUID, 0, "ack-unproven"},
        };
        for (k = 0; k < (int)(sizeof(a) / sizeof(a[0])); k++) {
            memset(&sd, 0, sizeof(sd));
            sd_u8(&sd, FZ_S_OUTGOING | FZ_S_REGION | (k & 1 ? FZ_S_PUT_ACK : 0));
            if (a[k].uuid == FZ_H_UUID && a[k].target == FZ_V_UUID && a[k].proven) {
                /* the harness answers, with its proof */
                sd_u8(&sd, FZ_OP_DESTROY | 2 << 3);
                sd_u8(&sd, (uint8_t)a[k].status);
            } else {
                /* the harness challenges; the input's answer proves nothing */
                sd_u8(&sd, FZ_OP_DESTROY | 3 << 3);
                n = fz_hs(f, MDR_TCP_F_HELLO_ACK, a[k].status, a[k].uuid, a[k].target, zero,
                          MDR_AUTH_MAC_LEN);
                sd_write(&sd, f, n);
            }
            n = sd_frame(f, MDR_TCP_F_CTRL, 32, ctl, 32);
            sd_write(&sd, f, n);
            sd_u8(&sd, FZ_OP_CTRL);
            sd_u16(&sd, 300);
            sd_u8(&sd, FZ_OP_DRAIN);
            rc |= sd_save(dir, a[k].name, &sd);
        }
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_OUTGOING | FZ_S_HANDSHAKE | FZ_S_REGION | FZ_S_PUT_ACK);
        sd_u8(&sd, FZ_OP_PUT);
        sd_u16(&sd, 3000);
        sd_u64(&sd, 0x5000);
        sd_u64(&sd, 1ull << 32);
        n = sd_put_frame(f, base, key, 64, 2);
        n += sd_frame(f + n, MDR_TCP_F_PUT_ACK, 1, NULL, 0);
        sd_write(&sd, f, n);
        sd_u8(&sd, FZ_OP_DRAIN);
        rc |= sd_save(dir, "outgoing-put-both-ways", &sd);

        /* the input challenges V itself (V answers PROOF), then answers
         * without a proof */
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_OUTGOING | FZ_S_REGION);
        sd_u8(&sd, FZ_OP_DRAIN);
        n = fz_hs(f, MDR_TCP_F_CHALLENGE, 0, FZ_H_UUID, FZ_V_UUID, zero, MDR_AUTH_NONCE_LEN);
        sd_write(&sd, f, n);
        sd_u8(&sd, FZ_OP_DRAIN);
        n = fz_hs(f, MDR_TCP_F_HELLO_ACK, 0, FZ_H_UUID, FZ_V_UUID, zero, MDR_AUTH_MAC_LEN);
        sd_write(&sd, f, n);
        rc |= sd_save(dir, "challenge-then-unproven-ack", &sd);
    }
    /* incoming: the peer reconnects while its connection is open, with and
     * without proof of its session (issue 28, item 2) */
    for (k = 0; k < 2; k++) {
        memset(&sd, 0, sizeof(sd));
        sd_u8(&sd, FZ_S_HANDSHAKE | FZ_S_REGION | FZ_S_REPLY);
        n = sd_frame(f, MDR_TCP_F_CTRL, 24, ctl, 24);
        sd_write(&sd, f, n);
        sd_u8(&sd, FZ_OP_DESTROY | 1 << 3 | (k ? 32 : 0));
        n = sd_frame(f, MDR_TCP_F_CTRL, 40, ctl, 40);
        sd_write(&sd, f, n);
        sd_u8(&sd, FZ_OP_DRAIN);
        rc |= sd_save(dir, k ? "reconnect-proven" : "reconnect-unproven", &sd);
    }
    return rc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FZ_GEN_SEEDS");

    (void)argc;
    fz_env_setup(*argv);
    /* the driver alone: no context reads MADRAIL_LOG_LEVEL (default: errors) */
    mdr_log_set_level(getenv("MADRAIL_LOG_LEVEL") != NULL
                          ? mdr_log_level_parse(getenv("MADRAIL_LOG_LEVEL"))
                          : MDR_LOG_ERROR);
    if (dir != NULL) {
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "gen_seeds: %s: %s\n", dir, strerror(errno));
            exit(1);
        }
        exit(fz_tcp_seeds(dir) == 0 ? 0 : 1);
    }
    return 0;
}
