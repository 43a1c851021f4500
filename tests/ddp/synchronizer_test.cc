// GradientSynchronizer on thread ranks with hand-made gradients: bucket layout, averaging in and
// out of place, launch order, unmarked gradients, accumulation, overlap timestamps and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "ringlet/ddp.h"
#include "ringlet/ringlet.h"
#include "src/ddp/bucket_layout.h"
#include "tests/support/ranks.h"

namespace ringlet::ddp {
namespace {

using namespace std::chrono_literals;
using testing::runThreadRanks;

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store) {
  CommunicatorOptions options;
  options.timeout = 10s;
  options.transport = "local";
  return Communicator::create(Bootstrap::forThread(rank, size, std::move(store)), options);
}

std::vector<Slice> slicesOf(std::vector<std::vector<float>>& grads) {
  std::vector<Slice> s;
  for (auto& g : grads) s.push_back({g.data(), g.size(), DataType::kFloat32});
  return s;
}

TEST(BucketLayout, ReverseOrderFirstBucketSmallCapsAndTypes) {
  std::vector<float> arena(1000);
  // Counts 100, 200, 300, 400 floats = 400, 800, 1200, 1600 bytes, contiguous.
  std::vector<Slice> s = {{arena.data(), 100, DataType::kFloat32},
                          {arena.data() + 100, 200, DataType::kFloat32},
                          {arena.data() + 300, 300, DataType::kFloat32},
                          {arena.data() + 600, 400, DataType::kFloat32}};
  auto b = detail::planBuckets(s, /*firstCap=*/1600, /*cap=*/2000);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].slices, (std::vector<size_t>{3}));
  EXPECT_EQ(b[1].slices, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(b[2].slices, (std::vector<size_t>{0}));
  EXPECT_EQ(b[1].bytes, 2000u);
  for (auto& x : b) EXPECT_TRUE(x.inPlace);
  // A slice larger than the cap gets its own bucket; a type change closes a bucket.
  std::vector<double> d(10);
  s.push_back({d.data(), 10, DataType::kFloat64});
  b = detail::planBuckets(s, 100, 100);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].type, DataType::kFloat64);
  EXPECT_EQ(b[1].slices, (std::vector<size_t>{3}));
  // Not adjacent: staged.
  std::vector<float> a1(4), a2(4);
  std::vector<Slice> apart = {{a1.data(), 4, DataType::kFloat32},
                              {a2.data(), 4, DataType::kFloat32}};
  b = detail::planBuckets(apart, 1 << 20, 1 << 20);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(detail::contiguousBase(apart, b[0]) != nullptr,
            a1.data() + 4 == a2.data() || a2.data() + 4 == a1.data());
}

// Gradient j of rank r holds (j*1000 + e) * (r+1); the average over n ranks is
// (j*1000 + e) * (n+1)/2, exact in float for these sizes.
void fill(std::vector<std::vector<float>>& g, int rank) {
  for (size_t j = 0; j < g.size(); j++)
    for (size_t e = 0; e < g[j].size(); e++) g[j][e] = float((j * 1000 + e) * (rank + 1));
}
void expectAverage(const std::vector<std::vector<float>>& g, int size, const char* what) {
  for (size_t j = 0; j < g.size(); j++)
    for (size_t e = 0; e < g[j].size(); e++)
      ASSERT_EQ(g[j][e], float(j * 1000 + e) * float(size + 1) / 2.0f)
          << what << ": gradient " << j << " element " << e;
}

TEST(GradientSynchronizer, AveragesSeparateBuffersManyBucketsAnyReadyOrder) {
  for (int n : {1, 2, 3, 4}) {
    runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store);
      std::vector<std::vector<float>> g;
      for (size_t c : {7u, 1u, 300u, 64u, 5u, 129u}) g.emplace_back(c);
      GradientSynchronizer sync(comm, slicesOf(g),
                                {.bucketCapBytes = 600, .firstBucketCapBytes = 40});
      EXPECT_GE(sync.buckets().size(), 3u);
      for (int step = 0; step < 3; step++) {
        fill(g, rank);
        // Ranks mark in different orders; launches still follow bucket order.
        std::vector<size_t> order = {5, 4, 3, 2, 1, 0};
        if ((rank + step) % 2) order = {0, 2, 4, 1, 3, 5};
        for (size_t i : order) sync.markReady(i);
        sync.finish();
        expectAverage(g, size, "separate buffers");
      }
    });
  }
}

TEST(GradientSynchronizer, UnmarkedGradientCountsAsZero) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> arena(30);
    std::vector<Slice> s = {{arena.data(), 10, DataType::kFloat32},
                            {arena.data() + 10, 10, DataType::kFloat32},
                            {arena.data() + 20, 10, DataType::kFloat32}};
    GradientSynchronizer sync(comm, s, {.bucketCapBytes = 40, .firstBucketCapBytes = 40});
    std::fill(arena.begin(), arena.end(), float(rank + 1) * 10);  // stale values everywhere
    // Rank 1 never produces gradient 1; rank 0 produces all.
    for (size_t i : {2u, 1u, 0u}) {
      if (rank == 1 && i == 1) continue;
      sync.markReady(i);
    }
    sync.finish();
    EXPECT_EQ(arena[0], 15.0f);  // (10 + 20) / 2
    EXPECT_EQ(arena[15], 5.0f);  // (10 + 0) / 2
    EXPECT_EQ(arena[25], 15.0f);
  });
}

TEST(GradientSynchronizer, NoSyncAccumulatesThenReducesTheSum) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> grad(100, 0.0f);
    GradientSynchronizer sync(comm, {{grad.data(), grad.size(), DataType::kFloat32}});
    {
      NoSyncScope noSync(sync);
      for (float& x : grad) x += float(rank);
      sync.markReady(0);
      sync.finish();  // no communication
      EXPECT_EQ(grad[0], float(rank));
    }
    for (float& x : grad) x += float(rank);
    sync.markReady(0);
    sync.finish();
    for (float x : grad) ASSERT_EQ(x, 2.0f);  // mean of 2*rank over 0,1,2
  });
}

// The first bucket is launched by markReady() and its completion is seen by a later markReady(),
// both before finish(). The barrier after the first bucket stands for the rest of a backward
// pass that takes long enough: a blocking call waits for the async calls issued before it, so
// the first bucket's all-reduce is over by then on this rank, whatever the timing of the ranks.
TEST(GradientSynchronizer, OverlapBucketReducedBeforeBackwardEnds) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> arena(8 * 16384);
    std::vector<Slice> s;
    for (int j = 0; j < 8; j++) s.push_back({arena.data() + j * 16384, 16384, DataType::kFloat32});
    GradientSynchronizer sync(comm, s, {.bucketCapBytes = 65536, .firstBucketCapBytes = 65536});
    ASSERT_EQ(sync.buckets().size(), 8u);
    for (int j = 7; j >= 0; j--) {  // a "backward" producing the last gradient first
      std::fill(arena.begin() + j * 16384, arena.begin() + (j + 1) * 16384, float(rank));
      sync.markReady(size_t(j));
      if (j == 7) comm.barrier();  // bucket 0's all-reduce has completed once this returns
    }
    auto backwardEnd = std::chrono::steady_clock::now();
    sync.finish();
    const auto& t = sync.lastTimings();
    EXPECT_LT(t[0].launched, backwardEnd);
    EXPECT_LT(t[0].completed, backwardEnd)
        << "first bucket's all-reduce was not seen complete during backward";
    EXPECT_LT(t[6].launched, backwardEnd);
    for (float x : arena) ASSERT_EQ(x, 0.5f);
  });
}

TEST(GradientSynchronizer, BroadcastParametersFromRoot) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> arena(50, float(rank + 7));
    std::vector<double> other(3, double(rank));
    GradientSynchronizer::broadcastParameters(comm, {{arena.data(), 20, DataType::kFloat32},
                                                     {arena.data() + 20, 30, DataType::kFloat32},
                                                     {other.data(), 3, DataType::kFloat64}});
    for (float x : arena) ASSERT_EQ(x, 7.0f);
    for (double x : other) ASSERT_EQ(x, 0.0);
  });
}

TEST(GradientSynchronizer, BadArgumentsAndLayoutMismatch) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<int32_t> ints(4);
    EXPECT_THROW(GradientSynchronizer(comm, {{ints.data(), 4, DataType::kInt32}}), InvalidArgument);
    std::vector<float> g(rank == 0 ? 10 : 11);
    try {
      GradientSynchronizer sync(comm, {{g.data(), g.size(), DataType::kFloat32}});
      ADD_FAILURE() << "layouts of 10 and 11 floats were accepted";
    } catch (const MismatchError& e) {
      EXPECT_NE(std::string(e.what()).find("different gradients"), std::string::npos) << e.what();
    }
    std::vector<float> ok(4);
    GradientSynchronizer sync(comm, {{ok.data(), 4, DataType::kFloat32}});
    EXPECT_THROW(sync.markReady(1), InvalidArgument);
    sync.markReady(0);
    EXPECT_THROW(sync.markReady(0), InvalidArgument);
    sync.finish();
  });
}

// 16-bit wire types: the average arrives within the type's rounding of the exact one, is not the
// float32 average (it really travelled in 16 bits), and half the bytes are staged.
TEST(GradientSynchronizer, SixteenBitWireTypesAverageWithinTheirRounding) {
  for (DataType wire : {DataType::kBFloat16, DataType::kFloat16}) {
    for (int n : {2, 3}) {
      runThreadRanks(n, [wire](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store);
        // Values spread over magnitudes 1e-4 .. 1e2, different per rank.
        std::vector<std::vector<float>> grads = {std::vector<float>(3000), std::vector<float>(777)};
        std::vector<std::vector<double>> exact = {std::vector<double>(3000),
                                                  std::vector<double>(777)};
        auto value = [](int r, size_t j, size_t e) {
          const double mag = std::pow(10.0, double((e * 7 + j) % 7) - 4.0);
          return mag * (1.0 + 0.37 * double(r) + 0.001 * double(e % 113)) * ((e % 3) ? 1 : -1);
        };
        for (size_t j = 0; j < grads.size(); j++) {
          for (size_t e = 0; e < grads[j].size(); e++) {
            grads[j][e] = float(value(rank, j, e));
            for (int r = 0; r < size; r++) exact[j][e] += value(r, j, e) / size;
          }
        }
        SynchronizerOptions options;
        options.wireType = wire;
        options.bucketCapBytes = options.firstBucketCapBytes = 4000;  // several buckets
        GradientSynchronizer sync(comm, slicesOf(grads), options);
        ASSERT_GT(sync.buckets().size(), 1u);
        for (const BucketInfo& b : sync.buckets()) {
          EXPECT_EQ(b.wire, wire);
          EXPECT_FALSE(b.inPlace);
        }
        sync.markReady(1);
        sync.markReady(0);
        sync.finish();
        // bf16 keeps 8 significant bits, fp16 11: each of N rounded terms and each partial sum
        // adds at most half an ulp.
        const double ulp = wire == DataType::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
        size_t differs = 0;
        for (size_t j = 0; j < grads.size(); j++) {
          for (size_t e = 0; e < grads[j].size(); e++) {
            const double want = exact[j][e];
            double bound = ulp * size * std::abs(want) + 1e-12;
            // fp16 subnormals (below 6.1e-5) have an absolute step of 6e-8.
            if (wire == DataType::kFloat16) bound += 6e-8 * size;
            ASSERT_NEAR(grads[j][e], want, bound) << toString(wire) << " j=" << j << " e=" << e;
            differs += float(want) != grads[j][e];
          }
        }
        EXPECT_GT(differs, 100u) << "the average looks like a float32 one";
      });
    }
  }
}

TEST(GradientSynchronizer, WireTypeMustSuitTheGradientsAndAgreeAcrossRanks) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<double> d(4);
    SynchronizerOptions bf16;
    bf16.wireType = DataType::kBFloat16;
    try {
      GradientSynchronizer sync(comm, {{d.data(), 4, DataType::kFloat64}}, bf16);
      ADD_FAILURE() << "float64 gradients were rounded to bfloat16";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("gradient 0 is float64"), std::string::npos) << e.what();
    }
    std::vector<float> g(8);
    SynchronizerOptions int8;
    int8.wireType = DataType::kInt8;
    EXPECT_THROW(GradientSynchronizer(comm, {{g.data(), 8, DataType::kFloat32}}, int8),
                 InvalidArgument);
    SynchronizerOptions mine;
    if (rank == 1) mine.wireType = DataType::kBFloat16;
    try {
      GradientSynchronizer sync(comm, {{g.data(), 8, DataType::kFloat32}}, mine);
      ADD_FAILURE() << "ranks with float32 and bfloat16 wire types were accepted";
    } catch (const MismatchError& e) {
      EXPECT_NE(std::string(e.what()).find("wire type"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace ringlet::ddp
