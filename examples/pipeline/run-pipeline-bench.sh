#!/usr/bin/env bash
# Times ringlet-pipeline (one rank; two ranks split; two ranks pipelined with 2, 4 and 8
# micro-batches), one BLAS thread per rank, REPEATS runs each, and draws a bar chart with error
# bars (mean and standard deviation of the per-run means) into pipeline.png with gnuplot.
#   usage: examples/pipeline/run-pipeline-bench.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-pipeline-results}
repeats=${REPEATS:-3}
args=${PIPELINE_ARGS:-"--layers 8 --width 512 --batch 256 --steps 10 --warmup 2"}
bin=$build/bin
mkdir -p "$out"
csv=$out/pipeline.csv
echo "label,mean_ms,sd_ms" > "$csv"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
measure() {  # label, command...
  local label=$1; shift
  local values=()
  for _ in $(seq "$repeats"); do
    values+=("$("$@" | sed -n 's/^\(\[0\] \)\{0,1\}RESULT,[^,]*,[^,]*,\([^,]*\),.*/\2/p')")
  done
  printf '%s\n' "${values[@]}" | awk -v l="$label" '{s+=$1; q+=$1*$1; n++}
    END {m=s/n; v=(n>1)?(q-n*m*m)/(n-1):0; if (v<0) v=0; printf "%s,%.3f,%.3f\n", l, m, sqrt(v)}' \
    | tee -a "$csv"
}
measure "1 rank" "$bin/ringlet-pipeline" --mode single $args
measure "2 ranks split" "$bin/ringlet-run" -n 2 "$bin/ringlet-pipeline" --mode split $args
for m in 2 4 8; do
  measure "2 ranks pipe x$m" "$bin/ringlet-run" -n 2 "$bin/ringlet-pipeline" --mode pipeline \
    --micro "$m" $args
done
if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,500
set output "$out/pipeline.png"
set datafile separator ","
set title "MLP split over two ranks (ringlet send/recv): ms per step, mean +- sd of $repeats runs"
set ylabel "ms / step"
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set xrange [-0.6:*]
set offsets 0, 0.6, 0, 0
set xtics noenhanced
plot "$csv" skip 1 using 0:2:3:xtic(1) with boxerrorbars notitle lc rgb "#4477aa"
GP
  echo "pipeline: $csv and $out/pipeline.png"
else
  echo "pipeline: $csv (install gnuplot-nox for the PNG)"
fi
