#!/usr/bin/env bash
# run_drivers.sh (installed as madrail_run_drivers) -- each real-network
# driver of madrail against the network library's own benchmark tool on the
# same path, on loopback, interleaved round by round in one run so that
# both see the same machine load (this machine is shared: only ratios taken
# within one run mean anything).  Prints one row per path and round, then
# the medians with the issue's targets: 8-byte one-way latency within 10%
# or 1 us of the tool, 4 MiB bandwidth at least 95% of the tool.
#
# What is compared with what, and why it is the same path:
#   ofi-tcp  MADRAIL_RAILS=ofi:tcp;ofi_rxm:lo  vs  fi_pingpong -p "tcp;ofi_rxm" -e rdm -d lo
#   ofi-shm  MADRAIL_RAILS=ofi:shm             vs  fi_pingpong -p shm -e rdm
#     latency: madrail_lat 8 B (one way = half a round trip) vs fi_pingpong's
#              usec/xfer (elapsed / 2 x iterations: also one way);
#     bandwidth: fi_pingpong has no streaming mode, so both sides are
#              ping-pong rates: 4 MiB / madrail_lat's one-way time vs
#              fi_pingpong's MB/sec at 4 MiB (bytes both ways / elapsed).
#   ucx-tcp  MADRAIL_RAILS=ucx:tcp:lo  vs  ucx_perftest with UCX_TLS=tcp UCX_NET_DEVICES=lo
#   ucx-shm  MADRAIL_RAILS=ucx:shm     vs  ucx_perftest with UCX_TLS=posix,sysv,cma,self
#     latency: madrail_lat 8 B vs ucp_am_lat -s 8 (madrail's control
#              messages are UCP active messages), both after 2000 warm-up
#              round trips (--warmup, -w); on tcp both create their
#              endpoints with peer error handling (the rail does, to see a
#              peer fail; ucx_perftest -e), on shared memory neither does;
#     bandwidth: madrail_bw 4 MiB (a window of 64 messages, each a
#              rendezvous whose data is one ucp_put_nbx) vs ucp_put_bw
#              -s 4194304 (a stream of 4 MiB puts into one buffer that
#              ucx_perftest allocated through UCX).  ucx_perftest prints
#              MiB/s; it is converted to MB/s (1e6 B/s) as madrail prints.
#   ucx-shm-user  bandwidth only: madrail_bw over ucx:shm again, against
#              ucp_put_bw into ordinary (heap) memory, as madrail's puts go
#              into the application's buffers, with the UCX settings the
#              rail makes (UCX_ALLOC_PRIO=heap UCX_MM_SEG_SIZE=65472
#              UCX_MM_RX_BUFS_GROW=64).  UCX 1.13 puts into memory it did
#              not allocate itself by active messages through the shared
#              segment (two copies); into its own shared allocation it
#              writes directly (one copy), which is what plain ucx-shm
#              measures the tool doing.
#
# The tools print no percentiles we can match for every case, so every
# number is an average over the iterations of one run; the median over
# rounds is taken per column.
set -euo pipefail

prog=$(basename "$0")

usage() {
    cat <<EOF
Usage: $prog [--rounds N] [--paths LIST] [--quick] [--markdown] [--keep DIR] [--help]

Runs madrail's benchmarks and the networks' own tools side by side on
loopback (see the comment at the top of this script for what is compared):
  path | lat madrail | lat tool | diff | target | bw madrail | bw tool | ratio | target
then, per path, the lowest, median and highest of the rounds' latency
differences (a verdict near the target is only as good as their spread).

  --rounds N    rounds of every measurement, interleaved (default 3)
  --paths LIST  comma-separated subset of: ofi-tcp,ofi-shm,ucx-tcp,ucx-shm,
                ucx-shm-user
                (default: all; a path whose tool or driver is missing is
                reported as skipped, with the reason)
  --quick       fewer iterations (a first look; noisier)
  --pin         pin the two processes of every run, madrail's and the
                tool's alike, one to CPU 0 and one to CPU 1 (taskset), as
                an MPI launcher binds ranks; by default the scheduler
                places them (on a shared machine the two can differ by
                0.1-0.2 us on tcp, docs/performance.md)
  --markdown    print the median table as Markdown too (for docs/)
  --keep DIR    keep every raw output in DIR
  -h, --help    this text

Environment:
  MPIEXEC   launcher for madrail_lat/madrail_bw (default: mpiexec.hydra,
            else mpiexec, from PATH)
  BINDIR    where madrail_lat and madrail_bw are (default: next to this
            script if they are there, else PATH)
  MADRAIL_* passed through to madrail's benchmarks
Needs fi_pingpong (Debian: libfabric-bin) for the ofi paths and
ucx_perftest (Debian: ucx-utils) for the ucx paths.
EOF
}

ROUNDS=3
PATHS=ofi-tcp,ofi-shm,ucx-tcp,ucx-shm,ucx-shm-user
QUICK=no
PIN=no
MARKDOWN=no
KEEP=
while [ $# -gt 0 ]; do
    case $1 in
    --rounds)
        [ $# -ge 2 ] || { echo "$prog: --rounds needs a number" >&2; exit 2; }
        case $2 in ''|*[!0-9]*|0) echo "$prog: --rounds '$2': expected a positive integer" >&2; exit 2 ;; esac
        ROUNDS=$2; shift ;;
    --paths)
        [ $# -ge 2 ] || { echo "$prog: --paths needs a list" >&2; exit 2; }
        PATHS=$2; shift ;;
    --quick) QUICK=yes ;;
    --pin) PIN=yes ;;
    --markdown) MARKDOWN=yes ;;
    --keep)
        [ $# -ge 2 ] || { echo "$prog: --keep needs a directory" >&2; exit 2; }
        KEEP=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$prog: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for p in ${PATHS//,/ }; do
    case $p in
    ofi-tcp|ofi-shm|ucx-tcp|ucx-shm|ucx-shm-user) ;;
    *) echo "$prog: --paths: unknown path '$p' (known: ofi-tcp, ofi-shm, ucx-tcp, ucx-shm, ucx-shm-user)" >&2; exit 2 ;;
    esac
done

BIG=4194304
if [ "$QUICK" = yes ]; then
    L_IT=5000;  L_WU=500    # 8 B round trips
    P_IT=50                 # 4 MiB ping-pongs (ofi)
    B_IT=3;     PUT_IT=200  # madrail_bw iterations of 64 x 4 MiB; ucp_put_bw puts
else
    L_IT=20000; L_WU=2000
    P_IT=200
    B_IT=10;    PUT_IT=640  # 640 x 4 MiB either way
fi

# --pin: the tools' server on CPU 0 and client on CPU 1; madrail's ranks on
# the CPU of their rank (PMI_RANK, set by the launcher)
PIN0='' PIN1='' PIN_MDR=()
if [ "$PIN" = yes ]; then
    command -v taskset >/dev/null 2>&1 || { echo "$prog: --pin needs taskset (package util-linux)" >&2; exit 2; }
    [ "$(nproc)" -ge 2 ] || { echo "$prog: --pin needs 2 CPUs, this machine has $(nproc)" >&2; exit 2; }
    PIN0="taskset -c 0" PIN1="taskset -c 1"
    # shellcheck disable=SC2016
    PIN_MDR=(sh -c 'exec taskset -c "$PMI_RANK" "$@"' sh)
fi
MPIEXEC=${MPIEXEC:-$(command -v mpiexec.hydra || command -v mpiexec || true)}
[ -n "$MPIEXEC" ] || { echo "$prog: no mpiexec in PATH (set MPIEXEC)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
bin() {
    if [ -n "${BINDIR:-}" ]; then echo "$BINDIR/$1"
    elif [ -x "$here/$1" ] && [ -f "$here/$1" ]; then echo "$here/$1"
    else command -v "$1" || echo "$1"; fi
}
LAT=$(bin madrail_lat)
BW=$(bin madrail_bw)
for b in "$LAT" "$BW"; do
    [ -x "$b" ] || { echo "$prog: $b not found (set BINDIR)" >&2; exit 1; }
done

if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"; tmp=$(cd "$KEEP" && pwd)
else
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fi
port=$((20000 + ($$ * 7) % 20000))
nextport() { port=$((port + 1)); } # in the caller: $(...) is a subshell

# ---- madrail
# row of size $2 in a madrail_lat/madrail_bw output $1
row() { awk -v s="$2" '$1 == s { v = $2 } END { print (v == "" ? "NA" : v) }' "$1"; }
mdr() { # rails prog size iters out [warmup] -> value
    local wu=()
    [ -n "${6:-}" ] && wu=(--warmup "$6")
    local pin=
    [ ${#PIN_MDR[@]} -gt 0 ] && pin="sh -c 'exec taskset -c \$PMI_RANK \"\$@\"' sh "
    echo "+ MADRAIL_RAILS='$1' $MPIEXEC -n 2 $pin$(basename "$2") --min $3 --max $3 --iters $4 ${wu[*]}" >> "$tmp/commands"
    if ! MADRAIL_RAILS=$1 timeout 300 "$MPIEXEC" -n 2 "${PIN_MDR[@]}" "$2" --min "$3" --max "$3" --iters "$4" \
            "${wu[@]}" > "$5" 2>&1; then
        echo "$prog: madrail run over '$1' failed, output in $5:" >&2
        sed 's/^/    /' "$5" | tail -5 >&2
        echo NA; return
    fi
    row "$5" "$3"
}

# ---- fi_pingpong: "usec_per_xfer MB_per_s"
pingpong() { # prov dev size iters out port
    local dflag=() p=$6
    [ -n "$2" ] && dflag=(-d "$2")
    echo "+ ${PIN0:+$PIN0 }fi_pingpong -p '$1' -e rdm ${dflag[*]} -S $3 -I $4 -B $p & ${PIN1:+$PIN1 }fi_pingpong -p '$1' -e rdm ${dflag[*]} -S $3 -I $4 -P $p 127.0.0.1" >> "$tmp/commands"
    # shellcheck disable=SC2086
    timeout 300 $PIN0 fi_pingpong -p "$1" -e rdm "${dflag[@]}" -S "$3" -I "$4" -B "$p" > "$5.srv" 2>&1 &
    local srv=$!
    sleep 0.3
    # shellcheck disable=SC2086
    timeout 300 $PIN1 fi_pingpong -p "$1" -e rdm "${dflag[@]}" -S "$3" -I "$4" -P "$p" 127.0.0.1 > "$5" 2>&1 || true
    wait "$srv" || true
    # columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    awk '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 { u = $7; m = $6 }
         END { print (u == "" ? "NA NA" : u " " m) }' "$5"
}

# ---- ucx_perftest: "overall_lat_us overall_bw_MBps" (bw converted from MiB/s)
# PT_ENV: more VAR=value words for both tool processes (may be empty)
perftest() { # tls devices test size iters warmup out port [extra args]
    local p=$8
    local extra=("${@:9}")
    local envs=(UCX_TLS=$1 UCX_NET_DEVICES=$2 ${PT_ENV:-})
    echo "+ ${envs[*]} ${PIN0:+$PIN0 }ucx_perftest -p $p & ${envs[*]} ${PIN1:+$PIN1 }ucx_perftest 127.0.0.1 -p $p -t $3 -s $4 -n $5 -w $6 ${extra[*]}" >> "$tmp/commands"
    # shellcheck disable=SC2086
    env "${envs[@]}" timeout 300 $PIN0 ucx_perftest -p "$p" > "$7.srv" 2>&1 &
    local srv=$!
    sleep 0.3
    # shellcheck disable=SC2086
    env "${envs[@]}" timeout 300 $PIN1 ucx_perftest 127.0.0.1 -p "$p" -t "$3" -s "$4" \
        -n "$5" -w "$6" "${extra[@]}" -f -v > "$7" 2>&1 || true
    wait "$srv" || true
    # CSV: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
    awk -F, '$1 ~ /^ *[0-9]+$/ && NF >= 6 { l = $4; b = $6 }
             END { if (l == "") print "NA NA"; else printf "%s %.2f\n", l, b * 1.048576 }' "$7"
}

med() { { grep -v '^NA$' || true; } | sort -g | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "NA") }'; }

# ---- which paths can run (a libmadrail built without the driver shows up
# as a failed madrail run: its error names the drivers that were built)
runnable=()
for p in ${PATHS//,/ }; do
    case $p in
    ofi-*) tool=fi_pingpong; pkg=libfabric-bin ;;
    ucx-*) tool=ucx_perftest; pkg=ucx-utils ;;
    esac
    if ! command -v $tool >/dev/null 2>&1; then
        echo "$prog: skipping $p: no $tool (Debian package $pkg)" >&2
    else
        runnable+=("$p")
    fi
done
[ ${#runnable[@]} -gt 0 ] || { echo "$prog: nothing to run" >&2; exit 1; }

one() { # path round -> "lat_m lat_t bw_m bw_t" appended to $tmp/<path>
    local p=$1 r=$2 lm lt bm bt pl pb
    case $p in
    ofi-tcp|ofi-shm)
        local prov dev rails
        if [ $p = ofi-tcp ]; then prov="tcp;ofi_rxm"; dev=lo; rails="ofi:tcp;ofi_rxm:lo"
        else prov=shm; dev=; rails="ofi:shm"; fi
        lm=$(mdr "$rails" "$LAT" 8 $L_IT "$tmp/$p.$r.lat")
        nextport; read -r lt _ <<<"$(pingpong "$prov" "$dev" 8 $L_IT "$tmp/$p.$r.fpl" $port)"
        pl=$(mdr "$rails" "$LAT" $BIG $P_IT "$tmp/$p.$r.big")
        bm=$(awk -v u="$pl" -v s=$BIG 'BEGIN { print (u == "NA" || u <= 0 ? "NA" : sprintf("%.2f", s / u)) }')
        nextport; read -r _ bt <<<"$(pingpong "$prov" "$dev" $BIG $P_IT "$tmp/$p.$r.fpb" $port)"
        ;;
    ucx-tcp|ucx-shm)
        local tls devs rails eh=()
        if [ $p = ucx-tcp ]; then tls=tcp; devs=lo; rails="ucx:tcp:lo"; eh=(-e)
        else tls=posix,sysv,cma,self; devs=all; rails="ucx:shm"; fi
        lm=$(mdr "$rails" "$LAT" 8 $L_IT "$tmp/$p.$r.lat" $L_WU)
        nextport; read -r lt _ <<<"$(perftest $tls $devs ucp_am_lat 8 $L_IT $L_WU "$tmp/$p.$r.upl" $port "${eh[@]}")"
        bm=$(mdr "$rails" "$BW" $BIG $B_IT "$tmp/$p.$r.bw")
        nextport; read -r _ bt <<<"$(perftest $tls $devs ucp_put_bw $BIG $PUT_IT 20 "$tmp/$p.$r.upb" $port "${eh[@]}")"
        ;;
    ucx-shm-user)
        lm=NA; lt=NA
        bm=$(mdr ucx:shm "$BW" $BIG $B_IT "$tmp/$p.$r.bw")
        nextport
        read -r _ bt <<<"$(PT_ENV="UCX_ALLOC_PRIO=heap UCX_MM_SEG_SIZE=65472 UCX_MM_RX_BUFS_GROW=64" \
            perftest posix,sysv,cma,self all ucp_put_bw $BIG $PUT_IT 20 "$tmp/$p.$r.upb" $port)"
        ;;
    esac
    echo "$lm $lt $bm $bt" >> "$tmp/$p.vals"
    printf '%-12s %5s | %9s %9s | %10s %10s\n' "$p" "$r" "$lm" "$lt" "$bm" "$bt"
}

echo "# side by side on loopback, $ROUNDS round(s); latency: us one way, 8 B; bandwidth: MB/s (1e6 B/s), 4 MiB"
printf '%-12s %5s | %9s %9s | %10s %10s\n' path round "lat mdr" "lat tool" "bw mdr" "bw tool"
rm -f "$tmp"/*.vals "$tmp/commands"
for r in $(seq 1 "$ROUNDS"); do
    for p in "${runnable[@]}"; do one "$p" "$r"; done
done

# per round: the latency difference and the bandwidth ratio of that round's
# pair (the two ran back to back); the table shows the median of each
# column and the median of the per-round differences and ratios.
pairs() { # vals-file -> "diff ratio" per round
    awk '{ d = ($1 == "NA" || $2 == "NA") ? "NA" : sprintf("%+.2f", $1 - $2)
           r = ($3 == "NA" || $4 == "NA" || $4 <= 0) ? "NA" : sprintf("%.2f", $3 / $4)
           print d, r }' "$1"
}
target() { # kind madrail tool diff|ratio -> meets|misses|n/a
    awk -v k="$1" -v m="$2" -v t="$3" -v x="$4" 'BEGIN {
        if (m == "NA" || t == "NA" || x == "NA") { print "n/a"; exit }
        if (k == "lat") ok = (x <= 0.10 * t || x <= 1.0); else ok = (x >= 0.95)
        print (ok ? "meets" : "misses") }'
}

echo
echo "# medians over rounds; diff and ratio are medians of the per-round pairs"
echo "# targets: latency <= tool +10% or +1 us; bandwidth >= 95% of tool"
hdr='%-12s | %9s %9s %7s %-7s | %10s %10s %6s %-7s\n'
printf "$hdr" path "lat mdr" "lat tool" diff target "bw mdr" "bw tool" ratio target
: > "$tmp/medians"
for p in "${runnable[@]}"; do
    m() { awk -v c="$1" '{ print $c }' "$tmp/$p.vals" | med; }
    lm=$(m 1); lt=$(m 2); bm=$(m 3); bt=$(m 4)
    pairs "$tmp/$p.vals" > "$tmp/$p.pairs"
    ld=$(awk '{ print $1 }' "$tmp/$p.pairs" | med)
    br=$(awk '{ print $2 }' "$tmp/$p.pairs" | med)
    lv=$(target lat "$lm" "$lt" "$ld")
    bv=$(target bw "$bm" "$bt" "$br")
    printf "$hdr" "$p" "$lm" "$lt" "$ld" "$lv" "$bm" "$bt" "$br" "$bv"
    echo "$p $lm $lt $ld $lv $bm $bt $br $bv" >> "$tmp/medians"
done

# the spread behind each median difference: on a shared machine a single
# round can be off by a microsecond, so a verdict near the target is read
# with these in view
echo
echo "# per-round latency differences, madrail minus tool (us): lowest, median, highest"
for p in "${runnable[@]}"; do
    awk '$1 != "NA" { print $1 }' "$tmp/$p.pairs" | sort -g |
        awk -v p="$p" '{ a[NR] = $1 }
            END { if (NR) printf "%-12s   %s  %s  %s  (%d rounds)\n", p, a[1], a[int((NR + 1) / 2)], a[NR], NR
                  else printf "%-12s   n/a\n", p }'
done

if [ "$MARKDOWN" = yes ]; then
    echo
    echo "| path | madrail 8 B latency (us) | tool (us) | difference | target | madrail 4 MiB (MB/s) | tool (MB/s) | ratio | target |"
    echo "|---|---:|---:|---:|---|---:|---:|---:|---|"
    while read -r p lm lt ld lv bm bt br bv; do
        echo "| $p | $lm | $lt | $ld | $lv | $bm | $bt | $br | $bv |"
    done < "$tmp/medians"
fi
echo
echo "# commands of the last round:"
awk -v r="$ROUNDS" 'BEGIN { n = 0 } { a[++n] = $0 } END { per = n / r; for (i = n - per + 1; i <= n; i++) print a[i] }' "$tmp/commands"
