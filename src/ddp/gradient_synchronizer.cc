// The reducer: markReady() counts down each bucket's gradients and launches buckets strictly in
// index order; finish() zeroes what was never produced, launches the rest and waits.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ringlet/ddp.h"
#include "ringlet/error.h"
#include "src/ddp/bucket_layout.h"

namespace ringlet::ddp {

using Clock = std::chrono::steady_clock;

GradientSynchronizer::GradientSynchronizer(Communicator& comm, std::vector<Slice> grads,
                                           SynchronizerOptions options)
    : comm_(comm), grads_(std::move(grads)), options_(options) {
  if (options_.bucketCapBytes == 0 || options_.firstBucketCapBytes == 0) {
    throw InvalidArgument(fmt::format(
        "GradientSynchronizer: bucket caps must be > 0 (bucketCapBytes {}, firstBucketCapBytes "
        "{}) on rank {}",
        options_.bucketCapBytes, options_.firstBucketCapBytes, comm_.rank()));
  }
  for (size_t i = 0; i < grads_.size(); i++) {
    const Slice& s = grads_[i];
    if (s.data == nullptr && s.count > 0) {
      throw InvalidArgument(fmt::format(
          "GradientSynchronizer: gradient {} has a null pointer and count {} on rank {}", i,
          s.count, comm_.rank()));
    }
    if (!isFloatingPoint(s.type)) {
      throw InvalidArgument(fmt::format(
          "GradientSynchronizer: gradient {} has type {}; gradients are averaged, so they must "
          "be floating point",
          i, toString(s.type)));
    }
  }
  buckets_ = detail::planBuckets(grads_, options_.firstBucketCapBytes, options_.bucketCapBytes);
  bucketOf_.assign(grads_.size(), 0);
  staging_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); b++) {
    for (size_t i : buckets_[b].slices) bucketOf_[i] = b;
    if (!buckets_[b].inPlace) staging_[b].resize(buckets_[b].bytes);
  }
  readyThisStep_.assign(grads_.size(), 0);
  producedSinceSync_.assign(grads_.size(), 0);
  works_.resize(buckets_.size());
  completed_.assign(buckets_.size(), 0);
  timings_.resize(buckets_.size());
  pendingInBucket_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); b++) pendingInBucket_[b] = buckets_[b].slices.size();
  checkLayoutAcrossRanks();
}

GradientSynchronizer::~GradientSynchronizer() {
  for (size_t b = 0; b < nextToLaunch_; b++) {
    try {
      works_[b].wait();
    } catch (...) {  // the step was abandoned; its error was (or will never be) reported
    }
  }
}

void GradientSynchronizer::checkLayoutAcrossRanks() {
  // max(x) == min(x) over ranks iff every rank has the same fingerprint; 62 bits so -x fits.
  const int64_t x = static_cast<int64_t>(detail::layoutFingerprint(grads_, buckets_) >> 2);
  int64_t both[2] = {x, -x};
  comm_.allreduce(both, 2, DataType::kInt64, ReduceOp::kMax);
  if (both[0] != -both[1]) {
    throw MismatchError(fmt::format(
        "GradientSynchronizer: ranks registered different gradients (layout fingerprints range "
        "over [{}, {}]); rank {} has {} gradients in {}",
        -both[1], both[0], comm_.rank(), grads_.size(), detail::describeLayout(buckets_)));
  }
}

void GradientSynchronizer::markReady(size_t index) {
  if (index >= grads_.size()) {
    throw InvalidArgument(
        fmt::format("GradientSynchronizer::markReady: index {} out of range (have {} gradients)",
                    index, grads_.size()));
  }
  producedSinceSync_[index] = 1;
  if (!syncEnabled_) return;
  if (readyThisStep_[index]) {
    throw InvalidArgument(fmt::format(
        "GradientSynchronizer::markReady: gradient {} marked ready twice in one step (call "
        "finish() after each backward pass)",
        index));
  }
  readyThisStep_[index] = 1;
  pendingInBucket_[bucketOf_[index]]--;
  launchReadyBuckets();
  pollCompletions();
}

void GradientSynchronizer::launchReadyBuckets() {
  while (nextToLaunch_ < buckets_.size() && pendingInBucket_[nextToLaunch_] == 0) {
    launch(nextToLaunch_++);
  }
}

void GradientSynchronizer::launch(size_t b) {
  const BucketInfo& bucket = buckets_[b];
  const size_t count = bucket.bytes / elementSize(bucket.type);
  timings_[b].launched = Clock::now();
  if (bucket.inPlace) {
    void* base = detail::contiguousBase(grads_, bucket);
    works_[b] = comm_.allreduceAsync(base, base, count, bucket.type, ReduceOp::kAvg);
    return;
  }
  std::byte* out = staging_[b].data();
  for (size_t i : bucket.slices) {
    const size_t bytes = grads_[i].count * elementSize(grads_[i].type);
    std::memcpy(out, grads_[i].data, bytes);
    out += bytes;
  }
  works_[b] = comm_.allreduceAsync(staging_[b].data(), staging_[b].data(), count, bucket.type,
                                   ReduceOp::kAvg);
}

void GradientSynchronizer::pollCompletions() {
  for (size_t b = 0; b < nextToLaunch_; b++) {
    if (!completed_[b] && works_[b].test()) {
      completed_[b] = 1;
      timings_[b].completed = Clock::now();
    }
  }
}

void GradientSynchronizer::finish() {
  if (!syncEnabled_) return;
  for (size_t i = 0; i < grads_.size(); i++) {
    if (readyThisStep_[i]) continue;
    if (!producedSinceSync_[i]) {
      std::memset(grads_[i].data, 0, grads_[i].count * elementSize(grads_[i].type));
    }
    readyThisStep_[i] = 1;
    pendingInBucket_[bucketOf_[i]]--;
  }
  launchReadyBuckets();
  std::exception_ptr firstError;
  for (size_t b = 0; b < buckets_.size(); b++) {
    try {
      works_[b].wait();
    } catch (...) {
      if (!firstError) firstError = std::current_exception();
    }
    if (!completed_[b]) timings_[b].completed = Clock::now();
  }
  // Reset before rethrowing so that the destructor does not wait on finished work again.
  nextToLaunch_ = 0;
  std::fill(readyThisStep_.begin(), readyThisStep_.end(), 0);
  std::fill(producedSinceSync_.begin(), producedSinceSync_.end(), 0);
  std::fill(completed_.begin(), completed_.end(), 0);
  for (size_t b = 0; b < buckets_.size(); b++) pendingInBucket_[b] = buckets_[b].slices.size();
  if (firstError) std::rethrow_exception(firstError);
  for (size_t b = 0; b < buckets_.size(); b++) {
    if (buckets_[b].inPlace) continue;
    const std::byte* in = staging_[b].data();
    for (size_t i : buckets_[b].slices) {
      const size_t bytes = grads_[i].count * elementSize(grads_[i].type);
      std::memcpy(grads_[i].data, in, bytes);
      in += bytes;
    }
  }
}

void GradientSynchronizer::setSyncEnabled(bool enabled) {
  if (!enabled && nextToLaunch_ > 0) {
    throw InvalidArgument(
        "GradientSynchronizer::setSyncEnabled(false) in the middle of a synchronized step "
        "(buckets already launched; call finish() first)");
  }
  syncEnabled_ = enabled;
}

void GradientSynchronizer::broadcastParameters(Communicator& comm, const std::vector<Slice>& params,
                                               int root) {
  // Adjacent slices of one type go out as one broadcast (a parameter arena is one call).
  size_t i = 0;
  while (i < params.size()) {
    std::byte* base = static_cast<std::byte*>(params[i].data);
    const DataType type = params[i].type;
    size_t count = params[i].count;
    size_t j = i + 1;
    while (j < params.size() && params[j].type == type &&
           static_cast<std::byte*>(params[j].data) == base + count * elementSize(type)) {
      count += params[j].count;
      j++;
    }
    if (count > 0) comm.broadcast(base, count, type, root);
    i = j;
  }
}

}  // namespace ringlet::ddp
