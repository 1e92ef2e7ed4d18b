#!/usr/bin/env bash
# lat_median.sh -- 8-byte MPI latency on the namespace cluster, as
# medians, for differences of a few tenths of a microsecond: ch4:madrail
# (with one or more libmadrail builds) beside Debian's MPICH ch4:ucx on
# the same rails, many short runs interleaved.
#
# Why it is built this way:
#  - On a shared 2-core machine the latency of one run moves by a
#    microsecond or more from one run to the next (seen: 4.1 to 6.4 us for
#    the same binary), far more than the differences between systems.
#    The suite's osu-style averages (run.sh) move with every descheduled
#    round trip too.  Here each run prints the median of its round trips
#    (mpi_lat --p50), the systems alternate run by run, and the verdict is
#    the median over the rounds of the per-round difference to the first
#    system: a slow spell of the machine hits both sides of a pair.
#  - Rank i is bound to core i (taskset), the same for every system, so
#    that no run puts both ranks on one core.
#  - Nothing here is asserted: it measures and prints.
# shellcheck disable=SC1091
set -uo pipefail

prog=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
. "$HERE/rounds_common.sh"

usage() {
    cat <<EOF
Usage: $prog [--rounds N] [--iters N] [--rails K] [--lib NAME=DIR]... [--no-ucx]
             [--size BYTES] [--prefix P] [-h]

Interleaved ping-pong latency (median round trip / 2, mpi_lat --p50) on a
two-node namespace cluster with K 1 Gbit rails (test/cluster/cluster.sh):
ch4:madrail (our MPICH, once per --lib, default: the installed
libmadrail) and Debian's MPICH ch4:ucx on the same rails.  Prints every
round, the median of each system, and the median over the rounds of each
system's difference to the first one.

  --rounds N      rounds (default 30); each round runs every system once
  --iters N       round trips per run (default 5000, after 500 untimed)
  --rails K       rails used by every system (default 1)
  --lib NAME=DIR[,MPICH]
                  a libmadrail build to measure (its directory, put first
                  with LD_LIBRARY_PATH), with the MPICH prefix MPICH
                  (default: ours); repeat to compare builds (a netmod
                  change needs its own MPICH: give each its prefix)
  --no-ucx        ch4:madrail only
  --size BYTES    message size (default 8)
  --prefix P      cluster namespace prefix (default mdrlat-)
  -h, --help      this text

Needs root (network namespaces), our MPICH (./quickstart.sh --no-run) and
for ch4:ucx Debian's mpich and libmpich-dev.  About 1.5 s a run.
EOF
}

ROUNDS=30 ITERS=5000 RAILS=1 UCX=1 SIZE=8 PREFIX=mdrlat-
LIBS=()
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) ROUNDS=${2:-}; shift ;;
        --iters) ITERS=${2:-}; shift ;;
        --rails) RAILS=${2:-}; shift ;;
        --lib) LIBS+=("${2:-}"); shift ;;
        --no-ucx) UCX=0 ;;
        --size) SIZE=${2:-}; shift ;;
        --prefix) PREFIX=${2:-}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in ROUNDS ITERS RAILS SIZE; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] ||
        { echo "$prog: --${v,,} must be a positive integer, not '${!v}'" >&2; exit 2; }
done
[ "$RAILS" -le 4 ] || { echo "$prog: --rails $RAILS: at most 4" >&2; exit 2; }
[ ${#LIBS[@]} -gt 0 ] || LIBS=("madrail=$SRC/_install/lib")
MPICH_DIR=${MDR_MPICH_DIR:-$SRC/_install/mpich}
# NAME=DIR[,MPICH]: its library directory, its MPICH prefix
libdir_of() { local v=${1#*=}; echo "${v%%,*}"; }
mpich_of() { local v=${1#*=}; case $v in *,*) echo "${v#*,}" ;; *) echo "$MPICH_DIR" ;; esac; }
for l in "${LIBS[@]}"; do
    case $l in
        *=*,*) [ -d "$(libdir_of "$l")" ] && [ -x "$(mpich_of "$l")/bin/mpicc" ] ||
                 { echo "$prog: --lib $l: no directory $(libdir_of "$l") or no $(mpich_of "$l")/bin/mpicc" >&2; exit 2; } ;;
        *=*) [ -d "${l#*=}" ] || { echo "$prog: --lib $l: no directory ${l#*=}" >&2; exit 2; } ;;
        *) echo "$prog: --lib $l: expected NAME=DIR" >&2; exit 2 ;;
    esac
done

rounds_setup latmed

i=0
for l in "${LIBS[@]}"; do
    "$(mpich_of "$l")/bin/mpicc" -O2 -o "$W/lat_madrail$i" "$SRC/bench/mpi/mpi_lat.c" \
        "$SRC/bench/mpi/mpi_bench.c" || die "cannot build mpi_lat with $(mpich_of "$l")/bin/mpicc"
    i=$((i + 1))
done
if [ $UCX -eq 1 ]; then
    mpicc.mpich -O2 -o "$W/lat_ucx" "$SRC/bench/mpi/mpi_lat.c" "$SRC/bench/mpi/mpi_bench.c" ||
        die "cannot build mpi_lat with mpicc.mpich"
fi
rounds_cluster

# one run: the median column of mpi_lat, or "-"
BIND='exec taskset -c $PMI_RANK "$@"'
# run_madrail LIBDIR MPICH INDEX
run_madrail() {
    # shellcheck disable=SC2086
    "$CL" --prefix "$PREFIX" exec 0 timeout -k 5 60 "$2/bin/mpiexec" $MDR_CLUSTER_HYDRA_FLAGS \
        -n 2 -ppn 1 env MADRAIL_RAILS="$(echo "$rails" | sed 's/rail/tcp:rail/g')" LD_LIBRARY_PATH="$1" \
        sh -c "$BIND" sh "$W/lat_madrail$3" --sizes "$SIZE" --iters "$ITERS" --warmup 500 --p50 2>&1 |
        awk -v s="$SIZE" '$1 == s { v = $3 } END { print (v == "" ? "-" : v) }'
}
run_ucx() {
    # shellcheck disable=SC2086
    "$CL" --prefix "$PREFIX" exec 0 timeout -k 5 60 mpiexec.mpich $MDR_CLUSTER_HYDRA_FLAGS \
        -n 2 -ppn 1 env UCX_NET_DEVICES="$rails" UCX_TLS=tcp,self UCX_MAX_EAGER_RAILS="$RAILS" \
        UCX_MAX_RNDV_RAILS="$RAILS" sh -c "$BIND" sh "$W/lat_ucx" --sizes "$SIZE" \
        --iters "$ITERS" --warmup 500 --p50 2>&1 |
        awk -v s="$SIZE" '$1 == s { v = $3 } END { print (v == "" ? "-" : v) }'
}

names=()
for l in "${LIBS[@]}"; do names+=("${l%%=*}"); done
[ $UCX -eq 1 ] && names+=("ch4:ucx")
echo "# $SIZE-byte latency, median round trip / 2 (us), $RAILS rail(s) of 1 Gbit, $ITERS round trips a run, $ROUNDS rounds"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# round ${names[*]}"
: >"$W/rounds"
for r in $(seq 1 "$ROUNDS"); do
    row=()
    i=0
    for l in "${LIBS[@]}"; do
        row+=("$(run_madrail "$(libdir_of "$l")" "$(mpich_of "$l")" $i)")
        i=$((i + 1))
    done
    [ $UCX -eq 1 ] && row+=("$(run_ucx)")
    echo "$r ${row[*]}" | tee -a "$W/rounds"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# medians, and the median of each system's per-round difference to the first
awk -v names="${names[*]}" '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ for (c = 2; c <= NF; c++) if ($c != "-") { v[c, ++nv[c]] = $c + 0 }
  if ($2 != "-") for (c = 3; c <= NF; c++) if ($c != "-") d[c, ++nd[c]] = $c - $2 }
END {
    k = split(names, nm, " ")
    for (c = 2; c <= k + 1; c++) {
        n = 0; for (i = 1; i <= nv[c]; i++) x[++n] = v[c, i]
        line = sprintf("%-12s median %.3f us over %d runs", nm[c - 1], n ? median(x, n) : 0, n)
        if (c > 2) {
            n = 0; for (i = 1; i <= nd[c]; i++) x[++n] = d[c, i]
            line = line sprintf("; minus %s, median of the paired differences: %+.3f us", nm[1], n ? median(x, n) : 0)
        }
        print line
    }
}' "$W/rounds"
