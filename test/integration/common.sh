# common.sh -- sourced by the test/integration/it_*.sh wrappers (not a test
# itself).  Each wrapper runs one C program under `mpiexec -n N` with two
# TCP rails on loopback.  Shared here: finding mpiexec (skip with 77 when
# there is none), finding the program in a VPATH build, a timeout per run,
# and printing exactly what ran.
#
# Environment:
#   MPIEXEC       launcher (default: mpiexec.hydra, else mpiexec, from PATH)
#   MDR_BUILDDIR  top of the build tree (set by make check)
#   IT_BINDIR     directory of the it_* programs (overrides MDR_BUILDDIR)
#   IT_TIMEOUT    seconds per mpiexec run (default 120)
#   IT_RAILS      rail list (default tcp:lo,tcp:lo)

it_name=$(basename "$0" .sh)

it_skip() {
    echo "SKIP: $it_name: $*"
    exit 77
}

if [ -n "${MPIEXEC:-}" ]; then
    command -v "$MPIEXEC" >/dev/null 2>&1 || it_skip "MPIEXEC=$MPIEXEC not found"
else
    MPIEXEC=$(command -v mpiexec.hydra || command -v mpiexec || true)
    [ -n "$MPIEXEC" ] || it_skip "no mpiexec in PATH (install mpich, or set MPIEXEC)"
fi

it_find_prog() {
    for d in ${IT_BINDIR:+"$IT_BINDIR"} \
             ${MDR_BUILDDIR:+"$MDR_BUILDDIR/test/integration"} \
             "$(dirname "$0")" ./test/integration .; do
        if [ -x "$d/$1" ] && [ -f "$d/$1" ]; then
            echo "$d/$1"
            return 0
        fi
    done
    return 1
}

# A wrapper may run another wrapper's program: IT_PROG_NAME=it_stripe.
it_prog_name=${IT_PROG_NAME:-$it_name}
IT_PROG=$(it_find_prog "$it_prog_name") ||
    { echo "FAIL: $it_name: program $it_prog_name not found (build it; set MDR_BUILDDIR or IT_BINDIR)"; exit 1; }
IT_TIMEOUT=${IT_TIMEOUT:-120}
IT_TIMEOUT_CMD=
if command -v timeout >/dev/null 2>&1; then
    IT_TIMEOUT_CMD="timeout -k 10 $IT_TIMEOUT"
fi

MADRAIL_RAILS=${IT_RAILS:-tcp:lo,tcp:lo}
export MADRAIL_RAILS

# it_run NP [VAR=value ...] -- [ARGS...]: run the program on NP ranks with
# the extra environment (values without spaces); prints the command and
# the outcome; returns the exit status (124 on timeout).  POSIX sh: the
# harness may run the wrappers with dash.
it_run() {
    it_np=$1
    shift
    it_envs=
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        it_envs="$it_envs $1"
        shift
    done
    [ $# -gt 0 ] && shift
    echo "it: running: MADRAIL_RAILS=$MADRAIL_RAILS$it_envs $IT_TIMEOUT_CMD $MPIEXEC -n $it_np $IT_PROG $*"
    it_rc=0
    # shellcheck disable=SC2086
    env $it_envs $IT_TIMEOUT_CMD "$MPIEXEC" -n "$it_np" "$IT_PROG" "$@" || it_rc=$?
    case $it_rc in
        0) echo "it: $it_name $*: passed" ;;
        124|137) echo "it: $it_name $*: TIMEOUT after ${IT_TIMEOUT}s" ;;
        *) echo "it: $it_name $*: FAILED (exit $it_rc)" ;;
    esac
    return $it_rc
}
