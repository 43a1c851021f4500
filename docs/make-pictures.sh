#!/usr/bin/env bash
# Regenerates the pictures and numbers of docs/ring-allreduce.md from real runs on this machine:
#   docs/data/model-n{2,4}.json      ringlet-model measure: every algorithm timed beside the model
#   docs/data/model-accuracy.md      docs/model_accuracy.py: calibrated and fitted, within 25%?
#   docs/data/extrapolation.md       ringlet-model table: 8..4096 ranks, 10/100/400 Gbit/s
#   docs/data/trace-n4-*.txt         RINGLET_TRACE of a 4-rank ring all-reduce, its steps
#   docs/data/trace-overhead.md      ringlet-bench with trace mode off and on
#   docs/images/model-n{2,4}.png     predicted against measured curves
#   docs/images/trace-n4*.png        the timeline of the ring's steps
# Usage: docs/make-pictures.sh [--model-only] [BUILD_DIR]   (default build/; builds the tools it
#   needs; --model-only: the model's runs, pictures, accuracy and extrapolation, not the traces)
# Needs matplotlib and scipy for /usr/bin/python3 (installed with apt-get when missing). Takes a minute or
# two. The ranks run at real-time priority (chrt -f 1, when allowed): on a machine that others
# keep busy, a rank that waits for its peer otherwise loses its core for a scheduler tick
# (4 ms), and the times measure the other work, not ringlet. Each size is the median of 7
# batches.
set -euo pipefail
cd "$(dirname "$0")/.."
model_only=0
if [ "${1:-}" = --model-only ]; then model_only=1; shift; fi
build=${1:-build}
if ! /usr/bin/python3 -c "import matplotlib, scipy" 2>/dev/null; then
  apt-get update && apt-get install -y python3-matplotlib python3-scipy
fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
if [ -z "${NO_BUILD:-}" ]; then
  cmake --build "$build" -j2 --target ringlet-run ringlet-model ringlet-trace ringlet-bench
fi
rt=()
if chrt -f 1 true 2>/dev/null; then rt=(chrt -f 1); fi
bin=$build/bin
data=docs/data
images=docs/images
mkdir -p "$data" "$images"

# The model against measurements, at 2 and 4 ranks (shared memory on this host).
for n in 2 4; do
  "${rt[@]}" "$bin/ringlet-model" measure -n "$n" -b 1K -e 64M -f 4 -r 7 -o "$data/model-n$n.json" \
    | tee "$data/model-n$n.txt"
  /usr/bin/python3 docs/plot_model.py "$data/model-n$n.json" "$images/model-n$n.png"
done
/usr/bin/python3 docs/model_accuracy.py "$data/model-n2.json" "$data/model-n4.json" \
  > "$data/model-accuracy.md"
"$bin/ringlet-model" table "$data/model-n2.json" > "$data/extrapolation.md"
if [ $model_only = 1 ]; then
  echo "pictures and data in $images and $data (the model's only)"
  exit 0
fi

# A traced ring all-reduce at 4 ranks, 20 timed calls (the fastest is drawn): 1 MiB is one
# slice per chunk (chunks of 256 KiB, slices of 512 KiB); 8 MiB is four slices per chunk.
tmp=$(mktemp -d /tmp/ringlet-pictures.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for mib in 1 8; do
  RINGLET_TRACE="$tmp/t$mib" RINGLET_ALGO=allreduce:ring "${rt[@]}" "$bin/ringlet-run" -n 4 \
    "$bin/ringlet-bench" -b "${mib}M" -e "${mib}M" --ops allreduce -n 20 -w 5 > /dev/null
  out="$data/trace-n4-${mib}m"
  /usr/bin/python3 "$bin/ringlet-trace" merge "$tmp/t$mib".rank*.json -o "$tmp/merged$mib.json"
  bytes=$((mib << 20))
  /usr/bin/python3 "$bin/ringlet-trace" show "$tmp/merged$mib.json" --fastest --bytes $bytes \
    > "$out.txt"
  /usr/bin/python3 "$bin/ringlet-trace" plot "$tmp/merged$mib.json" --fastest --bytes $bytes \
    -o "$images/trace-n4-${mib}m.png"
done

# Trace mode's cost: the same all-reduce sweep with trace mode off, on, off, on (same build,
# same run, alternating so that a change in the machine's load hits both).
for i in 1 2 3; do
  for mode in off on; do
    if [ $mode = on ]; then export RINGLET_TRACE="$tmp/overhead"; else unset RINGLET_TRACE; fi
    "${rt[@]}" "$bin/ringlet-run" -n 2 "$bin/ringlet-bench" -b 8 -e 16M -f 8 --ops allreduce \
      -n 50 -w 5 --json "$tmp/overhead-$mode-$i.json" > /dev/null
  done
done
unset RINGLET_TRACE
/usr/bin/python3 docs/overhead.py "$tmp"/overhead-off-*.json -- "$tmp"/overhead-on-*.json \
  > "$data/trace-overhead.md"
cat "$data/trace-overhead.md"

echo "pictures and data in $images and $data"
