// Communicator::split and dup: sub-communicators built from what the parent already knows.
//
// The call is one collective over the parent (OpKind::kSplit, so a rank that splits while
// another all-reduces gets MismatchError, not a hang). Its body all-gathers every rank's record
// over the parent's ring:
//
//   parent rank      0        1        2        3
//   record       (c=0,k=1)(c=1,k=0)(c=0,k=0)(c=kNoColor)   + the transport each asks for
//   after the all-gather every rank holds all four; color 0 is [2, 0] (by key, then rank),
//   color 1 is [1]; rank 3 gets nullopt.
//
// Each rank of a color then builds its child from the parent's state: the peer records every
// rank published when the parent was created (no new rendezvous), the job id and secret, and a
// key space of its own inside the parent's store, "split<seq>/color<c>", where seq is the
// split's call number on the parent: the same on every rank, never reused by that parent, and
// nested inside the parent's own key space for nested splits.
//
// Links: a child connects links of its own, through Transport objects of its own. A parent and
// its children run concurrently, driven from different threads; sharing a link would need
// every message tagged with its communicator and a demultiplexer behind each link, or one
// rank's child message could land in the parent's call. Sharing the parent's Transport objects
// is not safe as they are either: a tcp listener tells connecting peers apart by rank only and
// its connect() is not thread-safe, so a parent's lazy connect (its first all-to-all or
// send/recv to an unlinked peer) could take a connection meant for a child being connected at
// that moment. NCCL makes the same choice by default (ncclCommSplit connects anew unless
// splitShare asks to share). The cost, paid once per split: a listener per rank for tcp and a
// segment per linked pair for shm.
//
// Failure while the child connects: the all-gather may end on some ranks and fail on others
// (a rank killed after its record passed on), and a rank may fail to connect its child. The
// others would wait for such a rank's links until the child's timeout; instead each watches the
// parent's links while it connects (TransportContext::checkJob, CommunicatorImpl::checkForFailure)
// and a rank whose child fails to connect fails the parent, which tells its peers: the failure
// reaches every waiting rank within a slice of the wait (100 ms), passed on by each rank it
// reaches, as any failure of the parent is.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "src/core/communicator_impl.h"

namespace ringlet {
namespace detail {
namespace {

// What each rank says about itself in a split, as it travels in the all-gather.
struct SplitRecord {
  int64_t color = kNoColor;
  int64_t key = 0;
  char transport[16] = {};  // the child's CommunicatorOptions::transport ("auto", "tcp", ...)

  std::string transportName() const {
    return std::string(transport, strnlen(transport, sizeof(transport)));
  }
};
static_assert(sizeof(SplitRecord) == 32);

}  // namespace

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key,
                                                          CommunicatorOptions options, bool dup) {
  SplitRecord mine{.color = color, .key = key};
  // Transport names are checked against the table before this (at most a few letters).
  std::memcpy(mine.transport, options.transport.data(),
              std::min(options.transport.size(), sizeof(mine.transport) - 1));
  std::vector<SplitRecord> all(size_);
  uint64_t seq = 0;
  OpHeader header{.kind = OpKind::kSplit,
                  .root = color,
                  .tag = dup ? kSplitIsDup : 0,
                  .count = static_cast<uint64_t>(static_cast<int64_t>(key))};
  runBlocking(header, [&](const collectives::Group& group, const transport::WaitContext& wait) {
    seq = runningHeader().seq;
    if (group.size == 1) {
      all[0] = mine;
      return;
    }
    collectives::AllgatherArgs args{.send = reinterpret_cast<const std::byte*>(&mine),
                                    .recv = reinterpret_cast<std::byte*>(all.data()),
                                    .sendCount = sizeof(SplitRecord),
                                    .type = DataType::kUInt8};
    collectives::ringAllgather(group, args, sliceBytes({&group.next(), &group.prev()}), wait);
  });
  if (color == kNoColor) return nullptr;

  // This color's ranks, by (key, rank here).
  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (all[r].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[a].key < all[b].key; });
  for (int r : members) {
    if (all[r].transportName() != options.transport) {
      throw InvalidArgument(fmt::format(
          "{} #{} on rank {}: the ranks of color {} must ask for the same transport, but rank {} "
          "asks for '{}' and rank {} for '{}'",
          dup ? "dup" : "split", seq, rank_, color, rank_, options.transport, r,
          all[r].transportName()));
    }
  }

  Lineage lineage;
  lineage.size = static_cast<int>(members.size());
  lineage.rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  if (size_ > 1) {
    lineage.infos.reserve(members.size());
    for (int r : members) {
      lineage.infos.push_back(infos_[r]);
      lineage.infos.back().rank = static_cast<int>(lineage.infos.size()) - 1;
    }
    lineage.store = makePrefixStore(fmt::format("split{}/color{}", seq, color), store_);
  } else {
    // A world of one never published its record; it needs none.
    lineage.infos.push_back(self_);
    lineage.infos.back().rank = 0;
  }
  lineage.jobId = jobId_;
  lineage.secret = secret_;
  lineage.rendezvousHost = rendezvousHost_;
  // The parent's model, measured and agreed on the same hosts and transports, unless the
  // options give one: a child does not measure again. Whether its ranks share cores is its own
  // (fewer ranks may fit the host's CPUs); every rank of the child has the same records.
  if (!options.costModel) {
    options.costModel = model_;
    options.costModel->ranksShareCores = ranksShareCores(lineage.infos);
    options.costModel->ranksPerCore = ranksPerCore(lineage.infos);
  }
  // Traced, the child writes files of its own (its ranks are numbered anew): the path gets
  // ".split<seq>-color<color>", the same on the child's ranks and unlike any sibling's.
  if (!options.trace.empty()) options.trace += fmt::format(".split{}-color{}", seq, color);
  // While the child connects, this rank watches the parent's links: a rank of its color that
  // failed in the split (after its record had passed on) never connects, and its failure
  // reaches here as an abort, or as its own link closed when it is one this rank waits for. No
  // async call on the parent is in flight after the split's: the issuing thread owns its links, as
  // in a blocking call.
  const char* call = dup ? "dup" : "split";
  lineage.watchParent = [this, call, seq, members](transport::Deadline deadline,
                                                   std::span<const int> waitingFor) {
    std::vector<int> here;  // the child's ranks it waits for, as ranks of the parent
    for (int r : waitingFor) here.push_back(members[static_cast<size_t>(r)]);
    checkForFailure(deadline, call, seq, here);
  };
  std::unique_ptr<CommunicatorImpl> child;
  {
    const OwnLinks own(*this);
    try {
      child = std::make_unique<CommunicatorImpl>(std::move(lineage), std::move(options));
    } catch (const std::exception& e) {
      // The ranks of this color wait for this one's links: the parent fails, telling its peers,
      // whose watches end those waits (and the other colors learn of it at their next call).
      fail(rank_, fmt::format("{} #{} on rank {}: the new communicator failed to connect: {}", call,
                              seq, rank_, e.what()));
      throw;
    }
  }
  child->measureClockOffset();  // traced: against the child's rank 0, for its own files
  return child;
}

}  // namespace detail

namespace {

// The child's options: its own, or the parent's. Checked as create() checks them, naming the call.
CommunicatorOptions childOptions(const char* call, int rank, const detail::CommunicatorImpl& impl,
                                 std::optional<CommunicatorOptions> options) {
  if (!options) return impl.options();
  if (options->timeout.count() <= 0) {
    throw InvalidArgument(
        fmt::format("{} on rank {}: CommunicatorOptions::timeout must be positive, got {} ms", call,
                    rank, options->timeout.count()));
  }
  try {
    detail::checkOptions(*options);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{} on rank {}: {}", call, rank, e.what()));
  }
  return std::move(*options);
}

}  // namespace

std::optional<Communicator> Communicator::split(int color, int key,
                                                std::optional<CommunicatorOptions> options) {
  if (color < kNoColor) {
    throw InvalidArgument(fmt::format(
        "split on rank {}: color {} is negative; a color is >= 0, or kNoColor ({}) for a rank "
        "that joins no new communicator",
        rank(), color, kNoColor));
  }
  auto child =
      impl_->split(color, key, childOptions("split", rank(), *impl_, std::move(options)), false);
  if (!child) return std::nullopt;
  return Communicator(std::move(child));
}

Communicator Communicator::dup(std::optional<CommunicatorOptions> options) {
  return Communicator(
      impl_->split(0, rank(), childOptions("dup", rank(), *impl_, std::move(options)), true));
}

}  // namespace ringlet
