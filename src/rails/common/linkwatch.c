/*
 * Link-state events from the kernel (linkwatch.h says why).  The state at
 * open comes from the interface's flags (SIOCGIFFLAGS-free: the first
 * RTM_GETLINK dump answer), then each RTM_NEWLINK for the interface
 * updates it; RTM_DELLINK (the interface removed) is a link down.  A
 * receive buffer overflow (ENOBUFS: events lost) makes the next read ask
 * for the state again, so a transition is never missed for good.
 */
#include "mdr_config.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "rails/common/linkwatch.h"
#include "util/clock.h"
#include "util/log.h"

#define MDR_LINK_UP_FLAGS (IFF_UP | IFF_RUNNING)

static int mdr_link_watch_ask(mdr_link_watch_t *lw)
{
    struct {
        struct nlmsghdr nlh;
        struct ifinfomsg ifi;
    } rq;
    struct sockaddr_nl nl;

    memset(&rq, 0, sizeof(rq));
    rq.nlh.nlmsg_len = sizeof(rq);
    rq.nlh.nlmsg_type = RTM_GETLINK;
    rq.nlh.nlmsg_flags = NLM_F_REQUEST;
    rq.ifi.ifi_family = AF_UNSPEC;
    rq.ifi.ifi_index = lw->ifindex;
    memset(&nl, 0, sizeof(nl));
    nl.nl_family = AF_NETLINK;
    return sendto(lw->fd, &rq, sizeof(rq), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0 ? -1 : 0;
}

void mdr_link_watch_init(mdr_link_watch_t *lw, const char *ifname)
{
    struct sockaddr_nl nl;
    unsigned idx;

    memset(lw, 0, sizeof(*lw));
    lw->fd = -1;
    lw->up = 1;
    if (ifname == NULL || ifname[0] == '\0')
        return;
    snprintf(lw->ifname, sizeof(lw->ifname), "%s", ifname);
    idx = if_nametoindex(ifname);
    if (idx == 0)
        return;
    lw->ifindex = (int)idx;
    lw->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (lw->fd < 0) {
        mdr_debug("interface %s: no link events (socket(NETLINK_ROUTE): %m); its rail "
                  "learns of a dead link from its timeout", ifname);
        return;
    }
    memset(&nl, 0, sizeof(nl));
    nl.nl_family = AF_NETLINK;
    nl.nl_groups = RTMGRP_LINK;
    if (bind(lw->fd, (struct sockaddr *)&nl, sizeof(nl)) != 0 || mdr_link_watch_ask(lw) != 0) {
        mdr_debug("interface %s: no link events (%m); its rail learns of a dead link from "
                  "its timeout", ifname);
        close(lw->fd);
        lw->fd = -1;
        return;
    }
    (void)mdr_link_watch_read(lw); /* the state now, if the answer is there */
}

void mdr_link_watch_cleanup(mdr_link_watch_t *lw)
{
    if (lw->fd >= 0)
        close(lw->fd);
    lw->fd = -1;
}

int mdr_link_watch_parse(mdr_link_watch_t *lw, const void *buf, unsigned long len)
{
    const char *p = buf;
    int went_down = 0;

    while (len >= sizeof(struct nlmsghdr)) {
        struct nlmsghdr h;
        memcpy(&h, p, sizeof(h));
        if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len)
            break;
        if ((h.nlmsg_type == RTM_NEWLINK || h.nlmsg_type == RTM_DELLINK) &&
            h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg))) {
            struct ifinfomsg ifi;
            memcpy(&ifi, p + NLMSG_HDRLEN, sizeof(ifi));
            if (ifi.ifi_index == lw->ifindex) {
                int up = h.nlmsg_type == RTM_NEWLINK &&
                         (ifi.ifi_flags & MDR_LINK_UP_FLAGS) == MDR_LINK_UP_FLAGS;
                if (lw->up && !up) {
                    went_down = 1;
                    lw->downs++;
                }
                lw->up = up;
            }
        }
        if (NLMSG_ALIGN(h.nlmsg_len) >= len)
            break;
        p += NLMSG_ALIGN(h.nlmsg_len);
        len -= NLMSG_ALIGN(h.nlmsg_len);
    }
    return went_down;
}

int mdr_link_watch_read(mdr_link_watch_t *lw)
{
    char buf[8192] __attribute__((aligned(8)));
    int went_down = 0;

    if (lw->fd < 0)
        return 0;
    for (;;) {
        ssize_t n = recv(lw->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == ENOBUFS)
                (void)mdr_link_watch_ask(lw); /* events were lost: ask for the state */
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                break;
            if (errno == EINTR || errno == ENOBUFS)
                continue;
            break;
        }
        if (n == 0)
            break;
        went_down |= mdr_link_watch_parse(lw, buf, (unsigned long)n);
    }
    return went_down;
}

void mdr_link_watch_fail_eps(const mdr_link_watch_t *lw, mdr_rail_base_t *rb,
                             const char *rail_name,
                             void (*fail)(mdr_rail_ep_t *ep, const char *why))
{
    char why[64];
    mdr_list_t *l;

    snprintf(why, sizeof(why), "link of %s down (kernel link event)", lw->ifname);
    mdr_warn("rail %s: the link of %s went down (kernel link event): its connections fail",
             rail_name, lw->ifname);
    mdr_list_for_each(l, &rb->eps_all)
        fail(mdr_container_of(l, mdr_rail_ep_t, link), why);
}
