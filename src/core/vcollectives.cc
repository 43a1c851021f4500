// Communicator::allgatherv, reduceScatterv and allToAllv: argument checks, the call header (a
// fingerprint of the counts every rank must share), the pairwise count agreement of all-to-all-v,
// and the algorithms (collectives/ring_gather_scatter.cc, collectives/halving_doubling.cc,
// collectives/pairwise_alltoall.cc).
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/select.h"
#include "kernels/reduce.h"
#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/core/communicator_impl.h"
#include "src/core/header_framing.h"

namespace ringlet {

using collectives::Piece;
using detail::BlockLayout;
using detail::copyBytes;
using detail::OpHeader;
using detail::OpKind;
using Prepared = detail::PreparedCall;

namespace {

std::vector<size_t> copyOf(std::span<const size_t> values) {
  return {values.begin(), values.end()};
}

Prepared prepareAllgatherv(detail::CommunicatorImpl& impl, const void* send, void* recv,
                           std::span<const size_t> recvCounts, std::span<const size_t> displs,
                           DataType type) {
  const int rank = impl.rank();
  BlockLayout layout = detail::checkLayout("allgatherv", rank, impl.size(), "recvCounts",
                                           recvCounts, "displs", displs, type);
  const size_t element = elementSize(type);
  const Piece own = layout.blocks[rank];
  detail::checkRegions("allgatherv", rank, "send", send, own.count * element, "recv", recv,
                       layout.extent * element, own.offset * element);
  Prepared prepared{.header = {.kind = OpKind::kAllgatherv,
                               .type = type,
                               .count = layout.total,
                               .countsHash = detail::hashCounts(recvCounts),
                               .ranks = impl.size()},
                    .body = {}};
  OpHeader& header = prepared.header;
  const auto algorithm =
      impl.chooseForBlocks(header, collectives::Collective::kAllgatherv, layout.blocks, element);
  if (algorithm == collectives::Algorithm::kHeaderInline && impl.size() == 2) {
    // Its own block out, the peer's in.
    impl.inlineBlocks(header, send, own.count * element, layout.blocks[1 - rank].count * element);
  }
  // Two ranks, blocks past a header: the own block follows the header at once (as all-gather's).
  impl.sendFirstOnTwoRanks(header, algorithm == collectives::Algorithm::kRecursiveDoubling,
                           own.count * element);
  auto body = [&impl, send = static_cast<const std::byte*>(send),
               recv = static_cast<std::byte*>(recv), blocks = std::move(layout.blocks), type,
               algorithm](const collectives::Group& group, const transport::WaitContext& wait) {
    const size_t element = elementSize(type);
    if (group.size == 1) {
      return copyBytes(recv + blocks[0].offset * element, send, blocks[0].count * element);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      const Piece own = blocks[group.rank];
      copyBytes(recv + own.offset * element, send, own.count * element);
      if (group.size == 2) {  // the peer's block came with its header
        const Piece theirs = blocks[1 - group.rank];
        return copyBytes(recv + theirs.offset * element, impl.inlineFromPrev(),
                         theirs.count * element);
      }
      // Every block packed in rank order, the others' zero, summed byte-wise over headers.
      const size_t total = detail::packedStart(blocks, group.size);
      std::byte* all = impl.chainScratch();  // kChainPayloadBytes
      std::memset(all, 0, total * element);
      copyBytes(all + detail::packedStart(blocks, group.rank) * element, send, own.count * element);
      detail::headerDoublingUnion(impl, group, all, total * element, wait);
      for (int q = 0; q < group.size; ++q) {
        if (q == group.rank) continue;
        copyBytes(recv + blocks[q].offset * element, all + detail::packedStart(blocks, q) * element,
                  blocks[q].count * element);
      }
      return;
    }
    const collectives::AllgathervArgs args{
        .send = send, .recv = recv, .blocks = blocks, .type = type};
    if (algorithm == collectives::Algorithm::kRecursiveDoubling) {
      return collectives::recursiveDoublingAllgatherv(group, args, impl.sliceBytes({}), wait,
                                                      impl.headerCheck(wait));
    }
    if (algorithm == collectives::Algorithm::kHierarchical) {
      return impl.runOnHostGrid(collectives::hierarchicalAllgatherv, args, wait);
    }
    collectives::ringAllgatherv(group, args, impl.ringSliceBytes(group), wait);
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareReduceScatterv(detail::CommunicatorImpl& impl, const void* send, void* recv,
                               std::span<const size_t> recvCounts, DataType type, ReduceOp op) {
  const int rank = impl.rank();
  BlockLayout layout = detail::checkLayout("reduce_scatterv", rank, impl.size(), "recvCounts",
                                           recvCounts, "displs", {}, type);
  try {
    kernels::checkReducible(type, op);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("reduce_scatterv on rank {}: {}", rank, e.what()));
  }
  const size_t element = elementSize(type);
  const Piece own = layout.blocks[rank];
  detail::checkRegions("reduce_scatterv", rank, "recv", recv, own.count * element, "send", send,
                       layout.total * element, own.offset * element);
  Prepared prepared{.header = {.kind = OpKind::kReduceScatterv,
                               .type = type,
                               .op = op,
                               .count = layout.total,
                               .countsHash = detail::hashCounts(recvCounts),
                               .ranks = impl.size()},
                    .body = {}};
  OpHeader& header = prepared.header;
  const auto algorithm = impl.chooseForBlocks(header, collectives::Collective::kReduceScatterv,
                                              layout.blocks, element);
  if (algorithm == collectives::Algorithm::kHeaderInline && impl.size() == 2) {
    const Piece theirs = layout.blocks[1 - rank];  // its part of send, for the peer to keep
    impl.inlineBlocks(header, static_cast<const std::byte*>(send) + theirs.offset * element,
                      theirs.count * element, own.count * element);
  }
  // Two ranks, blocks past a header: the ring's one step sends the peer's block at once.
  if (impl.size() == 2) {
    impl.sendFirstOnTwoRanks(header, algorithm == collectives::Algorithm::kRing,
                             layout.blocks[1 - rank].count * element);
  }
  auto body = [&impl, send = static_cast<const std::byte*>(send),
               recv = static_cast<std::byte*>(recv), blocks = std::move(layout.blocks), type, op,
               algorithm](const collectives::Group& group, const transport::WaitContext& wait) {
    const size_t element = elementSize(type);
    if (group.size == 1) {
      return copyBytes(recv, send, blocks[0].count * element);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      const Piece own = blocks[group.rank];
      if (group.size == 2) {  // this rank's block of the peer's send came with its header
        if (own.count == 0) return;
        kernels::reduce(recv, send + own.offset * element, impl.inlineFromPrev(), own.count, type,
                        op);
        if (op == ReduceOp::kAvg) kernels::finishAverage(recv, own.count, type, 2);
        return;
      }
      // The whole send buffer reduced over call headers, this rank's block kept.
      const size_t total = detail::packedStart(blocks, group.size);
      std::byte* all = impl.chainScratch();  // kChainPayloadBytes
      std::memcpy(all, send, total * element);
      detail::headerDoublingAllreduce(
          impl, group, {.send = all, .recv = all, .count = total, .type = type, .op = op}, wait);
      return copyBytes(recv, all + own.offset * element, own.count * element);
    }
    const collectives::ReduceScattervArgs args{
        .send = send, .recv = recv, .blocks = blocks, .type = type, .op = op};
    if (algorithm == collectives::Algorithm::kRecursiveHalving) {
      return collectives::recursiveHalvingReduceScatterv(group, args, impl.sliceBytes({}), wait);
    }
    if (algorithm == collectives::Algorithm::kHierarchical) {
      return impl.runOnHostGrid(collectives::hierarchicalReduceScatterv, args, wait);
    }
    collectives::ringReduceScatterv(group, args, impl.ringSliceBytes(group), wait,
                                    impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareAllToAllv(detail::CommunicatorImpl& impl, const void* send,
                          std::span<const size_t> sendCounts, std::span<const size_t> sendDispls,
                          void* recv, std::span<const size_t> recvCounts,
                          std::span<const size_t> recvDispls, DataType type) {
  const int rank = impl.rank();
  detail::AllToAllvLayouts layouts =
      detail::checkAllToAllvLayouts("alltoallv", rank, impl.size(), send, sendCounts, sendDispls,
                                    recv, recvCounts, recvDispls, type);
  BlockLayout& out = layouts.out;
  BlockLayout& in = layouts.in;
  const bool inPlace = layouts.inPlace;
  const size_t element = elementSize(type);
  if (out.total > 0 && send == nullptr) {
    throw InvalidArgument(fmt::format(
        "alltoallv on rank {}: send buffer is null but sendCounts sum to {}", rank, out.total));
  }
  if (in.total > 0 && recv == nullptr) {
    throw InvalidArgument(fmt::format(
        "alltoallv on rank {}: recv buffer is null but recvCounts sum to {}", rank, in.total));
  }
  const size_t sendBytes = out.extent * element;
  Prepared prepared{.header = {.kind = OpKind::kAllToAllv,
                               .type = type,
                               .count = out.total,
                               .ranks = impl.size()},
                    .body = {}};
  OpHeader& header = prepared.header;
  // Two ranks: the header carries a fingerprint of the pair's counts (what rank 0 sends rank 1,
  // and what rank 1 sends rank 0, as each rank sees them), so the round of headers itself finds
  // a disagreement and no round of counts follows; blocks of up to 256 bytes each way ride in
  // the headers (both ranks decide from the same two counts, when they agree).
  bool inHeaders = false;
  if (impl.size() > 2) {
    // Once every rank is linked to every other (an all-to-all-v before this one linked them),
    // the body's first messages are call headers to every peer (exchangeCountsAndSmallBlocks),
    // and no round of headers comes first. Every rank reaches this point after the same calls,
    // so every rank decides alike.
    header.selfChecked = impl.allPeersLinkedBefore();
    impl.linksAllPeers();
  } else if (impl.size() == 2) {
    const int peer = 1 - rank;
    const size_t mineOut = sendCounts[peer];  // what this rank sends its peer
    const size_t mineIn = recvCounts[peer];   // and expects from it
    const std::array<size_t, 2> pair =
        rank == 0 ? std::array{mineOut, mineIn} : std::array{mineIn, mineOut};
    header.countsHash = detail::hashCounts(pair);
    inHeaders = std::max(mineOut, mineIn) * element <= OpHeader::kInlineBytes;
    if (inHeaders) {
      header.algorithm = static_cast<uint8_t>(collectives::Algorithm::kHeaderInline);
      impl.inlineBlocks(header,
                        static_cast<const std::byte*>(send) + out.blocks[peer].offset * element,
                        mineOut * element, mineIn * element);
    } else {
      // The pairwise exchange's block follows the header at once (as all-to-all's).
      impl.sendFirstOnTwoRanks(header, true, mineOut * element);
    }
  }
  auto body = [&impl, send = static_cast<const std::byte*>(send),
               recv = static_cast<std::byte*>(recv), sendBlocks = std::move(out.blocks),
               recvBlocks = std::move(in.blocks), sendCounts = copyOf(sendCounts),
               recvCounts = copyOf(recvCounts), sendBytes, element, inPlace,
               inHeaders](const collectives::Group& group, const transport::WaitContext& wait) {
    if (group.size == 1) {
      if (inPlace) return;  // identical layouts: the block is where it belongs
      return copyBytes(recv + recvBlocks[0].offset * element, send + sendBlocks[0].offset * element,
                       recvBlocks[0].count * element);
    }
    if (inHeaders) {  // two ranks: the peer's block for this rank came with its header
      const int me = group.rank;
      const int peer = 1 - me;
      if (!inPlace) {
        copyBytes(recv + recvBlocks[me].offset * element, send + sendBlocks[me].offset * element,
                  recvBlocks[me].count * element);
      }
      return copyBytes(recv + recvBlocks[peer].offset * element, impl.inlineFromPrev(),
                       recvBlocks[peer].count * element);
    }
    collectives::AllToAllvArgs args{.send = send,
                                    .recv = recv,
                                    .sendBlocks = sendBlocks,
                                    .recvBlocks = recvBlocks,
                                    .elementBytes = element};
    std::unique_ptr<std::byte[]> copy;
    if (inPlace) {  // send from a copy
      copy = std::make_unique_for_overwrite<std::byte[]>(sendBytes);
      std::memcpy(copy.get(), send, sendBytes);
      args.send = copy.get();
    }
    // Every rank reaches this call (its header was checked in a round of headers, or every rank
    // is linked to every other already: selfChecked), so the links it needs to everyone are
    // made collectively here, the first time.
    impl.connectAllPeers(wait.deadline);
    transport::WaitContext all = wait;
    all.links = impl.activeLinks();
    // (Two ranks compared the pair's counts in their call headers already.)
    std::vector<Piece> sendLeft(sendBlocks), recvLeft(recvBlocks);
    if (group.size > 2) {
      detail::exchangeCountsAndSmallBlocks(impl, group, sendCounts, recvCounts, args, sendLeft,
                                           recvLeft, all);
      args.sendBlocks = sendLeft;
      args.recvBlocks = recvLeft;
    }
    if (impl.ringReordered()) {
      // Steps by place on the host-ordered ring, as the all-to-all's (gather_scatter.cc): with
      // ranks dealt cyclically over hosts, every step in rank order would send off the host at
      // once and leave the host links idle in the steps that stay inside it.
      const std::vector<Piece> sendByPlace = impl.byRingPlace(args.sendBlocks);
      const std::vector<Piece> recvByPlace = impl.byRingPlace(args.recvBlocks);
      args.sendBlocks = sendByPlace;
      args.recvBlocks = recvByPlace;
      return collectives::pairwiseAllToAllv(impl.hostRing(), args, impl.exchangeSliceBytes(), all,
                                            impl.headerCheck(wait));
    }
    collectives::pairwiseAllToAllv(group, args, impl.exchangeSliceBytes(), all,
                                   impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

void Communicator::allgatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
                              std::span<const size_t> displs, DataType type) {
  auto p = prepareAllgatherv(*impl_, send, recv, recvCounts, displs, type);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::allgathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                                   std::span<const size_t> displs, DataType type) {
  auto p = prepareAllgatherv(*impl_, send, recv, recvCounts, displs, type);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::reduceScatterv(const void* send, void* recv, std::span<const size_t> recvCounts,
                                  DataType type, ReduceOp op) {
  auto p = prepareReduceScatterv(*impl_, send, recv, recvCounts, type, op);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::reduceScattervAsync(const void* send, void* recv,
                                       std::span<const size_t> recvCounts, DataType type,
                                       ReduceOp op) {
  auto p = prepareReduceScatterv(*impl_, send, recv, recvCounts, type, op);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::allToAllv(const void* send, std::span<const size_t> sendCounts,
                             std::span<const size_t> sendDispls, void* recv,
                             std::span<const size_t> recvCounts, std::span<const size_t> recvDispls,
                             DataType type) {
  auto p =
      prepareAllToAllv(*impl_, send, sendCounts, sendDispls, recv, recvCounts, recvDispls, type);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::allToAllvAsync(const void* send, std::span<const size_t> sendCounts,
                                  std::span<const size_t> sendDispls, void* recv,
                                  std::span<const size_t> recvCounts,
                                  std::span<const size_t> recvDispls, DataType type) {
  auto p =
      prepareAllToAllv(*impl_, send, sendCounts, sendDispls, recv, recvCounts, recvDispls, type);
  return impl_->runAsync(p.header, std::move(p.body));
}

}  // namespace ringlet
