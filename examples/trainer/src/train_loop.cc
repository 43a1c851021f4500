#include "train_loop.h"

#include <chrono>

namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int64_t countedTargets(const Batch& batch) {
  int64_t n = 0;
  for (int32_t label : batch.labels) n += label != kIgnoreIndex;
  return n;
}

}  // namespace

StepStats trainStep(Accelerator& accelerator, Trainer& model) {
  const std::vector<Batch> micro = model.nextBatches(accelerator.gradientAccumulationSteps());
  int64_t local = 0;
  for (const Batch& batch : micro) local += countedTargets(batch);
  const int64_t targets = accelerator.reduce(local);

  StepTimes& times = accelerator.times();
  times = {};
  CrossEntropyStats seen;
  for (const Batch& batch : micro) {
    auto scope = accelerator.accumulate();  // all-reduces on the last micro-batch only
    auto t0 = Clock::now();
    model.forwardOn(batch, /*accumulate=*/true);
    times.forward += msSince(t0);
    const double share = targets > 0 ? double(countedTargets(batch)) / double(targets) : 0.0;
    accelerator.backward(model, accelerator.numProcesses() * share);
    seen.lossSum += model.lastBatchStats().lossSum;
    seen.count += model.lastBatchStats().count;
    seen.correct += model.lastBatchStats().correct;
  }
  auto t0 = Clock::now();
  // fp16 loss scaling: a step whose gradients overflowed is skipped (the schedule moves on).
  const bool apply = accelerator.unscaleGradients(model);
  StepStats stats = model.optimizerStep(apply);
  model.zeroGrad();
  times.optimizer = msSince(t0);

  double sums[3] = {seen.lossSum, double(seen.count), double(seen.correct)};
  accelerator.reduce(std::span<double>(sums));
  stats.counts = {sums[0], static_cast<int64_t>(sums[1]), static_cast<int64_t>(sums[2])};
  stats.loss = stats.counts.count > 0 ? stats.counts.lossSum / double(stats.counts.count) : 0;
  return stats;
}

EvalResult evaluate(Accelerator& accelerator, Trainer& model, const EvalLoader& data) {
  EvalResult result;
  for (int64_t i = 0; i < data.size(); i++) {
    const Batch batch = data[i];
    const Trainer::RowMetrics rows = model.evaluateRows(batch);
    const std::vector<double> loss = accelerator.gatherForMetrics(rows.loss, batch);
    const std::vector<int32_t> counted = accelerator.gatherForMetrics(rows.counted, batch);
    const std::vector<int32_t> correct = accelerator.gatherForMetrics(rows.correct, batch);
    for (size_t r = 0; r < loss.size(); r++) {
      result.lossSum += loss[r];
      result.count += counted[r];
      result.correct += correct[r];
    }
  }
  return result;
}

}  // namespace trainer
