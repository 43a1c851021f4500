#!/usr/bin/env bash
# Regenerates the pictures and numbers of docs/ring-allreduce.md from real runs on this machine:
#   docs/data/model-n{2,4}.json      ringlet-model measure: every algorithm timed beside the model
#   docs/data/extrapolation.md       ringlet-model table: 8..4096 ranks, 10/100/400 Gbit/s
#   docs/data/trace-n4*.json          RINGLET_TRACE of a 4-rank ring all-reduce, merged
#   docs/images/model-n{2,4}.png     predicted against measured curves
#   docs/images/trace-n4*.png        the timeline of the ring's steps
# Usage: docs/make-pictures.sh [BUILD_DIR]   (default build/; builds the tools it needs)
# Needs matplotlib for /usr/bin/python3 (installed with apt-get when missing). Takes a few
# minutes; on a busy machine the measured times move (each size is the median of 5 batches).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  apt-get install -y python3-matplotlib
fi
if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" -j2 --target ringlet-run ringlet-model ringlet-trace ringlet-teach-allreduce
bin=$build/bin
data=docs/data
images=docs/images
mkdir -p "$data" "$images"

# The model against measurements, at 2 and 4 ranks (shared memory on this host).
for n in 2 4; do
  "$bin/ringlet-model" measure -n "$n" -b 1K -e 64M -f 4 -r 5 -o "$data/model-n$n.json" \
    | tee "$data/model-n$n.txt"
  /usr/bin/python3 docs/plot_model.py "$data/model-n$n.json" "$images/model-n$n.png"
done
"$bin/ringlet-model" table "$data/model-n4.json" > "$data/extrapolation.md"

# A traced ring all-reduce at 4 ranks: one slice per chunk (1 MiB: chunks of 256 KiB, slices of
# 512 KiB), then a pipelined one (8 MiB: 4 slices of 512 KiB per chunk).
tmp=$(mktemp -d /tmp/ringlet-pictures.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for case in "1:131072" "8:1048576"; do
  mib=${case%%:*}
  count=${case##*:}  # int64 elements
  RINGLET_TRACE="$tmp/t$mib" RINGLET_ALGO=allreduce:ring \
    "$bin/ringlet-run" -n 4 "$bin/ringlet-teach-allreduce" "$count" > /dev/null
  /usr/bin/python3 "$bin/ringlet-trace" merge "$tmp/t$mib".rank*.json -o "$data/trace-n4-${mib}m.json"
  /usr/bin/python3 "$bin/ringlet-trace" show "$data/trace-n4-${mib}m.json" > "$data/trace-n4-${mib}m.txt"
  /usr/bin/python3 "$bin/ringlet-trace" plot "$data/trace-n4-${mib}m.json" \
    -o "$images/trace-n4-${mib}m.png"
done
echo "pictures and data in $images and $data"
