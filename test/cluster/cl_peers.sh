#!/bin/sh
# cl_peers.sh -- the systems the benchmark suite compares madrail with run on
# the same namespace cluster through the same launcher wrapper: Debian's
# MPICH (mpiexec.mpich, ch4:ucx, UCX over tcp on rail0 and rail1) and
# Debian's Open MPI (mpirun.openmpi, ob1 with the tcp BTL on rail0 and
# rail1, plm_rsh_agent = the wrapper), each started by run_job.sh, running
# mpi_cluster built with that MPI's mpicc, Open MPI on 2 nodes x 2 ranks,
# MPICH on 2 nodes x 1 rank (with 2 ranks a node, MPICH 4.0.2 over UCX
# 1.13's tcp transport hangs in MPI_Finalize in about a third of the runs,
# after all data is checked: one rank stays in ucp_worker_progress closing
# its endpoints while the others wait in the PMI barrier -- the UCX tcp
# cleanup hang of openucx/ucx issue 8738, not the cluster's; with 1 rank a
# node it is rarer (3 of 9 jobs under load in the benchmark suite, once in
# a check.sh run), and such a hang after " No Errors" is noted, not failed).  The job must
# pass (placement on two hosts, every byte and checksum), and the kernel
# must have seen each of node0's two rails send at least 30% of node0's
# inter-node payload (both rails used: nothing went through shared memory
# across the namespaces, nor over one rail only).  Each MPI that is not
# installed (with its headers: libmpich-dev, libopenmpi-dev) is skipped,
# the whole test when neither is.  Needs root and `ip netns`.
. "$(dirname "$0")/cl_common.sh"
cl_need_root
WORK=$CL_BUILDDIR/test/cluster/cl-work
mkdir -p "$WORK" || { echo "FAIL: $cl_name: cannot create $WORK"; exit 1; }

ran=0
skipped=
peer() { # peer KIND MPICC PREFIX PPN
    kind=$1 cc=$2 prefix=$3 ppn=$4
    if ! command -v "$cc" >/dev/null 2>&1; then
        skipped="$skipped $kind (no $cc)"
        return
    fi
    printf '#include <mpi.h>\nint main(void) { return 0; }\n' >"$WORK/mpi_h_$kind.c"
    if ! "$cc" -o "$WORK/mpi_h_$kind" "$WORK/mpi_h_$kind.c" >/dev/null 2>&1; then
        skipped="$skipped $kind ($cc cannot build a program: headers not installed?)"
        return
    fi
    prog=$WORK/mpi_cluster.$kind
    if ! "$cc" -std=gnu11 -O2 -g -Wall -Wextra -Werror -o "$prog" "$CL_DIR/mpi_cluster.c" \
            >"$prog.build.log" 2>&1; then
        cat "$prog.build.log"
        bad "$kind: mpi_cluster.c does not build with $cc"
        return
    fi
    log=$WORK/cl_peers.$kind.log
    bash "$CL_DIR/run_job.sh" --prefix "$prefix" --nodes 2 --rails 2 --rate 1gbit --mpi "$kind" \
        --ppn "$ppn" --timeout 50 --log "$log" --env MPIT_TIMEOUT=40 -- "$prog" 2 "$ppn" >/dev/null 2>&1
    rc=$?
    cat "$log"
    if [ $rc -eq 77 ]; then
        skipped="$skipped $kind ($(sed -n 's/^SKIP: //p' "$log" | head -n 1))"
        return
    fi
    ran=$((ran + 1))
    if [ $rc -eq 0 ] && grep -q ' No Errors' "$log" && ! grep -q 'FAIL - ' "$log"; then
        ok "$kind: mpi_cluster 2 nodes x $ppn ranks: No Errors"
    elif [ "$kind" = mpich ] && grep -q ' No Errors' "$log" &&
            grep -q "FAIL - .*stuck in 'MPI_Finalize'" "$log" &&
            ! grep 'FAIL - ' "$log" | grep -qv "stuck in 'MPI_Finalize'"; then
        # Debian's MPICH over UCX 1.13 tcp: the hang in MPI_Finalize after
        # every byte was checked (see the top of this file; seen in CI with
        # 1 rank a node too).  It is the peer's, not the cluster's: recorded,
        # not counted; any other failure still fails.
        ok "$kind: mpi_cluster 2 nodes x $ppn ranks: No Errors, then the known UCX hang in MPI_Finalize (killed by the watchdog; not counted)"
    else
        bad "$kind: mpi_cluster (exit $rc)"
    fi
    inter=$(sed -n "s/.*mpi_cluster: rank [0-9]* host ${prefix}node0 pid [0-9]* inter_bytes \\([0-9]*\\).*/\\1/p" "$log" |
            awk '{ s += $1 } END { printf "%.0f\n", s }')
    r0=$(sed -n "s/.*traffic: ${prefix}node0 rail0 tx_bytes \\([0-9]*\\).*/\\1/p" "$log")
    r1=$(sed -n "s/.*traffic: ${prefix}node0 rail1 tx_bytes \\([0-9]*\\).*/\\1/p" "$log")
    if [ -n "$r0" ] && [ -n "$r1" ] && [ "${inter:-0}" -gt 0 ] &&
            [ $((r0 * 10)) -ge $((inter * 3)) ] && [ $((r1 * 10)) -ge $((inter * 3)) ]; then
        ok "$kind: kernel: node0 sent $r0 bytes on rail0 and $r1 on rail1 (inter-node payload $inter)"
    else
        bad "$kind: kernel: node0 sent '${r0:-?}' on rail0 and '${r1:-?}' on rail1; each must be >= 30% of ${inter:-?}"
    fi
}

peer mpich mpicc.mpich mdrtp- 1
peer openmpi mpicc.openmpi mdrto- 2
[ -n "$skipped" ] && echo "skipped:$skipped"
[ $ran -eq 0 ] && [ $CL_FAIL -eq 0 ] && cl_skip "no peer MPI to run:$skipped"
cl_finish
