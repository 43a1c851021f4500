// Calls whose every message is a call header carrying data (header_framing.h).
#include "src/core/header_framing.h"

#include <fmt/format.h>

#include <array>

#include "ringlet/error.h"

namespace ringlet::detail {

namespace {

// The tiny all-reduce's messages: the data rides in this rank's call header, and every
// message received is checked against this rank's call (MismatchError naming both).
class HeaderFraming final : public collectives::MessageFraming {
 public:
  // `dataBytes`: what every message of the call carries.
  HeaderFraming(const OpHeader& mine, int rank, const transport::WaitContext& wait,
                size_t dataBytes)
      : mine_(mine), rank_(rank), wait_(wait), dataBytes_(dataBytes) {}
  size_t messageBytes(size_t dataBytes) const override { return OpHeader::kFieldBytes + dataBytes; }
  size_t acceptBytes(size_t) const override { return OpHeader::kWireBytes; }
  const std::byte* wrap(const std::byte* data, size_t bytes) override {
    OpHeader header = mine_;
    header.inlineData = data;
    header.inlineBytes = bytes;
    header.encodeTo(wire_.data());
    return wire_.data();
  }
  const std::byte* unwrap(const std::byte* message, size_t bytes, int peer) override {
    OpHeader theirs;
    if (bytes < OpHeader::kFieldBytes || !OpHeader::decode(message, theirs)) {
      throw IoError(fmt::format("{}: rank {} sent something that is not a call header",
                                wait_.describe(), peer));
    }
    if (!mine_.sameCall(theirs)) {
      throw MismatchError(describeMismatch(wait_.describe(), rank_, mine_, peer, theirs));
    }
    if (bytes != messageBytes(dataBytes_)) {
      throw IoError(fmt::format("{}: rank {} sent a call header of {} bytes for {}",
                                wait_.describe(), peer, bytes, theirs.describeCall()));
    }
    return message + OpHeader::kFieldBytes;
  }

 private:
  const OpHeader& mine_;
  const int rank_;
  const transport::WaitContext& wait_;
  const size_t dataBytes_;
  std::array<std::byte, OpHeader::kWireBytes> wire_{};
};

}  // namespace

void headerDoublingAllreduce(CommunicatorImpl& impl, const collectives::Group& group,
                             const collectives::AllreduceArgs& args,
                             const transport::WaitContext& wait) {
  HeaderFraming framing(impl.runningHeader(), group.rank, wait,
                        args.count * elementSize(args.type));
  collectives::recursiveDoublingAllreduce(group, args, wait, framing);
}

void headerDoublingUnion(CommunicatorImpl& impl, const collectives::Group& group, std::byte* buffer,
                         size_t bytes, const transport::WaitContext& wait) {
  headerDoublingAllreduce(impl, group,
                          {.send = buffer,
                           .recv = buffer,
                           .count = bytes,
                           .type = DataType::kUInt8,
                           .op = ReduceOp::kSum},
                          wait);
}

}  // namespace ringlet::detail
