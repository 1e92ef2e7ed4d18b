#!/bin/sh
# cl_failover.sh -- a rail fails under a running transfer between two
# nodes of the namespace cluster (issue 12), two tbf-shaped rails of
# 1 Gbit, MADRAIL_RAILS of rail set CL_RAILSET (cl_common.sh: tcp, ofi,
# ucx or mix; default tcp), MADRAIL_RAIL_TIMEOUT=1s, one
# process a node under hydra, it_failover streaming checksummed 1 MiB
# messages from node0 to node1:
#  0. rail0 alone, no fault: the surviving rail's single-rail rate;
#  1. rail1 `ip link set down` on node0 1.5 s into a 5 s stream: asserted
#     also that the rail went down on the kernel's link event
#     (rails/common/linkwatch.c), not on its timeout;
#  2. the same with rail1 black-holed (nftables drop, the link stays up:
#     TCP retransmits and never errors; only the rail timeout finds it);
#     asserted: both processes take rail1 down (the rail timeout), no
#     byte received is wrong, and the stream completes on rail0: that needs
#     the control messages rail1 took with it sent again (issue 12 item 3,
#     src/core/replay.c; the lines saying how many are printed).
#     CL_FAILOVER_RECOVERY=0 turns an incomplete stream back into a
#     reported known gap (as before recovery was built);
#  3. rejoin: rail1 `ip link set down` 1.5 s into a 10 s stream and up
#     again 2 s later: both processes bring rail1 back up (MADRAIL_RAIL_REJOIN,
#     1 s) and, when the stream completes, rail1 carried stripes again;
#  3b. flapping: rail1's link down for 1 s and up for 1 s, five times, under
#     a 16 s stream: byte-exact, and rail1 held down (MADRAIL_RAIL_FLAP)
#     at least once before it was dialled again;
#  4. both rails black-holed: both processes end with a clean error.
# Printed, not asserted (times depend on this shared machine): detection
# time (fault to "rail down" in the sender's log, same clock on both
# nodes; as a range, the fault command taking a while to apply, and as the
# sender's own count from the rail's last sign of life, MADRAIL_STATS),
# the receiver's rate after failover against case 0's, and the time from
# the link's return to the rail up on both nodes.
# Needs root, `ip netns` and a hydra mpiexec (SKIP otherwise).
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_railset
cl_find_hydra
PROG=$CL_BUILDDIR/test/integration/it_failover
[ -x "$PROG" ] || { echo "FAIL: $cl_name: $PROG not built (make check builds it)"; exit 1; }
R1=$(cl_rails "$CL_RAILSET" 1) || exit 1
R2=$(cl_rails "$CL_RAILSET" 2) || exit 1
echo "rail set $CL_RAILSET: $R2"
cl_up "mdrtf$([ "$CL_RAILSET" = tcp ] || echo "$CL_RAILSET")-" --nodes 2 --rails 2 --rate 1gbit

export MADRAIL_RAIL_TIMEOUT=1s
unset MADRAIL_RAIL_WEIGHTS
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; cl_cluster down >/dev/null 2>&1' EXIT

# start RAILS SECONDS ok|error: the stream in the background, output in $WORK/out
start() {
    rm -f "$WORK/out" # cl_wait_started reads the new job's lines only
    # shellcheck disable=SC2086
    cl_cluster exec 0 env MADRAIL_RAILS="$1" ${EXTRA_ENV:-} timeout -k 5 40 "$MPIEXEC" \
        $MDR_CLUSTER_HYDRA_FLAGS -n 2 -ppn 1 "$PROG" "$2" "$3" >"$WORK/out" 2>&1 &
    job=$!
}
now() { date +%s.%N; }
# both_saw 'rail 1 down' MESSAGE: ok when both ranks logged it, else the output and bad
both_saw() {
    if grep -q "rank 0: $1 at" "$WORK/out" && grep -q "rank 1: $1 at" "$WORK/out"; then
        ok "$2"
    else
        cat "$WORK/out"
        bad "$3"
    fi
}
# rate FROM [TO]: mean of the receiver's quarter-second rates in [FROM, TO)
rate() {
    awk -v a="$1" -v b="${2:-1e12}" '/^rank 1: at / { t = $4 + 0; sub(":", "", $4);
        if (t >= a && t < b) { s += $5; n++ } } END { if (n) printf "%.1f", s / n; else print "?" }' \
        "$WORK/out"
}
stall() { # the receiver's longest gap between completed messages, ms
    sed -n 's/^rank 1: stall: the longest gap between completed messages was \([0-9]*\) ms.*/\1/p' "$WORK/out"
}
detect() { # the first "rail 1 down at T" of rank 0 (the sender), minus the fault time
    awk -v f="$1" '/^rank 0: rail 1 down at / { printf "%.3f", $7 - f; exit }' "$WORK/out"
}

# --- 0. rail0 alone
start "$R1" 2.5 ok
wait $job
rc=$?
[ $rc -eq 0 ] && grep -q 'rank 1: ok - 0 bad bytes' "$WORK/out" ||
    { cat "$WORK/out"; bad "rail0 alone (exit $rc)"; }
t0=$(awk '/^rank 1: stream starts at/ { print $6; exit }' "$WORK/out")
single=$(rate "$(echo "$t0 + 1" | bc)")
echo "rail0 alone: $single MB/s (receiver, after the first second)"

# --- 1 and 2. rail1 fails 1.5 s into the stream
for how in link-down blackhole; do
    EXTRA_ENV=MADRAIL_STATS=1
    start "$R2" 5 ok
    EXTRA_ENV=
    cl_wait_started "$WORK/out"
    sleep 1.5
    tf=$(now)
    if [ $how = link-down ]; then
        cl_cluster link-down 1 0 >/dev/null
    else
        cl_cluster blackhole 1 >/dev/null
    fi
    tf1=$(now) # the fault is in place somewhere between tf and tf1
    wait $job
    rc=$?
    if [ $how = link-down ]; then
        cl_cluster link-up 1 0 >/dev/null
    else
        cl_cluster unblackhole 1 >/dev/null
    fi
    grep -E 'rail . down|error|FAIL|ok -|sent again|re-sends' "$WORK/out"
    before=$(rate "$(echo "$tf - 1" | bc)" "$tf")
    d=$(detect "$tf")
    d1=$(detect "$tf1")
    # the sender's own measure: from the rail's last sign of life (a message
    # received, a transport acknowledgement) to taking it down
    life=$(sed -n 's/.*madrail stats: event: .* rail 1 [^ ]*rail1 peer .* down: no sign of life for \([0-9]*\) ms.*/\1/p' \
        "$WORK/out" | head -n 1)
    after=$(rate "$(echo "$tf + ${d:-1} + 1" | bc)")
    echo "STALL $CL_RAILSET $how: $(stall) ms (the longest gap between completed 1 MiB messages at the receiver)"
    echo "$how: detection ${d1:-?}-${d:-?} s after the fault (after/before the $how command; MADRAIL_RAIL_TIMEOUT=1s), ${life:-?} ms after rail1's last sign of life at the sender; receiver $before MB/s before, $after MB/s from 1 s after detection (rail0 alone: $single)"
    both_saw 'rail 1 down' "$how of rail1 mid-stream: both processes took rail1 down (detection ${d:-?} s)" \
        "$how of rail1 mid-stream: rail1 not taken down on both nodes"
    if [ $how = link-down ]; then
        # the kernel says a link went down at once (rails/common/linkwatch.c):
        # the rail must not wait for its timeout
        n_ev=$(grep -c 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* down: link of rail1 down (kernel link event)' "$WORK/out")
        [ "$n_ev" -ge 1 ] &&
            ok "link-down: taken down on the kernel's link event, not the timeout ($n_ev event(s))" ||
            { grep 'stats: event' "$WORK/out"; bad "link-down: no rail1 event names the kernel's link event"; }
    fi
    grep -q 'bad bytes, length' "$WORK/out" && bad "$how: wrong bytes received"
    if [ $rc -eq 0 ] && grep -q 'rank 1: ok - 0 bad bytes' "$WORK/out"; then
        ok "$how of rail1 mid-stream: the stream completed byte-exact on rail0"
    elif [ "${CL_FAILOVER_RECOVERY:-1}" = 1 ]; then
        cat "$WORK/out"
        bad "$how of rail1 mid-stream: the stream did not complete (exit $rc)"
    else
        echo "KNOWN GAP ($how): the stream did not complete after the failover (exit $rc:" \
            "$(grep -m1 -E 'stalled|error at' "$WORK/out")); CL_FAILOVER_RECOVERY=0"
    fi
done

# --- 3. rejoin: rail1 link down at 1.5 s, up again at 3.5 s, in a 10 s stream (3 s of it after the link returns, the fault commands taking over a second each on a loaded machine)
EXTRA_ENV=MADRAIL_STATS=1
start "$R2" 10 ok
EXTRA_ENV=
cl_wait_started "$WORK/out"
sleep 1.5
cl_cluster link-down 1 0 >/dev/null
sleep 2
tu=$(now)
cl_cluster link-up 1 0 >/dev/null
wait $job
rc=$?
grep -E 'rail . (down|up)|error|FAIL|ok -|came back|stats: (event|failover)|sent again|re-sends' "$WORK/out"
up=$(awk -v f="$tu" '/^rank [01]: rail 1 up at / { t = $7 - f; if (t > m) m = t } END { if (m) printf "%.3f", m }' "$WORK/out")
echo "rejoin: rail1 up on both nodes ${up:-?} s after the link returned (MADRAIL_RAIL_REJOIN=1s)"
echo "STALL $CL_RAILSET link-down-then-up: $(stall) ms"
both_saw 'rail 1 up' "rejoin: rail1 came back up on both nodes after its link returned" \
    "rejoin: rail1 not back up on both nodes (exit $rc)"
grep -q 'bad bytes, length' "$WORK/out" && bad "rejoin: wrong bytes received"
if [ $rc -eq 0 ] && grep -q 'rank 1: ok - 0 bad bytes' "$WORK/out"; then
    mb=$(awk '/^rank 0: rail 1 put .* after it came back/ { print $6 }' "$WORK/out")
    if awk -v m="${mb:-0}" 'BEGIN { exit !(m > 0) }'; then
        ok "rejoin: the stream completed byte-exact and rail1 carried $mb MB after it came back"
        grep -q 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* up: after' "$WORK/out" &&
            ok "rejoin: MADRAIL_STATS lists rail1's down and up events" ||
            bad "rejoin: MADRAIL_STATS does not list rail1's up event"
    else
        cat "$WORK/out"
        bad "rejoin: rail1 carried nothing after it came back"
    fi
elif [ "${CL_FAILOVER_RECOVERY:-1}" = 1 ]; then
    cat "$WORK/out"
    bad "rejoin: the stream did not complete (exit $rc)"
else
    echo "KNOWN GAP (rejoin): the stream did not complete after the failover (exit $rc:" \
        "$(grep -m1 -E 'stalled|error at' "$WORK/out")); CL_FAILOVER_RECOVERY=0"
fi

# --- 3b. a flapping rail: rail1's link down and up again five times in
# ten seconds under a 16 s stream; the side that dials holds the rail down
# for a growing time before it dials again (MADRAIL_RAIL_FLAP)
EXTRA_ENV=MADRAIL_STATS=1
start "$R2" 16 ok
EXTRA_ENV=
cl_wait_started "$WORK/out"
sleep 1
for i in 1 2 3 4 5; do
    cl_cluster link-down 1 0 >/dev/null
    sleep 1
    cl_cluster link-up 1 0 >/dev/null
    sleep 1
done
wait $job
rc=$?
grep -E 'error|FAIL|ok -|held down|stalled' "$WORK/out"
n_down=$(grep -c 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* down: ' "$WORK/out")
echo "STALL $CL_RAILSET flapping: $(stall) ms"
n_held=$(grep -c 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* down: held down' "$WORK/out")
grep -q 'bad bytes, length' "$WORK/out" && bad "flapping: wrong bytes received"
if [ $rc -eq 0 ] && grep -q 'rank 1: ok - 0 bad bytes' "$WORK/out"; then
    ok "flapping: the stream completed byte-exact through five downs of rail1 ($n_down down events)"
else
    cat "$WORK/out"
    bad "flapping: the stream did not complete (exit $rc)"
fi
# a flap is a down after an up: did either process see one?  (each
# process's events in order; under load the fault commands take over a
# second each and the rail may not come back between two downs)
flaps=$(awk '/madrail stats: event: .* rail 1 [^ ]*rail1 peer .* (up|down): / {
        pid = $1; if ($0 ~ / up: /) up[pid] = 1; else if (up[pid]) { n++; up[pid] = 0 } }
    END { print n + 0 }' "$WORK/out")
if [ "$n_held" -ge 1 ]; then
    ok "flapping: rail1 held down before it was dialled again ($n_held hold(s), $flaps down(s) after an up)"
elif [ "$flaps" -eq 0 ]; then
    echo "note: flapping: rail1 never came back between two downs here (the fault commands were slow), so nothing was held"
else
    grep 'stats: event' "$WORK/out"
    bad "flapping: rail1 went down $flaps time(s) after it came back, and no 'held down' event"
fi

# --- 4. every rail fails
start "$R2" 8 error
cl_every_rail_fails "$WORK/out"
cl_finish
