/*
 * madrail_info: what madrail would use on this node.  It goes through the
 * public API only (madrail_config_print, a context opened exactly as an
 * application would open it, madrail_rail_info), so what it shows is what
 * a job started with the same environment gets, and it needs no internal
 * symbols from the library.  Options are parsed by hand rather than with
 * getopt so an unknown option is reported in one message of our own.
 */
#include "mdr_config.h"

#include <stdio.h>
#include <string.h>

#include "madrail.h"

enum { INFO_VARS = 1u << 0, INFO_RAILS = 1u << 1 };

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s [-v] [-r] [-h]\n"
            "Show madrail's configuration and rails (both when no option is given).\n"
            "\n"
            "  -v            print every MADRAIL_* variable: type, default and help\n"
            "  -r            open a context as an application would and list its rails,\n"
            "                then the network devices (locality, speed, state) and what\n"
            "                MADRAIL_RAILS=auto chooses among them, with a reason per device\n"
            "  -h, --help    show this help\n"
            "\n"
            "Settings come from MADRAIL_* environment variables; MADRAIL_RAILS selects\n"
            "the rails (e.g. MADRAIL_RAILS=tcp:lo,tcp:eth1; unset or auto: discovered).\n",
            prog);
}

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

int main(int argc, char **argv)
{
    const char *prog = "madrail_info";
    unsigned what = 0;
    int i, ret = 0;
    const char *a;

    for (i = 1; i < argc; i++) {
        a = argv[i];
        if (strcmp(a, "--help") == 0) {
            usage(stdout, prog);
            return 0;
        }
        if (a[0] != '-' || a[1] == '\0' || a[1] == '-') {
            fprintf(stderr, "%s: unknown %s '%s'\n", prog,
                    a[0] == '-' ? "option" : "argument", a);
            usage(stderr, prog);
            return 2;
        }
        for (a++; *a != '\0'; a++) { /* bundled short options: -vr */
            switch (*a) {
            case 'h':
                usage(stdout, prog);
                return 0;
            case 'v':
                what |= INFO_VARS;
                break;
            case 'r':
                what |= INFO_RAILS;
                break;
            default:
                fprintf(stderr, "%s: unknown option '-%c'", prog, *a);
                if (strlen(argv[i]) > 2)
                    fprintf(stderr, " (in '%s')", argv[i]);
                fprintf(stderr, "\n");
                usage(stderr, prog);
                return 2;
            }
        }
    }
    if (what == 0)
        what = INFO_VARS | INFO_RAILS;

    printf("madrail %d.%d\n\n", MADRAIL_VERSION_MAJOR, MADRAIL_VERSION_MINOR);
    if (what & INFO_RAILS) {
        ret = print_rails();
        if (what & INFO_VARS)
            printf("\n");
    }
    if (what & INFO_VARS) {
        printf("variables\n");
        fflush(stdout);
        madrail_config_print(stdout);
    }
    fflush(stdout);
    return ret;
}
