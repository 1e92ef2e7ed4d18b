/*
 * The link watch (rails/common/linkwatch.c): the parser of the kernel's
 * link messages on made-up replies (a transition to down reported once,
 * other interfaces and other messages ignored, a removed interface is
 * down, truncated messages never read past the buffer), and a watch on
 * loopback (always up: nothing to report).  The real events (ip link set
 * down under a stream, on every driver) are the cluster tests'
 * (cl_failover*.sh, "kernel link event").
 */
#include "mdr_config.h"

#include <net/if.h>
#include <string.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "rails/common/linkwatch.h"
#include "unit_check.h"

/* one link message for ifindex with flags into buf; returns its length */
static size_t msg(void *buf, int type, int ifindex, unsigned flags)
{
    struct {
        struct nlmsghdr h;
        struct ifinfomsg i;
    } m;

    memset(&m, 0, sizeof(m));
    m.h.nlmsg_len = sizeof(m);
    m.h.nlmsg_type = (unsigned short)type;
    m.i.ifi_index = ifindex;
    m.i.ifi_flags = flags;
    memcpy(buf, &m, sizeof(m));
    return sizeof(m);
}

int main(void)
{
    mdr_link_watch_t lw;
    unsigned char buf[512];
    size_t n;

    memset(&lw, 0, sizeof(lw));
    lw.fd = -1;
    lw.ifindex = 7;
    lw.up = 1;

    n = msg(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
    check(mdr_link_watch_parse(&lw, buf, n) == 0 && lw.up, "up and running: up, nothing to report");
    n = msg(buf, RTM_NEWLINK, 8, IFF_UP);
    check(mdr_link_watch_parse(&lw, buf, n) == 0 && lw.up, "another interface going down: ignored");
    n = msg(buf, RTM_NEWLINK, 7, IFF_UP); /* carrier lost: not running */
    check(mdr_link_watch_parse(&lw, buf, n) == 1 && !lw.up && lw.downs == 1,
          "up without running (carrier lost): went down, reported");
    check(mdr_link_watch_parse(&lw, buf, n) == 0 && lw.downs == 1, "still down: reported once");
    n = msg(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
    check(mdr_link_watch_parse(&lw, buf, n) == 0 && lw.up, "back up: nothing to report");
    /* two messages in one reply: up then admin down */
    n = msg(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
    n += msg(buf + n, RTM_NEWLINK, 7, 0);
    check(mdr_link_watch_parse(&lw, buf, n) == 1 && !lw.up && lw.downs == 2,
          "the second message of a reply counts (set down)");
    n = msg(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
    mdr_link_watch_parse(&lw, buf, n);
    n = msg(buf, RTM_DELLINK, 7, IFF_UP | IFF_RUNNING);
    check(mdr_link_watch_parse(&lw, buf, n) == 1 && !lw.up, "the interface removed: down");
    n = msg(buf, RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING);
    mdr_link_watch_parse(&lw, buf, n);
    n = msg(buf, RTM_NEWADDR, 7, 0);
    check(mdr_link_watch_parse(&lw, buf, n) == 0 && lw.up, "an address message: ignored");
    n = msg(buf, RTM_NEWLINK, 7, 0);
    check(mdr_link_watch_parse(&lw, buf, n - 1) == 0 && lw.up,
          "a message cut short of its length: not read");
    check(mdr_link_watch_parse(&lw, buf, NLMSG_HDRLEN + 4) == 0 && lw.up,
          "a header with too little after it: not read");
    check(mdr_link_watch_parse(&lw, buf, 3) == 0, "less than a header: nothing");

    /* a real watch: loopback is up; "" and a missing interface watch nothing */
    mdr_link_watch_init(&lw, "lo");
    check(lw.ifindex == (int)if_nametoindex("lo") && lw.up,
          "a watch on lo: its index, up (fd %d)", lw.fd);
    check(mdr_link_watch_read(&lw) == 0 && lw.up, "nothing to report on lo");
    check(mdr_link_watch_poll(&lw, 0) == 0, "poll before it is due: 0");
    mdr_link_watch_cleanup(&lw);
    mdr_link_watch_init(&lw, "");
    check(lw.fd == -1 && mdr_link_watch_poll(&lw, ~0ull) == 0, "no interface: no watch");
    mdr_link_watch_init(&lw, "no-such-if0");
    check(lw.fd == -1, "an interface that does not exist: no watch");
    mdr_link_watch_cleanup(&lw);

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
