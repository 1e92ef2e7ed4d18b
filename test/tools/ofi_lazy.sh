#!/bin/sh
# libfabric is loaded by the first ofi rail, not linked into libmadrail
# (src/rails/ofi/ofi_dl.h: Debian's libfabric pulls in libinfinipath,
# whose start-up code sleeps about 0.13 s): libmadrail.so has no NEEDED
# entry for it, a process with tcp rails only never loads it (LD_DEBUG
# lists every library the loader opens), and a process with an ofi rail
# loads it and opens the rail.  SKIP without the ofi driver, readelf or
# a libfabric provider that runs here (shm, then tcp).
set -u
B=${MDR_BUILDDIR:-.}
info=$B/tools/madrail_info
lib=$B/.libs/libmadrail.so
fail=0
# -r loads hwloc, whose dlopen'ed plugins leak a few allocations that
# LeakSanitizer reports after their dlclose (as in info.sh)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
grep -q '^#define HAVE_LIBFABRIC 1' "$B/mdr_config.h" 2>/dev/null ||
    { echo "SKIP: ofi_lazy: the ofi driver is not built"; exit 77; }
command -v readelf >/dev/null 2>&1 || { echo "SKIP: ofi_lazy: no readelf (binutils)"; exit 77; }
[ -x "$info" ] && [ -f "$lib" ] || { echo "FAIL: ofi_lazy: $info or $lib not built"; exit 1; }

if readelf -d "$lib" | grep NEEDED | grep -q libfabric; then
    readelf -d "$lib" | grep NEEDED
    echo "FAIL: libmadrail.so links libfabric"; fail=1
else
    echo "ok - libmadrail.so does not link libfabric"
fi
loads() { LD_DEBUG=files MADRAIL_RAILS=$1 "$info" -r 2>&1 | grep -c 'file=libfabric\.so\.1 '; }
n=$(loads tcp:lo)
if [ "$n" -eq 0 ]; then
    echo "ok - a process with a tcp rail does not load libfabric"
else
    echo "FAIL: a process with a tcp rail loaded libfabric ($n loader lines)"; fail=1
fi
spec=
for s in ofi:shm 'ofi:tcp;ofi_rxm:lo'; do
    if MADRAIL_RAILS=$s "$info" -r >/dev/null 2>&1; then spec=$s; break; fi
done
if [ -z "$spec" ]; then
    echo "SKIP: ofi_lazy: no libfabric provider opens here (ofi:shm, ofi:tcp;ofi_rxm:lo); the link checks passed"
    [ $fail -eq 0 ] && exit 77
    exit 1
fi
n=$(loads "$spec")
out=$(MADRAIL_RAILS=$spec "$info" -r 2>&1)
if [ "$n" -gt 0 ] && echo "$out" | grep -q "$spec"; then
    echo "ok - a process with rail $spec loads libfabric and opens the rail"
else
    echo "$out"
    echo "FAIL: rail $spec: libfabric loaded $n times, rail listed: $(echo "$out" | grep -c "$spec")"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS: ofi_lazy"
exit $fail
