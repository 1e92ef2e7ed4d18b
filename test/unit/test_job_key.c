/*
 * The job key at the core's level: where a context takes its key from
 * (madrail_context_params_t.job_key, MADRAIL_JOB_KEY, or random) and the
 * errors of a bad value, the rules of madrail_context_set_job_key, and what
 * the key changes in behaviour: two contexts with different keys never
 * exchange a byte (loop rails), and processes that hold the key but leave
 * before anything came of their connection do not make the peer table grow
 * (raw handshakes on a tcp rail), while one that delivered a message stays.
 *
 * White box where it must be: the peer table is read through core.h (the
 * public API has no peer count) and the raw handshakes use the tcp wire
 * format of rails/tcp/tcp.h.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "rails/tcp/tcp.h"
#include "util/clock.h"
#include "util/log.h"

#include "unit_check.h"

static const uint8_t key1[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
static const uint8_t key2[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

static int verbose;

/* Live peers of a context (retired ones do not count). */
static unsigned live_peers(madrail_context_t ctx)
{
    return ctx->npeers - ctx->npeer_free;
}

/* Open a context with MADRAIL_RAILS=rails and, if given, MADRAIL_JOB_KEY=env_key. */
static madrail_status_t open_ctx(const char *rails, const char *env_key,
                                 const uint8_t *params_key, madrail_context_t *ctx_p)
{
    char r[128], k[128];
    const char *ov[4] = {verbose ? "MADRAIL_LOG_LEVEL=debug" : "MADRAIL_LOG_LEVEL=error", r, NULL,
                         NULL};
    madrail_context_params_t prm = {.overrides = ov, .job_key = params_key};

    snprintf(r, sizeof(r), "MADRAIL_RAILS=%s", rails);
    if (env_key != NULL) {
        snprintf(k, sizeof(k), "MADRAIL_JOB_KEY=%s", env_key);
        ov[2] = k;
    }
    return madrail_context_init(&prm, ctx_p);
}

static void test_parse(void)
{
    static const struct {
        const char *value, *what;
    } bad[] = {
        {"0123", "too short"},
        {"00112233445566778899aabbccddeeff0", "33 digits"},
        {"00112233445566778899aabbccddeefg", "a non-hex digit"},
        {"00112233445566778899aabbccddee f", "a space"},
        {"0x112233445566778899aabbccddeeff", "a 0x prefix"},
        {"00000000000000000000000000000000", "all zero"},
    };
    madrail_context_t ctx;
    madrail_job_key_origin_t origin;
    madrail_status_t st;
    uint8_t k[16];
    size_t i;
    int lvl = mdr_log_level;

    mdr_log_level = -1; /* the errors are expected */
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        st = open_ctx("loop:jk0", bad[i].value, NULL, &ctx);
        check(st == MADRAIL_ERR_CONFIG, "MADRAIL_JOB_KEY with %s: %s", bad[i].what,
              madrail_status_str(st));
        if (st == MADRAIL_OK)
            madrail_context_finalize(ctx);
    }
    mdr_log_level = lvl;

    if (open_ctx("loop:jk0", "00112233445566778899AaBbCcDdEeFf", NULL, &ctx) != MADRAIL_OK) {
        check(0, "a good MADRAIL_JOB_KEY opens the context");
        return;
    }
    st = madrail_context_job_key(ctx, k, &origin);
    check(st == MADRAIL_OK && origin == MADRAIL_JOB_KEY_ENV && memcmp(k, key1, 16) == 0,
          "MADRAIL_JOB_KEY (mixed case) read back, origin ENV (%d)", (int)origin);
    check(madrail_context_job_key(ctx, NULL, NULL) == MADRAIL_ERR_INVALID &&
              madrail_context_job_key(NULL, k, NULL) == MADRAIL_ERR_INVALID,
          "madrail_context_job_key refuses NULL");
    madrail_context_finalize(ctx);

    /* the application's key wins, and MADRAIL_JOB_KEY is then not read */
    if (open_ctx("loop:jk0", "not a key at all", key2, &ctx) != MADRAIL_OK) {
        check(0, "params.job_key with a bad MADRAIL_JOB_KEY opens the context");
        return;
    }
    st = madrail_context_job_key(ctx, k, &origin);
    check(st == MADRAIL_OK && origin == MADRAIL_JOB_KEY_PARAMS && memcmp(k, key2, 16) == 0,
          "params.job_key takes precedence over MADRAIL_JOB_KEY (origin %d)", (int)origin);
    madrail_context_finalize(ctx);
    {
        static const uint8_t zero[16] = {0};
        mdr_log_level = -1;
        st = open_ctx("loop:jk0", NULL, zero, &ctx);
        mdr_log_level = lvl;
        check(st == MADRAIL_ERR_INVALID, "an all-zero params.job_key is refused: %s",
              madrail_status_str(st));
        if (st == MADRAIL_OK)
            madrail_context_finalize(ctx);
    }

    /* nothing given: random, a different one per context */
    {
        madrail_context_t c2;
        uint8_t k2[16], zero[16] = {0};
        madrail_job_key_origin_t o2;
        if (open_ctx("loop:jk0", NULL, NULL, &ctx) != MADRAIL_OK ||
            open_ctx("loop:jk0", NULL, NULL, &c2) != MADRAIL_OK) {
            check(0, "open two contexts without a key");
            return;
        }
        madrail_context_job_key(ctx, k, &origin);
        madrail_context_job_key(c2, k2, &o2);
        check(origin == MADRAIL_JOB_KEY_RANDOM && o2 == MADRAIL_JOB_KEY_RANDOM &&
                  memcmp(k, k2, 16) != 0 && memcmp(k, zero, 16) != 0,
              "without a key each context makes its own random one");
        madrail_context_finalize(ctx);
        madrail_context_finalize(c2);
    }
}

static madrail_status_t add_peer(madrail_context_t to, madrail_context_t of, madrail_peer_t *p)
{
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len = sizeof(addr);
    madrail_status_t st = madrail_context_address(of, addr, &len);

    return st == MADRAIL_OK ? madrail_peer_add(to, addr, len, p) : st;
}

static void test_set(void)
{
    static const uint8_t zero[16] = {0};
    madrail_context_t a, b;
    madrail_job_key_origin_t origin;
    madrail_peer_t p;
    uint8_t k[16];
    int lvl = mdr_log_level;

    if (open_ctx("loop:js0", NULL, NULL, &a) != MADRAIL_OK ||
        open_ctx("loop:js0", NULL, NULL, &b) != MADRAIL_OK) {
        check(0, "open contexts for set_job_key");
        return;
    }
    mdr_log_level = -1;
    check(madrail_context_set_job_key(a, key1, 15) == MADRAIL_ERR_INVALID &&
              madrail_context_set_job_key(a, key1, 17) == MADRAIL_ERR_INVALID &&
              madrail_context_set_job_key(a, NULL, 16) == MADRAIL_ERR_INVALID &&
              madrail_context_set_job_key(NULL, key1, 16) == MADRAIL_ERR_INVALID &&
              madrail_context_set_job_key(a, zero, 16) == MADRAIL_ERR_INVALID,
          "set_job_key refuses another length, NULL and an all-zero key");
    mdr_log_level = lvl;
    check(madrail_context_job_key(a, k, &origin) == MADRAIL_OK &&
              origin == MADRAIL_JOB_KEY_RANDOM,
          "a refused set_job_key leaves the key alone");
    check(madrail_context_set_job_key(a, key1, 16) == MADRAIL_OK &&
              madrail_context_job_key(a, k, &origin) == MADRAIL_OK &&
              origin == MADRAIL_JOB_KEY_SET && memcmp(k, key1, 16) == 0,
          "set_job_key before any peer: key replaced, origin SET");
    check(madrail_context_set_job_key(a, key2, 16) == MADRAIL_OK,
          "set_job_key may be called again while there is no peer");
    check(add_peer(a, b, &p) == MADRAIL_OK, "add a peer");
    mdr_log_level = -1;
    check(madrail_context_set_job_key(a, key1, 16) == MADRAIL_ERR_INVALID,
          "set_job_key after the first peer is refused");
    mdr_log_level = lvl;
    check(madrail_context_job_key(a, k, NULL) == MADRAIL_OK && memcmp(k, key2, 16) == 0,
          "... and the key is unchanged");
    madrail_context_finalize(a);
    madrail_context_finalize(b);
}

/* Send one eager message a -> b and see whether b gets it. */
static int exchange(madrail_context_t a, madrail_context_t b, madrail_peer_t a2b, int *send_err)
{
    char out[64] = "job key", in[64] = {0};
    madrail_request_t sr = NULL, rr = NULL;
    madrail_info_t info;
    int done = 0, sdone = 0, i;
    madrail_status_t st;

    *send_err = 0;
    if (madrail_irecv(b, MADRAIL_ANY_PEER, in, sizeof(in), 7, 0, &rr) != MADRAIL_OK)
        return 0;
    if (madrail_isend(a, a2b, out, sizeof(out), 7, 0, &sr) != MADRAIL_OK)
        *send_err = 1;
    for (i = 0; i < 20000 && !done; i++) {
        madrail_progress(a);
        madrail_progress(b);
        if (sr != NULL && !sdone) {
            st = madrail_test(&sr, &sdone, NULL);
            if (st != MADRAIL_OK && sdone)
                *send_err = 1;
        }
        madrail_test(&rr, &done, &info);
    }
    if (!done) {
        madrail_cancel(b, rr);
        madrail_wait(&rr, NULL);
    }
    for (i = 0; sr != NULL && !sdone && i < 1000; i++) {
        madrail_progress(a);
        if (madrail_test(&sr, &sdone, NULL) != MADRAIL_OK && sdone)
            *send_err = 1;
    }
    return done && memcmp(in, out, sizeof(out)) == 0;
}

static void test_loop_keys(void)
{
    madrail_context_t a, b;
    madrail_peer_t a2b, b2a;
    int got, err, lvl = mdr_log_level;

    if (open_ctx("loop:jl0", NULL, key1, &a) != MADRAIL_OK ||
        open_ctx("loop:jl0", NULL, key2, &b) != MADRAIL_OK) {
        check(0, "open loop contexts with two keys");
        return;
    }
    add_peer(a, b, &a2b);
    add_peer(b, a, &b2a);
    if (!verbose)
        mdr_log_level = -1; /* the refusal and the peer failure are expected */
    got = exchange(a, b, a2b, &err);
    check(!got && live_peers(b) == 1, "another job's context: nothing delivered, no peer added "
                                      "at the receiver (%u peers)",
          live_peers(b));
    {
        int i;
        for (i = 0; i < 100; i++) {
            madrail_progress(a);
            madrail_progress(b);
        }
    }
    mdr_log_level = lvl;
    /* (white box: a send to an unreachable peer is the sends' business) */
    check(mdr_peer_get(a, a2b) != NULL && mdr_peer_get(a, a2b)->rails[0].down,
          "the sender saw its connection closed: its rail to that peer is down");
    madrail_context_finalize(a);
    madrail_context_finalize(b);

    /* the same two contexts, given one key before they peer: they talk */
    if (open_ctx("loop:jl1", NULL, NULL, &a) != MADRAIL_OK ||
        open_ctx("loop:jl1", NULL, NULL, &b) != MADRAIL_OK) {
        check(0, "open loop contexts for set_job_key");
        return;
    }
    madrail_context_set_job_key(a, key1, 16);
    madrail_context_set_job_key(b, key1, 16);
    add_peer(a, b, &a2b);
    add_peer(b, a, &b2a);
    got = exchange(a, b, a2b, &err);
    check(got && !err, "contexts given one key with set_job_key exchange a message");
    madrail_context_finalize(a);
    madrail_context_finalize(b);
}

/* 127.0.0.1:port of a context's rail 0 (a tcp rail), from its address. */
static int tcp_port_of(madrail_context_t ctx, struct sockaddr_in *sin)
{
    uint8_t addr[MADRAIL_ADDR_MAX];
    size_t len = sizeof(addr);

    if (madrail_context_address(ctx, addr, &len) != MADRAIL_OK || len < 17 + 10 + 12 ||
        addr[16] < 1 || memcmp(addr + 17, "tcp", 4) != 0)
        return -1;
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    memcpy(&sin->sin_addr.s_addr, addr + 17 + 10 + 4, 4);
    memcpy(&sin->sin_port, addr + 17 + 10 + 8, 2);
    return 0;
}

static uint64_t uuid_of(madrail_context_t ctx)
{
    return ctx->uuid;
}

/* Read n bytes from fd while progressing ctx (5 s at most); the bytes read. */
static size_t recv_progress(madrail_context_t ctx, int fd, uint8_t *buf, size_t n)
{
    double end = mdr_time_sec() + 5;
    size_t got = 0;
    ssize_t k;

    while (got < n && mdr_time_sec() < end) {
        madrail_progress(ctx);
        k = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
    }
    return got;
}

/* Connect to sin and do the tcp handshake as uuid toward target, proving
 * key (HELLO, CHALLENGE, PROOF, HELLO_ACK: tcp.h), progressing ctx
 * meanwhile.  Returns the bytes answered: MDR_TCP_HELLO_LEN (the
 * CHALLENGE) plus the HELLO_ACK's when the answer was OK and proved the
 * key, less when the rail closed the connection; -1 on a socket error. */
static long raw_handshake(madrail_context_t ctx, const struct sockaddr_in *sin, uint64_t uuid,
                          uint64_t target, const uint8_t *key)
{
    uint8_t frame[MDR_TCP_HS_MAX], buf[MDR_TCP_HS_MAX], nonce_i[MDR_AUTH_NONCE_LEN];
    uint8_t nonce_a[MDR_AUTH_NONCE_LEN], proof[3 * MDR_AUTH_MAC_LEN], mac_a[MDR_AUTH_MAC_LEN];
    uint8_t rail_id[6];
    const size_t ack_len = MDR_TCP_HDR_LEN + MDR_TCP_HS_ACK_BODY;
    mdr_auth_transcript_t t = {"tcp", uuid, target, nonce_i, nonce_a, rail_id, 6};
    mdr_tcp_hdr_t h;
    mdr_tcp_hello_t b;
    long got;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0 || connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    memset(&h, 0, sizeof(h));
    memset(&b, 0, sizeof(b));
    h.type = MDR_TCP_F_HELLO;
    h.len = MDR_TCP_HS_NONCE_BODY;
    b.magic = MDR_TCP_MAGIC;
    b.version = MDR_TCP_VERSION;
    b.uuid = uuid;
    b.target = target;
    mdr_auth_nonce(nonce_i);
    memcpy(b.data, nonce_i, sizeof(nonce_i));
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &b, h.len);
    if (send(fd, frame, MDR_TCP_HELLO_LEN, 0) != MDR_TCP_HELLO_LEN) {
        close(fd);
        return -1;
    }
    got = (long)recv_progress(ctx, fd, buf, MDR_TCP_HELLO_LEN);
    if (got < MDR_TCP_HELLO_LEN || buf[0] != MDR_TCP_F_CHALLENGE) {
        close(fd);
        return got;
    }
    memcpy(nonce_a, buf + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE, sizeof(nonce_a));
    memcpy(rail_id, &sin->sin_addr.s_addr, 4);
    memcpy(rail_id + 4, &sin->sin_port, 2);
    memset(proof, 0, sizeof(proof));
    mdr_auth_mac(proof, key, MDR_JOB_KEY_LEN, MDR_AUTH_INITIATOR, &t);
    h.type = MDR_TCP_F_PROOF;
    h.len = MDR_TCP_HS_PROOF_BODY;
    memcpy(b.data, proof, sizeof(proof));
    memcpy(frame, &h, sizeof(h));
    memcpy(frame + sizeof(h), &b, h.len);
    if (send(fd, frame, sizeof(h) + h.len, 0) != (ssize_t)(sizeof(h) + h.len)) {
        close(fd);
        return -1;
    }
    if (recv_progress(ctx, fd, buf, ack_len) == ack_len) {
        mdr_auth_mac(mac_a, key, MDR_JOB_KEY_LEN, MDR_AUTH_ACCEPTOR, &t);
        if (buf[0] == MDR_TCP_F_HELLO_ACK && buf[MDR_TCP_HDR_LEN + 6] == MDR_TCP_ACK_OK &&
            mdr_auth_mac_equal(mac_a, buf + MDR_TCP_HDR_LEN + MDR_TCP_HS_BASE))
            got += (long)ack_len;
    }
    close(fd);
    return got;
}

static void test_tcp_leavers(void)
{
    madrail_context_t a, b;
    madrail_peer_t b2a, newp, x;
    struct sockaddr_in sin;
    uint8_t k[16];
    long got;
    int i, answered = 0, lvl = mdr_log_level;

    if (open_ctx("tcp:lo", NULL, key1, &a) != MADRAIL_OK ||
        open_ctx("tcp:lo", NULL, key1, &b) != MADRAIL_OK || tcp_port_of(a, &sin) != 0) {
        check(0, "open tcp:lo contexts");
        return;
    }
    madrail_context_job_key(a, k, NULL);
    mdr_log_level = -1;

    /* 200 processes that hold the key connect, are accepted, and leave */
    for (i = 0; i < 200; i++) {
        got = raw_handshake(a, &sin, 0x70000 + (uint64_t)i, uuid_of(a), k);
        answered += got == MDR_TCP_HELLO_LEN + MDR_TCP_HDR_LEN + MDR_TCP_HS_ACK_BODY;
    }
    for (i = 0; i < 200; i++)
        madrail_progress(a);
    check(answered == 200 && live_peers(a) == 0 && a->npeers <= 1,
          "200 key holders that handshake and leave: %d accepted, %u live peers left, table "
          "of %u",
          answered, live_peers(a), a->npeers);
    /* a keyless one is answered nothing */
    memset(k, 0, sizeof(k));
    got = raw_handshake(a, &sin, 0x80000, uuid_of(a), k);
    check(got == MDR_TCP_HELLO_LEN && live_peers(a) == 0,
          "a keyless handshake gets the CHALLENGE and nothing more (%ld bytes back)", got);

    /* one that delivered a message stays, under the index it was seen with */
    add_peer(b, a, &b2a);
    {
        char in[16] = {0};
        madrail_info_t info;
        madrail_request_t rr;
        int done = 0;
        madrail_request_t sr;
        int sdone = 0;
        madrail_irecv(a, MADRAIL_ANY_PEER, in, sizeof(in), 5, 0, &rr);
        /* not a blocking send: it completes once its bytes left b, which
         * needs a to accept the connection, so both must progress */
        madrail_isend(b, b2a, "stay", 5, 5, 0, &sr);
        for (i = 0; i < 100000 && !(done && sdone); i++) {
            madrail_progress(a);
            madrail_progress(b);
            if (!done)
                madrail_test(&rr, &done, &info);
            if (!sdone)
                madrail_test(&sr, &sdone, NULL);
        }
        check(done && strcmp(in, "stay") == 0 && live_peers(a) == 1,
              "a process that sent a message is a peer (%u live)", live_peers(a));
        madrail_context_finalize(b);
        for (i = 0; i < 2000; i++)
            madrail_progress(a);
        check(live_peers(a) == 1 && done && mdr_peer_get(a, info.source) != NULL,
              "... and stays one after it left (index %u still valid)", info.source);
        /* a new peer takes a fresh index, not the one the user saw */
        open_ctx("tcp:lo", NULL, key1, &b);
        newp = 99;
        add_peer(a, b, &newp);
        check(newp != info.source && live_peers(a) == 2, "a new peer gets index %u (seen: %u)",
              newp, info.source);
        x = 99;
        add_peer(a, b, &x);
        check(x == newp, "adding it again gives the same index");
    }
    mdr_log_level = lvl;
    madrail_context_finalize(a);
    madrail_context_finalize(b);
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    mdr_log_set_level(verbose ? MDR_LOG_DEBUG : MDR_LOG_ERROR);
    test_parse();
    test_set();
    test_loop_keys();
    test_tcp_leavers();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
