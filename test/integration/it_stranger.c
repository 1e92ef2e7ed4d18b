/*
 * it_stranger: strangers knock on the tcp rails of a running two-rank job.
 *
 * Rank 1 starts a stranger in a thread of its own: it knows everything a
 * snooper of the process manager could (both ranks' uuids, rank 0's rail
 * ports) except the job key, and it talks to rank 0's rails with raw
 * sockets while the two ranks exchange byte-checked messages of every
 * path (eager, medium, rendezvous striped over both rails):
 *   (a) HELLOs without the key and with another job's key;
 *   (b) a HELLO captured from a real madrail context of another job (its
 *       own random key) that named rank 0's uuid, replayed verbatim;
 *   (c) HELLOs posing as rank 1 (its uuid) with a wrong key, on each rail;
 *   (d) a flood: FLOOD (or argv[1]) connections with keyless HELLOs or garbage, plus
 *       SILENT connections that send nothing or half a HELLO.
 * Every stranger must get nothing back: the connection is closed with not
 * one byte sent (no uuid, no reason), and the silent ones are closed by
 * the connect timeout.  From version 3 (challenge-response, the key never
 * sent) a HELLO for rank 0 is answered with a CHALLENGE, rank 0's nonce,
 * and nothing else: the stranger then sends a PROOF it cannot make (for
 * (b), the other job's real one, made for that job's key and another
 * nonce) and must get no other byte; the CHALLENGE is not counted as an
 * answer, anything beyond it is.  Rank 0 then checks that its resident memory grew
 * by less than RSS_BOUND_KB, that the strangers added no peer (a new
 * madrail_peer_add still gets index 1: rank 1 is 0), and both ranks that
 * no rail failed over (a stranger replacing a live connection would show).
 *
 * The stranger speaks the tcp protocol version rank 0's address
 * advertises (version 1: 24-byte HELLO without a key; version 2: 40 bytes
 * with one; version 3: 40 bytes with a nonce, then PROOF), so the test
 * means the same against a library from before the job key, where the
 * strangers were answered and accepted.
 */
#include "mdr_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "it_common.c"

#define TAG_ADDR 0x4144ull
#define TAG_DATA 0x44000000ull
#define TAG_STOP 0x53544f50ull
#define FLOOD 2000
#define SILENT 100
#define RSS_BOUND_KB (6 * 1024)
#define MAX_RAILS 8

/* What the stranger knows. */
typedef struct stranger {
    uint64_t uuid0, uuid1;          /* rank 0's and rank 1's uuids */
    int nrails;                     /* rank 0's tcp rails */
    struct sockaddr_in rail[MAX_RAILS];
    int version;                    /* tcp protocol version rank 0 advertises */
    /* results */
    unsigned attempts, answered, not_closed, silent_closed, connect_fail;
    unsigned tried[4], answered_by[4]; /* per attack (a)..(d) */
    int flood;                      /* connections of (d) */
    long bytes_back;                /* every byte any stranger got */
    int replay_ok;                  /* a handshake was captured for (b) */
    size_t replay_len;
    volatile int done;
    char note[256];
} stranger_t;

/* ---------------- raw sockets ---------------- */

static int st_connect(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until the peer closes, a byte arrives (then stop: an answer is the
 * failure we look for) or timeout_ms pass.  Returns 1 if closed, 0 if not;
 * *got_p = bytes read. */
static int st_wait_close(int fd, int timeout_ms, long *got_p)
{
    struct pollfd p = {fd, POLLIN, 0};
    char buf[512];
    double end = it_now() + timeout_ms / 1000.0;
    ssize_t n;

    *got_p = 0;
    while (it_now() < end) {
        int left = (int)((end - it_now()) * 1000.0) + 1;
        if (poll(&p, 1, left) <= 0)
            continue;
        n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0) {
            *got_p += n;
            return 0; /* answered: no need to wait for more */
        }
        if (n == 0 || errno == ECONNRESET)
            return 1;
        if (errno != EINTR && errno != EAGAIN)
            return 1;
    }
    return 0;
}

/* A HELLO of the advertised version: 8-byte header, then magic, version,
 * status, uuid, target (and the key in version 2, a random nonce in
 * version 3). */
static size_t st_hello(const stranger_t *s, uint8_t *f, uint64_t uuid, uint64_t target,
                       const uint8_t *key)
{
    uint32_t len = s->version >= 2 ? 40 : 24, magic = 0x4d445254u;
    uint16_t ver = (uint16_t)s->version;

    memset(f, 0, 8 + len);
    f[0] = 3; /* HELLO */
    memcpy(f + 4, &len, 4);
    memcpy(f + 8, &magic, 4);
    memcpy(f + 12, &ver, 2);
    memcpy(f + 16, &uuid, 8);
    memcpy(f + 24, &target, 8);
    if (s->version == 2 && key != NULL)
        memcpy(f + 32, key, 16);
    if (s->version >= 3 && getrandom(f + 32, 16, 0) != 16)
        memset(f + 32, 0x6e, 16);
    return 8 + len;
}

/* Version 3: the PROOF a stranger can make without the key (random
 * bytes: a proof under a wrong key is as good), same uuids as its HELLO. */
static size_t st_proof(uint8_t *f, const uint8_t *hello)
{
    uint32_t len = 120;

    memcpy(f, hello, 32); /* header, magic, version, status, uuid, target */
    f[0] = 7;             /* PROOF */
    memcpy(f + 4, &len, 4);
    if (getrandom(f + 32, 96, 0) != 96)
        memset(f + 32, 0x70, 96);
    return 8 + len;
}

/* Version 3: read rank 0's CHALLENGE (48 bytes, type 6) from fd; 1 when it
 * came, 0 when the connection closed first or timeout_ms passed.
 * *extra_p: bytes read that were not that CHALLENGE. */
static int st_challenge(int fd, int timeout_ms, long *extra_p)
{
    struct pollfd p = {fd, POLLIN, 0};
    uint8_t buf[48];
    size_t got = 0;
    double end = it_now() + timeout_ms / 1000.0;
    ssize_t n;

    *extra_p = 0;
    while (got < sizeof(buf) && it_now() < end) {
        int left = (int)((end - it_now()) * 1000.0) + 1;
        if (poll(&p, 1, left) <= 0)
            continue;
        n = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == sizeof(buf) && buf[0] == 6)
        return 1;
    *extra_p = (long)got;
    return 0;
}

/* One stranger: connect to rail r, send len bytes, expect a silent close.
 * Version 3: a HELLO (bytes) may be answered by a CHALLENGE, and then proof
 * (proof_len bytes; NULL: a random one) goes, to a silent close. */
static void st_knock3(stranger_t *s, int r, const uint8_t *bytes, size_t len,
                      const uint8_t *proof, size_t proof_len, const char *what)
{
    int cat = what[1] - 'a';
    uint8_t own[128];
    long got = 0;
    int fd, closed;

    s->attempts++;
    s->tried[cat]++;
    fd = st_connect(&s->rail[r]);
    if (fd < 0) {
        s->connect_fail++;
        return;
    }
    if (len > 0 && send(fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len) {
        close(fd);
        return;
    }
    if (s->version >= 3 && len >= 48 && bytes[0] == 3 &&
        st_challenge(fd, 5000, &got)) {
        if (proof == NULL) {
            proof_len = st_proof(own, bytes);
            proof = own;
        }
        (void)send(fd, proof, proof_len, MSG_NOSIGNAL);
    }
    if (got == 0)
        closed = st_wait_close(fd, 5000, &got);
    else
        closed = 0;
    close(fd);
    s->bytes_back += got;
    if (got > 0) {
        s->answered_by[cat]++;
        if (s->answered++ < 5)
            printf("stranger: %s on rail %d: answered with %ld bytes\n", what, r, got);
    } else if (!closed) {
        if (s->not_closed++ < 5)
            printf("stranger: %s on rail %d: connection left open\n", what, r);
    }
}

static void st_knock(stranger_t *s, int r, const uint8_t *bytes, size_t len, const char *what)
{
    st_knock3(s, r, bytes, len, NULL, 0, what);
}

/* (b): a HELLO made by a madrail context of another job (its own random
 * key), toward an address that names rank 0's uuid but points at a socket
 * of ours. */
static int st_capture(stranger_t *s, uint8_t *out, size_t cap, size_t *len_p)
{
    static const char *const ov[] = {"MADRAIL_RAILS=tcp:lo", "MADRAIL_LOG_LEVEL=error",
                                     "MADRAIL_TCP_CONNECT_TIMEOUT=1s", NULL};
    uint8_t other_key[MADRAIL_JOB_KEY_LEN];
    /* another job: its own key, whatever MADRAIL_JOB_KEY this process has */
    madrail_context_params_t prm = {.overrides = ov, .job_key = other_key};
    madrail_context_t x = NULL;
    madrail_request_t req = NULL;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    uint8_t addr[MADRAIL_ADDR_MAX], msg[8] = {0};
    size_t alen = sizeof(addr), got = 0, want = 8;
    madrail_peer_t p;
    double end;
    int lfd = -1, cfd = -1, rc = -1;

    if (getrandom(other_key, sizeof(other_key), 0) != sizeof(other_key))
        memset(other_key, 0x3c, sizeof(other_key));
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(lfd, 4) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &slen) != 0)
        goto out;
    if (madrail_context_init(&prm, &x) != MADRAIL_OK)
        goto out;
    /* an address: rank 0's uuid, one tcp rail at our listener */
    if (madrail_context_address(x, addr, &alen) != MADRAIL_OK || addr[16] != 1)
        goto out;
    memcpy(addr + 8, &s->uuid0, 8);
    memcpy(addr + 17 + 10 + 4, &sin.sin_addr.s_addr, 4);
    memcpy(addr + 17 + 10 + 8, &sin.sin_port, 2);
    if (madrail_peer_add(x, addr, alen, &p) != MADRAIL_OK ||
        madrail_isend(x, p, msg, sizeof(msg), 1, 0, &req) != MADRAIL_OK)
        goto out;
    for (end = it_now() + 5; it_now() < end && (cfd < 0 || got < want);) {
        madrail_progress(x);
        if (cfd < 0) {
            struct pollfd pl = {lfd, POLLIN, 0};
            if (poll(&pl, 1, 1) == 1)
                cfd = accept(lfd, NULL, NULL);
            continue;
        }
        {
            struct pollfd pc = {cfd, POLLIN, 0};
            ssize_t n;
            if (poll(&pc, 1, 1) != 1)
                continue;
            n = recv(cfd, out + got, want - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
            if (got == 8 && want == 8) {
                uint32_t hl;
                memcpy(&hl, out + 4, 4);
                if (out[0] != 3 || hl > cap - 8)
                    break;
                want = 8 + hl;
            } else if (got == want && s->version >= 3 && want == 48) {
                /* version 3: challenge it, as rank 0 would, for its PROOF */
                uint8_t ch[48];
                uint32_t cl = 40;
                memcpy(ch, out, 48);
                ch[0] = 6; /* CHALLENGE */
                memcpy(ch + 4, &cl, 4);
                memcpy(ch + 16, &s->uuid0, 8);
                memcpy(ch + 24, out + 16, 8);
                if (getrandom(ch + 32, 16, 0) != 16)
                    memset(ch + 32, 0x63, 16);
                if (cap < 48 + 128 || send(cfd, ch, sizeof(ch), MSG_NOSIGNAL) != 48)
                    break;
                want = 48 + 128; /* its PROOF: 8 + 120 */
            }
        }
    }
    if (cfd >= 0 && got == want && want > 8 && (s->version < 3 || want == 48 + 128)) {
        *len_p = got;
        rc = 0;
    }
out:
    if (cfd >= 0)
        close(cfd); /* the other job's connection fails: its send is done */
    if (lfd >= 0)
        close(lfd);
    if (x != NULL) {
        if (req != NULL) {
            end = it_now() + 5;
            while (req != NULL && it_now() < end) {
                int flag = 0;
                madrail_test(&req, &flag, NULL);
            }
        }
        for (end = it_now() + 2; it_now() < end;)
            madrail_progress(x);
        madrail_context_finalize(x);
    }
    return rc;
}

static void *st_main(void *arg)
{
    stranger_t *s = arg;
    uint8_t f[256], key[16], zero[16] = {0};
    size_t n;
    int r, i, silent[SILENT];

    it_sleep_ms(100); /* let the ranks' traffic start */
    /* (a) no key, another job's key */
    for (r = 0; r < s->nrails; r++) {
        n = st_hello(s, f, 0x5354520000000001ull, s->uuid0, zero);
        st_knock(s, r, f, n, "(a) HELLO without a key");
        if (getrandom(key, sizeof(key), 0) != sizeof(key))
            memset(key, 0x5a, sizeof(key));
        n = st_hello(s, f, 0x5354520000000002ull, s->uuid0, key);
        st_knock(s, r, f, n, "(a) HELLO with another job's key");
    }
    /* (b) a real HELLO of another job, replayed */
    if (st_capture(s, f, sizeof(f), &n) == 0) {
        s->replay_ok = 1;
        s->replay_len = n;
        for (r = 0; r < s->nrails; r++) {
            if (s->version >= 3) /* its HELLO, then (after our CHALLENGE) its PROOF */
                st_knock3(s, r, f, 48, f + 48, n - 48, "(b) replayed handshake of another job");
            else
                st_knock(s, r, f, n, "(b) replayed HELLO of another job");
        }
    } else {
        snprintf(s->note, sizeof(s->note), "could not capture another job's HELLO");
    }
    /* (c) posing as rank 1 */
    for (r = 0; r < s->nrails; r++) {
        if (getrandom(key, sizeof(key), 0) != sizeof(key))
            memset(key, 0xa5, sizeof(key));
        n = st_hello(s, f, s->uuid1, s->uuid0, key);
        st_knock(s, r, f, n, "(c) HELLO posing as rank 1");
        n = st_hello(s, f, s->uuid1, s->uuid0, zero);
        st_knock(s, r, f, n, "(c) keyless HELLO posing as rank 1");
    }
    /* (d) silent connections and half HELLOs first (they wait for the
     * connect timeout, all at once), then the flood */
    for (i = 0; i < SILENT; i++) {
        silent[i] = st_connect(&s->rail[i % s->nrails]);
        if (silent[i] >= 0 && i % 2 == 1) {
            n = st_hello(s, f, 0x5354540000000000ull + (uint64_t)i, s->uuid0, NULL);
            (void)send(silent[i], f, n / 2, MSG_NOSIGNAL);
        }
    }
    for (i = 0; i < s->flood; i++) {
        r = i % s->nrails;
        if (i % 10 == 7) {
            static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
            st_knock(s, r, (const uint8_t *)junk, sizeof(junk), "(d) garbage");
        } else {
            n = st_hello(s, f, 0x5354530000000000ull + (uint64_t)i, s->uuid0, NULL);
            st_knock(s, r, f, n, "(d) keyless HELLO");
        }
    }
    for (i = 0; i < SILENT; i++) {
        long got = 0;
        if (silent[i] < 0) {
            s->connect_fail++;
            continue;
        }
        if (st_wait_close(silent[i], 8000, &got) && got == 0)
            s->silent_closed++;
        s->bytes_back += got;
        close(silent[i]);
    }
    s->done = 1;
    return NULL;
}

/* ---------------- the job ---------------- */

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static uint64_t addr_uuid(const uint8_t *a)
{
    uint64_t u;
    memcpy(&u, a + 8, 8);
    return u;
}

/* rank 0's tcp rails from its address */
static int parse_tcp_rails(stranger_t *s, const uint8_t *a, size_t len)
{
    size_t off = 17;
    int r, nr = a[16];

    s->nrails = 0;
    for (r = 0; r < nr && off + 10 <= len; r++) {
        uint16_t alen;
        memcpy(&alen, a + off + 8, 2);
        if (strncmp((const char *)a + off, "tcp", 8) == 0 && alen >= 12 && s->nrails < MAX_RAILS &&
            off + 10 + alen <= len) {
            struct sockaddr_in *sin = &s->rail[s->nrails++];
            memset(sin, 0, sizeof(*sin));
            sin->sin_family = AF_INET;
            memcpy(&sin->sin_addr.s_addr, a + off + 10 + 4, 4);
            memcpy(&sin->sin_port, a + off + 10 + 8, 2);
            s->version = a[off + 10 + 10];
        }
        off += 10 + alen;
    }
    return s->nrails;
}

static const size_t sizes[] = {100, 5000, 40000, 300000};

/* One round: rank 1 sends, rank 0 checks and answers, rank 1 checks. */
static void round_trip(it_env_t *e, int k, uint8_t *buf, int *stop_sent, int stop)
{
    madrail_peer_t other = e->job.peers[1 - e->rank];
    size_t len = sizes[k % 4], first;
    madrail_info_t info;
    uint64_t seed_q = it_seed(k, 1, 0), seed_a = it_seed(k, 2, 0);

    if (e->rank == 1) {
        if (stop) {
            IT_CALL(e, madrail_send(e->ctx, other, buf, 0, TAG_STOP, 0));
            *stop_sent = 1;
            return;
        }
        it_fill(buf, len, seed_q);
        IT_CALL(e, madrail_send(e->ctx, other, buf, len, TAG_DATA | (uint64_t)k, 0));
        memset(buf, 0, len);
        IT_CALL(e, madrail_recv(e->ctx, other, buf, len, TAG_DATA | (uint64_t)k, 0, &info));
        it_expect(e, info.length == len && it_verify(buf, len, seed_a, &first) == 0,
                  "round %d: answer of %zu bytes intact", k, len);
    } else {
        IT_CALL(e, madrail_recv(e->ctx, other, buf, sizes[3], 0, MADRAIL_TAG_ANY, &info));
        if (info.tag == TAG_STOP) {
            *stop_sent = 1;
            return;
        }
        k = (int)(info.tag & 0xffffff);
        len = sizes[k % 4];
        it_expect(e, info.tag == (TAG_DATA | (uint64_t)k) && info.length == len &&
                         it_verify(buf, len, it_seed(k, 1, 0), &first) == 0,
                  "round %d: message of %zu bytes intact", k, len);
        it_fill(buf, len, it_seed(k, 2, 0));
        IT_CALL(e, madrail_send(e->ctx, other, buf, len, TAG_DATA | (uint64_t)k, 0));
    }
}

int main(int argc, char **argv)
{
    it_env_t e;
    stranger_t s;
    pthread_t th;
    uint8_t addr[MADRAIL_ADDR_MAX], raddr[MADRAIL_ADDR_MAX], *buf;
    size_t alen = sizeof(addr);
    madrail_info_t info;
    long rss0 = 0, rss1;
    int rc, k, stop = 0, r, n;

    rc = it_setup(&e, "it_stranger", 2, NULL);
    if (rc)
        return rc;
    buf = it_alloc(&e, sizes[3]);
    memset(&s, 0, sizeof(s));
    s.flood = argc > 1 ? atoi(argv[1]) : FLOOD;
    IT_CALL(&e, madrail_context_address(e.ctx, addr, &alen));
    if (e.rank == 0) {
        IT_CALL(&e, madrail_send(e.ctx, e.job.peers[1], addr, alen, TAG_ADDR, 0));
    } else if (e.rank == 1) {
        IT_CALL(&e, madrail_recv(e.ctx, e.job.peers[0], raddr, sizeof(raddr), TAG_ADDR, 0, &info));
        s.uuid0 = addr_uuid(raddr);
        s.uuid1 = addr_uuid(addr);
        if (!it_check(&e, parse_tcp_rails(&s, raddr, info.length) > 0,
                      "rank 0 has %d tcp rail(s), protocol version %d", s.nrails, s.version))
            return 1;
    }
    /* warm up every path and rail, then take the memory baseline */
    for (k = 0; k < 8; k++)
        round_trip(&e, k, buf, &stop, 0);
    if (e.rank == 0)
        rss0 = rss_kb();
    IT_CALL(&e, madrail_pmi_barrier());
    if (e.rank == 1 && pthread_create(&th, NULL, st_main, &s) != 0) {
        it_check(&e, 0, "start the stranger thread");
        return 1;
    }
    /* traffic while the stranger knocks; rank 1 ends it */
    for (k = 8; !stop; k++)
        round_trip(&e, k, buf, &stop, e.rank == 1 && s.done);
    if (e.rank == 1) {
        pthread_join(th, NULL);
        if (s.note[0])
            printf("rank 1: note: %s\n", s.note);
        it_check(&e, k > 20, "%d byte-checked rounds ran while the strangers knocked", k - 8);
        it_check(&e, s.connect_fail == 0 && s.attempts >= (unsigned)s.flood,
                 "%u stranger connections made (%u failed to connect)", s.attempts,
                 s.connect_fail);
        it_check(&e, s.replay_ok, "captured a %zu-byte HELLO of another job to replay (b)",
                 s.replay_len);
        for (r = 0; r < 4; r++) {
            static const char *const what[] = {"(a) keyless or foreign-key HELLOs",
                                               "(b) replayed HELLOs of another job",
                                               "(c) HELLOs posing as rank 1",
                                               "(d) flood of keyless HELLOs and garbage"};
            it_check(&e, s.tried[r] > 0 && s.answered_by[r] == 0,
                     "%s: %u tried, %u answered", what[r], s.tried[r], s.answered_by[r]);
        }
        it_check(&e, s.answered == 0 && s.bytes_back == 0,
                 "no stranger got an answer: %u answered, %ld bytes sent back", s.answered,
                 s.bytes_back);
        it_check(&e, s.not_closed == 0, "every refused stranger was closed (%u left open)",
                 s.not_closed);
        it_check(&e, s.silent_closed == SILENT,
                 "%u of %d silent or half-HELLO connections closed by the connect timeout, "
                 "with nothing sent", s.silent_closed, SILENT);
    } else {
        uint8_t fake[MADRAIL_ADDR_MAX];
        madrail_peer_t p = 0;
        uint64_t u = addr_uuid(addr) ^ 0x5a5a5a5a5a5a5a5aull;

        rss1 = rss_kb();
        it_check(&e, rss0 > 0 && rss1 > 0 && rss1 - rss0 < RSS_BOUND_KB,
                 "resident memory %ld kB before the strangers, %ld kB after (+%ld kB, bound %d "
                 "kB)",
                 rss0, rss1, rss1 - rss0, RSS_BOUND_KB);
        /* the next peer gets index 1 only if no stranger became a peer */
        memcpy(fake, addr, alen);
        memcpy(fake + 8, &u, 8);
        IT_CALL(&e, madrail_peer_add(e.ctx, fake, alen, &p));
        it_check(&e, p == 1, "no stranger became a peer: the next peer index is %u (want 1)", p);
    }
    n = madrail_rail_count(e.ctx);
    for (r = 0; r < n; r++) {
        madrail_rail_stats_t st;
        IT_CALL(&e, madrail_rail_stats(e.ctx, r, &st));
        it_check(&e, st.failovers == 0, "rail %d never failed over (%llu)", r,
                 (unsigned long long)st.failovers);
    }
    free(buf);
    return it_finish(&e);
}
