#pragma once
// Element-wise reduction kernels used by every collective.
//
// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b exactly (not partially).
// 16-bit floats widen to float32, reduce, and round to nearest even once per call.
// kAvg reduces like kSum: the collective divides once at the end (see finishAverage).
// Vectorised; the x86-64 build picks AVX-512 / AVX2 / SSE code at run time.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ringlet/types.h"

namespace ringlet::kernels {

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

// Divides every element by `divisor` in place (the last step of kAvg). Floating types only.
void finishAverage(void* data, size_t count, DataType type, int divisor);

// For results that will not be read again soon (large collectives): the same as reduce() (and
// finishAverage when op is kAvg and divisor > 1), but writes the result both to `stream`, with
// non-temporal stores that bypass the caches (no read-for-ownership of the destination), and,
// if `copy` is not null, to `copy` with ordinary stores (a transport slot the peer reads next),
// or non-temporal ones too when `streamCopyToo` (where the slot's link writes so:
// Link::streamsIntoSendBuffer).
void reduceStreaming(void* stream, void* copy, const void* a, const void* b, size_t count,
                     DataType type, ReduceOp op, int divisor, bool streamCopyToo = false);

// memcpy with non-temporal stores into `dst` (x86-64; a plain memcpy elsewhere).
void streamCopy(void* dst, const void* src, size_t bytes);

// memcpy for the data path (a caller's buffer to or from a transport slot): memcpy where dst and
// src lie alike within 64 bytes, else a loop of 16-byte loads and stores (x86-64; memcpy
// elsewhere). glibc's memcpy copies from 2 KiB up to its non-temporal threshold with `rep movsb`,
// which on an AMD EPYC (Zen) VM ran at 2.2-2.9 GB/s for some offsets of dst against src (8, 16,
// 1 bytes; 0, 32, 48 and -16 at 36-50) where this loop ran at 27-45: a caller's std::vector of
// 64 KiB or more starts 16 bytes into its pages, a slot at a page
// (bench/results/copy-alignment-2026-12-01/).
void copyLoop(void* dst, const void* src, size_t bytes);  // the loop alone
inline void copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kLoopFrom = 256;  // below: memcpy's own small-size paths (inlined)
  const auto apart = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src);
  if (bytes < kLoopFrom || apart % 64 == 0) {
    std::memcpy(dst, src, bytes);
  } else {
    copyLoop(dst, src, bytes);
  }
}

// Collectives whose buffers are at least this large stream their final results.
inline constexpr size_t kStreamingBytes = size_t{8} << 20;

// Throws InvalidArgument if `op` is not defined on `type` (kAvg on integers).
void checkReducible(DataType type, ReduceOp op);

}  // namespace ringlet::kernels
