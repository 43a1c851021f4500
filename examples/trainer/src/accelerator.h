#pragma once
// An Accelerate-style front for data-parallel training (what 🤗 Accelerate's Accelerator is to a
// PyTorch script). A training script builds its Trainer (model, optimizer, schedule, training
// data) the same way on every rank and hands it to prepare(); the accelerator
//  - broadcasts rank 0's parameters, shards the training data over the ranks (the distributed
//    sampler) and, with splitBatches, divides the batch by the ranks instead of multiplying;
//  - shards held-out data (prepare(EvalLoader)), padding the last batch so every rank runs the
//    same batches; gatherForMetrics() collects per-example values from every rank in data order
//    with the padding dropped;
//  - runs gradient accumulation: inside `auto micro = accelerator.accumulate();` the gradients of
//    a micro-batch that is not the last of its optimizer step stay local (PyTorch's no_sync: no
//    bucket is all-reduced); on the last, backward() all-reduces buckets while backward runs;
//  - says who prints (isMainProcess(), print()), and saves and loads the whole training state.
//
//   trainer::Accelerator acc(comm, {.gradientAccumulationSteps = 4});
//   trainer::Trainer model(options);
//   acc.prepare(model);
//   while (model.step() < steps) {
//     for (const Batch& batch : model.nextBatches(acc.gradientAccumulationSteps())) {
//       auto micro = acc.accumulate();
//       model.forwardOn(batch, /*accumulate=*/true);
//       acc.backward(model);                 // loss / k; buckets all-reduced on the last one
//     }
//     model.optimizerStep();
//     model.zeroGrad();
//   }
//
// Every rank calls the collective methods (prepare, backward on a synchronizing micro-step,
// reduce, gather, gatherForMetrics, waitForEveryone, saveState, loadState) in the same order.
// One process (no communicator, or one rank) runs the same script with no communication.

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels.h"
#include "ringlet/ddp.h"
#include "ringlet/ringlet.h"
#include "trainer.h"

namespace trainer {

struct AcceleratorOptions {
  int64_t gradientAccumulationSteps = 1;  // micro-batches per optimizer step
  // The Trainer's batch is the global batch, divided over the ranks (it must divide); false: the
  // batch is per rank and the global batch is batch x ranks.
  bool splitBatches = false;
  ringlet::ddp::SynchronizerOptions buckets;
  bool overlap = true;  // false: buckets are all-reduced only once backward has finished
  // Never all-reduce gradients (no_sync on every step): the ranks train apart. Only to measure
  // what synchronizing costs a step.
  bool noSync = false;
  // "no" | "bf16" | "fp16". The matrix products are computed in that 16-bit type as
  // torch.autocast computes them (kernels.h: MatmulPrecision; on this thread, while the
  // Accelerator lives) and the gradients are all-reduced in it (half the bytes on the wire);
  // parameters, optimizer state and the update stay float32 (master weights). fp16 adds dynamic
  // loss scaling (a GradScaler): the loss is scaled so that small gradients stay above fp16's
  // subnormals, and a step whose gradients overflow is skipped with the scale halved.
  std::string mixedPrecision = "no";
  // false: the matrix products stay float32 and only the wire is 16-bit (a CPU without 16-bit
  // matrix instructions computes the 16-bit products no faster; see the README).
  bool autocast = true;
  double initialLossScale = 65536.0;  // fp16: where the dynamic loss scale starts
};

// Dynamic loss scaling (PyTorch's GradScaler): scale starts at 2^16, halves when a step's
// gradients hold an inf or NaN (that step is skipped), doubles after `growthInterval` good steps.
class GradScaler {
 public:
  explicit GradScaler(double initialScale = 65536.0, int64_t growthInterval = 2000)
      : scale_(initialScale), growthInterval_(growthInterval) {}
  double scale() const { return scale_; }
  // After a step: whether its gradients were finite.
  void update(bool finite);
  int64_t skippedSteps() const { return skipped_; }
  int64_t goodSteps() const { return goodSteps_; }  // finite steps since the scale last changed
  // From a checkpoint; throws InvalidArgument on a scale that is not finite and >= 1.
  void restore(double scale, int64_t goodSteps, int64_t skipped);

 private:
  double scale_;
  int64_t growthInterval_;
  int64_t goodSteps_ = 0, skipped_ = 0;
};

// Milliseconds spent in the phases of the last optimizer step on this rank.
struct StepTimes {
  double forward = 0, backward = 0, syncWait = 0, optimizer = 0;
};

// The held-out examples of a workload in batches (a DataLoader over the evaluation set, no
// shuffling). After Accelerator::prepare, rank r gets the r-th slice of every global batch of
// batch x ranks consecutive examples; the last global batch is padded with examples from the
// start so that every rank runs the same number of batches of the same size. Batch::padding
// tells how many of a batch's trailing examples are such repeats.
class EvalLoader {
 public:
  // The first `limit` held-out examples (-1: all) in batches of `batch` per rank.
  EvalLoader(const Workload& workload, int64_t batch, int64_t limit = -1);
  int64_t examples() const { return examples_; }
  int64_t batchSize() const { return batch_; }
  int64_t size() const;               // batches (per rank)
  Batch operator[](int64_t i) const;  // batch i of this rank

 private:
  friend class Accelerator;
  const Workload& workload_;
  int64_t batch_, examples_;
  int rank_ = 0, world_ = 1;
};

class Accelerator {
 public:
  // comm == nullptr (or one rank): one process, nothing is communicated.
  explicit Accelerator(ringlet::Communicator* comm, AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  int numProcesses() const { return world_; }
  int processIndex() const { return rank_; }
  bool isMainProcess() const { return rank_ == 0; }
  bool distributed() const { return world_ > 1; }
  int64_t gradientAccumulationSteps() const { return options_.gradientAccumulationSteps; }
  const AcceleratorOptions& options() const { return options_; }
  ringlet::Communicator* communicator() const { return comm_; }

  // Main process only: one line to stdout.
  template <typename... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) const {
    if (isMainProcess()) {
      fmt::print("{}\n", fmt::format(format, std::forward<Args>(args)...));
      std::fflush(stdout);
    }
  }

  // Collective. Places the trainer on this rank (data shard, batch, dropout stream), broadcasts
  // rank 0's parameters and sets up the gradient buckets. Once, before its first step; throws
  // InvalidArgument when the batch does not split over the ranks or the trainer has trained.
  void prepare(Trainer& trainer);
  // Shards the held-out examples over the ranks (the loader's batch is per rank).
  void prepare(EvalLoader& loader) const;

  // One micro-batch of gradient accumulation (Accelerate's `with accelerator.accumulate(model)`):
  // while it lives, syncGradients() is true only on the last micro-batch of an optimizer step.
  class AccumulateScope {
   public:
    ~AccumulateScope();
    AccumulateScope(const AccumulateScope&) = delete;
    AccumulateScope& operator=(const AccumulateScope&) = delete;

   private:
    friend class Accelerator;
    explicit AccumulateScope(Accelerator& owner) : owner_(owner) {}
    Accelerator& owner_;
  };
  [[nodiscard]] AccumulateScope accumulate();
  // Whether the current micro-batch ends an optimizer step (then its backward all-reduces).
  bool syncGradients() const { return syncGradients_; }

  // Backward of the trainer's pending loss, weighted by 1 / gradientAccumulationSteps (the mean
  // over micro-batches), or by lossWeight when given. On a synchronizing micro-batch the
  // gradients leave as the rank average: buckets go as backward completes them (overlap) and
  // the call returns once all are reduced.
  void backward(Trainer& trainer);
  void backward(Trainer& trainer, double lossWeight);

  // Collective: the sum (or op) of a value over every rank.
  template <typename T>
  T reduce(T value, ringlet::ReduceOp op = ringlet::ReduceOp::kSum) const {
    if (distributed()) comm_->allreduce(&value, 1, ringlet::dataTypeOf<T>(), op);
    return value;
  }
  template <typename T>
  void reduce(std::span<T> values, ringlet::ReduceOp op = ringlet::ReduceOp::kSum) const {
    if (distributed()) comm_->allreduce(values, op);
  }
  // Collective: every rank's vector, concatenated in rank order (lengths may differ).
  template <typename T>
  std::vector<T> gather(const std::vector<T>& values) const;
  // Collective: per-example values of an EvalLoader batch (values.size() a multiple of
  // batch.size: rows per example) from every rank, in data order, without the padding.
  template <typename T>
  std::vector<T> gatherForMetrics(const std::vector<T>& values, const Batch& batch) const;
  void waitForEveryone() const;  // barrier

  // Collective. The main process writes the trainer's whole state (parameters, optimizer,
  // step, data position, every rank's dropout stream, the fp16 loss scale) to one file,
  // atomically; every rank returns once it is written. loadState: every rank reads it (after
  // prepare); a resumed run continues bit-exactly when the number of ranks is the same.
  void saveState(const Trainer& trainer, const std::string& path) const;
  void loadState(Trainer& trainer, const std::string& path) const;

  // Before the optimizer step (every rank): with loss scaling, divides the gradients by the
  // scale and says whether they are finite on every rank; false: skip this update (the scale
  // has been lowered). Without scaling: true.
  bool unscaleGradients(Trainer& trainer);
  const GradScaler* scaler() const { return scaler_.get(); }

  // Times of the phases around the optimizer step (forward time is the caller's to add).
  StepTimes& times() { return times_; }
  ringlet::ddp::GradientSynchronizer* synchronizer() { return sync_.get(); }

 private:
  void endMicroStep();

  ringlet::Communicator* comm_;
  AcceleratorOptions options_;
  int rank_ = 0, world_ = 1;
  std::unique_ptr<ringlet::ddp::GradientSynchronizer> sync_;
  std::unique_ptr<GradScaler> scaler_;
  MatmulPrecision previousPrecision_ = MatmulPrecision::kFloat32;  // restored when destroyed
  int64_t microStep_ = 0;  // micro-batches begun in the current optimizer step
  bool syncGradients_ = true;
  bool inScope_ = false;
  StepTimes times_;
};

template <typename T>
std::vector<T> Accelerator::gather(const std::vector<T>& values) const {
  if (!distributed()) return values;
  int64_t mine = static_cast<int64_t>(values.size());
  std::vector<int64_t> sizes(world_);
  comm_->allgather(&mine, sizes.data(), 1, ringlet::DataType::kInt64);
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<T> all(total);
  comm_->allgatherv(values.data(), all.data(), counts, ringlet::dataTypeOf<T>());
  return all;
}

template <typename T>
std::vector<T> Accelerator::gatherForMetrics(const std::vector<T>& values,
                                             const Batch& batch) const {
  if (batch.size <= 0 || values.size() % size_t(batch.size) != 0 || batch.padding < 0 ||
      batch.padding > batch.size) {
    throw ringlet::InvalidArgument(fmt::format(
        "gatherForMetrics: {} values for a batch of {} examples ({} of them padding): need a "
        "whole number of values per example",
        values.size(), batch.size, batch.padding));
  }
  const size_t perExample = values.size() / size_t(batch.size);
  const size_t real = size_t(batch.size - batch.padding) * perExample;
  return gather(std::vector<T>(values.begin(), values.begin() + static_cast<ptrdiff_t>(real)));
}

}  // namespace trainer
