// Batch normalization: the local op against finite differences, and SyncBatchNorm over N thread
// ranks with B rows each against one rank with N*B rows: the same outputs, the same running
// statistics, the same averaged weight and bias gradients, and input gradients that differ by
// exactly the factor N of the summed per-rank losses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd.h"
#include "batchnorm.h"
#include "gradcheck.h"
#include "params.h"
#include "ringlet/spawn.h"

namespace trainer::testing {
namespace {

// <out, g> with g[i] = rowWeight * G(globalRow(i), column): a scalar whose per-row terms are
// the same whichever rank holds the row.
TensorD rowLoss(const TensorD& out, int64_t firstRow, double rowWeight) {
  const int64_t C = out.dim(-1), rows = out.numel() / C;
  std::vector<double> g(out.numel());
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t c = 0; c < C; c++) {
      g[r * C + c] = rowWeight * std::sin(1.0 + 0.37 * double(firstRow + r) + 1.3 * double(c));
    }
  }
  TensorD weights = TensorD::fromVector({out.numel(), 1}, g, false);
  return view(matmul(view(out, {1, out.numel()}), view(weights, {1, out.numel()})), {});
}

TEST(BatchNorm, LocalGradientsMatchFiniteDifferences) {
  TensorD x = randomTensor({6, 4}, 1, 2.0);
  TensorD w = randomTensor({4}, 2);
  TensorD b = randomTensor({4}, 3);
  checkGradients("batchNorm", {x, w, b}, [&] {
    BatchNormState state(4);
    return rowLoss(batchNorm(x, w, b, state, /*training=*/true, 0.1, 1e-5, nullptr), 0, 1.0);
  });
}

TEST(BatchNorm, EvaluationUsesTheRunningStatistics) {
  TensorD x = randomTensor({5, 3}, 4);
  TensorD w = randomTensor({3}, 5);
  TensorD b = randomTensor({3}, 6);
  BatchNormState state(3);
  state.runningMean = {0.5, -1.0, 2.0};
  state.runningVar = {4.0, 0.25, 1.0};
  TensorD y = batchNorm(x, w, b, state, /*training=*/false, 0.1, 0.0, nullptr);
  for (int64_t r = 0; r < 5; r++) {
    for (int64_t c = 0; c < 3; c++) {
      const double want = (x.data()[r * 3 + c] - state.runningMean[c]) /
                              std::sqrt(state.runningVar[c]) * w.data()[c] +
                          b.data()[c];
      EXPECT_NEAR(y.data()[r * 3 + c], want, 1e-12);
    }
  }
}

TEST(BatchNorm, OneRowCannotBeNormalisedInTraining) {
  TensorD x = randomTensor({1, 3}, 7);
  BatchNormState state(3);
  EXPECT_THROW(
      batchNorm(x, randomTensor({3}, 8), randomTensor({3}, 9), state, true, 0.1, 1e-5, nullptr),
      ringlet::InvalidArgument);
}

void expectClose(const double* got, const double* want, int64_t n, double scale,
                 const std::string& what) {
  for (int64_t i = 0; i < n; i++) {
    ASSERT_NEAR(got[i] * scale, want[i], 1e-10 * std::max(1.0, std::abs(want[i])))
        << what << " element " << i;
  }
}

// The layer: ones and zeros to start, gradients through its parameters, running statistics
// moving in training and used in evaluation.
TEST(BatchNorm, LayerTrainsAndEvaluates) {
  ParameterStore<double> store;
  SyncBatchNorm<double> bn(store, "bn", 4, nullptr);
  Rng rng(1);
  store.finalize(rng);
  Context<double> ctx{store, true, rng};
  TensorD x = randomTensor({8, 4}, 21, 2.0);
  std::vector<TensorD> inputs;
  for (int i = 0; i < 2; i++) inputs.push_back(store.tensor(i));
  EXPECT_EQ(inputs[0].toVector(), std::vector<double>(4, 1.0));
  EXPECT_EQ(inputs[1].toVector(), std::vector<double>(4, 0.0));
  inputs.push_back(x);
  checkGradients("SyncBatchNorm layer", inputs, [&] { return rowLoss(bn.forward(ctx, x), 0, 1); });
  EXPECT_NE(bn.state().runningMean, std::vector<double>(4, 0.0));
  ctx.training = false;
  const BatchNormState before = bn.state();
  bn.forward(ctx, x);
  EXPECT_EQ(bn.state().runningMean, before.runningMean) << "evaluation moved the statistics";
}

class SyncBatchNormRanks : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormRanks, NRanksOfBRowsTrainAsOneRankOfNBRows) {
  const int n = GetParam();
  constexpr int64_t B = 5, C = 7;
  const TensorD x = randomTensor({n * B, C}, 11, 3.0);
  const std::vector<double> weight = randomTensor({C}, 12).toVector();
  const std::vector<double> bias = randomTensor({C}, 13).toVector();

  // The reference: one rank, every row, loss averaged over all of them.
  TensorD w = TensorD::fromVector({C}, weight, true), b = TensorD::fromVector({C}, bias, true);
  TensorD xAll = TensorD::fromVector({n * B, C}, x.toVector(), true);
  BatchNormState reference(C);
  TensorD yAll = batchNorm(xAll, w, b, reference, true, 0.1, 1e-5, nullptr);
  backward(rowLoss(yAll, 0, 1.0 / double(n * B)));

  ringlet::SpawnOptions options;
  options.communicator.timeout = std::chrono::seconds(30);
  ringlet::spawnThreads(
      n,
      [&](ringlet::Communicator& comm) {
        const int64_t first = comm.rank() * B;
        std::vector<double> mine(x.data() + first * C, x.data() + (first + B) * C);
        TensorD xr = TensorD::fromVector({B, C}, mine, true);
        TensorD wr = TensorD::fromVector({C}, weight, true);
        TensorD br = TensorD::fromVector({C}, bias, true);
        BatchNormState state(C);
        TensorD yr = batchNorm(xr, wr, br, state, true, 0.1, 1e-5, &comm);
        // Each rank's loss averages its own rows (as a data-parallel rank's does).
        backward(rowLoss(yr, first, 1.0 / double(B)));
        const std::string at = "rank " + std::to_string(comm.rank());
        expectClose(yr.data(), yAll.data() + first * C, B * C, 1.0, at + " output");
        expectClose(state.runningMean.data(), reference.runningMean.data(), C, 1.0,
                    at + " running mean");
        expectClose(state.runningVar.data(), reference.runningVar.data(), C, 1.0,
                    at + " running var");
        expectClose(xr.grad(), xAll.grad() + first * C, B * C, 1.0 / n, at + " input gradient");
        // The gradient synchronizer's part: the parameter gradients averaged over the ranks.
        std::vector<double> grads(wr.grad(), wr.grad() + C);
        grads.insert(grads.end(), br.grad(), br.grad() + C);
        comm.allreduce(grads.data(), grads.data(), grads.size(), ringlet::DataType::kFloat64,
                       ringlet::ReduceOp::kAvg);
        expectClose(grads.data(), w.grad(), C, 1.0, at + " weight gradient");
        expectClose(grads.data() + C, b.grad(), C, 1.0, at + " bias gradient");
      },
      options);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SyncBatchNormRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace trainer::testing
