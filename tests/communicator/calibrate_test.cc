// The calibration's guard against a disturbed start (src/core/calibrate.h): made-up
// measurements, so nothing here depends on the machine.
#include <gtest/gtest.h>

#include <vector>

#include "src/core/calibrate.h"

namespace ringlet::detail {
namespace {

// Measurements that return the next alpha of `alphas` (the last one again once they run out),
// and later 8-byte shifts that return the next of `shifts`; counts the calls.
struct Script {
  std::vector<double> alphas;
  std::vector<double> shifts;
  size_t measured = 0;
  size_t shifted = 0;

  CostModel run() {
    return steadyModel(
        [&] {
          CostModel model;
          model.alpha = alphas[std::min(measured++, alphas.size() - 1)];
          return model;
        },
        [&] { return shifts[std::min(shifted++, shifts.size() - 1)]; });
  }
};

TEST(SteadyModel, ASteadyStartIsMeasuredOnce) {
  Script s{.alphas = {0.08e-6}, .shifts = {0.07e-6}};
  EXPECT_DOUBLE_EQ(s.run().alpha, 0.08e-6);
  EXPECT_EQ(s.measured, 1u);
}

TEST(SteadyModel, ADisturbedStartIsMeasuredAgain) {
  // Two ranks on one core at first: every shift a switch between processes (13 us), then 0.07.
  Script s{.alphas = {13e-6, 0.07e-6}, .shifts = {0.07e-6}};
  EXPECT_DOUBLE_EQ(s.run().alpha, 0.07e-6);
  EXPECT_EQ(s.measured, 2u);
}

TEST(SteadyModel, RanksThatStayOnOneCoreKeepTheirModel) {
  // Bound to one core by the user: slow throughout, and that is what their calls will cost.
  Script s{.alphas = {13e-6}, .shifts = {12e-6}};
  EXPECT_DOUBLE_EQ(s.run().alpha, 13e-6);
  EXPECT_EQ(s.measured, 1u);
}

TEST(SteadyModel, ShiftsWithinTheRatioAreNoise) {
  Script s{.alphas = {0.2e-6}, .shifts = {0.07e-6}};  // 2.9x: a busy moment, not a start
  EXPECT_DOUBLE_EQ(s.run().alpha, 0.2e-6);
  EXPECT_EQ(s.measured, 1u);
}

TEST(SteadyModel, MeasuresAtMostAFewTimes) {
  Script s{.alphas = {13e-6, 12e-6, 11e-6, 10e-6}, .shifts = {0.07e-6}};
  EXPECT_DOUBLE_EQ(s.run().alpha, 11e-6);  // the last of kMaxCalibrations
  EXPECT_EQ(s.measured, static_cast<size_t>(kMaxCalibrations));
}

}  // namespace
}  // namespace ringlet::detail
