#!/bin/sh
# pgo.sh -- the profile-guided build (configure --enable-pgo): the training
# script's command line (--help; every bad value refused with exit 2 and a
# message naming it), a short training run with this tree's benchmarks,
# and, when this tree was configured with --enable-pgo, that the profile
# was made for the per-message path's sources and that the library
# installed from it is the optimised one, not the instrumented one.
SRC=${MDR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${MDR_BUILDDIR:-$PWD}
name=pgo
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
command -v bash >/dev/null 2>&1 || { echo "SKIP: $name: no bash"; exit 77; }
TRAIN="bash $SRC/scripts/pgo-train.sh"
TMPE=$(mktemp)
trap 'rm -f "$TMPE"' EXIT

# refused WHAT WORD CMD...: exit 2, WORD in the message
refused() {
    what=$1 word=$2
    shift 2
    "$@" >/dev/null 2>"$TMPE"
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$word" "$TMPE"; then
        ok "$what: exit 2, names '$word'"
    else
        bad "$what: exit $rc, stderr '$(cat "$TMPE")'"
    fi
}

if $TRAIN --help | grep -q '^Usage: pgo-train.sh'; then ok "--help"; else bad "--help"; fi
# shellcheck disable=SC2086
refused "no --builddir" "--builddir" $TRAIN
# shellcheck disable=SC2086
refused "unknown argument" "'--bogus'" $TRAIN --bogus
# shellcheck disable=SC2086
refused "--builddir without a value" "--builddir needs" $TRAIN --builddir
# shellcheck disable=SC2086
refused "a tree without benchmarks" "/nonexistent/bench/madrail_lat" $TRAIN --builddir /nonexistent
# shellcheck disable=SC2086
refused "a launcher that is not there" "no-such-mpiexec" $TRAIN --builddir "$B" --mpiexec no-such-mpiexec

# A short training run with this tree's benchmarks: every driver opens or
# is reported as left out, and the tcp runs succeed.
if command -v mpiexec.hydra >/dev/null 2>&1 || command -v mpiexec >/dev/null 2>&1; then
    out=$($TRAIN --builddir "$B" --quick 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -q 'madrail_lat over tcp:lo: done' &&
       echo "$out" | grep -q 'madrail_bw over tcp:lo,tcp:lo: done' &&
       [ "$(echo "$out" | grep -c '^pgo-train.sh: [1-7]/7 ')" -eq 7 ]; then
        ok "training run (--quick): 7 rail lists, the tcp ones trained"
    else
        bad "training run (--quick): exit $rc"
        echo "$out"
    fi
else
    echo "skip: the training run: no mpiexec (package mpich)"
fi

# The profile of a tree configured with --enable-pgo.
if [ -f "$B/pgo.stamp" ]; then
    for f in core/libmadrail_internal_la-request core/libmadrail_internal_la-ctrl \
             core/libmadrail_internal_la-tag core/libmadrail_internal_la-progress \
             rails/tcp/libmadrail_internal_la-tcp_ep; do
        g="$B/src/$f.gcda"
        [ -f "$g" ] || g="$B/src/$(dirname "$f")/.libs/$(basename "$f").gcda"
        if [ -s "$g" ]; then ok "profile of src/$f"; else bad "no profile of src/$f (looked for $g)"; fi
    done
    lib=$(ls "$B"/.libs/libmadrail.so.*.*.* 2>/dev/null | head -n 1)
    if [ -z "$lib" ]; then
        bad "no .libs/libmadrail.so.* in $B"
    elif ! command -v nm >/dev/null 2>&1; then
        echo "skip: is the library instrumented: no nm"
    elif nm "$lib" 2>/dev/null | grep -q '__gcov_'; then
        bad "$lib is the instrumented build (it has __gcov_ symbols)"
    else
        ok "$(basename "$lib") is the final build (no __gcov_ symbols)"
    fi
else
    echo "skip: the profile: this tree was not configured with --enable-pgo (no pgo.stamp)"
fi

[ $fail -eq 0 ] && echo "PASS: $name" || echo "FAIL: $name"
exit $fail
