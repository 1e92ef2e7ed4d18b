#!/bin/sh
# it_duplex.sh -- both processes stream rendezvous messages at each other
# at once over two tcp rails on loopback (madrail_bw --bibw --validate,
# 64 KiB .. 4 MiB, every byte of every message checked both ways).  That
# is the tcp driver's full-duplex path: once the peer's puts arrive on a
# connection, our puts leave in frames (MADRAIL_TCP_PUT_FRAME, here 16k so
# every message is cut many times), continuation frames are checked and
# placed, control replies pass queued frames, and TCP_NOTSENT_LOWAT is set.
# The debug log must show each process switching to it ("puts flow both
# ways") on both rails, so a change that silently stops using the path
# fails here instead of passing on the old one.  Run once more with
# MADRAIL_TCP_PUT_ACK=1 (completion on the receiver's per-frame
# acknowledgements).  Timing is not checked (test/cluster/cl_duplex.sh
# compares bandwidths on shaped rails).
IT_PROG_NAME=madrail_bw
IT_BINDIR=${IT_BINDIR:-${MDR_BUILDDIR:-.}/bench}
. "$(dirname "$0")/common.sh"
unset MADRAIL_RAIL_WEIGHTS

rc=0
for ack in 0 1; do
    out=$(it_run 2 MADRAIL_TCP_PUT_FRAME=16k MADRAIL_TCP_PUT_ACK=$ack MADRAIL_LOG_LEVEL=debug -- \
        --bibw --validate --min 64k --max 4m --window 8 --iters 2 --warmup 1 2>&1)
    r=$?
    echo "$out" | grep -v 'madrail .* debug: '
    echo "$out" | grep 'puts flow both ways' | head -n 4
    # "[host:pid] madrail tcp_ep.c:N debug: rail tcp:lo(127.0.0.1:P): connection to ...: puts flow both ways"
    n=$(echo "$out" | sed -n 's/^\[[^]:]*:\([0-9]*\)\] madrail .*rail \(tcp:[^ ]*\): connection .*puts flow both ways$/\1 \2/p' |
        sort -u | wc -l)
    if [ $r -ne 0 ] || ! echo "$out" | grep -q 'validation: 0 bad bytes'; then
        echo "FAIL: $it_name: MADRAIL_TCP_PUT_ACK=$ack: madrail_bw --bibw --validate (exit $r)"
        rc=1
    elif [ "$n" -lt 4 ]; then
        echo "FAIL: $it_name: MADRAIL_TCP_PUT_ACK=$ack: $n of 4 (process, rail) pairs switched to the duplex path"
        rc=1
    else
        echo "ok: $it_name: MADRAIL_TCP_PUT_ACK=$ack: every byte right both ways; both processes on both rails took the duplex path"
    fi
done
exit $rc
