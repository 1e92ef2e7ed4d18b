#!/bin/sh
# cl_slurm.sh -- batch jobs under a real Slurm on the namespace cluster:
# a 2-node cluster with two 1 Gbit rails, Debian's Slurm started on it by
# slurm.sh (slurmctld in node0, a slurmd a node, private munge), and two
# sbatch jobs of 2 nodes x 2 tasks running mpi_cluster (all pairs, 1 B..
# 4 MiB, every byte and an FNV checksum checked) on our MPICH over
# MADRAIL_RAILS=tcp:rail0,tcp:rail1:
#   hydra  the job script runs our mpiexec, which starts its proxies with
#          srun (-launcher slurm) inside the allocation;
#   srun   the job script runs `srun --mpi=pmi2` (Slurm's pmi2 plugin also
#          serves MPICH 4.0's PMI-1 client), no mpiexec at all.
# Each job must end COMPLETED with ExitCode 0:0 (scontrol show job, and the
# jobcomp/filetxt record: there is no slurmdbd, so no sacct), and its
# output file must show: No Errors and no FAIL line, the checksum check
# passed, four ranks on the two host names two each, and every rank's
# madrail statistics with its striped bytes on both rails (30..70% each).
#
# Needs root, `ip netns`, our MPICH ($MDR_MPICH_DIR, default
# <srcdir>/_install/mpich) and Slurm (installed with apt-get when
# missing): SKIP (77) with the reason otherwise.
#
# To see it fail (mutation), MDR_SLURM_MUTATE=
#   checksum  rank 3 ships a wrong checksum with its messages (a mutated
#             copy of mpi_cluster): the job must end FAILED;
#   rank      rank 3 exits 1 after an otherwise clean run: FAILED, 1:0;
#   onerail   the jobs run on tcp:rail0 alone: the rail check must fail.
. "$(dirname "$0")/cl_common.sh"
cl_need_root
cl_need_our_mpich
MUTATE=${MDR_SLURM_MUTATE:-}

WORK=$CL_BUILDDIR/test/cluster/cl-work/slurm
rm -rf "$WORK"
mkdir -p "$WORK" || { echo "FAIL: $cl_name: cannot create $WORK"; exit 1; }
SRC=$CL_DIR/mpi_cluster.c
if [ "$MUTATE" = checksum ]; then
    sed 's/ssum\[to\] = mpit_checksum(sbuf\[to\], sz);/ssum[to] = mpit_checksum(sbuf[to], sz) + (mpit_rank == 3);/' \
        "$SRC" >"$WORK/mpi_cluster_mutated.c"
    grep -q 'mpit_rank == 3);' "$WORK/mpi_cluster_mutated.c" || { echo "FAIL: $cl_name: mutation not applied"; exit 1; }
    sed -i 's|#include "../mpi/mpit_common.c"|#include "'"$CL_DIR"'/../mpi/mpit_common.c"|' "$WORK/mpi_cluster_mutated.c"
    SRC=$WORK/mpi_cluster_mutated.c
fi
PROG=$WORK/mpi_cluster
cl_mpicc "$PROG" "$SRC"

cl_slurm() { bash "$CL_DIR/slurm.sh" --prefix "$CL_PREFIX" "$@" 8>&-; }
cl_up mdrtu- --nodes 2 --rails 2 --rate 1gbit
# the daemons stop before the cluster goes (which would kill them anyway)
trap 'cl_slurm stop >/dev/null 2>&1; cl_cluster down >/dev/null 2>&1' EXIT
out=$(cl_slurm start 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && cl_skip "$(printf '%s\n' "$out" | sed -n 's/^SKIP: [^:]*: //p' | head -n 1)"
[ $rc -eq 0 ] || { echo "FAIL: $cl_name: slurm.sh start failed (exit $rc)"; exit 1; }
SLURM_STATE=/run/madrail-cluster/${CL_PREFIX%-}/slurm

RAILS_USED=tcp:rail0,tcp:rail1
[ "$MUTATE" = onerail ] && RAILS_USED=tcp:rail0
# the program as each launcher starts it (the "rank" mutation: rank 3's
# exit status turns 1 after a clean run)
RUN="$PROG 2 2"
[ "$MUTATE" = rank ] &&
    RUN="sh -c '$PROG 2 2; rc=\$?; [ \"\${PMI_RANK:-\$SLURM_PROCID}\" = 3 ] && exit 1; exit \$rc'"

# job scripts: what a site would write (docs/slurm.md)
cat >"$WORK/job-hydra.sh" <<EOF
#!/bin/sh
#SBATCH --job-name=madrail-hydra --nodes=2 --ntasks-per-node=2 --time=2
export MADRAIL_RAILS=$RAILS_USED MADRAIL_STATS=1 MPIT_TIMEOUT=30
echo "job \$SLURM_JOB_ID on \$SLURM_JOB_NODELIST, batch host \$(hostname)"
$MPICH_DIR/bin/mpiexec -launcher slurm -iface mgmt -n 4 -ppn 2 $RUN
EOF
cat >"$WORK/job-srun.sh" <<EOF
#!/bin/sh
#SBATCH --job-name=madrail-srun --nodes=2 --ntasks-per-node=2 --time=2
export MADRAIL_RAILS=$RAILS_USED MADRAIL_STATS=1 MPIT_TIMEOUT=30
echo "job \$SLURM_JOB_ID on \$SLURM_JOB_NODELIST, batch host \$(hostname)"
srun --mpi=pmi2 $RUN
EOF

# submit both at once (they run one after the other: each takes all CPUs)
JOBS=
for kind in hydra srun; do
    id=$(cl_slurm exec sbatch --parsable -D "$WORK" -o "$WORK/$kind-%j.out" "$WORK/job-$kind.sh" 2>&1)
    case $id in
        *[!0-9]*|'') bad "sbatch of the $kind job: $id"; continue ;;
    esac
    echo "submitted the $kind job: $id"
    JOBS="$JOBS $kind:$id"
done

# wait for every job to reach a final state (at most 45 s in all)
job_state() { cl_slurm exec scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
t=0
while [ $t -lt 225 ]; do
    busy=0
    for j in $JOBS; do
        case $(job_state "${j#*:}") in
            COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) ;;
            *) busy=1 ;;
        esac
    done
    [ $busy -eq 0 ] && break
    sleep 0.2
    t=$((t + 1))
done

for j in $JOBS; do
    kind=${j%%:*} id=${j#*:}
    out=$WORK/$kind-$id.out
    info=$(cl_slurm exec scontrol show job "$id" 2>&1)
    state=$(printf '%s\n' "$info" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    exitc=$(printf '%s\n' "$info" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    echo "--- $kind job $id: JobState=$state ExitCode=$exitc; output $out:"
    cat "$out" 2>/dev/null || echo "(no output file)"
    [ "$state" = COMPLETED ] && [ "$exitc" = 0:0 ] &&
        ok "$kind job $id: COMPLETED, ExitCode 0:0 (scontrol)" ||
        bad "$kind job $id: JobState=${state:-?} ExitCode=${exitc:-?} (want COMPLETED 0:0)"
    grep -q "^JobId=$id .* JobState=COMPLETED .* ExitCode=0:0" "$SLURM_STATE/jobcomp.txt" 2>/dev/null &&
        ok "$kind job $id: jobcomp record COMPLETED 0:0" ||
        bad "$kind job $id: jobcomp record: $(grep "^JobId=$id " "$SLURM_STATE/jobcomp.txt" 2>/dev/null |
            grep -o 'JobState=[^ ]*\| ExitCode=[^ ]*' | tr '\n' ' ')"
    [ -f "$out" ] || continue
    grep -q '^ No Errors' "$out" && ! grep -q 'FAIL - ' "$out" &&
        grep -q 'ok - .*every byte and checksum right' "$out" &&
        ok "$kind job $id: mpi_cluster No Errors, every byte and checksum right" ||
        bad "$kind job $id: mpi_cluster reported errors or no verdict"
    # four ranks, two host names (the nodes'), two ranks each, all with
    # inter-node bytes; every rank's striped bytes on both rails
    verdict=$( {
        sed -n 's/^mpi_cluster: rank \([0-9]*\) host \([^ ]*\) pid \([0-9]*\) inter_bytes \([0-9]*\) .*/R \2:\3 \4/p' "$out"
        sed -n 's/^\[\([^]]*\)\] madrail stats: *\([0-9][0-9]*\)  *tcp:[^ ]*  *[0-9]*  *[0-9]*  *\([0-9]*\) .*/S \1 \2 \3/p' "$out"
    } | awk -v p="${CL_PREFIX}node" '
        $1 == "R" { n++; split($2, hp, ":"); h[hp[1]]++; if ($3 == 0) z++; rk[$2] = 1 }
        $1 == "S" { put[$2] += $4; rp[$2, $3] = $4; nr[$2]++ }
        END {
            bad = 0
            if (n != 4) { printf "%d rank lines (want 4); ", n; bad = 1 }
            for (x in h) { nh++; if (h[x] != 2 || index(x, p) != 1) { printf "host %s: %d ranks; ", x, h[x]; bad = 1 } }
            if (nh != 2) { printf "%d hosts (want 2); ", nh; bad = 1 }
            if (z) { printf "%d ranks sent nothing to the other node; ", z; bad = 1 }
            for (r in rk) {
                if (nr[r] != 2 || put[r] == 0) { printf "%s: %d rails with %.0f put bytes (want 2 rails); ", r, nr[r], put[r]; bad = 1; continue }
                f = 100 * rp[r, 0] / put[r]
                printf "%s rail0 %.1f%%; ", r, f
                if (f < 30 || f > 70) { printf "(BAD) "; bad = 1 }
            }
            exit bad
        }')
    vrc=$?
    echo "$verdict"
    [ $vrc -eq 0 ] && ok "$kind job $id: 2 nodes x 2 ranks, each rank striped over rail0 and rail1" ||
        bad "$kind job $id: placement or rails wrong (see above)"
done
[ -n "$JOBS" ] || bad "no job was submitted"
case " $JOBS " in *" hydra:"*) ;; *) bad "the hydra job was not submitted" ;; esac
case " $JOBS " in *" srun:"*) ;; *) bad "the srun job was not submitted" ;; esac
cl_finish
