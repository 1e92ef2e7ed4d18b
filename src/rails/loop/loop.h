/*
 * The loop driver's hooks for tests (the driver itself is reached through
 * its mdr_rail_ops_t like any other).
 */
#ifndef MDR_LOOP_H
#define MDR_LOOP_H

#include <stddef.h>

/* Change the bandwidth cap (bytes per second, 0: unlimited) of every open
 * loop rail on fabric, as if it had been opened with bw=; items already in
 * flight keep their delivery times.  Returns how many rails changed.  A
 * test uses it to change a rail's speed in the middle of a run. */
int mdr_loop_set_bandwidth(const char *fabric, size_t bandwidth);

#endif
