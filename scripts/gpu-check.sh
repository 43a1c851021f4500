#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA GPU that has none of our Debian libraries:
# the GPU tests (label gpu, the five programs side by side), then ringlet-bench --device cuda at
# 2, 3 and 4 ranks with the defaults, at 2 ranks with every call forced onto the IPC ring and
# forced staged, the calls with a direct route (all-reduce, all-gather, reduce-scatter,
# all-to-all, gather, scatter and their v-forms) forced along the ring at 3 and 4 ranks and
# direct at 2, then gloo on CUDA tensors through PyTorch where it is installed (NCCL refuses
# several ranks on one GPU). About 3 minutes on an H200.
#
# Here (a build with CUDA on):
#   ../shared/tools/device-bundle.sh build/bin/ringlet-bench build/bin/ringlet-run \
#     build/bin/ringlet-info build/bin/ringlet-model build/tests/cuda_*_test
#   strip --strip-unneeded .device/bin/* .device/lib/*      (89 MiB -> 20 MiB: under the carry limit)
# There:  scripts/gpu-check.sh OUTDIR
# Writes six files (summary.txt, tests.log, bench.txt, bench-json.tgz, gloo.txt, gloo-n2.json),
# and many-core.tgz on a machine with 8 or more CPUs (scripts/many-core-check.sh, 3 minutes more).
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
run=.device/run.sh
summary=$out/summary.txt
work=$(mktemp -d)

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader; echo "cpus $(nproc)"; uname -r; } >"$summary" 2>&1
$run ringlet-info >"$work/ringlet-info.log" 2>&1

start=$(date +%s)
for t in cuda_validation_test cuda_kernels_test cuda_ipc_test cuda_ipc_ring_test cuda_staged_test; do
  (
    timeout -k 5 150 $run "$t" --gtest_color=no >"$work/$t.log" 2>&1
    echo "$t rc=$? $(($(date +%s) - start)) s" >>"$work/rc.txt"
  ) &
done
wait
cat "$work/rc.txt" >>"$summary"
grep -hE '^\[  (FAILED|SKIPPED) |Failure' "$work"/*_test.log | sort -u >>"$summary"
for f in "$work"/ringlet-info.log "$work"/*_test.log; do
  echo "==== $(basename "$f")"
  cat "$f"
done >"$out/tests.log"

mkdir -p "$work/json"
# The v-forms (always staged) in the default runs only.
vforms=allgatherv,reducescatterv,gatherv,scatterv,alltoallv
bench() {  # bench NAME RANKS [ENV=VALUE...]
  local name=$1 n=$2 s
  shift 2
  echo "==== $name: $n ranks $*" >>"$out/bench.txt"
  s=$(date +%s)
  timeout -k 5 60 env "$@" $run ringlet-run -n "$n" ringlet-bench --device cuda \
    --ops "${ops:-allreduce,broadcast,reduce,allgather,reducescatter,gather,scatter,alltoall,$vforms}" \
    -b 8 -e 256M -f 4 -n auto \
    --min-time-ms 30 --warmup-ms 10 --json "$work/json/$name.json" >>"$out/bench.txt" 2>&1
  echo "bench $name rc=$? $(($(date +%s) - s)) s" >>"$summary"
}
bench n2 2
bench n3 3
bench n4 4
vforms=barrier
bench n2-ring 2 RINGLET_CUDA_STAGED_BELOW=0
bench n2-staged 2 RINGLET_CUDA_PATH=staged
# All-reduce, all-gather, reduce-scatter, all-to-all, gather, scatter and their v-forms along
# the ring (direct is the default at 3 and more ranks on one GPU), and direct at 2.
ops=allreduce,allgather,reducescatter,alltoall,gather,scatter,alltoallv,gatherv,scatterv
bench n3-blocks-ring 3 RINGLET_CUDA_BLOCK_ROUTE=ring
bench n4-blocks-ring 4 RINGLET_CUDA_BLOCK_ROUTE=ring
bench n2-blocks-direct 2 RINGLET_CUDA_BLOCK_ROUTE=direct
unset ops
tar czf "$out/bench-json.tgz" -C "$work" json

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  s=$(date +%s)
  timeout -k 5 90 python3 -m torch.distributed.run --nproc-per-node 2 \
    bench/torch/gloo_cuda_reference.py --json "$out/gloo-n2.json" >"$out/gloo.txt" 2>&1
  echo "gloo cuda n2 rc=$? $(($(date +%s) - s)) s" >>"$summary"
fi
# With a core per rank to spare (a GPU machine has 16), the CPU checks that this 2-core
# machine cannot make: scripts/many-core-check.sh, packed into one file.
if [ "$(nproc)" -ge 8 ] && [ -x .device/bin/ringlet-model ]; then
  s=$(date +%s)
  scripts/many-core-check.sh "$work/many-core" >/dev/null 2>&1
  echo "many-core-check rc=$? $(($(date +%s) - s)) s" >>"$summary"
  tar czf "$out/many-core.tgz" -C "$work" many-core
fi
rm -rf "$work"
cat "$summary"
