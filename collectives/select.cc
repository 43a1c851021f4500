#include "collectives/select.h"

#include <algorithm>

namespace ringlet::collectives {

AllreduceChoice chooseAllreduce(int rank, int size, size_t bytes, size_t smallBytes,
                                size_t inlineBytes) {
  if (size == 1) return {AllreduceAlgorithm::kLocalCopy};
  if (size == 2 && bytes <= inlineBytes) return {AllreduceAlgorithm::kInlineExchange};
  if (bytes > smallBytes) return {AllreduceAlgorithm::kRing};
  if (bytes <= inlineBytes) return {AllreduceAlgorithm::kHeaderDoubling};
  const bool powerOfTwo = (size & (size - 1)) == 0;
  return {AllreduceAlgorithm::kRecursiveDoubling, powerOfTwo && (rank ^ 1) == (rank + 1) % size};
}

BroadcastAlgorithm chooseBroadcast(int size, size_t bytes, size_t smallBytes) {
  if (size == 1) return BroadcastAlgorithm::kNone;
  return bytes <= smallBytes ? BroadcastAlgorithm::kTree : BroadcastAlgorithm::kChain;
}

size_t defaultSmallMessageBytes(int size, bool sharedMemory) {
  return (size == 2 || !sharedMemory) ? size_t{64} << 10 : size_t{16} << 10;
}

size_t sliceBytes(size_t segmentBytes, std::initializer_list<const transport::Link*> links) {
  size_t slice = segmentBytes > 0 ? segmentBytes : size_t{512} << 10;
  for (const transport::Link* link : links) slice = std::min(slice, link->maxMessageBytes());
  return std::max<size_t>(slice, 64);
}

}  // namespace ringlet::collectives
