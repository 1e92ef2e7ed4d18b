#!/bin/sh
# cl_mpi_failover.sh -- a rail fails under an MPI program (issue 12): our
# MPICH (ch4:madrail) on two nodes of the namespace cluster, two tbf-shaped
# rails of 1 Gbit, MADRAIL_RAILS of rail set CL_RAILSET (cl_common.sh: tcp,
# ofi, ucx or mix; default tcp), MADRAIL_RAIL_TIMEOUT=1s,
# one rank a node, mpi_failover streaming mixed-size checksummed messages
# (1 B..4 MiB, half of them received with MPI_ANY_SOURCE/MPI_ANY_TAG):
#  1. rail1 `ip link set down` 1.5 s into a 9 s stream, up again 2 s
#     later: asserted that no byte or status received is wrong and, when
#     the stream completes, that MADRAIL_STATS shows rail1 down and back up
#     (MADRAIL_RAIL_REJOIN) on both ranks.  That the stream completes needs
#     recovery of control messages lost on the dying rail (issue 12 item
#     3, src/core/replay.c; its MADRAIL_STATS 'recovery' lines are
#     printed): a hard check by default, a KNOWN GAP line with
#     CL_FAILOVER_RECOVERY=0;
#  2. both rails black-holed (nftables drop, links up) 1.5 s into the
#     stream: both ranks get an MPI error (MPI_ERRORS_RETURN) within the
#     program's 15 s stall limit, never a hang.
#  1b. the same with rail1 black-holed (nftables drop via cluster.sh
#     blackhole, the link staying up: only the rail timeout finds it) 1.5 s
#     into the stream and lifted 2 s later: the same assertions;
#  1c. as 1, with the link set down on node1, the receiving rank's side
#     (the side whose library holds the puts' bytes: UCX 1.13 aborted the
#     process there when a fence left queued bytes readable);
#  1d. as 1c under the benchmark suite's stream (bench/mpi/mpi_stream.c:
#     4 MiB messages, 8 in flight, every byte checked), where that abort
#     came in 3 of 5 runs over two ucx rails: the stream completes and no
#     message is wrong;
# Needs root, `ip netns` and our MPICH ($MDR_MPICH_DIR, default
# <srcdir>/_install/mpich): SKIP otherwise.
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_railset
cl_need_our_mpich
SET=$([ "$CL_RAILSET" = tcp ] || echo "$CL_RAILSET")
WORK=$CL_BUILDDIR/test/cluster/cl-work
mkdir -p "$WORK" || { echo "FAIL: $cl_name: cannot create $WORK"; exit 1; }
PROG=$WORK/mpi_failover${SET:+_$SET}
cl_mpicc "$PROG" "$CL_DIR/mpi_failover.c"
RAILS=$(cl_rails "$CL_RAILSET" 2) || exit 1
echo "rail set $CL_RAILSET: $RAILS"
cl_up "mdrtg$SET-" --nodes 2 --rails 2 --rate 1gbit
OUT=$WORK/cl_mpi_failover${SET:+_$SET}.out
# this checkout's libmadrail first (cl_mpi_libdir), else the copy next to libmpi
LIBDIR=$(cl_mpi_libdir)
LIBS=${LIBDIR:+$LIBDIR:}$MPICH_DIR/lib

# start SECONDS ok|error: the program in the background, output in $OUT
start() {
    rm -f "$OUT" # cl_wait_started reads the new job's lines only
    # shellcheck disable=SC2086
    cl_cluster exec 0 env MADRAIL_RAILS="$RAILS" MADRAIL_RAIL_TIMEOUT=1s \
        MADRAIL_STATS=1 MPIR_CVAR_NOLOCAL=1 LD_LIBRARY_PATH="$LIBS" timeout -k 5 60 \
        "$MPICH_DIR/bin/mpiexec" $MDR_CLUSTER_HYDRA_FLAGS -n 2 -ppn 1 "$PROG" "$1" "$2" \
        >"$OUT" 2>&1 &
    job=$!
}

# rail1_fails link-down|blackhole [NODE]: rail1 fails (on NODE, default 0, for link-down) 1.5 s into a 9 s stream (the fault commands take over a second each on a loaded machine: the rejoin needs time after the lift)
# (link down, or an nftables drop with the link up) and returns 2 s later
rail1_fails() {
    what=$1${2:+ on node$2}
    start 9 ok
    cl_wait_started "$OUT"
    sleep 1.5
    if [ "$1" = link-down ]; then
        cl_cluster link-down 1 "${2:-0}" >/dev/null
        sleep 2
        cl_cluster link-up 1 "${2:-0}" >/dev/null
    else
        cl_cluster blackhole 1 >/dev/null
        sleep 2
        cl_cluster unblackhole 1 >/dev/null
    fi
    wait $job
    rc=$?
    grep -E 'error|FAIL|ok -|stalled|stats: (event|failover|recovery)|sent again' "$OUT"
    grep -q 'round .* bad bytes, length' "$OUT" && { cat "$OUT"; bad "$what: wrong bytes or statuses received"; }
    if [ $rc -eq 0 ] && grep -q 'rank 1: ok - 0 bad bytes' "$OUT"; then
        ok "$what of rail1 mid-stream: the MPI stream completed, every byte and status right"
        n_down=$(grep -c 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* down: ' "$OUT")
        n_up=$(grep -c 'madrail stats: event: .* rail 1 [^ ]*rail1 peer .* up: after' "$OUT")
        [ "$n_down" -ge 2 ] && [ "$n_up" -ge 2 ] &&
            ok "$what: both ranks took rail1 down and back up ($n_down down, $n_up up events)" ||
            { cat "$OUT"; bad "$what: rail1 events $n_down down, $n_up up (want 2 each, one a rank)"; }
    elif [ "${CL_FAILOVER_RECOVERY:-1}" = 1 ]; then
        cat "$OUT"
        bad "$what of rail1 mid-stream: the MPI stream did not complete (exit $rc)"
    else
        echo "KNOWN GAP ($what): the MPI stream did not complete after the failover (exit $rc:" \
            "$(grep -m1 -E 'stalled|error at' "$OUT")); CL_FAILOVER_RECOVERY=0"
    fi
}

# --- 1. rail1 link down, then up again
rail1_fails link-down
# --- 1b. rail1 black-holed (the link stays up), then lifted
rail1_fails blackhole
# --- 1c. rail1 link down on the receiving rank's node, then up again
rail1_fails link-down 1
# --- 1d. the same under a stream of 4 MiB messages, 8 in flight
STREAM=$WORK/mpi_stream${SET:+_$SET}
cl_mpicc "$STREAM" "$CL_SRCDIR/bench/mpi/mpi_stream.c"
rm -f "$OUT"
# shellcheck disable=SC2086
cl_cluster exec 0 env MADRAIL_RAILS="$RAILS" MADRAIL_RAIL_TIMEOUT=1s MPIR_CVAR_NOLOCAL=1 \
    LD_LIBRARY_PATH="$LIBS" timeout -k 5 60 "$MPICH_DIR/bin/mpiexec" $MDR_CLUSTER_HYDRA_FLAGS \
    -n 2 -ppn 1 "$STREAM" --size 4m --window 8 --iters 400 --validate --announce >"$OUT" 2>&1 &
job=$!
cl_wait_started "$OUT"
sleep 1.5
cl_cluster link-down 1 1 >/dev/null
sleep 2
cl_cluster link-up 1 1 >/dev/null
wait $job
rc=$?
grep -E '^# (stall_ms|bad_messages)|Fatal|error' "$OUT"
if [ $rc -eq 0 ] && grep -q '^# bad_messages 0' "$OUT"; then
    ok "link-down on node1 under a 4 MiB stream (8 in flight): completed, no message wrong"
else
    cat "$OUT"
    bad "link-down on node1 under a 4 MiB stream: exit $rc, $(grep -m1 '^# bad_messages' "$OUT" || echo 'no result')"
fi

# --- 2. every rail black-holed
start 10 error
cl_every_rail_fails "$OUT"
cl_finish
