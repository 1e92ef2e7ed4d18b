#!/bin/sh
# cluster_report.sh -- the arithmetic and the documents of the cluster
# benchmark suite (bench/cluster/run.sh --report, report.sh) on fixed CSV
# files, without a cluster or root:
#  - medians over rounds (odd and even counts), limits as sums of the
#    rails' median iperf3 results, twice that for bidirectional bandwidth,
#    the percentage of the limit in each cell;
#  - a cell whose jobs hung in MPI_Finalize keeps its values and is
#    marked, with a note saying how many rounds; a hang without values
#    shows as "hang";
#  - the rate-change phases (0.5 s after each change left out) against the
#    tbf rate, with the per-rail split; the link-down outcome, the data
#    moved after the fault and when it stopped;
#  - the --quickstart table (rows, limits, ratios);
#  - an --adapt run: the unequal-rails table (Open MPI with hand-set
#    weights as a column), issue 11's targets, its own docs section;
#  - --update-docs: the section goes before "## Other comparisons" once,
#    a second run replaces it (the file is then the same), the rest of the
#    file is untouched, the plots are copied to img/ when gnuplot is there.
SRC=${MDR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${MDR_BUILDDIR:-$SRC/_build}
name=cluster_report
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
has() { # FILE FIXED-STRING DESCRIPTION
    if grep -qF -- "$2" "$1"; then ok "$3"; else bad "$3: '$2' not in $1"; fi
}
command -v bash >/dev/null 2>&1 || { echo "SKIP: $name: no bash"; exit 77; }
RUN="bash $SRC/bench/cluster/run.sh"
W=$BUILD/test/bench/report-work
rm -rf "$W"
mkdir -p "$W/full/raw" "$W/qs" "$W/docs" || { echo "FAIL: $name: cannot create $W"; exit 1; }

# ------------------------------------------------------------ a full run
D=$W/full
{
    echo "case,round,system,rails,bench,size,value,unit,status"
    for r in "1 118 117" "2 120 119" "3 119 118"; do
        set -- $r
        echo "equal,$1,iperf3,rail0,link,0,$2,MB/s,ok"
        echo "equal,$1,iperf3,rail1,link,0,$3,MB/s,ok"
    done
    echo "equal,1,madrail,2,bw,1048576,200,MB/s,ok"
    echo "equal,2,madrail,2,bw,1048576,230,MB/s,ok"
    echo "equal,3,madrail,2,bw,1048576,220,MB/s,ok"
    echo "equal,1,madrail,2,bibw,1048576,460,MB/s,ok"
    echo "equal,1,madrail,2,lat,8,9.6,us,ok"
    echo "equal,1,mpich,2,bw,1048576,225,MB/s,ok"
    echo "equal,1,madrail,2,bw,4194304,236.2,MB/s,ok"
    echo "equal,1,mpich,2,bw,4194304,237,MB/s,ok"
    echo "equal,1,madrail,1,lat,8,9.5,us,ok"
    echo "equal,2,madrail,1,lat,8,9.1,us,ok"
    echo "equal,1,mpich,2,mr,8,30,MB/s,finalize-hang"
    echo "equal,1,mpich,2,msgrate,8,3750000,msg/s,finalize-hang"
    echo "equal,2,mpich,2,mr,,,MB/s,hang"
    echo "equal,1,openmpi,2,bw,,,MB/s,hang"
    echo "ratechange,1,iperf3,rail0,link,0,119,MB/s,ok"
    echo "ratechange,1,iperf3,rail1,link,0,118,MB/s,ok"
    echo "ratechange,1,iperf3,rail1@300mbit,link,0,36,MB/s,ok"
    echo "ratechange,1,madrail,2,stream,1048576,180.5,MB/s,ok"
    echo "linkdown,1,openmpi,2,stream,4194304,,MB/s,hang"
    echo "linkdown,1,openmpi,2,stall,4194304,,ms,hang"
    echo "linkdown,1,madrail,2,stream,4194304,150.0,MB/s,ok"
    echo "linkdown,1,madrail,2,stall,4194304,73.0,ms,ok"
    echo "linkdown,1,madrail,2,afterstall,4194304,119.8,MB/s,ok"
    echo "linkdown,1,madrail,2,badmsgs,4194304,0,messages,ok"
    echo "blackhole,1,madrail-ucx,2,stream,4194304,147.8,MB/s,ok"
    echo "blackhole,1,madrail-ucx,2,stall,4194304,100.4,ms,ok"
    echo "blackhole,1,madrail-ucx,2,afterstall,4194304,131.5,MB/s,ok"
    echo "blackhole,1,madrail-ucx,2,badmsgs,4194304,0,messages,ok"
} >"$D/results.csv"
{
    echo "case,round,system,rails,bench,status,rc,seconds,name"
    echo "equal,1,madrail,2,bw,ok,0,5.0,x"
    echo "equal,2,madrail,2,bw,ok,0,5.0,x"
    echo "equal,3,madrail,2,bw,ok,0,5.0,x"
    echo "equal,1,madrail,2,bibw,ok,0,5.0,x"
    echo "equal,1,madrail,2,lat,ok,0,1.0,x"
    echo "equal,1,mpich,2,bw,ok,0,5.0,x"
    echo "equal,1,madrail,1,lat,ok,0,1.0,x"
    echo "equal,2,madrail,1,lat,ok,0,1.0,x"
    echo "equal,1,mpich,2,mr,finalize-hang,143,12.0,x"
    echo "equal,2,mpich,2,mr,hang,143,90.0,x"
    echo "equal,1,openmpi,2,bw,hang,143,240.0,x"
    echo "ratechange,1,madrail,2,stream,ok,0,7.0,x"
    echo "linkdown,1,openmpi,2,stream,hang,143,12.0,x"
    echo "linkdown,1,madrail,2,stream,ok,0,14.0,x"
    echo "blackhole,1,madrail-ucx,2,stream,ok,0,14.0,x"
} >"$D/jobs.csv"
{
    echo "case,system,t,event"
    echo "ratechange,madrail,0.00,traffic"
    echo "ratechange,madrail,2.00,rail1 300mbit"
    echo "ratechange,madrail,4.00,rail1 1gbit"
    echo "ratechange,madrail,6.00,end ok"
    echo "linkdown,openmpi,0.00,traffic"
    echo "linkdown,openmpi,1.00,rail1 down (node1)"
    echo "linkdown,openmpi,11.00,end hang rc 143"
    echo "linkdown,madrail,0.00,traffic"
    echo "linkdown,madrail,3.00,rail1 fault: node1's rail1 down"
    echo "linkdown,madrail,12.00,end ok rc 0"
    echo "blackhole,madrail-ucx,0.00,traffic"
    echo "blackhole,madrail-ucx,3.00,rail1 fault: rail1 black-holed"
    echo "blackhole,madrail-ucx,12.00,end ok rc 0"
} >"$D/events.csv"
{
    echo "case,system,t,rail0,rail1,total"
    # rate change: 120+120 before 2 s, 40+35 until 4 s, 118+122 after,
    # nothing after 6 s
    awk 'BEGIN { for (i = 0; i < 65; i++) { t = i / 10 + 0.05
        if (t < 2) { a = 120; b = 120 } else if (t < 4) { a = 40; b = 35 } else if (t < 6) { a = 118; b = 122 } else { a = 0; b = 0 }
        printf "ratechange,madrail,%.2f,%.2f,%.2f,%.2f\n", t, a, b, a + b } }'
    # link down at 1 s: 240 before, 120 for 6 samples after, then nothing
    awk 'BEGIN { for (i = 0; i < 110; i++) { t = i / 10 + 0.05
        if (t < 1) v = 240; else if (t < 1.6) v = 120; else v = 0
        printf "linkdown,openmpi,%.2f,%.2f,0.00,%.2f\n", t, v, v } }'
} >"$D/series.csv"
echo "MPI_ERR_OTHER: known error | pipe" >"$D/raw/linkdown.openmpi.errors"
{
    echo "date: 2026-01-01 00:00:00 +0000"
    echo "host: test; 2 cores (fixture)"
    echo "load average at start: 10.5 9.0 8.0"
    echo "command: run.sh --fixture"
} >"$D/versions.txt"

if $RUN --report "$D" >"$W/full.log" 2>&1; then
    ok "run.sh --report on a fixed CSV"
else
    cat "$W/full.log"; bad "run.sh --report failed"
fi
M=$D/results.md
has "$D/medians.csv" "equal,madrail,2,bw,1048576,220,3" "median of 200, 230, 220 is 220 over 3 rounds"
has "$D/medians.csv" "equal,madrail,1,lat,8,9.3,2" "median of two rounds is their mean"
has "$D/medians.csv" "equal,iperf3,rail0,link,0,119,3" "iperf3 median per rail"
has "$M" "| bandwidth 1 MiB (MB/s) | 2 | 237.0 | 220.0 (92.8%) | 225.0 (94.9%) | hang |" \
    "bw row: limit = 119 + 118, ratio, a system with no value, a hang without values"
has "$M" "| bidirectional bandwidth 1 MiB (MB/s) | 2 | 474.0 | 460.0 (97.0%) |" \
    "bidirectional limit is twice the sum"
has "$M" "| latency 8 B (µs) | 1 | – | 9.30 |" "latency row: no limit, two decimals"
has "$M" "**This run shared the machine with other work** (load average up to 10.5 on 2 cores)" \
    "a run on a busy machine says so"
has "$M" "| bandwidth 1 MiB, 2 equal rails: >= 99.5% of the limit | 220.0 of 237.0 MB/s = 92.8% | **misses** |" \
    "target: bandwidth against the limit"
has "$M" "| bandwidth 1 MiB, 2 rails: no worse than MPICH ch4:ucx | 220.0 vs 225.0 MB/s | **misses** |" \
    "target: no worse than a peer"
has "$M" "| bandwidth 4 MiB, 2 rails: no worse than MPICH ch4:ucx | 236.2 vs 237.0 MB/s | ties (within 0.5%) |" \
    "target: a shortfall within the rounds' spread is a tie, not a win"
if grep -q 'no worse than Open MPI' "$M"; then bad "target row for a peer without a value"; else ok "no target row for a peer without a value"; fi
has "$M" "| bidirectional bandwidth 1 MiB, 2 equal rails: >= 97.0% of the limit | 460.0 of 474.0 MB/s = 97.0% | meets |" \
    "target: bidirectional against twice the limit"
has "$M" "| latency 8 B over 2 rails <= 1 rail + 0.5 µs | 9.60 vs 9.30 µs | meets |" "target: latency over two rails"
has "$M" "| 2 pairs (mbw_mr) 8 B (MB/s) | 2 | – | – | 30.0 † |" \
    "a finalize hang keeps its value, marked (no limit for 8-byte messages)"
has "$M" "| message rate, 2 pairs 8 B (messages/s) | 2 | – | – | 3.75 M † |" "message rate row"
has "$M" "- MPICH ch4:ucx, 2 rail(s), 2 pairs (mbw_mr): " "note on the cell whose jobs did not end normally"
has "$M" "then hung in MPI_Finalize (killed; results kept) in 1 of 2 rounds" "... the finalize hang counted"
has "$M" "hung (killed at the time limit, no result) in 1 of 2 rounds" "... the hang counted"
has "$M" "| limit: tbf rate (frames) | 250.0 | 162.5 | 250.0 | | | |" "rate change: the tbf rates"
has "$M" "| limit: iperf3 (payload) | 237.0 | 155.0 | 237.0 | | | |" "rate change: iperf3 limits"
has "$M" "| ch4:madrail | 240.0 (96%)<br>120.0 + 120.0 | 75.0 (46%)<br>40.0 + 35.0 | 240.0 (96%)<br>118.0 + 122.0 | 180.5 | – / 0.2 | ok |" \
    "rate change: phase means, per-rail split, settling (the drop never reaches 90% of the rate; the return does 0.2 s after)"
grep -E '^\| Open MPI ob1/tcp \| \*\*hangs\*\* \(killed 10 s after the fault\) \| – \| – \| – \| 72 MB \| \+0\.[56] s \|' "$M" >/dev/null &&
    ok "link down: outcome, 6 x 0.1 s x 120 MB/s after the fault, last data 0.55 s after it" ||
    bad "link down row"
has "$M" "| ch4:madrail | completes (150.0 MB/s over the run) | 73 ms | 119.8 MB/s | 0 | 0 MB | none |" \
    "link down: a stream that completes, its stall, the rate after it, no wrong message"
has "$M" "### A rail is black-holed mid-run" "black hole: its own section"
has "$M" "| ch4:madrail ucx | completes (147.8 MB/s over the run) | 100 ms | 131.5 MB/s | 0 |" \
    "black hole: a driver system's row, labelled"
has "$M" '`MPI_ERR_OTHER: known error / pipe`' "link down: what it printed, '|' made safe for the table"
if command -v gnuplot >/dev/null 2>&1; then
    for p in rails ratechange linkdown; do
        [ -s "$D/cluster-$p.png" ] && ok "plot cluster-$p.png" || bad "no plot cluster-$p.png"
    done
    has "$M" "![throughput over time, rate change](cluster-ratechange.png)" "the table links its plot"
fi

# ------------------------------------------------------------ --update-docs
# the docs without a cluster section (as before the first --update-docs)
awk '/^## On a two-node cluster/ { skip = 1 } !skip { print } skip && /^<!-- cluster-bench: end/ { skip = 2; next }
     skip == 2 && /^$/ { skip = 0 }' "$SRC/docs/performance.md" >"$W/docs/performance.md"
grep -q 'cluster-bench' "$W/docs/performance.md" && bad "could not strip the cluster section from a copy of the docs"
sed '/^## Other comparisons/,$d' "$W/docs/performance.md" >"$W/before.md"
if $RUN --report "$D" --update-docs --docs "$W/docs" >"$W/docs1.log" 2>&1; then
    ok "--update-docs"
else
    cat "$W/docs1.log"; bad "--update-docs failed"
fi
cp "$W/docs/performance.md" "$W/docs-after1.md"
$RUN --report "$D" --update-docs --docs "$W/docs" >"$W/docs2.log" 2>&1 || { cat "$W/docs2.log"; bad "--update-docs (2nd) failed"; }
P=$W/docs/performance.md
n=$(grep -c '^<!-- cluster-bench: begin' "$P")
[ "$n" -eq 1 ] && ok "one generated section after two runs" || bad "$n generated sections after two runs"
cmp -s "$P" "$W/docs-after1.md" && ok "a second --update-docs gives the same file" ||
    bad "a second --update-docs changed the file"
sed '/^## On a two-node cluster/,$d' "$P" >"$W/before-now.md"
cmp -s "$W/before.md" "$W/before-now.md" && ok "the text before the section is untouched" ||
    bad "the text before the section changed"
awk '/^## On a two-node cluster/ { a = NR } /^## Other comparisons/ { b = NR } END { exit !(a && b && a < b) }' "$P" &&
    ok "the section is placed before '## Other comparisons'" || bad "section misplaced"
has "$P" "| bandwidth 1 MiB (MB/s) | 2 | 237.0 | 220.0 (92.8%) | 225.0 (94.9%) | hang |" "the docs carry the table"
if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$W/docs/img/cluster-ratechange.png" ] && ok "plots copied to img/" || bad "no docs/img/cluster-ratechange.png"
    has "$P" "](img/cluster-ratechange.png)" "the docs link the plots in img/"
fi

# ------------------------------------------------------------ --quickstart table
D=$W/qs
{
    echo "case,round,system,rails,bench,size,value,unit,status"
    echo "quickstart,1,iperf3,rail0,link,0,119.5,MB/s,ok"
    echo "quickstart,1,iperf3,rail1,link,0,119.0,MB/s,ok"
    echo "quickstart,1,iperf3,rail1@300mbit,link,0,35.8,MB/s,ok"
    echo "quickstart,1,madrail,1,lat,8,7.5,us,ok"
    echo "quickstart,1,madrail,2,lat,8,7.9,us,ok"
    echo "quickstart,1,madrail,1,bw,1048576,119.2,MB/s,ok"
    echo "quickstart,1,madrail,2,bw,1048576,238.0,MB/s,ok"
    echo "quickstart,1,madrail+uneq,2,lat,8,8.0,us,ok"
    echo "quickstart,1,madrail+uneq,2,bw,1048576,71.7,MB/s,ok"
    echo "quickstart,1,madrail+w10.3,2,bw,1048576,150.1,MB/s,ok"
} >"$D/results.csv"
echo "case,round,system,rails,bench,status,rc,seconds,name" >"$D/jobs.csv"
if $RUN --report "$D" >"$W/qs.log" 2>&1; then ok "--report of a --quickstart run"; else cat "$W/qs.log"; bad "--report (quickstart)"; fi
Q=$D/quickstart.txt
grep -E '^  one rail \(1 Gbit\) +7\.5 us +119\.2 MB/s +119\.5 MB/s +99\.7 %$' "$Q" >/dev/null &&
    ok "quickstart: one rail against its iperf3" || { cat "$Q"; bad "quickstart: one-rail row"; }
grep -E '^  two equal rails \(1 \+ 1 Gbit\) +7\.9 us +238\.0 MB/s +238\.5 MB/s +99\.8 %$' "$Q" >/dev/null &&
    ok "quickstart: two equal rails against the sum" || bad "quickstart: two-rail row"
grep -E '^  two unequal rails \(1 Gbit \+ 300 Mbit\) +8\.0 us +71\.7 MB/s +155\.3 MB/s +46\.2 %$' "$Q" >/dev/null &&
    ok "quickstart: unequal rails against 119.5 + 35.8" || bad "quickstart: unequal row"
grep -E '^    same, MADRAIL_RAIL_WEIGHTS=10,3 +- +150\.1 MB/s +155\.3 MB/s +96\.7 %$' "$Q" >/dev/null &&
    ok "quickstart: hand-set weights row" || bad "quickstart: weights row"
has "$Q" "Two equal rails carried 2.00 times what one rail carried" "quickstart: the gain of the second rail"
if grep -q 'machine was busy' "$Q"; then bad "quickstart: a busy-machine line without a load"; else ok "quickstart: no busy-machine line when the load is unknown"; fi

# ------------------------------------------------------------ an --adapt run
D=$W/adapt
mkdir -p "$D/raw" "$W/adocs"
{
    echo "case,round,system,rails,bench,size,value,unit,status"
    for r in 1 2; do
        echo "unequal,$r,iperf3,rail0,link,0,116,MB/s,ok"
        echo "unequal,$r,iperf3,rail1,link,0,35,MB/s,ok"
        echo "three,$r,iperf3,rail0,link,0,116,MB/s,ok"
        echo "three,$r,iperf3,rail1,link,0,116,MB/s,ok"
        echo "three,$r,iperf3,rail2,link,0,35,MB/s,ok"
        echo "adaptequal,$r,iperf3,rail0,link,0,118,MB/s,ok"
        echo "adaptequal,$r,iperf3,rail1,link,0,118,MB/s,ok"
    done
    echo "unequal,1,madrail,2,bw,1048576,148,MB/s,ok"
    echo "unequal,2,madrail,2,bw,1048576,146,MB/s,ok"
    echo "unequal,1,madrail,2,bw,4194304,149,MB/s,ok"
    echo "unequal,1,mpich,2,bw,1048576,70,MB/s,ok"
    echo "unequal,1,openmpi,2,bw,1048576,71,MB/s,ok"
    echo "unequal,1,openmpi+w,2,bw,1048576,150,MB/s,ok"
    echo "three,1,madrail,3,bw,1048576,100,MB/s,ok"
    echo "adaptequal,1,madrail,2,bw,1048576,235,MB/s,ok"
    echo "adaptequal,1,madrail+static,2,bw,1048576,236,MB/s,ok"
    echo "adaptequal,1,madrail,2,lat,8,9.0,us,ok"
    echo "adaptequal,1,madrail+static,2,lat,8,8.8,us,ok"
} >"$D/results.csv"
echo "case,round,system,rails,bench,status,rc,seconds,name" >"$D/jobs.csv"
echo "case,system,t,rail0,rail1,total" >"$D/series.csv"
echo "case,system,t,event" >"$D/events.csv"
{
    echo "date: 2026-01-01 00:00:00 +0000"
    echo "host: test; 2 cores (fixture)"
    echo "profile: adapt, rounds 2, cases adaptequal,unequal,three"
    echo "command: run.sh --adapt --fixture"
} >"$D/versions.txt"
if $RUN --report "$D" >"$W/adapt.log" 2>&1; then ok "--report of an --adapt run"; else cat "$W/adapt.log"; bad "--report (adapt)"; fi
M=$D/results.md
has "$M" "| 1 Gbit + 300 Mbit | 1 MiB | 151.0 | 116.0 | 147.0 (97.4%) | 70.0 (46.4%) | 71.0 (47.0%) | 150.0 (99.3%) |" \
    "adapt: unequal row, every system and Open MPI with hand-set weights, against 116 + 35"
has "$M" "| 1 Gbit + 300 Mbit, 1 MiB: >= 97% of the limit, no settings | 147.0 of 151.0 MB/s = 97.4% | meets |" \
    "adapt: the 97% target met"
has "$M" "| 1 Gbit + 1 Gbit + 300 Mbit, 1 MiB: >= 97% of the limit, no settings | 100.0 of 267.0 MB/s = 37.5% | **misses** |" \
    "adapt: three rails, the target missed"
has "$M" "| 1 Gbit + 1 Gbit + 300 Mbit, 1 MiB: never below the fastest rail alone | 100.0 vs 116.0 MB/s | **misses** |" \
    "adapt: below the fastest rail alone"
has "$M" "| equal rails (2 x 1 Gbit), 1 MiB: >= 99.5% of the limit | 235.0 of 236.0 MB/s = 99.6% (MADRAIL_ADAPT=0: 236.0 = 100.0%) | meets |" \
    "adapt: equal rails against the limit and without adaptation"
has "$M" "| 8 B latency over 2 rails unchanged within noise | 9.00 µs (MADRAIL_ADAPT=0: 8.80 µs) | meets |" "adapt: latency row"
if grep -q '### Equal rails (1 Gbit each)' "$M"; then bad "adapt: the cluster tables in an --adapt report"; else ok "adapt: only the adaptation tables"; fi
awk '/^## Rails that adapt, on the two-node cluster/ { skip = 1 } !skip { print } skip && /^<!-- adapt-bench: end/ { skip = 2; next }
     skip == 2 && /^$/ { skip = 0 }' "$SRC/docs/performance.md" >"$W/adocs/performance.md"
$RUN --report "$D" --update-docs --docs "$W/adocs" >"$W/adocs1.log" 2>&1 || { cat "$W/adocs1.log"; bad "--update-docs (adapt) failed"; }
$RUN --report "$D" --update-docs --docs "$W/adocs" >"$W/adocs2.log" 2>&1 || { cat "$W/adocs2.log"; bad "--update-docs (adapt, 2nd) failed"; }
P=$W/adocs/performance.md
n=$(grep -c '^<!-- adapt-bench: begin' "$P")
[ "$n" -eq 1 ] && ok "adapt: one generated section after two runs" || bad "adapt: $n generated sections after two runs"
n=$(grep -c '^<!-- cluster-bench: begin' "$P")
[ "$n" -eq "$(grep -c '^<!-- cluster-bench: begin' "$SRC/docs/performance.md")" ] &&
    ok "adapt: the cluster section is left as it was" || bad "adapt: the cluster section changed"
has "$P" "| 1 Gbit + 300 Mbit, 1 MiB: >= 97% of the limit, no settings |" "adapt: the docs carry the targets"

if [ $fail -eq 0 ]; then echo "PASS: $name"; exit 0; fi
echo "FAIL: $name"
exit 1
