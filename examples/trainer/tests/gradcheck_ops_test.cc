// Every op's backward kernel against finite differences, in double precision.
#include <cmath>
#include <limits>
#include <vector>

#include "fast_exp.h"
#include "gradcheck.h"
#include "kernels.h"

namespace trainer::testing {
namespace {

TEST(GradCheckOps, Matmul) {
  TensorD x = randomTensor({2, 3, 5}, 1), w = randomTensor({4, 5}, 2);
  checkGradients("matmul", {x, w}, [&] { return weightedSum(matmul(x, w)); });
}

TEST(GradCheckOps, LinearFused) {
  TensorD x = randomTensor({6, 5}, 1), w = randomTensor({4, 5}, 2), b = randomTensor({4}, 3);
  checkGradients("linear", {x, w, b}, [&] { return weightedSum(linear(x, w, b)); });
}

TEST(GradCheckOps, AddBias) {
  TensorD x = randomTensor({3, 2, 4}, 1), b = randomTensor({4}, 2);
  checkGradients("addBias", {x, b}, [&] { return weightedSum(addBias(x, b)); });
}

TEST(GradCheckOps, ResidualAddWithSharedInput) {
  TensorD a = randomTensor({3, 4}, 1), b = randomTensor({3, 4}, 2);
  // a appears twice: its gradient must be the sum of both paths.
  checkGradients("add", {a, b}, [&] { return weightedSum(add(add(a, b), gelu(a))); });
}

TEST(GradCheckOps, Gelu) {
  TensorD x = randomTensor({50}, 1, 2.0);
  checkGradients("gelu", {x}, [&] { return weightedSum(gelu(x)); });
}

// The float GELU kernels (their own erf and exp) against the double ones (libm), from -60 to 60
// and at the extremes: within a few float roundings.
TEST(GradCheckOps, GeluFloatKernelsMatchDouble) {
  std::vector<double> xs;
  for (double x = -60; x <= 60; x += 0.00731) xs.push_back(x);
  for (double x : {0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, 3e38, -3e38}) xs.push_back(x);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> xf(xs.begin(), xs.end()), yf(n), df(n, 0.0f), onesF(n, 1.0f);
  std::vector<double> xd(xf.begin(), xf.end()), yd(n), dd(n, 0.0), onesD(n, 1.0);
  geluForward(yf.data(), xf.data(), n);
  geluForward(yd.data(), xd.data(), n);
  geluBackward(df.data(), onesF.data(), xf.data(), n);
  geluBackward(dd.data(), onesD.data(), xd.data(), n);
  for (int64_t i = 0; i < n; i++) {
    ASSERT_NEAR(yf[i], yd[i], 4e-7 * std::max(1.0, std::abs(yd[i]))) << "gelu(" << xd[i] << ")";
    ASSERT_NEAR(df[i], dd[i], 1e-6) << "gelu'(" << xd[i] << ")";
  }
}

// The float exp of softmax, attention and cross-entropy (arguments <= 0) against libm's.
TEST(GradCheckOps, FloatExpOfNonPositiveMatchesLibm) {
  for (double x = -100; x <= 0; x += 0.00137) {
    const float got = expNonPositive(static_cast<float>(x));
    const double want = std::exp(double(static_cast<float>(x)));
    if (x < -87.5) {
      ASSERT_EQ(got, 0.0f) << x;
    } else if (x > -87) {
      ASSERT_NEAR(got, want, 3e-7 * want) << "exp(" << x << ")";
    }
  }
  EXPECT_EQ(expNonPositive(0.0f), 1.0f);
  EXPECT_EQ(expNonPositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

TEST(GradCheckOps, Tanh) {
  TensorD x = randomTensor({20}, 1);
  checkGradients("tanh", {x}, [&] { return weightedSum(tanh(x)); });
}

TEST(GradCheckOps, Softmax) {
  TensorD x = randomTensor({4, 7}, 1, 2.0);
  checkGradients("softmax", {x}, [&] { return weightedSum(softmax(x)); });
}

TEST(GradCheckOps, LayerNormBertEps) {
  TensorD x = randomTensor({5, 8}, 1), w = randomTensor({8}, 2), b = randomTensor({8}, 3);
  checkGradients("layerNorm", {x, w, b}, [&] { return weightedSum(layerNorm(x, w, b, 1e-12)); });
}

TEST(GradCheckOps, LayerNormLargeEps) {
  TensorD x = randomTensor({3, 6}, 4, 0.1), w = randomTensor({6}, 5), b = randomTensor({6}, 6);
  checkGradients("layerNorm", {x, w, b}, [&] { return weightedSum(layerNorm(x, w, b, 1e-2)); });
}

TEST(GradCheckOps, DropoutSeeded) {
  TensorD x = randomTensor({64}, 1);
  checkGradients("dropout", {x}, [&] {
    Rng rng(7);  // the same mask on every evaluation
    return weightedSum(dropout(x, 0.3, true, rng));
  });
  Rng rng(7);
  TensorD y = dropout(x, 0.3, false, rng);  // eval: identity
  EXPECT_EQ(y.data(), x.data());
}

TEST(GradCheckOps, EmbeddingWithRepeatedIds) {
  TensorD table = randomTensor({6, 4}, 1);
  std::vector<int32_t> ids{0, 3, 3, 5, 1, 0};
  checkGradients("embedding", {table}, [&] { return weightedSum(embedding(ids, {2, 3}, table)); });
}

TEST(GradCheckOps, AttentionWithPaddingMask) {
  const int64_t B = 2, T = 5, C = 6, NH = 2;
  TensorD qkv = randomTensor({B, T, 3 * C}, 1);
  std::vector<int32_t> valid{1, 1, 1, 0, 0,   // sequence 0: two padding positions
                             1, 1, 1, 1, 1};  // sequence 1: none
  Rng unused(0);
  checkGradients("attention", {qkv},
                 [&] { return weightedSum(attention(qkv, valid, NH, 0.0, true, unused)); });
  // Padding keys get no gradient through K and V.
  for (int64_t t = 3; t < 5; t++) {
    for (int64_t c = C; c < 3 * C; c++) EXPECT_EQ(qkv.grad()[t * 3 * C + c], 0.0);
  }
}

TEST(GradCheckOps, AttentionWithDropout) {
  TensorD qkv = randomTensor({1, 4, 12}, 2);
  std::vector<int32_t> valid{1, 1, 1, 0};
  checkGradients("attention+dropout", {qkv}, [&] {
    Rng rng(11);
    return weightedSum(attention(qkv, valid, 2, 0.25, true, rng));
  });
}

TEST(GradCheckOps, CrossEntropyWithIgnoredLabels) {
  TensorD logits = randomTensor({6, 5}, 1, 2.0);
  std::vector<int32_t> targets{1, -100, 4, 0, -100, 2};
  checkGradients("crossEntropy", {logits}, [&] { return crossEntropy(logits, targets); });
  for (int64_t v = 0; v < 5; v++) {
    EXPECT_EQ(logits.grad()[1 * 5 + v], 0.0);
    EXPECT_EQ(logits.grad()[4 * 5 + v], 0.0);
  }
}

TEST(GradCheckOps, CrossEntropyAllIgnoredIsZero) {
  TensorD logits = randomTensor({2, 3}, 1);
  CrossEntropyStats stats;
  TensorD loss = crossEntropy(logits, {-100, -100}, kIgnoreIndex, &stats);
  EXPECT_EQ(loss.item(), 0.0);
  EXPECT_EQ(stats.count, 0);
}

TEST(GradCheckOps, ViewAndSelectToken) {
  TensorD x = randomTensor({2, 3, 4}, 1);
  checkGradients("view+selectToken", {x}, [&] {
    return weightedSum(add(selectToken(x, 1), view(selectToken(x, 0), {2, 4})));
  });
}

}  // namespace
}  // namespace trainer::testing
