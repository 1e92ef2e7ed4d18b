#!/bin/sh
# cl_mpi.sh -- our MPICH (ch4:madrail) on the namespace cluster, 2 nodes x
# 2 ranks, two 1 Gbit rails (MADRAIL_RAILS=tcp:rail0,tcp:rail1), started
# by run_job.sh: mpi_cluster (all pairs, 1 B..4 MiB, every byte and a
# checksum checked) must pass, and the statistics libmadrail prints at
# finalize (MADRAIL_STATS=1) must show where the bytes went:
#  - every rank has statistics, from two host names, two ranks each;
#  - each rank's madrail tx_bytes covers what it sent to the other node
#    (inter_bytes, printed by the program) but not what it sent inside its
#    node (less than inter + intra/2): MPICH's shared memory carried that;
#  - each rank's striped (put) bytes are split 30..70% over the two rails;
#  - the kernel saw each of node0's rails send at least 30% of node0's
#    inter-node payload.
# Needs root, `ip netns` and our MPICH ($MDR_MPICH_DIR, default
# <srcdir>/_install/mpich, made by ./quickstart.sh): SKIP otherwise.
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_our_mpich

WORK=$CL_BUILDDIR/test/cluster/cl-work
mkdir -p "$WORK" || { echo "FAIL: $cl_name: cannot create $WORK"; exit 1; }
PROG=$WORK/mpi_cluster.madrail
cl_mpicc "$PROG" "$CL_DIR/mpi_cluster.c"

LOG=$WORK/cl_mpi.job.log
# this checkout's libmadrail first (cl_mpi_libdir), else the copy next to libmpi
LIBDIR=$(cl_mpi_libdir)
MDR_MPICH_DIR=$MPICH_DIR bash "$CL_DIR/run_job.sh" --prefix mdrtm- --nodes 2 --rails 2 --rate 1gbit \
    --mpi ours --ppn 2 --timeout 50 --log "$LOG" --env MADRAIL_STATS=1 --env MPIT_TIMEOUT=40 \
    ${LIBDIR:+--env LD_LIBRARY_PATH=$LIBDIR} -- "$PROG" 2 2 >/dev/null 2>&1
rc=$?
cat "$LOG"
[ $rc -eq 77 ] && cl_skip "$(sed -n 's/^SKIP: //p' "$LOG" | head -n 1)"
[ $rc -eq 0 ] && grep -q ' No Errors' "$LOG" && ! grep -q 'FAIL - ' "$LOG" &&
    ok "mpi_cluster 2 nodes x 2 ranks on ch4:madrail: No Errors" || bad "mpi_cluster (exit $rc)"

# "mpi_cluster: rank R host H pid P inter_bytes N intra_bytes M" and
# "[H:P] madrail stats: <rail> <name> tx_msgs tx_bytes tx_put_bytes ..."
verdict=$( {
    sed -n 's/.*mpi_cluster: rank \([0-9]*\) host \([^ ]*\) pid \([0-9]*\) inter_bytes \([0-9]*\) intra_bytes \([0-9]*\).*/R \2:\3 \1 \4 \5/p' "$LOG"
    sed -n 's/.*\[\([^]]*\)\] madrail stats: *\([0-9][0-9]*\)  *[^ ]*  *[0-9]*  *\([0-9]*\)  *\([0-9]*\) .*/S \1 \2 \3 \4/p' "$LOG"
} | awk '
    $1 == "R" { rank[$2] = $3; inter[$2] = $4; intra[$2] = $5; nr++ }
    $1 == "S" { tx[$2] += $4; put[$2] += $5; rput[$2, $3] = $5; nrail[$2]++ }
    END {
        bad = 0
        if (nr != 4) { printf "%d ranks reported their payload (want 4); ", nr; bad = 1 }
        for (p in rank) {
            split(p, hp, ":"); hosts[hp[1]]++
            if (!(p in tx)) { printf "rank %d (%s): no madrail statistics; ", rank[p], p; bad = 1; continue }
            line = sprintf("rank %d %s: madrail tx %.0f, inter %.0f, intra %.0f", rank[p], hp[1], tx[p], inter[p], intra[p])
            if (tx[p] < inter[p] || tx[p] >= inter[p] + intra[p] / 2) { line = line " BAD"; bad = 1 }
            if (nrail[p] != 2 || put[p] == 0) { line = line sprintf(" (%d rails, %.0f put bytes) BAD", nrail[p], put[p]); bad = 1 }
            else {
                f = 100 * rput[p, 0] / put[p]
                line = line sprintf(", rail0 %.1f%% of puts", f)
                if (f < 30 || f > 70) { line = line " BAD"; bad = 1 }
            }
            print line "; "
        }
        nh = 0; for (h in hosts) { nh++; if (hosts[h] != 2) { printf "host %s has %d ranks; ", h, hosts[h]; bad = 1 } }
        if (nh != 2) { printf "%d hosts (want 2); ", nh; bad = 1 }
        exit bad
    }')
vrc=$?
echo "$verdict"
[ $vrc -eq 0 ] && ok "madrail carried each rank's inter-node bytes and not its intra-node ones; puts split over both rails" ||
    bad "statistics do not show the expected split (see above)"

# The kernel's view: node0's rails each sent >= 30% of node0's inter payload.
node0_inter=$(sed -n 's/.*mpi_cluster: rank [0-9]* host mdrtm-node0 pid [0-9]* inter_bytes \([0-9]*\).*/\1/p' "$LOG" |
              awk '{ s += $1 } END { printf "%.0f\n", s }')
r0=$(sed -n 's/.*traffic: mdrtm-node0 rail0 tx_bytes \([0-9]*\).*/\1/p' "$LOG")
r1=$(sed -n 's/.*traffic: mdrtm-node0 rail1 tx_bytes \([0-9]*\).*/\1/p' "$LOG")
if [ -n "$r0" ] && [ -n "$r1" ] && [ "${node0_inter:-0}" -gt 0 ] &&
        [ $((r0 * 10)) -ge $((node0_inter * 3)) ] && [ $((r1 * 10)) -ge $((node0_inter * 3)) ]; then
    ok "kernel: node0 sent $r0 bytes on rail0 and $r1 on rail1 (its ranks' inter-node payload $node0_inter)"
else
    bad "kernel: node0 sent '${r0:-?}' on rail0 and '${r1:-?}' on rail1; each must be >= 30% of ${node0_inter:-?}"
fi
cl_finish
