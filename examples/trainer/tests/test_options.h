#pragma once
// Small model sizes shared by the trainer tests.
#include "trainer.h"

namespace trainer::testing {

inline TrainOptions mlpOptions(int64_t steps) {
  TrainOptions o;
  o.model.model = "mlp";
  o.model.mlpHidden = 64;
  o.steps = steps;
  o.batch = 64;
  o.lr = 1e-2;
  o.warmup = steps / 10;
  return o;
}

inline TrainOptions tinyBertOptions(const std::string& task, int64_t steps) {
  TrainOptions o;
  o.model.model = "bert";
  o.model.task = task;
  o.model.hidden = 64;
  o.model.heads = 2;
  o.model.ffn = 128;
  o.model.layers = 2;
  o.model.seqLen = 32;
  o.model.dropout = 0.1;
  o.steps = steps;
  o.batch = 32;
  o.lr = 2e-3;
  o.warmup = steps / 10;
  return o;
}

}  // namespace trainer::testing
