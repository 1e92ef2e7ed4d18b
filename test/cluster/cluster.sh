#!/usr/bin/env bash
# cluster.sh -- a small cluster on one machine, out of network namespaces,
# for trying and testing multi-rail without a cluster.
#
# Why it is built this way:
#  - Each node is a network namespace (<prefix>node0..3) and every process
#    started in it also gets its own UTS namespace whose host name is the
#    node's name: MPI libraries decide "same host, use shared memory" from
#    the host name, so without it they would bypass the rails.  The UTS
#    namespace is made per command (unshare --uts + hostname), which leaves
#    nothing to clean up after a crash but the network namespaces.
#  - The nodes hang off bridges in one more namespace (<prefix>sw, the
#    "switch"): one unshaped management network (interface mgmt) for
#    launching and bootstrap, and K data rails with the same interface
#    names on every node (rail0..railK-1), so rail lists are symmetric.  A
#    switch (not veth pairs between nodes) lets 3 or 4 nodes share a rail.
#  - Each rail link is shaped with tc tbf on both of its ends (the node's
#    interface: what the node sends; the switch port: what it receives), so
#    a rail is a full-duplex link of the given rate.  This kernel has no
#    netem: faults are a link set down, or an nftables drop on the node (a
#    black hole: the link stays up, packets vanish).
#  - Interface order in /sys/class/net depends on a hash seeded by the
#    namespace, so two nodes can list their rails in different orders, and
#    a library that pairs devices by index then puts two rails' traffic on
#    one.  `up` re-creates a node until it lists its rails in node0's order.
#  - Nothing is connected to the machine's own network: the namespaces have
#    no route out, and every address is in 198.18.0.0/15 (RFC 2544, the
#    block reserved for network benchmark tests), chosen in one place below.
#
# Needs root, `ip netns`, tc, nft, unshare (packages iproute2, nftables,
# util-linux, iputils-ping; installed with apt-get when missing).  Where the
# cluster cannot be built (not root, no namespaces), every command prints
# "SKIP: <reason>" and exits 77 (automake's skip code).
set -uo pipefail

prog=cluster.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# ------------------------------------------------------------- addresses
# The only place addresses are chosen.  Node i (0-based) is host i+1.
MGMT_NET=198.18.0          # mgmt:  198.18.0.<i+1>/24
RAIL_NET_BASE=10           # railK: 198.18.<10+K>.<i+1>/24
addr_mgmt() { echo "$MGMT_NET.$(($1 + 1))"; }
addr_rail() { echo "198.18.$((RAIL_NET_BASE + $2)).$(($1 + 1))"; }

MAX_NODES=4
MAX_RAILS=4
DEFAULT_RATE=1gbit
DEFAULT_BURST=128kb
TBF_LATENCY=50ms
STATE_ROOT=/run/madrail-cluster
NFT_TABLE=madrail_cluster

# The cluster's name: namespaces <prefix>node<i> and <prefix>sw.  Tests use
# their own prefix, so they never touch a cluster a user has up.
PREFIX=${MDR_CLUSTER_PREFIX:-mdr-}

usage() {
    cat <<EOF
Usage: $prog [--prefix P] COMMAND [ARGS]

A cluster of N nodes (network namespaces, each with its own host name) on
one machine: an unshaped management network (interface mgmt) and K data
rails (interfaces rail0..railK-1, tc tbf shaped).  Needs root.

Commands:
  up [--nodes N] [--rails K] [--rate R[,R...]] [--burst B]
                       build it (tearing down what is left of an earlier
                       one first): N nodes (default 2, at most $MAX_NODES), K rails
                       (default 2, at most $MAX_RAILS), rate per rail (tc units:
                       1gbit, 300mbit; 'none' = unshaped; the last value
                       serves the remaining rails; default $DEFAULT_RATE), tbf
                       burst (default $DEFAULT_BURST)
  down                 kill what runs in the nodes, remove everything
  status               nodes, interfaces, addresses, rates, faults, processes
  rate RAIL RATE [NODE]
                       change a rail's rate (both directions) on NODE or on
                       every node
  link-down RAIL [NODE], link-up RAIL [NODE]
                       take a rail's link down / up on NODE or every node
  blackhole RAIL [NODE], unblackhole RAIL [NODE]
                       drop every packet in and out of RAIL on NODE or every
                       node (nftables), the link staying up
  exec NODE CMD [ARGS...]
                       run CMD in NODE (its network and host name)
  hosts [--openmpi] [FILE]
                       write the hosts file for hydra's -f (or an Open MPI
                       hostfile) to FILE (default: in the state directory)
                       and print its path
  env                  print, as shell assignments, MADRAIL_RAILS and the
                       flags for our mpiexec, Debian's MPICH and Open MPI
                       (eval "\$($prog env)")

NODE is 0..N-1 (or node0, or ${PREFIX}node0); RAIL is 0..K-1 (or rail0).
Options:
  --prefix P   name prefix of the namespaces (default \$MDR_CLUSTER_PREFIX
               or mdr-): several clusters can be up at once
Addresses: mgmt $MGMT_NET.<node+1>/24, railK 198.18.<$RAIL_NET_BASE+K>.<node+1>/24.
State: $STATE_ROOT/<prefix>/ (hosts files, the launcher wrapper).
Exit status: 0 ok, 1 error, 2 usage, 77 cannot run here (SKIP).
EOF
}

say() { echo "[cluster] $*"; }
die() { echo "[cluster] ERROR: $*" >&2; exit 1; }
skip() { echo "SKIP: $prog: $*"; exit 77; }

# ------------------------------------------------------------- names
check_prefix() {
    [[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}-$ ]] ||
        { echo "$prog: bad prefix '$PREFIX' (a lower-case letter, up to 9 letters or digits, then '-')" >&2; exit 2; }
    NAME=${PREFIX%-}
    STATE=$STATE_ROOT/$NAME
    SW=${PREFIX}sw
}
node_ns() { echo "${PREFIX}node$1"; }
# how to call this script again for this cluster (for messages)
self_cmd() {
    if [ "$PREFIX" = mdr- ]; then echo "${1:-}$prog"; else echo "${1:-}$prog --prefix $PREFIX"; fi
}
port_name() { echo "n$1-$2"; }           # switch side of node $1's interface $2

# Prints the index of a NODE argument (0, node0, <prefix>node0).
node_index() {
    local a=$1
    a=${a#"$PREFIX"}
    a=${a#node}
    [[ "$a" =~ ^[0-9]$ ]] && [ "$a" -lt "$NODES" ] ||
        { echo "$prog: no node '$1' (nodes are 0..$((NODES - 1)))" >&2; exit 2; }
    echo "$a"
}
rail_index() {
    local a=${1#rail}
    [[ "$a" =~ ^[0-9]$ ]] && [ "$a" -lt "$RAILS" ] ||
        { echo "$prog: no rail '$1' (rails are 0..$((RAILS - 1)))" >&2; exit 2; }
    echo "$a"
}
# node indices a command applies to: the one given, or all
nodes_of() {
    if [ -n "${1:-}" ]; then node_index "$1"; else seq 0 $((NODES - 1)); fi
}

# ------------------------------------------------------------- tools
# tool:package pairs; installed the way quickstart.sh does (apt-get, an
# update only when the install fails without one).
TOOLS="ip:iproute2 tc:iproute2 nft:nftables unshare:util-linux flock:util-linux ping:iputils-ping"
ensure_tools() {
    local t missing=() pkgs=()
    for t in $TOOLS; do
        command -v "${t%%:*}" >/dev/null 2>&1 && continue
        missing+=("${t%%:*}")
        case " ${pkgs[*]:-} " in *" ${t#*:} "*) ;; *) pkgs+=("${t#*:}") ;; esac
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || skip "needs root (missing tools: ${missing[*]})"
    command -v apt-get >/dev/null 2>&1 ||
        skip "missing ${missing[*]} and no apt-get: install ${pkgs[*]}"
    say "installing ${pkgs[*]} (for ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${pkgs[@]}" >/tmp/madrail-cluster-apt.log 2>&1; then
        apt-get update >>/tmp/madrail-cluster-apt.log 2>&1
        apt-get install -y --no-install-recommends "${pkgs[@]}" >>/tmp/madrail-cluster-apt.log 2>&1 ||
            skip "could not install ${pkgs[*]} (see /tmp/madrail-cluster-apt.log)"
    fi
    for t in "${missing[@]}"; do
        command -v "$t" >/dev/null 2>&1 || skip "'$t' still missing after installing ${pkgs[*]}"
    done
}

# Root and working network namespaces, or SKIP.
check_can_run() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (uid $(id -u))"
    ensure_tools
    local probe=${PREFIX}probe$$
    ip netns add "$probe" 2>/dev/null || skip "'ip netns add' is not permitted here"
    if ! ip netns exec "$probe" unshare --uts true 2>/dev/null; then
        ip netns del "$probe" 2>/dev/null
        skip "cannot enter a network namespace or create a UTS namespace here"
    fi
    ip netns del "$probe"
}

# ------------------------------------------------------------- state
load_state() {
    [ -f "$STATE/config" ] || die "no cluster '$NAME' is up (run: $(self_cmd) up)"
    # shellcheck disable=SC1091
    . "$STATE/config"
}
lock() {
    mkdir -p "$STATE_ROOT" || die "cannot create $STATE_ROOT"
    exec 9>"$STATE_ROOT/$NAME.lock"
    flock -w 120 9 || die "another $prog command holds $STATE_ROOT/$NAME.lock"
}

# Runs a command in node $1's network namespace, with the node's host name
# (a fresh UTS namespace per command).  `ip netns exec` also mounts the
# namespace's own /sys (its interfaces) and /etc/netns/<ns>/hosts.
node_exec() {
    local ns
    ns=$(node_ns "$1"); shift
    ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

# Rails in the order node $1 lists them in /sys/class/net.
sys_rail_order() {
    ip netns exec "$(node_ns "$1")" ls -U /sys/class/net | grep -E '^rail[0-9]+$' | tr '\n' ' '
}

# ------------------------------------------------------------- down
# Every namespace of this prefix (also nodes beyond the current N, left by
# an earlier, larger cluster).
our_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' |
        grep -E "^${PREFIX}(node[0-9]+|sw)\$" || true
}

teardown() {
    local ns pids left t
    for ns in $(our_namespaces); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        if [ -n "${pids// /}" ]; then
            say "killing processes left in $ns: $pids"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null
        fi
    done
    for t in 1 2 3 4 5 6 7 8 9 10; do
        left=
        for ns in $(our_namespaces); do
            left=$left$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        done
        [ -z "${left// /}" ] && break
        sleep 0.3
    done
    if [ -n "${left// /}" ]; then
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
        sleep 0.2
    fi
    for ns in $(our_namespaces); do
        ip netns del "$ns" 2>/dev/null || echo "[cluster] warning: could not delete namespace $ns" >&2
        rm -rf "/etc/netns/$ns"
    done
    rm -rf "$STATE"
}

# ------------------------------------------------------------- rates, faults
valid_rate() {
    case $1 in none|0) return 0 ;; esac
    [[ "$1" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?(bit|bps))$ ]]
}
# set_rate NODE RAIL RATE: both ends of the node's rail link
set_rate() {
    local pair ns dev
    for pair in "$(node_ns "$1"):rail$2" "$SW:$(port_name "$1" "rail$2")"; do
        ns=${pair%%:*} dev=${pair#*:}
        if [ "$3" = none ] || [ "$3" = 0 ]; then
            tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
        else
            tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$3" burst "$BURST" \
                latency "$TBF_LATENCY" || return 1
        fi
    done
}

# The nftables black hole of node $1: one table, rebuilt from the list of
# its blackholed rails ($STATE/blackhole.<i>), dropping IPv4/IPv6 in both
# directions (ARP still answers: the neighbour looks alive, nothing
# arrives).
nft_apply() {
    local i=$1 rails set ns r
    ns=$(node_ns "$i")
    rails=$(sort -u "$STATE/blackhole.$i" 2>/dev/null | tr '\n' ' ')
    ip netns exec "$ns" nft delete table inet "$NFT_TABLE" 2>/dev/null
    [ -z "${rails// /}" ] && return 0
    set=
    for r in $rails; do set="$set${set:+, }\"$r\""; done
    ip netns exec "$ns" nft -f - <<EOF
table inet $NFT_TABLE {
    chain input { type filter hook input priority -300; policy accept; iifname { $set } drop; }
    chain output { type filter hook output priority -300; policy accept; oifname { $set } drop; }
}
EOF
}

# ------------------------------------------------------------- up
make_node() {
    local i=$1 ns k
    ns=$(node_ns "$i")
    ip netns add "$ns" || return 1
    # IPv4 only: no link-local IPv6 addresses for libraries to wander onto
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
        net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1
    ip -n "$ns" link set lo up || return 1
    for dev in mgmt $(seq -f 'rail%g' 0 $((RAILS - 1))); do
        ip link add "$dev" netns "$ns" type veth peer name "$(port_name "$i" "$dev")" netns "$SW" ||
            return 1
    done
}

# Undo make_node.  The switch ends first: a namespace is destroyed
# asynchronously, and its veth peers would keep their names for a while.
drop_node() {
    local dev
    for dev in mgmt $(seq -f 'rail%g' 0 $((RAILS - 1))); do
        ip -n "$SW" link del "$(port_name "$1" "$dev")" 2>/dev/null
    done
    ip netns del "$(node_ns "$1")"
}

wire_node() {
    local i=$1 ns k
    ns=$(node_ns "$i")
    ip -n "$ns" addr add "$(addr_mgmt "$i")/24" dev mgmt || return 1
    ip -n "$ns" link set mgmt up || return 1
    ip -n "$SW" link set "$(port_name "$i" mgmt)" master br-mgmt up || return 1
    for k in $(seq 0 $((RAILS - 1))); do
        ip -n "$ns" addr add "$(addr_rail "$i" "$k")/24" dev "rail$k" || return 1
        ip -n "$ns" link set "rail$k" up || return 1
        ip -n "$SW" link set "$(port_name "$i" "rail$k")" master "br-rail$k" up || return 1
        set_rate "$i" "$k" "${RATE_OF[$k]}" || return 1
    done
    mkdir -p "/etc/netns/$ns" || return 1
    cp "$STATE/etc-hosts" "/etc/netns/$ns/hosts" || return 1
}

write_files() {
    local i ns
    : >"$STATE/nodes"
    : >"$STATE/hosts"
    : >"$STATE/hostfile.openmpi"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 0 $((NODES - 1))); do echo "$(addr_mgmt "$i") $(node_ns "$i")"; done
    } >"$STATE/etc-hosts"
    for i in $(seq 0 $((NODES - 1))); do
        ns=$(node_ns "$i")
        echo "$ns $(addr_mgmt "$i")" >>"$STATE/nodes"
        echo "$ns" >>"$STATE/hosts"
        echo "$ns slots=8" >>"$STATE/hostfile.openmpi"
    done
    cp "$HERE/netns-launch.sh" "$STATE/netns-launch" && chmod 755 "$STATE/netns-launch"
    {
        echo "NODES=$NODES"
        echo "RAILS=$RAILS"
        echo "BURST=$BURST"
        echo "RATES=\"${RATE_OF[*]}\""
    } >"$STATE/config"
}

cmd_up() {
    NODES=2 RAILS=2 BURST=$DEFAULT_BURST
    local rates=$DEFAULT_RATE i k tries ref got
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) NODES=${2:-}; shift ;;
            --rails) RAILS=${2:-}; shift ;;
            --rate) rates=${2:-}; shift ;;
            --burst) BURST=${2:-}; shift ;;
            *) echo "$prog up: unknown option '$1'" >&2; exit 2 ;;
        esac
        shift
    done
    [[ "$NODES" =~ ^[0-9]$ ]] && [ "$NODES" -ge 2 ] && [ "$NODES" -le $MAX_NODES ] ||
        { echo "$prog up: --nodes must be 2..$MAX_NODES" >&2; exit 2; }
    [[ "$RAILS" =~ ^[0-9]$ ]] && [ "$RAILS" -ge 1 ] && [ "$RAILS" -le $MAX_RAILS ] ||
        { echo "$prog up: --rails must be 1..$MAX_RAILS" >&2; exit 2; }
    [[ "$BURST" =~ ^[0-9]+[kmg]?b?$ ]] || { echo "$prog up: bad --burst '$BURST' (e.g. 128kb)" >&2; exit 2; }
    IFS=, read -r -a RATE_OF <<<"$rates"
    [ ${#RATE_OF[@]} -ge 1 ] || { echo "$prog up: empty --rate" >&2; exit 2; }
    for k in $(seq 0 $((RAILS - 1))); do
        [ -n "${RATE_OF[$k]:-}" ] || RATE_OF[$k]=${RATE_OF[$((k - 1))]}
        valid_rate "${RATE_OF[$k]}" ||
            { echo "$prog up: bad rate '${RATE_OF[$k]}' (tc units: 1gbit, 300mbit, 100mbps; or none)" >&2; exit 2; }
    done
    [ ${#RATE_OF[@]} -le "$RAILS" ] ||
        { echo "$prog up: ${#RATE_OF[@]} rates for $RAILS rails" >&2; exit 2; }

    check_can_run
    lock
    if [ -n "$(our_namespaces)" ] || [ -d "$STATE" ]; then
        say "cleaning up what is left of cluster '$NAME' first"
        teardown
    fi
    mkdir -p "$STATE" || die "cannot create $STATE"
    # a failure half-way leaves nothing behind
    trap 'teardown; exit 1' INT TERM HUP
    write_files || { teardown; die "cannot write $STATE"; }

    ip netns add "$SW" || { teardown; die "ip netns add $SW"; }
    ip -n "$SW" link set lo up
    for dev in mgmt $(seq -f 'rail%g' 0 $((RAILS - 1))); do
        # no STP, no forwarding delay: ports forward as soon as they are up
        ip -n "$SW" link add "br-$dev" type bridge stp_state 0 forward_delay 0 &&
            ip -n "$SW" link set "br-$dev" up || { teardown; die "bridge br-$dev"; }
    done
    ref=
    for i in $(seq 0 $((NODES - 1))); do
        tries=0
        while :; do
            tries=$((tries + 1))
            make_node "$i" || { teardown; die "cannot create node $i"; }
            got=$(sys_rail_order "$i")
            [ -z "$ref" ] && ref=$got
            [ "$got" = "$ref" ] && break
            if [ $tries -ge 200 ]; then
                echo "[cluster] warning: node $i lists its rails as '$got', node0 as '$ref'" \
                     "(after $tries tries): a library pairing devices by index may mix rails" >&2
                break
            fi
            drop_node "$i"
        done
        wire_node "$i" || { teardown; die "cannot wire node $i"; }
    done
    trap - INT TERM HUP
    # Every node reaches every other on every network (a bridge port may
    # take a moment), else the cluster is not usable.
    for net in mgmt $(seq -f 'rail%g' 0 $((RAILS - 1))); do
        for i in $(seq 1 $((NODES - 1))); do
            if [ "$net" = mgmt ]; then a=$(addr_mgmt "$i"); else a=$(addr_rail "$i" "${net#rail}"); fi
            ip netns exec "$(node_ns 0)" ping -q -c 1 -W 1 -w 5 "$a" >/dev/null 2>&1 ||
                { teardown; die "node0 cannot reach node$i's $net ($a)"; }
        done
    done
    say "up: $NODES nodes (${PREFIX}node0..$((NODES - 1))), $RAILS rails (${RATE_OF[*]}), mgmt unshaped;" \
        "rails listed as '$ref' on every node"
    say "hosts: $STATE/hosts  launcher: $STATE/netns-launch  (see: $(self_cmd) env)"
}

# ------------------------------------------------------------- status
cmd_status() {
    local i ns dev q qi bh pids
    if [ ! -f "$STATE/config" ]; then
        if [ -n "$(our_namespaces)" ]; then
            echo "cluster '$NAME': no state but namespaces left: $(our_namespaces | tr '\n' ' ') (run: $prog down)"
            return 1
        fi
        echo "cluster '$NAME' is down"
        return 3
    fi
    load_state
    echo "cluster '$NAME': $NODES nodes, $RAILS rails, burst $BURST, state $STATE"
    for i in $(seq 0 $((NODES - 1))); do
        ns=$(node_ns "$i")
        if ! ip netns list | awk '{print $1}' | grep -qx "$ns"; then
            echo "  $ns: MISSING"
            continue
        fi
        pids=$(ip netns pids "$ns" | wc -l)
        bh=$(sort -u "$STATE/blackhole.$i" 2>/dev/null | tr '\n' ' ')
        echo "  $ns  host name $ns  processes $pids  /sys/class/net order: $(sys_rail_order "$i")"
        for dev in mgmt $(seq -f 'rail%g' 0 $((RAILS - 1))); do
            q=$(tc -n "$ns" qdisc show dev "$dev" root 2>/dev/null |
                sed -n 's/.*tbf.* rate \([^ ]*\).*/\1/p')
            qi=$(tc -n "$SW" qdisc show dev "$(port_name "$i" "$dev")" root 2>/dev/null |
                 sed -n 's/.*tbf.* rate \([^ ]*\).*/\1/p')
            printf '    %-6s %-18s %-6s rate out %-9s in %-9s%s\n' "$dev" \
                "$(ip -n "$ns" -4 -o addr show dev "$dev" | awk '{print $4}')" \
                "$(ip -n "$ns" -o link show dev "$dev" | grep -q 'state UP' && echo up || echo DOWN)" \
                "${q:-unshaped}" "${qi:-unshaped}" \
                "$(case " $bh " in *" $dev "*) echo "  BLACKHOLE (nftables drop)" ;; esac)"
        done
    done
}

# ------------------------------------------------------------- sub-commands
cmd_rate() {
    [ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $prog rate RAIL RATE [NODE]" >&2; exit 2; }
    load_state
    local k i nodes
    k=$(rail_index "$1") || exit 2
    valid_rate "$2" || { echo "$prog rate: bad rate '$2'" >&2; exit 2; }
    nodes=$(nodes_of "${3:-}") || exit 2
    lock
    for i in $nodes; do
        set_rate "$i" "$k" "$2" || die "tc failed on node $i rail$k"
    done
    say "rail$k rate $2 on node(s) $(echo $nodes)"
}

cmd_link() {
    local what=$1; shift
    [ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $prog link-$what RAIL [NODE]" >&2; exit 2; }
    load_state
    local k i nodes
    k=$(rail_index "$1") || exit 2
    nodes=$(nodes_of "${2:-}") || exit 2
    lock
    for i in $nodes; do
        ip -n "$(node_ns "$i")" link set "rail$k" "$what" || die "ip link set rail$k $what on node $i"
    done
    say "rail$k link $what on node(s) $(echo $nodes)"
}

cmd_blackhole() {
    local on=$1; shift
    [ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $prog ${on}blackhole RAIL [NODE]" >&2; exit 2; }
    load_state
    local k i f nodes
    k=$(rail_index "$1") || exit 2
    nodes=$(nodes_of "${2:-}") || exit 2
    lock
    for i in $nodes; do
        f=$STATE/blackhole.$i
        touch "$f"
        if [ -z "$on" ]; then
            echo "rail$k" >>"$f"
        else
            grep -vx "rail$k" "$f" >"$f.new"; mv "$f.new" "$f"
        fi
        nft_apply "$i" || die "nft failed on node $i"
    done
    say "rail$k ${on:+no longer }blackholed on node(s) $(echo $nodes)"
}

cmd_exec() {
    [ $# -ge 2 ] || { echo "usage: $prog exec NODE CMD [ARGS...]" >&2; exit 2; }
    load_state
    local i
    i=$(node_index "$1") || exit 2
    shift
    node_exec "$i" "$@"
}

cmd_hosts() {
    local kind=hydra file=
    while [ $# -gt 0 ]; do
        case $1 in
            --openmpi) kind=openmpi ;;
            -*) echo "$prog hosts: unknown option '$1'" >&2; exit 2 ;;
            *) file=$1 ;;
        esac
        shift
    done
    load_state
    local src=$STATE/hosts
    [ $kind = openmpi ] && src=$STATE/hostfile.openmpi
    if [ -n "$file" ]; then
        cp "$src" "$file" || die "cannot write $file"
        echo "$file"
    else
        echo "$src"
    fi
}

cmd_env() {
    load_state
    local rails='' k devs=''
    for k in $(seq 0 $((RAILS - 1))); do
        rails=$rails${rails:+,}tcp:rail$k
        devs=$devs${devs:+,}rail$k
    done
    cat <<EOF
# cluster '$NAME': $NODES nodes, $RAILS rails ($RATES); start MPI jobs in node0:
#   $(self_cmd "$HERE/") exec 0 MPIEXEC ARGS...
MDR_CLUSTER_NODES=$NODES
MDR_CLUSTER_RAILS=$RAILS
MDR_CLUSTER_HOSTS=$STATE/hosts
MDR_CLUSTER_OMPI_HOSTFILE=$STATE/hostfile.openmpi
MDR_CLUSTER_LAUNCHER=$STATE/netns-launch
MADRAIL_RAILS=$rails
# hydra (our MPICH, Debian's mpiexec.mpich): mpiexec \$MDR_CLUSTER_HYDRA_FLAGS -n 4 -ppn 2 prog
MDR_CLUSTER_HYDRA_FLAGS='-f $STATE/hosts -launcher ssh -launcher-exec $STATE/netns-launch -iface mgmt'
# Debian's MPICH (ch4:ucx), both rails: env \$MDR_CLUSTER_UCX_ENV mpiexec.mpich \$MDR_CLUSTER_HYDRA_FLAGS ...
# (tcp only: UCX's shared-memory transports reach across the namespaces and
# would carry the "remote" traffic)
MDR_CLUSTER_UCX_ENV='UCX_NET_DEVICES=$devs UCX_TLS=tcp,self UCX_MAX_EAGER_RAILS=$RAILS UCX_MAX_RNDV_RAILS=$RAILS'
# Open MPI (ob1, tcp BTL over the rails; as root also OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1):
#   mpirun.openmpi \$MDR_CLUSTER_OMPI_FLAGS -np 4 --map-by ppr:2:node prog
MDR_CLUSTER_OMPI_FLAGS='--hostfile $STATE/hostfile.openmpi --mca plm_rsh_agent $STATE/netns-launch --mca oob_tcp_if_include mgmt --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include $devs --bind-to none'
export MDR_CLUSTER_NODES MDR_CLUSTER_RAILS MDR_CLUSTER_HOSTS MDR_CLUSTER_OMPI_HOSTFILE MDR_CLUSTER_LAUNCHER MADRAIL_RAILS MDR_CLUSTER_HYDRA_FLAGS MDR_CLUSTER_UCX_ENV MDR_CLUSTER_OMPI_FLAGS
EOF
}

# ------------------------------------------------------------- main
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help|help) usage; exit 0 ;;
        --prefix) PREFIX=${2:-}; shift ;;
        --prefix=*) PREFIX=${1#--prefix=} ;;
        *) break ;;
    esac
    shift
done
check_prefix
[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1; shift
case $cmd in
    up) cmd_up "$@" ;;
    down)
        [ "$(id -u)" -eq 0 ] || skip "needs root"
        command -v ip >/dev/null 2>&1 || skip "no 'ip' command"
        lock
        teardown
        say "down: cluster '$NAME' removed" ;;
    status|rate|link-down|link-up|blackhole|unblackhole|exec|hosts|env)
        [ "$(id -u)" -eq 0 ] || skip "needs root"
        case $cmd in
            status) cmd_status "$@" ;;
            rate) cmd_rate "$@" ;;
            link-down) cmd_link down "$@" ;;
            link-up) cmd_link up "$@" ;;
            blackhole) cmd_blackhole "" "$@" ;;
            unblackhole) cmd_blackhole un "$@" ;;
            exec) cmd_exec "$@" ;;
            hosts) cmd_hosts "$@" ;;
            env) cmd_env "$@" ;;
        esac ;;
    *) echo "$prog: unknown command '$cmd' (see --help)" >&2; exit 2 ;;
esac
