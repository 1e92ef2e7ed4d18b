/*
 * The peer's send window, from the kernel's own struct tcp_info: glibc's
 * copy of the struct (netinet/tcp.h, used by tcp_ep.c) stops before
 * tcpi_snd_wnd, and linux/tcp.h cannot be included beside it, so this one
 * call lives in a file of its own.  ep_link_quiet needs it to tell a peer
 * that closed its window (alive: it answers our window probes) from a
 * drop rule on our output path (a black hole: the window is open but
 * nothing leaves), the two looking alike otherwise until TCP's first probe
 * timer, a few hundred ms later.
 */
#include "mdr_config.h"

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <linux/tcp.h>

#include "rails/tcp/tcp.h"

int mdr_tcp_window_open(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd))
        return -1; /* a kernel older than 5.4 does not say */
    return ti.tcpi_snd_wnd >= ti.tcpi_snd_mss && ti.tcpi_snd_mss > 0;
}
