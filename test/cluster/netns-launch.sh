#!/bin/sh
# netns-launch.sh -- an "ssh" for the namespace cluster of cluster.sh: MPI
# launchers that start their remote daemons through ssh (hydra's
# -launcher ssh -launcher-exec, Open MPI's plm_rsh_agent) call it instead,
# as they would call ssh:
#     netns-launch.sh [ssh options] HOST COMMAND [ARGS...]
# It skips the ssh options, finds the node HOST names (a node's name, e.g.
# mdr-node1, or its management address) in the state of every cluster that
# is up, and runs the command there: in the node's network namespace, with
# the node's host name (its own UTS namespace), through `sh -c` on the
# arguments joined by spaces -- which is what ssh does, and what the
# launchers count on (hydra quotes its arguments for the remote shell).
# cluster.sh up copies this file next to the cluster's hosts file.
set -u
STATE_ROOT=${MDR_CLUSTER_STATE_ROOT:-/run/madrail-cluster}

die() { echo "netns-launch: $*" >&2; exit 255; }   # 255: what ssh returns

while [ $# -gt 0 ]; do
    case $1 in
        --) shift; break ;;
        # ssh options that take a value, given apart or attached
        -[BbcDEeFIiJLlmOopQRSWw]) [ $# -ge 2 ] || die "option $1 needs a value"; shift 2 ;;
        -[BbcDEeFIiJLlmOopQRSWw]*) shift ;;
        # flags (possibly several in one word)
        -[46AaCfGgKkMNnqsTtVvXxYy]*) shift ;;
        -*) die "unknown ssh option '$1'" ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || die "usage: netns-launch.sh [ssh options] HOST COMMAND [ARGS...]"
host=${1#*@}
shift

ns=
# The copy that cluster.sh up puts in a cluster's state directory looks in
# that cluster first: two clusters up at once (two trees' tests) use the
# same management addresses.
own=$(dirname "$0")/nodes
for f in "$own" "$STATE_ROOT"/*/nodes; do
    [ -f "$f" ] || continue
    # lines: <namespace> <management address>
    ns=$(awk -v h="$host" '$1 == h || $2 == h { print $1; exit }' "$f")
    [ -n "$ns" ] && break
done
[ -n "$ns" ] || die "no node '$host' in any cluster under $STATE_ROOT (is it up? cluster.sh status)"

exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$*"
