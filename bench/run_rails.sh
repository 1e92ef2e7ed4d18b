#!/usr/bin/env bash
# run_rails.sh (installed as madrail_run_rails) -- latency and bandwidth
# over one and over two TCP rails on loopback, measured in the same run and
# printed side by side, so the two-rail gain is a ratio of numbers taken
# under the same machine load (absolute numbers on a shared machine mean
# little).  Each benchmark is an OSU-style madrail_lat / madrail_bw run
# under `mpiexec -n 2`; their --csv output is joined into one table.
set -euo pipefail

prog=$(basename "$0")

usage() {
    cat <<EOF
Usage: $prog [--quick] [--validate] [--rails1 SPEC] [--rails2 SPEC] [--keep DIR] [--help]

Runs madrail_lat and madrail_bw under 'mpiexec -n 2' with MADRAIL_RAILS set
to SPEC1 (default tcp:lo) and SPEC2 (default tcp:lo,tcp:lo), and prints:
  size | latency 1 rail | latency 2 rails | bw 1 rail | bw 2 rails | bw 2/1

  --quick      sizes 1 B .. 1 MiB, fewer iterations (a first look in seconds)
  --validate   pass --validate to every benchmark (checks every byte)
  --rails1 S   rail list of the first column pair (default tcp:lo)
  --rails2 S   rail list of the second column pair (default tcp:lo,tcp:lo)
  --keep DIR   keep the raw outputs and CSV files in DIR
  -h, --help   this text

Environment:
  MPIEXEC       launcher (default: mpiexec.hydra, else mpiexec, from PATH)
  BINDIR        where madrail_lat and madrail_bw are (default: next to this
                script if they are there, else PATH)
  BENCH_ARGS    extra arguments for both benchmarks (e.g. "--max 4m")
  MADRAIL_*     passed through (e.g. MADRAIL_STATS=1 prints per-rail counters)
EOF
}

QUICK=no
VALIDATE=
RAILS1=tcp:lo
RAILS2=tcp:lo,tcp:lo
KEEP=
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --quick) QUICK=yes ;;
        --validate) VALIDATE=--validate ;;
        --rails1) [ $# -ge 2 ] || { echo "$prog: --rails1 needs a value" >&2; exit 2; }
                  RAILS1=$2; shift ;;
        --rails2) [ $# -ge 2 ] || { echo "$prog: --rails2 needs a value" >&2; exit 2; }
                  RAILS2=$2; shift ;;
        --keep) [ $# -ge 2 ] || { echo "$prog: --keep needs a directory" >&2; exit 2; }
                KEEP=$2; shift ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---------------------------------------------------------------- tools
if [ -n "${MPIEXEC:-}" ]; then
    command -v "$MPIEXEC" >/dev/null 2>&1 ||
        { echo "$prog: MPIEXEC=$MPIEXEC not found" >&2; exit 1; }
else
    MPIEXEC=$(command -v mpiexec.hydra || command -v mpiexec || true)
    [ -n "$MPIEXEC" ] ||
        { echo "$prog: no mpiexec in PATH (install mpich, or set MPIEXEC)" >&2; exit 1; }
fi
find_bench() {
    local name=$1 here
    here=$(cd "$(dirname "$0")" && pwd)
    if [ -n "${BINDIR:-}" ]; then
        [ -x "$BINDIR/$name" ] || { echo "$prog: $BINDIR/$name not found" >&2; return 1; }
        echo "$BINDIR/$name"
    elif [ -x "$here/$name" ]; then
        echo "$here/$name"
    elif command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
    else
        echo "$prog: $name not found (set BINDIR, or put it in PATH)" >&2
        return 1
    fi
}
LAT=$(find_bench madrail_lat)
BW=$(find_bench madrail_bw)

if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    OUT=$(cd "$KEEP" && pwd)
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/madrail_run_rails.XXXXXX")
    trap 'rm -rf "$OUT"' EXIT
fi

SIZES=()
if [ "$QUICK" = yes ]; then
    SIZES=(--max 1m)
    LAT_ITERS=(--iters 200 --warmup 20)
    BW_ITERS=(--iters 5 --warmup 1 --window 32)
else
    LAT_ITERS=()
    BW_ITERS=()
fi
# shellcheck disable=SC2206
EXTRA=(${BENCH_ARGS:-})

# run NAME RAILS BIN ARGS...: one mpiexec job, CSV into $OUT/NAME.csv
run() {
    local name=$1 rails=$2; shift 2
    local cmd=("$MPIEXEC" -n 2 "$@" --csv "$OUT/$name.csv")
    echo "# [$name] MADRAIL_RAILS=$rails ${cmd[*]}" >&2
    if ! MADRAIL_RAILS=$rails "${cmd[@]}" >"$OUT/$name.out" 2>&1; then
        echo "$prog: $name failed; its output:" >&2
        sed 's/^/    /' "$OUT/$name.out" >&2
        return 1
    fi
    grep -E '^# (validation|rails)' "$OUT/$name.out" | sed "s/^# /# [$name] /" >&2 || true
}

LAT_ARGS=(${SIZES[@]+"${SIZES[@]}"} ${LAT_ITERS[@]+"${LAT_ITERS[@]}"} $VALIDATE
          ${EXTRA[@]+"${EXTRA[@]}"})
BW_ARGS=(${SIZES[@]+"${SIZES[@]}"} ${BW_ITERS[@]+"${BW_ITERS[@]}"} $VALIDATE
         ${EXTRA[@]+"${EXTRA[@]}"})
t0=$(date +%s)
run lat1 "$RAILS1" "$LAT" "${LAT_ARGS[@]}"
run lat2 "$RAILS2" "$LAT" "${LAT_ARGS[@]}"
run bw1 "$RAILS1" "$BW" "${BW_ARGS[@]}"
run bw2 "$RAILS2" "$BW" "${BW_ARGS[@]}"
t1=$(date +%s)

echo "# madrail: one rail ($RAILS1) vs two rails ($RAILS2), measured in the same run"
echo "# latency: half round trip (us); bandwidth: streaming window, MB/s (1e6 B/s)"
awk -F, '
    FNR == 1 { file++; next }            # CSV header
    { v[file, $1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
    END {
        printf "%-10s %12s %12s %12s %12s %9s\n", "# Size", "lat 1 (us)", "lat 2 (us)",
               "bw 1 (MB/s)", "bw 2 (MB/s)", "bw 2/1"
        for (i = 0; i < n; i++) {
            s = order[i]
            l1 = v[1, s]; l2 = v[2, s]; b1 = v[3, s]; b2 = v[4, s]
            r = (b1 + 0 > 0 && b2 != "") ? sprintf("%.2f", b2 / b1) : "-"
            printf "%-10s %12s %12s %12s %12s %9s\n", s,
                   l1 == "" ? "-" : sprintf("%.2f", l1), l2 == "" ? "-" : sprintf("%.2f", l2),
                   b1 == "" ? "-" : sprintf("%.2f", b1), b2 == "" ? "-" : sprintf("%.2f", b2), r
        }
    }' "$OUT/lat1.csv" "$OUT/lat2.csv" "$OUT/bw1.csv" "$OUT/bw2.csv"
echo "# 4 runs in $((t1 - t0)) s${KEEP:+; raw outputs in $OUT}"
