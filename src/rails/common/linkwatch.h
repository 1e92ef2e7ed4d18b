/*
 * A rail's network interface, watched for its link going down.  A link
 * that goes down (cable, port, `ip link set down`, the carrier lost) is
 * otherwise seen only through silence: TCP retries under every driver and
 * the core's rail timeout finds it a timeout later (about a second by
 * default).  The kernel says it at once on a NETLINK_ROUTE socket
 * subscribed to link events; a rail bound to an interface opens one and
 * fails every ep it has when its interface stops running, as a driver
 * error would: the core re-sends and re-plans on the other rails within
 * milliseconds.
 *
 * Read from the drivers' progress, at most every MDR_LINK_WATCH_NS on the
 * coarse clock (one memory read a pass otherwise), with a non-blocking
 * recv: no cost per message.  The link coming back needs nothing here:
 * the core's rejoin dials again on its own schedule.
 */
#ifndef MDR_RAILS_LINKWATCH_H
#define MDR_RAILS_LINKWATCH_H

#include <stdint.h>

#include "rails/common/rail_ep.h"

#define MDR_LINK_WATCH_NS 5000000ull /* look every 5 ms at most */

typedef struct mdr_link_watch {
    int fd;             /* NETLINK_ROUTE, RTMGRP_LINK; -1: not watching */
    int ifindex;        /* the rail's interface */
    int up;             /* last state seen: IFF_UP and IFF_RUNNING */
    uint64_t next_ns;   /* next look (coarse clock) */
    uint64_t downs;     /* transitions to down seen */
    char ifname[16];
} mdr_link_watch_t;

/* Watch ifname (NULL, "" or an interface that does not exist: no watch,
 * and poll always answers 0).  Never fails the rail: a kernel without the
 * socket leaves the rail to its timeout, as before. */
void mdr_link_watch_init(mdr_link_watch_t *lw, const char *ifname);
void mdr_link_watch_cleanup(mdr_link_watch_t *lw);

/* Read what the kernel said since the last call: 1 when the link went
 * down since (once per transition), else 0. */
int mdr_link_watch_read(mdr_link_watch_t *lw);

/* From progress: mdr_link_watch_read when due (cheap otherwise). */
static inline int mdr_link_watch_poll(mdr_link_watch_t *lw, uint64_t coarse_now)
{
    if (lw->fd < 0 || coarse_now < lw->next_ns)
        return 0;
    lw->next_ns = coarse_now + MDR_LINK_WATCH_NS;
    return mdr_link_watch_read(lw);
}

/* The link of lw went down: log it once for the rail, then fail(ep, why)
 * for every ep of rb not destroyed (the driver's own failure, and its
 * fence where it needs one), why naming the interface. */
void mdr_link_watch_fail_eps(const mdr_link_watch_t *lw, mdr_rail_base_t *rb,
                             const char *rail_name,
                             void (*fail)(mdr_rail_ep_t *ep, const char *why));

/* The parser of link messages (for the unit test and the fuzz target):
 * the RTM_NEWLINK/RTM_DELLINK messages in buf[0..len) about lw's
 * interface update lw->up; 1 when one of them took it from up to down. */
int mdr_link_watch_parse(mdr_link_watch_t *lw, const void *buf, unsigned long len);

#endif /* MDR_RAILS_LINKWATCH_H */
