#!/usr/bin/env bash
# quickstart.sh -- from a fresh clone to a first measurement, in one command.
#
# Installs the Debian 12 packages madrail needs (only those missing), builds
# and installs madrail under ./_install (out of tree, in ./_build), then runs
# the benchmark driver: latency and bandwidth over one and two TCP rails on
# loopback.  Every step is skipped or cheap when its result is up to date,
# so running it again is safe and fast.  check.sh reuses the first three
# steps (--no-run).
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: ./quickstart.sh [--no-run] [--deps-only] [--help]

Run as root on Debian 12 (root is needed only if a package is missing).

  1/4  install missing packages (apt-get; `apt-get update` only if needed):
       build-essential autoconf automake libtool pkg-config libhwloc-dev
       hwloc libfabric-dev libucx-dev mpich
  2/4  generate ./configure (autoreconf) and configure ./_build with
       --prefix=$PWD/_install
  3/4  make -j$(nproc) and make install in ./_build
  4/4  run _install/bin/madrail_run_rails: latency and bandwidth over one
       and two TCP rails on loopback, printed as a table

Options:
  --no-run     stop after step 3 (build and install only)
  --deps-only  stop after step 1 (packages only)
  --help       this text

Environment:
  CONFIGURE_FLAGS  extra ./configure arguments (e.g. "--enable-werror")
  JOBS             parallel make jobs (default: nproc)
EOF
}

RUN=yes
DEPS_ONLY=no
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --no-run) RUN=no ;;
        --deps-only) DEPS_ONLY=yes ;;
        *) echo "quickstart.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

cd "$(dirname "$0")"
SRC=$PWD
BUILD=$SRC/_build
PREFIX=$SRC/_install
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
PACKAGES=(build-essential autoconf automake libtool pkg-config libhwloc-dev hwloc
          libfabric-dev libucx-dev mpich)
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

# ------------------------------------------------------------------ 1/4
STEP="1/4 installing packages"
say "1/4 installing packages..."
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
for t in gcc make autoreconf libtoolize pkg-config; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found after installing packages"
done
if [ "$DEPS_ONLY" = yes ]; then
    say "done (--deps-only)"
    exit 0
fi

# ------------------------------------------------------------------ 2/4
STEP="2/4 configuring"
say "2/4 configuring _build (prefix $PREFIX)..."
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

# ------------------------------------------------------------------ 3/4
STEP="3/4 building and installing"
say "3/4 building (make -j$JOBS) and installing into _install..."
logged "$BUILD/make.out" make -C "$BUILD" -j"$JOBS"
logged "$BUILD/install.out" make -C "$BUILD" install
say "    installed: $(cd "$PREFIX/bin" && ls | tr '\n' ' ')"
if [ "$RUN" = no ]; then
    say "done (--no-run): programs are in $PREFIX/bin"
    exit 0
fi

# ------------------------------------------------------------------ 4/4
STEP="4/4 running the benchmarks"
say "4/4 running _install/bin/madrail_run_rails (1 and 2 TCP rails on loopback)..."
[ -x "$PREFIX/bin/madrail_run_rails" ] || die "$PREFIX/bin/madrail_run_rails was not installed"
command -v mpiexec >/dev/null 2>&1 || die "mpiexec not found (package mpich)"
export PATH="$PREFIX/bin:$PATH"
"$PREFIX/bin/madrail_run_rails" || die "madrail_run_rails failed (exit $?)"
say "done. Next: ./check.sh runs the test suites; README.md explains the rest."
