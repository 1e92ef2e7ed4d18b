/*
 * Liveness of a TCP path for drivers whose network library owns the
 * sockets (ofi over libfabric's tcp provider, ucx over UCX's tcp
 * transport).  Those libraries hide their descriptors, and over a black
 * hole (a link down without a carrier change seen here, a drop rule) their
 * sockets neither fail nor complete: TCP retransmits for many minutes and
 * the library waits with it.  The kernel still knows what the tcp rail
 * asks of its own sockets (tcp_ep.c, mdr_tcp_ep_link_quiet): bytes waiting
 * for an acknowledgement and when one last came.  NETLINK_SOCK_DIAG hands
 * that out for every TCP socket of this network namespace, so a rail asks
 * it for the sockets between its own address and a peer's, whoever made
 * them.
 *
 * Sockets of other processes between the same two addresses are counted
 * too, on purpose: the question is whether the path delivers, and every
 * socket on it answers that the same way (a remote process that stops
 * reading still has its kernel acknowledging).
 *
 * One dump a rail, shared by its peers, at most every MDR_TCP_PATH_CACHE_NS:
 * the core asks at its liveness scans (about ten a second), never per
 * message.  The kernel filters the dump to the rail's own address
 * (bytecode), so other traffic on the node costs nothing here.
 */
#ifndef MDR_RAILS_TCP_PATH_H
#define MDR_RAILS_TCP_PATH_H

#include <stddef.h>
#include <stdint.h>

#define MDR_TCP_PATH_CACHE_NS 2000000ull /* a dump serves 2 ms of questions */

/* An IP address, family AF_INET or AF_INET6 (0: none). */
typedef struct mdr_tcp_addr {
    uint16_t family;
    uint8_t a[16]; /* 4 or 16 bytes, network order */
} mdr_tcp_addr_t;

/* One socket of the last dump, reduced to what the rule needs. */
typedef struct mdr_tcp_sock {
    uint8_t dst[16];
    uint32_t last_ack_ms; /* tcpi_last_ack_recv */
    uint32_t inode;       /* the socket's inode (mdr_tcp_path_fence) */
    uint32_t rto_us;      /* tcpi_rto >> tcpi_backoff: the retransmission timeout
                           * without back-off (mdr_tcp_path_rto) */
    uint32_t wait_max_ms; /* mdr_tcp_wait_max_ns of the socket, in ms */
    int waiting;          /* bytes wait for an acknowledgement (the tcp rail's rule) */
} mdr_tcp_sock_t;

/* A rail's view: its local address, the netlink socket, the last dump. */
typedef struct mdr_tcp_diag {
    mdr_tcp_addr_t local;
    int fd;               /* NETLINK_SOCK_DIAG, -1 until first used or when unusable */
    int broken;           /* the kernel refused: the rail cannot tell (-1 for ever) */
    uint64_t stamp_ns;    /* when socks was filled */
    mdr_tcp_sock_t *socks;
    size_t nsocks, cap;
    uint64_t dumps;       /* statistics: dumps made */
} mdr_tcp_diag_t;

/* One ep's path: the peer's address and when bytes were first seen
 * waiting on it (0: nothing waits). */
typedef struct mdr_tcp_path {
    mdr_tcp_addr_t remote;
    uint64_t wait_since_ns;
} mdr_tcp_path_t;

/* Start a rail's view for local (copied; family 0 leaves it unusable:
 * every question answers -1).  Opens nothing yet. */
void mdr_tcp_diag_init(mdr_tcp_diag_t *d, const mdr_tcp_addr_t *local);
void mdr_tcp_diag_cleanup(mdr_tcp_diag_t *d);

/* The longest the oldest byte of a socket can have waited for an
 * acknowledgement, from the kernel's timer state in its tcp_info: rto_us
 * (tcpi_rto), backoff (tcpi_backoff), probes (tcpi_probes) and unacked
 * (tcpi_unacked).  TCP's retransmission timer runs from the oldest
 * unacknowledged segment's departure (a tail-loss probe may go earlier,
 * never later), fires one RTO after it and doubles at each firing
 * (tcpi_backoff counts them); with nothing in flight and bytes held, the
 * probe timer fires at the same doubling intervals (tcpi_probes); an
 * acknowledgement resets both.  So after k firings the oldest byte left
 * at most base x (1 + 2 + ... + 2^k) = base x (2^(k+1) - 1) ago, base
 * being the RTO without back-off (for probes, the larger of the RTO and
 * the 500 ms a probe refused by a local queue waits), plus
 * MDR_TCP_WAIT_SLACK_NS for a late timer.  The rule's own clock (bytes
 * first seen waiting) is kept by the caller at its scans, and a caller that did not look for a while
 * (the process computed, or nothing was watched) may hold a clock started
 * in an earlier wait that ended unseen; this bound caps it: bytes written
 * a moment ago, acknowledged a moment later, are never taken for bytes
 * that waited since then (seen in MPICH's coll/uoplong, 11 ranks on 2
 * cores: a rail taken for dead 1.4-1.9 s after a wait its process never
 * saw end).  It never shortens a clock that is right: that clock started
 * after the bytes started waiting. */
#define MDR_TCP_WAIT_SLACK_NS 20000000ull
uint64_t mdr_tcp_wait_max_ns(uint32_t rto_us, uint32_t backoff, uint32_t probes,
                             uint32_t unacked);

/* The ep_link_quiet answer for path p (rails/rail.h): 0 with *quiet_ns_p
 * the time bytes on the path have waited for an acknowledgement with none
 * at all (0 when nothing waits), or -1 when this rail or path cannot tell
 * (no address, another family, the kernel without sock_diag). */
int mdr_tcp_path_quiet(mdr_tcp_diag_t *d, mdr_tcp_path_t *p, uint64_t *quiet_ns_p);

/* The retransmission timeout of the path to remote (the largest of its
 * sockets', without back-off) from the last dump, in *rto_ns_p: 0, or -1
 * when no socket of the path is known. */
int mdr_tcp_path_rto(mdr_tcp_diag_t *d, const mdr_tcp_path_t *p, uint64_t *rto_ns_p);

/* How a fence ends a connection someone else holds. */
typedef enum {
    /* shutdown(SHUT_RDWR): bytes that arrive later reset the connection;
     * bytes already queued for reading stay readable, and the library
     * sees its reads end and its writes fail */
    MDR_TCP_FENCE_SHUTDOWN,
    /* mdr_tcp_abort_fd: the queued bytes go with the connection too */
    MDR_TCP_FENCE_RESET
} mdr_tcp_fence_how_t;

/* Fence the path to remote (a connection the core gave up while the
 * library that owns its sockets still holds them open): every socket of
 * this process between d's address and remote (found by a fresh dump and
 * /proc/self/fd) is ended as how says.  After it, bytes the peer sent
 * later never reach the library (the kernel answers them with a reset),
 * so a put a dead link held can never land once its buffer was handed
 * back (with MDR_TCP_FENCE_RESET, neither can what was already queued);
 * the library sees the connection end.  Which one a driver takes depends
 * on its library: UCX 1.13 aborts the process on a put it reads from a
 * connection whose writes fail (RESET), libfabric 1.17's tcp;ofi_rxm
 * never dials a peer again whose connection was reset under it
 * (SHUTDOWN: its rejoin was never answered, cl_failover_ofi 'rejoin',
 * 2 of 2 runs).  Every socket of this process on that path goes, those
 * of other peers at the same address too: they share the link that
 * failed (a false alarm costs them a reconnection, never data).  Returns
 * the number of sockets ended, -1 when the path cannot be told. */
int mdr_tcp_path_fence(mdr_tcp_diag_t *d, const mdr_tcp_addr_t *remote, mdr_tcp_fence_how_t how);

/* Disconnect a connected TCP socket whose descriptor belongs to someone
 * else (connect to AF_UNSPEC: a reset, both queues dropped; shutdown of
 * both directions where the kernel refuses).  0 done, -1 errno. */
int mdr_tcp_abort_fd(int fd);

/* mdr_tcp_path_fence for the ep of rail_name to peer uuid, and a line at
 * info level saying how many sockets went. */
void mdr_tcp_path_fence_ep(mdr_tcp_diag_t *d, const mdr_tcp_path_t *p, const char *rail_name,
                           uint64_t uuid, mdr_tcp_fence_how_t how);

/* The IPv4 address of interface ifname into *out (family 0 when it has
 * none or does not exist).  0 found, -1 not. */
int mdr_tcp_addr_of_ifname(const char *ifname, mdr_tcp_addr_t *out);
/* From a struct sockaddr_in or sockaddr_in6 of len bytes; -1 otherwise. */
int mdr_tcp_addr_of_sockaddr(const void *sa, size_t len, mdr_tcp_addr_t *out);

/* ---------------- reachability before a library's blocking connect ----
 *
 * UCX 1.13's tcp transport connects its socket in blocking mode inside
 * ucp_ep_create: toward a black-holed peer that call waits for TCP's SYN
 * retries (about two minutes), and progress with it.  So before handing
 * the library a connection to make, a rail asks whether the path answers
 * at all: a non-blocking connect from local to the peer's probe port, a
 * port the peer's rail holds bound and never listens on, so its kernel
 * answers at once with a reset (or, should anything listen there, a
 * connection): either proves the path; no answer within timeout_ms does
 * not.  The port is bound so that nothing else takes it. */

/* A bound, non-listening TCP socket on local, port chosen by the kernel:
 * *port_be_p its port (network order).  Returns the descriptor, or -1. */
int mdr_tcp_probe_port_open(const mdr_tcp_addr_t *local, uint16_t *port_be_p);
/* 1 the path from local to remote:port answered within timeout_ms, 0 it
 * did not, -1 the probe could not be made (the caller goes ahead). */
int mdr_tcp_path_probe(const mdr_tcp_addr_t *local, const mdr_tcp_addr_t *remote,
                       uint16_t port_be, int timeout_ms);

/* Parse a dump reply (exposed for the fuzz target and the unit test):
 * the sock_diag messages in buf[0..len) for the local address of d are
 * appended to d->socks.  Returns 1 at NLMSG_DONE, 0 for more to come, -1
 * on an error message or a malformed reply. */
int mdr_tcp_diag_parse(mdr_tcp_diag_t *d, const void *buf, size_t len);

#endif /* MDR_RAILS_TCP_PATH_H */
