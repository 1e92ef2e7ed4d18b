# cl_common.sh -- sourced by the test/cluster/cl_*.sh tests (not a test
# itself).  Shared here: where the scripts and the built programs are, the
# SKIP (exit 77) path, bringing a cluster up under the test's own prefix
# (so tests running at once, or a user's cluster, never collide) with a
# trap that takes it down on any exit, and the ok/bad bookkeeping.
#
# Environment:
#   MDR_BUILDDIR, MDR_SRCDIR   set by make check
#   MDR_MPICH_DIR              our MPICH (default <srcdir>/_install/mpich)
#   MPIEXEC                    hydra mpiexec for libmadrail programs
#                              (default mpiexec.hydra, else our MPICH's)

cl_name=$(basename "$0" .sh)
CL_DIR=$(cd "$(dirname "$0")" && pwd)
CL_SRCDIR=${MDR_SRCDIR:-$(cd "$CL_DIR/../.." && pwd)}
CL_BUILDDIR=${MDR_BUILDDIR:-$CL_SRCDIR/_build}
CL_FAIL=0

# cl_rails SET K: the MADRAIL_RAILS value of rail set SET over the
# cluster's rails 0..K-1 (issue 27: every cluster test that moves data
# takes the set as a parameter, CL_RAILSET, default tcp):
#   tcp   madrail's own tcp driver          tcp:rail0,tcp:rail1
#   ofi   libfabric's tcp provider with rxm ofi:tcp;ofi_rxm:rail0,...
#   ucx   UCX's tcp transport              ucx:tcp:rail0,...
#   mix   ofi on the even rails, ucx on the odd ones
cl_rails() {
    cl_set=$1
    cl_k=$2
    cl_i=0
    cl_list=
    while [ "$cl_i" -lt "$cl_k" ]; do
        case $cl_set in
            tcp) cl_r=tcp:rail$cl_i ;;
            ofi) cl_r="ofi:tcp;ofi_rxm:rail$cl_i" ;;
            ucx) cl_r=ucx:tcp:rail$cl_i ;;
            mix) if [ $((cl_i % 2)) -eq 0 ]; then cl_r="ofi:tcp;ofi_rxm:rail$cl_i"; else cl_r=ucx:tcp:rail$cl_i; fi ;;
            *) echo "FAIL: $cl_name: unknown rail set CL_RAILSET=$cl_set (tcp, ofi, ucx or mix)" >&2; exit 1 ;;
        esac
        cl_list=${cl_list:+$cl_list,}$cl_r
        cl_i=$((cl_i + 1))
    done
    echo "$cl_list"
}
# The rail set of this run
CL_RAILSET=${CL_RAILSET:-tcp}

# cl_need_railset: SKIP when a driver of CL_RAILSET is not built into the
# tree's libmadrail (madrail_info -d says which are and why not)
cl_need_railset() {
    case $CL_RAILSET in
        tcp) return 0 ;;
        ofi) cl_drv="ofi" ;;
        ucx) cl_drv="ucx" ;;
        mix) cl_drv="ofi ucx" ;;
        *) echo "FAIL: $cl_name: unknown rail set CL_RAILSET=$CL_RAILSET (tcp, ofi, ucx or mix)"; exit 1 ;;
    esac
    cl_info=$("$CL_BUILDDIR/tools/madrail_info" -d 2>&1) ||
        { echo "FAIL: $cl_name: $CL_BUILDDIR/tools/madrail_info -d failed: $cl_info"; exit 1; }
    for d in $cl_drv; do
        printf '%s\n' "$cl_info" | grep -Eq "^  $d +yes" ||
            cl_skip "rail set $CL_RAILSET needs the $d driver: $(printf '%s\n' "$cl_info" | grep -E "^  $d " | sed 's/  */ /g')"
    done
}

# cl_rates_need_plain_build: SKIP a test that asserts rate ratios over
# CL_RAILSET other than tcp unless MDR_CHECK_FULL=1 (./check.sh --full),
# and always when the tree's libmadrail is built with sanitizers.  The
# ofi and ucx paths need more CPU than tcp's, so their ratios measure the
# machine's load as much as the rails: cl_duplex_ofi 1.95 in the normal
# tree of ./check.sh, 1.48 under distcheck's load (bound 1.5); mix 1.71,
# 1.46 under ASan.  The default run keeps what load cannot fail: every
# fault case and the stripe shares over every set.
cl_rates_need_plain_build() {
    [ "$CL_RAILSET" = tcp ] && return 0
    [ "${MDR_CHECK_FULL:-0}" = 1 ] ||
        cl_skip "rate ratios over rail set $CL_RAILSET run with ./check.sh --full (MDR_CHECK_FULL=1): under the default run's load they measure the CPU"
    case $("$CL_BUILDDIR/tools/madrail_info" -d 2>/dev/null | sed -n 's/^ *sanitizers: //p') in
        "" | no) return 0 ;;
        *) cl_skip "rate ratios over rail set $CL_RAILSET are asserted in the tree built without sanitizers" ;;
    esac
}

cl_skip() {
    echo "SKIP: $cl_name: $*"
    exit 77
}
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; CL_FAIL=1; }

# cl_cluster ARGS...: cluster.sh under this test's prefix (no exec bit needed)
cl_cluster() {
    bash "$CL_DIR/cluster.sh" --prefix "$CL_PREFIX" "$@" 8>&-
}

# cl_up PREFIX [up options]: a fresh cluster, down again when the test exits
cl_up() {
    CL_PREFIX=$1
    shift
    # one test at a time on a prefix (the same test of another tree's make
    # check waits); fd 8 is closed for the commands started (cl_cluster)
    mkdir -p /run/madrail-cluster
    if exec 8>"/run/madrail-cluster/${CL_PREFIX%-}.job.lock"; then
        flock -w 240 8 || { echo "FAIL: $cl_name: cluster prefix $CL_PREFIX busy for 240 s"; exit 1; }
    fi
    trap 'cl_cluster down >/dev/null 2>&1' EXIT
    trap 'exit 1' INT TERM HUP
    cl_out=$(cl_cluster up "$@" 2>&1)
    cl_rc=$?
    echo "$cl_out"
    case $cl_rc in
        0) ;;
        77) cl_skip "$(printf '%s\n' "$cl_out" | sed -n 's/^SKIP: [^:]*: //p' | head -n 1)" ;;
        *) echo "FAIL: $cl_name: cluster.sh up $* failed (exit $cl_rc)"; exit 1 ;;
    esac
    eval "$(cl_cluster env)" || { echo "FAIL: $cl_name: cluster.sh env"; exit 1; }
}

# Our MPICH (ch4:madrail) for an MPI test: sets MPICH_DIR ($MDR_MPICH_DIR,
# default <srcdir>/_install/mpich), or SKIP when it is not built or is
# another device.
cl_need_our_mpich() {
    MPICH_DIR=${MDR_MPICH_DIR:-$CL_SRCDIR/_install/mpich}
    [ -x "$MPICH_DIR/bin/mpiexec" ] && [ -x "$MPICH_DIR/bin/mpicc" ] ||
        cl_skip "our MPICH is not built ($MPICH_DIR/bin/mpiexec missing: ./quickstart.sh builds it, or set MDR_MPICH_DIR)"
    cl_dev=$("$MPICH_DIR/bin/mpichversion" 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
    case $cl_dev in
        *madrail*) ;;
        *) cl_skip "$MPICH_DIR is $cl_dev, not ch4:madrail" ;;
    esac
}

# cl_mpicc OUT SRC: build SRC with our MPICH's mpicc (-Werror), the log in
# OUT.build.log; FAIL (exit 1) with the log when it does not build.
cl_mpicc() {
    if ! "$MPICH_DIR/bin/mpicc" -std=gnu11 -O2 -g -Wall -Wextra -Werror -o "$1" "$2" \
            >"$1.build.log" 2>&1; then
        cat "$1.build.log"
        echo "FAIL: $cl_name: $2 does not build with $MPICH_DIR/bin/mpicc"
        exit 1
    fi
}

# Where an MPI test's processes find libmadrail: MDR_LIBDIR when given,
# else this checkout's installed copy (<srcdir>/_install/lib, which
# ./check.sh and ./quickstart.sh install from _build), else nothing (the
# copy inside our MPICH's prefix, as old as the MPICH build: its cache key
# covers the netmod, not the core).  Prints the directory or nothing.
cl_mpi_libdir() {
    if [ -n "${MDR_LIBDIR:-}" ]; then
        echo "$MDR_LIBDIR"
    elif ls "$CL_SRCDIR"/_install/lib/libmadrail.so.* >/dev/null 2>&1; then
        echo "$CL_SRCDIR/_install/lib"
    fi
}

# cl_wait_started OUT: wait (30 s at most) until both processes of the job
# writing to OUT printed "stream starts at": a fault meant to hit a running
# stream must not come while a loaded machine is still launching the job
# (seen in CI: ofi's rail set took over 1.5 s to start, the link went down
# before the first message and no failover was seen).
cl_wait_started() {
    cl_w=0
    while [ "$(grep -c 'stream starts at' "$1" 2>/dev/null || true)" != 2 ] && [ $cl_w -lt 300 ]; do
        sleep 0.1
        cl_w=$((cl_w + 1))
    done
    [ $cl_w -lt 300 ] || echo "note: $cl_name: the job's stream had not started after 30 s"
}

# cl_every_rail_fails OUT: 1.5 s after the job $job started (writing to
# OUT), black-hole rails 0 and 1, wait for the job, lift the holes; then
# check that both processes printed "ok - the stream ended with ..."
# (programs that expect the error, it_failover and mpi_failover, and exit
# 0 then) and that nothing in OUT is a sanitizer's report, and print how
# long after the fault the last one did.  The job's exit status is
# printed, not judged: such a process leaves without PMI finalize, and
# hydra's proxy then reports exit 1 for it when it sees the PMI socket
# close before it reaps the process (pmip_cb.c), 0 otherwise: a race.
# (timeout's 124 or 137, a hang, is still a failure.)
cl_every_rail_fails() {
    cl_wait_started "$1"
    sleep 1.5
    cl_tf=$(date +%s.%N)
    cl_cluster blackhole 0 >/dev/null
    cl_cluster blackhole 1 >/dev/null
    wait $job
    cl_rc=$?
    cl_cluster unblackhole 0 >/dev/null
    cl_cluster unblackhole 1 >/dev/null
    grep -E 'rail . down|error at|FAIL|ok -|stalled' "$1"
    cl_n=$(grep -c 'ok - the stream ended with' "$1")
    cl_te=$(awk '/^rank [01]: error at / { if ($5 + 0 > m) m = $5 + 0 } END { printf "%.3f", m }' "$1")
    echo "every rail black-holed: the last process's error came $(echo "$cl_te - $cl_tf" | bc) s after the fault"
    cl_san=$(grep -cE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1")
    if [ $cl_rc -ne 124 ] && [ $cl_rc -ne 137 ] && [ "$cl_n" -eq 2 ] && [ "$cl_san" -eq 0 ]; then
        ok "every rail black-holed: both processes end with an error, no hang (job exit $cl_rc)"
    else
        cat "$1"
        bad "every rail black-holed (exit $cl_rc, $cl_n of 2 processes saw the error, $cl_san sanitizer reports)"
    fi
}

# The skip checks that need no cluster, so a test can skip before building
# anything.
cl_need_root() {
    [ "$(id -u)" -eq 0 ] || cl_skip "needs root to create network namespaces (uid $(id -u))"
}

# A hydra mpiexec for libmadrail's own programs (PMI-1), or skip.
cl_find_hydra() {
    if [ -n "${MPIEXEC:-}" ]; then
        command -v "$MPIEXEC" >/dev/null 2>&1 || cl_skip "MPIEXEC=$MPIEXEC not found"
    else
        MPIEXEC=$(command -v mpiexec.hydra || true)
        if [ -z "$MPIEXEC" ]; then
            MPIEXEC=${MDR_MPICH_DIR:-$CL_SRCDIR/_install/mpich}/bin/mpiexec
            [ -x "$MPIEXEC" ] || cl_skip "no hydra mpiexec (install Debian's mpich, or set MPIEXEC)"
        fi
    fi
    MPIEXEC=$(command -v "$MPIEXEC")
}

# cl_node_counter NODE DEV tx|rx: the kernel's byte counter of a node's
# interface
cl_node_counter() {
    cl_cluster exec "$1" cat "/sys/class/net/$2/statistics/$3_bytes"
}

# cl_finish: the verdict line and exit status
cl_finish() {
    if [ $CL_FAIL -eq 0 ]; then
        echo "PASS: $cl_name"
        exit 0
    fi
    echo "FAIL: $cl_name"
    exit 1
}
