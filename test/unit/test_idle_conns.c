/*
 * Idle connections and descriptors (issue 28, item 4 / finding 4): a
 * process with RLIMIT_NOFILE 1024 and two contexts on tcp:lo, while a
 * child process opens 2,000 connections to one context's rail and never
 * sends a byte.
 *
 *  (a) default bounds: the connections without a handshake are capped
 *      (MADRAIL_TCP_HELLO_MAX, _PER_SOURCE, the oldest closed), so the
 *      process keeps descriptors for its own work: a first exchange
 *      between the two contexts, which needs a new connection, succeeds
 *      during the flood, byte-exact;
 *  (b) bounds above the descriptor limit, so the process does run out:
 *      an exchange on a connection made before the flood still works, the
 *      failed accepts are refused through the reserved descriptor and the
 *      listener pauses instead of spinning;
 * and in both the log stays a handful of lines (counted on stderr), where
 * it was 639,540 lines of "accept: Too many open files" in 30 s.
 */
#include "mdr_config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "pair.h"
#include "util/clock.h"

#define NCONN 2000
#define LOG_BOUND 20
#define LEN 100000

/* The first tcp rail's listening address in a context address (the
 * layout it_stranger.c reads too). */
static int tcp_rail_addr(madrail_context_t ctx, struct sockaddr_in *sin)
{
    uint8_t a[MADRAIL_ADDR_MAX];
    size_t len = sizeof(a), off = 17;
    int r, nr;

    if (madrail_context_address(ctx, a, &len) != MADRAIL_OK)
        return -1;
    nr = a[16];
    for (r = 0; r < nr && off + 10 <= len; r++) {
        uint16_t alen;
        memcpy(&alen, a + off + 8, 2);
        if (strncmp((const char *)a + off, "tcp", 8) == 0 && alen >= 12 &&
            off + 10 + alen <= len) {
            memset(sin, 0, sizeof(*sin));
            sin->sin_family = AF_INET;
            memcpy(&sin->sin_addr.s_addr, a + off + 10 + 4, 4);
            memcpy(&sin->sin_port, a + off + 10 + 8, 2);
            return 0;
        }
        off += 10 + alen;
    }
    return -1;
}

/* The flood: NCONN connections that never send, held for hold_s seconds,
 * from NFLOOD processes (each within a descriptor limit of 1024). */
#define NFLOOD 4
static pid_t flood(const struct sockaddr_in *sin, double hold_s)
{
    pid_t pid = fork();
    if (pid == 0) {
        int k, i;
        setpgid(0, 0); /* before the forks: the parent sets it too, whoever runs first */
        for (k = 0; k < NFLOOD; k++)
            if (fork() == 0) {
                for (i = 0; i < NCONN / NFLOOD; i++) {
                    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                    if (fd < 0)
                        break;
                    if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0 &&
                        errno != EINPROGRESS)
                        close(fd);
                }
                usleep((useconds_t)(hold_s * 1e6));
                _exit(0);
            }
        /* the group is killed as one (run: kill(-pid)) */
        while (wait(NULL) > 0)
            ;
        _exit(0);
    }
    if (pid > 0)
        setpgid(pid, pid);
    return pid;
}

static void spin_for(pair_t *p, double s)
{
    double end = mdr_time_sec() + s;
    while (mdr_time_sec() < end) {
        madrail_progress(p->a);
        madrail_progress(p->b);
    }
}

/* a sends LEN bytes to b (seed), within 10 s; 1 if they arrived intact. */
static int exchange(pair_t *p, unsigned seed)
{
    static uint8_t sb[LEN], rb[LEN];
    madrail_request_t sr = NULL, rr = NULL;
    double end = mdr_time_sec() + 10;
    int sf = 0, rf = 0;
    madrail_status_t ss = MADRAIL_OK, rs = MADRAIL_OK;

    pair_fill(sb, LEN, seed);
    memset(rb, 0, LEN);
    if (madrail_irecv(p->b, p->b2a, rb, LEN, seed, 0, &rr) != MADRAIL_OK ||
        madrail_isend(p->a, p->a2b, sb, LEN, seed, 0, &sr) != MADRAIL_OK)
        return 0;
    while ((!sf || !rf) && mdr_time_sec() < end) {
        madrail_progress(p->a);
        madrail_progress(p->b);
        if (!sf)
            ss = madrail_test(&sr, &sf, NULL);
        if (!rf)
            rs = madrail_test(&rr, &rf, NULL);
    }
    return sf && rf && ss == MADRAIL_OK && rs == MADRAIL_OK && pair_verify(rb, LEN, seed);
}

/* Lines in the file since offset off. */
static long lines_since(int fd, off_t off)
{
    char buf[4096];
    long n = 0;
    ssize_t got, i;

    if (lseek(fd, off, SEEK_SET) < 0)
        return -1;
    while ((got = read(fd, buf, sizeof(buf))) > 0)
        for (i = 0; i < got; i++)
            n += buf[i] == '\n';
    lseek(fd, 0, SEEK_END);
    return n;
}

static void run(const char *name, const char *const *ov, int warm, int log_fd)
{
    pair_t p;
    struct sockaddr_in sin;
    off_t off;
    pid_t pid;
    long lines;
    int ok;

    if (pair_open(&p, ov) != 0 || tcp_rail_addr(p.b, &sin) != 0) {
        CHECK(0, "%s: open", name);
        return;
    }
    if (warm)
        CHECK(exchange(&p, 1), "%s: exchange before the flood", name);
    off = lseek(log_fd, 0, SEEK_END);
    pid = flood(&sin, 3.0);
    spin_for(&p, 1.5); /* the flood arrives and is accepted (or not) */
    ok = exchange(&p, 2);
    lines = lines_since(log_fd, off);
    CHECK(ok, "%s: %d idle connections under RLIMIT_NOFILE 1024: an exchange %s succeeds, "
              "byte-exact", name, NCONN, warm ? "on the existing connection" : "needing a new "
              "connection");
    CHECK(lines >= 0 && lines <= LOG_BOUND, "%s: %ld log lines during the flood (at most %d)",
          name, lines, LOG_BOUND);
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    spin_for(&p, 0.3);
    CHECK(exchange(&p, 3), "%s: and after it", name);
    madrail_context_finalize(p.a);
    madrail_context_finalize(p.b);
    printf("  %s: %ld log lines in all\n", name, lines_since(log_fd, off));
}

int main(void)
{
    const char *dflt[] = {"MADRAIL_RAILS=tcp:lo", "MADRAIL_LOG_LEVEL=warn", NULL};
    const char *high[] = {"MADRAIL_RAILS=tcp:lo", "MADRAIL_LOG_LEVEL=warn",
                          "MADRAIL_TCP_HELLO_MAX=4096", "MADRAIL_TCP_HELLO_MAX_PER_SOURCE=4096",
                          NULL};
    struct rlimit rl;
    char path[] = "/tmp/test_idle_conns.XXXXXX";
    int log_fd, saved;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 1024) {
        printf("SKIP: RLIMIT_NOFILE hard limit below 1024\n");
        return 77;
    }
    rl.rlim_cur = 1024;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        perror("setrlimit");
        return 99;
    }
    /* the library logs to stderr: count its lines in a file */
    log_fd = mkstemp(path);
    if (log_fd < 0)
        return 99;
    unlink(path);
    fflush(stderr);
    saved = dup(2);
    dup2(log_fd, 2);
    run("default bounds", dflt, 0, log_fd);
    run("bounds above the descriptor limit", high, 1, log_fd);
    fflush(stderr);
    dup2(saved, 2);
    {
        /* show what was logged (the first lines) */
        char buf[4096];
        ssize_t got;
        lseek(log_fd, 0, SEEK_SET);
        got = read(log_fd, buf, sizeof(buf) - 1);
        if (got > 0) {
            buf[got] = '\0';
            printf("log (first %zd bytes):\n%s\n", got, buf);
        }
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
