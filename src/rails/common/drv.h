/*
 * Small pieces of open(), close() and ctrl_send() that every driver wrote
 * the same way: the argument check of open, splitting a rail spec into its
 * first part and options, the refusal to close a rail from inside its own
 * progress, and the length check of a control message.  Each driver keeps its own struct mdr_rail, so what is shared
 * here works on the arguments, not on the rail.
 */
#ifndef MDR_RAILS_DRV_H
#define MDR_RAILS_DRV_H

#include <stddef.h>
#include <sys/uio.h>

#include "rails/rail.h"

/* The arguments of ops->open as every driver checks them: spec, params,
 * params->upcalls and rail_p given, 0 < params->slot_size <= max_slot. */
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

#endif /* MDR_RAILS_DRV_H */
