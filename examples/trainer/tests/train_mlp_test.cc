// The MLP learns the three interleaved spirals: >= 95% held-out accuracy.
#include <gtest/gtest.h>

#include "test_options.h"

namespace trainer::testing {
namespace {

TEST(TrainMlp, SpiralsReach95PercentHeldOutAccuracy) {
  Trainer t(mlpOptions(600));
  EvalResult before = t.evaluate();
  double firstLoss = t.trainStep().loss;
  while (t.step() < t.options().steps) t.trainStep();
  EvalResult after = t.evaluate();
  std::printf("spirals: eval loss %.4f -> %.4f, accuracy %.2f%% -> %.2f%% (first step loss %.4f)\n",
              before.meanLoss(), after.meanLoss(), 100 * before.accuracy(), 100 * after.accuracy(),
              firstLoss);
  EXPECT_EQ(after.count, 750);  // the whole held-out set, counted once
  EXPECT_GE(after.accuracy(), 0.95);
  EXPECT_LT(after.meanLoss(), 0.5 * before.meanLoss());
}

TEST(TrainMlp, SgdWithMomentumAlsoLearns) {
  TrainOptions o = mlpOptions(600);
  o.optimizer = "sgd";
  o.lr = 0.3;
  o.weightDecay = 0;
  Trainer t(o);
  while (t.step() < o.steps) t.trainStep();
  EXPECT_GE(t.evaluate().accuracy(), 0.9);
}

}  // namespace
}  // namespace trainer::testing
