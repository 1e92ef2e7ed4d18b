/*
 * PMI-1 client: lets a madrail program launched by hydra's mpiexec (or any
 * process manager that speaks the PMI-1 wire protocol) find its peers.
 * madrail has no launcher of its own; this is the thin bootstrap the
 * benchmarks and integration tests use.
 *
 * Built as a tiny line protocol over one socket because that is all PMI-1
 * is: "cmd=... key=value ..." lines, one request, one reply, blocking.  The
 * connection state is process-wide (PMI-1 has one connection per process),
 * so madrail_pmi_barrier() takes no argument; it keeps driving the context
 * given to wireup while it waits (see mdr_pmi_wait_readable), so that
 * context must stay alive until madrail_pmi_finalize().
 *
 * Two ways in, as hydra offers them:
 *  - PMI_FD: an inherited, already connected socket; PMI_RANK and PMI_SIZE
 *    give rank and size.
 *  - PMI_PORT=host:port (mpiexec -pmi-port): connect, then the
 *    "cmd=initack pmiid=<PMI_ID>" handshake returns size and rank.
 *
 * Exception to the project rule: this file reads PMI_FD, PMI_PORT, PMI_ID,
 * PMI_RANK and PMI_SIZE with getenv().  They are the process manager's
 * variables, not MADRAIL_* settings, so they do not belong in the config
 * table (madrail_info must not list them as tunables).
 *
 * Business card: the context address is hex-encoded into keys
 * "madrail-<rank>-<part>", each value shorter than vallen_max (hydra
 * silently truncates a value to vallen_max - 1 characters).  Part 0 starts
 * with "<bytes>:" so a reader knows how many hex digits to collect and
 * does not depend on the writer's part size.
 *
 * Job key: before any card is published, rank 0 puts its key under
 * "madrail-key" (or "none" when its key came from MADRAIL_JOB_KEY or the
 * application, which then hold for every rank), all ranks fence, and every
 * rank whose key is its own random one takes rank 0's.  So no rank can
 * reach another's rail before both hold the job's key, and the key travels
 * only through the process manager's channel.  The phase runs whatever the
 * keys' origins, so that every rank enters the same number of barriers.
 */
#include "mdr_config.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "madrail.h"
#include "util/log.h"

#define MDR_PMI_LINE_INIT 4096   /* receive buffer start size (grows) */
#define MDR_PMI_LINE_MAX  (1 << 20) /* longest reply line we accept */
#define MDR_PMI_KEY_PREFIX "madrail"

typedef struct mdr_pmi {
    int fd;            /* -1 when not connected */
    int active;        /* wireup succeeded, finalize not yet called */
    int rank, size;
    size_t kvsname_max, keylen_max, vallen_max;
    char *kvsname;
    char *rbuf;        /* bytes read from the server not yet consumed */
    size_t rcap, rlen;
    madrail_context_t ctx;      /* the context given to wireup */
    madrail_context_t progress; /* != NULL: drive it while waiting for a reply */
    int secret;        /* the lines carry the job key: not traced */
} mdr_pmi_t;

static mdr_pmi_t mdr_pmi = {.fd = -1};

/* ---------------------------------------------------------------- io */

static madrail_status_t mdr_pmi_write(const char *line)
{
    size_t len = strlen(line), off = 0;

    if (mdr_pmi.secret)
        mdr_trace("pmi -> (a line with the job key, not shown)");
    else
        mdr_trace("pmi -> %s", line);
    while (off < len) {
        ssize_t n = send(mdr_pmi.fd, line + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write(mdr_pmi.fd, line + off, len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            mdr_error("pmi: write to the process manager (fd %d) failed: %m", mdr_pmi.fd);
            return MADRAIL_ERR_PMI;
        }
        off += (size_t)n;
    }
    return MADRAIL_OK;
}

/* Drop the first consumed bytes of the receive buffer. */
static void mdr_pmi_consume(size_t n)
{
    memmove(mdr_pmi.rbuf, mdr_pmi.rbuf + n, mdr_pmi.rlen - n);
    mdr_pmi.rlen -= n;
}

/*
 * Wait until the PMI socket is readable while driving mdr_pmi.progress.
 * A send may complete while its data still sits in a driver's queue (it
 * was copied); a process that then blocks in a PMI barrier would starve
 * its peer, which waits for that data before it can reach the barrier.
 */
static madrail_status_t mdr_pmi_wait_readable(void)
{
    struct pollfd pfd;
    int idle = 0, rc;

    for (;;) {
        pfd.fd = mdr_pmi.fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, idle ? 1 : 0);
        if (rc > 0)
            return MADRAIL_OK; /* readable, hung up or error: read() tells */
        if (rc < 0 && errno != EINTR) {
            mdr_error("pmi: poll on the process manager socket (fd %d) failed: %m",
                      mdr_pmi.fd);
            return MADRAIL_ERR_PMI;
        }
        idle = madrail_progress(mdr_pmi.progress) <= 0;
    }
}

/*
 * Read one line (blocking).  On success *line_p is a malloc'ed,
 * NUL-terminated copy without the newline; the caller frees it.
 */
static madrail_status_t mdr_pmi_readline(char **line_p)
{
    for (;;) {
        char *nl = mdr_pmi.rlen ? memchr(mdr_pmi.rbuf, '\n', mdr_pmi.rlen) : NULL;
        ssize_t n;

        if (nl != NULL) {
            size_t llen = (size_t)(nl - mdr_pmi.rbuf);
            char *line = malloc(llen + 1);
            if (line == NULL) {
                mdr_error("pmi: out of memory reading a %zu-byte reply", llen);
                return MADRAIL_ERR_NOMEM;
            }
            memcpy(line, mdr_pmi.rbuf, llen);
            line[llen] = '\0';
            mdr_pmi_consume(llen + 1);
            if (mdr_pmi.secret)
                mdr_trace("pmi <- (a line with the job key, not shown)");
            else
                mdr_trace("pmi <- %s", line);
            *line_p = line;
            return MADRAIL_OK;
        }
        if (mdr_pmi.rlen == mdr_pmi.rcap) {
            size_t ncap = mdr_pmi.rcap ? 2 * mdr_pmi.rcap : MDR_PMI_LINE_INIT;
            char *nbuf;
            if (ncap > MDR_PMI_LINE_MAX) {
                mdr_error("pmi: reply line from the process manager longer than %d bytes",
                          MDR_PMI_LINE_MAX);
                return MADRAIL_ERR_PMI;
            }
            nbuf = realloc(mdr_pmi.rbuf, ncap);
            if (nbuf == NULL) {
                mdr_error("pmi: out of memory growing the reply buffer to %zu bytes", ncap);
                return MADRAIL_ERR_NOMEM;
            }
            mdr_pmi.rbuf = nbuf;
            mdr_pmi.rcap = ncap;
        }
        if (mdr_pmi.progress != NULL) {
            madrail_status_t status = mdr_pmi_wait_readable();
            if (status != MADRAIL_OK)
                return status;
        }
        n = read(mdr_pmi.fd, mdr_pmi.rbuf + mdr_pmi.rlen, mdr_pmi.rcap - mdr_pmi.rlen);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            mdr_error("pmi: read from the process manager (fd %d) failed: %m", mdr_pmi.fd);
            return MADRAIL_ERR_PMI;
        }
        if (n == 0) {
            mdr_error("pmi: the process manager closed the connection (fd %d)", mdr_pmi.fd);
            return MADRAIL_ERR_PMI;
        }
        mdr_pmi.rlen += (size_t)n;
    }
}

/*
 * Find "key=value" among the space-separated words of line.  Returns a
 * pointer to the value inside line and its length in *len_p, or NULL.
 */
static const char *mdr_pmi_getval(const char *line, const char *key, size_t *len_p)
{
    size_t klen = strlen(key);
    const char *p = line;

    while (*p != '\0') {
        const char *end;
        while (*p == ' ')
            p++;
        end = p;
        while (*end != '\0' && *end != ' ')
            end++;
        if ((size_t)(end - p) > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            *len_p = (size_t)(end - p) - klen - 1;
            return p + klen + 1;
        }
        p = end;
    }
    return NULL;
}

/* Copy value of key into a fresh string; NULL if absent or out of memory. */
static char *mdr_pmi_getval_dup(const char *line, const char *key)
{
    size_t len;
    const char *v = mdr_pmi_getval(line, key, &len);
    char *s;

    if (v == NULL)
        return NULL;
    s = malloc(len + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, v, len);
    s[len] = '\0';
    return s;
}

/* Parse a decimal integer value of key; 0 on success. */
static int mdr_pmi_getval_long(const char *line, const char *key, long *out_p)
{
    char buf[32], *end;
    size_t len;
    const char *v = mdr_pmi_getval(line, key, &len);
    long x;

    if (v == NULL || len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    errno = 0;
    x = strtol(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out_p = x;
    return 0;
}

/*
 * Send request (a full line with '\n'), read one reply and check that its
 * cmd= is expect.  On success *reply_p holds the line (caller frees) if
 * reply_p is not NULL.
 */
static madrail_status_t mdr_pmi_call(const char *request, const char *expect, char **reply_p)
{
    madrail_status_t status;
    char *reply = NULL;
    size_t len;
    const char *cmd;

    status = mdr_pmi_write(request);
    if (status != MADRAIL_OK)
        return status;
    status = mdr_pmi_readline(&reply);
    if (status != MADRAIL_OK)
        return status;
    cmd = mdr_pmi_getval(reply, "cmd", &len);
    if (cmd == NULL || len != strlen(expect) || strncmp(cmd, expect, len) != 0) {
        mdr_error("pmi: expected cmd=%s from the process manager, got \"%.200s\"", expect,
                  reply);
        free(reply);
        return MADRAIL_ERR_PMI;
    }
    if (reply_p != NULL)
        *reply_p = reply;
    else
        free(reply);
    return MADRAIL_OK;
}

/* Check "rc=0" in a reply; logs what failed otherwise. */
static madrail_status_t mdr_pmi_check_rc(const char *reply, const char *what)
{
    long rc;

    if (mdr_pmi_getval_long(reply, "rc", &rc) != 0) {
        mdr_error("pmi: %s: reply without a valid rc: \"%.200s\"", what, reply);
        return MADRAIL_ERR_PMI;
    }
    if (rc != 0) {
        mdr_error("pmi: %s failed (rc=%ld): \"%.200s\"", what, rc, reply);
        return MADRAIL_ERR_PMI;
    }
    return MADRAIL_OK;
}

/* Parse a non-negative int environment value; -1 when absent or bad. */
static int mdr_pmi_env_int(const char *name, const char **text_p)
{
    const char *s = getenv(name);
    char *end;
    long x;

    *text_p = s;
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    x = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || x < 0 || x > INT_MAX)
        return -1;
    return (int)x;
}

/* ---------------------------------------------------------------- connect */

static madrail_status_t mdr_pmi_connect_port(const char *hostport)
{
    char *host = strdup(hostport), *colon;
    struct addrinfo hints, *res = NULL, *ai;
    madrail_status_t status = MADRAIL_ERR_PMI;
    int rc, fd = -1;

    if (host == NULL) {
        mdr_error("pmi: out of memory");
        return MADRAIL_ERR_NOMEM;
    }
    colon = strrchr(host, ':');
    if (colon == NULL || colon == host || colon[1] == '\0') {
        mdr_error("pmi: PMI_PORT=%s is not host:port", hostport);
        goto err_host;
    }
    *colon = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) {
        mdr_error("pmi: PMI_PORT=%s: cannot resolve: %s", hostport, gai_strerror(rc));
        goto err_host;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        do {
            rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        } while (rc < 0 && errno == EINTR);
        if (rc == 0)
            break;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        mdr_error("pmi: cannot connect to the process manager at PMI_PORT=%s: %m", hostport);
        goto err_res;
    }
    mdr_pmi.fd = fd;
    status = MADRAIL_OK;
err_res:
    freeaddrinfo(res);
err_host:
    free(host);
    return status;
}

/* PMI_PORT handshake: cmd=initack, then set size/rank/debug lines. */
static madrail_status_t mdr_pmi_port_handshake(int id)
{
    char req[64];
    char *line = NULL;
    madrail_status_t status;
    int i, got_size = 0, got_rank = 0;
    size_t dlen;
    long v;

    snprintf(req, sizeof(req), "cmd=initack pmiid=%d\n", id);
    status = mdr_pmi_call(req, "initack", NULL);
    if (status != MADRAIL_OK)
        return status;
    /* Three "cmd=set" lines follow: size, rank, debug (in that order in
     * hydra, but do not depend on it). */
    for (i = 0; i < 3; i++) {
        status = mdr_pmi_readline(&line);
        if (status != MADRAIL_OK)
            return status;
        if (mdr_pmi_getval_long(line, "size", &v) == 0 && v > 0 && v <= INT_MAX) {
            mdr_pmi.size = (int)v;
            got_size = 1;
        } else if (mdr_pmi_getval_long(line, "rank", &v) == 0 && v >= 0 && v <= INT_MAX) {
            mdr_pmi.rank = (int)v;
            got_rank = 1;
        } else if (mdr_pmi_getval(line, "debug", &dlen) == NULL) {
            mdr_error("pmi: unexpected line in the initack handshake: \"%.200s\"", line);
            free(line);
            return MADRAIL_ERR_PMI;
        }
        free(line);
    }
    if (!got_size || !got_rank) {
        mdr_error("pmi: the initack handshake gave no %s", got_size ? "rank" : "size");
        return MADRAIL_ERR_PMI;
    }
    return MADRAIL_OK;
}

static madrail_status_t mdr_pmi_connect(void)
{
    const char *fd_text, *port, *rank_text, *size_text, *id_text;
    madrail_status_t status;
    int fd;

    fd = mdr_pmi_env_int("PMI_FD", &fd_text);
    port = getenv("PMI_PORT");
    if (fd_text != NULL && *fd_text != '\0') {
        if (fd < 0) {
            mdr_error("pmi: PMI_FD=%s is not a file descriptor number", fd_text);
            return MADRAIL_ERR_PMI;
        }
        mdr_pmi.fd = fd;
        mdr_pmi.rank = mdr_pmi_env_int("PMI_RANK", &rank_text);
        mdr_pmi.size = mdr_pmi_env_int("PMI_SIZE", &size_text);
        if (mdr_pmi.rank < 0 || mdr_pmi.size <= 0 || mdr_pmi.rank >= mdr_pmi.size) {
            mdr_error("pmi: PMI_FD is set but PMI_RANK=%s PMI_SIZE=%s are not a valid "
                      "rank and size",
                      rank_text ? rank_text : "(unset)", size_text ? size_text : "(unset)");
            mdr_pmi.fd = -1;
            return MADRAIL_ERR_PMI;
        }
        return MADRAIL_OK;
    }
    if (port != NULL && *port != '\0') {
        int id = mdr_pmi_env_int("PMI_ID", &id_text);
        if (id < 0) {
            mdr_error("pmi: PMI_PORT is set but PMI_ID=%s is not a valid id",
                      id_text ? id_text : "(unset)");
            return MADRAIL_ERR_PMI;
        }
        status = mdr_pmi_connect_port(port);
        if (status != MADRAIL_OK)
            return status;
        status = mdr_pmi_port_handshake(id);
        if (status != MADRAIL_OK || mdr_pmi.rank >= mdr_pmi.size) {
            if (status == MADRAIL_OK) {
                mdr_error("pmi: handshake gave rank %d >= size %d", mdr_pmi.rank,
                          mdr_pmi.size);
                status = MADRAIL_ERR_PMI;
            }
            close(mdr_pmi.fd);
            mdr_pmi.fd = -1;
            return status;
        }
        return MADRAIL_OK;
    }
    mdr_error("not launched by a PMI-1 process manager (PMI_FD/PMI_PORT unset); "
              "run under mpiexec");
    return MADRAIL_ERR_PMI;
}

/* Forget the connection; closes the socket. */
static void mdr_pmi_reset(void)
{
    if (mdr_pmi.fd >= 0)
        close(mdr_pmi.fd);
    free(mdr_pmi.kvsname);
    free(mdr_pmi.rbuf);
    memset(&mdr_pmi, 0, sizeof(mdr_pmi));
    mdr_pmi.fd = -1;
}

/* init, get_maxes, get_my_kvsname */
static madrail_status_t mdr_pmi_init_session(void)
{
    madrail_status_t status;
    char *reply = NULL;
    long v1, v2, v3;

    status = mdr_pmi_call("cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init",
                          &reply);
    if (status != MADRAIL_OK)
        return status;
    status = mdr_pmi_check_rc(reply, "init");
    if (status == MADRAIL_OK &&
        (mdr_pmi_getval_long(reply, "pmi_version", &v1) != 0 || v1 != 1)) {
        mdr_error("pmi: the process manager does not speak PMI version 1: \"%.200s\"", reply);
        status = MADRAIL_ERR_PMI;
    }
    free(reply);
    if (status != MADRAIL_OK)
        return status;

    status = mdr_pmi_call("cmd=get_maxes\n", "maxes", &reply);
    if (status != MADRAIL_OK)
        return status;
    if (mdr_pmi_getval_long(reply, "kvsname_max", &v1) != 0 ||
        mdr_pmi_getval_long(reply, "keylen_max", &v2) != 0 ||
        mdr_pmi_getval_long(reply, "vallen_max", &v3) != 0 || v1 <= 0 || v2 <= 0 ||
        v3 <= 0) {
        mdr_error("pmi: bad get_maxes reply: \"%.200s\"", reply);
        free(reply);
        return MADRAIL_ERR_PMI;
    }
    free(reply);
    mdr_pmi.kvsname_max = (size_t)v1;
    mdr_pmi.keylen_max = (size_t)v2;
    mdr_pmi.vallen_max = (size_t)v3;
    /* Part 0 carries "<bytes>:" and at least a few hex digits. */
    if (mdr_pmi.vallen_max < 32 || mdr_pmi.keylen_max < 32) {
        mdr_error("pmi: process manager limits too small for madrail (keylen_max %zu, "
                  "vallen_max %zu; need >= 32)",
                  mdr_pmi.keylen_max, mdr_pmi.vallen_max);
        return MADRAIL_ERR_PMI;
    }

    status = mdr_pmi_call("cmd=get_my_kvsname\n", "my_kvsname", &reply);
    if (status != MADRAIL_OK)
        return status;
    mdr_pmi.kvsname = mdr_pmi_getval_dup(reply, "kvsname");
    if (mdr_pmi.kvsname == NULL || mdr_pmi.kvsname[0] == '\0') {
        mdr_error("pmi: bad get_my_kvsname reply: \"%.200s\"", reply);
        free(reply);
        return MADRAIL_ERR_PMI;
    }
    free(reply);
    mdr_debug("pmi: rank %d of %d, kvs %s, vallen_max %zu", mdr_pmi.rank, mdr_pmi.size,
              mdr_pmi.kvsname, mdr_pmi.vallen_max);
    return MADRAIL_OK;
}

/* Barrier; the context keeps making progress while we wait. */
static madrail_status_t mdr_pmi_do_barrier(void)
{
    madrail_status_t status;

    mdr_pmi.progress = mdr_pmi.ctx;
    status = mdr_pmi_call("cmd=barrier_in\n", "barrier_out", NULL);
    mdr_pmi.progress = NULL;
    return status;
}

/* ---------------------------------------------------------------- kvs */

static madrail_status_t mdr_pmi_put(const char *key, const char *value)
{
    size_t len = strlen(mdr_pmi.kvsname) + strlen(key) + strlen(value) + 64;
    char *req = malloc(len), *reply = NULL;
    madrail_status_t status;

    if (req == NULL) {
        mdr_error("pmi: out of memory");
        return MADRAIL_ERR_NOMEM;
    }
    snprintf(req, len, "cmd=put kvsname=%s key=%s value=%s\n", mdr_pmi.kvsname, key, value);
    status = mdr_pmi_call(req, "put_result", &reply);
    free(req);
    if (status != MADRAIL_OK)
        return status;
    status = mdr_pmi_check_rc(reply, key);
    free(reply);
    return status;
}

/* Get key's value (malloc'ed) into *value_p. */
static madrail_status_t mdr_pmi_get(const char *key, char **value_p)
{
    char req[512], *reply = NULL, *value;
    madrail_status_t status;

    if (snprintf(req, sizeof(req), "cmd=get kvsname=%s key=%s\n", mdr_pmi.kvsname, key) >=
        (int)sizeof(req)) {
        mdr_error("pmi: kvs name too long (%zu bytes)", strlen(mdr_pmi.kvsname));
        return MADRAIL_ERR_PMI;
    }
    status = mdr_pmi_call(req, "get_result", &reply);
    if (status != MADRAIL_OK)
        return status;
    status = mdr_pmi_check_rc(reply, key);
    if (status != MADRAIL_OK) {
        free(reply);
        return status;
    }
    value = mdr_pmi_getval_dup(reply, "value");
    free(reply);
    if (value == NULL) {
        mdr_error("pmi: get %s: reply without a value", key);
        return MADRAIL_ERR_PMI;
    }
    *value_p = value;
    return MADRAIL_OK;
}

static const char mdr_pmi_hexdig[] = "0123456789abcdef";

static int mdr_pmi_unhex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Publish addr (len bytes) under madrail-<rank>-<part>. */
static madrail_status_t mdr_pmi_publish(const uint8_t *addr, size_t len)
{
    char key[64];
    /* hydra keeps at most vallen_max - 1 characters of a value */
    size_t maxval = mdr_pmi.vallen_max - 1;
    size_t hexlen = 2 * len, done = 0;
    char *val = malloc(maxval + 1);
    madrail_status_t status = MADRAIL_OK;
    int part = 0;

    if (val == NULL) {
        mdr_error("pmi: out of memory");
        return MADRAIL_ERR_NOMEM;
    }
    do {
        size_t pos = 0, room, n, i;
        if (part == 0)
            pos = (size_t)snprintf(val, maxval + 1, "%zu:", len);
        room = (maxval - pos) & ~(size_t)1; /* whole bytes per part */
        n = hexlen - done < room ? hexlen - done : room;
        for (i = 0; i < n; i += 2) {
            uint8_t b = addr[(done + i) / 2];
            val[pos++] = mdr_pmi_hexdig[b >> 4];
            val[pos++] = mdr_pmi_hexdig[b & 15];
        }
        val[pos] = '\0';
        done += n;
        snprintf(key, sizeof(key), MDR_PMI_KEY_PREFIX "-%d-%d", mdr_pmi.rank, part);
        status = mdr_pmi_put(key, val);
        part++;
    } while (status == MADRAIL_OK && done < hexlen);
    mdr_debug("pmi: rank %d published a %zu-byte address in %d part(s)", mdr_pmi.rank, len,
              part);
    free(val);
    return status;
}

/* Fetch rank r's address into buf (cap bytes); *len_p = bytes. */
static madrail_status_t mdr_pmi_fetch(int r, uint8_t *buf, size_t cap, size_t *len_p)
{
    char key[64], *val = NULL, *p, *end;
    size_t len = 0, got = 0;
    madrail_status_t status;
    int part = 0;
    unsigned long long ull;

    for (;;) {
        snprintf(key, sizeof(key), MDR_PMI_KEY_PREFIX "-%d-%d", r, part);
        status = mdr_pmi_get(key, &val);
        if (status != MADRAIL_OK) {
            mdr_error("pmi: cannot read rank %d's address (key %s)", r, key);
            return status;
        }
        p = val;
        if (part == 0) {
            errno = 0;
            ull = strtoull(val, &end, 10);
            if (errno != 0 || end == val || *end != ':' || ull == 0 || ull > cap) {
                mdr_error("pmi: rank %d's address record is malformed or longer than %zu "
                          "bytes: \"%.40s\"",
                          r, cap, val);
                free(val);
                return MADRAIL_ERR_PMI;
            }
            len = (size_t)ull;
            p = end + 1;
        }
        for (; *p != '\0'; p += 2) {
            int hi = mdr_pmi_unhex(p[0]), lo = hi < 0 ? -1 : mdr_pmi_unhex(p[1]);
            if (hi < 0 || lo < 0 || got >= len) {
                mdr_error("pmi: rank %d's address part %d is not valid hex of the announced "
                          "length %zu",
                          r, part, len);
                free(val);
                return MADRAIL_ERR_PMI;
            }
            buf[got++] = (uint8_t)(hi << 4 | lo);
        }
        free(val);
        val = NULL;
        if (got == len)
            break;
        if (++part > 1024) { /* cannot happen with len <= cap; guard the loop */
            mdr_error("pmi: rank %d's address spans too many parts", r);
            return MADRAIL_ERR_PMI;
        }
    }
    *len_p = len;
    return MADRAIL_OK;
}

/* Give every rank rank 0's job key (see the top of the file). */
static madrail_status_t mdr_pmi_share_key(madrail_context_t ctx)
{
    uint8_t key[MADRAIL_JOB_KEY_LEN];
    char hex[2 * MADRAIL_JOB_KEY_LEN + 1], *val = NULL;
    madrail_job_key_origin_t origin;
    madrail_status_t status;
    int i;

    status = madrail_context_job_key(ctx, key, &origin);
    if (status != MADRAIL_OK)
        return status;
    if (mdr_pmi.rank == 0) {
        if (origin == MADRAIL_JOB_KEY_RANDOM) {
            for (i = 0; i < MADRAIL_JOB_KEY_LEN; i++) {
                hex[2 * i] = mdr_pmi_hexdig[key[i] >> 4];
                hex[2 * i + 1] = mdr_pmi_hexdig[key[i] & 15];
            }
            hex[2 * MADRAIL_JOB_KEY_LEN] = '\0';
        } else {
            snprintf(hex, sizeof(hex), "none");
        }
        mdr_pmi.secret = 1;
        status = mdr_pmi_put(MDR_PMI_KEY_PREFIX "-key", hex);
        mdr_pmi.secret = 0;
        memset(hex, 0, sizeof(hex));
    }
    memset(key, 0, sizeof(key));
    if (status == MADRAIL_OK)
        status = mdr_pmi_do_barrier();
    if (status != MADRAIL_OK || mdr_pmi.rank == 0 || origin != MADRAIL_JOB_KEY_RANDOM)
        goto out;
    mdr_pmi.secret = 1;
    status = mdr_pmi_get(MDR_PMI_KEY_PREFIX "-key", &val);
    mdr_pmi.secret = 0;
    if (status != MADRAIL_OK)
        goto out;
    if (strcmp(val, "none") == 0) {
        mdr_error("pmi: rank 0 has its job key from MADRAIL_JOB_KEY (or from the application) "
                  "and rank %d has none: give every rank the same MADRAIL_JOB_KEY",
                  mdr_pmi.rank);
        status = MADRAIL_ERR_CONFIG;
        goto out;
    }
    for (i = 0; i < MADRAIL_JOB_KEY_LEN; i++) {
        int hi = val[2 * i] ? mdr_pmi_unhex(val[2 * i]) : -1;
        int lo = hi >= 0 && val[2 * i + 1] ? mdr_pmi_unhex(val[2 * i + 1]) : -1;
        if (hi < 0 || lo < 0)
            break;
        key[i] = (uint8_t)(hi << 4 | lo);
    }
    if (i < MADRAIL_JOB_KEY_LEN || val[2 * MADRAIL_JOB_KEY_LEN] != '\0') {
        mdr_error("pmi: rank 0's job key record is malformed");
        status = MADRAIL_ERR_PMI;
        goto out;
    }
    status = madrail_context_set_job_key(ctx, key, sizeof(key));
    if (status != MADRAIL_OK)
        mdr_error("pmi: rank %d cannot take rank 0's job key: %s", mdr_pmi.rank,
                  madrail_status_str(status));
out:
    memset(key, 0, sizeof(key));
    if (val != NULL) {
        memset(val, 0, strlen(val));
        free(val);
    }
    return status;
}

/* ---------------------------------------------------------------- public */

madrail_status_t madrail_pmi_wireup(madrail_context_t ctx, madrail_job_t *job_p)
{
    uint8_t addr[MADRAIL_ADDR_MAX], raddr[MADRAIL_ADDR_MAX];
    size_t alen = sizeof(addr), rlen;
    madrail_peer_t *peers;
    madrail_status_t status;
    int r;

    if (ctx == NULL || job_p == NULL) {
        mdr_error("pmi: wireup needs a context and a job");
        return MADRAIL_ERR_INVALID;
    }
    if (mdr_pmi.active) {
        mdr_error("pmi: wireup called twice (PMI-1 allows one session per process)");
        return MADRAIL_ERR_INVALID;
    }
    status = madrail_context_address(ctx, addr, &alen);
    if (status != MADRAIL_OK) {
        mdr_error("pmi: cannot get this context's address: %s", madrail_status_str(status));
        return status;
    }
    if (alen == 0) {
        mdr_error("pmi: this context's address is empty");
        return MADRAIL_ERR_INVALID;
    }

    status = mdr_pmi_connect();
    if (status != MADRAIL_OK)
        goto err_reset;
    mdr_pmi.ctx = ctx;
    status = mdr_pmi_init_session();
    if (status != MADRAIL_OK)
        goto err_reset;

    peers = malloc((size_t)mdr_pmi.size * sizeof(*peers));
    if (peers == NULL) {
        mdr_error("pmi: out of memory for %d peers", mdr_pmi.size);
        status = MADRAIL_ERR_NOMEM;
        goto err_reset;
    }
    status = mdr_pmi_share_key(ctx);
    if (status != MADRAIL_OK)
        goto err_peers;
    /* bounds the peers that connections can create (peer.c) */
    status = madrail_context_set_job_size(ctx, (uint32_t)mdr_pmi.size);
    if (status != MADRAIL_OK)
        goto err_peers;
    status = mdr_pmi_publish(addr, alen);
    if (status != MADRAIL_OK)
        goto err_peers;
    status = mdr_pmi_do_barrier();
    if (status != MADRAIL_OK)
        goto err_peers;
    for (r = 0; r < mdr_pmi.size; r++) {
        if (r == mdr_pmi.rank) {
            peers[r] = MADRAIL_ANY_PEER;
            continue;
        }
        status = mdr_pmi_fetch(r, raddr, sizeof(raddr), &rlen);
        if (status != MADRAIL_OK)
            goto err_peers;
        status = madrail_peer_add(ctx, raddr, rlen, &peers[r]);
        if (status != MADRAIL_OK) {
            mdr_error("pmi: rank %d: cannot add rank %d as a peer: %s", mdr_pmi.rank, r,
                      madrail_status_str(status));
            goto err_peers;
        }
    }
    mdr_pmi.active = 1;
    job_p->rank = mdr_pmi.rank;
    job_p->size = mdr_pmi.size;
    job_p->peers = peers;
    mdr_debug("pmi: rank %d wired up %d peers", mdr_pmi.rank, mdr_pmi.size - 1);
    return MADRAIL_OK;

err_peers:
    free(peers);
err_reset:
    mdr_pmi_reset();
    return status;
}

madrail_status_t madrail_pmi_barrier(void)
{
    if (!mdr_pmi.active) {
        mdr_error("pmi: barrier without a successful madrail_pmi_wireup()");
        return MADRAIL_ERR_PMI;
    }
    return mdr_pmi_do_barrier();
}

madrail_status_t madrail_pmi_finalize(madrail_job_t *job)
{
    madrail_status_t status;

    if (job != NULL) {
        free(job->peers);
        job->peers = NULL;
    }
    if (!mdr_pmi.active) {
        mdr_error("pmi: finalize without a successful madrail_pmi_wireup()");
        return MADRAIL_ERR_PMI;
    }
    status = mdr_pmi_call("cmd=finalize\n", "finalize_ack", NULL);
    mdr_pmi_reset();
    return status;
}
