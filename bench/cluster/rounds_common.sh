# rounds_common.sh -- what the round-by-round cluster benchmarks share
# (lat_median.sh, rate_rounds.sh): sourced, not run, once prog and SRC
# are set.  rounds_setup needs MPICH_DIR, UCX (1: compare with Debian's
# ch4:ucx), PREFIX and RAILS too.
#
# rounds_setup TAG: checks (root, our MPICH, mpicc.mpich: without it UCX
# becomes 0), a work directory $W removed at exit with the cluster, and a
# two-node cluster of RAILS 1 Gbit rails; sets CL (cluster.sh), the
# variables of `cluster.sh env` and rails ("rail0,rail1").
# shellcheck shell=bash disable=SC2034,SC2153,SC2154

die() { echo "$prog: $*" >&2; exit 1; }
skip() { echo "$prog: SKIP: $*" >&2; exit 77; }
rounds_setup() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to build the namespace cluster (uid $(id -u))"
    [ -x "$MPICH_DIR/bin/mpicc" ] ||
        die "our MPICH is not built ($MPICH_DIR/bin/mpicc; ./quickstart.sh --no-run)"
    if [ "$UCX" -eq 1 ] && ! command -v mpicc.mpich >/dev/null 2>&1; then
        echo "$prog: no mpicc.mpich (Debian's mpich, libmpich-dev): ch4:madrail only" >&2
        UCX=0
    fi
    W=$(mktemp -d "/tmp/mdr-$1.XXXXXX")
    CL=$SRC/test/cluster/cluster.sh
    trap rounds_cleanup EXIT
    trap 'exit 130' INT TERM
}

rounds_cleanup() {
    "$CL" --prefix "$PREFIX" down >/dev/null 2>&1
    rm -rf "$W"
}

# rounds_cluster: the cluster itself (after the programs are built)
rounds_cluster() {
    local out
    out=$("$CL" --prefix "$PREFIX" up --nodes 2 --rails "$RAILS" --rate 1gbit 2>&1) ||
        { printf '%s\n' "$out" | tail -n 5 >&2; die "cluster.sh up failed"; }
    eval "$("$CL" --prefix "$PREFIX" env)"
    rails=$(seq -s, 0 $((RAILS - 1)) | sed 's/\([0-9]\)/rail\1/g')
}
