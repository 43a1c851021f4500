#!/usr/bin/env bash
# The CPU checks that need a core per rank, for a machine with many cores (a GPU machine lent
# for a session has 16): the cost model against measurements at 4 and 8 ranks and the automatic
# choice against every forced algorithm at 2, 3 and 4 ranks, over shared memory. On this 2-core
# machine 3 and more ranks share cores, which changes what wins (CostModel::ranksShareCores).
#
# Here (a build):
#   ../shared/tools/device-bundle.sh build/bin/ringlet-bench build/bin/ringlet-run \
#     build/bin/ringlet-info build/bin/ringlet-model
# There:  scripts/many-core-check.sh OUTDIR      (about 3 minutes on 16 cores)
# Without build/bin/ (a machine with only the bundle) it runs the bundled programs through
# wrappers in build/bin/. Writes model-n{4,8}.{json,txt}, algo-sweep-n{2,3,4}-many-core.{md,json}
# and summary.txt to OUTDIR; read them here with docs/model_accuracy.py and
# scripts/model_choice.py (see docs/data/model-16core.md).
set -uo pipefail
out=${1:?usage: scripts/many-core-check.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x build/bin/ringlet-bench ] && [ -x .device/run.sh ]; then
  mkdir -p build/bin
  for p in ringlet-bench ringlet-run ringlet-info ringlet-model; do
    printf '#!/bin/sh\nexec %s/.device/run.sh %s "$@"\n' "$(pwd)" "$p" >"build/bin/$p"
    chmod +x "build/bin/$p"
  done
fi
summary=$out/summary.txt
{ echo "cpus $(nproc)"; lscpu | grep -E 'Model name|Core\(s\)|Thread\(s\)|L3'; } >"$summary" 2>&1
rt=()
if chrt -f 1 true 2>/dev/null; then rt=(chrt -f 1); fi
for n in 4 8; do
  s=$(date +%s)
  timeout -k 5 150 "${rt[@]}" build/bin/ringlet-model measure -n "$n" -b 1K -e 64M -f 4 -r 7 \
    -o "$out/model-n$n.json" >"$out/model-n$n.txt" 2>&1
  echo "model n$n rc=$? $(($(date +%s) - s)) s" >>"$summary"
done
s=$(date +%s)
timeout -k 5 400 scripts/algo-sweep.sh -n "2 3 4" -e 32M -r 3 --suffix many-core \
  >"$out/algo-sweep.log" 2>&1
echo "algo-sweep rc=$? $(($(date +%s) - s)) s" >>"$summary"
cp bench/results/algo-sweep-n*-many-core.* "$out/" 2>/dev/null
grep -h -A8 '^## worst' "$out"/algo-sweep-n*-many-core.md >>"$summary" 2>/dev/null
cat "$summary"
