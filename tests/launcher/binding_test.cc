// ringlet-run --bind: the plan of which cores each local rank is pinned to.
#include "src/launcher/binding.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringlet::launcher {
namespace {

// `count` cores of `threads` hardware threads each, numbered as Linux numbers hyperthreads:
// core c has CPUs c, c + count, ...
std::vector<info::Core> cores(int count, int threads = 1) {
  std::vector<info::Core> out;
  for (int c = 0; c < count; ++c) {
    info::Core core{.index = c, .package = 0, .numaNode = -1, .pus = {}};
    for (int t = 0; t < threads; ++t) core.pus.push_back(c + t * count);
    out.push_back(core);
  }
  return out;
}

std::vector<std::vector<int>> coresOf(const std::vector<RankBinding>& plan) {
  std::vector<std::vector<int>> out;
  for (const RankBinding& b : plan) out.push_back(b.cores);
  return out;
}

TEST(Binding, AutoGivesEachRankItsOwnRunOfCores) {
  using V = std::vector<std::vector<int>>;
  EXPECT_EQ(coresOf(planBinding(BindMode::kAuto, 2, cores(2))), (V{{0}, {1}}));
  EXPECT_EQ(coresOf(planBinding(BindMode::kAuto, 2, cores(8))), (V{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // Where they do not divide, the first ranks take one more: every core is someone's.
  EXPECT_EQ(coresOf(planBinding(BindMode::kAuto, 3, cores(8))), (V{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_EQ(coresOf(planBinding(BindMode::kAuto, 4, cores(4))), (V{{0}, {1}, {2}, {3}}));
}

TEST(Binding, AutoLeavesRanksThatOutnumberTheCoresOrOneRankToTheScheduler) {
  for (const auto& [ranks, count] : {std::pair{3, 2}, {8, 2}, {1, 4}, {1, 1}}) {
    const std::vector<RankBinding> plan = planBinding(BindMode::kAuto, ranks, cores(count));
    ASSERT_EQ(plan.size(), static_cast<size_t>(ranks));
    for (const RankBinding& b : plan) {
      EXPECT_TRUE(b.cpus.empty()) << ranks << " ranks on " << count << " cores";
      EXPECT_TRUE(b.cores.empty());
    }
  }
}

TEST(Binding, ASharePinsEveryHardwareThreadOfItsCores) {
  const std::vector<RankBinding> plan = planBinding(BindMode::kAuto, 2, cores(4, 2));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].cpus, (std::vector<int>{0, 4, 1, 5}));
  EXPECT_EQ(plan[1].cpus, (std::vector<int>{2, 6, 3, 7}));
  EXPECT_EQ(bindingLine(1, plan[1]), "ringlet: rank 1 bound to cores 2-3 (cpus 2-3,6-7)");
}

TEST(Binding, CoresWrapsAroundAndNoneBindsNobody) {
  using V = std::vector<std::vector<int>>;
  const std::vector<RankBinding> wrapped = planBinding(BindMode::kCores, 3, cores(2));
  EXPECT_EQ(coresOf(wrapped), (V{{0}, {1}, {0}}));
  EXPECT_EQ(bindingLine(2, wrapped[2]), "ringlet: rank 2 bound to core 0 (cpu 0)");
  for (const RankBinding& b : planBinding(BindMode::kNone, 2, cores(8))) {
    EXPECT_TRUE(b.cpus.empty());
  }
  EXPECT_TRUE(planBinding(BindMode::kAuto, 0, cores(2)).empty());
}

}  // namespace
}  // namespace ringlet::launcher
