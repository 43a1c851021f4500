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
// src lie alike within 64 bytes or the copy is short, else copyApart().
void copyApart(void* dst, const void* src, size_t bytes);
inline void copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kApartFrom = 256;  // below: memcpy's own small-size paths (inlined)
  const auto apart = reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src);
  if (bytes < kApartFrom || apart % 64 == 0) {
    std::memcpy(dst, src, bytes);
  } else {
    copyApart(dst, src, bytes);
  }
}

// Where dst and src lie differently within 64 bytes (a caller's std::vector of 64 KiB or more
// starts 16 bytes into its pages, a slot at a page), which of memcpy and a loop is faster depends
// on the CPU. glibc's memcpy copies from a few KiB up to its non-temporal threshold with `rep
// movsb`: on an AMD EPYC (Zen, AVX2) VM that ran at 2.2-2.9 GB/s with dst 8 or 16 bytes off src,
// where a loop of 16-byte loads and stores (copyLoop) ran at 27-45
// (bench/results/copy-alignment-2026-12-01/); on an AMD EPYC with AVX-512, memcpy ran those
// offsets at 63-102 GB/s and the loop at 46-56, and two-rank collectives of 256 KiB-1 MiB on
// std::vectors took 2-4x their time with the loop (bench/results/copy-apart-2026-12-01/).
// So each process times both once (apartCopy(), at its first such copy or at
// Communicator::create) and copyApart() runs the faster.
void copyLoop(void* dst, const void* src, size_t bytes);  // the loop alone
struct ApartCopy {
  // The fastest of kRounds: kBytes copied twice each way, dst 16 bytes past src's offset within
  // 64 and src 16 past dst's, in the cache.
  double memcpySeconds = 0;
  double loopSeconds = 0;
  bool loop = false;  // copyApart() runs copyLoop
  static constexpr size_t kBytes = size_t{16} << 10;
  static constexpr int kRounds = 5;
  // The loop where it copied faster than memcpy.
  static bool loopPays(double memcpySeconds, double loopSeconds) {
    return loopSeconds > 0 && loopSeconds < memcpySeconds;
  }
};
// Times both now: 13-240 us on the AVX-512 EPYC (a process's first call the dearest, its pages
// new), more where memcpy is slow.
ApartCopy measureApartCopy();
const ApartCopy& apartCopy();  // measureApartCopy() once per process, at the first call

// Collectives whose buffers are at least this large stream their final results.
inline constexpr size_t kStreamingBytes = size_t{8} << 20;

// Throws InvalidArgument if `op` is not defined on `type` (kAvg on integers).
void checkReducible(DataType type, ReduceOp op);

}  // namespace ringlet::kernels
