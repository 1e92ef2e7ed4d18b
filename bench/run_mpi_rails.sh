#!/usr/bin/env bash
# run_mpi_rails.sh -- MPI latency and bandwidth on MPICH ch4:madrail over
# one TCP rail and over two, measured in the same run and printed side by
# side: the gain of the second rail is a ratio of numbers taken under the
# same machine load (absolute numbers on a shared 2-core machine mean
# little).  The benchmarks are bench/mpi/mpi_lat.c and mpi_bw.c (OSU
# osu_latency / osu_bw semantics), built here with the MPICH wrapper
# compiler and run under its mpiexec with shared memory off, exactly as
# test/mpi/run_mpi_tests.sh runs the tests.  --system adds Debian's MPICH
# (ch4:ucx, UCX's TCP transport on lo) as a baseline column pair.
set -uo pipefail

prog=$(basename "$0")
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

usage() {
    cat <<EOF
Usage: $prog [--quick] [--system] [--out FILE] [--rails1 SPEC] [--rails2 SPEC]
             [--validate] [--keep DIR] [--help]

Runs mpi_lat and mpi_bw (bench/mpi) under 'mpiexec -n 2' on ch4:madrail
with MADRAIL_RAILS=SPEC1 (default tcp:lo) and SPEC2 (default
tcp:lo,tcp:lo), MPIR_CVAR_NOLOCAL=1 (no shared memory), and prints:
  size | lat 1 rail | lat 2 rails | bw 1 rail | bw 2 rails | bw 2/1
latency: half round trip in us; bandwidth: window of 64 Isends, MB/s (1e6).

  --quick       sizes 1 B .. 4 MiB in steps of x4, fewer iterations
  --system      add a baseline column pair from Debian's MPICH (mpicc.mpich,
                mpiexec.hydra; ch4:ucx with UCX_TLS=tcp,self
                UCX_NET_DEVICES=lo, i.e. one TCP connection on loopback).
                If the madrail MPICH is not installed, only the baseline runs
  --out FILE    also write the table to FILE
  --rails1 S    rail list of the first pair of columns (default tcp:lo)
  --rails2 S    rail list of the second pair (default tcp:lo,tcp:lo)
  --validate    pass --validate to the benchmarks (byte check, not timed)
  --no-bind     do not pass '-bind-to core' to mpiexec (by default the two
                ranks are pinned to different cores: on a busy 2-core machine
                two busy-polling ranks sharing one core otherwise measure the
                scheduler's time slice, ~6-10 ms per message, not the network)
  --keep DIR    keep binaries and raw outputs in DIR
  -h, --help    this text

Environment:
  MPICC, MPIEXEC   madrail MPICH (default $REPO/_install/mpich/bin/{mpicc,mpiexec})
  MDR_LIBDIR       libmadrail's directory (default $REPO/_install/lib)
  SYS_MPICC, SYS_MPIEXEC   baseline MPICH (default mpicc.mpich, mpiexec.hydra)
  BASELINE_ENV     environment for the baseline runs
                   (default "UCX_TLS=tcp,self UCX_NET_DEVICES=lo")
  BENCH_ARGS       extra arguments for both benchmarks (e.g. "--max 4m")
  MADRAIL_*        passed through (MADRAIL_STATS=1 prints per-rail counters)
EOF
}

QUICK=no
SYSTEM=no
OUTFILE=
RAILS1=tcp:lo
RAILS2=tcp:lo,tcp:lo
VALIDATE=
KEEP=
BIND=(-bind-to core)
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --quick) QUICK=yes ;;
        --system) SYSTEM=yes ;;
        --out) [ $# -ge 2 ] || { echo "$prog: --out needs a file" >&2; exit 2; }
               OUTFILE=$2; shift ;;
        --rails1) [ $# -ge 2 ] || { echo "$prog: --rails1 needs a value" >&2; exit 2; }
                  RAILS1=$2; shift ;;
        --rails2) [ $# -ge 2 ] || { echo "$prog: --rails2 needs a value" >&2; exit 2; }
                  RAILS2=$2; shift ;;
        --validate) VALIDATE=--validate ;;
        --no-bind) BIND=() ;;
        --keep) [ $# -ge 2 ] || { echo "$prog: --keep needs a directory" >&2; exit 2; }
                KEEP=$2; shift ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---------------------------------------------------------------- tools
have() { [ -n "$1" ] && command -v "$1" >/dev/null 2>&1; }

MPICC=${MPICC:-$REPO/_install/mpich/bin/mpicc}
MPIEXEC=${MPIEXEC:-$REPO/_install/mpich/bin/mpiexec}
MADRAIL=yes
if ! have "$MPICC" || ! have "$MPIEXEC"; then
    if [ "$SYSTEM" = yes ]; then
        echo "# $prog: madrail MPICH not found ($MPICC); running the baseline only" >&2
        MADRAIL=no
    else
        echo "$prog: madrail MPICH not found (MPICC=$MPICC MPIEXEC=$MPIEXEC);" \
             "build it, set MPICC/MPIEXEC, or use --system for the baseline alone" >&2
        exit 1
    fi
fi
if [ "$SYSTEM" = yes ]; then
    SYS_MPICC=${SYS_MPICC:-mpicc.mpich}
    SYS_MPIEXEC=${SYS_MPIEXEC:-$(command -v mpiexec.hydra || command -v mpiexec.mpich || true)}
    if ! have "$SYS_MPICC" || ! have "$SYS_MPIEXEC"; then
        echo "$prog: --system: Debian's MPICH not found (SYS_MPICC=$SYS_MPICC" \
             "SYS_MPIEXEC=$SYS_MPIEXEC); apt install mpich libmpich-dev" >&2
        exit 1
    fi
fi
BASELINE_ENV=${BASELINE_ENV-UCX_TLS=tcp,self UCX_NET_DEVICES=lo}

if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP" || exit 1
    OUT=$(cd "$KEEP" && pwd)
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/madrail_run_mpi_rails.XXXXXX") || exit 1
    trap 'rm -rf "$OUT"' EXIT
fi

# Same library path rule as the tests: libmadrail first, the patched
# MPICH's lib dir for the madrail runs only.
LD_MADRAIL=${MDR_LIBDIR:-$REPO/_install/lib}
if [ "$MADRAIL" = yes ]; then
    d=$(cd "$(dirname "$(command -v "$MPICC")")/.." && pwd)/lib
    if compgen -G "$d/libmpi.so*" >/dev/null; then
        if [ "$(cd "$LD_MADRAIL" 2>/dev/null && pwd -P)" != "$(cd "$d" && pwd -P)" ]; then
            LD_MADRAIL=$LD_MADRAIL:$d
        fi
        # The libmadrail found first must have every symbol libmpi needs.
        missing=$(LD_LIBRARY_PATH=$LD_MADRAIL ldd -r "$d/libmpi.so" 2>&1 |
                  sed -n 's/^undefined symbol: \(madrail_[A-Za-z0-9_]*\).*/\1/p' |
                  sort -u | tr '\n' ' ')
        if [ -n "$missing" ]; then
            echo "$prog: the libmadrail in ${MDR_LIBDIR:-$REPO/_install/lib} lacks symbols the" \
                 "patched libmpi needs ($missing): reinstall it, or set MDR_LIBDIR=$d" >&2
            exit 1
        fi
    fi
fi
LD_MADRAIL=$LD_MADRAIL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---------------------------------------------------------------- build
build() { # CC DIR
    local cc=$1 dir=$2 b
    mkdir -p "$dir" || return 1
    for b in mpi_lat mpi_bw; do
        if ! "$cc" -std=gnu11 -O2 -Wall -Wextra -o "$dir/$b" "$HERE/mpi/$b.c" \
                "$HERE/mpi/mpi_bench.c" >"$dir/$b.build.log" 2>&1; then
            echo "$prog: building $b with $cc failed:" >&2
            sed 's/^/    /' "$dir/$b.build.log" >&2
            return 1
        fi
    done
}
if [ "$MADRAIL" = yes ]; then
    build "$MPICC" "$OUT/madrail" || exit 1
fi
if [ "$SYSTEM" = yes ]; then
    build "$SYS_MPICC" "$OUT/system" || exit 1
fi

if [ "$QUICK" = yes ]; then
    LAT_ARGS=(--max 4m --factor 4 --iters 300 --warmup 20)
    BW_ARGS=(--max 4m --factor 4 --iters 4 --warmup 1)
else
    LAT_ARGS=()
    BW_ARGS=()
fi
# shellcheck disable=SC2206
EXTRA=(${BENCH_ARGS:-} $VALIDATE)

# run NAME KIND(madrail|system) RAILS BIN ARGS...: raw output in $OUT/NAME.out,
# "size value" lines in $OUT/NAME.dat
run() {
    local name=$1 kind=$2 rails=$3 bin=$4; shift 4
    local envs=(MPIR_CVAR_NOLOCAL=1) launcher
    if [ "$kind" = madrail ]; then
        envs+=(MADRAIL_RAILS="$rails" LD_LIBRARY_PATH="$LD_MADRAIL")
        launcher=$MPIEXEC
    else
        # shellcheck disable=SC2206
        envs+=($BASELINE_ENV)
        launcher=$SYS_MPIEXEC
    fi
    echo "# [$name] ${envs[*]} $launcher ${BIND[*]} -n 2 $(basename "$bin") $*" >&2
    if ! env "${envs[@]}" "$launcher" ${BIND[@]+"${BIND[@]}"} -n 2 "$bin" "$@" \
            >"$OUT/$name.out" 2>&1 </dev/null; then
        echo "$prog: $name failed; its output:" >&2
        sed 's/^/    /' "$OUT/$name.out" >&2
        return 1
    fi
    grep -v '^#' "$OUT/$name.out" | awk 'NF == 2 && $1 ~ /^[0-9]+$/' >"$OUT/$name.dat"
    grep -E '^# (MPICH Device|validation)' "$OUT/$name.out" | sed "s/^# /# [$name] /" >&2
}

t0=$(date +%s)
FILES=()
HEAD=()
if [ "$MADRAIL" = yes ]; then
    run lat1 madrail "$RAILS1" "$OUT/madrail/mpi_lat" ${LAT_ARGS[@]+"${LAT_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    run lat2 madrail "$RAILS2" "$OUT/madrail/mpi_lat" ${LAT_ARGS[@]+"${LAT_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    run bw1 madrail "$RAILS1" "$OUT/madrail/mpi_bw" ${BW_ARGS[@]+"${BW_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    run bw2 madrail "$RAILS2" "$OUT/madrail/mpi_bw" ${BW_ARGS[@]+"${BW_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    FILES+=("$OUT/lat1.dat" "$OUT/lat2.dat" "$OUT/bw1.dat" "$OUT/bw2.dat")
    HEAD+=("lat 1 rail" "lat 2 rails" "bw 1 rail" "bw 2 rails")
fi
if [ "$SYSTEM" = yes ]; then
    run latsys system - "$OUT/system/mpi_lat" ${LAT_ARGS[@]+"${LAT_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    run bwsys system - "$OUT/system/mpi_bw" ${BW_ARGS[@]+"${BW_ARGS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"} || exit 1
    FILES+=("$OUT/latsys.dat" "$OUT/bwsys.dat")
    HEAD+=("lat sys" "bw sys")
fi
t1=$(date +%s)

device() { grep -m1 '^# MPICH Device' "$OUT/$1.out" 2>/dev/null | sed 's/.*Device:[[:space:]]*//'; }

table() {
    echo "# MPI over madrail rails, measured in one run on $(hostname) at $(date '+%F %T')"
    if [ "$MADRAIL" = yes ]; then
        echo "# madrail: $(device lat1) ($MPIEXEC), MPIR_CVAR_NOLOCAL=1;" \
             "1 rail = MADRAIL_RAILS=$RAILS1, 2 rails = MADRAIL_RAILS=$RAILS2"
    fi
    if [ "$SYSTEM" = yes ]; then
        echo "# sys: Debian MPICH $(device latsys) ($SYS_MPIEXEC), MPIR_CVAR_NOLOCAL=1 $BASELINE_ENV"
    fi
    echo "# latency: half round trip, us (mpi_lat); bandwidth: window of 64, MB/s = 1e6 B/s (mpi_bw);" \
         "mpiexec ${BIND[*]:-(no binding)}"
    local i
    for i in "${!FILES[@]}"; do
        awk -v f=$((i + 1)) '{ print f, $1, $2 }' "${FILES[$i]}"
    done | awk -v madrail="$MADRAIL" -v sys="$SYSTEM" '
        { v[$1, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
        function cell(x) { return x == "" ? "-" : sprintf("%.2f", x) }
        END {
            line = sprintf("%-10s", "# Size")
            if (madrail == "yes")
                line = line sprintf(" %12s %12s %12s %12s %7s", "lat 1 (us)", "lat 2 (us)",
                                    "bw 1 (MB/s)", "bw 2 (MB/s)", "bw 2/1")
            if (sys == "yes")
                line = line sprintf(" %12s %12s", "lat sys (us)", "bw sys(MB/s)")
            print line
            # numeric order of sizes
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
                if (order[j] + 0 < order[i] + 0) { t = order[i]; order[i] = order[j]; order[j] = t }
            for (i = 0; i < n; i++) {
                s = order[i]; line = sprintf("%-10s", s); k = 0
                if (madrail == "yes") {
                    l1 = v[1, s]; l2 = v[2, s]; b1 = v[3, s]; b2 = v[4, s]; k = 4
                    r = (b1 != "" && b1 + 0 > 0 && b2 != "") ? sprintf("%.2f", b2 / b1) : "-"
                    line = line sprintf(" %12s %12s %12s %12s %7s", cell(l1), cell(l2), cell(b1),
                                        cell(b2), r)
                }
                if (sys == "yes")
                    line = line sprintf(" %12s %12s", cell(v[k + 1, s]), cell(v[k + 2, s]))
                print line
            }
        }'
    echo "# ${#FILES[@]} benchmark runs in $((t1 - t0)) s${KEEP:+; raw outputs in $OUT}"
}

if [ -n "$OUTFILE" ]; then
    table | tee "$OUTFILE"
else
    table
fi
