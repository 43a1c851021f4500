#pragma once
// Modules: each declares its parameters in a ParameterStore when built and reads them back
// through the store in forward(). Initialisation: weights N(0, 0.02), biases 0, LayerNorm
// weight 1; biases and LayerNorm parameters get no weight decay.

#include <memory>
#include <string>
#include <vector>

#include "ops.h"
#include "params.h"

namespace trainer {

// What forward() needs besides its inputs.
template <typename T>
struct Context {
  ParameterStore<T>& params;
  bool training = true;  // dropout on
  Rng& rng;              // dropout masks
};

template <typename T>
class Linear {
 public:
  Linear(ParameterStore<T>& store, const std::string& name, int64_t in, int64_t out);
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x) const;  // [..., in] -> [..., out]

 private:
  int weight_, bias_;
};

template <typename T>
class LayerNorm {
 public:
  LayerNorm(ParameterStore<T>& store, const std::string& name, int64_t dim, double eps);
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x) const;

 private:
  int weight_, bias_;
  double eps_;
};

// Linear layers with GELU between them: sizes = {in, hidden..., out}.
template <typename T>
class Mlp {
 public:
  Mlp(ParameterStore<T>& store, const std::string& name, const std::vector<int64_t>& sizes);
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x) const;

 private:
  std::vector<Linear<T>> layers_;
};

template <typename T>
class MultiHeadSelfAttention {
 public:
  MultiHeadSelfAttention(ParameterStore<T>& store, const std::string& name, int64_t hidden,
                         int64_t heads, double attentionDropout);
  // x[B, T, C], keyValid[B*T] (0 = padding) -> [B, T, C]
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x,
                    const std::vector<int32_t>& keyValid) const;

 private:
  Linear<T> qkv_, proj_;
  int64_t heads_;
  double dropout_;
};

struct BertConfig {
  int64_t vocab = 30522;
  int64_t maxSeq = 512;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t ffn = 3072;
  int64_t layers = 12;
  double dropout = 0.1;  // hidden and attention-probability dropout
  double lnEps = 1e-12;
  int64_t numClasses = 2;
  bool mlmHead = true;   // build the masked-LM head
  bool clsHead = false;  // build the sequence-classification head
};

// Post-LN BERT encoder layer: attention -> dropout -> add & LayerNorm -> FFN (GELU) -> dropout
// -> add & LayerNorm.
template <typename T>
class BertBlock {
 public:
  BertBlock(ParameterStore<T>& store, const std::string& name, const BertConfig& config);
  Tensor<T> forward(Context<T>& ctx, const Tensor<T>& x,
                    const std::vector<int32_t>& keyValid) const;

 private:
  MultiHeadSelfAttention<T> attn_;
  LayerNorm<T> ln1_;
  Linear<T> fc1_, fc2_;
  LayerNorm<T> ln2_;
  double dropout_;
};

// Token + position embeddings, LayerNorm, dropout, K blocks; a masked-LM head (dense, GELU,
// LayerNorm, decoder tied to the token embeddings plus a bias) and a classification head
// (pooler dense + tanh on [CLS], then a linear classifier).
template <typename T>
class BertModel {
 public:
  BertModel(ParameterStore<T>& store, const BertConfig& config);
  const BertConfig& config() const { return config_; }
  // ids[B*T], keyValid[B*T] -> hidden states [B, T, C]
  Tensor<T> encode(Context<T>& ctx, const std::vector<int32_t>& ids,
                   const std::vector<int32_t>& keyValid, int64_t B, int64_t T_) const;
  Tensor<T> mlmLogits(Context<T>& ctx, const Tensor<T>& hidden) const;  // -> [B*T, V]
  Tensor<T> clsLogits(Context<T>& ctx, const Tensor<T>& hidden) const;  // -> [B, classes]

 private:
  BertConfig config_;
  int wordEmb_, posEmb_;
  LayerNorm<T> embLn_;
  std::vector<BertBlock<T>> blocks_;
  std::unique_ptr<Linear<T>> mlmDense_;
  std::unique_ptr<LayerNorm<T>> mlmLn_;
  int mlmBias_ = -1;
  std::unique_ptr<Linear<T>> pooler_, classifier_;
};

}  // namespace trainer
