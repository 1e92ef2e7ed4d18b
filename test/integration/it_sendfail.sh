#!/bin/sh
# it_sendfail.sh -- sends whose data cannot leave the process complete with
# an error, never with success: a receiver that never answers the
# connection (rank 0 sleeps past a 0.5 s connect timeout before it waits), a
# receiver that is gone, and a receiver that dies with rank 0's burst
# still queued (small socket buffers keep most of it in the process).
# Two tcp rails on loopback.
. "$(dirname "$0")/common.sh"
rc=0
it_run 2 MADRAIL_TCP_CONNECT_TIMEOUT=500ms -- silent || rc=1
it_run 2 MADRAIL_TCP_CONNECT_TIMEOUT=500ms -- gone || rc=1
it_run 2 MADRAIL_TCP_SNDBUF=4k MADRAIL_TCP_RCVBUF=4k -- dies || rc=1
exit $rc
