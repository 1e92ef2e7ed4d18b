/*
 * The tcp driver: one rail = one listening socket bound to one local IPv4
 * address, one epoll set, and at most one connection per peer.  Outgoing
 * sockets are bound to the rail's address too, so two rails on two
 * interfaces really use two paths.  Everything is non-blocking and driven
 * by progress() (epoll_wait with a zero timeout, level-triggered), with no
 * thread: the core decides when the network is serviced.  Connections are
 * lazy: ep_create records the address, the first ctrl_send or put connects.
 *
 * One epoll set per context, not per rail: the core calls every rail's
 * progress in each pass, and an epoll_wait per rail made each extra rail
 * cost one more system call per pass, on the path of every small message
 * (the syscall is most of an idle pass).  The rails opened with the same
 * context uuid form a group sharing one epoll set; a rail's progress polls
 * the set unless another rail of the group polled it since this rail's
 * last progress, so in the core's pass the first rail polls for all and
 * the others only run their own queues (flush, completions, failures,
 * timeouts), while a rail progressed alone still polls every time.  Events
 * go to the rail that owns the connection, so each rail's failure handling
 * stays its own; two contexts in one process never share a set.
 *
 * Connection arbitration: both sides may connect at once.  Nothing but
 * handshake frames flows on a connection until its HELLO is answered with
 * HELLO_ACK, and queued data waits in the ep, so keeping one connection
 * and dropping the other loses nothing.  The rule is the same on both
 * sides: the connection initiated by the smaller uuid wins.  The loser's
 * initiator is told so (HELLO_ACK "lost") and waits for the winner.
 *
 * Authentication: an accepted connection is a stranger until it proved
 * the job key, and the key is never sent.  The initiator's HELLO names
 * both uuids and carries a fresh nonce; the acceptor answers CHALLENGE
 * with its own nonce; the initiator answers PROOF, an HMAC keyed by the
 * job key over both uuids, both nonces and this rail's address
 * (rails/common/auth.h), and the acceptor's HELLO_ACK carries its own
 * proof, which the initiator checks before it believes the answer.  A
 * recording of handshakes gives neither the key nor a proof that works
 * again (the other side's nonce is new each time).  A stranger is never
 * answered beyond the CHALLENGE (no HELLO_ACK, no reason: the connection
 * is closed) and never reaches the arbitration above; it costs a small
 * descriptor and a small receive buffer until its PROOF or the HELLO
 * timeout (short: a peer's PROOF follows its connect within a round trip),
 * and one rate-limited log line per source address (mdr_drv_refusal).
 * Those connections are bounded per rail and per source address, the
 * oldest closed first (mdr_tcp_hello_bound), so a flood of idle
 * connections holds a bounded number of descriptors and cannot starve the
 * process of them; a process out of descriptors anyway (other users of
 * the table) refuses what it cannot accept through a reserved descriptor,
 * pauses its listener instead of retrying it every pass, and logs each
 * cause at most once per interval with a count (mdr_tcp_accept_failed).
 *
 * Identity: a key proves membership of the job, not which member.  Each
 * handshake gives both sides a session secret (the transcript's HMAC under
 * the session label, never sent), kept per peer uuid for the rail's life.
 * A handshake naming a uuid with which this rail has a confirmed session,
 * or whose connection is open, may take that uuid's place only with a
 * continuity proof: an HMAC of the new transcript keyed by that session's
 * secret.  A genuine reconnection (failover, rejoin, a peer that started
 * over on this rail) has it; a newcomer holding only the key does not, so
 * it cannot make us drop the live connection or the core restart that
 * peer's counters.  Two secrets per uuid (confirmed, pending) cover a
 * handshake whose HELLO_ACK was lost: the acceptor cannot know whether the
 * initiator took the new secret until the initiator's first data frame.
 * First contact on a rail (no secret for that uuid, no open connection)
 * needs no continuity: a key holder can claim a uuid on a rail where that
 * uuid never connected (docs/security.md).
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rails/common/auth.h"
#include "rails/common/drv.h"
#include "rails/tcp/tcp.h"
#include "util/clock.h"
#include "util/log.h"

/* ---------------- configuration ---------------- */

#define MDR_TCP_CFG(...) MDR_CFG_ENTRY(mdr_tcp_config_t, __VA_ARGS__)

static const mdr_cfg_entry_t mdr_tcp_cfg_entries[] = {
    MDR_TCP_CFG("MADRAIL_TCP_SNDBUF", MDR_CFG_SIZE, "0", 0, 1073741824.0, sndbuf,
                "tcp rails: socket send buffer (SO_SNDBUF); 0 = kernel default and "
                "autotuning."),
    MDR_TCP_CFG("MADRAIL_TCP_RCVBUF", MDR_CFG_SIZE, "0", 0, 1073741824.0, rcvbuf,
                "tcp rails: socket receive buffer (SO_RCVBUF); 0 = kernel default and "
                "autotuning."),
    MDR_TCP_CFG("MADRAIL_TCP_NODELAY", MDR_CFG_BOOL, "1", 1, 0, nodelay,
                "tcp rails: disable Nagle's algorithm (TCP_NODELAY)."),
    MDR_TCP_CFG("MADRAIL_TCP_LATENCY_US", MDR_CFG_DOUBLE, "20", 0, 1e7, latency_us,
                "tcp rails: one-way latency (us) in the rail profile used by the planner."),
    MDR_TCP_CFG("MADRAIL_TCP_BANDWIDTH", MDR_CFG_DOUBLE, "0", 0, 1e7, bandwidth,
                "tcp rails: bandwidth (MB/s) in the rail profile; 0 = from "
                "/sys/class/net/<if>/speed, 1000 if unknown, 5000 on loopback."),
    MDR_TCP_CFG("MADRAIL_TCP_CONNECT_TIMEOUT", MDR_CFG_TIME, "10s", 0.001, 86400, connect_timeout,
                "tcp rails: time allowed for a connection and its handshake."),
    MDR_TCP_CFG("MADRAIL_TCP_HELLO_TIMEOUT", MDR_CFG_TIME, "2s", 0.001, 86400, hello_timeout,
                "tcp rails: an accepted connection that has not completed its handshake "
                "after this long is closed (at most MADRAIL_TCP_CONNECT_TIMEOUT).  A peer "
                "sends its HELLO as soon as its connect completes."),
    MDR_TCP_CFG("MADRAIL_TCP_HELLO_MAX", MDR_CFG_UINT, "256", 1, 1u << 20, hello_max,
                "tcp rails: accepted connections without a completed handshake kept per "
                "rail; one more closes the oldest."),
    MDR_TCP_CFG("MADRAIL_TCP_HELLO_MAX_PER_SOURCE", MDR_CFG_UINT, "64", 1, 1u << 20,
                hello_max_src,
                "tcp rails: the same from one source address; one more closes the oldest "
                "from that address."),
    MDR_TCP_CFG("MADRAIL_TCP_PUT_ACK", MDR_CFG_STRING, "auto", 1, 0, put_ack_s,
                "tcp rails: 1 = a put completes when the receiver has placed the data "
                "(and an invalid put fails at the sender); 0 = when its last byte is "
                "written to the socket (one round trip earlier); auto = 1 with more than "
                "one rail (failover then recovers a transfer whose rail dies, and rail "
                "adaptation measures true put rates), else 0.  0 with several rails: a "
                "rail that dies mid-transfer may lose that transfer's data."),
    MDR_TCP_CFG("MADRAIL_TCP_COALESCE", MDR_CFG_SIZE, "16k", 0, 1024 * 1024, coalesce,
                "tcp rails: control frames up to this size are queued and written together "
                "by the next progress (one writev for a burst of small messages); 0 writes "
                "each at once."),
    MDR_TCP_CFG("MADRAIL_TCP_PUT_FRAME", MDR_CFG_SIZE, "64k", 0, 1073741824.0, put_frame,
                "tcp rails: while puts flow both ways on a connection, a put leaves in frames "
                "of this many payload bytes (at least 4k), so our replies to the peer's puts "
                "(CTS, FIN, acknowledgements) pass our bulk data at a frame boundary; one-way "
                "streams send each put whole.  0 = never cut."),
    MDR_TCP_CFG("MADRAIL_TCP_NOTSENT_LOWAT", MDR_CFG_SIZE, "512k", 0, 1073741824.0,
                notsent_lowat,
                "tcp rails: while puts flow both ways on a connection, the unsent bytes "
                "the kernel may hold for it (TCP_NOTSENT_LOWAT); more waits in madrail's "
                "queue, where the replies to the peer's puts pass it.  One-way streams keep "
                "the kernel's setting.  0 = never set."),
    MDR_TCP_CFG("MADRAIL_TCP_SHARED_POLL", MDR_CFG_BOOL, "1", 1, 0, shared_poll,
                "tcp rails: the tcp rails of a context share one epoll set, polled once per "
                "progress pass (1), or each rail polls its own (0: one more system call per "
                "pass for every extra rail)."),
    MDR_TCP_CFG("MADRAIL_TCP_DIRECT_FIRST", MDR_CFG_BOOL, "1", 1, 0, direct_first,
                "tcp rails: the first coalescable control frame to a peer after a progress "
                "call is written at once (a lone message waits for nothing); only the ones "
                "that follow it before the next progress are coalesced.  0 = coalesce every "
                "one until the next progress or flush."),
    MDR_TCP_CFG("MADRAIL_TCP_DIRECT_POLL", MDR_CFG_UINT, "2", 0, MDR_TCP_DIRECT_MAX, direct_poll,
                "tcp rails: while the epoll set holds at most this many connections, all "
                "open and with nothing queued to write, a progress pass reads them directly "
                "(one read each, no epoll_wait: a message that arrives costs one system call "
                "fewer) and waits on the epoll set only every 16th pass and once a clock "
                "tick (new connections); 0 = always epoll."),
};

const mdr_cfg_table_t mdr_tcp_cfg_table = MDR_CFG_TABLE("tcp", mdr_tcp_cfg_entries);

/* ---------------- rail spec ---------------- */

typedef struct mdr_tcp_opts {
    const char *spec; /* for messages */
    unsigned port;
} mdr_tcp_opts_t;

static madrail_status_t mdr_tcp_opt(const char *key, const char *val, void *arg)
{
    mdr_tcp_opts_t *o = arg;
    const char *why = NULL;
    unsigned port;

    if (strcmp(key, "port") == 0) {
        if (mdr_cfg_parse_value(MDR_CFG_UINT, val, &port, &why) != MADRAIL_OK || port > 65535) {
            mdr_error("rail spec tcp:%s: port=%s: %s (expected 0..65535)", o->spec, val,
                      why ? why : "out of range");
            return MADRAIL_ERR_CONFIG;
        }
        o->port = port;
        return MADRAIL_OK;
    }
    mdr_error("rail spec tcp:%s: unknown option '%s' (known: port)", o->spec, key);
    return MADRAIL_ERR_CONFIG;
}

/* Resolve an interface name or IPv4 address to an interface and address.
 * There is no default: "the first interface that is up" depends on the
 * kernel's enumeration order, so two nodes could pick different networks;
 * MADRAIL_RAILS=auto is the way to let madrail choose. */
static madrail_status_t mdr_tcp_resolve(const char *spec, const char *what, char *ifname,
                                        struct in_addr *addr_p, int *loopback_p)
{
    struct ifaddrs *ifa_list, *ifa, *found = NULL;
    struct in_addr want;
    int is_ip, name_seen = 0;

    if (what[0] == '\0') {
        mdr_error("rail spec tcp:%s: no interface or IPv4 address (expected e.g. tcp:eth1, "
                  "tcp:lo or tcp:10.0.0.1; MADRAIL_RAILS=auto chooses the interfaces)",
                  spec);
        return MADRAIL_ERR_CONFIG;
    }
    is_ip = inet_pton(AF_INET, what, &want) == 1;
    if (getifaddrs(&ifa_list) != 0) {
        mdr_error("rail spec tcp:%s: getifaddrs: %m", spec);
        return MADRAIL_ERR_CONFIG;
    }
    for (ifa = ifa_list; ifa != NULL; ifa = ifa->ifa_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ifa->ifa_addr;
        if (!is_ip && strcmp(ifa->ifa_name, what) == 0)
            name_seen = 1;
        if (sin == NULL || sin->sin_family != AF_INET)
            continue;
        if (is_ip ? sin->sin_addr.s_addr == want.s_addr : strcmp(ifa->ifa_name, what) == 0) {
            found = ifa;
            break;
        }
    }
    if (found == NULL) {
        if (is_ip)
            mdr_error("rail spec tcp:%s: address %s is not assigned to any local interface",
                      spec, what);
        else if (name_seen)
            mdr_error("rail spec tcp:%s: interface %s has no IPv4 address", spec, what);
        else
            mdr_error("rail spec tcp:%s: no interface or IPv4 address '%s'", spec, what);
        freeifaddrs(ifa_list);
        return MADRAIL_ERR_CONFIG;
    }
    if (!(found->ifa_flags & IFF_UP))
        mdr_warn("rail spec tcp:%s: interface %s is down", spec, found->ifa_name);
    snprintf(ifname, IF_NAMESIZE, "%s", found->ifa_name);
    *addr_p = ((const struct sockaddr_in *)found->ifa_addr)->sin_addr;
    *loopback_p = (found->ifa_flags & IFF_LOOPBACK) != 0;
    freeifaddrs(ifa_list);
    return MADRAIL_OK;
}

/* Profile bandwidth (MB/s) of an interface from its link speed. */
static double mdr_tcp_if_bandwidth(const char *ifname, int loopback)
{
    char path[96];
    FILE *f;
    long speed = -1;

    if (loopback)
        return 5000.0;
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%ld", &speed) != 1)
            speed = -1;
        fclose(f);
    }
    return speed > 0 ? (double)speed / 8.0 : 1000.0; /* Mbit/s -> MB/s */
}

/* ---------------- open / close ---------------- */

static madrail_status_t mdr_tcp_listen(mdr_rail_t *rail, unsigned port)
{
    struct sockaddr_in sin = rail->local;
    socklen_t slen = sizeof(sin);
    struct epoll_event ev;
    int fd, one = 1;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        mdr_error("rail %s: socket: %m", rail->name);
        return MADRAIL_ERR_IO;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        mdr_warn("rail %s: SO_REUSEADDR: %m", rail->name);
    mdr_tcp_sockopts(rail, fd); /* accepted sockets inherit the buffer sizes */
    sin.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        char where[32];
        mdr_error("rail %s: bind to %s: %m", rail->name,
                  mdr_tcp_addr_str(&sin, where, sizeof(where)));
        goto err_close;
    }
    if (listen(fd, SOMAXCONN) != 0) {
        mdr_error("rail %s: listen: %m", rail->name);
        goto err_close;
    }
    if (getsockname(fd, (struct sockaddr *)&sin, &slen) != 0) {
        mdr_error("rail %s: getsockname: %m", rail->name);
        goto err_close;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = (uintptr_t)rail | MDR_TCP_LISTENER_BIT;
    if (epoll_ctl(rail->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        mdr_error("rail %s: epoll_ctl: %m", rail->name);
        goto err_close;
    }
    rail->local.sin_port = sin.sin_port;
    rail->listen_fd = fd;
    /* kept to refuse connections when out of descriptors: without one
     * free, a pending connection can be neither accepted nor dropped */
    rail->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (rail->reserve_fd < 0)
        mdr_warn("rail %s: open /dev/null (a descriptor kept in reserve): %m", rail->name);
    return MADRAIL_OK;

err_close:
    close(fd);
    return MADRAIL_ERR_IO;
}

/* ---------------- poll groups ---------------- */

static pthread_mutex_t mdr_tcp_groups_lock = PTHREAD_MUTEX_INITIALIZER;
static mdr_tcp_group_t *mdr_tcp_groups;

/* Give the rail an epoll set: its context's group's (made by the first
 * rail), or its own when sharing is off. */
static madrail_status_t mdr_tcp_group_join(mdr_rail_t *rail)
{
    mdr_tcp_group_t *g;

    if (!rail->cfg.shared_poll) {
        rail->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (rail->epfd < 0) {
            mdr_error("rail %s: epoll_create1: %m", rail->name);
            return MADRAIL_ERR_IO;
        }
        return MADRAIL_OK;
    }
    pthread_mutex_lock(&mdr_tcp_groups_lock);
    for (g = mdr_tcp_groups; g != NULL; g = g->next)
        if (g->uuid == rail->uuid)
            break;
    if (g == NULL) {
        g = calloc(1, sizeof(*g));
        if (g == NULL) {
            pthread_mutex_unlock(&mdr_tcp_groups_lock);
            return MADRAIL_ERR_NOMEM;
        }
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (g->epfd < 0) {
            mdr_error("rail %s: epoll_create1: %m", rail->name);
            free(g);
            pthread_mutex_unlock(&mdr_tcp_groups_lock);
            return MADRAIL_ERR_IO;
        }
        g->uuid = rail->uuid;
        mdr_list_init(&g->rails);
        g->next = mdr_tcp_groups;
        mdr_tcp_groups = g;
    }
    g->nrails++;
    mdr_list_push_tail(&g->rails, &rail->group_link);
    rail->group = g;
    rail->epfd = g->epfd;
    rail->seen_polls = g->polls;
    pthread_mutex_unlock(&mdr_tcp_groups_lock);
    return MADRAIL_OK;
}

/* After the rail's sockets left the set. */
static void mdr_tcp_group_leave(mdr_rail_t *rail)
{
    mdr_tcp_group_t *g = rail->group, **pp;

    if (g == NULL) {
        if (rail->epfd >= 0)
            close(rail->epfd);
        rail->epfd = -1;
        return;
    }
    pthread_mutex_lock(&mdr_tcp_groups_lock);
    mdr_list_del(&rail->group_link);
    rail->group = NULL;
    rail->epfd = -1;
    if (--g->nrails == 0) {
        for (pp = &mdr_tcp_groups; *pp != NULL; pp = &(*pp)->next)
            if (*pp == g) {
                *pp = g->next;
                break;
            }
        close(g->epfd);
        free(g);
    }
    pthread_mutex_unlock(&mdr_tcp_groups_lock);
}

static madrail_status_t mdr_tcp_open(const char *spec, const mdr_rail_params_t *params,
                                     mdr_rail_t **rail_p)
{
    mdr_tcp_opts_t opts = {spec, 0};
    madrail_status_t st;
    mdr_rail_t *rail;
    char *copy, *first;
    struct in_addr addr;
    int loopback;

    if (!mdr_drv_open_args_ok(spec, params, rail_p, UINT32_MAX))
        return MADRAIL_ERR_INVALID;
    rail = calloc(1, sizeof(*rail));
    if (rail == NULL)
        return MADRAIL_ERR_NOMEM;
    rail->listen_fd = -1;
    rail->reserve_fd = -1;
    rail->epfd = -1;
    rail->lw.fd = -1;
    st = mdr_cfg_parse(&mdr_tcp_cfg_table, params->overrides, &rail->cfg);
    if (st != MADRAIL_OK)
        goto err_cfg;
    /* auto: acknowledged puts whenever there is another rail: failover
     * re-sends a FIN lost with its rail only when the FIN's puts were
     * placed at the target (a put written to the socket may die in it),
     * and the core's measures need them too (a put written to the socket
     * is complete long before it crossed a slow link) */
    if (rail->cfg.put_ack_s == NULL || rail->cfg.put_ack_s[0] == '\0' ||
        strcmp(rail->cfg.put_ack_s, "auto") == 0) {
        rail->cfg.put_ack = params->measure_puts || params->failover ? 1 : 0;
    } else if (mdr_cfg_parse_value(MDR_CFG_BOOL, rail->cfg.put_ack_s, &rail->cfg.put_ack,
                                   NULL) != MADRAIL_OK) {
        mdr_error("MADRAIL_TCP_PUT_ACK=%s: want auto, 0 or 1", rail->cfg.put_ack_s);
        st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }

    st = mdr_drv_spec_split(spec, mdr_tcp_opt, &opts, &copy, &first);
    if (st == MADRAIL_OK) {
        st = mdr_tcp_resolve(spec, first, rail->ifname, &addr, &loopback);
        free(copy);
    }
    if (st == MADRAIL_OK && !loopback)
        mdr_link_watch_init(&rail->lw, rail->ifname);
    if (st != MADRAIL_OK) {
        if (st != MADRAIL_ERR_NOMEM)
            st = MADRAIL_ERR_CONFIG;
        goto err_cfg;
    }

    if (mdr_auth_init() != 0) {
        st = MADRAIL_ERR_IO;
        goto err_cfg;
    }
    rail->uuid = params->uuid;
    rail->job_key = params->job_key;
    mdr_list_init(&rail->secrets_all);
    rail->upcalls = params->upcalls;
    rail->slot_size = params->slot_size;
    rail->local.sin_family = AF_INET;
    rail->local.sin_addr = addr;
    rail->latency_us = rail->cfg.latency_us > 0 ? rail->cfg.latency_us : 20.0;
    rail->bandwidth_mbs = rail->cfg.bandwidth > 0 ? rail->cfg.bandwidth
                                                  : mdr_tcp_if_bandwidth(rail->ifname, loopback);
    snprintf(rail->name, sizeof(rail->name), "tcp:%s", rail->ifname);
    mdr_list_init(&rail->hs_eps);
    mdr_list_init(&rail->conns);
    mdr_list_init(&rail->zombie_conns);
    mdr_list_init(&rail->doneq);
    mdr_list_init(&rail->flushq);

    st = mdr_rail_base_init(&rail->base, rail->log_name, params, mdr_tcp_ep_free);
    if (st != MADRAIL_OK)
        goto err_cfg;
    st = mdr_hash_init(&rail->secrets, 16);
    if (st != MADRAIL_OK) {
        mdr_rail_base_cleanup(&rail->base);
        goto err_cfg;
    }
    rail->rbuf_len = 2 * (rail->slot_size + 64);
    if (rail->rbuf_len < MDR_TCP_RBUF_MIN)
        rail->rbuf_len = MDR_TCP_RBUF_MIN;
    rail->rbuf = malloc(rail->rbuf_len + 8);
    if (rail->rbuf == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto err_hash;
    }
    st = mdr_tcp_group_join(rail);
    if (st != MADRAIL_OK)
        goto err_rbuf;
    st = mdr_tcp_listen(rail, opts.port);
    if (st != MADRAIL_OK)
        goto err_epoll;
    {
        char where[32];
        snprintf(rail->log_name, sizeof(rail->log_name), "%s(%s)", rail->name,
                 mdr_tcp_addr_str(&rail->local, where, sizeof(where)));
    }
    mdr_debug("rail %s: listening, profile %.1f us %.0f MB/s, put acks %s", rail->log_name,
              rail->latency_us, rail->bandwidth_mbs, rail->cfg.put_ack ? "on" : "off");
    *rail_p = rail;
    return MADRAIL_OK;

err_epoll:
    mdr_tcp_group_leave(rail);
err_rbuf:
    free(rail->rbuf);
err_hash:
    mdr_hash_cleanup(&rail->secrets);
    mdr_rail_base_cleanup(&rail->base);
err_cfg:
    mdr_cfg_release(&mdr_tcp_cfg_table, &rail->cfg);
    free(rail);
    return st;
}

static void mdr_tcp_secrets_cleanup(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->secrets_all)) != NULL) {
        mdr_tcp_secret_t *sec = mdr_container_of(l, mdr_tcp_secret_t, link);
        mdr_auth_wipe(sec, sizeof(*sec));
        free(sec);
    }
    mdr_hash_cleanup(&rail->secrets);
}

static void mdr_tcp_reap(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->zombie_conns)) != NULL)
        mdr_tcp_conn_free(mdr_container_of(l, mdr_tcp_conn_t, link));
    if (!mdr_list_empty(&rail->base.zombie_eps))
        mdr_rail_base_reap(&rail->base);
}

static void mdr_tcp_close(mdr_rail_t *rail)
{
    mdr_list_t *l;

    if (rail == NULL || mdr_drv_close_refused(rail->base.in_progress, rail->log_name))
        return;
    while ((l = mdr_list_pop_head(&rail->doneq)) != NULL)
        free(mdr_container_of(l, mdr_tcp_sitem_t, link));
    while (!mdr_list_empty(&rail->base.eps_all))
        mdr_tcp_ep_destroy(mdr_container_of(rail->base.eps_all.next, mdr_ep_t, base.link));
    while (!mdr_list_empty(&rail->conns))
        mdr_tcp_conn_close(mdr_container_of(rail->conns.next, mdr_tcp_conn_t, link));
    mdr_tcp_reap(rail);
    if (rail->listen_fd >= 0) {
        epoll_ctl(rail->epfd, EPOLL_CTL_DEL, rail->listen_fd, NULL);
        close(rail->listen_fd);
    }
    if (rail->reserve_fd >= 0)
        close(rail->reserve_fd);
    mdr_tcp_group_leave(rail);
    mdr_tcp_mem_cleanup(rail);
    mdr_tcp_secrets_cleanup(rail);
    mdr_rail_base_cleanup(&rail->base);
    mdr_link_watch_cleanup(&rail->lw);
    free(rail->rbuf);
    mdr_cfg_release(&mdr_tcp_cfg_table, &rail->cfg);
    free(rail);
}

static void mdr_tcp_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "%s", rail->name);
    /* FLUSH whatever MADRAIL_TCP_COALESCE says: a message behind a busy
     * connection waits in the flush queue too */
    attr->caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP | MDR_RAIL_CAP_FLUSH |
                 (rail->cfg.put_ack ? MDR_RAIL_CAP_PUT_REMOTE : 0);
    attr->latency_us = rail->latency_us;
    attr->bandwidth_mbs = rail->bandwidth_mbs;
    attr->max_ctrl = rail->slot_size;
    attr->addr_len = MDR_TCP_ADDR_LEN;
    attr->max_rkey = MDR_TCP_RKEY_LEN;
}

static madrail_status_t mdr_tcp_addr_pack(mdr_rail_t *rail, void *buf, size_t len)
{
    uint8_t *p = buf;
    uint32_t mark = MDR_TCP_ADDR_MARK;

    if (rail == NULL || buf == NULL || len < MDR_TCP_ADDR_LEN)
        return MADRAIL_ERR_INVALID;
    memcpy(p, &mark, 4);
    memcpy(p + 4, &rail->local.sin_addr.s_addr, 4);
    memcpy(p + 8, &rail->local.sin_port, 2);
    p[10] = MDR_TCP_VERSION;
    p[11] = 0;
    return MADRAIL_OK;
}

/* ---------------- accepting and arbitration ---------------- */

/* How long a listener whose accept failed for want of descriptors or
 * memory stays out of the epoll set: level-triggered, it would report the
 * same pending connection at every pass and the process would spin on a
 * failing accept (issue 28: 639,540 failed accepts logged in 30 s). */
#define MDR_TCP_ACCEPT_PAUSE 0.05

/* failed accepts, by cause (rail->accept_log) */
enum { MDR_TCP_ACCEPT_NOFD, MDR_TCP_ACCEPT_NOMEM, MDR_TCP_ACCEPT_OTHER };

static void mdr_tcp_listener_arm(mdr_rail_t *rail, int on)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = on ? EPOLLIN : 0;
    ev.data.u64 = (uintptr_t)rail | MDR_TCP_LISTENER_BIT;
    if (epoll_ctl(rail->epfd, EPOLL_CTL_MOD, rail->listen_fd, &ev) != 0)
        mdr_drv_ratelog(&rail->accept_log[MDR_TCP_ACCEPT_OTHER], rail->log_name,
                        "epoll_ctl(MOD) of the listener: %m");
    rail->accept_resume = on ? 0 : mdr_time_sec() + MDR_TCP_ACCEPT_PAUSE;
}

/* accept failed with err (not EAGAIN and the like).  Out of descriptors,
 * the reserved one is given up for a moment so that the connection that
 * waits can be accepted and closed (refused: the peer sees it closed, a
 * peer of the job dials again) rather than left to be reported again; in
 * every case the listener pauses, and the cause is logged at most once per
 * MDR_DRV_RATELOG_INTERVAL with a count. */
static void mdr_tcp_accept_failed(mdr_rail_t *rail, int err)
{
    if (err == EMFILE || err == ENFILE) {
        int refused = 0;
        if (rail->reserve_fd >= 0) {
            int fd;
            close(rail->reserve_fd);
            fd = accept4(rail->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                close(fd);
                refused = 1;
            }
            rail->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        mdr_drv_ratelog(&rail->accept_log[MDR_TCP_ACCEPT_NOFD], rail->log_name,
                        "accept: %s: %s; accepting pauses %.0f ms each time",
                        strerror(err),
                        refused ? "a connection was refused (accepted with the reserved "
                                  "descriptor and closed)"
                                : "a connection waits (no descriptor in reserve)",
                        MDR_TCP_ACCEPT_PAUSE * 1e3);
    } else if (err == ENOMEM || err == ENOBUFS) {
        mdr_drv_ratelog(&rail->accept_log[MDR_TCP_ACCEPT_NOMEM], rail->log_name,
                        "accept: %s; accepting pauses %.0f ms each time", strerror(err),
                        MDR_TCP_ACCEPT_PAUSE * 1e3);
    } else {
        mdr_drv_ratelog(&rail->accept_log[MDR_TCP_ACCEPT_OTHER], rail->log_name,
                        "accept: %s; accepting pauses %.0f ms each time", strerror(err),
                        MDR_TCP_ACCEPT_PAUSE * 1e3);
    }
    mdr_tcp_listener_arm(rail, 0);
}

/* The oldest connection still waiting for its HELLO, from source (NULL:
 * any); rail->conns is in the order of creation. */
static mdr_tcp_conn_t *mdr_tcp_hello_oldest(mdr_rail_t *rail, const char *source,
                                            unsigned *count_p)
{
    mdr_tcp_conn_t *oldest = NULL;
    unsigned n = 0;
    mdr_list_t *l;

    mdr_list_for_each(l, &rail->conns) {
        mdr_tcp_conn_t *c = mdr_container_of(l, mdr_tcp_conn_t, link);
        if (c->state != MDR_TCP_CONN_WAIT_HELLO ||
            (source != NULL && strcmp(c->peer_ip, source) != 0))
            continue;
        if (oldest == NULL)
            oldest = c;
        n++;
    }
    *count_p = n;
    return oldest;
}

/* conn was just accepted: keep the connections without a handshake within
 * MADRAIL_TCP_HELLO_MAX_PER_SOURCE and MADRAIL_TCP_HELLO_MAX by closing the
 * oldest.  The oldest, not the newest: a peer's HELLO follows its connect
 * at once, so the connection that waited longest is the likeliest idle,
 * and a flood cannot keep a peer's fresh connection out.  The scans run
 * only when the counts come near a bound. */
static void mdr_tcp_hello_bound(mdr_rail_t *rail, const mdr_tcp_conn_t *conn)
{
    mdr_tcp_conn_t *old;
    unsigned n;

    if (rail->nwait_hello > rail->cfg.hello_max_src) {
        old = mdr_tcp_hello_oldest(rail, conn->peer_ip, &n);
        if (n > rail->cfg.hello_max_src && old != NULL && old != conn) {
            mdr_tcp_conn_refuse(old, "%u connections from this address without a handshake "
                                "(MADRAIL_TCP_HELLO_MAX_PER_SOURCE=%u): the oldest is closed",
                                n, rail->cfg.hello_max_src);
            return;
        }
    }
    if (rail->nwait_hello > rail->cfg.hello_max) {
        old = mdr_tcp_hello_oldest(rail, NULL, &n);
        if (old != NULL && old != conn)
            mdr_tcp_conn_refuse(old, "%u connections without a handshake on this rail "
                                "(MADRAIL_TCP_HELLO_MAX=%u): the oldest is closed",
                                n, rail->cfg.hello_max);
    }
}

static void mdr_tcp_accept_all(mdr_rail_t *rail)
{
    struct sockaddr_in sin;
    socklen_t slen;
    mdr_tcp_conn_t *conn;
    double timeout = rail->cfg.hello_timeout < rail->cfg.connect_timeout
                         ? rail->cfg.hello_timeout
                         : rail->cfg.connect_timeout;
    int fd, i;

    if (rail->accept_resume != 0)
        return; /* paused: an event fetched before the pause */
    for (i = 0; i < MDR_TCP_MAX_EVENTS; i++) {
        slen = sizeof(sin);
        fd = accept4(rail->listen_fd, (struct sockaddr *)&sin, &slen,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                mdr_tcp_accept_failed(rail, errno);
            return;
        }
        mdr_tcp_sockopts(rail, fd);
        if (mdr_tcp_conn_new(rail, fd, 0, &conn) != MADRAIL_OK) {
            close(fd);
            mdr_tcp_accept_failed(rail, ENOMEM);
            return;
        }
        mdr_tcp_addr_str(&sin, conn->peer_str, sizeof(conn->peer_str));
        if (inet_ntop(AF_INET, &sin.sin_addr, conn->peer_ip, sizeof(conn->peer_ip)) == NULL)
            snprintf(conn->peer_ip, sizeof(conn->peer_ip), "?");
        conn->deadline = mdr_time_sec() + timeout;
        rail->nwait_hello++;
        mdr_tcp_hello_bound(rail, conn);
    }
}

/* ---------------- handshake proofs and session secrets ---------------- */

void mdr_tcp_hs_transcript(const mdr_tcp_conn_t *conn, uint64_t uuid_i, uint64_t uuid_a,
                           const struct sockaddr_in *acceptor, uint8_t rail_id[6],
                           mdr_auth_transcript_t *t)
{
    /* the rail: the acceptor's listen address as addr_pack publishes it
     * (both sides know it; a proof made for one rail of a pair proves
     * nothing on another) */
    memcpy(rail_id, &acceptor->sin_addr.s_addr, 4);
    memcpy(rail_id + 4, &acceptor->sin_port, 2);
    t->driver = "tcp";
    t->uuid_i = uuid_i;
    t->uuid_a = uuid_a;
    t->nonce_i = conn->nonce_i;
    t->nonce_a = conn->nonce_a;
    t->rail_id = rail_id;
    t->rail_id_len = 6;
}

void mdr_tcp_secret_conts(mdr_rail_t *rail, uint64_t uuid, const mdr_auth_transcript_t *t,
                          uint8_t cont[2][MDR_AUTH_MAC_LEN])
{
    mdr_tcp_secret_t *sec = mdr_hash_get(&rail->secrets, uuid);
    int k;

    for (k = 0; k < 2; k++) {
        if (sec != NULL && sec->have[k])
            mdr_auth_mac(cont[k], sec->s[k], MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, t);
        else
            memset(cont[k], 0, MDR_AUTH_MAC_LEN);
    }
}

/* Which of our secrets for uuid one of the initiator's continuity proofs
 * (cont, two of them) proves (MDR_TCP_SEC_*), -1 when none does. */
static int mdr_tcp_secret_check(mdr_rail_t *rail, uint64_t uuid, const mdr_auth_transcript_t *t,
                                const uint8_t *cont)
{
    mdr_tcp_secret_t *sec = mdr_hash_get(&rail->secrets, uuid);
    uint8_t want[MDR_AUTH_MAC_LEN];
    int k, found = -1;

    if (sec == NULL)
        return -1;
    for (k = 0; k < 2 && found < 0; k++) {
        if (!sec->have[k])
            continue;
        mdr_auth_mac(want, sec->s[k], MDR_AUTH_MAC_LEN, MDR_AUTH_CONTINUITY, t);
        if (mdr_auth_mac_equal(want, cont) || mdr_auth_mac_equal(want, cont + MDR_AUTH_MAC_LEN))
            found = k;
    }
    mdr_auth_wipe(want, sizeof(want));
    return found;
}

void mdr_tcp_secret_commit(mdr_rail_t *rail, uint64_t uuid, const uint8_t *secret, int keep,
                           int pending)
{
    mdr_tcp_secret_t *sec = mdr_hash_get(&rail->secrets, uuid);

    if (sec == NULL) {
        sec = calloc(1, sizeof(*sec));
        if (sec == NULL || mdr_hash_put(&rail->secrets, uuid, sec) != MADRAIL_OK) {
            /* the next handshake with this peer is a first contact again */
            mdr_warn("rail %s peer %016llx: out of memory keeping the session secret",
                     rail->log_name, (unsigned long long)uuid);
            free(sec);
            return;
        }
        sec->uuid = uuid;
        mdr_list_push_tail(&rail->secrets_all, &sec->link);
    }
    if (keep == MDR_TCP_SEC_PENDING) /* the initiator showed it holds it */
        memcpy(sec->s[MDR_TCP_SEC_CONFIRMED], sec->s[MDR_TCP_SEC_PENDING], MDR_AUTH_MAC_LEN);
    if (keep >= 0)
        sec->have[MDR_TCP_SEC_CONFIRMED] = 1;
    if (pending) {
        memcpy(sec->s[MDR_TCP_SEC_PENDING], secret, MDR_AUTH_MAC_LEN);
        sec->have[MDR_TCP_SEC_PENDING] = 1;
    } else {
        memcpy(sec->s[MDR_TCP_SEC_CONFIRMED], secret, MDR_AUTH_MAC_LEN);
        sec->have[MDR_TCP_SEC_CONFIRMED] = 1;
        mdr_auth_wipe(sec->s[MDR_TCP_SEC_PENDING], MDR_AUTH_MAC_LEN);
        sec->have[MDR_TCP_SEC_PENDING] = 0;
    }
}

void mdr_tcp_secret_confirm(mdr_tcp_conn_t *conn)
{
    mdr_tcp_secret_t *sec;

    conn->hs_confirm = 0;
    if (conn->ep == NULL)
        return;
    sec = mdr_hash_get(&conn->rail->secrets, conn->ep->base.uuid);
    if (sec != NULL && sec->have[MDR_TCP_SEC_PENDING] &&
        mdr_auth_mac_equal(sec->s[MDR_TCP_SEC_PENDING], conn->hs_session))
        mdr_tcp_secret_commit(conn->rail, conn->ep->base.uuid, conn->hs_session, -1, 0);
}

/* ---------------- the acceptor's side of the handshake ---------------- */

/* The HELLO_ACK of conn: status, and our proof of the key (mac_a, made
 * when the PROOF was checked). */
static void mdr_tcp_ack_fill(mdr_tcp_conn_t *conn, uint16_t status, uint64_t peer_uuid)
{
    mdr_tcp_hs_fill(conn, MDR_TCP_F_HELLO_ACK, status, conn->rail->uuid, peer_uuid, conn->hs_mac,
                    MDR_AUTH_MAC_LEN);
}

/* Answer a PROOF that proved the key with a refusal, and close. */
static void mdr_tcp_reject(mdr_tcp_conn_t *conn, uint16_t status, uint64_t peer_uuid)
{
    mdr_tcp_ack_fill(conn, status, peer_uuid);
    (void)mdr_tcp_conn_send_hs(conn); /* best effort: a fresh socket takes 64 bytes */
    mdr_tcp_conn_close(conn);
}

/* Make conn (incoming) the ep's connection and answer OK: from here on
 * the session is ours (pending until the initiator's first data). */
static void mdr_tcp_adopt(mdr_ep_t *ep, mdr_tcp_conn_t *conn)
{
    mdr_rail_t *rail = conn->rail;

    if (rail->nwait_hello > 0)
        rail->nwait_hello--;
    conn->state = MDR_TCP_CONN_OPEN; /* no longer WAIT_HELLO */
    mdr_tcp_ep_attach(ep, conn);
    mdr_tcp_ack_fill(conn, MDR_TCP_ACK_OK, ep->base.uuid);
}

/* The session of conn is in force (OK answered): keep its secret. */
static void mdr_tcp_adopted(mdr_tcp_conn_t *conn, uint64_t u)
{
    mdr_tcp_secret_commit(conn->rail, u, conn->hs_session, conn->hs_cont, 1);
    conn->hs_confirm = 1;
}

/* The peer has closed its end (its FIN arrived), whatever data is unread. */
static int mdr_tcp_conn_peer_closed(const mdr_tcp_conn_t *conn)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    if (conn->fd < 0 || getsockopt(conn->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return 0;
    return ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE;
}

/* A HELLO (magic and version checked) on an accepted connection: if it is
 * for us, answer CHALLENGE with our nonce.  Nothing else is created: the
 * connection stays WAIT_HELLO (same buffer, same deadline) until PROOF. */
void mdr_tcp_hello_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h)
{
    mdr_rail_t *rail = conn->rail;
    uint64_t u = h->uuid;
    int r;

    /* misdirected (stale address, restarted peer), or a stranger trying
     * names: no answer, the initiator learns nothing from one */
    if (h->target != rail->uuid) {
        mdr_tcp_conn_refuse(conn, "handshake from uuid %016llx meant for uuid %016llx (we are "
                            "%016llx)",
                            (unsigned long long)u, (unsigned long long)h->target,
                            (unsigned long long)rail->uuid);
        return;
    }
    if (u == rail->uuid) {
        mdr_tcp_conn_refuse(conn, "handshake carrying our own uuid");
        return;
    }
    conn->hs_peer = u;
    memcpy(conn->nonce_i, h->data, sizeof(conn->nonce_i));
    mdr_auth_nonce(conn->nonce_a);
    mdr_tcp_hs_fill(conn, MDR_TCP_F_CHALLENGE, 0, rail->uuid, u, conn->nonce_a,
                    sizeof(conn->nonce_a));
    conn->hs_step = 1;
    r = mdr_tcp_conn_send_hs(conn); /* a fresh socket takes 48 bytes */
    if (r < 0) {
        mdr_debug("rail %s: connection from %s: %s", rail->log_name, conn->peer_str,
                  strerror(errno));
        mdr_tcp_conn_close(conn);
    } else if (r == 0) {
        mdr_tcp_conn_set_events(conn, EPOLLIN | EPOLLOUT); /* the rest: mdr_tcp_conn_handle */
    }
}

/* A PROOF (magic and version checked) after our CHALLENGE. */
void mdr_tcp_proof_received(mdr_tcp_conn_t *conn, const mdr_tcp_hello_t *h)
{
    mdr_rail_t *rail = conn->rail;
    uint64_t u = conn->hs_peer;
    uint8_t want[MDR_AUTH_MAC_LEN], rail_id[6];
    mdr_auth_transcript_t t;
    mdr_rail_ep_t *base;
    mdr_ep_t *ep;
    int ok, live;

    if (h->uuid != u || h->target != rail->uuid) {
        mdr_tcp_conn_refuse(conn, "handshake proof from uuid %016llx for %016llx after a "
                            "hello from %016llx",
                            (unsigned long long)h->uuid, (unsigned long long)h->target,
                            (unsigned long long)u);
        return;
    }
    mdr_tcp_hs_transcript(conn, u, rail->uuid, &rail->local, rail_id, &t);
    mdr_auth_mac(want, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    ok = mdr_auth_mac_equal(want, h->data);
    mdr_auth_wipe(want, sizeof(want));
    if (!ok) {
        mdr_tcp_conn_refuse(conn, "handshake without proof of this job's key");
        return;
    }
    /* a process of the job from here on */
    mdr_auth_mac(conn->hs_mac, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
    mdr_auth_mac(conn->hs_session, rail->job_key, MDR_JOB_KEY_LEN, MDR_AUTH_SESSION, &t);
    conn->hs_cont = mdr_tcp_secret_check(rail, u, &t, h->data + MDR_AUTH_MAC_LEN);
    if (mdr_tcp_conn_grow(conn) != MADRAIL_OK) {
        mdr_error("rail %s: out of memory accepting a connection from %s", rail->log_name,
                  conn->peer_str);
        mdr_tcp_conn_close(conn);
        return;
    }
    base = mdr_rail_ep_lookup(&rail->base, u);
    ep = base != NULL ? mdr_container_of(base, mdr_ep_t, base) : NULL;
    /* Identity: this connection would take the place of what we have for
     * u, or be told how it stands against ours.  With an open connection
     * to u, or a session with u both sides confirmed, only the holder of
     * that session may go on (a key is not a uuid).  Refused silently,
     * and nothing here changes: not the live connection, not the core's
     * state of that peer.  (The genuine peer's late losing half of a
     * simultaneous connect, below, is refused too when it cannot prove
     * the session: its initiator closed that connection already, when it
     * took ours.) */
    {
        mdr_tcp_secret_t *sec = mdr_hash_get(&rail->secrets, u);
        live = ep != NULL && ep->state == MDR_TCP_EP_OPEN;
        if (conn->hs_cont < 0 &&
            (live || (sec != NULL && sec->have[MDR_TCP_SEC_CONFIRMED]))) {
            mdr_tcp_conn_refuse(conn, "handshake naming peer %016llx (%s) without proof of its "
                                "session", (unsigned long long)u,
                                live ? "connected" : "known on this rail");
            return;
        }
    }
    if (ep != NULL && ep->state == MDR_TCP_EP_OPEN && ep->conn != NULL && ep->conn->outgoing &&
        !mdr_rail_arbitrate_remote_wins(rail->uuid, u) && !mdr_tcp_conn_peer_closed(ep->conn)) {
        /* the peer's losing half of a simultaneous connect, late */
        mdr_tcp_reject(conn, MDR_TCP_ACK_LOST, u);
        return;
    }
    if (ep != NULL && (ep->state == MDR_TCP_EP_CONNECTING || ep->state == MDR_TCP_EP_WAIT_PEER) &&
        !mdr_rail_arbitrate_remote_wins(rail->uuid, u)) {
        mdr_debug("rail %s peer %016llx: simultaneous connect, keeping ours", rail->log_name,
                  (unsigned long long)u);
        mdr_tcp_reject(conn, MDR_TCP_ACK_LOST, u);
        return;
    }
    if (ep != NULL) {
        if (ep->state == MDR_TCP_EP_IDLE) {
            /* created but never used: no connection of ours to arbitrate */
            mdr_debug("rail %s peer %016llx: connected by the peer", rail->log_name,
                      (unsigned long long)u);
            mdr_tcp_adopt(ep, conn);
            mdr_tcp_adopted(conn, u);
            mdr_tcp_ep_open(ep);
            return;
        }
        if (ep->state == MDR_TCP_EP_CONNECTING || ep->state == MDR_TCP_EP_WAIT_PEER) {
            /* simultaneous connect: the connection initiated by the smaller
             * uuid wins, here the peer's (ours lost: above) */
            mdr_debug("rail %s peer %016llx: simultaneous connect, keeping the peer's",
                      rail->log_name, (unsigned long long)u);
            if (ep->conn != NULL)
                mdr_tcp_conn_close(ep->conn);
            mdr_tcp_adopt(ep, conn);
            mdr_tcp_adopted(conn, u);
            mdr_tcp_ep_open(ep);
            return;
        }
        if (ep->state == MDR_TCP_EP_OPEN) {
            /* the peer started over, and proved it is the one we had: it
             * gave up the old connection.  Report that before offering the
             * new one, so the core sees them in order. */
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer reconnected");
            mdr_tcp_ep_report_failures(rail);
            if (conn->state == MDR_TCP_CONN_CLOSED)
                return;
        } else {
            /* ACCEPTING cannot be seen here; be safe */
            mdr_tcp_reject(conn, MDR_TCP_ACK_REFUSED, u);
            return;
        }
    }

    if (mdr_tcp_ep_alloc(rail, u, NULL, &ep) != MADRAIL_OK) {
        mdr_error("rail %s: out of memory accepting peer %016llx", rail->log_name,
                  (unsigned long long)u);
        mdr_tcp_reject(conn, MDR_TCP_ACK_REFUSED, u);
        return;
    }
    ep->state = MDR_TCP_EP_ACCEPTING;
    mdr_tcp_adopt(ep, conn);
    conn->hs_len = 0; /* the answer depends on the core */
    switch (mdr_rail_ep_offer(&ep->base, ep)) {
    case MDR_RAIL_OFFER_GONE: /* the core destroyed it inside the upcall */
        return;
    case MDR_RAIL_OFFER_REFUSED:
        mdr_debug("rail %s peer %016llx: refused by the core", rail->log_name,
                  (unsigned long long)u);
        if (ep->conn != NULL) {
            conn = ep->conn;
            ep->conn = NULL;
            conn->ep = NULL;
            mdr_tcp_reject(conn, MDR_TCP_ACK_REFUSED, u);
        }
        mdr_tcp_ep_destroy(ep);
        return;
    case MDR_RAIL_OFFER_ACCEPTED:
        break;
    }
    if (ep->state != MDR_TCP_EP_ACCEPTING || ep->conn == NULL)
        return; /* failed meanwhile: the report follows */
    mdr_tcp_ack_fill(conn, MDR_TCP_ACK_OK, u);
    mdr_tcp_adopted(conn, u);
    mdr_debug("rail %s peer %016llx: accepted from %s", rail->log_name, (unsigned long long)u,
              conn->peer_str);
    mdr_tcp_ep_open(ep);
}

/* ---------------- progress ---------------- */

static void mdr_tcp_timeouts(mdr_rail_t *rail)
{
    mdr_list_t *l, *tmp;
    double now = mdr_time_sec();

    if (now < rail->next_timeout_check)
        return;
    rail->next_timeout_check = now + 0.01;
    mdr_list_for_each_safe(l, tmp, &rail->hs_eps) {
        mdr_ep_t *ep = mdr_container_of(l, mdr_ep_t, hs_link);
        char dest[32];
        if (now > ep->deadline)
            mdr_tcp_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "no connection to %s after %.1f s",
                            mdr_tcp_addr_str(&ep->raddr, dest, sizeof(dest)),
                            rail->cfg.connect_timeout);
    }
    if (rail->nwait_hello == 0)
        return;
    mdr_list_for_each_safe(l, tmp, &rail->conns) {
        mdr_tcp_conn_t *conn = mdr_container_of(l, mdr_tcp_conn_t, link);
        if (conn->state == MDR_TCP_CONN_WAIT_HELLO && now > conn->deadline)
            mdr_tcp_conn_refuse(conn, "no handshake within %.1f s (MADRAIL_TCP_HELLO_TIMEOUT)",
                                rail->cfg.hello_timeout < rail->cfg.connect_timeout
                                    ? rail->cfg.hello_timeout
                                    : rail->cfg.connect_timeout);
    }
}

/* Direct polling: read this rail's open connections without asking epoll
 * first.  With one connection, an idle pass costs a read that finds
 * nothing instead of an epoll_wait that finds nothing, and a message that
 * arrives is read at once instead of after the epoll_wait that reports it:
 * one system call fewer on the path of every message.  With many, a pass
 * would cost a read each, so only small sets (MADRAIL_TCP_DIRECT_POLL)
 * are read this way.  A connection in any other state (handshake, bytes
 * queued for EPOLLOUT) sets *need_epoll, and so does a rail with more
 * connections than the bound.  The reads are collected first: an upcall
 * may close connections (closed ones stay allocated until the pass ends,
 * mdr_tcp_reap, and are skipped by conn_handle).  Returns the connections
 * that had bytes. */
static int mdr_tcp_poll_direct(mdr_rail_t *rail, int *need_epoll)
{
    mdr_tcp_conn_t *dc[MDR_TCP_DIRECT_MAX];
    unsigned nd = 0, i;
    int got = 0;
    mdr_list_t *l;

    mdr_list_for_each(l, &rail->conns) {
        mdr_tcp_conn_t *c = mdr_container_of(l, mdr_tcp_conn_t, link);
        if (c->state != MDR_TCP_CONN_OPEN || (c->ev_mask & EPOLLOUT) ||
            nd == MDR_TCP_DIRECT_MAX)
            *need_epoll = 1;
        else
            dc[nd++] = c;
    }
    for (i = 0; i < nd; i++) {
        uint64_t pos = dc[i]->rx_pos;
        mdr_tcp_conn_handle(dc[i], EPOLLIN);
        got += dc[i]->rx_pos != pos || dc[i]->state == MDR_TCP_CONN_CLOSED;
    }
    return got;
}

/* Wait (zero timeout) on the epoll set and handle its events, each by the
 * rail that owns its socket.  In a group, a rail skips the wait when
 * another rail of the group waited on the set since this rail's last pass
 * (the first rail of the core's pass covered it); while events are handled
 * every rail of the group counts as in progress, so a connection another
 * rail's upcall closes becomes a zombie (freed by its own rail's next
 * progress) rather than freed under an event not handled yet.  With direct polling
 * (above) the wait happens only when a connection needs it, every
 * MDR_TCP_DIRECT_EPOLL_EVERY passes, and at the first pass in each tick
 * of the coarse clock (the listener, and anything a read does not
 * report): a process that calls progress seldom (a long computation
 * between calls) still accepts a connection at its next call, as
 * before, not 16 calls later. */
static int mdr_tcp_poll(mdr_rail_t *rail)
{
    struct epoll_event evs[MDR_TCP_MAX_EVENTS];
    mdr_tcp_group_t *g = rail->group;
    mdr_list_t *l;
    int i, n, got = 0;

    if (g != NULL && g->nrails > 1) {
        mdr_list_for_each(l, &g->rails) {
            mdr_rail_t *o = mdr_container_of(l, mdr_rail_t, group_link);
            if (o != rail && o->base.in_progress)
                return 0; /* nested in another rail's progress: it polls */
        }
    }
    if (rail->cfg.direct_poll > 0 && *mdr_tcp_set_nconns(rail) <= rail->cfg.direct_poll) {
        int need = 0;
        got = mdr_tcp_poll_direct(rail, &need);
        if (!need && ++rail->direct_polls < MDR_TCP_DIRECT_EPOLL_EVERY &&
            mdr_time_coarse_ns() == rail->wait_tick) {
            if (g != NULL)
                rail->seen_polls = g->polls; /* the next wait is this rail's own */
            return got;
        }
    }
    rail->direct_polls = 0;
    rail->wait_tick = mdr_time_coarse_ns();
    if (g != NULL && g->nrails > 1 && rail->seen_polls != g->polls) {
        rail->seen_polls = g->polls;
        return got;
    }
    do {
        n = epoll_wait(rail->epfd, evs, MDR_TCP_MAX_EVENTS, 0);
    } while (n < 0 && errno == EINTR);
    if (g != NULL)
        rail->seen_polls = ++g->polls;
    if (n < 0) {
        mdr_error("rail %s: epoll_wait: %m", rail->log_name);
        return got;
    }
    if (n == 0)
        return got;
    if (g != NULL && g->nrails > 1) {
        mdr_list_for_each(l, &g->rails) {
            mdr_rail_t *o = mdr_container_of(l, mdr_rail_t, group_link);
            o->base.in_progress = 1;
        }
    }
    for (i = 0; i < n; i++) {
        uintptr_t d = (uintptr_t)evs[i].data.ptr;
        if (d & MDR_TCP_LISTENER_BIT)
            mdr_tcp_accept_all((mdr_rail_t *)(d & ~MDR_TCP_LISTENER_BIT));
        else
            mdr_tcp_conn_handle(evs[i].data.ptr, evs[i].events);
    }
    if (g != NULL && g->nrails > 1) {
        mdr_list_for_each(l, &g->rails) {
            mdr_rail_t *o = mdr_container_of(l, mdr_rail_t, group_link);
            if (o != rail)
                o->base.in_progress = 0;
        }
    }
    return got + n;
}

/* The rail's link went down (linkwatch.h): every ep fails now, as after a
 * connection error, instead of a rail timeout later. */
static void mdr_tcp_link_fail(mdr_rail_ep_t *b, const char *why)
{
    mdr_tcp_ep_fail(mdr_container_of(b, mdr_ep_t, base), MADRAIL_ERR_RAIL_DOWN, "%s", why);
}

static int mdr_tcp_progress(mdr_rail_t *rail)
{
    int count = 0, r;

    if (rail == NULL || rail->base.in_progress)
        return 0;
    rail->base.in_progress = 1;
    rail->passes++;
    if (rail->lw.fd >= 0 && mdr_link_watch_poll(&rail->lw, mdr_time_coarse_ns()))
        mdr_link_watch_fail_eps(&rail->lw, &rail->base, rail->log_name, mdr_tcp_link_fail);
    if (!mdr_list_empty(&rail->flushq))
        count += mdr_tcp_flush_coalesced(rail);
    count += mdr_tcp_poll(rail);
    if (!mdr_list_empty(&rail->hs_eps) || rail->nwait_hello > 0)
        mdr_tcp_timeouts(rail);
    if (rail->accept_resume != 0 && mdr_time_sec() >= rail->accept_resume)
        mdr_tcp_listener_arm(rail, 1);
    /* upcalls may queue more of both: repeat until quiet */
    while (!mdr_list_empty(&rail->doneq) || !mdr_list_empty(&rail->base.failq)) {
        r = mdr_tcp_report_done(rail);
        count += r;
        if (!mdr_list_empty(&rail->base.failq)) {
            mdr_tcp_ep_report_failures(rail);
            count++;
        }
    }
    /* replies the upcalls queued go out now, in one write per ep */
    if (!mdr_list_empty(&rail->flushq))
        count += mdr_tcp_flush_coalesced(rail);
    mdr_tcp_reap(rail);
    rail->base.in_progress = 0;
    return count;
}

static int mdr_tcp_flush(mdr_rail_t *rail)
{
    if (rail == NULL || mdr_list_empty(&rail->flushq))
        return 0;
    return mdr_tcp_flush_coalesced(rail);
}

const mdr_rail_ops_t mdr_tcp_ops = {
    .size = MDR_RAIL_OPS_SIZE,
    /* PUT_REMOTE with MADRAIL_TCP_PUT_ACK=1 only: else a put completes when
     * the socket took it */
    .caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP | MDR_RAIL_CAP_PUT_REMOTE |
            MDR_RAIL_CAP_FLUSH,
    .name = "tcp",
    .open = mdr_tcp_open,
    .close = mdr_tcp_close,
    .query = mdr_tcp_query,
    .addr_pack = mdr_tcp_addr_pack,
    .ep_create = mdr_tcp_ep_create,
    .ep_destroy = mdr_tcp_ep_destroy,
    .ep_backlog = mdr_tcp_ep_backlog,
    .ep_unsent = mdr_tcp_ep_unsent,
    .ep_idle = mdr_tcp_ep_idle,
    .ep_link_quiet = mdr_tcp_ep_link_quiet,
    .ep_fence = mdr_rail_noop_fence,
    .ep_link_rto = mdr_tcp_ep_link_rto,
    .ctrl_send = mdr_tcp_ctrl_send,
    .mem_reg = mdr_tcp_mem_reg,
    .mem_dereg = mdr_tcp_mem_dereg,
    .rkey_pack = mdr_tcp_rkey_pack,
    .put = mdr_tcp_put,
    .progress = mdr_tcp_progress,
    .flush = mdr_tcp_flush,
};
