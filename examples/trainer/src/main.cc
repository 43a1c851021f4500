// ringlet-train: trains the MLP on generated spirals or the BERT-style encoder on masked-LM /
// synthetic classification, in one process or data-parallel over the ranks of a launcher
// (ringlet-run, torchrun-style environment, mpirun). See examples/trainer/README.md.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "accelerator.h"
#include "blas_setup.h"
#include "report.h"
#include "train_loop.h"
#include "trainer.h"

namespace {

struct CliOptions {
  trainer::TrainOptions train;
  std::string checkpoint, resume, csv = "loss.csv", plot = "loss.png", json;
  int64_t checkpointEvery = 0, logEvery = 0, evalEvery = 0, evalBatches = 16;
  int64_t crashAtStep = 0;  // test hook: the last rank exits with status 3 after this step
  int threads = 0;
  int threadsAsRanks = 0;
  bool noProgress = false;
  // Data parallel
  bool splitBatches = false, noOverlap = false, noSync = false, timing = false;
  bool resumeIfPresent = false;  // --resume of a file that does not exist yet: start afresh
  int64_t accumulate = 1;
  double bucketMb = 25, firstBucketMb = 1;
  std::string mixedPrecision = "no";
  bool noAutocast = false;
};

// Who this rank is: from the launcher's environment, or a thread of --threads-as-ranks.
struct RankPlace {
  int rank = 0;
  int world = 1;
  int localSize = 1;
};

int trainRank(CliOptions o, const RankPlace& place, const std::string& blasNote,
              const std::function<ringlet::Communicator&()>& communicator);

int run(int argc, char** argv) {
  std::string blasNote;
  trainer::maybeReexecWithFasterBlas(argv, &blasNote);
  trainer::keepFreedTensorMemory();

  CliOptions o;
  trainer::TrainOptions& t = o.train;
  trainer::ModelOptions& m = t.model;
  t.lr = 0;
  t.steps = 0;
  t.warmup = -1;
  t.sampler.clear();  // chosen from the world size unless given
  CLI::App app{
      "Train a small model with ringlet's minimal autograd engine.\n"
      "BLAS: when the CPU has AVX-512 (or AVX2) and OpenBLAS picked older kernels, ringlet-train "
      "sets OPENBLAS_CORETYPE=SkylakeX (or Haswell) and re-executes itself once; set "
      "OPENBLAS_CORETYPE yourself to choose.",
      "ringlet-train"};
  app.option_defaults()->always_capture_default();
  app.add_option("--model", m.model, "mlp | bert")->check(CLI::IsMember({"mlp", "bert"}));
  app.add_option("--task", m.task, "bert: mlm (default) | cls; mlp: spirals");
  app.add_option("--steps", t.steps, "training steps (default mlp 2000, bert 300)");
  app.add_option("--batch", t.batch, "examples per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", t.lr, "peak learning rate (default mlp 3e-3, bert 1e-3)");
  app.add_option("--warmup", t.warmup, "linear warm-up steps (default steps/10)");
  app.add_option("--seed", t.seed, "seed for initialisation, data and dropout");
  app.add_option("--optimizer", t.optimizer, "adamw | sgd")->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--weight-decay", t.weightDecay, "decoupled weight decay (not on biases/LN)");
  app.add_option("--momentum", t.momentum, "SGD momentum");
  app.add_option("--clip", t.clip, "max gradient L2 norm, 0 = off");
  app.add_option("--hidden", m.hidden, "bert: hidden size");
  app.add_option("--heads", m.heads, "bert: attention heads");
  app.add_option("--ffn", m.ffn, "bert: feed-forward size");
  app.add_option("--layers", m.layers, "bert: encoder layers");
  app.add_option("--seq", m.seqLen, "bert: sequence length");
  app.add_option("--dropout", m.dropout, "bert: dropout probability");
  app.add_option("--ln-eps", m.lnEps, "bert: LayerNorm epsilon");
  app.add_option("--corpus", m.corpus, "bert mlm: text file (default: the shipped corpus)");
  app.add_option("--mlp-hidden", m.mlpHidden, "mlp: hidden width");
  app.add_option("--mlp-layers", m.mlpLayers, "mlp: hidden layers");
  app.add_option("--classes", m.classes, "mlp: spiral arms");
  app.add_option("--checkpoint", o.checkpoint,
                 "write a checkpoint here (at the end and every "
                 "--checkpoint-every steps)");
  app.add_option("--checkpoint-every", o.checkpointEvery, "steps between checkpoints, 0 = end");
  app.add_option("--resume", o.resume, "continue from this checkpoint");
  app.add_flag("--resume-if-present", o.resumeIfPresent,
               "with --resume: start from step 0 when that checkpoint does not exist yet (a job "
               "that ringlet-run --max-restarts may start again)");
  app.add_option("--csv", o.csv, "loss-curve CSV (appended when resuming)");
  app.add_option("--plot", o.plot, "PNG plot of the loss curve (needs gnuplot), '' = none");
  app.add_option("--log-every", o.logEvery, "steps between loss lines (default steps/20)");
  app.add_option("--eval-every", o.evalEvery, "steps between evaluations (default steps/5)");
  app.add_option("--eval-batches", o.evalBatches, "held-out batches per evaluation, -1 = all");
  app.add_option("--threads", o.threads, "BLAS threads (default: all cores)");
  app.add_option("--threads-as-ranks", o.threadsAsRanks,
                 "run N data-parallel ranks as threads of this process (in-process transport; "
                 "BLAS threads default to cores / N)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--no-progress", o.noProgress, "no progress bar even on a terminal");
  app.add_option("--sampler", t.sampler,
                 "random (draw with replacement) | epoch (distributed sampler; default when "
                 "there is more than one rank)")
      ->check(CLI::IsMember({"random", "epoch"}));
  app.add_flag("--drop-last", t.dropLast, "epoch sampler: drop the tail instead of padding");
  app.add_flag("--split-batches", o.splitBatches,
               "--batch is the global batch, split over the ranks (default: per rank)");
  app.add_option("--accumulate", o.accumulate, "micro-batches per optimizer step")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-mb", o.bucketMb, "gradient bucket cap in MiB");
  app.add_option("--first-bucket-mb", o.firstBucketMb, "first gradient bucket cap in MiB");
  app.add_flag("--no-overlap", o.noOverlap, "all-reduce gradients only after backward");
  app.add_flag("--no-sync", o.noSync,
               "never all-reduce gradients (ranks train apart): a step's time without the "
               "synchronization, to measure its cost");
  app.add_option("--mixed-precision", o.mixedPrecision,
                 "no | bf16 | fp16: matrix products computed in 16 bits (as torch.autocast) and "
                 "gradients all-reduced in 16 bits (fp32 master weights and update); fp16 adds "
                 "dynamic loss scaling")
      ->check(CLI::IsMember({"no", "bf16", "fp16"}));
  app.add_flag("--no-autocast", o.noAutocast,
               "with --mixed-precision: keep the matrix products in float32 (only the gradients' "
               "all-reduce is 16-bit)");
  app.add_flag("--timing", o.timing, "print forward/backward/sync/optimizer ms per logged step");
  app.add_option("--json", o.json,
                 "write the run's speed here as JSON (median ms per training step after "
                 "warm-up, the slowest rank's, and samples/s over all ranks), for benchmarks");
  app.add_option("--crash-at-step", o.crashAtStep,
                 "test hook: the last rank exits with status 3 once this step is done (before "
                 "its checkpoint), to test restarts (ringlet-run --max-restarts)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 2;
  }

  if (o.threadsAsRanks > 0) {
    const int n = o.threadsAsRanks;
    if (ringlet::Bootstrap::fromEnvironment().size > 1) {
      throw ringlet::InvalidArgument(fmt::format(
          "--threads-as-ranks {} inside a launched job: start one process, or drop the option", n));
    }
    // One BLAS pool for the process, shared out: cores / N threads each.
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    trainer::setBlasThreads(o.threads > 0 ? o.threads : std::max(1, cores / n));
    ringlet::SpawnOptions so;
    so.grace = std::chrono::seconds(5);
    ringlet::spawnThreads(
        n,
        [&](ringlet::Communicator& comm) {
          trainRank(o, RankPlace{comm.rank(), comm.size(), comm.size()}, blasNote,
                    [&]() -> ringlet::Communicator& { return comm; });
        },
        so);
    return 0;
  }
  ringlet::Bootstrap boot = ringlet::Bootstrap::fromEnvironment();
  std::optional<ringlet::Communicator> comm;
  return trainRank(o, RankPlace{boot.rank, boot.size, boot.localSize}, blasNote,
                   [&]() -> ringlet::Communicator& {
                     comm.emplace(ringlet::Communicator::create(boot));
                     return *comm;
                   });
}

int trainRank(CliOptions o, const RankPlace& place, const std::string& blasNote,
              const std::function<ringlet::Communicator&()>& communicator) {
  trainer::TrainOptions& t = o.train;
  trainer::ModelOptions& m = t.model;
  const int world = place.world;
  if (t.sampler.empty()) t.sampler = world > 1 ? "epoch" : "random";
  if (world > 1 && t.sampler != "epoch") {
    throw ringlet::InvalidArgument(
        fmt::format("--sampler {} with {} ranks: data-parallel training needs --sampler epoch",
                    t.sampler, world));
  }
  if (o.splitBatches && t.batch % world != 0) {
    throw ringlet::InvalidArgument(
        fmt::format("--split-batches: --batch {} does not divide over {} ranks", t.batch, world));
  }
  const int64_t globalBatch = o.splitBatches ? t.batch : t.batch * world;
  // k micro-batches of b train like one batch of k*b only when drawn from one epoch order.
  if (o.accumulate > 1 && world == 1 && t.sampler == "random") t.sampler = "epoch";
  if (o.bucketMb <= 0 || o.firstBucketMb <= 0) {
    throw ringlet::InvalidArgument(fmt::format(
        "--bucket-mb {} and --first-bucket-mb {} must be > 0", o.bucketMb, o.firstBucketMb));
  }

  const bool bert = m.model == "bert";
  if (t.steps == 0) t.steps = bert ? 300 : 2000;
  if (t.lr == 0) t.lr = bert ? 1e-3 : 3e-3;
  if (t.warmup < 0) t.warmup = t.steps / 10;
  if (o.logEvery <= 0) o.logEvery = std::max<int64_t>(1, t.steps / 20);
  if (o.evalEvery <= 0) o.evalEvery = std::max<int64_t>(1, t.steps / 5);
  // Default: the host's cores shared by the ranks on it (thread ranks: set once, by run()).
  if (o.threadsAsRanks == 0) {
    int threads = o.threads > 0 ? o.threads
                                : static_cast<int>(std::thread::hardware_concurrency()) /
                                      std::max(1, place.localSize);
    trainer::setBlasThreads(std::max(1, threads));
  }

  trainer::AcceleratorOptions ao;
  ao.gradientAccumulationSteps = o.accumulate;
  ao.splitBatches = o.splitBatches;
  ao.overlap = !o.noOverlap;
  ao.noSync = o.noSync;
  ao.mixedPrecision = o.mixedPrecision;
  ao.autocast = !o.noAutocast;
  ao.buckets.bucketCapBytes = static_cast<size_t>(o.bucketMb * (1 << 20));
  ao.buckets.firstBucketCapBytes = static_cast<size_t>(o.firstBucketMb * (1 << 20));
  trainer::Accelerator accelerator(world > 1 ? &communicator() : nullptr, ao);

  // The model with its optimizer, schedule and training data, built alike on every rank;
  // prepare() shards the data and starts every rank from rank 0's parameters.
  trainer::Trainer model(t);
  accelerator.prepare(model);
  trainer::EvalLoader evalData(model.workload(), model.options().batch,
                               o.evalBatches < 0 ? -1 : o.evalBatches * globalBatch);
  accelerator.prepare(evalData);

  accelerator.print("ringlet-train: {}", model.workload().describe());
  accelerator.print(
      "ringlet-train: {} parameters, {} steps, batch {} ({} per rank x {} ranks{}), {} lr {:g}, "
      "warm-up {}, seed {}, sampler {}",
      model.params().numel(), t.steps, globalBatch * o.accumulate, model.options().batch, world,
      o.accumulate > 1 ? fmt::format(" x {} micro-batches", o.accumulate) : "", t.optimizer, t.lr,
      t.warmup, t.seed, model.options().sampler);
  accelerator.print("ringlet-train: {}, {} BLAS threads per rank", blasNote,
                    trainer::blasThreads());
  if (!o.resume.empty() && o.resumeIfPresent && !std::filesystem::exists(o.resume)) {
    accelerator.print("ringlet-train: no checkpoint at {} yet (--resume-if-present): from step 0",
                      o.resume);
    o.resume.clear();
  }
  if (!o.resume.empty()) {
    accelerator.loadState(model, o.resume);
    accelerator.print("ringlet-train: resumed from {} at step {}", o.resume, model.step());
  }
  if (!o.json.empty() && t.steps - model.step() < 3) {
    throw ringlet::InvalidArgument(
        fmt::format("--json needs at least 3 steps to time past the warm-up; this run has {}",
                    t.steps - model.step()));
  }
  if (double base = model.workload().baselineLoss(); !std::isnan(base)) {
    accelerator.print("ringlet-train: baseline (unigram entropy) {:.4f}", base);
  }
  if (auto* sync = accelerator.synchronizer()) {
    accelerator.print("ringlet-train: data parallel over {} {} ({}), {} gradient buckets in {}, {}",
                      world, o.threadsAsRanks > 0 ? "thread ranks" : "ranks",
                      accelerator.communicator()->describeLinks(), sync->buckets().size(),
                      ringlet::toString(sync->buckets().front().wire),
                      o.noSync      ? "no gradient all-reduce (--no-sync)"
                      : o.noOverlap ? "all-reduce after backward"
                                    : "all-reduce overlapping backward");
  }

  const bool leader = accelerator.isMainProcess();
  std::optional<trainer::CsvLog> csv;
  if (leader) csv.emplace(o.csv, !o.resume.empty());
  trainer::Progress progress(t.steps, leader && !o.noProgress && ::isatty(STDERR_FILENO));
  const int64_t samplesPerStep = globalBatch * o.accumulate;
  const int64_t tokensPerStep = samplesPerStep * model.workload().tokensPerExample();
  trainer::StepTimes phase;
  double lossSum = 0;
  int64_t lossCount = 0, correct = 0, seen = 0, windowSteps = 0;
  auto windowStart = std::chrono::steady_clock::now();
  std::vector<double> stepMs;  // each training step (not evaluation), for --json
  while (model.step() < t.steps) {
    const auto stepStart = std::chrono::steady_clock::now();
    trainer::StepStats s = trainer::trainStep(accelerator, model);
    stepMs.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - stepStart)
            .count());
    const trainer::StepTimes& p = accelerator.times();
    phase.forward += p.forward;
    phase.backward += p.backward;
    phase.syncWait += p.syncWait;
    phase.optimizer += p.optimizer;
    lossSum += s.loss;
    windowSteps++;
    correct += s.counts.correct;
    seen += s.counts.count;
    lossCount++;
    double evalLoss = std::nan(""), evalAcc = std::nan("");
    if (s.step % o.evalEvery == 0 || s.step == t.steps) {
      trainer::EvalResult e = trainer::evaluate(accelerator, model, evalData);
      evalLoss = e.meanLoss();
      evalAcc = e.accuracy();
      if (leader)
        progress.line(fmt::format("step {:>6}  eval loss {:.4f}  eval accuracy {:.2f}%", s.step,
                                  evalLoss, 100 * evalAcc));
    }
    if (csv)
      csv->row(s.step, s.lr, s.loss,
               s.counts.count > 0 ? double(s.counts.correct) / s.counts.count : 0.0, evalLoss,
               evalAcc);
    if (s.step % o.logEvery == 0 || s.step == t.steps) {
      double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      if (leader)
        progress.line(fmt::format(
            "step {:>6}  loss {:.4f}  accuracy {:.2f}%  lr {:.3g}  grad-norm {:.3f}  "
            "{:.0f} tokens/s  {:.1f} samples/s  {:.1f} ms/step",
            s.step, lossSum / double(lossCount), seen > 0 ? 100.0 * correct / seen : 0.0, s.lr,
            s.gradNorm, double(tokensPerStep * windowSteps) / secs,
            double(samplesPerStep * windowSteps) / secs, 1000 * secs / windowSteps));
      if (o.timing && leader) {
        progress.line(
            fmt::format("step {:>6}  ms/step: forward {:.2f}  backward {:.2f}  "
                        "sync wait {:.2f}  optimizer {:.2f}",
                        s.step, phase.forward / windowSteps, phase.backward / windowSteps,
                        phase.syncWait / windowSteps, phase.optimizer / windowSteps));
      }
      phase = {};
      lossSum = 0;
      lossCount = correct = seen = windowSteps = 0;
      windowStart = std::chrono::steady_clock::now();
    }
    progress.update(s.step, fmt::format("loss {:.4f}", s.loss));
    if (o.crashAtStep > 0 && s.step == o.crashAtStep &&
        accelerator.processIndex() == accelerator.numProcesses() - 1) {
      fmt::print(stderr, "ringlet-train: --crash-at-step {}: rank {} exits with status 3\n",
                 o.crashAtStep, accelerator.processIndex());
      std::fflush(stderr);
      std::_Exit(3);
    }
    if (!o.checkpoint.empty() && o.checkpointEvery > 0 && s.step % o.checkpointEvery == 0) {
      accelerator.saveState(model, o.checkpoint);
    }
  }
  progress.finish();
  if (const trainer::GradScaler* scaler = accelerator.scaler()) {
    accelerator.print("ringlet-train: fp16 loss scale {:g}, {} steps skipped for overflow",
                      scaler->scale(), scaler->skippedSteps());
  }
  if (!o.checkpoint.empty()) {
    accelerator.saveState(model, o.checkpoint);
    accelerator.print("ringlet-train: checkpoint at step {} written to {}", model.step(),
                      o.checkpoint);
  }
  // Speed: the median training step after warm-up (a tenth of the steps, at least 2; the
  // allocations, caches and bucket plan settle there), the slowest rank's. Every rank calls
  // reduce(), whatever its own options.
  const size_t warm = std::min(stepMs.size(), std::max<size_t>(2, stepMs.size() / 10));
  std::vector<double> timed(stepMs.begin() + static_cast<std::ptrdiff_t>(warm), stepMs.end());
  double median = 0;
  if (!timed.empty()) {
    std::nth_element(timed.begin(), timed.begin() + timed.size() / 2, timed.end());
    median = timed[timed.size() / 2];
  }
  median = accelerator.reduce(median, ringlet::ReduceOp::kMax);
  const double samplesPerSecond = median > 0 ? double(samplesPerStep) / (median / 1000) : 0;
  if (median > 0) {
    accelerator.print(
        "ringlet-train: median step {:.2f} ms after {} warm-up steps: {:.1f} samples/s", median,
        warm, samplesPerSecond);
  }
  if (!o.json.empty() && leader) {
    nlohmann::json j = {{"model", m.model},
                        {"task", m.task},
                        {"describe", model.workload().describe()},
                        {"params", model.params().numel()},
                        {"ranks", world},
                        {"threads", trainer::blasThreads()},
                        {"batch_per_rank", model.options().batch},
                        {"accumulate", o.accumulate},
                        {"mixed_precision", o.mixedPrecision},
                        {"autocast", o.mixedPrecision != "no" && !o.noAutocast},
                        {"steps_timed", timed.size()},
                        {"step_ms", median},
                        {"samples_per_s", samplesPerSecond}};
    std::ofstream f(o.json);
    f << j.dump(1) << "\n";
    if (!f.flush()) {
      throw ringlet::IoError(fmt::format("--json {}: cannot write the file", o.json));
    }
  }
  if (!leader) return 0;
  csv.reset();
  if (!o.plot.empty()) {
    std::string why;
    if (trainer::plotLossCurve(o.csv, o.plot, fmt::format("ringlet-train --model {}", m.model),
                               &why)) {
      fmt::print("ringlet-train: loss curve in {} and {}\n", o.csv, o.plot);
    } else {
      fmt::print(stderr, "ringlet-train: warning: no plot ({}); loss curve in {}\n", why, o.csv);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 1;
  }
}
