#!/bin/sh
# Several ranks on one node choose their rails by locality
# (MADRAIL_RAILS=auto, MADRAIL_AUTO_LOCALITY=near), shown by madrail_info -r
# on the two-socket node of test/tools/two_socket.xml (hwloc XML; socket 0:
# PUs 0,2 and NIC ens1f0; socket 1: PUs 1,3 and NIC ens2f0).  The file is
# not this machine, so madrail_info reports, besides this machine's rails,
# what a process bound as it is would choose there; the process is bound
# with taskset, and its affinity is matched to the file's PUs:
#   PU 0 (socket 0)  -> tcp:ens1f0 only, ens2f0 rejected as away
#   PU 1 (socket 1)  -> tcp:ens2f0 only
#   PUs 0-1 (both)   -> both NICs
#   PU 0, MADRAIL_AUTO_LOCALITY=all -> both, the far one warned about
# and the context it opens never uses a device of the file (they do not
# exist here).  Needs hwloc and taskset; the socket-1 cases need 2 PUs.
set -u
info="${MDR_BUILDDIR:-.}/tools/madrail_info"
xml="${MDR_SRCDIR:-$(dirname "$0")/../..}/test/tools/two_socket.xml"
[ -x "$info" ] || { echo "FAIL: $info not built"; exit 1; }
[ -f "$xml" ] || { echo "FAIL: $xml missing"; exit 1; }
if ! grep -q '^#define HAVE_HWLOC 1' "${MDR_BUILDDIR:-.}/mdr_config.h" 2>/dev/null; then
    echo "SKIP: locality: built without hwloc (no locality to test)"
    exit 77
fi
if ! command -v taskset >/dev/null 2>&1; then
    echo "SKIP: locality: no taskset to bind the process"
    exit 77
fi
npu=$(nproc 2>/dev/null || echo 1)

fail=0
ok() { echo "ok - $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# madrail_info -r bound to PU list $1, extra environment after it; hwloc's
# plugins leak under LeakSanitizer (see info.sh): no leak check here.
run() {
    cpus=$1
    shift
    env -u MADRAIL_AUTO_LOCALITY -u MADRAIL_AUTO_MAX_RAILS -u HWLOC_THISSYSTEM \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" MADRAIL_LOG_LEVEL=warn \
        HWLOC_XMLFILE="$xml" "$@" taskset -c "$cpus" "$info" -r 2>&1
}
# the rail list of the "synthetic auto-discovery ...: N rail(s) a,b" line
synth_rails() {
    printf '%s\n' "$1" | sed -n 's/^synthetic auto-discovery .*: [0-9]* rail(s) *//p'
}
# the NAME column of the context's rails table
ctx_rails() {
    printf '%s\n' "$1" | sed -n '/^rails (/,/^topology/p' | awk '$1 ~ /^[0-9]+$/ {print $2}' |
        tr '\n' ' '
}

check_case() { # cpus expect-rails label [env...]
    cpus=$1 want=$2 label=$3
    shift 3
    out=$(run "$cpus" "$@"); rc=$?
    got=$(synth_rails "$out")
    if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then
        ok "$label: $got"
    else
        printf '%s\n' "$out"
        bad "$label: synthetic rails '$got' (exit $rc), want '$want'"
    fi
    # the context of this machine opens only interfaces the kernel has
    # here, never a device that exists only in the file
    ctx=$(ctx_rails "$out")
    missing=
    for r in $ctx; do
        case $r in
            tcp:*) [ -e "/sys/class/net/${r#tcp:}" ] || missing="$missing $r" ;;
        esac
    done
    case " $ctx " in
        *ens1f0* | *ens2f0*) bad "$label: the context opened a device that exists only in the file" ;;
        *) if [ -z "$ctx" ] || [ -n "$missing" ]; then
               bad "$label: context rails '$ctx' (not on this machine:$missing)"
           else
               ok "$label: the context's rails ($ctx) are devices of this machine"
           fi ;;
    esac
}

check_case 0 "tcp:ens1f0" "bound to PU 0 (socket 0)"
printf '%s\n' "$out" | grep -q 'this process is bound to PU(s) 0 (NUMA node(s) 0)' &&
    ok "PU 0: the binding is read from the process's affinity (NUMA node 0)" ||
    bad "PU 0: no 'bound to PU(s) 0 (NUMA node(s) 0)' line"
printf '%s\n' "$out" | grep -Eq '^  ens1f0 +iface +0000:17:00.0 +0 +0,2 +near ' &&
    printf '%s\n' "$out" | grep -Eq '^  ens2f0 +iface +0000:b1:00.0 +1 +1,3 +far ' &&
    ok "PU 0: ens1f0 near (NUMA 0, PUs 0,2), ens2f0 far (NUMA 1, PUs 1,3)" ||
    bad "PU 0: device locality rows"
printf '%s\n' "$out" | grep -Eq '^  ens2f0 +rejected: on NUMA node 1, away from the binding' &&
    ok "PU 0: ens2f0 rejected as away from the binding" || bad "PU 0: no verdict for ens2f0"

check_case 0 "tcp:ens1f0,tcp:ens2f0" "bound to PU 0, MADRAIL_AUTO_LOCALITY=all" \
    MADRAIL_AUTO_LOCALITY=all
printf '%s\n' "$out" | grep -q 'warning: rail 1 (tcp:ens2f0) sits on NUMA node 1' &&
    ok "=all: the far rail is warned about" || bad "=all: no far-NUMA warning"

out=$(run 0 MADRAIL_AUTO_LOCALITY=nearest); rc=$?
[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q 'MADRAIL_AUTO_LOCALITY=nearest' &&
    ok "a bad MADRAIL_AUTO_LOCALITY is refused by name" ||
    bad "MADRAIL_AUTO_LOCALITY=nearest: exit $rc, not named"

if [ "$npu" -ge 2 ]; then
    check_case 1 "tcp:ens2f0" "bound to PU 1 (socket 1)"
    check_case 0-1 "tcp:ens1f0,tcp:ens2f0" "bound to PUs 0-1 (both sockets)"
else
    echo "note: 1 PU here: the socket-1 and both-socket cases are not run"
fi

[ $fail -eq 0 ] && echo "PASS: locality"
exit $fail
