// The encoder learns: masked-LM held-out loss clearly below the corpus's unigram entropy, and
// >= 90% accuracy on the synthetic classification task. Small sizes (hidden 64, 2 layers).
#include <gtest/gtest.h>

#include "test_options.h"

namespace trainer::testing {
namespace {

TEST(TrainBert, MaskedLmFallsClearlyBelowUnigramEntropy) {
  TrainOptions o = tinyBertOptions("mlm", 300);
  o.lr = 5e-3;
  o.warmup = 30;
  o.model.dropout = 0.0;
  Trainer t(o);
  const double baseline = t.workload().baselineLoss();
  EvalResult before = t.evaluate(8);
  while (t.step() < t.options().steps) t.trainStep();
  EvalResult after = t.evaluate(8);
  std::printf("masked-LM: eval loss %.4f -> %.4f (unigram entropy %.4f), accuracy %.2f%%\n",
              before.meanLoss(), after.meanLoss(), baseline, 100 * after.accuracy());
  EXPECT_GT(before.meanLoss(), baseline);
  EXPECT_LT(after.meanLoss(), baseline - 0.2);
}

TEST(TrainBert, SyntheticClassificationReaches90Percent) {
  TrainOptions o = tinyBertOptions("cls", 300);
  o.model.dropout = 0.0;
  Trainer t(o);
  while (t.step() < o.steps) t.trainStep();
  EvalResult after = t.evaluate();
  std::printf("classification: eval loss %.4f, accuracy %.2f%% over %lld sequences\n",
              after.meanLoss(), 100 * after.accuracy(), static_cast<long long>(after.count));
  EXPECT_GE(after.accuracy(), 0.90);
}

}  // namespace
}  // namespace trainer::testing
