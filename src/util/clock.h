/* Monotonic time helpers. */
#ifndef MDR_CLOCK_H
#define MDR_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double mdr_time_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static inline uint64_t mdr_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* The monotonic clock at the kernel's tick (a few ms), read from memory
 * without the time-stamp counter: for periodic scans run from every
 * progress pass (a full clock read was ~8% of an idle pass, measured with
 * perf), never for timings.  Same base as mdr_time_ns, lagging it by at
 * most one tick. */
static inline uint64_t mdr_time_coarse_ns(void)
{
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
