// The calibration's guard against a disturbed start and its line through the shifts
// (src/core/calibrate.h): made-up measurements, so nothing here depends on the machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/core/calibrate.h"
#include "tests/support/ranks.h"

namespace ringlet::detail {
namespace {

// Measurements that return the next alpha of `alphas` and beta of `betas` (the last one again
// once they run out), later probe shifts that return the next of `shifts`, and (where `large`
// is given) large shifts timed again that return the next of `large`, per byte; counts the
// measurements and the probe shifts.
struct Script {
  std::vector<double> alphas;
  std::vector<double> shifts;
  std::vector<double> betas = {1e-10};
  std::vector<double> large = {};  // none: no large shift timed again
  size_t measured = 0;
  size_t shifted = 0;
  size_t shiftedLarge = 0;

  // The i-th of `values`, or its last.
  static double at(const std::vector<double>& values, size_t i) {
    return values[std::min(i, values.size() - 1)];
  }
  CostModel run() {
    return steadyModel(
        [&] {
          CostModel model;
          model.alpha = at(alphas, measured);
          model.beta = at(betas, measured);
          ++measured;
          return model;
        },
        [&] { return at(shifts, shifted++); },
        large.empty() ? std::function<double()>{} : [&] { return at(large, shiftedLarge++); });
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

TEST(SteadyModel, ABetaNearItsShiftTimedAgainIsMeasuredOnce) {
  Script s{.alphas = {1e-6},
           .shifts = {1e-6},
           .betas = {3e-10},
           .large = {2.2e-10}};  // 1.36x: the machine's own spread
  EXPECT_DOUBLE_EQ(s.run().beta, 3e-10);
  EXPECT_EQ(s.measured, 1u);
}

TEST(SteadyModel, ABetaHeldBackAtTheStartIsMeasuredAgain) {
  // Four ranks on two cores, the first shifts slowed by the processes' start.
  Script s{.alphas = {1e-6}, .shifts = {1e-6}, .betas = {1.2e-8, 3e-10}, .large = {2.5e-10}};
  EXPECT_DOUBLE_EQ(s.run().beta, 3e-10);
  EXPECT_EQ(s.measured, 2u);
  Script always{.alphas = {1e-6},
                .shifts = {1e-6},
                .betas = {1.2e-8, 1.1e-8, 1e-8, 0.9e-8},
                .large = {2.5e-10}};
  EXPECT_DOUBLE_EQ(always.run().beta, 1e-8);  // the last of kMaxCalibrations
  EXPECT_EQ(always.measured, static_cast<size_t>(kMaxCalibrations));
}

// Times made from a known line: alpha 0.5 us, cached bytes 0.1 ns, large ones 0.16 ns.
Shift timed(size_t bytes, double alpha, double perByte) {
  return {.bytes = bytes, .seconds = alpha + static_cast<double>(bytes) * perByte};
}

TEST(FitShifts, RecoversTheLineItWasMadeFrom) {
  const ShiftLine line = fitShifts(timed(4 << 10, 0.5e-6, 0.1e-9), timed(128 << 10, 0.5e-6, 0.1e-9),
                                   timed(1 << 20, 0.5e-6, 0.16e-9));
  EXPECT_NEAR(line.alpha, 0.5e-6, 1e-12);
  EXPECT_NEAR(line.beta, 0.16e-9, 1e-15);
  EXPECT_NEAR(line.smallFactor, 0.1 / 0.16, 1e-9);
}

TEST(FitShifts, AlphaIsTheInterceptNotTheProbesTime) {
  // The probe's 4 KiB take 0.4 us of its 0.9: alpha is what is left, where the probe's time
  // alone would charge every message its bytes too.
  const Shift probe = timed(4 << 10, 0.5e-6, 0.1e-9);
  const ShiftLine line =
      fitShifts(probe, timed(128 << 10, 0.5e-6, 0.1e-9), timed(1 << 20, 0.5e-6, 0.1e-9));
  EXPECT_LT(line.alpha, 0.6 * probe.seconds);
  EXPECT_NEAR(line.smallFactor, 1.0, 1e-9);
}

TEST(FitShifts, ADisorderlyMeasurementStaysWithinBounds) {
  // The cached shift measured faster than the probe (a disturbed probe): no slope, alpha the
  // probe's time, and a factor that is never 0.
  ShiftLine line =
      fitShifts({.bytes = 4 << 10, .seconds = 5e-6}, {.bytes = 128 << 10, .seconds = 3e-6},
                {.bytes = 1 << 20, .seconds = 100e-6});
  EXPECT_DOUBLE_EQ(line.alpha, 5e-6);
  EXPECT_DOUBLE_EQ(line.smallFactor, 0.05);
  // A slope that would put the intercept below zero: alpha at a quarter of the probe.
  line = fitShifts({.bytes = 4 << 10, .seconds = 1e-6}, {.bytes = 128 << 10, .seconds = 100e-6},
                   {.bytes = 1 << 20, .seconds = 200e-6});
  EXPECT_DOUBLE_EQ(line.alpha, 0.25e-6);
  EXPECT_DOUBLE_EQ(line.smallFactor, 1.0);  // cached dearer than large: at most 1
  // A large shift faster than alpha: beta at the cached rate, never below it.
  line = fitShifts({.bytes = 4 << 10, .seconds = 1e-6}, {.bytes = 128 << 10, .seconds = 2e-6},
                   {.bytes = 1 << 20, .seconds = 0.5e-6});
  EXPECT_DOUBLE_EQ(line.beta, 1e-6 / (124 << 10));
  EXPECT_EQ(line.smallFactor, 1.0);
}

TEST(FitShifts, BetaIsNeverZero) {
  // Every shift within the disturbed probe's time (a busy core held the probe back): no slope
  // anywhere, and beta the large shift's whole time per byte, where 0 would price every size
  // at alpha alone.
  const ShiftLine line =
      fitShifts({.bytes = 4 << 10, .seconds = 5e-6}, {.bytes = 128 << 10, .seconds = 3e-6},
                {.bytes = 1 << 20, .seconds = 2e-6});
  EXPECT_DOUBLE_EQ(line.alpha, 5e-6);
  EXPECT_DOUBLE_EQ(line.beta, 2e-6 / (1 << 20));
  EXPECT_GT(line.smallFactor, 0);
}

constexpr double kMiB = 1 << 20;

TEST(OneWayBeta, NeverAboveBeta) {
  EXPECT_DOUBLE_EQ(oneWayBeta(1.9e-10, 3.4e-10), 1.9e-10);  // as usually measured
  EXPECT_DOUBLE_EQ(oneWayBeta(9e-10, 3.4e-10), 3.4e-10);    // pairs held back
  EXPECT_DOUBLE_EQ(oneWayBeta(0, 3.4e-10), 0);              // not measured: beta is used
  EXPECT_DOUBLE_EQ(oneWayBeta(2e-10, 0), 2e-10);
}

TEST(CacheBytesFrom, ASharpKneeAtTheShareKeepsTheShare) {
  // Flat up to the share (32 MiB), dearer at twice it: the knee is the share, as sysfs said.
  const std::vector<MemoryPoint> points = {
      {64 * kMiB, 2.5}, {32 * kMiB, 1.1}, {16 * kMiB, 1.0}, {8 * kMiB, 1.0}};
  EXPECT_EQ(kneePoints(points), 1u);
  EXPECT_DOUBLE_EQ(cacheBytesFrom(points), 32 * kMiB);
}

TEST(CacheBytesFrom, AVmsSmallerCacheIsFound) {
  // Two ranks on a 2-core VM whose sysfs names the host's 260 MiB (a 128 MiB top): 2.3-3.0x
  // from 32 MiB, 1.4-1.7x in the last-level cache below (under the 1.8 threshold): 16 MiB.
  const std::vector<MemoryPoint> points = {{128 * kMiB, 2.6}, {64 * kMiB, 2.5}, {32 * kMiB, 2.3},
                                           {16 * kMiB, 1.6},  {8 * kMiB, 1.5},  {4 * kMiB, 1.5}};
  EXPECT_EQ(kneePoints(points), 3u);
  EXPECT_DOUBLE_EQ(cacheBytesFrom(points), 16 * kMiB);
  // The walk stops at the first point under the threshold: a later noisy one is not read.
  std::vector<MemoryPoint> noisy = points;
  noisy[4].factor = 2.6;
  EXPECT_DOUBLE_EQ(cacheBytesFrom(noisy), 16 * kMiB);
}

TEST(CacheBytesFrom, EveryPointDearerPutsTheCacheBelowTheSmallest) {
  const std::vector<MemoryPoint> points = {{16 * kMiB, 3.0}, {8 * kMiB, 2.9}, {4 * kMiB, 2.0}};
  EXPECT_EQ(kneePoints(points), 3u);
  EXPECT_DOUBLE_EQ(cacheBytesFrom(points), 2 * kMiB);
  EXPECT_EQ(cacheBytesFrom({}), 0.0);
  EXPECT_EQ(kneePoints({}), 0u);
}

TEST(LastLevelCache, TheLargestListedOrTheAssumedOne) {
  const std::string dir = testing::makeTempDir("ringlet-cache");
  auto put = [&](int index, const char* size) {
    std::filesystem::create_directories(dir + "/index" + std::to_string(index));
    std::ofstream(dir + "/index" + std::to_string(index) + "/size") << size << "\n";
  };
  // Empty directories (some VMs): the assumed cache, not none.
  std::filesystem::create_directories(dir + "/index0");
  EXPECT_EQ(lastLevelCacheBytesIn(dir), kAssumedCacheBytes);
  EXPECT_EQ(lastLevelCacheBytesIn(dir + "/missing"), kAssumedCacheBytes);
  put(0, "48K");
  put(2, "1024K");
  put(3, "16384K");
  EXPECT_DOUBLE_EQ(lastLevelCacheBytesIn(dir), 16 * kMiB);
  put(3, "260M");
  EXPECT_DOUBLE_EQ(lastLevelCacheBytesIn(dir), 260 * kMiB);
  std::filesystem::remove_all(dir);
}

TEST(MemoryPointSizes, HalveFromTwiceTheShareDownToFourMiB) {
  EXPECT_EQ(memoryPointSizes(130 * kMiB),
            (std::vector<double>{128 * kMiB, 64 * kMiB, 32 * kMiB, 16 * kMiB, 8 * kMiB, 4 * kMiB}));
  EXPECT_EQ(memoryPointSizes(37.5 * kMiB),
            (std::vector<double>{75 * kMiB, 37 * kMiB, 18 * kMiB, 9 * kMiB, 4 * kMiB}));
  EXPECT_EQ(memoryPointSizes(1 * kMiB), (std::vector<double>{4 * kMiB}));
  EXPECT_EQ(memoryPointSizes(0), (std::vector<double>{4 * kMiB}));
}

}  // namespace
}  // namespace ringlet::detail
