/*
 * madrail ch4 netmod: its one global (one libmadrail context per process).
 */

#include <mpidimpl.h>
#include "madrail_impl.h"

MPIDI_MADRAIL_global_t MPIDI_MADRAIL_global;
