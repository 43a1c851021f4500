#pragma once
// The distributed sampler (PyTorch's DistributedSampler): each epoch shuffles the dataset
// indices with seed + epoch, pads the list by repeating its start until it divides by the world
// size (or, with dropLast, cuts the tail), and gives rank r every world-th index from r. Every
// rank thus sees the same number of samples, and the shards of one epoch are disjoint apart from
// the padding (at most world - 1 repeated samples).
//
// Rank r's step s of batch b holds its samples [s*b, s*b + b); with world W, the union over ranks
// of step s is exactly the samples a single process with batch W*b takes at step s.

#include <cstdint>
#include <vector>

namespace trainer {

class DistributedSampler {
 public:
  // Throws InvalidArgument for size <= 0, world <= 0, rank outside [0, world), or a dataset
  // that dropLast leaves empty.
  DistributedSampler(int64_t datasetSize, int rank, int world, uint64_t seed, bool shuffle = true,
                     bool dropLast = false);
  int64_t datasetSize() const { return size_; }
  int64_t samplesPerRank() const { return perRank_; }            // per epoch
  int64_t padding() const { return perRank_ * world_ - size_; }  // < 0 with dropLast: dropped
  // Batches per epoch on every rank (the last may be partial).
  int64_t batchesPerEpoch(int64_t batch) const { return (perRank_ + batch - 1) / batch; }
  // This rank's indices for one epoch, in order.
  std::vector<int64_t> epochIndices(int64_t epoch) const;
  // This rank's `index`-th batch of `batch` samples in `epoch`.
  std::vector<int64_t> batchIndices(int64_t epoch, int64_t index, int64_t batch) const;

 private:
  int64_t size_, perRank_;
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_, dropLast_;
  mutable int64_t cachedEpoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

}  // namespace trainer
