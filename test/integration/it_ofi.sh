#!/bin/sh
# it_ofi.sh -- the integration programs over ofi (libfabric) rails, run by
# make check when the ofi driver is built: sizes, many rendezvous and
# striping over an ofi:tcp;ofi_rxm rail next to a tcp rail, and a flood over
# shm next to tcp when libfabric has shm here.  Each case is one of the
# it_*.sh wrappers with IT_RAILS set; the test fails if any fails.
dir=$(dirname "$0")
rc=0
ran=0
run() {
    rails=$1
    shift
    for t in "$@"; do
        echo "it_ofi: IT_RAILS=$rails sh $dir/$t.sh"
        IT_RAILS=$rails sh "$dir/$t.sh"
        r=$?
        case $r in
            0) ran=$((ran + 1)) ;;
            77) echo "it_ofi: $t skipped" ;;
            *) echo "it_ofi: $t FAILED ($r)"; rc=1 ;;
        esac
    done
}
run 'ofi:tcp;ofi_rxm:lo,tcp:lo' it_sizes it_rndv_many it_stripe
if command -v fi_info >/dev/null 2>&1 && fi_info -p shm -t FI_EP_RDM >/dev/null 2>&1; then
    run 'ofi:shm,tcp:lo' it_flood it_sizes
else
    echo "it_ofi: no shm provider (or no fi_info to ask): shm cases not run"
fi
[ $rc -ne 0 ] && exit 1
[ $ran -eq 0 ] && exit 77
exit 0
