#include "sampler.h"

#include <fmt/format.h>

#include <numeric>

#include "ringlet/error.h"
#include "rng.h"

namespace trainer {

DistributedSampler::DistributedSampler(int64_t datasetSize, int rank, int world, uint64_t seed,
                                       bool shuffle, bool dropLast)
    : size_(datasetSize),
      rank_(rank),
      world_(world),
      seed_(seed),
      shuffle_(shuffle),
      dropLast_(dropLast) {
  if (datasetSize <= 0 || world <= 0 || rank < 0 || rank >= world) {
    throw ringlet::InvalidArgument(fmt::format(
        "DistributedSampler: need dataset size > 0 and 0 <= rank < world (got size {}, rank {}, "
        "world {})",
        datasetSize, rank, world));
  }
  perRank_ = dropLast ? size_ / world : (size_ + world - 1) / world;
  if (perRank_ == 0) {
    throw ringlet::InvalidArgument(
        fmt::format("DistributedSampler: drop-last leaves no samples ({} samples over {} ranks)",
                    size_, world));
  }
}

std::vector<int64_t> DistributedSampler::epochIndices(int64_t epoch) const {
  if (epoch == cachedEpoch_) return cached_;
  std::vector<int64_t> all(size_);
  std::iota(all.begin(), all.end(), 0);
  if (shuffle_) {
    Rng rng(seed_ + static_cast<uint64_t>(epoch));  // Fisher-Yates
    for (int64_t i = size_ - 1; i > 0; i--) {
      std::swap(all[i], all[static_cast<int64_t>(rng.below(uint64_t(i) + 1))]);
    }
  }
  const int64_t total = perRank_ * world_;
  for (int64_t i = size_; i < total; i++) all.push_back(all[i - size_]);  // pad from the start
  std::vector<int64_t> mine;
  mine.reserve(perRank_);
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(all[i]);
  cachedEpoch_ = epoch;
  cached_ = mine;
  return mine;
}

std::vector<int64_t> DistributedSampler::batchIndices(int64_t epoch, int64_t index,
                                                      int64_t batch) const {
  std::vector<int64_t> mine = epochIndices(epoch);
  const int64_t begin = std::min<int64_t>(index * batch, perRank_);
  const int64_t end = std::min<int64_t>(begin + batch, perRank_);
  return {mine.begin() + begin, mine.begin() + end};
}

}  // namespace trainer
