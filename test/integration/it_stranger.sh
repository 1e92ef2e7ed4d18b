#!/bin/sh
# it_stranger.sh -- strangers (a raw-socket client in a thread of rank 1
# that knows the uuids and ports but not the job key) knock on rank 0's
# tcp rails while the two ranks exchange byte-checked messages: keyless
# and foreign-key HELLOs, a replayed HELLO of another job, impostors of
# rank 1, a flood of 2,000 connections and 100 silent ones.  Nobody may
# get a byte back, rank 0's memory and peer table must not grow, no rail
# may fail over (it_stranger.c says more).
#
# Then the job key from the environment: every rank with the same
# MADRAIL_JOB_KEY works; rank 0 with one and rank 1 without fails at
# wire-up with a message that says so (no hang, no silent mismatch).
. "$(dirname "$0")/common.sh"

case $MADRAIL_RAILS in
    *tcp*) ;;
    *) it_skip "needs tcp rails (IT_RAILS=$MADRAIL_RAILS)" ;;
esac

# AddressSanitizer keeps freed blocks in a quarantine (256 MB by default),
# which would show as resident growth even when every stranger was freed.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
export ASAN_OPTIONS

rc=0
it_run 2 MADRAIL_TCP_CONNECT_TIMEOUT=2s -- || rc=1

key=00112233445566778899aabbccddeeff
it_run 2 MADRAIL_JOB_KEY=$key MADRAIL_TCP_CONNECT_TIMEOUT=2s -- 200 || rc=1

out=$(mktemp) || exit 99
echo "it: running: $MPIEXEC -n 1 -env MADRAIL_JOB_KEY $key $IT_PROG : -n 1 $IT_PROG"
# shellcheck disable=SC2086
$IT_TIMEOUT_CMD "$MPIEXEC" -n 1 -env MADRAIL_JOB_KEY "$key" "$IT_PROG" : -n 1 "$IT_PROG" \
    >"$out" 2>&1
mrc=$?
if [ $mrc -ne 0 ] && [ $mrc -ne 124 ] && grep -q "give every rank the same MADRAIL_JOB_KEY" "$out"; then
    echo "ok - rank 0 with MADRAIL_JOB_KEY, rank 1 without: wire-up fails (exit $mrc) and says why"
else
    echo "FAIL - rank 0 with MADRAIL_JOB_KEY, rank 1 without: exit $mrc, output:"
    cat "$out"
    rc=1
fi
rm -f "$out"
exit $rc
