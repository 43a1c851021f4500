// Single-process kernel throughput: ringlet::kernels::reduce next to memcpy.
//
//   ringlet-kernels-bench --benchmark_filter=Reduce
//
// bytes_per_second counts every array the kernel touches: reduce reads two arrays and writes
// one (3 x size), memcpy reads one and writes one (2 x size). The size argument is the bytes of
// one array, 4 KiB .. 64 MiB.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/reduce.h"
#include "ringlet/types.h"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

// Page-aligned and touched, so page faults stay out of the timed loop.
Buffer makeBuffer(size_t bytes, int fill) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  Buffer buffer(static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded)));
  if (buffer) std::memset(buffer.get(), fill, rounded);
  return buffer;
}

template <typename T>
void fillSmallIntegers(std::byte* data, size_t count, int offset) {
  T* out = reinterpret_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) out[i] = T(static_cast<float>((i + offset) % 7));
}

template <ringlet::DataType kType>
void BM_Reduce(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / ringlet::elementSize(kType);
  Buffer a = makeBuffer(bytes, 0), b = makeBuffer(bytes, 0), dst = makeBuffer(bytes, 0);
  if (!a || !b || !dst) {
    state.SkipWithError("allocation failed");
    return;
  }
  // Small integers: finite in every type, and no denormals to slow the kernel down.
  if constexpr (kType == ringlet::DataType::kFloat32) {
    fillSmallIntegers<float>(a.get(), count, 0);
    fillSmallIntegers<float>(b.get(), count, 3);
  } else if constexpr (kType == ringlet::DataType::kBFloat16) {
    fillSmallIntegers<ringlet::BFloat16>(a.get(), count, 0);
    fillSmallIntegers<ringlet::BFloat16>(b.get(), count, 3);
  } else {
    fillSmallIntegers<int32_t>(a.get(), count, 0);
    fillSmallIntegers<int32_t>(b.get(), count, 3);
  }
  for (auto _ : state) {
    ringlet::kernels::reduce(dst.get(), a.get(), b.get(), count, kType, ringlet::ReduceOp::kSum);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 *
                          static_cast<int64_t>(bytes));
  state.counters["arrays"] = 3;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src = makeBuffer(bytes, 1), dst = makeBuffer(bytes, 0);
  if (!src || !dst) {
    state.SkipWithError("allocation failed");
    return;
  }
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(bytes));
  state.counters["arrays"] = 2;
}

constexpr int64_t kMinBytes = 4 << 10;
constexpr int64_t kMaxBytes = 64 << 20;

}  // namespace

BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_Reduce<ringlet::DataType::kFloat32>)
    ->Name("BM_Reduce/float32/sum")
    ->RangeMultiplier(4)
    ->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_Reduce<ringlet::DataType::kBFloat16>)
    ->Name("BM_Reduce/bfloat16/sum")
    ->RangeMultiplier(4)
    ->Range(kMinBytes, kMaxBytes);
BENCHMARK(BM_Reduce<ringlet::DataType::kInt32>)
    ->Name("BM_Reduce/int32/sum")
    ->RangeMultiplier(4)
    ->Range(kMinBytes, kMaxBytes);

BENCHMARK_MAIN();
