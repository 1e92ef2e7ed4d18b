#!/bin/sh
# madrail_info as a user runs it: rails from MADRAIL_RAILS, the topology
# section, a bad value named in the error, an unknown option refused.
set -u
info="${MDR_BUILDDIR:-.}/tools/madrail_info"
[ -x "$info" ] || { echo "FAIL: $info not built"; exit 1; }
fail=0
# -r loads hwloc, whose dlopen'ed plugins leak a few allocations that
# LeakSanitizer reports from "<unknown module>" after their dlclose: not
# madrail's (every other test runs the library under LeakSanitizer).
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
      MADRAIL_RAILS=tcp:lo,loop:infotest "$info" -r 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: madrail_info -r exited $rc"; fail=1; }
echo "$out" | grep -q "tcp:lo" || { echo "FAIL: rail tcp:lo not listed"; fail=1; }
echo "$out" | grep -q "loop:infotest" || { echo "FAIL: rail loop:infotest not listed"; fail=1; }
echo "$out" | grep -q "^topology" || { echo "FAIL: no topology section"; fail=1; }
out=$(MADRAIL_SLOT_SIZE=12x "$info" -r 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: bad MADRAIL_SLOT_SIZE gave exit $rc, want 1"; fail=1; }
echo "$out" | grep -q "MADRAIL_SLOT_SIZE=12x" || { echo "FAIL: error does not name the value: $out"; fail=1; }
out=$(MADRAIL_SLOTSIZE=4k MADRAIL_RAILS=loop:x "$info" -r 2>&1)
echo "$out" | grep -q "did you mean MADRAIL_SLOT_SIZE" || { echo "FAIL: no suggestion for a misspelt name"; fail=1; }
# An unknown driver: the error lists the drivers this build has (from
# mdr_config.h), not a fixed list.
out=$(MADRAIL_RAILS=nosuch:x "$info" -r 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: unknown driver gave exit $rc, want 1"; fail=1; }
built=$(echo "$out" | sed -n "s/.*unknown driver 'nosuch' (built: \(.*\)).*/\1/p" | head -n 1)
echo "unknown driver: built drivers named: $built"
want="tcp loop"
cfg="${MDR_BUILDDIR:-.}/mdr_config.h"
grep -q '^#define MDR_HAVE_SHM 1' "$cfg" 2>/dev/null && want="$want shm"
grep -q '^#define HAVE_UCX 1' "$cfg" 2>/dev/null && want="$want ucx"
grep -q '^#define HAVE_LIBFABRIC 1' "$cfg" 2>/dev/null && want="$want ofi"
for d in $want; do
    case ", $built," in
        *", $d,"*) ;;
        *) echo "FAIL: driver $d is built but the error lists: '$built'"; fail=1 ;;
    esac
done
"$info" --bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: unknown option gave exit $rc, want 2"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: madrail_info"
exit $fail
