#include "distributed.h"

#include <fmt/format.h>

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

DataParallel::DataParallel(Trainer& trainer, ringlet::Communicator& comm,
                           DataParallelOptions options)
    : trainer_(trainer), comm_(comm), options_(options) {
  if (options_.accumulation < 1) {
    throw ringlet::InvalidArgument(
        fmt::format("accumulation steps must be >= 1, got {}", options_.accumulation));
  }
  if (trainer.options().world != comm.size() || trainer.options().rank != comm.rank()) {
    throw ringlet::InvalidArgument(
        fmt::format("the trainer was built for rank {} of {}, the communicator is rank {} of {}",
                    trainer.options().rank, trainer.options().world, comm.rank(), comm.size()));
  }
  ParameterStore<float>& params = trainer.params();
  ringlet::ddp::GradientSynchronizer::broadcastParameters(
      comm, {{params.data(), size_t(params.numel()), ringlet::DataType::kFloat32}}, 0);
  std::vector<ringlet::ddp::Slice> grads;
  for (const ParamInfo& p : params.infos()) {
    grads.push_back({params.grads() + p.offset, size_t(p.count), ringlet::DataType::kFloat32});
  }
  sync_ = std::make_unique<ringlet::ddp::GradientSynchronizer>(comm, std::move(grads),
                                                               options_.buckets);
}

StepStats DataParallel::step() {
  const int64_t k = options_.accumulation;
  std::vector<Batch> batches;
  // The global count of targets must be known before the first backward: labels tell it.
  int64_t global = 0;
  for (int64_t m = 0; m < k; m++) {
    batches.push_back(trainer_.nextBatch());
    global += countedTargets(batches.back());
  }
  if (comm_.size() > 1)
    comm_.allreduce(&global, 1, ringlet::DataType::kInt64, ringlet::ReduceOp::kSum);

  times_ = StepTimes{};
  CrossEntropyStats total;
  const int numParams = trainer_.params().size();
  for (int64_t m = 0; m < k; m++) {
    const bool last = m == k - 1;
    auto t0 = Clock::now();
    trainer_.forwardOn(batches[m], /*accumulate=*/m > 0);
    times_.forward += msSince(t0);
    total.lossSum += trainer_.lastBatchStats().lossSum;
    total.count += trainer_.lastBatchStats().count;
    total.correct += trainer_.lastBatchStats().correct;
    const int64_t n = countedTargets(batches[m]);
    const double weight = global > 0 ? double(comm_.size()) * double(n) / double(global) : 0.0;
    sync_->setSyncEnabled(last && !options_.noSync);
    t0 = Clock::now();
    if (options_.overlap) {
      trainer_.backward([this](int i) { sync_->markReady(size_t(i)); }, weight);
    } else {
      trainer_.backward({}, weight);
      for (int i = numParams - 1; i >= 0; i--) sync_->markReady(size_t(i));
    }
    times_.backward += msSince(t0);
    t0 = Clock::now();
    sync_->finish();
    if (last) times_.syncWait = msSince(t0);
  }
  auto t0 = Clock::now();
  StepStats stats = trainer_.optimizerStep();
  times_.optimizer = msSince(t0);
  double sums[3] = {total.lossSum, double(total.count), double(total.correct)};
  if (comm_.size() > 1)
    comm_.allreduce(sums, 3, ringlet::DataType::kFloat64, ringlet::ReduceOp::kSum);
  stats.counts = {sums[0], static_cast<int64_t>(sums[1]), static_cast<int64_t>(sums[2])};
  stats.loss = stats.counts.count > 0 ? stats.counts.lossSum / double(stats.counts.count) : 0;
  return stats;
}

EvalResult DataParallel::evaluate(int64_t maxExamples) {
  EvalResult local = trainer_.evaluateShard(comm_.rank(), comm_.size(), maxExamples);
  double sums[3] = {local.lossSum, double(local.count), double(local.correct)};
  if (comm_.size() > 1)
    comm_.allreduce(sums, 3, ringlet::DataType::kFloat64, ringlet::ReduceOp::kSum);
  EvalResult all;
  all.lossSum = sums[0];
  all.count = static_cast<int64_t>(sums[1]);
  all.correct = static_cast<int64_t>(sums[2]);
  return all;
}

}  // namespace trainer
