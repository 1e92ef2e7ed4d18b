#!/bin/sh
# it_mixed.sh -- one job striping over three different drivers at once:
# MADRAIL_RAILS=ofi:tcp;ofi_rxm:lo,ucx:lo,tcp:lo with equal weights.  The
# it_stripe program sends 16 MiB messages, checks every byte and requires
# each of the three rails to carry 20..46% of the put bytes (a third each,
# with room for page rounding) on both sides, so a driver that silently
# carried nothing fails.  Then madrail_bw --validate runs over the same
# three rails (1 B .. 4 MiB: eager fragments spread over the drivers, then
# striped rendezvous), every byte of every message checked.
# Skips (77) when the ofi or ucx driver is not built or its rail does not
# open here.
IT_PROG_NAME=it_stripe
. "$(dirname "$0")/common.sh"
unset MADRAIL_RAIL_WEIGHTS
MADRAIL_RAILS='ofi:tcp;ofi_rxm:lo,ucx:lo,tcp:lo'
export MADRAIL_RAILS

info="${MDR_BUILDDIR:-.}/tools/madrail_info"
[ -x "$info" ] || { echo "FAIL: $it_name: $info not built"; exit 1; }
# (no leak check for the probe: hwloc's plugins leak, as in test/tools/info.sh)
if ! probe=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$info" -r 2>&1); then
    echo "$probe" | tail -n 5
    it_skip "the rails $MADRAIL_RAILS do not open here (ofi or ucx driver not built?)"
fi

rc=0
it_run 2 MADRAIL_RAIL_WEIGHTS=1,1,1 -- 0.20 0.46 || rc=$?

IT_PROG="${MDR_BUILDDIR:-.}/bench/madrail_bw"
[ -x "$IT_PROG" ] || { echo "FAIL: $it_name: $IT_PROG not built"; exit 1; }
it_run 2 MADRAIL_RAIL_WEIGHTS=1,1,1 -- --validate --min 1 --max 4m --window 8 --iters 2 \
    --warmup 1 || rc=$?
exit $rc
