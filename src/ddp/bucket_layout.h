#pragma once
// How gradients are grouped into buckets: a pure function of the registered slices and the
// caps, so every rank computes the same layout from the same counts and types.

#include <cstdint>
#include <string>
#include <vector>

#include "ringlet/ddp.h"

namespace ringlet::ddp::detail {

// Walks the slices from last to first, closing a bucket before the slice that would push it
// past its cap (the first bucket's cap is firstCap), or where the data type changes.
std::vector<BucketInfo> planBuckets(const std::vector<Slice>& slices, size_t firstCap, size_t cap);

// Lowest address of a bucket whose slices tile one contiguous range, else nullptr.
void* contiguousBase(const std::vector<Slice>& slices, const BucketInfo& bucket);

// A hash of what must agree across ranks (slice counts and types, bucket boundaries).
uint64_t layoutFingerprint(const std::vector<Slice>& slices,
                           const std::vector<BucketInfo>& buckets);
// "3 buckets: [5 4 3] 1048576 B float32, ..." for error messages.
std::string describeLayout(const std::vector<BucketInfo>& buckets);

}  // namespace ringlet::ddp::detail
