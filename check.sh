#!/usr/bin/env bash
# check.sh -- every test suite of madrail, in one command (CI runs this).
#
# Builds the normal tree (_build, through quickstart.sh --no-run) and a
# second tree with AddressSanitizer + UndefinedBehaviorSanitizer
# (_build-asan), runs `make check` in both, and sums the automake results.
# Then `make distcheck` proves the release tarball builds and passes from
# a read-only source tree (measured on 2 cores: about 40 s of a 135 s run
# from a fresh clone, far from doubling it, so it runs by default).  Then
# the MPI layer: MPICH 4.0.2 is built with the ch4:madrail netmod
# (scripts/build-mpich.sh, cached outside the checkout), our MPI test
# programs run over two TCP rails, and a fixed subset of MPICH's own test
# suite (all of it with --full; test/mpich-suite/README.md).  The
# last line printed is always "N passed, N failed[, N skipped]"; the exit
# status is non-zero when a test failed or a build step did.  Both trees
# are reused on the next run (make rebuilds only what changed).
set -uo pipefail

usage() {
    cat <<'EOF'
Usage: ./check.sh [--full] [--no-mpi] [--no-asan] [--no-fuzz] [--no-distcheck] [--help]

Run as root on Debian 12 (root is needed only if a package is missing).

  1/9  packages, ./configure, build and install in _build (quickstart.sh --no-run)
  2/9  make check in _build
  3/9  configure and build _build-asan (--enable-sanitizers)
  4/9  make check in _build-asan (LeakSanitizer on when it works here)
  5/9  fuzz tree _build-fuzz (configure --enable-fuzz, clang + libFuzzer):
       test/fuzz/run_fuzz.sh, every target over its seed corpus and then
       10,000 new inputs from seed 1 (MDR_FUZZ_RUNS, MDR_FUZZ_SEED: the same
       inputs on every run); with --full, 60 s (MDR_FUZZ_TIME) from a new
       seed instead; any crash, sanitizer report or leak fails
       (test/fuzz/README.md)
  6/9  make distcheck in _build: build the release tarball, then build and
       test from it with a read-only source tree (pass/fail only; its
       tests are not counted twice)
  7/9  build MPICH 4.0.2 with the ch4:madrail netmod, C++ and Fortran
       (scripts/build-mpich.sh; 20-40 min the first time on 2 cores,
       seconds when cached)
  8/9  our MPI test programs (test/mpi/run_mpi_tests.sh), two TCP rails on
       loopback, shared memory off: the C ones, the per-rail MPI_T pvars
       (mpi_pvars), and a C++ and a Fortran program built with our
       mpicxx/mpifort and with Debian's, all run on our MPICH
  9/9  MPICH's own test suite (test/mpi of the same source) over the same
       rails: the fixed quick subset of pt2pt, coll, comm, part, init and
       rma (README.md lists what it leaves out and why), or all of those
       directories with --full; then the namespace-cluster tests that run
       our MPICH (cl_mpi, cl_slurm, cl_anysrc), which skip in step 2 on a
       fresh clone

Options:
  --full           the rate-ratio cluster tests over the ofi, ucx and mixed
                   rail sets run too (MDR_CHECK_FULL=1: cl_duplex_*, cl_adapt_*;
                   under the default run's load they measure the CPU), and
                   step 9 runs the six MPICH test-suite directories complete
                   (about two hours more on 2 cores: rma alone ran over 75
                   minutes with other jobs sharing them)
  --no-mpi         skip steps 7 to 9 (libmadrail alone: a few minutes)
  --no-asan        skip the sanitizer tree (steps 3 and 4)
  --no-fuzz        skip step 5
  --no-distcheck   skip step 6
  --help           this text

Environment:
  JOBS              parallel make jobs (default: nproc)
  MDR_TEST_TIMEOUT  seconds one test may take (default 300)

Ends with one line "N passed, N failed[, N skipped]"; failed counts FAIL,
ERROR and XPASS.  Logs of failing tests are printed before it.
EOF
}

DISTCHECK=yes
ASAN=yes
FUZZ=yes
MPI=yes
SUBSET=quick
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --no-distcheck) DISTCHECK=no ;;
        --no-asan) ASAN=no ;;
        --no-fuzz) FUZZ=no ;;
        --no-mpi) MPI=no ;;
        --full) MPI=yes; SUBSET=full; export MDR_CHECK_FULL=1 ;;
        *) echo "check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")" || exit 1
SRC=$PWD
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
NSTEPS=9
TEST_TIMEOUT=${MDR_TEST_TIMEOUT:-300}
T0=$(date +%s)

say() { echo "[check] $*"; }
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }

BUILD_FAILURES=()
TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
TREE_FAIL=0

# Sum one tree's test-suite.log into the totals and show the failing
# tests' logs.  Returns 1 when there is no test-suite.log.
collect() {
    local tree=$1 log=$1/test-suite.log n
    if [ ! -f "$log" ]; then
        return 1
    fi
    local pass fail xfail xpass error skip
    # Header written by automake's harness: "# PASS:  12" and so on.
    get() { sed -n "s/^# $1: *\([0-9][0-9]*\)$/\1/p" "$log" | head -n1; }
    pass=$(get PASS); fail=$(get FAIL); xfail=$(get XFAIL)
    xpass=$(get XPASS); error=$(get ERROR); skip=$(get SKIP)
    pass=${pass:-0}; fail=${fail:-0}; xfail=${xfail:-0}
    xpass=${xpass:-0}; error=${error:-0}; skip=${skip:-0}
    say "    ${tree#"$SRC"/}: pass $pass, fail $fail, error $error, xpass $xpass, xfail $xfail, skip $skip"
    TREE_FAIL=$((fail + error + xpass))
    TOTAL_PASS=$((TOTAL_PASS + pass + xfail))
    TOTAL_FAIL=$((TOTAL_FAIL + fail + error + xpass))
    TOTAL_SKIP=$((TOTAL_SKIP + skip))
    # Skipped tests: say why (the first line the test printed with "skip").
    while IFS= read -r trs; do
        n=${trs%.trs}
        if grep -q '^:test-result: SKIP' "$trs"; then
            say "    skipped: ${n#"$tree"/} ($(grep -i -m1 'skip' "$n.log" 2>/dev/null | cut -c1-100))"
        fi
    done < <(find "$tree/test" -name '*.trs' 2>/dev/null | sort)
    while IFS= read -r trs; do
        n=${trs%.trs}
        if grep -Eq '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
            why=$(sed -n 's/^:test-result: //p' "$trs")
            if grep -q 'exit status: 124' "$n.log" 2>/dev/null; then
                why="$why: timed out after ${TEST_TIMEOUT}s"
            fi
            echo "----- ${n#"$SRC"/}.log ($why, last 60 lines) -----"
            tail -n 60 "$n.log" 2>/dev/null
            echo "----- end of ${n#"$SRC"/}.log -----"
        fi
    done < <(find "$tree/test" -name '*.trs' 2>/dev/null | sort)
    return 0
}

# make check in a tree; the harness output goes to the console (one line
# per test), the tree's test-suite.log is then summed.
run_check() {
    local tree=$1 name=$2
    shift 2 # the rest: extra make arguments (TESTS=...)
    rm -f "$tree/test-suite.log"
    # Show the harness's per-test lines (PASS: / FAIL: / SKIP: ...) as
    # they come; the whole output stays in check.out.
    local make_rc
    make -C "$tree" -j"$JOBS" check MDR_TEST_TIMEOUT="$TEST_TIMEOUT" "$@" 2>&1 |
        tee "$tree/check.out" |
        grep --line-buffered -E '^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR): ' |
        sed -u 's/^/[check]     /'
    make_rc=${PIPESTATUS[0]}
    if ! collect "$tree"; then
        BUILD_FAILURES+=("$name: make check did not run the tests (build error)")
        echo "----- last 40 lines of ${tree#"$SRC"/}/check.out -----"
        tail -n 40 "$tree/check.out"
        echo "----- end -----"
    elif [ "$make_rc" -ne 0 ] && [ "$TREE_FAIL" -eq 0 ]; then
        # make failed although no test did: a build error in part of the
        # tree, or a test that could not be built.
        BUILD_FAILURES+=("$name: make check exited $make_rc (see ${tree#"$SRC"/}/check.out)")
        grep -E 'error|Error' "$tree/check.out" | tail -n 20
    fi
}

# ------------------------------------------------------------------ 1/N
say "1/$NSTEPS setting up and building _build (quickstart.sh --no-run)..."
if ./quickstart.sh --no-run; then
    BUILD_OK=yes
else
    BUILD_OK=no
    BUILD_FAILURES+=("_build: setup or build failed (see above)")
fi

# ------------------------------------------------------------------ 2/N
if [ "$BUILD_OK" = yes ]; then
    say "2/$NSTEPS make check in _build... ($(elapsed))"
    run_check "$SRC/_build" "_build"
else
    say "2/$NSTEPS make check in _build: skipped, the build failed"
fi

# ------------------------------------------------------------------ 3/N
ASAN_TREE=$SRC/_build-asan
if [ "$ASAN" = yes ] && [ -x "$SRC/configure" ]; then
    say "3/$NSTEPS configuring and building _build-asan (--enable-sanitizers)... ($(elapsed))"
    mkdir -p "$ASAN_TREE"
    want="--prefix=$ASAN_TREE/_install --enable-sanitizers"
    have=""
    if [ -x "$ASAN_TREE/config.status" ] && [ -f "$ASAN_TREE/Makefile" ]; then
        have=$(cd "$ASAN_TREE" && eval "set -- $(./config.status --config)" && echo "$*")
    fi
    asan_ok=yes
    if [ "$have" != "$want" ]; then
        # shellcheck disable=SC2086
        if ! (cd "$ASAN_TREE" && "$SRC/configure" $want >configure.out 2>&1); then
            asan_ok=no
            BUILD_FAILURES+=("_build-asan: configure failed")
            tail -n 30 "$ASAN_TREE/configure.out"
        fi
    else
        say "    _build-asan is configured already"
    fi
    if [ "$asan_ok" = yes ] && ! make -C "$ASAN_TREE" -j"$JOBS" >"$ASAN_TREE/make.out" 2>&1; then
        asan_ok=no
        BUILD_FAILURES+=("_build-asan: make failed")
        tail -n 40 "$ASAN_TREE/make.out"
    fi

    if [ "$asan_ok" = yes ]; then
        # LeakSanitizer stops the world with ptrace; under a tracer or in a
        # sandbox that forbids ptrace it dies with a fatal error instead of
        # reporting.  Prove it works here on a program that leaks on purpose.
        probe=$ASAN_TREE/lsan-probe
        printf '#include <stdlib.h>\nvoid *volatile keep;\nint main(void) { keep = malloc(77); keep = 0; return 0; }\n' \
            >"$probe.c"
        leaks=0
        if gcc -g -fsanitize=address -o "$probe" "$probe.c" 2>/dev/null; then
            out=$(ASAN_OPTIONS=detect_leaks=1 "$probe" 2>&1)
            if echo "$out" | grep -q 'ERROR: LeakSanitizer: detected memory leaks' &&
               echo "$out" | grep -q '77 byte'; then
                leaks=1
            fi
        fi
        if [ "$leaks" = 1 ]; then
            say "    LeakSanitizer works here: detect_leaks=1"
        else
            say "    LeakSanitizer does not work here (ptrace restricted?): detect_leaks=0"
        fi
        export ASAN_OPTIONS="detect_leaks=$leaks:abort_on_error=0:print_summary=1"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
        say "4/$NSTEPS make check in _build-asan (ASAN_OPTIONS=$ASAN_OPTIONS)... ($(elapsed))"
        run_check "$ASAN_TREE" "_build-asan"
        unset ASAN_OPTIONS UBSAN_OPTIONS
    else
        say "4/$NSTEPS make check in _build-asan: skipped, the build failed"
    fi
elif [ "$ASAN" = no ]; then
    say "3/$NSTEPS _build-asan: skipped (--no-asan)"
    say "4/$NSTEPS _build-asan tests: skipped (--no-asan)"
else
    say "3/$NSTEPS _build-asan: skipped, ./configure is missing"
    BUILD_FAILURES+=("_build-asan: not built, ./configure missing")
fi

# ------------------------------------------------------------------ 5/N
FUZZ_TREE=$SRC/_build-fuzz
if [ "$FUZZ" = no ]; then
    say "5/$NSTEPS fuzz tree: skipped (--no-fuzz)"
elif [ -x "$SRC/configure" ]; then
    say "5/$NSTEPS configuring and building _build-fuzz (--enable-fuzz), then test/fuzz/run_fuzz.sh... ($(elapsed))"
    mkdir -p "$FUZZ_TREE"
    want="--enable-fuzz"
    have=""
    if [ -x "$FUZZ_TREE/config.status" ] && [ -f "$FUZZ_TREE/Makefile" ]; then
        have=$(cd "$FUZZ_TREE" && eval "set -- $(./config.status --config)" && echo "$*")
    fi
    fuzz_ok=yes
    if [ "$have" != "$want" ] && ! (cd "$FUZZ_TREE" && "$SRC/configure" $want >configure.out 2>&1); then
        fuzz_ok=no
        BUILD_FAILURES+=("_build-fuzz: configure --enable-fuzz failed")
        tail -n 20 "$FUZZ_TREE/configure.out"
    fi
    if [ "$fuzz_ok" = yes ] && ! make -C "$FUZZ_TREE" -j"$JOBS" >"$FUZZ_TREE/make.out" 2>&1; then
        fuzz_ok=no
        BUILD_FAILURES+=("_build-fuzz: make failed")
        tail -n 40 "$FUZZ_TREE/make.out"
    fi
    if [ "$fuzz_ok" = yes ]; then
        # The default run is the same on every machine (fixed seed, fixed
        # number of inputs): a green commit stays green.  --full explores
        # with a new seed for a longer time, which may find new bugs.
        if [ "$SUBSET" = full ]; then
            MDR_FUZZ_TIME=${MDR_FUZZ_TIME:-60} run_check "$FUZZ_TREE" "_build-fuzz" TESTS=test/fuzz/run_fuzz.sh
        else
            MDR_FUZZ_RUNS=${MDR_FUZZ_RUNS:-10000} MDR_FUZZ_SEED=${MDR_FUZZ_SEED:-1} \
                run_check "$FUZZ_TREE" "_build-fuzz" TESTS=test/fuzz/run_fuzz.sh
        fi
        grep -E '^(PASS|FAIL|NOTE): fuzz_' "$FUZZ_TREE/test/fuzz/run_fuzz.log" 2>/dev/null | sed 's/^/[check]       /'
    fi
else
    say "5/$NSTEPS _build-fuzz: skipped, ./configure is missing"
    BUILD_FAILURES+=("_build-fuzz: not built, ./configure missing")
fi

# ------------------------------------------------------------------ 6/N
if [ "$DISTCHECK" = no ]; then
    say "6/$NSTEPS make distcheck: skipped (--no-distcheck)"
else
    if [ "$BUILD_OK" = yes ]; then
        say "6/$NSTEPS make distcheck in _build... ($(elapsed))"
        if make -C "$SRC/_build" -j"$JOBS" distcheck MDR_TEST_TIMEOUT="$TEST_TIMEOUT" \
               >"$SRC/_build/distcheck.out" 2>&1; then
            say "    distcheck passed: $(grep -o 'madrail-[0-9.]*\.tar\.gz' "$SRC/_build/distcheck.out" | tail -n1) is ready"
        else
            BUILD_FAILURES+=("make distcheck failed (see _build/distcheck.out)")
            tail -n 60 "$SRC/_build/distcheck.out"
            # A failed distcheck leaves its tree: show its failing tests.
            while IFS= read -r trs; do
                if grep -Eq '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
                    echo "----- distcheck: ${trs%.trs}.log (last 60 lines) -----"
                    tail -n 60 "${trs%.trs}.log" 2>/dev/null
                fi
            done < <(find "$SRC"/_build/madrail-*/_build -name '*.trs' 2>/dev/null | sort)
        fi
    else
        say "6/$NSTEPS make distcheck: skipped, the build failed"
    fi
fi

# ------------------------------------------------------------------ 6-8/N
# A runner that ends with "N passed, N failed[, N skipped]": add its counts.
collect_line() {
    local name=$1 out=$2 line p f k
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n1)
    if [ -z "$line" ]; then
        BUILD_FAILURES+=("$name: no result line (see ${out#"$SRC"/})")
        tail -n 40 "$out"
        return
    fi
    p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
    f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    k=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
    say "    $name: $line"
    TOTAL_PASS=$((TOTAL_PASS + ${p:-0}))
    TOTAL_FAIL=$((TOTAL_FAIL + ${f:-0}))
    TOTAL_SKIP=$((TOTAL_SKIP + ${k:-0}))
}

MPICH_OK=no
if [ "$MPI" = no ]; then
    say "7-9/$NSTEPS MPICH build and MPI tests: skipped (--no-mpi)"
elif [ "$BUILD_OK" = yes ]; then
    say "7/$NSTEPS building MPICH 4.0.2 with ch4:madrail (scripts/build-mpich.sh)... ($(elapsed))"
    if scripts/build-mpich.sh --prefix-madrail="$SRC/_install" --jobs "$JOBS" 2>&1 |
           tee "$SRC/_build/mpich-build.out" | sed -u 's/^/[check]     /'; then
        MPICH_OK=yes
    else
        BUILD_FAILURES+=("MPICH build failed (see _build/mpich-build.out)")
    fi
    if [ "$MPICH_OK" = yes ]; then
        say "8/$NSTEPS our MPI tests over tcp:lo,tcp:lo (test/mpi/run_mpi_tests.sh)... ($(elapsed))"
        test/mpi/run_mpi_tests.sh 2>&1 | tee "$SRC/_build/mpi-tests.out" |
            sed -u 's/^/[check]     /'
        collect_line "MPI tests" "$SRC/_build/mpi-tests.out"
        say "9/$NSTEPS MPICH test suite, $SUBSET subset (test/mpich-suite/run_mpich_suite.sh)... ($(elapsed))"
        test/mpich-suite/run_mpich_suite.sh --subset "$SUBSET" 2>&1 |
            tee "$SRC/_build/mpich-suite.out" | sed -u 's/^/[check]     /'
        collect_line "MPICH suite" "$SRC/_build/mpich-suite.out"
        # The cluster tests that run our MPICH skipped in step 2 on a fresh
        # clone (MPICH did not exist yet): run them now that it does.
        say "    the cluster tests that need our MPICH, now that it is built: cl_mpi, cl_slurm, cl_anysrc, cl_mpi_failover over tcp, ofi, ucx and one of each ($(elapsed))"
        run_check "$SRC/_build" "_build (cluster MPI tests)" \
            TESTS="test/cluster/cl_mpi.sh test/cluster/cl_slurm.sh test/cluster/cl_anysrc.sh test/cluster/cl_mpi_failover.sh test/cluster/cl_mpi_failover_ofi.sh test/cluster/cl_mpi_failover_ucx.sh test/cluster/cl_mpi_failover_mix.sh"
    else
        say "8-9/$NSTEPS MPI tests: skipped, MPICH did not build"
    fi
else
    say "7-9/$NSTEPS MPI steps: skipped, the build failed"
fi

# ------------------------------------------------------------------ summary
say "finished in $(elapsed)"
rc=0
if [ ${#BUILD_FAILURES[@]} -gt 0 ]; then
    for f in "${BUILD_FAILURES[@]}"; do say "BUILD STEP FAILED: $f"; done
    rc=1
fi
[ "$TOTAL_FAIL" -gt 0 ] && rc=1
if [ "$TOTAL_PASS" -eq 0 ] && [ "$TOTAL_FAIL" -eq 0 ] && [ ${#BUILD_FAILURES[@]} -eq 0 ]; then
    say "no test ran"
    rc=1
fi
line="$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_SKIP" -gt 0 ] && line="$line, $TOTAL_SKIP skipped"
echo "$line"
exit $rc
