#!/usr/bin/env bash
# The PyTorch-backend benchmarks, every configuration in one run, into bench/results/:
#   torch-allreduce-n2.{json,png}   torch.distributed.all_reduce, ringlet vs gloo, 8 B .. 64 MiB
#   torch-ddp-bert.json             DDP samples/s: one rank alone, 2 ranks on gloo, on ringlet
# Usage: bench/torch/run.sh [-r REPEATS]   (needs a build with the PyTorch backend: build/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=3
while getopts "r:" opt; do
  case "$opt" in
    r) repeats="$OPTARG" ;;
    *) echo "ringlet: usage: bench/torch/run.sh [-r REPEATS]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"
[ -d build/python/ringlet_torch ] || { echo "ringlet: build/python/ringlet_torch is missing (build with PyTorch installed)" >&2; exit 1; }
out=bench/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build/bin/ringlet-run -n 2 "$py" bench/torch/allreduce_vs_gloo.py --json "$out/torch-allreduce-n2.json"

# DDP: the configurations alternate, REPEATS times; the median of each is kept.
for i in $(seq "$repeats"); do
  "$py" bench/torch/ddp_bert.py --backend none --json "$tmp/none-$i.json" >/dev/null
  build/bin/ringlet-run -n 2 "$py" bench/torch/ddp_bert.py --backend gloo --json "$tmp/gloo-$i.json" >/dev/null
  build/bin/ringlet-run -n 2 "$py" bench/torch/ddp_bert.py --backend ringlet --json "$tmp/ringlet-$i.json" >/dev/null
done
"$py" - "$tmp" "$repeats" "$out/torch-ddp-bert.json" <<'PY'
import json, statistics, sys
tmp, reps, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {b: [json.load(open(f"{tmp}/{b}-{i}.json")) for i in range(1, reps + 1)]
        for b in ("none", "gloo", "ringlet")}
med = {b: statistics.median(r["samples_per_s"] for r in rs) for b, rs in runs.items()}
res = {"model": "BERT-like encoder, hidden 128, 4 heads, FFN 512, 2 layers, seq 64, batch 32/rank",
       "threads_per_rank": 1, "repeats": reps, "samples_per_s_median": med,
       "scaling_gloo": med["gloo"] / med["none"], "scaling_ringlet": med["ringlet"] / med["none"],
       "ringlet_over_gloo": med["ringlet"] / med["gloo"], "runs": runs}
json.dump(res, open(path, "w"), indent=1)
print(f"one rank {med['none']:.1f} samples/s; 2 ranks: gloo {med['gloo']:.1f} "
      f"({res['scaling_gloo']:.2f}x), ringlet {med['ringlet']:.1f} ({res['scaling_ringlet']:.2f}x); "
      f"ringlet/gloo {res['ringlet_over_gloo']:.2f}")
PY
"$py" bench/torch/plot.py "$out/torch-allreduce-n2.json" "$out/torch-allreduce-n2.png" || true
