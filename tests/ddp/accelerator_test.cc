// The Accelerate-style front of the trainer on thread ranks: gradient accumulation keeps the
// gradients of non-final micro-batches local, gatherForMetrics returns every held-out example
// once and in order, evaluation over N ranks equals one process's, the state saved mid-run
// resumes to the same parameters, and misuse is a clear error on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <mutex>
#include <thread>

#include "blas_setup.h"
#include "examples/trainer/tests/test_options.h"
#include "tests/support/ranks.h"
#include "train_loop.h"

namespace trainer {
namespace {

using namespace std::chrono_literals;

TrainOptions mlpOptions() {
  TrainOptions o;
  o.model.model = "mlp";
  o.model.mlpHidden = 16;
  o.steps = 100;
  o.lr = 1e-2;
  o.warmup = 0;
  o.batch = 8;
  o.sampler = "epoch";
  return o;
}

// Runs body(accelerator) on `world` thread ranks, each with a fresh communicator.
void onRanks(int world, const std::function<void(ringlet::Communicator&)>& body) {
  ringlet::testing::runThreadRanks(world, [&](int rank, int size,
                                              std::shared_ptr<ringlet::Store> store) {
    ringlet::CommunicatorOptions co;
    co.timeout = 20s;
    co.transport = "local";
    auto comm = ringlet::Communicator::create(ringlet::Bootstrap::forThread(rank, size, store), co);
    body(comm);
  });
}

AcceleratorOptions accumulating(int64_t k) {
  AcceleratorOptions o;
  o.gradientAccumulationSteps = k;
  return o;
}

std::vector<float> grads(Trainer& t) {
  return {t.params().grads(), t.params().grads() + t.params().numel()};
}

class AcceleratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setBlasThreads(1); }
};

// no_sync: after a micro-batch that does not end the step each rank holds its own gradients
// (different data, so they differ); after the last one every rank holds the same average.
TEST_F(AcceleratorTest, OnlyTheLastMicroBatchAllReduces) {
  constexpr int kWorld = 3, kMicro = 3;
  std::mutex mu;
  std::vector<std::vector<std::vector<float>>> seen(kMicro,
                                                    std::vector<std::vector<float>>(kWorld));
  std::vector<std::vector<bool>> syncFlags(kWorld);
  onRanks(kWorld, [&](ringlet::Communicator& comm) {
    Accelerator acc(&comm, accumulating(kMicro));
    Trainer t(mlpOptions());
    acc.prepare(t);
    EXPECT_TRUE(acc.syncGradients());  // outside accumulate(): every backward synchronizes
    int m = 0;
    for (const Batch& batch : t.nextBatches(kMicro)) {
      auto scope = acc.accumulate();
      t.forwardOn(batch, true);
      acc.backward(t);
      std::lock_guard lock(mu);
      syncFlags[comm.rank()].push_back(acc.syncGradients());
      seen[m++][comm.rank()] = grads(t);
    }
    EXPECT_TRUE(acc.syncGradients());
  });
  for (int r = 0; r < kWorld; r++) {
    EXPECT_EQ(syncFlags[r], (std::vector<bool>{false, false, true})) << "rank " << r;
  }
  for (int m = 0; m < kMicro - 1; m++) {
    EXPECT_NE(seen[m][0], seen[m][1]) << "micro-batch " << m << " was all-reduced";
    EXPECT_NE(seen[m][1], seen[m][2]) << "micro-batch " << m << " was all-reduced";
  }
  EXPECT_EQ(seen[kMicro - 1][0], seen[kMicro - 1][1]);
  EXPECT_EQ(seen[kMicro - 1][0], seen[kMicro - 1][2]);
}

// gatherForMetrics over an uneven last batch: every held-out example exactly once, in order.
TEST_F(AcceleratorTest, GatherForMetricsDropsThePaddingOfTheLastBatch) {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t limit : {23, 24, 7, 2}) {
      std::mutex mu;
      std::vector<std::vector<float>> gathered(world);
      Trainer reference(mlpOptions());
      const int64_t examples = limit;
      std::vector<int64_t> all(examples);
      for (int64_t i = 0; i < examples; i++) all[i] = i;
      const Batch want = reference.workload().evalExamples(all);
      onRanks(world, [&](ringlet::Communicator& comm) {
        Accelerator acc(&comm);
        Trainer t(mlpOptions());
        EvalLoader data(t.workload(), 4, limit);
        acc.prepare(data);
        std::vector<float> mine;
        for (int64_t i = 0; i < data.size(); i++) {
          const Batch b = data[i];
          const std::vector<float> rows = acc.gatherForMetrics(b.features, b);
          mine.insert(mine.end(), rows.begin(), rows.end());
        }
        std::lock_guard lock(mu);
        gathered[comm.rank()] = mine;
      });
      for (int r = 0; r < world; r++) {
        EXPECT_EQ(gathered[r], want.features)
            << "world " << world << ", " << limit << " examples, rank " << r;
      }
    }
  }
}

// Every rank runs the same batches of the same size (no rank leaves a collective early).
TEST_F(AcceleratorTest, EvalShardsAreEvenAcrossRanks) {
  for (int world : {2, 3, 5}) {
    std::mutex mu;
    std::vector<std::vector<int64_t>> sizes(world);
    std::vector<int64_t> padding(world);
    onRanks(world, [&](ringlet::Communicator& comm) {
      Accelerator acc(&comm);
      Trainer t(mlpOptions());
      EvalLoader data(t.workload(), 4, 13);
      acc.prepare(data);
      std::lock_guard lock(mu);
      for (int64_t i = 0; i < data.size(); i++) {
        sizes[comm.rank()].push_back(data[i].size);
        padding[comm.rank()] += data[i].padding;
      }
    });
    int64_t total = 0;
    for (int r = 0; r < world; r++) {
      EXPECT_EQ(sizes[r], sizes[0]) << "world " << world << ", rank " << r;
      for (int64_t s : sizes[r]) total += s;
      total -= padding[r];
    }
    EXPECT_EQ(total, 13) << "world " << world;
  }
}

// Held-out metrics over N ranks are those of one process (each example once).
TEST_F(AcceleratorTest, EvaluationOverRanksEqualsOneProcess) {
  TrainOptions o = mlpOptions();
  EvalResult one;
  {
    Accelerator acc(nullptr);
    Trainer t(o);
    acc.prepare(t);
    EvalLoader data(t.workload(), 16, 301);
    acc.prepare(data);
    one = evaluate(acc, t, data);
  }
  EXPECT_EQ(one.count, 301);
  for (int world : {2, 3}) {
    std::mutex mu;
    std::vector<EvalResult> results(world);
    onRanks(world, [&](ringlet::Communicator& comm) {
      Accelerator acc(&comm);
      Trainer t(o);
      acc.prepare(t);
      EvalLoader data(t.workload(), 16, 301);
      acc.prepare(data);
      EvalResult e = evaluate(acc, t, data);
      std::lock_guard lock(mu);
      results[comm.rank()] = e;
    });
    for (const EvalResult& e : results) {
      EXPECT_EQ(e.count, one.count) << "world " << world;
      EXPECT_EQ(e.correct, one.correct) << "world " << world;
      EXPECT_NEAR(e.lossSum, one.lossSum, 1e-9 * std::abs(one.lossSum)) << "world " << world;
    }
  }
}

// saveState at step 3 then loadState in a fresh run continues exactly as the uninterrupted run.
TEST_F(AcceleratorTest, SavedStateResumesToTheSameParameters) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ringlet::testing::uniqueJobId("accelerator-state"))
          .string() +
      ".ckpt";
  constexpr int kWorld = 2;
  std::mutex mu;
  std::vector<std::vector<float>> straight(kWorld), resumed(kWorld);
  auto train = [&](bool save, bool load, std::vector<std::vector<float>>& out) {
    onRanks(kWorld, [&](ringlet::Communicator& comm) {
      Accelerator acc(&comm, accumulating(2));
      Trainer t(mlpOptions());
      acc.prepare(t);
      if (load) acc.loadState(t, path);
      if (load) {
        EXPECT_EQ(t.step(), 3);
      }
      while (t.step() < 6) {
        trainStep(acc, t);
        if (save && t.step() == 3) acc.saveState(t, path);
      }
      std::lock_guard lock(mu);
      out[comm.rank()].assign(t.params().data(), t.params().data() + t.params().numel());
    });
  };
  train(true, false, straight);
  train(false, true, resumed);
  std::filesystem::remove(path);
  EXPECT_EQ(resumed[0], straight[0]);
  EXPECT_EQ(resumed[1], straight[1]);
  EXPECT_EQ(straight[0], straight[1]);
}

// A small encoder with dropout, so that every rank's random stream matters.
TrainOptions tinyBertOptions() {
  TrainOptions o = testing::tinyBertOptions("cls", 100);
  o.model.dropout = 0.2;
  o.warmup = 0;
  o.batch = 4;
  o.sampler = "epoch";
  return o;
}

// With dropout and fp16 loss scaling, 2 ranks resume bit-exactly: the state holds every rank's
// dropout stream (not only rank 0's) and the loss scale with its skipped-step count.
TEST_F(AcceleratorTest, SavedStateKeepsEveryRanksDropoutStreamAndTheLossScale) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ringlet::testing::uniqueJobId("accelerator-rng"))
          .string() +
      ".ckpt";
  constexpr int kWorld = 2, kSaveAt = 5, kEnd = 10;
  AcceleratorOptions ao;
  ao.mixedPrecision = "fp16";
  ao.initialLossScale = std::ldexp(1.0, 24);  // overflows at first: the scale comes down
  struct Run {
    std::vector<float> params;
    std::vector<double> losses;  // after the save point
    double scaleAtSave = 0;
    int64_t skippedAtSave = 0;
  };
  std::mutex mu;
  std::vector<Run> straight(kWorld), resumed(kWorld);
  auto train = [&](bool save, bool load, std::vector<Run>& out) {
    onRanks(kWorld, [&](ringlet::Communicator& comm) {
      Accelerator acc(&comm, ao);
      Trainer t(tinyBertOptions());
      acc.prepare(t);
      Run run;
      if (load) {
        acc.loadState(t, path);
        EXPECT_EQ(t.step(), kSaveAt);
        run.scaleAtSave = acc.scaler()->scale();
        run.skippedAtSave = acc.scaler()->skippedSteps();
      }
      while (t.step() < kEnd) {
        StepStats s = trainStep(acc, t);
        if (t.step() > kSaveAt) run.losses.push_back(s.loss);
        if (save && t.step() == kSaveAt) {
          acc.saveState(t, path);
          run.scaleAtSave = acc.scaler()->scale();
          run.skippedAtSave = acc.scaler()->skippedSteps();
        }
      }
      run.params.assign(t.params().data(), t.params().data() + t.params().numel());
      std::lock_guard lock(mu);
      out[comm.rank()] = run;
    });
  };
  train(true, false, straight);
  train(false, true, resumed);
  std::filesystem::remove(path);
  EXPECT_LT(straight[0].scaleAtSave, ao.initialLossScale);  // the scale did change
  EXPECT_GT(straight[0].skippedAtSave, 0);
  for (int r = 0; r < kWorld; r++) {
    EXPECT_EQ(resumed[r].scaleAtSave, straight[r].scaleAtSave) << "rank " << r;
    EXPECT_EQ(resumed[r].skippedAtSave, straight[r].skippedAtSave) << "rank " << r;
    EXPECT_EQ(resumed[r].losses, straight[r].losses) << "rank " << r;
    EXPECT_EQ(resumed[r].params, straight[r].params) << "rank " << r;
  }
}

// Rank 0 cannot write: every rank gets an error (none waits for the file).
TEST_F(AcceleratorTest, StateThatCannotBeWrittenFailsOnEveryRank) {
  std::mutex mu;
  std::vector<std::string> errors(2);
  onRanks(2, [&](ringlet::Communicator& comm) {
    Accelerator acc(&comm);
    Trainer t(mlpOptions());
    acc.prepare(t);
    try {
      acc.saveState(t, "/nonexistent-dir/state.ckpt");
    } catch (const ringlet::IoError& e) {
      std::lock_guard lock(mu);
      errors[comm.rank()] = e.what();
    }
  });
  EXPECT_NE(errors[0].find("/nonexistent-dir/state.ckpt"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 0 could not write"), std::string::npos) << errors[1];
}

TEST_F(AcceleratorTest, MisuseIsAClearError) {
  onRanks(3, [&](ringlet::Communicator& comm) {
    AcceleratorOptions split;
    split.splitBatches = true;
    Accelerator acc(&comm, split);
    Trainer t(mlpOptions());  // batch 8 does not split over 3 ranks
    try {
      acc.prepare(t);
      ADD_FAILURE() << "batch 8 over 3 ranks was split";
    } catch (const ringlet::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("global batch 8 does not divide over 3 ranks"),
                std::string::npos)
          << e.what();
    }
  });
  Accelerator one(nullptr);
  Trainer t(mlpOptions());
  t.trainStep();
  EXPECT_THROW(one.prepare(t), ringlet::InvalidArgument);  // after training
  EXPECT_THROW(Accelerator(nullptr, accumulating(0)), ringlet::InvalidArgument);
  Accelerator acc(nullptr);
  auto scope = acc.accumulate();
  EXPECT_THROW((void)acc.accumulate(), ringlet::InvalidArgument);  // scopes do not nest
}

// Trains `steps` steps on 2 thread ranks; returns rank 0's last-step loss and parameters.
struct RunResult {
  double loss = 0;
  std::vector<float> params;
  double scale = 0;
  int64_t skipped = 0;
};
RunResult trainTwoRanks(const AcceleratorOptions& ao, int64_t steps) {
  std::mutex mu;
  RunResult out;
  onRanks(2, [&](ringlet::Communicator& comm) {
    Accelerator acc(&comm, ao);
    TrainOptions o = mlpOptions();
    o.lr = 1e-2;
    o.steps = steps;  // the schedule decays to 0 at the last step
    Trainer t(o);
    acc.prepare(t);
    double loss = 0;
    while (t.step() < steps) loss = trainStep(acc, t).loss;
    if (comm.rank() != 0) return;
    std::lock_guard lock(mu);
    out.loss = loss;
    out.params.assign(t.params().data(), t.params().data() + t.params().numel());
    if (acc.scaler()) {
      out.scale = acc.scaler()->scale();
      out.skipped = acc.scaler()->skippedSteps();
    }
  });
  return out;
}

// Mixed precision, 16-bit matrix products and gradients (and with --no-autocast, 16-bit
// gradients alone): the loss stays within 2% of float32's over a run (AdamW, 300 steps), and the
// parameters do differ each time (the gradients, and then the products, really were rounded).
TEST_F(AcceleratorTest, MixedPrecisionLossStaysWithinTwoPercentOfFloat32) {
  AcceleratorOptions fp32;
  const RunResult want = trainTwoRanks(fp32, 300);
  EXPECT_LT(want.loss, 0.9);  // it learned (log 3 = 1.0986 at the start)
  for (const char* mp : {"bf16", "fp16"}) {
    AcceleratorOptions wireOnly;
    wireOnly.mixedPrecision = mp;
    wireOnly.autocast = false;
    const RunResult rounded = trainTwoRanks(wireOnly, 300);
    EXPECT_NEAR(rounded.loss, want.loss, 0.02 * want.loss) << mp;
    EXPECT_NE(rounded.params, want.params) << mp << ": the gradients were not rounded";
    AcceleratorOptions ao;
    ao.mixedPrecision = mp;
    const RunResult got = trainTwoRanks(ao, 300);
    EXPECT_NEAR(got.loss, want.loss, 0.02 * want.loss) << mp << " autocast";
    EXPECT_NE(got.params, rounded.params) << mp << ": the products were not rounded";
  }
}

// The Accelerator sets its thread's matrix-product precision while it lives, and only then.
TEST_F(AcceleratorTest, AutocastHoldsWhileTheAcceleratorLives) {
  ASSERT_EQ(matmulPrecision(), MatmulPrecision::kFloat32);
  {
    AcceleratorOptions ao;
    ao.mixedPrecision = "bf16";
    Accelerator acc(nullptr, ao);
    EXPECT_EQ(matmulPrecision(), MatmulPrecision::kBFloat16);
    {
      AcceleratorOptions off = ao;
      off.mixedPrecision = "fp16";
      off.autocast = false;
      Accelerator inner(nullptr, off);
      EXPECT_EQ(matmulPrecision(), MatmulPrecision::kBFloat16);  // left as it was
    }
    EXPECT_EQ(matmulPrecision(), MatmulPrecision::kBFloat16);
  }
  EXPECT_EQ(matmulPrecision(), MatmulPrecision::kFloat32);
  std::thread other([] {  // per thread: another rank's thread is not touched
    AcceleratorOptions ao;
    ao.mixedPrecision = "fp16";
    Accelerator acc(nullptr, ao);
    EXPECT_EQ(matmulPrecision(), MatmulPrecision::kFloat16);
  });
  other.join();
  EXPECT_EQ(matmulPrecision(), MatmulPrecision::kFloat32);
}

// fp16 loss scaling: a scale far too large overflows fp16 on the wire; those steps are skipped
// with the scale halved, until it fits, and then training proceeds.
TEST_F(AcceleratorTest, Fp16OverflowSkipsStepsAndLowersTheScale) {
  AcceleratorOptions ao;
  ao.mixedPrecision = "fp16";
  ao.initialLossScale = std::ldexp(1.0, 40);
  const RunResult got = trainTwoRanks(ao, 80);
  EXPECT_GE(got.skipped, 15);
  EXPECT_LE(got.scale, std::ldexp(1.0, 25));
  for (float p : got.params) ASSERT_TRUE(std::isfinite(p));
  EXPECT_LT(got.loss, 1.09);  // it trained after the scale came down

  GradScaler scaler(8.0, /*growthInterval=*/3);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 4.0);
  for (int i = 0; i < 3; i++) scaler.update(true);
  EXPECT_EQ(scaler.scale(), 8.0);
  EXPECT_EQ(scaler.skippedSteps(), 1);
  EXPECT_THROW(
      [] {
        AcceleratorOptions bad;
        bad.mixedPrecision = "fp8";
        Accelerator a(nullptr, bad);
      }(),
      ringlet::InvalidArgument);
}

// print(): the main process alone writes.
TEST_F(AcceleratorTest, OnlyTheMainProcessPrints) {
  ::testing::internal::CaptureStdout();
  onRanks(3, [&](ringlet::Communicator& comm) {
    Accelerator acc(&comm);
    acc.print("hello from rank {}", comm.rank());
    acc.waitForEveryone();
  });
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "hello from rank 0\n");
}

}  // namespace
}  // namespace trainer
