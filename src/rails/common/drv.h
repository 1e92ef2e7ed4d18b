/*
 * Small pieces of open(), close() and ctrl_send() that every driver wrote
 * the same way: the argument check of open, splitting a rail spec into its
 * first part and options, the refusal to close a rail from inside its own
 * progress, and the length check of a control message.  Each driver keeps its own struct mdr_rail, so what is shared
 * here works on the arguments, not on the rail.
 *
 * Also the two halves of handshake authentication that must be the same in
 * every driver: the job-key comparison (constant time, so the time a
 * refusal takes says nothing about how much of a guessed key was right)
 * and the log of refused handshakes (one line per source, rate limited, so
 * a stranger hammering a port cannot flood the log either).
 */
#ifndef MDR_RAILS_DRV_H
#define MDR_RAILS_DRV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rails/rail.h"

/* The arguments of ops->open as every driver checks them: spec, params,
 * params->upcalls, params->job_key and rail_p given,
 * 0 < params->slot_size <= max_slot. */
int mdr_drv_open_args_ok(const char *spec, const mdr_rail_params_t *params,
                         mdr_rail_t *const *rail_p, size_t max_slot);

/* Split a copy of spec with mdr_spec_parse (util/cfg.h), calling opt for
 * each option.  On success *first_p points into *copy_p, which the caller
 * frees when done with it; on failure (MADRAIL_ERR_NOMEM, or what
 * mdr_spec_parse or opt returned) nothing is left to free. */
madrail_status_t mdr_drv_spec_split(const char *spec,
                                    madrail_status_t (*opt)(const char *key, const char *val,
                                                            void *arg),
                                    void *arg, char **copy_p, char **first_p);

/* close() called from inside the rail's progress (an upcall): logged;
 * returns 1 and the caller leaks the rail rather than free what progress
 * is using.  0 otherwise. */
int mdr_drv_close_refused(int in_progress, const char *rail_name);

/* The length of the control message in iov[0..iovcnt) (iovcnt >= 0, iov
 * given when iovcnt > 0: the caller checked), refused with
 * MADRAIL_ERR_INVALID when a buffer is NULL with a length or the total
 * exceeds slot_size (logged); *len_p is written only on success. */
madrail_status_t mdr_drv_ctrl_len(const struct iovec *iov, int iovcnt, size_t slot_size,
                                  const char *rail_name, size_t *len_p);

/* ---------------- handshake authentication ---------------- */

/* 1 if the MDR_JOB_KEY_LEN bytes at got equal key.  Every byte is
 * compared whatever differs (constant time). */
int mdr_drv_key_equal(const uint8_t *key, const void *got);

#define MDR_DRV_REFUSAL_SOURCES 64 /* sources remembered as already logged */
#define MDR_DRV_REFUSAL_BURST 10   /* lines per window at most */
#define MDR_DRV_REFUSAL_WINDOW 60.0 /* seconds */

/* The refused-handshake log of one rail (zeroed at open; no cleanup). */
typedef struct mdr_drv_refusals {
    uint64_t seen[MDR_DRV_REFUSAL_SOURCES]; /* hashes of sources logged (0: free) */
    unsigned next;                          /* slot of seen[] to replace next */
    double window_start;
    unsigned lines;                         /* lines logged in this window */
    unsigned long unlogged;                 /* refusals not logged since the last line */
    unsigned long total;                    /* refusals counted since open */
} mdr_drv_refusals_t;

/* Count a refused handshake (or a connection dropped before one) from
 * source (e.g. "127.0.0.1", without the port: one address, one line) and
 * log it as a warning unless that source was logged already or the rail
 * logged MDR_DRV_REFUSAL_BURST lines in the last MDR_DRV_REFUSAL_WINDOW
 * seconds; a line says how many refusals went unlogged before it.  The
 * refused side is told nothing: the caller just closes. */
void mdr_drv_refusal(mdr_drv_refusals_t *r, const char *rail_name, const char *source,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5), cold));

/* ---------------- rate-limited logs of one cause ---------------- */

#define MDR_DRV_RATELOG_INTERVAL 10.0 /* seconds between two lines of one cause */

/* One cause of trouble a driver may meet at a high rate (a failed accept:
 * out of descriptors, out of memory).  Zeroed at open; no cleanup. */
typedef struct mdr_drv_ratelog {
    double last;            /* time of the last line, 0: none yet */
    unsigned long unlogged; /* occurrences since the last line, not logged */
    unsigned long total;    /* occurrences counted since open */
} mdr_drv_ratelog_t;

/* Count one occurrence of r's cause and log it as a warning ("rail
 * <rail_name>: <what>") if no line of this cause was logged in the last
 * MDR_DRV_RATELOG_INTERVAL seconds; the line says how many occurrences went
 * unlogged since the one before.  A failed system call loops as fast as
 * progress is called: without this, a process out of descriptors wrote
 * 639,540 lines in 30 s (issue 28). */
void mdr_drv_ratelog(mdr_drv_ratelog_t *r, const char *rail_name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));

#endif /* MDR_RAILS_DRV_H */
