/*
 * One table-driven parser for every MADRAIL_* variable.  Each module
 * declares a table (name, type with units and bounds, default, help,
 * offset into its config struct) and registers it in config.c's list, so
 * that madrail_info prints all of them and an unknown MADRAIL_* name can be
 * matched against every known one.  This is the only place that reads the
 * environment.
 */
#ifndef MDR_CFG_H
#define MDR_CFG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "madrail.h"

typedef enum {
    MDR_CFG_SIZE,   /* size_t, accepts 64, 64k, 8m, 1g (powers of 1024) */
    MDR_CFG_UINT,   /* unsigned, decimal */
    MDR_CFG_BOOL,   /* int 0/1: 0,1,yes,no,true,false,on,off */
    MDR_CFG_DOUBLE, /* double */
    MDR_CFG_TIME,   /* double seconds: accepts 10us, 5ms, 2s, plain = seconds */
    MDR_CFG_STRING  /* char * (strdup'ed; freed by mdr_cfg_release) */
} mdr_cfg_type_t;

typedef struct mdr_cfg_entry {
    const char *name;   /* full name, e.g. "MADRAIL_EAGER_MAX" */
    mdr_cfg_type_t type;
    const char *defval; /* default as text, parsed like a user value */
    double min, max;    /* bounds for numeric types (inclusive), ignored if min > max */
    size_t offset;      /* offsetof(struct, field) */
    const char *help;
} mdr_cfg_entry_t;

typedef struct mdr_cfg_table {
    const char *module; /* "core", "tcp", "loop", ... */
    const mdr_cfg_entry_t *entries;
    size_t count;
} mdr_cfg_table_t;

/* One entry of a module's table, the field named in the module's config
 * struct: MDR_CFG_ENTRY(mdr_tcp_config_t, "MADRAIL_TCP_SNDBUF", MDR_CFG_SIZE,
 * "0", 0, 1e9, sndbuf, "help").  A module usually wraps it with its struct
 * bound (#define MDR_TCP_CFG(...) MDR_CFG_ENTRY(mdr_tcp_config_t, __VA_ARGS__)). */
#define MDR_CFG_ENTRY(_struct, _name, _type, _def, _min, _max, _field, _help)                    \
    { _name, _type, _def, _min, _max, offsetof(_struct, _field), _help }
/* The table of a static array of entries. */
#define MDR_CFG_TABLE(_module, _entries)                                                         \
    { _module, _entries, sizeof(_entries) / sizeof((_entries)[0]) }

/*
 * Fill obj from the table: value from overrides ("NAME=value", NULL
 * terminated, may be NULL) first, then the environment, then the default.
 * A bad value logs "MADRAIL_X=value: <why> (expected ...)" and returns
 * MADRAIL_ERR_CONFIG; obj may then hold partial values (call release).
 */
madrail_status_t mdr_cfg_parse(const mdr_cfg_table_t *table, const char *const *overrides,
                               void *obj);
/* Free the strings parse allocated in obj. */
void mdr_cfg_release(const mdr_cfg_table_t *table, void *obj);

/* Parse one value of a type (used by parse, and by drivers for spec options
 * such as "bw=100m"); errors return MADRAIL_ERR_CONFIG and set *why_p to a
 * static string. */
madrail_status_t mdr_cfg_parse_value(mdr_cfg_type_t type, const char *text, void *out,
                                     const char **why_p);

/* Warn once per name about MADRAIL_* names in overrides/environment that no
 * registered table knows, naming the nearest valid one.  Returns how many. */
int mdr_cfg_check_unknown(const char *const *overrides);

/* Print every registered variable: name, type, default, help. */
void mdr_cfg_print_all(FILE *out);

/* Levenshtein distance (exposed for the unit test). */
size_t mdr_cfg_edit_distance(const char *a, const char *b);

/* The registered tables (config.c holds the list). */
extern const mdr_cfg_table_t mdr_core_cfg_table;
extern const mdr_cfg_table_t mdr_tcp_cfg_table;
extern const mdr_cfg_table_t mdr_loop_cfg_table;
extern const mdr_cfg_table_t mdr_shm_cfg_table;
extern const mdr_cfg_table_t mdr_discover_cfg_table; /* core/discover_cfg.c: MADRAIL_AUTO_* */

/*
 * Split a driver spec "a;k=v;k2=v2" in place: *first_p = "a", and calls
 * fn(key, value, arg) for each k=v (value "" when no '=').  fn returns a
 * status; the first error stops the walk and is returned.
 */
madrail_status_t mdr_spec_parse(char *spec, char **first_p,
                                madrail_status_t (*fn)(const char *key, const char *val,
                                                       void *arg),
                                void *arg);

#endif
