/*
 * A hostile member of a running job, for it_forge.sh: it talks to a tcp
 * rail of rank 0 over a raw socket, with no libmadrail at all, the way a
 * broken or malicious process that holds the job key and can reach the
 * rail would.  It does the tcp driver's handshake (src/rails/tcp/tcp.h:
 * HELLO, CHALLENGE, PROOF, HELLO_ACK) under a uuid of its own, then sends
 * one control frame: a FIN for the receive rank 0 published, claiming all
 * its bytes were put.  Then it claims rank 1's uuid (issue 28, finding 2):
 * a handshake with the key but without rank 1's session secret, which
 * rank 0 must refuse, leaving its connection to rank 1 alone.
 *
 * Protocol with it_forge (files in DIR):
 *   DIR/victim   written by rank 0: "ip port rail_uuid rreq_id bytes rank1_uuid"
 *   DIR/forged   written here once the FIN is on the wire: "our_uuid"
 *   DIR/impostor written here after the claim of rank 1's uuid: "refused"
 *                or what rank 0 answered
 *   DIR/checked  written by rank 0 once it looked: then we close
 * The connection stays open until rank 0 has looked, so that a rail it
 * closed was closed for the FIN, not because the connection went away.
 *
 * The handshake is made by handshake() only, with its proofs framed here
 * by hand over libsodium's HMAC-SHA-256 (as src/rails/common/auth.c frames
 * them): the key (MADRAIL_JOB_KEY of this test's environment, 32 hex
 * digits) is never sent.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* tcp driver frame layout (src/rails/tcp/tcp.h), host byte order */
enum { F_CTRL = 1, F_HELLO = 3, F_HELLO_ACK = 4, F_CHALLENGE = 6, F_PROOF = 7 };
#define TCP_MAGIC 0x4d445254u
#define TCP_VERSION 3 /* 3: challenge-response, the key never sent */
#define TCP_HDR_LEN 8
#define HS_BASE 24 /* magic(4) version(2) status(2) uuid(8) target(8) */
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

/* A handshake frame: header, magic, version, status 0, uuid, target,
 * then len bytes of data.  Returns its length. */
static size_t build_hs(uint8_t *out, uint8_t type, uint64_t uuid, uint64_t target,
                       const uint8_t *data, size_t len)
{
    frame_hdr(out, type, (uint32_t)(HS_BASE + len));
    memset(out + TCP_HDR_LEN, 0, HS_BASE);
    put32(out + TCP_HDR_LEN, TCP_MAGIC);
    put16(out + TCP_HDR_LEN + 4, TCP_VERSION);
    put64(out + TCP_HDR_LEN + 8, uuid);
    put64(out + TCP_HDR_LEN + 16, target);
    memcpy(out + TCP_HDR_LEN + HS_BASE, data, len);
    return TCP_HDR_LEN + HS_BASE + len;
}

/* 16 bytes from 32 hex digits; -1 if s is not that. */
static int parse_key(uint8_t key[16], const char *s)
{
    size_t i;
    if (s == NULL || strlen(s) != 32)
        return -1;
    for (i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        key[i] = (uint8_t)v;
    }
    return 0;
}

/* HMAC-SHA-256(key, "madrail handshake v1 tcp <role>\0" || uuid_i ||
 * uuid_a || nonce_i || nonce_a || len(rail_id) (4) || rail_id): the
 * transcript of rails/common/auth.h, framed here independently. */
static void hs_mac(uint8_t out[32], const uint8_t *key, size_t key_len, const char *role,
                   uint64_t uuid_i, uint64_t uuid_a, const uint8_t *nonce_i,
                   const uint8_t *nonce_a, const uint8_t rail_id[6])
{
    crypto_auth_hmacsha256_state st;
    char label[64];
    uint32_t id_len = 6;
    int n = snprintf(label, sizeof(label), "madrail handshake v1 tcp %s", role);

    crypto_auth_hmacsha256_init(&st, key, key_len);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, (size_t)n + 1);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&uuid_i, 8);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&uuid_a, 8);
    crypto_auth_hmacsha256_update(&st, nonce_i, 16);
    crypto_auth_hmacsha256_update(&st, nonce_a, 16);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&id_len, 4);
    crypto_auth_hmacsha256_update(&st, rail_id, 6);
    crypto_auth_hmacsha256_final(&st, out);
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

/*
 * The whole handshake on fd as uuid toward target (at sin): HELLO,
 * CHALLENGE, PROOF with the key's proof and no continuity proof.  Returns
 * the HELLO_ACK's status (its proof checked), -1 when the rail closed the
 * connection (*stage_p: 0 before the CHALLENGE, 1 after), -2 for a bad
 * answer.
 */
static int handshake(int fd, const struct sockaddr_in *sin, uint64_t uuid, uint64_t target,
                     const uint8_t key[16], int *stage_p)
{
    uint8_t frame[160], in[64], nonce_i[16], nonce_a[16], proof[96], mac_a[32], rail_id[6];
    uint32_t magic;
    uint16_t status;
    size_t n;

    *stage_p = 0;
    randombytes_buf(nonce_i, sizeof(nonce_i));
    n = build_hs(frame, F_HELLO, uuid, target, nonce_i, sizeof(nonce_i));
    if (write_all(fd, frame, n) != 0 || read_all(fd, in, TCP_HDR_LEN + HS_BASE + 16) != 0)
        return -1;
    memcpy(&magic, in + TCP_HDR_LEN, 4);
    if (in[0] != F_CHALLENGE || magic != TCP_MAGIC)
        return -2;
    *stage_p = 1;
    memcpy(nonce_a, in + TCP_HDR_LEN + HS_BASE, 16);
    memcpy(rail_id, &sin->sin_addr.s_addr, 4); /* the rail: its address, network order */
    memcpy(rail_id + 4, &sin->sin_port, 2);
    memset(proof, 0, sizeof(proof));
    hs_mac(proof, key, 16, "initiator", uuid, target, nonce_i, nonce_a, rail_id);
    n = build_hs(frame, F_PROOF, uuid, target, proof, sizeof(proof));
    if (write_all(fd, frame, n) != 0 || read_all(fd, in, TCP_HDR_LEN + HS_BASE + 32) != 0)
        return -1;
    hs_mac(mac_a, key, 16, "acceptor", uuid, target, nonce_i, nonce_a, rail_id);
    memcpy(&status, in + TCP_HDR_LEN + 6, 2);
    if (in[0] != F_HELLO_ACK || sodium_memcmp(mac_a, in + TCP_HDR_LEN + HS_BASE, 32) != 0)
        return -2;
    return status;
}

static int connect_to(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void publish(const char *dir, const char *name, const char *text)
{
    char tmp[4096], dst[4096];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
    snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    f = fopen(tmp, "w");
    if (!f) {
        printf("client: FAIL - cannot write %s\n", tmp);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    rename(tmp, dst);
}

int main(int argc, char **argv)
{
    char path[4096], ip[64], text[128];
    unsigned port;
    unsigned long long target, rreq, bytes, rank1;
    uint64_t me;
    uint8_t frame[64], key[16];
    struct sockaddr_in sin;
    size_t n;
    FILE *f;
    int fd, fd2, rc, stage;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (sodium_init() < 0 || parse_key(key, getenv("MADRAIL_JOB_KEY")) != 0) {
        printf("client: FAIL - libsodium, or MADRAIL_JOB_KEY not 32 hex digits\n");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/victim", argv[1]);
    if (wait_file(path, 120) != 0) {
        printf("client: FAIL - %s never appeared\n", path);
        return 1;
    }
    f = fopen(path, "r");
    if (!f || fscanf(f, "%63s %u %llx %llx %llu %llx", ip, &port, &target, &rreq, &bytes,
                     &rank1) != 6) {
        printf("client: FAIL - cannot parse %s\n", path);
        return 1;
    }
    fclose(f);
    me = ((uint64_t)getpid() << 32) ^ 0x5eedf00dbadc0deull;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1 || (fd = connect_to(&sin)) < 0) {
        printf("client: FAIL - connect %s:%u: %s\n", ip, port, strerror(errno));
        return 1;
    }
    rc = handshake(fd, &sin, me, (uint64_t)target, key, &stage);
    if (rc != 0) {
        printf("client: FAIL - handshake with %s:%u: %d (stage %d)\n", ip, port, rc, stage);
        return 1;
    }
    printf("client: connected to %s:%u as %016llx; FIN for receive %llx claiming %llu bytes\n",
           ip, port, (unsigned long long)me, rreq, bytes);
    n = build_fin(frame, (uint64_t)rreq, (uint64_t)bytes);
    if (write_all(fd, frame, n) != 0) {
        printf("client: FAIL - sending the FIN\n");
        return 1;
    }
    snprintf(text, sizeof(text), "%016llx\n", (unsigned long long)me);
    publish(argv[1], "forged", text);

    /* rank 1's uuid, with the key but not rank 1's session: refused after
     * the CHALLENGE, nothing answered */
    fd2 = connect_to(&sin);
    if (fd2 < 0) {
        printf("client: FAIL - second connect: %s\n", strerror(errno));
        return 1;
    }
    rc = handshake(fd2, &sin, (uint64_t)rank1, (uint64_t)target, key, &stage);
    close(fd2);
    if (rc == -1 && stage == 1)
        snprintf(text, sizeof(text), "refused\n");
    else
        snprintf(text, sizeof(text), "answered %d stage %d\n", rc, stage);
    printf("client: posing as rank 1 (%016llx): %s", rank1, text);
    publish(argv[1], "impostor", text);

    snprintf(path, sizeof(path), "%s/checked", argv[1]);
    if (wait_file(path, 120) != 0)
        printf("client: rank 0 never reported it had looked\n");
    close(fd);
    printf("client: done\n");
    return 0;
}
