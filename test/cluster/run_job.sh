#!/usr/bin/env bash
# run_job.sh -- one MPI job on a namespace cluster built for it: brings the
# cluster up (cluster.sh up), runs one MPI command across its nodes from
# node0, keeps the output (and a log file), tears the cluster down on any
# exit (a trap: also after a timeout, an error or ^C), and exits with the
# job's exit status.
#
# Why a wrapper: starting MPI across the namespaces takes several pieces
# that must agree (the hosts file, the ssh stand-in, the management
# interface for the launcher's control connection, the rail list, and for
# each MPI its own way to say all that), and a job that hangs must not
# leave namespaces or processes behind.  Tests and users get all of it from
# one command line.
set -uo pipefail

prog=run_job.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

usage() {
    cat <<EOF
Usage: $prog [cluster options] [job options] -- PROGRAM [ARGS...]

Builds a namespace cluster (test/cluster/cluster.sh), runs PROGRAM on it
under an MPI launcher started in node0, tears the cluster down, and exits
with the job's status (124 on timeout, 77 when the cluster or the MPI
cannot be had here: the reason is printed as SKIP).

Cluster options (passed to cluster.sh up):
  --nodes N            nodes (default 2)
  --rails K            data rails (default 2)
  --rate R[,R...]      tbf rate per rail (default 1gbit)
  --burst B            tbf burst (default 128kb)
  --prefix P           namespace prefix (default mdrjob-: a cluster a user
                       has up under the default mdr- is left alone)
  --keep               leave the cluster up afterwards (cluster.sh --prefix P down)

Job options:
  --mpi KIND           ours     our MPICH (ch4:madrail), \$MDR_MPICH_DIR or
                                $REPO/_install/mpich (default)
                       hydra    any hydra mpiexec (\$MPIEXEC, else
                                mpiexec.hydra, else ours): libmadrail programs
                       mpich    Debian's MPICH (mpiexec.mpich, ch4:ucx) over
                                the rails (UCX_NET_DEVICES=rail0,..., UCX_TLS=tcp,self)
                       openmpi  Debian's Open MPI (mpirun.openmpi, ob1 + tcp BTL
                                over the rails, vader inside a node)
                       none     run PROGRAM itself in node0, with the cluster's
                                variables (cluster.sh env) in its environment
  --np N               processes (default: 2 per node)
  --ppn N              processes per node (default 2)
  --env VAR=VALUE      environment of the job (repeatable); MADRAIL_RAILS
                       defaults to tcp:rail0,...,tcp:rail<K-1>
  --timeout SEC        limit for the job (default 120)
  --log FILE           also write the job's output to FILE
After the job, one line per node and interface gives the bytes the kernel
counted on it ("run_job.sh: traffic: <node> <dev> tx_bytes N rx_bytes M").
  -h, --help           this text

Examples:
  $prog --mpi ours -- ./mpi_cluster 2 2
  $prog --rate 1gbit,300mbit --mpi hydra --np 2 --ppn 1 \\
        --env MADRAIL_STATS=1 -- _build/bench/madrail_bw --min 1m --max 4m
EOF
}

UP_ARGS=()
PREFIX=mdrjob-
KEEP=no
MPI=ours
NP=
PPN=2
JOB_ENV=()
TIMEOUT=120
LOG=
JOBLOG=
NODES=2
RAILS=2
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --nodes) NODES=${2:-}; UP_ARGS+=(--nodes "${2:-}"); shift ;;
        --rails) RAILS=${2:-}; UP_ARGS+=(--rails "${2:-}"); shift ;;
        --rate|--burst) UP_ARGS+=("$1" "${2:-}"); shift ;;
        --prefix) PREFIX=${2:-}; shift ;;
        --keep) KEEP=yes ;;
        --mpi) MPI=${2:-}; shift ;;
        --np) NP=${2:-}; shift ;;
        --ppn) PPN=${2:-}; shift ;;
        --env) [[ "${2:-}" == [A-Za-z_]*=* ]] || { echo "$prog: --env needs VAR=VALUE" >&2; exit 2; }
               JOB_ENV+=("$2"); shift ;;
        --timeout) TIMEOUT=${2:-}; shift ;;
        --log) JOBLOG=${2:-}; shift ;;
        --) shift; break ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ $# -ge 1 ] || { echo "$prog: no PROGRAM (see --help)" >&2; exit 2; }
[[ "$PPN" =~ ^[1-9][0-9]*$ ]] || { echo "$prog: bad --ppn '$PPN'" >&2; exit 2; }
[[ "$NODES" =~ ^[0-9]+$ ]] && [[ "$RAILS" =~ ^[0-9]+$ ]] ||
    { echo "$prog: --nodes and --rails need numbers" >&2; exit 2; }
[ -n "$NP" ] || NP=$((NODES * PPN))
[[ "$NP" =~ ^[1-9][0-9]*$ ]] || { echo "$prog: bad --np '$NP'" >&2; exit 2; }
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || { echo "$prog: bad --timeout '$TIMEOUT'" >&2; exit 2; }

skip() { echo "SKIP: $prog: $*"; exit 77; }
CL=(bash "$HERE/cluster.sh" --prefix "$PREFIX")

# ------------------------------------------------------------- the launcher
case $MPI in
    ours)
        MPICH_DIR=${MDR_MPICH_DIR:-$REPO/_install/mpich}
        MPIEXEC=$MPICH_DIR/bin/mpiexec
        [ -x "$MPIEXEC" ] ||
            skip "our MPICH is not built ($MPIEXEC missing: ./quickstart.sh builds it; or set MDR_MPICH_DIR)" ;;
    hydra)
        if [ -z "${MPIEXEC:-}" ]; then
            MPIEXEC=$(command -v mpiexec.hydra || true)
            [ -n "$MPIEXEC" ] || MPIEXEC=${MDR_MPICH_DIR:-$REPO/_install/mpich}/bin/mpiexec
        fi
        command -v "$MPIEXEC" >/dev/null 2>&1 ||
            skip "no hydra mpiexec (install mpich, or set MPIEXEC)"
        MPIEXEC=$(command -v "$MPIEXEC") ;;
    mpich)
        MPIEXEC=$(command -v mpiexec.mpich || true)
        [ -n "$MPIEXEC" ] || skip "Debian's MPICH is not installed (apt-get install mpich)" ;;
    openmpi)
        MPIEXEC=$(command -v mpirun.openmpi || true)
        [ -n "$MPIEXEC" ] || skip "Debian's Open MPI is not installed (apt-get install openmpi-bin)" ;;
    none) MPIEXEC= ;;
    *) echo "$prog: --mpi must be ours, hydra, mpich, openmpi or none" >&2; exit 2 ;;
esac
command -v timeout >/dev/null 2>&1 || { echo "$prog: needs timeout (coreutils)" >&2; exit 1; }

# ------------------------------------------------------------- up, and down on exit
# Bytes each node's rails (and mgmt) carried, from the kernel's interface
# counters: what really crossed the veths, whatever the MPI reports.  The
# cluster is new, so the counters count this job (and up's few pings).
traffic() {
    local i
    for i in $(seq 0 $((NODES - 1))); do
        "${CL[@]}" exec "$i" 8>&- sh -c 'for d in mgmt $(seq -f "rail%g" 0 $(($1 - 1))); do
                s=/sys/class/net/$d/statistics
                echo "$0: traffic: $(hostname) $d tx_bytes $(cat $s/tx_bytes) rx_bytes $(cat $s/rx_bytes)"
            done' "$prog" "$RAILS" 2>/dev/null
    done | tee -a "$LOG"
}
cleanup() {
    local rc=$?
    [ -n "${LOG:-}" ] && traffic
    if [ "$KEEP" = yes ]; then
        echo "$prog: cluster left up (${CL[*]:1} status; ${CL[*]:1} down)"
    else
        "${CL[@]}" down >/dev/null 2>&1 8>&- ||
            echo "$prog: warning: '${CL[*]:1} down' failed" >&2
    fi
    exit $rc
}
# One job at a time on a prefix: a second run_job (another shell, another
# tree's make check) waits here instead of tearing this cluster down under
# the running job.  fd 8 is closed for everything started below, so a
# process left behind never holds the lock.
mkdir -p /run/madrail-cluster 2>/dev/null
if exec 8>"/run/madrail-cluster/${PREFIX%-}.job.lock" 2>/dev/null; then
    flock -w $((TIMEOUT + 120)) 8 ||
        { echo "$prog: another job holds cluster prefix $PREFIX (use --prefix)" >&2; exit 1; }
fi
"${CL[@]}" up ${UP_ARGS[@]+"${UP_ARGS[@]}"} 8>&-
rc=$?
[ $rc -eq 77 ] && exit 77
if [ $rc -ne 0 ]; then
    "${CL[@]}" down >/dev/null 2>&1 8>&-
    echo "$prog: cluster.sh up failed (exit $rc)" >&2
    exit 1
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# the cluster's variables (MDR_CLUSTER_*, MADRAIL_RAILS)
eval "$("${CL[@]}" env)" || { echo "$prog: cluster.sh env failed" >&2; exit 1; }
env_has() { local e; for e in ${JOB_ENV[@]+"${JOB_ENV[@]}"}; do [ "${e%%=*}" = "$1" ] && return 0; done; return 1; }
env_has MADRAIL_RAILS || JOB_ENV=("MADRAIL_RAILS=$MADRAIL_RAILS" ${JOB_ENV[@]+"${JOB_ENV[@]}"})

devs=$(seq -f 'rail%g' 0 $((RAILS - 1)) | paste -sd, -)
case $MPI in
    ours|hydra|mpich)
        # shellcheck disable=SC2206
        CMD=("$MPIEXEC" -f "$MDR_CLUSTER_HOSTS" -launcher ssh -launcher-exec "$MDR_CLUSTER_LAUNCHER"
             -iface mgmt -n "$NP" -ppn "$PPN")
        if [ "$MPI" = mpich ]; then
            # UCX's shared-memory transports (cma, posix) reach across the
            # namespaces of one machine, whatever the host names: without
            # tcp-only UCX would carry the "remote" traffic in memory.
            for e in UCX_NET_DEVICES=$devs UCX_TLS=tcp,self UCX_MAX_EAGER_RAILS=$RAILS \
                     UCX_MAX_RNDV_RAILS=$RAILS; do
                env_has "${e%%=*}" || JOB_ENV+=("$e")
            done
        fi ;;
    openmpi)
        CMD=("$MPIEXEC" --hostfile "$MDR_CLUSTER_OMPI_HOSTFILE" --mca plm_rsh_agent "$MDR_CLUSTER_LAUNCHER"
             --mca oob_tcp_if_include mgmt --mca pml ob1 --mca btl "tcp,vader,self"
             --mca btl_tcp_if_include "$devs" --bind-to none -np "$NP" --map-by "ppr:$PPN:node")
        # Open MPI forwards only what -x names
        for e in ${JOB_ENV[@]+"${JOB_ENV[@]}"}; do CMD+=(-x "${e%%=*}"); done
        JOB_ENV+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1) ;;
    none) CMD=() ;;
esac
CMD+=("$@")

echo "$prog: cluster $PREFIX: $NODES nodes, $RAILS rails${UP_ARGS[*]:+ (${UP_ARGS[*]})}"
echo "$prog: in node0: $(printf '%q ' env ${JOB_ENV[@]+"${JOB_ENV[@]}"} "${CMD[@]}")"
if [ -n "$JOBLOG" ]; then
    : >"$JOBLOG" || { echo "$prog: cannot write $JOBLOG" >&2; exit 1; }
    LOG=$JOBLOG
else
    LOG=/dev/null
fi
t0=$(date +%s.%N)
timeout -k 10 "$TIMEOUT" "${CL[@]}" exec 0 env ${JOB_ENV[@]+"${JOB_ENV[@]}"} "${CMD[@]}" </dev/null 8>&- 2>&1 |
    tee -a "$LOG"
rc=${PIPESTATUS[0]}
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
case $rc in
    124|137) echo "$prog: TIMEOUT after $TIMEOUT s (exit $rc)" ;;
    *) echo "$prog: exit status $rc after $secs s" ;;
esac
exit $rc
