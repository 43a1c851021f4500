// The reducer: markReady() counts down each bucket's gradients and launches buckets strictly in
// index order; finish() zeroes what was never produced, launches the rest and waits.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "ringlet/ddp.h"
#include "ringlet/error.h"
#include "src/ddp/bucket_layout.h"

namespace ringlet::ddp {

using Clock = std::chrono::steady_clock;

namespace {

// out[k] = bfloat16(scale * g[k]), rounded to nearest even (NaN kept quiet); branch-free so the
// loop vectorises.
void roundToBFloat16(const float* g, float scale, size_t n, uint16_t* out) {
  for (size_t k = 0; k < n; k++) {
    const uint32_t f = std::bit_cast<uint32_t>(g[k] * scale);
    const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    const bool nan = (f & 0x7fffffffu) > 0x7f800000u;
    out[k] = static_cast<uint16_t>(nan ? ((f >> 16) | 0x40u) : rounded);
  }
}

}  // namespace

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
  const DataType wire = options_.wireType;
  const bool compress = wire != DataType::kFloat32;
  if (compress && wire != DataType::kBFloat16 && wire != DataType::kFloat16) {
    throw InvalidArgument(fmt::format(
        "GradientSynchronizer: wireType {} is not float32, bfloat16 or float16", toString(wire)));
  }
  for (size_t i = 0; compress && i < grads_.size(); i++) {
    if (grads_[i].type != DataType::kFloat32) {
      throw InvalidArgument(fmt::format(
          "GradientSynchronizer: wireType {} rounds float32 gradients; gradient {} is {}",
          toString(wire), i, toString(grads_[i].type)));
    }
  }
  buckets_ = detail::planBuckets(grads_, options_.firstBucketCapBytes, options_.bucketCapBytes);
  bucketOf_.assign(grads_.size(), 0);
  staging_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); b++) {
    BucketInfo& bucket = buckets_[b];
    for (size_t i : bucket.slices) bucketOf_[i] = b;
    bucket.wire = compress ? wire : bucket.type;
    if (compress) bucket.inPlace = false;
    const size_t count = bucket.bytes / elementSize(bucket.type);
    if (!bucket.inPlace) staging_[b].resize(count * elementSize(bucket.wire));
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
  const uint64_t wire = static_cast<uint64_t>(options_.wireType) * 0x9e3779b97f4a7c15ULL;
  const int64_t x = static_cast<int64_t>((detail::layoutFingerprint(grads_, buckets_) ^ wire) >> 2);
  int64_t both[2] = {x, -x};
  comm_.allreduce(both, 2, DataType::kInt64, ReduceOp::kMax);
  if (both[0] != -both[1]) {
    throw MismatchError(fmt::format(
        "GradientSynchronizer: ranks registered different gradients or wire types (layout "
        "fingerprints range over [{}, {}]); rank {} has {} gradients in {}, wire type {}",
        -both[1], both[0], comm_.rank(), grads_.size(), detail::describeLayout(buckets_),
        toString(options_.wireType)));
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
  if (bucket.wire != bucket.type) {
    // Divided by the ranks before rounding, then summed: the sum stays in range.
    const float scale = 1.0f / static_cast<float>(comm_.size());
    for (size_t i : bucket.slices) {
      const float* g = static_cast<const float*>(grads_[i].data);
      const size_t n = grads_[i].count;
      if (bucket.wire == DataType::kBFloat16) {
        roundToBFloat16(g, scale, n, reinterpret_cast<uint16_t*>(out));
      } else {
        auto* h = reinterpret_cast<Float16*>(out);
        for (size_t k = 0; k < n; k++) h[k] = Float16(g[k] * scale);
      }
      out += n * elementSize(bucket.wire);
    }
    works_[b] = comm_.allreduceAsync(staging_[b].data(), staging_[b].data(), count, bucket.wire,
                                     ReduceOp::kSum);
    return;
  }
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
    if (buckets_[b].wire != buckets_[b].type) {
      for (size_t i : buckets_[b].slices) {
        float* g = static_cast<float*>(grads_[i].data);
        const size_t n = grads_[i].count;
        if (buckets_[b].wire == DataType::kBFloat16) {
          const auto* h = reinterpret_cast<const uint16_t*>(in);
          for (size_t k = 0; k < n; k++) g[k] = std::bit_cast<float>(uint32_t(h[k]) << 16);
        } else {
          const auto* h = reinterpret_cast<const Float16*>(in);
          for (size_t k = 0; k < n; k++) g[k] = static_cast<float>(h[k]);
        }
        in += n * elementSize(buckets_[b].wire);
      }
      continue;
    }
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
