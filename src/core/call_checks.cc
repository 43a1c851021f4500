#include "src/core/call_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "ringlet/error.h"

namespace ringlet::detail {

size_t checkedBytes(const char* op, int rank, size_t count, DataType type) {
  const int t = static_cast<int>(type);
  if (t < 0 || t >= kNumDataTypes) {
    throw InvalidArgument(fmt::format("{} on rank {}: unknown data type {} (valid: 0..{})", op,
                                      rank, t, kNumDataTypes - 1));
  }
  const size_t element = elementSize(type);
  if (count > SIZE_MAX / element) {
    throw InvalidArgument(fmt::format("{} on rank {}: count {} of {} overflows the byte size", op,
                                      rank, count, toString(type)));
  }
  return count * element;
}

size_t checkBuffers(const char* op, int rank, const void* send, const void* recv, size_t count,
                    DataType type) {
  const size_t bytes = checkedBytes(op, rank, count, type);
  if (count > 0 && send == nullptr) {
    throw InvalidArgument(
        fmt::format("{} on rank {}: send buffer is null but count is {}", op, rank, count));
  }
  if (count > 0 && recv == nullptr) {
    throw InvalidArgument(
        fmt::format("{} on rank {}: recv buffer is null but count is {}", op, rank, count));
  }
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  if (count > 0 && s != r && s < r + bytes && r < s + bytes) {
    throw InvalidArgument(fmt::format(
        "{} on rank {}: send [{:#x}, +{}) and recv [{:#x}, +{}) overlap without being equal; "
        "pass the same pointer for an in-place call",
        op, rank, s, bytes, r, bytes));
  }
  return bytes;
}

void checkRegions(const char* op, int rank, const char* smallName, const void* small,
                  size_t smallBytes, const char* largeName, const void* large, size_t largeBytes,
                  size_t inPlaceOffset) {
  if (smallBytes > 0 && small == nullptr) {
    throw InvalidArgument(fmt::format("{} on rank {}: {} buffer is null but holds {} bytes", op,
                                      rank, smallName, smallBytes));
  }
  if (largeBytes > 0 && large == nullptr) {
    throw InvalidArgument(fmt::format("{} on rank {}: {} buffer is null but holds {} bytes", op,
                                      rank, largeName, largeBytes));
  }
  const auto s = reinterpret_cast<uintptr_t>(small);
  const auto l = reinterpret_cast<uintptr_t>(large);
  if (smallBytes == 0 || largeBytes == 0 || s == l + inPlaceOffset) return;
  if (s < l + largeBytes && l < s + smallBytes) {
    throw InvalidArgument(fmt::format(
        "{} on rank {}: {} [{:#x}, +{}) overlaps {} [{:#x}, +{}) but is not this rank's block "
        "(in place, {} must be {} + {} bytes)",
        op, rank, smallName, s, smallBytes, largeName, l, largeBytes, smallName, largeName,
        inPlaceOffset));
  }
}

AllToAllvLayouts checkAllToAllvLayouts(const char* op, int rank, int size, const void* send,
                                       std::span<const size_t> sendCounts,
                                       std::span<const size_t> sendDispls, const void* recv,
                                       std::span<const size_t> recvCounts,
                                       std::span<const size_t> recvDispls, DataType type) {
  AllToAllvLayouts l;
  l.out = checkLayout(op, rank, size, "sendCounts", sendCounts, "sendDispls", sendDispls, type,
                      /*mayOverlap=*/true);
  l.in = checkLayout(op, rank, size, "recvCounts", recvCounts, "recvDispls", recvDispls, type);
  if (sendCounts[rank] != recvCounts[rank]) {
    throw InvalidArgument(fmt::format(
        "{} on rank {}: sendCounts[{}] = {} but recvCounts[{}] = {}; what a rank sends itself is "
        "what it receives from itself",
        op, rank, rank, sendCounts[rank], rank, recvCounts[rank]));
  }
  const size_t element = elementSize(type);
  const size_t sendBytes = l.out.extent * element;
  const size_t recvBytes = l.in.extent * element;
  const auto a = reinterpret_cast<uintptr_t>(send);
  const auto b = reinterpret_cast<uintptr_t>(recv);
  if (sendBytes > 0 && recvBytes > 0 && a < b + recvBytes && b < a + sendBytes) {
    bool same = send == recv;
    for (size_t q = 0; same && q < l.out.blocks.size(); ++q) {
      same = l.out.blocks[q].count == l.in.blocks[q].count &&
             (l.out.blocks[q].count == 0 || l.out.blocks[q].offset == l.in.blocks[q].offset);
    }
    if (!same) {
      throw InvalidArgument(fmt::format(
          "{} on rank {}: send [{}, +{}) and recv [{}, +{}) overlap; only in place may they: "
          "send == recv with identical layouts (sendCounts == recvCounts and the same "
          "displacements)",
          op, rank, send, sendBytes, recv, recvBytes));
    }
    l.inPlace = true;
  }
  return l;
}

BlockLayout checkLayout(const char* op, int rank, int size, const char* countsName,
                        std::span<const size_t> counts, const char* displsName,
                        std::span<const size_t> displs, DataType type, bool mayOverlap) {
  const size_t n = static_cast<size_t>(size);
  if (counts.size() != n) {
    throw InvalidArgument(fmt::format("{} on rank {}: {} has {} entries but the world has {} ranks",
                                      op, rank, countsName, counts.size(), size));
  }
  if (!displs.empty() && displs.size() != n) {
    throw InvalidArgument(fmt::format(
        "{} on rank {}: {} has {} entries but the world has {} ranks (or pass none: packed)", op,
        rank, displsName, displs.size(), size));
  }
  checkedBytes(op, rank, 0, type);  // a known data type
  BlockLayout layout;
  layout.blocks.resize(n);
  const size_t maxElements = SIZE_MAX / elementSize(type);
  for (size_t r = 0; r < n; ++r) {
    const size_t offset = displs.empty() ? layout.total : displs[r];
    if (counts[r] > maxElements - layout.total) {
      throw InvalidArgument(fmt::format(
          "{} on rank {}: {} sum to more than {} elements of {} (passed at {}[{}] = {}); the byte "
          "size overflows",
          op, rank, countsName, maxElements, toString(type), countsName, r, counts[r]));
    }
    if (counts[r] > maxElements - std::min(offset, maxElements)) {
      throw InvalidArgument(fmt::format(
          "{} on rank {}: {}[{}] = {} plus {}[{}] = {} ends past {} elements of {}; the byte "
          "size overflows",
          op, rank, displsName, r, offset, countsName, r, counts[r], maxElements, toString(type)));
    }
    layout.total += counts[r];
    // An empty block's displacement means nothing (and may point anywhere): it sits at 0.
    layout.blocks[r] = {counts[r] > 0 ? offset : 0, counts[r]};
    if (counts[r] > 0) layout.extent = std::max(layout.extent, offset + counts[r]);
  }
  if (mayOverlap || displs.empty()) return layout;  // packed blocks never overlap
  std::vector<size_t> order;
  for (size_t r = 0; r < n; ++r) {
    if (counts[r] > 0) order.push_back(r);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return layout.blocks[a].offset < layout.blocks[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const collectives::Piece& before = layout.blocks[order[i - 1]];
    const collectives::Piece& after = layout.blocks[order[i]];
    if (after.offset < before.offset + before.count) {
      throw InvalidArgument(fmt::format(
          "{} on rank {}: the blocks of ranks {} and {} overlap: elements [{}, {}) and [{}, {}) "
          "({} and {}); each rank's block needs its own place",
          op, rank, order[i - 1], order[i], before.offset, before.offset + before.count,
          after.offset, after.offset + after.count, displsName, countsName));
    }
  }
  return layout;
}

}  // namespace ringlet::detail
