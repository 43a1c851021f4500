#pragma once
// A workload is a model plus its task: it owns the parameters, draws batches and turns a batch
// into a loss. Three exist: an MLP on generated spirals, and the BERT-style encoder on masked-LM
// over the shipped corpus or on a synthetic sequence-classification task.

#include <cmath>
#include <memory>
#include <string>

#include "data.h"
#include "modules.h"

namespace trainer {

struct ModelOptions {
  std::string model = "mlp";  // mlp | bert
  std::string task;           // bert: mlm (default) | cls; mlp: spirals
  // MLP on spirals
  int64_t mlpHidden = 128;
  int64_t mlpLayers = 2;  // hidden layers
  int64_t classes = 3;
  int64_t pointsPerClass = 1000;
  double noise = 0.02;
  // Encoder
  int64_t hidden = 128;
  int64_t heads = 4;
  int64_t ffn = 512;
  int64_t layers = 2;
  int64_t seqLen = 64;
  double dropout = 0.1;
  double lnEps = 1e-12;
  std::string corpus;  // default: the shipped data/corpus.txt
};

class Workload {
 public:
  virtual ~Workload() = default;
  ParameterStore<float>& params() { return params_; }
  virtual std::string describe() const = 0;
  // A training batch of B examples drawn from rng.
  virtual Batch nextBatch(int64_t B, Rng& rng) const = 0;
  // The held-out set as numbered batches (deterministic).
  virtual int64_t evalBatchCount(int64_t B) const = 0;
  virtual Batch evalBatch(int64_t index, int64_t B) const = 0;
  // Logits [rows, classes], one row per entry of batch.labels (B rows, or B*T for masked-LM).
  virtual Tensor<float> logits(Context<float>& ctx, const Batch& batch) const = 0;
  // Mean cross-entropy over the batch's counted targets; stats gets sums and counts.
  Tensor<float> loss(Context<float>& ctx, const Batch& batch, CrossEntropyStats* stats) const {
    return crossEntropy(logits(ctx, batch), batch.labels, kIgnoreIndex, stats);
  }
  // A loss a model without learning reaches (unigram entropy for masked-LM), NaN if none.
  virtual double baselineLoss() const { return std::nan(""); }
  // Tokens per example (for tokens/s), 1 for the MLP.
  virtual int64_t tokensPerExample() const { return 1; }

  // The same data as numbered examples, for the distributed sampler and sharded evaluation.
  // Example i's content depends only on i (and, for training, on epochSeed, which varies the
  // masked-LM masks per epoch), never on which other examples share its batch.
  virtual int64_t trainSize() const = 0;
  virtual Batch trainExamples(const std::vector<int64_t>& indices, uint64_t epochSeed) const = 0;
  virtual int64_t evalSize() const = 0;
  virtual Batch evalExamples(const std::vector<int64_t>& indices) const = 0;

 protected:
  ParameterStore<float> params_;
};

// Builds the model, declares and initialises its parameters from initRng.
std::unique_ptr<Workload> makeWorkload(const ModelOptions& options, Rng& initRng);

}  // namespace trainer
