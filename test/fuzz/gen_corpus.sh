#!/usr/bin/env bash
# gen_corpus.sh -- (re)write the seed corpus test/fuzz/corpus/<target> from
# the seed programs built into the fuzz targets (fz_<target>_seeds() at the
# end of each fuzz_<target>.c: the seeds are made from the same headers the
# driver and the core use, so a wire-format change is one rebuild and one
# run of this script away).
#
# Usage: test/fuzz/gen_corpus.sh [--build DIR] [--defects DIR] [target...]
#   --build D     tree configured with --enable-fuzz (default $MDR_BUILDDIR,
#                 else the current directory)
#   --defects D   also write the seeds that crash today on known, open
#                 defects (fuzz_core), into D/<target>
#   target        core, tcp, shm, ofi, ucx (default: every one built)
#
# Inputs the fuzzer found and that are worth keeping (crashers once fixed,
# see README.md) live apart, in test/fuzz/corpus/<target>/regress-*: this
# script keeps them.
set -u
BUILD=${MDR_BUILDDIR:-$PWD}
DEFECTS=
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD=${2:?}; shift ;;
        --defects) DEFECTS=${2:?}; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "gen_corpus.sh: unknown option '$1'" >&2; exit 2 ;;
        *) TARGETS+=("${1#fuzz_}") ;;
    esac
    shift
done
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ ${#TARGETS[@]} -eq 0 ]; then
    for t in core tcp shm ofi ucx; do
        [ -x "$BUILD/test/fuzz/fuzz_$t" ] && TARGETS+=("$t")
    done
fi
if [ ${#TARGETS[@]} -eq 0 ]; then
    echo "gen_corpus.sh: no fuzz target built in $BUILD (configure --enable-fuzz)" >&2
    exit 1
fi
rc=0
for t in "${TARGETS[@]}"; do
    dir=$SRC/test/fuzz/corpus/$t
    mkdir -p "$dir"
    find "$dir" -type f ! -name 'regress-*' -delete
    if [ -n "$DEFECTS" ]; then
        FZ_GEN_DEFECTS=$DEFECTS/$t FZ_GEN_SEEDS=$dir "$BUILD/test/fuzz/fuzz_$t"
    else
        env -u FZ_GEN_DEFECTS FZ_GEN_SEEDS="$dir" "$BUILD/test/fuzz/fuzz_$t"
    fi || { echo "gen_corpus.sh: fuzz_$t could not write its seeds" >&2; rc=1; continue; }
    echo "fuzz_$t: $(find "$dir" -type f | wc -l) seeds in $dir"
done
exit $rc
