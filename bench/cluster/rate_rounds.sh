#!/usr/bin/env bash
# rate_rounds.sh -- small-message rate (osu_mbw_mr semantics, 2 nodes x 2
# ranks) on the namespace cluster, ch4:madrail beside Debian's MPICH
# ch4:ucx on the same rails, many interleaved rounds, every round printed.
#
# Why it is built this way:
#  - With four busy ranks on a 2-core machine the rate is bimodal for
#    every system: some runs go at about one window per scheduler tick
#    (16 k messages/s), the others at 100 k to over a million, and which
#    mode a run falls in does not depend on the library.  Three rounds
#    (bench/cluster/run.sh) rank nothing; here every round is printed,
#    with each system's median and how many of its rounds fell below
#    --slow (the tick-bound mode).
#  - The ranks are not bound to cores: two ranks a node on a 2-core
#    machine is what the suite measures, and binding would only choose
#    the mode.
#  - Nothing here is asserted: it measures and prints.
set -uo pipefail

prog=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
. "$HERE/rounds_common.sh"

usage() {
    cat <<EOF
Usage: $prog [--rounds N] [--rails K] [--size BYTES] [--window N] [--slow RATE]
             [--no-ucx] [--prefix P] [-h]

Message rate (mpi_mbw_mr: messages/s of 2 pairs, one rank of each pair on
each node) on a two-node namespace cluster with K 1 Gbit rails
(test/cluster/cluster.sh): ch4:madrail (our MPICH, the installed
libmadrail) and Debian's MPICH ch4:ucx on the same rails, alternating run
by run.  Prints every round, then each system's median and its rounds
below --slow.

  --rounds N      rounds (default 10); each round runs every system once
  --rails K       rails used by every system (default 1, at most 4)
  --size BYTES    message size (default 8)
  --window N      messages in flight per pair (default 64)
  --slow RATE     a round below RATE messages/s counts as the tick-bound
                  mode (default 50000)
  --no-ucx        ch4:madrail only
  --prefix P      cluster namespace prefix (default mdrrate-)
  -h, --help      this text

Needs root (network namespaces), our MPICH (./quickstart.sh --no-run) and
for ch4:ucx Debian's mpich and libmpich-dev.  A few seconds a run.
EOF
}

ROUNDS=10 RAILS=1 SIZE=8 WINDOW=64 SLOW=50000 UCX=1 PREFIX=mdrrate-
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) ROUNDS=${2:-}; shift ;;
        --rails) RAILS=${2:-}; shift ;;
        --size) SIZE=${2:-}; shift ;;
        --window) WINDOW=${2:-}; shift ;;
        --slow) SLOW=${2:-}; shift ;;
        --no-ucx) UCX=0 ;;
        --prefix) PREFIX=${2:-}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in ROUNDS RAILS SIZE WINDOW SLOW; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] ||
        { echo "$prog: --${v,,} must be a positive integer, not '${!v}'" >&2; exit 2; }
done
[ "$RAILS" -le 4 ] || { echo "$prog: --rails $RAILS: at most 4" >&2; exit 2; }

MPICH_DIR=${MDR_MPICH_DIR:-$SRC/_install/mpich}
rounds_setup rate

"$MPICH_DIR/bin/mpicc" -O2 -o "$W/mr_madrail" "$SRC/bench/mpi/mpi_mbw_mr.c" \
    "$SRC/bench/mpi/mpi_bench.c" || die "cannot build mpi_mbw_mr with $MPICH_DIR/bin/mpicc"
if [ $UCX -eq 1 ]; then
    mpicc.mpich -O2 -o "$W/mr_ucx" "$SRC/bench/mpi/mpi_mbw_mr.c" "$SRC/bench/mpi/mpi_bench.c" ||
        die "cannot build mpi_mbw_mr with mpicc.mpich"
fi
rounds_cluster

# one run: the messages/s column of mpi_mbw_mr, or "-"
ARGS=(--sizes "$SIZE" --window "$WINDOW")
pick() { awk -v s="$SIZE" '$1 == s { v = $3 } END { print (v == "" ? "-" : v) }'; }
run_madrail() {
    # shellcheck disable=SC2086
    "$CL" --prefix "$PREFIX" exec 0 timeout -k 5 60 "$MPICH_DIR/bin/mpiexec" $MDR_CLUSTER_HYDRA_FLAGS \
        -n 4 -ppn 2 env MADRAIL_RAILS="$(echo "$rails" | sed 's/rail/tcp:rail/g')" \
        LD_LIBRARY_PATH="$SRC/_install/lib" "$W/mr_madrail" "${ARGS[@]}" 2>&1 | pick
}
run_ucx() {
    # shellcheck disable=SC2086
    "$CL" --prefix "$PREFIX" exec 0 timeout -k 5 60 mpiexec.mpich $MDR_CLUSTER_HYDRA_FLAGS \
        -n 4 -ppn 2 env UCX_NET_DEVICES="$rails" UCX_TLS=tcp,self UCX_MAX_EAGER_RAILS="$RAILS" \
        UCX_MAX_RNDV_RAILS="$RAILS" "$W/mr_ucx" "${ARGS[@]}" 2>&1 | pick
}

names=(ch4:madrail)
[ $UCX -eq 1 ] && names+=("ch4:ucx")
echo "# $SIZE-byte message rate (messages/s, 2 nodes x 2 ranks, window $WINDOW), $RAILS rail(s) of 1 Gbit, $ROUNDS rounds"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# round ${names[*]}"
: >"$W/rounds"
for r in $(seq 1 "$ROUNDS"); do
    row=("$(run_madrail)")
    [ $UCX -eq 1 ] && row+=("$(run_ucx)")
    echo "$r ${row[*]}" | tee -a "$W/rounds"
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v names="${names[*]}" -v slow="$SLOW" '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ for (c = 2; c <= NF; c++) if ($c != "-") { v[c, ++nv[c]] = $c + 0; if ($c + 0 < slow) ns[c]++ } }
END {
    k = split(names, nm, " ")
    for (c = 2; c <= k + 1; c++) {
        n = 0; for (i = 1; i <= nv[c]; i++) x[++n] = v[c, i]
        printf "%-12s median %.0f messages/s over %d runs; %d below %d\n", nm[c - 1],
               n ? median(x, n) : 0, n, ns[c] + 0, slow
    }
}' "$W/rounds"
