#pragma once
// Argument checks shared by the collectives, before anything is sent: each names the call, the
// rank and the offending value (InvalidArgument).

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "collectives/chunking.h"
#include "ringlet/types.h"

namespace ringlet::detail {

// The data type is known and count * its size fits size_t; returns that byte size.
size_t checkedBytes(const char* op, int rank, size_t count, DataType type);

// `send` and `recv` of `count` elements each: non-null when count > 0, and either equal (in
// place) or disjoint. Returns the byte size.
size_t checkBuffers(const char* op, int rank, const void* send, const void* recv, size_t count,
                    DataType type);

// Buffers of different sizes (all-gather, reduce-scatter): `small` (smallBytes) must be disjoint
// from `large` (largeBytes) or sit exactly at `inPlaceOffset` bytes into it (the in-place form).
// `smallName`/`largeName` name them ("send", "recv").
void checkRegions(const char* op, int rank, const char* smallName, const void* small,
                  size_t smallBytes, const char* largeName, const void* large, size_t largeBytes,
                  size_t inPlaceOffset);

// One block per rank in one buffer (the v-forms): block r holds counts[r] elements at element
// displs[r], or packed at the prefix sums of counts when displs is empty.
struct BlockLayout {
  std::vector<collectives::Piece> blocks;  // by rank, in elements; empty ones at offset 0
  size_t total = 0;                        // elements in all blocks
  size_t extent = 0;  // elements from the buffer's start to the end of the last non-empty block
};

// Checks a v-form's layout: `counts` (named `countsName`) and `displs` (`displsName`; may be
// empty) hold one entry per rank of `size`, sums and ends fit in bytes of `type`, and, unless
// `mayOverlap` (blocks that are only read), no two non-empty blocks overlap.
BlockLayout checkLayout(const char* op, int rank, int size, const char* countsName,
                        std::span<const size_t> counts, const char* displsName,
                        std::span<const size_t> displs, DataType type, bool mayOverlap = false);

// All-to-all-v's layouts, checked (`op` names the call: "alltoallv", "cuda alltoallv"): both
// layouts (send's blocks may overlap, they are only read), this rank's block to itself the same
// size both ways, and send and recv disjoint, or the same buffer with identical layouts (in place).
struct AllToAllvLayouts {
  BlockLayout out;  // send's blocks, by destination
  BlockLayout in;   // recv's blocks, by source
  bool inPlace = false;
};
AllToAllvLayouts checkAllToAllvLayouts(const char* op, int rank, int size, const void* send,
                                       std::span<const size_t> sendCounts,
                                       std::span<const size_t> sendDispls, const void* recv,
                                       std::span<const size_t> recvCounts,
                                       std::span<const size_t> recvDispls, DataType type);

// One rank's copy of its own block (N = 1): nothing when it is already in place.
inline void copyBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

// Elements before block q when the blocks are packed in rank order (the prefix sum of counts).
inline size_t packedStart(std::span<const collectives::Piece> blocks, int q) {
  size_t start = 0;
  for (int u = 0; u < q; ++u) start += blocks[u].count;
  return start;
}

}  // namespace ringlet::detail
