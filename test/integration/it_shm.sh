#!/bin/sh
# it_shm.sh -- the integration programs over shm rails, through the whole
# stack (mpiexec, PMI wire-up, core, shm driver): every size around the
# eager/rendezvous/stripe edges on shm + tcp (single-copy CMA puts striped
# with tcp puts), a flood of small messages and many rendezvous on two
# shm rails with puts copied through the rings (MADRAIL_SHM_CMA=0).
# It reuses the it_*.sh wrappers with IT_RAILS set; skips (77) when the
# shm driver is not built or there is no mpiexec.
set -u

here=$(dirname "$0")
info="${MDR_BUILDDIR:-.}/tools/madrail_info"
if [ ! -x "$info" ]; then
    echo "it_shm.sh: $info not built" >&2
    exit 99
fi
# No leak check for this probe: hwloc's plugins leak after dlclose (as in
# test/tools/info.sh); the shm driver itself runs leak-checked below.
if ! ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        MADRAIL_RAILS=shm "$info" -r >/dev/null 2>&1; then
    echo "SKIP: it_shm: the shm driver is not built (MADRAIL_RAILS=shm does not open)"
    exit 77
fi

rc=0
skipped=0
run() {
    echo "it_shm: $*"
    env "$@"
    r=$?
    case $r in
        0) ;;
        77) skipped=$((skipped + 1)) ;;
        *) rc=1 ;;
    esac
}

run IT_RAILS=shm,tcp:lo sh "$here/it_sizes.sh"
run IT_RAILS=shm:a,shm:b MADRAIL_SHM_CMA=0 sh "$here/it_flood.sh"
run IT_RAILS=shm:a,shm:b MADRAIL_SHM_CMA=0 sh "$here/it_rndv_many.sh"
run IT_RAILS=shm,tcp:lo sh "$here/it_wildcard.sh"

if [ $rc -eq 0 ] && [ $skipped -eq 4 ]; then
    exit 77
fi
exit $rc
