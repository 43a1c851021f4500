#include "src/core/call_checks.h"

#include <fmt/format.h>

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

}  // namespace ringlet::detail
