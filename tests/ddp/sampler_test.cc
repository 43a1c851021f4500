// DistributedSampler: disjoint shards covering the dataset once per epoch (plus stated padding),
// a new order each epoch, the same order for the same seed, drop-last.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "ringlet/error.h"
#include "sampler.h"

namespace trainer {
namespace {

TEST(DistributedSampler, EverySampleOncePerEpochPlusPadding) {
  for (int64_t n : {1, 7, 10, 11, 12, 97}) {
    for (int world : {1, 2, 3, 4}) {
      std::map<int64_t, int> seen;
      int64_t perRank = -1;
      for (int r = 0; r < world; r++) {
        DistributedSampler s(n, r, world, 42);
        if (perRank < 0) perRank = s.samplesPerRank();
        EXPECT_EQ(s.samplesPerRank(), perRank);  // same number of steps on every rank
        for (int64_t i : s.epochIndices(3)) seen[i]++;
      }
      const int64_t padding = perRank * world - n;
      EXPECT_GE(padding, 0);
      EXPECT_LT(padding, world);
      ASSERT_EQ(int64_t(seen.size()), n) << "n " << n << " world " << world;
      int64_t extra = 0;
      for (auto& [i, c] : seen) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, n);
        extra += c - 1;
      }
      EXPECT_EQ(extra, padding) << "n " << n << " world " << world;
    }
  }
}

TEST(DistributedSampler, DropLastDropsTheTailAndNeverRepeats) {
  std::map<int64_t, int> seen;
  for (int r = 0; r < 4; r++) {
    DistributedSampler s(11, r, 4, 5, true, /*dropLast=*/true);
    EXPECT_EQ(s.samplesPerRank(), 2);
    for (int64_t i : s.epochIndices(0)) seen[i]++;
  }
  EXPECT_EQ(seen.size(), 8u);
  for (auto& [i, c] : seen) EXPECT_EQ(c, 1);
  EXPECT_THROW(DistributedSampler(3, 0, 4, 1, true, true), ringlet::InvalidArgument);
  EXPECT_THROW(DistributedSampler(3, 4, 4, 1), ringlet::InvalidArgument);
}

TEST(DistributedSampler, OrderChangesPerEpochAndRepeatsForTheSameSeed) {
  DistributedSampler a(1000, 1, 3, 7), b(1000, 1, 3, 7), c(1000, 1, 3, 8);
  EXPECT_EQ(a.epochIndices(0), b.epochIndices(0));
  EXPECT_EQ(a.epochIndices(5), b.epochIndices(5));
  EXPECT_NE(a.epochIndices(0), a.epochIndices(1));
  EXPECT_NE(a.epochIndices(0), c.epochIndices(0));
}

TEST(DistributedSampler, RankBatchesTileTheSingleProcessBatch) {
  // Step s of W ranks with batch b takes exactly the samples of step s of one rank with W*b.
  const int world = 3;
  const int64_t b = 4;
  DistributedSampler one(200, 0, 1, 9);
  for (int64_t step = 0; step < 5; step++) {
    std::vector<int64_t> all = one.batchIndices(0, step, world * b), fromRanks;
    for (int r = 0; r < world; r++) {
      auto part = DistributedSampler(200, r, world, 9).batchIndices(0, step, b);
      fromRanks.insert(fromRanks.end(), part.begin(), part.end());
    }
    std::sort(all.begin(), all.end());
    std::sort(fromRanks.begin(), fromRanks.end());
    EXPECT_EQ(all, fromRanks) << "step " << step;
  }
}

}  // namespace
}  // namespace trainer
