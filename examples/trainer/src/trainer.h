#pragma once
// The training loop's pieces. A step runs as three phases that a data-parallel synchronizer can
// work between: forward() (zeroes gradients, draws a batch, builds the graph), backward(hook)
// (the hook sees each parameter as its gradient completes), optimizerStep() (clip, schedule,
// update). evaluate() returns sums and counts so that ranks can add theirs before dividing.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd.h"
#include "models.h"
#include "optim.h"
#include "sampler.h"

namespace trainer {

struct TrainOptions {
  ModelOptions model;
  int64_t steps = 1000;  // total steps (the schedule decays to 0 here)
  int64_t batch = 32;
  double lr = 1e-3;
  int64_t warmup = 100;
  uint64_t seed = 1;
  std::string optimizer = "adamw";  // adamw | sgd
  double weightDecay = 0.01;
  double momentum = 0.9;  // sgd
  double clip = 1.0;      // max gradient norm; 0 = off
  // Where training batches come from. "random": drawn with replacement from the data generator
  // (single-process default). "epoch": the distributed sampler over the numbered examples,
  // shard `rank` of `world`, reshuffled each epoch (see sampler.h).
  std::string sampler = "random";
  int rank = 0;
  int world = 1;
  bool dropLast = false;
};

struct StepStats {
  int64_t step = 0;  // steps completed after this one
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  CrossEntropyStats counts;  // this batch's loss sum, counted targets and correct arg-max
};

struct EvalResult {
  double lossSum = 0;
  int64_t count = 0;    // counted targets
  int64_t correct = 0;  // arg-max hits
  double meanLoss() const { return count > 0 ? lossSum / double(count) : 0; }
  double accuracy() const { return count > 0 ? double(correct) / double(count) : 0; }
};

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options);
  const TrainOptions& options() const { return options_; }
  Workload& workload() { return *workload_; }
  ParameterStore<float>& params() { return workload_->params(); }
  Optimizer& optimizer() { return *optimizer_; }
  int64_t step() const { return step_; }

  // Places the trainer on rank `rank` of `world` with `batch` examples per rank (what
  // Accelerator::prepare does): the data shard (the epoch sampler when world > 1) and the
  // dropout stream. Only before the first batch is drawn.
  void place(int rank, int world, int64_t batch);

  double forward();  // zeroes gradients, draws the next batch; returns its mean loss
  // The next k training batches (the micro-batches of one optimizer step).
  std::vector<Batch> nextBatches(int64_t k);
  void zeroGrad() { params().zeroGrads(); }
  // The next training batch from the sampler (advances the data position).
  Batch nextBatch();
  // Builds the graph for `batch`; with accumulate the gradients are not zeroed first.
  double forwardOn(const Batch& batch, bool accumulate = false);
  // Every parameter is reported to the hook exactly once: those the loss reaches as their
  // gradient completes, the rest (zero gradient) at the end. The gradient added is lossWeight
  // times d(mean loss of the batch).
  void backward(const GradReadyHook& onGradReady = {}, double lossWeight = 1.0);
  // Clips, takes the scheduled learning rate and updates; apply == false: the step and the
  // schedule advance without an update (a step skipped by loss scaling).
  StepStats optimizerStep(bool apply = true);
  StepStats trainStep();  // forward + backward + optimizerStep

  // Evaluation mode (no dropout, no graph) over up to maxBatches held-out batches (-1 = all).
  EvalResult evaluate(int64_t maxBatches = -1);
  // Per target row of `batch` (evaluation mode): its loss, whether it counts (not the ignore
  // index) and whether the arg-max hits it; for per-example metrics across ranks.
  struct RowMetrics {
    std::vector<double> loss;
    std::vector<int32_t> counted, correct;
  };
  RowMetrics evaluateRows(const Batch& batch);
  // Loss sum and counts of the batch of the last forwardOn().
  const CrossEntropyStats& lastBatchStats() const { return pendingStats_; }
  // Batches drawn so far (the sampler position; saved in checkpoints).
  int64_t batchesDrawn() const { return batchesDrawn_; }

  // One file: parameters, optimizer state, step and both random generators, plus `extra` (a
  // caller's state, e.g. the Accelerator's: every rank's dropout stream, the loss scale).
  // load() checks that the parameter layout and optimizer match and that the file is intact,
  // and returns the extra it was saved with (null when none).
  void saveCheckpoint(const std::string& path, const nlohmann::json& extra = nullptr) const;
  nlohmann::json loadCheckpoint(const std::string& path);
  // This rank's dropout stream (checkpointed per rank by the Accelerator).
  const Rng::State& dropoutState() const { return dropoutRng_.state(); }
  void setDropoutState(const Rng::State& state) { dropoutRng_.setState(state); }

 private:
  void makeSampler();

  TrainOptions options_;
  std::unique_ptr<Workload> workload_;
  std::unique_ptr<Optimizer> optimizer_;
  Rng dataRng_, dropoutRng_;
  int64_t step_ = 0;
  int64_t batchesDrawn_ = 0;
  std::unique_ptr<DistributedSampler> sampler_;
  Tensor<float> pendingLoss_;
  CrossEntropyStats pendingStats_;
};

}  // namespace trainer
