/*
 * madrail_info: what madrail would use on this node, and why.  It answers
 * the first questions of a user: which drivers this library has (and why
 * the others are missing), which rails a process would open here (a
 * context is opened exactly as an application would open it, then hwloc's
 * view of the devices and one verdict per device), what every MADRAIL_*
 * variable is set to and where that value comes from, and which MPICH
 * control variables the ch4:madrail netmod reads.
 *
 * Everything about the library goes through its public API, so the tool
 * describes the libmadrail it runs against (LD_LIBRARY_PATH may pick
 * another build than the one it was compiled with).  The MPICH CVARs are
 * the exception: the tool cannot link MPICH, so their table is generated
 * at build time from the netmod's CVAR blocks (tools/gen_mpi_cvars.sh)
 * and their values are read from the environment the way MPICH reads
 * them.  Options follow ucx_info and fi_info (short letters that can be
 * bundled, -h, a version line first); they are parsed by hand rather than
 * with getopt so that a bad option is reported in one message that names
 * it.
 */
#include "mdr_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef HAVE_DLADDR
#include <dlfcn.h>
#endif

#include "madrail.h"

enum {
    INFO_VARS = 1u << 0,
    INFO_RAILS = 1u << 1,
    INFO_DRIVERS = 1u << 2,
    INFO_MPI = 1u << 3,
    INFO_VERSION = 1u << 4
};

#define WIDTH 100 /* help text is wrapped to this many columns */

/* ---------------------------------------------------------------- MPI */

typedef struct {
    const char *name, *type, *defval, *category, *scope, *alt_env, *help;
} mdr_mpi_cvar_t;

static const mdr_mpi_cvar_t mdr_mpi_cvars[] = {
#include "tools/mdr_mpi_cvars.h"
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [options]\n"
            "Show what madrail would use on this node.  With no option: -d -r -v.\n"
            "\n"
            "  -d, --drivers     drivers madrail has, built into this library or not and why,\n"
            "                    and how the library was configured\n"
            "  -r, --rails       open a context as an application would and list its rails,\n"
            "                    then the network devices (locality, speed, state) and what\n"
            "                    MADRAIL_RAILS=auto chooses among them, with a reason per device\n"
            "                    (with HWLOC_XMLFILE naming another machine's topology, also\n"
            "                    what a process bound as this one would choose there)\n"
            "  -v, --vars        every MADRAIL_* variable: its value, where the value comes\n"
            "                    from (environment or default), type, default and help; then\n"
            "                    the MADRAIL_* names in the environment that are no variable\n"
            "  -m, --mpi         the MPICH control variables (CVARs) of the ch4:madrail\n"
            "                    netmod: value from the environment, default, help\n"
            "  -g, --grep=TEXT   with -v and -m: only the variables whose name contains TEXT\n"
            "                    (any case)\n"
            "  -V, --version     print the versions of madrail_info and of the library\n"
            "  -h, --help        show this help\n"
            "\n"
            "Settings come from MADRAIL_* environment variables; MADRAIL_RAILS selects the\n"
            "rails (e.g. MADRAIL_RAILS=tcp:lo,tcp:eth1; unset or auto: discovered).\n"
            "Exit status: 0 when everything shown works, 1 when a context cannot be\n"
            "opened or a variable's value would be refused, 2 on a bad option.\n",
            prog);
}

/* Print text wrapped to WIDTH, every line starting at column indent. */
static void print_wrapped(const char *text, int indent)
{
    const char *p = text, *w;
    int col = 0, len;

    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        w = p;
        while (*p && *p != ' ')
            p++;
        len = (int)(p - w);
        if (col > 0 && col + 1 + len > WIDTH) {
            putchar('\n');
            col = 0;
        }
        if (col == 0)
            col = printf("%*s", indent, "");
        else
            col += printf(" ");
        col += printf("%.*s", len, w);
    }
    if (col > 0)
        putchar('\n');
}

static int name_matches(const char *name, const char *grep)
{
    size_t n, i;

    if (!grep || !*grep)
        return 1;
    n = strlen(grep);
    for (i = 0; name[i]; i++)
        if (strncasecmp(name + i, grep, n) == 0)
            return 1;
    return 0;
}

/* A value as the user would write it: quoted when empty or with blanks. */
static void print_value(const char *v)
{
    if (!v[0] || strpbrk(v, " \t"))
        printf("\"%s\"", v);
    else
        printf("%s", v);
}

/* ---------------------------------------------------------------- -V */

static void print_version(void)
{
    printf("madrail_info %s (madrail.h %d.%d)\n", PACKAGE_VERSION, MADRAIL_VERSION_MAJOR,
           MADRAIL_VERSION_MINOR);
    printf("library: libmadrail %s", madrail_version());
#ifdef HAVE_DLADDR
    {
        Dl_info dl;
        if (dladdr((void *)madrail_version, &dl) && dl.dli_fname)
            printf(" (%s)", dl.dli_fname);
    }
#endif
    printf("\n");
}

/* ---------------------------------------------------------------- -d */

static int print_drivers(void)
{
    madrail_driver_info_t d;
    const char *b = madrail_build_config(), *e;
    int i, n = madrail_driver_count(), built = 0;

    for (i = 0; i < n; i++)
        if (madrail_driver_info(i, &d) == MADRAIL_OK && d.built)
            built++;
    printf("drivers (%d of %d built)\n", built, n);
    printf("  %-6s %-5s %s\n", "NAME", "BUILT", "HOW, OR WHY NOT");
    for (i = 0; i < n; i++) {
        if (madrail_driver_info(i, &d) != MADRAIL_OK)
            continue;
        printf("  %-6s %-5s ", d.name, d.built ? "yes" : "no");
        print_wrapped(d.detail, 0);
    }
    printf("build\n");
    for (; *b; b = *e ? e + 1 : e) {
        e = strchr(b, '\n');
        if (!e)
            e = b + strlen(b);
        printf("  %.*s\n", (int)(e - b), b);
    }
    return 0;
}

/* ---------------------------------------------------------------- -r */

static int print_rails(void)
{
    madrail_context_t ctx;
    madrail_rail_info_t info;
    madrail_status_t st;
    int i, n, ret = 0;

    st = madrail_context_init(NULL, &ctx);
    if (st != MADRAIL_OK) {
        fprintf(stderr, "madrail_info: cannot open a context: %s\n", madrail_status_str(st));
        return 1;
    }
    n = madrail_rail_count(ctx);
    printf("rails (%d)\n", n);
    printf("  %-5s %-24s %-8s %12s %15s %8s %10s\n", "INDEX", "NAME", "DRIVER", "LATENCY(us)",
           "BANDWIDTH(MB/s)", "WEIGHT", "MAX_CTRL");
    for (i = 0; i < n; i++) {
        memset(&info, 0, sizeof(info));
        st = madrail_rail_info(ctx, i, &info);
        if (st != MADRAIL_OK) {
            fprintf(stderr, "madrail_info: rail %d: %s\n", i, madrail_status_str(st));
            ret = 1;
            continue;
        }
        printf("  %-5d %-24.*s %-8.*s %12.2f %15.1f %8.3f %10zu\n", i, (int)sizeof(info.name),
               info.name, (int)sizeof(info.driver), info.driver, info.latency_us,
               info.bandwidth_mbs, info.weight, info.max_ctrl);
    }
    st = madrail_context_finalize(ctx);
    if (st != MADRAIL_OK) {
        fprintf(stderr, "madrail_info: closing the context: %s\n", madrail_status_str(st));
        ret = 1;
    }
    madrail_topology_print(stdout);
    return ret;
}

/* ---------------------------------------------------------------- -v */

static int print_vars(const char *grep)
{
    madrail_config_var_t v;
    const char *module = NULL, *nearest;
    char name[128], *text;
    size_t hl;
    int i, n = madrail_config_count(), shown = 0, set = 0, bad = 0;

    for (i = 0; i < n; i++)
        if (madrail_config_var(i, &v) == MADRAIL_OK && v.source == MADRAIL_CONFIG_ENV)
            set++;
    printf("variables (%d, %d set in the environment%s%s%s)\n", n, set,
           grep ? "; names containing \"" : "", grep ? grep : "", grep ? "\"" : "");
    for (i = 0; i < n; i++) {
        if (madrail_config_var(i, &v) != MADRAIL_OK || !name_matches(v.name, grep))
            continue;
        if (!module || strcmp(module, v.module) != 0) {
            module = v.module;
            printf("%s module\n", module);
        }
        printf("  %s = ", v.name);
        print_value(v.value);
        if (v.source == MADRAIL_CONFIG_ENV) {
            printf("  [environment; default ");
            print_value(v.defval);
            printf("]");
        } else {
            printf("  [default]");
        }
        if (v.error) {
            printf("  INVALID: %s", v.error);
            bad++;
        }
        printf("\n");
        /* "type, range. help", wrapped under the name */
        hl = strlen(v.type) + strlen(v.range) + strlen(v.help) + 8;
        text = malloc(hl);
        if (text) {
            snprintf(text, hl, "%s%s%s. %s", v.type, v.range[0] ? ", " : "", v.range, v.help);
            print_wrapped(text, 6);
            free(text);
        }
        shown++;
    }
    if (grep && shown == 0)
        printf("  (no variable name contains \"%s\")\n", grep);
    for (i = 0; madrail_config_unknown(i, name, sizeof(name), &nearest) == MADRAIL_OK; i++) {
        if (!name_matches(name, grep))
            continue;
        if (nearest)
            printf("unknown: %s is no madrail variable (did you mean %s?)\n", name, nearest);
        else
            printf("unknown: %s is no madrail variable\n", name);
    }
    return bad ? 1 : 0;
}

/* ---------------------------------------------------------------- -m */

/* The environment variable MPICH takes a CVAR's value from: it reads, in
 * this order, MPICH_<X>, MPIR_PARAM_<X> and MPIR_CVAR_<X>, first for each
 * alternative name, then for the CVAR's own (X: the name without
 * MPIR_CVAR_), and the last one set wins. */
static const char *mpi_cvar_env(const mdr_mpi_cvar_t *c, char *which, size_t len)
{
    static const char *const ns[] = {"MPICH_", "MPIR_PARAM_", "MPIR_CVAR_"};
    const char *found = NULL, *names = c->alt_env, *p, *b, *v;
    char base[128], env[160];
    size_t k, n;
    int pass;

    which[0] = '\0';
    for (pass = 0; pass < 2; pass++) {
        for (k = 0; k < 3; k++) {
            p = pass == 0 ? names : c->name;
            while (p && *p) {
                n = strcspn(p, " ");
                snprintf(base, sizeof(base), "%.*s", (int)n, p);
                p += n;
                while (*p == ' ')
                    p++;
                if (n == 0)
                    continue;
                b = strncmp(base, "MPIR_CVAR_", 10) == 0 ? base + 10 : base;
                snprintf(env, sizeof(env), "%s%s", ns[k], b);
                v = getenv(env);
                if (v) {
                    found = v;
                    snprintf(which, len, "%s", env);
                }
                if (pass == 1)
                    break; /* the CVAR's own name: one */
            }
        }
    }
    return found;
}

static int print_mpi(const char *grep)
{
    const mdr_mpi_cvar_t *c;
    char which[160];
    int n = 0, shown = 0;

    for (c = mdr_mpi_cvars; c->name; c++)
        n++;
    printf("MPICH control variables of the ch4:madrail netmod (%d; set MPIR_CVAR_<NAME>, or "
           "MPICH_<NAME>; MPI_T lists them too)\n",
           n);
    for (c = mdr_mpi_cvars; c->name; c++) {
        const char *v;
        char text[2048];

        if (!name_matches(c->name, grep))
            continue;
        v = mpi_cvar_env(c, which, sizeof(which));
        printf("  %s = ", c->name);
        if (v) {
            print_value(v);
            printf("  [environment: %s; default %s]\n", which, c->defval);
        } else {
            printf("%s  [default]\n", c->defval);
        }
        snprintf(text, sizeof(text), "%s%s%s%s%s%s%s. %s", c->type,
                 c->category[0] ? ", category " : "", c->category, c->scope[0] ? ", " : "",
                 c->scope, c->alt_env[0] ? ", also read as " : "", c->alt_env, c->help);
        print_wrapped(text, 6);
        shown++;
    }
    if (grep && shown == 0)
        printf("  (no CVAR name contains \"%s\")\n", grep);
    return 0;
}

/* ---------------------------------------------------------------- main */

static int bad_option(const char *prog, const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s '%s'\n", prog, what, arg);
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return 2;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        char letter;
    } longopts[] = {{"drivers", 'd'}, {"rails", 'r'}, {"vars", 'v'}, {"mpi", 'm'},
                    {"grep", 'g'},    {"version", 'V'}, {"help", 'h'}};
    const char *prog = "madrail_info", *grep = NULL;
    unsigned what = 0;
    int i, ret = 0, r;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char letters[2] = {0, 0};
        size_t k;

        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
            return bad_option(prog, "unexpected argument", a);
        if (a[1] == '-') { /* --name or --name=value */
            size_t n = strcspn(a + 2, "=");
            for (k = 0; k < sizeof(longopts) / sizeof(longopts[0]); k++)
                if (strlen(longopts[k].name) == n && strncmp(a + 2, longopts[k].name, n) == 0)
                    break;
            if (k == sizeof(longopts) / sizeof(longopts[0]))
                return bad_option(prog, "unknown option", a);
            letters[0] = longopts[k].letter;
            if (a[2 + n] == '=') {
                if (letters[0] != 'g') {
                    fprintf(stderr, "%s: option '--%s' takes no value (in '%s')\n", prog,
                            longopts[k].name, a);
                    fprintf(stderr, "Try '%s --help'.\n", prog);
                    return 2;
                }
                val = a + 3 + n;
            }
            a = letters;
        } else {
            a++;
        }
        for (; *a; a++) { /* bundled short options: -dv */
            switch (*a) {
            case 'h':
                usage(stdout, prog);
                return 0;
            case 'd': what |= INFO_DRIVERS; break;
            case 'v': what |= INFO_VARS; break;
            case 'r': what |= INFO_RAILS; break;
            case 'm': what |= INFO_MPI; break;
            case 'V': what |= INFO_VERSION; break;
            case 'g':
                if (!val && a[1]) { /* -gSLOT */
                    val = a + 1;
                } else if (!val) {
                    if (i + 1 >= argc) {
                        fprintf(stderr, "%s: option '%s' needs an argument (the text to look "
                                        "for in variable names)\n",
                                prog, argv[i]);
                        fprintf(stderr, "Try '%s --help'.\n", prog);
                        return 2;
                    }
                    val = argv[++i];
                }
                grep = val;
                a += strlen(a) - 1; /* the rest of this word was the value */
                break;
            default: {
                char opt[3] = {'-', *a, '\0'};
                if (argv[i][1] != '-' && strlen(argv[i]) > 2)
                    fprintf(stderr, "%s: unknown option '%s' (in '%s')\n", prog, opt, argv[i]);
                else
                    fprintf(stderr, "%s: unknown option '%s'\n", prog, opt);
                fprintf(stderr, "Try '%s --help'.\n", prog);
                return 2;
            }
            }
        }
    }
    if (what & INFO_VERSION) {
        print_version();
        return 0;
    }
    if (grep && !(what & (INFO_VARS | INFO_MPI)))
        what |= INFO_VARS; /* -g alone: the matching variables */
    if (what == 0)
        what = INFO_DRIVERS | INFO_RAILS | INFO_VARS;

    printf("# madrail %s (madrail_info %s)\n", madrail_version(), PACKAGE_VERSION);
    if (what & INFO_DRIVERS) {
        printf("\n");
        r = print_drivers();
        ret = ret ? ret : r;
    }
    if (what & INFO_RAILS) {
        printf("\n");
        fflush(stdout);
        r = print_rails();
        ret = ret ? ret : r;
    }
    if (what & INFO_VARS) {
        printf("\n");
        r = print_vars(grep);
        ret = ret ? ret : r;
    }
    if (what & INFO_MPI) {
        printf("\n");
        r = print_mpi(grep);
        ret = ret ? ret : r;
    }
    fflush(stdout);
    return ret;
}
