/*
 * Endpoints and connections of the tcp driver: framing, the send queue and
 * the receive parser.
 *
 * Sending: when nothing is queued a frame goes straight to the socket with
 * one gathered write (header, the caller's iovecs, padding); only what the
 * socket does not take is copied into the ep's queue, so control buffers
 * are reusable on return.  Put data is never copied: the queue keeps a
 * pointer to the caller's buffer (the core keeps it alive until the
 * completion).  A put completes when the receiver acknowledges it (PUT_ACK,
 * counted in order): like an RDMA write completion it then means "placed",
 * and a put the receiver rejects fails at the sender too.
 * MADRAIL_TCP_PUT_ACK=0 completes on the last byte written instead, one
 * round trip earlier.
 *
 * Full duplex: one connection carries our puts and our control messages
 * for the peer's puts (CTS, FIN, PUT_ACK).  If those waited behind our own
 * bulk data, the peer's direction would stall whenever ours is busy, and
 * two processes streaming at each other would take turns (measured: a
 * bidirectional stream ran at the one-way rate).  So control frames have
 * their own queue and pass queued puts at the next frame boundary.  While
 * the peer's puts arrive on the connection too (mdr_tcp_conn_duplex), a
 * put leaves in frames of MADRAIL_TCP_PUT_FRAME payload bytes, each with
 * its own header, and TCP_NOTSENT_LOWAT (MADRAIL_TCP_NOTSENT_LOWAT) keeps
 * the kernel from holding megabytes of our unsent data in front of the
 * replies; one-way streams send puts whole and keep the kernel's deep
 * queue (fewer reads at the receiver, and a link kept busy while the
 * process is not scheduled).  The rail interface only orders a control
 * message after a put once the put has completed, which still holds: a put
 * completes after its last frame.
 *
 * Receiving: all connections of a rail share one large receive buffer
 * (progress reads one connection at a time); only an incomplete frame is
 * carried over in the connection.  Put payloads are read straight into the
 * registered target memory, with the bytes that follow landing in the
 * shared buffer in the same readv.  Frames are padded to 8 bytes and the
 * buffer position follows the stream position modulo 8, so a control
 * payload handed to the core is always 8-byte aligned.
 *
 * Upcalls: only from progress().  Failures found elsewhere (a write error
 * in ctrl_send) are queued and reported by the next progress(); put
 * completions are queued and reported at the end of progress(), when no
 * queue is being walked, so the core may send, put or destroy from inside
 * any upcall.  Objects closed during progress() are freed at its end.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rails/common/drv.h"
#include "rails/common/tcp_path.h"
#include "rails/tcp/tcp.h"
#include "util/clock.h"
#include "util/log.h"

static const uint8_t mdr_tcp_zeros[8];

/* ---------------- connections ---------------- */

char *mdr_tcp_addr_str(const struct sockaddr_in *sin, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];

    if (inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)) == NULL)
        snprintf(ip, sizeof(ip), "?");
    snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
    return buf;
}

void mdr_tcp_sockopts(mdr_rail_t *rail, int fd)
{
    int one = 1, v;

    if (rail->cfg.nodelay && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
        mdr_warn("rail %s: TCP_NODELAY: %m", rail->log_name);
    if (rail->cfg.sndbuf > 0) {
        v = rail->cfg.sndbuf > INT_MAX ? INT_MAX : (int)rail->cfg.sndbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0)
            mdr_warn("rail %s: SO_SNDBUF=%d: %m", rail->log_name, v);
    }
    if (rail->cfg.rcvbuf > 0) {
        v = rail->cfg.rcvbuf > INT_MAX ? INT_MAX : (int)rail->cfg.rcvbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0)
            mdr_warn("rail %s: SO_RCVBUF=%d: %m", rail->log_name, v);
    }
}

/* Before writing puts: do puts flow both ways on this connection (the
 * peer's put frames arrived within MDR_TCP_DUPLEX_HOLD)?  Then our replies
 * to them (CTS, FIN, PUT_ACK) must not wait behind our own bulk data: puts
 * are cut into frames (mdr_tcp_put_layout) and the socket gets
 * TCP_NOTSENT_LOWAT so the kernel holds little unsent data.  A one-way
 * stream keeps whole puts (fewer, larger reads at the receiver: 20 times
 * fewer readv on loopback than 64 KiB frames) and the kernel's deep queue,
 * which keeps the link busy while the process is not running.  Sets
 * conn->duplex; costs nothing while the peer sends no puts. */
static void mdr_tcp_conn_duplex(mdr_tcp_conn_t *conn)
{
    mdr_rail_t *rail = conn->rail;
    double now;
    int v;

    if (conn->rx_put_frames == conn->rx_put_seen && !conn->duplex)
        return;
    now = mdr_time_sec();
    if (conn->rx_put_frames != conn->rx_put_seen) {
        conn->rx_put_seen = conn->rx_put_frames;
        conn->duplex_until = now + MDR_TCP_DUPLEX_HOLD;
    }
    if ((now < conn->duplex_until) == conn->duplex)
        return;
    conn->duplex = !conn->duplex;
    mdr_debug("rail %s: connection to %s: puts flow %s", rail->log_name, conn->peer_str,
              conn->duplex ? "both ways" : "one way again");
    if (rail->cfg.notsent_lowat == 0 || conn->lowat_failed)
        return;
    v = !conn->duplex                   ? 0
        : rail->cfg.notsent_lowat > INT_MAX ? INT_MAX
                                            : (int)rail->cfg.notsent_lowat;
    if (setsockopt(conn->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v)) != 0) {
        mdr_warn("rail %s: TCP_NOTSENT_LOWAT=%d: %m", rail->log_name, v);
        conn->lowat_failed = 1;
    }
}

madrail_status_t mdr_tcp_conn_new(mdr_rail_t *rail, int fd, int outgoing, mdr_tcp_conn_t **conn_p)
{
    mdr_tcp_conn_t *conn;
    struct epoll_event ev;

    conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return MADRAIL_ERR_NOMEM;
    /* an incoming connection gets room for a handshake only, until it
     * proved the key (mdr_tcp_conn_grow) */
    conn->part_cap = MDR_TCP_PART_HS;
    if (outgoing) {
        conn->part_cap = MDR_TCP_HDR_LEN + rail->slot_size + 8;
        if (conn->part_cap < MDR_TCP_PUT_HDR_LEN)
            conn->part_cap = MDR_TCP_PUT_HDR_LEN;
    }
    conn->part = malloc(conn->part_cap);
    if (conn->part == NULL)
        goto err_free;
    conn->rail = rail;
    conn->fd = fd;
    conn->outgoing = outgoing;
    conn->state = outgoing ? MDR_TCP_CONN_CONNECTING : MDR_TCP_CONN_WAIT_HELLO;
    conn->ev_mask = EPOLLIN | (outgoing ? EPOLLOUT : 0);
    memset(&ev, 0, sizeof(ev));
    ev.events = conn->ev_mask;
    ev.data.ptr = conn;
    if (epoll_ctl(rail->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        mdr_error("rail %s: epoll_ctl(ADD): %m", rail->log_name);
        goto err_part;
    }
    (*mdr_tcp_set_nconns(rail))++;
    mdr_list_push_tail(&rail->conns, &conn->link);
    *conn_p = conn;
    return MADRAIL_OK;

err_part:
    free(conn->part);
err_free:
    free(conn);
    return MADRAIL_ERR_NOMEM;
}

void mdr_tcp_conn_set_events(mdr_tcp_conn_t *conn, uint32_t events)
{
    struct epoll_event ev;

    if (conn->state == MDR_TCP_CONN_CLOSED || events == conn->ev_mask)
        return;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.ptr = conn;
    if (epoll_ctl(conn->rail->epfd, EPOLL_CTL_MOD, conn->fd, &ev) != 0)
        mdr_warn("rail %s: epoll_ctl(MOD): %m", conn->rail->log_name);
    else
        conn->ev_mask = events;
}

madrail_status_t mdr_tcp_conn_grow(mdr_tcp_conn_t *conn)
{
    size_t cap = MDR_TCP_HDR_LEN + conn->rail->slot_size + 8;
    uint8_t *p;

    if (cap < MDR_TCP_PUT_HDR_LEN)
        cap = MDR_TCP_PUT_HDR_LEN;
    if (conn->part_cap >= cap)
        return MADRAIL_OK;
    p = realloc(conn->part, cap);
    if (p == NULL)
        return MADRAIL_ERR_NOMEM;
    conn->part = p;
    conn->part_cap = cap;
    return MADRAIL_OK;
}

void mdr_tcp_conn_refuse(mdr_tcp_conn_t *conn, const char *fmt, ...)
{
    mdr_rail_t *rail = conn->rail;
    char why[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    mdr_drv_refusal(&rail->refusals, rail->log_name,
                    conn->peer_ip[0] != '\0' ? conn->peer_ip : conn->peer_str, "%s", why);
    mdr_tcp_conn_close(conn);
}

void mdr_tcp_conn_free(mdr_tcp_conn_t *conn)
{
    mdr_auth_wipe(conn->hs_session, sizeof(conn->hs_session));
    free(conn->part);
    free(conn);
}

/* Close the socket; the struct lives on (CLOSED) until progress() ends, so
 * events already fetched for it are ignored safely. */
void mdr_tcp_conn_close(mdr_tcp_conn_t *conn)
{
    mdr_rail_t *rail = conn->rail;

    if (conn->state == MDR_TCP_CONN_CLOSED)
        return;
    if (conn->state == MDR_TCP_CONN_WAIT_HELLO && rail->nwait_hello > 0)
        rail->nwait_hello--;
    epoll_ctl(rail->epfd, EPOLL_CTL_DEL, conn->fd, NULL);
    (*mdr_tcp_set_nconns(rail))--;
    close(conn->fd);
    conn->fd = -1;
    conn->state = MDR_TCP_CONN_CLOSED;
    if (conn->put_mh != NULL) {
        mdr_tcp_mem_unref(conn->put_mh);
        conn->put_mh = NULL;
    }
    if (conn->ep != NULL && conn->ep->conn == conn)
        conn->ep->conn = NULL;
    conn->ep = NULL;
    mdr_list_del(&conn->link);
    if (rail->base.in_progress)
        mdr_list_push_tail(&rail->zombie_conns, &conn->link);
    else
        mdr_tcp_conn_free(conn);
}

size_t mdr_tcp_hs_frame(uint8_t *frame, int type, uint16_t status, uint64_t uuid,
                        uint64_t target, const void *data, size_t len)
{
    mdr_tcp_hdr_t h;
    mdr_tcp_hello_t b;

    memset(&h, 0, sizeof(h));
    memset(&b, 0, sizeof(b));
    h.type = (uint8_t)type;
    h.len = (uint32_t)(MDR_TCP_HS_BASE + len); /* every body length is a multiple of 8 */
    b.magic = MDR_TCP_MAGIC;
    b.version = MDR_TCP_VERSION;
    b.status = status;
    b.uuid = uuid;
    b.target = target;
    if (len > 0)
        memcpy(b.data, data, len);
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &b, h.len);
    return sizeof(h) + h.len;
}

void mdr_tcp_hs_fill(mdr_tcp_conn_t *conn, int type, uint16_t status, uint64_t uuid,
                     uint64_t target, const void *data, size_t len)
{
    conn->hs_len = mdr_tcp_hs_frame(conn->hs_out, type, status, uuid, target, data, len);
    conn->hs_off = 0;
}

/* Write what the socket takes of iov (0 when it takes nothing now).  One
 * segment, or a few small ones gathered into one buffer, go with send():
 * sendmsg first imports a message header and an iovec array, some 40-50 ns
 * more per call here, on the path of every small message (recv against
 * readv likewise: mdr_tcp_conn_read_frames). */
#define MDR_TCP_GATHER_MAX 256
static ssize_t mdr_tcp_writev(int fd, struct iovec *iov, int iovcnt)
{
    uint8_t gather[MDR_TCP_GATHER_MAX];
    const void *one = NULL;
    size_t len = 0;
    struct msghdr msg;
    ssize_t n;
    int i;

    if (iovcnt == 1) {
        one = iov[0].iov_base;
        len = iov[0].iov_len;
    } else {
        for (i = 0; i < iovcnt && len <= sizeof(gather); i++)
            len += iov[i].iov_len;
        if (len <= sizeof(gather)) {
            len = 0;
            for (i = 0; i < iovcnt; i++) {
                if (iov[i].iov_len > 0)
                    memcpy(gather + len, iov[i].iov_base, iov[i].iov_len);
                len += iov[i].iov_len;
            }
            one = gather;
        }
    }
    if (one != NULL) {
        do {
            n = send(fd, one, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
    } else {
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)iovcnt;
        do {
            n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return n;
}

/* Write the pending handshake frame; 1 = all written, 0 = partly, -1 = error. */
int mdr_tcp_conn_send_hs(mdr_tcp_conn_t *conn)
{
    struct iovec iov;
    ssize_t n;

    if (conn->hs_off >= conn->hs_len)
        return 1;
    iov.iov_base = conn->hs_out + conn->hs_off;
    iov.iov_len = conn->hs_len - conn->hs_off;
    n = mdr_tcp_writev(conn->fd, &iov, 1);
    if (n < 0)
        return -1;
    conn->hs_off += (size_t)n;
    return conn->hs_off >= conn->hs_len;
}

/* ---------------- endpoints ---------------- */

madrail_status_t mdr_tcp_ep_alloc(mdr_rail_t *rail, uint64_t uuid, void *cookie, mdr_ep_t **ep_p)
{
    mdr_ep_t *ep;
    madrail_status_t st;

    ep = calloc(1, sizeof(*ep));
    if (ep == NULL)
        return MADRAIL_ERR_NOMEM;
    ep->rail = rail;
    mdr_list_init(&ep->ctrlq);
    mdr_list_init(&ep->putq);
    mdr_list_init(&ep->acks);
    mdr_list_init(&ep->hs_link);
    mdr_list_init(&ep->flush_link);
    st = mdr_rail_ep_init(&rail->base, &ep->base, uuid, cookie, 1);
    if (st != MADRAIL_OK || !ep->base.mapped) {
        if (st == MADRAIL_OK) {
            mdr_list_del(&ep->base.link);
            st = MADRAIL_ERR_INVALID; /* the caller checked: cannot be */
        }
        free(ep);
        return st;
    }
    *ep_p = ep;
    return MADRAIL_OK;
}

void mdr_tcp_ep_hs_list(mdr_ep_t *ep, int on)
{
    if (on && !ep->in_hs_list) {
        mdr_list_push_tail(&ep->rail->hs_eps, &ep->hs_link);
        ep->in_hs_list = 1;
    } else if (!on && ep->in_hs_list) {
        mdr_list_del(&ep->hs_link);
        ep->in_hs_list = 0;
    }
}

void mdr_tcp_ep_attach(mdr_ep_t *ep, mdr_tcp_conn_t *conn)
{
    ep->conn = conn;
    conn->ep = ep;
}

static void mdr_tcp_sitem_free(mdr_ep_t *ep, mdr_tcp_sitem_t *it)
{
    if (!it->is_put)
        ep->qcopied -= it->total;
    free(it);
}

/* Free every queued item (no completion is reported). */
static void mdr_tcp_ep_drop_queue(mdr_ep_t *ep)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&ep->ctrlq)) != NULL)
        mdr_tcp_sitem_free(ep, mdr_container_of(l, mdr_tcp_sitem_t, link));
    while ((l = mdr_list_pop_head(&ep->acks)) != NULL)
        mdr_list_push_tail(&ep->putq, l);
    while ((l = mdr_list_pop_head(&ep->putq)) != NULL) {
        mdr_tcp_sitem_t *it = mdr_container_of(l, mdr_tcp_sitem_t, link);
        if (it->is_put && it->comp != NULL && ep->puts_pending > 0)
            ep->puts_pending--;
        mdr_tcp_sitem_free(ep, it);
    }
    ep->backlog = 0;
}

static void mdr_tcp_ep_update_events(mdr_ep_t *ep)
{
    mdr_tcp_conn_t *conn = ep->conn;
    uint32_t ev = EPOLLIN;

    if (conn == NULL || conn->state == MDR_TCP_CONN_CLOSED)
        return;
    if (conn->state == MDR_TCP_CONN_CONNECTING || conn->hs_off < conn->hs_len ||
        (ep->state == MDR_TCP_EP_OPEN &&
         (!mdr_list_empty(&ep->ctrlq) || !mdr_list_empty(&ep->putq))))
        ev |= EPOLLOUT;
    mdr_tcp_conn_set_events(conn, ev);
}

void mdr_tcp_ep_fail(mdr_ep_t *ep, madrail_status_t status, const char *fmt, ...)
{
    mdr_rail_t *rail = ep->rail;
    mdr_list_t *l, *tmp;
    char peer[40] = "";
    va_list ap;

    if (ep->base.destroyed || ep->state == MDR_TCP_EP_FAILED)
        return;
    /* Data frames are written only once the handshake opened the ep: an ep
     * that never got there sent nothing but the handshake. */
    if (status == MADRAIL_ERR_RAIL_DOWN && !ep->was_open)
        status = MADRAIL_ERR_RAIL_CONNECT;
    va_start(ap, fmt);
    mdr_rail_ep_fail_set(&ep->base, status, fmt, ap);
    va_end(ap);
    if (ep->conn != NULL)
        snprintf(peer, sizeof(peer), " (%s)", ep->conn->peer_str);
    if (status == MADRAIL_ERR_RAIL_PROTO)
        mdr_error("rail %s peer %016llx%s: %s; closing the connection", rail->log_name,
                  (unsigned long long)ep->base.uuid, peer, ep->base.fail_reason);
    else
        mdr_info("rail %s peer %016llx%s: %s", rail->log_name, (unsigned long long)ep->base.uuid,
                 peer, ep->base.fail_reason);
    ep->state = MDR_TCP_EP_FAILED;
    mdr_tcp_ep_hs_list(ep, 0);
    if (ep->conn != NULL)
        mdr_tcp_conn_close(ep->conn);
    /* Puts waiting for their acknowledgement were issued first: they go in
     * front.  Queued control data is dropped; puts stay to be reported with
     * an error. */
    while ((l = mdr_list_pop_head(&ep->ctrlq)) != NULL)
        mdr_tcp_sitem_free(ep, mdr_container_of(l, mdr_tcp_sitem_t, link));
    while (!mdr_list_empty(&ep->acks)) {
        l = ep->acks.prev;
        mdr_list_del(l);
        mdr_list_push_head(&ep->putq, l);
    }
    mdr_list_for_each_safe(l, tmp, &ep->putq) {
        mdr_tcp_sitem_t *it = mdr_container_of(l, mdr_tcp_sitem_t, link);
        if (it->comp == NULL) {
            mdr_list_del(&it->link);
            mdr_tcp_sitem_free(ep, it);
        }
    }
    ep->lost += ep->backlog;
    ep->backlog = 0;
}

/* After ep_failed: the failed ep's puts complete with its error. */
static int mdr_tcp_ep_report_puts(mdr_rail_ep_t *base)
{
    mdr_ep_t *ep = mdr_container_of(base, mdr_ep_t, base);
    mdr_list_t *l;

    while (!ep->base.destroyed && (l = mdr_list_pop_head(&ep->putq)) != NULL) {
        mdr_tcp_sitem_t *it = mdr_container_of(l, mdr_tcp_sitem_t, link);
        mdr_completion_t *comp = it->comp;
        if (comp != NULL && ep->puts_pending > 0)
            ep->puts_pending--;
        mdr_tcp_sitem_free(ep, it);
        if (comp != NULL)
            comp->cb(comp, ep->base.fail_status);
    }
    return 0;
}

/* From progress(): report failures, then the failed eps' puts. */
void mdr_tcp_ep_report_failures(mdr_rail_t *rail)
{
    (void)mdr_rail_base_report(&rail->base, NULL, mdr_tcp_ep_report_puts);
}

void mdr_tcp_ep_free(mdr_rail_ep_t *base)
{
    free(mdr_container_of(base, mdr_ep_t, base));
}

void mdr_tcp_ep_destroy(mdr_ep_t *ep)
{
    if (ep == NULL || ep->base.destroyed)
        return;
    mdr_tcp_ep_hs_list(ep, 0);
    if (ep->in_flushq) {
        mdr_list_del(&ep->flush_link);
        ep->in_flushq = 0;
    }
    if (ep->conn != NULL)
        mdr_tcp_conn_close(ep->conn);
    mdr_tcp_ep_drop_queue(ep);
    ep->puts_pending = 0;
    mdr_rail_ep_retire(&ep->base);
}

size_t mdr_tcp_ep_backlog(mdr_ep_t *ep)
{
    return ep != NULL ? ep->backlog : 0;
}

/* What of the messages handed to ep has not left this process: its
 * backlog, and once it failed what its queue held then.  The core hears of
 * the failure later (the failure upcall); until then a send whose bytes
 * sat in the dropped queue must not look as if they had left (found by
 * it_sendfail dies under load: a rail reset by the dying peer, and the
 * sends queued on it completed with success before the core took the
 * rail down). */
size_t mdr_tcp_ep_unsent(mdr_ep_t *ep)
{
    return ep != NULL ? ep->backlog + ep->lost : 0;
}

int mdr_tcp_ep_idle(mdr_ep_t *ep)
{
    if (ep == NULL)
        return 1;
    return mdr_list_empty(&ep->ctrlq) && mdr_list_empty(&ep->putq) &&
           mdr_list_empty(&ep->acks) && ep->puts_pending == 0;
}

/* The kernel knows whether the peer's end acknowledges what we wrote:
 * SIOCOUTQ counts the bytes in the socket not yet acknowledged (sent or
 * not: a drop rule on the output path makes the kernel keep them unsent,
 * so tcpi_unacked alone stays 0 in a black hole -- measured on the
 * namespace cluster), and tcpi_last_ack_recv says when an ACK last came.
 * A black hole shows as bytes waiting with no ACK however long TCP
 * retries; a busy slow link keeps ACKing, and a peer whose process does
 * not read (full window) ACKs our window probes (with nothing in flight,
 * bytes wait silently only while tcpi_probes counts unanswered probes:
 * backed-off probes may be seconds apart, so their ACK times are no
 * measure; with the window open nothing holds them but a drop rule,
 * so they count as waiting at once).  wait_since is when
 * waiting bytes were first seen, so an ACK-less idle stretch before them
 * does not count; the kernel's timer state caps it (mdr_tcp_wait_max_ns:
 * the core may not have looked since an earlier wait ended). */
int mdr_tcp_ep_link_quiet(mdr_ep_t *ep, uint64_t *quiet_ns_p)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    uint64_t now, since, last_ack, wait_max;
    int outq = 0;

    *quiet_ns_p = 0;
    if (ep == NULL || ep->conn == NULL || ep->state != MDR_TCP_EP_OPEN)
        return 0; /* connecting: the handshake deadline covers it */
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(ep->conn->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return -1;
    if (ioctl(ep->conn->fd, SIOCOUTQ, &outq) != 0)
        outq = 0;
    now = mdr_time_ns();
    if ((ti.tcpi_unacked == 0 && outq <= 0) ||
        (ti.tcpi_unacked == 0 && ti.tcpi_probes == 0 && mdr_tcp_window_open(ep->conn->fd) <= 0)) {
        /* nothing waits, or only for window: the peer answers our probes.
         * Bytes kept unsent with nothing in flight and the window open
         * are a drop on our output path: they wait from now, not from
         * TCP's first probe (an RTO later) */
        ep->link_wait_ns = 0;
        return 0;
    }
    if (ep->link_wait_ns == 0)
        ep->link_wait_ns = now;
    since = now - ep->link_wait_ns;
    wait_max = mdr_tcp_wait_max_ns(ti.tcpi_rto, ti.tcpi_backoff, ti.tcpi_probes, ti.tcpi_unacked);
    if (since > wait_max) /* a clock from a wait that ended unseen (tcp_path.h) */
        since = wait_max;
    last_ack = (uint64_t)ti.tcpi_last_ack_recv * 1000000ull;
    *quiet_ns_p = since < last_ack ? since : last_ack;
    return 0;
}

/* The socket's retransmission timeout without back-off (rail.h). */
int mdr_tcp_ep_link_rto(mdr_ep_t *ep, uint64_t *rto_ns_p)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    *rto_ns_p = 0;
    if (ep == NULL || ep->conn == NULL || ep->state != MDR_TCP_EP_OPEN)
        return -1;
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(ep->conn->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_rto == 0)
        return -1;
    *rto_ns_p = (uint64_t)(ti.tcpi_backoff < 16 ? ti.tcpi_rto >> ti.tcpi_backoff : ti.tcpi_rto) *
                1000ull;
    return 0;
}

/* ---------------- sending ---------------- */

/* Headers of the put frames one write carries (they live until it returns). */
typedef struct mdr_tcp_hbuf {
    uint8_t h[MDR_TCP_MAX_IOV][MDR_TCP_PUT_HDR_LEN];
    int n;
} mdr_tcp_hbuf_t;

/* Frame k of put item it: its first byte in the item, its length. */
static size_t mdr_tcp_frame_start(const mdr_tcp_sitem_t *it, uint32_t k)
{
    return (size_t)k * (MDR_TCP_PUT_HDR_LEN + it->frame);
}

static uint32_t mdr_tcp_frame_of(const mdr_tcp_sitem_t *it, size_t off)
{
    size_t k = off / (MDR_TCP_PUT_HDR_LEN + it->frame);
    return k >= it->frames ? it->frames - 1 : (uint32_t)k;
}

static size_t mdr_tcp_frame_payload(const mdr_tcp_sitem_t *it, uint32_t k)
{
    size_t start = (size_t)k * it->frame;
    return it->dlen - start < it->frame ? it->dlen - start : it->frame;
}

/* True when the put has a frame partly written: nothing may go between. */
static int mdr_tcp_put_mid_frame(const mdr_tcp_sitem_t *it)
{
    return it->off != mdr_tcp_frame_start(it, mdr_tcp_frame_of(it, it->off));
}

static void mdr_tcp_put_hdr(const mdr_tcp_sitem_t *it, uint32_t k, uint8_t *out)
{
    mdr_tcp_hdr_t hdr;
    mdr_tcp_put_ext_t ext;

    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_TCP_F_PUT;
    hdr.flags = k > 0 ? MDR_TCP_PUT_F_CONT : 0;
    hdr.len = sizeof(ext);
    ext.raddr = it->raddr + (uint64_t)k * it->frame;
    ext.rkey = it->rkey;
    ext.count = mdr_tcp_frame_payload(it, k);
    memcpy(out, &hdr, sizeof(hdr));
    memcpy(out + sizeof(hdr), &ext, sizeof(ext));
}

/* Cut a put not started yet into frames: of MADRAIL_TCP_PUT_FRAME payload
 * bytes (a multiple of 8, so only the last one is padded) while puts flow
 * both ways on the connection, else one frame.  Decided when the put's
 * first byte goes out, so puts queued before the peer's puts began are
 * cut too.  queued: it is counted in ep->backlog. */
static void mdr_tcp_put_layout(mdr_ep_t *ep, mdr_tcp_sitem_t *it, int queued)
{
    size_t frame = 0, old = it->total;

    if (ep->conn != NULL && ep->conn->duplex) {
        frame = ep->rail->cfg.put_frame & ~(size_t)7;
        if (frame > 0 && frame < MDR_TCP_PUT_FRAME_MIN)
            frame = MDR_TCP_PUT_FRAME_MIN;
    }
    if (frame == 0 || frame >= it->dlen) {
        it->frame = it->dlen;
        it->frames = 1;
    } else {
        it->frame = frame;
        it->frames = (uint32_t)((it->dlen + frame - 1) / frame);
    }
    it->total = (size_t)it->frames * MDR_TCP_PUT_HDR_LEN + it->dlen + it->pad;
    it->acks_left = it->frames;
    if (queued)
        ep->backlog = ep->backlog - old + it->total;
}

/* Segments of put item it from byte off: whole frames (only the current
 * one if one_frame) while iov has room for a frame, hb has room for a
 * header and *want_p < limit.  Returns the iov entries used. */
static int mdr_tcp_put_iov(const mdr_tcp_sitem_t *it, size_t off, int one_frame,
                           struct iovec *iov, int max, mdr_tcp_hbuf_t *hb, size_t *want_p,
                           size_t limit)
{
    uint32_t k = mdr_tcp_frame_of(it, off);
    int n = 0;

    while (off < it->total && n + 3 <= max && *want_p < limit) {
        size_t pos = off - mdr_tcp_frame_start(it, k);
        size_t plen = mdr_tcp_frame_payload(it, k);
        size_t pad = k + 1 == it->frames ? it->pad : 0;

        if (pos < MDR_TCP_PUT_HDR_LEN) {
            if (hb->n >= MDR_TCP_MAX_IOV)
                break;
            mdr_tcp_put_hdr(it, k, hb->h[hb->n]);
            iov[n].iov_base = hb->h[hb->n] + pos;
            iov[n++].iov_len = MDR_TCP_PUT_HDR_LEN - pos;
            hb->n++;
            pos = MDR_TCP_PUT_HDR_LEN;
        }
        if (pos < MDR_TCP_PUT_HDR_LEN + plen) {
            size_t p = pos - MDR_TCP_PUT_HDR_LEN;
            iov[n].iov_base = (void *)(it->data + (size_t)k * it->frame + p);
            iov[n++].iov_len = plen - p;
            pos = MDR_TCP_PUT_HDR_LEN + plen;
        }
        if (pad > 0) {
            size_t p = pos - MDR_TCP_PUT_HDR_LEN - plen;
            iov[n].iov_base = (void *)(mdr_tcp_zeros + p);
            iov[n++].iov_len = pad - p;
        }
        *want_p += MDR_TCP_PUT_HDR_LEN + plen + pad - (off - mdr_tcp_frame_start(it, k));
        off = mdr_tcp_frame_start(it, k) + MDR_TCP_PUT_HDR_LEN + plen + pad;
        k++;
        if (one_frame)
            break;
    }
    return n;
}

/* Queue bytes [skip, end) of the segments (one control frame, or the rest
 * of one) as copied data at the tail of the control queue. */
static madrail_status_t mdr_tcp_q_copy(mdr_ep_t *ep, const struct iovec *seg, int nseg,
                                       size_t skip)
{
    mdr_tcp_sitem_t *it = NULL;
    size_t need = 0, cap;
    int i;

    for (i = 0; i < nseg; i++)
        need += seg[i].iov_len;
    need -= skip;
    if (!mdr_list_empty(&ep->ctrlq)) {
        it = mdr_container_of(ep->ctrlq.prev, mdr_tcp_sitem_t, link);
        if (it->cap - it->total < need)
            it = NULL;
    }
    if (it == NULL) {
        cap = need > MDR_TCP_QCHUNK ? need : MDR_TCP_QCHUNK;
        it = malloc(sizeof(*it) + cap);
        if (it == NULL)
            return MADRAIL_ERR_NOMEM;
        memset(it, 0, sizeof(*it));
        it->ep = ep;
        it->buf = (uint8_t *)(it + 1);
        it->cap = cap;
        mdr_list_push_tail(&ep->ctrlq, &it->link);
    }
    for (i = 0; i < nseg; i++) {
        const uint8_t *p = seg[i].iov_base;
        size_t l = seg[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        memcpy(it->buf + it->total, p + skip, l - skip);
        it->total += l - skip;
        skip = 0;
    }
    ep->qcopied += need;
    ep->backlog += need;
    return MADRAIL_OK;
}

static int mdr_tcp_ep_is_open(const mdr_ep_t *ep)
{
    return ep->state == MDR_TCP_EP_OPEN && ep->conn != NULL &&
           ep->conn->state == MDR_TCP_CONN_OPEN && ep->conn->hs_off >= ep->conn->hs_len;
}

/* A put may go to the socket now: nothing is queued. */
static int mdr_tcp_ep_can_write(const mdr_ep_t *ep)
{
    return mdr_tcp_ep_is_open(ep) && mdr_list_empty(&ep->ctrlq) && mdr_list_empty(&ep->putq);
}

/* A control frame may go to the socket now, ahead of queued puts: no
 * control byte waits and no put frame is half written. */
static int mdr_tcp_ep_can_write_ctrl(const mdr_ep_t *ep)
{
    if (!mdr_tcp_ep_is_open(ep) || !mdr_list_empty(&ep->ctrlq))
        return 0;
    return mdr_list_empty(&ep->putq) ||
           !mdr_tcp_put_mid_frame(mdr_container_of(ep->putq.next, mdr_tcp_sitem_t, link));
}

/* A put item whose last byte was written: wait for the PUT_ACKs, report,
 * or free. */
static void mdr_tcp_put_written(mdr_ep_t *ep, mdr_tcp_sitem_t *it)
{
    mdr_list_del(&it->link);
    if (ep->rail->cfg.put_ack) {
        mdr_list_push_tail(&ep->acks, &it->link); /* completes on PUT_ACK */
    } else if (it->comp != NULL) {
        mdr_list_push_tail(&ep->rail->doneq, &it->link);
    } else {
        mdr_tcp_sitem_free(ep, it);
    }
}

/* Write queued data (from progress); written puts go to rail->doneq.  Each
 * write carries, in this order: the rest of a put frame half written, the
 * whole control queue, then put frames. */
static void mdr_tcp_ep_flush(mdr_ep_t *ep)
{
    mdr_tcp_conn_t *conn = ep->conn;
    struct iovec iov[MDR_TCP_MAX_IOV];
    mdr_tcp_hbuf_t hb;
    mdr_tcp_sitem_t *head, *it;
    size_t written = 0, want, rest, n, take, hoff;
    mdr_list_t *l;
    ssize_t rc;
    int cnt, r, all_ctrl;

    if (conn == NULL || conn->state == MDR_TCP_CONN_CLOSED ||
        conn->state == MDR_TCP_CONN_CONNECTING)
        return;
    r = mdr_tcp_conn_send_hs(conn);
    if (r < 0) {
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "handshake send failed: %s", strerror(errno));
        return;
    }
    if (r == 0 || ep->state != MDR_TCP_EP_OPEN) {
        mdr_tcp_ep_update_events(ep);
        return;
    }
    if (!mdr_list_empty(&ep->putq))
        mdr_tcp_conn_duplex(conn);
    while ((!mdr_list_empty(&ep->ctrlq) || !mdr_list_empty(&ep->putq)) &&
           written < MDR_TCP_TX_BUDGET) {
        cnt = 0;
        want = 0;
        hb.n = 0;
        head = mdr_list_empty(&ep->putq) ? NULL
                                          : mdr_container_of(ep->putq.next, mdr_tcp_sitem_t, link);
        hoff = head != NULL ? head->off : 0;
        if (head != NULL && mdr_tcp_put_mid_frame(head)) {
            cnt = mdr_tcp_put_iov(head, head->off, 1, iov, MDR_TCP_MAX_IOV, &hb, &want,
                                  MDR_TCP_TX_BUDGET);
            hoff += want;
        }
        rest = want;
        all_ctrl = 1;
        mdr_list_for_each(l, &ep->ctrlq) {
            it = mdr_container_of(l, mdr_tcp_sitem_t, link);
            if (cnt >= MDR_TCP_MAX_IOV) {
                all_ctrl = 0;
                break;
            }
            iov[cnt].iov_base = it->buf + it->off;
            iov[cnt++].iov_len = it->total - it->off;
            want += it->total - it->off;
        }
        if (all_ctrl) {
            mdr_list_for_each(l, &ep->putq) {
                it = mdr_container_of(l, mdr_tcp_sitem_t, link);
                if (it == head && hoff >= it->total)
                    continue;
                if (it->off == 0 && (it != head || hoff == 0))
                    mdr_tcp_put_layout(ep, it, 1);
                cnt += mdr_tcp_put_iov(it, it == head ? hoff : it->off, 0, iov + cnt,
                                       MDR_TCP_MAX_IOV - cnt, &hb, &want, MDR_TCP_TX_BUDGET);
                if (cnt + 3 > MDR_TCP_MAX_IOV || want >= MDR_TCP_TX_BUDGET ||
                    hb.n >= MDR_TCP_MAX_IOV)
                    break;
            }
        }
        if (cnt == 0)
            break;
        rc = mdr_tcp_writev(conn->fd, iov, cnt);
        if (rc < 0) {
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "send failed: %s", strerror(errno));
            return;
        }
        n = (size_t)rc;
        written += n;
        ep->backlog -= n < ep->backlog ? n : ep->backlog;
        /* account in the order written */
        if (rest > 0) {
            take = n < rest ? n : rest;
            head->off += take;
            n -= take;
            if (head->off == head->total)
                mdr_tcp_put_written(ep, head);
        }
        while (n > 0 && !mdr_list_empty(&ep->ctrlq)) {
            it = mdr_container_of(ep->ctrlq.next, mdr_tcp_sitem_t, link);
            take = it->total - it->off;
            if (n < take) {
                it->off += n;
                n = 0;
                break;
            }
            n -= take;
            mdr_list_del(&it->link);
            mdr_tcp_sitem_free(ep, it);
        }
        while (n > 0) {
            it = mdr_container_of(ep->putq.next, mdr_tcp_sitem_t, link);
            take = it->total - it->off;
            if (n < take) {
                it->off += n;
                break;
            }
            n -= take;
            it->off = it->total;
            mdr_tcp_put_written(ep, it);
        }
        if ((size_t)rc < want)
            break; /* socket full */
    }
    mdr_tcp_ep_update_events(ep);
}

/* From progress(): report written puts. */
int mdr_tcp_report_done(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int n = 0;

    while ((l = mdr_list_pop_head(&rail->doneq)) != NULL) {
        mdr_tcp_sitem_t *it = mdr_container_of(l, mdr_tcp_sitem_t, link);
        mdr_ep_t *ep = it->ep;
        mdr_completion_t *comp = it->comp;
        free(it);
        if (ep->base.destroyed)
            continue;
        if (ep->puts_pending > 0)
            ep->puts_pending--;
        comp->cb(comp, MADRAIL_OK);
        n++;
    }
    return n;
}

void mdr_tcp_ep_open(mdr_ep_t *ep)
{
    ep->state = MDR_TCP_EP_OPEN;
    ep->was_open = 1;
    ep->conn->state = MDR_TCP_CONN_OPEN;
    mdr_tcp_ep_hs_list(ep, 0);
    mdr_tcp_ep_flush(ep);
}

madrail_status_t mdr_tcp_ctrl_send(mdr_ep_t *ep, const struct iovec *iov, int iovcnt)
{
    struct iovec seg[MDR_TCP_MAX_IOV];
    mdr_tcp_hdr_t hdr;
    size_t len = 0, pad;
    ssize_t n = 0;
    madrail_status_t st;
    int i, nseg;

    if (ep == NULL || ep->base.destroyed || iovcnt < 0 || (iovcnt > 0 && iov == NULL))
        return MADRAIL_ERR_INVALID;
    if (iovcnt > MDR_TCP_MAX_IOV - 2) {
        mdr_error("rail %s: ctrl_send with %d iovecs (max %d)", ep->rail->log_name, iovcnt,
                  MDR_TCP_MAX_IOV - 2);
        return MADRAIL_ERR_INVALID;
    }
    st = mdr_drv_ctrl_len(iov, iovcnt, ep->rail->slot_size, ep->rail->log_name, &len);
    if (st != MADRAIL_OK)
        return st;
    if (ep->state == MDR_TCP_EP_IDLE)
        mdr_tcp_ep_start(ep);
    if (ep->state == MDR_TCP_EP_FAILED)
        return MADRAIL_ERR_RAIL_DOWN;
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_TCP_F_CTRL;
    hdr.len = (uint32_t)len;
    pad = MDR_TCP_PAD8(len);
    seg[0].iov_base = &hdr;
    seg[0].iov_len = sizeof(hdr);
    nseg = 1;
    for (i = 0; i < iovcnt; i++)
        if (iov[i].iov_len > 0)
            seg[nseg++] = iov[i];
    if (pad > 0) {
        seg[nseg].iov_base = (void *)mdr_tcp_zeros;
        seg[nseg++].iov_len = pad;
    }

    /* written now: a frame too big to coalesce, or the first small one
     * since the last progress (MADRAIL_TCP_DIRECT_FIRST: a lone message,
     * as in a ping-pong, would otherwise wait for the next progress call;
     * a burst's later frames are still written together) */
    if (mdr_tcp_ep_can_write_ctrl(ep) &&
        (sizeof(hdr) + len + pad > ep->rail->cfg.coalesce ||
         (ep->rail->cfg.direct_first && ep->direct_pass != ep->rail->passes + 1))) {
        ep->direct_pass = ep->rail->passes + 1; /* +1: 0 never matches a fresh ep */
        n = mdr_tcp_writev(ep->conn->fd, seg, nseg);
        if (n < 0) { /* nothing sent; the failure is reported by the next progress() */
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "send failed: %s", strerror(errno));
            return MADRAIL_ERR_RAIL_DOWN;
        }
        if ((size_t)n == sizeof(hdr) + len + pad)
            return MADRAIL_OK;
    } else if (ep->qcopied + sizeof(hdr) + len + pad > MDR_TCP_QCAP) {
        return MADRAIL_ERR_NORESOURCE;
    }
    st = mdr_tcp_q_copy(ep, seg, nseg, (size_t)n);
    if (st != MADRAIL_OK) {
        if (n > 0) /* half a frame is on the wire: this connection is unusable */
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "out of memory queueing a message");
        return n > 0 ? MADRAIL_OK : MADRAIL_ERR_NORESOURCE;
    }
    if (n == 0 && mdr_tcp_ep_is_open(ep) && !ep->out_events) {
        /* coalesced: written with its neighbours by the next progress */
        if (ep->backlog >= MDR_TCP_COALESCE_FLUSH) {
            mdr_tcp_ep_flush(ep);
        } else if (!ep->in_flushq) {
            ep->in_flushq = 1;
            mdr_list_push_tail(&ep->rail->flushq, &ep->flush_link);
        }
        return MADRAIL_OK;
    }
    mdr_tcp_ep_update_events(ep);
    return MADRAIL_OK;
}

int mdr_tcp_flush_coalesced(mdr_rail_t *rail)
{
    mdr_list_t *l;
    int n = 0;
    while ((l = mdr_list_pop_head(&rail->flushq)) != NULL) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, flush_link);
        ep->in_flushq = 0;
        if (!ep->base.destroyed && ep->state != MDR_TCP_EP_FAILED)
            mdr_tcp_ep_flush(ep);
        n++;
    }
    return n;
}

madrail_status_t mdr_tcp_put(mdr_ep_t *ep, const void *local, size_t len, mdr_memh_t *lmemh,
                             uint64_t raddr, const void *rkey, size_t rkey_len,
                             mdr_completion_t *comp)
{
    mdr_tcp_sitem_t *it;
    struct iovec seg[MDR_TCP_MAX_IOV];
    mdr_tcp_hbuf_t hb;
    size_t want = 0;
    ssize_t n = 0;
    int nseg;

    (void)lmemh;
    if (ep == NULL || ep->base.destroyed || rkey == NULL || (local == NULL && len > 0))
        return MADRAIL_ERR_INVALID;
    if (rkey_len != MDR_TCP_RKEY_LEN) {
        mdr_error("rail %s: put with a %zu-byte remote key (expected %d)", ep->rail->log_name,
                  rkey_len, MDR_TCP_RKEY_LEN);
        return MADRAIL_ERR_INVALID;
    }
    if (ep->state == MDR_TCP_EP_IDLE)
        mdr_tcp_ep_start(ep);
    if (ep->state == MDR_TCP_EP_FAILED)
        return MADRAIL_ERR_RAIL_DOWN;
    it = malloc(sizeof(*it));
    if (it == NULL)
        return MADRAIL_ERR_NORESOURCE;
    memset(it, 0, sizeof(*it));
    it->ep = ep;
    it->is_put = 1;
    it->data = local;
    it->dlen = len;
    it->pad = MDR_TCP_PAD8(len);
    it->raddr = raddr;
    memcpy(&it->rkey, rkey, sizeof(it->rkey));
    if (mdr_tcp_ep_can_write(ep))
        mdr_tcp_conn_duplex(ep->conn);
    mdr_tcp_put_layout(ep, it, 0);

    if (mdr_tcp_ep_can_write(ep)) {
        hb.n = 0;
        nseg = mdr_tcp_put_iov(it, 0, 0, seg, MDR_TCP_MAX_IOV, &hb, &want, (size_t)-1);
        n = mdr_tcp_writev(ep->conn->fd, seg, nseg);
        if (n < 0) {
            free(it);
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "send failed: %s", strerror(errno));
            return MADRAIL_ERR_RAIL_DOWN;
        }
        it->off = (size_t)n;
        if (it->off == it->total && !ep->rail->cfg.put_ack) {
            free(it);
            return MADRAIL_OK;
        }
    }
    it->comp = comp;
    if (comp != NULL)
        ep->puts_pending++;
    if (it->off == it->total) {
        mdr_list_push_tail(&ep->acks, &it->link); /* written: wait for PUT_ACK */
        return comp != NULL ? MADRAIL_INPROGRESS : MADRAIL_OK;
    }
    ep->backlog += it->total - it->off;
    mdr_list_push_tail(&ep->putq, &it->link);
    mdr_tcp_ep_update_events(ep);
    return comp != NULL ? MADRAIL_INPROGRESS : MADRAIL_OK;
}

/* ---------------- ep_create ---------------- */

/* Connections are lazy: ep_create only records the address; the first
 * ctrl_send or put connects (the core creates eps on first traffic anyway,
 * and a peer that never talks to us costs no socket). */
madrail_status_t mdr_tcp_ep_create(mdr_rail_t *rail, uint64_t remote_uuid, const void *addr,
                                   size_t len, void *ep_cookie, mdr_ep_t **ep_p)
{
    struct sockaddr_in sin;
    const uint8_t *a = addr;
    madrail_status_t st;
    uint32_t mark;
    mdr_ep_t *ep;

    if (rail == NULL || addr == NULL || ep_p == NULL)
        return MADRAIL_ERR_INVALID;
    if (len != MDR_TCP_ADDR_LEN) {
        mdr_error("rail %s peer %016llx: address of %zu bytes (expected %d)", rail->log_name,
                  (unsigned long long)remote_uuid, len, MDR_TCP_ADDR_LEN);
        return MADRAIL_ERR_INVALID;
    }
    memcpy(&mark, a, 4);
    if (mark != MDR_TCP_ADDR_MARK || a[10] != MDR_TCP_VERSION) {
        mdr_error("rail %s peer %016llx: address has a foreign byte order or version "
                  "(mark %08x version %u)", rail->log_name, (unsigned long long)remote_uuid,
                  mark, a[10]);
        return MADRAIL_ERR_INVALID;
    }
    if (mdr_rail_ep_lookup(&rail->base, remote_uuid) != NULL) {
        mdr_error("rail %s peer %016llx: ep_create while an endpoint to that peer exists",
                  rail->log_name, (unsigned long long)remote_uuid);
        return MADRAIL_ERR_INVALID;
    }
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    memcpy(&sin.sin_addr.s_addr, a + 4, 4);
    memcpy(&sin.sin_port, a + 8, 2);
    st = mdr_tcp_ep_alloc(rail, remote_uuid, ep_cookie, &ep);
    if (st != MADRAIL_OK)
        return st;
    ep->raddr = sin;
    ep->state = MDR_TCP_EP_IDLE;
    *ep_p = ep;
    return MADRAIL_OK;
}

/* Start the outgoing connection of an IDLE ep; failures are reported by
 * the next progress(). */
void mdr_tcp_ep_start(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    struct sockaddr_in bind_addr;
    mdr_tcp_conn_t *conn;
    char dest[32];
    int fd, rc;

    mdr_tcp_addr_str(&ep->raddr, dest, sizeof(dest));
    ep->state = MDR_TCP_EP_CONNECTING;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "socket: %s", strerror(errno));
        return;
    }
    mdr_tcp_sockopts(rail, fd);
    bind_addr = rail->local;
    bind_addr.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&bind_addr, sizeof(bind_addr)) != 0) {
        char src[32];
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "bind to %s: %s",
                        mdr_tcp_addr_str(&bind_addr, src, sizeof(src)), strerror(errno));
        close(fd);
        return;
    }
    rc = connect(fd, (struct sockaddr *)&ep->raddr, sizeof(ep->raddr));
    if (rc != 0 && errno != EINPROGRESS) {
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "connect to %s: %s", dest, strerror(errno));
        close(fd);
        return;
    }
    if (mdr_tcp_conn_new(rail, fd, 1, &conn) != MADRAIL_OK) {
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "out of memory connecting to %s", dest);
        close(fd);
        return;
    }
    snprintf(conn->peer_str, sizeof(conn->peer_str), "%s", dest);
    ep->deadline = mdr_time_sec() + rail->cfg.connect_timeout;
    mdr_tcp_ep_hs_list(ep, 1);
    mdr_tcp_ep_attach(ep, conn);
    /* HELLO: who we are, whom we expect, our nonce; the proofs follow the
     * acceptor's nonce (mdr_tcp_challenge_received) */
    mdr_auth_nonce(conn->nonce_i);
    mdr_tcp_hs_fill(conn, MDR_TCP_F_HELLO, 0, rail->uuid, ep->base.uuid, conn->nonce_i,
                    sizeof(conn->nonce_i));
    mdr_debug("rail %s peer %016llx: connecting to %s", rail->log_name,
              (unsigned long long)ep->base.uuid, dest);
    if (rc == 0) { /* connected at once (loopback) */
        conn->state = MDR_TCP_CONN_HS_SENT;
        mdr_tcp_ep_flush(ep);
    }
}

/* ---------------- receiving ---------------- */

static void mdr_tcp_conn_proto(mdr_tcp_conn_t *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mdr_tcp_conn_proto(mdr_tcp_conn_t *conn, const char *fmt, ...)
{
    char reason[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (conn->ep != NULL && conn->ep->conn == conn)
        mdr_tcp_ep_fail(conn->ep, MADRAIL_ERR_RAIL_PROTO, "%s", reason);
    else /* nothing proven yet: a stranger as far as we know */
        mdr_tcp_conn_refuse(conn, "%s", reason);
}

static void mdr_tcp_conn_lost(mdr_tcp_conn_t *conn, int err)
{
    const char *what = err ? strerror(err) : "connection closed by peer";

    if (conn->ep != NULL && conn->ep->conn == conn) {
        if (conn->state == MDR_TCP_CONN_OPEN)
            mdr_tcp_ep_fail(conn->ep, MADRAIL_ERR_RAIL_DOWN, "%s", what);
        else
            mdr_tcp_ep_fail(conn->ep, MADRAIL_ERR_RAIL_DOWN, "%s during the handshake", what);
    } else {
        mdr_debug("rail %s: connection from %s: %s", conn->rail->log_name, conn->peer_str, what);
        mdr_tcp_conn_close(conn);
    }
}

/* CHALLENGE on our outgoing connection (magic and version checked):
 * answer with PROOF, our proof of the job key over both nonces and the
 * continuity proofs of our earlier sessions with this peer on this rail,
 * and keep the proof the acceptor must answer with. */
static void mdr_tcp_challenge_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h)
{
    mdr_ep_t *ep = conn->ep;
    mdr_rail_t *rail = conn->rail;
    uint8_t proof[MDR_AUTH_MAC_LEN * 3], rail_id[6];
    mdr_auth_transcript_t t;

    if (h->uuid != ep->base.uuid || h->target != rail->uuid) {
        mdr_tcp_conn_proto(conn, "handshake answered by uuid %016llx (expected %016llx)",
                           (unsigned long long)h->uuid, (unsigned long long)ep->base.uuid);
        return;
    }
    memcpy(conn->nonce_a, h->data, sizeof(conn->nonce_a));
    mdr_tcp_hs_transcript(conn, rail->uuid, ep->base.uuid, &ep->raddr, rail_id, &t);
    mdr_auth_mac(proof, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    mdr_tcp_secret_conts(rail, ep->base.uuid, &t,
                         (uint8_t(*)[MDR_AUTH_MAC_LEN])(proof + MDR_AUTH_MAC_LEN));
    mdr_auth_mac(conn->hs_mac, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    mdr_auth_mac(conn->hs_session, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
    mdr_tcp_hs_fill(conn, MDR_TCP_F_PROOF, 0, rail->uuid, ep->base.uuid, proof, sizeof(proof));
    conn->hs_step = 1;
    mdr_tcp_ep_flush(ep);
}

/* HELLO_ACK on our outgoing connection (magic and version checked): the
 * acceptor proves the key too, whatever its answer, before we believe it
 * (a process that took over a dead peer's address learns nothing and
 * gets no connection). */
static void mdr_tcp_ack_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h)
{
    mdr_ep_t *ep = conn->ep;
    mdr_rail_t *rail = conn->rail;

    if (h->uuid != ep->base.uuid || h->target != rail->uuid) {
        mdr_tcp_conn_proto(conn, "handshake answered by uuid %016llx (expected %016llx)",
                           (unsigned long long)h->uuid, (unsigned long long)ep->base.uuid);
        return;
    }
    if (!mdr_auth_mac_equal(conn->hs_mac, h->data)) {
        mdr_tcp_conn_proto(conn, "handshake answer without proof of this job's key");
        return;
    }
    switch (h->status) {
    case MDR_TCP_ACK_OK:
        mdr_debug("rail %s peer %016llx: connected", rail->log_name, (unsigned long long)ep->base.uuid);
        /* the acceptor keeps this session's secret: so do we */
        mdr_tcp_secret_commit(rail, ep->base.uuid, conn->hs_session, -1, 0);
        mdr_tcp_ep_open(ep);
        break;
    case MDR_TCP_ACK_LOST:
        /* simultaneous connect, the peer's connection wins: it is on its way */
        mdr_debug("rail %s peer %016llx: simultaneous connect, waiting for the peer's",
                  rail->log_name, (unsigned long long)ep->base.uuid);
        mdr_tcp_conn_close(conn);
        ep->state = MDR_TCP_EP_WAIT_PEER;
        break;
    case MDR_TCP_ACK_REFUSED:
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer refused the connection");
        break;
    default:
        mdr_tcp_conn_proto(conn, "bad handshake answer (status %u)", h->status);
        break;
    }
}

/* The put a PUT_ACK (one frame) is for: the oldest written one, else the
 * put being written when that frame of it is out; NULL if none is due. */
static mdr_tcp_sitem_t *mdr_tcp_ack_target(mdr_ep_t *ep)
{
    mdr_tcp_sitem_t *it;

    if (!mdr_list_empty(&ep->acks))
        return mdr_container_of(ep->acks.next, mdr_tcp_sitem_t, link);
    if (mdr_list_empty(&ep->putq))
        return NULL;
    it = mdr_container_of(ep->putq.next, mdr_tcp_sitem_t, link);
    /* frames written whole: those before the one off is in */
    if (it->frames - it->acks_left >= mdr_tcp_frame_of(it, it->off))
        return NULL;
    return it;
}

static void mdr_tcp_put_finish(mdr_tcp_conn_t *conn)
{
    conn->acks_owed++;
    if (conn->put_mh != NULL)
        mdr_tcp_mem_unref(conn->put_mh);
    conn->put_mh = NULL;
    conn->put_dst = NULL;
    conn->skip = conn->put_pad;
}

/* Write n payload bytes from p into the put target (or drop them). */
static void mdr_tcp_put_bytes(mdr_tcp_conn_t *conn, const uint8_t *p, size_t n)
{
    if (conn->put_mh != NULL && conn->put_mh->dead)
        conn->put_dst = NULL;
    if (conn->put_dst != NULL) {
        memcpy(conn->put_dst, p, n);
        conn->put_dst += n;
    }
    conn->put_left -= n;
    if (conn->put_left == 0)
        mdr_tcp_put_finish(conn);
}

/* Parse buf (its frame starts are 8-byte aligned).  Stops when the
 * connection is closed, possibly by an upcall. */
static void mdr_tcp_process(mdr_tcp_conn_t *conn, uint8_t *buf, size_t len)
{
    mdr_rail_t *rail = conn->rail;
    size_t off = 0, avail, take, flen;
    mdr_tcp_hdr_t hdr;

    while (off < len && conn->state != MDR_TCP_CONN_CLOSED) {
        avail = len - off;
        if (conn->put_left > 0) {
            take = avail < conn->put_left ? avail : (size_t)conn->put_left;
            mdr_tcp_put_bytes(conn, buf + off, take);
            off += take;
            continue;
        }
        if (conn->skip > 0) {
            take = avail < conn->skip ? avail : conn->skip;
            conn->skip -= take;
            off += take;
            continue;
        }
        if (avail < sizeof(hdr))
            goto partial;
        memcpy(&hdr, buf + off, sizeof(hdr));
        if (conn->hs_confirm && conn->state == MDR_TCP_CONN_OPEN)
            mdr_tcp_secret_confirm(conn); /* the initiator's first frame after our OK */
        switch (hdr.type) {
        case MDR_TCP_F_CTRL:
            if (conn->state != MDR_TCP_CONN_OPEN) {
                mdr_tcp_conn_proto(conn, "data before the handshake");
                return;
            }
            if (hdr.len > rail->slot_size) {
                mdr_tcp_conn_proto(conn, "control frame of %u bytes exceeds the slot size %zu",
                                   hdr.len, rail->slot_size);
                return;
            }
            flen = sizeof(hdr) + hdr.len + MDR_TCP_PAD8(hdr.len);
            if (avail < flen)
                goto partial;
            off += flen;
            if (conn->ep->state == MDR_TCP_EP_OPEN)
                rail->upcalls->ctrl_recv(conn->ep->base.cookie, buf + off - flen + sizeof(hdr),
                                         hdr.len);
            break;
        case MDR_TCP_F_PUT: {
            mdr_tcp_put_ext_t ext;
            const char *why = NULL;
            mdr_region_t *reg;
            mdr_memh_t *mh;

            if (conn->state != MDR_TCP_CONN_OPEN) {
                mdr_tcp_conn_proto(conn, "data before the handshake");
                return;
            }
            if (hdr.len != sizeof(ext)) {
                mdr_tcp_conn_proto(conn, "put header of %u bytes", hdr.len);
                return;
            }
            if (avail < MDR_TCP_PUT_HDR_LEN)
                goto partial;
            memcpy(&ext, buf + off + sizeof(hdr), sizeof(ext));
            if ((hdr.flags & MDR_TCP_PUT_F_CONT) &&
                (!conn->cont_ok || ext.rkey != conn->cont_rkey || ext.raddr != conn->cont_raddr)) {
                mdr_tcp_conn_proto(conn, "put continuation at 0x%llx (key %016llx) follows no "
                                   "put ending there", (unsigned long long)ext.raddr,
                                   (unsigned long long)ext.rkey);
                return;
            }
            if ((hdr.flags & MDR_TCP_PUT_F_CONT) &&
                mdr_region_lookup(&rail->regions, ext.rkey, &why) == NULL)
                reg = NULL; /* deregistered since the put began: drop the rest */
            else if ((reg = mdr_region_check_put(&rail->regions, ext.rkey, ext.raddr, ext.count,
                                                 conn->ep->base.uuid, &why)) == NULL) {
                mdr_tcp_conn_proto(conn, "put of %llu bytes at 0x%llx (key %016llx): %s",
                                   (unsigned long long)ext.count,
                                   (unsigned long long)ext.raddr,
                                   (unsigned long long)ext.rkey, why);
                return;
            }
            off += MDR_TCP_PUT_HDR_LEN;
            conn->rx_put_frames++;
            conn->cont_ok = 1;
            conn->cont_rkey = ext.rkey;
            conn->cont_raddr = ext.raddr + ext.count;
            conn->put_pad = MDR_TCP_PAD8(ext.count);
            if (ext.count == 0) {
                conn->skip = conn->put_pad;
                conn->acks_owed++;
                break;
            }
            if (reg != NULL) {
                mh = mdr_container_of(reg, mdr_memh_t, reg);
                mh->refs++;
                conn->put_mh = mh;
                conn->put_dst = (uint8_t *)(uintptr_t)ext.raddr;
            } else {
                conn->put_mh = NULL;
                conn->put_dst = NULL;
            }
            conn->put_left = ext.count;
            break;
        }
        case MDR_TCP_F_PUT_ACK: {
            uint32_t k;

            if (conn->state != MDR_TCP_CONN_OPEN) {
                mdr_tcp_conn_proto(conn, "data before the handshake");
                return;
            }
            off += sizeof(hdr);
            if (!rail->cfg.put_ack)
                break; /* our puts completed when written */
            for (k = 0; k < hdr.len; k++) { /* one per put frame */
                mdr_tcp_sitem_t *it;
                it = mdr_tcp_ack_target(conn->ep);
                if (it == NULL) {
                    mdr_tcp_conn_proto(conn, "acknowledgement of %u put frames, %u were "
                                       "outstanding", hdr.len, k);
                    return;
                }
                if (--it->acks_left > 0)
                    continue;
                mdr_list_del(&it->link);
                if (it->comp != NULL)
                    mdr_list_push_tail(&rail->doneq, &it->link);
                else
                    mdr_tcp_sitem_free(conn->ep, it);
            }
            break;
        }
        case MDR_TCP_F_HELLO:
        case MDR_TCP_F_CHALLENGE:
        case MDR_TCP_F_PROOF:
        case MDR_TCP_F_HELLO_ACK: {
            mdr_tcp_hello_t h;
            uint32_t magic, want;
            uint16_t version;

            /* read the frame whole whatever its version, then say which
             * version it was: a peer of another madrail is named as such */
            if (hdr.len < 8 || hdr.len > MDR_TCP_HELLO_MAX || (hdr.len & 7) != 0) {
                mdr_tcp_conn_proto(conn, "handshake frame of %u bytes", hdr.len);
                return;
            }
            flen = sizeof(hdr) + hdr.len;
            if (avail < flen)
                goto partial;
            memcpy(&magic, buf + off + sizeof(hdr), 4);
            memcpy(&version, buf + off + sizeof(hdr) + 4, 2);
            if (magic != MDR_TCP_MAGIC) {
                mdr_tcp_conn_proto(conn, "not a madrail handshake (magic %08x)", magic);
                return;
            }
            if (version != MDR_TCP_VERSION) {
                mdr_tcp_conn_proto(conn,
                                   "handshake of madrail tcp protocol version %u, this library "
                                   "speaks version %u (processes of different madrail builds?)",
                                   version, MDR_TCP_VERSION);
                return;
            }
            want = hdr.type == MDR_TCP_F_PROOF       ? MDR_TCP_HS_PROOF_BODY
                   : hdr.type == MDR_TCP_F_HELLO_ACK ? MDR_TCP_HS_ACK_BODY
                                                     : MDR_TCP_HS_NONCE_BODY;
            if (hdr.len != want) {
                mdr_tcp_conn_proto(conn, "handshake frame (type %u) of %u bytes (version %u has "
                                   "%u)", hdr.type, hdr.len, MDR_TCP_VERSION, want);
                return;
            }
            memset(&h, 0, sizeof(h));
            memcpy(&h, buf + off + sizeof(hdr), hdr.len);
            off += flen;
            /* each frame in its place: HELLO then PROOF in, CHALLENGE then
             * HELLO_ACK out */
            if (hdr.type == MDR_TCP_F_HELLO && conn->state == MDR_TCP_CONN_WAIT_HELLO &&
                conn->hs_step == 0) {
                mdr_tcp_hello_received(conn, &h);
            } else if (hdr.type == MDR_TCP_F_PROOF && conn->state == MDR_TCP_CONN_WAIT_HELLO &&
                       conn->hs_step == 1) {
                mdr_tcp_proof_received(conn, &h);
            } else if (hdr.type == MDR_TCP_F_CHALLENGE && conn->state == MDR_TCP_CONN_HS_SENT &&
                       conn->hs_step == 0) {
                mdr_tcp_challenge_received(conn, &h);
            } else if (hdr.type == MDR_TCP_F_HELLO_ACK && conn->state == MDR_TCP_CONN_HS_SENT &&
                       conn->hs_step == 1) {
                mdr_tcp_ack_received(conn, &h);
            } else {
                mdr_tcp_conn_proto(conn, "unexpected handshake frame (type %u)", hdr.type);
                return;
            }
            break;
        }
        default:
            mdr_tcp_conn_proto(conn, "unknown frame type %u", hdr.type);
            return;
        }
    }
    return;

partial:
    if (avail > conn->part_cap) { /* cannot happen: frames were checked above */
        mdr_tcp_conn_proto(conn, "frame too large");
        return;
    }
    memcpy(conn->part, buf + off, avail);
    conn->part_len = avail;
}

static void mdr_tcp_conn_read_frames(mdr_tcp_conn_t *conn)
{
    mdr_rail_t *rail = conn->rail;
    size_t budget = MDR_TCP_RX_BUDGET, want, base;
    struct iovec iov[2];
    ssize_t n;
    int cnt;

    while (budget > 0 && conn->state != MDR_TCP_CONN_CLOSED &&
           conn->state != MDR_TCP_CONN_CONNECTING) {
        if (conn->put_left > 0) {
            /* payload straight into place; what follows lands in rbuf */
            if (conn->put_mh != NULL && conn->put_mh->dead)
                conn->put_dst = NULL;
            if (conn->put_dst != NULL) {
                base = (size_t)((conn->rx_pos + conn->put_left) & 7);
                iov[0].iov_base = conn->put_dst;
                iov[0].iov_len = conn->put_left > SSIZE_MAX / 2 ? SSIZE_MAX / 2
                                                                 : (size_t)conn->put_left;
                /* then only up to a following put header: that put's payload
                 * (the next frame of this one, often) goes straight into
                 * place too instead of through rbuf */
                iov[1].iov_base = rail->rbuf + base;
                iov[1].iov_len = MDR_TCP_PUT_HDR_LEN;
                cnt = 2;
            } else {
                base = (size_t)(conn->rx_pos & 7);
                iov[0].iov_base = rail->rbuf + base;
                iov[0].iov_len = rail->rbuf_len - base;
                if (iov[0].iov_len > conn->put_left)
                    iov[0].iov_len = (size_t)conn->put_left;
                cnt = 1;
            }
        } else {
            if (conn->part_len > 0) {
                memcpy(rail->rbuf, conn->part, conn->part_len);
                base = 0;
            } else {
                base = (size_t)(conn->rx_pos & 7);
            }
            iov[0].iov_base = rail->rbuf + base + conn->part_len;
            iov[0].iov_len = rail->rbuf_len - base - conn->part_len;
            cnt = 1;
        }
        want = iov[0].iov_len + (cnt > 1 ? iov[1].iov_len : 0);
        do {
            n = cnt == 1 ? recv(conn->fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT)
                         : readv(conn->fd, iov, cnt);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            mdr_tcp_conn_lost(conn, errno);
            return;
        }
        if (n == 0) {
            mdr_tcp_conn_lost(conn, 0);
            return;
        }
        conn->rx_pos += (uint64_t)n;
        budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
        if (conn->put_left > 0) {
            size_t got = (size_t)n, take;
            uint8_t *dst = conn->put_dst;
            take = got < conn->put_left ? got : (size_t)conn->put_left;
            if (dst != NULL) {
                /* bytes already in place: account for them without copying */
                conn->put_dst += take;
                conn->put_left -= take;
                if (conn->put_left == 0)
                    mdr_tcp_put_finish(conn);
                if (got > take)
                    mdr_tcp_process(conn, rail->rbuf + base, got - take);
            } else {
                conn->put_left -= take;
                if (conn->put_left == 0)
                    mdr_tcp_put_finish(conn);
            }
        } else {
            size_t total = conn->part_len + (size_t)n;
            conn->part_len = 0;
            mdr_tcp_process(conn, rail->rbuf + base, total);
        }
        if ((size_t)n < want)
            return; /* drained; level-triggered epoll calls us again */
    }
}

/* Tell the sender how many of its puts are in place (one frame per read). */
static void mdr_tcp_conn_send_acks(mdr_tcp_conn_t *conn)
{
    mdr_ep_t *ep = conn->ep;
    mdr_tcp_hdr_t hdr;
    struct iovec seg;
    ssize_t n = 0;

    memset(&hdr, 0, sizeof(hdr));
    hdr.type = MDR_TCP_F_PUT_ACK;
    hdr.len = conn->acks_owed;
    conn->acks_owed = 0;
    seg.iov_base = &hdr;
    seg.iov_len = sizeof(hdr);
    if (mdr_tcp_ep_can_write_ctrl(ep)) {
        n = mdr_tcp_writev(conn->fd, &seg, 1);
        if (n < 0) {
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "send failed: %s", strerror(errno));
            return;
        }
        if ((size_t)n == sizeof(hdr))
            return;
    }
    if (mdr_tcp_q_copy(ep, &seg, 1, (size_t)n) != MADRAIL_OK) {
        mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "out of memory queueing an acknowledgement");
        return;
    }
    mdr_tcp_ep_update_events(ep);
}

static void mdr_tcp_conn_read(mdr_tcp_conn_t *conn)
{
    mdr_tcp_conn_read_frames(conn);
    if (conn->acks_owed > 0 && conn->state == MDR_TCP_CONN_OPEN && conn->ep != NULL &&
        conn->ep->state == MDR_TCP_EP_OPEN)
        mdr_tcp_conn_send_acks(conn);
}

void mdr_tcp_conn_handle(mdr_tcp_conn_t *conn, uint32_t events)
{
    mdr_ep_t *ep;
    int err = 0;
    socklen_t elen = sizeof(err);

    if (conn->state == MDR_TCP_CONN_CLOSED)
        return;
    if (conn->state == MDR_TCP_CONN_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        ep = conn->ep;
        if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
            err = errno;
        if (err != 0) {
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "connect to %s: %s", conn->peer_str,
                            strerror(err));
            return;
        }
        conn->state = MDR_TCP_CONN_HS_SENT;
        mdr_tcp_ep_flush(ep);
        return;
    }
    if ((events & EPOLLOUT) && conn->ep != NULL)
        mdr_tcp_ep_flush(conn->ep);
    if ((events & EPOLLOUT) && conn->ep == NULL && conn->state == MDR_TCP_CONN_WAIT_HELLO) {
        /* our CHALLENGE, when the socket did not take it at once */
        int r = mdr_tcp_conn_send_hs(conn);
        if (r < 0) {
            mdr_tcp_conn_lost(conn, errno);
            return;
        }
        if (r > 0)
            mdr_tcp_conn_set_events(conn, EPOLLIN);
    }
    if (conn->state == MDR_TCP_CONN_CLOSED)
        return;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        mdr_tcp_conn_read(conn);
}
