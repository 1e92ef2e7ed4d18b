/*
 * madrail ch4 netmod: per-request active-message state, set up when MPIDIG
 * creates a request and released when it frees it.
 */

#ifndef MADRAIL_REQUEST_H_INCLUDED
#define MADRAIL_REQUEST_H_INCLUDED

#include "madrail_impl.h"

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_init(MPIR_Request * req)
{
    MPIDI_MADRAIL_AMREQ(req).pack_buffer = NULL;
    MPIDI_MADRAIL_AMREQ(req).recv_buffer = NULL;
    MPIDI_MADRAIL_AMREQ(req).send_pipe = NULL;
    MPIDI_MADRAIL_AMREQ(req).recv_pipe = NULL;
    MPIDI_MADRAIL_AMREQ(req).recv_flags = 0;
}

MPL_STATIC_INLINE_PREFIX void MPIDI_NM_am_request_finalize(MPIR_Request * req)
{
    if (MPIDI_MADRAIL_AMREQ(req).pack_buffer || MPIDI_MADRAIL_AMREQ(req).recv_buffer ||
        MPIDI_MADRAIL_AMREQ(req).send_pipe || MPIDI_MADRAIL_AMREQ(req).recv_pipe)
        MPIDI_MADRAIL_am_request_cleanup(req);
}

#endif /* MADRAIL_REQUEST_H_INCLUDED */
