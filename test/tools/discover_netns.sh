#!/bin/sh
# Rail discovery on a machine built for the test: network namespace A with
# two veth rails (dr0, dr1, their peers in namespace B), a third veth that
# is down (dr2) and lo up.  madrail_info -r run inside A must open a
# context on exactly tcp:dr0 and tcp:dr1 (lo and the down link rejected,
# each with its reason), and two processes started there (when mpiexec
# exists) must stripe a validated transfer over both; with both rails down
# it must fall back to tcp:lo; MADRAIL_AUTO_MAX_RAILS=1 must keep one rail;
# seen through an hwloc XML two-socket topology, a process bound to one
# socket opens only that socket's rail (MADRAIL_AUTO_LOCALITY=near), two
# ranks bound to the two sockets each open their own and exchange data,
# and with MADRAIL_AUTO_LOCALITY=all the far rail is warned about and the
# cap keeps the near one.  Needs root and `ip netns`:
# skips (77) otherwise.  The namespaces are removed on any exit.
set -u
info="${MDR_BUILDDIR:-.}/tools/madrail_info"
[ -x "$info" ] || { echo "FAIL: $info not built"; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: discover_netns: needs root to create network namespaces"
    exit 77
fi
if ! command -v ip >/dev/null 2>&1 || ! ip netns list >/dev/null 2>&1; then
    echo "SKIP: discover_netns: 'ip netns' is not available"
    exit 77
fi

ns_a=mdrdisc$$a
ns_b=mdrdisc$$b
cleanup() {
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if ! ip netns add "$ns_a" 2>/dev/null; then
    echo "SKIP: discover_netns: 'ip netns add' is not permitted here"
    exit 77
fi
ip netns add "$ns_b" || { echo "FAIL: ip netns add $ns_b"; exit 1; }
for n in 0 1 2; do
    ip link add dr$n netns "$ns_a" type veth peer name dr$n netns "$ns_b" &&
        ip -n "$ns_a" addr add 10.23$n.0.1/24 dev dr$n &&
        ip -n "$ns_b" addr add 10.23$n.0.2/24 dev dr$n || { echo "FAIL: veth dr$n"; exit 1; }
done
for n in 0 1; do
    ip -n "$ns_a" link set dr$n up && ip -n "$ns_b" link set dr$n up ||
        { echo "FAIL: link dr$n up"; exit 1; }
done
ip -n "$ns_a" link set lo up || { echo "FAIL: lo up"; exit 1; }

# hwloc's plugins leak under LeakSanitizer (see info.sh); not madrail's.
run_info() {
    ip netns exec "$ns_a" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        MADRAIL_LOG_LEVEL=warn "$@" "$info" -r 2>&1
}
# the NAME column of the rails table (lines "  <index> <name> <driver> ...")
rails_of() {
    printf '%s\n' "$1" | sed -n '/^rails (/,/^topology/p' | awk '$1 ~ /^[0-9]+$/ {print $2}' |
        tr '\n' ' '
}

fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

out=$(run_info env -u MADRAIL_RAILS); rc=$?
echo "$out"
[ $rc -eq 0 ] || bad "madrail_info -r in $ns_a exited $rc"
got=$(rails_of "$out")
case " $got " in *" tcp:dr0 "*) ok "tcp:dr0 opened" ;; *) bad "tcp:dr0 not opened (rails: $got)" ;; esac
case " $got " in *" tcp:dr1 "*) ok "tcp:dr1 opened" ;; *) bad "tcp:dr1 not opened (rails: $got)" ;; esac
case " $got " in *" tcp:lo "*) bad "tcp:lo opened although two veths are up" ;; *) ok "lo not opened" ;; esac
case " $got " in *" tcp:dr2 "*) bad "tcp:dr2 opened although it is down" ;; *) ok "dr2 not opened" ;; esac
[ "$got" = "tcp:dr0 tcp:dr1 " ] && ok "exactly tcp:dr0 tcp:dr1" || bad "rails are '$got'"
printf '%s\n' "$out" | grep -Eq '^  lo +rejected: loopback' && ok "lo: rejected as loopback" ||
    bad "no 'lo rejected: loopback' line"
printf '%s\n' "$out" | grep -Eq '^  dr2 +rejected: link down' && ok "dr2: rejected, link down" ||
    bad "no 'dr2 rejected: link down' line"
printf '%s\n' "$out" | grep -Eq '^  dr[01] +chosen: rail [01] tcp:dr[01]' && ok "verdict lines for the rails" ||
    bad "no 'chosen' verdict line"
printf '%s\n' "$out" | grep -Eq '^  dr0 +iface +\(virtual\)' && ok "dr0 listed as a virtual interface" ||
    bad "dr0 missing from the device table"
[ "$(printf '%s\n' "$out" | grep -c 'warning:')" -eq 0 ] && ok "no warning" || bad "unexpected warning"

# Two processes in the namespace, rails discovered: both rails carry the
# striped puts and every byte arrives (needs mpiexec; traffic stays on
# the namespace's own addresses).
mpiexec=$(command -v mpiexec.hydra || command -v mpiexec || true)
bw="${MDR_BUILDDIR:-.}/bench/madrail_bw"
if [ -n "$mpiexec" ] && [ -x "$bw" ]; then
    out=$(ip netns exec "$ns_a" env -u MADRAIL_RAILS MADRAIL_STATS=1 \
              ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
              timeout 120 "$mpiexec" -n 2 "$bw" --validate --min 1m --max 4m --iters 3 2>&1)
    rc=$?
    # rows "[host:pid] madrail stats: <i> <name> tx_msgs tx_bytes tx_put_bytes ...": rails that put
    puts=$(printf '%s\n' "$out" | awk '/madrail stats: [0-9]/ && $8 > 0 {print $5}' | sort -u |
               tr '\n' ' ')
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "validation: 0 bad bytes" &&
        [ "$puts" = "tcp:dr0 tcp:dr1 " ]; then
        ok "madrail_bw over the discovered rails: 0 bad bytes, puts on $puts"
    else
        echo "$out"
        bad "madrail_bw over the discovered rails (exit $rc, rails with puts: '$puts')"
    fi
else
    echo "note: no mpiexec or madrail_bw: transfer over the discovered rails not run"
fi

out=$(run_info env -u MADRAIL_RAILS MADRAIL_AUTO_MAX_RAILS=1); rc=$?
got=$(rails_of "$out")
[ $rc -eq 0 ] && [ "$got" = "tcp:dr0 " ] && ok "MADRAIL_AUTO_MAX_RAILS=1: tcp:dr0 only" ||
    { echo "$out"; bad "MADRAIL_AUTO_MAX_RAILS=1: rails '$got' (exit $rc)"; }

# Locality through hwloc: the same namespace seen as a two-socket machine
# (an hwloc XML topology: dr1 on a PCI device of socket 0 / NUMA node 0,
# dr0 on socket 1 / NUMA node 1), the process bound to PU 0.  dr0 is far:
# a warning names it; with one rail allowed the near dr1 wins although
# dr0 comes first by name.  Needs 2 PUs and taskset.
if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null 2>&1 &&
    grep -q '^#define HAVE_HWLOC 1' "${MDR_BUILDDIR:-.}/mdr_config.h" 2>/dev/null; then
    xml=$(mktemp /tmp/mdrdisc.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
    trap 'cleanup; rm -f "$xml"' EXIT
    obj() { # type os_index cpuset nodeset gp
        printf '<object type="%s" os_index="%s" cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s" gp_index="%s"' \
            "$1" "$2" "$3" "$3" "$4" "$4" "$5"
    }
    nic() { # gp busid bus name
        printf '<object type="Bridge" gp_index="%s" bridge_type="0-1" depth="0" bridge_pci="0000:[%s-%s]">' "$1" "$3" "$3"
        printf '<object type="PCIDev" gp_index="%s" pci_busid="%s" pci_type="0200 [8086:1593] [8086:0000] 02" pci_link_speed="0"><object type="OSDev" gp_index="%s" name="%s" osdev_type="2"/></object></object>\n' \
            "$(($1 + 1))" "$2" "$(($1 + 2))" "$4"
    }
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo '<!DOCTYPE topology SYSTEM "hwloc2.dtd">'
        echo '<topology version="2.0">'
        obj Machine 0 0x3 0x3 1; echo ' allowed_cpuset="0x3" allowed_nodeset="0x3">'
        obj Package 0 0x1 0x1 2; echo '>'
        obj NUMANode 0 0x1 0x1 3; echo ' local_memory="1073741824"/>'
        obj Core 0 0x1 0x1 4; echo '>'; obj PU 0 0x1 0x1 5; echo '/></object>'
        nic 6 0000:17:00.0 17 dr1
        echo '</object>'
        obj Package 1 0x2 0x2 10; echo '>'
        obj NUMANode 1 0x2 0x2 11; echo ' local_memory="1073741824"/>'
        obj Core 1 0x2 0x2 12; echo '>'; obj PU 1 0x2 0x2 13; echo '/></object>'
        nic 14 0000:b1:00.0 b1 dr0
        echo '</object></object></topology>'
    } >"$xml"
    # MADRAIL_AUTO_LOCALITY=near (the default): bound to socket 0, only
    # socket 0's NIC; the other is rejected with its reason.
    out=$(run_info env -u MADRAIL_RAILS HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 taskset -c 0); rc=$?
    got=$(rails_of "$out")
    printf '%s\n' "$out" | sed -n '/^topology/,$p'
    [ $rc -eq 0 ] && [ "$got" = "tcp:dr1 " ] && ok "two sockets, bound to PU 0: the near tcp:dr1 only" ||
        bad "two sockets, bound to PU 0: rails '$got' (exit $rc)"
    printf '%s\n' "$out" | grep -Eq '^  dr0 +iface +0000:b1:00.0 +1 +1 +far ' &&
        printf '%s\n' "$out" | grep -Eq '^  dr1 +iface +0000:17:00.0 +0 +0 +near ' &&
        ok "two sockets: dr0 far on NUMA 1, dr1 near on NUMA 0" || bad "two sockets: locality rows wrong"
    printf '%s\n' "$out" | grep -Eq '^  dr0 +rejected: on NUMA node 1, away from the binding' &&
        ok "two sockets: dr0 rejected as away from the binding" || bad "two sockets: no far verdict for dr0"
    out=$(run_info env -u MADRAIL_RAILS HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 taskset -c 1); rc=$?
    got=$(rails_of "$out")
    [ $rc -eq 0 ] && [ "$got" = "tcp:dr0 " ] && ok "two sockets, bound to PU 1: the near tcp:dr0 only" ||
        bad "two sockets, bound to PU 1: rails '$got' (exit $rc)"
    # =all: both, and the far one is warned about
    out=$(run_info env -u MADRAIL_RAILS HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 \
              MADRAIL_AUTO_LOCALITY=all taskset -c 0); rc=$?
    got=$(rails_of "$out")
    [ $rc -eq 0 ] && [ "$got" = "tcp:dr0 tcp:dr1 " ] && ok "MADRAIL_AUTO_LOCALITY=all: both rails ($got)" ||
        bad "MADRAIL_AUTO_LOCALITY=all: rails '$got' (exit $rc)"
    printf '%s\n' "$out" | grep -q 'warning: rail 0 (tcp:dr0) sits on NUMA node 1' &&
        ok "MADRAIL_AUTO_LOCALITY=all: warning for the far rail" || bad "=all: no far-NUMA warning"
    # Two ranks on this node, bound to different sockets (hydra's MPMD
    # form, each under taskset): each opens the NIC of its own socket and
    # a validated transfer runs between them.
    if [ -n "$mpiexec" ] && [ -x "$bw" ]; then
        out=$(ip netns exec "$ns_a" env -u MADRAIL_RAILS MADRAIL_STATS=1 HWLOC_XMLFILE="$xml" \
                  HWLOC_THISSYSTEM=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
                  timeout 120 "$mpiexec" \
                  -n 1 sh -c 'echo "bound-pid $$ pu 0"; exec taskset -c 0 "$@"' sh "$bw" \
                  --validate --min 1m --max 1m --iters 2 : \
                  -n 1 sh -c 'echo "bound-pid $$ pu 1"; exec taskset -c 1 "$@"' sh "$bw" \
                  --validate --min 1m --max 1m --iters 2 2>&1)
        rc=$?
        # "bound-pid <pid> pu <n>" from each wrapper, then the process's
        # stats rows "[host:pid] madrail stats: <i> <name> ...": PU -> rails
        got=$(printf '%s\n' "$out" | awk '
            $1 == "bound-pid" { pu[$2] = $4 }
            /madrail stats: [0-9]/ { p = $1; sub(/^.*:/, "", p); sub(/\]$/, "", p); r[p] = r[p] " " $5 }
            END { for (p in pu) print "PU" pu[p] ":" r[p] }' | sort | tr '\n' ';')
        if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "validation: 0 bad bytes" &&
            [ "$got" = "PU0: tcp:dr1;PU1: tcp:dr0;" ]; then
            ok "two ranks bound to two sockets: each uses its socket's NIC ($got), 0 bad bytes"
        else
            echo "$out"
            bad "two ranks bound to two sockets (exit $rc, rails per binding: '$got')"
        fi
    fi
    out=$(run_info env -u MADRAIL_RAILS HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 \
              MADRAIL_AUTO_LOCALITY=all MADRAIL_AUTO_MAX_RAILS=1 taskset -c 0); rc=$?
    got=$(rails_of "$out")
    [ $rc -eq 0 ] && [ "$got" = "tcp:dr1 " ] && ok "two sockets, one rail: the near tcp:dr1" ||
        bad "two sockets, one rail: '$got' (exit $rc)"
    out=$(run_info env -u MADRAIL_RAILS HWLOC_XMLFILE="$xml" HWLOC_THISSYSTEM=1 \
              MADRAIL_AUTO_LOCALITY=all MADRAIL_AUTO_MAX_RAILS=1 taskset -c 1); rc=$?
    got=$(rails_of "$out")
    [ $rc -eq 0 ] && [ "$got" = "tcp:dr0 " ] && ok "bound to PU 1, one rail: the near tcp:dr0" ||
        bad "bound to PU 1, one rail: '$got' (exit $rc)"
else
    echo "note: fewer than 2 PUs, no taskset or no hwloc: the two-socket locality case not run"
fi

ip -n "$ns_a" link set dr0 down && ip -n "$ns_a" link set dr1 down
out=$(run_info env MADRAIL_RAILS=auto); rc=$?
got=$(rails_of "$out")
[ $rc -eq 0 ] && [ "$got" = "tcp:lo " ] && ok "every veth down: falls back to tcp:lo" ||
    { echo "$out"; bad "every veth down: rails '$got' (exit $rc)"; }

[ $fail -eq 0 ] && echo "PASS: discover_netns"
exit $fail
