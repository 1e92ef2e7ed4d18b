#!/bin/sh
# cl_anysrc.sh -- MPI_ANY_SOURCE across shared memory and the netmod on
# the namespace cluster: our MPICH (ch4:madrail, native point-to-point),
# 2 nodes x 2 ranks, two 1 Gbit rails, test/mpi/mpi_anysrc.c (rank 0
# receives with wildcards from its node neighbour through MPICH's shared
# memory and from the two ranks of the other node through libmadrail; the
# program checks that split, every message once, per-sender order, data,
# matched probes and a cancelled wildcard receive).  It must pass, and the
# statistics libmadrail prints at finalize (MADRAIL_STATS=1) must come from
# all four ranks.
# Needs root, `ip netns` and our MPICH ($MDR_MPICH_DIR, default
# <srcdir>/_install/mpich): SKIP otherwise.
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_our_mpich

WORK=$CL_BUILDDIR/test/cluster/cl-work
mkdir -p "$WORK" || { echo "FAIL: $cl_name: cannot create $WORK"; exit 1; }
PROG=$WORK/mpi_anysrc.madrail
cl_mpicc "$PROG" "$CL_SRCDIR/test/mpi/mpi_anysrc.c"

LOG=$WORK/cl_anysrc.job.log
# this checkout's libmadrail first (cl_mpi_libdir), else the copy next to libmpi
LIBDIR=$(cl_mpi_libdir)
MDR_MPICH_DIR=$MPICH_DIR bash "$CL_DIR/run_job.sh" --prefix mdrtn- --nodes 2 --rails 2 --rate 1gbit \
    --mpi ours --ppn 2 --timeout 60 --log "$LOG" --env MADRAIL_STATS=1 --env MPIT_TIMEOUT=50 \
    ${LIBDIR:+--env LD_LIBRARY_PATH=$LIBDIR} -- "$PROG" >/dev/null 2>&1
rc=$?
cat "$LOG"
[ $rc -eq 77 ] && cl_skip "$(sed -n 's/^SKIP: //p' "$LOG" | head -n 1)"
[ $rc -eq 0 ] && grep -q ' No Errors' "$LOG" && ! grep -q 'FAIL - ' "$LOG" &&
    ok "mpi_anysrc 2 nodes x 2 ranks on ch4:madrail: No Errors" || bad "mpi_anysrc (exit $rc)"
n=$(sed -n 's/.*\[\([^]]*\)\] madrail stats: *0  .*/\1/p' "$LOG" | sort -u | wc -l)
[ "$n" -eq 4 ] && ok "4 ranks printed madrail statistics" ||
    bad "$n ranks printed madrail statistics (want 4)"
cl_finish
