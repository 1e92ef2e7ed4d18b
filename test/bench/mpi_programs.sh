#!/bin/sh
# mpi_programs.sh -- the MPI benchmark programs of bench/mpi that the
# cluster suite (bench/cluster/run.sh) builds with every MPI's mpicc: built
# here with one MPI (Debian's mpicc.mpich and its hydra, else our MPICH)
# and run on this machine with small sizes, checking what the suite relies
# on:
#  - mpi_bibw: both directions byte-exact (--validate, each rank sends its
#    own pattern), one row per --sizes entry in the order given;
#  - mpi_mbw_mr: 4 ranks form 2 pairs (rank i -> i + 2), every receiver
#    byte-exact, two value columns with MB/s = messages/s x size / 1e6;
#    an odd number of ranks is refused;
#  - --sizes: rows in the order listed; a bad list is refused;
#  - mpi_lat --p50: the median column;
#  - every successful run ends with "# end of measurements" (the suite's
#    watchdog keeps a job's results when it then hangs in MPI_Finalize).
# SKIP without an MPI compiler and launcher.  About 10 s.
SRC=${MDR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${MDR_BUILDDIR:-$SRC/_build}
name=mpi_programs
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

if command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1; then
    CC=mpicc.mpich RUN=mpiexec.mpich
    # one machine, no network needed: UCX's shared memory is fine here
elif [ -x "${MDR_MPICH_DIR:-$SRC/_install/mpich}/bin/mpicc" ]; then
    CC=${MDR_MPICH_DIR:-$SRC/_install/mpich}/bin/mpicc
    RUN=${MDR_MPICH_DIR:-$SRC/_install/mpich}/bin/mpiexec
    MADRAIL_RAILS=${MADRAIL_RAILS:-tcp:lo}
    export MADRAIL_RAILS
else
    echo "SKIP: $name: no MPI compiler (Debian: mpich libmpich-dev; or our MPICH in _install/mpich)"
    exit 77
fi
W=$BUILD/test/bench/mpi-work
mkdir -p "$W" || { echo "FAIL: $name: cannot create $W"; exit 1; }
for b in mpi_lat mpi_bw mpi_bibw mpi_mbw_mr; do
    if ! "$CC" -std=gnu11 -O2 -Wall -Wextra -Werror -o "$W/$b" "$SRC/bench/mpi/$b.c" \
            "$SRC/bench/mpi/mpi_bench.c" >"$W/$b.build.log" 2>&1; then
        cat "$W/$b.build.log"
        # no MPI headers (mpich without libmpich-dev): nothing to test
        grep -q 'mpi.h' "$W/$b.build.log" && { echo "SKIP: $name: $CC cannot find mpi.h"; exit 77; }
        bad "$b does not build with $CC -Wall -Wextra -Werror"
    fi
done
if ! "$CC" -std=gnu11 -O2 -Wall -Wextra -Werror -o "$W/mpi_stream" "$SRC/bench/mpi/mpi_stream.c" \
        >"$W/mpi_stream.build.log" 2>&1; then
    cat "$W/mpi_stream.build.log"
    bad "mpi_stream does not build with $CC -Wall -Wextra -Werror"
fi
[ $fail -eq 0 ] || { echo "FAIL: $name"; exit 1; }

# run NP OUT PROGRAM ARGS...: exit status of the job, output in OUT
run() {
    np=$1 out=$2
    shift 2
    timeout 60 "$RUN" -n "$np" "$@" >"$out" 2>&1 </dev/null
}
# the value rows of an output: "size v1 [v2]"
rows() { grep -E '^[0-9]+[[:space:]]' "$1"; }
ends_well() { [ "$(tail -n 1 "$1")" = "# end of measurements" ]; }

# -- mpi_bibw: two sizes, in the order given, both directions checked
out=$W/bibw.out
if run 2 "$out" "$W/mpi_bibw" --sizes 64k,1k --iters 3 --warmup 1 --window 8 --validate &&
        [ "$(rows "$out" | awk '{ printf "%s ", $1 }')" = "65536 1024 " ] &&
        grep -q '^# validation: all sizes byte-exact' "$out" && ends_well "$out" &&
        rows "$out" | awk '$2 + 0 <= 0 { exit 1 }'; then
    ok "mpi_bibw: rows 65536 then 1024, both ranks byte-exact, ends with the marker"
else
    cat "$out"; bad "mpi_bibw --sizes 64k,1k --validate"
fi

# -- mpi_mbw_mr: 4 ranks, 2 pairs, two columns that agree
out=$W/mbw_mr.out
if run 4 "$out" "$W/mpi_mbw_mr" --sizes 8,4k --iters 5 --warmup 1 --window 16 --validate &&
        grep -q '^# 4 ranks, 2 pairs (rank i sends to rank i + 2)' "$out" &&
        grep -q '^# validation: all sizes byte-exact' "$out" && ends_well "$out" &&
        [ "$(rows "$out" | wc -l)" -eq 2 ] &&
        rows "$out" | awk 'NF != 3 || $3 <= 0 { exit 1 }
            { want = $3 * $1 / 1e6; if ($2 < want * 0.99 - 0.01 || $2 > want * 1.01 + 0.01) exit 1 }'; then
    ok "mpi_mbw_mr: 2 pairs, receivers byte-exact, MB/s = messages/s x size"
else
    cat "$out"; bad "mpi_mbw_mr -n 4 --sizes 8,4k --validate"
fi
out=$W/mbw_mr3.out
if run 3 "$out" "$W/mpi_mbw_mr" --sizes 8 --iters 2; then
    cat "$out"; bad "mpi_mbw_mr accepted 3 ranks"
elif grep -q 'needs an even number of ranks' "$out"; then
    ok "mpi_mbw_mr refuses an odd number of ranks"
else
    cat "$out"; bad "mpi_mbw_mr -n 3: no 'even number of ranks' message"
fi

# -- --sizes in mpi_lat and mpi_bw: order kept, bad lists refused
out=$W/lat.out
if run 2 "$out" "$W/mpi_lat" --sizes 64,8,0 --iters 20 --warmup 2 --validate &&
        [ "$(rows "$out" | awk '{ printf "%s ", $1 }')" = "64 8 0 " ] && ends_well "$out"; then
    ok "mpi_lat --sizes 64,8,0: rows in that order"
else
    cat "$out"; bad "mpi_lat --sizes 64,8,0"
fi
# -- mpi_lat --p50: a median column beside the mean, a positive value per row
out=$W/lat50.out
if run 2 "$out" "$W/mpi_lat" --sizes 8,1k --iters 50 --warmup 5 --p50 &&
        grep -q 'Median (us)' "$out" && ends_well "$out" &&
        [ "$(rows "$out" | awk 'NF == 3 && $2 > 0 && $3 > 0 { n++ } END { print n + 0 }')" = 2 ]; then
    ok "mpi_lat --p50: a median column, positive on both rows"
else
    cat "$out"; bad "mpi_lat --p50"
fi
out=$W/bw.out
if run 2 "$out" "$W/mpi_bw" --sizes 1k,x --iters 2; then
    cat "$out"; bad "mpi_bw accepted --sizes 1k,x"
elif grep -q 'bad or missing value for --sizes' "$out"; then
    ok "mpi_bw refuses --sizes 1k,x"
else
    cat "$out"; bad "mpi_bw --sizes 1k,x: no message"
fi
out=$W/bw0.out
if run 2 "$out" "$W/mpi_bw" --sizes 0,8 --iters 2; then
    cat "$out"; bad "mpi_bw accepted a 0-byte size"
else
    ok "mpi_bw refuses 0-byte messages in --sizes"
fi

# -- mpi_stream: a byte-checked stream, its figures, the start lines
out=$W/stream.out
if run 2 "$out" "$W/mpi_stream" --size 256k --window 4 --iters 64 --validate --announce &&
        [ "$(grep -c 'stream starts at' "$out")" = 2 ] && grep -q '^# bad_messages 0$' "$out" &&
        grep -qE '^# stall_ms [0-9.]+ at_s [0-9.]+$' "$out" && ends_well "$out" &&
        rows "$out" | awk '$1 != 262144 || $2 + 0 <= 0 { exit 1 }'; then
    ok "mpi_stream: 64 messages byte-exact, stall and rate printed, both ranks announced"
else
    cat "$out"; bad "mpi_stream --size 256k --iters 64 --validate --announce"
fi
if run 2 "$out" "$W/mpi_stream" --window 0; then
    cat "$out"; bad "mpi_stream accepted --window 0"
elif grep -q "bad value for --window: '0'" "$out"; then
    ok "mpi_stream refuses --window 0, naming it"
else
    cat "$out"; bad "mpi_stream --window 0: no message naming the value"
fi

if [ $fail -eq 0 ]; then echo "PASS: $name"; exit 0; fi
echo "FAIL: $name"
exit 1
