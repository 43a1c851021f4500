#pragma once
// Data-parallel gradient synchronization (what PyTorch's DistributedDataParallel does around
// backward), for any framework that keeps its gradients in host memory.
//
//   ringlet::ddp::GradientSynchronizer sync(comm, gradSlices);   // collective
//   sync.broadcastParameters(paramSlices);                         // everyone starts from rank 0
//   for (...) {
//     forward();
//     backward([&](size_t i) { sync.markReady(i); });  // as each gradient becomes final
//     sync.finish();                                   // every gradient is now the rank average
//     optimizerStep();
//   }
//
// Buckets. Gradients are grouped into buckets in reverse registration order (backward produces
// the last layers' gradients first): the first bucket holds up to firstBucketCapBytes, the
// others up to bucketCapBytes (a bucket closes before the gradient that would push it past its
// cap; a gradient larger than the cap gets a bucket of its own). A bucket also closes where the
// data type changes. When every gradient of a bucket has been marked ready, and every earlier
// bucket has been launched, its all-reduce (ReduceOp::kAvg) is started asynchronously, so that
// communication overlaps the rest of backward. Buckets are launched strictly in index order on
// every rank, so ranks whose gradients become ready in different orders still issue the same
// sequence of collectives. A bucket whose gradients are adjacent in memory is reduced in place;
// otherwise it is copied into a staging buffer and back.
//
// Layout. The bucket layout depends only on the registered counts, types and the caps, so it
// is identical on all ranks by construction; the constructor checks this once (a fingerprint
// all-reduce) and throws MismatchError naming the local layout when ranks disagree.
//
// Gradients that got none. finish() treats a gradient that was not marked ready since the last
// synchronization as zero: it zeroes that slice, then reduces its bucket. A rank that skips a
// parameter therefore never makes the others wait, and contributes nothing for it.
//
// Accumulation. With setSyncEnabled(false) (or inside a NoSyncScope), markReady() only records
// that the gradient was produced and finish() does nothing: gradients keep accumulating in the
// caller's buffers. The first finish() with sync enabled reduces the accumulated sums. The
// caller scales for the number of micro-steps (e.g. divides its loss by k).
//
// Threads and ownership. Not thread-safe: call markReady/finish from the thread that issues the
// communicator's other calls. The gradient memory belongs to the caller and must stay valid for
// the synchronizer's lifetime; between the first markReady() of a step and finish() the
// synchronizer may be writing into it. The communicator must outlive the synchronizer.

#include <chrono>
#include <cstddef>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/types.h"

namespace ringlet::ddp {

// A span of `count` elements of `type` at `data` (a gradient, or a parameter to broadcast).
struct Slice {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
};

struct SynchronizerOptions {
  size_t bucketCapBytes = size_t(25) << 20;      // PyTorch's bucket_cap_mb = 25
  size_t firstBucketCapBytes = size_t(1) << 20;  // the first (last layers') bucket launches early
  // The type gradients travel in. kFloat32 (default): their own type. kBFloat16 or kFloat16:
  // float32 gradients are divided by the ranks and rounded to 16 bits into the bucket, summed
  // as such, and widened back (PyTorch's bf16_compress_hook / fp16_compress_hook): half the
  // bytes on the wire, gradients good to ~3 significant digits (bf16) or ~3.3 within fp16's
  // range (dividing first keeps the sum of N in range when each gradient is).
  DataType wireType = DataType::kFloat32;
};

// One bucket, for tools and tests.
struct BucketInfo {
  std::vector<size_t> slices;  // gradient indices, in the order they are expected ready
  size_t bytes = 0;
  DataType type = DataType::kFloat32;
  bool inPlace = false;                // adjacent in memory: reduced without a staging copy
  DataType wire = DataType::kFloat32;  // the type all-reduced (type, or the 16-bit wireType)
};

// When each bucket's all-reduce was launched and when the synchronizer first saw it complete
// (observed in markReady or finish, so an upper bound on the true completion time).
struct BucketTiming {
  std::chrono::steady_clock::time_point launched;
  std::chrono::steady_clock::time_point completed;
};

class GradientSynchronizer {
 public:
  // Collective: every rank constructs it with the same counts and types, in the same order.
  // Throws InvalidArgument for a null slice, a non-floating-point type or a zero cap, and
  // MismatchError when the bucket layouts differ between ranks.
  GradientSynchronizer(Communicator& comm, std::vector<Slice> grads,
                       SynchronizerOptions options = {});
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;
  // Waits (bounded by the communicator's timeout) for buckets still in flight; never throws.
  ~GradientSynchronizer();

  // Gradient `index` is final for this backward pass. May launch one or more buckets.
  // Throws InvalidArgument for an index out of range or marked twice in one step.
  void markReady(size_t index);
  // Launches what is left (zeroing gradients not marked, see above), waits for every bucket and
  // leaves the rank average in each gradient. Rethrows the first communication error. Blocks.
  void finish();

  // false: markReady only records, finish() does not communicate (gradient accumulation).
  void setSyncEnabled(bool enabled);
  bool syncEnabled() const { return syncEnabled_; }

  // Collective: every rank ends with root's values in every slice (blocking, in order).
  static void broadcastParameters(Communicator& comm, const std::vector<Slice>& params,
                                  int root = 0);

  const std::vector<BucketInfo>& buckets() const { return buckets_; }
  // Timings of the last synchronized step (one entry per bucket).
  const std::vector<BucketTiming>& lastTimings() const { return timings_; }

 private:
  void launchReadyBuckets();
  void launch(size_t bucket);
  void pollCompletions();
  void checkLayoutAcrossRanks();

  Communicator& comm_;
  std::vector<Slice> grads_;
  SynchronizerOptions options_;
  std::vector<BucketInfo> buckets_;
  std::vector<size_t> bucketOf_;  // gradient index -> bucket
  std::vector<std::vector<std::byte>> staging_;
  std::vector<size_t> pendingInBucket_;  // gradients still not ready, per bucket
  std::vector<char> readyThisStep_;      // marked since the last finish()
  std::vector<char> producedSinceSync_;  // marked since the last synchronized finish()
  std::vector<Work> works_;
  std::vector<char> completed_;
  std::vector<BucketTiming> timings_;
  size_t nextToLaunch_ = 0;
  bool syncEnabled_ = true;
};

// Disables synchronization for its lifetime (PyTorch's no_sync()).
class NoSyncScope {
 public:
  explicit NoSyncScope(GradientSynchronizer& sync) : sync_(sync), was_(sync.syncEnabled()) {
    sync_.setSyncEnabled(false);
  }
  ~NoSyncScope() { sync_.setSyncEnabled(was_); }
  NoSyncScope(const NoSyncScope&) = delete;
  NoSyncScope& operator=(const NoSyncScope&) = delete;

 private:
  GradientSynchronizer& sync_;
  bool was_;
};

}  // namespace ringlet::ddp
