#!/bin/sh
# cl_stripe.sh -- libmadrail striping between two nodes of the namespace
# cluster, over two tbf-shaped rails (1 Gbit each), MADRAIL_RAILS of rail set
# CL_RAILSET (cl_common.sh; default tcp:rail0,tcp:rail1), one process a node under hydra:
#  1. it_stripe (8 x 16 MiB, every byte checked): equal weights put 30..70%
#     of the payload on each rail; MADRAIL_RAIL_WEIGHTS=3,1 puts 65..85% on
#     rail0 -- the program checks both sides' per-rail put counters;
#  2. madrail_bw --validate (1 to 4 MiB), MADRAIL_STATS=1: 0 bad bytes; the
#     statistics printed at finalize come from two different host names
#     (the nodes), and on the sender each rail carries 30..70% of the put
#     bytes;
#  3. the kernel agrees: node0's rail0 and rail1 interfaces each sent at
#     least 30% of the striped payload (so the bytes did cross the two
#     rails, not loopback or the management network).
# Bandwidth is printed, not asserted.  Needs root, `ip netns` and a hydra
# mpiexec (SKIP otherwise).
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_railset
cl_find_hydra
STRIPE=$CL_BUILDDIR/test/integration/it_stripe
BW=$CL_BUILDDIR/bench/madrail_bw
[ -x "$STRIPE" ] && [ -x "$BW" ] ||
    { echo "FAIL: $cl_name: $STRIPE or $BW not built (set MDR_BUILDDIR)"; exit 1; }
cl_up "mdrts$([ "$CL_RAILSET" = tcp ] || echo "$CL_RAILSET")-" --nodes 2 --rails 2 --rate 1gbit

MADRAIL_RAILS=$(cl_rails "$CL_RAILSET" 2) || exit 1
export MADRAIL_RAILS
echo "rail set $CL_RAILSET: $MADRAIL_RAILS"
unset MADRAIL_RAIL_WEIGHTS
run() { # run [VAR=value...] -- PROGRAM ARGS: one process on each node
    envs=
    while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    echo "running in node0: env MADRAIL_RAILS=$MADRAIL_RAILS$envs $MPIEXEC $MDR_CLUSTER_HYDRA_FLAGS -n 2 -ppn 1 $*"
    # shellcheck disable=SC2086
    cl_cluster exec 0 env $envs timeout -k 5 60 "$MPIEXEC" $MDR_CLUSTER_HYDRA_FLAGS -n 2 -ppn 1 "$@" 2>&1
}

# --- 1. it_stripe, equal and 3:1
out=$(run -- "$STRIPE" 0.30 0.70); rc=$?
echo "$out" | grep -v 'madrail stats'
[ $rc -eq 0 ] && echo "$out" | grep -q 'it_stripe: .* 0 failed -> PASS' &&
    ok "it_stripe across the nodes, equal rails: every byte, each rail 30..70%" ||
    bad "it_stripe across the nodes, equal rails (exit $rc)"
out=$(run MADRAIL_RAIL_WEIGHTS=3,1 -- "$STRIPE" 0.65 0.85); rc=$?
echo "$out" | grep 'rail 0 carries\|FAIL'
[ $rc -eq 0 ] && echo "$out" | grep -q 'it_stripe: .* 0 failed -> PASS' &&
    ok "it_stripe across the nodes, weights 3,1: rail0 65..85%" ||
    { echo "$out"; bad "it_stripe across the nodes, weights 3,1 (exit $rc)"; }

# --- 2. madrail_bw --validate with statistics, and 3. the kernel's counters
tx0a=$(cl_node_counter 0 rail0 tx)
tx1a=$(cl_node_counter 0 rail1 tx)
out=$(run MADRAIL_STATS=1 -- "$BW" --validate --min 1m --max 4m --window 8 --iters 3 --warmup 1); rc=$?
tx0b=$(cl_node_counter 0 rail0 tx)
tx1b=$(cl_node_counter 0 rail1 tx)
echo "$out"
[ $rc -eq 0 ] && echo "$out" | grep -q 'validation: 0 bad bytes' &&
    ok "madrail_bw --validate across the nodes: 0 bad bytes" || bad "madrail_bw --validate (exit $rc)"
# rows "[host:pid] madrail stats: <rail> <name> tx_msgs tx_bytes tx_put_bytes put% ..."
stats=$(echo "$out" | sed -n 's/^\[\([^]:]*\):\([0-9]*\)\] madrail stats: *\([0-9][0-9]*\)  *\([^ ]*\)  *[0-9]*  *[0-9]*  *\([0-9]*\) .*/\1 \2 \3 \4 \5/p')
hosts=$(echo "$stats" | awk '{print $1}' | sort -u | tr '\n' ' ')
[ "$hosts" = "${CL_PREFIX}node0 ${CL_PREFIX}node1 " ] && ok "statistics from two hosts: $hosts" ||
    bad "statistics came from hosts '$hosts' (want ${CL_PREFIX}node0 ${CL_PREFIX}node1)"
verdict=$(echo "$stats" | awk -v h="${CL_PREFIX}node0" '$1 == h { put[$3] = $5; name[$3] = $4; tot += $5; n++ }
    END {
        if (n != 2 || tot == 0) { printf "sender: %d rails, %.0f put bytes\n", n, tot; exit 1 }
        bad = 0
        for (r = 0; r < 2; r++) {
            pct = 100 * put[r] / tot
            printf "%s %.1f%% ", name[r], pct
            if (pct < 30 || pct > 70) bad = 1
        }
        printf "of %.0f put bytes\n", tot
        exit bad
    }')
[ $? -eq 0 ] && ok "sender's put bytes: $verdict" || bad "sender's rail split (each must be 30..70%): $verdict"
puttot=$(echo "$stats" | awk -v h="${CL_PREFIX}node0" '$1 == h { t += $5 } END { printf "%.0f\n", t }')
d0=$((tx0b - tx0a))
d1=$((tx1b - tx1a))
if [ "$puttot" -gt 0 ] && [ $((d0 * 10)) -ge $((puttot * 3)) ] && [ $((d1 * 10)) -ge $((puttot * 3)) ]; then
    ok "kernel: node0 sent $d0 bytes on rail0, $d1 on rail1 (striped payload $puttot)"
else
    bad "kernel: node0 sent $d0 bytes on rail0, $d1 on rail1; each must be >= 30% of $puttot"
fi
cl_finish
