// Call headers: what goes on the wire round-trips, and calls that differ (including host versus
// device memory) are told apart and described.
#include "src/core/op.h"

#include <gtest/gtest.h>

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

TEST(OpHeader, NotAHeaderIsRejected) {
  std::array<std::byte, OpHeader::kWireBytes> junk{};
  OpHeader out;
  EXPECT_FALSE(OpHeader::decode(junk.data(), out));
}

}  // namespace
}  // namespace ringlet::detail
