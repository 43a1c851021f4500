// Communicator::gather, scatter and allToAll: argument checks, the call header, and the
// algorithms (collectives/tree_gather_scatter.cc: tree or linear;
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

using detail::OpHeader;
using detail::OpKind;
using detail::PairRole;
using Prepared = detail::PreparedCall;

namespace {

// A world of one: the call is a copy (nothing when in place).
void copyOwnBlock(const std::byte* send, std::byte* recv, size_t bytes) {
  if (recv != send) detail::copySmall(recv, send, bytes);
}

// Checks what both calls share; returns the bytes of one rank's block.
size_t checkRooted(const char* name, detail::CommunicatorImpl& impl, const void* all,
                   const char* allName, const void* mine, const char* mineName, size_t count,
                   DataType type, int root) {
  const int rank = impl.rank();
  const size_t block = detail::checkedBytes(name, rank, count, type);
  if (root < 0 || root >= impl.size()) {
    throw InvalidArgument(fmt::format("{} on rank {}: root {} is out of range for world size {}",
                                      name, rank, root, impl.size()));
  }
  if (block > 0 && static_cast<size_t>(impl.size()) > SIZE_MAX / block) {
    throw InvalidArgument(
        fmt::format("{} on rank {}: {} x {} bytes overflows", name, rank, impl.size(), block));
  }
  if (rank == root) {
    detail::checkRegions(name, rank, mineName, mine, block, allName, all, block * impl.size(),
                         block * root);
  } else if (block > 0 && mine == nullptr) {
    throw InvalidArgument(fmt::format("{} on rank {}: {} buffer is null but count is {}", name,
                                      rank, mineName, count));
  }
  return block;
}

Prepared prepareGather(detail::CommunicatorImpl& impl, const void* send, void* recv, size_t count,
                       DataType type, int root) {
  const size_t block = checkRooted("gather", impl, recv, "recv", send, "send", count, type, root);
  Prepared prepared{.header = {.kind = OpKind::kGather, .type = type, .root = root, .count = count},
                    .body = {}};
  OpHeader& header = prepared.header;
  // Small blocks ride in the call headers around the ring towards the root: the rank after the
  // root sends its block and returns, each rank after it sends on the blocks that came and its
  // own, the root takes them all (on two ranks: one block, no relays).
  const int size = impl.size();
  const int place = collectives::wrap(impl.rank() - root, size);  // 1 starts the chain, 0 ends it
  const auto role = detail::chainRole(impl.rank(), size, collectives::wrap(root + 1, size));
  const auto algorithm =
      impl.chooseFor(header, collectives::Collective::kGather, block * size,
                     role == PairRole::kRelays ? impl.inlineToNext() : send, role);
  const bool payload = block * (size - 1) > OpHeader::kInlineBytes;  // after the headers
  if (algorithm == collectives::Algorithm::kHeaderInline && size > 2 && !payload) {
    // The chain's message from place p carries p blocks; the root's answer none.
    header.inlineBytes = place == 0 ? 0 : place * block;
    if (place != 1) header.inlineInBytes = ((place + size - 1) % size) * block;
  }
  collectives::GatherArgs args{.send = static_cast<const std::byte*>(send),
                               .recv = static_cast<std::byte*>(recv),
                               .blockBytes = block,
                               .root = root};
  auto body = [&impl, args, algorithm, payload](const collectives::Group& group,
                                                const transport::WaitContext& wait) {
    if (group.size == 1) return copyOwnBlock(args.send, args.recv, args.blockBytes);
    if (algorithm == collectives::Algorithm::kHeaderInline && payload) {
      // The chain with the blocks after each header: place p receives p-1 blocks and sends p.
      const int n = group.size;
      const int place = (group.rank - args.root + n) % n;
      const size_t block = args.blockBytes;
      if (place == 1) return collectives::sendFrom(group.next(), args.send, block, wait);
      const size_t came = static_cast<size_t>((place + n - 1) % n) * block;
      const std::byte* in = group.prev().recv(came, wait);
      if (place == 0) {
        copyOwnBlock(args.send, args.recv + args.root * block, block);
        for (int p = 1; p < n; ++p) {  // the blocks of places 1..n-1, in that order
          kernels::copy(args.recv + ((args.root + p) % n) * block, in + (p - 1) * block, block);
        }
        return group.prev().release();
      }
      std::byte* out = impl.chainScratch();
      kernels::copy(out, in, came);
      group.prev().release();
      kernels::copy(out + came, args.send, block);
      return collectives::sendFrom(group.next(), out, came + block, wait);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      const int n = group.size;
      const int place = (group.rank - args.root + n) % n;
      const size_t block = args.blockBytes;
      if (place == 1 || block == 0) return;  // sent its block with its header
      if (place > 1) {                       // a relay: the blocks that came, then its own
        std::memcpy(impl.inlineToNext(), impl.inlineFromPrev(), (place - 1) * block);
        std::memcpy(impl.inlineToNext() + (place - 1) * block, args.send, block);
        return;
      }
      copyOwnBlock(args.send, args.recv + args.root * block, block);
      for (int p = 1; p < n; ++p) {  // the blocks of places 1..n-1, in that order
        std::memcpy(args.recv + ((args.root + p) % n) * block,
                    impl.inlineFromPrev() + (p - 1) * block, block);
      }
      return;
    }
    const collectives::RootedSchedule schedule = detail::rootedSchedule(algorithm);
    collectives::gather(group, args, schedule, impl.sliceBytes({}), impl.linkedFor(schedule, wait),
                        impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareScatter(detail::CommunicatorImpl& impl, const void* send, void* recv, size_t count,
                        DataType type, int root) {
  const size_t block = checkRooted("scatter", impl, send, "send", recv, "recv", count, type, root);
  Prepared prepared{
      .header = {.kind = OpKind::kScatter, .type = type, .root = root, .count = count}, .body = {}};
  OpHeader& header = prepared.header;
  // Small blocks ride in the call headers. Two ranks: the root's block for the other (the
  // other's header carries nothing it uses). More: every block, around the ring from the root,
  // each rank taking its own and sending them all on, the rank before the root answering.
  const int size = impl.size();
  const int rank = impl.rank();
  const auto role = detail::chainRole(rank, size, root);
  const void* inlined = recv;
  if (size == 2 && rank == root) {
    inlined = static_cast<const std::byte*>(send) + static_cast<size_t>(1 - root) * block;
  } else if (size > 2) {
    inlined = rank == root ? send : static_cast<const void*>(impl.inlineFromPrev());
  }
  const auto algorithm =
      impl.chooseFor(header, collectives::Collective::kScatter, block * size, inlined, role);
  collectives::ScatterArgs args{.send = static_cast<const std::byte*>(send),
                                .recv = static_cast<std::byte*>(recv),
                                .blockBytes = block,
                                .root = root};
  const size_t all = block * static_cast<size_t>(size);
  auto body = [&impl, args, algorithm, all](const collectives::Group& group,
                                            const transport::WaitContext& wait) {
    if (group.size == 1) return copyOwnBlock(args.send, args.recv, args.blockBytes);
    if (algorithm == collectives::Algorithm::kHeaderInline && group.size == 2 &&
        args.blockBytes > OpHeader::kInlineBytes) {
      // Two ranks, the other's block after the root's header: the root sends it and returns.
      const size_t block = args.blockBytes;
      if (group.rank != args.root) return group.prev().recvInto(args.recv, block, wait);
      collectives::sendFrom(group.next(), args.send + (1 - args.root) * block, block, wait);
      return copyOwnBlock(args.send + args.root * block, args.recv, block);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline && group.size > 2 &&
        all > OpHeader::kInlineBytes) {
      // The chain with every block after each header, from the root around the ring: each rank
      // takes its own and (but the last) sends them all on.
      const size_t block = args.blockBytes;
      if (group.rank == args.root) {
        copyOwnBlock(args.send + args.root * block, args.recv, block);
        return collectives::sendFrom(group.next(), args.send, all, wait);
      }
      const std::byte* in = group.prev().recv(all, wait);
      copyOwnBlock(in + group.rank * block, args.recv, block);
      if (collectives::wrap(group.rank + 1, group.size) == args.root) return group.prev().release();
      std::byte* out = impl.chainScratch();
      kernels::copy(out, in, all);
      group.prev().release();
      return collectives::sendFrom(group.next(), out, all, wait);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      if (group.rank != args.root) {
        // Two ranks: the only block that came; more: this rank's among all of them.
        const size_t at = group.size == 2 ? 0 : group.rank * args.blockBytes;
        return copyOwnBlock(impl.inlineFromPrev() + at, args.recv, args.blockBytes);
      }
      return copyOwnBlock(args.send + args.root * args.blockBytes, args.recv, args.blockBytes);
    }
    const collectives::RootedSchedule schedule = detail::rootedSchedule(algorithm);
    collectives::scatter(group, args, schedule, impl.sliceBytes({}), impl.linkedFor(schedule, wait),
                         impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareAllToAll(detail::CommunicatorImpl& impl, const void* send, void* recv, size_t count,
                         DataType type) {
  const int rank = impl.rank();
  const size_t block = detail::checkedBytes("alltoall", rank, count, type);
  if (block > 0 && static_cast<size_t>(impl.size()) > SIZE_MAX / block) {
    throw InvalidArgument(
        fmt::format("alltoall on rank {}: {} x {} bytes overflows", rank, impl.size(), block));
  }
  detail::checkBuffers("alltoall", rank, send, recv, count * impl.size(), type);
  Prepared prepared{.header = {.kind = OpKind::kAllToAll, .type = type, .count = count},
                    .body = {}};
  OpHeader& header = prepared.header;
  // Two ranks: the block for the other rides in the header.
  const auto* otherBlock =
      impl.size() == 2 ? static_cast<const std::byte*>(send) + static_cast<size_t>(1 - rank) * block
                       : nullptr;
  const auto algorithm =
      impl.chooseFor(header, collectives::Collective::kAllToAll, block * impl.size(), otherBlock);
  impl.sendFirstOnTwoRanks(header, algorithm == collectives::Algorithm::kPairwise, block);
  // The pairwise exchange links every rank to every other. More than two ranks with blocks of at
  // most kCountsMessageData bytes (chosen by the model, not forced): one message per peer
  // carrying the call header and the block, as all-to-all-v's counts message does, with no round
  // of headers first once the ranks are linked (decided at the call, alike on every rank).
  // Zero-count blocks take the round of headers alone: one message each way where this is N-1
  // (16 cores, N = 3: 0.38 us against 0.84).
  const bool pairwise = algorithm == collectives::Algorithm::kPairwise && impl.size() > 2;
  const bool direct =
      pairwise && block > 0 && block <= detail::kCountsMessageData &&
      impl.forced(collectives::Collective::kAllToAll) == collectives::Algorithm::kAuto;
  if (direct) header.selfChecked = impl.allPeersLinkedBefore();
  // (One that moves no data runs no body, and links nothing: CommunicatorImpl::execute.)
  if (pairwise && block > 0) impl.linksAllPeers();
  collectives::AllToAllArgs args{.send = static_cast<const std::byte*>(send),
                                 .recv = static_cast<std::byte*>(recv),
                                 .blockBytes = block};
  auto body = [&impl, args, algorithm, direct](const collectives::Group& group,
                                               const transport::WaitContext& wait) {
    if (algorithm == collectives::Algorithm::kHeaderInline && group.size > 2) {
      // The N x N matrix of blocks (row: what a rank sends), each rank's row set and the rest
      // zero, summed byte-wise over call headers; this rank's column is what it receives.
      const size_t n = group.size;
      const size_t row = args.blockBytes * n;
      std::array<std::byte, OpHeader::kInlineBytes> matrix{};  // at most a header's (chooseFor)
      std::memcpy(matrix.data() + group.rank * row, args.send, row);
      detail::headerDoublingUnion(impl, group, matrix.data(), row * n, wait);
      for (size_t s = 0; s < n; ++s) {
        std::memcpy(args.recv + s * args.blockBytes,
                    matrix.data() + s * row + group.rank * args.blockBytes, args.blockBytes);
      }
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {  // sent with the header already
      const int peer = 1 - group.rank;
      copyOwnBlock(args.send + group.rank * args.blockBytes,
                   args.recv + group.rank * args.blockBytes, args.blockBytes);
      return copyOwnBlock(impl.inlineFromPrev(), args.recv + peer * args.blockBytes,
                          args.blockBytes);
    }
    if (algorithm == collectives::Algorithm::kBruck) {  // in place or not: it works on a copy
      return collectives::bruckAllToAll(group, args, impl.sliceBytes({}), wait);
    }
    const size_t bytes = args.blockBytes * group.size;
    std::unique_ptr<std::byte[]> copy;
    collectives::AllToAllArgs a = args;
    if (a.send == a.recv && bytes > 0) {  // in place: send from a copy
      copy = std::make_unique_for_overwrite<std::byte[]>(bytes);
      kernels::copy(copy.get(), a.send, bytes);
      a.send = copy.get();
    }
    if (group.size == 1) {
      if (a.recv != a.send && bytes > 0) kernels::copy(a.recv, a.send, bytes);
      return;
    }
    // Every rank reaches this call (its header was checked in a round of headers, or every rank
    // is linked to every other already: selfChecked), so the links it needs to everyone are made
    // collectively here, the first time.
    impl.connectAllPeers(wait.deadline);
    transport::WaitContext all = wait;
    all.links = impl.activeLinks();
    if (direct) {  // every block with its header; the exchange below copies this rank's own
      const std::vector<collectives::Piece> blocks =
          collectives::equalBlocks(a.blockBytes, group.size);
      const std::vector<size_t> counts(static_cast<size_t>(group.size), a.blockBytes);
      collectives::AllToAllvArgs v{.send = a.send,
                                   .recv = a.recv,
                                   .sendBlocks = blocks,
                                   .recvBlocks = blocks,
                                   .elementBytes = 1};
      std::vector<collectives::Piece> sendLeft(blocks), recvLeft(blocks);
      detail::exchangeCountsAndSmallBlocks(impl, group, counts, counts, v, sendLeft, recvLeft, all);
      v.sendBlocks = sendLeft;
      v.recvBlocks = recvLeft;
      return collectives::pairwiseAllToAllv(group, v, impl.exchangeSliceBytes(), all);
    }
    if (impl.ringReordered()) {
      // Steps taken by place on the host-ordered ring (host_ring.h): with ranks dealt cyclically,
      // rank order would send every rank's block off the host in the same steps and leave the
      // host links idle in the steps that stay inside it; by place every step mixes both.
      const std::vector<collectives::Piece> blocks =
          impl.byRingPlace(collectives::equalBlocks(a.blockBytes, group.size));
      return collectives::pairwiseAllToAllv(impl.hostRing(),
                                            {.send = a.send,
                                             .recv = a.recv,
                                             .sendBlocks = blocks,
                                             .recvBlocks = blocks,
                                             .elementBytes = 1},
                                            impl.exchangeSliceBytes(), all);
    }
    collectives::pairwiseAllToAll(group, a, impl.exchangeSliceBytes(), all, impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

void Communicator::allToAll(const void* send, void* recv, size_t count, DataType type) {
  auto p = prepareAllToAll(*impl_, send, recv, count, type);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::allToAllAsync(const void* send, void* recv, size_t count, DataType type) {
  auto p = prepareAllToAll(*impl_, send, recv, count, type);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::gather(const void* send, void* recv, size_t count, DataType type, int root) {
  auto p = prepareGather(*impl_, send, recv, count, type, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::gatherAsync(const void* send, void* recv, size_t count, DataType type,
                               int root) {
  auto p = prepareGather(*impl_, send, recv, count, type, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::scatter(const void* send, void* recv, size_t count, DataType type, int root) {
  auto p = prepareScatter(*impl_, send, recv, count, type, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::scatterAsync(const void* send, void* recv, size_t count, DataType type,
                                int root) {
  auto p = prepareScatter(*impl_, send, recv, count, type, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

}  // namespace ringlet
