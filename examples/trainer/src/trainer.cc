#include "trainer.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels.h"
#include "ringlet/error.h"

namespace trainer {

Trainer::Trainer(const TrainOptions& options)
    : options_(options),
      dataRng_(options.seed * 3 + 1),
      // Rank 0 keeps the single-process stream; other ranks draw their own dropout masks.
      dropoutRng_(options.seed * 3 + 2 + 7919 * static_cast<uint64_t>(options.rank)) {
  if (options.steps <= 0 || options.batch <= 0 || options.warmup < 0 || !(options.lr > 0)) {
    throw ringlet::InvalidArgument(
        fmt::format("need steps > 0, batch > 0, warmup >= 0 and lr > 0 (got {}, {}, {}, {})",
                    options.steps, options.batch, options.warmup, options.lr));
  }
  Rng initRng(options.seed * 3);
  workload_ = makeWorkload(options.model, initRng);
  const int64_t n = workload_->params().numel();
  if (options.optimizer == "adamw") {
    optimizer_ = makeAdamW(n, {.weightDecay = options.weightDecay});
  } else if (options.optimizer == "sgd") {
    optimizer_ = makeSgd(n, {.momentum = options.momentum, .weightDecay = options.weightDecay});
  } else {
    throw ringlet::InvalidArgument(
        fmt::format("--optimizer {} is not adamw or sgd", options.optimizer));
  }
  makeSampler();
}

void Trainer::makeSampler() {
  sampler_.reset();
  if (options_.sampler == "epoch") {
    sampler_ = std::make_unique<DistributedSampler>(workload_->trainSize(), options_.rank,
                                                    options_.world, options_.seed,
                                                    /*shuffle=*/true, options_.dropLast);
  } else if (options_.sampler != "random") {
    throw ringlet::InvalidArgument(
        fmt::format("--sampler {} is not random or epoch", options_.sampler));
  }
}

void Trainer::place(int rank, int world, int64_t batch) {
  if (world <= 0 || rank < 0 || rank >= world || batch <= 0) {
    throw ringlet::InvalidArgument(fmt::format(
        "Trainer::place: need 0 <= rank < world and batch > 0 (got rank {}, world {}, batch {})",
        rank, world, batch));
  }
  if (batchesDrawn_ != 0 || step_ != 0) {
    throw ringlet::InvalidArgument(
        fmt::format("Trainer::place after {} batches and {} steps: place (prepare) the trainer "
                    "before it trains; load a checkpoint after",
                    batchesDrawn_, step_));
  }
  if (rank == options_.rank && world == options_.world && batch == options_.batch) return;
  options_.rank = rank;
  options_.world = world;
  options_.batch = batch;
  // Several ranks draw disjoint shards: the random sampler would give each the same batches.
  if (world > 1) options_.sampler = "epoch";
  dropoutRng_ = Rng(options_.seed * 3 + 2 + 7919 * static_cast<uint64_t>(rank));
  makeSampler();
}

std::vector<Batch> Trainer::nextBatches(int64_t k) {
  std::vector<Batch> batches;
  for (int64_t i = 0; i < k; i++) batches.push_back(nextBatch());
  return batches;
}

Batch Trainer::nextBatch() {
  const int64_t drawn = batchesDrawn_++;
  if (!sampler_) return workload_->nextBatch(options_.batch, dataRng_);
  const int64_t perEpoch = sampler_->batchesPerEpoch(options_.batch);
  const int64_t epoch = drawn / perEpoch;
  return workload_->trainExamples(sampler_->batchIndices(epoch, drawn % perEpoch, options_.batch),
                                  exampleSeed(options_.seed, epoch));
}

double Trainer::forwardOn(const Batch& batch, bool accumulate) {
  if (!accumulate) params().zeroGrads();
  Context<float> ctx{params(), true, dropoutRng_};
  pendingLoss_ = workload_->loss(ctx, batch, &pendingStats_);
  return pendingLoss_.item();
}

double Trainer::forward() {
  params().zeroGrads();
  return forwardOn(nextBatch(), true);
}

void Trainer::backward(const GradReadyHook& onGradReady, double lossWeight) {
  if (!pendingLoss_.defined()) {
    throw ringlet::InvalidArgument("Trainer::backward called without a forward() before it");
  }
  std::vector<char> reported(params().size(), 0);
  trainer::backward(
      pendingLoss_,
      [&](int index) {
        reported[index] = 1;
        if (onGradReady) onGradReady(index);
      },
      static_cast<float>(lossWeight));
  for (int i = params().size() - 1; i >= 0; i--) {
    if (!reported[i] && onGradReady) onGradReady(i);
  }
  pendingLoss_ = Tensor<float>();  // frees the graph
}

StepStats Trainer::optimizerStep(bool apply) {
  StepStats stats;
  stats.lr = learningRate(options_.lr, step_, options_.warmup, options_.steps);
  if (apply) {
    stats.gradNorm = clipGradNorm(params(), options_.clip);
    optimizer_->step(params(), stats.lr);
  } else {
    stats.gradNorm = std::nan("");
  }
  step_++;
  stats.step = step_;
  stats.counts = pendingStats_;
  stats.loss = pendingStats_.count > 0 ? pendingStats_.lossSum / double(pendingStats_.count) : 0;
  return stats;
}

StepStats Trainer::trainStep() {
  forward();
  backward();
  return optimizerStep();
}

EvalResult Trainer::evaluate(int64_t maxBatches) {
  NoGradGuard noGrad;
  EvalResult result;
  Rng unused(0);
  Context<float> ctx{params(), false, unused};
  int64_t n = workload_->evalBatchCount(options_.batch);
  if (maxBatches >= 0) n = std::min(n, maxBatches);
  for (int64_t i = 0; i < n; i++) {
    CrossEntropyStats s;
    workload_->loss(ctx, workload_->evalBatch(i, options_.batch), &s);
    result.lossSum += s.lossSum;
    result.count += s.count;
    result.correct += s.correct;
  }
  return result;
}

Trainer::RowMetrics Trainer::evaluateRows(const Batch& batch) {
  NoGradGuard noGrad;
  Rng unused(0);
  Context<float> ctx{params(), false, unused};
  const Tensor<float> logits = workload_->logits(ctx, batch);
  const int64_t rows = logits.dim(0), classes = logits.dim(1);
  if (rows != int64_t(batch.labels.size())) {
    throw ringlet::InvalidArgument(
        fmt::format("evaluateRows: {} logit rows for {} labels", rows, batch.labels.size()));
  }
  RowMetrics m;
  m.loss.resize(rows);
  m.counted.resize(rows);
  m.correct.resize(rows);
  for (int64_t i = 0; i < rows; i++) {
    if (batch.labels[i] != kIgnoreIndex && (batch.labels[i] < 0 || batch.labels[i] >= classes)) {
      throw ringlet::InvalidArgument(fmt::format(
          "evaluateRows: label {} of row {} is outside [0, {})", batch.labels[i], i, classes));
    }
    int64_t counted = 0, correct = 0;
    m.loss[i] = crossEntropySum(logits.data() + i * classes, &batch.labels[i], 1, classes,
                                kIgnoreIndex, &counted, &correct);
    m.counted[i] = int32_t(counted);
    m.correct[i] = int32_t(correct);
  }
  return m;
}

}  // namespace trainer
