#!/usr/bin/env bash
# ucx_vs_perftest.sh -- the ucx rail next to UCX's own ucx_perftest on the
# same transports, measured side by side in one run: for each case the
# madrail benchmark and the tool alternate (madrail, tool, madrail, tool, ...)
# for ROUNDS rounds and the medians are compared.  Only ratios within one
# run mean anything on a shared machine, hence the interleaving.
#
# Cases (each: madrail command | ucx_perftest command):
#   lat-tcp    madrail_lat 8 B, ucx:tcp:lo   | ucp_am_lat 8 B, UCX_TLS=tcp lo
#   lat-tcp-e  the same tool run with -e (peer error handling, as the rail)
#   lat-shm    madrail_lat 8 B, ucx:shm      | ucp_am_lat, posix,sysv,cma,self
#   bw-shm     madrail_bw 4 MiB, ucx:shm     | ucp_put_bw 4 MiB, sysv,posix,cma,self
#   bw-shm-am  (tool only) ucp_am_bw 4 MiB: AM rendezvous, cma zero copy
#   bw-tcp     madrail_bw 4 MiB, ucx:tcp:lo  | ucp_put_bw 4 MiB, tcp lo
# The tool prints bandwidth in MiB/s (2^20 bytes); madrail_bw in MB/s (1e6
# bytes): the tool's numbers are converted to MB/s here.
# BASE_LIBDIR=dir adds a third column, the same madrail benchmark run with
# dir first in LD_LIBRARY_PATH (e.g. a copy of an earlier libmadrail.so),
# interleaved as well: before/after numbers from one run.  Point BINDIR at
# the real binaries then (bench/.libs, with LD_LIBRARY_PATH=.libs for the
# current library): libtool's wrappers would override LD_LIBRARY_PATH.
# MADRAIL_UCX_CMP_CASES selects some (space separated); MADRAIL_UCX_CMP_RAILS_<case>
# overrides the madrail rail spec of a case (e.g. to try a spec option).
set -u

ROUNDS=${ROUNDS:-3}
MPIEXEC=${MPIEXEC:-mpiexec}
BINDIR=${BINDIR:-$(dirname "$0")}
PORT=${PORT:-13471}
CASES=${MADRAIL_UCX_CMP_CASES:-"lat-tcp lat-tcp-e lat-shm bw-shm bw-shm-am bw-tcp"}
SHM_TLS=posix,sysv,cma,self

command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (ucx-utils)"; exit 77; }
command -v "$MPIEXEC" >/dev/null || { echo "$MPIEXEC not found"; exit 77; }

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }

# madrail run: prints the number for the single size
mdr() { # rails bench args...
    local rails=$1; shift
    MADRAIL_RAILS=$rails timeout 120 "$MPIEXEC" -n 2 "$BINDIR/$@" 2>/dev/null |
        awk '/^ *[0-9]/ {v=$2} END {print v}'
}

# the same with the baseline library, when BASE_LIBDIR is set
base() {
    [ -n "${BASE_LIBDIR:-}" ] || return 0
    LD_LIBRARY_PATH=$BASE_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} mdr "$@"
}

# tool run: "$tls" "$what" args...; what = lat (avg us) or bw (MB/s)
tool() {
    local tls=$1 what=$2; shift 2
    local dev=()
    case $tls in tcp) dev=(UCX_NET_DEVICES=lo) ;; esac
    PORT=$((PORT + 1))
    env UCX_TLS=$tls "${dev[@]}" timeout 120 ucx_perftest -p $PORT "$@" >/dev/null 2>&1 &
    local srv=$!
    sleep 0.5
    env UCX_TLS=$tls "${dev[@]}" timeout 120 ucx_perftest 127.0.0.1 -p $PORT -f -v "$@" 2>/dev/null |
        awk -F, -v w="$what" '/^ *[0-9]/ {v = (w == "lat") ? $3 : $5 * 1.048576} END {print v}'
    wait $srv 2>/dev/null
}

run_case() {
    local c=$1 rails m t b args mv=() tv=() bv=()
    local i
    for ((i = 0; i < ROUNDS; i++)); do
        case $c in
        lat-tcp|lat-tcp-e)
            rails=${MADRAIL_UCX_CMP_RAILS_lat_tcp:-ucx:tcp:lo}
            args="madrail_lat --min 8 --max 8 --iters 20000" ;;
        lat-shm)
            rails=${MADRAIL_UCX_CMP_RAILS_lat_shm:-ucx:shm}
            args="madrail_lat --min 8 --max 8 --iters 20000" ;;
        bw-shm|bw-shm-am)
            rails=${MADRAIL_UCX_CMP_RAILS_bw_shm:-ucx:shm}
            args="madrail_bw --min 4m --max 4m --iters 10" ;;
        bw-tcp)
            rails=${MADRAIL_UCX_CMP_RAILS_bw_tcp:-ucx:tcp:lo}
            args="madrail_bw --min 4m --max 4m --iters 10" ;;
        *) echo "unknown case $c"; return 1 ;;
        esac
        m=$(mdr "$rails" $args)
        b=$(base "$rails" $args)
        case $c in
        lat-tcp)   t=$(tool tcp lat -t ucp_am_lat -s 8 -n 20000) ;;
        lat-tcp-e) t=$(tool tcp lat -t ucp_am_lat -s 8 -n 20000 -e) ;;
        lat-shm)   t=$(tool $SHM_TLS lat -t ucp_am_lat -s 8 -n 20000) ;;
        bw-shm)    t=$(tool $SHM_TLS bw -t ucp_put_bw -s 4194304 -n 200) ;;
        bw-shm-am) t=$(tool $SHM_TLS bw -t ucp_am_bw -s 4194304 -n 200) ;;
        bw-tcp)    t=$(tool tcp bw -t ucp_put_bw -s 4194304 -n 200) ;;
        esac
        mv+=("${m:-nan}")
        tv+=("${t:-nan}")
        bv+=("${b:-nan}")
        printf '  %-10s round %d: madrail(%s) %s  tool %s%s\n' "$c" $((i + 1)) "$rails" \
            "${m:-nan}" "${t:-nan}" "${BASE_LIBDIR:+  madrail-base ${b:-nan}}"
    done
    m=$(printf '%s\n' "${mv[@]}" | median)
    t=$(printf '%s\n' "${tv[@]}" | median)
    b=$(printf '%s\n' "${bv[@]}" | median)
    case $c in
    lat-*) printf '%-10s median: madrail %8s us   tool %8s us   diff %+.2f us  ratio %.2f' \
               "$c" "$m" "$t" "$(echo "$m - $t" | bc -l)" "$(echo "$m / $t" | bc -l)"
           [ -z "${BASE_LIBDIR:-}" ] ||
               printf '   | base %s us: diff %+.2f us  ratio %.2f' "$b" \
                   "$(echo "$b - $t" | bc -l)" "$(echo "$b / $t" | bc -l)" ;;
    *)     printf '%-10s median: madrail %8s MB/s tool %8s MB/s madrail/tool %.0f%%' \
               "$c" "$m" "$t" "$(echo "100 * $m / $t" | bc -l)"
           [ -z "${BASE_LIBDIR:-}" ] ||
               printf '   | base %s MB/s: %.0f%%' "$b" "$(echo "100 * $b / $t" | bc -l)" ;;
    esac
    echo
}

for c in $CASES; do
    run_case "$c"
done
