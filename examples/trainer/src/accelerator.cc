#include "accelerator.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>

namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

EvalLoader::EvalLoader(const Workload& workload, int64_t batch, int64_t limit)
    : workload_(workload), batch_(batch), examples_(workload.evalSize()) {
  if (batch <= 0) {
    throw ringlet::InvalidArgument(fmt::format("EvalLoader: batch {} must be > 0", batch));
  }
  if (limit >= 0) examples_ = std::min(examples_, limit);
}

int64_t EvalLoader::size() const {
  const int64_t global = batch_ * world_;
  return (examples_ + global - 1) / global;
}

Batch EvalLoader::operator[](int64_t i) const {
  const int64_t n = size();
  if (i < 0 || i >= n) {
    throw ringlet::InvalidArgument(
        fmt::format("EvalLoader: batch {} of {} (the loader has {} per rank)", i, n, n));
  }
  // Global batch i holds examples [i*G, i*G + G); the last one may hold fewer, r: it is cut to
  // ceil(r / world) per rank, the missing ones taken from the start of the set.
  const int64_t global = batch_ * world_;
  const int64_t first = i * global;
  const int64_t real = std::min(global, examples_ - first);
  const int64_t perRank = (real + world_ - 1) / world_;
  std::vector<int64_t> indices;
  int64_t padding = 0;
  for (int64_t j = rank_ * perRank; j < (rank_ + 1) * perRank; j++) {
    if (j < real) {
      indices.push_back(first + j);
    } else {
      indices.push_back((j - real) % examples_);
      padding++;
    }
  }
  Batch b = workload_.evalExamples(indices);
  b.padding = padding;
  return b;
}

Accelerator::Accelerator(ringlet::Communicator* comm, AcceleratorOptions options)
    : comm_(comm), options_(options) {
  if (options_.gradientAccumulationSteps < 1) {
    throw ringlet::InvalidArgument(fmt::format("gradient accumulation steps must be >= 1, got {}",
                                               options_.gradientAccumulationSteps));
  }
  if (comm_ != nullptr) {
    rank_ = comm_->rank();
    world_ = comm_->size();
  }
  const std::string& mp = options_.mixedPrecision;
  if (mp == "bf16") {
    options_.buckets.wireType = ringlet::DataType::kBFloat16;
  } else if (mp == "fp16") {
    options_.buckets.wireType = ringlet::DataType::kFloat16;
    if (!(options_.initialLossScale >= 1)) {
      throw ringlet::InvalidArgument(
          fmt::format("initial loss scale {} must be >= 1", options_.initialLossScale));
    }
    scaler_ = std::make_unique<GradScaler>(options_.initialLossScale);
  } else if (mp != "no") {
    throw ringlet::InvalidArgument(fmt::format("mixed precision '{}' is not no, bf16 or fp16", mp));
  }
  previousPrecision_ = matmulPrecision();
  if (mp != "no" && options_.autocast) {
    setMatmulPrecision(mp == "bf16" ? MatmulPrecision::kBFloat16 : MatmulPrecision::kFloat16);
  }
}

void GradScaler::update(bool finite) {
  if (!finite) {
    scale_ = std::max(1.0, scale_ / 2);
    goodSteps_ = 0;
    skipped_++;
    return;
  }
  if (++goodSteps_ == growthInterval_) {
    scale_ = std::min(scale_ * 2, 16777216.0 * 65536.0);
    goodSteps_ = 0;
  }
}

void GradScaler::restore(double scale, int64_t goodSteps, int64_t skipped) {
  if (!std::isfinite(scale) || scale < 1 || goodSteps < 0 || skipped < 0) {
    throw ringlet::InvalidArgument(
        fmt::format("loss scale state: scale {} (needs finite and >= 1), {} good steps, {} skipped",
                    scale, goodSteps, skipped));
  }
  scale_ = scale;
  goodSteps_ = goodSteps % std::max<int64_t>(1, growthInterval_);
  skipped_ = skipped;
}

bool Accelerator::unscaleGradients(Trainer& trainer) {
  if (!scaler_) return true;
  ParameterStore<float>& params = trainer.params();
  float* g = params.grads();
  const float inverse = float(1.0 / scaler_->scale());
  int8_t finite = 1;
  for (int64_t i = 0; i < params.numel(); i++) {
    g[i] *= inverse;
    finite &= std::isfinite(g[i]) ? 1 : 0;
  }
  // Every rank holds the same averaged gradients, but a rank that trained apart (no sync)
  // must agree too: the step is skipped everywhere or nowhere.
  finite = reduce(finite, ringlet::ReduceOp::kMin);
  scaler_->update(finite != 0);
  if (!finite) trainer.zeroGrad();
  return finite != 0;
}

Accelerator::~Accelerator() { setMatmulPrecision(previousPrecision_); }

void Accelerator::prepare(Trainer& trainer) {
  if (sync_) throw ringlet::InvalidArgument("Accelerator::prepare: a trainer is already prepared");
  int64_t batch = trainer.options().batch;
  if (options_.splitBatches) {
    if (batch % world_ != 0) {
      throw ringlet::InvalidArgument(fmt::format(
          "split batches: the global batch {} does not divide over {} ranks", batch, world_));
    }
    batch /= world_;
  }
  trainer.place(rank_, world_, batch);
  if (comm_ == nullptr) return;
  ParameterStore<float>& params = trainer.params();
  ringlet::ddp::GradientSynchronizer::broadcastParameters(
      *comm_, {{params.data(), size_t(params.numel()), ringlet::DataType::kFloat32}}, 0);
  std::vector<ringlet::ddp::Slice> grads;
  for (const ParamInfo& p : params.infos()) {
    grads.push_back({params.grads() + p.offset, size_t(p.count), ringlet::DataType::kFloat32});
  }
  sync_ = std::make_unique<ringlet::ddp::GradientSynchronizer>(*comm_, std::move(grads),
                                                               options_.buckets);
}

void Accelerator::prepare(EvalLoader& loader) const {
  loader.rank_ = rank_;
  loader.world_ = world_;
}

Accelerator::AccumulateScope Accelerator::accumulate() {
  if (inScope_) {
    throw ringlet::InvalidArgument("Accelerator::accumulate: the scopes of micro-batches nest");
  }
  inScope_ = true;
  microStep_++;
  syncGradients_ = microStep_ == options_.gradientAccumulationSteps;
  if (syncGradients_) microStep_ = 0;
  return AccumulateScope(*this);
}

Accelerator::AccumulateScope::~AccumulateScope() { owner_.endMicroStep(); }

void Accelerator::endMicroStep() {
  inScope_ = false;
  syncGradients_ = true;
}

void Accelerator::backward(Trainer& trainer) {
  backward(trainer, 1.0 / double(options_.gradientAccumulationSteps));
}

void Accelerator::backward(Trainer& trainer, double lossWeight) {
  if (scaler_) lossWeight *= scaler_->scale();
  const bool sync = syncGradients_ && !options_.noSync;
  auto t0 = Clock::now();
  if (!sync_) {
    trainer.backward({}, lossWeight);
    times_.backward += msSince(t0);
    return;
  }
  sync_->setSyncEnabled(sync);
  if (options_.overlap) {
    trainer.backward([this](int i) { sync_->markReady(size_t(i)); }, lossWeight);
  } else {
    trainer.backward({}, lossWeight);
    for (int i = trainer.params().size() - 1; i >= 0; i--) sync_->markReady(size_t(i));
  }
  times_.backward += msSince(t0);
  t0 = Clock::now();
  sync_->finish();
  if (sync) times_.syncWait += msSince(t0);
}

void Accelerator::waitForEveryone() const {
  if (distributed()) comm_->barrier();
}

void Accelerator::saveState(const Trainer& trainer, const std::string& path) const {
  // Collective first: every rank's dropout stream, so that a resumed run draws the same masks
  // on every rank (rank 0's alone would give every rank rank 0's masks).
  const Rng::State& own = trainer.dropoutState();
  std::vector<int64_t> mine(own.size());
  for (size_t i = 0; i < own.size(); i++) mine[i] = static_cast<int64_t>(own[i]);
  const std::vector<int64_t> all = gather(mine);
  nlohmann::json extra = {{"world", world_}};
  nlohmann::json streams = nlohmann::json::array();
  for (size_t r = 0; r + own.size() <= all.size(); r += own.size()) {
    Rng::State state;
    for (size_t i = 0; i < state.size(); i++) state[i] = static_cast<uint64_t>(all[r + i]);
    streams.push_back(state);
  }
  extra["dropoutRngs"] = streams;
  if (scaler_) {
    extra["lossScale"] = {{"scale", scaler_->scale()},
                          {"goodSteps", scaler_->goodSteps()},
                          {"skipped", scaler_->skippedSteps()}};
  }
  // Rank 0 writes; a failure there reaches every rank, so none waits for a file never written.
  int8_t ok = 1;
  std::string why;
  if (isMainProcess()) {
    try {
      trainer.saveCheckpoint(path, extra);
    } catch (const std::exception& e) {
      ok = 0;
      why = e.what();
    }
  }
  ok = reduce(ok, ringlet::ReduceOp::kMin);
  if (!ok) {
    throw ringlet::IoError(
        isMainProcess() ? why : fmt::format("rank 0 could not write the state to {}", path));
  }
}

void Accelerator::loadState(Trainer& trainer, const std::string& path) const {
  const Rng::State placed = trainer.dropoutState();  // this rank's own stream, from prepare()
  const nlohmann::json extra = trainer.loadCheckpoint(path);
  // The file's top-level stream is rank 0's. A rank takes its own saved stream when the file
  // has one; a rank the saving run did not have keeps the stream prepare() gave it.
  if (rank_ != 0) trainer.setDropoutState(placed);
  try {
    if (extra.is_object() && extra.contains("dropoutRngs")) {
      const nlohmann::json& streams = extra.at("dropoutRngs");
      if (static_cast<size_t>(rank_) < streams.size()) {
        trainer.setDropoutState(streams.at(static_cast<size_t>(rank_)).get<Rng::State>());
      }
    }
    if (scaler_ && extra.is_object() && extra.contains("lossScale")) {
      const nlohmann::json& ls = extra.at("lossScale");
      scaler_->restore(ls.at("scale").get<double>(), ls.at("goodSteps").get<int64_t>(),
                       ls.at("skipped").get<int64_t>());
    }
  } catch (const nlohmann::json::exception& e) {
    throw ringlet::IoError(
        fmt::format("checkpoint {}: the accelerator state is malformed: {}", path, e.what()));
  } catch (const ringlet::InvalidArgument& e) {
    throw ringlet::IoError(fmt::format("checkpoint {}: {}", path, e.what()));
  }
}

}  // namespace trainer
