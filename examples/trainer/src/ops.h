#pragma once
// Differentiable ops: each checks its shapes (an error names the op and both shapes), runs the
// forward kernel and, when gradients are on, records the backward kernel as a closure.

#include <cstdint>
#include <vector>

#include "tensor.h"

namespace trainer {

class Rng;

// x[..., K] · weight[N, K]ᵀ -> [..., N] (weight stored like torch.nn.Linear).
template <typename T>
Tensor<T> matmul(const Tensor<T>& x, const Tensor<T>& weight);
// matmul + bias[N], fused.
template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias);
// x[..., N] + bias[N]
template <typename T>
Tensor<T> addBias(const Tensor<T>& x, const Tensor<T>& bias);
// a + b, same shapes (residual connection).
template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b);
template <typename T>
Tensor<T> gelu(const Tensor<T>& x);
template <typename T>
Tensor<T> tanh(const Tensor<T>& x);
// Softmax over the last dimension.
template <typename T>
Tensor<T> softmax(const Tensor<T>& x);
// LayerNorm over the last dimension with weight and bias of that size.
template <typename T>
Tensor<T> layerNorm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, double eps);
// Inverted dropout with probability p, masks drawn from rng; identity when !training or p == 0.
template <typename T>
Tensor<T> dropout(const Tensor<T>& x, double p, bool training, Rng& rng);
// Rows of table[V, C] picked by ids (shape idsShape) -> idsShape + [C]. Ids out of range throw.
template <typename T>
Tensor<T> embedding(const std::vector<int32_t>& ids, const Shape& idsShape, const Tensor<T>& table);
// Self-attention core: qkv[B, T, 3C] -> [B, T, C] with numHeads heads; keyValid[B*T] (1 = real
// token, 0 = padding). Attention-probability dropout p applies when training.
template <typename T>
Tensor<T> attention(const Tensor<T>& qkv, const std::vector<int32_t>& keyValid, int64_t numHeads,
                    double p, bool training, Rng& rng);

struct CrossEntropyStats {
  double lossSum = 0;   // sum of per-row losses over counted rows
  int64_t count = 0;    // rows whose target is not ignoreIndex
  int64_t correct = 0;  // counted rows whose arg-max is the target
};
inline constexpr int32_t kIgnoreIndex = -100;
// Mean cross-entropy of logits[N, V] over rows whose target is not ignoreIndex (0 when none).
template <typename T>
Tensor<T> crossEntropy(const Tensor<T>& logits, const std::vector<int32_t>& targets,
                       int32_t ignoreIndex = kIgnoreIndex, CrossEntropyStats* stats = nullptr);

// Same data, new shape (numel must match); gradients flow through the shared buffer.
template <typename T>
Tensor<T> view(const Tensor<T>& x, const Shape& shape);
// x[B, T, C] -> x[:, t, :] as [B, C] (the [CLS] token for classification).
template <typename T>
Tensor<T> selectToken(const Tensor<T>& x, int64_t t);

}  // namespace trainer
