#!/bin/sh
# rounds_args.sh -- the command lines of the round-by-round benchmarks
# (bench/cluster/lat_median.sh, rate_rounds.sh, and on one machine
# bench/lat_loopback.sh and bench/run_drivers.sh), without a cluster or
# root: --help, and every bad
# value refused with exit 2 and a message that names it, before anything
# is built or started.
SRC=${MDR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
name=rounds_args
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
command -v bash >/dev/null 2>&1 || { echo "SKIP: $name: no bash"; exit 77; }
LAT="bash $SRC/bench/cluster/lat_median.sh"
RATE="bash $SRC/bench/cluster/rate_rounds.sh"

# refused WHAT WORD CMD...: exit 2, WORD in the message, nothing on stdout
refused() {
    what=$1 word=$2
    shift 2
    out=$("$@" 2>"$TMPE")
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$word" "$TMPE" && [ -z "$out" ]; then
        ok "$what: exit 2, names '$word'"
    else
        bad "$what: exit $rc, stderr '$(cat "$TMPE")', stdout '$out'"
    fi
}
TMPE=$(mktemp)
trap 'rm -f "$TMPE"' EXIT

for s in "$LAT" "$RATE"; do
    n=$(basename "${s##* }")
    if $s --help | grep -q "^Usage: $n"; then ok "$n --help"; else bad "$n --help"; fi
    # shellcheck disable=SC2086
    refused "$n --rounds 0" "'0'" $s --rounds 0
    # shellcheck disable=SC2086
    refused "$n --rounds x" "'x'" $s --rounds x
    # shellcheck disable=SC2086
    refused "$n --rails 5" "--rails 5" $s --rails 5
    # shellcheck disable=SC2086
    refused "$n --frobnicate" "'--frobnicate'" $s --frobnicate
done
refused "lat_median.sh --lib without =" "--lib x" $LAT --lib x
refused "lat_median.sh --lib to no directory" "/nonexistent-dir" $LAT --lib a=/nonexistent-dir
refused "lat_median.sh --lib with no MPICH there" "/nonexistent-mpich" \
    $LAT --lib "a=$SRC,/nonexistent-mpich"
refused "rate_rounds.sh --slow 0" "'0'" $RATE --slow 0

LOOP="bash $SRC/bench/lat_loopback.sh"
if $LOOP --help | grep -q "^Usage: bench/lat_loopback.sh"; then ok "lat_loopback.sh --help"; else bad "lat_loopback.sh --help"; fi
refused "lat_loopback.sh --rounds 0" "'0'" $LOOP --rounds 0
refused "lat_loopback.sh --iters x" "'x'" $LOOP --iters x
refused "lat_loopback.sh --path ib-verbs" "'ib-verbs'" $LOOP --path ib-verbs
refused "lat_loopback.sh --lib without =" "'x'" $LOOP --lib x
refused "lat_loopback.sh --lib to no directory" "/nonexistent-dir" $LOOP --lib a=/nonexistent-dir
refused "lat_loopback.sh --env naming no --lib" "'b=MADRAIL_X=1'" $LOOP --lib "a=$SRC" --env b=MADRAIL_X=1
refused "lat_loopback.sh --env without a setting" "'a=1'" $LOOP --lib "a=$SRC" --env a=1
refused "lat_loopback.sh --frobnicate" "'--frobnicate'" $LOOP --frobnicate

DRV="bash $SRC/bench/run_drivers.sh"
if $DRV --help | grep -q -- "^  --pin "; then ok "run_drivers.sh --help lists --pin"; else bad "run_drivers.sh --help lists --pin"; fi
refused "run_drivers.sh --rounds 0" "'0'" $DRV --rounds 0
refused "run_drivers.sh --rounds x" "'x'" $DRV --rounds x
refused "run_drivers.sh --paths ib-verbs" "'ib-verbs'" $DRV --paths ib-verbs
refused "run_drivers.sh --frobnicate" "'--frobnicate'" $DRV --frobnicate

[ $fail -eq 0 ] && echo "PASS: $name" || echo "FAIL: $name"
exit $fail
