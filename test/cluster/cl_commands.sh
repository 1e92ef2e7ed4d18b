#!/bin/sh
# cl_commands.sh -- cluster.sh itself, command by command, on a 3-node,
# 2-rail cluster: every node has its own host name, seen directly and
# through the launcher wrapper under hydra; the rails are listed in the same
# order on every node; no node has a route out of the cluster; rate changes
# both ends of one node's link only; link-down cuts a rail (and link-up
# restores it); blackhole makes a rail drop everything while its link stays
# up (and unblackhole restores it); bad arguments are refused; a second
# `up` over a crashed cluster (a process left in a node, a bigger cluster
# left behind) cleans up first; `down` leaves nothing.  Needs root and
# `ip netns` (SKIP otherwise).
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_up mdrtc- --nodes 3 --rails 2 --rate 1gbit

ns0=mdrtc-node0 ns1=mdrtc-node1 ns2=mdrtc-node2

# --- names
for i in 0 1 2; do
    h=$(cl_cluster exec $i hostname)
    [ "$h" = "mdrtc-node$i" ] && ok "node$i: host name $h" || bad "node$i: host name '$h'"
done
if command -v mpiexec.hydra >/dev/null 2>&1; then
    # A run that printed nothing was seen once, in a CI run of the whole
    # suite, and not again in 13 runs alone or under load: a failed run is
    # reported with its exit status (124: the 30 s ran out) and made once
    # more; a wrapper that is broken fails both.
    want="mdrtc-node0 mdrtc-node1 mdrtc-node2 "
    for try in 1 2; do
        got=$(cl_cluster exec 0 sh -c "timeout 30 mpiexec.hydra $MDR_CLUSTER_HYDRA_FLAGS -n 3 -ppn 1 hostname; echo \"rc=\$?\"" 2>&1 |
              sort | tr '\n' ' ')
        [ "$got" = "${want}rc=0 " ] && break
        echo "note: mpiexec.hydra through the wrapper, try $try, printed '$got'"
    done
    [ "$got" = "${want}rc=0 " ] &&
        ok "mpiexec.hydra -n 3 -ppn 1 hostname through the wrapper: ${got% rc=0 }" ||
        bad "mpiexec.hydra through the wrapper printed '$got' in two tries"
else
    echo "note: no mpiexec.hydra: the launcher wrapper is not exercised here"
fi
# the wrapper skips ssh options and maps a management address to its node
got=$("$MDR_CLUSTER_LAUNCHER" -x -o StrictHostKeyChecking=no -p 22 198.18.0.2 'echo $(hostname)' 2>&1)
[ "$got" = mdrtc-node1 ] && ok "wrapper: ssh options skipped, 198.18.0.2 is node1" ||
    bad "wrapper with ssh options: '$got'"
"$MDR_CLUSTER_LAUNCHER" nosuchhost true 2>/dev/null
rc=$?
[ $rc -eq 255 ] && ok "wrapper: unknown host refused (255, as ssh)" || bad "wrapper: unknown host gave exit $rc"

# --- order, isolation
st=$(cl_cluster status)
echo "$st"
n=$(printf '%s\n' "$st" | sed -n 's/.*order: //p' | sort -u | wc -l)
[ "$n" -eq 1 ] && ok "rails listed in the same order on every node" || bad "rail order differs between nodes"
for ns in $ns0 $ns1 $ns2 mdrtc-sw; do
    r=$(ip -n $ns route show default)
    [ -z "$r" ] || bad "$ns has a default route: $r"
done
[ -z "$(ip -n mdrtc-sw -4 addr show | grep inet | grep -v 127.0.0.1)" ] &&
    ok "no default route in any namespace, the switch has no address" ||
    bad "the switch namespace has an address"

reach() { # reach NODE ADDR: one ping
    cl_cluster exec "$1" ping -q -n -c 1 -W 1 "$2" >/dev/null 2>&1
}
reach 0 198.18.10.2 && reach 0 198.18.11.3 && reach 2 198.18.0.2 &&
    ok "rails and mgmt reachable" || bad "rails or mgmt not reachable after up"

# --- rate
cl_cluster rate rail1 300mbit 1 >/dev/null || bad "rate rail1 300mbit 1 failed"
q1=$(tc -n $ns1 qdisc show dev rail1 root)
qs=$(tc -n mdrtc-sw qdisc show dev n1-rail1 root)
q0=$(tc -n $ns0 qdisc show dev rail1 root)
case "$q1 / $qs / $q0" in
    *"rate 300Mbit"*/*"rate 300Mbit"*/*"rate 1Gbit"*) ok "rate: node1 rail1 300Mbit both ends, node0 still 1Gbit" ;;
    *) bad "rate: node1 '$q1', its switch port '$qs', node0 '$q0'" ;;
esac
cl_cluster rate 1 none >/dev/null || bad "rate 1 none failed"
[ -z "$(tc -n $ns0 qdisc show dev rail1 root | grep tbf)" ] && ok "rate none: unshaped" || bad "rate none left a tbf"
cl_cluster rate 1 fast >/dev/null 2>&1
[ $? -eq 2 ] && ok "rate 'fast' refused (usage error)" || bad "rate 'fast' not refused"
cl_cluster link-down 0 7 >/dev/null 2>&1
[ $? -eq 2 ] && ok "node 7 refused" || bad "node 7 not refused"

# --- link-down / link-up
cl_cluster link-down rail0 1 >/dev/null || bad "link-down failed"
ip -n $ns1 link show rail0 | grep -q 'state DOWN' && ! reach 0 198.18.10.2 && reach 0 198.18.10.3 &&
    ok "link-down rail0 node1: down, unreachable; node2 still reachable" || bad "link-down rail0 node1"
cl_cluster link-up 0 >/dev/null || bad "link-up failed"
i=0
until reach 0 198.18.10.2 || [ $i -ge 5 ]; do sleep 1; i=$((i + 1)); done
reach 0 198.18.10.2 && ok "link-up: reachable again" || bad "link-up: rail0 of node1 still unreachable"

# --- blackhole / unblackhole
cl_cluster blackhole 1 1 >/dev/null || bad "blackhole failed"
ip -n $ns1 link show rail1 | grep -q 'state UP' && ! reach 0 198.18.11.2 && reach 0 198.18.10.2 &&
    reach 0 198.18.11.3 && ok "blackhole rail1 node1: link up, nothing passes; rail0 and node2 fine" ||
    bad "blackhole rail1 node1"
cl_cluster status | grep -q 'rail1 .*BLACKHOLE' && ok "status shows the black hole" ||
    bad "status does not show the black hole"
cl_cluster unblackhole 1 >/dev/null || bad "unblackhole failed"
reach 0 198.18.11.2 && [ -z "$(cl_cluster exec 1 nft list tables)" ] &&
    ok "unblackhole: reachable, no nftables table left" || bad "unblackhole"

# --- a crash: a process left in a node, then `up` again (smaller)
cl_cluster exec 2 sleep 300 &
sleep 1
[ -n "$(ip netns pids $ns2)" ] || bad "no process in node2 to leave behind"
cl_cluster up --nodes 2 --rails 1 >/dev/null 2>&1 || bad "second up failed"
left=$(ip netns list | awk '{print $1}' | grep '^mdrtc-' | sort | tr '\n' ' ')
[ "$left" = "mdrtc-node0 mdrtc-node1 mdrtc-sw " ] && ok "up over a crashed cluster: cleaned, now $left" ||
    bad "after the second up: namespaces '$left'"
wait
[ "$(cl_cluster exec 1 hostname)" = mdrtc-node1 ] && reach 0 198.18.10.2 &&
    ok "the new cluster works" || bad "the new cluster does not work"

# --- down
cl_cluster down >/dev/null || bad "down failed"
[ -z "$(ip netns list | grep '^mdrtc-')" ] && [ ! -e /run/madrail-cluster/mdrtc ] &&
    [ ! -e /etc/netns/mdrtc-node0 ] && ok "down: no namespace, state or /etc/netns entry left" ||
    bad "down left something"
cl_cluster status >/dev/null
[ $? -eq 3 ] && ok "status after down: 3 (down)" || bad "status after down"
cl_finish
