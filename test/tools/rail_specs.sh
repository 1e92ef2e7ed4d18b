#!/bin/sh
# rail_specs.sh -- MADRAIL_RAILS and MADRAIL_RAIL_WEIGHTS are parsed
# strictly, as a user meets them through madrail_info -r: an empty element
# (two commas, a comma at either end), a ':' with nothing after it, a
# driver that needs a device given none, a device that does not exist and
# a bad weight list each fail context creation (madrail_info exits 1) with
# an error naming the variable, its value and the bad part; well-formed
# lists still open.  Table-driven: one line per case, cases of drivers this
# build lacks are skipped (mdr_config.h says which are built).
set -u
info="${MDR_BUILDDIR:-.}/tools/madrail_info"
cfg="${MDR_BUILDDIR:-.}/mdr_config.h"
[ -x "$info" ] || { echo "FAIL: $info not built"; exit 1; }
fail=0
n=0

have() {
    case $1 in
        tcp|loop) return 0 ;;
        shm) grep -q '^#define MDR_HAVE_SHM 1' "$cfg" 2>/dev/null ;;
        ucx) grep -q '^#define HAVE_UCX 1' "$cfg" 2>/dev/null ;;
        ofi) grep -q '^#define HAVE_LIBFABRIC 1' "$cfg" 2>/dev/null ;;
        *) return 1 ;;
    esac
}

# bad VAR DRIVER VALUE NEEDLE [OTHER_ENV]: VAR=VALUE must fail with exit 1,
# a message with "VAR=VALUE" and the text NEEDLE (the bad part).
bad() {
    var=$1 drv=$2 val=$3 needle=$4 extra=${5:-}
    n=$((n + 1))
    if ! have "$drv"; then
        echo "skip - $var='$val' (driver $drv not built)"
        return
    fi
    # shellcheck disable=SC2086
    out=$(env $extra "$var=$val" "$info" -r 2>&1)
    rc=$?
    if [ $rc -ne 1 ]; then
        echo "FAIL - $var='$val': exit $rc, want 1 (a configuration error)"
        echo "$out" | sed 's/^/    | /'
        fail=1
    elif ! printf '%s\n' "$out" | grep -qF -- "$var=$val"; then
        echo "FAIL - $var='$val': no message names the variable and its value"
        echo "$out" | sed 's/^/    | /'
        fail=1
    elif ! printf '%s\n' "$out" | grep -qF -- "$needle"; then
        echo "FAIL - $var='$val': no message names '$needle'"
        echo "$out" | sed 's/^/    | /'
        fail=1
    else
        echo "ok - $var='$val' refused: $(printf '%s\n' "$out" | grep -F -- "$needle" | head -n 1 |
            sed 's/^.*error: //')"
    fi
}

# good VAR DRIVER VALUE [OTHER_ENV]: opens (exit 0).
good() {
    var=$1 drv=$2 val=$3 extra=${4:-}
    n=$((n + 1))
    if ! have "$drv"; then
        echo "skip - $var='$val' (driver $drv not built)"
        return
    fi
    # shellcheck disable=SC2086
    out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
          env $extra "$var=$val" "$info" -r 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL - $var='$val': exit $rc, want 0"
        echo "$out" | sed 's/^/    | /'
        fail=1
    else
        echo "ok - $var='$val' opens"
    fi
}

R=MADRAIL_RAILS
W=MADRAIL_RAIL_WEIGHTS
# empty elements
bad $R tcp 'tcp:lo,,tcp:lo' 'rail 2 of the list is empty'
bad $R tcp 'tcp:lo,' 'rail 2 of the list is empty'
bad $R tcp ',tcp:lo' 'rail 1 of the list is empty'
bad $R loop 'loop:a, ,loop:b' 'rail 2 of the list is empty'
# ':' with nothing after it, and drivers that need a device given none
bad $R tcp 'tcp:' "rail spec tcp:: nothing after ':'"
bad $R tcp 'tcp:lo,tcp:' "rail spec tcp:: nothing after ':'"
bad $R tcp 'tcp' 'rail spec tcp:: no interface or IPv4 address'
bad $R tcp 'tcp:;port=0' 'rail spec tcp:;port=0: no interface or IPv4 address'
bad $R loop 'loop' 'expected a fabric name'
bad $R shm 'shm:' "rail spec shm:: nothing after ':'"
bad $R ucx 'ucx:' "rail spec ucx:: nothing after ':'"
bad $R ucx 'ucx:lo:' "rail spec ucx:lo:: empty part between ':'"
bad $R ucx 'ucx:tcp::lo' "rail spec ucx:tcp::lo: empty part between ':'"
bad $R ofi 'ofi' 'names neither a provider nor a device'
bad $R ofi 'ofi::' 'names neither a provider nor a device'
bad $R ofi 'ofi:auto' 'names neither a provider nor a device'
# devices that do not exist
bad $R tcp 'tcp:nosuchif0' "no interface or IPv4 address 'nosuchif0'"
bad $R tcp 'tcp:lo,tcp:192.0.2.77' 'address 192.0.2.77 is not assigned'
bad $R shm 'shm:bad/name' 'rail spec shm:bad/name'
bad $R ucx 'ucx:nosuchif0' 'rail spec ucx:nosuchif0'
bad $R ofi 'ofi::nosuchif0' "no provider qualifies for device 'nosuchif0'"
# weights: count, emptiness, sign, finiteness
bad $W loop '3' '1 weights for 2 rails' "$R=loop:w1,loop:w2"
bad $W loop '3,1,1' '3 weights for 2 rails' "$R=loop:w1,loop:w2"
bad $W loop '3,,1' 'empty weight' "$R=loop:w1,loop:w2"
bad $W loop '3,' 'empty weight' "$R=loop:w1,loop:w2"
bad $W loop '0,1' 'must be > 0' "$R=loop:w1,loop:w2"
bad $W loop '-1,1' 'must be > 0' "$R=loop:w1,loop:w2"
bad $W loop 'inf,1' 'not a number' "$R=loop:w1,loop:w2"
bad $W loop 'nan,1' 'not a number' "$R=loop:w1,loop:w2"
bad $W loop '1e-400,1' 'must be > 0' "$R=loop:w1,loop:w2"
# well-formed lists still open
good $R tcp 'tcp:lo'
good $R tcp 'tcp:lo, tcp:127.0.0.1'
good $R loop 'loop:a,loop:b;delay=1'
good $R shm 'shm,tcp:lo'
good $W loop ' 3 , 1 ' "$R=loop:w1,loop:w2"

if [ $fail -eq 0 ]; then
    echo "PASS: rail_specs ($n cases)"
fi
exit $fail
