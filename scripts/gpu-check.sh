#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA GPU that has none of our Debian libraries:
# the GPU tests (label gpu), then ringlet-bench --device cuda at 1, 2 and 4 ranks on the IPC path
# and 2 ranks staged, then gloo on CUDA tensors through PyTorch where it is installed (NCCL refuses
# several ranks on one GPU).
#
# Here (a build with CUDA on):
#   ../shared/tools/device-bundle.sh build/bin/ringlet-bench build/bin/ringlet-run \
#     build/bin/ringlet-info build/tests/cuda_*_test
# There:  scripts/gpu-check.sh OUTDIR     (writes summary.txt, tests.log, bench.txt, bench-*.json,
#         gloo.txt/.json; at most 8 files)
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
run=.device/run.sh
summary=$out/summary.txt
step() {  # step NAME SECONDS COMMAND...: runs it with a deadline, appends rc and time to summary
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s%N)
  timeout -k 5 "$limit" "$@"
  rc=$?
  printf '%-40s rc=%-3s %6.1f s\n' "$name" "$rc" "$(( ($(date +%s%N) - start) / 100000000 ))e-1" >>"$summary"
}

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader; echo "cpus $(nproc)"; uname -r; } >"$summary" 2>&1
step ringlet-info 30 $run ringlet-info >>"$out/tests.log" 2>&1

for t in cuda_validation_test cuda_kernels_test cuda_ipc_test cuda_staged_test cuda_ipc_ring_test; do
  echo "==== $t" >>"$out/tests.log"
  step "$t" 100 $run "$t" --gtest_color=no >>"$out/tests.log" 2>&1
done
grep -E '^\[  (FAILED|SKIPPED) ' "$out/tests.log" | sort -u >>"$summary"

ops=allreduce,broadcast,reduce,allgather,reducescatter
bench() {  # bench NAME RANKS [ENV=VALUE...]
  local name=$1 n=$2
  shift 2
  echo "==== $name: $n ranks $*" >>"$out/bench.txt"
  step "bench $name" 90 env "$@" $run ringlet-run -n "$n" ringlet-bench --device cuda --ops $ops \
    -b 8 -e 256M -f 4 -n auto --min-time-ms 50 --warmup-ms 20 --json "$out/bench-$name.json" \
    >>"$out/bench.txt" 2>&1
}
bench n1 1
bench n2 2
bench n4 4
bench n2-staged 2 RINGLET_CUDA_PATH=staged

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  step "gloo cuda n2" 90 python3 -m torch.distributed.run --nproc-per-node 2 \
    bench/torch/gloo_cuda_reference.py --json "$out/gloo-n2.json" >"$out/gloo.txt" 2>&1
fi
cat "$summary"
