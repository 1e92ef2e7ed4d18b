#!/usr/bin/env bash
# lat_loopback.sh -- 8-byte latency on one machine, for differences of a
# few hundredths of a microsecond: madrail_lat over one driver path (with
# one or more libmadrail builds) beside that network's own ping-pong tool
# (fi_pingpong or ucx_perftest), many short runs interleaved.
#
# The loopback counterpart of bench/cluster/lat_median.sh: run_drivers.sh
# gives a few rounds of every path, unpinned; this one gives one path,
# with rank i (and the tool's server and client) bound to core i, the
# systems alternating run by run, and as the verdict the median over the
# rounds of the per-round difference to the first system and to the
# tool.  It measures and prints; nothing is asserted.
set -u
prog=lat_loopback.sh
SRC=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    cat <<EOF
Usage: bench/lat_loopback.sh [options]
  --path P        ofi-shm, ucx-shm, ofi-tcp or ucx-tcp (default ucx-shm): the
                  rails and tool settings of run_drivers.sh
  --rounds N      interleaved rounds (default 15)
  --iters N       round trips per run (default 100000)
  --size BYTES    message size (default 8)
  --lib NAME=DIR  a libmadrail build to measure (its directory, first in
                  LD_LIBRARY_PATH); repeat to compare builds; default:
                  madrail=_install/lib
  --env NAME=V[,V2...]
                  a build run with settings: NAME is one of the --lib
                  names, V are VAR=value words (e.g. MADRAIL_OFI_INJECT=0);
                  repeat for more (each adds a column)
  --no-tool       madrail only
  -h, --help      this text

Needs our build installed (make install: _install/bin/madrail_lat and
_install/mpich/bin/mpiexec) and the tool (libfabric-bin: fi_pingpong;
ucx-utils: ucx_perftest).  About 0.5 s a run at 8 bytes on shm.
EOF
}

PATH_ID=ucx-shm ROUNDS=15 ITERS=100000 SIZE=8 TOOL=1
LIBS=() ENVS=()
while [ $# -gt 0 ]; do
    case $1 in
        --path) PATH_ID=${2:-}; shift ;;
        --rounds) ROUNDS=${2:-}; shift ;;
        --iters) ITERS=${2:-}; shift ;;
        --size) SIZE=${2:-}; shift ;;
        --lib) LIBS+=("${2:-}"); shift ;;
        --env) ENVS+=("${2:-}"); shift ;;
        --no-tool) TOOL=0 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in ROUNDS ITERS SIZE; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] ||
        { echo "$prog: --${v,,} must be a positive integer, not '${!v}'" >&2; exit 2; }
done
case $PATH_ID in
    ofi-shm) RAILS=ofi:shm ;;
    ofi-tcp) RAILS='ofi:tcp;ofi_rxm:lo' ;;
    ucx-shm) RAILS=ucx:shm ;;
    ucx-tcp) RAILS=ucx:tcp:lo ;;
    *) echo "$prog: --path '$PATH_ID': expected ofi-shm, ucx-shm, ofi-tcp or ucx-tcp" >&2; exit 2 ;;
esac
[ ${#LIBS[@]} -gt 0 ] || LIBS=("madrail=$SRC/_install/lib")
declare -A LIBDIR
for l in "${LIBS[@]}"; do
    case $l in
        ?*=?*) [ -d "${l#*=}" ] || { echo "$prog: --lib $l: no directory ${l#*=}" >&2; exit 2; }
               LIBDIR[${l%%=*}]=${l#*=} ;;
        *) echo "$prog: --lib '$l': expected NAME=DIR" >&2; exit 2 ;;
    esac
done
# columns: "name" (a build) or "name|VAR=v VAR2=v2" (a build with settings)
COLS=()
for l in "${LIBS[@]}"; do COLS+=("${l%%=*}"); done
for e in "${ENVS[@]}"; do
    n=${e%%=*} v=${e#*=}
    [ -n "${LIBDIR[$n]:-}" ] && [ "$n" != "$e" ] && [[ $v == *=* ]] ||
        { echo "$prog: --env '$e': expected NAME=VAR=value[,VAR=value] with NAME a --lib name" >&2; exit 2; }
    COLS+=("$n|${v//,/ }")
done
LAT=$SRC/_install/bin/madrail_lat
MPIEXEC=$SRC/_install/mpich/bin/mpiexec
[ -x "$LAT" ] || { echo "$prog: no $LAT (make install)" >&2; exit 2; }
[ -x "$MPIEXEC" ] || { echo "$prog: no $MPIEXEC (./quickstart.sh --no-run builds our MPICH)" >&2; exit 2; }
if [ $TOOL -eq 1 ]; then
    case $PATH_ID in
        ofi-*) command -v fi_pingpong >/dev/null ||
                   { echo "$prog: no fi_pingpong (Debian package libfabric-bin), or --no-tool" >&2; exit 2; }
               COLS+=("fi_pingpong") ;;
        ucx-*) command -v ucx_perftest >/dev/null ||
                   { echo "$prog: no ucx_perftest (Debian package ucx-utils), or --no-tool" >&2; exit 2; }
               COLS+=("ucx_perftest") ;;
    esac
fi

port=$((20000 + $$ % 20000))
# one run of column $1: microseconds, or "-"
run() {
    local c=$1 lib envs
    port=$((port + 1))
    case $c in
    fi_pingpong)
        local prov=shm dev=()
        [ "$PATH_ID" = ofi-tcp ] && prov='tcp;ofi_rxm' dev=(-d lo)
        taskset -c 0 timeout 120 fi_pingpong -p "$prov" "${dev[@]}" -e rdm -S "$SIZE" -I "$ITERS" \
            -B "$port" >/dev/null 2>&1 &
        sleep 0.3
        taskset -c 1 timeout 120 fi_pingpong -p "$prov" "${dev[@]}" -e rdm -S "$SIZE" -I "$ITERS" \
            -P "$port" 127.0.0.1 2>&1 | awk '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 { u = $7 }
                                            END { print (u == "" ? "-" : u) }'
        wait ;;
    ucx_perftest)
        # as run_drivers.sh: on tcp with peer error handling (-e), as the rail has
        local tls=posix,sysv,cma,self devs=all eh=()
        [ "$PATH_ID" = ucx-tcp ] && tls=tcp devs=lo eh=(-e)
        UCX_TLS=$tls UCX_NET_DEVICES=$devs taskset -c 0 timeout 120 ucx_perftest -p "$port" \
            >/dev/null 2>&1 &
        sleep 0.3
        UCX_TLS=$tls UCX_NET_DEVICES=$devs taskset -c 1 timeout 120 ucx_perftest 127.0.0.1 \
            -p "$port" -t ucp_am_lat -s "$SIZE" -n "$ITERS" -w 2000 "${eh[@]}" -f -v 2>&1 |
            awk -F, '$1 ~ /^ *[0-9]+$/ && NF >= 6 { l = $4 } END { print (l == "" ? "-" : l) }'
        wait ;;
    *)
        lib=${LIBDIR[${c%%|*}]} envs=
        [[ $c == *'|'* ]] && envs=${c#*|}
        # shellcheck disable=SC2086
        MADRAIL_RAILS=$RAILS LD_LIBRARY_PATH=$lib timeout 120 "$MPIEXEC" -n 2 env $envs \
            sh -c 'exec taskset -c $PMI_RANK "$@"' sh "$LAT" --min "$SIZE" --max "$SIZE" \
            --iters "$ITERS" 2>&1 | awk -v s="$SIZE" '$1 == s { v = $2 } END { print (v == "" ? "-" : v) }' ;;
    esac
}

echo "# $prog: $PATH_ID ($RAILS), $SIZE bytes, $ROUNDS rounds of $ITERS round trips, $(date -u '+%F %T') UTC"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# round ${COLS[*]}"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
    line=$r
    for c in "${COLS[@]}"; do line="$line $(run "$c")"; done
    echo "$line" | tee -a "$OUT"
    echo "$prog: round $r of $ROUNDS done" >&2
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
# the tool is the last column: each build's paired difference to it too
t=0
[ $TOOL -eq 1 ] && t=$((${#COLS[@]} + 1))
k=2
for c in "${COLS[@]}"; do
    awk -v k=$k -v t=$t -v name="$c" '
        { if ($k != "-") v[n++] = $k; if ($k != "-" && $2 != "-") d[m++] = $k - $2
          if (t > 0 && k < t && $k != "-" && $t != "-") dt[mt++] = $k - $t }
        function med(a, n,   i, j, t) {
            for (i = 1; i < n; i++) for (j = i; j > 0 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2 }
        END {
            if (n == 0) { printf "%-28s no run succeeded\n", name; exit }
            printf "%-28s median %.3f us over %d runs", name, med(v, n), n
            if (k > 2 && m > 0) printf "; minus the first, median of the paired differences: %+.3f us", med(d, m)
            if (mt > 0) printf "; minus the tool: %+.3f us", med(dt, mt)
            printf "\n" }' "$OUT"
    k=$((k + 1))
done
