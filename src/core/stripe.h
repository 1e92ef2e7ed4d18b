/*
 * Striping planner: split [0, len) into at most one contiguous chunk per
 * rail, sized in proportion to the rails' weights, every inner edge
 * aligned so that (base + edge) is a multiple of `align`, and no chunk
 * smaller than `min_chunk` (rails that would get less are dropped and their
 * share re-spread).  With one usable rail, or a message below 2*min_chunk,
 * the plan is a single chunk on the heaviest rail and costs nothing more.
 */
#ifndef MDR_STRIPE_H
#define MDR_STRIPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mdr_chunk {
    int rail;        /* rail index, as given in rails[] */
    uint64_t offset; /* from the start of the message */
    uint64_t len;    /* > 0 */
} mdr_chunk_t;

typedef struct mdr_stripe_params {
    size_t align;     /* power of two, e.g. 4096 */
    size_t min_chunk; /* e.g. 16 KiB */
} mdr_stripe_params_t;

/*
 * rails[i] / weights[i], i < n: candidate rails (weight <= 0: not used).
 * base: address of the message start (alignment is of base + edge).
 * Writes chunks in ascending offset order (rail order of the input) and
 * returns their count (0 only for len == 0 or no usable rail).  chunks must
 * have room for n entries.
 */
int mdr_stripe_plan(const int *rails, const double *weights, int n, uintptr_t base, size_t len,
                    const mdr_stripe_params_t *params, mdr_chunk_t *chunks);

/*
 * Parse MADRAIL_RAIL_WEIGHTS ("3,1" or "2.5,1,1"): up to max values, each
 * > 0.  Returns the count, or -1 on a bad list (*why_p says why).
 */
int mdr_stripe_parse_weights(const char *text, double *weights, int max, const char **why_p);

#endif
