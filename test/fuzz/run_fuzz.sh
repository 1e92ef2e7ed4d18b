#!/usr/bin/env bash
# run_fuzz.sh -- run the libFuzzer targets of a tree configured with
# --enable-fuzz: each over its seed corpus (test/fuzz/corpus/<target>,
# every input once: the regression part), then for a bounded time (the
# exploration part).  Fails on any crash, sanitizer report, leak, timeout or
# out-of-memory; what failed is kept under <builddir>/test/fuzz/artifacts.
#
# Usage: test/fuzz/run_fuzz.sh [--time SECONDS | --runs N] [--seed S] [--build DIR]
#                               [--keep] [target...]
#   --time S    fuzz each target S seconds after its corpus (default 15,
#               or $MDR_FUZZ_TIME; 0: corpus only)
#   --runs N    fuzz each target for N inputs after its corpus instead (or
#               $MDR_FUZZ_RUNS): with --seed, the same inputs on every
#               machine, however fast, which is how ./check.sh runs it, so
#               that a run that passed passes again (random exploration
#               that finds a new bug belongs in --time campaigns and
#               ./check.sh --full)
#   --seed S    libFuzzer's random seed (default: a new one each run, or
#               $MDR_FUZZ_SEED)
#   --build D   the build tree (default $MDR_BUILDDIR, else the current
#               directory when it has test/fuzz/fuzz_core)
#   --keep      keep what the timed run added to the corpus, in
#               <builddir>/test/fuzz/work/<target> (it is never written
#               into the source tree; see README.md to merge it)
#   target      core, tcp, shm, ofi, ucx (default: every one built)
#
# As a `make check` test it skips (exit 77) in a tree built without
# --enable-fuzz.  See test/fuzz/README.md for longer campaigns.
set -u

TIME=${MDR_FUZZ_TIME:-15}
RUNS=${MDR_FUZZ_RUNS:-}
SEED=${MDR_FUZZ_SEED:-}
BUILD=${MDR_BUILDDIR:-}
KEEP=no
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) TIME=${2:?--time needs a number of seconds}; shift ;;
        --time=*) TIME=${1#--time=} ;;
        --runs) RUNS=${2:?--runs needs a number of inputs}; shift ;;
        --runs=*) RUNS=${1#--runs=} ;;
        --seed) SEED=${2:?--seed needs a number}; shift ;;
        --seed=*) SEED=${1#--seed=} ;;
        --build) BUILD=${2:?--build needs a directory}; shift ;;
        --build=*) BUILD=${1#--build=} ;;
        --keep) KEEP=yes ;;
        -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "run_fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) TARGETS+=("${1#fuzz_}") ;;
    esac
    shift
done
case "$TIME" in
    ''|*[!0-9]*) echo "run_fuzz.sh: --time wants whole seconds, not '$TIME'" >&2; exit 2 ;;
esac
case "$RUNS" in
    *[!0-9]*) echo "run_fuzz.sh: --runs wants a whole number of inputs, not '$RUNS'" >&2; exit 2 ;;
esac
case "$SEED" in
    *[!0-9]*) echo "run_fuzz.sh: --seed wants a whole number, not '$SEED'" >&2; exit 2 ;;
esac

SRC=${MDR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ -z "$BUILD" ] && [ -x test/fuzz/fuzz_core ]; then
    BUILD=$PWD
fi
if [ "${MDR_FUZZ_ENABLED:-}" = no ] || [ -z "$BUILD" ] || [ ! -x "$BUILD/test/fuzz/fuzz_core" ]; then
    echo "SKIP: the fuzz targets are not built here (configure --enable-fuzz, with clang:" \
         "test/fuzz/README.md)"
    exit 77
fi

if [ ${#TARGETS[@]} -eq 0 ]; then
    for t in core tcp netlink shm ofi ucx; do
        [ -x "$BUILD/test/fuzz/fuzz_$t" ] && TARGETS+=("$t")
    done
fi

OUT=$BUILD/test/fuzz
mkdir -p "$OUT/artifacts" "$OUT/logs" || exit 1
# Leaks are failures here whatever the caller's sanitizer options say; the
# targets re-exec themselves once to switch off UCX's and PSM's own signal
# handlers (fuzz_common.h), which would hide crashes from the sanitizers.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"
# Per input: finalize waits up to 30 s for a peer that never answers
# (test/fuzz/crashers/core); anything slower than that is a hang.
FLAGS=(-timeout=35 -rss_limit_mb=2048 -malloc_limit_mb=1024 -close_fd_mask=2 -print_final_stats=1)

# UCX defects that are known and not ours: Debian's UCX 1.13.1 is built
# with its internal assertions on, and two of them fire when a transport
# endpoint fails while its connection is still being set up (wireup):
# ucp_request.c "req->send.wireup.type == ..." (upstream removed that
# assertion as wrong in openucx/ucx pull request 8175) and wireup_ep.c
# "wireup_ep->pending_count == 0".  fuzz_ucx reaches them in about 1 run
# in 10 over its corpus, never with one input alone: a connection of an
# earlier input is torn down under the next one.  A run that aborts on a
# UCX wireup assertion, with no report of the sanitizers, is run again
# (twice at most) and said so; any other failure fails.  fuzz_ucx keeps
# stderr open to see the assertion.
KNOWN_UCX='[] ] (ucp_request|wireup_ep|wireup)\.c:[0-9]+ +Assertion `'
known_ucx() { # log: the run failed on the known UCX assertion and on nothing of ours
    grep -qE "$KNOWN_UCX" "$1" && ! grep -qE '^==[0-9]+==ERROR: (Address|Leak)Sanitizer|runtime error' "$1"
}
# run_target LOG ARGS...: run the target, appending to LOG; reruns after the
# known UCX assertion only
run_target() {
    local log=$1 try rc mark where
    shift
    for try in 1 2 3; do
        mark=$(wc -l <"$log" 2>/dev/null || echo 0)
        "$bin" "${FLAGS[@]}" "${TFLAGS[@]}" "$@" >>"$log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] || ! tail -n +"$((mark + 1))" "$log" >"$log.try" || ! known_ucx "$log.try"; then
            rm -f "$log.try"
            return $rc
        fi
        where=$(grep -oE "$KNOWN_UCX" "$log.try" | head -1 | sed 's/^[] ]*//; s/ *Assertion.*//')
        rm -f "$log.try"
        echo "NOTE: fuzz_$t: a known UCX 1.13 wireup assertion ($where), run $try of 3; again" |
            tee -a "$log"
    done
    return $rc
}

fail=0
t0=$(date +%s)
for t in "${TARGETS[@]}"; do
    bin=$BUILD/test/fuzz/fuzz_$t
    corpus=$SRC/test/fuzz/corpus/$t
    log=$OUT/logs/fuzz_$t.log
    if [ ! -x "$bin" ]; then
        echo "FAIL: fuzz_$t: $bin was not built"
        fail=1
        continue
    fi
    if [ ! -d "$corpus" ]; then
        echo "FAIL: fuzz_$t: no seed corpus in $corpus"
        fail=1
        continue
    fi
    work=$OUT/work/$t
    rm -rf "$work"
    mkdir -p "$work"
    ts=$(date +%s)
    # 1. every seed once (libFuzzer: -runs=0 only runs the given inputs)
    TFLAGS=()
    [ "$t" = ucx ] && TFLAGS=(-close_fd_mask=0)
    : >"$log"
    run_target "$log" -artifact_prefix="$OUT/artifacts/fuzz_$t-" -runs=0 "$corpus"
    rc=$?
    nseed=$(find "$corpus" -type f | wc -l)
    if [ $rc -ne 0 ]; then
        echo "FAIL: fuzz_$t: an input of the seed corpus failed (log: $log)"
        grep -E "^(==[0-9]+==ERROR|SUMMARY|fuzz:|Running:|artifact_prefix|Test unit written)" \
            "$log" | head -20
        fail=1
        continue
    fi
    if [ -n "$RUNS" ]; then
        bound=(-runs="$RUNS")
        what="$RUNS inputs"
    else
        bound=(-max_total_time="$TIME")
        what="${TIME} s"
    fi
    seedopt=()
    [ -n "$SEED" ] && seedopt=(-seed="$SEED") && what="$what, seed $SEED"
    if [ -n "$RUNS" ] && [ "$RUNS" -gt 0 ] || [ -z "$RUNS" ] && [ "$TIME" -gt 0 ]; then
        # 2. new inputs (TIME seconds or RUNS inputs), into a scratch corpus
        run_target "$log" -artifact_prefix="$OUT/artifacts/fuzz_$t-" \
            "${bound[@]}" "${seedopt[@]}" "$work" "$corpus"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "FAIL: fuzz_$t: the fuzzer found a failing input in $what (log: $log)"
            grep -E "^(==[0-9]+==ERROR|SUMMARY|fuzz:|artifact_prefix|Test unit written|ALARM)" \
                "$log" | head -20
            echo "      reproduce: $bin <artifact>; minimize: $bin -minimize_crash=1" \
                 "-runs=10000 <artifact> (test/fuzz/README.md)"
            fail=1
            continue
        fi
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1)
    echo "PASS: fuzz_$t: $nseed seeds, then $what: ${runs:-0} runs, ${cov:-cov: ?}" \
         "($(( $(date +%s) - ts )) s)"
    [ "$KEEP" = yes ] || rm -rf "$work"
done
echo "run_fuzz.sh: ${#TARGETS[@]} targets in $(( $(date +%s) - t0 )) s"
exit $fail
