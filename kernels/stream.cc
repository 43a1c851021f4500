// Writes that bypass the caches. A large all-reduce writes its output once and does not read it
// again soon; ordinary stores first read every destination line (read-for-ownership), so the
// output costs twice its size in memory traffic. Non-temporal stores write it once.
#include <cstdint>
#include <cstring>

#include "kernels/reduce.h"
#include "ringlet/types.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ringlet::kernels {

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
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), x3);
  }
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

void copy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  constexpr size_t kLoopFrom = 256;  // below: memcpy's own small-size paths
  const auto apart = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src);
  if (bytes < kLoopFrom || apart % 64 == 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), x0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), x1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), x2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), x3);
  }
  std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void reduceStreaming(void* stream, void* copy, const void* a, const void* b, size_t count,
                     DataType type, ReduceOp op, int divisor) {
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
    if (slot != nullptr) std::memcpy(slot + offset, tile, n * element);
    streamCopy(out + offset, tile, n * element);
  }
}

}  // namespace ringlet::kernels
