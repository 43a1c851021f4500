#include "ops.h"

#include <fmt/format.h>

#include "kernels.h"
#include "ringlet/error.h"
#include "rng.h"

namespace trainer {
namespace {

[[noreturn]] void shapeError(const char* op, const std::string& what, const Shape& a,
                             const Shape& b) {
  throw ringlet::InvalidArgument(
      fmt::format("{}: {} ({} vs {})", op, what, shapeString(a), shapeString(b)));
}

template <typename T>
int64_t rowsOf(const Tensor<T>& x) {
  return x.numel() / x.dim(-1);
}

template <typename T>
Shape withLast(const Tensor<T>& x, int64_t last) {
  Shape s = x.shape();
  s.back() = last;
  return s;
}

template <typename T>
void requireRank(const char* op, const Tensor<T>& x, int minRank) {
  if (x.rank() < minRank) {
    throw ringlet::InvalidArgument(fmt::format("{}: input of shape {} needs at least {} dims", op,
                                               shapeString(x.shape()), minRank));
  }
}

}  // namespace

template <typename T>
Tensor<T> matmul(const Tensor<T>& x, const Tensor<T>& weight) {
  requireRank("matmul", x, 1);
  if (weight.rank() != 2 || weight.dim(1) != x.dim(-1)) {
    shapeError("matmul", "input's last dim must equal weight's dim 1", x.shape(), weight.shape());
  }
  const int64_t M = rowsOf(x), K = x.dim(-1), N = weight.dim(0);
  Tensor<T> out = makeOutput<T>("matmul", withLast(x, N), {&x, &weight});
  matmulForward(out.data(), x.data(), weight.data(), static_cast<const T*>(nullptr), M, K, N);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl(), *wi = weight.impl();
    o->backward = [=] {
      matmulBackward(xi->grad, wi->grad, static_cast<T*>(nullptr), o->grad, xi->data, wi->data, M,
                     K, N);
    };
  }
  return out;
}

template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias) {
  requireRank("linear", x, 1);
  if (weight.rank() != 2 || weight.dim(1) != x.dim(-1)) {
    shapeError("linear", "input's last dim must equal weight's dim 1", x.shape(), weight.shape());
  }
  if (bias.rank() != 1 || bias.dim(0) != weight.dim(0)) {
    shapeError("linear", "bias must be [weight's dim 0]", bias.shape(), weight.shape());
  }
  const int64_t M = rowsOf(x), K = x.dim(-1), N = weight.dim(0);
  Tensor<T> out = makeOutput<T>("linear", withLast(x, N), {&x, &weight, &bias});
  matmulForward(out.data(), x.data(), weight.data(), bias.data(), M, K, N);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl(), *wi = weight.impl(), *bi = bias.impl();
    o->backward = [=] {
      matmulBackward(xi->grad, wi->grad, bi->grad, o->grad, xi->data, wi->data, M, K, N);
    };
  }
  return out;
}

template <typename T>
Tensor<T> addBias(const Tensor<T>& x, const Tensor<T>& bias) {
  requireRank("addBias", x, 1);
  if (bias.rank() != 1 || bias.dim(0) != x.dim(-1)) {
    shapeError("addBias", "bias must be [input's last dim]", x.shape(), bias.shape());
  }
  const int64_t M = rowsOf(x), N = x.dim(-1);
  Tensor<T> out = makeOutput<T>("addBias", x.shape(), {&x, &bias});
  biasForward(out.data(), x.data(), bias.data(), M, N);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl(), *bi = bias.impl();
    o->backward = [=] { biasBackward(xi->grad, bi->grad, o->grad, M, N); };
  }
  return out;
}

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.shape() != b.shape()) shapeError("add", "shapes differ", a.shape(), b.shape());
  Tensor<T> out = makeOutput<T>("add", a.shape(), {&a, &b});
  addForward(out.data(), a.data(), b.data(), a.numel());
  if (out.requiresGrad()) {
    auto *o = out.impl(), *ai = a.impl(), *bi = b.impl();
    o->backward = [=] { addBackward(ai->grad, bi->grad, o->grad, o->numel); };
  }
  return out;
}

template <typename T>
Tensor<T> gelu(const Tensor<T>& x) {
  Tensor<T> out = makeOutput<T>("gelu", x.shape(), {&x});
  geluForward(out.data(), x.data(), x.numel());
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl();
    o->backward = [=] { geluBackward(xi->grad, o->grad, xi->data, o->numel); };
  }
  return out;
}

template <typename T>
Tensor<T> tanh(const Tensor<T>& x) {
  Tensor<T> out = makeOutput<T>("tanh", x.shape(), {&x});
  tanhForward(out.data(), x.data(), x.numel());
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl();
    o->backward = [=] { tanhBackward(xi->grad, o->grad, o->data, o->numel); };
  }
  return out;
}

template <typename T>
Tensor<T> softmax(const Tensor<T>& x) {
  requireRank("softmax", x, 1);
  const int64_t rows = rowsOf(x), cols = x.dim(-1);
  Tensor<T> out = makeOutput<T>("softmax", x.shape(), {&x});
  softmaxForward(out.data(), x.data(), rows, cols);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl();
    o->backward = [=] { softmaxBackward(xi->grad, o->grad, o->data, rows, cols); };
  }
  return out;
}

template <typename T>
Tensor<T> layerNorm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                    double eps) {
  requireRank("layerNorm", x, 1);
  if (weight.rank() != 1 || weight.dim(0) != x.dim(-1)) {
    shapeError("layerNorm", "weight must be [input's last dim]", x.shape(), weight.shape());
  }
  if (bias.shape() != weight.shape()) {
    shapeError("layerNorm", "bias must match weight", bias.shape(), weight.shape());
  }
  const int64_t rows = rowsOf(x), cols = x.dim(-1);
  Tensor<T> out = makeOutput<T>("layerNorm", x.shape(), {&x, &weight, &bias});
  auto stats = std::make_shared<std::vector<T>>(2 * rows);  // mean then rstd
  layernormForward(out.data(), stats->data(), stats->data() + rows, x.data(), weight.data(),
                   bias.data(), rows, cols, eps);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl(), *wi = weight.impl(), *bi = bias.impl();
    o->backward = [=] {
      layernormBackward(xi->grad, wi->grad, bi->grad, o->grad, xi->data, wi->data, stats->data(),
                        stats->data() + rows, rows, cols);
    };
  }
  return out;
}

template <typename T>
Tensor<T> dropout(const Tensor<T>& x, double p, bool training, Rng& rng) {
  if (p < 0 || p >= 1) {
    throw ringlet::InvalidArgument(fmt::format("dropout: probability {} is not in [0, 1)", p));
  }
  if (!training || p == 0) return x;
  Tensor<T> out = makeOutput<T>("dropout", x.shape(), {&x});
  auto mask = std::make_shared<std::vector<T>>(x.numel());
  dropoutForward(out.data(), mask->data(), x.data(), x.numel(), p, rng);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl();
    o->backward = [=] { dropoutBackward(xi->grad, o->grad, mask->data(), o->numel); };
  }
  return out;
}

template <typename T>
Tensor<T> embedding(const std::vector<int32_t>& ids, const Shape& idsShape,
                    const Tensor<T>& table) {
  if (table.rank() != 2) shapeError("embedding", "table must be [V, C]", idsShape, table.shape());
  if (shapeNumel(idsShape) != static_cast<int64_t>(ids.size())) {
    shapeError("embedding", "ids do not fill their shape", idsShape, {int64_t(ids.size())});
  }
  const int64_t V = table.dim(0), C = table.dim(1);
  for (size_t i = 0; i < ids.size(); i++) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw ringlet::InvalidArgument(fmt::format(
          "embedding: id {} at position {} is outside the table's {} rows", ids[i], i, V));
    }
  }
  Shape shape = idsShape;
  shape.push_back(C);
  Tensor<T> out = makeOutput<T>("embedding", shape, {&table});
  const int64_t rows = static_cast<int64_t>(ids.size());
  embeddingForward(out.data(), ids.data(), table.data(), rows, C);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *ti = table.impl();
    o->backward = [=] { embeddingBackward(ti->grad, o->grad, ids.data(), rows, C); };
  }
  return out;
}

template <typename T>
Tensor<T> attention(const Tensor<T>& qkv, const std::vector<int32_t>& keyValid, int64_t numHeads,
                    double p, bool training, Rng& rng) {
  if (qkv.rank() != 3 || qkv.dim(2) % 3 != 0) {
    shapeError("attention", "qkv must be [B, T, 3C]", qkv.shape(), {});
  }
  const int64_t B = qkv.dim(0), T_ = qkv.dim(1), C = qkv.dim(2) / 3;
  if (numHeads <= 0 || C % numHeads != 0) {
    throw ringlet::InvalidArgument(
        fmt::format("attention: hidden size {} is not divisible by {} heads", C, numHeads));
  }
  if (static_cast<int64_t>(keyValid.size()) != B * T_) {
    shapeError("attention", "key mask must be [B, T]", qkv.shape(), {int64_t(keyValid.size())});
  }
  const bool drop = training && p > 0;
  Tensor<T> out = makeOutput<T>("attention", {B, T_, C}, {&qkv});
  auto att = std::make_shared<std::vector<T>>(B * numHeads * T_ * T_);
  auto mask = std::make_shared<std::vector<T>>(drop ? att->size() : 0);
  attentionForward(out.data(), att->data(), drop ? mask->data() : nullptr, qkv.data(),
                   keyValid.data(), B, T_, C, numHeads, p, &rng);
  if (out.requiresGrad()) {
    auto *o = out.impl(), *qi = qkv.impl();
    o->backward = [=] {
      std::vector<T> scratch(2 * T_ * T_);
      attentionBackward(qi->grad, scratch.data(), o->grad, qi->data, att->data(),
                        drop ? mask->data() : nullptr, B, T_, C, numHeads);
    };
  }
  return out;
}

template <typename T>
Tensor<T> crossEntropy(const Tensor<T>& logits, const std::vector<int32_t>& targets,
                       int32_t ignoreIndex, CrossEntropyStats* stats) {
  if (logits.rank() != 2 || logits.dim(0) != static_cast<int64_t>(targets.size())) {
    shapeError("crossEntropy", "logits must be [N, V] with N targets", logits.shape(),
               {int64_t(targets.size())});
  }
  const int64_t N = logits.dim(0), V = logits.dim(1);
  for (size_t i = 0; i < targets.size(); i++) {
    if (targets[i] != ignoreIndex && (targets[i] < 0 || targets[i] >= V)) {
      throw ringlet::InvalidArgument(fmt::format(
          "crossEntropy: target {} at row {} is outside [0, {}) and not the ignore index {}",
          targets[i], i, V, ignoreIndex));
    }
  }
  CrossEntropyStats s;
  s.lossSum =
      crossEntropySum(logits.data(), targets.data(), N, V, ignoreIndex, &s.count, &s.correct);
  if (stats != nullptr) *stats = s;
  Tensor<T> out = makeOutput<T>("crossEntropy", {}, {&logits});
  out.data()[0] = s.count > 0 ? T(s.lossSum / double(s.count)) : T(0);
  if (out.requiresGrad() && s.count > 0) {
    auto *o = out.impl(), *li = logits.impl();
    const int64_t count = s.count;
    o->backward = [=] {
      crossEntropyBackward(li->grad, li->data, targets.data(), N, V, ignoreIndex,
                           o->grad[0] / T(count));
    };
  }
  return out;
}

template <typename T>
Tensor<T> view(const Tensor<T>& x, const Shape& shape) {
  if (shapeNumel(shape) != x.numel()) shapeError("view", "element counts differ", x.shape(), shape);
  auto impl = std::make_shared<TensorImpl<T>>();
  impl->shape = shape;
  impl->numel = x.numel();
  impl->data = x.data();
  impl->op = "view";
  if (gradEnabled() && x.requiresGrad()) {
    impl->requiresGrad = true;
    impl->grad = x.grad();  // shared: consumers accumulate straight into x's gradient
  }
  impl->inputs.push_back(x.shared());  // keeps x's storage alive
  return Tensor<T>(std::move(impl));
}

template <typename T>
Tensor<T> selectToken(const Tensor<T>& x, int64_t t) {
  if (x.rank() != 3 || t < 0 || t >= x.dim(1)) {
    shapeError("selectToken", fmt::format("token {} from [B, T, C]", t), x.shape(), {});
  }
  const int64_t B = x.dim(0), T_ = x.dim(1), C = x.dim(2);
  Tensor<T> out = makeOutput<T>("selectToken", {B, C}, {&x});
  for (int64_t b = 0; b < B; b++) {
    std::copy(x.data() + (b * T_ + t) * C, x.data() + (b * T_ + t + 1) * C, out.data() + b * C);
  }
  if (out.requiresGrad()) {
    auto *o = out.impl(), *xi = x.impl();
    o->backward = [=] {
      for (int64_t b = 0; b < B; b++) {
        for (int64_t c = 0; c < C; c++) xi->grad[(b * T_ + t) * C + c] += o->grad[b * C + c];
      }
    };
  }
  return out;
}

#define INSTANTIATE(T)                                                                         \
  template Tensor<T> matmul(const Tensor<T>&, const Tensor<T>&);                               \
  template Tensor<T> linear(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&);             \
  template Tensor<T> addBias(const Tensor<T>&, const Tensor<T>&);                              \
  template Tensor<T> add(const Tensor<T>&, const Tensor<T>&);                                  \
  template Tensor<T> gelu(const Tensor<T>&);                                                   \
  template Tensor<T> tanh(const Tensor<T>&);                                                   \
  template Tensor<T> softmax(const Tensor<T>&);                                                \
  template Tensor<T> layerNorm(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, double);  \
  template Tensor<T> dropout(const Tensor<T>&, double, bool, Rng&);                            \
  template Tensor<T> embedding(const std::vector<int32_t>&, const Shape&, const Tensor<T>&);   \
  template Tensor<T> attention(const Tensor<T>&, const std::vector<int32_t>&, int64_t, double, \
                               bool, Rng&);                                                    \
  template Tensor<T> crossEntropy(const Tensor<T>&, const std::vector<int32_t>&, int32_t,      \
                                  CrossEntropyStats*);                                         \
  template Tensor<T> view(const Tensor<T>&, const Shape&);                                     \
  template Tensor<T> selectToken(const Tensor<T>&, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
