#!/usr/bin/env bash
# libFuzzer runs of the fuzz targets (fuzz/README.md), in build-fuzz/ (clang 14, -O1, ASan +
# UBSan + libFuzzer; installs clang 14 and libFuzzer when missing).
#
#   scripts/fuzz.sh short [RUNS]            each target for RUNS inputs (default 20000), starting
#                                           from its kept corpus; new inputs go to a scratch
#                                           directory. Any finding fails the run.
#   scripts/fuzz.sh long RUNS [TARGET...]   each target (default: all) for RUNS inputs; then
#                                           what adds coverage is merged into fuzz/corpus/<name>/
#                                           and the figures are printed. Findings are kept in
#                                           build-fuzz/findings/.
#
# JOBS (default: the core count) sets the build's parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-short}
shift || true
targets=(frames handshake store config sealed)

scripts/install-deps.sh --fuzz
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DRINGLET_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g" -DRINGLET_BUILD_TESTS=OFF \
  -DRINGLET_BUILD_BENCH=OFF -DRINGLET_BUILD_EXAMPLES=OFF -DRINGLET_CUDA=OFF -DRINGLET_TORCH=OFF \
  "${launcher[@]}" > /dev/null
ninja -C build-fuzz -j "${JOBS:-$(nproc)}" "${targets[@]/#/fuzz-}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci}  # see scripts/sanitize.sh
mkdir -p build-fuzz/findings

run() {  # target, runs, scratch dir
  local name=$1 runs=$2 scratch=$3
  mkdir -p "$scratch"
  build-fuzz/fuzz/fuzz-"$name" -runs="$runs" -max_len=4096 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/findings/$name-" "$scratch" "fuzz/corpus/$name" \
    > "build-fuzz/fuzz-$name.log" 2>&1
}

figures() {  # target, seconds
  local log="build-fuzz/fuzz-$1.log"
  printf '| %s | %s | %s | %s s |\n' "$1" \
    "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" \
    "$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")" "$2"
}

case "$mode" in
  short)
    runs=${1:-20000}
    for name in "${targets[@]}"; do
      if ! run "$name" "$runs" "build-fuzz/scratch-$name"; then
        tail -n 40 "build-fuzz/fuzz-$name.log" >&2
        echo "ringlet: fuzz target '$name' failed (log: build-fuzz/fuzz-$name.log)" >&2
        exit 1
      fi
      echo "fuzz $name: $runs inputs, no finding"
    done
    ;;
  long)
    runs=${1:?"ringlet: fuzz.sh long needs a number of inputs per target"}
    shift
    (($# > 0)) && targets=("$@")
    echo "| target | executions | exec/s | time |"
    echo "| --- | ---: | ---: | ---: |"
    failed=0
    for name in "${targets[@]}"; do
      start=$(date +%s)
      rm -rf "build-fuzz/new-$name"
      if ! run "$name" "$runs" "build-fuzz/new-$name"; then
        echo "ringlet: fuzz target '$name' found something (build-fuzz/findings/, log: build-fuzz/fuzz-$name.log)" >&2
        failed=1
      fi
      figures "$name" $(($(date +%s) - start))
      build-fuzz/fuzz/fuzz-"$name" -merge=1 "fuzz/corpus/$name" "build-fuzz/new-$name" \
        > "build-fuzz/merge-$name.log" 2>&1
    done
    exit $failed
    ;;
  *)
    echo "ringlet: unknown mode '$mode' (short or long)" >&2
    exit 2
    ;;
esac
