#!/usr/bin/env bash
# run_ofi.sh -- the ofi rail against the tcp rail and against libfabric's
# own fi_pingpong on the same provider, on loopback, interleaved in one run
# so that the three see the same machine load: small-message latency (8 B),
# ping-pong time at 4 MiB, and streaming bandwidth at 4 MiB (madrail_bw;
# fi_pingpong has no streaming mode, its MB/sec is the ping-pong rate).
# Each round runs every measurement once; the table shows every round and
# the median.  Numbers on a shared machine are only comparable within a
# run.
#
# Environment: PROV (default "tcp;ofi_rxm"), DEV (default lo), ROUNDS (3),
# ITERS8 (20000 round trips at 8 B), ITERS4M (200 at 4 MiB), ITERSBW (10
# madrail_bw iterations of a 64-message window at 4 MiB), MPIEXEC,
# BINDIR (madrail_lat/madrail_bw; default next to this script or PATH),
# MADRAIL_* (passed through).  Needs fi_pingpong (Debian: libfabric-bin).
set -euo pipefail

PROV=${PROV:-"tcp;ofi_rxm"}
DEV=${DEV:-lo}
ROUNDS=${ROUNDS:-3}
ITERS8=${ITERS8:-20000}
ITERS4M=${ITERS4M:-200}
ITERSBW=${ITERSBW:-10}
BIG=4194304

MPIEXEC=${MPIEXEC:-$(command -v mpiexec.hydra || command -v mpiexec || true)}
[ -n "$MPIEXEC" ] || { echo "run_ofi.sh: no mpiexec" >&2; exit 1; }
command -v fi_pingpong >/dev/null 2>&1 || { echo "run_ofi.sh: no fi_pingpong (libfabric-bin)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
bin() {
    if [ -n "${BINDIR:-}" ]; then echo "$BINDIR/$1"
    elif [ -x "$here/$1" ] && [ -f "$here/$1" ]; then echo "$here/$1"
    else command -v "$1"; fi
}
LAT=$(bin madrail_lat)
BW=$(bin madrail_bw)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# madrail_lat/bw: value of the row for size $2 in output file $1
row() { awk -v s="$2" '$1 == s { v = $2 } END { print (v == "" ? "NA" : v) }' "$1"; }

mdr() { # rails prog size iters out
    echo "+ MADRAIL_RAILS='$1' $MPIEXEC -n 2 $2 --min $3 --max $3 --iters $4" >&2
    MADRAIL_RAILS=$1 timeout 300 "$MPIEXEC" -n 2 "$2" --min "$3" --max "$3" --iters "$4" \
        > "$5" 2>&1 || echo "(failed: see below)" >&2
}

port=$((47700 + $$ % 200))
pingpong() { # size iters out port -> "usec_per_xfer MB_per_s"
    local port=$4
    echo "+ fi_pingpong -p '$PROV' -e rdm -d $DEV -S $1 -I $2 -B $port  &&  ... -P $port 127.0.0.1" >&2
    timeout 300 fi_pingpong -p "$PROV" -e rdm -d "$DEV" -S "$1" -I "$2" -B "$port" > "$3.srv" 2>&1 &
    local srv=$!
    sleep 0.5
    timeout 300 fi_pingpong -p "$PROV" -e rdm -d "$DEV" -S "$1" -I "$2" -P "$port" 127.0.0.1 \
        > "$3" 2>&1 || true
    wait "$srv" || true
    # columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec ("4m" for 4 MiB)
    awk '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 8 { u = $7; m = $6 }
         END { print (u == "" ? "NA NA" : u " " m) }' "$3"
}

med() { sort -g | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "NA") }'; }

OFI="ofi:$PROV:$DEV"
TCP="tcp:$DEV"
printf '%-6s | %-28s | %-28s | %-28s\n' round "8 B latency (us, one-way)" "4 MiB ping-pong (us one-way)" "4 MiB streaming bw (MB/s)"
printf '%-6s | %8s %8s %10s | %8s %8s %10s | %8s %8s %10s\n' "" ofi tcp fi_pp ofi tcp fi_pp ofi tcp fi_pp
for r in $(seq 1 "$ROUNDS"); do
    mdr "$OFI" "$LAT" 8 "$ITERS8" "$tmp/ol8"; ol8=$(row "$tmp/ol8" 8)
    mdr "$TCP" "$LAT" 8 "$ITERS8" "$tmp/tl8"; tl8=$(row "$tmp/tl8" 8)
    port=$((port + 1))
    read -r pl8 _ <<<"$(pingpong 8 "$ITERS8" "$tmp/pl8" $port)"
    mdr "$OFI" "$LAT" 4m "$ITERS4M" "$tmp/olb"; olb=$(row "$tmp/olb" $BIG)
    mdr "$TCP" "$LAT" 4m "$ITERS4M" "$tmp/tlb"; tlb=$(row "$tmp/tlb" $BIG)
    port=$((port + 1))
    read -r plb pbw <<<"$(pingpong $BIG "$ITERS4M" "$tmp/plb" $port)"
    mdr "$OFI" "$BW" 4m "$ITERSBW" "$tmp/obw"; obw=$(row "$tmp/obw" $BIG)
    mdr "$TCP" "$BW" 4m "$ITERSBW" "$tmp/tbw"; tbw=$(row "$tmp/tbw" $BIG)
    printf '%-6s | %8s %8s %10s | %8s %8s %10s | %8s %8s %10s\n' "$r" \
        "$ol8" "$tl8" "$pl8" "$olb" "$tlb" "$plb" "$obw" "$tbw" "($pbw)"
    echo "$ol8 $tl8 $pl8 $olb $tlb $plb $obw $tbw $pbw" >> "$tmp/all"
done
m() { awk -v c="$1" '{ print $c }' "$tmp/all" | med; }
printf '%-6s | %8s %8s %10s | %8s %8s %10s | %8s %8s %10s\n' median \
    "$(m 1)" "$(m 2)" "$(m 3)" "$(m 4)" "$(m 5)" "$(m 6)" "$(m 7)" "$(m 8)" "($(m 9))"
echo "fi_pp = fi_pingpong (usec/xfer, one way); in the bw column its MB/sec, a ping-pong rate, in ()"
