#!/bin/sh
# madrail_info as a user runs it: rails from MADRAIL_RAILS, the topology
# section, a bad value named in the error; -d lists the drivers built (as
# mdr_config.h says) and a reason for each one that is not; -v gives each
# variable's value and where it comes from (environment or default), flags
# refused values and misspelt names; --mpi lists the MPICH CVARs declared
# in the netmod's sources with their values from the environment; bad
# options are refused with exit 2 and an error naming them.
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

# ---- -d: the drivers this build has, and why the others are missing
out=$("$info" -d 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: -d exited $rc"; fail=1; }
row() { printf '%s\n' "$out" | awk -v d="$1" '$1 == d && ($2 == "yes" || $2 == "no") {print $2; exit}'; }
for d in tcp loop shm ucx ofi; do
    case " $want " in *" $d "*) expect=yes ;; *) expect=no ;; esac
    got=$(row $d)
    if [ "$got" = "$expect" ]; then
        echo "ok - -d: driver $d built=$got (mdr_config.h agrees)"
    else
        echo "FAIL: -d: driver $d built='$got', mdr_config.h says $expect"; fail=1
    fi
    if [ "$expect" = no ] && ! printf '%s\n' "$out" | grep -Eq "^  $d +no +not built: ."; then
        echo "FAIL: -d: driver $d not built but no reason given"; fail=1
    fi
done
printf '%s\n' "$out" | grep -q '^  configure arguments: ' &&
    printf '%s\n' "$out" | grep -q '^  hwloc (locality of rails): ' &&
    echo "ok - -d: build lines (configure arguments, hwloc)" || { echo "FAIL: -d: no build lines"; fail=1; }

# ---- -v: each variable's value and where it came from
out=$(env -u MADRAIL_CREDITS -u MADRAIL_AUTO_LOCALITY MADRAIL_SLOT_SIZE=4k "$info" -v 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: -v exited $rc"; fail=1; }
printf '%s\n' "$out" | grep -Eq '^  MADRAIL_SLOT_SIZE = 4k +\[environment; default 8k\]$' &&
    echo "ok - -v: MADRAIL_SLOT_SIZE=4k from the environment, default 8k" ||
    { echo "FAIL: -v: no 'MADRAIL_SLOT_SIZE = 4k [environment; default 8k]' line"; fail=1; }
printf '%s\n' "$out" | grep -Eq '^  MADRAIL_CREDITS = 64 +\[default\]$' &&
    echo "ok - -v: MADRAIL_CREDITS unset: 64 [default]" ||
    { echo "FAIL: -v: no 'MADRAIL_CREDITS = 64 [default]' line"; fail=1; }
printf '%s\n' "$out" | grep -Eq '^  MADRAIL_AUTO_LOCALITY = near +\[default\]$' &&
    echo "ok - -v: MADRAIL_AUTO_LOCALITY listed" || { echo "FAIL: -v: MADRAIL_AUTO_LOCALITY missing"; fail=1; }
# every variable has one line "NAME = value [source]" and a help line
nvars=$(printf '%s\n' "$out" | sed -n 's/^variables (\([0-9]*\),.*/\1/p')
nlines=$(printf '%s\n' "$out" | grep -Ec '^  MADRAIL_[A-Z0-9_]+ = .*\[(default|environment; default .*)\]')
[ -n "$nvars" ] && [ "$nvars" -gt 20 ] && [ "$nlines" -eq "$nvars" ] &&
    echo "ok - -v: $nlines variable lines for $nvars variables" ||
    { echo "FAIL: -v: $nlines variable lines, header says '$nvars'"; fail=1; }
# a value a context would refuse: shown as INVALID with the reason, exit 1
out=$(MADRAIL_SLOT_SIZE=12x "$info" -v 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -Eq '^  MADRAIL_SLOT_SIZE = 12x .*INVALID: not a size' &&
    echo "ok - -v: MADRAIL_SLOT_SIZE=12x shown INVALID (not a size), exit 1" ||
    { echo "FAIL: -v with MADRAIL_SLOT_SIZE=12x: exit $rc"; fail=1; }
out=$(MADRAIL_CREDITS=0 "$info" -v 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -Eq '^  MADRAIL_CREDITS = 0 .*INVALID: out of range' &&
    echo "ok - -v: MADRAIL_CREDITS=0 shown INVALID (out of range)" ||
    { echo "FAIL: -v with MADRAIL_CREDITS=0: exit $rc"; fail=1; }
# a misspelt name in the environment, with the nearest valid one
out=$(MADRAIL_SLOTSIZE=4k "$info" -v 2>&1)
printf '%s\n' "$out" | grep -q '^unknown: MADRAIL_SLOTSIZE is no madrail variable (did you mean MADRAIL_SLOT_SIZE?)' &&
    echo "ok - -v: unknown MADRAIL_SLOTSIZE named, with MADRAIL_SLOT_SIZE" ||
    { echo "FAIL: -v: no 'unknown: MADRAIL_SLOTSIZE' line"; fail=1; }
# -g: only matching names (any case)
out=$("$info" -v -g slot_size 2>&1)
[ "$(printf '%s\n' "$out" | grep -Ec '^  MADRAIL_[A-Z0-9_]+ = ')" -eq 1 ] &&
    printf '%s\n' "$out" | grep -q '^  MADRAIL_SLOT_SIZE = ' &&
    echo "ok - -v -g slot_size: MADRAIL_SLOT_SIZE alone" || { echo "FAIL: -g slot_size"; fail=1; }

# ---- --mpi: the netmod's MPICH CVARs, as declared in its sources
src="${MDR_SRCDIR:-$(dirname "$0")/../..}/src/netmod/madrail"
declared=$(sed -n '/BEGIN_MPI_T_CVAR_INFO_BLOCK/,/END_MPI_T_CVAR_INFO_BLOCK/p' "$src"/*.c |
           sed -n 's/^ *- *name *: *\(MPIR_CVAR_[A-Z0-9_]*\) *$/\1/p' | sort -u)
out=$(env -u MPICH_CH4_MADRAIL_PIPELINE_DEPTH -u MPIR_PARAM_CH4_MADRAIL_PIPELINE_DEPTH \
          MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH=8 "$info" --mpi 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: --mpi exited $rc"; fail=1; }
n=0
for c in $declared; do
    n=$((n + 1))
    printf '%s\n' "$out" | grep -Eq "^  $c = " ||
        { echo "FAIL: --mpi does not list $c (declared in src/netmod/madrail)"; fail=1; }
done
listed=$(printf '%s\n' "$out" | grep -Ec '^  MPIR_CVAR_[A-Z0-9_]+ = ')
[ $n -ge 3 ] && [ "$listed" -eq $n ] && echo "ok - --mpi: the $n CVARs declared in the netmod's sources" ||
    { echo "FAIL: --mpi lists $listed CVARs, the sources declare $n"; fail=1; }
printf '%s\n' "$out" | grep -Eq '^  MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH = 8 +\[environment: MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH; default 4\]' &&
    echo "ok - --mpi: PIPELINE_DEPTH=8 from MPIR_CVAR_..., default 4" ||
    { echo "FAIL: --mpi: no value 8 from the environment for PIPELINE_DEPTH"; fail=1; }
printf '%s\n' "$out" | grep -Eq '^  MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE = 1048576 +\[default\]' &&
    echo "ok - --mpi: PIPELINE_CHUNK_SIZE at its default" || { echo "FAIL: --mpi: CHUNK_SIZE default"; fail=1; }
printf '%s\n' "$out" | grep -A1 '^  MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH' | grep -q 'Chunks of one pipelined message' &&
    echo "ok - --mpi: help text under the CVAR" || { echo "FAIL: --mpi: no help text"; fail=1; }
# MPICH's precedence: MPICH_X < MPIR_PARAM_X < MPIR_CVAR_X
out=$(env -u MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH -u MPIR_PARAM_CH4_MADRAIL_PIPELINE_DEPTH \
          MPICH_CH4_MADRAIL_PIPELINE_DEPTH=6 "$info" -m -g pipeline_depth 2>&1)
printf '%s\n' "$out" | grep -q '= 6  \[environment: MPICH_CH4_MADRAIL_PIPELINE_DEPTH;' &&
    echo "ok - --mpi: MPICH_ form read" || { echo "FAIL: --mpi: MPICH_CH4_MADRAIL_PIPELINE_DEPTH=6 not read"; fail=1; }
out=$(env -u MPIR_PARAM_CH4_MADRAIL_PIPELINE_DEPTH MPICH_CH4_MADRAIL_PIPELINE_DEPTH=6 \
          MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH=2 "$info" -m -g pipeline_depth 2>&1)
printf '%s\n' "$out" | grep -q '= 2  \[environment: MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH;' &&
    echo "ok - --mpi: MPIR_CVAR_ wins over MPICH_" || { echo "FAIL: --mpi: precedence"; fail=1; }

# ---- version line, -V, default sections
out=$("$info" -V 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -Eq '^madrail_info [0-9]+\.[0-9]+\.[0-9]+ ' &&
    printf '%s\n' "$out" | grep -Eq '^library: libmadrail [0-9]+\.[0-9]+\.[0-9]+' &&
    echo "ok - -V: tool and library versions" || { echo "FAIL: -V: $out"; fail=1; }
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" MADRAIL_RAILS=loop:x "$info" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | head -n 1 | cut -c1-10)" = "# madrail " ] &&
    printf '%s\n' "$out" | grep -q '^drivers (' && printf '%s\n' "$out" | grep -q '^rails (1)' &&
    printf '%s\n' "$out" | grep -q '^variables (' &&
    echo "ok - no option: version line, drivers, rails and variables" ||
    { echo "FAIL: no option: exit $rc, sections missing"; fail=1; }
# bundled short options and long forms
out=$("$info" -dv 2>&1) && printf '%s\n' "$out" | grep -q '^drivers (' &&
    printf '%s\n' "$out" | grep -q '^variables (' && ! printf '%s\n' "$out" | grep -q '^rails (' &&
    echo "ok - -dv: drivers and variables only" || { echo "FAIL: -dv"; fail=1; }
out=$("$info" --vars --grep=CREDITS 2>&1) && printf '%s\n' "$out" | grep -q '^  MADRAIL_CREDITS = ' &&
    echo "ok - --vars --grep=CREDITS" || { echo "FAIL: --vars --grep=CREDITS"; fail=1; }

# ---- bad options: exit 2 and an error that names them
badopt() { # args... expected-text
    eval "want=\${$#}"
    n=$(($# - 1))
    args=""
    i=1
    for a in "$@"; do [ $i -le $n ] && args="$args '$a'"; i=$((i + 1)); done
    out=$(eval "\"\$info\" $args" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && printf '%s\n' "$out" | grep -qF -- "$want"; then
        echo "ok - bad option$args: exit 2, \"$(printf '%s\n' "$out" | head -n 1)\""
    else
        echo "FAIL: bad option$args: exit $rc, want 2 and '$want' in: $out"; fail=1
    fi
}
badopt --bogus "unknown option '--bogus'"
badopt -x "unknown option '-x'"
badopt -dz "unknown option '-z' (in '-dz')"
badopt -g "option '-g' needs an argument"
badopt --grep "option '--grep' needs an argument"
badopt --rails=yes "option '--rails' takes no value (in '--rails=yes')"
badopt stray "unexpected argument 'stray'"
[ $fail -eq 0 ] && echo "PASS: madrail_info"
exit $fail
