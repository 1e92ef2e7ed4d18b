#!/usr/bin/env bash
# slurm.sh -- a real Slurm (Debian's slurm-wlm, munge) on the namespace
# cluster of cluster.sh: slurmctld in node0 and one slurmd in every node,
# so batch jobs (sbatch, srun, hydra's slurm launcher) can be tried and
# tested on one machine.
#
# Why it is built this way:
#  - No systemd and nothing of the machine's own Slurm or munge is used:
#    the configuration (slurm.conf, cgroup.conf), a private munge key, the
#    munged socket, the daemons' state, spool, logs and pid files all live
#    in the cluster's state directory (<state>/slurm), and every client
#    finds them through SLURM_CONF.  A user's /etc/slurm stays untouched.
#  - Every daemon runs inside the cluster's namespaces (through cluster.sh
#    exec): slurmctld and munged in node0, each slurmd in its node.  So they
#    bind only to the cluster's addresses, and `cluster.sh down` (or the next
#    `up`, after a crash) kills whatever is left of them.  munged's socket is
#    a path in the file system, which every namespace reaches.
#  - slurmd takes its node name from the host name, and cluster.sh exec
#    gives every command a UTS namespace named after the node: slurmd is
#    not told its name (-N), so a node that saw the wrong host name would
#    not register and `start` would fail, instead of hiding the fault.
#    NodeAddr is the node's management address; the control traffic of
#    Slurm and of hydra stays off the data rails.
#  - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: the nodes
#    share the machine's cgroup tree, which the cgroup plugins would claim
#    as their own.  No accounting daemon (slurmdbd): finished jobs go to a
#    jobcomp/filetxt file, and job state is read with `scontrol show job`.
#
# Needs root and an `up` cluster (cluster.sh --prefix P up); installs
# slurmd, slurmctld, slurm-client and munge with apt-get when missing.
# Exit 77 with "SKIP: <reason>" where that cannot be had.
set -uo pipefail

prog=slurm.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE_ROOT=/run/madrail-cluster
PREFIX=${MDR_CLUSTER_PREFIX:-mdr-}
SLURM_PKGS="slurmd slurmctld slurm-client munge"
CPUS=${MDR_SLURM_CPUS:-2}      # CPUs a node offers (both nodes share the machine's)

usage() {
    cat <<EOF
Usage: $prog [--prefix P] COMMAND

Slurm on the namespace cluster <P> (test/cluster/cluster.sh --prefix P up
first): munged and slurmctld in node0, a slurmd in every node, all of
their files under $STATE_ROOT/<P>/slurm.

Commands:
  start        write slurm.conf and cgroup.conf, start munged, slurmctld
               and the slurmds, wait until every node is idle
  stop         stop them (their files stay until cluster.sh down)
  status       daemons and nodes (sinfo)
  env          SLURM_CONF=... for clients: run them in a node, e.g.
                 cluster.sh --prefix P exec 0 env \$($prog --prefix P env) sinfo
  exec CMD...  run a Slurm client (sbatch, squeue, scontrol, ...) in node0
               with SLURM_CONF set

Options:
  --prefix P   the cluster (default \$MDR_CLUSTER_PREFIX or mdr-)
Exit status: 0 ok, 1 error, 2 usage, 77 cannot run here (SKIP).
EOF
}

say() { echo "[slurm] $*"; }
die() { echo "[slurm] ERROR: $*" >&2; exit 1; }
skip() { echo "SKIP: $prog: $*"; exit 77; }

cl() { bash "$HERE/cluster.sh" --prefix "$PREFIX" "$@"; }

# ------------------------------------------------------------- packages
# Installed as cluster.sh and quickstart.sh install theirs: apt-get, an
# update only when the install fails without one.  Debian's postinst
# scripts would start the system's munge/slurm services where an init
# system runs; we stop nothing of theirs and use none of their files.
ensure_slurm() {
    local missing=() t
    for t in slurmd slurmctld sbatch munged; do
        command -v "$t" >/dev/null 2>&1 || missing+=("$t")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 ||
        skip "Slurm is not installed (${missing[*]} missing) and there is no apt-get: install $SLURM_PKGS"
    say "installing $SLURM_PKGS (for ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    local log=/tmp/madrail-slurm-apt.log
    # shellcheck disable=SC2086
    if ! apt-get install -y --no-install-recommends $SLURM_PKGS >$log 2>&1; then
        apt-get update >>$log 2>&1
        # shellcheck disable=SC2086
        apt-get install -y --no-install-recommends $SLURM_PKGS >>$log 2>&1 ||
            skip "could not install $SLURM_PKGS (see $log)"
    fi
    for t in "${missing[@]}"; do
        command -v "$t" >/dev/null 2>&1 || skip "'$t' still missing after installing $SLURM_PKGS"
    done
}

# ------------------------------------------------------------- state
load() {
    [[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}-$ ]] || { echo "$prog: bad prefix '$PREFIX'" >&2; exit 2; }
    NAME=${PREFIX%-}
    STATE=$STATE_ROOT/$NAME
    S=$STATE/slurm
    CONF=$S/etc/slurm.conf
    [ -f "$STATE/config" ] && [ -f "$STATE/nodes" ] ||
        die "cluster '$NAME' is not up (run: cluster.sh --prefix $PREFIX up)"
    # shellcheck disable=SC1091
    . "$STATE/config"
    # "<namespace> <management address>" a line
    mapfile -t NODE_LINES <"$STATE/nodes"
}

# node I's name and address
node_name() { echo "${NODE_LINES[$1]% *}"; }
node_addr() { echo "${NODE_LINES[$1]#* }"; }

write_conf() {
    local i
    mkdir -p "$S/etc" "$S/munge" "$S/ctld" || return 1
    chmod 700 "$S/munge"
    for i in $(seq 0 $((NODES - 1))); do
        mkdir -p "$S/$(node_name "$i")/spool" || return 1
    done
    # the munge key: private to this cluster (munged wants 0400/0600)
    if [ ! -s "$S/munge/munge.key" ]; then
        (umask 077 && dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none) ||
            return 1
    fi
    chmod 400 "$S/munge/munge.key"
    {
        cat <<EOF
# slurm.conf for the namespace cluster '$NAME', written by test/cluster/slurm.sh
ClusterName=$NAME
SlurmctldHost=$(node_name 0)($(node_addr 0))
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/munge.socket
StateSaveLocation=$S/ctld
SlurmctldPidFile=$S/ctld/slurmctld.pid
SlurmctldLogFile=$S/ctld/slurmctld.log
SlurmdSpoolDir=$S/%n/spool
SlurmdPidFile=$S/%n/slurmd.pid
SlurmdLogFile=$S/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
PropagateResourceLimits=NONE
EOF
        for i in $(seq 0 $((NODES - 1))); do
            echo "NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") CPUs=$CPUS State=UNKNOWN"
        done
        echo "PartitionName=madrail Nodes=ALL Default=YES MaxTime=30 State=UP"
    } >"$CONF" || return 1
    # read by slurmd even with the cgroup plugins off; nothing is constrained
    cat >"$S/etc/cgroup.conf" <<EOF
# cgroup.conf for the namespace cluster '$NAME': no cgroup plugin is used
# (proctrack/linuxproc, task/none), the nodes share the machine's cgroups.
# slurmd still loads a cgroup plugin at start; autodetect fails in a node
# (ip netns exec mounts a fresh /sys without /sys/fs/cgroup), cgroup/v1
# with nothing to constrain mounts nothing and touches nothing.
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
}

# pid in FILE, alive
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Slurm client in node0
client() { cl exec 0 env SLURM_CONF="$CONF" "$@"; }

stop_pidfile() {
    local f=$1 what=$2 t pid
    pid_alive "$f" || { rm -f "$f"; return 0; }
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null
    for t in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
        sleep 0.1
    done
    say "$what (pid $pid) did not stop on TERM: KILL"
    kill -KILL "$pid" 2>/dev/null
    rm -f "$f"
}

cmd_stop() {
    local i
    for i in $(seq 0 $((NODES - 1))); do
        stop_pidfile "$S/$(node_name "$i")/slurmd.pid" "slurmd on $(node_name "$i")"
    done
    stop_pidfile "$S/ctld/slurmctld.pid" slurmctld
    stop_pidfile "$S/munge/munged.pid" munged
    # a job step left running (slurmstepd) dies with its node's slurmd gone
    pkill_steps
    say "stopped"
}

# slurmstepd processes of this cluster's nodes (found by namespace, not by
# name: other clusters' steps are left alone)
pkill_steps() {
    local i pid
    for i in $(seq 0 $((NODES - 1))); do
        for pid in $(ip netns pids "$(node_name "$i")" 2>/dev/null); do
            case $(cat "/proc/$pid/comm" 2>/dev/null) in
                slurmstepd) kill -KILL "$pid" 2>/dev/null ;;
            esac
        done
    done
}

cmd_start() {
    local i t n idle
    ensure_slurm
    # a second start, or one after a crash: clean first
    cmd_stop >/dev/null
    write_conf || die "cannot write the configuration in $S"

    cl exec 0 munged --force --socket="$S/munge/munge.socket" --key-file="$S/munge/munge.key" \
        --pid-file="$S/munge/munged.pid" --log-file="$S/munge/munged.log" \
        --seed-file="$S/munge/munged.seed" ||
        die "munged did not start (see $S/munge/munged.log)"
    for t in $(seq 1 50); do [ -S "$S/munge/munge.socket" ] && break; sleep 0.1; done
    munge -n -S "$S/munge/munge.socket" | unmunge -S "$S/munge/munge.socket" >/dev/null 2>&1 ||
        die "munge credentials do not round-trip through $S/munge/munge.socket"

    # -c: no state from an earlier run (jobs, node states) is recovered
    cl exec 0 slurmctld -c -f "$CONF" || die "slurmctld did not start (see $S/ctld/slurmctld.log)"
    for i in $(seq 0 $((NODES - 1))); do
        cl exec "$i" slurmd -f "$CONF" ||
            die "slurmd did not start on $(node_name "$i") (see $S/$(node_name "$i")/slurmd.log)"
    done
    # every node registered and idle
    for t in $(seq 1 150); do
        idle=$(client sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
        [ "$idle" -eq "$NODES" ] && break
        sleep 0.2
    done
    if [ "$idle" -ne "$NODES" ]; then
        client sinfo -N -l 2>&1
        tail -n 5 "$S/ctld/slurmctld.log" 2>/dev/null
        die "$idle of $NODES nodes idle after 30 s"
    fi
    say "up: slurmctld on $(node_name 0) ($(node_addr 0):6817), slurmd on $(for i in $(seq 0 $((NODES - 1))); do printf '%s ' "$(node_name "$i")"; done)"
    say "clients: SLURM_CONF=$CONF, in a node (slurm.sh --prefix $PREFIX exec sinfo)"
}

cmd_status() {
    local i f rc=0
    for f in "munge/munged.pid:munged" "ctld/slurmctld.pid:slurmctld"; do
        if pid_alive "$S/${f%%:*}"; then echo "${f#*:}: pid $(cat "$S/${f%%:*}")"; else echo "${f#*:}: not running"; rc=3; fi
    done
    for i in $(seq 0 $((NODES - 1))); do
        f=$S/$(node_name "$i")/slurmd.pid
        if pid_alive "$f"; then echo "slurmd $(node_name "$i"): pid $(cat "$f")"; else echo "slurmd $(node_name "$i"): not running"; rc=3; fi
    done
    [ $rc -eq 0 ] && client sinfo -N -l
    return $rc
}

while [ $# -gt 0 ]; do
    case $1 in
        -h|--help|help) usage; exit 0 ;;
        --prefix) PREFIX=${2:-}; shift ;;
        --prefix=*) PREFIX=${1#--prefix=} ;;
        *) break ;;
    esac
    shift
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || skip "needs root (the cluster's namespaces)"
cmd=$1; shift
load
case $cmd in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) echo "SLURM_CONF=$CONF" ;;
    exec) [ $# -ge 1 ] || { echo "usage: $prog exec CMD [ARGS...]" >&2; exit 2; }; client "$@" ;;
    *) echo "$prog: unknown command '$cmd' (see --help)" >&2; exit 2 ;;
esac
