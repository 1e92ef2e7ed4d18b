#!/bin/sh
# Rail discovery on a machine built for the test: network namespace A with
# two veth rails (dr0, dr1, their peers in namespace B), a third veth that
# is down (dr2) and lo up.  madrail_info -r run inside A must open a
# context on exactly tcp:dr0 and tcp:dr1 (lo and the down link rejected,
# each with its reason), and two processes started there (when mpiexec
# exists) must stripe a validated transfer over both; with both rails down
# it must fall back to tcp:lo; MADRAIL_AUTO_MAX_RAILS=1 must keep one rail.  Needs root and `ip netns`:
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

ip -n "$ns_a" link set dr0 down && ip -n "$ns_a" link set dr1 down
out=$(run_info env MADRAIL_RAILS=auto); rc=$?
got=$(rails_of "$out")
[ $rc -eq 0 ] && [ "$got" = "tcp:lo " ] && ok "every veth down: falls back to tcp:lo" ||
    { echo "$out"; bad "every veth down: rails '$got' (exit $rc)"; }

[ $fail -eq 0 ] && echo "PASS: discover_netns"
exit $fail
