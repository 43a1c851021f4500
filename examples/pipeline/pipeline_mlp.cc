// ringlet-pipeline: model parallelism on CPU ranks. An MLP's layers are split over two ranks;
// rank 0 runs the first half and sends its activations to rank 1, which runs the second half
// and the loss and sends the gradient of those activations back (point-to-point send/recv).
//
//   --mode single               one rank, all layers, the whole batch (the baseline)
//   --mode split                two ranks, the whole batch at once: one rank always idles
//   --mode pipeline --micro M   two ranks, M micro-batches: rank 1 works on micro-batch m while
//                               rank 0 computes m+1 (GPipe schedule: all forwards on rank 0,
//                               then its backwards in the order rank 1 returns gradients)
//
//   rank 0: F0 F1 F2 F3 .  .  .  B0 B1 B2 B3        (Fm forward, Bm backward of micro-batch m)
//   rank 1:    F0B0 F1B1 F2B2 F3B3
//
// The gradient is the same sum over the batch in every mode, so the parameters after N steps
// match the single-rank run; two-rank modes check this at the end and print the difference.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include "mlp_stage.h"
#include "ringlet/ringlet.h"

namespace {

struct Options {
  std::string mode = "pipeline";
  int micro = 4, layers = 8, steps = 10, warmup = 2;
  int64_t width = 512, batch = 256;
  float lr = 0.05f;
};

std::vector<float> randomMatrix(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// One training step on two ranks with M micro-batches (split mode: M = 1).
void twoRankStep(ringlet::Communicator& comm, pipeline::MlpStage& stage, const Options& o, int M,
                 const std::vector<float>& x, const std::vector<float>& target, double* loss) {
  const int64_t rows = o.batch / M, w = o.width, n = rows * w;
  std::vector<std::vector<float>> act(M, std::vector<float>(n)), grad(M, std::vector<float>(n));
  std::vector<ringlet::Work> sends;
  stage.zeroGrads();
  if (comm.rank() == 0) {
    for (int m = 0; m < M; m++) {
      stage.forward(m, x.data() + m * n, act[m].data(), rows);
      sends.push_back(comm.sendAsync(act[m].data(), n, ringlet::DataType::kFloat32, 1, m));
    }
    for (int m = 0; m < M; m++) {
      comm.recv(grad[m].data(), n, ringlet::DataType::kFloat32, 1, 1000 + m);
      stage.backward(m, grad[m].data(), nullptr, rows);
    }
  } else {
    std::vector<float> out(n), dOut(n);
    *loss = 0;
    for (int m = 0; m < M; m++) {
      comm.recv(act[m].data(), n, ringlet::DataType::kFloat32, 0, m);
      stage.forward(m, act[m].data(), out.data(), rows);
      *loss +=
          pipeline::mseLossGrad(out.data(), target.data() + m * n, dOut.data(), rows, w, o.batch);
      stage.backward(m, dOut.data(), grad[m].data(), rows);
      sends.push_back(comm.sendAsync(grad[m].data(), n, ringlet::DataType::kFloat32, 0, 1000 + m));
    }
  }
  for (auto& s : sends) s.wait();
  stage.sgdStep(o.lr);
}

void singleStep(pipeline::MlpStage& stage, const Options& o, const std::vector<float>& x,
                const std::vector<float>& target, double* loss) {
  std::vector<float> out(o.batch * o.width), dOut(out.size());
  stage.zeroGrads();
  stage.forward(0, x.data(), out.data(), o.batch);
  *loss = pipeline::mseLossGrad(out.data(), target.data(), dOut.data(), o.batch, o.width, o.batch);
  stage.backward(0, dOut.data(), nullptr, o.batch);
  stage.sgdStep(o.lr);
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"Model-parallel MLP over two ranks with point-to-point send/recv",
               "ringlet-pipeline"};
  app.option_defaults()->always_capture_default();
  app.add_option("--mode", o.mode, "single | split | pipeline")
      ->check(CLI::IsMember({"single", "split", "pipeline"}));
  app.add_option("--micro", o.micro, "micro-batches (pipeline)")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.layers, "layers (even)")->check(CLI::PositiveNumber);
  app.add_option("--width", o.width, "layer width")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "batch rows")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--lr", o.lr, "SGD learning rate");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "ringlet: {}\n", e.what());
    return 2;
  }
  ringlet::Bootstrap boot = ringlet::Bootstrap::fromEnvironment();
  const int M = o.mode == "pipeline" ? o.micro : 1;
  const int want = o.mode == "single" ? 1 : 2;
  if (boot.size != want) {
    throw ringlet::InvalidArgument(
        fmt::format("--mode {} runs on {} rank(s), this job has {} (use ringlet-run -n {})", o.mode,
                    want, boot.size, want));
  }
  if (o.batch % M != 0 || o.layers % 2 != 0) {
    throw ringlet::InvalidArgument(
        fmt::format("--batch {} must divide into --micro {} and --layers {} must be even", o.batch,
                    M, o.layers));
  }
  const auto x = randomMatrix(o.batch * o.width, 11), target = randomMatrix(o.batch * o.width, 12);
  const int half = o.layers / 2;
  const int first = o.mode == "single" ? 0 : (boot.rank == 0 ? 0 : half);
  const int last = o.mode == "single" ? o.layers : (boot.rank == 0 ? half : o.layers);
  pipeline::MlpStage stage(first, last, o.layers, o.width, 7);
  std::optional<ringlet::Communicator> comm;
  if (want == 2) comm.emplace(ringlet::Communicator::create(boot));

  std::vector<double> ms;
  double loss = 0, firstLoss = 0;
  for (int s = 0; s < o.warmup + o.steps; s++) {
    if (comm) comm->barrier();
    auto t0 = std::chrono::steady_clock::now();
    if (comm) {
      twoRankStep(*comm, stage, o, M, x, target, &loss);
    } else {
      singleStep(stage, o, x, target, &loss);
    }
    if (comm) comm->barrier();  // the step ends when both ranks are done
    double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s == 0) firstLoss = loss;
    if (s >= o.warmup) ms.push_back(t);
  }
  double mean = 0, var = 0;
  for (double t : ms) mean += t;
  mean /= double(ms.size());
  for (double t : ms) var += (t - mean) * (t - mean);
  const double sd = ms.size() > 1 ? std::sqrt(var / double(ms.size() - 1)) : 0.0;

  // Check: rank 0 gathers the trained halves and compares with one rank trained on everything.
  double check = 0;
  if (comm) {
    std::vector<float> mine = stage.flatParams();
    if (boot.rank == 1) {
      comm->send(mine.data(), mine.size(), ringlet::DataType::kFloat32, 0, 7);
      comm->send(&loss, 1, ringlet::DataType::kFloat64, 0, 8);
      comm->send(&firstLoss, 1, ringlet::DataType::kFloat64, 0, 9);
      return 0;
    }
    std::vector<float> other(mine.size());
    comm->recv(other.data(), other.size(), ringlet::DataType::kFloat32, 1, 7);
    comm->recv(&loss, 1, ringlet::DataType::kFloat64, 1, 8);
    comm->recv(&firstLoss, 1, ringlet::DataType::kFloat64, 1, 9);
    mine.insert(mine.end(), other.begin(), other.end());
    pipeline::MlpStage ref(0, o.layers, o.layers, o.width, 7);
    double unused;
    for (int s = 0; s < o.warmup + o.steps; s++) singleStep(ref, o, x, target, &unused);
    std::vector<float> want = ref.flatParams();
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); i++) {
      num += double(mine[i] - want[i]) * (mine[i] - want[i]);
      den += double(want[i]) * want[i];
    }
    check = std::sqrt(num / den);
  }
  fmt::print(
      "mode {} micro {}: {:.2f} +- {:.2f} ms/step over {} steps ({:.0f} samples/s), loss {:.4f} "
      "-> {:.4f}{}\n",
      o.mode, M, mean, sd, ms.size(), 1000.0 * double(o.batch) / mean, firstLoss, loss,
      comm ? fmt::format(", parameters vs one rank: rel diff {:.2e}", check) : "");
  fmt::print("RESULT,{},{},{:.4f},{:.4f},{:.3e}\n", o.mode, M, mean, sd, check);
  if (comm && !(check < 1e-4)) {
    throw ringlet::MismatchError(
        fmt::format("two-rank parameters differ from one rank's by {:.3e}", check));
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
