// Writes that bypass the caches. A large all-reduce writes its output once and does not read it
// again soon; ordinary stores first read every destination line (read-for-ownership), so the
// output costs twice its size in memory traffic. Non-temporal stores write it once.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>

#include "kernels/reduce.h"
#include "kernels/turns.h"
#include "ringlet/types.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ringlet::kernels {

#if defined(__x86_64__)
namespace {
// Copies 64 bytes at a time, 16-byte loads, stores streamed (non-temporal, into a 16-byte aligned
// `d`) or ordinary; returns the bytes copied (a multiple of 64).
template <bool kStream>
size_t copy64s(std::byte* d, const std::byte* s, size_t bytes) {
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m128i x[4];
    for (int k = 0; k < 4; ++k)
      x[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16 * k));
    for (int k = 0; k < 4; ++k) {
      if constexpr (kStream) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16 * k), x[k]);
      } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16 * k), x[k]);
      }
    }
  }
  return i;
}
}  // namespace
#endif

void streamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  // Head: ordinary copy up to a 16-byte aligned destination.
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = copy64s<true>(d, s, bytes);
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();  // order the streamed stores before whatever publishes them
#else
  std::memcpy(dst, src, bytes);
#endif
}

void copyLoop(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  const size_t i = copy64s<false>(d, s, bytes);
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

namespace {

// Seconds `copies` take, run once.
template <class Copies>
double timed(Copies&& copies) {
  const auto start = std::chrono::steady_clock::now();
  copies();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ApartCopy measureApartCopy() {
  constexpr size_t kBytes = ApartCopy::kBytes;
  constexpr size_t kOff = 16;
  constexpr size_t kPage = 4096;
  constexpr size_t kSpan = kBytes + kPage;
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  const std::unique_ptr<std::byte, Free> memory(
      static_cast<std::byte*>(std::aligned_alloc(kPage, 2 * kSpan)));
  ApartCopy result;
  if (!memory) return result;  // not measured: memcpy
  std::byte* a = memory.get();
  std::byte* b = a + kSpan;
  std::memset(a, 1, 2 * kSpan);
  // Twice each way: dst 16 bytes on (a slot into a std::vector), then src (the other way).
  auto run = [&](void (*copy)(void*, const void*, size_t)) {
    return timed([&] {
      for (int i = 0; i < 2; ++i) {
        copy(b + kOff, a, kBytes);
        asm volatile("" : : "r"(b) : "memory");
        copy(a, b + kOff, kBytes);
        asm volatile("" : : "r"(a) : "memory");
      }
    });
  };
  auto plain = [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); };
  run(plain);  // the lines into the cache
  run(&copyLoop);
  std::tie(result.memcpySeconds, result.loopSeconds) = fastestInTurns(
      ApartCopy::kRounds, [&] { return run(plain); }, [&] { return run(&copyLoop); });
  result.loop = ApartCopy::loopPays(result.memcpySeconds, result.loopSeconds);
  return result;
}

const ApartCopy& apartCopy() {
  static const ApartCopy measured = measureApartCopy();
  return measured;
}

void copyApart(void* dst, const void* src, size_t bytes) {
  if (apartCopy().loop) {
    copyLoop(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

void reduceStreaming(void* stream, void* copy, const void* a, const void* b, size_t count,
                     DataType type, ReduceOp op, int divisor, bool streamCopyToo) {
  // Reduce a cache-sized tile at a time into L1, then write it where it goes.
  constexpr size_t kTileBytes = 8 << 10;
  alignas(64) std::byte tile[kTileBytes];
  const size_t element = elementSize(type);
  const size_t perTile = kTileBytes / element;
  auto* out = static_cast<std::byte*>(stream);
  auto* slot = static_cast<std::byte*>(copy);
  auto* x = static_cast<const std::byte*>(a);
  auto* y = static_cast<const std::byte*>(b);
  for (size_t done = 0; done < count; done += perTile) {
    const size_t n = std::min(perTile, count - done);
    const size_t offset = done * element;
    reduce(tile, x + offset, y + offset, n, type, op);
    if (op == ReduceOp::kAvg && divisor > 1) finishAverage(tile, n, type, divisor);
    if (slot != nullptr) {
      if (streamCopyToo) {
        streamCopy(slot + offset, tile, n * element);
      } else {
        std::memcpy(slot + offset, tile, n * element);
      }
    }
    streamCopy(out + offset, tile, n * element);
  }
}

}  // namespace ringlet::kernels
