// Call headers: what goes on the wire round-trips, and calls that differ (including host versus
// device memory) are told apart and described.
#include "src/core/op.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <vector>

namespace ringlet::detail {
namespace {

OpHeader allreduceHeader(uint8_t memory) {
  OpHeader h;
  h.kind = OpKind::kAllreduce;
  h.type = DataType::kBFloat16;
  h.op = ReduceOp::kMax;
  h.count = 123456789;
  h.seq = 42;
  h.memory = memory;
  return h;
}

TEST(OpHeader, EncodeDecodeRoundTrip) {
  const OpHeader sent = allreduceHeader(1);
  const auto wire = sent.encode();
  OpHeader got;
  ASSERT_TRUE(OpHeader::decode(wire.data(), got));
  EXPECT_EQ(got.kind, sent.kind);
  EXPECT_EQ(got.type, sent.type);
  EXPECT_EQ(got.op, sent.op);
  EXPECT_EQ(got.count, sent.count);
  EXPECT_EQ(got.seq, sent.seq);
  EXPECT_EQ(got.memory, 1);
  EXPECT_TRUE(got.sameCall(sent));
}

TEST(OpHeader, HostAndDeviceCallsDiffer) {
  const OpHeader host = allreduceHeader(0);
  const OpHeader device = allreduceHeader(1);
  EXPECT_FALSE(host.sameCall(device));
  EXPECT_EQ(host.describeCall(), "allreduce(count=123456789, bfloat16, max)");
  EXPECT_EQ(device.describeCall(), "allreduce(count=123456789, bfloat16, max, cuda memory)");
  const std::string message = describeMismatch("allreduce #42 on rank 1", 1, host, 0, device);
  EXPECT_NE(message.find("cuda memory"), std::string::npos) << message;
}

TEST(OpHeader, VFormsCarryAFingerprintOfTheirCounts) {
  const std::vector<size_t> counts = {5, 0, 2, 1000003};
  std::vector<size_t> reordered = {0, 5, 2, 1000003};  // same total, other blocks
  OpHeader sent{.kind = OpKind::kReduceScatterv,
                .type = DataType::kInt32,
                .op = ReduceOp::kMin,
                .count = 1000010,
                .seq = 7,
                .countsHash = hashCounts(counts),
                .ranks = 4};
  const auto wire = sent.encode();
  OpHeader got;
  ASSERT_TRUE(OpHeader::decode(wire.data(), got));
  EXPECT_EQ(got.countsHash, sent.countsHash);
  EXPECT_EQ(got.ranks, 4);
  EXPECT_TRUE(got.sameCall(sent));
  EXPECT_EQ(hashCounts(counts), hashCounts(std::vector<size_t>(counts)));
  OpHeader other = sent;
  other.countsHash = hashCounts(reordered);
  EXPECT_NE(other.countsHash, sent.countsHash);
  EXPECT_FALSE(other.sameCall(sent));
  EXPECT_EQ(sent.describeCall().rfind("reduce_scatterv(count=1000010 in all over 4 ranks, int32, "
                                      "min, counts #",
                                      0),
            0u)
      << sent.describeCall();
  // All-to-all-v: each rank's own total differs by design; the pairs check their counts.
  OpHeader a{.kind = OpKind::kAllToAllv, .type = DataType::kFloat32, .count = 3, .ranks = 2};
  OpHeader b = a;
  b.count = 9;
  EXPECT_TRUE(a.sameCall(b));
  b.type = DataType::kInt8;
  EXPECT_FALSE(a.sameCall(b));
}

// The counts' fingerprint tells apart the vectors ranks get wrong by mistake: every vector of up
// to 5 counts in 0..5 (permutations, blocks moved between ranks, one count off, a count
// missing or added, zeros in other places) gives a fingerprint of its own.
TEST(OpHeader, CountFingerprintsOfNearbyVectorsAllDiffer) {
  std::map<uint64_t, std::vector<size_t>> seen;
  std::vector<size_t> counts;
  std::function<void(size_t)> every = [&](size_t length) {
    if (counts.size() == length) {
      const auto [where, fresh] = seen.emplace(hashCounts(counts), counts);
      EXPECT_TRUE(fresh) << "same fingerprint for [" << fmt::format("{}", fmt::join(counts, " "))
                         << "] and [" << fmt::format("{}", fmt::join(where->second, " ")) << "]";
      return;
    }
    for (size_t c = 0; c <= 5; ++c) {
      counts.push_back(c);
      every(length);
      counts.pop_back();
    }
  };
  for (size_t length = 0; length <= 5; ++length) every(length);
  EXPECT_EQ(seen.size(), 1u + 6 + 36 + 216 + 1296 + 7776);
  // And large counts one apart.
  EXPECT_NE(hashCounts(std::vector<size_t>{size_t{1} << 40, 7}),
            hashCounts(std::vector<size_t>{(size_t{1} << 40) + 1, 7}));
}

TEST(OpHeader, RootedVFormsCompareTheirCountsAndRoot) {
  const std::vector<size_t> counts = {3, 0, 4};
  OpHeader gatherv{.kind = OpKind::kGatherv,
                   .type = DataType::kFloat64,
                   .root = 2,
                   .count = 7,
                   .seq = 3,
                   .countsHash = hashCounts(counts),
                   .ranks = 3};
  OpHeader got;
  ASSERT_TRUE(OpHeader::decode(gatherv.encode().data(), got));
  EXPECT_TRUE(got.sameCall(gatherv));
  EXPECT_EQ(gatherv.describeCall().rfind(
                "gatherv(count=7 in all over 3 ranks, float64, root=2, counts #", 0),
            0u)
      << gatherv.describeCall();
  OpHeader otherRoot = gatherv;
  otherRoot.root = 0;
  EXPECT_FALSE(otherRoot.sameCall(gatherv));
  OpHeader otherCounts = gatherv;
  otherCounts.countsHash = hashCounts(std::vector<size_t>{4, 0, 3});
  EXPECT_FALSE(otherCounts.sameCall(gatherv));
  OpHeader scatterv = gatherv;
  scatterv.kind = OpKind::kScatterv;
  EXPECT_FALSE(scatterv.sameCall(gatherv));
  EXPECT_EQ(scatterv.name(), "scatterv");
  EXPECT_EQ(scatterv.describeCall().rfind("scatterv(count=7 in all over 3 ranks", 0), 0u)
      << scatterv.describeCall();
}

TEST(OpHeader, NotAHeaderIsRejected) {
  std::array<std::byte, OpHeader::kWireBytes> junk{};
  OpHeader out;
  EXPECT_FALSE(OpHeader::decode(junk.data(), out));
}

}  // namespace
}  // namespace ringlet::detail
