/*
 * The configuration table parser: the only code in madrail that reads the
 * environment.  Each module describes its variables once (name, type with
 * units, bounds, default as text, help, offset) and this file does the
 * rest, so every variable gets the same syntax ("64k", "5ms", "on"), the
 * same error message naming the variable and the bad value, the same
 * precedence (overrides > environment > default) and shows up in
 * madrail_info.  Values are parsed by hand rather than with strtoull(),
 * which silently accepts "-1" (as a huge number) and leading blanks.  A bad
 * value never aborts: it is logged and reported as MADRAIL_ERR_CONFIG, and
 * the parse goes on so that one run reports every bad variable.
 */
#include "mdr_config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cfg.h"
#include "util/log.h"

extern char **environ;

#define MDR_CFG_PREFIX "MADRAIL_"

/* (belongs in cfg.h's list; declared here to leave that header alone) */
extern const mdr_cfg_table_t mdr_ofi_cfg_table;

static const mdr_cfg_table_t *const mdr_cfg_tables[] = {
    &mdr_core_cfg_table,
    &mdr_tcp_cfg_table,
    &mdr_loop_cfg_table,
    &mdr_shm_cfg_table, /* built even without the driver: the docs name its variables */
    &mdr_discover_cfg_table, /* rail discovery (MADRAIL_RAILS=auto) */
    &mdr_ofi_cfg_table,
};
#define MDR_CFG_NTABLES (sizeof(mdr_cfg_tables) / sizeof(mdr_cfg_tables[0]))

/* ------------------------------------------------------------------ */
/* value parsers */

static const char *mdr_cfg_skip_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* True if s is only blanks from here on. */
static int mdr_cfg_at_end(const char *s)
{
    return *mdr_cfg_skip_space(s) == '\0';
}

/* Leading decimal digits into *v (checked for overflow); returns the first
 * byte after them, or NULL with *why_p set. */
static const char *mdr_cfg_digits(const char *s, uint64_t limit, uint64_t *v, const char **why_p,
                                  const char *notwhat)
{
    uint64_t acc = 0;
    unsigned d;

    if (*s == '-') {
        *why_p = "negative values are not allowed";
        return NULL;
    }
    if (*s == '+')
        s++;
    if (!isdigit((unsigned char)*s)) {
        *why_p = notwhat;
        return NULL;
    }
    while (isdigit((unsigned char)*s)) {
        d = (unsigned)(*s - '0');
        if (acc > (limit - d) / 10) {
            *why_p = "too large";
            return NULL;
        }
        acc = acc * 10 + d;
        s++;
    }
    *v = acc;
    return s;
}

static madrail_status_t mdr_cfg_parse_size(const char *text, size_t *out, const char **why_p)
{
    const char *s = mdr_cfg_skip_space(text);
    uint64_t v, mult = 1;

    s = mdr_cfg_digits(s, SIZE_MAX, &v, why_p, "not a size");
    if (s == NULL)
        return MADRAIL_ERR_CONFIG;
    switch (*s) {
    case 'k': case 'K': mult = 1ull << 10; s++; break;
    case 'm': case 'M': mult = 1ull << 20; s++; break;
    case 'g': case 'G': mult = 1ull << 30; s++; break;
    default: break;
    }
    if (*s == 'b' || *s == 'B')
        s++;
    if (!mdr_cfg_at_end(s)) {
        *why_p = "not a size";
        return MADRAIL_ERR_CONFIG;
    }
    if (v != 0 && mult > SIZE_MAX / v) {
        *why_p = "too large";
        return MADRAIL_ERR_CONFIG;
    }
    *out = (size_t)(v * mult);
    return MADRAIL_OK;
}

static madrail_status_t mdr_cfg_parse_uint(const char *text, unsigned *out, const char **why_p)
{
    const char *s = mdr_cfg_skip_space(text);
    uint64_t v;

    s = mdr_cfg_digits(s, UINT_MAX, &v, why_p, "not an unsigned integer");
    if (s == NULL)
        return MADRAIL_ERR_CONFIG;
    if (!mdr_cfg_at_end(s)) {
        *why_p = "not an unsigned integer";
        return MADRAIL_ERR_CONFIG;
    }
    *out = (unsigned)v;
    return MADRAIL_OK;
}

static madrail_status_t mdr_cfg_parse_bool(const char *text, int *out, const char **why_p)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    const char *s = mdr_cfg_skip_space(text);
    size_t len = strlen(s), i;

    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strlen(yes[i]) == len && strncasecmp(s, yes[i], len) == 0) {
            *out = 1;
            return MADRAIL_OK;
        }
        if (strlen(no[i]) == len && strncasecmp(s, no[i], len) == 0) {
            *out = 0;
            return MADRAIL_OK;
        }
    }
    *why_p = "not a boolean";
    return MADRAIL_ERR_CONFIG;
}

/* A finite number; *end_p gets the first byte after it. */
static madrail_status_t mdr_cfg_parse_number(const char *text, double *out, const char **end_p,
                                             const char **why_p, const char *notwhat)
{
    const char *s = mdr_cfg_skip_space(text);
    char *end;
    double v;

    /* strtod also takes "nan", "inf" and hex floats; only plain decimals here. */
    if (!(isdigit((unsigned char)*s) || *s == '.' || *s == '-' || *s == '+')) {
        *why_p = notwhat;
        return MADRAIL_ERR_CONFIG;
    }
    if ((s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ||
        ((s[0] == '-' || s[0] == '+') && s[1] == '0' && (s[2] == 'x' || s[2] == 'X'))) {
        *why_p = notwhat;
        return MADRAIL_ERR_CONFIG;
    }
    errno = 0;
    v = strtod(s, &end);
    if (end == s) {
        *why_p = notwhat;
        return MADRAIL_ERR_CONFIG;
    }
    if ((errno == ERANGE && (v > 1.0 || v < -1.0)) || !isfinite(v)) {
        *why_p = "too large";
        return MADRAIL_ERR_CONFIG;
    }
    *out = v;
    *end_p = end;
    return MADRAIL_OK;
}

static madrail_status_t mdr_cfg_parse_double(const char *text, double *out, const char **why_p)
{
    const char *end;
    double v;

    if (mdr_cfg_parse_number(text, &v, &end, why_p, "not a number") != MADRAIL_OK)
        return MADRAIL_ERR_CONFIG;
    if (!mdr_cfg_at_end(end)) {
        *why_p = "not a number";
        return MADRAIL_ERR_CONFIG;
    }
    *out = v;
    return MADRAIL_OK;
}

static madrail_status_t mdr_cfg_parse_time(const char *text, double *out, const char **why_p)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}, {"", 1.0}};
    const char *end;
    double v;
    size_t len, i;

    if (mdr_cfg_parse_number(text, &v, &end, why_p, "not a time") != MADRAIL_OK)
        return MADRAIL_ERR_CONFIG;
    if (v < 0) {
        *why_p = "negative values are not allowed";
        return MADRAIL_ERR_CONFIG;
    }
    end = mdr_cfg_skip_space(end);
    len = strlen(end);
    while (len > 0 && isspace((unsigned char)end[len - 1]))
        len--;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].unit) == len && strncasecmp(end, units[i].unit, len) == 0) {
            *out = v * units[i].scale;
            return MADRAIL_OK;
        }
    }
    *why_p = "not a time";
    return MADRAIL_ERR_CONFIG;
}

madrail_status_t mdr_cfg_parse_value(mdr_cfg_type_t type, const char *text, void *out,
                                     const char **why_p)
{
    const char *why = "invalid value";
    madrail_status_t st = MADRAIL_ERR_CONFIG;
    char *dup;

    if (text == NULL || out == NULL) {
        if (why_p != NULL)
            *why_p = "no value";
        return MADRAIL_ERR_INVALID;
    }
    switch (type) {
    case MDR_CFG_SIZE:
        st = mdr_cfg_parse_size(text, (size_t *)out, &why);
        break;
    case MDR_CFG_UINT:
        st = mdr_cfg_parse_uint(text, (unsigned *)out, &why);
        break;
    case MDR_CFG_BOOL:
        st = mdr_cfg_parse_bool(text, (int *)out, &why);
        break;
    case MDR_CFG_DOUBLE:
        st = mdr_cfg_parse_double(text, (double *)out, &why);
        break;
    case MDR_CFG_TIME:
        st = mdr_cfg_parse_time(text, (double *)out, &why);
        break;
    case MDR_CFG_STRING:
        dup = strdup(text);
        if (dup == NULL) {
            why = "out of memory";
            st = MADRAIL_ERR_NOMEM;
            break;
        }
        *(char **)out = dup;
        st = MADRAIL_OK;
        break;
    default:
        why = "unknown variable type";
        st = MADRAIL_ERR_INVALID;
        break;
    }
    if (st != MADRAIL_OK && why_p != NULL)
        *why_p = why;
    return st;
}

/* ------------------------------------------------------------------ */
/* formatting of bounds, defaults and types */

/* "256", "64k", "1m", "1g" for sizes that are exact multiples. */
static void mdr_cfg_fmt_size(double v, char *buf, size_t len)
{
    static const char sfx[] = {'g', 'm', 'k'};
    static const unsigned shift[] = {30, 20, 10};
    unsigned long long n;
    size_t i;

    if (!(v >= 0) || v >= 18446744073709551616.0 /* 2^64; also NaN */ ||
        (double)(unsigned long long)v != v) {
        snprintf(buf, len, "%g", v);
        return;
    }
    n = (unsigned long long)v;
    for (i = 0; i < sizeof(sfx); i++) {
        if (n != 0 && n % (1ull << shift[i]) == 0) {
            snprintf(buf, len, "%llu%c", n >> shift[i], sfx[i]);
            return;
        }
    }
    snprintf(buf, len, "%llu", n);
}

static void mdr_cfg_fmt_time(double v, char *buf, size_t len)
{
    if (v == 0)
        snprintf(buf, len, "0s");
    else if (v < 1e-3)
        snprintf(buf, len, "%gus", v * 1e6);
    else if (v < 1.0)
        snprintf(buf, len, "%gms", v * 1e3);
    else
        snprintf(buf, len, "%gs", v);
}

static void mdr_cfg_fmt_bound(mdr_cfg_type_t type, double v, char *buf, size_t len)
{
    switch (type) {
    case MDR_CFG_SIZE:
        mdr_cfg_fmt_size(v, buf, len);
        break;
    case MDR_CFG_TIME:
        mdr_cfg_fmt_time(v, buf, len);
        break;
    default:
        snprintf(buf, len, "%.10g", v);
        break;
    }
}

static int mdr_cfg_is_numeric(mdr_cfg_type_t type)
{
    return type == MDR_CFG_SIZE || type == MDR_CFG_UINT || type == MDR_CFG_DOUBLE ||
           type == MDR_CFG_TIME;
}

/* Bounds apply when min <= max.  min == max == 0 is also taken as "no
 * bounds": that is what a table entry gets when it leaves both out, and a
 * variable whose only legal value is 0 would make no sense. */
static int mdr_cfg_has_bounds(const mdr_cfg_entry_t *e)
{
    return mdr_cfg_is_numeric(e->type) && e->min <= e->max && !(e->min == 0 && e->max == 0);
}

/* "256..1m" into buf, or "" without bounds. */
static void mdr_cfg_fmt_range(const mdr_cfg_entry_t *e, char *buf, size_t len)
{
    char lo[48], hi[48];

    if (!mdr_cfg_has_bounds(e)) {
        buf[0] = '\0';
        return;
    }
    mdr_cfg_fmt_bound(e->type, e->min, lo, sizeof(lo));
    mdr_cfg_fmt_bound(e->type, e->max, hi, sizeof(hi));
    snprintf(buf, len, "%s..%s", lo, hi);
}

static const char *mdr_cfg_type_name(mdr_cfg_type_t type)
{
    switch (type) {
    case MDR_CFG_SIZE:
        return "size (bytes)";
    case MDR_CFG_UINT:
        return "unsigned";
    case MDR_CFG_BOOL:
        return "bool";
    case MDR_CFG_DOUBLE:
        return "number";
    case MDR_CFG_TIME:
        return "time (s)";
    case MDR_CFG_STRING:
        return "string";
    }
    return "?";
}

static const char *mdr_cfg_expected(mdr_cfg_type_t type)
{
    switch (type) {
    case MDR_CFG_SIZE:
        return "expected e.g. 8192, 64k, 1m";
    case MDR_CFG_UINT:
        return "expected an unsigned integer";
    case MDR_CFG_BOOL:
        return "expected 0/1, yes/no, true/false or on/off";
    case MDR_CFG_DOUBLE:
        return "expected a number";
    case MDR_CFG_TIME:
        return "expected e.g. 10us, 5ms, 2s; a plain number is seconds";
    case MDR_CFG_STRING:
        return "expected a string";
    }
    return "expected a valid value";
}

/* ------------------------------------------------------------------ */
/* table parsing */

/* Value of name in overrides (the last "NAME=value" wins), or NULL. */
static const char *mdr_cfg_override(const char *const *overrides, const char *name)
{
    const char *found = NULL;
    size_t len = strlen(name);
    size_t i;

    if (overrides == NULL)
        return NULL;
    for (i = 0; overrides[i] != NULL; i++)
        if (strncmp(overrides[i], name, len) == 0 && overrides[i][len] == '=')
            found = overrides[i] + len + 1;
    return found;
}

static double mdr_cfg_as_double(mdr_cfg_type_t type, const void *field)
{
    switch (type) {
    case MDR_CFG_SIZE:
        return (double)*(const size_t *)field;
    case MDR_CFG_UINT:
        return (double)*(const unsigned *)field;
    case MDR_CFG_DOUBLE:
    case MDR_CFG_TIME:
        return *(const double *)field;
    default:
        return 0;
    }
}

/* Parse one entry's text into a temporary, check bounds, then store. */
static madrail_status_t mdr_cfg_parse_entry(const mdr_cfg_entry_t *e, const char *text,
                                            const char *origin, void *obj)
{
    union {
        size_t sz;
        unsigned u;
        int b;
        double d;
        char *s;
    } val;
    char range[112];
    const char *why = NULL;
    void *field = (char *)obj + e->offset;
    madrail_status_t st;
    double v;
    size_t sz;

    memset(&val, 0, sizeof(val));
    mdr_cfg_fmt_range(e, range, sizeof(range));
    if (text == NULL) { /* no default: zero / NULL */
        switch (e->type) {
        case MDR_CFG_SIZE: *(size_t *)field = 0; break;
        case MDR_CFG_UINT: *(unsigned *)field = 0; break;
        case MDR_CFG_BOOL: *(int *)field = 0; break;
        case MDR_CFG_DOUBLE:
        case MDR_CFG_TIME: *(double *)field = 0; break;
        case MDR_CFG_STRING: *(char **)field = NULL; break;
        }
        return MADRAIL_OK;
    }

    st = mdr_cfg_parse_value(e->type, text, &val, &why);
    if (st != MADRAIL_OK) {
        mdr_error("%s=%s: %s (%s%s%s)%s", e->name, text, why, mdr_cfg_expected(e->type),
                  range[0] ? "; range " : "", range, origin);
        return st;
    }
    if (mdr_cfg_has_bounds(e)) {
        v = mdr_cfg_as_double(e->type, &val);
        if (v < e->min || v > e->max) {
            mdr_error("%s=%s: out of range (%s; range %s)%s", e->name, text,
                      mdr_cfg_expected(e->type), range, origin);
            return MADRAIL_ERR_CONFIG;
        }
    }
    switch (e->type) {
    case MDR_CFG_SIZE: sz = sizeof(size_t); break;
    case MDR_CFG_UINT: sz = sizeof(unsigned); break;
    case MDR_CFG_BOOL: sz = sizeof(int); break;
    case MDR_CFG_DOUBLE:
    case MDR_CFG_TIME: sz = sizeof(double); break;
    case MDR_CFG_STRING:
        free(*(char **)field);
        sz = sizeof(char *);
        break;
    default: sz = 0; break;
    }
    memcpy(field, &val, sz);
    return MADRAIL_OK;
}

madrail_status_t mdr_cfg_parse(const mdr_cfg_table_t *table, const char *const *overrides,
                               void *obj)
{
    madrail_status_t st = MADRAIL_OK, st1;
    const mdr_cfg_entry_t *e;
    const char *text, *origin;
    size_t i;

    if (table == NULL || obj == NULL)
        return MADRAIL_ERR_INVALID;
    /* String fields start NULL so that release is safe after any failure. */
    for (i = 0; i < table->count; i++)
        if (table->entries[i].type == MDR_CFG_STRING)
            *(char **)((char *)obj + table->entries[i].offset) = NULL;

    for (i = 0; i < table->count; i++) {
        e = &table->entries[i];
        text = mdr_cfg_override(overrides, e->name);
        origin = " in overrides";
        if (text == NULL) {
            text = getenv(e->name);
            origin = "";
        }
        if (text == NULL) {
            text = e->defval;
            origin = " (built-in default)";
        }
        st1 = mdr_cfg_parse_entry(e, text, origin, obj);
        if (st1 != MADRAIL_OK && st == MADRAIL_OK)
            st = st1;
    }
    return st;
}

void mdr_cfg_release(const mdr_cfg_table_t *table, void *obj)
{
    char **field;
    size_t i;

    if (table == NULL || obj == NULL)
        return;
    for (i = 0; i < table->count; i++) {
        if (table->entries[i].type != MDR_CFG_STRING)
            continue;
        field = (char **)((char *)obj + table->entries[i].offset);
        free(*field);
        *field = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* unknown names */

size_t mdr_cfg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i, j, del, ins, sub, best;
    size_t stackrow[2][64];
    size_t *prev, *cur, *tmp, *heap = NULL, d;

    if (lb + 1 <= 64) {
        prev = stackrow[0];
        cur = stackrow[1];
    } else {
        heap = malloc(2 * (lb + 1) * sizeof(size_t));
        if (heap == NULL)
            return SIZE_MAX;
        prev = heap;
        cur = heap + lb + 1;
    }
    for (j = 0; j <= lb; j++)
        prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            del = prev[j] + 1;
            ins = cur[j - 1] + 1;
            sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            best = del < ins ? del : ins;
            cur[j] = best < sub ? best : sub;
        }
        tmp = prev;
        prev = cur;
        cur = tmp;
    }
    d = prev[lb];
    free(heap);
    return d;
}

/* MADRAIL_* variables that the project's scripts read, not the library
 * (scripts/build-mpich.sh's cache directory): exported by users, they must
 * not draw an "unknown variable" warning from every program. */
static const char *const mdr_cfg_script_vars[] = {"MADRAIL_CACHE_DIR"};

static int mdr_cfg_known(const char *name, size_t len)
{
    const mdr_cfg_entry_t *e;
    size_t t, i;

    for (i = 0; i < sizeof(mdr_cfg_script_vars) / sizeof(mdr_cfg_script_vars[0]); i++)
        if (strlen(mdr_cfg_script_vars[i]) == len && strncmp(mdr_cfg_script_vars[i], name, len) == 0)
            return 1;

    for (t = 0; t < MDR_CFG_NTABLES; t++) {
        for (i = 0; i < mdr_cfg_tables[t]->count; i++) {
            e = &mdr_cfg_tables[t]->entries[i];
            if (strlen(e->name) == len && strncmp(e->name, name, len) == 0)
                return 1;
        }
    }
    return 0;
}

static const char *mdr_cfg_nearest(const char *name)
{
    const char *best = NULL;
    size_t bestd = SIZE_MAX, d, t, i;

    for (t = 0; t < MDR_CFG_NTABLES; t++) {
        for (i = 0; i < mdr_cfg_tables[t]->count; i++) {
            d = mdr_cfg_edit_distance(name, mdr_cfg_tables[t]->entries[i].name);
            if (d < bestd) {
                bestd = d;
                best = mdr_cfg_tables[t]->entries[i].name;
            }
        }
    }
    return best;
}

/* Names seen so far in one check, to warn once each. */
typedef struct {
    char **names;
    size_t n, cap;
} mdr_cfg_seen_t;

/* 1 if already seen, 0 if newly added (or if it cannot be recorded). */
static int mdr_cfg_seen(mdr_cfg_seen_t *seen, const char *name)
{
    char **grown;
    size_t i;

    for (i = 0; i < seen->n; i++)
        if (strcmp(seen->names[i], name) == 0)
            return 1;
    if (seen->n == seen->cap) {
        grown = realloc(seen->names, (seen->cap ? 2 * seen->cap : 8) * sizeof(char *));
        if (grown == NULL)
            return 0;
        seen->names = grown;
        seen->cap = seen->cap ? 2 * seen->cap : 8;
    }
    seen->names[seen->n] = strdup(name);
    if (seen->names[seen->n] != NULL)
        seen->n++;
    return 0;
}

/* Look at one "NAME=value" string; returns 1 if it named an unknown variable
 * not reported before. */
static int mdr_cfg_check_one(const char *assign, const char *where, mdr_cfg_seen_t *seen)
{
    const char *eq, *nearest;
    char namebuf[256];
    size_t len;

    if (strncmp(assign, MDR_CFG_PREFIX, strlen(MDR_CFG_PREFIX)) != 0)
        return 0;
    eq = strchr(assign, '=');
    len = eq ? (size_t)(eq - assign) : strlen(assign);
    if (mdr_cfg_known(assign, len))
        return 0;
    if (len >= sizeof(namebuf))
        len = sizeof(namebuf) - 1;
    memcpy(namebuf, assign, len);
    namebuf[len] = '\0';
    if (mdr_cfg_seen(seen, namebuf))
        return 0;
    nearest = mdr_cfg_nearest(namebuf);
    if (nearest != NULL)
        mdr_warn("unknown variable %s, did you mean %s?%s", namebuf, nearest, where);
    else
        mdr_warn("unknown variable %s%s", namebuf, where);
    return 1;
}

int mdr_cfg_check_unknown(const char *const *overrides)
{
    mdr_cfg_seen_t seen = {NULL, 0, 0};
    int count = 0;
    size_t i;

    if (overrides != NULL)
        for (i = 0; overrides[i] != NULL; i++)
            count += mdr_cfg_check_one(overrides[i], " (in overrides)", &seen);
    if (environ != NULL)
        for (i = 0; environ[i] != NULL; i++)
            count += mdr_cfg_check_one(environ[i], "", &seen);
    for (i = 0; i < seen.n; i++)
        free(seen.names[i]);
    free(seen.names);
    return count;
}

/* ------------------------------------------------------------------ */
/* printing */

#define MDR_CFG_PRINT_WIDTH 100

/* Print text word-wrapped from column col to MDR_CFG_PRINT_WIDTH, continuing
 * lines at column indent. */
static void mdr_cfg_print_wrapped(FILE *out, const char *text, int col, int indent)
{
    const char *p = text, *w;
    int wlen, first = 1;

    while (*p != '\0') {
        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        w = p;
        while (*p != '\0' && *p != ' ')
            p++;
        wlen = (int)(p - w);
        if (!first && col + 1 + wlen > MDR_CFG_PRINT_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            first = 1;
        }
        if (!first) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", wlen, w);
        col += wlen;
        first = 0;
    }
    fputc('\n', out);
}

void mdr_cfg_print_all(FILE *out)
{
    const mdr_cfg_table_t *t;
    const mdr_cfg_entry_t *e;
    int wname = 4, wtype = 4, wdef = 7, n, col;
    char range[112], help[1024], defbuf[64];
    const char *def;
    size_t ti, i;

    if (out == NULL)
        out = stdout;
    for (ti = 0; ti < MDR_CFG_NTABLES; ti++) {
        t = mdr_cfg_tables[ti];
        for (i = 0; i < t->count; i++) {
            e = &t->entries[i];
            n = (int)strlen(e->name);
            wname = n > wname ? n : wname;
            n = (int)strlen(mdr_cfg_type_name(e->type));
            wtype = n > wtype ? n : wtype;
            n = e->defval ? (int)strlen(e->defval) + (e->defval[0] ? 0 : 2) : 6;
            wdef = n > wdef ? n : wdef;
        }
    }
    if (wdef > 16)
        wdef = 16; /* a long default pushes its own help along, not everyone's */

    for (ti = 0; ti < MDR_CFG_NTABLES; ti++) {
        t = mdr_cfg_tables[ti];
        fprintf(out, "%s%s module (%zu variable%s)\n", ti ? "\n" : "", t->module, t->count,
                t->count == 1 ? "" : "s");
        if (t->count > 0)
            fprintf(out, "  %-*s  %-*s  %-*s  %s\n", wname, "NAME", wtype, "TYPE", wdef,
                    "DEFAULT", "DESCRIPTION");
        for (i = 0; i < t->count; i++) {
            e = &t->entries[i];
            if (e->defval == NULL) {
                def = "(none)";
            } else if (e->defval[0] == '\0') {
                def = "\"\"";
            } else {
                def = e->defval;
            }
            snprintf(defbuf, sizeof(defbuf), "%s", def);
            n = fprintf(out, "  %-*s  %-*s  %-*s  ", wname, e->name, wtype,
                        mdr_cfg_type_name(e->type), wdef, defbuf);
            col = n > 0 ? n : 0;
            mdr_cfg_fmt_range(e, range, sizeof(range));
            snprintf(help, sizeof(help), "%s%s%s%s", e->help ? e->help : "",
                     range[0] ? " (range " : "", range, range[0] ? ")" : "");
            mdr_cfg_print_wrapped(out, help, col, 2 + wname + 2 + wtype + 2 + wdef + 2);
        }
    }
}

void madrail_config_print(FILE *out)
{
    mdr_cfg_print_all(out);
}

/* ------------------------------------------------------------------ */
/* introspection (madrail_info -v): what a context created now would read */

int madrail_config_count(void)
{
    size_t t, n = 0;

    for (t = 0; t < MDR_CFG_NTABLES; t++)
        n += mdr_cfg_tables[t]->count;
    return (int)n;
}

/* Would parse accept text for e?  NULL if so, else why not (static). */
static const char *mdr_cfg_refusal(const mdr_cfg_entry_t *e, const char *text)
{
    union {
        size_t sz;
        unsigned u;
        int b;
        double d;
        char *s;
    } val;
    const char *why = NULL;

    memset(&val, 0, sizeof(val));
    if (mdr_cfg_parse_value(e->type, text, &val, &why) != MADRAIL_OK)
        return why ? why : "invalid value";
    if (e->type == MDR_CFG_STRING)
        free(val.s);
    if (mdr_cfg_has_bounds(e)) {
        double v = mdr_cfg_as_double(e->type, &val);
        if (v < e->min || v > e->max)
            return "out of range";
    }
    return NULL;
}

madrail_status_t madrail_config_var(int index, madrail_config_var_t *var_p)
{
    const mdr_cfg_entry_t *e = NULL;
    const char *env;
    size_t t, i = (size_t)index;

    if (index < 0 || var_p == NULL)
        return MADRAIL_ERR_INVALID;
    for (t = 0; t < MDR_CFG_NTABLES && e == NULL; t++) {
        if (i < mdr_cfg_tables[t]->count)
            e = &mdr_cfg_tables[t]->entries[i];
        else
            i -= mdr_cfg_tables[t]->count;
    }
    if (e == NULL)
        return MADRAIL_ERR_INVALID;
    memset(var_p, 0, sizeof(*var_p));
    var_p->name = e->name;
    var_p->module = mdr_cfg_tables[t - 1]->module;
    var_p->type = mdr_cfg_type_name(e->type);
    var_p->defval = e->defval ? e->defval : "";
    var_p->help = e->help ? e->help : "";
    mdr_cfg_fmt_range(e, var_p->range, sizeof(var_p->range));
    env = getenv(e->name);
    if (env != NULL) {
        var_p->value = env;
        var_p->source = MADRAIL_CONFIG_ENV;
    } else {
        var_p->value = var_p->defval;
        var_p->source = MADRAIL_CONFIG_DEFAULT;
    }
    if (env != NULL || e->defval != NULL)
        var_p->error = mdr_cfg_refusal(e, var_p->value);
    return MADRAIL_OK;
}

madrail_status_t madrail_config_unknown(int index, char *name, size_t len,
                                        const char **nearest_p)
{
    const char *eq;
    size_t i, j, n;
    int seen = 0;

    if (index < 0 || name == NULL || len == 0 || environ == NULL)
        return MADRAIL_ERR_INVALID;
    for (i = 0; environ[i] != NULL; i++) {
        const char *a = environ[i];
        int dup = 0;
        if (strncmp(a, MDR_CFG_PREFIX, strlen(MDR_CFG_PREFIX)) != 0)
            continue;
        eq = strchr(a, '=');
        n = eq ? (size_t)(eq - a) : strlen(a);
        if (mdr_cfg_known(a, n))
            continue;
        for (j = 0; j < i && !dup; j++) /* the same name twice in environ: once */
            dup = strncmp(environ[j], a, n) == 0 && (environ[j][n] == '=' || environ[j][n] == '\0');
        if (dup || seen++ < index)
            continue;
        if (n >= len)
            n = len - 1;
        memcpy(name, a, n);
        name[n] = '\0';
        if (nearest_p != NULL)
            *nearest_p = mdr_cfg_nearest(name);
        return MADRAIL_OK;
    }
    return MADRAIL_ERR_INVALID;
}

/* ------------------------------------------------------------------ */
/* driver specs */

static char *mdr_cfg_trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

madrail_status_t mdr_spec_parse(char *spec, char **first_p,
                                madrail_status_t (*fn)(const char *key, const char *val,
                                                       void *arg),
                                void *arg)
{
    madrail_status_t st;
    char *first, *next, *tok, *eq, *key, *val;

    if (spec == NULL)
        return MADRAIL_ERR_INVALID;
    first = spec;
    next = strchr(spec, ';');
    if (next != NULL)
        *next++ = '\0';
    first = mdr_cfg_trim(first);

    while (next != NULL) {
        tok = next;
        next = strchr(tok, ';');
        if (next != NULL)
            *next++ = '\0';
        eq = strchr(tok, '=');
        if (eq != NULL) {
            *eq = '\0';
            val = mdr_cfg_trim(eq + 1);
        } else {
            val = tok + strlen(tok); /* "" */
        }
        key = mdr_cfg_trim(tok);
        if (key[0] == '\0') {
            if (eq == NULL)
                continue; /* "a;;b" or a trailing ';' */
            mdr_error("spec %s: option with an empty name (=%s)", first, val);
            return MADRAIL_ERR_CONFIG;
        }
        if (fn != NULL) {
            st = fn(key, val, arg);
            if (st != MADRAIL_OK)
                return st;
        }
    }
    if (first_p != NULL)
        *first_p = first;
    return MADRAIL_OK;
}
