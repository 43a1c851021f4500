#include "models.h"

#include <fmt/format.h>

#include "ringlet/error.h"

namespace trainer {
namespace {

class SpiralsMlp final : public Workload {
 public:
  SpiralsMlp(const ModelOptions& o, Rng& initRng)
      : options_(o),
        train_(makeSpirals(o.pointsPerClass, o.classes, o.noise, 1234)),
        test_(makeSpirals(o.pointsPerClass / 4, o.classes, o.noise, 5678)),
        mlp_(params_, "mlp", sizes(o)) {
    params_.finalize(initRng);
  }
  std::string describe() const override {
    return fmt::format("MLP 2-{}x{}-{} on {} interleaved spirals ({} points, noise {})",
                       options_.mlpHidden, options_.mlpLayers, options_.classes, options_.classes,
                       train_.n, options_.noise);
  }
  Batch nextBatch(int64_t B, Rng& rng) const override { return spiralBatch(train_, B, rng); }
  int64_t evalBatchCount(int64_t B) const override { return (test_.n + B - 1) / B; }
  Batch evalBatch(int64_t index, int64_t B) const override {
    return spiralSlice(test_, index * B, B);
  }
  int64_t trainSize() const override { return train_.n; }
  Batch trainExamples(const std::vector<int64_t>& indices, uint64_t) const override {
    return spiralRows(train_, indices);
  }
  int64_t evalSize() const override { return test_.n; }
  Batch evalExamples(const std::vector<int64_t>& indices) const override {
    return spiralRows(test_, indices);
  }
  Tensor<float> logits(Context<float>& ctx, const Batch& batch) const override {
    auto x = Tensor<float>::fromVector({batch.size, 2}, batch.features, false);
    return mlp_.forward(ctx, x);
  }

 private:
  static std::vector<int64_t> sizes(const ModelOptions& o) {
    std::vector<int64_t> s{2};
    for (int64_t i = 0; i < o.mlpLayers; i++) s.push_back(o.mlpHidden);
    s.push_back(o.classes);
    return s;
  }
  ModelOptions options_;
  SpiralSet train_, test_;
  Mlp<float> mlp_;
};

BertConfig bertConfig(const ModelOptions& o, int64_t vocab, bool mlm) {
  BertConfig c;
  c.vocab = vocab;
  c.maxSeq = o.seqLen;
  c.hidden = o.hidden;
  c.heads = o.heads;
  c.ffn = o.ffn;
  c.layers = o.layers;
  c.dropout = o.dropout;
  c.lnEps = o.lnEps;
  c.numClasses = 2;
  c.mlmHead = mlm;
  c.clsHead = !mlm;
  return c;
}

class BertMlm final : public Workload {
 public:
  BertMlm(const ModelOptions& o, Rng& initRng)
      : corpus_(loadCorpus(o.corpus.empty() ? defaultCorpusPath() : o.corpus)),
        model_(params_, bertConfig(o, corpus_.tokenizer.vocabSize(), true)) {
    params_.finalize(initRng);
  }
  std::string describe() const override {
    const BertConfig& c = model_.config();
    return fmt::format(
        "BERT encoder {} layers, hidden {}, {} heads, FFN {}, seq {}, masked-LM on {} corpus "
        "tokens (vocab {}, unigram entropy {:.3f} nats)",
        c.layers, c.hidden, c.heads, c.ffn, c.maxSeq, corpus_.train.size(), c.vocab,
        corpus_.unigramEntropy);
  }
  Batch nextBatch(int64_t B, Rng& rng) const override {
    Batch b = textWindows(corpus_.train, B, model_.config().maxSeq, rng);
    maskTokens(b, model_.config().vocab, rng);
    return b;
  }
  int64_t evalBatchCount(int64_t B) const override {
    int64_t windows = int64_t(corpus_.heldOut.size()) / (model_.config().maxSeq - 2);
    return std::max<int64_t>(1, windows / B);
  }
  Batch evalBatch(int64_t index, int64_t B) const override {
    Batch b = textWindowsAt(corpus_.heldOut, index * B, B, model_.config().maxSeq);
    Rng rng(1000003 + index);  // the same masks every evaluation
    maskTokens(b, model_.config().vocab, rng);
    return b;
  }
  Tensor<float> logits(Context<float>& ctx, const Batch& batch) const override {
    Tensor<float> h = model_.encode(ctx, batch.ids, batch.keyValid, batch.size, batch.seqLen);
    return model_.mlmLogits(ctx, h);
  }
  double baselineLoss() const override { return corpus_.unigramEntropy; }
  int64_t tokensPerExample() const override { return model_.config().maxSeq; }
  // Non-overlapping windows; masks drawn per example from (epochSeed, index).
  int64_t trainSize() const override {
    return std::max<int64_t>(1, int64_t(corpus_.train.size()) / (model_.config().maxSeq - 2));
  }
  Batch trainExamples(const std::vector<int64_t>& indices, uint64_t epochSeed) const override {
    return windows(corpus_.train, indices, epochSeed);
  }
  int64_t evalSize() const override {
    return std::max<int64_t>(1, int64_t(corpus_.heldOut.size()) / (model_.config().maxSeq - 2));
  }
  Batch evalExamples(const std::vector<int64_t>& indices) const override {
    return windows(corpus_.heldOut, indices, 1000003);
  }

 private:
  Batch windows(const std::vector<int32_t>& stream, const std::vector<int64_t>& indices,
                uint64_t seed) const {
    Batch batch;
    for (int64_t i : indices) {
      Batch one = textWindowsAt(stream, i, 1, model_.config().maxSeq);
      Rng rng(exampleSeed(seed, i));
      maskTokens(one, model_.config().vocab, rng);
      appendBatch(batch, one);
    }
    return batch;
  }
  TextCorpus corpus_;
  BertModel<float> model_;
};

class BertCls final : public Workload {
 public:
  BertCls(const ModelOptions& o, Rng& initRng)
      : model_(params_, bertConfig(o, kSyntheticVocab, false)) {
    params_.finalize(initRng);
  }
  std::string describe() const override {
    const BertConfig& c = model_.config();
    return fmt::format(
        "BERT encoder {} layers, hidden {}, {} heads, FFN {}, seq {}, synthetic classification "
        "(do group-A tokens outnumber group-B tokens?)",
        c.layers, c.hidden, c.heads, c.ffn, c.maxSeq);
  }
  Batch nextBatch(int64_t B, Rng& rng) const override {
    return syntheticClassification(B, model_.config().maxSeq, rng);
  }
  int64_t evalBatchCount(int64_t B) const override { return std::max<int64_t>(1, 512 / B); }
  Batch evalBatch(int64_t index, int64_t B) const override {
    Rng rng(2000003 + index);
    return syntheticClassification(B, model_.config().maxSeq, rng);
  }
  Tensor<float> logits(Context<float>& ctx, const Batch& batch) const override {
    Tensor<float> h = model_.encode(ctx, batch.ids, batch.keyValid, batch.size, batch.seqLen);
    return model_.clsLogits(ctx, h);
  }
  int64_t tokensPerExample() const override { return model_.config().maxSeq; }
  // A fixed synthetic set: example i is drawn from its own seed.
  int64_t trainSize() const override { return 65536; }
  Batch trainExamples(const std::vector<int64_t>& indices, uint64_t) const override {
    return examples(indices, 3000017);
  }
  int64_t evalSize() const override { return 512; }
  Batch evalExamples(const std::vector<int64_t>& indices) const override {
    return examples(indices, 2000003);
  }

 private:
  Batch examples(const std::vector<int64_t>& indices, uint64_t seed) const {
    Batch batch;
    for (int64_t i : indices) {
      Rng rng(exampleSeed(seed, i));
      appendBatch(batch, syntheticClassification(1, model_.config().maxSeq, rng));
    }
    return batch;
  }
  BertModel<float> model_;
};

}  // namespace

std::unique_ptr<Workload> makeWorkload(const ModelOptions& options, Rng& initRng) {
  if (options.model == "mlp") {
    if (!options.task.empty() && options.task != "spirals") {
      throw ringlet::InvalidArgument(
          fmt::format("--task {} is not a task of --model mlp (spirals)", options.task));
    }
    return std::make_unique<SpiralsMlp>(options, initRng);
  }
  if (options.model == "bert") {
    if (options.task.empty() || options.task == "mlm") {
      return std::make_unique<BertMlm>(options, initRng);
    }
    if (options.task == "cls") return std::make_unique<BertCls>(options, initRng);
    throw ringlet::InvalidArgument(
        fmt::format("--task {} is not a task of --model bert (mlm or cls)", options.task));
  }
  throw ringlet::InvalidArgument(fmt::format("--model {} is not mlp or bert", options.model));
}

}  // namespace trainer
