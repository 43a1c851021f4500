#!/usr/bin/env bash
# Training speed against PyTorch 1.13, the configurations interleaved in one run, each side with
# the same OpenBLAS kernels (OPENBLAS_CORETYPE, default SkylakeX when the CPU has AVX-512, else
# Haswell) and one thread per rank:
#   MLP on spirals, one rank: ringlet-train --model mlp against bench/torch/mlp_spirals.py, at
#     batch 32 (the default) and 1024;
#   small BERT (ringlet-train --model bert --task cls: hidden 128, 4 heads, FFN 512, 2 layers,
#     seq 64, batch 32 per rank, AdamW): one rank, and 2 data-parallel ranks under ringlet-run,
#     against bench/torch/ddp_bert.py alone and under DDP over gloo.
# Both sides report the median time of a training step after warm-up (the batch drawn, forward,
# backward with the gradient all-reduce, optimizer), the slowest rank's. Prints a table of the
# medians over the rounds and the ratios; -j FILE writes them as JSON.
#   examples/trainer/scripts/vs-pytorch-train.sh [-r ROUNDS] [-c CORETYPE] [-j FILE] [-p]
#   -p  run at real-time priority (chrt -f 50), for a machine others keep busy
set -euo pipefail
cd "$(dirname "$0")/../../.."
source examples/trainer/scripts/vs-pytorch-common.sh
vs_pytorch_setup vs-pytorch-train.sh "$@"
for b in build/bin/ringlet-train build/bin/ringlet-run; do
  [ -x "$b" ] || { echo "ringlet: $b is missing (scripts/build.sh)" >&2; exit 1; }
done
py=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=(build/bin/ringlet-train --threads 1 --no-progress --plot "" --csv "$tmp/loss.csv"
       --eval-batches 1 --eval-every 1000000)
bert=(--model bert --task cls --steps 60)
for r in $(seq "$rounds"); do
  for b in 32 1024; do
    "${prio[@]}" "${train[@]}" --model mlp --batch "$b" --steps 2000 \
      --json "$tmp/ringlet-mlp$b-$r.json" >/dev/null
    "${prio[@]}" $py bench/torch/mlp_spirals.py --batch "$b" --steps 1800 --warmup 200 \
      --json "$tmp/torch-mlp$b-$r.json" >/dev/null
  done
  "${prio[@]}" "${train[@]}" "${bert[@]}" --json "$tmp/ringlet-bert1-$r.json" >/dev/null
  "${prio[@]}" build/bin/ringlet-run -n 2 "${train[@]}" "${bert[@]}" \
    --json "$tmp/ringlet-bert2-$r.json" >/dev/null
  "${prio[@]}" $py bench/torch/ddp_bert.py --backend none --vocab 21 --classes 2 --steps 54 \
    --warmup 6 --json "$tmp/torch-bert1-$r.json" >/dev/null
  "${prio[@]}" build/bin/ringlet-run -n 2 $py bench/torch/ddp_bert.py --backend gloo --vocab 21 \
    --classes 2 --steps 54 --warmup 6 --json "$tmp/torch-bert2-$r.json" >/dev/null
done
$py - "$tmp" "$rounds" "$core" "$json" <<'PY'
import json, statistics, sys
tmp, rounds, core, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def runs(side, name):
    return [json.load(open(f"{tmp}/{side}-{name}-{r}.json")) for r in range(1, rounds + 1)]
def med(side, name):
    return statistics.median(x["samples_per_s"] for x in runs(side, name))
rows = []
print(f"Training samples/s, one thread per rank, OPENBLAS_CORETYPE={core}, median of {rounds} rounds")
print("| workload | ranks | ringlet samples/s | PyTorch samples/s | ringlet / PyTorch |")
print("| --- | ---: | ---: | ---: | ---: |")
for name, label, ranks in (("mlp32", "MLP 2-128x2-3, batch 32", 1),
                           ("mlp1024", "MLP 2-128x2-3, batch 1024", 1),
                           ("bert1", "small BERT, batch 32", 1),
                           ("bert2", "small BERT, batch 32/rank (PyTorch: DDP gloo)", 2)):
    a, b = med("ringlet", name), med("torch", name)
    rows.append({"workload": name, "ranks": ranks, "ringlet": runs("ringlet", name),
                 "torch": runs("torch", name), "ringlet_samples_per_s": a,
                 "torch_samples_per_s": b, "ratio": a / b})
    print(f"| {label} | {ranks} | {a:.0f} | {b:.0f} | {a / b:.2f} |")
s_ours = med("ringlet", "bert2") / med("ringlet", "bert1")
s_theirs = med("torch", "bert2") / med("torch", "bert1")
p_ours = runs("ringlet", "bert1")[0]["params"]
p_theirs = runs("torch", "bert1")[0]["params"]
print(f"\nsmall BERT, 2 ranks over 1 rank: ringlet {s_ours:.2f}x, PyTorch DDP(gloo) {s_theirs:.2f}x "
      f"(parameters: ringlet {p_ours}, PyTorch {p_theirs})")
if out:
    json.dump({"coretype": core, "rounds": rounds, "rows": rows,
               "bert_scaling": {"ringlet": s_ours, "torch_gloo": s_theirs}}, open(out, "w"), indent=1)
PY
