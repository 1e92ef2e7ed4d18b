#!/bin/sh
# it_forge.sh -- a stranger on a tcp rail of a running 2-rank job sends a
# forged FIN for rank 0's 100,000-byte receive (issue 9, item 2).  The
# client (it_forge_client, no libmadrail) talks to the rail over a raw
# socket; rank 0 must close that rail, leave the receive untouched and get
# rank 1's bytes afterwards.  MADRAIL_JOB_KEY is set for the job key of
# issue 9 item 1 (the client's build_hello() is where it is carried).
. "$(dirname "$0")/common.sh"
CLIENT=$(it_find_prog it_forge_client) ||
    { echo "FAIL: $it_name: it_forge_client not found"; exit 1; }
MADRAIL_JOB_KEY=${MADRAIL_JOB_KEY:-6d61647261696c2d69742d666f726765}
export MADRAIL_JOB_KEY
dir=$(mktemp -d "${TMPDIR:-/tmp}/it_forge.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM
$IT_TIMEOUT_CMD "$CLIENT" "$dir" &
cpid=$!
rc=0
it_run 2 MADRAIL_JOB_KEY=$MADRAIL_JOB_KEY MADRAIL_RNDV_THRESH=64k -- "$dir" || rc=$?
# the client ends once rank 0 looked; if the job died first it is stuck
[ -f "$dir/checked" ] || kill "$cpid" 2>/dev/null
crc=0
wait "$cpid" || crc=$?
echo "it: $it_name: client exit $crc"
[ $rc -eq 0 ] && [ $crc -eq 0 ]
