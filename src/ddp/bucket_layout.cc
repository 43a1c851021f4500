#include "src/ddp/bucket_layout.h"

#include <fmt/format.h>

#include <algorithm>

namespace ringlet::ddp::detail {

std::vector<BucketInfo> planBuckets(const std::vector<Slice>& slices, size_t firstCap, size_t cap) {
  std::vector<BucketInfo> buckets;
  BucketInfo current;
  auto close = [&] {
    if (!current.slices.empty()) buckets.push_back(std::move(current));
    current = BucketInfo{};
  };
  for (size_t k = slices.size(); k-- > 0;) {
    const Slice& s = slices[k];
    const size_t bytes = s.count * elementSize(s.type);
    const size_t limit = buckets.empty() ? firstCap : cap;
    if (!current.slices.empty() && (current.type != s.type || current.bytes + bytes > limit)) {
      close();
    }
    if (current.slices.empty()) current.type = s.type;
    current.slices.push_back(k);
    current.bytes += bytes;
  }
  close();
  for (BucketInfo& b : buckets) b.inPlace = contiguousBase(slices, b) != nullptr;
  return buckets;
}

void* contiguousBase(const std::vector<Slice>& slices, const BucketInfo& bucket) {
  std::vector<const Slice*> byAddress;
  for (size_t i : bucket.slices) byAddress.push_back(&slices[i]);
  std::sort(byAddress.begin(), byAddress.end(),
            [](const Slice* a, const Slice* b) { return a->data < b->data; });
  for (size_t j = 1; j < byAddress.size(); j++) {
    const Slice& prev = *byAddress[j - 1];
    auto* end = static_cast<std::byte*>(prev.data) + prev.count * elementSize(prev.type);
    if (end != byAddress[j]->data) return nullptr;
  }
  return byAddress.empty() ? nullptr : byAddress.front()->data;
}

uint64_t layoutFingerprint(const std::vector<Slice>& slices,
                           const std::vector<BucketInfo>& buckets) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; i++) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  };
  mix(slices.size());
  for (const Slice& s : slices) {
    mix(s.count);
    mix(static_cast<uint64_t>(s.type));
  }
  mix(buckets.size());
  for (const BucketInfo& b : buckets) {
    mix(b.slices.size());
    mix(b.bytes);
  }
  return h;
}

std::string describeLayout(const std::vector<BucketInfo>& buckets) {
  std::string out = fmt::format("{} buckets:", buckets.size());
  for (size_t b = 0; b < buckets.size() && b < 8; b++) {
    out += fmt::format(" [{} gradients, {} B {}]", buckets[b].slices.size(), buckets[b].bytes,
                       toString(buckets[b].type));
  }
  if (buckets.size() > 8) out += " ...";
  return out;
}

}  // namespace ringlet::ddp::detail
