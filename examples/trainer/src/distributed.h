#pragma once
// Data-parallel training of a Trainer over a ringlet communicator (what PyTorch's
// DistributedDataParallel wraps around a model). Every rank builds the same Trainer with
// sampler "epoch", its own rank and the world size; DataParallel then
//  - broadcasts rank 0's parameters (so ranks seeded differently start equal),
//  - runs k micro-batches per optimizer step, the first k-1 without synchronizing,
//  - weights each micro-batch's mean loss by (world * its counted targets / the global count of
//    the step), so the averaged gradient is that of the mean loss over every target of the
//    global batch, exactly as one process would compute on all of it,
//  - all-reduces gradient buckets while backward is still running (or, with overlap off, once
//    backward is done) and then takes the optimizer step, identically on every rank.
// Collective: every rank calls each method in the same order.

#include <memory>

#include "ringlet/ddp.h"
#include "ringlet/ringlet.h"
#include "trainer.h"

namespace trainer {

struct DataParallelOptions {
  int64_t accumulation = 1;  // micro-batches per optimizer step
  ringlet::ddp::SynchronizerOptions buckets;
  bool overlap = true;  // false: no bucket launches before backward has finished
  // Never all-reduce gradients (PyTorch's no_sync on every step): the ranks train apart. Only to
  // measure what the synchronization costs a step (bench/busy/ddp_overhead.py).
  bool noSync = false;
};

// Milliseconds spent in the last step's phases on this rank.
struct StepTimes {
  double forward = 0, backward = 0, syncWait = 0, optimizer = 0;
};

class DataParallel {
 public:
  DataParallel(Trainer& trainer, ringlet::Communicator& comm, DataParallelOptions options = {});
  // One optimizer step; stats hold the global batch's loss sums and counts (same on all ranks).
  StepStats step();
  // Held-out metrics over all ranks' unpadded shards (same on all ranks).
  EvalResult evaluate(int64_t maxExamples = -1);
  const StepTimes& lastTimes() const { return times_; }
  ringlet::ddp::GradientSynchronizer& synchronizer() { return *sync_; }

 private:
  Trainer& trainer_;
  ringlet::Communicator& comm_;
  DataParallelOptions options_;
  std::unique_ptr<ringlet::ddp::GradientSynchronizer> sync_;
  StepTimes times_;
};

}  // namespace trainer
