#!/usr/bin/env bash
# run_mpich_suite.sh -- run MPICH's own test suite (test/mpi of the MPICH
# source we build against) on an installed MPICH, by default ours built
# with the ch4:madrail netmod, with traffic forced through the netmod over
# two TCP rails on loopback.
#
# Why it is built this way:
#  - test/mpi is copied with `cp -a` (cp -r changes the timestamps and make
#    then tries to rerun automake 1.15, so every test fails to build) into a
#    work directory outside the repository, one per MPICH prefix; configuring
#    and compiling it is cached there, so a repeated run compiles nothing.
#  - runtests has no exclusion mechanism: this script writes a filtered
#    testlist (testlist.mdr) in every directory it runs, without the
#    entries of exclude.txt and, with --subset quick, without the entries
#    outside the quick subset, and runs `runtests -tests=testlist.mdr`.
#  - Test programs are compiled with `make -j` before runtests starts (it
#    would otherwise compile them one by one between runs) and kept
#    (MPITEST_CLEANUP=0).
#  - Results come from the TAP file runtests writes; the table and the last
#    line ("N passed, N failed") are computed here.
#
# See test/mpich-suite/README.md.
set -uo pipefail

SELF_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$SELF_DIR/../.." && pwd)

usage() {
    cat <<'EOF'
Usage: test/mpich-suite/run_mpich_suite.sh [options]

Runs MPICH's test suite (test/mpi) against an installed MPICH.

Options:
  --mpich-prefix P    MPICH to test: P/bin/mpicc and P/bin/mpiexec
                      (default: <repo>/_install/mpich)
  --system            test Debian's MPICH instead (mpicc.mpich,
                      mpiexec.mpich; installs mpich and libmpich-dev with
                      apt-get when missing)
  --mpich-src DIR     MPICH 4.0.2 source tree holding test/mpi (default: the
                      Debian source scripts/build-mpich.sh unpacked,
                      ${MADRAIL_CACHE_DIR:-/var/cache/madrail}/src/debian/mpich-4.0.2;
                      else /tmp/mpich-src/mpich-4.0.2; else fetched with
                      `apt-get source mpich` into the work dir)
  --madrail-lib DIR   libmadrail to put first in LD_LIBRARY_PATH
                      (default: <repo>/_install/lib)
  --dirs LIST         comma-separated test/mpi directories
                      (default: pt2pt,coll,comm,part,init,rma)
  --subset quick|full quick (default): the fixed subset ./check.sh runs (see
                      README.md); full: every entry of the directories
  --only TESTS        run only these entries, comma-separated, each
                      `dir/name` or `dir/name:np` (ignores --subset and the
                      exclude file; use it to reproduce one failure)
  --exclude FILE      exclude file (default: exclude.txt next to this script)
  --jobs N            parallel make jobs when compiling tests (default 2)
  --timeout-mult N    MPITEST_TIMEOUT_MULTIPLIER: each test's time limit
                      (180 s unless its testlist line says timeLimit=) is
                      multiplied by N (default 2: 2 cores, oversubscribed)
  --maxnp N           run tests that ask for more than N processes with N
                      (runtests -maxnp; default: as many as each test asks)
  --time-budget S     stop starting tests after S seconds of running (the
                      runtests stop file); entries not run count as failed
                      (default: no budget)
  --work-dir DIR      where configured test trees are cached
                      (default /var/tmp/madrail-mpich-suite)
  --fresh             delete the cached tree for this MPICH first
  --list              print the entries that would run, then stop
  -h, --help          this text

Environment given to every test (each can be overridden by exporting it):
  MADRAIL_RAILS=tcp:lo,tcp:lo   two TCP rails on loopback
  MPIR_CVAR_NOLOCAL=1           every rank is "remote": no shared memory,
                                all traffic goes through the netmod
  LD_LIBRARY_PATH               <repo>/_install/lib (--madrail-lib) and
                                P/lib first

Prints a table per directory (passed, failed, excluded, skipped, times),
the output of failing tests with a command to reproduce each, and ends
with one line "N passed, N failed".  Exit status: 0 when nothing failed,
1 when a test failed, 2 on a usage or setup error.
EOF
}

die() { echo "run_mpich_suite: $*" >&2; exit 2; }
say() { echo "[mpich-suite] $*"; }

# ------------------------------------------------------------------ options
PREFIX=""
SYSTEM=no
MPICH_SRC=""
DIRS="pt2pt,coll,comm,part,init,rma"
SUBSET=quick
ONLY=""
EXCLUDE_FILE="$SELF_DIR/exclude.txt"
JOBS=2
TMULT=2
MAXNP=""
WORK="/var/tmp/madrail-mpich-suite"
MADRAIL_LIB="$REPO/_install/lib"
BUDGET=""
FRESH=no
LIST_ONLY=no

need_arg() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --mpich-prefix) need_arg "$@"; PREFIX=$2; shift ;;
        --mpich-prefix=*) PREFIX=${1#*=} ;;
        --system) SYSTEM=yes ;;
        --mpich-src) need_arg "$@"; MPICH_SRC=$2; shift ;;
        --mpich-src=*) MPICH_SRC=${1#*=} ;;
        --dirs) need_arg "$@"; DIRS=$2; shift ;;
        --dirs=*) DIRS=${1#*=} ;;
        --subset) need_arg "$@"; SUBSET=$2; shift ;;
        --subset=*) SUBSET=${1#*=} ;;
        --only) need_arg "$@"; ONLY=$2; shift ;;
        --only=*) ONLY=${1#*=} ;;
        --exclude) need_arg "$@"; EXCLUDE_FILE=$2; shift ;;
        --exclude=*) EXCLUDE_FILE=${1#*=} ;;
        --jobs|-j) need_arg "$@"; JOBS=$2; shift ;;
        --jobs=*) JOBS=${1#*=} ;;
        --timeout-mult) need_arg "$@"; TMULT=$2; shift ;;
        --timeout-mult=*) TMULT=${1#*=} ;;
        --maxnp) need_arg "$@"; MAXNP=$2; shift ;;
        --maxnp=*) MAXNP=${1#*=} ;;
        --madrail-lib) need_arg "$@"; MADRAIL_LIB=$2; shift ;;
        --madrail-lib=*) MADRAIL_LIB=${1#*=} ;;
        --time-budget) need_arg "$@"; BUDGET=$2; shift ;;
        --time-budget=*) BUDGET=${1#*=} ;;
        --work-dir) need_arg "$@"; WORK=$2; shift ;;
        --work-dir=*) WORK=${1#*=} ;;
        --fresh) FRESH=yes ;;
        --list) LIST_ONLY=yes ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

case "$SUBSET" in quick|full) ;; *) die "--subset must be quick or full" ;; esac
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive integer"
[[ "$TMULT" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--timeout-mult needs a number"
[ -z "$MAXNP" ] || [[ "$MAXNP" =~ ^[1-9][0-9]*$ ]] || die "--maxnp needs a positive integer"
[ -z "$BUDGET" ] || [[ "$BUDGET" =~ ^[1-9][0-9]*$ ]] || die "--time-budget needs a number of seconds"
[ "$SYSTEM" = yes ] && [ -n "$PREFIX" ] && die "--system and --mpich-prefix exclude each other"

# --only implies its directories.
if [ -n "$ONLY" ]; then
    DIRS=$(echo "$ONLY" | tr ',' '\n' | sed 's|/[^/]*$||' | awk '!seen[$0]++' | paste -sd, -)
fi
IFS=',' read -r -a DIR_LIST <<<"$DIRS"
[ ${#DIR_LIST[@]} -gt 0 ] || die "--dirs is empty"

T_START=$(date +%s)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

# ------------------------------------------------------------------ the MPICH
if [ "$SYSTEM" = yes ]; then
    if ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.mpich >/dev/null 2>&1; then
        say "Debian's MPICH is missing: apt-get install mpich libmpich-dev"
        [ "$(id -u)" = 0 ] || die "not root: install mpich and libmpich-dev first"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            mpich libmpich-dev >/dev/null || die "apt-get install mpich libmpich-dev failed"
    fi
    MPICC=$(command -v mpicc.mpich)
    MPIEXEC=$(command -v mpiexec.mpich)
    PREFIX_DESC="system (Debian mpich: $MPICC)"
    KEY_NAME=system
else
    PREFIX=${PREFIX:-$REPO/_install/mpich}
    [ -d "$PREFIX" ] || die "no MPICH at $PREFIX (build it with scripts/build-mpich.sh, or use --mpich-prefix / --system)"
    PREFIX=$(cd "$PREFIX" && pwd)
    MPICC=$PREFIX/bin/mpicc
    MPIEXEC=$PREFIX/bin/mpiexec
    [ -x "$MPICC" ] || die "$MPICC missing or not executable"
    [ -x "$MPIEXEC" ] || die "$MPIEXEC missing or not executable"
    PREFIX_DESC=$PREFIX
    KEY_NAME=$(basename "$PREFIX")
fi

# ------------------------------------------------------------------ the source
find_src() {
    local d
    if [ -n "$MPICH_SRC" ]; then
        [ -f "$MPICH_SRC/test/mpi/runtests.in" ] ||
            die "--mpich-src $MPICH_SRC: no test/mpi/runtests.in there"
        (cd "$MPICH_SRC" && pwd)
        return
    fi
    # The Debian source scripts/build-mpich.sh fetched (checked first, so
    # the suite comes from the source our MPICH is built from), then the
    # usual places.
    for d in "${MADRAIL_CACHE_DIR:-/var/cache/madrail}/src/debian/mpich-4.0.2" \
             /tmp/mpich-src/mpich-4.0.2 "$WORK/src/mpich-4.0.2"; do
        if [ -f "$d/test/mpi/runtests.in" ]; then
            (cd "$d" && pwd)
            return
        fi
    done
    # A fresh machine: Debian's source package (deb-src must be enabled).
    mkdir -p "$WORK/src" || die "cannot create $WORK/src"
    say "no MPICH source found: apt-get source mpich into $WORK/src" >&2
    (cd "$WORK/src" && apt-get source mpich >fetch.log 2>&1) ||
        die "apt-get source mpich failed (see $WORK/src/fetch.log); pass --mpich-src"
    [ -f "$WORK/src/mpich-4.0.2/test/mpi/runtests.in" ] ||
        die "apt-get source did not give mpich-4.0.2 (see $WORK/src/fetch.log); pass --mpich-src"
    echo "$WORK/src/mpich-4.0.2"
}
SRC=$(find_src) || exit 2
TESTSRC=$SRC/test/mpi

# ------------------------------------------------------------------ the work tree
# --enable-xfail: entries MPICH marks xfail= run too; the ones that fail
# are listed in exclude.txt with their reason like any other.
CONF_ARGS=(--disable-fortran --disable-cxx --disable-spawn --enable-xfail)
# The thread level only decides whether test/mpi/threads is configured.
threads=funneled
for d in "${DIR_LIST[@]}"; do
    case "$d" in threads|threads/*) threads=multiple ;; esac
done
CONF_ARGS+=("--enable-threads=$threads")

# Key: the MPICH (prefix as given, or system).  scripts/build-mpich.sh makes
# <repo>/_install/mpich a symlink to a new cached prefix at every netmod
# change, so the key is the path as given and the fingerprint inside
# decides whether the cached tree still fits: same source, same configure
# arguments, same mpi.h and the same mpicc flags once the real prefix is
# taken out of them (a static-only MPICH is fingerprinted by its archive).
# When only the real prefix changed the objects are kept and the programs
# are relinked (their RUNPATH names the prefix).
key_hash=$(printf '%s' "$PREFIX_DESC" | sha1sum | cut -c1-10)
if [ "$SYSTEM" = yes ]; then REALPREFIX=/usr; else REALPREFIX=$(readlink -f "$PREFIX"); fi
KEYDIR=$WORK/$KEY_NAME-$key_hash
TREE=$KEYDIR/mpi
mkdir -p "$KEYDIR" || die "cannot create $KEYDIR"

exec 9>"$KEYDIR/lock"
flock -n 9 || die "another run uses $KEYDIR (lock held)"

mpi_h=$("$MPICC" -show 2>/dev/null | tr ' ' '\n' | sed -n 's/^-I//p' |
        while read -r inc; do [ -f "$inc/mpi.h" ] && echo "$inc/mpi.h" && break; done)
[ -n "$mpi_h" ] || mpi_h=$PREFIX/include/mpi.h
# An MPICH built without ROMIO (scripts/build-mpich.sh: --disable-romio)
# installs no mpio.h; the suite must know, or it expects MPI-IO features
# (comm/cmsplit_type tests MPIX_COMM_TYPE_NEIGHBORHOOD's directory split,
# which needs ROMIO).
if [ ! -f "$(dirname "$mpi_h")/mpio.h" ]; then
    CONF_ARGS+=(--disable-romio)
fi
libfp=""
if [ "$SYSTEM" = no ] && ! ls "$PREFIX"/lib/libmpi.so* >/dev/null 2>&1; then
    libfp=$(sha1sum "$PREFIX"/lib/libmpi.a 2>/dev/null | cut -c1-40)
fi
FINGERPRINT=$(
    echo "src=$SRC"
    echo "runtests=$(sha1sum <"$TESTSRC/runtests.in" | cut -c1-40)"
    echo "mpicc=$MPICC"
    echo "show=$("$MPICC" -show 2>/dev/null | sed "s|$REALPREFIX|@PREFIX@|g")"
    echo "mpi.h=$(sha1sum <"$mpi_h" 2>/dev/null | cut -c1-40)"
    echo "static=$libfp"
    echo "configure=${CONF_ARGS[*]}"
)

if [ "$FRESH" = yes ] || { [ -f "$KEYDIR/fingerprint" ] && [ "$(cat "$KEYDIR/fingerprint")" != "$FINGERPRINT" ]; }; then
    [ "$FRESH" = yes ] && say "--fresh: removing $TREE" || say "MPICH or source changed: removing $TREE"
    rm -rf "$TREE" "$KEYDIR/fingerprint"
fi

T_CONF=0
if [ -f "$KEYDIR/fingerprint" ] && [ -x "$TREE/runtests" ] &&
   [ "$(cat "$KEYDIR/realprefix" 2>/dev/null)" != "$REALPREFIX" ]; then
    # Same headers and flags, another build of MPICH: relink the programs.
    n=0
    while IFS= read -r f; do
        if [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then
            rm -f "$f"; n=$((n + 1))
        fi
    done < <(find "$TREE" -type f -perm -u+x ! -path '*/.libs/*' ! -name '*.so*' -size +8k)
    say "MPICH prefix now $REALPREFIX (was $(cat "$KEYDIR/realprefix" 2>/dev/null || echo unknown)): $n programs will be relinked"
fi
echo "$REALPREFIX" >"$KEYDIR/realprefix"
if [ ! -f "$KEYDIR/fingerprint" ] || [ ! -x "$TREE/runtests" ]; then
    rm -rf "$TREE"
    say "copying $TESTSRC to $TREE (cp -a)"
    cp -a "$TESTSRC" "$TREE" || die "cp -a failed"
    say "configuring the test suite: MPICC=$MPICC MPIEXEC=$MPIEXEC ${CONF_ARGS[*]}"
    t0=$(now)
    if ! (cd "$TREE" && ./configure MPICC="$MPICC" MPIEXEC="$MPIEXEC" "${CONF_ARGS[@]}" \
            >configure.out 2>&1); then
        tail -n 30 "$TREE/configure.out"
        die "configure failed (see $TREE/configure.out)"
    fi
    T_CONF=$(secs "$t0" "$(now)")
    say "configured in ${T_CONF}s"
    echo "$FINGERPRINT" >"$KEYDIR/fingerprint"
else
    say "reusing the configured tree $TREE"
fi

for d in "${DIR_LIST[@]}"; do
    [ -d "$TREE/$d" ] || die "no directory $d in test/mpi"
    [ -f "$TREE/$d/testlist" ] || die "$d has no testlist (not configured? try --fresh)"
done

# ------------------------------------------------------------------ exclusions
# Rules, from exclude.txt and from the quick subset below, have one form:
# "dir/name [np] [key=value ...] # reason".  np and key=value tokens (arg=,
# env=, ...) narrow the match to those testlist entries; the reason is
# required.  parse_rules KIND SOURCE-NAME < text  appends them to $RULES as
#   kind<TAB>source:line<TAB>body<TAB>reason
RULES=$KEYDIR/rules.tsv
: >"$RULES"
parse_rules() {
    local kind=$1 src=$2 lineno=0 line body reason
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        body=${line%%#*}
        body=$(echo "$body" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
        [ -z "$body" ] && continue
        case "$line" in
            *'#'*) reason=$(echo "${line#*#}" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//') ;;
            *) reason="" ;;
        esac
        [ -n "$reason" ] || die "$src:$lineno: no reason after '#'"
        case "$body" in */*) ;; *) die "$src:$lineno: '$body' is not dir/name" ;; esac
        printf '%s\t%s:%s\t%s\t%s\n' "$kind" "$src" "$lineno" "$body" "$reason" >>"$RULES"
    done
}
if [ -n "$ONLY" ]; then
    :
elif [ -f "$EXCLUDE_FILE" ]; then
    parse_rules excluded "$(basename "$EXCLUDE_FILE")" <"$EXCLUDE_FILE"
else
    say "no exclude file $EXCLUDE_FILE: nothing excluded"
fi

# ------------------------------------------------------------------ selection
# The quick subset (./check.sh): every entry of the directories except the
# ones below, which run only with --subset full.  Each is left out for its
# time on two oversubscribed cores, measured with Debian's MPICH (ch4:ucx)
# and with ch4:madrail; the numbers are in README.md.  Not a list of
# failures: those go to exclude.txt.  The rma times are from one --subset
# full run of rma with ch4:madrail at load 5-15 (other jobs on the 2 cores):
# every rma entry that took 10 s or more there.
QUICK_OMIT=$(cat <<'EOF_QUICK'
pt2pt/sendflood 8       # 8 ranks flood rank 0 with 100000 messages: timed out (360 s) with ucx
comm/ctxsplit 4         # 100000 MPI_Comm_split calls: timed out (600 s) with ucx
comm/cmfree 4           # 32 s with ucx
coll/allredmany 4       # 10000 allreduces: 148 s with ucx
coll/allgatherv4 4      # 115 s with ucx
coll/nonblocking3 4     # 100000 random nonblocking collectives: 109 s with ucx
coll/nonblocking3 5     # 201 s with ucx
coll/nonblocking3 10    # timed out (360 s) with ucx
coll/reduce 10          # 74 s with ucx
coll/alltoall1 8        # 25 s with ucx
coll/nballtoall1 8      # 20 s with ucx
coll/p_alltoallv 10     # 31 s with ucx
coll/allred 7           # 21 s with ucx
rma/lockcontention2 4   # 35 s with madrail (load 8-12)
rma/lockcontention2 8   # 255 s with madrail (load 8-12)
rma/window_allocation 4 # 1000 MPI_Win_allocate: 107 s with madrail, 301 s with ucx
rma/window_noncontig_allocation 4 # 111 s with madrail
rma/contention_put 4    # 69 s with madrail
rma/contention_putget 4 # 124 s with madrail, 256 s with ucx
rma/reqops 4            # 26 s with madrail
rma/mutex_bench 4       # 16 s with madrail
rma/mutex_bench_shm 4   # 17 s with madrail
rma/mutex_bench_shm_ordered 4 # 25 s with madrail
rma/linked_list_bench_lock_all 4  # 41 s with madrail
rma/linked_list_bench_lock_excl 4 # 87 s with madrail
rma/linked_list_bench_lock_shr 4  # 69 s with madrail
rma/linked_list_bench_lock_shr_nocheck 4 # 27 s with madrail
rma/manyget 2           # 100000 gets of 128 KiB (13 GB): 288 s with madrail
rma/atomic_rmw_cas 3    # 10000 lock_all/CAS/flush rounds: timed out (360 s) with madrail; ucx costs the same per round
rma/atomic_rmw_gacc 3   # 90 s with madrail
rma/atomic_get_short_int 3  # 62 s with madrail
rma/atomic_get_2int 3       # 122 s with madrail
rma/atomic_get_long_int 3   # 97 s with madrail
rma/atomic_get_float_int 3  # 73 s with madrail
rma/atomic_get_double_int 3 # 83 s with madrail
rma/atomic_get_long_double_int 3 # 86 s with madrail
rma/fetch_and_op_char 4                  # 33 s with madrail
rma/fetch_and_op_short 4                 # 26 s with madrail
rma/fetch_and_op_int 4                   # 38 s with madrail
rma/fetch_and_op_long 4                  # 28 s with madrail
rma/fetch_and_op_double 4                # 22 s with madrail
rma/fetch_and_op_long_double 4           # 26 s with madrail
rma/fetch_and_op_char_hwacc 4            # 22 s with madrail
rma/fetch_and_op_short_hwacc 4           # 20 s with madrail
rma/fetch_and_op_int_hwacc 4             # 32 s with madrail
rma/fetch_and_op_long_hwacc 4            # 26 s with madrail
rma/fetch_and_op_double_hwacc 4          # 29 s with madrail
rma/fetch_and_op_long_double_hwacc 4     # 33 s with madrail
rma/fetch_and_op_char_accop_hwacc 4      # 35 s with madrail
rma/fetch_and_op_short_accop_hwacc 4     # 30 s with madrail
rma/fetch_and_op_int_accop_hwacc 4       # 26 s with madrail
rma/fetch_and_op_long_accop_hwacc 4      # 35 s with madrail
rma/fetch_and_op_double_accop_hwacc 4    # 40 s with madrail
rma/fetch_and_op_long_double_accop_hwacc 4 # 48 s with madrail
rma/get_accumulate_double 4              # 91 s with madrail
rma/get_accumulate_double_derived 4      # 93 s with madrail
rma/get_accumulate_int 4                 # 101 s with madrail
rma/get_accumulate_int_derived 4         # 113 s with madrail
rma/get_accumulate_long 4                # 103 s with madrail
rma/get_accumulate_long_derived 4        # 128 s with madrail
rma/get_accumulate_short 4               # 131 s with madrail
rma/get_accumulate_short_derived 4       # 71 s with madrail
rma/rma_contig 2 arg=-iter=10000 # 10000 iterations of every RMA operation: 213 s with madrail (the -iter=10 entry stays)
rma/large_acc_flush_local 3 # 500 x 40 accumulates of 1-8 MB (about 20 GB): 317 s with madrail, near its 360 s limit
rma/put_flush_get 3  # 10000 rounds of barrier, put, flush, get: put_flush_get took 260 s at load 6-8 (atomic_rmw_cas, the same pattern, timed out)
rma/acc_flush_get 3  # 10000 rounds of barrier, acc, flush, get: put_flush_get took 260 s at load 6-8 (atomic_rmw_cas, the same pattern, timed out)
rma/gacc_flush_get 3 # 10000 rounds of barrier, gacc, flush, get: put_flush_get took 260 s at load 6-8 (atomic_rmw_cas, the same pattern, timed out)
rma/fop_flush_get 3  # 10000 rounds of barrier, fop, flush, get: put_flush_get took 260 s at load 6-8 (atomic_rmw_cas, the same pattern, timed out)
rma/cas_flush_get 3  # 10000 rounds of barrier, cas, flush, get: put_flush_get took 260 s at load 6-8 (atomic_rmw_cas, the same pattern, timed out)
rma/get_flushlocal 4     # 43 s with madrail (quick run, load 6-9)
rma/get_flushlocal_shm 4 # 42 s with madrail (quick run, load 6-9)
rma/derived_acc_flush_local 3 # 500 derived-datatype accumulates of 4 MB: 29 s with madrail (test/mpi/mpi_acc_large guards its fix in step 8)
EOF_QUICK
)
if [ "$SUBSET" = quick ] && [ -z "$ONLY" ]; then
    parse_rules subset quick <<<"$QUICK_OMIT"
fi

# select_entries DIR: read DIR/testlist (recursing into sub-directory
# entries), write DIR/testlist.mdr and print one line per entry:
#   state<TAB>dir<TAB>name<TAB>np<TAB>line<TAB>reason
# state is run, excluded or subset (left out by --subset quick or --only).
select_entries() {
    local dir=$1
    awk -v dir="$dir" -v only="$ONLY" -v rulefile="$RULES" -v tree="$TREE" \
        -v used="$KEYDIR/rules.used" '
    function strip(s) { sub(/#.*/, "", s); gsub(/^[ \t]+|[ \t\r]+$/, "", s); return s }
    BEGIN {
        nr = 0
        while ((getline l < rulefile) > 0) {
            split(l, f, "\t"); nr++
            rkind[nr] = f[1]; rsrc[nr] = f[2]; rreason[nr] = f[4]
            n = split(f[3], t, /[ \t]+/)
            rname[nr] = t[1]; rnp[nr] = ""; rkv[nr] = ""
            for (i = 2; i <= n; i++) {
                if (t[i] ~ /^[0-9]+$/ && i == 2) rnp[nr] = t[i]
                else rkv[nr] = rkv[nr] " " t[i]
            }
        }
        nonly = split(only, onl, ",")
    }
    # rule_hit(k, full, np, tok, n): does rule k match this entry?
    function rule_hit(k, full, np, tok, n,    m, kv, i, j, o) {
        if (rname[k] != full) return 0
        if (rnp[k] != "" && rnp[k] != np) return 0
        m = split(rkv[k], kv, " ")
        for (i = 1; i <= m; i++) {
            j = 0
            for (o = 2; o <= n; o++) if (tok[o] == kv[i]) j = 1
            if (!j) return 0
        }
        return 1
    }
    # process(sd): read tree/sd/testlist, write tree/sd/testlist.mdr
    function process(sd,    file, out, line, n, tok, name, np, full, k, state, reason, o, want, pass) {
        file = tree "/" sd "/testlist"; out = tree "/" sd "/testlist.mdr"
        printf "" > out
        while ((getline line < file) > 0) {
            line = strip(line)
            if (line == "") continue
            if (line ~ /^!/) { print line > out; continue }
            n = split(line, tok, /[ \t]+/)
            name = tok[1]
            if (system("test -d \"" tree "/" sd "/" name "\"") == 0) {
                print line > out
                process(sd "/" name)
                continue
            }
            np = (n >= 2 && tok[2] ~ /^[0-9]+$/) ? tok[2] : 2
            full = sd "/" name
            state = "run"; reason = ""
            if (nonly > 0) {
                state = "subset"; reason = "not in --only"
                for (o = 1; o <= nonly; o++) {
                    want = onl[o]
                    if (want == full || want == full ":" np) { state = "run"; reason = "" }
                }
            }
            # exclusions first, then the quick subset
            for (pass = 1; pass <= 2 && state == "run"; pass++) {
                for (k = 1; k <= nr && state == "run"; k++) {
                    if (rkind[k] != (pass == 1 ? "excluded" : "subset")) continue
                    if (!rule_hit(k, full, np, tok, n)) continue
                    state = rkind[k]
                    reason = rreason[k] " (" rsrc[k] ")"
                    print rsrc[k] >> used
                }
            }
            if (state == "run") print line > out
            else print "# " state ": " line > out
            printf "%s\t%s\t%s\t%s\t%s\t%s\n", state, sd, name, np, line, reason
        }
        close(file); close(out)
    }
    BEGIN { process(dir) }'
}

ENTRIES=$KEYDIR/entries.tsv
: >"$ENTRIES"
: >"$KEYDIR/rules.used"
for d in "${DIR_LIST[@]}"; do
    select_entries "$d" >>"$ENTRIES" || die "reading $d/testlist failed"
done
[ -s "$ENTRIES" ] || die "no testlist entries found in ${DIRS}"

if [ -n "$ONLY" ]; then
    IFS=',' read -r -a only_list <<<"$ONLY"
    for o in "${only_list[@]}"; do
        t=${o%%:*}
        awk -F'\t' -v t="$t" '$1 == "run" && $2 "/" $3 == t { f = 1 } END { exit !f }' "$ENTRIES" ||
            die "--only $o: no such entry in $(dirname "$t")/testlist"
    done
fi

# Rules that match nothing are stale (a test renamed, a typo).
if [ -s "$RULES" ]; then
    while IFS=$'\t' read -r _ src body _; do
        edir=${body%%/*}
        in_dirs=no
        for d in "${DIR_LIST[@]}"; do [ "$d" = "$edir" ] && in_dirs=yes; done
        [ "$in_dirs" = yes ] || continue
        grep -qxF "$src" "$KEYDIR/rules.used" ||
            say "warning: $src '$body' matches no testlist entry"
    done <"$RULES"
fi

if [ "$LIST_ONLY" = yes ]; then
    awk -F'\t' '{ printf "%-9s %s/%s%s\n", $1, $2, $5, ($6 == "" ? "" : "   # " $6) }' "$ENTRIES"
    awk -F'\t' '{ c[$1]++ } END { printf "%d to run, %d excluded, %d outside the subset\n", c["run"], c["excluded"], c["subset"] }' "$ENTRIES"
    exit 0
fi

# ------------------------------------------------------------------ environment
export MADRAIL_RAILS=${MADRAIL_RAILS:-tcp:lo,tcp:lo}
export MPIR_CVAR_NOLOCAL=${MPIR_CVAR_NOLOCAL:-1}
if [ "$SYSTEM" = yes ]; then
    LD_LIBRARY_PATH=$MADRAIL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    [ -d "$MADRAIL_LIB" ] || say "warning: --madrail-lib $MADRAIL_LIB does not exist"
    LD_LIBRARY_PATH=$MADRAIL_LIB:$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export LD_LIBRARY_PATH
export MPITEST_TIMEOUT_MULTIPLIER=$TMULT
export MPITEST_CLEANUP=0           # keep the compiled programs (the cache)
export USER=${USER:-$(id -un)}     # runtests lists the user's processes with ps -U
RUN_ENV="MADRAIL_RAILS=$MADRAIL_RAILS MPIR_CVAR_NOLOCAL=$MPIR_CVAR_NOLOCAL LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
say "MPICH: $PREFIX_DESC"
say "source: $SRC"
say "tree: $TREE"
say "environment: $RUN_ENV MPITEST_TIMEOUT_MULTIPLIER=$TMULT"
say "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ preflight
# 1. The libmadrail found first must define every madrail_* symbol libmpi
#    uses: a stale <repo>/_install/lib (libmadrail not reinstalled after an
#    API change) would otherwise fail every test the same way.
if [ "$SYSTEM" = no ] && command -v nm >/dev/null 2>&1; then
    libmpi=$(ls "$PREFIX"/lib/libmpi.so 2>/dev/null | head -n1)
    if [ -n "$libmpi" ] && [ -e "$MADRAIL_LIB/libmadrail.so" ]; then
        missing=$(comm -23 \
            <(nm -D --undefined-only "$libmpi" | awk '{ sub(/@.*/, "", $2); print $2 }' | grep '^madrail_' | sort -u) \
            <(nm -D --defined-only "$MADRAIL_LIB/libmadrail.so" | awk '{ sub(/@.*/, "", $3); print $3 }' | sort -u))
        if [ -n "$missing" ]; then
            say "ERROR: $MADRAIL_LIB/libmadrail.so does not define $(echo "$missing" | paste -sd' ' -), which $libmpi uses."
            say "       It is older than the netmod: reinstall it (./quickstart.sh --no-run), or pass --madrail-lib $PREFIX/lib."
            exit 2
        fi
    fi
fi
# 2. A two-rank smoke program: when even that fails, the whole suite would
#    fail the same way; say so once.
SMOKE=$KEYDIR/smoke
cat >"$SMOKE.c" <<'EOF_SMOKE'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, left, right, got = -1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (got != left || sum != size * (size - 1) / 2)
        printf("rank %d: got %d from the left (want %d), sum %d\n", rank, got, left, sum);
    else if (rank == 0)
        printf(" No Errors\n");
    MPI_Finalize();
    return 0;
}
EOF_SMOKE
if ! "$MPICC" -o "$SMOKE" "$SMOKE.c" >"$SMOKE.log" 2>&1; then
    cat "$SMOKE.log"
    die "$MPICC cannot compile a trivial MPI program (see above)"
fi
smoke_out=$(MPIEXEC_TIMEOUT=120 "$MPIEXEC" -n 2 "$SMOKE" 2>&1)
if [ "$smoke_out" != " No Errors" ]; then
    echo "$smoke_out" | tail -n 40
    say "ERROR: a two-rank ring + allreduce fails with this MPICH and environment:"
    say "       cd $KEYDIR && env $RUN_ENV $MPIEXEC -n 2 ./smoke"
    say "       (the suite was not run)"
    echo "0 passed, 1 failed"
    exit 1
fi
say "smoke test (2 ranks: ring + allreduce) passed"

# ------------------------------------------------------------------ build + run
OUT=$KEYDIR/results
mkdir -p "$OUT"
declare -A T_BUILD T_RUN
RUNTESTS_ARGS=(-srcdir=. -tests=testlist.mdr "-mpiexec=$MPIEXEC")
[ -n "$MAXNP" ] && RUNTESTS_ARGS+=("-maxnp=$MAXNP")

# The support libraries every test links.
if ! make -C "$TREE/util" libmtest_single.la >"$OUT/build-util.log" 2>&1 ||
   ! make -C "$TREE/dtpools" -j"$JOBS" >>"$OUT/build-util.log" 2>&1; then
    tail -n 30 "$OUT/build-util.log"
    die "building util/ and dtpools/ failed (see $OUT/build-util.log)"
fi

# --time-budget: runtests starts no new test once its stop file is not empty.
export MPITEST_STOPTEST=$KEYDIR/stoptest
rm -f "$MPITEST_STOPTEST"
WATCHDOG=""
if [ -n "$BUDGET" ]; then
    (sleep "$BUDGET" && echo "time budget of ${BUDGET}s used up" >"$MPITEST_STOPTEST") &
    WATCHDOG=$!
    trap '[ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null' EXIT
fi

for d in "${DIR_LIST[@]}"; do
    rm -f "$OUT/${d//\//_}.tap" "$OUT/${d//\//_}.xml" "$OUT/${d//\//_}.runtests.out"
    # Compile this directory's programs, -k: a test that does not build is
    # reported by runtests as a failure with the compiler's output.
    t0=$(now)
    : >"$OUT/${d//\//_}.build.log"
    awk -F'\t' '$1 == "run" { print $2 "\t" $3 }' "$ENTRIES" | awk -F'\t' -v d="$d" '$1 == d || index($1, d "/") == 1' |
        sort -u | awk -F'\t' '{ p[$1] = p[$1] " " $2 } END { for (s in p) print s "\t" p[s] }' |
        while IFS=$'\t' read -r sub progs; do
            # shellcheck disable=SC2086
            make -k -C "$TREE/$sub" -j"$JOBS" $progs >>"$OUT/${d//\//_}.build.log" 2>&1
        done
    T_BUILD[$d]=$(secs "$t0" "$(now)")
    nrun=$(awk -F'\t' -v d="$d" '$1 == "run" && ($2 == d || index($2, d "/") == 1)' "$ENTRIES" | wc -l)
    say "$d: compiled in ${T_BUILD[$d]}s; running $nrun entries..."
    t0=$(now)
    (cd "$TREE" && ./runtests "${RUNTESTS_ARGS[@]}" -testdirs="$d" \
        -xmlfile="$OUT/${d//\//_}.xml" -tapfile="$OUT/${d//\//_}.tap") >"$OUT/${d//\//_}.runtests.out" 2>&1
    T_RUN[$d]=$(secs "$t0" "$(now)")
    say "$d: ran in ${T_RUN[$d]}s ($(awk '/^ok/ { o++ } /^not ok/ { n++ } END { printf "%d ok, %d not ok", o, n }' "$OUT/${d//\//_}.tap" 2>/dev/null))"
done

# ------------------------------------------------------------------ results
# Pair the TAP lines with the entries run, in order (runtests writes one TAP
# line per entry: ok, not ok, or ok # SKIP), to recover arguments and
# environment of each failing entry for its reproduce command.
TOTAL_PASS=0; TOTAL_FAIL=0
FAILS=$KEYDIR/failures.txt
: >"$FAILS"
ROWS=()
for d in "${DIR_LIST[@]}"; do
    tap=$OUT/${d//\//_}.tap
    nexcl=$(awk -F'\t' -v d="$d" '$1 == "excluded" && ($2 == d || index($2, d "/") == 1)' "$ENTRIES" | wc -l)
    nsub=$(awk -F'\t' -v d="$d" '$1 == "subset" && ($2 == d || index($2, d "/") == 1)' "$ENTRIES" | wc -l)
    nrun=$(awk -F'\t' -v d="$d" '$1 == "run" && ($2 == d || index($2, d "/") == 1)' "$ENTRIES" | wc -l)
    if [ ! -f "$tap" ]; then
        pass=0; fail=$nrun; skip=0
        echo "== $d: runtests wrote no TAP file; its output:" >>"$FAILS"
        tail -n 30 "$OUT/${d//\//_}.runtests.out" >>"$FAILS"
    else
        read -r pass fail skip < <(awk '
            /^ok .*# SKIP/ { s++; next }
            /^ok /         { p++; next }
            /^not ok /     { f++ }
            END { print p + 0, f + 0, s + 0 }' "$tap")
        # Entries that never got a TAP line (runtests stopped early: too many
        # timeouts, a stop file) count as failures.
        missing=$((nrun - pass - fail - skip))
        if [ "$missing" -gt 0 ]; then
            fail=$((fail + missing))
            if [ -s "$MPITEST_STOPTEST" ]; then
                echo "== $d: $missing entries did not run: $(cat "$MPITEST_STOPTEST")" >>"$FAILS"
            else
                echo "== $d: $missing entries did not run; end of runtests output:" >>"$FAILS"
            fi
            tail -n 15 "$OUT/${d//\//_}.runtests.out" >>"$FAILS"
        fi
        awk -F'\t' -v d="$d" '$1 == "run" && ($2 == d || index($2, d "/") == 1)' "$ENTRIES" >"$OUT/${d//\//_}.run.tsv"
        awk -v tsv="$OUT/${d//\//_}.run.tsv" -v tree="$TREE" -v mpiexec="$MPIEXEC" \
            -v runenv="$RUN_ENV" -v tmult="$TMULT" -v script="$0" -v prefix_opt="$( [ "$SYSTEM" = yes ] && echo "--system" || echo "--mpich-prefix $PREFIX")" '
        function flush() {
            if (cur == "") return
            print "----- FAILED: " cur " -----"
            printf "%s", body
            print "  reproduce: " script " " prefix_opt " --only " curname ":" curnp
            print "        or: " repro
            print ""
            cur = ""; body = ""
        }
        BEGIN { i = 0; while ((getline l < tsv) > 0) { i++; ent[i] = l }; idx = 0 }
        /^(not )?ok / {
            flush()
            idx++
            n_out = 0
            if ($0 ~ /^not ok/) {
                split(ent[idx], e, "\t")
                curname = e[2] "/" e[3]; curnp = e[4]
                cur = curname " " curnp " (testlist: " e[5] ")"
                n = split(e[5], t, /[ \t]+/)
                args = ""; envs = ""; tl = 180
                for (k = 3; k <= n; k++) {
                    if (t[k] ~ /^arg=/) args = args " " substr(t[k], 5)
                    else if (t[k] ~ /^env=/) envs = envs " " substr(t[k], 5)
                    else if (t[k] ~ /^timeLimit=/) tl = substr(t[k], 11)
                }
                repro = "cd " tree "/" e[2] " && env " runenv envs " MPIEXEC_TIMEOUT=" int(tl * tmult) " " mpiexec " -n " e[4] " ./" e[3] args
            }
            next
        }
        cur != "" && /^## / { n_out++; if (n_out <= 60) body = body "  | " substr($0, 4) "\n"; next }
        END { flush() }' "$tap" >>"$FAILS"
    fi
    TOTAL_PASS=$((TOTAL_PASS + pass))
    TOTAL_FAIL=$((TOTAL_FAIL + fail))
    ROWS+=("$(printf '%-8s %7s %7s %7s %9s %8s %9s %7s %6s' "$d" "$nrun" "$pass" "$fail" "$nexcl" "$skip" "$nsub" "${T_BUILD[$d]}s" "${T_RUN[$d]}s")")
done

if [ -s "$FAILS" ]; then
    echo
    echo "===== failing tests (output is from $OUT/<dir>.tap) ====="
    cat "$FAILS"
fi

echo
say "results ($SUBSET subset; MPICH: $PREFIX_DESC)"
printf '%-8s %7s %7s %7s %9s %8s %9s %7s %6s\n' dir entries passed failed excluded skipped notsubset build run
for r in "${ROWS[@]}"; do echo "$r"; done
say "configure ${T_CONF}s (0 = cached tree); total $(( $(date +%s) - T_START ))s; load now $(cut -d' ' -f1-3 /proc/loadavg)"
say "skipped = skipped by runtests itself (xfail= entries; see README.md)"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" -eq 0 ] || exit 1
[ "$TOTAL_PASS" -gt 0 ] || { say "no test ran"; exit 1; }
exit 0
