# Plots loop_bench's CSV (scripts/bench_loop.sh passes the variables):
#   gnuplot -e "csv='loop-bench.csv'; ratio='ratio.dat'; out='loop-benchmark.png'" plot_loop_bench.gp
# csv:   backend,fds,cpu_ns,real_ns,auto_on_epoll,auto_switches (one row per backend and fd count)
# ratio: loop_bench --paired-csv: fds,ppoll_ns,epoll_ns,auto_ns,ratio_median,ratio_p25,ratio_p75,...
set terminal pngcairo size 900,900 font "sans,11"
set output out
set datafile separator ","
set multiplot layout 2,1 title "minivmm: cost of one loop iteration (wake -> callback -> wait again)"

set logscale x 2
set logscale y 10
set xrange [0.8:1300]
set xlabel "idle fds registered (plus one active fd and the loop's wake fd)"
set ylabel "CPU ns per iteration (median)"
set grid xtics ytics mytics
set key top left
set xtics (1, 4, 16, 64, 256, 1024)
plot csv using 2:(strcol(1) eq "ppoll" ? $3 : NaN) with linespoints lw 2 pt 7 title "ppoll", \
     csv using 2:(strcol(1) eq "epoll" ? $3 : NaN) with linespoints lw 2 pt 5 title "epoll (epoll\\_pwait2)", \
     csv using 2:(strcol(1) eq "timerfd-epoll" ? $3 : NaN) with linespoints lw 2 pt 9 dt 2 title "timerfd-epoll", \
     csv using 2:(strcol(1) eq "auto" ? $3 : NaN) with linespoints lw 3 pt 6 ps 1.5 title "auto"

unset logscale y
set ylabel "auto / min(ppoll, epoll), per paired round"
set yrange [0.9:1.1]
set key top right
plot ratio using 1:5:6:7 with yerrorlines lw 3 pt 6 ps 1.5 title "auto / best fixed backend (median, p25-p75)", \
     1.05 with lines dt 2 lw 2 lc rgb "red" title "+5% (the issue's limit)", \
     1.0 with lines lw 1 lc rgb "gray" notitle
unset multiplot
