#!/bin/sh
# it_ucx_rails.sh -- bad ucx rail specs are refused by name; then
# integration runs over ucx rails: the size sweep, the
# striping shares and many concurrent rendezvous on a UCX tcp rail next to
# madrail's own tcp rail (ucx:lo,tcp:lo), and the rendezvous run on UCX
# shared memory next to UCX tcp (ucx:shm,ucx:lo: two ucx rails of one
# process on two devices).  It reuses the other wrappers with IT_RAILS set,
# so what is checked is theirs.  Skips (77) when the ucx driver was not
# built or when there is no mpiexec.
set -u
here=$(dirname "$0")
info="${MDR_BUILDDIR:-.}/tools/madrail_info"

[ -x "$info" ] || { echo "SKIP: it_ucx_rails: $info not built"; exit 77; }
# madrail_info -r loads hwloc, whose plugins leak: no leak check for the probe
probe() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" MADRAIL_RAILS=ucx:lo "$info" -r
}
if ! probe >/dev/null 2>&1; then
    echo "SKIP: it_ucx_rails: the ucx driver is not built (or UCX has no tcp on lo):"
    probe 2>&1 | grep -i error | head -n 3
    exit 77
fi

rc=0
# A bad spec is refused, and the message names it.
for bad in 'ucx:' 'ucx:nosuchdev0' 'ucx:tcp:lo:x' 'ucx:posix:lo' 'ucx:lo;bogus=1' \
           'ucx:lo;order=fast' 'ucx:lo;seg=1m' 'ucx:shm:1' 'ucx:a:b:c:d'; do
    out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" UCX_LOG_LEVEL=fatal \
          MADRAIL_RAILS="$bad" "$info" -r 2>&1)
    if [ $? -eq 0 ]; then
        echo "FAIL - spec '$bad' was accepted"
        rc=1
    elif ! printf '%s\n' "$out" | grep -q "rail spec $bad"; then
        echo "FAIL - spec '$bad' refused without naming it:"
        printf '%s\n' "$out" | head -n 3
        rc=1
    else
        echo "ok - spec '$bad' refused: $(printf '%s\n' "$out" | grep -m1 "rail spec" | sed 's/.*error: //')"
    fi
done
for run in "ucx:lo,tcp:lo it_sizes" "ucx:lo,tcp:lo it_stripe" "ucx:lo,tcp:lo it_rndv_many" \
           "ucx:shm,ucx:lo it_rndv_many"; do
    set -- $run
    echo "it_ucx_rails: IT_RAILS=$1 $2.sh"
    IT_RAILS=$1 sh "$here/$2.sh"
    r=$?
    case $r in
        0) ;;
        77) echo "it_ucx_rails: $2 skipped" ;;
        *) echo "it_ucx_rails: IT_RAILS=$1 $2 FAILED (exit $r)"; rc=1 ;;
    esac
done
exit $rc
