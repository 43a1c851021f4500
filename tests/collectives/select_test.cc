// The cost model and the algorithm choice (collectives/select.h): names, parsing, and that the
// choice follows the model's parameters the way the formulas say it should.
#include "collectives/select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "collectives/chunking.h"
#include "ringlet/error.h"

namespace ringlet::collectives {
namespace {

template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(AlgorithmNames, RoundTripAndEveryCollectiveHasOne) {
  for (size_t i = 0; i < kCollectiveCount; ++i) {
    const auto collective = static_cast<Collective>(i);
    ASSERT_EQ(collectiveNamed(nameOf(collective)), collective);
    ASSERT_FALSE(algorithmsOf(collective).empty()) << nameOf(collective);
    for (Algorithm a : algorithmsOf(collective)) {
      const auto forced = parseForced({{std::string(nameOf(collective)), std::string(nameOf(a))}});
      EXPECT_EQ(forced[i], a);
    }
  }
  EXPECT_FALSE(collectiveNamed("allreduc").has_value());
}

TEST(AlgorithmNames, ParseErrorsNameTheEntryAndTheKnownNames) {
  EXPECT_EQ(parseAlgorithmList("allreduce:ring,allgather:bruck", "RINGLET_ALGO"),
            (std::map<std::string, std::string>{{"allreduce", "ring"}, {"allgather", "bruck"}}));
  EXPECT_TRUE(parseAlgorithmList("", "RINGLET_ALGO").empty());
  std::string e = errorOf([] { parseAlgorithmList("allreduce", "RINGLET_ALGO"); });
  EXPECT_NE(e.find("RINGLET_ALGO"), std::string::npos) << e;
  EXPECT_NE(e.find("'allreduce'"), std::string::npos) << e;
  e = errorOf([] { parseForced({{"allreduce", "bruck"}}); });
  EXPECT_NE(e.find("no algorithm 'bruck'"), std::string::npos) << e;
  EXPECT_NE(e.find("rabenseifner"), std::string::npos) << e;
  e = errorOf([] { parseForced({{"alltoallv", "pairwise"}}); });
  EXPECT_NE(e.find("'alltoallv' is not a collective"), std::string::npos) << e;
  // A v-form is forced by its own name, and has only its own algorithms.
  const ForcedAlgorithms v = parseForced({{"allgatherv", "recursive_doubling"}});
  EXPECT_EQ(v[static_cast<size_t>(Collective::kAllgatherv)], Algorithm::kRecursiveDoubling);
  EXPECT_EQ(v[static_cast<size_t>(Collective::kAllgather)], Algorithm::kAuto);
  e = errorOf([] { parseForced({{"allgatherv", "bruck"}}); });
  EXPECT_NE(e.find("no algorithm 'bruck'"), std::string::npos) << e;
  EXPECT_EQ(parseForced({{"alltoall", "auto"}})[static_cast<size_t>(Collective::kAllToAll)],
            Algorithm::kAuto);
}

TEST(CostModel, EveryAlgorithmHasAFinitePositivePrediction) {
  const CostModel model;
  for (size_t i = 0; i < kCollectiveCount; ++i) {
    const auto collective = static_cast<Collective>(i);
    for (int n = 2; n <= 9; ++n) {
      for (Algorithm a : algorithmsOf(collective)) {
        // Two levels across hosts only (AcrossHostsTwoLevels... below).
        if (a == Algorithm::kHierarchical) continue;
        for (size_t bytes : {size_t{8}, size_t{1} << 20}) {
          const double t = predictSeconds(collective, a, n, bytes, 512 << 10, model);
          EXPECT_TRUE(std::isfinite(t) && t > 0) << nameOf(collective) << " " << nameOf(a);
        }
      }
    }
    // An algorithm of another collective has no prediction.
    EXPECT_TRUE(
        std::isinf(predictSeconds(collective, Algorithm::kAuto, 4, 1024, 512 << 10, model)));
  }
}

TEST(CostModel, ByteCostsFollowTheCaches) {
  const CostModel model{.smallFactor = 0.5, .memoryFactor = 3, .cacheBytes = 16 << 20};
  EXPECT_DOUBLE_EQ(memoryScale(model, 64 << 10), 0.5);  // the core's own caches
  EXPECT_DOUBLE_EQ(memoryScale(model, 256 << 10), 0.5);
  EXPECT_DOUBLE_EQ(memoryScale(model, 2 << 20), 1.0);   // the calibrated size
  EXPECT_DOUBLE_EQ(memoryScale(model, 16 << 20), 1.0);  // the rank's share of the cache
  // Past it the factor rises over three doublings, linear in log2 of the working set.
  EXPECT_NEAR(memoryScale(model, 24 << 20), 1 + 2 * std::log2(1.5) / 3, 1e-12);
  EXPECT_NEAR(memoryScale(model, 32 << 20), 1 + 2.0 / 3, 1e-12);
  EXPECT_NEAR(memoryScale(model, 64 << 20), 1 + 4.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(memoryScale(model, 128 << 20), 3.0);  // memory
  EXPECT_DOUBLE_EQ(memoryScale(model, 1 << 30), 3.0);
  EXPECT_DOUBLE_EQ(memoryScale(CostModel{}, 1 << 30), 1.0);  // defaults: no effect
  const CostModel flat{.alpha = 0};
  CostModel scaled = flat;
  scaled.memoryFactor = 3;
  scaled.cacheBytes = 16 << 20;
  auto allreduce = [](Algorithm algorithm, size_t bytes, const CostModel& m) {
    return predictSeconds(Collective::kAllreduce, algorithm, 4, bytes, 512 << 10, m);
  };
  // The ring all-reduce is a reduce-scatter pass and an all-gather pass, each over its input or
  // output and one chunk (m + m/4): at 128 MiB 160 MiB, memory's rate per byte; at 64 MiB 80 MiB,
  // part of the way. Rabenseifner's halving reads what its step before reduced: both buffers,
  // 128 MiB at 64 MiB, memory's rate.
  const size_t big = size_t{128} << 20;
  const size_t mid = size_t{64} << 20;
  EXPECT_DOUBLE_EQ(allreduce(Algorithm::kRing, big, scaled),
                   3 * allreduce(Algorithm::kRing, big, flat));
  const double passes = memoryScale(scaled, 80 << 20);
  EXPECT_GT(passes, 2.0);
  EXPECT_LT(passes, 3.0);
  EXPECT_NEAR(allreduce(Algorithm::kRing, mid, scaled),
              passes * allreduce(Algorithm::kRing, mid, flat), 1e-12);
  EXPECT_DOUBLE_EQ(allreduce(Algorithm::kRabenseifner, mid, scaled),
                   3 * allreduce(Algorithm::kRabenseifner, mid, flat));
  // Below the calibrated 2 MiB both of the ring's buffers stay in the caches from call to call:
  // 512 KiB is a working set of 1 MiB, as for the other algorithms.
  CostModel small = flat;
  small.smallFactor = 0.5;
  EXPECT_NEAR(allreduce(Algorithm::kRing, 512 << 10, small),
              memoryScale(small, 1 << 20) * allreduce(Algorithm::kRing, 512 << 10, flat), 1e-15);
  EXPECT_NEAR(allreduce(Algorithm::kRing, 2 << 20, small),
              allreduce(Algorithm::kRing, 2 << 20, flat), 1e-15);
}

// A link's byte past the cache costs what the calibration's shift of 16 MiB buffers measured
// (linkMemoryFactor), reached at its working set of 32 MiB from 1 at the 1 MiB shift's 2 MiB,
// linear in log2 between them, on along that line for 1.5 doublings past it (to about 90 MiB)
// and flat after; copies and reductions keep memoryFactor's ramp.
TEST(CostModel, ALinksBytePastTheCacheCostsItsMeasuredFactor) {
  CostModel model{.smallFactor = 0.5, .memoryFactor = 3, .cacheBytes = 4 << 20};
  const double unmeasured[] = {64 << 10, 2 << 20, 8 << 20, 32 << 20, 1 << 30};
  for (double bytes : unmeasured) {
    EXPECT_DOUBLE_EQ(linkMemoryScale(model, bytes), memoryScale(model, bytes)) << bytes;
  }
  model.linkMemoryFactor = 1.5;
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 64 << 10), 0.5);  // the core's own caches, as copies
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 2 << 20), 1.0);
  EXPECT_NEAR(linkMemoryScale(model, 8 << 20), 1.25, 1e-12);  // two of four doublings
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 32 << 20), 1.5);
  EXPECT_NEAR(linkMemoryScale(model, 64 << 20), 1.625, 1e-12);  // a doubling on: 1/8 more
  EXPECT_NEAR(linkMemoryScale(model, 1 << 30), 1.6875, 1e-12);  // 1.5 doublings on, then flat
  EXPECT_NEAR(linkMemoryScale(model, 90.5 * (1 << 20)), 1.6875, 1e-3);
  EXPECT_DOUBLE_EQ(memoryScale(model, 1 << 30), 3.0);
  // A 64 MiB ring all-reduce of link bytes only, 4 ranks (its two passes span 80 MiB): the
  // in-cache price times the factor at 80 MiB; over a network link (linkBytesInMemory false) the
  // in-cache price.
  CostModel flat{.alpha = 0, .beta = 1e-10, .gamma = 0, .delta = 0};
  CostModel scaled = flat;
  scaled.memoryFactor = 3;
  scaled.cacheBytes = 4 << 20;
  scaled.linkMemoryFactor = 1.5;
  const size_t big = size_t{64} << 20;
  auto ring = [&](const CostModel& m) {
    return predictSeconds(Collective::kAllreduce, Algorithm::kRing, 4, big, 512 << 10, m);
  };
  EXPECT_NEAR(ring(scaled) / ring(flat), 1.5 + 0.125 * std::log2(2.5), 1e-12);
  scaled.linkBytesInMemory = false;
  EXPECT_DOUBLE_EQ(ring(scaled), ring(flat));
}

// Measured half way (a working set of 8 MiB), the ramp goes through that point: two straight
// pieces in log2 of the working set, the half way factor at most the last one. A byte sent one
// way follows its own measured factors, and linkMemoryFactor's ramp where they were not measured.
TEST(CostModel, PastTheCacheTheMeasuredPointsShapeTheRamp) {
  CostModel model{.smallFactor = 0.5, .memoryFactor = 3, .cacheBytes = 4 << 20};
  model.linkMemoryFactor = 2;
  model.linkMemoryMidFactor = 1.2;
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 2 << 20), 1.0);
  EXPECT_NEAR(linkMemoryScale(model, 4 << 20), 1.1, 1e-12);
  EXPECT_NEAR(linkMemoryScale(model, 8 << 20), 1.2, 1e-12);
  EXPECT_NEAR(linkMemoryScale(model, 16 << 20), 1.6, 1e-12);
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 32 << 20), 2.0);
  EXPECT_NEAR(linkMemoryScale(model, 64 << 20), 2.4, 1e-12);  // on along the last piece
  EXPECT_NEAR(linkMemoryScale(model, 1 << 30), 2.6, 1e-12);   // for 1.5 doublings
  model.linkMemoryMidFactor = 3;  // above the last point: capped there, and flat on from it
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 8 << 20), 2.0);
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 1 << 30), 2.0);
  model.linkMemoryMidFactor = 0;  // a falling ramp (given, not measured) stops at its last point
  model.linkMemoryFactor = 0.8;
  EXPECT_NEAR(linkMemoryScale(model, 8 << 20), 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(linkMemoryScale(model, 1 << 30), 0.8);
  model.linkMemoryFactor = 2;
  model.linkMemoryMidFactor = 1.2;
  for (double bytes : {64 << 10, 4 << 20, 8 << 20, 32 << 20}) {
    EXPECT_DOUBLE_EQ(oneWayMemoryScale(model, bytes), linkMemoryScale(model, bytes)) << bytes;
  }
  model.oneWayMemoryFactor = 1.1;
  EXPECT_NEAR(oneWayMemoryScale(model, 8 << 20), 1.05, 1e-12);  // on its own line
  model.oneWayMemoryMidFactor = 1.0;
  EXPECT_DOUBLE_EQ(oneWayMemoryScale(model, 8 << 20), 1.0);
  EXPECT_NEAR(oneWayMemoryScale(model, 16 << 20), 1.05, 1e-12);
  EXPECT_NEAR(oneWayMemoryScale(model, 64 << 20), 1.15, 1e-12);
  EXPECT_DOUBLE_EQ(oneWayMemoryScale(model, 64 << 10), 0.5);  // in the caches, as copies
  // A two-rank broadcast of 64 MiB, one way throughout: its byte on oneWayMemoryFactor's ramp
  // (a doubling past it: 1.1 + 0.1 / 4), where an exchange's (the all-gather's, 96 MiB) is on
  // linkMemoryFactor's (1.5 doublings past it: 2 + 1.5 / 4).
  CostModel flat{.alpha = 0, .beta = 1e-10, .gamma = 0, .delta = 0, .betaOneWay = 1e-10};
  CostModel scaled = flat;
  scaled.memoryFactor = 3;
  scaled.cacheBytes = 4 << 20;
  scaled.linkMemoryFactor = 2;
  scaled.oneWayMemoryFactor = 1.1;
  const size_t big = size_t{64} << 20;
  auto broadcast = [&](const CostModel& m) {
    return predictSeconds(Collective::kBroadcast, Algorithm::kTree, 2, big, 512 << 10, m);
  };
  auto allgather = [&](const CostModel& m) {
    return predictSeconds(Collective::kAllgather, Algorithm::kRing, 2, big, 512 << 10, m);
  };
  EXPECT_NEAR(broadcast(scaled), 1.125 * broadcast(flat), 1e-12);
  EXPECT_NEAR(allgather(scaled) / allgather(flat), 2.375, 0.2);
}

// Past the cache a chain's slices stay in it: its link bytes gain what memory adds to a one-way
// copy, b1 (S - 1), not its own in-cache rate's share; the tree's rounds pay the whole scale.
TEST(CostModel, PastTheCacheTheChainAddsOnlyAOneWayCopysMemoryCost) {
  const CostModel flat{
      .alpha = 0, .beta = 4e-10, .gamma = 1e-11, .delta = 1e-10, .betaOneWay = 1e-10};
  CostModel scaled = flat;
  scaled.memoryFactor = 2;  // reached at 8x the cache: 64 MiB is 64x
  scaled.cacheBytes = 1 << 20;
  const size_t big = size_t{64} << 20;
  const size_t slice = 512 << 10;
  const double m = static_cast<double>(big);
  const double k = m / slice;  // the chain's slices
  const int n = 4;
  auto price = [&](Collective c, Algorithm a, const CostModel& model) {
    return predictSeconds(c, a, n, big, slice, model);
  };
  for (Collective c : {Collective::kBroadcast, Collective::kReduce}) {
    const double reduced = c == Collective::kReduce ? (n - 2 + k) / k * m * flat.gamma : 0.0;
    // The chain: (n-2+k)/k m (c + g) + s b1 in the cache; past it b1 (S - 1) more on each link
    // byte and on the fill, and the reduction's g S.
    EXPECT_NEAR(price(c, Algorithm::kChain, scaled) - price(c, Algorithm::kChain, flat),
                ((n - 2 + k) / k * m + slice) * flat.betaOneWay + reduced,
                1e-9 * price(c, Algorithm::kChain, flat));
    // The tree: every round's bytes twice as dear.
    EXPECT_NEAR(price(c, Algorithm::kTree, scaled), 2 * price(c, Algorithm::kTree, flat),
                1e-9 * price(c, Algorithm::kTree, flat));
  }
  // Two ranks: the chain is one way, and scales as the tree does.
  EXPECT_NEAR(predictSeconds(Collective::kBroadcast, Algorithm::kChain, 2, big, slice, scaled),
              2 * predictSeconds(Collective::kBroadcast, Algorithm::kChain, 2, big, slice, flat),
              1e-9 * m * flat.betaOneWay);
}

// wrap: the positive remainder, without a division for a value within a size of the range, and
// with one for any other.
TEST(Chunking, WrapIsThePositiveRemainderOfAnyValue) {
  for (int size : {1, 2, 3, 4, 5, 8}) {
    for (int value = -3 * size - 2; value <= 3 * size + 2; ++value) {
      const int expected = ((value % size) + size) % size;
      EXPECT_EQ(collectives::wrap(value, size), expected) << value << " mod " << size;
    }
  }
  EXPECT_EQ(collectives::wrap(-1, 4), 3);
  EXPECT_EQ(collectives::wrap(4, 4), 0);
  EXPECT_EQ(collectives::wrap(std::numeric_limits<int>::min(), 7),
            ((std::numeric_limits<int>::min() % 7) + 7) % 7);
  EXPECT_EQ(collectives::wrap(std::numeric_limits<int>::max(), 7),
            std::numeric_limits<int>::max() % 7);
}

TEST(CostModel, ABroadcastWrittenInPlaceIsOneCopy) {
  // A tree broadcast's receive that the sender writes in place (shm direct writes) costs its
  // bytes once one way, without the slice of pipeline fill a copy through the slots adds; past
  // directBytes, and for a reduce, the fill is back. Two ranks whose links write nothing in place
  // (directBytes 0) pay no fill either: the root runs a call ahead of its receiver; three do.
  const CostModel slots{.alpha = 1e-6, .beta = 2e-10, .gamma = 0, .delta = 0, .betaOneWay = 1e-10};
  CostModel direct = slots;
  direct.directBytes = 1 << 20;
  const size_t slice = 512 << 10;
  for (const size_t m : {size_t{4} << 20, size_t{256} << 10, size_t{1} << 20, size_t{16} << 10}) {
    const double bytes = static_cast<double>(m);
    const double fill = static_cast<double>(std::min(m, slice));
    const double written =
        predictSeconds(Collective::kBroadcast, Algorithm::kTree, 2, m, slice, direct);
    const double through = 1e-6 + (bytes + fill) * 1e-10;
    EXPECT_DOUBLE_EQ(predictSeconds(Collective::kBroadcast, Algorithm::kTree, 2, m, slice, slots),
                     1e-6 + bytes * 1e-10)
        << m;
    EXPECT_DOUBLE_EQ(predictSeconds(Collective::kBroadcast, Algorithm::kTree, 3, m, slice, slots),
                     2 * through)
        << m;
    // 16 KiB: lent by the root (Link::kLendMinBytes) where ranks have cores of their own; where
    // they share cores only written in place, from Link::kDirectWriteMinBytes.
    EXPECT_DOUBLE_EQ(written, m <= (1 << 20) ? 1e-6 + bytes * 1e-10 : through) << m;
    CostModel shared = direct;
    shared.ranksShareCores = true;
    EXPECT_DOUBLE_EQ(predictSeconds(Collective::kBroadcast, Algorithm::kTree, 2, m, slice, shared),
                     m <= (1 << 20) && m >= (64 << 10) ? 1e-6 + bytes * 1e-10 : through)
        << m;
    EXPECT_DOUBLE_EQ(predictSeconds(Collective::kReduce, Algorithm::kTree, 2, m, slice, direct),
                     through)
        << m;
    EXPECT_DOUBLE_EQ(predictSeconds(Collective::kReduce, Algorithm::kTree, 2, m, slice, slots),
                     through)
        << m;
  }
}

TEST(CostModel, LentExchangesAreOneCopyEachWay) {
  // Where the links lend (directBytes > 0) an exchange's messages of a caller's buffer of at
  // least Link::kLendMinBytes are read by their receiver: the one-way rate. The pairwise
  // all-to-all lends every block; the recursive-doubling all-gather its first round's, which is
  // cheaper by directBytes of it at most (past that the lent copy reads from memory too).
  const CostModel slots{.alpha = 1e-6, .beta = 2e-10, .gamma = 0, .delta = 0, .betaOneWay = 1e-10};
  CostModel lent = slots;
  lent.directBytes = 1 << 20;
  const size_t slice = 512 << 10;
  for (const int n : {2, 4}) {
    for (const size_t m : {size_t{4} << 20, size_t{256} << 10, size_t{32} << 10}) {
      const double block = static_cast<double>(m) / n;
      const bool lends = block >= static_cast<double>(transport::Link::kLendMinBytes);
      EXPECT_DOUBLE_EQ(
          predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, n, m, slice, slots),
          (n - 1) * (1e-6 + block * 2e-10))
          << n << " ranks, " << m;
      EXPECT_DOUBLE_EQ(
          predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, n, m, slice, lent),
          (n - 1) * (1e-6 + block * (lends ? 1e-10 : 2e-10)))
          << n << " ranks, " << m;
      const double through =
          predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, m, slice, slots);
      EXPECT_DOUBLE_EQ(
          predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, m, slice, lent),
          through - (lends ? std::min(block, 1048576.0) * 1e-10 : 0.0))
          << n << " ranks, " << m;
      // Ranks that share cores: the all-gather's lender may wait for a reader not running.
      CostModel shared = lent;
      shared.ranksShareCores = true;
      EXPECT_DOUBLE_EQ(predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, m,
                                      slice, shared),
                       through)
          << n << " ranks, " << m;
    }
  }
}

TEST(CostModel, BlocksPastTheLentBoundGoThroughTheSlots) {
  // CostModel::lentBlockBytes (Link::lendBlockBytes): blocks up to it are lent, larger ones
  // priced as the slots' exchange.
  const CostModel slots{.alpha = 1e-6, .beta = 2e-10, .gamma = 0, .delta = 0, .betaOneWay = 1e-10};
  CostModel bounded = slots;
  bounded.directBytes = 1 << 20;
  bounded.lentBlockBytes = 4 << 20;
  const size_t slice = 512 << 10;
  for (const int n : {2, 4}) {
    for (const size_t block : {size_t{4} << 20, size_t{8} << 20}) {
      const size_t m = block * n;
      const bool lends = block <= (size_t{4} << 20);
      EXPECT_DOUBLE_EQ(
          predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, n, m, slice, bounded),
          (n - 1) * (1e-6 + static_cast<double>(block) * (lends ? 1e-10 : 2e-10)))
          << n << " ranks, blocks of " << block;
      const double through =
          predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, m, slice, slots);
      EXPECT_DOUBLE_EQ(predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, m,
                                      slice, bounded),
                       through - (lends ? 1048576.0 * 1e-10 : 0.0))
          << n << " ranks, blocks of " << block;
    }
  }
}

TEST(CostModel, ANetworkLinksRateIgnoresTheCaches) {
  // Bytes over shared memory cost memory's rate once the buffers outgrow the cache; a network
  // link moves them at its own rate whatever their size: only reductions and copies scale.
  CostModel network{
      .alpha = 0, .beta = 1e-9, .gamma = 0, .delta = 0, .memoryFactor = 3, .cacheBytes = 8 << 20};
  network.linkBytesInMemory = false;
  const size_t big = size_t{64} << 20;
  for (int n : {2, 4, 8}) {
    const double expected = 2.0 * (n - 1) / n * static_cast<double>(big) * 1e-9;
    EXPECT_DOUBLE_EQ(
        predictSeconds(Collective::kAllreduce, Algorithm::kRing, n, big, 512 << 10, network),
        expected);
    CostModel memory = network;
    memory.linkBytesInMemory = true;
    EXPECT_DOUBLE_EQ(
        predictSeconds(Collective::kAllreduce, Algorithm::kRing, n, big, 512 << 10, memory),
        3 * expected);
  }
  network.gamma = 1e-10;  // a reduction still reads memory
  CostModel noReduce = network;
  noReduce.gamma = 0;
  EXPECT_DOUBLE_EQ(
      predictSeconds(Collective::kReduceScatter, Algorithm::kRing, 2, big, 512 << 10, network) -
          predictSeconds(Collective::kReduceScatter, Algorithm::kRing, 2, big, 512 << 10, noReduce),
      0.5 * static_cast<double>(big) * 1e-10 * 3);
}

// Bruck's and recursive doubling's rounds cross hosts from every rank of a host at once; the
// host-ordered ring crosses once. Where alphas favour the log-step rounds on one host, a large
// all-gather across hosts takes the ring (or the two levels, which cross once per local index).
TEST(CostModel, BruckAcrossHostsPaysForEveryRankOnTheLink) {
  const CostModel slowLink{.alpha = 1e-3, .beta = 8e-9, .gamma = 0, .delta = 1e-10};
  const size_t bytes = size_t{1} << 20;  // the rounds one slice each, the ring's 7 steps
  EXPECT_EQ(choose(Collective::kAllgather, 8, bytes, 512 << 10, slowLink, Algorithm::kAuto, 1),
            Algorithm::kRecursiveDoubling);
  const Algorithm acrossHosts =
      choose(Collective::kAllgather, 8, bytes, 512 << 10, slowLink, Algorithm::kAuto, 4);
  EXPECT_TRUE(acrossHosts == Algorithm::kRing || acrossHosts == Algorithm::kHierarchical)
      << nameOf(acrossHosts);
  // One rank per host: nothing shares a link, the same choice as on one host.
  EXPECT_EQ(choose(Collective::kAllgather, 8, bytes, 512 << 10, slowLink, Algorithm::kAuto, 8),
            Algorithm::kRecursiveDoubling);
  // Bruck alike, forced: it pays for every rank of a host on the link too.
  const double bruckOneHost =
      predictSeconds(Collective::kAllgather, Algorithm::kBruck, 8, bytes, 512 << 10, slowLink, 1);
  EXPECT_GT(
      predictSeconds(Collective::kAllgather, Algorithm::kBruck, 8, bytes, 512 << 10, slowLink, 4),
      bruckOneHost);
  // Recursive doubling's exchanges cross hosts the same way: at 64 KiB, where it wins on one
  // host, four hosts of two ranks take the ring.
  const CostModel slowNetwork{.alpha = 1e-5, .beta = 8e-8, .gamma = 0, .delta = 1e-10};
  auto pickSmall = [&](int hosts) {
    return choose(Collective::kAllgather, 8, 64 << 10, 512 << 10, slowNetwork, Algorithm::kAuto,
                  hosts);
  };
  // At N = 8 recursive doubling and Bruck send the same bytes in the same rounds, but Bruck's
  // runs of blocks wrap past the last block in its second and third rounds: two exchanges each,
  // two more latencies.
  EXPECT_NEAR(predictSeconds(Collective::kAllgather, Algorithm::kBruck, 8, 64 << 10, 512 << 10,
                             slowNetwork) -
                  predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, 8, 64 << 10,
                                 512 << 10, slowNetwork),
              2 * slowNetwork.alpha, 1e-12);
  EXPECT_NE(pickSmall(1), Algorithm::kRing);
  // (Or the two levels, which cross each host link once per local index, as the ring does, and
  // carry 3/4 of the data where it carries 7/8: about the same price here.)
  EXPECT_TRUE(pickSmall(4) == Algorithm::kRing || pickSmall(4) == Algorithm::kHierarchical)
      << nameOf(pickSmall(4));
  // All-to-all: a host's link carries its ranks' bytes for other hosts.
  const CostModel bytesOnly{.alpha = 0, .beta = 1e-9, .gamma = 0, .delta = 0};
  EXPECT_DOUBLE_EQ(predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, 8, bytes, 512 << 10,
                                  bytesOnly, 4),
                   2.0 * 3 / 4 * static_cast<double>(bytes) * 1e-9);
}

// Recursive halving and doubling: log2(p) messages, plus two for a fold; for N = p the ring's
// link bytes, and recursive halving's sends copied as Rabenseifner's are.
TEST(CostModel, RecursiveHalvingAndDoublingCountTheirSteps) {
  const CostModel messages{.alpha = 1e-6, .beta = 0, .gamma = 0, .delta = 0};
  const size_t bytes = size_t{1} << 20;
  auto seconds = [&](Collective c, Algorithm a, int n, const CostModel& m) {
    return predictSeconds(c, a, n, bytes, 512 << 10, m);
  };
  constexpr std::pair<int, int> kRanksAndSteps[] = {{2, 1}, {3, 3}, {4, 2}, {5, 4}, {8, 3}};
  for (auto [n, steps] : kRanksAndSteps) {
    EXPECT_DOUBLE_EQ(seconds(Collective::kReduceScatter, Algorithm::kRecursiveHalving, n, messages),
                     steps * 1e-6)
        << n;
    EXPECT_DOUBLE_EQ(seconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, messages),
                     steps * 1e-6)
        << n;
    EXPECT_EQ(doublingSteps(n), steps) << n;  // the count the header-doubling rule compares
  }
  EXPECT_EQ(doublingSteps(6), 4);
  EXPECT_EQ(doublingSteps(16), 4);
  const CostModel bytesOnly{.alpha = 0, .beta = 1e-9, .gamma = 2e-10, .delta = 0};
  EXPECT_DOUBLE_EQ(seconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, 8, bytesOnly),
                   seconds(Collective::kAllgather, Algorithm::kRing, 8, bytesOnly));
  EXPECT_DOUBLE_EQ(seconds(Collective::kReduceScatter, Algorithm::kRecursiveHalving, 8, bytesOnly),
                   seconds(Collective::kReduceScatter, Algorithm::kRing, 8, bytesOnly));
  // Past a slice, each slice of an exchange waits for the partner's, as the ring's do.
  const size_t large = size_t{64} << 20;
  for (int n : {2, 4}) {
    const double ring =
        predictSeconds(Collective::kAllgather, Algorithm::kRing, n, large, 512 << 10, messages);
    EXPECT_GE(predictSeconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, n, large,
                             512 << 10, messages),
              ring)
        << n;
  }
  CostModel copies = bytesOnly;
  copies.delta = 1e-10;
  EXPECT_GT(seconds(Collective::kReduceScatter, Algorithm::kRecursiveHalving, 8, copies),
            seconds(Collective::kReduceScatter, Algorithm::kRing, 8, copies));
  // The copies are what the steps after the first send out of the work buffer: none for two
  // ranks (one step, from the caller's input), m/4 for four, 3m/8 for eight; a fold reduces the
  // folded rank's input into the work buffer first, so there the first step's copy counts too.
  const CostModel copiesOnly{.alpha = 0, .beta = 0, .gamma = 0, .delta = 1e-10};
  const double m = static_cast<double>(bytes);
  constexpr std::pair<int, double> kCopied[] = {{2, 0.0}, {4, 0.25}, {8, 0.375}};
  for (auto [n, share] : kCopied) {
    EXPECT_DOUBLE_EQ(
        seconds(Collective::kReduceScatter, Algorithm::kRecursiveHalving, n, copiesOnly),
        share * m * 1e-10)
        << n;
    const std::vector<size_t> even(static_cast<size_t>(n), bytes / n);
    EXPECT_DOUBLE_EQ(
        predictSecondsOfBlocks(Collective::kReduceScatterv, Algorithm::kRecursiveHalving, even,
                               512 << 10, copiesOnly),
        share * m * 1e-10)
        << n;
  }
  // Three ranks: the step (m/2) after the fold, plus the folded rank's block laid out (m/3).
  EXPECT_DOUBLE_EQ(seconds(Collective::kReduceScatter, Algorithm::kRecursiveHalving, 3, copiesOnly),
                   (0.5 + 1.0 / 3) * m * 1e-10);
  // A fold moves the folded rank's data in and out on top.
  EXPECT_GT(seconds(Collective::kAllgather, Algorithm::kRecursiveDoubling, 6, bytesOnly),
            seconds(Collective::kAllgather, Algorithm::kRing, 6, bytesOnly));
}

TEST(CostModel, OneWayRateDrivesTreesNotRings) {
  CostModel model{.alpha = 0, .beta = 1e-9, .gamma = 0, .delta = 0};
  const double ringBoth =
      predictSeconds(Collective::kAllreduce, Algorithm::kRing, 4, 1 << 20, 512 << 10, model);
  const double treeBoth =
      predictSeconds(Collective::kBroadcast, Algorithm::kTree, 4, 1 << 20, 512 << 10, model);
  model.betaOneWay = 0.5e-9;
  EXPECT_DOUBLE_EQ(
      predictSeconds(Collective::kAllreduce, Algorithm::kRing, 4, 1 << 20, 512 << 10, model),
      ringBoth);
  EXPECT_DOUBLE_EQ(
      predictSeconds(Collective::kBroadcast, Algorithm::kTree, 4, 1 << 20, 512 << 10, model),
      treeBoth / 2);
}

TEST(CostModel, LatencyBoundPicksLogStepsBandwidthBoundPicksRing) {
  const CostModel slowMessages{.alpha = 1e-3, .beta = 1e-12, .gamma = 1e-12, .delta = 1e-12};
  const CostModel freeMessages{.alpha = 0, .beta = 1e-9, .gamma = 1e-9, .delta = 1e-9};
  const size_t mib = 1 << 20;
  auto pick = [](Collective c, int n, const CostModel& m) {
    return choose(c, n, 64 << 20, 512 << 10, m, Algorithm::kAuto);
  };
  EXPECT_EQ(pick(Collective::kAllreduce, 4, slowMessages), Algorithm::kRecursiveDoubling);
  // The ring and Rabenseifner send and reduce the same bytes at N=4: with free messages they
  // cost the same (Rabenseifner no longer copies its input first), both beat recursive
  // doubling, and the tie goes to the ring.
  EXPECT_EQ(pick(Collective::kAllreduce, 4, freeMessages), Algorithm::kRing);
  const double ring = predictSeconds(Collective::kAllreduce, Algorithm::kRing, 4, 64 << 20,
                                     512 << 10, freeMessages);
  EXPECT_NEAR(predictSeconds(Collective::kAllreduce, Algorithm::kRabenseifner, 4, 64 << 20,
                             512 << 10, freeMessages),
              ring, 1e-9 * ring);
  EXPECT_EQ(pick(Collective::kAllreduce, 3, freeMessages), Algorithm::kRing);
  // Bruck and recursive doubling pay a latency per slice of each exchange, as the ring does per
  // slice of its pipeline: with 64 MiB the ring's pipelined steps cost fewer latencies.
  EXPECT_EQ(pick(Collective::kAllgather, 5, slowMessages), Algorithm::kRing);
  EXPECT_EQ(pick(Collective::kAllgather, 5, freeMessages), Algorithm::kRing);
  EXPECT_EQ(pick(Collective::kAllgather, 8, freeMessages), Algorithm::kRing);
  EXPECT_EQ(pick(Collective::kReduceScatter, 8, freeMessages), Algorithm::kRing);
  // Recursive halving and doubling where the exchanges fit a slice (their sliced exchanges pay a
  // latency per slice).
  auto pickSmall = [](Collective c, int n, const CostModel& m) {
    return choose(c, n, 64 << 10, 512 << 10, m, Algorithm::kAuto);
  };
  EXPECT_NE(pickSmall(Collective::kAllgather, 8, slowMessages), Algorithm::kRing);  // a tie
  // N = 5: Bruck's three rounds, one of them wrapped, are four messages, as the ring's four
  // steps (a tie, to the ring, listed first); N = 6: Bruck five, recursive doubling four (two
  // rounds and the folded rank's block in and out).
  EXPECT_EQ(pickSmall(Collective::kAllgather, 5, slowMessages), Algorithm::kRing);
  EXPECT_EQ(pickSmall(Collective::kAllgather, 6, slowMessages), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(pickSmall(Collective::kReduceScatter, 6, slowMessages), Algorithm::kRecursiveHalving);
  EXPECT_EQ(pickSmall(Collective::kReduceScatter, 8, slowMessages), Algorithm::kRecursiveHalving);
  EXPECT_EQ(pick(Collective::kAllToAll, 8, slowMessages), Algorithm::kBruck);
  EXPECT_EQ(pick(Collective::kAllToAll, 8, freeMessages), Algorithm::kPairwise);
  EXPECT_EQ(pick(Collective::kBroadcast, 8, slowMessages), Algorithm::kTree);
  EXPECT_EQ(pick(Collective::kBroadcast, 8, freeMessages), Algorithm::kChain);
  EXPECT_EQ(pick(Collective::kReduce, 8, slowMessages), Algorithm::kTree);
  EXPECT_EQ(pick(Collective::kReduce, 8, freeMessages), Algorithm::kChain);
  // Forced wins over the model.
  EXPECT_EQ(choose(Collective::kAllreduce, 4, mib, 512 << 10, slowMessages, Algorithm::kRing),
            Algorithm::kRing);
}

// At a power of two n and n slices of data, the ring all-reduce's 2(n-1) steps of one slice and
// Rabenseifner's exchanges (n/2 + n/4 + ... + 1 slices, twice) are the same messages and bytes:
// a tie, which goes to the ring (measured faster there in most sweeps, select.cc); a slice less
// or more and the model decides.
TEST(CostModel, TheRingTakesItsTieWithRabenseifner) {
  const CostModel m{.alpha = 2e-6, .beta = 1.5e-10, .gamma = 1e-11, .delta = 3e-11};
  const size_t slice = 512 << 10;
  for (int n : {4, 8}) {
    SCOPED_TRACE(n);
    const size_t tied = n * slice;
    const double ring = predictSeconds(Collective::kAllreduce, Algorithm::kRing, n, tied, slice, m);
    EXPECT_NEAR(predictSeconds(Collective::kAllreduce, Algorithm::kRabenseifner, n, tied, slice, m),
                ring, 1e-9 * ring);
    EXPECT_EQ(choose(Collective::kAllreduce, n, tied, slice, m, Algorithm::kAuto),
              Algorithm::kRing);
    EXPECT_EQ(choose(Collective::kAllreduce, n, tied / 2, slice, m, Algorithm::kAuto),
              Algorithm::kRabenseifner);
  }
}

// The size from which all-reduce leaves recursive doubling grows with the cost of a message.
TEST(CostModel, CrossoverMovesWithAlpha) {
  auto crossover = [](double alpha) {
    const CostModel m{.alpha = alpha, .beta = 2e-10, .gamma = 1e-10, .delta = 5e-11};
    for (size_t bytes = 512; bytes <= (size_t{1} << 30); bytes *= 2) {
      if (choose(Collective::kAllreduce, 4, bytes, 512 << 10, m, Algorithm::kAuto) !=
          Algorithm::kRecursiveDoubling) {
        return bytes;
      }
    }
    return size_t{0};
  };
  const size_t fast = crossover(1e-6);
  const size_t slow = crossover(1e-5);
  ASSERT_GT(fast, 0u);
  EXPECT_GT(slow, fast);
}

TEST(CostModel, AllreduceHeaderSizedDataRidesInHeadersUnlessAnotherAlgorithmIsForced) {
  const CostModel m;
  EXPECT_EQ(chooseAllreduce(0, 2, 64, 256, 512 << 10, m, Algorithm::kAuto).algorithm,
            AllreduceAlgorithm::kInlineExchange);
  EXPECT_EQ(chooseAllreduce(0, 3, 64, 256, 512 << 10, m, Algorithm::kAuto).algorithm,
            AllreduceAlgorithm::kHeaderDoubling);
  EXPECT_EQ(chooseAllreduce(0, 3, 64, 256, 512 << 10, m, Algorithm::kRing).algorithm,
            AllreduceAlgorithm::kRing);
  EXPECT_EQ(chooseAllreduce(0, 3, 64, 256, 512 << 10, m, Algorithm::kRabenseifner).algorithm,
            AllreduceAlgorithm::kRabenseifner);
  EXPECT_EQ(chooseAllreduce(0, 1, 1 << 20, 256, 512 << 10, m, Algorithm::kRing).algorithm,
            AllreduceAlgorithm::kLocalCopy);
}

// Across hosts the model prices the bytes that leave a host: Rabenseifner on ranks dealt over 2
// hosts keeps its large halvings inside them and sends m over a host's link where the ring sends
// 1.5 m (4 ranks), so it wins a large all-reduce there, and loses it on one host (measured on
// emulated hosts at 1 Gbit/s: 1.31 against 0.99 of one stream, docs/multi-host.md).
TEST(CostModel, AcrossHostsRabenseifnerCountsOnlyTheBytesThatLeaveAHost) {
  // One flow between hosts at 0.12 GB/s, copies at 5 GB/s, 50 us per message.
  const CostModel m{.alpha = 50e-6, .beta = 1 / 0.12e9, .gamma = 1e-10, .delta = 2e-10};
  const size_t big = 16 << 20;
  const size_t slice = 512 << 10;
  auto seconds = [&](Algorithm a, int n, int hosts) {
    return predictSeconds(Collective::kAllreduce, a, n, big, slice, m, hosts);
  };
  EXPECT_LT(seconds(Algorithm::kRabenseifner, 4, 2), 0.9 * seconds(Algorithm::kRing, 4, 2));
  // 4 hosts x 2 ranks: a host's link carries 1.5 m against the ring's 1.75 m, within the
  // margin for what the formula leaves out: the ring (measured: 0.99 of the link, Rabenseifner
  // 0.83-0.95).
  EXPECT_GT(seconds(Algorithm::kRabenseifner, 8, 4), seconds(Algorithm::kRing, 8, 4));
  EXPECT_GT(seconds(Algorithm::kRabenseifner, 4, 1), seconds(Algorithm::kRing, 4, 1));
  // The ring's price does not change with the hosts: it crosses each host's link once anyway.
  EXPECT_EQ(seconds(Algorithm::kRing, 4, 2), seconds(Algorithm::kRing, 4, 1));
  // One rank per host: every halving crosses, and each waits for its whole message over the
  // link (one slice per crossing round more than on one host): the ring wins there.
  EXPECT_GT(seconds(Algorithm::kRabenseifner, 4, 4), seconds(Algorithm::kRabenseifner, 4, 1));
  EXPECT_EQ(chooseAllreduce(0, 4, big, 256, slice, m, Algorithm::kAuto, 4).algorithm,
            AllreduceAlgorithm::kRing);
  // Hosts the model does not price (3 of 6 ranks: p = 4 does not cover them): as on one host.
  EXPECT_EQ(seconds(Algorithm::kRabenseifner, 6, 3), seconds(Algorithm::kRabenseifner, 6, 1));
  // Both Rabenseifner and the two levels carry m over a host link at 2 x 2; the two levels are
  // priced with the smaller margin (measured alike there: 147.8-150.4 ms against 147.9-148.9,
  // docs/multi-host.md).
  EXPECT_EQ(chooseAllreduce(0, 4, big, 256, slice, m, Algorithm::kAuto, 2).algorithm,
            AllreduceAlgorithm::kHierarchical);
  EXPECT_LT(seconds(Algorithm::kRabenseifner, 4, 2), seconds(Algorithm::kRing, 4, 2));
  EXPECT_EQ(chooseAllreduce(0, 4, big, 256, slice, m, Algorithm::kAuto, 1).algorithm,
            AllreduceAlgorithm::kRing);
  // 4 x 2: the two levels carry 1.5 m against the ring's 1.75 m (measured 3-13% ahead).
  EXPECT_EQ(chooseAllreduce(0, 8, big, 256, slice, m, Algorithm::kAuto, 4).algorithm,
            AllreduceAlgorithm::kHierarchical);
  // Forced, each runs as asked.
  EXPECT_EQ(chooseAllreduce(0, 8, big, 256, slice, m, Algorithm::kRing, 4).algorithm,
            AllreduceAlgorithm::kRing);
}

// All-gather and reduce-scatter in two levels (hierarchical.cc) send (H-1)/H m over a host's
// link where the host-ordered ring sends (N-1)/N m: they win large calls across hosts with
// several ranks each, and are not priced on one host, with one rank per host or an uneven spread.
TEST(CostModel, AcrossHostsTwoLevelsCarryOnlyTheHostsShare) {
  // One flow between hosts at 0.12 GB/s, copies at 5 GB/s, 50 us per message.
  const CostModel m{.alpha = 50e-6, .beta = 1 / 0.12e9, .gamma = 1e-10, .delta = 2e-10};
  const size_t slice = 512 << 10;
  for (Collective c : {Collective::kAllgather, Collective::kReduceScatter}) {
    SCOPED_TRACE(std::string(nameOf(c)));
    auto seconds = [&](Algorithm a, int n, int hosts, size_t bytes) {
      return predictSeconds(c, a, n, bytes, slice, m, hosts);
    };
    const size_t big = 16 << 20;
    // 2 hosts x 2: 1/2 m against 3/4 m; 2 x 8: 1/2 against 15/16 (both times the margin).
    EXPECT_LT(seconds(Algorithm::kHierarchical, 4, 2, big),
              0.85 * seconds(Algorithm::kRing, 4, 2, big));
    EXPECT_LT(seconds(Algorithm::kHierarchical, 16, 2, big),
              0.7 * seconds(Algorithm::kRing, 16, 2, big));
    EXPECT_EQ(choose(c, 4, big, slice, m, Algorithm::kAuto, 2), Algorithm::kHierarchical);
    EXPECT_EQ(choose(c, 12, big, slice, m, Algorithm::kAuto, 3), Algorithm::kHierarchical);
    // Few bytes: H more steps than the ring's N-1, so not there.
    EXPECT_NE(choose(c, 16, 4096, slice, m, Algorithm::kAuto, 2), Algorithm::kHierarchical);
    // Not priced: one host, one rank per host, an uneven spread (the communicator passes 1).
    EXPECT_TRUE(std::isinf(seconds(Algorithm::kHierarchical, 4, 1, big)));
    EXPECT_TRUE(std::isinf(seconds(Algorithm::kHierarchical, 4, 4, big)));
    EXPECT_TRUE(std::isinf(seconds(Algorithm::kHierarchical, 5, 2, big)));
    EXPECT_NE(choose(c, 4, big, slice, m, Algorithm::kAuto, 1), Algorithm::kHierarchical);
    // Forced, it is what runs.
    EXPECT_EQ(choose(c, 4, big, slice, m, Algorithm::kHierarchical, 1), Algorithm::kHierarchical);
  }
  // All-reduce: the two rows. 3 hosts x 2, where Rabenseifner's halvings do not fit the hosts
  // (measured 3x the ring's time there) and the ring carries 5/3 m: the two levels, 4/3 m.
  const size_t big = 16 << 20;
  EXPECT_EQ(chooseAllreduce(0, 6, big, 256, slice, m, Algorithm::kAuto, 3).algorithm,
            AllreduceAlgorithm::kHierarchical);
  EXPECT_NEAR(
      predictSeconds(Collective::kAllreduce, Algorithm::kHierarchical, 6, big, slice, m, 3),
      predictSeconds(Collective::kAllgather, Algorithm::kHierarchical, 6, big, slice, m, 3) +
          predictSeconds(Collective::kReduceScatter, Algorithm::kHierarchical, 6, big, slice, m, 3),
      1e-12);
  EXPECT_EQ(chooseAllreduce(0, 6, big, 256, slice, m, Algorithm::kAuto, 1).algorithm,
            AllreduceAlgorithm::kRing);
  // The v-forms: as equal blocks of the same total.
  const std::vector<size_t> blocks = {big / 8, big / 4, big / 8, big / 2};
  for (Collective c : {Collective::kAllgatherv, Collective::kReduceScatterv}) {
    EXPECT_EQ(chooseForBlocks(c, blocks, slice, m, Algorithm::kAuto, 2), Algorithm::kHierarchical)
        << nameOf(c);
    EXPECT_NE(chooseForBlocks(c, blocks, slice, m, Algorithm::kAuto, 1), Algorithm::kHierarchical)
        << nameOf(c);
  }
}

// The v-forms: a few bytes take recursive doubling (all-gather-v) and halving (reduce-scatter-v),
// tens of MiB the ring, whether the blocks are even or one rank holds everything. Below four
// ranks the ring's N-1 steps are as few as the log-step messages (two ranks: the same single
// exchange, a tie that goes to recursive doubling, the lighter code; three: one exchange and the
// fold in and out against the ring's two steps, so the ring). Rates of a shared-memory link: 2 us
// a message, 10 GB/s per link, reductions and copies at 10 and 20 GB/s.
TEST(CostModel, VFormsPickLogStepsForFewBytesAndTheRingForTensOfMiB) {
  const CostModel model{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 5e-11};
  const size_t slice = 512 << 10;
  auto blocks = [](int n, size_t total, bool oneHasAll) {
    std::vector<size_t> b(static_cast<size_t>(n), oneHasAll ? 0 : total / n);
    if (oneHasAll) b[static_cast<size_t>(n / 2)] = total;
    return b;
  };
  for (int n : {2, 3}) {
    EXPECT_EQ(chooseForBlocks(Collective::kAllgatherv, blocks(n, 64, false), slice, model,
                              Algorithm::kAuto),
              n == 2 ? Algorithm::kRecursiveDoubling : Algorithm::kRing);
  }
  // The tie at two ranks, equal blocks too, at every size.
  for (size_t bytes : {size_t{2048}, size_t{64} << 20}) {
    EXPECT_EQ(choose(Collective::kAllgather, 2, bytes, slice, model, Algorithm::kAuto),
              Algorithm::kRecursiveDoubling);
  }
  for (int n : {4, 6, 7, 8}) {
    for (bool oneHasAll : {false, true}) {
      for (size_t total : {size_t{8} * n, size_t{4096}}) {
        EXPECT_EQ(chooseForBlocks(Collective::kAllgatherv, blocks(n, total, oneHasAll), slice,
                                  model, Algorithm::kAuto),
                  Algorithm::kRecursiveDoubling)
            << n << " ranks, " << total << " B" << (oneHasAll ? " on one rank" : "");
        EXPECT_EQ(chooseForBlocks(Collective::kReduceScatterv, blocks(n, total, oneHasAll), slice,
                                  model, Algorithm::kAuto),
                  Algorithm::kRecursiveHalving)
            << n << " ranks, " << total << " B" << (oneHasAll ? " on one rank" : "");
      }
      const size_t large = size_t{48} << 20;
      EXPECT_EQ(chooseForBlocks(Collective::kAllgatherv, blocks(n, large, oneHasAll), slice, model,
                                Algorithm::kAuto),
                Algorithm::kRing)
          << n << " ranks" << (oneHasAll ? ", one with everything" : "");
      EXPECT_EQ(chooseForBlocks(Collective::kReduceScatterv, blocks(n, large, oneHasAll), slice,
                                model, Algorithm::kAuto),
                Algorithm::kRing)
          << n << " ranks" << (oneHasAll ? ", one with everything" : "");
      // Forced wins over the model.
      EXPECT_EQ(chooseForBlocks(Collective::kAllgatherv, blocks(n, large, oneHasAll), slice, model,
                                Algorithm::kRecursiveDoubling),
                Algorithm::kRecursiveDoubling);
    }
  }
  // The same through predictSeconds' even blocks, which ringlet-info prints.
  EXPECT_EQ(choose(Collective::kAllgatherv, 6, 64, slice, model, Algorithm::kAuto),
            Algorithm::kRecursiveDoubling);
  EXPECT_EQ(
      choose(Collective::kReduceScatterv, 5, size_t{48} << 20, slice, model, Algorithm::kAuto),
      Algorithm::kRing);
}

// The ring's steps wait for its largest block: one rank with all of a one-slice total makes every
// one of the N-1 steps move all of it. With even blocks the v-forms' rings are priced as the
// equal-block collectives' rings.
TEST(CostModel, TheLargestBlockSetsTheRingsSteps) {
  const CostModel model{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 0};
  const size_t slice = 512 << 10;
  const size_t m = 64 << 10;
  for (int n : {3, 4, 7}) {
    std::vector<size_t> one(static_cast<size_t>(n), 0);
    one[0] = m;
    EXPECT_DOUBLE_EQ(
        predictSecondsOfBlocks(Collective::kAllgatherv, Algorithm::kRing, one, slice, model),
        (n - 1) * (2e-6 + static_cast<double>(m) * 1e-10))
        << n;
    EXPECT_GT(
        predictSecondsOfBlocks(Collective::kReduceScatterv, Algorithm::kRing, one, slice, model),
        predictSeconds(Collective::kReduceScatterv, Algorithm::kRing, n, m, slice, model))
        << n;
    // Recursive doubling's steps each move the group that holds it: log2(p) of them, plus the
    // fold (three ranks: as many messages as the ring's, and the fold moves the block twice more).
    const double log = predictSecondsOfBlocks(Collective::kAllgatherv,
                                              Algorithm::kRecursiveDoubling, one, slice, model);
    const double ring =
        predictSecondsOfBlocks(Collective::kAllgatherv, Algorithm::kRing, one, slice, model);
    if (n == 3) {
      EXPECT_GT(log, ring);
    } else {
      EXPECT_LT(log, ring) << n;
    }
  }
  for (int n : {2, 4, 8}) {
    for (size_t bytes : {size_t{4096} * 8, size_t{64} << 20}) {
      for (auto [v, equal] : {std::pair{Collective::kAllgatherv, Collective::kAllgather},
                              std::pair{Collective::kReduceScatterv, Collective::kReduceScatter}}) {
        EXPECT_DOUBLE_EQ(predictSeconds(v, Algorithm::kRing, n, bytes, slice, model),
                         predictSeconds(equal, Algorithm::kRing, n, bytes, slice, model))
            << n << " " << bytes;
      }
    }
  }
}

// Gather and scatter: the linear root takes N-1 messages where the tree takes ceil(log2 N), and
// the tree's inner ranks forward their subtrees. Tiny blocks: the tree; large ones from four
// ranks on: the linear schedule; two and three ranks move the same messages either way, and the
// tree wins the tie. The v-forms price their blocks the same way (even blocks: as gather), and a
// forced algorithm wins.
TEST(CostModel, RootedCollectivesTakeTheLinearScheduleForLargeBlocks) {
  const CostModel model{.alpha = 2e-6, .beta = 1e-10, .gamma = 1e-10, .delta = 5e-11};
  const size_t slice = 512 << 10;
  for (Collective c :
       {Collective::kGather, Collective::kScatter, Collective::kGatherv, Collective::kScatterv}) {
    for (int n = 4; n <= 8; ++n) {
      EXPECT_EQ(choose(c, n, 8 * n, slice, model, Algorithm::kAuto), Algorithm::kTree)
          << nameOf(c) << " " << n;
      EXPECT_EQ(choose(c, n, size_t{16} << 20, slice, model, Algorithm::kAuto), Algorithm::kLinear)
          << nameOf(c) << " " << n;
      EXPECT_EQ(choose(c, n, size_t{16} << 20, slice, model, Algorithm::kTree), Algorithm::kTree);
    }
    for (int n : {2, 3}) {
      EXPECT_EQ(choose(c, n, size_t{16} << 20, slice, model, Algorithm::kAuto), Algorithm::kTree)
          << nameOf(c) << " " << n;
    }
  }
  for (int n = 4; n <= 8; ++n) {
    const std::vector<size_t> even(static_cast<size_t>(n), size_t{1} << 20);
    EXPECT_DOUBLE_EQ(
        predictSecondsOfBlocks(Collective::kGatherv, Algorithm::kLinear, even, slice, model),
        predictSeconds(Collective::kGather, Algorithm::kLinear, n, n * (size_t{1} << 20), slice,
                       model));
    // One large block at relative rank 1, a child of the root: the tree forwards nothing, and
    // its root takes fewer messages.
    std::vector<size_t> firstOnly(static_cast<size_t>(n), 0);
    firstOnly[1] = size_t{16} << 20;
    EXPECT_EQ(chooseForBlocks(Collective::kGatherv, firstOnly, slice, model, Algorithm::kAuto),
              Algorithm::kTree)
        << n;
    // One large block at the last relative rank: forwarded by an inner rank unless N-1 is a
    // power of two (a child of the root), so the linear schedule but at N = 5.
    std::vector<size_t> lastOnly(static_cast<size_t>(n), 0);
    lastOnly.back() = size_t{16} << 20;
    const bool rootsChild = ((n - 1) & (n - 2)) == 0;
    EXPECT_EQ(chooseForBlocks(Collective::kScatterv, lastOnly, slice, model, Algorithm::kAuto),
              rootsChild ? Algorithm::kTree : Algorithm::kLinear)
        << n;
  }
}

// Three or more ranks on shared cores: a broadcast in a row costs the ranks' work over the cores
// that the ring shift calibrating beta shares the same way: n - 1 messages of m, (n - 1) / n m b;
// the chain adds its one slice of fill one way and n - 1 alphas, the tree its rounds' alphas and
// 0.75x (written in place) or 1.1x (through the slots) of that work. Not the reduce, not two
// ranks, not across hosts: those keep the pipeline's price.
TEST(CostModel, SharedCoresPriceABroadcastByTheRanksWork) {
  // A 4-rank model on a 2-core VM (bench/results/ring-passes-2026-12-01/model-n4-1.json).
  CostModel model{
      .alpha = 5.9e-6, .beta = 3.9e-10, .gamma = 5.3e-12, .delta = 3.0e-11, .betaOneWay = 1.56e-10};
  model.directBytes = 1 << 20;
  model.ranksShareCores = true;
  model.ranksPerCore = 2;
  const size_t slice = 512 << 10;
  constexpr int n = 4;
  auto price = [&](Collective c, Algorithm a, size_t bytes, const CostModel& m, int ranks = 4,
                   int hosts = 1) { return predictSeconds(c, a, ranks, bytes, slice, m, hosts); };
  for (const size_t bytes : {size_t{256} << 10, size_t{4} << 20, size_t{64} << 20}) {
    const double m = static_cast<double>(bytes);
    const double work = 0.75 * m * model.beta;  // (n - 1) / n m b
    EXPECT_NEAR(price(Collective::kBroadcast, Algorithm::kChain, bytes, model),
                3 * model.alpha + work + std::min<double>(m, slice) * model.betaOneWay, 1e-9 * work)
        << bytes;
    // 256 KiB is written in place (directBytes 1 MiB); 4 and 64 MiB go through the slots.
    EXPECT_NEAR(price(Collective::kBroadcast, Algorithm::kTree, bytes, model),
                2 * model.alpha + work * (bytes <= (1 << 20) ? 0.75 : 1.1), 1e-9 * work)
        << bytes;
  }
  // As measured in turns: the tree written in place below 1 MiB, the chain for tens of MiB.
  EXPECT_EQ(choose(Collective::kBroadcast, n, 256 << 10, slice, model, Algorithm::kAuto),
            Algorithm::kTree);
  EXPECT_EQ(choose(Collective::kBroadcast, n, 32 << 20, slice, model, Algorithm::kAuto),
            Algorithm::kChain);
  // The others as with cores of their own.
  CostModel own = model;
  own.ranksShareCores = false;
  own.ranksPerCore = 1;
  const size_t big = size_t{16} << 20;
  for (Algorithm a : {Algorithm::kChain, Algorithm::kTree}) {
    EXPECT_DOUBLE_EQ(price(Collective::kReduce, a, big, model),
                     price(Collective::kReduce, a, big, own));
    EXPECT_DOUBLE_EQ(price(Collective::kBroadcast, a, big, model, 8, 2),
                     price(Collective::kBroadcast, a, big, own, 8, 2));
  }
  EXPECT_DOUBLE_EQ(price(Collective::kBroadcast, Algorithm::kChain, big, model, 2),
                   price(Collective::kBroadcast, Algorithm::kChain, big, own, 2));
}

// Ranks that share cores: a scatter's inner rank forwards after its own receive, on cores the
// root's messages also wait for, so a forwarded byte costs a link byte, not a copy beside them.
// The model of a 4-rank job on 2 cores (alpha 8 us, 6.58 GB/s one way, 43.7 GB/s memcpy): 1 MiB,
// blocks of 256 KiB, one of them forwarded: the tree with cores of their own (one message less
// than the linear root's three, 6 us of copy), the linear root where they share (40 us of
// link). A gather's hop overlaps its root's receives: the tree either way.
TEST(CostModel, SharedCoresPriceTheScatterTreesForwardingAsLinkBytes) {
  CostModel model{.alpha = 8e-6,
                  .beta = 1 / 3.33e9,
                  .gamma = 1 / 297e9,
                  .delta = 1 / 43.7e9,
                  .betaOneWay = 1 / 6.58e9};
  const size_t slice = 512 << 10;
  const std::vector<size_t> blocks(4, 256 << 10);
  for (bool shared : {false, true}) {
    model.ranksShareCores = shared;
    const Algorithm scatter = shared ? Algorithm::kLinear : Algorithm::kTree;
    EXPECT_EQ(choose(Collective::kScatter, 4, 1 << 20, slice, model, Algorithm::kAuto), scatter);
    EXPECT_EQ(chooseForBlocks(Collective::kScatterv, blocks, slice, model, Algorithm::kAuto),
              scatter);
    EXPECT_EQ(choose(Collective::kGather, 4, 1 << 20, slice, model, Algorithm::kAuto),
              Algorithm::kTree);
    EXPECT_EQ(chooseForBlocks(Collective::kGatherv, blocks, slice, model, Algorithm::kAuto),
              Algorithm::kTree);
    // Tiny blocks: the messages decide.
    EXPECT_EQ(choose(Collective::kScatter, 4, 64, slice, model, Algorithm::kAuto),
              Algorithm::kTree);
  }
  // Three ranks forward nothing: the same either way.
  model.ranksShareCores = false;
  const double own =
      predictSeconds(Collective::kScatter, Algorithm::kTree, 3, 3 << 20, slice, model);
  model.ranksShareCores = true;
  EXPECT_DOUBLE_EQ(predictSeconds(Collective::kScatter, Algorithm::kTree, 3, 3 << 20, slice, model),
                   own);
}

// Where ranks share cores and the links lend the all-to-all's blocks, every rank sends all its
// blocks before it waits (pairwise_alltoall.cc): its n - 1 messages cost alpha shared by the
// ranks of a core, where Bruck's rounds each wait for the one before. The model of 4 ranks on 2
// cores (alpha 7 us, 2.97 GB/s, 53 GB/s memcpy): Bruck's 2 rounds priced below pairwise's 3
// messages at alpha (8 KiB), pairwise once they go out at once; the same 4 ranks with cores of
// their own, or links that do not lend: Bruck, as before.
TEST(CostModel, SharedCoresPriceTheAllAtOnceAllToAllByTheCore) {
  CostModel model{.alpha = 7e-6, .beta = 1 / 2.97e9, .gamma = 1 / 143e9, .delta = 1 / 53e9};
  const size_t slice = 512 << 10;
  const auto pick = [&](bool shared, bool lends, int ranks) {
    model.ranksShareCores = shared;
    model.ranksPerCore = shared ? ranks / 2.0 : 1.0;
    model.allToAllLends = lends;
    return choose(Collective::kAllToAll, ranks, 8 << 10, slice, model, Algorithm::kAuto);
  };
  EXPECT_EQ(pick(true, true, 4), Algorithm::kPairwise);
  EXPECT_EQ(pick(true, false, 4), Algorithm::kBruck);
  EXPECT_EQ(pick(false, true, 4), Algorithm::kBruck);
  EXPECT_EQ(pick(true, true, 8), Algorithm::kPairwise);  // 7 messages at a/4 against 3 rounds
  // The price itself: n - 1 messages at alpha / ranksPerCore.
  pick(true, true, 4);
  const double atOnce =
      predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, 4, 0, slice, model);
  EXPECT_DOUBLE_EQ(atOnce, 3 * 7e-6 / 2);
  // Two ranks have one message: nothing to send at once.
  pick(true, true, 2);
  EXPECT_DOUBLE_EQ(predictSeconds(Collective::kAllToAll, Algorithm::kPairwise, 2, 0, slice, model),
                   7e-6);
}

// The rooted calls where ranks share cores: the linear root's messages (and a gather's senders')
// go out before any wait, alpha / R each; the tree's forwarding hops wait for their receive.
// 8 ranks on 2 cores, 32 KiB: linear (7 a/4) where the tree was priced below it (3 a against 7 a);
// with a core per rank, or R = 1, the tree as before. 3 ranks: the two are one shape, priced alike.
TEST(CostModel, SharedCoresPriceTheLinearRootsMessagesByTheCore) {
  CostModel model{.alpha = 7e-6, .beta = 1 / 2.97e9, .gamma = 1 / 143e9, .delta = 1 / 53e9};
  const size_t slice = 512 << 10;
  for (Collective c : {Collective::kScatter, Collective::kGather}) {
    model.ranksShareCores = false;
    model.ranksPerCore = 1;
    EXPECT_EQ(choose(c, 8, 32 << 10, slice, model, Algorithm::kAuto), Algorithm::kTree);
    model.ranksShareCores = true;
    EXPECT_EQ(choose(c, 8, 32 << 10, slice, model, Algorithm::kAuto), Algorithm::kTree);
    model.ranksPerCore = 4;
    EXPECT_EQ(choose(c, 8, 32 << 10, slice, model, Algorithm::kAuto), Algorithm::kLinear);
    EXPECT_NEAR(predictSeconds(c, Algorithm::kLinear, 8, 0, slice, model), 7 * 7e-6 / 4, 1e-15);
    // The tree: the root's 3 messages at a/4, then 2 forwarding hops at a.
    EXPECT_NEAR(predictSeconds(c, Algorithm::kTree, 8, 0, slice, model),
                3 * 7e-6 / 4 + 2 * (7e-6 - 7e-6 / 4), 1e-15);
    model.ranksPerCore = 1.5;
    EXPECT_DOUBLE_EQ(predictSeconds(c, Algorithm::kTree, 3, 3 << 10, slice, model),
                     predictSeconds(c, Algorithm::kLinear, 3, 3 << 10, slice, model));
  }
}

// The linear scatter's root lends every block at once and the ranks read theirs at the same
// time, as many as there are cores; the tree's root lends to one child after another. The model
// of 3 ranks on 2 cores that measured it (alpha 3.58 us, 9.98 GB/s one way, blocks up to 1 MiB
// lent): from 64 KiB (blocks of 21 KiB, past Link::kLendMinBytes) to 2 MiB the linear root,
// where the two were priced alike and the tree took the tie; blocks too small to lend or too
// large (8 MiB: 2.7 MiB each), links that lend nothing, and the gather (its root reads every
// block itself): the tree.
TEST(CostModel, TheLinearScattersLentBlocksAreReadAtOnce) {
  CostModel model{.alpha = 3.58e-6,
                  .beta = 1 / 1.79e9,
                  .gamma = 1 / 103e9,
                  .delta = 1 / 16.9e9,
                  .betaOneWay = 1 / 9.98e9,
                  .ranksShareCores = true,
                  .directBytes = 1 << 20,
                  .ranksPerCore = 1.5};
  const size_t slice = 512 << 10;
  for (size_t bytes : {size_t{64} << 10, size_t{256} << 10, size_t{2} << 20}) {
    EXPECT_EQ(choose(Collective::kScatter, 3, bytes, slice, model, Algorithm::kAuto),
              Algorithm::kLinear)
        << bytes;
    const std::vector<size_t> blocks(3, bytes / 3);
    EXPECT_EQ(chooseForBlocks(Collective::kScatterv, blocks, slice, model, Algorithm::kAuto),
              Algorithm::kLinear)
        << bytes;
    EXPECT_EQ(choose(Collective::kGather, 3, bytes, slice, model, Algorithm::kAuto),
              Algorithm::kTree)
        << bytes;
  }
  for (size_t bytes : {size_t{32} << 10, size_t{8} << 20}) {
    EXPECT_EQ(choose(Collective::kScatter, 3, bytes, slice, model, Algorithm::kAuto),
              Algorithm::kTree)
        << bytes;
  }
  // The price: two blocks of 512 KiB read at once by two ranks (a pipeline slice's fill as
  // before), against one after the other.
  const double b1 = 1 / 9.98e9;
  const double loose = 2 * 3.58e-6 / 1.5;
  EXPECT_NEAR(
      predictSeconds(Collective::kScatter, Algorithm::kLinear, 3, 3 * (512 << 10), slice, model),
      loose + (512 << 10) * b1 + (1 << 20) * b1 / 2, 1e-12);
  EXPECT_NEAR(
      predictSeconds(Collective::kScatter, Algorithm::kTree, 3, 3 * (512 << 10), slice, model),
      loose + 3 * (512 << 10) * b1, 1e-12);
  // One reader per core at most: 4 ranks on 2 cores read two at a time.
  model.ranksPerCore = 2;
  const double fourLinear =
      predictSeconds(Collective::kScatter, Algorithm::kLinear, 4, 4 * (256 << 10), slice, model);
  EXPECT_NEAR(fourLinear, 3 * 3.58e-6 / 2 + (256 << 10) * b1 + 3 * (256 << 10) * b1 / 2, 1e-12);
  // Bytes from memory that the readers share: a byte that costs twice its in-cache price past
  // the cache leaves two readers no faster than one.
  model.ranksPerCore = 1.5;
  model.directBytes = 64 << 20;
  model.cacheBytes = 1 << 20;
  model.memoryFactor = 2;
  const size_t large = size_t{48} << 20;
  EXPECT_DOUBLE_EQ(predictSeconds(Collective::kScatter, Algorithm::kLinear, 3, large, slice, model),
                   predictSeconds(Collective::kScatter, Algorithm::kTree, 3, large, slice, model));
  // Links that lend nothing: the two are one shape again.
  model.directBytes = 0;
  EXPECT_DOUBLE_EQ(
      predictSeconds(Collective::kScatter, Algorithm::kLinear, 3, 3 << 20, slice, model),
      predictSeconds(Collective::kScatter, Algorithm::kTree, 3, 3 << 20, slice, model));
}
}  // namespace
}  // namespace ringlet::collectives
