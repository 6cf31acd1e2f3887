# bench/plot.gp -- the picture of `make bench` (bench/run.sh calls it).
# Variables: outdir (with goals.dat and latency.dat), when, model, and
# ngoals and nlat, the lines in each (run.sh counts them; 0 leaves a panel out).
#
# Top: every goal as measured / limit (at-least goals inverted), so that a
# bar left of the line at 1 is met.  Bottom: median latencies of the exec
# and echo round trips, agentd beside its baselines, on a log scale.

if (!exists("outdir")) outdir = "bench/results"
if (!exists("when")) when = ""
if (!exists("model")) model = ""
if (!exists("ngoals")) ngoals = 1
if (!exists("nlat")) nlat = 1

set terminal pngcairo size 1300,1100 font "DejaVu Sans,10" noenhanced
set output outdir."/bench.png"
set datafile separator "\t"
set multiplot layout ((ngoals > 0) + (nlat > 0)),1 title sprintf("agentd bench, %s, %s", when, model) font ",12"

set style fill solid 0.85 noborder
set grid xtics lc rgb "#dddddd"
set key off
set lmargin 62
set rmargin 6

# ---- goals ------------------------------------------------------------------
if (ngoals > 0) {
set autoscale
stats outdir."/goals.dat" using 2 nooutput
ngoals = STATS_records
set title "Goals: measured / limit, log scale (left of 1 = met)"
set yrange [ngoals - 0.4:-0.6]
set ytics () font ",9"
set logscale x 10
gmin = (STATS_min < 0.5 ? STATS_min / 2 : 0.25)
set xrange [gmin:(STATS_max > 2 ? STATS_max * 2 : 4)]
set xtics auto
set format x "%g"
set arrow 1 from 1, graph 0 to 1, graph 1 nohead lc rgb "#333333" dt 2 lw 2
color(v) = v <= 1 ? 0x2e8b57 : 0xcc3333
plot outdir."/goals.dat" using (gmin):0:(gmin):2:($0 - 0.35):($0 + 0.35):(color($2)):ytic(1) \
	with boxxyerror lc rgb variable, \
	'' using 2:0:(sprintf(" %.2f", $2)) with labels left font ",9"
unset arrow 1
unset logscale x
}

# ---- latencies --------------------------------------------------------------
if (nlat > 0) {
set autoscale
stats outdir."/latency.dat" using 2 nooutput
nlat = STATS_records
set title "Round trips, median (µs, log scale)"
set yrange [nlat - 0.4:-0.6]
set logscale x 10
set xrange [STATS_min / 2:STATS_max * 4]
set format x "%.0f"
lcolor(s) = (strstrt(s, "agentd") > 0) ? 0x1f77b4 : 0xaaaaaa
plot outdir."/latency.dat" using (STATS_min / 2):0:(STATS_min / 2):2:($0 - 0.35):($0 + 0.35):(lcolor(strcol(1))):ytic(1) \
	with boxxyerror lc rgb variable, \
	'' using 2:0:(sprintf(" %.0f", $2)) with labels left font ",9"
}

unset multiplot
