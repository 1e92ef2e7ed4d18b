#!/usr/bin/env bash
# pgo-train.sh -- the training run of a profile-guided build of libmadrail
# (./configure --enable-pgo; the Makefile runs this between the instrumented
# and the final build, see "Profile-guided build" in docs/performance.md).
#
# It runs madrail's own two benchmarks, ping-pong (madrail_lat) and
# streaming (madrail_bw), over every driver this build has, on loopback, at
# sizes from 1 byte to 4 MiB: the small-message path, eager fragments,
# rendezvous and striping over two rails.  What it runs decides what GCC
# lays out as hot; code it never reaches is optimised as without a profile
# (-fprofile-partial-training), so a path left out is not made slower.
# Every run has a time limit; a driver that cannot open here (no UCX, no
# libfabric provider) is reported and left out, the others still train.
set -uo pipefail

prog=$(basename "$0")

usage() {
    cat <<EOF
Usage: $prog --builddir DIR [--mpiexec PATH] [--quick] [--help]

Runs the training workload of a profile-guided build with the instrumented
benchmarks of build tree DIR (bench/madrail_lat, bench/madrail_bw), two
processes per run on loopback, over: tcp:lo; tcp:lo,tcp:lo; shm;
ucx:tcp:lo; ucx:shm; ofi:tcp;ofi_rxm:lo; ofi:shm.  About a minute.

  --builddir DIR  the build tree (required)
  --mpiexec PATH  launcher (default: mpiexec.hydra, else mpiexec, from PATH)
  --quick         fewer iterations (for tests of this script)
  --help          this help

Exit status: 0 when at least the tcp runs succeeded, 1 otherwise, 2 on a
usage error.
EOF
}

BUILDDIR=
MPIEXEC=${MPIEXEC:-}
QUICK=0
while [ $# -gt 0 ]; do
    case $1 in
    --builddir) [ $# -ge 2 ] || { echo "$prog: --builddir needs a directory" >&2; exit 2; }
                BUILDDIR=$2; shift ;;
    --mpiexec) [ $# -ge 2 ] || { echo "$prog: --mpiexec needs a path" >&2; exit 2; }
               MPIEXEC=$2; shift ;;
    --quick) QUICK=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$prog: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$BUILDDIR" ] || { echo "$prog: --builddir is required (see --help)" >&2; exit 2; }
for b in madrail_lat madrail_bw; do
    [ -x "$BUILDDIR/bench/$b" ] || { echo "$prog: $BUILDDIR/bench/$b is missing: build it first" >&2; exit 2; }
done
if [ -z "$MPIEXEC" ]; then
    MPIEXEC=$(command -v mpiexec.hydra || command -v mpiexec || true)
fi
[ -n "$MPIEXEC" ] && command -v "$MPIEXEC" >/dev/null 2>&1 ||
    { echo "$prog: no launcher '${MPIEXEC:-mpiexec.hydra}' (install the mpich package, or pass --mpiexec)" >&2; exit 2; }

if [ $QUICK -eq 1 ]; then
    LAT_ITERS=(--iters 20 --warmup 2) BW_ITERS=(--iters 2 --warmup 1) MAX=256k
else
    LAT_ITERS=() BW_ITERS=() MAX=4m
fi

# one benchmark over one rail list: 0 when it ran
run() {
    local rails=$1 bench=$2; shift 2
    local out rc
    out=$(MADRAIL_RAILS=$rails timeout 120 "$MPIEXEC" -n 2 "$BUILDDIR/bench/$bench" "$@" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "$prog:   $bench over $rails: left out (exit $rc: $(echo "$out" | grep -v '^#' | tail -n 1))"
        return 1
    fi
    echo "$prog:   $bench over $rails: done"
}

tcp_ok=1
n=0
for rails in 'tcp:lo' 'tcp:lo,tcp:lo' 'shm' 'ucx:tcp:lo' 'ucx:shm' 'ofi:tcp;ofi_rxm:lo' 'ofi:shm'; do
    n=$((n + 1))
    echo "$prog: $n/7 $rails"
    run "$rails" madrail_lat --min 1 --max "$MAX" "${LAT_ITERS[@]}" || { [[ $rails == tcp:* ]] && tcp_ok=0; continue; }
    run "$rails" madrail_bw --min 1 --max "$MAX" "${BW_ITERS[@]}" || { [[ $rails == tcp:* ]] && tcp_ok=0; }
done
[ $tcp_ok -eq 1 ] || { echo "$prog: the tcp runs failed: no usable profile" >&2; exit 1; }
exit 0
