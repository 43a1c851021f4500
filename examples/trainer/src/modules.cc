#include "modules.h"

#include <fmt/format.h>

#include "ringlet/error.h"

namespace trainer {

template <typename T>
Linear<T>::Linear(ParameterStore<T>& store, const std::string& name, int64_t in, int64_t out)
    : weight_(store.add(name + ".weight", {out, in}, Init::kNormal002, true)),
      bias_(store.add(name + ".bias", {out}, Init::kZeros, false)) {}

template <typename T>
Tensor<T> Linear<T>::forward(Context<T>& ctx, const Tensor<T>& x) const {
  return linear(x, ctx.params.tensor(weight_), ctx.params.tensor(bias_));
}

template <typename T>
LayerNorm<T>::LayerNorm(ParameterStore<T>& store, const std::string& name, int64_t dim, double eps)
    : weight_(store.add(name + ".weight", {dim}, Init::kOnes, false)),
      bias_(store.add(name + ".bias", {dim}, Init::kZeros, false)),
      eps_(eps) {}

template <typename T>
Tensor<T> LayerNorm<T>::forward(Context<T>& ctx, const Tensor<T>& x) const {
  return layerNorm(x, ctx.params.tensor(weight_), ctx.params.tensor(bias_), eps_);
}

template <typename T>
Mlp<T>::Mlp(ParameterStore<T>& store, const std::string& name, const std::vector<int64_t>& sizes) {
  if (sizes.size() < 2) {
    throw ringlet::InvalidArgument(
        fmt::format("Mlp {}: needs at least input and output sizes, got {}", name, sizes.size()));
  }
  for (size_t i = 0; i + 1 < sizes.size(); i++) {
    layers_.emplace_back(store, fmt::format("{}.fc{}", name, i), sizes[i], sizes[i + 1]);
  }
}

template <typename T>
Tensor<T> Mlp<T>::forward(Context<T>& ctx, const Tensor<T>& x) const {
  Tensor<T> h = x;
  for (size_t i = 0; i < layers_.size(); i++) {
    h = layers_[i].forward(ctx, h);
    if (i + 1 < layers_.size()) h = gelu(h);
  }
  return h;
}

template <typename T>
MultiHeadSelfAttention<T>::MultiHeadSelfAttention(ParameterStore<T>& store, const std::string& name,
                                                  int64_t hidden, int64_t heads,
                                                  double attentionDropout)
    : qkv_(store, name + ".qkv", hidden, 3 * hidden),
      proj_(store, name + ".proj", hidden, hidden),
      heads_(heads),
      dropout_(attentionDropout) {
  if (heads <= 0 || hidden % heads != 0) {
    throw ringlet::InvalidArgument(
        fmt::format("{}: hidden size {} is not divisible by {} heads", name, hidden, heads));
  }
}

template <typename T>
Tensor<T> MultiHeadSelfAttention<T>::forward(Context<T>& ctx, const Tensor<T>& x,
                                             const std::vector<int32_t>& keyValid) const {
  Tensor<T> qkv = qkv_.forward(ctx, x);
  Tensor<T> y = attention(qkv, keyValid, heads_, dropout_, ctx.training, ctx.rng);
  return proj_.forward(ctx, y);
}

template <typename T>
BertBlock<T>::BertBlock(ParameterStore<T>& store, const std::string& name, const BertConfig& config)
    : attn_(store, name + ".attn", config.hidden, config.heads, config.dropout),
      ln1_(store, name + ".ln1", config.hidden, config.lnEps),
      fc1_(store, name + ".fc1", config.hidden, config.ffn),
      fc2_(store, name + ".fc2", config.ffn, config.hidden),
      ln2_(store, name + ".ln2", config.hidden, config.lnEps),
      dropout_(config.dropout) {}

template <typename T>
Tensor<T> BertBlock<T>::forward(Context<T>& ctx, const Tensor<T>& x,
                                const std::vector<int32_t>& keyValid) const {
  Tensor<T> a = dropout(attn_.forward(ctx, x, keyValid), dropout_, ctx.training, ctx.rng);
  Tensor<T> h = ln1_.forward(ctx, add(x, a));
  Tensor<T> f = fc2_.forward(ctx, gelu(fc1_.forward(ctx, h)));
  f = dropout(f, dropout_, ctx.training, ctx.rng);
  return ln2_.forward(ctx, add(h, f));
}

template <typename T>
BertModel<T>::BertModel(ParameterStore<T>& store, const BertConfig& config)
    : config_(config),
      wordEmb_(store.add("emb.word", {config.vocab, config.hidden}, Init::kNormal002, true)),
      posEmb_(store.add("emb.pos", {config.maxSeq, config.hidden}, Init::kNormal002, true)),
      embLn_(store, "emb.ln", config.hidden, config.lnEps) {
  for (int64_t i = 0; i < config.layers; i++) {
    blocks_.emplace_back(store, fmt::format("block{}", i), config);
  }
  if (config.mlmHead) {
    mlmDense_ = std::make_unique<Linear<T>>(store, "mlm.dense", config.hidden, config.hidden);
    mlmLn_ = std::make_unique<LayerNorm<T>>(store, "mlm.ln", config.hidden, config.lnEps);
    mlmBias_ = store.add("mlm.bias", {config.vocab}, Init::kZeros, false);
  }
  if (config.clsHead) {
    pooler_ = std::make_unique<Linear<T>>(store, "cls.pooler", config.hidden, config.hidden);
    classifier_ =
        std::make_unique<Linear<T>>(store, "cls.classifier", config.hidden, config.numClasses);
  }
}

template <typename T>
Tensor<T> BertModel<T>::encode(Context<T>& ctx, const std::vector<int32_t>& ids,
                               const std::vector<int32_t>& keyValid, int64_t B, int64_t T_) const {
  if (T_ > config_.maxSeq) {
    throw ringlet::InvalidArgument(fmt::format(
        "BertModel: sequence length {} exceeds the position table's {}", T_, config_.maxSeq));
  }
  std::vector<int32_t> positions(B * T_);
  for (int64_t i = 0; i < B * T_; i++) positions[i] = static_cast<int32_t>(i % T_);
  Tensor<T> x = add(embedding(ids, {B, T_}, ctx.params.tensor(wordEmb_)),
                    embedding(positions, {B, T_}, ctx.params.tensor(posEmb_)));
  x = dropout(embLn_.forward(ctx, x), config_.dropout, ctx.training, ctx.rng);
  for (const BertBlock<T>& block : blocks_) x = block.forward(ctx, x, keyValid);
  return x;
}

template <typename T>
Tensor<T> BertModel<T>::mlmLogits(Context<T>& ctx, const Tensor<T>& hidden) const {
  if (!mlmDense_) throw ringlet::InvalidArgument("BertModel: built without the masked-LM head");
  Tensor<T> h = view(hidden, {hidden.numel() / config_.hidden, config_.hidden});
  h = mlmLn_->forward(ctx, gelu(mlmDense_->forward(ctx, h)));
  return linear(h, ctx.params.tensor(wordEmb_), ctx.params.tensor(mlmBias_));
}

template <typename T>
Tensor<T> BertModel<T>::clsLogits(Context<T>& ctx, const Tensor<T>& hidden) const {
  if (!pooler_) throw ringlet::InvalidArgument("BertModel: built without the classification head");
  Tensor<T> pooled = tanh(pooler_->forward(ctx, selectToken(hidden, 0)));
  return classifier_->forward(ctx, pooled);
}

#define INSTANTIATE(T)                      \
  template class Linear<T>;                 \
  template class LayerNorm<T>;              \
  template class Mlp<T>;                    \
  template class MultiHeadSelfAttention<T>; \
  template class BertBlock<T>;              \
  template class BertModel<T>;
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

}  // namespace trainer
