// 16-bit matrix products (kernels.h: MatmulPrecision): the rounding against ringlet's own 16-bit
// conversions, and gemm's operands, sums and outputs in the chosen precision.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels.h"
#include "ringlet/types.h"

namespace trainer {
namespace {

// Sets the thread's precision for a scope.
struct PrecisionScope {
  explicit PrecisionScope(MatmulPrecision p) { setMatmulPrecision(p); }
  ~PrecisionScope() { setMatmulPrecision(MatmulPrecision::kFloat32); }
};

std::vector<float> edgeValues() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          1.0f + 0x1p-9f,
                          1.0f + 0x1p-8f,
                          1.0f + 0x1p-11f,
                          1.0f + 3 * 0x1p-11f,
                          65504.0f,
                          65519.9f,
                          65520.0f,
                          -70000.0f,
                          0x1p-14f,
                          0x1p-15f,
                          0x1p-24f,
                          0x1p-25f,
                          0x1.8p-25f,
                          0x1p-26f,
                          3.0e38f,
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 20);
  for (int i = 0; i < 20000; i++) v.push_back(std::ldexp(mant(rng), exp(rng)));
  return v;
}

TEST(MatmulPrecision, RoundingMatchesTheLibrarys16BitTypes) {
  const std::vector<float> values = edgeValues();
  std::vector<float> b = values, h = values;
  roundTo16(MatmulPrecision::kBFloat16, b.data(), b.size());
  roundTo16(MatmulPrecision::kFloat16, h.data(), h.size());
  for (size_t i = 0; i < values.size(); i++) {
    const float wantB = static_cast<float>(ringlet::BFloat16(values[i]));
    const float wantH = static_cast<float>(ringlet::Float16(values[i]));
    EXPECT_EQ(std::bit_cast<uint32_t>(b[i]), std::bit_cast<uint32_t>(wantB))
        << "bf16 of " << values[i];
    EXPECT_EQ(std::bit_cast<uint32_t>(h[i]), std::bit_cast<uint32_t>(wantH))
        << "fp16 of " << values[i];
  }
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  roundTo16(MatmulPrecision::kFloat16, nan.data(), 1);
  EXPECT_TRUE(std::isnan(nan[0]));
  roundTo16(MatmulPrecision::kBFloat16, nan.data(), 1);
  EXPECT_TRUE(std::isnan(nan[0]));
  std::vector<float> same = values;
  roundTo16(MatmulPrecision::kFloat32, same.data(), same.size());
  EXPECT_EQ(same, values);
}

// A[M,K] filled with 1 + 2^-10 (not a bfloat16; a float16), B[K,N] with ones: each output is
// K x (1 + 2^-10) in float32 and float16 (K = 8: exact in both), K exactly in bfloat16 (the
// operand rounds to 1).
TEST(MatmulPrecision, GemmRoundsItsOperandsAndOutput) {
  constexpr int64_t M = 3, N = 4, K = 8;
  const float x = 1.0f + 0x1p-10f;
  std::vector<float> a(M * K, x), b(K * N, 1.0f);
  auto run = [&](MatmulPrecision p, bool roundOutput, float beta, float seed) {
    PrecisionScope scope(p);
    std::vector<float> c(M * N, seed);
    gemm<float>(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, beta, c.data(), N,
                roundOutput);
    return c;
  };
  for (float v : run(MatmulPrecision::kFloat32, true, 0, 0)) EXPECT_EQ(v, K * x);
  for (float v : run(MatmulPrecision::kFloat16, true, 0, 0)) EXPECT_EQ(v, K * x);
  for (float v : run(MatmulPrecision::kBFloat16, true, 0, 0)) EXPECT_EQ(v, float(K));
  // Added to C = 2^-12: float32 keeps it; a rounded 16-bit output loses it; a float32 output
  // (a master gradient) keeps it.
  const float seed = 0x1p-12f;
  for (float v : run(MatmulPrecision::kBFloat16, true, 1, seed)) EXPECT_EQ(v, float(K));
  for (float v : run(MatmulPrecision::kBFloat16, false, 1, seed)) EXPECT_EQ(v, K + seed);
  for (float v : run(MatmulPrecision::kFloat32, true, 1, seed)) EXPECT_EQ(v, K * x + seed);
}

// Strided and transposed operands (attention's views of the fused q, k, v) are read as the
// float32 product reads them: the 16-bit result equals the float32 product of operands rounded
// beforehand, with the output rounded.
TEST(MatmulPrecision, StridedAndTransposedOperandsMatchRoundingFirst) {
  constexpr int64_t M = 5, N = 7, K = 6, ld = 11;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> a(K * ld), b(N * ld);  // A stored [K, M] (transA), B stored [N, K] (transB)
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  for (MatmulPrecision p : {MatmulPrecision::kBFloat16, MatmulPrecision::kFloat16}) {
    std::vector<float> got(M * N, 0.0f), want(M * N, 0.0f);
    {
      PrecisionScope scope(p);
      gemm<float>(true, true, M, N, K, 1.0f, a.data(), ld, b.data(), ld, 0.0f, got.data(), N);
    }
    std::vector<float> a16 = a, b16 = b;
    roundTo16(p, a16.data(), a16.size());
    roundTo16(p, b16.data(), b16.size());
    gemm<float>(true, true, M, N, K, 1.0f, a16.data(), ld, b16.data(), ld, 0.0f, want.data(), N);
    roundTo16(p, want.data(), want.size());
    EXPECT_EQ(got, want);
    std::vector<float> full(M * N, 0.0f);
    gemm<float>(true, true, M, N, K, 1.0f, a.data(), ld, b.data(), ld, 0.0f, full.data(), N);
    EXPECT_NE(got, full) << "nothing was rounded";
  }
  EXPECT_EQ(matmulPrecision(), MatmulPrecision::kFloat32);
}

}  // namespace
}  // namespace trainer
