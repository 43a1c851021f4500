// Calls whose every message is a call header carrying data (header_framing.h).
#include "src/core/header_framing.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <vector>

#include "ringlet/error.h"
#include "src/core/call_checks.h"

namespace ringlet::detail {

using collectives::Piece;

namespace {

// The tiny all-reduce's messages: the data rides in this rank's call header, and every
// message received is checked against this rank's call (MismatchError naming both). Past what
// a header holds (up to CommunicatorImpl::kChainPayloadBytes) the header goes first and the
// data follows as a message of its own: every header stays one a peer in another call reads
// whole, and names.
class HeaderFraming final : public collectives::MessageFraming {
 public:
  // `dataBytes`: what every message of the call carries.
  HeaderFraming(const OpHeader& mine, int rank, const transport::WaitContext& wait,
                size_t dataBytes)
      : mine_(mine), rank_(rank), wait_(wait), dataBytes_(dataBytes) {}
  size_t messageBytes(size_t dataBytes) const override {
    return separate() ? dataBytes : OpHeader::kFieldBytes + dataBytes;
  }
  size_t acceptBytes(size_t) const override { return OpHeader::kWireBytes; }
  bool judgesLength() const override { return true; }
  size_t leadBytes() const override { return separate() ? OpHeader::kFieldBytes : 0; }
  size_t acceptLeadBytes() const override { return OpHeader::kWireBytes; }
  const std::byte* lead() override {
    OpHeader header = mine_;
    header.inlineData = nullptr;
    header.inlineBytes = 0;
    header.encodeTo(wire_.data());
    return wire_.data();
  }
  void checkLead(const std::byte* message, size_t bytes, int peer) override {
    check(message, bytes, peer, OpHeader::kFieldBytes);
  }
  const std::byte* wrap(const std::byte* data, size_t bytes) override {
    OpHeader header = mine_;
    header.inlineData = data;
    header.inlineBytes = bytes;
    header.encodeTo(wire_.data());
    return wire_.data();
  }
  const std::byte* unwrap(const std::byte* message, size_t bytes, int peer) override {
    check(message, bytes, peer, messageBytes(dataBytes_));
    return message + OpHeader::kFieldBytes;
  }

 private:
  bool separate() const { return dataBytes_ > OpHeader::kInlineBytes; }
  // A call header of `expected` bytes for this rank's call, or an error naming what came.
  void check(const std::byte* message, size_t bytes, int peer, size_t expected) const {
    OpHeader theirs;
    if (bytes < OpHeader::kFieldBytes || !OpHeader::decode(message, theirs)) {
      throw IoError(fmt::format("{}: rank {} sent something that is not a call header",
                                wait_.describe(), peer));
    }
    if (!mine_.sameCall(theirs)) {
      throw MismatchError(describeMismatch(wait_.describe(), rank_, mine_, peer, theirs));
    }
    if (bytes != expected) {
      throw IoError(fmt::format("{}: rank {} sent a call header of {} bytes for {}",
                                wait_.describe(), peer, bytes, theirs.describeCall()));
    }
  }

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

void exchangeCountsAndSmallBlocks(CommunicatorImpl& impl, const collectives::Group& group,
                                  std::span<const size_t> sendCounts,
                                  std::span<const size_t> recvCounts,
                                  const collectives::AllToAllvArgs& args,
                                  std::vector<Piece>& sendLeft, std::vector<Piece>& recvLeft,
                                  const transport::WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t element = args.elementBytes;
  const OpHeader& mine = impl.runningHeader();
  // Rank `from` sends `sends` elements to `to`, which expects `expects`.
  auto disagree = [&](int from, int to, uint64_t sends, uint64_t expects) {
    return fmt::format(
        "{}: ranks {} and {} disagree about their block: rank {} sends {} elements to rank {} "
        "(its sendCounts[{}]) but rank {} expects {} (its recvCounts[{}])",
        wait.describe(), from, to, from, sends, to, to, to, expects, from);
  };
  // Unchanged until the flushes: each peer's message, header and all.
  std::vector<std::array<std::byte, OpHeader::kWireBytes>> wire(static_cast<size_t>(n));
  std::array<std::byte, OpHeader::kInlineBytes> data;
  for (int s = 1; s < n; ++s) {
    const int q = (r + s) % n;
    const uint64_t told[2] = {sendCounts[q], recvCounts[q]};
    std::memcpy(data.data(), told, 16);
    const size_t blockBytes = sendCounts[q] * element;
    const bool small = blockBytes <= kCountsMessageData;
    if (small) {
      copyBytes(data.data() + 16, args.send + args.sendBlocks[q].offset * element, blockBytes);
      sendLeft[q].count = 0;
    }
    OpHeader header = mine;
    header.inlineData = data.data();
    header.inlineBytes = 16 + (small ? blockBytes : 0);
    header.encodeTo(wire[q].data());
    collectives::sendFrom(group.link(q), wire[q].data(), header.wireBytes(), wait);
  }
  for (int s = 1; s < n; ++s) group.link((r + s) % n).flush(wait);
  std::string mismatch;
  try {
    for (int s = 1; s < n; ++s) {
      const int p = (r - s + n) % n;
      transport::Link& link = group.link(p);
      size_t bytes = 0;
      const std::byte* in = link.recvAny(OpHeader::kWireBytes, &bytes, wait);
      OpHeader theirs;
      uint64_t heard[2] = {0, 0};
      const bool header = bytes >= OpHeader::kFieldBytes && OpHeader::decode(in, theirs);
      const bool counted = bytes >= OpHeader::kFieldBytes + 16;
      if (counted) std::memcpy(heard, in + OpHeader::kFieldBytes, 16);
      const size_t blockBytes = recvCounts[p] * element;
      const bool small = blockBytes <= kCountsMessageData;
      if (mismatch.empty() && !header) {
        mismatch =
            fmt::format("{}: rank {} sent something that is not a call header", wait.describe(), p);
      } else if (mismatch.empty() && !mine.sameCall(theirs)) {
        mismatch = describeMismatch(wait.describe(), r, mine, p, theirs);
      } else if (mismatch.empty() && !counted) {
        mismatch = fmt::format("{}: rank {} sent its call header without the pair's counts",
                               wait.describe(), p);
      } else if (mismatch.empty() && heard[0] != recvCounts[p]) {
        mismatch = disagree(p, r, heard[0], recvCounts[p]);
      } else if (mismatch.empty() && heard[1] != sendCounts[p]) {
        mismatch = disagree(r, p, sendCounts[p], heard[1]);
      } else if (mismatch.empty() && small) {
        if (bytes != OpHeader::kFieldBytes + 16 + blockBytes) {
          mismatch =
              fmt::format("{}: rank {} sent {} bytes with its counts (expected {})",
                          wait.describe(), p, bytes - OpHeader::kFieldBytes - 16, blockBytes);
        } else {
          copyBytes(args.recv + args.recvBlocks[p].offset * element,
                    in + OpHeader::kFieldBytes + 16, blockBytes);
        }
      }
      link.release();
      if (small) recvLeft[p].count = 0;
    }
  } catch (const PeerError&) {
    // A peer failed after its message; a disagreement seen here is this rank's own error.
    if (mismatch.empty()) throw;
  }
  if (!mismatch.empty()) throw MismatchError(mismatch);
}

}  // namespace ringlet::detail
