#!/usr/bin/env bash
# run_mpi_tests.sh -- build and run madrail's own MPI test programs
# (test/mpi/mpi_*.c) on MPICH ch4:madrail, with traffic forced through the
# netmod (shared memory off) and over two TCP rails on loopback.
#
# Why a script and not just `make check`: the programs are built with the
# MPICH wrapper compiler of the patched MPICH (not with the library's own
# toolchain) and launched by its mpiexec with a particular environment, and
# the same programs must also run on Debian's MPICH (--system), which is how
# the tests themselves are validated before and independently of the netmod.
#
# One line per test (PASS/FAIL/SKIP, time), then "N passed, N failed[, N
# skipped]"; exit status 0 if nothing failed, 1 otherwise, 77 if the MPICH
# to test is not installed.  A failing test's output tail is shown; full
# logs stay in the build directory.
set -uo pipefail

prog=$(basename "$0")
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

usage() {
    cat <<EOF
Usage: $prog [--system] [--only NAMES] [--rails SPEC] [--timeout SEC]
             [--builddir DIR] [--verbose] [--list] [--help]

Builds test/mpi/mpi_*.c with \$MPICC and runs each under
'\$MPIEXEC -n N' (N = 2, 3 or 4 as the test needs) with
  MADRAIL_RAILS=tcp:lo,tcp:lo   two TCP rails on loopback
  MPIR_CVAR_NOLOCAL=1           every rank "remote": no shared memory,
                                all traffic through the netmod
  LD_LIBRARY_PATH=$REPO/_install/lib:<mpich lib>:...
and MPIT_NETMOD=madrail (a test may then demand what only the netmod does:
mpi_cancel demands that sends no receive matched are cancelled), and
MADRAIL_STATS=1: the per-rail statistics libmadrail prints at finalize
must show at least 1 MiB sent through madrail (else the traffic bypassed the
netmod), for mpi_stripe the sender's must show each rail carrying
30%..70% of the put bytes, and for mpi_datatype with small pipeline chunks
the madrail message count must show that the data went in chunks.

  --system       test Debian's MPICH instead (MPICC=mpicc.mpich,
                 MPIEXEC=mpiexec.hydra): validates the tests themselves;
                 madrail is not involved, so the stripe rail check is skipped
  --only NAMES   comma-separated tests to run (e.g. mpi_probe,mpi_coll)
  --rails SPEC   MADRAIL_RAILS for the runs (default tcp:lo,tcp:lo)
  --timeout SEC  per-test limit (default 180; each program's own watchdog
                 fires 15 s earlier and prints the step it was stuck in)
  --builddir DIR where binaries and logs go
                 (default \${TMPDIR:-/tmp}/madrail-mpitests-\$UID/<mode>)
  --verbose      print every test's full output
  --list         list the tests and exit
  -h, --help     this text

Environment: MPICC, MPIEXEC (override the defaults: madrail mode uses
$REPO/_install/mpich/bin/{mpicc,mpiexec}), MDR_LIBDIR (libmadrail's
directory, default $REPO/_install/lib), MPIT_CFLAGS (default
"-std=gnu11 -O2 -g -Wall -Wextra -Werror"); other MADRAIL_* and MPIR_CVAR_*
variables are passed through.
EOF
}

# name:np[:flag,...] -- a flag is `stats` (check the rail split),
# `minmsgs=N` (the processes together sent at least N madrail messages),
# `maxmsgs=N` (at most N), `rfs=N` (libmadrail sent no RTS and put at least
# N sends into receiver-first offers: its "rendezvous:" statistics line) or
# VAR=value (environment of that run; the log name gets a suffix).
# mpi_rfs: 100 pre-posted 1 MiB receives take 4 madrail messages each with
# native point-to-point (go message and offer; RFS_DATA envelope and FIN),
# 7 on the MPIDIG path (408 against 708 counted on tcp:lo), and no RTS.
# mpi_coll runs at three sizes; mpi_datatype also with small pipeline
# chunks, so that its large non-contiguous messages go in many chunks
# through a 2-deep and a 1-deep ring; those two runs use the MPIDIG path
# (MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P=0), which pipelines, while native
# point-to-point packs non-contiguous data whole (RMA and partitioned data
# still take the pipeline), and so does one mpi_probe run, which keeps the
# comparison path tested.  mpi_anysrc runs 4 ranks as two "nodes" of 2
# (shared memory inside a node, the netmod between them).  Its 9 MiB of non-contiguous data
# take about 380 madrail messages in all when each message goes whole (the
# default 1 MiB chunks hold them), about 2,400 in 64 KiB chunks and 6,900
# in 4 KiB chunks (measured); minmsgs asks for half of that, which the
# unchunked path cannot reach.
TESTS=(
    mpi_pingpong:2
    mpi_order:3
    mpi_probe:2
    mpi_cancel:2
    mpi_ssend:2
    mpi_many_isend:2
    mpi_datatype:2
    mpi_datatype:2:MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P=0,MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE=65536,MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH=2,minmsgs=1200
    mpi_datatype:2:MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P=0,MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE=4096,MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH=1,minmsgs=3500
    mpi_probe:2:MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P=0
    mpi_anysrc:4:MPIR_CVAR_NOLOCAL=0,MPIR_CVAR_NUM_CLIQUES=2
    mpi_truncate:2
    mpi_rfs:2:MADRAIL_RAILS=tcp:lo,maxmsgs=500,rfs=100
    mpi_rma:2
    mpi_rma_msgs:2
    mpi_rma_msgs:2:MADRAIL_RAILS=tcp:lo
    mpi_acc_large:2
    mpi_acc_large:2:MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE=65536
    mpi_coll:2
    mpi_coll:3
    mpi_coll:4
    mpi_thread:2
    mpi_stripe:2:stats
    mpi_pvars:2:MADRAIL_TCP_PUT_ACK=1,MADRAIL_ADAPT_SAMPLE=100us
)

MODE=madrail
ONLY=
RAILS=tcp:lo,tcp:lo
TIMEOUT=180
BUILDDIR=
VERBOSE=no
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --system) MODE=system ;;
        --only) [ $# -ge 2 ] || { echo "$prog: --only needs a value" >&2; exit 2; }
                ONLY=$2; shift ;;
        --rails) [ $# -ge 2 ] || { echo "$prog: --rails needs a value" >&2; exit 2; }
                 RAILS=$2; shift ;;
        --timeout) if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 20 ]; then
                       echo "$prog: --timeout needs a number of seconds >= 20" >&2; exit 2
                   fi
                   TIMEOUT=$2; shift ;;
        --builddir) [ $# -ge 2 ] || { echo "$prog: --builddir needs a directory" >&2; exit 2; }
                    BUILDDIR=$2; shift ;;
        --verbose|-v) VERBOSE=yes ;;
        --list) for t in "${TESTS[@]}"; do IFS=: read -r n np f <<<"$t"; echo "$n (np $np)${f:+ $f}"; done
                echo "bad-cvar (np 2): MPI_Init must fail naming an out-of-range netmod CVAR"
                echo "mpi_cxx (np 2): C++, built with our mpicxx and with Debian's mpicxx.mpich"
                echo "mpi_fort (np 2): Fortran (mpi_f08, use mpi, mpif.h), built with our mpifort and Debian's mpifort.mpich"
                exit 0 ;;
        *) echo "$prog: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---------------------------------------------------------------- tools
if [ "$MODE" = system ]; then
    MPICC=${MPICC:-mpicc.mpich}
    if [ -z "${MPIEXEC:-}" ]; then
        MPIEXEC=$(command -v mpiexec.hydra || command -v mpiexec.mpich || true)
    fi
else
    MPICC=${MPICC:-$REPO/_install/mpich/bin/mpicc}
    MPIEXEC=${MPIEXEC:-$REPO/_install/mpich/bin/mpiexec}
fi
if ! command -v "$MPICC" >/dev/null 2>&1 || [ -z "${MPIEXEC:-}" ] ||
        ! command -v "$MPIEXEC" >/dev/null 2>&1; then
    echo "SKIP: $prog: MPI compiler or launcher not found (MPICC=$MPICC MPIEXEC=${MPIEXEC:-})" >&2
    if [ "$MODE" = madrail ]; then
        echo "      build and install MPICH with ch4:madrail under $REPO/_install/mpich," \
             "or use --system to run on Debian's MPICH" >&2
    else
        echo "      install Debian's mpich and libmpich-dev" >&2
    fi
    exit 77
fi
MPICC=$(command -v "$MPICC")
MPIEXEC=$(command -v "$MPIEXEC")
command -v timeout >/dev/null 2>&1 || { echo "$prog: needs 'timeout' (coreutils)" >&2; exit 1; }

# Library path: libmadrail first; in madrail mode also the patched MPICH's
# lib dir (its mpicc may or may not embed an rpath).  Not in system mode:
# Debian-built programs would otherwise load the patched libmpi.
LDPATH=${MDR_LIBDIR:-$REPO/_install/lib}
MPICH_LIBDIR=$(cd "$(dirname "$MPICC")/.." && pwd)/lib
if [ "$MODE" = madrail ] && compgen -G "$MPICH_LIBDIR/libmpi.so*" >/dev/null &&
        [ "$(cd "$LDPATH" 2>/dev/null && pwd -P)" != "$(cd "$MPICH_LIBDIR" && pwd -P)" ]; then
    LDPATH=$LDPATH:$MPICH_LIBDIR
fi
LDPATH=$LDPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# Preflight: the libmadrail found first must have every madrail_* symbol
# the patched libmpi needs (a stale <repo>/_install/lib otherwise makes
# every test die with "symbol lookup error" before MPI_Init returns).
if [ "$MODE" = madrail ] && compgen -G "$MPICH_LIBDIR/libmpi.so*" >/dev/null &&
        command -v ldd >/dev/null 2>&1; then
    missing=$(LD_LIBRARY_PATH=$LDPATH ldd -r "$MPICH_LIBDIR/libmpi.so" 2>&1 |
              sed -n 's/^undefined symbol: \(madrail_[A-Za-z0-9_]*\).*/\1/p' | sort -u | tr '\n' ' ')
    if [ -n "$missing" ]; then
        libm=$(LD_LIBRARY_PATH=$LDPATH ldd "$MPICH_LIBDIR/libmpi.so" 2>/dev/null |
               sed -n 's/^[[:space:]]*libmadrail[^ ]* => \([^ ]*\).*/\1/p')
        echo "$prog: the libmadrail found first (${libm:-?}) lacks symbols the patched libmpi" \
             "needs: $missing" >&2
        echo "$prog: it is older than the libmadrail MPICH was built against: reinstall it" \
             "(make install in _build), or set MDR_LIBDIR to a matching one (e.g." \
             "MDR_LIBDIR=$MPICH_LIBDIR, the copy next to libmpi)" >&2
        exit 1
    fi
fi

BUILDDIR=${BUILDDIR:-${TMPDIR:-/tmp}/madrail-mpitests-$(id -u)/$MODE}
mkdir -p "$BUILDDIR/logs" || exit 1
BUILDDIR=$(cd "$BUILDDIR" && pwd)
read -r -a CFLAGS_ARR <<<"${MPIT_CFLAGS:--std=gnu11 -O2 -g -Wall -Wextra -Werror}"

selected() {
    [ -z "$ONLY" ] && return 0
    case ",$ONLY," in *",$1,"*) return 0 ;; esac
    return 1
}

echo "# $prog: mode $MODE"
echo "# MPICC=$MPICC"
echo "# MPIEXEC=$MPIEXEC"
if [ "$MODE" = madrail ]; then
    echo "# MADRAIL_RAILS=$RAILS MPIR_CVAR_NOLOCAL=1 LD_LIBRARY_PATH=$LDPATH"
else
    echo "# MPIR_CVAR_NOLOCAL=1 (MADRAIL_* set but unused: this MPICH has no madrail netmod)"
fi
DEVICE=$("$(dirname "$MPIEXEC")/mpichversion" 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
echo "# device: ${DEVICE:-unknown (no mpichversion next to $MPIEXEC)}"
if [ "$MODE" = madrail ] && [ -n "$DEVICE" ] && [[ "$DEVICE" != *madrail* ]]; then
    echo "# WARNING: this MPICH is $DEVICE, not ch4:madrail: madrail is not what is tested"
fi
echo "# logs: $BUILDDIR/logs"

# ---------------------------------------------------------------- build
# Rebuilt when the source, the shared helper or the compiler is newer.
declare -A BUILT=()
build() {
    local name=$1 src=$HERE/$1.c bin=$BUILDDIR/$1 log=$BUILDDIR/logs/$1.build.log
    [ -n "${BUILT[$name]:-}" ] && return "${BUILT[$name]}"
    if [ -x "$bin" ] && [ "$bin" -nt "$src" ] && [ "$bin" -nt "$HERE/mpit_common.c" ] &&
            [ "$bin" -nt "$MPICC" ] && [ -f "$bin.cflags" ] &&
            [ "$(cat "$bin.cflags")" = "$MPICC ${CFLAGS_ARR[*]}" ]; then
        BUILT[$name]=0
        return 0
    fi
    rm -f "$bin" "$bin.cflags"
    if "$MPICC" "${CFLAGS_ARR[@]}" -pthread -o "$bin" "$src" >"$log" 2>&1; then
        echo "$MPICC ${CFLAGS_ARR[*]}" >"$bin.cflags"
        BUILT[$name]=0
    else
        BUILT[$name]=1
    fi
    return "${BUILT[$name]}"
}

# ---------------------------------------------------------------- stripe check
# Reads a test log; prints a verdict line and returns 0 (ok), 1 (bad) or
# 2 (no madrail statistics in the log).
stripe_check() {
    local log=$1
    # "[host:pid] madrail stats: <idx> <name> <tx_msgs> <tx_bytes> <tx_put_bytes> ..."
    sed -n 's/.*\(\[[^]]*\]\) madrail stats: *\([0-9][0-9]*\)  *\([^ ][^ ]*\)  *\([0-9][0-9]*\)  *\([0-9][0-9]*\)  *\([0-9][0-9]*\).*/\1 \2 \3 \6/p' \
        "$log" | awk '
        { proc[$1] += $4; n[$1]++; name[$1, n[$1]] = $3; idx[$1, n[$1]] = $2; put[$1, n[$1]] = $4 }
        END {
            best = ""; for (p in proc) if (best == "" || proc[p] > proc[best]) best = p
            if (best == "") { print "no madrail statistics in the output"; exit 2 }
            tot = proc[best]
            if (n[best] < 2) { printf "sender %s has %d rail(s); need 2\n", best, n[best]; exit 1 }
            if (tot == 0) { printf "sender %s: no put bytes on any rail (no striped rendezvous)\n", best; exit 1 }
            bad = 0; msg = ""
            for (i = 1; i <= n[best]; i++) {
                pct = 100.0 * put[best, i] / tot
                msg = msg sprintf("%srail %s %s %.1f%%", i > 1 ? ", " : "", idx[best, i], name[best, i], pct)
                if (pct < 30.0 || pct > 70.0) bad = 1
            }
            printf "sender %s put %.1f MiB: %s (each must be 30..70%%)\n", best, tot / 1048576, msg
            exit bad
        }'
}

# Total tx_msgs over every process and rail in a log's madrail stats
# (empty when there are none).
netmod_msgs() {
    sed -n 's/.*\[[^]]*\] madrail stats: *[0-9][0-9]*  *[^ ][^ ]*  *\([0-9][0-9]*\)  *[0-9][0-9]* .*/\1/p' \
        "$1" | awk '{ s += $1; n++ } END { if (n) printf "%.0f\n", s }'
}

# Total tx_bytes over every process and rail in a log's madrail stats
# (empty when there are none): proves the traffic went through the netmod,
# not through shared memory.
netmod_bytes() {
    sed -n 's/.*\[[^]]*\] madrail stats: *[0-9][0-9]*  *[^ ][^ ]*  *[0-9][0-9]*  *\([0-9][0-9]*\) .*/\1/p' \
        "$1" | awk '{ s += $1; n++ } END { if (n) printf "%.0f\n", s }'
}

# ---------------------------------------------------------------- run
PASS=0 FAIL=0 SKIP=0
FAILED=()
for t in "${TESTS[@]}"; do
    IFS=: read -r name np flags <<<"$t"
    selected "$name" || continue
    label=$(printf '%-16s np %d' "$name" "$np")
    # flags: `stats`, `minmsgs=N`, or VAR=value settings for this run
    check_stats=no min_msgs= max_msgs= min_rfs= run_env=() suffix=
    IFS=, read -r -a flag_list <<<"$flags"
    for f in ${flag_list[@]+"${flag_list[@]}"}; do
        case $f in
            stats) check_stats=yes ;;
            minmsgs=*)
                min_msgs=${f#minmsgs=}
                case $min_msgs in
                    ''|*[!0-9]*) echo "$prog: bad flag '$f' in test entry '$t' (minmsgs=N, N a count)" >&2; exit 2 ;;
                esac ;;
            maxmsgs=*)
                max_msgs=${f#maxmsgs=}
                case $max_msgs in
                    ''|*[!0-9]*) echo "$prog: bad flag '$f' in test entry '$t' (maxmsgs=N, N a count)" >&2; exit 2 ;;
                esac ;;
            rfs=*)
                min_rfs=${f#rfs=}
                case $min_rfs in
                    ''|*[!0-9]*) echo "$prog: bad flag '$f' in test entry '$t' (rfs=N, N a count)" >&2; exit 2 ;;
                esac ;;
            *=*) run_env+=("$f")
                 suffix=$suffix-$(echo "${f%%=*}" | sed 's/^MPIR_CVAR_CH4_MADRAIL_//' | tr 'A-Z_' 'a-z-')${f#*=} ;;
            *) echo "$prog: bad flag '$f' in test entry '$t'" >&2; exit 2 ;;
        esac
    done
    [ ${#run_env[@]} -gt 0 ] && label="$label  ${run_env[*]}"
    if ! build "$name"; then
        printf 'FAIL  %s  (build failed)\n' "$label"
        sed 's/^/      | /' "$BUILDDIR/logs/$name.build.log" | tail -n 30
        FAIL=$((FAIL + 1)); FAILED+=("$name:$np")
        continue
    fi
    log=$BUILDDIR/logs/$name-np$np$suffix.log
    # Statistics for every test in madrail mode: the traffic check below.
    extra_env=()
    [ "$MODE" = madrail ] && extra_env=(MADRAIL_STATS=1 MPIT_NETMOD=madrail)
    t0=$(date +%s.%N)
    env MADRAIL_RAILS="$RAILS" MPIR_CVAR_NOLOCAL=1 LD_LIBRARY_PATH="$LDPATH" \
        MPIT_TIMEOUT=$((TIMEOUT - 15)) ${extra_env[@]+"${extra_env[@]}"} \
        ${run_env[@]+"${run_env[@]}"} \
        timeout -k 10 "$TIMEOUT" "$MPIEXEC" -n "$np" "$BUILDDIR/$name" >"$log" 2>&1 </dev/null
    rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    verdict='' note=''
    if [ $rc -eq 77 ]; then
        verdict=SKIP
        note=$(grep -m1 -o 'SKIP - .*' "$log" | sed 's/^SKIP - //')
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        verdict=FAIL; note="timeout after ${TIMEOUT} s"
    elif [ $rc -ne 0 ]; then
        verdict=FAIL; note="exit status $rc"
    elif ! grep -q ' No Errors' "$log"; then
        # (not anchored: mpiexec forwards each rank's output in
        # its own pieces, so another rank's partial line may surround it)
        verdict=FAIL; note="exit 0 but no ' No Errors' line"
    elif grep -q 'FAIL - ' "$log"; then
        verdict=FAIL; note="exit 0 but FAIL lines in the output"
    else
        verdict=PASS
    fi
    if [ "$verdict" = PASS ] && [ "$MODE" = madrail ]; then
        nb=$(netmod_bytes "$log")
        if [ -z "$nb" ]; then
            verdict=FAIL
            note="no madrail statistics at finalize (MADRAIL_STATS=1 set): did the netmod run?"
        elif [ "$nb" -lt 1048576 ]; then
            verdict=FAIL
            note="only $nb bytes went through madrail: traffic bypassed the netmod (shared memory on?)"
        fi
    fi
    if [ "$verdict" = PASS ] && [ -n "$min_msgs" ]; then
        if [ "$MODE" = system ]; then
            note="message count NOT checked: --system, Debian's MPICH prints no madrail stats"
        else
            nm=$(netmod_msgs "$log")
            if [ -z "$nm" ] || [ "$nm" -lt "$min_msgs" ]; then
                verdict=FAIL
                note="${nm:-no} madrail messages, fewer than $min_msgs: the pipelined path did not carry the data"
            else
                note="$nm madrail messages (at least $min_msgs)"
            fi
        fi
    fi
    if [ "$verdict" = PASS ] && [ -n "$max_msgs" ]; then
        if [ "$MODE" = system ]; then
            note="message count NOT checked: --system, Debian's MPICH prints no madrail stats"
        else
            nm=$(netmod_msgs "$log")
            if [ -z "$nm" ] || [ "$nm" -gt "$max_msgs" ]; then
                verdict=FAIL
                note="${nm:-no} madrail messages, more than $max_msgs: the pre-posted receives did not save the RTS round trip"
            else
                note="$nm madrail messages (at most $max_msgs)"
            fi
        fi
    fi
    if [ "$verdict" = PASS ] && [ -n "$min_rfs" ] && [ "$MODE" = madrail ]; then
        # "[host:pid] madrail stats: rendezvous: R RTS sent, U sends into a receiver-first offer ..."
        rv=$(sed -n 's/.*madrail stats: rendezvous: \([0-9]*\) RTS sent, \([0-9]*\) sends into.*/\1 \2/p' "$log" |
             awk '{ r += $1; u += $2; n++ } END { if (n) print r, u }')
        read -r n_rts n_rfs <<<"${rv:-x x}"
        if [ -z "$rv" ]; then
            verdict=FAIL; note="no 'rendezvous:' statistics line${note:+; $note}"
        elif [ "$n_rts" -ne 0 ] || [ "$n_rfs" -lt "$min_rfs" ]; then
            verdict=FAIL
            note="$n_rts RTS sent, $n_rfs sends into receiver-first offers (want 0 and at least $min_rfs)${note:+; $note}"
        else
            note="no RTS, $n_rfs sends into receiver-first offers${note:+; $note}"
        fi
    fi
    if [ "$verdict" = PASS ] && [ "$check_stats" = yes ]; then
        if [ "$MODE" = system ]; then
            note="rail split NOT checked: --system, Debian's MPICH prints no madrail stats"
        else
            note=$(stripe_check "$log")
            case $? in
                0) ;;
                2) verdict=FAIL; note="$note (MADRAIL_STATS=1 was set: is the netmod calling madrail_finalize/stats?)" ;;
                *) verdict=FAIL ;;
            esac
        fi
    fi
    printf '%-4s  %s  %6s s%s\n' "$verdict" "$label" "$secs" "${note:+  ($note)}"
    case $verdict in
        PASS) PASS=$((PASS + 1)) ;;
        SKIP) SKIP=$((SKIP + 1)) ;;
        FAIL) FAIL=$((FAIL + 1)); FAILED+=("$name:$np:${run_env[*]:-}")
              if grep -q 'FAIL' "$log"; then
                  echo "      --- failure lines (first 20) of $log:"
                  grep 'FAIL' "$log" | head -n 20 | sed 's/^/      | /'
              fi
              echo "      --- last 25 lines of $log:"
              tail -n 25 "$log" | sed 's/^/      | /' ;;
    esac
    if [ "$VERBOSE" = yes ] && [ "$verdict" != FAIL ]; then
        sed 's/^/      | /' "$log"
    fi
done

# An out-of-range netmod CVAR must stop MPI_Init with a message that names
# it (and its value), not run with a silently corrected value.
if [ "$MODE" = madrail ] && selected bad-cvar && build mpi_probe; then
    log=$BUILDDIR/logs/bad-cvar.log
    env MADRAIL_RAILS="$RAILS" MPIR_CVAR_NOLOCAL=1 LD_LIBRARY_PATH="$LDPATH" \
        MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE=100 \
        timeout -k 10 60 "$MPIEXEC" -n 2 "$BUILDDIR/mpi_probe" >"$log" 2>&1 </dev/null
    rc=$?
    label=$(printf '%-16s np %d' bad-cvar 2)
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
            grep -q 'MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE.* is 100' "$log"; then
        printf 'PASS  %s  (MPI_Init failed, exit %d: %s)\n' "$label" "$rc" \
            "$(grep -m1 -o 'out of range: .*' "$log" | cut -c1-90)"
        PASS=$((PASS + 1))
    else
        printf 'FAIL  %s  (exit %d; wanted a failed MPI_Init naming the CVAR and 100)\n' "$label" "$rc"
        tail -n 25 "$log" | sed 's/^/      | /'
        FAIL=$((FAIL + 1)); FAILED+=("mpi_probe:2:MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE=100")
    fi
fi

# ---------------------------------------------------------------- C++ and Fortran
# mpi_cxx.cxx and mpi_fort.f90 (point-to-point with a large striped message,
# collectives, derived datatypes; the Fortran one through mpi_f08, `use mpi`
# and mpif.h), each built twice: with this MPICH's mpicxx/mpifort ("ours")
# and with Debian's mpicxx.mpich/mpifort.mpich ("debian"), and both binaries
# run on the MPICH under test.  A Debian-built binary has no path to our
# libraries: LD_LIBRARY_PATH must make its libmpich.so.12 and
# libmpichcxx.so.12 / libmpichfort.so.12 ours, which ldd confirms before it
# runs.  In --system mode only the Debian builds run, on Debian's MPICH.
lang_build() { # compiler src bin flags...: build, log in bin.build.log
    local cc=$1 src=$2 bin=$3
    shift 3
    rm -f "$bin"
    # in the build directory: the Fortran compiler writes its .mod files
    # into the current directory
    (cd "$BUILDDIR" && "$cc" "$@" -o "$bin" "$src") >"$bin.build.log" 2>&1
}
MPICH_BINDIR=$(dirname "$MPICC")
LANG_TESTS=()
if [ "$MODE" = madrail ]; then
    LANG_TESTS+=("mpi_cxx:ours:$MPICH_BINDIR/mpicxx" "mpi_fort:ours:$MPICH_BINDIR/mpifort")
fi
LANG_TESTS+=("mpi_cxx:debian:mpicxx.mpich" "mpi_fort:debian:mpifort.mpich")
for lt in "${LANG_TESTS[@]}"; do
    IFS=: read -r name built compiler <<<"$lt"
    selected "$name" || continue
    label=$(printf '%-16s np %d  built with %s' "$name" 2 "$(basename "$compiler")")
    case $name in
        mpi_cxx) src=$HERE/mpi_cxx.cxx; flags=(-O2 -g -Wall -Wextra -Werror) ;;
        *) src=$HERE/mpi_fort.f90; flags=(-O2 -g -Wall -Werror) ;;
    esac
    if ! command -v "$compiler" >/dev/null 2>&1; then
        if [ "$built" = ours ]; then
            printf 'FAIL  %s  (no %s: this MPICH has no %s)\n' "$label" "$compiler" \
                "$( [ "$name" = mpi_cxx ] && echo C++ || echo Fortran )"
            FAIL=$((FAIL + 1)); FAILED+=("$name:2:")
        else
            printf 'SKIP  %s  (no %s: install Debian'"'"'s libmpich-dev and gfortran)\n' \
                "$label" "$compiler"
            SKIP=$((SKIP + 1))
        fi
        continue
    fi
    bin=$BUILDDIR/$name.$built
    if ! lang_build "$compiler" "$src" "$bin" "${flags[@]}"; then
        printf 'FAIL  %s  (build failed)\n' "$label"
        tail -n 30 "$bin.build.log" | sed 's/^/      | /'
        FAIL=$((FAIL + 1)); FAILED+=("$name:2:")
        continue
    fi
    note=''
    if [ "$MODE" = madrail ]; then
        # every MPI library the binary needs must be ours
        libs=$(LD_LIBRARY_PATH=$LDPATH ldd "$bin" 2>&1 |
               sed -n 's/^[[:space:]]*\(libmpi[a-z]*\.so[.0-9]*\) => \([^ ]*\).*/\1 \2/p')
        notours=$(echo "$libs" | while read -r l p; do
                      [ -n "$l" ] || continue
                      [ "$(cd "$(dirname "$p")" && pwd -P)" = "$(cd "$MPICH_LIBDIR" && pwd -P)" ] ||
                          echo "$l=$p"
                  done)
        if [ -z "$libs" ] || [ -n "$notours" ]; then
            printf 'FAIL  %s  (MPI libraries not resolved to %s: %s)\n' "$label" \
                "$MPICH_LIBDIR" "${notours:-none found}"
            FAIL=$((FAIL + 1)); FAILED+=("$name:2:")
            continue
        fi
        note="$(echo "$libs" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }') from $MPICH_LIBDIR"
    fi
    log=$BUILDDIR/logs/$name-$built.log
    extra_env=()
    [ "$MODE" = madrail ] && extra_env=(MADRAIL_STATS=1 MPIT_NETMOD=madrail)
    t0=$(date +%s.%N)
    env MADRAIL_RAILS="$RAILS" MPIR_CVAR_NOLOCAL=1 LD_LIBRARY_PATH="$LDPATH" \
        ${extra_env[@]+"${extra_env[@]}"} \
        timeout -k 10 "$TIMEOUT" "$MPIEXEC" -n 2 "$bin" >"$log" 2>&1 </dev/null
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    verdict=PASS
    if [ $rc -ne 0 ]; then
        verdict=FAIL; note="exit status $rc"
    elif ! grep -q ' No Errors' "$log" || grep -q 'FAIL - ' "$log"; then
        verdict=FAIL; note="no ' No Errors' line, or FAIL lines"
    elif [ "$MODE" = madrail ]; then
        nb=$(netmod_bytes "$log")
        if [ -z "$nb" ] || [ "$nb" -lt 1048576 ]; then
            verdict=FAIL; note="${nb:-no} bytes through madrail: the netmod did not carry it"
        else
            split=$(stripe_check "$log") || { verdict=FAIL; note=$split; }
            [ "$verdict" = PASS ] && note="$note; $split"
        fi
    fi
    printf '%-4s  %s  %6s s%s\n' "$verdict" "$label" "$secs" "${note:+  ($note)}"
    if [ "$verdict" = PASS ]; then
        PASS=$((PASS + 1))
        [ "$VERBOSE" = yes ] && sed 's/^/      | /' "$log"
    else
        FAIL=$((FAIL + 1)); FAILED+=("$name.$built:2:")
        tail -n 25 "$log" | sed 's/^/      | /'
    fi
done

if [ $((PASS + FAIL + SKIP)) -eq 0 ]; then
    echo "$prog: no test selected (--only '$ONLY'; see --list)" >&2
    exit 2
fi
if [ $SKIP -gt 0 ]; then
    echo "$PASS passed, $FAIL failed, $SKIP skipped"
else
    echo "$PASS passed, $FAIL failed"
fi
if [ $FAIL -gt 0 ]; then
    echo "# to reproduce:"
    for f in "${FAILED[@]}"; do
        IFS=: read -r name np fenv <<<"$f"
        stats=
        [ "$MODE" = madrail ] && stats="MADRAIL_STATS=1 "
        echo "#   env MADRAIL_RAILS=$RAILS MPIR_CVAR_NOLOCAL=1 ${stats}${fenv:+$fenv }LD_LIBRARY_PATH=$LDPATH" \
             "$MPIEXEC -n $np $BUILDDIR/$name"
    done
    exit 1
fi
exit 0
