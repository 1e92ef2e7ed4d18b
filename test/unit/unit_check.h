/* The unit tests' check(): one "ok: ..." / "FAIL: ..." line per check,
 * counted for the summary that main() prints and turns into the exit code. */
#ifndef MDR_UNIT_CHECK_H
#define MDR_UNIT_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures, checks;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    checks++;
    if (!ok)
        failures++;
    printf("%s: ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

#endif
