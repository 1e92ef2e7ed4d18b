/*
 * Test support: forge control messages.  A unit test that plays a broken
 * or hostile peer sends bytes of its choosing on a peer-rail, through the
 * rail driver's own ctrl_send, so the receiving context sees exactly what
 * a peer on the wire could send.  Linked into tests only; the library
 * has no such entry point.
 */
#ifndef MDR_TEST_FORGE_H
#define MDR_TEST_FORGE_H

#include <stddef.h>

#include "madrail.h"

/* Send len bytes from ctx to peer on rail as one control message, as they
 * are: no header field is filled in (type, len, credits are the caller's).
 * The rail is connected first if it is not.  A message of a type other
 * than CREDIT takes one of ctx's credits on that rail when one is left, so
 * that the returns the receiver makes still add up on this side; it is
 * sent whether one was left or not. */
madrail_status_t mdr_forge_send(madrail_context_t ctx, madrail_peer_t peer, int rail,
                                const void *msg, size_t len);

#endif
