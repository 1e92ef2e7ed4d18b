/*
 * Kernel TCP liveness of a path (tcp_path.h says why).  One dump of the
 * rail's sockets (NETLINK_SOCK_DIAG, filtered in the kernel to the rail's
 * own address) serves every peer's question for MDR_TCP_PATH_CACHE_NS.
 *
 * The rule per socket is the tcp rail's (tcp_ep.c, mdr_tcp_ep_link_quiet),
 * read from the same kernel fields: bytes wait for an acknowledgement
 * when some are unacknowledged, or queued with nothing in flight while the
 * peer's window is open (a drop on our output path holds them unsent); a
 * closed window with no probe outstanding is a peer that does not read,
 * not a dead path.  Over the sockets of one path: nothing waits, quiet 0;
 * else quiet is the shorter of how long something has waited (first seen
 * at a question, capped by what the kernel's timers allow:
 * mdr_tcp_wait_max_ns) and the time since the freshest segment the peer's
 * kernel sent on any of them (tcpi_last_ack_recv counts every segment
 * carrying an acknowledgement, data included).
 *
 * This file includes only the kernel's headers for the structures: glibc's
 * netinet/tcp.h stops its struct tcp_info before tcpi_snd_wnd, and the two
 * cannot be included together.
 */
#include "mdr_config.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>

#include "rails/common/tcp_path.h"
#include "util/clock.h"
#include "util/log.h"

/* The kernel's TCP states (include/net/tcp_states.h, not exported). */
#define MDR_TCPS_ESTABLISHED 1
#define MDR_TCPS_CLOSE_WAIT 8

#define MDR_TCP_DIAG_BUF 32768
#define MDR_TCP_DIAG_MAX_SOCKS 65536 /* a rail's sockets kept from one dump */

void mdr_tcp_diag_init(mdr_tcp_diag_t *d, const mdr_tcp_addr_t *local)
{
    memset(d, 0, sizeof(*d));
    d->fd = -1;
    if (local != NULL)
        d->local = *local;
    if (d->local.family != AF_INET && d->local.family != AF_INET6)
        d->local.family = 0;
}

void mdr_tcp_diag_cleanup(mdr_tcp_diag_t *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d->socks);
    d->socks = NULL;
    d->nsocks = d->cap = 0;
    d->fd = -1;
}

static size_t mdr_tcp_alen(uint16_t family)
{
    return family == AF_INET6 ? 16 : 4;
}

int mdr_tcp_addr_of_sockaddr(const void *sa, size_t len, mdr_tcp_addr_t *out)
{
    sa_family_t fam;

    memset(out, 0, sizeof(*out));
    if (sa == NULL || len < sizeof(fam))
        return -1;
    memcpy(&fam, sa, sizeof(fam));
    if (fam == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in s;
        memcpy(&s, sa, sizeof(s));
        out->family = AF_INET;
        memcpy(out->a, &s.sin_addr, 4);
        return 0;
    }
    if (fam == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 s;
        memcpy(&s, sa, sizeof(s));
        out->family = AF_INET6;
        memcpy(out->a, &s.sin6_addr, 16);
        return 0;
    }
    return -1;
}

int mdr_tcp_addr_of_ifname(const char *ifname, mdr_tcp_addr_t *out)
{
    struct ifaddrs *ifs, *i;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (ifname == NULL || ifname[0] == '\0' || getifaddrs(&ifs) != 0)
        return -1;
    for (i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_name == NULL || strcmp(i->ifa_name, ifname) != 0 ||
            i->ifa_addr->sa_family != AF_INET)
            continue;
        rc = mdr_tcp_addr_of_sockaddr(i->ifa_addr, sizeof(struct sockaddr_in), out);
        break;
    }
    freeifaddrs(ifs);
    return rc;
}

static int mdr_tcp_diag_open(mdr_tcp_diag_t *d)
{
    struct timeval tv = { 0, 200000 }; /* a dump is made on demand: never waits long */

    d->fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (d->fd < 0) {
        mdr_warn("TCP liveness of %s paths: socket(NETLINK_SOCK_DIAG): %m; the rail cannot "
                 "tell a dead link from a slow peer (only its driver's errors take it down)",
                 d->local.family == AF_INET6 ? "IPv6" : "IPv4");
        d->broken = 1;
        return -1;
    }
    (void)setsockopt(d->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return 0;
}

static int mdr_tcp_diag_push(mdr_tcp_diag_t *d, const mdr_tcp_sock_t *s)
{
    if (d->nsocks == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        mdr_tcp_sock_t *n;
        if (cap > MDR_TCP_DIAG_MAX_SOCKS)
            return 0; /* keep what fits: more sockets than that on one rail is not ours */
        n = realloc(d->socks, cap * sizeof(*n));
        if (n == NULL)
            return 0;
        d->socks = n;
        d->cap = cap;
    }
    d->socks[d->nsocks++] = *s;
    return 0;
}

/* One socket of the reply: the rule's inputs from its tcp_info. */
static void mdr_tcp_diag_one(mdr_tcp_diag_t *d, const struct inet_diag_msg *m, size_t len)
{
    const struct nlattr *a;
    size_t off = NLMSG_ALIGN(sizeof(*m));
    struct tcp_info ti;
    size_t tlen = 0;
    mdr_tcp_sock_t s;
    size_t alen = mdr_tcp_alen(d->local.family);

    if (m->idiag_family != d->local.family ||
        memcmp(m->id.idiag_src, d->local.a, alen) != 0)
        return; /* the kernel filters; a reply from an older dump may not be */
    memset(&ti, 0, sizeof(ti));
    while (off + sizeof(*a) <= len) {
        a = (const struct nlattr *)((const char *)m + off);
        if (a->nla_len < sizeof(*a) || off + a->nla_len > len)
            break;
        if ((a->nla_type & NLA_TYPE_MASK) == INET_DIAG_INFO) {
            tlen = a->nla_len - sizeof(*a);
            if (tlen > sizeof(ti))
                tlen = sizeof(ti);
            memcpy(&ti, (const char *)a + sizeof(*a), tlen);
        }
        off += NLA_ALIGN(a->nla_len);
    }
    if (tlen < offsetof(struct tcp_info, tcpi_rcv_ssthresh))
        return; /* no tcp_info: nothing to say about this socket */
    memset(&s, 0, sizeof(s));
    memcpy(s.dst, m->id.idiag_dst, alen);
    s.last_ack_ms = ti.tcpi_last_ack_recv;
    s.inode = m->idiag_inode;
    s.rto_us = ti.tcpi_backoff < 16 ? ti.tcpi_rto >> ti.tcpi_backoff : ti.tcpi_rto;
    s.wait_max_ms = (uint32_t)(mdr_tcp_wait_max_ns(ti.tcpi_rto, ti.tcpi_backoff, ti.tcpi_probes,
                                                   ti.tcpi_unacked) / 1000000ull);
    if ((ti.tcpi_unacked == 0 && m->idiag_wqueue == 0) ||
        (ti.tcpi_unacked == 0 && ti.tcpi_probes == 0 &&
         (tlen < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd) ||
          ti.tcpi_snd_mss == 0 || ti.tcpi_snd_wnd < ti.tcpi_snd_mss)))
        s.waiting = 0; /* nothing waits, or only for a window the peer keeps answering about */
    else
        s.waiting = 1;
    (void)mdr_tcp_diag_push(d, &s);
}

int mdr_tcp_diag_parse(mdr_tcp_diag_t *d, const void *buf, size_t len)
{
    const char *p = buf;

    while (len >= sizeof(struct nlmsghdr)) {
        struct nlmsghdr h;
        memcpy(&h, p, sizeof(h));
        if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len)
            return -1;
        if (h.nlmsg_type == NLMSG_DONE)
            return 1;
        if (h.nlmsg_type == NLMSG_ERROR)
            return -1;
        if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            /* the message may sit unaligned in a fuzzer's buffer: copy it */
            union {
                struct inet_diag_msg m;
                char b[1024];
            } u;
            size_t mlen = h.nlmsg_len - NLMSG_HDRLEN;
            if (mlen > sizeof(u.b))
                mlen = sizeof(u.b);
            memcpy(u.b, p + NLMSG_HDRLEN, mlen);
            mdr_tcp_diag_one(d, &u.m, mlen);
        }
        if (NLMSG_ALIGN(h.nlmsg_len) >= len)
            break;
        p += NLMSG_ALIGN(h.nlmsg_len);
        len -= NLMSG_ALIGN(h.nlmsg_len);
    }
    return 0;
}

/* The request: a dump of the TCP sockets, established or half-closed,
 * whose source address is ours (bytecode: one S_COND, accept at its end,
 * reject past it), with their tcp_info. */
static int mdr_tcp_diag_dump(mdr_tcp_diag_t *d)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
        struct nlattr bc;
        struct inet_diag_bc_op op;
        struct inet_diag_hostcond cond;
        uint8_t addr[16];
    } rq;
    size_t alen = mdr_tcp_alen(d->local.family);
    size_t oplen = sizeof(rq.op) + sizeof(rq.cond) + alen;
    struct sockaddr_nl nl;
    char *buf;
    int rc = 0;
    static uint32_t seq;

    memset(&rq, 0, sizeof(rq));
    rq.nlh.nlmsg_len = (uint32_t)(offsetof(__typeof__(rq), op) + oplen);
    rq.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    rq.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    rq.nlh.nlmsg_seq = ++seq;
    rq.req.sdiag_family = (uint8_t)d->local.family;
    rq.req.sdiag_protocol = IPPROTO_TCP;
    rq.req.idiag_states = (1u << MDR_TCPS_ESTABLISHED) | (1u << MDR_TCPS_CLOSE_WAIT);
    rq.req.idiag_ext = 1u << (INET_DIAG_INFO - 1);
    rq.bc.nla_type = INET_DIAG_REQ_BYTECODE;
    rq.bc.nla_len = (uint16_t)(sizeof(rq.bc) + oplen);
    rq.op.code = INET_DIAG_BC_S_COND;
    rq.op.yes = (uint8_t)oplen;
    rq.op.no = (uint16_t)(oplen + 4);
    rq.cond.family = (uint8_t)d->local.family;
    rq.cond.prefix_len = (uint8_t)(alen * 8);
    rq.cond.port = -1;
    memcpy(rq.addr, d->local.a, alen);

    memset(&nl, 0, sizeof(nl));
    nl.nl_family = AF_NETLINK;
    if (sendto(d->fd, &rq, rq.nlh.nlmsg_len, 0, (struct sockaddr *)&nl, sizeof(nl)) < 0)
        return -1;
    buf = malloc(MDR_TCP_DIAG_BUF);
    if (buf == NULL)
        return -1;
    d->nsocks = 0;
    for (;;) {
        ssize_t n = recv(d->fd, buf, MDR_TCP_DIAG_BUF, 0);
        if (n <= 0) {
            rc = -1;
            break;
        }
        rc = mdr_tcp_diag_parse(d, buf, (size_t)n);
        if (rc != 0)
            break;
    }
    free(buf);
    d->dumps++;
    return rc == 1 ? 0 : -1;
}

static socklen_t mdr_tcp_sockaddr(const mdr_tcp_addr_t *a, uint16_t port_be,
                                  struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (a->family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family = AF_INET;
        s->sin_port = port_be;
        memcpy(&s->sin_addr, a->a, 4);
        return sizeof(*s);
    }
    if (a->family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = port_be;
        memcpy(&s->sin6_addr, a->a, 16);
        return sizeof(*s);
    }
    return 0;
}

int mdr_tcp_probe_port_open(const mdr_tcp_addr_t *local, uint16_t *port_be_p)
{
    struct sockaddr_storage ss;
    socklen_t len = mdr_tcp_sockaddr(local, 0, &ss);
    int fd;

    if (len == 0)
        return -1;
    fd = socket(local->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    *port_be_p = local->family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                          : ((struct sockaddr_in6 *)&ss)->sin6_port;
    return fd;
}

int mdr_tcp_path_probe(const mdr_tcp_addr_t *local, const mdr_tcp_addr_t *remote,
                       uint16_t port_be, int timeout_ms)
{
    struct sockaddr_storage src, dst;
    socklen_t slen = mdr_tcp_sockaddr(local, 0, &src);
    socklen_t dlen = mdr_tcp_sockaddr(remote, port_be, &dst);
    struct pollfd pfd;
    int fd, rc;

    if (slen == 0 || dlen == 0 || local->family != remote->family || port_be == 0)
        return -1;
    fd = socket(local->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&src, slen) != 0) {
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&dst, dlen) == 0 || errno == ECONNREFUSED) {
        close(fd);
        return 1;
    }
    if (errno != EINPROGRESS) {
        rc = errno == ENETUNREACH || errno == EHOSTUNREACH ? 0 : -1;
        close(fd);
        return rc;
    }
    pfd.fd = fd;
    pfd.events = POLLOUT;
    pfd.revents = 0;
    do {
        rc = poll(&pfd, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    if (rc == 1) {
        int err = 0;
        socklen_t elen = sizeof(err);
        (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        /* connected or reset: the peer's kernel answered; anything else
         * (unreachable, timed out) did not */
        rc = err == 0 || err == ECONNREFUSED ? 1 : 0;
    } else {
        rc = 0;
    }
    close(fd);
    return rc;
}

uint64_t mdr_tcp_wait_max_ns(uint32_t rto_us, uint32_t backoff, uint32_t probes,
                             uint32_t unacked)
{
    uint64_t base, k = backoff > probes ? backoff : probes;

    if (k > 20)
        return UINT64_MAX / 2; /* TCP gave up doubling long ago: no cap */
    /* tcpi_rto doubles with the retransmission timer's back-off; the
     * probe timer doubles its own interval from the unchanged RTO */
    base = unacked > 0 && backoff < 32 ? rto_us >> backoff : rto_us;
    if (base == 0)
        base = 200000; /* the kernel's minimum RTO when it says none */
    if (unacked == 0 && probes > 0 && base < 500000)
        base = 500000;
    return base * 1000ull * ((2ull << k) - 1) + MDR_TCP_WAIT_SLACK_NS;
}

int mdr_tcp_path_quiet(mdr_tcp_diag_t *d, mdr_tcp_path_t *p, uint64_t *quiet_ns_p)
{
    uint64_t now = mdr_time_ns(), since, last_ack, wait_max = 0;
    uint32_t best = UINT32_MAX;
    size_t alen, i;
    int waiting = 0;

    *quiet_ns_p = 0;
    if (d == NULL || p == NULL || d->broken || d->local.family == 0 ||
        p->remote.family != d->local.family)
        return -1;
    if (d->stamp_ns == 0 || now - d->stamp_ns >= MDR_TCP_PATH_CACHE_NS) {
        if (d->fd < 0 && mdr_tcp_diag_open(d) != 0)
            return -1;
        if (mdr_tcp_diag_dump(d) != 0) {
            /* a reply cut short leaves the socket out of step: start over
             * next time; the kernel refusing the request at all is final */
            int refused = errno == EINVAL || errno == EOPNOTSUPP || errno == EPROTONOSUPPORT;
            close(d->fd);
            d->fd = -1;
            if (refused && d->dumps <= 1) {
                mdr_warn("TCP liveness: the kernel refused a sock_diag dump (%m); the rail "
                         "cannot tell a dead link from a slow peer");
                d->broken = 1;
            }
            return -1;
        }
        d->stamp_ns = now;
    }
    alen = mdr_tcp_alen(d->local.family);
    for (i = 0; i < d->nsocks; i++) {
        const mdr_tcp_sock_t *s = &d->socks[i];
        if (memcmp(s->dst, p->remote.a, alen) != 0)
            continue;
        if (s->last_ack_ms < best)
            best = s->last_ack_ms;
        waiting |= s->waiting;
        if (s->waiting && (uint64_t)s->wait_max_ms * 1000000ull > wait_max)
            wait_max = (uint64_t)s->wait_max_ms * 1000000ull;
    }
    if (!waiting) {
        p->wait_since_ns = 0;
        return 0;
    }
    if (p->wait_since_ns == 0)
        p->wait_since_ns = now;
    since = now - p->wait_since_ns;
    if (since > wait_max) /* a clock from a wait that ended unseen */
        since = wait_max;
    last_ack = (uint64_t)best * 1000000ull;
    *quiet_ns_p = since < last_ack ? since : last_ack;
    return 0;
}

/* Abort the connection of a socket someone else holds, without closing
 * the descriptor (it is not ours to close): connect() to AF_UNSPEC
 * disconnects a TCP socket (the kernel's tcp_disconnect) -- a reset to
 * the peer, and the bytes queued both ways dropped at once.  A shutdown
 * of both directions does less: bytes already queued for reading stay
 * readable, and the library reads them after its own writes began to
 * fail.  UCX 1.13 then aborts the process: a put that arrives on an
 * endpoint whose send fails makes its completion reply fail, and
 * ucp_request_try_send calls that fatal (seen on the namespace cluster,
 * the receiver's rail link set down under a 4 MiB stream over two ucx
 * rails, 3 of 5 runs).  A kernel that refuses the disconnect gets the
 * shutdown. */
int mdr_tcp_abort_fd(int fd)
{
    struct sockaddr sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_family = AF_UNSPEC;
    if (connect(fd, &sa, sizeof(sa)) == 0)
        return 0;
    return shutdown(fd, SHUT_RDWR);
}

int mdr_tcp_path_fence(mdr_tcp_diag_t *d, const mdr_tcp_addr_t *remote, mdr_tcp_fence_how_t how)
{
    size_t alen, i, n = 0;
    uint32_t inodes[64];
    struct dirent *de;
    DIR *dir;
    int fenced = 0;

    if (d == NULL || remote == NULL || d->broken || d->local.family == 0 ||
        remote->family != d->local.family)
        return -1;
    if (d->fd < 0 && mdr_tcp_diag_open(d) != 0)
        return -1;
    if (mdr_tcp_diag_dump(d) != 0) {
        close(d->fd);
        d->fd = -1;
        return -1;
    }
    d->stamp_ns = mdr_time_ns();
    alen = mdr_tcp_alen(d->local.family);
    for (i = 0; i < d->nsocks && n < sizeof(inodes) / sizeof(inodes[0]); i++)
        if (memcmp(d->socks[i].dst, remote->a, alen) == 0 && d->socks[i].inode != 0)
            inodes[n++] = d->socks[i].inode;
    if (n == 0)
        return 0;
    dir = opendir("/proc/self/fd");
    if (dir == NULL)
        return -1;
    while ((de = readdir(dir)) != NULL) {
        char path[300], link[64];
        unsigned ino;
        ssize_t len;
        int fd;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        fd = atoi(de->d_name);
        if (fd == dirfd(dir))
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        len = readlink(path, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%u]", &ino) != 1)
            continue;
        for (i = 0; i < n; i++) {
            if (inodes[i] == ino) {
                if ((how == MDR_TCP_FENCE_RESET ? mdr_tcp_abort_fd(fd)
                                                : shutdown(fd, SHUT_RDWR)) == 0)
                    fenced++;
                break;
            }
        }
    }
    closedir(dir);
    return fenced;
}

int mdr_tcp_path_rto(mdr_tcp_diag_t *d, const mdr_tcp_path_t *p, uint64_t *rto_ns_p)
{
    size_t alen, i;
    uint32_t best = 0;

    *rto_ns_p = 0;
    if (d == NULL || p == NULL || d->local.family == 0 || p->remote.family != d->local.family ||
        d->stamp_ns == 0)
        return -1;
    alen = mdr_tcp_alen(d->local.family);
    for (i = 0; i < d->nsocks; i++)
        if (memcmp(d->socks[i].dst, p->remote.a, alen) == 0 && d->socks[i].rto_us > best)
            best = d->socks[i].rto_us;
    if (best == 0)
        return -1;
    *rto_ns_p = (uint64_t)best * 1000ull;
    return 0;
}

void mdr_tcp_path_fence_ep(mdr_tcp_diag_t *d, const mdr_tcp_path_t *p, const char *rail_name,
                           uint64_t uuid, mdr_tcp_fence_how_t how)
{
    int n;

    if (d->local.family == 0)
        return;
    n = mdr_tcp_path_fence(d, &p->remote, how);
    if (n > 0)
        mdr_info("rail %s peer %016llx: %d socket(s) of the given-up connection %s", rail_name,
                 (unsigned long long)uuid, n, how == MDR_TCP_FENCE_RESET ? "reset" : "shut down");
}
