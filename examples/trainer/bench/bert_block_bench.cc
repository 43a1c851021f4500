// Forward + backward of one BERT-base-shaped encoder block (hidden 768, 12 heads, FFN 3072,
// sequence 128, batch 8) next to SGEMM of the block's largest GEMM shape, both through the
// same BLAS in the same run, at 1 and 2 BLAS threads. Counters: GFLOP/s (GEMM flops only for
// the block: 6 * tokens * 12 C^2 for the projections and FFN plus 6 * B * T^2 * C for the
// attention products) and tokens/s.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <vector>

#include "autograd.h"
#include "blas_setup.h"
#include "kernels.h"
#include "modules.h"
#include "tensor.h"

namespace {

constexpr int64_t kB = 8, kT = 128, kC = 768, kHeads = 12, kFfn = 3072;

double blockFlops() {
  const double tokens = double(kB * kT);
  const double linear = 2.0 * tokens * (3.0 * kC * kC + kC * kC + 2.0 * kC * kFfn);
  const double attn = 2.0 * 2.0 * double(kB) * kT * kT * kC;
  return 3.0 * (linear + attn);  // backward costs two forwards
}

void BM_Sgemm(benchmark::State& state) {
  trainer::setBlasThreads(static_cast<int>(state.range(0)));
  const int64_t M = kB * kT, N = kFfn, K = kC;  // the FFN's first GEMM
  std::vector<float> a(M * K, 0.5f), b(N * K, 0.25f), c(M * N);
  for (auto _ : state) {
    trainer::gemm<float>(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_BertBlockForwardBackward(benchmark::State& state) {
  trainer::setBlasThreads(static_cast<int>(state.range(0)));
  trainer::BertConfig config;
  config.hidden = kC;
  config.heads = kHeads;
  config.ffn = kFfn;
  config.maxSeq = kT;
  trainer::ParameterStore<float> store;
  trainer::BertBlock<float> block(store, "block", config);
  trainer::Rng rng(1);
  store.finalize(rng);
  std::vector<float> xs(kB * kT * kC);
  for (float& v : xs) v = float(rng.normal());
  auto x = trainer::Tensor<float>::fromVector({kB, kT, kC}, xs, true);
  std::vector<int32_t> valid(kB * kT, 1);
  for (int64_t t = 100; t < kT; t++) valid[t] = 0;  // one padded sequence
  std::vector<int32_t> targets(kB * kT);
  for (size_t i = 0; i < targets.size(); i++) targets[i] = static_cast<int32_t>(i % kC);
  for (auto _ : state) {
    store.zeroGrads();
    trainer::Context<float> ctx{store, true, rng};
    auto y = block.forward(ctx, x, valid);
    auto loss = trainer::crossEntropy(trainer::view(y, {kB * kT, kC}), targets);
    trainer::backward(loss);
    benchmark::DoNotOptimize(store.grads());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(blockFlops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(double(kB * kT), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Sgemm)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_BertBlockForwardBackward)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);

}  // namespace

int main(int argc, char** argv) {
  std::string note;
  trainer::maybeReexecWithFasterBlas(argv, &note);
  trainer::keepFreedTensorMemory();
  fmt::print("{}\n", note);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
