/*
 * Logging.  Every line is formatted completely in memory and handed to
 * stderr in a single fprintf, so lines written by two processes sharing a
 * terminal or a file do not interleave mid-line (stderr is unbuffered: glibc
 * turns one fprintf into one write).  errno is saved on entry so that %m
 * still names the error of the system call the caller just made, even though
 * gethostname() runs first.  Host and pid are looked up per message: logging
 * is off the fast path, and a cached pid would be wrong after fork().
 */
#include "mdr_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/log.h"

int mdr_log_level = MDR_LOG_WARN;

static const char *const mdr_log_names[] = {"error", "warn", "info", "debug", "trace"};

void mdr_log_set_level(int level)
{
    if (level < MDR_LOG_ERROR)
        level = MDR_LOG_ERROR;
    if (level > MDR_LOG_TRACE)
        level = MDR_LOG_TRACE;
    mdr_log_level = level;
}

int mdr_log_level_parse(const char *s)
{
    int i;

    if (s == NULL)
        return -1;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
        return s[0] - '0';
    for (i = 0; i <= MDR_LOG_TRACE; i++)
        if (strcasecmp(s, mdr_log_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return MDR_LOG_WARN;
    return -1;
}

static const char *mdr_log_basename(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

/* Write one line: prefix + text[0..len) + newline, in a single call. */
static void mdr_log_line(const char *prefix, const char *text, int len)
{
    fprintf(stderr, "%s%.*s\n", prefix, len, text);
}

void mdr_log_emit(mdr_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    int saved_errno = errno;
    char host[64];
    char prefix[256];
    char stackbuf[1024];
    char *msg = stackbuf, *heap = NULL, *p, *nl, *dot;
    const char *lname;
    va_list ap;
    int n;

    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "?");
    host[sizeof(host) - 1] = '\0';
    dot = strchr(host, '.');
    if (dot != NULL)
        *dot = '\0';
    lname = ((int)level >= 0 && (int)level <= MDR_LOG_TRACE) ? mdr_log_names[level] : "?";
    snprintf(prefix, sizeof(prefix), "[%s:%d] madrail %s:%d %s: ", host, (int)getpid(),
             mdr_log_basename(file ? file : "?"), line, lname);

    errno = saved_errno;
    va_start(ap, fmt);
    n = vsnprintf(stackbuf, sizeof(stackbuf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        msg = "(log message could not be formatted)";
    } else if ((size_t)n >= sizeof(stackbuf)) {
        heap = malloc((size_t)n + 1);
        if (heap != NULL) {
            errno = saved_errno;
            va_start(ap, fmt);
            vsnprintf(heap, (size_t)n + 1, fmt, ap);
            va_end(ap);
            msg = heap;
        } /* else: keep the truncated stack copy */
    }

    /* One fprintf per line; a trailing newline in the message adds nothing. */
    p = msg;
    for (;;) {
        nl = strchr(p, '\n');
        if (nl == NULL) {
            if (*p != '\0' || p == msg)
                mdr_log_line(prefix, p, (int)strlen(p));
            break;
        }
        mdr_log_line(prefix, p, (int)(nl - p));
        p = nl + 1;
        if (*p == '\0')
            break;
    }

    free(heap);
    errno = saved_errno;
}
