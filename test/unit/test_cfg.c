/*
 * Unit test of the configuration parser (src/util/cfg.c), with log.c and
 * status.c.  It links its own definitions of the three registered tables
 * (core, tcp, loop) so it does not depend on the real modules; the values
 * and bounds below exist only for this test.  Error messages are checked by
 * redirecting fd 2 to a temporary file, since checking that a bad value
 * names the variable and the value is part of the contract.
 */
#include "mdr_config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cfg.h"
#include "util/log.h"

extern char **environ;

/* ---------------- test-local tables ---------------- */

typedef struct {
    size_t slot;
    unsigned credits;
    int stats;
    double ratio;
    double timeout;
    char *rails;
    size_t big;
    char *label;
} test_core_cfg_t;

static const mdr_cfg_entry_t test_core_entries[] = {
    {"MADRAIL_SLOT_SIZE", MDR_CFG_SIZE, "8k", 256, 1048576, offsetof(test_core_cfg_t, slot),
     "Size of one control slot; eager messages up to this size (minus the header) travel "
     "inline in a single slot on a single rail."},
    {"MADRAIL_CREDITS", MDR_CFG_UINT, "8", 1, 1024, offsetof(test_core_cfg_t, credits),
     "Slots per peer per rail."},
    {"MADRAIL_STATS", MDR_CFG_BOOL, "no", 1, 0, offsetof(test_core_cfg_t, stats),
     "Print per-rail statistics at finalize."},
    {"MADRAIL_RATIO", MDR_CFG_DOUBLE, "0.5", 0, 1, offsetof(test_core_cfg_t, ratio),
     "A ratio."},
    {"MADRAIL_TIMEOUT", MDR_CFG_TIME, "2s", 1e-6, 60, offsetof(test_core_cfg_t, timeout),
     "Rail silence timeout."},
    {"MADRAIL_RAILS", MDR_CFG_STRING, NULL, 1, 0, offsetof(test_core_cfg_t, rails),
     "Rails to open."},
    {"MADRAIL_BIG", MDR_CFG_SIZE, "1g", 1, 0, offsetof(test_core_cfg_t, big),
     "Unbounded size."},
    {"MADRAIL_LABEL", MDR_CFG_STRING, "", 1, 0, offsetof(test_core_cfg_t, label),
     "Empty default string."},
};
const mdr_cfg_table_t mdr_core_cfg_table = {"core", test_core_entries,
                                            sizeof(test_core_entries) /
                                                sizeof(test_core_entries[0])};

typedef struct {
    size_t sndbuf;
} test_tcp_cfg_t;
static const mdr_cfg_entry_t test_tcp_entries[] = {
    {"MADRAIL_TCP_SNDBUF", MDR_CFG_SIZE, "0", 0, 0, offsetof(test_tcp_cfg_t, sndbuf),
     "Socket send buffer, 0 = system default."},
};
const mdr_cfg_table_t mdr_tcp_cfg_table = {"tcp", test_tcp_entries, 1};

typedef struct {
    double drop;
} test_loop_cfg_t;
static const mdr_cfg_entry_t test_loop_entries[] = {
    {"MADRAIL_LOOP_DROP", MDR_CFG_DOUBLE, "0", 0, 1, offsetof(test_loop_cfg_t, drop),
     "Drop probability."},
};
const mdr_cfg_table_t mdr_loop_cfg_table = {"loop", test_loop_entries, 1};
/* The shm driver's table, empty here (this test counts the variables). */
const mdr_cfg_table_t mdr_shm_cfg_table = {"shm", NULL, 0};
/* Rail discovery's table, empty here too. */
const mdr_cfg_table_t mdr_discover_cfg_table = {"discover", NULL, 0};
/* registered too; empty here so the counts below stay this test's own */
const mdr_cfg_table_t mdr_ofi_cfg_table = {"ofi", NULL, 0};

/* ---------------- harness ---------------- */

static double dabs(double x)
{
    return x < 0 ? -x : x;
}

#include "unit_check.h"

static FILE *cap_file;
static int cap_saved = -1;
static char cap_buf[65536];

static void capture_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    if (cap_file == NULL) {
        perror("tmpfile");
        exit(1);
    }
    cap_saved = dup(2);
    dup2(fileno(cap_file), 2);
}

/* Stop capturing; returns what was written to stderr (also echoed). */
static const char *capture_end(void)
{
    size_t n;

    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    rewind(cap_file);
    n = fread(cap_buf, 1, sizeof(cap_buf) - 1, cap_file);
    cap_buf[n] = '\0';
    fclose(cap_file);
    if (n > 0)
        fprintf(stderr, "%s", cap_buf);
    return cap_buf;
}

static int count_substr(const char *hay, const char *needle)
{
    int n = 0;
    const char *p = hay;

    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    return n;
}

/* Remove every MADRAIL_* variable the caller's environment may carry. */
static void clear_madrail_env(void)
{
    char name[256];
    const char *eq;
    size_t len;
    int again = 1;

    while (again) {
        again = 0;
        for (char **e = environ; e && *e; e++) {
            if (strncmp(*e, "MADRAIL_", 8) != 0)
                continue;
            eq = strchr(*e, '=');
            len = eq ? (size_t)(eq - *e) : strlen(*e);
            if (len >= sizeof(name))
                len = sizeof(name) - 1;
            memcpy(name, *e, len);
            name[len] = '\0';
            unsetenv(name);
            again = 1;
            break;
        }
    }
}

/* ---------------- tests ---------------- */

static void test_sizes(void)
{
    static const struct {
        const char *text;
        size_t val;
    } good[] = {
        {"0", 0},           {"8192", 8192},
        {"64k", 65536},     {"64K", 65536},
        {"64kb", 65536},    {"64KB", 65536},
        {"64kB", 65536},    {"8m", 8u << 20},
        {"8M", 8u << 20},   {"8mb", 8u << 20},
        {"8MB", 8u << 20},  {"1g", 1u << 30},
        {"1G", 1u << 30},   {"1gb", 1u << 30},
        {"3GB", (size_t)3 << 30},
        {"512b", 512},      {"512B", 512},
        {" 42 ", 42},       {"+7", 7},
        {"18446744073709551615", SIZE_MAX},
        {"17179869183g", (size_t)17179869183ull << 30},
    };
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"12x", "not a size"},
        {"-1", "negative"},
        {"-64k", "negative"},
        {"", "not a size"},
        {"k", "not a size"},
        {"1.5k", "not a size"},
        {"64 k", "not a size"},
        {"64kk", "not a size"},
        {"64bk", "not a size"},
        {"0x10", "not a size"},
        {"18446744073709551616", "too large"},
        {"17179869184g", "too large"},
        {"99999999999999999999999", "too large"},
    };
    size_t i, v;
    const char *why;
    madrail_status_t st;

    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        why = NULL;
        st = mdr_cfg_parse_value(MDR_CFG_SIZE, good[i].text, &v, &why);
        check(st == MADRAIL_OK && v == good[i].val, "size \"%s\" -> %zu (got st %d, %zu)",
              good[i].text, good[i].val, (int)st, v);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 12345;
        why = NULL;
        st = mdr_cfg_parse_value(MDR_CFG_SIZE, bad[i].text, &v, &why);
        check(st == MADRAIL_ERR_CONFIG && v == 12345 && why && strstr(why, bad[i].why),
              "size \"%s\" rejected as \"%s\" (got st %d, why \"%s\")", bad[i].text, bad[i].why,
              (int)st, why ? why : "(null)");
    }
}

static void test_other_types(void)
{
    static const struct {
        const char *text;
        int val;
    } bools[] = {{"0", 0},   {"1", 1},     {"yes", 1}, {"no", 0},   {"true", 1},
                 {"false", 0}, {"on", 1},  {"off", 0}, {"YES", 1},  {"Off", 0},
                 {" true ", 1}};
    static const char *const badbools[] = {"2", "yess", "", "y", "-1", "onn"};
    static const struct {
        const char *text;
        double val;
    } times[] = {{"10us", 1e-5}, {"5ms", 5e-3}, {"2s", 2.0},   {"3", 3.0},
                 {"100ns", 1e-7}, {"1.5ms", 1.5e-3}, {"0", 0.0}, {"0.25", 0.25},
                 {"7 ms", 7e-3},  {"20US", 2e-5}};
    static const char *const badtimes[] = {"5 parsecs", "-1s", "ms", "", "1m", "nan", "inf",
                                           "0x10", "1e999s"};
    static const struct {
        const char *text;
        double val;
    } dbls[] = {{"0.25", 0.25}, {"-3", -3.0}, {"1e3", 1000.0}, {".5", 0.5}, {" 2 ", 2.0}};
    static const char *const baddbls[] = {"abc", "nan", "inf", "-inf", "1.0x", "", "1e999",
                                          "0x1p3"};
    size_t i;
    unsigned u;
    int b;
    double d;
    char *s = NULL;
    const char *why;
    madrail_status_t st;

    for (i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
        b = 7;
        st = mdr_cfg_parse_value(MDR_CFG_BOOL, bools[i].text, &b, &why);
        check(st == MADRAIL_OK && b == bools[i].val, "bool \"%s\" -> %d (got %d)", bools[i].text,
              bools[i].val, b);
    }
    for (i = 0; i < sizeof(badbools) / sizeof(badbools[0]); i++) {
        b = 7;
        why = NULL;
        st = mdr_cfg_parse_value(MDR_CFG_BOOL, badbools[i], &b, &why);
        check(st == MADRAIL_ERR_CONFIG && b == 7 && why != NULL, "bool \"%s\" rejected (%s)",
              badbools[i], why ? why : "(null)");
    }
    for (i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
        d = -1;
        st = mdr_cfg_parse_value(MDR_CFG_TIME, times[i].text, &d, &why);
        check(st == MADRAIL_OK && dabs(d - times[i].val) <= 1e-12 * (1 + times[i].val),
              "time \"%s\" -> %g s (got %g)", times[i].text, times[i].val, d);
    }
    for (i = 0; i < sizeof(badtimes) / sizeof(badtimes[0]); i++) {
        d = -1;
        why = NULL;
        st = mdr_cfg_parse_value(MDR_CFG_TIME, badtimes[i], &d, &why);
        check(st == MADRAIL_ERR_CONFIG && d == -1 && why != NULL, "time \"%s\" rejected (%s)",
              badtimes[i], why ? why : "(null)");
    }
    for (i = 0; i < sizeof(dbls) / sizeof(dbls[0]); i++) {
        d = -1;
        st = mdr_cfg_parse_value(MDR_CFG_DOUBLE, dbls[i].text, &d, &why);
        check(st == MADRAIL_OK && d == dbls[i].val, "double \"%s\" -> %g (got %g)", dbls[i].text,
              dbls[i].val, d);
    }
    for (i = 0; i < sizeof(baddbls) / sizeof(baddbls[0]); i++) {
        d = -1;
        why = NULL;
        st = mdr_cfg_parse_value(MDR_CFG_DOUBLE, baddbls[i], &d, &why);
        check(st == MADRAIL_ERR_CONFIG && d == -1 && why != NULL, "double \"%s\" rejected (%s)",
              baddbls[i], why ? why : "(null)");
    }

    u = 1;
    st = mdr_cfg_parse_value(MDR_CFG_UINT, "4294967295", &u, &why);
    check(st == MADRAIL_OK && u == 4294967295u, "uint max accepted (%u)", u);
    u = 1;
    st = mdr_cfg_parse_value(MDR_CFG_UINT, "4294967296", &u, &why);
    check(st == MADRAIL_ERR_CONFIG && u == 1 && strstr(why, "too large"), "uint 2^32 too large");
    st = mdr_cfg_parse_value(MDR_CFG_UINT, "-1", &u, &why);
    check(st == MADRAIL_ERR_CONFIG && u == 1 && strstr(why, "negative"), "uint -1 negative");
    st = mdr_cfg_parse_value(MDR_CFG_UINT, "4k", &u, &why);
    check(st == MADRAIL_ERR_CONFIG && u == 1, "uint does not take size suffixes");

    st = mdr_cfg_parse_value(MDR_CFG_STRING, "tcp:lo", &s, &why);
    check(st == MADRAIL_OK && s && strcmp(s, "tcp:lo") == 0, "string copied");
    free(s);
}

static void test_defaults(void)
{
    test_core_cfg_t c;
    madrail_status_t st;

    memset(&c, 0xa5, sizeof(c)); /* garbage in string fields must not be freed */
    st = mdr_cfg_parse(&mdr_core_cfg_table, NULL, &c);
    check(st == MADRAIL_OK, "defaults parse (st %d)", (int)st);
    check(c.slot == 8192, "default slot 8k = %zu", c.slot);
    check(c.credits == 8, "default credits 8 = %u", c.credits);
    check(c.stats == 0, "default stats no = %d", c.stats);
    check(c.ratio == 0.5, "default ratio 0.5 = %g", c.ratio);
    check(c.timeout == 2.0, "default timeout 2s = %g", c.timeout);
    check(c.rails == NULL, "default rails NULL");
    check(c.big == (size_t)1 << 30, "default big 1g = %zu", c.big);
    check(c.label != NULL && c.label[0] == '\0', "default label \"\"");
    mdr_cfg_release(&mdr_core_cfg_table, &c);
    check(c.rails == NULL && c.label == NULL, "release clears strings");
}

static void test_priority(void)
{
    const char *const ov[] = {"MADRAIL_SLOT_SIZE=16k", "MADRAIL_RAILS=loop:a,loop:b",
                              "MADRAIL_SLOT_SIZE=32KB", "MADRAIL_SLOT_SIZEX=1", "junk", NULL};
    test_core_cfg_t c;
    madrail_status_t st;

    setenv("MADRAIL_SLOT_SIZE", "64k", 1);
    setenv("MADRAIL_CREDITS", "3", 1);
    setenv("MADRAIL_RAILS", "tcp:lo", 1);
    setenv("MADRAIL_TIMEOUT", "250ms", 1);

    st = mdr_cfg_parse(&mdr_core_cfg_table, NULL, &c);
    check(st == MADRAIL_OK && c.slot == 65536, "environment beats default (slot %zu)", c.slot);
    check(c.credits == 3, "environment credits 3 (%u)", c.credits);
    check(c.rails && strcmp(c.rails, "tcp:lo") == 0, "environment string");
    check(dabs(c.timeout - 0.25) < 1e-12, "environment time 250ms (%g)", c.timeout);
    mdr_cfg_release(&mdr_core_cfg_table, &c);

    st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
    check(st == MADRAIL_OK && c.slot == 32768,
          "override beats environment, last override wins (slot %zu)", c.slot);
    check(c.rails && strcmp(c.rails, "loop:a,loop:b") == 0, "override string (%s)",
          c.rails ? c.rails : "(null)");
    check(c.credits == 3, "no override: environment still used (%u)", c.credits);
    mdr_cfg_release(&mdr_core_cfg_table, &c);

    unsetenv("MADRAIL_SLOT_SIZE");
    unsetenv("MADRAIL_CREDITS");
    unsetenv("MADRAIL_RAILS");
    unsetenv("MADRAIL_TIMEOUT");
    st = mdr_cfg_parse(&mdr_core_cfg_table, NULL, &c);
    check(st == MADRAIL_OK && c.slot == 8192 && c.credits == 8,
          "default again after unsetenv (slot %zu credits %u)", c.slot, c.credits);
    mdr_cfg_release(&mdr_core_cfg_table, &c);
}

static void test_errors(void)
{
    test_core_cfg_t c;
    madrail_status_t st;
    const char *err;

    /* The exact message of the brief, from the environment. */
    setenv("MADRAIL_SLOT_SIZE", "12x", 1);
    capture_begin();
    st = mdr_cfg_parse(&mdr_core_cfg_table, NULL, &c);
    err = capture_end();
    mdr_cfg_release(&mdr_core_cfg_table, &c);
    unsetenv("MADRAIL_SLOT_SIZE");
    check(st == MADRAIL_ERR_CONFIG, "bad env size fails with ERR_CONFIG (%d)", (int)st);
    check(strstr(err, "MADRAIL_SLOT_SIZE=12x: not a size (expected e.g. 8192, 64k, 1m; range "
                      "256..1m)") != NULL,
          "message names variable, value, reason, expectation and range");
    check(strstr(err, " error: ") != NULL && strstr(err, "] madrail cfg.c:") != NULL,
          "message is an error with the log prefix");

    /* Bounds are inclusive. */
    {
        const char *const ov[] = {"MADRAIL_SLOT_SIZE=256", "MADRAIL_CREDITS=1024",
                                  "MADRAIL_TIMEOUT=1us", "MADRAIL_RATIO=1", NULL};
        st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
        check(st == MADRAIL_OK && c.slot == 256 && c.credits == 1024,
              "values at the bounds accepted");
        mdr_cfg_release(&mdr_core_cfg_table, &c);
    }
    {
        const char *const ov[] = {"MADRAIL_SLOT_SIZE=1m", "MADRAIL_TIMEOUT=60s", "MADRAIL_RATIO=0",
                                  NULL};
        st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
        check(st == MADRAIL_OK && c.slot == 1048576 && c.timeout == 60.0,
              "values at the upper bounds accepted");
        mdr_cfg_release(&mdr_core_cfg_table, &c);
    }

    /* Out of range, several at once: every one reported. */
    {
        const char *const ov[] = {"MADRAIL_SLOT_SIZE=128", "MADRAIL_CREDITS=0",
                                  "MADRAIL_TIMEOUT=2min", "MADRAIL_RATIO=1.5",
                                  "MADRAIL_STATS=maybe", "MADRAIL_BIG=-1", NULL};
        capture_begin();
        st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
        err = capture_end();
        mdr_cfg_release(&mdr_core_cfg_table, &c);
        check(st == MADRAIL_ERR_CONFIG, "out-of-range values fail");
        check(strstr(err, "MADRAIL_SLOT_SIZE=128: out of range") && strstr(err, "256..1m"),
              "size below min reported with range");
        check(strstr(err, "MADRAIL_CREDITS=0: out of range") && strstr(err, "1..1024"),
              "uint below min reported with range");
        check(strstr(err, "MADRAIL_TIMEOUT=2min: not a time") != NULL, "bad time unit reported");
        check(strstr(err, "MADRAIL_RATIO=1.5: out of range") && strstr(err, "0..1"),
              "double above max reported");
        check(strstr(err, "MADRAIL_STATS=maybe: not a boolean") != NULL, "bad bool reported");
        check(strstr(err, "MADRAIL_BIG=-1: negative") != NULL, "negative size reported");
        check(strstr(err, "in overrides") != NULL, "origin (overrides) named");
        check(count_substr(err, "\n") == 6, "one line per bad variable (%d)",
              count_substr(err, "\n"));
    }
    {
        const char *const ov[] = {"MADRAIL_SLOT_SIZE=2m", NULL};
        capture_begin();
        st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
        err = capture_end();
        mdr_cfg_release(&mdr_core_cfg_table, &c);
        check(st == MADRAIL_ERR_CONFIG && strstr(err, "MADRAIL_SLOT_SIZE=2m: out of range"),
              "size above max reported");
    }
    /* Unbounded size accepts anything that parses. */
    {
        const char *const ov[] = {"MADRAIL_BIG=0", NULL};
        st = mdr_cfg_parse(&mdr_core_cfg_table, ov, &c);
        check(st == MADRAIL_OK && c.big == 0, "min > max means no bounds");
        mdr_cfg_release(&mdr_core_cfg_table, &c);
    }
    /* min == max == 0 also means no bounds (tcp table). */
    {
        const char *const ov[] = {"MADRAIL_TCP_SNDBUF=4m", NULL};
        test_tcp_cfg_t t;
        st = mdr_cfg_parse(&mdr_tcp_cfg_table, ov, &t);
        check(st == MADRAIL_OK && t.sndbuf == 4u << 20, "min == max == 0 means no bounds");
    }
    /* An empty environment value is an error for numbers, a value for strings. */
    setenv("MADRAIL_CREDITS", "", 1);
    setenv("MADRAIL_RAILS", "", 1);
    capture_begin();
    st = mdr_cfg_parse(&mdr_core_cfg_table, NULL, &c);
    err = capture_end();
    check(st == MADRAIL_ERR_CONFIG && strstr(err, "MADRAIL_CREDITS=: not an unsigned integer"),
          "empty numeric value rejected");
    check(c.rails != NULL && c.rails[0] == '\0', "empty string value kept");
    mdr_cfg_release(&mdr_core_cfg_table, &c);
    unsetenv("MADRAIL_CREDITS");
    unsetenv("MADRAIL_RAILS");
}

static void test_unknown(void)
{
    const char *const ov[] = {"MADRAIL_SLOTSIZE=4k", "MADRAIL_SLOTSIZE=8k", "MADRAIL_CREDIT=3",
                              "OTHER_THING=1",       "MADRAIL_SLOT_SIZE=8k", NULL};
    const char *err;
    int n;

    setenv("MADRAIL_TCP_SNDBUFF", "1", 1);
    setenv("MADRAIL_LOOP_DROP", "0.1", 1);   /* known: not reported */
    setenv("MADRAIL_SLOTSIZE", "4k", 1);     /* same as an override: reported once */
    setenv("NOT_MADRAIL_FOO", "1", 1);
    setenv("MADRAIL_CACHE_DIR", "/tmp", 1); /* read by scripts/build-mpich.sh: known */

    capture_begin();
    n = mdr_cfg_check_unknown(ov);
    err = capture_end();
    check(n == 3, "3 unknown names counted (got %d)", n);
    check(strstr(err, "unknown variable MADRAIL_SLOTSIZE, did you mean MADRAIL_SLOT_SIZE?") !=
              NULL,
          "suggestion for MADRAIL_SLOTSIZE");
    check(count_substr(err, "unknown variable MADRAIL_SLOTSIZE,") == 1,
          "MADRAIL_SLOTSIZE warned once (%d)", count_substr(err, "unknown variable MADRAIL_SLOTSIZE,"));
    check(strstr(err, "unknown variable MADRAIL_CREDIT, did you mean MADRAIL_CREDITS?") != NULL,
          "suggestion for MADRAIL_CREDIT");
    check(strstr(err, "unknown variable MADRAIL_TCP_SNDBUFF, did you mean MADRAIL_TCP_SNDBUF?") !=
              NULL,
          "environment name checked against the tcp table");
    check(strstr(err, "LOOP_DROP") == NULL && strstr(err, "OTHER_THING") == NULL &&
              strstr(err, "NOT_MADRAIL") == NULL,
          "known and non-MADRAIL names not reported");
    check(strstr(err, "MADRAIL_CACHE_DIR") == NULL,
          "MADRAIL_CACHE_DIR (a build script's variable) not reported");
    check(strstr(err, " warn: ") != NULL, "reported as warnings");

    unsetenv("MADRAIL_TCP_SNDBUFF");
    unsetenv("MADRAIL_LOOP_DROP");
    unsetenv("MADRAIL_SLOTSIZE");
    unsetenv("NOT_MADRAIL_FOO");
    unsetenv("MADRAIL_CACHE_DIR");
    capture_begin();
    n = mdr_cfg_check_unknown(NULL);
    err = capture_end();
    check(n == 0 && err[0] == '\0', "clean environment: nothing reported (%d)", n);
}

static void test_edit_distance(void)
{
    char a[201], b[201];
    size_t i;

    check(mdr_cfg_edit_distance("", "") == 0, "distance empty/empty = 0");
    check(mdr_cfg_edit_distance("abc", "") == 3, "distance abc/empty = 3");
    check(mdr_cfg_edit_distance("", "abcd") == 4, "distance empty/abcd = 4");
    check(mdr_cfg_edit_distance("kitten", "sitting") == 3, "distance kitten/sitting = 3");
    check(mdr_cfg_edit_distance("sitting", "kitten") == 3, "distance symmetric");
    check(mdr_cfg_edit_distance("flaw", "lawn") == 2, "distance flaw/lawn = 2");
    check(mdr_cfg_edit_distance("MADRAIL_SLOTSIZE", "MADRAIL_SLOT_SIZE") == 1,
          "distance one insertion = 1");
    check(mdr_cfg_edit_distance("same", "same") == 0, "distance identical = 0");
    /* Long strings take the heap path. */
    memset(a, 'a', 200);
    a[200] = '\0';
    memcpy(b, a, sizeof(a));
    for (i = 0; i < 5; i++)
        b[i * 37] = 'b';
    check(mdr_cfg_edit_distance(a, b) == 5, "distance long, 5 substitutions = %zu",
          mdr_cfg_edit_distance(a, b));
    b[150] = '\0';
    check(mdr_cfg_edit_distance(a, b) == 55, "distance long, 5 subst + 50 deletions = %zu",
          mdr_cfg_edit_distance(a, b));
}

typedef struct {
    int n;
    char keys[8][32], vals[8][32];
    int fail_on; /* index of the call that fails, -1 none */
} spec_rec_t;

static madrail_status_t spec_cb(const char *key, const char *val, void *arg)
{
    spec_rec_t *r = arg;

    if (r->n < 8) {
        snprintf(r->keys[r->n], sizeof(r->keys[0]), "%s", key);
        snprintf(r->vals[r->n], sizeof(r->vals[0]), "%s", val);
    }
    if (r->n++ == r->fail_on)
        return MADRAIL_ERR_CONFIG;
    return MADRAIL_OK;
}

static void test_spec(void)
{
    char s1[] = "tcp:eth0;bw=100m;lat=5us;nodelay";
    char s2[] = "loop";
    char s3[] = "a;;b=1;";
    char s4[] = "x;k1=1;bad=2;k3=3";
    char s5[] = "x;=v";
    char s6[] = " ofi:tcp ; prov = verbs ";
    char *first;
    spec_rec_t r;
    madrail_status_t st;

    memset(&r, 0, sizeof(r));
    r.fail_on = -1;
    first = NULL;
    st = mdr_spec_parse(s1, &first, spec_cb, &r);
    check(st == MADRAIL_OK && first && strcmp(first, "tcp:eth0") == 0, "spec first = tcp:eth0");
    check(r.n == 3 && strcmp(r.keys[0], "bw") == 0 && strcmp(r.vals[0], "100m") == 0 &&
              strcmp(r.keys[1], "lat") == 0 && strcmp(r.vals[1], "5us") == 0 &&
              strcmp(r.keys[2], "nodelay") == 0 && strcmp(r.vals[2], "") == 0,
          "spec options bw=100m lat=5us nodelay=\"\" (n=%d)", r.n);

    memset(&r, 0, sizeof(r));
    r.fail_on = -1;
    st = mdr_spec_parse(s2, &first, spec_cb, &r);
    check(st == MADRAIL_OK && strcmp(first, "loop") == 0 && r.n == 0, "spec without options");

    memset(&r, 0, sizeof(r));
    r.fail_on = -1;
    st = mdr_spec_parse(s3, &first, spec_cb, &r);
    check(st == MADRAIL_OK && strcmp(first, "a") == 0 && r.n == 1 && strcmp(r.keys[0], "b") == 0 &&
              strcmp(r.vals[0], "1") == 0,
          "spec empty fields skipped (n=%d)", r.n);

    memset(&r, 0, sizeof(r));
    r.fail_on = 1;
    first = NULL;
    st = mdr_spec_parse(s4, &first, spec_cb, &r);
    check(st == MADRAIL_ERR_CONFIG && r.n == 2 && first == NULL,
          "spec callback error stops the walk and is returned (n=%d)", r.n);

    memset(&r, 0, sizeof(r));
    r.fail_on = -1;
    capture_begin();
    st = mdr_spec_parse(s5, &first, spec_cb, &r);
    capture_end();
    check(st == MADRAIL_ERR_CONFIG && r.n == 0, "spec option with empty name rejected");

    memset(&r, 0, sizeof(r));
    r.fail_on = -1;
    st = mdr_spec_parse(s6, &first, spec_cb, &r);
    check(st == MADRAIL_OK && strcmp(first, "ofi:tcp") == 0 && r.n == 1 &&
              strcmp(r.keys[0], "prov") == 0 && strcmp(r.vals[0], "verbs") == 0,
          "spec blanks trimmed");

    check(mdr_spec_parse(NULL, &first, spec_cb, &r) == MADRAIL_ERR_INVALID, "spec NULL invalid");
}

static void test_print(void)
{
    FILE *f;
    char line[512];
    int type_col = -1, aligned = 1, nentries = 0, col;
    char *p;
    const char *out;

    f = tmpfile();
    if (f == NULL) {
        check(0, "tmpfile");
        return;
    }
    madrail_config_print(f);
    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stdout);
        if (strncmp(line, "  MADRAIL_", 10) != 0 && strncmp(line, "  NAME ", 7) != 0)
            continue;
        if (line[2] == 'M')
            nentries++;
        p = line + 2;
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
        col = (int)(p - line);
        if (type_col < 0)
            type_col = col;
        else if (col != type_col)
            aligned = 0;
    }
    fclose(f);
    check(nentries == 10, "print lists all 10 variables (%d)", nentries);
    check(aligned && type_col > 0, "type column aligned at %d", type_col);

    capture_begin(); /* reuse the capture buffer: print to fd 2 */
    mdr_cfg_print_all(stderr);
    out = capture_end();
    check(strstr(out, "core module") && strstr(out, "tcp module") && strstr(out, "loop module"),
          "module headings");
    check(strstr(out, "MADRAIL_SLOT_SIZE") && strstr(out, "size (bytes)") &&
              strstr(out, "8k") && strstr(out, "range 256..1m") &&
              strstr(out, "Size of one control slot"),
          "entry shows name, type, default, help and range");
    check(strstr(out, "time (s)") && strstr(out, "1us..60s"), "time type and range shown");
    check(strstr(out, "(none)") != NULL, "NULL default shown as (none)");
    check(strstr(out, "Drop probability.") != NULL, "loop table help shown");
}

static void test_log(void)
{
    const char *err;
    char expect[128];
    int line, lvl = mdr_log_level;

    check(mdr_log_level == MDR_LOG_WARN, "default log level warn");
    check(mdr_log_level_parse("error") == 0 && mdr_log_level_parse("WARN") == 1 &&
              mdr_log_level_parse("Info") == 2 && mdr_log_level_parse("debug") == 3 &&
              mdr_log_level_parse("TRACE") == 4,
          "level names parse");
    check(mdr_log_level_parse("0") == 0 && mdr_log_level_parse("4") == 4, "level digits parse");
    check(mdr_log_level_parse("5") == -1 && mdr_log_level_parse("verbose") == -1 &&
              mdr_log_level_parse("") == -1 && mdr_log_level_parse("12") == -1 &&
              mdr_log_level_parse(NULL) == -1,
          "bad levels rejected");

    capture_begin();
    mdr_info("hidden at warn level");
    line = __LINE__ + 1;
    mdr_warn("rail %s peer %d\nsecond line", "tcp:lo", 3);
    err = capture_end();
    check(strstr(err, "hidden") == NULL, "message below level suppressed");
    snprintf(expect, sizeof(expect), ":%d] madrail test_cfg.c:%d warn: rail tcp:lo peer 3\n",
             (int)getpid(), line);
    check(err[0] == '[' && strstr(err, expect) != NULL, "prefix [host:pid] madrail file:line");
    snprintf(expect, sizeof(expect), "test_cfg.c:%d warn: second line\n", line);
    check(strstr(err, expect) != NULL && count_substr(err, "\n") == 2,
          "each line of a message gets the prefix");

    mdr_log_set_level(MDR_LOG_TRACE);
    capture_begin();
    mdr_trace("now visible");
    err = capture_end();
    check(strstr(err, " trace: now visible\n") != NULL, "trace visible at trace level");
    mdr_log_set_level(99);
    check(mdr_log_level == MDR_LOG_TRACE, "set_level clamps");
    mdr_log_set_level(lvl);
}

static void test_status(void)
{
    static const madrail_status_t all[] = {
        MADRAIL_OK,          MADRAIL_INPROGRESS,   MADRAIL_ERR_NORESOURCE,
        MADRAIL_ERR_INVALID, MADRAIL_ERR_NOMEM,    MADRAIL_ERR_UNSUPPORTED,
        MADRAIL_ERR_CONFIG,  MADRAIL_ERR_TRUNCATE, MADRAIL_ERR_CANCELED,
        MADRAIL_ERR_IO,      MADRAIL_ERR_NOT_FOUND, MADRAIL_ERR_PMI,
        MADRAIL_ERR_RAIL_DOWN, MADRAIL_ERR_RAIL_PROTO, MADRAIL_ERR_PEER_UNREACHABLE,
        MADRAIL_ERR_PEER_PROTO};
    size_t i, j, n = sizeof(all) / sizeof(all[0]);
    int ok = 1;

    for (i = 0; i < n; i++) {
        const char *s = madrail_status_str(all[i]);
        if (s == NULL || strcmp(s, "unknown status") == 0)
            ok = 0;
        for (j = 0; j < i; j++)
            if (strcmp(s, madrail_status_str(all[j])) == 0)
                ok = 0;
    }
    check(ok, "every status has its own string");
    check(strcmp(madrail_status_str((madrail_status_t)42), "unknown status") == 0,
          "unknown status string");
}

int main(void)
{
    clear_madrail_env();
    test_sizes();
    test_other_types();
    test_defaults();
    test_priority();
    test_errors();
    test_unknown();
    test_edit_distance();
    test_spec();
    test_print();
    test_log();
    test_status();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
