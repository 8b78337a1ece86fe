# bench/scale's figures against live lifecycles (issue 39): the daemon's
# total RSS and its time to ready, this build ("after") and --before's; the
# sizes with tombstones only (a size without any is a table row, not a point).
#   gnuplot -e "csv='build/bench-scale.csv'; out='docs/scale.svg'" bench/scale.gnuplot
if (!exists("csv")) csv = 'build/bench-scale.csv'
if (!exists("out")) out = 'docs/scale.svg'
set terminal svg size 900,420 dynamic font "sans,11"
set output out
set multiplot layout 1,2 title "One space: the daemon against its live lifecycles (tombstones: 3 per live one)"
set key top left
set grid
set xlabel "live lifecycles"
set format x "%.0s%c"
set ylabel "RSS, supervisor and workers (MB)"
plot "< awk '$1==\"after\" && $3>0' ".csv using 2:10 with linespoints title "this build", \
     "< awk '$1==\"before\" && $3>0' ".csv using 2:10 with linespoints title "before"
set ylabel "ready after start (s)"
plot "< awk '$1==\"after\" && $3>0' ".csv using 2:4 with linespoints title "this build", \
     "< awk '$1==\"before\" && $3>0' ".csv using 2:4 with linespoints title "before"
unset multiplot
