#!/bin/sh
# it_ucx_seg.sh -- the shared-memory segment size of ucx shm rails (spec
# option seg=, UCX_MM_SEG_SIZE).  UCX's posix/sysv sender copies up to its
# own segment size into the receiver's buffers, and its FIFO length field
# is 16 bits, so: a segment above 65535 is refused by name; two processes
# whose shm rails have different segments refuse to connect on that rail
# (with a message naming seg=) and the job still completes, byte-checked,
# over the other rail; and a 4 MiB-sweep with equal segments at the limit
# passes.  Skips (77) when the ucx driver is not built, UCX has no shared
# memory here, or there is no mpiexec.
set -u
here=$(dirname "$0")
info="${MDR_BUILDDIR:-.}/tools/madrail_info"

[ -x "$info" ] || { echo "SKIP: it_ucx_seg: $info not built"; exit 77; }
# madrail_info -r loads hwloc, whose plugins leak: no leak check for it
inf() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" UCX_LOG_LEVEL=fatal \
        MADRAIL_RAILS="$1" "$info" -r 2>&1
}
if ! inf ucx:shm >/dev/null; then
    echo "SKIP: it_ucx_seg: no ucx shm rail here (driver not built or no UCX shared memory):"
    inf ucx:shm | grep -i error | head -n 3
    exit 77
fi

# IT_PROG etc.; the launcher must take hydra's MPMD form (A : B)
IT_PROG_NAME=it_sizes
. "$here/common.sh"

rc=0
# (it_ucx_rails.sh checks that bad specs are refused by name; here the
# message must also give the limit)
out=$(inf 'ucx:shm;seg=64k') && accepted=1 || accepted=0
why=$(printf '%s\n' "$out" | grep -m1 "rail spec ucx:shm;seg=64k: .*65535" | sed 's/.*error: //')
if [ $accepted = 1 ] || [ -z "$why" ]; then
    printf "FAIL - 'ucx:shm;seg=64k' not refused with its name and the limit 65535:\n%s\n" \
        "$(printf '%s\n' "$out" | head -n 3)"
    rc=1
else
    echo "ok - 'ucx:shm;seg=64k' refused: $why"
fi
if inf 'ucx:shm;seg=65535' >/dev/null; then
    echo "ok - 'ucx:shm;seg=65535' accepted"
else
    echo "FAIL - 'ucx:shm;seg=65535' refused"
    rc=1
fi

# Different segments: the shm rail is refused between the two, tcp carries all.
log=$(mktemp)
echo "it: running: $MPIEXEC -n 1 -env MADRAIL_RAILS 'ucx:shm;seg=32k,tcp:lo' $IT_PROG : -n 1 -env MADRAIL_RAILS 'ucx:shm,tcp:lo' $IT_PROG"
# shellcheck disable=SC2086
MADRAIL_SLOT_SIZE=8k MADRAIL_RNDV_THRESH=64k $IT_TIMEOUT_CMD "$MPIEXEC" \
    -n 1 -env MADRAIL_RAILS 'ucx:shm;seg=32k,tcp:lo' "$IT_PROG" : \
    -n 1 -env MADRAIL_RAILS 'ucx:shm,tcp:lo' "$IT_PROG" >"$log" 2>&1
r=$?
if [ $r -ne 0 ]; then
    echo "FAIL - mismatched shm segments: the job failed (exit $r):"
    tail -n 15 "$log"
    rc=1
elif ! grep -q "every process needs the same seg=" "$log"; then
    echo "FAIL - mismatched shm segments: passed, but no refusal was reported:"
    tail -n 15 "$log"
    rc=1
else
    echo "ok - mismatched shm segments: the shm rail refused ($(grep -m1 'shared-memory segment is' "$log" | sed 's/.*peer [0-9a-f]*: //')), the size sweep passed over tcp"
fi
rm -f "$log"

# Equal segments at the limit: the whole size sweep over ucx shm alone.
IT_RAILS='ucx:shm;seg=65535'
MADRAIL_RAILS=$IT_RAILS
export MADRAIL_RAILS
if it_run 2 MADRAIL_SLOT_SIZE=8k MADRAIL_RNDV_THRESH=64k --; then
    echo "ok - size sweep over ucx:shm;seg=65535"
else
    echo "FAIL - size sweep over ucx:shm;seg=65535"
    rc=1
fi
exit $rc
