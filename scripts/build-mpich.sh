#!/usr/bin/env bash
# scripts/build-mpich.sh -- build MPICH 4.0.2 with the madrail ch4 netmod.
#
# Why it is built this way:
#  - MPICH comes from Debian's source package (the version of Debian's
#    libmpich12, so Debian-built MPI programs run on it through
#    LD_LIBRARY_PATH) or from the user's own 4.0.2 tree or tarball; any
#    other version is refused, because mpich-patches/ are made for 4.0.2.
#  - Everything happens outside the checkout: the source, the build and the
#    result live under $MADRAIL_CACHE_DIR (default /var/cache/madrail).  The
#    result is a prefix named after a hash of everything that goes into it,
#    completed by a stamp written last; when it exists the build is skipped,
#    so a second run takes seconds.  <repo>/_install/mpich is made a symlink
#    to it.
#  - The prefix carries its own copy of libmadrail (and madrail.h), and
#    libmpich.so finds it there (RUNPATH), so a cached MPICH keeps working when
#    the checkout that built it is gone; LD_LIBRARY_PATH still wins, which
#    is how the test scripts put the current checkout's libmadrail first.
#  - A clean build takes about ten minutes on two cores; ccache (when
#    installed) makes a rebuild of unchanged files cheap.
set -euo pipefail

MPICH_VERSION=4.0.2
PROG=build-mpich.sh

usage() {
    cat <<'EOF'
Usage: scripts/build-mpich.sh --prefix-madrail=DIR [--with-mpich-src=DIR|TARBALL]
                              [--jobs N] [--force] [--help]

Builds MPICH 4.0.2 with the madrail ch4 netmod (--with-device=ch4:madrail)
and makes <repo>/_install/mpich point to it (bin/mpicc, bin/mpiexec, ...).

  --prefix-madrail=DIR   where libmadrail is installed (DIR/include/madrail.h,
                         DIR/lib/libmadrail.so); e.g. <repo>/_install
  --with-mpich-src=X     an MPICH 4.0.2 source tree or tarball (.tar.gz/.xz);
                         default: Debian's source package (`apt-get source
                         mpich`; a deb-src entry is derived from
                         /etc/apt/sources.list.d/debian.sources if none exists)
  --jobs N               parallel make jobs (default: 2)
  --force                rebuild even if the cached prefix is complete
  --help                 this text

Steps (each prints its elapsed time):
  1 packages     install missing build tools with apt-get (root only if missing)
  2 source       fetch/unpack MPICH, check it is exactly 4.0.2
  3 key          hash the inputs; skip to 8 if that prefix is complete
  4 prepare      copy the tree, add src/netmod/madrail, apply mpich-patches/series
  5 autogen      autogen.sh (only the parts the netmod changes)
  6 configure    ch4:madrail, dataloop, C++ and Fortran (77/90/2008), no
                 ROMIO, shared only
  7 make         make -jN && make install, copy libmadrail into the prefix
  8 link         refresh the prefix's libmadrail from --prefix-madrail,
                 <repo>/_install/mpich -> the cached prefix

Environment:
  MADRAIL_CACHE_DIR   cache root (default /var/cache/madrail): mpich-4.0.2-<key>/
                      prefixes, src/ (Debian source), build/ (scratch), logs/
  CC, CXX, FC         compilers (default gcc, g++, gfortran; C and C++ through ccache
                      when /usr/lib/ccache has them, with its cache in
                      $MADRAIL_CACHE_DIR/ccache unless CCACHE_DIR is set)

Run time: shared memory is on by default; MPIR_CVAR_NOLOCAL=1 sends all
traffic through the netmod.  MADRAIL_RAILS (or the CVAR
MPIR_CVAR_CH4_MADRAIL_RAILS) selects the rails, MADRAIL_STATS=1 prints
per-rail counters at MPI_Finalize.
EOF
}

say() { printf '[build-mpich] %s\n' "$*"; }
die() { printf '[build-mpich] ERROR: %s\n' "$*" >&2; exit 1; }

T0=$(date +%s)
PHASE_T0=$T0
phase() {
    local now
    now=$(date +%s)
    PHASE_T0=$now
    say "$1 ..."
}
phase_done() {
    local now
    now=$(date +%s)
    say "   done in $((now - PHASE_T0)) s (total $((now - T0)) s)${1:+: $1}"
}

# ---------------------------------------------------------------- options

PREFIX_MADRAIL=
MPICH_SRC=
JOBS=2
FORCE=no
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --prefix-madrail=*) PREFIX_MADRAIL=${1#*=} ;;
        --prefix-madrail) shift; PREFIX_MADRAIL=${1:-} ;;
        --with-mpich-src=*) MPICH_SRC=${1#*=} ;;
        --with-mpich-src) shift; MPICH_SRC=${1:-} ;;
        --jobs=*) JOBS=${1#*=} ;;
        --jobs|-j) shift; JOBS=${1:-} ;;
        --force) FORCE=yes ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

[ -n "$PREFIX_MADRAIL" ] || die "--prefix-madrail=DIR is required (where libmadrail is installed; see --help)"
case "$JOBS" in ''|*[!0-9]*|0) die "--jobs wants a positive number, not '$JOBS'" ;; esac
PREFIX_MADRAIL=$(cd "$PREFIX_MADRAIL" 2>/dev/null && pwd) ||
    die "--prefix-madrail: no such directory"
[ -f "$PREFIX_MADRAIL/include/madrail.h" ] ||
    die "--prefix-madrail=$PREFIX_MADRAIL: no include/madrail.h (build and install libmadrail first, e.g. ./quickstart.sh --no-run)"
ls "$PREFIX_MADRAIL"/lib/libmadrail.so* >/dev/null 2>&1 ||
    die "--prefix-madrail=$PREFIX_MADRAIL: no lib/libmadrail.so"

REPO=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$REPO/src/netmod/madrail" ] && [ -f "$REPO/mpich-patches/series" ] ||
    die "$REPO does not look like the madrail checkout (src/netmod/madrail, mpich-patches/series)"

CACHE=${MADRAIL_CACHE_DIR:-/var/cache/madrail}
case "$CACHE" in "$REPO"|"$REPO"/*) die "MADRAIL_CACHE_DIR=$CACHE is inside the checkout; choose a directory outside it" ;; esac
mkdir -p "$CACHE" "$CACHE/logs" || die "cannot create $CACHE (set MADRAIL_CACHE_DIR)"
CACHE=$(cd "$CACHE" && pwd)
LOGS=$CACHE/logs

# One build at a time per cache (check.sh and quickstart.sh may both call us).
exec 9>"$CACHE/.build-mpich.lock"
if ! flock -n 9; then
    say "another build-mpich.sh is running on $CACHE; waiting for it"
    flock 9
fi

run_logged() { # name cmd... : run, output to $LOGS/name.log, show its tail on failure
    local name=$1
    shift
    if ! "$@" >"$LOGS/$name.log" 2>&1; then
        echo "----- last lines of $LOGS/$name.log -----" >&2
        tail -n 40 "$LOGS/$name.log" >&2
        die "$name failed (full log: $LOGS/$name.log)"
    fi
}

# ---------------------------------------------------------- 1 packages

phase "1/8 packages"
PKGS=(build-essential g++ gfortran autoconf automake libtool m4 perl patch python3
      xz-utils libhwloc-dev ccache)
[ -z "$MPICH_SRC" ] && PKGS+=(dpkg-dev)
MISSING=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep "install ok installed" >/dev/null ||
        MISSING+=("$p")
done
if [ ${#MISSING[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing packages: ${MISSING[*]} (run as root or install them)"
    say "   installing ${MISSING[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            "${MISSING[@]}" >"$LOGS/apt-install.log" 2>&1; then
        run_logged apt-update apt-get update
        run_logged apt-install env DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends "${MISSING[@]}"
    fi
fi
phase_done

# ------------------------------------------------------------ 2 source

# MPICH version of a source tree ("" if not an MPICH tree).
tree_version() {
    sed -n 's/^m4_define(\[MPICH_VERSION_m4\],\[\([^]]*\)\].*/\1/p' "$1/maint/version.m4" 2>/dev/null | head -n 1
}

phase "2/8 source"
SRC_ID=
if [ -n "$MPICH_SRC" ]; then
    if [ -d "$MPICH_SRC" ]; then
        SRC_TREE=$(cd "$MPICH_SRC" && pwd)
        # no tarball to hash: the tree's file list, sizes and times
        SRC_ID="dir:$SRC_TREE:$(cd "$SRC_TREE" && find . -type f ! -path './.git/*' -printf '%P %s %T@\n' | LC_ALL=C sort | sha256sum | cut -c1-64)"
    elif [ -f "$MPICH_SRC" ]; then
        TARBALL=$(cd "$(dirname "$MPICH_SRC")" && pwd)/$(basename "$MPICH_SRC")
        SUM=$(sha256sum "$TARBALL" | cut -c1-64)
        SRC_ID="tarball:$SUM"
        SRC_TREE=$CACHE/src/tarball-$SUM/mpich-$MPICH_VERSION
        if [ ! -f "$SRC_TREE/.unpacked" ]; then
            rm -rf "$CACHE/src/tarball-$SUM"
            mkdir -p "$CACHE/src/tarball-$SUM"
            say "   unpacking $TARBALL"
            run_logged unpack tar -xf "$TARBALL" -C "$CACHE/src/tarball-$SUM"
            [ -d "$SRC_TREE" ] || die "$TARBALL does not unpack to mpich-$MPICH_VERSION/ (is it MPICH $MPICH_VERSION?)"
            touch "$SRC_TREE/.unpacked"
        fi
    else
        die "--with-mpich-src=$MPICH_SRC: no such file or directory"
    fi
else
    DEBSRC=$CACHE/src/debian
    mkdir -p "$DEBSRC"
    ORIG=$(ls "$DEBSRC"/mpich_"$MPICH_VERSION".orig.tar.* 2>/dev/null | head -n 1 || true)
    if [ -z "$ORIG" ] || [ ! -d "$DEBSRC/mpich-$MPICH_VERSION" ] || [ ! -f "$DEBSRC/.fetched" ]; then
        if ! apt-cache showsrc mpich >/dev/null 2>&1 ||
           [ -z "$(apt-cache showsrc mpich 2>/dev/null)" ]; then
            [ "$(id -u)" = 0 ] || die "no deb-src entry for Debian's archive; run as root once (or pass --with-mpich-src)"
            BASE=/etc/apt/sources.list.d/debian.sources
            [ -f "$BASE" ] || die "no deb-src entry and no $BASE to derive one from; pass --with-mpich-src=DIR|TARBALL"
            say "   adding a deb-src entry derived from $BASE"
            sed -e 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$BASE" \
                >/etc/apt/sources.list.d/madrail-deb-src.sources
            run_logged apt-update apt-get update
            [ -n "$(apt-cache showsrc mpich 2>/dev/null)" ] ||
                die "apt-get update did not make the mpich source package visible"
        fi
        say "   apt-get source mpich (into $DEBSRC)"
        rm -rf "$DEBSRC" && mkdir -p "$DEBSRC"
        (cd "$DEBSRC" && run_logged apt-source apt-get source mpich)
        ORIG=$(ls "$DEBSRC"/mpich_"$MPICH_VERSION".orig.tar.* 2>/dev/null | head -n 1 || true)
        if [ -z "$ORIG" ] || [ ! -d "$DEBSRC/mpich-$MPICH_VERSION" ]; then
            die "apt-get source mpich did not give MPICH $MPICH_VERSION (got: $(ls "$DEBSRC" | tr '\n' ' '))"
        fi
        touch "$DEBSRC/.fetched"
    fi
    SRC_TREE=$DEBSRC/mpich-$MPICH_VERSION
    SRC_ID="debian:$(cat "$DEBSRC"/mpich_"$MPICH_VERSION"*.dsc 2>/dev/null | sha256sum | cut -c1-16):$(sha256sum "$ORIG" | cut -c1-64)"
fi
V=$(tree_version "$SRC_TREE")
[ -n "$V" ] || die "$SRC_TREE is not an MPICH source tree (no maint/version.m4)"
[ "$V" = "$MPICH_VERSION" ] ||
    die "$SRC_TREE is MPICH $V; only MPICH $MPICH_VERSION is supported (mpich-patches/ are made for it)"
[ -f "$SRC_TREE/src/mpid/ch4/netmod/Makefile.mk" ] || die "$SRC_TREE has no ch4 device"
phase_done "MPICH $V in $SRC_TREE"

# --------------------------------------------------------------- 3 key

phase "3/8 key"
# The wrappers (mpicc, mpicxx, mpifort) record CC, CXX and FC, so they stay
# plain compiler names; ccache comes in through its masquerade directory
# instead (C and C++; ccache does not cache Fortran, which is compiled each
# time).
CC=${CC:-gcc}
CXX=${CXX:-g++}
FC=${FC:-gfortran}
command -v "${CXX%% *}" >/dev/null 2>&1 || die "no C++ compiler '$CXX' (package g++, or set CXX)"
command -v "${FC%% *}" >/dev/null 2>&1 || die "no Fortran compiler '$FC' (package gfortran, or set FC)"
USE_CCACHE=no
if command -v ccache >/dev/null 2>&1 && [ -x "/usr/lib/ccache/${CC%% *}" ]; then
    USE_CCACHE=yes
fi
# MPILIBNAME=mpich: the libraries are libmpich.so.12, libmpichfort.so.12 and
# libmpichcxx.so.12 as in Debian's libmpich12, so Debian-built MPI programs
# (C, C++, Fortran) run on them through LD_LIBRARY_PATH.  The Fortran
# bindings are all three (mpif.h, `use mpi`, `use mpi_f08`), built with the
# same gfortran as Debian's, whose module files they must match.
CONFIGURE_FLAGS=(--with-device=ch4:madrail --with-datatype-engine=dataloop
                 --enable-fortran=all --enable-cxx --disable-romio --with-pm=hydra
                 --enable-fast=O2 --disable-static --enable-shared MPILIBNAME=mpich
                 # gfortran >= 10 refuses calls of one routine with different
                 # argument types (every mpif.h program) and some BOZ
                 # constants without these; Debian's mpifort passes them too
                 "FFLAGS=-fallow-argument-mismatch -fallow-invalid-boz"
                 "FCFLAGS=-fallow-argument-mismatch -fallow-invalid-boz")
PATCHES=()
while read -r p; do
    case "$p" in ''|'#'*) continue ;; esac
    [ -f "$REPO/mpich-patches/$p" ] || die "mpich-patches/series names $p, which does not exist"
    PATCHES+=("$p")
done <"$REPO/mpich-patches/series"
KEY=$({
    echo "source $SRC_ID"
    echo "flags ${CONFIGURE_FLAGS[*]} cc=$CC cxx=$CXX fc=$FC"
    # the compilers' versions too: a gfortran upgrade changes the .mod format
    "${CC%% *}" --version 2>&1 | head -n 1
    "${CXX%% *}" --version 2>&1 | head -n 1
    "${FC%% *}" --version 2>&1 | head -n 1
    (cd "$REPO" && sha256sum mpich-patches/* src/netmod/madrail/* include/madrail.h scripts/build-mpich.sh)
} | sha256sum | cut -c1-16)
PREFIX=$CACHE/mpich-$MPICH_VERSION-$KEY
STAMP=$PREFIX/.madrail-build-complete
phase_done "key $KEY"

if [ -f "$STAMP" ] && [ "$FORCE" = no ]; then
    say "cached: $PREFIX is complete (--force rebuilds); skipping 4-7"
else
    # ------------------------------------------------------ 4 prepare
    phase "4/8 prepare"
    BUILD=$CACHE/build/mpich-$MPICH_VERSION
    rm -rf "$BUILD"
    mkdir -p "$(dirname "$BUILD")"
    cp -a "$SRC_TREE" "$BUILD"
    rm -f "$BUILD/.unpacked"
    [ ! -e "$BUILD/src/mpid/ch4/netmod/madrail" ] ||
        die "$SRC_TREE already has src/mpid/ch4/netmod/madrail; give a pristine MPICH tree"
    mkdir -p "$BUILD/src/mpid/ch4/netmod/madrail"
    cp "$REPO"/src/netmod/madrail/* "$BUILD/src/mpid/ch4/netmod/madrail/"
    for p in "${PATCHES[@]}"; do
        if ! (cd "$BUILD" && patch -p1 --forward --batch <"$REPO/mpich-patches/$p") \
                >"$LOGS/patch.log" 2>&1; then
            cat "$LOGS/patch.log" >&2
            die "mpich-patches/$p does not apply to $SRC_TREE"
        fi
    done
    phase_done "${#PATCHES[@]} patches"

    # ------------------------------------------------------ 5 autogen
    # Only what the netmod changes: subsys_include.m4 (its subconfigure.m4),
    # the ch4 API boilerplate (its func_table.c), error messages, CVARs and
    # the top-level configure.  The bundled packages (hydra, hwloc, json-c,
    # ROMIO, ...) keep the configure scripts of the release tarball.
    phase "5/8 autogen"
    (cd "$BUILD" && run_logged autogen ./autogen.sh -quick -without-hydra -without-romio \
        -without-hwloc -without-json -without-test)
    [ -f "$BUILD/src/mpid/ch4/netmod/madrail/func_table.c" ] ||
        die "autogen.sh did not generate the madrail function table (mpich-patches/0002 not applied?)"
    phase_done

    # ---------------------------------------------------- 6 configure
    phase "6/8 configure"
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX/lib" "$PREFIX/include"
    # libmadrail inside the prefix: MPICH is configured against this copy
    # (no .la file, so libtool records no path into the checkout)
    cp -a "$PREFIX_MADRAIL"/lib/libmadrail.so* "$PREFIX/lib/"
    cp "$PREFIX_MADRAIL/include/madrail.h" "$PREFIX/include/"
    # ...but madrail.h is compiled in from a directory whose path is the
    # same for every key: nearly every MPICH object includes it (through
    # the inline netmod), and with -I<prefix>/include the key in that path
    # made every one of them a ccache miss after any netmod change
    # (seen: a rebuild after a netmod change missed on every ch4 object).
    MDR_INC=$CACHE/build/madrail-include
    rm -rf "$MDR_INC"
    mkdir -p "$MDR_INC"
    cp "$PREFIX_MADRAIL/include/madrail.h" "$MDR_INC/"
    if [ "$USE_CCACHE" = yes ]; then
        export PATH=/usr/lib/ccache:$PATH
        export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
        export CCACHE_BASEDIR=$BUILD
    fi
    (cd "$BUILD" && run_logged configure ./configure --prefix="$PREFIX" \
        --with-madrail-include="$MDR_INC" --with-madrail-lib="$PREFIX/lib" \
        "${CONFIGURE_FLAGS[@]}" CC="$CC" CXX="$CXX" FC="$FC" \
        LDFLAGS="-Wl,-rpath,$PREFIX/lib -Wl,--enable-new-dtags")
    grep -q "define HAVE_CH4_NETMOD_MADRAIL 1" "$BUILD/src/include/mpichconf.h" ||
        die "configure did not select the madrail netmod (see $LOGS/configure.log)"
    phase_done

    # --------------------------------------------------------- 7 make
    phase "7/8 make -j$JOBS, install"
    (cd "$BUILD" && run_logged make make -j"$JOBS")
    (cd "$BUILD" && run_logged install make install)
    # the inline build must contain the madrail netmod, not stubnm
    # (grep reads all of nm's output: with -q, nm's SIGPIPE fails the pipe)
    nm "$PREFIX/lib/libmpich.so" | grep " MPIDI_MADRAIL_am_isend$" >/dev/null ||
        die "libmpich.so has no madrail netmod (MPIDI_MADRAIL_am_isend missing)"
    # upstream's library name too, for programs linked against an upstream MPICH
    ln -sfn libmpich.so.12 "$PREFIX/lib/libmpi.so.12"
    ln -sfn libmpich.so "$PREFIX/lib/libmpi.so"
    for b in mpicc mpicxx mpifort mpiexec; do
        [ -x "$PREFIX/bin/$b" ] || die "make install produced no bin/$b"
    done
    for l in libmpich.so.12 libmpichcxx.so.12 libmpichfort.so.12; do
        [ -e "$PREFIX/lib/$l" ] || die "make install produced no lib/$l (Debian's library names)"
    done
    [ -f "$PREFIX/include/mpi_f08.mod" ] && [ -f "$PREFIX/include/mpi.mod" ] ||
        die "make install produced no Fortran modules (include/mpi.mod, mpi_f08.mod)"
    {
        echo "mpich $MPICH_VERSION ch4:madrail"
        echo "key $KEY"
        echo "source $SRC_ID"
        echo "libmadrail from $PREFIX_MADRAIL"
        echo "configure ${CONFIGURE_FLAGS[*]} CC=$CC CXX=$CXX FC=$FC (ccache: $USE_CCACHE)"
        echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - T0 )) s"
    } >"$STAMP.tmp"
    mv "$STAMP.tmp" "$STAMP"
    rm -rf "$BUILD"
    phase_done
fi

# ------------------------------------------------------------- 8 link

phase "8/8 link"
# The prefix's copy of libmadrail follows the one installed now: the key
# covers madrail.h (the interface the netmod is compiled against), not the
# library, so without this a cached MPICH would run the libmadrail of
# whichever checkout built it, and an MPI program would miss every later
# change of the core (LD_LIBRARY_PATH aside).
for f in "$PREFIX_MADRAIL"/lib/libmadrail.so.*.*.*; do
    [ -f "$f" ] || continue
    t=$PREFIX/lib/$(basename "$f")
    if ! cmp -s "$f" "$t"; then
        cp "$f" "$t.new.$$" && mv -f "$t.new.$$" "$t" ||
            die "cannot refresh $t from $f"
        say "   libmadrail in the prefix refreshed from $f"
    fi
done
mkdir -p "$REPO/_install"
LINK=$REPO/_install/mpich
if [ -e "$LINK" ] && [ ! -L "$LINK" ]; then
    die "$LINK exists and is not a symlink; remove it"
fi
ln -sfn "$PREFIX" "$LINK"
phase_done "$LINK -> $PREFIX"
say "ready: $LINK/bin/mpicc, $LINK/bin/mpiexec (total $(( $(date +%s) - T0 )) s)"
