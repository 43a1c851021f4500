// The public Communicator: argument checks, then the choice of algorithm per call.
#include "ringlet/communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/select.h"
#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/core/communicator_impl.h"
#include "src/core/header_framing.h"
#include "transports/progress.h"

namespace ringlet {

using detail::OpHeader;
using detail::OpKind;
using Prepared = detail::PreparedCall;

Communicator Communicator::create(const Bootstrap& bootstrap, CommunicatorOptions options) {
  if (options.timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("CommunicatorOptions::timeout must be positive, got {} ms",
                                      options.timeout.count()));
  }
  detail::checkOptions(options);
  auto impl = std::make_unique<detail::CommunicatorImpl>(bootstrap, std::move(options));
  kernels::apartCopy();  // timed once per process, here rather than in a caller's first call
  impl->calibrate();
  impl->measureClockOffset();
  return Communicator(std::move(impl));
}

CostModel Communicator::costModel() const { return impl_->costModel(); }

void Communicator::recalibrate() { impl_->recalibrate(); }

size_t Communicator::segmentBytes() const { return impl_->modelSliceBytes(); }

namespace {

// Whether a host call of `which` that moves `bytes` in all runs no algorithm on `ranks` ranks:
// an unrooted one of zero count runs as a sender-only call (movesNoData, whose list of OpKinds
// this one of Collectives must match: Trace.AlgorithmForNamesNoneForTheZeroCountCallsThatRunNone
// runs every such call and compares), whatever is forced.
bool runsNoAlgorithm(collectives::Collective which, size_t bytes, int ranks) {
  using collectives::Collective;
  if (bytes != 0 || ranks == 1) return false;
  switch (which) {
    case Collective::kAllreduce:
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
    case Collective::kAllgatherv:
    case Collective::kReduceScatterv:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string Communicator::algorithmFor(std::string_view collective, size_t bytes) const {
  const auto which = collectives::collectiveNamed(collective);
  if (!which) {
    std::vector<std::string> names;
    for (const auto& info : algorithms()) names.push_back(info.collective);
    throw InvalidArgument(fmt::format("algorithmFor: '{}' is not a collective; known: {}",
                                      collective, fmt::join(names, ", ")));
  }
  if (runsNoAlgorithm(*which, bytes, impl_->size())) return "none";
  if (*which == collectives::Collective::kAllreduce) {
    const auto choice = impl_->allreduceChoice(bytes);
    switch (choice.algorithm) {
      case collectives::AllreduceAlgorithm::kLocalCopy:
        return "local_copy";
      case collectives::AllreduceAlgorithm::kInlineExchange:
        return "inline_exchange";
      case collectives::AllreduceAlgorithm::kHeaderDoubling:
        return "header_doubling";
      case collectives::AllreduceAlgorithm::kRecursiveDoubling:
        return "recursive_doubling";
      case collectives::AllreduceAlgorithm::kRabenseifner:
        return "rabenseifner";
      case collectives::AllreduceAlgorithm::kRing:
        return "ring";
      case collectives::AllreduceAlgorithm::kHierarchical:
        return "hierarchical";
    }
  }
  if (impl_->size() == 1) return "local_copy";
  return std::string(collectives::nameOf(impl_->algorithmFor(*which, bytes)));
}

std::string Communicator::algorithmFor(std::string_view collective,
                                       std::span<const size_t> blockBytes, int root) const {
  using collectives::Collective;
  const auto which = collectives::collectiveNamed(collective);
  if (!which || (*which != Collective::kAllgatherv && *which != Collective::kReduceScatterv &&
                 *which != Collective::kGatherv && *which != Collective::kScatterv)) {
    throw InvalidArgument(fmt::format(
        "algorithmFor: '{}' is not a v-form with a choice (allgatherv, reducescatterv, gatherv, "
        "scatterv)",
        collective));
  }
  if (blockBytes.size() != static_cast<size_t>(impl_->size())) {
    throw InvalidArgument(fmt::format("algorithmFor({}): {} blocks for {} ranks", collective,
                                      blockBytes.size(), impl_->size()));
  }
  const bool rooted = *which == Collective::kGatherv || *which == Collective::kScatterv;
  if (rooted && (root < 0 || root >= impl_->size())) {
    throw InvalidArgument(fmt::format("algorithmFor({}): root {} is not a rank of {}", collective,
                                      root, impl_->size()));
  }
  if (impl_->size() == 1) return "local_copy";
  if (runsNoAlgorithm(*which, std::reduce(blockBytes.begin(), blockBytes.end(), size_t{0}),
                      impl_->size())) {
    return "none";
  }
  std::vector<collectives::Piece> blocks;
  size_t offset = 0;
  for (size_t bytes : blockBytes) {
    blocks.push_back({.offset = offset, .count = bytes});
    offset += bytes;
  }
  detail::OpHeader header;
  return std::string(collectives::nameOf(
      impl_->chooseForBlocks(header, *which, blocks, /*element=*/1, rooted ? root : 0)));
}

Communicator::Communicator(std::unique_ptr<detail::CommunicatorImpl> impl)
    : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }

namespace {

collectives::Algorithm algorithmOf(collectives::AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case collectives::AllreduceAlgorithm::kLocalCopy:
      return collectives::Algorithm::kAuto;
    case collectives::AllreduceAlgorithm::kRing:
      return collectives::Algorithm::kRing;
    case collectives::AllreduceAlgorithm::kRabenseifner:
      return collectives::Algorithm::kRabenseifner;
    case collectives::AllreduceAlgorithm::kHierarchical:
      return collectives::Algorithm::kHierarchical;
    default:
      return collectives::Algorithm::kRecursiveDoubling;
  }
}

Prepared prepareAllreduce(detail::CommunicatorImpl& impl, const void* send, void* recv,
                          size_t count, DataType type, ReduceOp op) {
  const size_t bytes = detail::checkBuffers("allreduce", impl.rank(), send, recv, count, type);
  try {
    kernels::checkReducible(type, op);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("allreduce on rank {}: {}", impl.rank(), e.what()));
  }
  Prepared prepared{.header = {.kind = OpKind::kAllreduce, .type = type, .op = op, .count = count},
                    .body = {}};
  OpHeader& header = prepared.header;
  using collectives::AllreduceAlgorithm;
  const collectives::AllreduceChoice choice = impl.allreduceChoice(bytes);
  header.algorithm = static_cast<uint8_t>(algorithmOf(choice.algorithm));
  // The call header's round trip is saved three ways: the two-rank exchange carries the data in
  // the header; header doubling checks each partner's header on the way (no ring round); early
  // data checks the header after the first send.
  if (choice.algorithm == AllreduceAlgorithm::kInlineExchange) {
    header.inlineData = static_cast<const std::byte*>(send);
    header.inlineBytes = bytes;
  }
  header.selfChecked = choice.algorithm == AllreduceAlgorithm::kHeaderDoubling;
  // A ring in host order (host_ring.h) reads its first data from another rank than the call
  // header's: the header is checked before the body.
  header.earlyData =
      choice.earlyData && !(choice.algorithm == AllreduceAlgorithm::kRing && impl.ringReordered());
  collectives::AllreduceArgs args{.send = static_cast<const std::byte*>(send),
                                  .recv = static_cast<std::byte*>(recv),
                                  .count = count,
                                  .type = type,
                                  .op = op};
  auto body = [&impl, args, bytes, choice](const collectives::Group& group,
                                           const transport::WaitContext& wait) {
    switch (choice.algorithm) {
      case AllreduceAlgorithm::kLocalCopy:
        if (args.recv != args.send && bytes > 0) kernels::copy(args.recv, args.send, bytes);
        return;
      case AllreduceAlgorithm::kInlineExchange:  // the peer's data came with its header
        kernels::reduce(args.recv, args.send, impl.inlineFromPrev(), args.count, args.type,
                        args.op);
        if (args.op == ReduceOp::kAvg) kernels::finishAverage(args.recv, args.count, args.type, 2);
        return;
      case AllreduceAlgorithm::kHeaderDoubling:
        return detail::headerDoublingAllreduce(impl, group, args, wait);
      case AllreduceAlgorithm::kRecursiveDoubling:
        // checkHeader() does nothing when execute() already checked (no earlyData).
        collectives::recursiveDoublingAllreduce(group, args, wait, collectives::plainFraming(),
                                                [&impl, &wait] { impl.checkHeader(wait); });
        return;
      case AllreduceAlgorithm::kRabenseifner:
        // Ranks dealt over hosts, so the first, largest halvings stay inside a host.
        collectives::rabenseifnerAllreduce(impl.hostSpread(), args, impl.sliceBytes({}), wait);
        return;
      case AllreduceAlgorithm::kHierarchical:
        return impl.runOnHostGrid(collectives::hierarchicalAllreduce, args, wait);
      case AllreduceAlgorithm::kRing: {
        // In host order, so that it enters and leaves each host once; rank order when the ranks
        // are placed by host already.
        const collectives::Group& ring = impl.hostRing();
        collectives::ringAllreduce(ring, args, impl.sliceBytes({&ring.next(), &ring.prev()}), wait);
        return;
      }
    }
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareBroadcast(detail::CommunicatorImpl& impl, void* buffer, size_t count, DataType type,
                          int root) {
  const size_t bytes = detail::checkBuffers("broadcast", impl.rank(), buffer, buffer, count, type);
  if (root < 0 || root >= impl.size()) {
    throw InvalidArgument(
        fmt::format("broadcast on rank {}: root {} is out of range for world "
                    "size {}",
                    impl.rank(), root, impl.size()));
  }
  Prepared prepared{
      .header = {.kind = OpKind::kBroadcast, .type = type, .root = root, .count = count},
      .body = {}};
  OpHeader& header = prepared.header;
  auto* data = static_cast<std::byte*>(buffer);
  // Small data rides in the call headers, around the ring from the root: the root only sends,
  // the rank before it only receives, the ones between relay (on two ranks there are none).
  const auto algorithm = impl.chooseFor(header, collectives::Collective::kBroadcast, bytes, data,
                                        detail::chainRole(impl.rank(), impl.size(), root));
  auto body = [&impl, data, bytes, root, algorithm](const collectives::Group& group,
                                                    const transport::WaitContext& wait) {
    if (group.size == 1 || bytes == 0) return;  // the header check was the whole call
    if (algorithm == collectives::Algorithm::kHeaderInline && bytes > OpHeader::kInlineBytes) {
      // The chain with the data after each header: the root sends it and returns, each rank
      // after it takes it and (but the last) sends it on after its header (execute()).
      if (group.rank != root) group.prev().recvInto(data, bytes, wait);
      if (collectives::wrap(group.rank + 1, group.size) != root) {
        collectives::sendFrom(group.next(), data, bytes, wait);
      }
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      if (group.rank != root) detail::copySmall(data, impl.inlineFromPrev(), bytes);
      return;
    }
    if (algorithm == collectives::Algorithm::kTree) {
      // In host order: each subtree below the top levels stays on one host.
      collectives::treeBroadcast(
          impl.hostRing(), data, bytes, impl.ringPlaceOf(root), impl.sliceBytes({}), wait,
          /*rootLends=*/!impl.costModel().ranksShareCores, impl.headerCheck(wait));
    } else {
      // Along the ring in host order (host_ring.h), so it enters and leaves each host once.
      const collectives::Group& ring = impl.hostRing();
      collectives::chainBroadcast(ring, data, bytes, impl.ringPlaceOf(root),
                                  impl.sliceBytes({&ring.next(), &ring.prev()}), wait);
    }
  };
  prepared.body = std::move(body);
  return prepared;
}

// Point-to-point: a header (what the sender sent, with its per-pair sequence number), then the
// data in slices that fit the link's messages.

int checkPeer(const char* name, int rank, int size, int peer) {
  if (peer < 0 || peer >= size || peer == rank) {
    throw InvalidArgument(fmt::format(
        "{} on rank {}: peer {} is {}", name, rank, peer,
        peer == rank ? "this rank" : fmt::format("out of range for world size {}", size)));
  }
  return peer;
}

// A point-to-point message of at most this many bytes rides in its header: one message, as a
// small collective's data does. Both ends decide alike from the count they pass (a count that
// differs is a MismatchError before any data is read).
bool inlineMessage(size_t bytes) { return bytes <= OpHeader::kInlineBytes; }

// The header of a send() to `link`, as the receiver should see it (it names this rank), with
// the `bytes` at `data` when they fit (inlineMessage).
void sendMessageHeader(transport::Link& link, OpHeader header, int self, const std::byte* data,
                       size_t bytes, const transport::WaitContext& wait) {
  header.kind = OpKind::kSend;
  header.root = self;  // the receiver sees who sent it
  if (inlineMessage(bytes)) {
    header.inlineData = data;
    header.inlineBytes = bytes;
  }
  std::array<std::byte, OpHeader::kWireBytes> encoded;
  header.encodeTo(encoded.data());
  collectives::sendFrom(link, encoded.data(), header.wireBytes(), wait);
}

// Point-to-point messages travel on the collectives' links, marked as such (transport::Channel):
// a collective's receive passes over one that comes before its data (its sender went on to the
// collective before this rank took the message) and the link holds it.

// A send's messages, marked point-to-point while it lives.
class PointToPointOut {
 public:
  explicit PointToPointOut(transport::Link& link) : link_(link) {
    link_.setSendChannel(transport::Channel::kPointToPoint);
  }
  ~PointToPointOut() { link_.setSendChannel(transport::Channel::kCollective); }
  PointToPointOut(const PointToPointOut&) = delete;
  PointToPointOut& operator=(const PointToPointOut&) = delete;

 private:
  transport::Link& link_;
};

// A point-to-point receive's view of one link while it lives: the messages of both channels in
// their order, those a collective held (Link::heldPointToPoint) first.
class PointToPointIn {
 public:
  explicit PointToPointIn(transport::Link& link) : link_(link) {
    link_.setReceiveChannel(transport::Channel::kPointToPoint);
  }
  ~PointToPointIn() { link_.setReceiveChannel(transport::Channel::kCollective); }
  PointToPointIn(const PointToPointIn&) = delete;
  PointToPointIn& operator=(const PointToPointIn&) = delete;

  transport::Link& link() { return link_; }
  // The next message when it has wholly arrived, left in place, with its length and channel;
  // null otherwise.
  const std::byte* peek(size_t* bytes, transport::Channel* channel) {
    const auto& held = link_.heldPointToPoint();
    if (!held.empty()) {
      *bytes = held.front().size();
      *channel = transport::Channel::kPointToPoint;
      return held.front().data();
    }
    const std::byte* head = link_.peekMessage(bytes);
    *channel = link_.lastChannel();
    return head;
  }
  // Drops the message peek() just showed.
  void skipPeeked(const transport::WaitContext& wait) {
    if (!link_.heldPointToPoint().empty()) {
      link_.dropHeldPointToPoint();
    } else {
      link_.skipPeeked(wait);
    }
  }
  // The next message, of at most `maxBytes`, until release(); its channel in `*channel`.
  const std::byte* recvAny(size_t maxBytes, size_t* bytes, transport::Channel* channel,
                           const transport::WaitContext& wait) {
    const auto& held = link_.heldPointToPoint();
    fromHeld_ = !held.empty();
    if (!fromHeld_) {
      const std::byte* in = link_.recvAny(maxBytes, bytes, wait);
      *channel = link_.lastChannel();
      return in;
    }
    *bytes = held.front().size();
    *channel = transport::Channel::kPointToPoint;
    if (*bytes > maxBytes) {
      link_.dropHeldPointToPoint();
      throw IoError(
          fmt::format("{}: rank {} sent a message of {} bytes where at most {} were "
                      "expected (the ranks disagree about the operation)",
                      wait.describe(), link_.peer(), *bytes, maxBytes));
    }
    return held.front().data();
  }
  void release() {
    if (std::exchange(fromHeld_, false)) {
      link_.dropHeldPointToPoint();
    } else {
      link_.release();
    }
  }
  // The next message, a point-to-point one of exactly `bytes`, into `dst` (a message's slice;
  // off the link through its recvInto, which reads a large one straight into `dst` over TCP).
  void recvInto(std::byte* dst, size_t bytes, const transport::WaitContext& wait) {
    const auto& held = link_.heldPointToPoint();
    if (held.empty()) {
      link_.recvInto(dst, bytes, wait);
      if (link_.lastChannel() != transport::Channel::kPointToPoint) {
        throw IoError(fmt::format(
            "{}: rank {} sent a collective's message in the middle of a point-to-point message",
            wait.describe(), link_.peer()));
      }
      return;
    }
    if (held.front().size() != bytes) {
      const size_t got = held.front().size();
      link_.dropHeldPointToPoint();
      throw IoError(fmt::format(
          "{}: rank {} sent a message of {} bytes in the middle of a point-to-point message, "
          "where its slice of {} bytes was expected",
          wait.describe(), link_.peer(), got, bytes));
    }
    if (bytes > 0) kernels::copy(dst, held.front().data(), bytes);
    link_.dropHeldPointToPoint();
  }
  // Whether the next message has begun to arrive (Link::messageArriving).
  bool messageArriving() { return !link_.heldPointToPoint().empty() || link_.messageArriving(); }

 private:
  transport::Link& link_;
  bool fromHeld_ = false;
};

// Where a recv's message came from: its link, with the slices past the header still to read
// (none when it rode in the header, inlineMessage), or the stash, which held it whole and has
// copied it to the caller's memory; or nowhere yet (a look that takes only what has arrived).
enum class Arrival { kLink, kWhole, kNone };

// "send(count=10, float32, tag=3) #0, send(count=700001, int32, tag=1) #2": what a peer sent
// that no recv has taken yet.
std::string describeStash(const std::deque<detail::CommunicatorImpl::StashedMessage>& stash) {
  std::string out;
  for (const auto& m : stash) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} #{}", m.header.describeCall(), m.header.seq);
  }
  return out;
}

// The message a recv of `expected` (count, type and tag from that peer) takes: the oldest of its
// tag, from the stash first, else off `link`, where the messages of other tags that come first
// are read whole into the stash (tags are matched, as MPI and Gloo match them; messages of one
// tag keep their order). Its count and type must be the recv's (MismatchError naming both
// calls); a message that fits the header (inlineMessage) is copied to `data`.
//
// `arrivedOnly` (a recv from any source, tryRecv, probe): waits for nothing. It takes what has
// wholly arrived on `link` (messages of other tags into the stash, answers that settle earlier
// calls) and returns kNone when the message is not among it, or when the next message belongs
// to a collective (a call header, or a message of a collective that checks its own), which it
// leaves for that collective (the peer is in one; what it sends this rank comes after it).
Arrival receiveMessageHeader(detail::CommunicatorImpl& impl, PointToPointIn& link,
                             const OpHeader& expected, int self, std::byte* data,
                             const transport::WaitContext& wait, bool arrivedOnly = false,
                             OpHeader* probed = nullptr) {
  const int peer = expected.root;
  const size_t bytes = expected.count * elementSize(expected.type);
  auto mismatch = [&](const std::string& theirs) {
    return MismatchError(
        fmt::format("{}: rank {} posted {} (a message from rank {}) but rank {} sent {}",
                    wait.describe(), self, expected.describeCall(), peer, peer, theirs));
  };
  auto sameShape = [&](const OpHeader& theirs) {
    return theirs.type == expected.type && theirs.count == expected.count;
  };
  auto& stash = impl.stashFrom(peer);
  for (auto it = stash.begin(); it != stash.end(); ++it) {
    if (it->header.tag != expected.tag) continue;
    if (probed != nullptr) {
      *probed = it->header;
      return Arrival::kWhole;
    }
    if (!sameShape(it->header)) {
      throw mismatch(fmt::format("{} (message #{})", it->header.describeCall(), it->header.seq));
    }
    if (bytes > 0) kernels::copy(data, it->data.data(), bytes);
    impl.stashedBytes() -= it->data.size();
    stash.erase(it);
    return Arrival::kWhole;
  }
  for (;;) {
    // Any header length: a collective's header here (ranks that disagree) is named as such.
    OpHeader theirs;
    bool ok = false;
    size_t got = 0;
    const std::byte* in = nullptr;
    transport::Channel channel = transport::Channel::kPointToPoint;
    for (;;) {
      if (arrivedOnly) {
        size_t peeked = 0;
        const std::byte* head = link.peek(&peeked, &channel);
        if (head == nullptr) return Arrival::kNone;
        if (channel == transport::Channel::kCollective) {
          // The peer is in a collective, and what it sends this rank comes after it; but the
          // answers to this rank's earlier sender-only calls may come first.
          OpHeader next;
          if (peeked < OpHeader::kFieldBytes || !OpHeader::decode(head, next) ||
              !impl.settlesUnchecked(next, wait)) {
            return Arrival::kNone;
          }
          link.skipPeeked(wait);
          continue;
        }
      }
      in = link.recvAny(OpHeader::kWireBytes, &got, &channel, wait);
      ok = got >= OpHeader::kFieldBytes && OpHeader::decode(in, theirs);
      if (channel == transport::Channel::kPointToPoint) break;
      // The peer's answers to this rank's earlier sender-only calls may come first.
      if (!ok || !impl.settlesUnchecked(theirs, wait)) break;
      link.release();
    }
    theirs.root = self;  // the wire carries the sender; describe the send as "to rank <self>"
    if (channel == transport::Channel::kCollective) {
      link.release();
      throw mismatch(fmt::format(
          "{} first (its call came before its send: it went on without this rank, as a "
          "broadcast's root or a reduce's leaf may; take a point-to-point message after such a "
          "call, or send it on a dup() that runs no collectives)",
          ok ? fmt::format("a message of {} #{}", theirs.name(), theirs.seq)
             : std::string("a message of a collective")));
    }
    if (!ok || theirs.kind != OpKind::kSend || theirs.seq != impl.incomingSeq(peer) ||
        static_cast<int>(theirs.type) >= kNumDataTypes) {
      link.release();
      throw mismatch(ok ? fmt::format("{} (message #{}, #{} expected next)", theirs.describeCall(),
                                      theirs.seq, impl.incomingSeq(peer))
                        : std::string("a point-to-point message that is not a message header"));
    }
    impl.takeIncomingSeq(peer);
    // A probe holds the message it finds, as one of another tag, and names it.
    const bool wanted = theirs.tag == expected.tag && probed == nullptr;
    if (wanted && !sameShape(theirs)) {
      link.release();
      throw mismatch(fmt::format("{} (message #{})", theirs.describeCall(), theirs.seq));
    }
    // Their count, checked against what may be held before it sizes anything.
    const size_t theirBytes = theirs.count <= detail::CommunicatorImpl::kMaxStashBytes
                                  ? theirs.count * elementSize(theirs.type)
                                  : SIZE_MAX;
    if (inlineMessage(theirBytes) && got != OpHeader::kFieldBytes + theirBytes) {
      link.release();
      throw IoError(
          fmt::format("{}: rank {} sent a message header of {} bytes for {} bytes of data",
                      wait.describe(), peer, got, theirBytes));
    }
    if (wanted) {
      if (inlineMessage(bytes) && bytes > 0) std::memcpy(data, in + OpHeader::kFieldBytes, bytes);
      link.release();
      return Arrival::kLink;
    }
    // Another tag: keep it whole for the recv that names it.
    if (theirBytes > detail::CommunicatorImpl::kMaxStashBytes - impl.stashedBytes()) {
      link.release();
      throw IoError(fmt::format(
          "{}: rank {} posted {} from rank {}, which sent {} (message #{}) first; holding it "
          "for a later recv would take past {} bytes of unmatched messages (held: {})",
          wait.describe(), self, expected.describeCall(), peer, theirs.describeCall(), theirs.seq,
          detail::CommunicatorImpl::kMaxStashBytes, describeStash(stash)));
    }
    detail::CommunicatorImpl::StashedMessage kept{theirs, std::vector<std::byte>(theirBytes)};
    if (inlineMessage(theirBytes)) {
      if (theirBytes > 0) std::memcpy(kept.data.data(), in + OpHeader::kFieldBytes, theirBytes);
      link.release();
    } else {
      link.release();
      const size_t slice = impl.messageSliceBytes(link.link());
      for (size_t offset = 0; offset < theirBytes; offset += slice) {
        link.recvInto(kept.data.data() + offset, std::min(slice, theirBytes - offset), wait);
      }
    }
    impl.stashedBytes() += theirBytes;
    stash.push_back(std::move(kept));
    if (probed != nullptr && theirs.tag == expected.tag) {
      *probed = theirs;
      return Arrival::kWhole;
    }
  }
}

// A recv's wait that timed out, or found its peer gone, while messages of other tags from that
// peer were held: the error names them (the likely mistake: a tag that differs between the two
// ends).
template <typename F>
void namingStash(detail::CommunicatorImpl& impl, const OpHeader& expected, F&& receive) {
  const int peer = expected.root;
  auto held = [&] {
    return fmt::format("; this rank's {} matched none of what rank {} sent before: {}",
                       expected.describeCall(), peer, describeStash(impl.stashFrom(peer)));
  };
  try {
    receive();
  } catch (const TimeoutError& e) {
    if (impl.stashFrom(peer).empty()) throw;
    throw TimeoutError(e.what() + held());
  } catch (const PeerError& e) {
    if (impl.stashFrom(peer).empty() || e.peer() != peer) throw;
    throw PeerError(e.peer(), e.what() + held(), e.aborted());
  }
}

// What a recv from any source, or tryRecv's look, found: the sender and where its message is.
struct Found {
  int peer = -1;
  Arrival arrival = Arrival::kNone;
};

// Every held message of any peer, for a recv from any source that timed out.
std::string describeStashes(detail::CommunicatorImpl& impl) {
  std::string out;
  for (int peer = 0; peer < impl.size(); ++peer) {
    const auto& stash = impl.stashFrom(peer);
    if (stash.empty()) continue;
    out += fmt::format("{}from rank {}: {}", out.empty() ? "" : "; ", peer, describeStash(stash));
  }
  return out;
}

// The first message of `expected`'s tag from `only` (kAnySource: any rank), taken as
// receiveMessageHeader takes it (arrivedOnly: from each rank its oldest of the tag, held ones
// first). A look at every linked rank, starting after the rank the last one took from (so one
// busy sender does not starve the others); ranks not linked yet that announced a link are linked
// (linkAnnounced). `waits` false (tryRecv): one look, nullopt when nothing has arrived; until
// `giveUp` (tryRecv with a time to wait): nullopt once that passes with nothing. Else
// looks until a message comes, spinning, then yielding, then sleeping: on every link at once
// until a message lands where all are shared memory or all TCP (sleepOnWatched), else 20 us
// doubling to 0.25 ms between looks; and ends on the deadline,
// on abort(), or once every other rank has closed its end. `wait`'s links are refreshed when
// links are added.
std::optional<Found> receiveFromAny(detail::CommunicatorImpl& impl, const collectives::Group& group,
                                    const OpHeader& expected, int only, std::byte* data,
                                    transport::WaitContext& wait, bool waits,
                                    OpHeader* probed = nullptr,
                                    transport::Deadline giveUp = transport::Deadline::max()) {
  const int self = impl.rank();
  const int size = impl.size();
  std::vector<char> gone(static_cast<size_t>(size), 0);
  auto watched = [&](int peer) {
    return peer != self && !gone[peer] && (only == kAnySource || peer == only);
  };
  auto look = [&]() -> std::optional<Found> {
    int& next = impl.anySourceNext();
    for (int k = 0; k < size; ++k) {
      const int peer = (next + k) % size;
      if (!watched(peer)) continue;
      transport::Link* link = group.links[static_cast<size_t>(peer)];
      if (link == nullptr) continue;
      OpHeader fromPeer = expected;
      fromPeer.root = peer;
      PointToPointIn in(*link);
      const Arrival arrival =
          receiveMessageHeader(impl, in, fromPeer, self, data, wait, true, probed);
      if (arrival != Arrival::kNone) {
        next = (peer + 1) % size;
        return Found{peer, arrival};
      }
    }
    return std::nullopt;
  };
  auto unlinked = [&] {
    for (int peer = 0; peer < size; ++peer) {
      if (watched(peer) && group.links[static_cast<size_t>(peer)] == nullptr) return true;
    }
    return false;
  };
  auto linkAnnounced = [&] {
    if (!impl.linkAnnounced(wait.deadline)) return false;
    wait.links = impl.activeLinks();
    return true;
  };
  if (auto found = look()) return found;
  if (!waits) {
    if (unlinked() && linkAnnounced()) return look();
    return std::nullopt;
  }
  transport::Waiter& waiter = impl.anySourceWaiter();
  const transport::Backoff& policy = waiter.limits();
  constexpr auto kFirstSleep = std::chrono::microseconds(20);
  constexpr auto kLongestSleep = std::chrono::microseconds(250);
  auto sleep = std::chrono::microseconds(kFirstSleep);
  std::optional<PeerError> firstGone;
  // Whether the peers' processes still run (a system call per link) is asked this often.
  constexpr auto kAliveEvery = std::chrono::milliseconds(100);
  auto nextAlive = transport::Clock::now() + kAliveEvery;
  // Where every rank it waits for is linked over shared memory (or every one over TCP), the sleep
  // is one on all those links at once that the first message wakes (transport::sleepOnLinks),
  // for up to a slice, so that the deadline, abort() and the peers' health are looked at between
  // slices; else it is by the clock.
  std::vector<transport::Link*> watchedLinks;
  auto sleepOnWatched = [&] {
    constexpr auto kSlice = std::chrono::milliseconds(10);
    watchedLinks.clear();
    for (int peer = 0; peer < size; ++peer) {
      if (!watched(peer)) continue;
      transport::Link* link = group.links[static_cast<size_t>(peer)];
      if (link == nullptr) return false;  // linked from the store: look there often
      watchedLinks.push_back(link);
    }
    const auto now = transport::Clock::now();
    const auto left = std::min<transport::Clock::duration>(
        {kSlice, wait.deadline - now, nextAlive - now, giveUp - now});
    return transport::sleepOnLinks(watchedLinks, left);
  };
  for (int round = 0;; ++round) {
    if (unlinked()) linkAnnounced();  // a store round trip every 2 ms at most
    if (auto found = look()) return found;
    int waitingFor = 0;
    const bool askAlive = transport::Clock::now() >= nextAlive;
    if (askAlive) nextAlive = transport::Clock::now() + kAliveEvery;
    for (int peer = 0; peer < size; ++peer) {
      if (!watched(peer)) continue;
      transport::Link* link = group.links[static_cast<size_t>(peer)];
      if (link != nullptr) {
        try {
          if (askAlive) {
            link->checkPeerAlive(wait);
          } else {
            link->checkPeer(wait);
          }
        } catch (const PeerError& e) {
          if (e.aborted()) throw;  // a failure in the job: this recv fails with it at once
          gone[peer] = 1;
          if (!firstGone) firstGone = e;
          continue;
        }
      }
      ++waitingFor;
    }
    if (waitingFor == 0) throw *firstGone;
    if (transport::Clock::now() >= giveUp) return std::nullopt;  // tryRecv's `within`
    if (wait.expired()) {
      const std::string held = describeStashes(impl);
      const std::string what = fmt::format(
          "a message {} with tag {}{}",
          only == kAnySource ? std::string("from any rank") : fmt::format("from rank {}", only),
          expected.tag, held.empty() ? "" : fmt::format(" (held, of other tags: {})", held));
      if (wait.cancelled != nullptr && wait.cancelled->load()) {
        throw AbortedError(
            fmt::format("{} was aborted while waiting for {}", wait.describe(), what));
      }
      throw TimeoutError(
          fmt::format("{} timed out waiting for {}; deadline passed", wait.describe(), what));
    }
    if (round < policy.spins) {
      transport::cpuRelax();
    } else if (round < policy.spins + policy.yields && waiter.mayYield(transport::Clock::now())) {
      const auto before = transport::Clock::now();
      std::this_thread::yield();
      const auto after = transport::Clock::now();
      // A yield that kept this rank off its core that long likely gave the core to a busy
      // process for its time slice (milliseconds) while the message came: after a few the
      // yields stop for a while and the wait sleeps on the links, where the sender's wake-up
      // preempts the busy process (a busy loop per core: messages 3-4 ms late before).
      if (after - before > policy.slowYield) {
        waiter.slowYield(before, after, false);
      } else {
        waiter.fastYield();
      }
    } else if (!sleepOnWatched()) {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(kLongestSleep));
    }
  }
}

// A send, or a recv from `peer` (kAnySource: from any rank). A recv writes its sender to
// `*source` once the message is in the caller's memory; `lookOnly` (tryRecv) takes a message
// only when one has arrived and leaves `*source` alone otherwise.
// A receiving call's `peer`: a rank, or kAnySource where another rank exists to send. Whether
// the call names no root: a recv from any source, or a look (`lookOnly`: tryRecv, tryProbe)
// that must not wait to link its peer; execute() then links nobody for it, and the peer, if
// any, goes in the header's `source`.
bool receivesFromAny(const char* name, const detail::CommunicatorImpl& impl, int peer,
                     bool lookOnly) {
  if (peer != kAnySource) {
    checkPeer(name, impl.rank(), impl.size(), peer);
    return lookOnly;
  }
  if (impl.size() == 1) {
    throw InvalidArgument(fmt::format(
        "{} on rank 0: from any source on a communicator of one rank, no rank could send", name));
  }
  return true;
}

Prepared preparePointToPoint(detail::CommunicatorImpl& impl, bool isSend, void* data, size_t count,
                             DataType type, int peer, int tag, int* source = nullptr,
                             bool lookOnly = false,
                             std::chrono::microseconds within = std::chrono::microseconds(0)) {
  const char* name = isSend ? "send" : lookOnly ? "tryRecv" : "recv";
  const size_t bytes = detail::checkBuffers(name, impl.rank(), data, data, count, type);
  if (isSend) checkPeer(name, impl.rank(), impl.size(), peer);
  const bool anyLink = !isSend && receivesFromAny(name, impl, peer, lookOnly);
  const uint64_t seq = isSend    ? impl.takeSendSeq(peer)
                       : anyLink ? impl.takeAnySourceSeq()
                                 : impl.takeRecvSeq(peer);
  Prepared prepared{.header = {.kind = isSend ? OpKind::kSend : OpKind::kRecv,
                               .type = type,
                               .root = anyLink ? kAnySource : peer,
                               .tag = tag,
                               .count = count,
                               .seq = seq,
                               .source = anyLink ? peer : -1},
                    .body = {}};
  OpHeader& header = prepared.header;
  auto* buffer = static_cast<std::byte*>(data);
  const int self = impl.rank();
  auto body = [&impl, header, buffer, bytes, isSend, self, anyLink, lookOnly, source, within](
                  const collectives::Group& group, const transport::WaitContext& callWait) {
    const size_t sliced = inlineMessage(bytes) ? 0 : bytes;  // the rest rides in the header
    if (isSend) {
      transport::Link& link = group.link(header.root);
      const size_t slice = impl.messageSliceBytes(link);
      PointToPointOut out(link);
      sendMessageHeader(link, header, self, buffer, bytes, callWait);
      for (size_t offset = 0; offset < sliced; offset += slice) {
        collectives::sendFrom(link, buffer + offset, std::min(slice, sliced - offset), callWait);
      }
      link.flush(callWait);  // the header and the caller's buffer may go once this returns
      return;
    }
    if (anyLink) {
      transport::WaitContext wait = callWait;
      const bool waitsAWhile = lookOnly && within.count() > 0;
      const auto found = receiveFromAny(
          impl, group, header, header.source, buffer, wait, !lookOnly || waitsAWhile, nullptr,
          waitsAWhile ? transport::Clock::now() + within : transport::Deadline::max());
      if (!found) return;
      transport::Link& link = group.link(found->peer);
      const size_t slice = impl.messageSliceBytes(link);
      if (found->arrival == Arrival::kLink) {
        PointToPointIn in(link);
        for (size_t offset = 0; offset < sliced; offset += slice) {
          in.recvInto(buffer + offset, std::min(slice, sliced - offset), wait);
        }
      }
      if (source != nullptr) *source = found->peer;
      impl.noteRecvSource(found->peer);
      return;
    }
    transport::Link& link = group.link(header.root);
    const size_t slice = impl.messageSliceBytes(link);
    PointToPointIn in(link);
    namingStash(impl, header, [&] {
      if (receiveMessageHeader(impl, in, header, self, buffer, callWait) == Arrival::kWhole) {
        return;
      }
      for (size_t offset = 0; offset < sliced; offset += slice) {
        in.recvInto(buffer + offset, std::min(slice, sliced - offset), callWait);
      }
    });
    if (source != nullptr) *source = header.root;
  };
  prepared.body = std::move(body);
  return prepared;
}

// Both at once: the same messages as a send() to `dest` and a recv() from `source`, each
// direction sliced as a plain send and recv over its link would, so either end may be a plain
// call.
Prepared prepareSendRecv(detail::CommunicatorImpl& impl, const void* send, size_t sendCount,
                         int dest, void* recv, size_t recvCount, int source, DataType type,
                         int tag) {
  const int self = impl.rank();
  const size_t sendBytes = detail::checkBuffers("sendrecv", self, send, send, sendCount, type);
  const size_t recvBytes = detail::checkBuffers("sendrecv", self, recv, recv, recvCount, type);
  checkPeer("sendrecv", self, impl.size(), dest);
  checkPeer("sendrecv", self, impl.size(), source);
  const auto* out = static_cast<const std::byte*>(send);
  auto* in = static_cast<std::byte*>(recv);
  if (sendBytes > 0 && recvBytes > 0 && out < in + recvBytes && in < out + sendBytes) {
    throw InvalidArgument(fmt::format(
        "sendrecv on rank {}: the send buffer ({} bytes) and the receive buffer ({} bytes) "
        "overlap",
        self, sendBytes, recvBytes));
  }
  const OpHeader sent{.kind = OpKind::kSend,
                      .type = type,
                      .root = dest,
                      .tag = tag,
                      .count = sendCount,
                      .seq = impl.takeSendSeq(dest)};
  const OpHeader expected{.kind = OpKind::kRecv,
                          .type = type,
                          .root = source,
                          .tag = tag,
                          .count = recvCount,
                          .seq = impl.takeRecvSeq(source)};
  Prepared prepared{.header = {.kind = OpKind::kSendRecv,
                               .type = type,
                               .root = dest,
                               .tag = tag,
                               .count = sendCount,
                               .seq = sent.seq,
                               .source = source,
                               .recvCount = recvCount},
                    .body = {}};
  auto body = [&impl, sent, expected, out, sendBytes, in, recvBytes, self](
                  const collectives::Group& group, const transport::WaitContext& wait) {
    transport::Link& next = group.link(sent.root);
    transport::Link& prev = group.link(expected.root);
    const size_t sendSlice = impl.messageSliceBytes(next);
    const size_t recvSlice = impl.messageSliceBytes(prev);
    // One slice out, then one in, as collectives::exchange, so two sendrecv calls facing each
    // other never both wait for the other's buffers to drain; but a receive waits only once
    // everything is sent, or for a message that has begun to arrive (its sender is at it), so
    // the other end may also be a recv() followed by a send() (it reads all of ours before it
    // sends its header). Not "wholly arrived": over TCP that meant copying each slice into the
    // link's read-ahead buffer before taking it (N=4, 1-64 MiB: 0.6-0.95x Open MPI's time).
    PointToPointOut toNext(next);
    PointToPointIn fromPrev(prev);
    const bool lendsWhole = sendBytes <= next.lendBlockBytes();
    sendMessageHeader(next, sent, self, out, sendBytes, wait);
    bool headerIn = false;
    // What rides in a header is moved with it.
    size_t sentBytes = inlineMessage(sendBytes) ? sendBytes : 0;
    size_t received = 0;
    while (sentBytes < sendBytes || received < recvBytes || !headerIn) {
      if (sentBytes < sendBytes) {
        const size_t bytes = std::min(sendSlice, sendBytes - sentBytes);
        // The peer reads it from `out` itself where it can (Link::lend: the flush below waits
        // for that; the other end's receive comes before anything it waits for from here), up
        // to the largest block the link lends.
        if (lendsWhole) {
          next.lend(out + sentBytes, bytes, wait);
        } else {
          collectives::sendFrom(next, out + sentBytes, bytes, wait);
        }
        sentBytes += bytes;
      }
      if (sentBytes < sendBytes && !fromPrev.messageArriving()) continue;
      if (!headerIn) {
        Arrival arrival = Arrival::kLink;
        namingStash(impl, expected, [&] {
          arrival = receiveMessageHeader(impl, fromPrev, expected, self, in, wait);
        });
        headerIn = true;
        if (arrival == Arrival::kWhole || inlineMessage(recvBytes)) received = recvBytes;
      } else if (received < recvBytes) {
        const size_t bytes = std::min(recvSlice, recvBytes - received);
        fromPrev.recvInto(in + received, bytes, wait);
        received += bytes;
      }
    }
    next.flush(wait);  // the header and the caller's buffer may go once this returns
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareBarrier() {
  Prepared prepared{.header = {.kind = OpKind::kBarrier}, .body = {}};
  auto body = [](const collectives::Group& group, const transport::WaitContext& wait) {
    if (group.size > 1) collectives::disseminationBarrier(group, 2, wait);
  };
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType type,
                             ReduceOp op) {
  auto p = prepareAllreduce(*impl_, send, recv, count, type, op);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::allreduceAsync(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op) {
  auto p = prepareAllreduce(*impl_, send, recv, count, type, op);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  auto p = prepareBroadcast(*impl_, buffer, count, type, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::broadcastAsync(void* buffer, size_t count, DataType type, int root) {
  auto p = prepareBroadcast(*impl_, buffer, count, type, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::barrier() {
  auto p = prepareBarrier();
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::barrierAsync() {
  auto p = prepareBarrier();
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::send(const void* data, size_t count, DataType type, int peer, int tag) {
  auto p = preparePointToPoint(*impl_, true, const_cast<void*>(data), count, type, peer, tag);
  impl_->runBlocking(p.header, std::move(p.body));
}

namespace {

// probe (lookOnly false) and tryProbe: the first message of `tag` from `peer` (kAnySource: any
// rank) goes to `*info`, read into the held messages; info->source stays -1 when a look found
// none.
Prepared prepareProbe(detail::CommunicatorImpl& impl, int peer, int tag, bool lookOnly,
                      MessageInfo* info) {
  const bool anyLink = receivesFromAny(lookOnly ? "tryProbe" : "probe", impl, peer, lookOnly);
  Prepared prepared{.header = {.kind = OpKind::kProbe,
                               .type = DataType::kUInt8,
                               .root = anyLink ? kAnySource : peer,
                               .tag = tag,
                               .seq = impl.takeAnySourceSeq(),
                               .source = anyLink ? peer : -1},
                    .body = {}};
  OpHeader& header = prepared.header;
  const int self = impl.rank();
  auto body = [&impl, header, self, anyLink, lookOnly, info](
                  const collectives::Group& group, const transport::WaitContext& callWait) {
    OpHeader probed;
    int from = header.root;
    if (anyLink) {
      transport::WaitContext wait = callWait;
      const auto look =
          receiveFromAny(impl, group, header, header.source, nullptr, wait, !lookOnly, &probed);
      if (!look) return;
      from = look->peer;
    } else {
      PointToPointIn in(group.link(header.root));
      namingStash(impl, header, [&] {
        receiveMessageHeader(impl, in, header, self, nullptr, callWait, false, &probed);
      });
    }
    *info =
        MessageInfo{.source = from, .count = probed.count, .type = probed.type, .tag = header.tag};
  };
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

MessageInfo Communicator::probe(int peer, int tag) {
  MessageInfo info;
  auto p = prepareProbe(*impl_, peer, tag, false, &info);
  impl_->runBlocking(p.header, std::move(p.body));
  return info;
}

std::optional<MessageInfo> Communicator::tryProbe(int peer, int tag) {
  MessageInfo info;
  auto p = prepareProbe(*impl_, peer, tag, true, &info);
  impl_->runBlocking(p.header, std::move(p.body));
  if (info.source < 0) return std::nullopt;
  return info;
}

int Communicator::recv(void* data, size_t count, DataType type, int peer, int tag) {
  int source = peer;
  auto p = preparePointToPoint(*impl_, false, data, count, type, peer, tag, &source);
  impl_->runBlocking(p.header, std::move(p.body));
  return source;
}

std::optional<int> Communicator::tryRecv(void* data, size_t count, DataType type, int peer,
                                         int tag) {
  return tryRecv(data, count, type, peer, tag, std::chrono::microseconds(0));
}

std::optional<int> Communicator::tryRecv(void* data, size_t count, DataType type, int peer, int tag,
                                         std::chrono::microseconds within) {
  if (within.count() < 0) {
    throw InvalidArgument(
        fmt::format("tryRecv on rank {}: the time to wait must not be negative, got {} us", rank(),
                    within.count()));
  }
  int source = -1;
  auto p = preparePointToPoint(*impl_, false, data, count, type, peer, tag, &source, true, within);
  impl_->runBlocking(p.header, std::move(p.body));
  if (source < 0) return std::nullopt;
  return source;
}

Work Communicator::sendAsync(const void* data, size_t count, DataType type, int peer, int tag) {
  auto p = preparePointToPoint(*impl_, true, const_cast<void*>(data), count, type, peer, tag);
  return impl_->runAsync(p.header, std::move(p.body));
}

Work Communicator::recvAsync(void* data, size_t count, DataType type, int peer, int tag) {
  // The body writes the sender into the Work's state before the worker finishes it.
  auto state = std::make_shared<detail::WorkState>();
  auto p = preparePointToPoint(*impl_, false, data, count, type, peer, tag, &state->source);
  return impl_->runAsync(p.header, std::move(p.body), std::move(state));
}

void Communicator::sendrecv(const void* send, size_t sendCount, int dest, void* recv,
                            size_t recvCount, int source, DataType type, int tag) {
  auto p = prepareSendRecv(*impl_, send, sendCount, dest, recv, recvCount, source, type, tag);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::sendrecvAsync(const void* send, size_t sendCount, int dest, void* recv,
                                 size_t recvCount, int source, DataType type, int tag) {
  auto p = prepareSendRecv(*impl_, send, sendCount, dest, recv, recvCount, source, type, tag);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::abort(const std::string& reason) { impl_->abort(reason); }

void Communicator::setCallTimeout(std::chrono::milliseconds timeout) {
  impl_->setCallTimeout(timeout);
}

std::chrono::milliseconds Communicator::callTimeout() const { return impl_->callTimeout(); }

std::string Communicator::describeLinks() const { return impl_->describeLinks(); }

// ---- Work ----

bool Work::test() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

void Work::wait() const {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->changed.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return true;
  std::unique_lock lock(state_->mutex);
  if (!state_->changed.wait_for(lock, timeout, [&] { return state_->done; })) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->mutex);
  return state_->done ? state_->error : nullptr;
}

int Work::source() const {
  if (!state_) return -1;
  std::lock_guard lock(state_->mutex);
  return state_->done && !state_->error ? state_->source : -1;
}

}  // namespace ringlet
