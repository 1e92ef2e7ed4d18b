/*
 * Fuzz target: the two parsers of kernel netlink replies the drivers read
 * (rails/common/tcp_path.c: the sock_diag dump of a rail's TCP sockets;
 * rails/common/linkwatch.c: link events).  The kernel is the only writer,
 * but a parser that reads past its buffer on a reply of a kind it did not
 * expect (a newer kernel, a truncated read) would be a crash in every
 * process of a job: every input is parsed by both, and what the dump
 * keeps is then asked as the rails ask it (liveness, RTO).
 *
 * The first input byte chooses the address family of the rail (IPv4 or
 * IPv6); the rest is the reply.
 */
#include "mdr_config.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rails/common/linkwatch.h"
#include "rails/common/tcp_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mdr_tcp_addr_t local;
    mdr_tcp_diag_t d;
    mdr_tcp_path_t p;
    mdr_link_watch_t lw;
    uint64_t rto;
    uint8_t *copy;
    size_t i;

    if (size < 1)
        return 0;
    memset(&local, 0, sizeof(local));
    local.family = (data[0] & 1) ? AF_INET6 : AF_INET;
    memset(local.a, 0x7f, sizeof(local.a));
    copy = malloc(size - 1 + 1); /* exactly the reply's bytes (ASan sees an overrun) */
    if (copy == NULL)
        return 0;
    memcpy(copy, data + 1, size - 1);

    mdr_tcp_diag_init(&d, &local);
    (void)mdr_tcp_diag_parse(&d, copy, size - 1);
    memset(&p, 0, sizeof(p));
    p.remote = local;
    d.stamp_ns = 1;
    (void)mdr_tcp_path_rto(&d, &p, &rto);
    for (i = 0; i < d.nsocks; i++) /* every kept socket is whole */
        if (d.socks[i].waiting > 1)
            abort();
    mdr_tcp_diag_cleanup(&d);

    memset(&lw, 0, sizeof(lw));
    lw.fd = -1;
    lw.up = 1;
    lw.ifindex = data[0] >> 1;
    (void)mdr_link_watch_parse(&lw, copy, size - 1);
    free(copy);
    return 0;
}
