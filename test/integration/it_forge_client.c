/*
 * A hostile member of a running job, for it_forge.sh: it talks to a tcp
 * rail of rank 0 over a raw socket, with no libmadrail at all, the way a
 * broken or malicious process that can reach the rail would.  It does the
 * tcp driver's handshake (src/rails/tcp/tcp.h: HELLO, answered by
 * HELLO_ACK) under a uuid of its own, then sends one control frame: a FIN
 * for the receive rank 0 published, claiming all its bytes were put.
 *
 * Protocol with it_forge (files in DIR):
 *   DIR/victim   written by rank 0: "ip port rail_uuid rreq_id bytes"
 *   DIR/forged   written here once the FIN is on the wire: "our_uuid"
 *   DIR/checked  written by rank 0 once it looked: then we close
 * The connection stays open until rank 0 has looked, so that a rail it
 * closed was closed for the FIN, not because the connection went away.
 *
 * The handshake frame is built by build_hello() only: magic, version,
 * status, uuid, target and the job key (MADRAIL_JOB_KEY of this test's
 * environment, 32 hex digits), as src/rails/tcp/tcp.h lays it out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* tcp driver frame layout (src/rails/tcp/tcp.h), host byte order */
enum { F_CTRL = 1, F_HELLO = 3, F_HELLO_ACK = 4 };
#define TCP_MAGIC 0x4d445254u
#define TCP_VERSION 2 /* 2: HELLO carries the job key */
#define TCP_HDR_LEN 8
/* core control messages (src/core/core.h) */
enum { CORE_MSG_FIN = 5 };

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void put8(uint8_t *p, uint8_t v) { p[0] = v; }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Frame header: type(1) flags(1) pad(2) len(4). */
static void frame_hdr(uint8_t *p, uint8_t type, uint32_t len)
{
    memset(p, 0, TCP_HDR_LEN);
    put8(p, type);
    put32(p + 4, len);
}

/*
 * The HELLO frame: header, then magic(4) version(2) status(2) uuid(8)
 * target(8) key(16).  Returns its length, 0 when job_key (the
 * MADRAIL_JOB_KEY value) is not 32 hex digits.
 */
static size_t build_hello(uint8_t *out, size_t cap, uint64_t uuid, uint64_t target,
                          const char *job_key)
{
    const size_t body = 40;
    size_t i;
    if (cap < TCP_HDR_LEN + body || job_key == NULL || strlen(job_key) != 32)
        return 0;
    frame_hdr(out, F_HELLO, (uint32_t)body);
    memset(out + TCP_HDR_LEN, 0, body);
    put32(out + TCP_HDR_LEN, TCP_MAGIC);
    put16(out + TCP_HDR_LEN + 4, TCP_VERSION);
    put16(out + TCP_HDR_LEN + 6, 0);
    put64(out + TCP_HDR_LEN + 8, uuid);
    put64(out + TCP_HDR_LEN + 16, target);
    for (i = 0; i < 16; i++) { /* the job key: 32 hex digits -> 16 bytes */
        unsigned v;
        if (sscanf(job_key + 2 * i, "%2x", &v) != 1)
            return 0;
        out[TCP_HDR_LEN + 24 + i] = (uint8_t)v;
    }
    return TCP_HDR_LEN + body;
}

/* A control frame carrying a FIN: core header type(1) flags(1)
 * credits(2) len(4), then rreq_id(8) bytes(8). */
static size_t build_fin(uint8_t *out, uint64_t rreq_id, uint64_t bytes)
{
    const uint32_t msg = 24;
    frame_hdr(out, F_CTRL, msg);
    memset(out + TCP_HDR_LEN, 0, msg);
    put8(out + TCP_HDR_LEN, CORE_MSG_FIN);
    put32(out + TCP_HDR_LEN + 4, msg);
    put64(out + TCP_HDR_LEN + 8, rreq_id);
    put64(out + TCP_HDR_LEN + 16, bytes);
    return TCP_HDR_LEN + msg; /* 24: already a multiple of 8 */
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int wait_file(const char *path, unsigned seconds)
{
    unsigned i;
    for (i = 0; i < seconds * 20; i++) {
        if (access(path, R_OK) == 0)
            return 0;
        sleep_ms(50);
    }
    return -1;
}

int main(int argc, char **argv)
{
    char path[4096], ip[64];
    unsigned port;
    unsigned long long target, rreq, bytes;
    uint64_t me;
    uint8_t frame[64], ack[TCP_HDR_LEN + 40];
    struct sockaddr_in sin;
    uint32_t magic;
    uint16_t status;
    size_t n;
    FILE *f;
    int fd;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(path, sizeof(path), "%s/victim", argv[1]);
    if (wait_file(path, 120) != 0) {
        printf("client: FAIL - %s never appeared\n", path);
        return 1;
    }
    f = fopen(path, "r");
    if (!f || fscanf(f, "%63s %u %llx %llx %llu", ip, &port, &target, &rreq, &bytes) != 5) {
        printf("client: FAIL - cannot parse %s\n", path);
        return 1;
    }
    fclose(f);
    me = ((uint64_t)getpid() << 32) ^ 0x5eedf00dbadc0deull;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    if (fd < 0 || inet_pton(AF_INET, ip, &sin.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        printf("client: FAIL - connect %s:%u: %s\n", ip, port, strerror(errno));
        return 1;
    }
    n = build_hello(frame, sizeof(frame), me, (uint64_t)target, getenv("MADRAIL_JOB_KEY"));
    if (n == 0 || write_all(fd, frame, n) != 0 || read_all(fd, ack, sizeof(ack)) != 0) {
        printf("client: FAIL - handshake with %s:%u\n", ip, port);
        return 1;
    }
    memcpy(&magic, ack + TCP_HDR_LEN, 4);
    memcpy(&status, ack + TCP_HDR_LEN + 6, 2);
    if (ack[0] != F_HELLO_ACK || magic != TCP_MAGIC || status != 0) {
        printf("client: FAIL - handshake answered type %u magic %08x status %u\n", ack[0],
               magic, status);
        return 1;
    }
    printf("client: connected to %s:%u as %016llx; FIN for receive %llx claiming %llu bytes\n",
           ip, port, (unsigned long long)me, rreq, bytes);
    n = build_fin(frame, (uint64_t)rreq, (uint64_t)bytes);
    if (write_all(fd, frame, n) != 0) {
        printf("client: FAIL - sending the FIN\n");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/forged.tmp", argv[1]);
    f = fopen(path, "w");
    if (!f) {
        printf("client: FAIL - cannot write %s\n", path);
        return 1;
    }
    fprintf(f, "%016llx\n", (unsigned long long)me);
    fclose(f);
    {
        char dst[4096];
        snprintf(dst, sizeof(dst), "%s/forged", argv[1]);
        rename(path, dst);
    }
    snprintf(path, sizeof(path), "%s/checked", argv[1]);
    if (wait_file(path, 120) != 0)
        printf("client: rank 0 never reported it had looked\n");
    close(fd);
    printf("client: done\n");
    return 0;
}
