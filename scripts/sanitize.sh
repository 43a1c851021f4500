#!/usr/bin/env bash
# Sanitizer runs of the test suite.
#
#   scripts/sanitize.sh asan [ctest args]   clang ASan + UBSan build in build-asan/ with the fuzz
#                                           targets (RINGLET_FUZZ=ON); runs the whole suite,
#                                           including a short libFuzzer run of each target
#   scripts/sanitize.sh tsan [gtest args]   TSan build in build-tsan/; runs the threaded parts
#                                           (store server, progress engine and links, DDP
#                                           overlap, async Work, thread-rank collectives)
#   scripts/sanitize.sh all                 both
#
# Any report fails the run: UBSan does not recover, ASan and TSan abort at the first error.
# JOBS (default 2) sets the build's parallelism; CXX/CC pick the compiler (default clang-14;
# with gcc the asan build leaves the fuzz targets out).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
shift || true
jobs=${JOBS:-2}
cxx=${CXX:-clang++-14}
cc=${CC:-clang-14}
if ! command -v "$cxx" > /dev/null; then
  echo "ringlet: $cxx not found (apt-get install clang-14 libfuzzer-14-dev, or set CXX/CC)" >&2
  exit 2
fi
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fuzz=OFF
[[ "$cxx" == *clang* ]] && fuzz=ON

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# hwloc's PCI plugin (libpciaccess) leaks a few allocations per topology load, reported from an
# unloaded module that LeakSanitizer cannot name: the sanitized runs leave that plugin out.
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# The PyTorch backend stays out: torch's headers do not build with clang 14 in C++20, and a
# sanitized library cannot be loaded into an unsanitized python3 anyway.
configure() {  # dir, extra cmake args...
  local dir=$1
  shift
  CC=$cc CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRINGLET_WERROR=ON -DRINGLET_CUDA=OFF -DRINGLET_TORCH=OFF "${launcher[@]}" "$@"
}

run_asan() {
  configure build-asan -DRINGLET_SANITIZE=address,undefined -DRINGLET_FUZZ=$fuzz
  ninja -C build-asan -j "$jobs"
  # Left out: install_downstream (a downstream program built without the sanitizer runtime
  # cannot link the sanitized library) and the tests that start Open MPI (its plugins leak
  # from modules unloaded before exit, which LeakSanitizer can neither name nor suppress).
  (cd build-asan && ctest --output-on-failure --timeout 900 -j 2 -LE "gpu|build" \
    -E "install_downstream|Mpirun|mpirun" "$@")
}

# The tests whose code runs several threads at once in one process.
tsan_tests=(tcp_store_server_test store_contract_test tcp_link_test shm_link_test
            ddp_synchronizer_test communicator_errors_test peer_failure_test collectives_test
            split_test split_errors_test point_to_point_test any_source_test spawn_test
            wait_policy_test slot_ring_test slot_mesh_test hierarchical_test vform_errors_test
            chain_runs_test trace_test record_auth_test tcp_handshake_test c10d_store_test)
run_tsan() {
  configure build-tsan -DRINGLET_SANITIZE=thread -DRINGLET_BUILD_BENCH=OFF \
    -DRINGLET_BUILD_EXAMPLES=OFF
  ninja -C build-tsan -j "$jobs" "${tsan_tests[@]}"
  # TSan needs the fixed address-space layout (this kernel randomises more than it expects).
  local failed=()
  for t in "${tsan_tests[@]}"; do
    echo "== $t"
    setarch "$(uname -m)" -R "build-tsan/tests/$t" "$@" || failed+=("$t")
  done
  if ((${#failed[@]} > 0)); then
    echo "ringlet: TSan run failed: ${failed[*]}" >&2
    return 1
  fi
}

case "$what" in
  asan) run_asan "$@" ;;
  tsan) run_tsan "$@" ;;
  all) run_asan && run_tsan ;;
  *)
    echo "ringlet: unknown mode '$what' (asan, tsan or all)" >&2
    exit 2
    ;;
esac
