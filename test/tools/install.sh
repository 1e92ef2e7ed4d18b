#!/bin/sh
# A program built against the installed libmadrail the two ways users
# build one: `cc $(pkg-config --cflags --libs madrail)` and a CMake project
# with find_package(madrail) and the imported target madrail::madrail
# (test/tools/install/).  Each program runs two contexts over a loop rail
# and checks every byte of an eager and a rendezvous message.
#
# Under `make check` the build is installed into a temporary directory
# (make install DESTDIR=...), as packagers stage it: pkg-config is pointed
# at it with PKG_CONFIG_SYSROOT_DIR, CMake with CMAKE_PREFIX_PATH (the
# CMake files locate the tree from where they sit).  Under `make
# installcheck` (distcheck runs it on its temporary prefix) the tree
# already installed in MDR_INSTALLED_PREFIX is used as it is.
#
# Also checked: the files land where they should, pkg-config --static adds
# the libraries a static link needs (hwloc when built with it),
# find_package refuses a version this one does not satisfy, and the
# programs load the installed library, not the build tree's.  Skips (77)
# only when neither pkg-config nor cmake is there.
set -u
build="${MDR_BUILDDIR:-.}"
src="${MDR_SRCDIR:-$(dirname "$0")/../..}"
cc=${MDR_CC:-${CC:-cc}}
cflags=${MDR_CFLAGS:-}
ldflags=${MDR_LDFLAGS:-}
have_pc=0
have_cmake=0
command -v pkg-config >/dev/null 2>&1 && have_pc=1
command -v cmake >/dev/null 2>&1 && have_cmake=1
if [ $have_pc = 0 ] && [ $have_cmake = 0 ]; then
    echo "SKIP: install: neither pkg-config nor cmake is installed"
    exit 77
fi

fail=0
ok() { echo "ok - $*"; }
bad() { echo "FAIL: $*"; fail=1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mdrinst.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

if [ -n "${MDR_INSTALLED_PREFIX:-}" ]; then
    root=
    prefix=$MDR_INSTALLED_PREFIX
    libdir=${MDR_INSTALLED_LIBDIR:-$prefix/lib}
    echo "installed tree: $prefix (libdir $libdir)"
else
    # Stage an install of this build.  MAKEFLAGS is cleared: this make is
    # not a child of the one running the tests (no jobserver to share).
    root=$tmp/stage
    if ! MAKEFLAGS= ${MDR_MAKE:-make} -C "$build" install DESTDIR="$root" >"$tmp/install.log" 2>&1; then
        tail -n 30 "$tmp/install.log"
        echo "FAIL: make install DESTDIR=$root"
        exit 1
    fi
    pc=$(find "$root" -name madrail.pc -path '*/pkgconfig/*' | head -n 1)
    [ -n "$pc" ] || { echo "FAIL: make install put no madrail.pc under $root"; exit 1; }
    # prefix and libdir as configure wrote them into the .pc
    prefix=$(sed -n 's/^prefix=//p' "$pc")
    libdir=$(PKG_CONFIG_PATH= pkg-config --variable=libdir "$pc" 2>/dev/null ||
             dirname "$(dirname "${pc#"$root"}")")
    echo "staged: DESTDIR=$root, prefix $prefix, libdir $libdir"
fi
lib=$root$libdir

# ---- the files
for f in "$lib/pkgconfig/madrail.pc" "$lib/cmake/madrail/madrailConfig.cmake" \
         "$lib/cmake/madrail/madrailConfigVersion.cmake"; do
    [ -f "$f" ] && ok "installed ${f#"$root"}" || bad "not installed: ${f#"$root"}"
done
ls "$lib"/libmadrail.so* >/dev/null 2>&1 || ls "$lib"/libmadrail.a >/dev/null 2>&1 ||
    bad "no libmadrail.so or .a in $lib"

# run PROGRAM LABEL: it must print "install-prog: ok" and load libmadrail
# from the installed tree
run_prog() {
    out=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$1" 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^install-prog: ok$'; then
        ok "$2: runs ($(printf '%s\n' "$out" | head -n 1))"
    else
        printf '%s\n' "$out"
        bad "$2: exit $rc"
    fi
    if command -v ldd >/dev/null 2>&1 && ldd "$1" 2>/dev/null | grep -q 'libmadrail'; then
        where=$(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1" |
                awk '/libmadrail/ {print $3}')
        case $where in
            "$lib"/*) ok "$2: loads $where" ;;
            *) bad "$2: loads libmadrail from '$where', not from $lib" ;;
        esac
    fi
}

# ---- pkg-config
if [ $have_pc = 1 ]; then
    pcenv="PKG_CONFIG_PATH=$lib/pkgconfig"
    [ -n "$root" ] && pcenv="$pcenv PKG_CONFIG_SYSROOT_DIR=$root"
    flags=$(env $pcenv pkg-config --cflags --libs madrail 2>&1); rc=$?
    if [ $rc -ne 0 ]; then
        bad "pkg-config --cflags --libs madrail: $flags"
    else
        ok "pkg-config --cflags --libs madrail: $flags"
        ver=$(env $pcenv pkg-config --modversion madrail)
        want=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$build/mdr_config.h")
        [ "$ver" = "$want" ] && ok "pkg-config --modversion: $ver" ||
            bad "pkg-config --modversion: '$ver', configure says '$want'"
        case " $flags " in
            *" -I$root"*"/include "*) ok "pkg-config: -I names the installed headers" ;;
            *) bad "pkg-config: no -I into the installed tree in '$flags'" ;;
        esac
        static=$(env $pcenv pkg-config --static --libs madrail)
        if grep -q '^#define HAVE_HWLOC 1' "$build/mdr_config.h"; then
            case " $static " in
                *" -lhwloc "*) ok "pkg-config --static: $static" ;;
                *) bad "pkg-config --static lacks -lhwloc: $static" ;;
            esac
        fi
        # shellcheck disable=SC2086
        if $cc $cflags -o "$tmp/prog_pc" "$src/test/tools/install/prog.c" $flags $ldflags \
            >"$tmp/cc.log" 2>&1; then
            ok "cc \$(pkg-config --cflags --libs madrail): built"
            run_prog "$tmp/prog_pc" "pkg-config program"
        else
            cat "$tmp/cc.log"
            bad "cc with pkg-config's flags did not build the program"
        fi
        if [ -f "$lib/libmadrail.a" ]; then
            # shellcheck disable=SC2086
            if $cc $cflags -o "$tmp/prog_static" "$src/test/tools/install/prog.c" \
                $(env $pcenv pkg-config --cflags madrail) "$lib/libmadrail.a" \
                $(env $pcenv pkg-config --static --libs-only-other --libs-only-L madrail) \
                $(env $pcenv pkg-config --static --libs-only-l madrail | sed 's/-lmadrail//') \
                $ldflags >"$tmp/cc.log" 2>&1; then
                run_prog "$tmp/prog_static" "static link (pkg-config --static)"
            else
                cat "$tmp/cc.log"
                bad "static link with pkg-config --static failed"
            fi
        else
            echo "note: no libmadrail.a installed (configure --enable-static builds one): no static link"
        fi
    fi
else
    echo "note: no pkg-config here: the pkg-config build is not run"
fi

# ---- CMake
if [ $have_cmake = 1 ]; then
    cm() { # build-dir extra-args...
        d=$1
        shift
        cmake -S "$src/test/tools/install" -B "$d" -DCMAKE_PREFIX_PATH="$root$prefix" \
            -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags" \
            -DCMAKE_EXE_LINKER_FLAGS="$ldflags" "$@" >"$d.log" 2>&1
    }
    if cm "$tmp/cmake" && cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1; then
        ok "cmake find_package(madrail 0.1) + madrail::madrail: built ($(sed -n 's/^-- madrail /madrail /p' "$tmp/cmake.log"))"
        grep -q "madrail [^ ]* from $root$libdir/cmake/madrail" "$tmp/cmake.log" &&
            ok "cmake: madrailConfig.cmake found in the installed tree" ||
            bad "cmake: madrail_DIR is not $root$libdir/cmake/madrail"
        run_prog "$tmp/cmake/install_prog" "CMake program"
    else
        cat "$tmp/cmake.log"
        bad "cmake with find_package(madrail) failed"
    fi
    if cm "$tmp/cmake9" -DMADRAIL_WANT_VERSION=9.0; then
        bad "find_package(madrail 9.0) accepted this madrail"
    elif grep -q 'compatible with requested version "9.0"' "$tmp/cmake9.log" &&
        grep -q 'madrailConfig.cmake, version: ' "$tmp/cmake9.log"; then
        ok "find_package(madrail 9.0) refused: $(grep -m1 'madrailConfig.cmake, version: ' "$tmp/cmake9.log" | sed 's/^ *//')"
    else
        cat "$tmp/cmake9.log"
        bad "find_package(madrail 9.0) failed for another reason"
    fi
else
    echo "note: no cmake here: the find_package build is not run"
fi

[ $fail -eq 0 ] && echo "PASS: install"
exit $fail
