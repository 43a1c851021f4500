#!/usr/bin/env bash
# BERT-base encoder block forward+backward (B=8, T=128, float32): ringlet's trainer
# (bench_bert_block) against PyTorch 1.13 (bench/torch/bert_block.py), interleaved in one run,
# at 1 and 2 threads, each side with the same OpenBLAS and the same kernels (OPENBLAS_CORETYPE,
# default SkylakeX when the CPU has AVX-512, else Haswell); PyTorch's OpenBLAS and OpenMP pools
# both get the thread count. Prints a table of medians and ratios; -j FILE writes them as JSON.
#   examples/trainer/scripts/vs-pytorch.sh [-r ROUNDS] [-c CORETYPE] [-j FILE] [-p]
#   -p  run both at real-time priority (chrt -f 50), for a machine others keep busy
set -euo pipefail
cd "$(dirname "$0")/../../.."
source examples/trainer/scripts/vs-pytorch-common.sh
vs_pytorch_setup vs-pytorch.sh "$@"
bench=build/bin/bench_bert_block
[ -x "$bench" ] || { echo "ringlet: $bench is missing (scripts/build.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  for t in 1 2; do
    "${prio[@]}" "$bench" --benchmark_filter="Block.*threads:$t/" \
      --benchmark_out="$tmp/ringlet-$t-$r.json" --benchmark_out_format=json >/dev/null
    OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "${prio[@]}" /usr/bin/python3 \
      bench/torch/bert_block.py --threads "$t" --json "$tmp/torch-$t-$r.json" >/dev/null
  done
done
/usr/bin/python3 - "$tmp" "$rounds" "$core" "$json" <<'PY'
import json, statistics, sys
tmp, rounds, core, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = []
print(f"BERT-base block fwd+bwd, B=8 T=128, OPENBLAS_CORETYPE={core}, median of {rounds} rounds")
print("| threads | ringlet ms | PyTorch ms | ringlet / PyTorch |")
print("| ---: | ---: | ---: | ---: |")
for t in (1, 2):
    ours = [json.load(open(f"{tmp}/ringlet-{t}-{r}.json"))["benchmarks"][0]["real_time"]
            for r in range(1, rounds + 1)]
    theirs = [json.load(open(f"{tmp}/torch-{t}-{r}.json"))["ms_per_step"]
              for r in range(1, rounds + 1)]
    a, b = statistics.median(ours), statistics.median(theirs)
    rows.append({"threads": t, "ringlet_ms": ours, "torch_ms": theirs, "ratio": a / b})
    print(f"| {t} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
if out:
    json.dump({"coretype": core, "rounds": rounds, "rows": rows}, open(out, "w"), indent=1)
PY
