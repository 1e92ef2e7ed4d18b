/*
 * Kernel TCP liveness of a path (rails/common/tcp_path.c) on loopback
 * sockets of this test's own: what the ofi and ucx rails answer the core's
 * ep_link_quiet with.  A black hole needs nftables and two namespaces (the
 * cluster tests: cl_failover_ofi, _ucx, _mix); here, that a live path is
 * never quiet, in the two cases a wrong rule would take for dead: a busy
 * path whose bytes get acknowledged, and a peer that stops reading until
 * its window closes.  Then the reachability probe (a bound, non-listening
 * port answers with a reset), and the dump parser on truncated and
 * malformed replies.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rails/common/tcp_path.h"
#include "unit_check.h"
#include "util/clock.h"

static void addr4(mdr_tcp_addr_t *a, const char *ip)
{
    memset(a, 0, sizeof(*a));
    a->family = AF_INET;
    inet_pton(AF_INET, ip, a->a);
}

/* A connected pair: *c from 127.0.0.2 to a listener on 127.0.0.1, *s the
 * accepted end.  0 on success. */
static int pair(int *c, int *s)
{
    struct sockaddr_in la, ca;
    socklen_t len = sizeof(la);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    memset(&la, 0, sizeof(la));
    la.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &la.sin_addr);
    if (l < 0 || bind(l, (struct sockaddr *)&la, sizeof(la)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&la, &len) != 0)
        return -1;
    *c = socket(AF_INET, SOCK_STREAM, 0);
    memset(&ca, 0, sizeof(ca));
    ca.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &ca.sin_addr);
    if (*c < 0 || bind(*c, (struct sockaddr *)&ca, sizeof(ca)) != 0 ||
        connect(*c, (struct sockaddr *)&la, sizeof(la)) != 0)
        return -1;
    *s = accept(l, NULL, NULL);
    close(l);
    return *s < 0 ? -1 : 0;
}

static void sleep_ms(int ms)
{
    uint64_t end = mdr_time_ns() + (uint64_t)ms * 1000000ull;
    while (mdr_time_ns() < end)
        usleep(1000);
}

int main(void)
{
    mdr_tcp_addr_t local, remote, none;
    mdr_tcp_diag_t d, dn;
    mdr_tcp_path_t p, other;
    uint64_t q = 12345;
    int c, s, rc, fd;
    char buf[65536];
    size_t total = 0;
    uint16_t port;

    addr4(&local, "127.0.0.2");
    addr4(&remote, "127.0.0.1");
    memset(&none, 0, sizeof(none));

    /* no address: cannot tell */
    mdr_tcp_diag_init(&dn, &none);
    memset(&p, 0, sizeof(p));
    p.remote = remote;
    check(mdr_tcp_path_quiet(&dn, &p, &q) == -1 && q == 0, "a rail without an address cannot tell");
    mdr_tcp_diag_cleanup(&dn);

    if (pair(&c, &s) != 0) {
        printf("SKIP: no loopback TCP pair here (%s)\n", strerror(errno));
        return 77;
    }
    mdr_tcp_diag_init(&d, &local);
    rc = mdr_tcp_path_quiet(&d, &p, &q);
    if (rc == -1 && d.broken) {
        printf("SKIP: this kernel answers no sock_diag dump\n");
        return 77;
    }
    check(rc == 0 && q == 0, "an idle live path: nothing waits, quiet 0 (rc %d, %llu ns)", rc,
          (unsigned long long)q);
    check(d.nsocks >= 1, "the dump found our socket from 127.0.0.2 (%zu)", d.nsocks);
    memset(&other, 0, sizeof(other));
    addr4(&other.remote, "127.0.0.3");
    check(mdr_tcp_path_quiet(&d, &other, &q) == 0 && q == 0 && other.wait_since_ns == 0,
          "a path with no socket: nothing waits");

    /* a busy path: the peer reads, every byte acknowledged */
    memset(buf, 7, sizeof(buf));
    for (int i = 0; i < 200; i++) {
        ssize_t n = write(c, buf, 4096), r;
        if (n > 0)
            total += (size_t)n;
        while ((r = recv(s, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
            ;
        if (i % 50 == 0) {
            rc = mdr_tcp_path_quiet(&d, &p, &q);
            check(rc == 0 && q < 200000000ull, "busy and read: not quiet (%llu ns)",
                  (unsigned long long)q);
        }
    }

    /* the peer stops reading: our bytes are acknowledged until its window
     * closes, then wait for window only; the path is alive all along */
    fcntl(c, F_SETFL, O_NONBLOCK);
    for (;;) {
        ssize_t n = write(c, buf, sizeof(buf));
        if (n <= 0)
            break;
        total += (size_t)n;
    }
    sleep_ms(300);
    d.stamp_ns = 0; /* a fresh dump */
    rc = mdr_tcp_path_quiet(&d, &p, &q);
    check(rc == 0 && q < 100000000ull,
          "a peer that does not read (window closed, %zu bytes written): alive (%llu ns quiet)",
          total, (unsigned long long)q);
    sleep_ms(400);
    d.stamp_ns = 0;
    rc = mdr_tcp_path_quiet(&d, &p, &q);
    check(rc == 0 && q < 300000000ull, "... 0.7 s later still alive (%llu ns quiet)",
          (unsigned long long)q);
    check(d.dumps >= 3, "dumps counted (%llu)", (unsigned long long)d.dumps);
    close(c);
    close(s);

    /* the kernel's timers bound how long bytes can have waited */
    check(mdr_tcp_wait_max_ns(200000, 0, 0, 1) == 200000000ull + MDR_TCP_WAIT_SLACK_NS,
          "in flight, no timer fired yet: at most one RTO (%llu ns)",
          (unsigned long long)mdr_tcp_wait_max_ns(200000, 0, 0, 1));
    check(mdr_tcp_wait_max_ns(800000, 2, 0, 1) == 1400000000ull + MDR_TCP_WAIT_SLACK_NS,
          "two retransmissions of a 200 ms RTO (tcpi_rto 800 ms): at most 1.4 s (%llu ns)",
          (unsigned long long)mdr_tcp_wait_max_ns(800000, 2, 0, 1));
    check(mdr_tcp_wait_max_ns(200000, 0, 1, 0) == 1500000000ull + MDR_TCP_WAIT_SLACK_NS,
          "held unsent, one probe refused locally (500 ms apart): at most 1.5 s (%llu ns)",
          (unsigned long long)mdr_tcp_wait_max_ns(200000, 0, 1, 0));
    check(mdr_tcp_wait_max_ns(200000, 30, 0, 1) >= 60ull * 1000000000ull,
          "TCP past its doubling: no cap");

    /* A clock started in a wait that ended unseen (the core did not look
     * while its process computed) meets bytes written a moment ago: the
     * kernel says they cannot have waited longer than an RTO, so the path
     * is not quiet for the clock's age (the false alarm of MPICH's
     * coll/uoplong, 11 ranks on 2 cores, that failed a CI run) */
    d.stamp_ns = mdr_time_ns(); /* the dump below stands for the kernel's answer */
    check(d.nsocks >= 1, "the last dump kept our sockets (%zu)", d.nsocks);
    for (size_t i = 0; i < d.nsocks; i++) {
        memcpy(d.socks[i].dst, p.remote.a, 4);
        d.socks[i].waiting = 1;
        d.socks[i].last_ack_ms = 5000; /* an idle rail: no ACK for 5 s */
        d.socks[i].wait_max_ms = (uint32_t)(mdr_tcp_wait_max_ns(200000, 0, 0, 1) / 1000000ull);
    }
    p.wait_since_ns = mdr_time_ns() - 3000000000ull;
    rc = mdr_tcp_path_quiet(&d, &p, &q);
    check(rc == 0 && q <= 220000000ull,
          "a 3 s old clock, bytes in flight with no timer fired: quiet at most 220 ms (%llu ns)",
          (unsigned long long)q);
    for (size_t i = 0; i < d.nsocks; i++)
        d.socks[i].wait_max_ms = (uint32_t)(mdr_tcp_wait_max_ns(1600000, 3, 0, 1) / 1000000ull);
    rc = mdr_tcp_path_quiet(&d, &p, &q);
    check(rc == 0 && q >= 2900000000ull && q <= 3100000000ull,
          "the same clock after three retransmissions (a black hole): its 3 s stand (%llu ns)",
          (unsigned long long)q);

    /* Fencing aborts a connection whose descriptor someone else holds:
     * bytes already queued for reading are dropped with it (a shutdown
     * would leave them readable: the library would still deliver them),
     * and the peer sees a reset */
    if (pair(&c, &s) == 0) {
        ssize_t r;
        memset(buf, 5, 4096);
        check(write(c, buf, 4096) == 4096, "4096 bytes toward the fenced end");
        sleep_ms(50); /* queued in s's receive queue, unread */
        check(mdr_tcp_abort_fd(s) == 0, "the accepted end disconnected (%s)", strerror(errno));
        r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
        check(r <= 0, "no byte queued before the fence can be read after it (%zd)", r);
        sleep_ms(50);
        r = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
        check(r < 0 && errno == ECONNRESET, "the other end sees a reset (%zd, %s)", r,
              strerror(errno));
        close(c);
        close(s);
    }
    /* ... and mdr_tcp_path_fence finds this process's sockets of a path:
     * from 127.0.0.2 (d's address) to 127.0.0.1, not the accepted end */
    if (pair(&c, &s) == 0) {
        ssize_t r;
        int n;
        check(write(s, buf, 1000) == 1000, "1000 bytes toward the path's socket");
        sleep_ms(50);
        n = mdr_tcp_path_fence(&d, &remote, MDR_TCP_FENCE_RESET);
        check(n == 1, "the fence found the one socket from 127.0.0.2 to 127.0.0.1 (%d)", n);
        r = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
        check(r <= 0, "its queued bytes are gone (%zd)", r);
        close(c);
        close(s);
    }

    /* the reachability probe: a bound, never-listening port answers at once */
    fd = mdr_tcp_probe_port_open(&remote, &port);
    check(fd >= 0 && port != 0, "a probe port on 127.0.0.1 (%u)", ntohs(port));
    check(mdr_tcp_path_probe(&local, &remote, port, 200) == 1,
          "the probe of a bound port is answered (a reset)");
    check(mdr_tcp_path_probe(&local, &remote, 0, 200) == -1, "no port: the probe cannot be made");
    check(mdr_tcp_path_probe(&none, &remote, port, 200) == -1, "no local address: cannot be made");
    close(fd);

    /* the parser: malformed replies end the dump, never read out of bounds */
    {
        unsigned char m[64];
        memset(m, 0, sizeof(m));
        check(mdr_tcp_diag_parse(&d, m, 3) == 0, "a reply shorter than a header: nothing");
        m[0] = 200; /* nlmsg_len past the end */
        check(mdr_tcp_diag_parse(&d, m, sizeof(m)) == -1, "a length past the reply: malformed");
        m[0] = 4;
        check(mdr_tcp_diag_parse(&d, m, sizeof(m)) == -1, "a length below a header: malformed");
        m[0] = 16;
        m[4] = 3; /* NLMSG_DONE */
        check(mdr_tcp_diag_parse(&d, m, sizeof(m)) == 1, "NLMSG_DONE ends the dump");
        m[4] = 2; /* NLMSG_ERROR */
        check(mdr_tcp_diag_parse(&d, m, sizeof(m)) == -1, "an error message fails the dump");
    }
    mdr_tcp_diag_cleanup(&d);

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
