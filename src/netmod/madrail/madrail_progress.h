/*
 * madrail ch4 netmod: progress.  One libmadrail context serves every vci
 * (the global critical section serializes the calls), so every vci drives
 * it; the work is in madrail_am.c.
 */

#ifndef MADRAIL_PROGRESS_H_INCLUDED
#define MADRAIL_PROGRESS_H_INCLUDED

#include "madrail_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_progress(int vci, int blocking)
{
    return MPIDI_MADRAIL_progress(vci, blocking);
}

#endif /* MADRAIL_PROGRESS_H_INCLUDED */
