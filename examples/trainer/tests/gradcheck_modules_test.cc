// Every module's gradients (parameters and inputs) against finite differences, in double
// precision; plus the gradient-ready hook's contract.
#include "gradcheck.h"
#include "modules.h"

namespace trainer::testing {
namespace {

// Parameters drawn at scale 0.3 instead of 0.02 so that every path carries a visible signal.
void randomizeParams(ParameterStore<double>& store, uint64_t seed) {
  Rng rng(seed);
  for (int64_t i = 0; i < store.numel(); i++) store.data()[i] = 0.3 * rng.normal();
}

std::vector<TensorD> allParams(const ParameterStore<double>& store) {
  std::vector<TensorD> v;
  for (int i = 0; i < store.size(); i++) v.push_back(store.tensor(i));
  return v;
}

BertConfig tinyBert() {
  BertConfig c;
  c.vocab = 11;
  c.maxSeq = 5;
  c.hidden = 8;
  c.heads = 2;
  c.ffn = 12;
  c.layers = 2;
  c.dropout = 0.2;
  c.lnEps = 1e-12;
  return c;
}

TEST(GradCheckModules, Linear) {
  ParameterStore<double> store;
  Linear<double> lin(store, "lin", 5, 3);
  Rng rng(1);
  store.finalize(rng);
  randomizeParams(store, 2);
  TensorD x = randomTensor({4, 5}, 3);
  Context<double> ctx{store, true, rng};
  auto inputs = allParams(store);
  inputs.push_back(x);
  checkGradients("Linear", inputs, [&] { return weightedSum(lin.forward(ctx, x)); });
}

TEST(GradCheckModules, MlpWithCrossEntropy) {
  ParameterStore<double> store;
  Mlp<double> mlp(store, "mlp", {2, 6, 6, 3});
  Rng rng(1);
  store.finalize(rng);
  randomizeParams(store, 2);
  TensorD x = randomTensor({5, 2}, 3);
  std::vector<int32_t> y{0, 2, 1, -100, 2};
  Context<double> ctx{store, true, rng};
  auto inputs = allParams(store);
  inputs.push_back(x);
  checkGradients("Mlp", inputs, [&] { return crossEntropy(mlp.forward(ctx, x), y); });
}

TEST(GradCheckModules, LayerNorm) {
  ParameterStore<double> store;
  LayerNorm<double> ln(store, "ln", 6, 1e-12);
  Rng rng(1);
  store.finalize(rng);
  randomizeParams(store, 2);
  TensorD x = randomTensor({3, 6}, 3);
  Context<double> ctx{store, true, rng};
  auto inputs = allParams(store);
  inputs.push_back(x);
  checkGradients("LayerNorm", inputs, [&] { return weightedSum(ln.forward(ctx, x)); });
}

TEST(GradCheckModules, MultiHeadSelfAttentionWithMask) {
  ParameterStore<double> store;
  MultiHeadSelfAttention<double> attn(store, "attn", 8, 2, 0.0);
  Rng rng(1);
  store.finalize(rng);
  randomizeParams(store, 2);
  TensorD x = randomTensor({2, 4, 8}, 3);
  std::vector<int32_t> valid{1, 1, 0, 0, 1, 1, 1, 1};
  Context<double> ctx{store, true, rng};
  auto inputs = allParams(store);
  inputs.push_back(x);
  checkGradients("MultiHeadSelfAttention", inputs,
                 [&] { return weightedSum(attn.forward(ctx, x, valid)); });
}

TEST(GradCheckModules, BertBlockWithDropoutAndMask) {
  ParameterStore<double> store;
  BertConfig config = tinyBert();
  BertBlock<double> block(store, "block", config);
  Rng init(1);
  store.finalize(init);
  randomizeParams(store, 2);
  TensorD x = randomTensor({2, 5, 8}, 3);
  std::vector<int32_t> valid{1, 1, 1, 1, 0, 1, 1, 0, 0, 0};
  auto inputs = allParams(store);
  inputs.push_back(x);
  checkGradients("BertBlock", inputs, [&] {
    Rng rng(5);  // same dropout masks every evaluation
    Context<double> ctx{store, true, rng};
    return weightedSum(block.forward(ctx, x, valid));
  });
}

TEST(GradCheckModules, BertMaskedLmWithTiedEmbeddings) {
  ParameterStore<double> store;
  BertModel<double> model(store, tinyBert());
  Rng init(1);
  store.finalize(init);
  randomizeParams(store, 2);
  std::vector<int32_t> ids{2, 7, 4, 9, 3, 2, 4, 10, 0, 0};
  std::vector<int32_t> valid{1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  std::vector<int32_t> labels{-100, -100, 5, -100, -100, -100, 8, -100, -100, -100};
  checkGradients("BertModel masked-LM", allParams(store), [&] {
    Rng rng(5);
    Context<double> ctx{store, true, rng};
    return crossEntropy(model.mlmLogits(ctx, model.encode(ctx, ids, valid, 2, 5)), labels);
  });
}

TEST(GradCheckModules, BertClassification) {
  ParameterStore<double> store;
  BertConfig config = tinyBert();
  config.mlmHead = false;
  config.clsHead = true;
  config.dropout = 0;
  BertModel<double> model(store, config);
  Rng init(1);
  store.finalize(init);
  randomizeParams(store, 2);
  std::vector<int32_t> ids{2, 7, 4, 0, 0, 2, 4, 10, 6, 0};
  std::vector<int32_t> valid{1, 1, 1, 0, 0, 1, 1, 1, 1, 0};
  checkGradients("BertModel classification", allParams(store), [&] {
    Rng rng(5);
    Context<double> ctx{store, false, rng};
    return crossEntropy(model.clsLogits(ctx, model.encode(ctx, ids, valid, 2, 5)), {1, 0});
  });
}

// The hook reports each reached parameter once, and its gradient is final when reported.
TEST(GradReadyHook, ReportsEachParameterOnceWithFinalGradient) {
  ParameterStore<double> store;
  BertModel<double> model(store, tinyBert());  // tied embeddings: used twice
  Rng init(1);
  store.finalize(init);
  std::vector<int32_t> ids{2, 7, 4, 9, 3};
  std::vector<int32_t> valid{1, 1, 1, 1, 1};
  std::vector<int32_t> labels{-100, 6, 5, -100, -100};
  Rng rng(5);
  Context<double> ctx{store, true, rng};
  TensorD loss = crossEntropy(model.mlmLogits(ctx, model.encode(ctx, ids, valid, 1, 5)), labels);
  std::vector<int> calls(store.size(), 0);
  std::vector<std::vector<double>> atReport(store.size());
  std::vector<int> order;
  backward(loss, [&](int i) {
    calls[i]++;
    order.push_back(i);
    const ParamInfo& info = store.infos()[i];
    atReport[i].assign(store.grads() + info.offset, store.grads() + info.offset + info.count);
  });
  for (int i = 0; i < store.size(); i++) {
    const ParamInfo& info = store.infos()[i];
    ASSERT_EQ(calls[i], 1) << info.name;
    std::vector<double> final(store.grads() + info.offset,
                              store.grads() + info.offset + info.count);
    EXPECT_EQ(atReport[i], final) << info.name << " changed after it was reported";
  }
  // The head's parameters complete before the first block's.
  EXPECT_EQ(store.infos()[order.front()].name.rfind("mlm.", 0), 0u)
      << store.infos()[order.front()].name;
}

}  // namespace
}  // namespace trainer::testing
