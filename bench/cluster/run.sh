#!/usr/bin/env bash
# run.sh (installed as madrail_bench_cluster) -- the multi-rail benchmark
# suite on the namespace cluster of test/cluster/cluster.sh: MPICH
# ch4:madrail with 1, 2 and 3 rails beside the systems a user would pick
# instead, Debian's MPICH (ch4:ucx, UCX multi-rail) and Debian's Open MPI
# (ob1, tcp BTL), on the same rails, with the raw link of every rail
# (iperf3) measured in the same run, then a CSV, a Markdown table and PNG
# plots (gnuplot); --update-docs puts them into docs/performance.md.
#
# Why it is built this way:
#  - Only numbers taken in one run, under one machine load, can be
#    compared here (a shared 2-core machine): every system runs once per
#    round, benchmark by benchmark, and the tables give medians over the
#    rounds, as bench/run_drivers.sh does.  The physical limit of a rail
#    set is the sum of its rails' iperf3 results from the same run.
#  - Every system runs OUR benchmark programs (bench/mpi: osu_latency,
#    osu_bw, osu_bibw and osu_mbw_mr semantics) built with its own mpicc,
#    with the same sizes, windows and iteration counts: no system is
#    measured by a different tool.
#  - A job can hang (Debian's MPICH over UCX 1.13 tcp hangs in
#    MPI_Finalize about one run in three with two ranks a node; any system
#    may hang when a rail dies).  Each job runs under a watchdog: a job
#    whose results are complete ("# end of measurements") but that does
#    not exit within a grace time is recorded as a finalize hang and its
#    results kept; a job past its time limit is recorded as a hang.  Either
#    way every process left in the cluster's namespaces is killed and the
#    suite goes on.
#  - Throughput over time (a rail's rate changed or its link cut mid-run)
#    is read from the kernel's byte counters of node0's rails every 100 ms:
#    the same instrument for every system, whatever it prints itself.
#  - --quickstart is the small table of ./quickstart.sh's main job
#    (ch4:madrail only, one rail / two equal / two unequal, about 30 s).
#  - --adapt is issue 11's run (rails that adapt): rails of different
#    rates with no settings, beside Open MPI given the rates by hand
#    (btl_tcp_bandwidth_<interface>), equal rails with and without
#    adaptation, and a rail whose rate drops to 200 Mbit and comes back;
#    bandwidth at 1 and 4 MiB only, so a run stays short on a shared
#    machine.
#  - --drivers is issue 27's run: ch4:madrail over each of its drivers
#    that can use the cluster's links (tcp, ofi over libfabric's
#    tcp;ofi_rxm, ucx over UCX's tcp transport, and one ofi rail with one
#    ucx rail) as systems of their own beside the peers, and the fault
#    cases measured as an MPI stream sees them: the stall (the longest gap
#    between completed receives, bench/mpi/mpi_stream.c) and the rate
#    after it, for a link going down and for a black hole.
# (commas inside arrays are option values: --sizes 8,1k)
# shellcheck disable=SC2054,SC1091
set -uo pipefail

prog=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Set by `make install` (the installed script has the path; the source tree
# uses its own files).
INSTALLED_DATADIR='@pkgdatadir@'

usage() {
    cat <<EOF
Usage: $prog [--quick | --quickstart | --adapt | --drivers] [options]

Benchmarks MPI over the rails of a namespace cluster (2 nodes, data rails
shaped by tc tbf; test/cluster/cluster.sh, docs/cluster.md), in one run:
  latency (8 B, 1 KiB; osu_latency), bandwidth and bidirectional bandwidth
  (64 KiB, 1 MiB, 4 MiB, window 64; osu_bw, osu_bibw), message rate with
  2 ranks a node (8 B, 64 KiB; osu_mbw_mr), and iperf3 on every rail
for ch4:madrail (our MPICH) over 1, 2 and 3 rails, Debian's MPICH ch4:ucx
(UCX_NET_DEVICES = the rails, UCX_MAX_EAGER_RAILS = UCX_MAX_RNDV_RAILS =
their number, UCX_TLS=tcp,self) and Debian's Open MPI (ob1, tcp BTL with
btl_tcp_if_include = the rails), each with the benchmarks built by its own
mpicc.  Cases:
  equal       3 rails of 1 Gbit (1, 2, 3 of them used)
  unequal     2 rails: 1 Gbit + 300 Mbit
  ratechange  2 rails of 1 Gbit; during a long 1 MiB stream rail1 drops to
              300 Mbit (--adapt: 200 Mbit) and comes back (throughput every
              100 ms)
  adaptequal  (--adapt) 2 rails of 1 Gbit: ch4:madrail as it is and with
              MADRAIL_ADAPT=0, 8 B latency and bandwidth
  unequal100  (--adapt) 2 rails: 1 Gbit + 100 Mbit
  three       (--adapt) 3 rails: 1 Gbit + 1 Gbit + 300 Mbit
In the unequal cases Open MPI also runs with the rails' rates set by hand
(btl_tcp_bandwidth_railN, the column "Open MPI, hand-set weights").
  linkdown    2 rails of 1 Gbit; during a long 4 MiB stream (mpi_stream,
              8 in flight) node1's rail1 link goes down: completes, error
              or hang (time limit); the stall (longest gap between
              completed receives) and the rate after it
  blackhole   the same with rail1 black-holed on both nodes (nftables
              drop of everything on it; the link stays up)
Rounds are interleaved (every system once per round); tables give medians.

Options:
  --quick          development run: 1 round, fewer sizes and iterations,
                   the peers on 2 rails only, shorter fault cases (about
                   4 minutes; the full run: 3 rounds, about 50 minutes on
                   a busy 2-core machine)
  --adapt          rails that adapt (issue 11): cases adaptequal, unequal,
                   unequal100, three, ratechange (1 Gbit -> 200 Mbit ->
                   1 Gbit); bandwidth 1 MiB and 4 MiB, window 32; 3 rounds,
                   about 15 minutes; --update-docs writes the adaptation
                   section of docs/performance.md
  --drivers        ch4:madrail's drivers (issue 27): systems madrail (tcp
                   rails), madrail-ofi (ofi:tcp;ofi_rxm), madrail-ucx (ucx
                   over UCX's tcp transport), madrail-mix (ofi rail0, ucx
                   rail1) beside MPICH ch4:ucx and Open MPI; cases equal
                   (1 and 2 rails; latency 8 B, bandwidth 1 and 4 MiB,
                   bidirectional), unequal, linkdown, blackhole; 3 rounds,
                   about 40 minutes; --update-docs writes the drivers
                   section of docs/performance.md
  --quickstart     the table of ./quickstart.sh: ch4:madrail only, latency
                   8 B and bandwidth 1 MiB over one rail, two equal rails and
                   two unequal rails (1 Gbit + 300 Mbit), each beside its
                   physical limit (iperf3 per rail) and the ratio (under
                   a minute)
  --rounds N       rounds (default 3; --quick: 1)
  --systems LIST   of madrail,madrail-ofi,madrail-ucx,madrail-mix,mpich,openmpi
                   (default: madrail,mpich,openmpi, those installed;
                   --drivers: all six)
  --cases LIST     of equal,unequal,ratechange,linkdown,blackhole (default:
                   equal,unequal,ratechange,linkdown)
  --out DIR        results directory (default ./cluster-bench-<date>)
  --update-docs    afterwards rewrite the cluster section of
                   docs/performance.md and its plots in docs/img/ (source
                   tree only)
  --report DIR     no run: rebuild the table and plots of DIR from its CSV
                   files (with --update-docs: and the docs)
  --docs DIR       the docs directory --update-docs writes (default: docs/
                   of the source tree)
  --prefix P       cluster namespace prefix (default mdrbench-)
  --timeout SEC    time limit of one benchmark job (default by benchmark)
  -h, --help       this text

Results in DIR: results.csv (every value of every round), jobs.csv (every
job: status ok / finalize-hang / hang / error, exit code, seconds),
series.csv (throughput every 100 ms in the fault cases), events.csv,
results.md (the tables), cluster-*.png (plots), versions.txt, raw/ (every
job's output and command line).

Environment:
  MDR_MPICH_DIR    our MPICH with ch4:madrail (default: _install/mpich of the
                   source tree, or <prefix>/mpich when installed)
  MDR_LIBDIR       the libmadrail to measure (default: _install/lib of the
                   source tree, or <prefix>/lib, when there; else the copy
                   next to that libmpi)
  MPICC_MPICH, MPIEXEC_MPICH     Debian's MPICH (mpicc.mpich, mpiexec.mpich)
  MPICC_OPENMPI, MPIRUN_OPENMPI  Debian's Open MPI (mpicc.openmpi, mpirun.openmpi)
Needs root and network namespaces (else: SKIP, exit 77), iperf3 and, for
the plots, gnuplot (Debian: iperf3 gnuplot-nox).
EOF
}

# ------------------------------------------------------------- options
ORIG_ARGS="$*"
PROFILE=full
ROUNDS=
SYSTEMS=
CASES=
OUT=
UPDATE_DOCS=no
DOCS_DIR=
REPORT_ONLY=
PREFIX=mdrbench-
JOB_TIMEOUT=
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --quick) PROFILE=quick ;;
        --quickstart) PROFILE=quickstart ;;
        --adapt) PROFILE=adapt ;;
        --drivers) PROFILE=drivers ;;
        --rounds) ROUNDS=${2:-}; shift ;;
        --systems) SYSTEMS=${2:-}; shift ;;
        --cases) CASES=${2:-}; shift ;;
        --out) OUT=${2:-}; shift ;;
        --update-docs) UPDATE_DOCS=yes ;;
        --docs) DOCS_DIR=${2:-}; shift ;;
        --report) REPORT_ONLY=${2:-}; shift ;;
        --prefix) PREFIX=${2:-}; shift ;;
        --timeout) JOB_TIMEOUT=${2:-}; shift ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -z "$ROUNDS" ] || [[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]] ||
    { echo "$prog: --rounds must be 1..99" >&2; exit 2; }
[ -z "$JOB_TIMEOUT" ] || [[ "$JOB_TIMEOUT" =~ ^[1-9][0-9]*$ ]] ||
    { echo "$prog: --timeout must be a number of seconds" >&2; exit 2; }
for s in ${SYSTEMS//,/ }; do
    case $s in madrail|madrail-ofi|madrail-ucx|madrail-mix|mpich|openmpi) ;;
        *) echo "$prog: --systems: unknown system '$s' (madrail, madrail-ofi, madrail-ucx, madrail-mix, mpich, openmpi)" >&2; exit 2 ;;
    esac
done
for c in ${CASES//,/ }; do
    case $c in equal|unequal|ratechange|linkdown|blackhole|adaptequal|unequal100|three) ;;
        *) echo "$prog: --cases: unknown case '$c' (equal, unequal, ratechange, linkdown, blackhole, adaptequal, unequal100, three)" >&2; exit 2 ;;
    esac
done

# ------------------------------------------------------------- where things are
SRCTREE=
if [ -f "$HERE/../../test/cluster/cluster.sh" ] && [ -f "$HERE/../mpi/mpi_bench.c" ]; then
    SRCTREE=$(cd "$HERE/../.." && pwd)
    CLUSTER_SH=$SRCTREE/test/cluster/cluster.sh
    MPI_SRC=$SRCTREE/bench/mpi
    DEFAULT_MPICH=$SRCTREE/_install/mpich
    DEFAULT_LIBDIR=$SRCTREE/_install/lib
elif [ -f "$INSTALLED_DATADIR/cluster/cluster.sh" ]; then
    CLUSTER_SH=$INSTALLED_DATADIR/cluster/cluster.sh
    MPI_SRC=$INSTALLED_DATADIR/mpi
    DEFAULT_MPICH=$(cd "$HERE/.." && pwd)/mpich
    DEFAULT_LIBDIR=$(cd "$HERE/.." && pwd)/lib
else
    echo "$prog: cannot find cluster.sh and the benchmark sources (not in a source tree, not installed)" >&2
    exit 1
fi
MPICH_DIR=${MDR_MPICH_DIR:-$DEFAULT_MPICH}
# The libmadrail measured: the one installed with this checkout (or
# $MDR_LIBDIR) ahead of the copy the cached MPICH carries, which may be
# older -- as the tests do.
MDR_LIBDIR=${MDR_LIBDIR:-}
if [ -z "$MDR_LIBDIR" ] && compgen -G "$DEFAULT_LIBDIR/libmadrail.so*" >/dev/null; then
    MDR_LIBDIR=$DEFAULT_LIBDIR
fi

T_START=$(date +%s)
RUN_JOB_KEY=${MADRAIL_JOB_KEY:-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')}
say() { printf '[bench %4ds] %s\n' $(($(date +%s) - T_START)) "$*"; }
warn() { printf '[bench] warning: %s\n' "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }
skip() { echo "SKIP: $prog: $*"; exit 77; }

if [ "$UPDATE_DOCS" = yes ]; then
    [ -n "$DOCS_DIR" ] || DOCS_DIR=${SRCTREE:+$SRCTREE/docs}
    [ -n "$DOCS_DIR" ] && [ -f "$DOCS_DIR/performance.md" ] ||
        die "--update-docs: no performance.md in '${DOCS_DIR:-}' (run bench/cluster/run.sh in the source tree, or give --docs DIR)"
fi

# Medians, tables and plots: also used alone (--report).
. "$HERE/report.sh" 2>/dev/null || . "$INSTALLED_DATADIR/report.sh" ||
    die "cannot find report.sh next to $prog"

if [ -n "$REPORT_ONLY" ]; then
    [ -f "$REPORT_ONLY/results.csv" ] || die "$REPORT_ONLY/results.csv not found"
    OUT=$(cd "$REPORT_ONLY" && pwd)
    report_all "$OUT" || exit 1
    [ "$UPDATE_DOCS" = yes ] && { update_docs "$OUT" "$DOCS_DIR" || exit 1; }
    exit 0
fi
[ "$UPDATE_DOCS" = yes ] && [ "$PROFILE" = quickstart ] &&
    die "--update-docs goes with a --quick or full run, not --quickstart"

# ------------------------------------------------------------- profile
# Sizes, iterations and time limits: the same for every system.
case $PROFILE in
    full)
        : "${ROUNDS:=3}"
        : "${CASES:=equal,unequal,ratechange,linkdown}"
        LAT_ARGS=(--sizes 8,1k --iters 10000 --warmup 500)
        BW_ARGS=(--sizes 64k,1m,4m --window 64)           # 20/5 iterations, 2/1 warm-up
        MR_ARGS=(--sizes 8,64k --window 64)                # 100/20 iterations
        UNEQ_BENCHES="lat bw bibw"
        PEER_RAILS="1 2 3"
        IPERF_SECS=3
        STREAM_ITERS=40      # ratechange: 40 x 64 x 1 MiB = 2.7 GB (~11 s at 2 Gbit)
        RC_AT=(3 6)          # ratechange: rail1 300 Mbit at +3 s, 1 Gbit again at +6 s
        RC_LOW=300mbit
        LD_MSGS=768          # linkdown, blackhole: 768 x 4 MiB = 3.2 GB
        LD_AT=3              # linkdown: node1's rail1 down at +3 s
        LD_WAIT=40           # ... and the job has this long to end
        ;;
    drivers)
        : "${ROUNDS:=3}"
        : "${CASES:=equal,unequal,linkdown,blackhole}"
        : "${SYSTEMS:=madrail,madrail-ofi,madrail-ucx,madrail-mix,mpich,openmpi}"
        LAT_ARGS=(--sizes 8 --iters 5000 --warmup 500)
        BW_ARGS=(--sizes 1m,4m --window 64 --iters 5 --warmup 1)
        EQ_BENCHES="lat bw bibw"
        UNEQ_BENCHES="lat bw"
        PEER_RAILS="1 2"
        IPERF_SECS=2
        LD_MSGS=480          # 480 x 4 MiB = 2 GB: about 3 s before, 6 s after the fault
        LD_AT=3
        LD_WAIT=40
        ;;
    quick)
        : "${ROUNDS:=1}"
        : "${CASES:=equal,unequal,ratechange,linkdown}"
        LAT_ARGS=(--sizes 8 --iters 2000 --warmup 100)
        BW_ARGS=(--sizes 1m --window 64 --iters 3 --warmup 1)
        MR_ARGS=(--sizes 8 --window 64 --iters 50 --warmup 5)
        UNEQ_BENCHES="bw"
        PEER_RAILS="2"
        IPERF_SECS=1
        STREAM_ITERS=16
        RC_AT=(1.5 3)
        RC_LOW=300mbit
        LD_MSGS=256
        LD_AT=1.5
        LD_WAIT=15
        ;;
    adapt)
        : "${ROUNDS:=3}"
        : "${CASES:=adaptequal,unequal,unequal100,three,ratechange}"
        LAT_ARGS=(--sizes 8 --iters 2000 --warmup 200)
        # two warm-up iterations (64 messages): the weights settle in the
        # first 16-48 messages of a job, for every system the same
        BW_ARGS=(--sizes 1m,4m --window 32 --iters 3 --warmup 2)
        UNEQ_BENCHES="bw"
        PEER_RAILS="2"
        IPERF_SECS=2
        STREAM_ITERS=24      # ratechange: 24 x 64 x 1 MiB = 1.6 GB (~8 s)
        RC_AT=(2.5 5)
        RC_LOW=200mbit
        ;;
    quickstart)
        ROUNDS=1
        CASES=quickstart
        LAT_ARGS=(--sizes 8 --iters 1000 --warmup 100)
        BW_ARGS=(--sizes 1m --window 64 --iters 4 --warmup 1)
        IPERF_SECS=1
        SYSTEMS=madrail
        EQ_BENCHES="lat bw"
        ;;
esac
[ "$ROUNDS" -ge 1 ] 2>/dev/null || ROUNDS=1
: "${EQ_BENCHES:=lat bw bibw mr}"
: "${LD_MSGS:=480}" "${LD_AT:=3}" "${LD_WAIT:=40}"
FINALIZE_GRACE=10   # s a job may take to exit after "# end of measurements"

[ "$(id -u)" -eq 0 ] || skip "needs root to build the namespace cluster (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (Debian: iproute2)"

# ------------------------------------------------------------- systems
declare -A MPICC LAUNCHER SYS_SKIP
MPICC[madrail]=$MPICH_DIR/bin/mpicc
LAUNCHER[madrail]=$MPICH_DIR/bin/mpiexec
MPICC[mpich]=${MPICC_MPICH:-mpicc.mpich}
LAUNCHER[mpich]=${MPIEXEC_MPICH:-mpiexec.mpich}
MPICC[openmpi]=${MPICC_OPENMPI:-mpicc.openmpi}
LAUNCHER[openmpi]=${MPIRUN_OPENMPI:-mpirun.openmpi}
for s in madrail-ofi madrail-ucx madrail-mix; do
    MPICC[$s]=${MPICC[madrail]}
    LAUNCHER[$s]=${LAUNCHER[madrail]}
done
sys_label() {
    case $1 in
        madrail) echo "ch4:madrail" ;;
        madrail-ofi) echo "ch4:madrail ofi" ;;
        madrail-ucx) echo "ch4:madrail ucx" ;;
        madrail-mix) echo "ch4:madrail ofi+ucx" ;;
        mpich) echo "MPICH ch4:ucx" ;;
        openmpi) echo "Open MPI ob1/tcp" ;;
        *) echo "$1" ;;
    esac
}
# check_system SYS: 0 if its compiler and launcher are there (and ours is
# really ch4:madrail), else the reason in SYS_SKIP[SYS]
check_system() {
    local s=$1 cc=${MPICC[$1]} l=${LAUNCHER[$1]} dev
    command -v "$cc" >/dev/null 2>&1 || { SYS_SKIP[$s]="no $cc"; return 1; }
    command -v "$l" >/dev/null 2>&1 || { SYS_SKIP[$s]="no $l"; return 1; }
    case $s in madrail*)
        dev=$("$MPICH_DIR/bin/mpichversion" 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
        case $dev in *madrail*) ;; *) SYS_SKIP[$s]="$MPICH_DIR is '${dev:-not an MPICH}', not ch4:madrail (set MDR_MPICH_DIR)"; return 1 ;; esac
    esac
    return 0
}
# mdr_rails SYS K: MADRAIL_RAILS of system SYS over rails 0..K-1 (the rail
# sets of test/cluster/cl_common.sh)
mdr_rails() {
    local i l= r
    for i in $(seq 0 $(($2 - 1))); do
        case $1 in
            madrail-ofi) r="ofi:tcp;ofi_rxm:rail$i" ;;
            madrail-ucx) r=ucx:tcp:rail$i ;;
            madrail-mix) if [ $((i % 2)) -eq 0 ]; then r="ofi:tcp;ofi_rxm:rail$i"; else r=ucx:tcp:rail$i; fi ;;
            *) r=tcp:rail$i ;;
        esac
        l=${l:+$l,}$r
    done
    echo "$l"
}
ACTIVE=()
for s in $(echo "${SYSTEMS:-madrail,mpich,openmpi}" | tr , ' '); do
    if check_system "$s"; then ACTIVE+=("$s"); else warn "$(sys_label "$s") skipped: ${SYS_SKIP[$s]}"; fi
done
[ ${#ACTIVE[@]} -gt 0 ] || die "no MPI to benchmark (see the warnings above)"

# ------------------------------------------------------------- tools
command -v iperf3 >/dev/null 2>&1 || warn "no iperf3 (Debian: iperf3): the physical limits stay empty"
command -v timeout >/dev/null 2>&1 || die "needs timeout (coreutils)"
[[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}-$ ]] || die "bad --prefix '$PREFIX'"

# ------------------------------------------------------------- results dir
[ -n "$OUT" ] || OUT=$PWD/cluster-bench-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/raw" "$OUT/bin" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RES=$OUT/results.csv
JOBS=$OUT/jobs.csv
SERIES=$OUT/series.csv
EVENTS=$OUT/events.csv
echo "case,round,system,rails,bench,size,value,unit,status" >"$RES"
echo "case,round,system,rails,bench,status,rc,seconds,name" >"$JOBS"
echo "case,system,t,rail0,rail1,total" >"$SERIES"
echo "case,system,t,event" >"$EVENTS"

# ------------------------------------------------------------- the cluster
STATE_LOCK=/run/madrail-cluster/${PREFIX%-}.job.lock
cl() { bash "$CLUSTER_SH" --prefix "$PREFIX" "$@" 8>&-; }
SAMPLER=
cleanup() {
    local rc=$?
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
    cl down >/dev/null 2>&1
    exit $rc
}
# One user of this prefix at a time (another run waits), as run_job.sh does.
mkdir -p /run/madrail-cluster 2>/dev/null
if exec 8>"$STATE_LOCK" 2>/dev/null; then
    flock -w 600 8 || die "another run holds cluster prefix $PREFIX (use --prefix)"
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

NRAILS=0
# cluster_up K RATES: a fresh cluster of 2 nodes and K rails
cluster_up() {
    local out rc
    out=$(cl up --nodes 2 --rails "$1" --rate "$2" 2>&1)
    rc=$?
    echo "$out" >>"$OUT/raw/cluster.log"
    [ $rc -eq 77 ] && skip "$(printf '%s\n' "$out" | sed -n 's/^SKIP: [^:]*: //p' | head -n 1)"
    [ $rc -eq 0 ] || { printf '%s\n' "$out" | tail -n 5 >&2; die "cluster.sh up --rails $1 --rate $2 failed"; }
    eval "$(cl env)" || die "cluster.sh env failed"
    NRAILS=$1
    say "cluster up: 2 nodes, $1 rails ($2)"
}

# Kills every process left in the nodes (a hung job's ranks, daemons).
kill_nodes() {
    local ns pids t
    for t in TERM TERM TERM KILL; do
        pids=
        for ns in "${PREFIX}node0" "${PREFIX}node1"; do
            pids="$pids $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
        done
        [ -z "${pids// /}" ] && return 0
        # shellcheck disable=SC2086
        kill -$t $pids 2>/dev/null
        sleep 1
    done
}

rail_addr() { # NODE RAIL
    cl exec "$1" ip -4 -o addr show dev "rail$2" 2>/dev/null | awk '{ split($4, a, "/"); print a[1] }'
}
ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# ------------------------------------------------------------- iperf3
# iperf3 RAIL -> MB/s (1e6 B/s) TCP payload node0 -> node1 on that rail,
# the receiver's count after a 1 s warm-up (the tbf burst), or empty.
iperf3_rail() {
    local r=$1 dst port spid out
    command -v iperf3 >/dev/null 2>&1 || return 0
    dst=$(rail_addr 1 "$r")
    [ -n "$dst" ] || return 0
    port=$((5201 + r))
    cl exec 1 iperf3 -s -1 -B "$dst" -p "$port" >/dev/null 2>&1 &
    spid=$!
    sleep 0.4
    out=$(cl exec 0 timeout $((IPERF_SECS + 15)) iperf3 -c "$dst" -p "$port" -t "$IPERF_SECS" -O 1 -J 2>&1)
    echo "$out" >"$OUT/raw/iperf3.rail$r.$(date +%s%N).json"
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    printf '%s\n' "$out" | awk -F: '/"sum_received"/ { f = 1 }
        f && /"bits_per_second"/ { gsub(/[^0-9.eE+-]/, "", $2); printf "%.2f\n", $2 / 8e6; exit }'
}
# links CASE ROUND RAILS...: iperf3 on each rail, into the results
links() {
    local c=$1 rd=$2 r v
    shift 2
    for r in "$@"; do
        v=$(iperf3_rail "$r")
        if [ -n "$v" ]; then
            echo "$c,$rd,iperf3,rail$r,link,0,$v,MB/s,ok" >>"$RES"
            say "  iperf3 rail$r: $v MB/s"
        else
            echo "$c,$rd,iperf3,rail$r,link,0,,MB/s,error" >>"$RES"
            warn "iperf3 on rail$r gave no result"
        fi
    done
}

# ------------------------------------------------------------- building
build_all() {
    local s b log
    for s in "${ACTIVE[@]}"; do
        mkdir -p "$OUT/bin/$s"
        for b in mpi_lat mpi_bw mpi_bibw mpi_mbw_mr mpi_stream; do
            log=$OUT/bin/$s/$b.build.log
            if ! "${MPICC[$s]}" -std=gnu11 -O2 -Wall -Wextra -o "$OUT/bin/$s/$b" \
                    "$MPI_SRC/$b.c" $([ $b = mpi_stream ] || echo "$MPI_SRC/mpi_bench.c") >"$log" 2>&1; then
                sed 's/^/    /' "$log" >&2
                die "building $b with ${MPICC[$s]} failed"
            fi
        done
    done
    say "built mpi_lat, mpi_bw, mpi_bibw, mpi_mbw_mr, mpi_stream with: $(for s in "${ACTIVE[@]}"; do printf '%s ' "${MPICC[$s]}"; done)"
}

# ------------------------------------------------------------- versions
write_versions() {
    local f=$OUT/versions.txt v
    {
        echo "date: $(date '+%F %T %z')"
        echo "host: $(uname -srm); $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1))"
        echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
        if [ -n "$SRCTREE" ] && command -v git >/dev/null 2>&1; then
            v=$(git -C "$SRCTREE" describe --always --dirty 2>/dev/null || true)
            [ -n "$v" ] && echo "madrail: commit $v"
        fi
        for s in "${ACTIVE[@]}"; do
            case $s in
                madrail)
                    echo "ch4:madrail: MPICH $("$MPICH_DIR/bin/mpichversion" 2>/dev/null |
                        sed -n 's/^MPICH Version:[[:space:]]*//p') ($MPICH_DIR), libmadrail from ${MDR_LIBDIR:-$MPICH_DIR/lib}" ;;
                madrail-*)
                    echo "$(sys_label "$s"): the same MPICH and libmadrail, MADRAIL_RAILS=$(mdr_rails "$s" 2) (2 rails);" \
                         "libfabric $(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null || echo '?')," \
                         "UCX $(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || echo '?')" ;;
                mpich)
                    echo "MPICH ch4:ucx: Debian mpich $(dpkg-query -W -f='${Version}' mpich 2>/dev/null || echo '?')," \
                         "UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -n 1)" \
                         "(libucx0 $(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || echo '?'))" ;;
                openmpi)
                    echo "Open MPI: $("${LAUNCHER[openmpi]}" --version 2>/dev/null | head -n 1 | sed 's/^mpirun[^0-9]*//')" \
                         "(Debian openmpi-bin $(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null || echo '?'))" ;;
            esac
        done
        echo "iperf3: $(iperf3 --version 2>/dev/null | head -n 1)"
        echo "settings: ch4:madrail MADRAIL_RAILS=tcp:rail0,...,tcp:rail<k-1>; MPICH ch4:ucx UCX_NET_DEVICES=rail0,...,rail<k-1> UCX_TLS=tcp,self UCX_MAX_EAGER_RAILS=UCX_MAX_RNDV_RAILS=k; Open MPI --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include rail0,...,rail<k-1> --bind-to none; no process binding, one rank a node (two for message rate); hydra and Open MPI launch over the unshaped mgmt network"
        echo "profile: $PROFILE, rounds $ROUNDS, cases $CASES"
        echo "latency: mpi_lat ${LAT_ARGS[*]}"
        echo "bandwidth: mpi_bw / mpi_bibw ${BW_ARGS[*]}"
        case ",$CASES," in *,linkdown,*|*,blackhole,*) echo "faults: mpi_stream --size 4m --window 8 --iters $LD_MSGS --validate, rail1 fails at +$LD_AT s" ;; esac
        case " $EQ_BENCHES " in *" mr "*) echo "message rate: mpi_mbw_mr ${MR_ARGS[*]}, 2 nodes x 2 ranks" ;; esac
        echo "command: $prog $ORIG_ARGS"
    } >"$f"
}

# ------------------------------------------------------------- one job
# launch_cmd SYS K NP PPN [VAR=VALUE...]: the command line (array LAUNCH)
# that starts NP ranks, PPN a node, of a program on the first K rails.
launch_cmd() {
    local s=$1 k=$2 np=$3 ppn=$4 devs mdr e
    shift 4
    devs=$(seq -f 'rail%g' 0 $((k - 1)) | paste -sd, -)
    mdr=$(mdr_rails "$s" "$k")
    case $s in
        madrail*)
            # the job key: one for the run, given to every process, so an
            # MPICH whose netmod predates job keys (it does not hand rank
            # 0's key around) still connects with a newer libmadrail
            LAUNCH=(env "MADRAIL_RAILS=$mdr" ${MDR_LIBDIR:+"LD_LIBRARY_PATH=$MDR_LIBDIR"}
                    "MADRAIL_JOB_KEY=$RUN_JOB_KEY" "$@"
                    "${LAUNCHER[$s]}" -f "$MDR_CLUSTER_HOSTS" -launcher ssh
                    -launcher-exec "$MDR_CLUSTER_LAUNCHER" -iface mgmt -n "$np" -ppn "$ppn") ;;
        mpich)
            # tcp only: UCX's shared-memory transports reach across the
            # namespaces of one machine (docs/cluster.md)
            LAUNCH=(env "UCX_NET_DEVICES=$devs" UCX_TLS=tcp,self "UCX_MAX_EAGER_RAILS=$k"
                    "UCX_MAX_RNDV_RAILS=$k" "$@"
                    "${LAUNCHER[mpich]}" -f "$MDR_CLUSTER_HOSTS" -launcher ssh
                    -launcher-exec "$MDR_CLUSTER_LAUNCHER" -iface mgmt -n "$np" -ppn "$ppn") ;;
        openmpi)
            LAUNCH=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@"
                    "${LAUNCHER[openmpi]}" --hostfile "$MDR_CLUSTER_OMPI_HOSTFILE"
                    --mca plm_rsh_agent "$MDR_CLUSTER_LAUNCHER" --mca oob_tcp_if_include mgmt
                    --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include "$devs"
                    --bind-to none -np "$np" --map-by "ppr:$ppn:node")
            for e in "$@"; do LAUNCH+=(-x "${e%%=*}"); done ;;
    esac
}

JOB_PID=
JOB_NAME=
JOB_T0=
# job_start NAME SYS K NP PPN PROGRAM ARGS... (env: JOB_ENV array): starts
# the job in node0, its output in raw/NAME.out
JOB_ENV=()
job_start() {
    local name=$1 s=$2 k=$3 np=$4 ppn=$5
    shift 5
    launch_cmd "$s" "$k" "$np" "$ppn" ${JOB_ENV[@]+"${JOB_ENV[@]}"}
    JOB_NAME=$name
    # (the job key stays out of the files)
    printf '%q ' "${LAUNCH[@]}" "$@" | sed 's/MADRAIL_JOB_KEY=[0-9a-f]*/MADRAIL_JOB_KEY=<the run'"'"'s key>/' >"$OUT/raw/$name.cmd"
    echo >>"$OUT/raw/$name.cmd"
    # its own process group (setsid), so a hung launcher goes with its children
    setsid bash "$CLUSTER_SH" --prefix "$PREFIX" exec 0 "${LAUNCH[@]}" "$@" \
        >"$OUT/raw/$name.out" 2>&1 </dev/null 8>&- &
    JOB_PID=$!
    JOB_T0=$(ms)
}
# job_wait LIMIT: waits for the job (LIMIT s from now); sets JOB_STATUS
# (ok, finalize-hang, hang, error), JOB_RC, JOB_SECS
job_wait() {
    local limit_ms=$(( $(ms) + $1 * 1000 )) out=$OUT/raw/$JOB_NAME.out end_ms="" now
    JOB_STATUS=
    while kill -0 "$JOB_PID" 2>/dev/null; do
        sleep 0.25
        now=$(ms)
        if [ -z "$end_ms" ] && grep -q '^# end of measurements' "$out" 2>/dev/null; then
            end_ms=$now
        fi
        if [ -n "$end_ms" ] && [ $((now - end_ms)) -gt $((FINALIZE_GRACE * 1000)) ]; then
            JOB_STATUS=finalize-hang
            break
        fi
        if [ "$now" -gt "$limit_ms" ]; then
            JOB_STATUS=hang
            break
        fi
    done
    if [ -n "$JOB_STATUS" ]; then
        kill -TERM -- -"$JOB_PID" 2>/dev/null
        kill_nodes
        kill -KILL -- -"$JOB_PID" 2>/dev/null
    fi
    wait "$JOB_PID" 2>/dev/null
    JOB_RC=$?
    JOB_SECS=$(awk -v a="$JOB_T0" -v b="$(ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
    if [ -z "$JOB_STATUS" ]; then
        if [ "$JOB_RC" -eq 0 ] && grep -q '^# end of measurements' "$out"; then
            JOB_STATUS=ok
        else
            JOB_STATUS=error
        fi
    fi
    case $JOB_STATUS in
        finalize-hang) echo "[bench] $JOB_NAME: results complete, then no exit within ${FINALIZE_GRACE} s (MPI_Finalize): killed" >>"$out" ;;
        hang) echo "[bench] $JOB_NAME: time limit reached: killed" >>"$out" ;;
    esac
    # nothing of this job may disturb the next
    [ "$JOB_STATUS" = ok ] || kill_nodes
}

# limit_for BENCH: seconds a job may take (the first job of a system starts
# its daemons; a finalize hang is cut earlier, by the grace time)
limit_for() {
    [ -n "$JOB_TIMEOUT" ] && { echo "$JOB_TIMEOUT"; return; }
    case $PROFILE:$1 in
        full:bw|full:bibw) echo 240 ;;
        full:*) echo 90 ;;
        *) echo 60 ;;
    esac
}

# bench CASE ROUND SYS K BENCH: one benchmark job, its values into the CSV
bench() {
    local c=$1 rd=$2 s=$3 k=$4 b=$5 bin np=2 ppn=1 args unit name v st
    case $b in
        lat) bin=mpi_lat; args=("${LAT_ARGS[@]}"); unit=us ;;
        bw) bin=mpi_bw; args=("${BW_ARGS[@]}"); unit=MB/s ;;
        bibw) bin=mpi_bibw; args=("${BW_ARGS[@]}"); unit=MB/s ;;
        mr) bin=mpi_mbw_mr; args=("${MR_ARGS[@]}"); unit=MB/s; np=4; ppn=2 ;;
    esac
    name=$c.r$rd.$s.$k.$b${JOB_TAG:+.$JOB_TAG}
    job_start "$name" "$s" "$k" "$np" "$ppn" "$OUT/bin/$s/$bin" "${args[@]}"
    job_wait "$(limit_for "$b")"
    echo "$c,$rd,$s${JOB_TAG:++$JOB_TAG},$k,$b,$JOB_STATUS,$JOB_RC,$JOB_SECS,$name" >>"$JOBS"
    # rows "size value [value2]" of rank 0
    v=$(awk '/^[0-9]+[ \t]+[0-9.]+/ { printf "%s%s:%s:%s", sep, $1, $2, $3; sep = " " }' "$OUT/raw/$name.out")
    st=$JOB_STATUS
    local row size val val2
    for row in $v; do
        IFS=: read -r size val val2 <<<"$row"
        echo "$c,$rd,$s${JOB_TAG:++$JOB_TAG},$k,$b,$size,$val,$unit,$st" >>"$RES"
        [ "$b" = mr ] && echo "$c,$rd,$s${JOB_TAG:++$JOB_TAG},$k,msgrate,$size,$val2,msg/s,$st" >>"$RES"
    done
    [ -z "$v" ] && echo "$c,$rd,$s${JOB_TAG:++$JOB_TAG},$k,$b,,,${unit},$st" >>"$RES"
    say "  $(printf '%-16s %d rail(s) %-5s' "$(sys_label "$s")${JOB_TAG:+ +$JOB_TAG}" "$k" "$b") $JOB_STATUS ${JOB_SECS}s: $(echo "$v" | tr ':' ' ' | sed 's/  */ /g')"
}

# ------------------------------------------------------------- throughput over time
# sampler_start FILE: node0's rails' tx byte counters every 100 ms, lines
# "epoch_seconds bytes_rail0 bytes_rail1 ..."
sampler_start() {
    ip netns exec "${PREFIX}node0" bash -c '
        rails=$(seq -f "rail%g" 0 $(($1 - 1)))
        while :; do
            l=$EPOCHREALTIME
            for d in $rails; do read -r v <"/sys/class/net/$d/statistics/tx_bytes"; l="$l $v"; done
            echo "$l"
            sleep 0.1
        done' sampler "$NRAILS" >"$1" 2>/dev/null 8>&- &
    SAMPLER=$!
}
sampler_stop() {
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null
    SAMPLER=
}
# traffic_start FILE LIMIT: waits until node0's rails sent 4 MB more than
# at the first sample; prints the epoch time of that sample (empty: never)
traffic_start() {
    local f=$1 deadline=$(( $(ms) + $2 * 1000 )) t
    while [ "$(ms)" -lt "$deadline" ]; do
        t=$(awk 'NR == 1 { b = 0; for (i = 2; i <= NF; i++) b += $i; next }
                 { s = 0; for (i = 2; i <= NF; i++) s += $i; if (s - b > 4e6) { print $1; exit } }' "$f" 2>/dev/null)
        [ -n "$t" ] && { echo "$t"; return 0; }
        kill -0 "$JOB_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# series CASE SYS FILE T0: the samples as MB/s per rail since T0, into series.csv
series() {
    awk -v c="$1" -v s="$2" -v t0="$4" '
        NR > 1 && $1 > pt {
            dt = $1 - pt; tot = 0; line = ""
            for (i = 2; i <= 3; i++) {
                r = (i <= NF) ? ($i - p[i]) / dt / 1e6 : 0
                tot += r; line = line sprintf(",%.2f", r)
            }
            printf "%s,%s,%.2f%s,%.2f\n", c, s, ($1 + pt) / 2 - t0, line, tot
        }
        { pt = $1; for (i = 2; i <= NF; i++) p[i] = $i }' "$3" >>"$SERIES"
}
event() { # CASE SYS T0 TEXT: an event at now, relative to T0
    echo "$1,$2,$(awk -v a="$3" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'),$4" >>"$EVENTS"
}
sleep_until() { # T0 SECONDS: sleep until T0 + SECONDS (epoch)
    local d
    d=$(awk -v a="$1" -v s="$2" -v n="$EPOCHREALTIME" 'BEGIN { d = a + s - n; if (d > 0) printf "%.2f", d }')
    [ -n "$d" ] && sleep "$d"
}

# ------------------------------------------------------------- the cases
case_equal() {
    local rd b k s sets
    cluster_up 3 1gbit
    for rd in $(seq 1 "$ROUNDS"); do
        say "equal rails, round $rd of $ROUNDS"
        links equal "$rd" 0 1 2
        for b in $EQ_BENCHES; do
            for k in 1 2 3; do
                for s in "${ACTIVE[@]}"; do
                    sets="1 2 3"
                    [ "$s" = madrail ] || sets=$PEER_RAILS
                    [ "$s" = madrail-mix ] && sets="2"   # one rail of each driver
                    case " $sets " in *" $k "*) ;; *) continue ;; esac
                    bench equal "$rd" "$s" "$k" "$b"
                done
            done
        done
    done
}

# case_uneq CASE RATES MBITS: rails of different rates (tc units, and the
# same in Mbit/s: what Open MPI is told by hand in its weighted run)
case_uneq() {
    local c=$1 rates=$2 mbits=$3 rd b s k r w
    k=$(echo "$rates" | tr , '\n' | wc -l)
    cluster_up "$k" "$rates"
    w=()
    r=0
    for b in ${mbits//,/ }; do w+=("OMPI_MCA_btl_tcp_bandwidth_rail$r=$b"); r=$((r + 1)); done
    for rd in $(seq 1 "$ROUNDS"); do
        say "unequal rails ($rates), round $rd of $ROUNDS"
        links "$c" "$rd" $(seq 0 $((k - 1)))
        for b in $UNEQ_BENCHES; do
            for s in "${ACTIVE[@]}"; do
                bench "$c" "$rd" "$s" "$k" "$b"
                if [ "$s" = openmpi ]; then
                    JOB_ENV=("${w[@]}")
                    JOB_TAG=w bench "$c" "$rd" "$s" "$k" "$b"
                    JOB_ENV=()
                fi
            done
        done
    done
}
case_unequal() { case_uneq unequal 1gbit,300mbit 1000,300; }
case_unequal100() { case_uneq unequal100 1gbit,100mbit 1000,100; }
case_three() { case_uneq three 1gbit,1gbit,300mbit 1000,1000,300; }

# equal rails, ch4:madrail with and without adaptation (what measuring
# and acknowledged tcp puts cost where there is nothing to adapt to)
case_adaptequal() {
    local rd b
    cluster_up 2 1gbit
    for rd in $(seq 1 "$ROUNDS"); do
        say "equal rails (2 x 1 Gbit), adaptation on and off, round $rd of $ROUNDS"
        links adaptequal "$rd" 0 1
        for b in lat bw; do
            case " ${ACTIVE[*]} " in *" madrail "*) ;; *) continue ;; esac
            bench adaptequal "$rd" madrail 2 "$b"
            JOB_ENV=(MADRAIL_ADAPT=0)
            JOB_TAG=static bench adaptequal "$rd" madrail 2 "$b"
            JOB_ENV=()
        done
    done
}

# stream CASE SYS ITERS SIZE: starts a long mpi_bw run of one size over 2 rails
stream_start() {
    job_start "$1.$2" "$2" 2 2 1 "$OUT/bin/$2/mpi_bw" --sizes "$4" --window 64 --iters "$3" --warmup 0
}
stream_end() { # CASE SYS LIMIT
    job_wait "$3"
    echo "$1,1,$2,2,stream,$JOB_STATUS,$JOB_RC,$JOB_SECS,$1.$2" >>"$JOBS"
    local v
    v=$(awk '/^[0-9]+[ \t]+[0-9.]+/ { print $2 }' "$OUT/raw/$1.$2.out" | tail -n 1)
    echo "$1,1,$2,2,stream,$4,$v,MB/s,$JOB_STATUS" >>"$RES"
}

case_ratechange() {
    local s t0 f
    cluster_up 2 1gbit
    say "rate change: limits at 1 Gbit and at $RC_LOW"
    links ratechange 1 0 1
    cl rate 1 "$RC_LOW" >/dev/null
    local v
    v=$(iperf3_rail 1)
    echo "ratechange,1,iperf3,rail1@$RC_LOW,link,0,$v,MB/s,$([ -n "$v" ] && echo ok || echo error)" >>"$RES"
    say "  iperf3 rail1 at $RC_LOW: ${v:-?} MB/s"
    cl rate 1 1gbit >/dev/null
    for s in "${ACTIVE[@]}"; do
        say "rate change: $(sys_label "$s"): 1 MiB stream, rail1 $RC_LOW at +${RC_AT[0]} s, 1 Gbit at +${RC_AT[1]} s"
        f=$OUT/raw/ratechange.$s.samples
        sampler_start "$f"
        stream_start ratechange "$s" "$STREAM_ITERS" 1m
        if t0=$(traffic_start "$f" 60); then
            echo "ratechange,$s,0.00,traffic" >>"$EVENTS"
            sleep_until "$t0" "${RC_AT[0]}"
            cl rate 1 "$RC_LOW" >/dev/null
            event ratechange "$s" "$t0" "rail1 $RC_LOW"
            sleep_until "$t0" "${RC_AT[1]}"
            cl rate 1 1gbit >/dev/null
            event ratechange "$s" "$t0" "rail1 1gbit"
        else
            warn "$s: no traffic seen on the rails"
            t0=$EPOCHREALTIME
        fi
        stream_end ratechange "$s" 120 1048576
        event ratechange "$s" "$t0" "end $JOB_STATUS"
        sampler_stop
        series ratechange "$s" "$f" "$t0"
        cl rate 1 1gbit >/dev/null
        say "  $JOB_STATUS after ${JOB_SECS}s"
    done
}

# case_fault CASE: for each system on a fresh 2-rail cluster, a 4 MiB
# stream (mpi_stream, 8 in flight, byte-checked) during which rail1 fails
# at +LD_AT s: linkdown, node1's rail1 link set down; blackhole, rail1
# black-holed on both nodes (nftables drop, the link stays up).  Recorded:
# the outcome, the stall and the rate after it (mpi_stream's figures), and
# node0's rails every 100 ms.
case_fault() {
    local c=$1 s t0 f first what v st
    first=yes
    case $c in
        linkdown) what="node1's rail1 down" ;;
        blackhole) what="rail1 black-holed" ;;
    esac
    for s in "${ACTIVE[@]}"; do
        cluster_up 2 1gbit                   # a fresh cluster for each system
        [ $first = yes ] && links "$c" 1 0 1
        first=no
        say "$c: $(sys_label "$s"): 4 MiB stream, $what at +$LD_AT s, ${LD_WAIT} s to end"
        f=$OUT/raw/$c.$s.samples
        sampler_start "$f"
        job_start "$c.$s" "$s" 2 2 1 "$OUT/bin/$s/mpi_stream" --size 4m --window 8 --iters "$LD_MSGS" --validate
        if t0=$(traffic_start "$f" 60); then
            echo "$c,$s,0.00,traffic" >>"$EVENTS"
            sleep_until "$t0" "$LD_AT"
            case $c in
                linkdown) cl link-down 1 1 >/dev/null ;;
                blackhole) cl blackhole 1 >/dev/null ;;
            esac
            event "$c" "$s" "$t0" "rail1 fault: $what"
        else
            warn "$s: no traffic seen on the rails"
            t0=$EPOCHREALTIME
        fi
        job_wait "$LD_WAIT"
        [ "$c" = blackhole ] && cl unblackhole 1 >/dev/null 2>&1
        echo "$c,1,$s,2,stream,$JOB_STATUS,$JOB_RC,$JOB_SECS,$c.$s" >>"$JOBS"
        st=$JOB_STATUS
        v=$(awk '/^[0-9]+[ \t]+[0-9.]+/ { print $2 }' "$OUT/raw/$c.$s.out" | tail -n 1)
        echo "$c,1,$s,2,stream,4194304,$v,MB/s,$st" >>"$RES"
        v=$(sed -n 's/^# stall_ms \([0-9.]*\).*/\1/p' "$OUT/raw/$c.$s.out" | tail -n 1)
        echo "$c,1,$s,2,stall,4194304,$v,ms,$st" >>"$RES"
        v=$(sed -n 's/^# after_stall_MBps \([0-9.]*\).*/\1/p' "$OUT/raw/$c.$s.out" | tail -n 1)
        echo "$c,1,$s,2,afterstall,4194304,$v,MB/s,$st" >>"$RES"
        v=$(sed -n 's/^# bad_messages \([0-9]*\).*/\1/p' "$OUT/raw/$c.$s.out" | tail -n 1)
        echo "$c,1,$s,2,badmsgs,4194304,$v,messages,$st" >>"$RES"
        event "$c" "$s" "$t0" "end $JOB_STATUS rc $JOB_RC"
        sampler_stop
        series "$c" "$s" "$f" "$t0"
        grep -v '^\[bench\]' "$OUT/raw/$c.$s.out" | grep -m 3 -iE 'error|abort|fail|fatal|unreachable|timed out|hang' |
            head -n 3 >"$OUT/raw/$c.$s.errors"
        say "  $JOB_STATUS (exit $JOB_RC) after ${JOB_SECS}s: $(grep -E '^# (stall_ms|after_stall|bad_messages)' "$OUT/raw/$c.$s.out" | tr '\n' ' ')"
    done
}

case_quickstart() {
    local k
    cluster_up 2 1gbit
    say "one rail and two equal rails of 1 Gbit"
    links quickstart 1 0 1
    for k in 1 2; do bench quickstart 1 madrail "$k" lat; done
    for k in 1 2; do bench quickstart 1 madrail "$k" bw; done
    say "two unequal rails: rail1 at 300 Mbit"
    cl rate 1 300mbit >/dev/null
    local v
    v=$(iperf3_rail 1)
    echo "quickstart,1,iperf3,rail1@300mbit,link,0,$v,MB/s,$([ -n "$v" ] && echo ok || echo error)" >>"$RES"
    say "  iperf3 rail1 at 300 Mbit: ${v:-?} MB/s"
    JOB_TAG=uneq bench quickstart 1 madrail 2 lat
    JOB_TAG=uneq bench quickstart 1 madrail 2 bw
    JOB_ENV=(MADRAIL_RAIL_WEIGHTS=10,3)
    JOB_TAG=w10.3 bench quickstart 1 madrail 2 bw
    JOB_ENV=()
}

# ------------------------------------------------------------- main
say "results in $OUT"
build_all
write_versions
for c in ${CASES//,/ }; do
    case $c in
        equal) case_equal ;;
        unequal) case_unequal ;;
        unequal100) case_unequal100 ;;
        three) case_three ;;
        adaptequal) case_adaptequal ;;
        ratechange) case_ratechange ;;
        linkdown|blackhole) case_fault "$c" ;;
        quickstart) case_quickstart ;;
    esac
done
cl down >/dev/null 2>&1
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/versions.txt"
echo "duration: $(($(date +%s) - T_START)) s" >>"$OUT/versions.txt"
say "all jobs done; writing the tables and plots"
report_all "$OUT" || exit 1
[ "$UPDATE_DOCS" = yes ] && { update_docs "$OUT" "$DOCS_DIR" || exit 1; }
exit 0
