// ringlet-train: trains the MLP on generated spirals or the BERT-style encoder on masked-LM /
// synthetic classification, single process. See examples/trainer/README.md.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "blas_setup.h"
#include "report.h"
#include "trainer.h"

namespace {

struct CliOptions {
  trainer::TrainOptions train;
  std::string checkpoint, resume, csv = "loss.csv", plot = "loss.png";
  int64_t checkpointEvery = 0, logEvery = 0, evalEvery = 0, evalBatches = 16;
  int threads = 0;
  bool noProgress = false;
};

int run(int argc, char** argv) {
  std::string blasNote;
  trainer::maybeReexecWithFasterBlas(argv, &blasNote);

  CliOptions o;
  trainer::TrainOptions& t = o.train;
  trainer::ModelOptions& m = t.model;
  t.lr = 0;
  t.steps = 0;
  t.warmup = -1;
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
  app.add_option("--csv", o.csv, "loss-curve CSV (appended when resuming)");
  app.add_option("--plot", o.plot, "PNG plot of the loss curve (needs gnuplot), '' = none");
  app.add_option("--log-every", o.logEvery, "steps between loss lines (default steps/20)");
  app.add_option("--eval-every", o.evalEvery, "steps between evaluations (default steps/5)");
  app.add_option("--eval-batches", o.evalBatches, "held-out batches per evaluation, -1 = all");
  app.add_option("--threads", o.threads, "BLAS threads (default: all cores)");
  app.add_flag("--no-progress", o.noProgress, "no progress bar even on a terminal");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 2;
  }

  const bool bert = m.model == "bert";
  if (t.steps == 0) t.steps = bert ? 300 : 2000;
  if (t.lr == 0) t.lr = bert ? 1e-3 : 3e-3;
  if (t.warmup < 0) t.warmup = t.steps / 10;
  if (o.logEvery <= 0) o.logEvery = std::max<int64_t>(1, t.steps / 20);
  if (o.evalEvery <= 0) o.evalEvery = std::max<int64_t>(1, t.steps / 5);
  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  trainer::setBlasThreads(std::max(1, threads));

  trainer::Trainer tr(t);
  fmt::print("ringlet-train: {}\n", tr.workload().describe());
  fmt::print("ringlet-train: {} parameters, {} steps, batch {}, {} lr {:g}, warm-up {}, seed {}\n",
             tr.params().numel(), t.steps, t.batch, t.optimizer, t.lr, t.warmup, t.seed);
  fmt::print("ringlet-train: {}, {} BLAS threads\n", blasNote, trainer::blasThreads());
  if (!o.resume.empty()) {
    tr.loadCheckpoint(o.resume);
    fmt::print("ringlet-train: resumed from {} at step {}\n", o.resume, tr.step());
  }
  if (double base = tr.workload().baselineLoss(); !std::isnan(base)) {
    fmt::print("ringlet-train: baseline (unigram entropy) {:.4f}\n", base);
  }

  trainer::CsvLog csv(o.csv, !o.resume.empty());
  trainer::Progress progress(t.steps, !o.noProgress && ::isatty(STDERR_FILENO));
  const int64_t tokensPerStep = t.batch * tr.workload().tokensPerExample();
  double lossSum = 0;
  int64_t lossCount = 0, correct = 0, seen = 0, windowSteps = 0;
  auto windowStart = std::chrono::steady_clock::now();
  while (tr.step() < t.steps) {
    trainer::StepStats s = tr.trainStep();
    lossSum += s.loss;
    windowSteps++;
    correct += s.counts.correct;
    seen += s.counts.count;
    lossCount++;
    double evalLoss = std::nan(""), evalAcc = std::nan("");
    if (s.step % o.evalEvery == 0 || s.step == t.steps) {
      trainer::EvalResult e = tr.evaluate(o.evalBatches);
      evalLoss = e.meanLoss();
      evalAcc = e.accuracy();
      progress.line(fmt::format("step {:>6}  eval loss {:.4f}  eval accuracy {:.2f}%", s.step,
                                evalLoss, 100 * evalAcc));
    }
    csv.row(s.step, s.lr, s.loss,
            s.counts.count > 0 ? double(s.counts.correct) / s.counts.count : 0.0, evalLoss,
            evalAcc);
    if (s.step % o.logEvery == 0 || s.step == t.steps) {
      double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - windowStart).count();
      progress.line(fmt::format(
          "step {:>6}  loss {:.4f}  accuracy {:.2f}%  lr {:.3g}  grad-norm {:.3f}  "
          "{:.0f} tokens/s  {:.1f} ms/step",
          s.step, lossSum / double(lossCount), seen > 0 ? 100.0 * correct / seen : 0.0, s.lr,
          s.gradNorm, double(tokensPerStep * windowSteps) / secs, 1000 * secs / windowSteps));
      lossSum = 0;
      lossCount = correct = seen = windowSteps = 0;
      windowStart = std::chrono::steady_clock::now();
    }
    progress.update(s.step, fmt::format("loss {:.4f}", s.loss));
    if (!o.checkpoint.empty() && o.checkpointEvery > 0 && s.step % o.checkpointEvery == 0) {
      tr.saveCheckpoint(o.checkpoint);
    }
  }
  progress.finish();
  if (!o.checkpoint.empty()) {
    tr.saveCheckpoint(o.checkpoint);
    fmt::print("ringlet-train: checkpoint at step {} written to {}\n", tr.step(), o.checkpoint);
  }
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
