#!/usr/bin/env bash
# quickstart.sh -- from a fresh clone to a first measurement, in one command.
#
# Installs the Debian 12 packages madrail needs (only those missing), builds
# and installs madrail under ./_install (out of tree, in ./_build), builds
# MPICH 4.0.2 with the ch4:madrail netmod (scripts/build-mpich.sh, cached
# outside the checkout), then runs the main job: MPI latency and bandwidth
# over one rail, two equal rails and two unequal rails of a two-node
# cluster made of network namespaces (bench/cluster/run.sh --quickstart),
# beside the rails' physical limit measured in the same run, as one table.
# Only where that cluster cannot be built (not root, no `ip netns`) does it
# fall back to one and two TCP rails on loopback (bench/run_mpi_rails.sh),
# saying why: on loopback two rails share one kernel path and show no gain.  Every step is skipped or cheap when its
# result is up to date, so running it again is safe and fast.  check.sh
# reuses the first three steps (--no-run).
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: ./quickstart.sh [--no-run] [--deps-only] [--lib-only] [--help]

Run as root on Debian 12 (root is needed only if a package is missing).

  1/5  install missing packages (apt-get; `apt-get update` only if needed):
       build-essential g++ gfortran autoconf automake libtool pkg-config
       libhwloc-dev hwloc libsodium-dev libfabric-dev libfabric-bin libucx-dev
       ucx-utils mpich libmpich-dev nftables iproute2 iputils-ping iperf3 gnuplot-nox
       openmpi-bin libopenmpi-dev (the cluster and the comparisons; the
       generic mpicc/mpirun are kept pointing at MPICH)
  2/5  generate ./configure (autoreconf) and configure ./_build with
       --prefix=$PWD/_install
  3/5  make -j$(nproc) and make install in ./_build
  4/5  build MPICH 4.0.2 with the ch4:madrail netmod into the cache
       (scripts/build-mpich.sh; 10-20 min the first time on 2 cores,
       seconds afterwards) and link it as _install/mpich
  5/5  the main job, bench/cluster/run.sh --quickstart (about a minute): a
       two-node cluster of network namespaces with 1 Gbit rails
       (test/cluster/cluster.sh); MPI latency (8 B) and bandwidth (1 MiB,
       bench/mpi, OSU semantics) over one rail, two equal rails and two
       unequal rails (1 Gbit + 300 Mbit), each beside the rails' physical
       limit (iperf3 per rail, same run) and the ratio to it.  Without root
       or network namespaces: bench/run_mpi_rails.sh, one and two TCP rails
       on loopback, saying why

Options:
  --no-run     stop after step 3 (libmadrail built and installed only)
  --deps-only  stop after step 1 (packages only)
  --lib-only   skip MPICH: step 5 runs _install/bin/madrail_run_rails, the
               same table over libmadrail's own benchmarks
  --help       this text

Environment:
  CONFIGURE_FLAGS  extra ./configure arguments (e.g. "--enable-werror")
  JOBS             parallel make jobs (default: nproc)
EOF
}

RUN=yes
DEPS_ONLY=no
LIB_ONLY=no
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --no-run) RUN=no ;;
        --deps-only) DEPS_ONLY=yes ;;
        --lib-only) LIB_ONLY=yes ;;
        *) echo "quickstart.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")"
SRC=$PWD
BUILD=$SRC/_build
PREFIX=$SRC/_install
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
PACKAGES=(build-essential g++ gfortran autoconf automake libtool pkg-config libhwloc-dev hwloc
          libsodium-dev libfabric-dev libfabric-bin libucx-dev ucx-utils mpich libmpich-dev
          nftables iproute2 iputils-ping iperf3 gnuplot-nox
          openmpi-bin libopenmpi-dev clang libclang-rt-14-dev)
STEP="start"

say() { echo "[quickstart] $*"; }
die() { echo "[quickstart] ERROR: $*" >&2; exit 1; }
on_exit() {
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "[quickstart] FAILED during: $STEP (exit $rc)" >&2
    fi
}
trap on_exit EXIT

# Run a command with its output in a log file; on failure show the log's
# end and stop.
logged() {
    local log=$1; shift
    if ! "$@" >"$log" 2>&1; then
        echo "[quickstart] command failed: $*" >&2
        echo "[quickstart] last lines of $log:" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
}

# ------------------------------------------------------------------ 1/5
STEP="1/5 installing packages"
say "1/5 installing packages..."
if command -v dpkg-query >/dev/null 2>&1; then
    missing=()
    for p in "${PACKAGES[@]}"; do
        st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case "$st" in ii*) ;; *) missing+=("$p") ;; esac
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "    all ${#PACKAGES[@]} packages already installed"
    else
        say "    missing: ${missing[*]}"
        [ "$(id -u)" -eq 0 ] ||
            die "packages missing and not root: run as root, or: apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        say "    apt-get update"
        logged /tmp/madrail-apt-update.log apt-get update
        say "    apt-get install ${missing[*]}"
        logged /tmp/madrail-apt-install.log \
            apt-get install -y --no-install-recommends "${missing[@]}"
    fi
else
    say "    no dpkg (not Debian?): assuming the build tools are installed"
fi
# openmpi-bin takes over the generic mpicc/mpirun/mpiexec (its alternatives
# rank higher); madrail's scripts name mpicc.mpich, mpiexec.hydra and
# mpirun.openmpi explicitly, but a user typing mpicc expects MPICH.
if [ "$(id -u)" -eq 0 ] && command -v update-alternatives >/dev/null 2>&1; then
    for alt in mpi:/usr/bin/mpicc.mpich mpirun:/usr/bin/mpirun.mpich; do
        name=${alt%%:*} want=${alt#*:}
        [ -e "$want" ] || continue
        cur=$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')
        if [ -n "$cur" ] && [ "$cur" != "$want" ]; then
            say "    update-alternatives --set $name $want (was $cur)"
            update-alternatives --set "$name" "$want" >/dev/null ||
                die "update-alternatives --set $name $want failed"
        fi
    done
fi
for t in gcc make autoreconf libtoolize pkg-config; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found after installing packages"
done
if [ "$DEPS_ONLY" = yes ]; then
    say "done (--deps-only)"
    exit 0
fi

# ------------------------------------------------------------------ 2/5
STEP="2/5 configuring"
say "2/5 configuring _build (prefix $PREFIX)..."
if [ -f "$SRC/config.status" ]; then
    die "the source tree itself was configured (./config.status exists); run 'make distclean' there first: quickstart builds out of tree in _build"
fi
# Regenerate ./configure when it is missing or older than its inputs;
# afterwards automake's rebuild rules keep _build in step.
regen=no
if [ ! -x "$SRC/configure" ] || [ ! -f "$SRC/Makefile.in" ]; then
    regen=yes
else
    for f in configure.ac Makefile.am config/m4/*.m4; do
        if [ "$f" -nt "$SRC/configure" ]; then regen=yes; fi
    done
fi
if [ "$regen" = yes ]; then
    say "    autoreconf -fi"
    logged "$SRC/autoreconf.log" autoreconf -fi
    rm -f "$SRC/autoreconf.log"
else
    say "    ./configure is up to date"
fi

mkdir -p "$BUILD"
# shellcheck disable=SC2206
want_args=(--prefix="$PREFIX" ${CONFIGURE_FLAGS:-})
have_args=()
if [ -x "$BUILD/config.status" ] && [ -f "$BUILD/Makefile" ]; then
    eval "have_args=($(cd "$BUILD" && ./config.status --config 2>/dev/null || true))"
fi
run_configure() (
    cd "$BUILD" && exec "$SRC/configure" "${want_args[@]}"
)
if [ "${have_args[*]:-}" = "${want_args[*]}" ]; then
    say "    _build is configured already (${want_args[*]})"
else
    say "    configure ${want_args[*]}"
    logged "$BUILD/configure.out" run_configure
    sed -n '/^madrail .* configured$/,$p' "$BUILD/configure.out"
fi

# ------------------------------------------------------------------ 3/5
STEP="3/5 building and installing"
say "3/5 building (make -j$JOBS) and installing into _install..."
logged "$BUILD/make.out" make -C "$BUILD" -j"$JOBS"
logged "$BUILD/install.out" make -C "$BUILD" install
say "    installed: $(cd "$PREFIX/bin" && ls | tr '\n' ' ')"
if [ "$RUN" = no ]; then
    say "done (--no-run): programs are in $PREFIX/bin"
    exit 0
fi

export PATH="$PREFIX/bin:$PATH"
if [ "$LIB_ONLY" = yes ]; then
    say "4/5 MPICH: skipped (--lib-only)"
    STEP="5/5 running the benchmarks"
    say "5/5 running _install/bin/madrail_run_rails (1 and 2 TCP rails on loopback)..."
    [ -x "$PREFIX/bin/madrail_run_rails" ] || die "$PREFIX/bin/madrail_run_rails was not installed"
    command -v mpiexec >/dev/null 2>&1 || die "mpiexec not found (package mpich)"
    "$PREFIX/bin/madrail_run_rails" || die "madrail_run_rails failed (exit $?)"
    say "done. Next: ./check.sh runs the test suites; README.md explains the rest."
    exit 0
fi

# ------------------------------------------------------------------ 4/5
STEP="4/5 building MPICH with ch4:madrail"
say "4/5 building MPICH 4.0.2 with ch4:madrail (scripts/build-mpich.sh)..."
"$SRC/scripts/build-mpich.sh" --prefix-madrail="$PREFIX" --jobs "$JOBS" 2>&1 |
    sed -u 's/^/[quickstart]     /'
[ "${PIPESTATUS[0]}" -eq 0 ] || die "scripts/build-mpich.sh failed (its logs: ${MADRAIL_CACHE_DIR:-/var/cache/madrail}/logs)"

# ------------------------------------------------------------------ 5/5
STEP="5/5 running the MPI benchmarks"
say "5/5 the main job: MPI over 1, 2 equal and 2 unequal rails of a namespace cluster (bench/cluster/run.sh --quickstart)..."
CLUSTER_OUT=$BUILD/cluster-first-look
rm -rf "$CLUSTER_OUT"
set +e
MDR_MPICH_DIR=$PREFIX/mpich "$SRC/bench/cluster/run.sh" --quickstart --out "$CLUSTER_OUT" 2>&1 |
    tee "$BUILD/cluster-first-look.log" | sed -u 's/^/[quickstart]     /'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -eq 0 ]; then
    say "    table saved in ${CLUSTER_OUT#"$SRC"/}/quickstart.txt (every value: results.csv there)"
    say "    the full comparison with MPICH ch4:ucx and Open MPI: bench/cluster/run.sh (docs/performance.md)"
elif [ "$rc" -eq 77 ]; then
    why=$(sed -n 's/^SKIP: [^:]*: //p' "$BUILD/cluster-first-look.log" | head -n 1)
    say "    the namespace cluster cannot be built here (${why:-see ${BUILD#"$SRC"/}/cluster-first-look.log}):"
    say "    falling back to loopback, where two rails share one kernel path and the same"
    say "    cores, so a second rail shows no gain (run as root, with network namespaces,"
    say "    to see it)"
    "$SRC/bench/run_mpi_rails.sh" --out "$BUILD/mpi-rails.txt" ||
        die "bench/run_mpi_rails.sh failed (exit $?)"
    say "    table saved in ${BUILD#"$SRC"/}/mpi-rails.txt"
else
    die "bench/cluster/run.sh --quickstart failed (exit $rc; log: ${BUILD#"$SRC"/}/cluster-first-look.log)"
fi
say "done. Next: ./check.sh runs the test suites; README.md explains the rest."
