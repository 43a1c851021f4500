// Communicator::reduce, allgather and reduceScatter: argument checks, the call header, and the
// algorithm (collectives/ring_gather_scatter.cc).
#include <fmt/format.h>

#include <array>
#include <cstring>
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

void checkOp(const char* name, int rank, DataType type, ReduceOp op) {
  try {
    kernels::checkReducible(type, op);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{} on rank {}: {}", name, rank, e.what()));
  }
}

size_t slice(detail::CommunicatorImpl& impl, const collectives::Group& group) {
  return impl.ringSliceBytes(group);
}

// The blocks of `blockCount` elements by place on the host-ordered ring (host_ring.h): place p
// carries rank ringOrder[p]'s block, so the ring enters and leaves each host once and every rank
// still ends with its own block.
std::vector<collectives::Piece> blocksByRingPlace(const detail::CommunicatorImpl& impl,
                                                  size_t blockCount) {
  return impl.byRingPlace(collectives::equalBlocks(blockCount, impl.size()));
}

Prepared prepareReduce(detail::CommunicatorImpl& impl, const void* send, void* recv, size_t count,
                       DataType type, ReduceOp op, int root) {
  const int rank = impl.rank();
  const size_t bytes = detail::checkedBytes("reduce", rank, count, type);
  checkOp("reduce", rank, type, op);
  if (root < 0 || root >= impl.size()) {
    throw InvalidArgument(fmt::format(
        "reduce on rank {}: root {} is out of range for world size {}", rank, root, impl.size()));
  }
  if (rank == root) {
    detail::checkBuffers("reduce", rank, send, recv, count, type);
  } else if (count > 0 && send == nullptr) {
    throw InvalidArgument(
        fmt::format("reduce on rank {}: send buffer is null but count is {}", rank, count));
  }
  Prepared prepared{
      .header = {.kind = OpKind::kReduce, .type = type, .op = op, .root = root, .count = count},
      .body = {}};
  OpHeader& header = prepared.header;
  // Small data rides in the call headers, around the ring towards the root: the rank after the
  // root sends its data and returns, the ones after it relay a partial result (theirs reduced
  // with what came), the root reduces the last one with its own (on two ranks: no relays).
  const auto role = detail::chainRole(rank, impl.size(), collectives::wrap(root + 1, impl.size()));
  const auto algorithm =
      impl.chooseFor(header, collectives::Collective::kReduce, bytes,
                     role == PairRole::kRelays ? impl.inlineToNext() : send, role);
  collectives::ReduceArgs args{.send = static_cast<const std::byte*>(send),
                               .recv = static_cast<std::byte*>(recv),
                               .count = count,
                               .type = type,
                               .op = op,
                               .root = root};
  auto body = [&impl, args, bytes, algorithm](const collectives::Group& group,
                                              const transport::WaitContext& wait) {
    if (group.size == 1) {
      if (args.recv != args.send && bytes > 0) std::memcpy(args.recv, args.send, bytes);
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline && bytes > OpHeader::kInlineBytes) {
      // The chain with the data after each header: the rank after the root sends its own, each
      // relay its own reduced with what came, the root ends it.
      const bool starts = group.rank == collectives::wrap(args.root + 1, group.size);
      if (starts) return collectives::sendFrom(group.next(), args.send, bytes, wait);
      const bool ends = group.rank == args.root;
      std::byte* out = ends ? args.recv : impl.chainScratch();
      const std::byte* in = group.prev().recv(bytes, wait);
      kernels::reduce(out, args.send, in, args.count, args.type, args.op);
      group.prev().release();
      if (ends) {
        if (args.op == ReduceOp::kAvg) {
          kernels::finishAverage(args.recv, args.count, args.type, group.size);
        }
        return;
      }
      return collectives::sendFrom(group.next(), out, bytes, wait);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      if (bytes == 0 || group.rank == collectives::wrap(args.root + 1, group.size))
        return;  // sent its own
      // A relay passes on its data reduced with the partial result that came; the root ends it.
      std::byte* out = group.rank == args.root ? args.recv : impl.inlineToNext();
      kernels::reduce(out, args.send, impl.inlineFromPrev(), args.count, args.type, args.op);
      if (args.op == ReduceOp::kAvg && group.rank == args.root) {
        kernels::finishAverage(args.recv, args.count, args.type, group.size);
      }
      return;
    }
    if (algorithm == collectives::Algorithm::kTree) {
      // In host order: each subtree below the top levels stays on one host.
      collectives::ReduceArgs inHostOrder = args;
      inHostOrder.root = impl.ringPlaceOf(args.root);
      return collectives::treeReduce(impl.hostRing(), inHostOrder, impl.sliceBytes({}), wait,
                                     impl.headerCheck(wait));
    }
    // Along the ring in host order (host_ring.h), so it enters and leaves each host once.
    const collectives::Group& ring = impl.hostRing();
    collectives::ReduceArgs onRing = args;
    onRing.root = impl.ringPlaceOf(args.root);
    collectives::chainReduce(ring, onRing, slice(impl, ring), wait);
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareAllgather(detail::CommunicatorImpl& impl, const void* send, void* recv,
                          size_t sendCount, DataType type) {
  const int rank = impl.rank();
  const size_t blockBytes = detail::checkedBytes("allgather", rank, sendCount, type);
  if (blockBytes > 0 && static_cast<size_t>(impl.size()) > SIZE_MAX / blockBytes) {
    throw InvalidArgument(fmt::format("allgather on rank {}: {} x {} bytes overflows", rank,
                                      impl.size(), blockBytes));
  }
  detail::checkRegions("allgather", rank, "send", send, blockBytes, "recv", recv,
                       blockBytes * impl.size(), blockBytes * rank);
  Prepared prepared{.header = {.kind = OpKind::kAllgather, .type = type, .count = sendCount},
                    .body = {}};
  OpHeader& header = prepared.header;
  const auto algorithm =
      impl.chooseFor(header, collectives::Collective::kAllgather, blockBytes * impl.size(), send);
  impl.sendFirstOnTwoRanks(header, algorithm == collectives::Algorithm::kRecursiveDoubling,
                           blockBytes);
  collectives::AllgatherArgs args{.send = static_cast<const std::byte*>(send),
                                  .recv = static_cast<std::byte*>(recv),
                                  .sendCount = sendCount,
                                  .type = type};
  auto body = [&impl, args, blockBytes, algorithm](const collectives::Group& group,
                                                   const transport::WaitContext& wait) {
    if (group.size == 1) {
      if (args.recv != args.send && blockBytes > 0) std::memcpy(args.recv, args.send, blockBytes);
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline && group.size > 2) {
      // Every block where it belongs, the others zero, summed byte-wise over call headers.
      const size_t all = blockBytes * group.size;
      std::byte* mine = args.recv + group.rank * blockBytes;
      if (mine != args.send) std::memcpy(mine, args.send, blockBytes);
      std::memset(args.recv, 0, mine - args.recv);
      std::memset(mine + blockBytes, 0, args.recv + all - (mine + blockBytes));
      return detail::headerDoublingUnion(impl, group, args.recv, all, wait);
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      std::byte* mine = args.recv + group.rank * blockBytes;
      if (mine != args.send && blockBytes > 0) std::memcpy(mine, args.send, blockBytes);
      if (blockBytes > 0) {
        std::memcpy(args.recv + (1 - group.rank) * blockBytes, impl.inlineFromPrev(), blockBytes);
      }
      return;
    }
    if (algorithm == collectives::Algorithm::kBruck) {
      return collectives::bruckAllgather(group, args, impl.sliceBytes({}), wait);
    }
    if (algorithm == collectives::Algorithm::kRecursiveDoubling) {
      return collectives::recursiveDoublingAllgather(group, args, impl.sliceBytes({}), wait,
                                                     impl.headerCheck(wait));
    }
    if (algorithm == collectives::Algorithm::kHierarchical) {
      return impl.runOnHostGrid(collectives::hierarchicalAllgather, args, wait);
    }
    if (impl.ringReordered()) {
      const collectives::Group& ring = impl.hostRing();
      const std::vector<collectives::Piece> blocks = blocksByRingPlace(impl, args.sendCount);
      return collectives::ringAllgatherv(
          ring, {.send = args.send, .recv = args.recv, .blocks = blocks, .type = args.type},
          slice(impl, ring), wait);
    }
    collectives::ringAllgather(group, args, slice(impl, group), wait);
  };
  prepared.body = std::move(body);
  return prepared;
}

Prepared prepareReduceScatter(detail::CommunicatorImpl& impl, const void* send, void* recv,
                              size_t recvCount, DataType type, ReduceOp op) {
  const int rank = impl.rank();
  const size_t blockBytes = detail::checkedBytes("reduce_scatter", rank, recvCount, type);
  checkOp("reduce_scatter", rank, type, op);
  if (blockBytes > 0 && static_cast<size_t>(impl.size()) > SIZE_MAX / blockBytes) {
    throw InvalidArgument(fmt::format("reduce_scatter on rank {}: {} x {} bytes overflows", rank,
                                      impl.size(), blockBytes));
  }
  detail::checkRegions("reduce_scatter", rank, "recv", recv, blockBytes, "send", send,
                       blockBytes * impl.size(), blockBytes * rank);
  Prepared prepared{
      .header = {.kind = OpKind::kReduceScatter, .type = type, .op = op, .count = recvCount},
      .body = {}};
  OpHeader& header = prepared.header;
  // Two ranks: the other rank's block of send rides in the header.
  const auto* otherBlock = impl.size() == 2 ? static_cast<const std::byte*>(send) +
                                                  static_cast<size_t>(1 - rank) * blockBytes
                                            : nullptr;
  const auto algorithm = impl.chooseFor(header, collectives::Collective::kReduceScatter,
                                        blockBytes * impl.size(), otherBlock);
  // Past a header, the ring's one step on two ranks sends the peer's block at once.
  if (algorithm == collectives::Algorithm::kRing)
    impl.sendFirstOnTwoRanks(header, true, blockBytes);
  collectives::ReduceScatterArgs args{.send = static_cast<const std::byte*>(send),
                                      .recv = static_cast<std::byte*>(recv),
                                      .recvCount = recvCount,
                                      .type = type,
                                      .op = op};
  auto body = [&impl, args, blockBytes, algorithm](const collectives::Group& group,
                                                   const transport::WaitContext& wait) {
    if (group.size == 1) {
      if (args.recv != args.send && blockBytes > 0) std::memcpy(args.recv, args.send, blockBytes);
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline && group.size > 2) {
      // The whole send buffer reduced over call headers, this rank's block kept.
      std::byte* all = impl.chainScratch();  // kChainPayloadBytes
      std::memcpy(all, args.send, blockBytes * group.size);
      detail::headerDoublingAllreduce(impl, group,
                                      {.send = all,
                                       .recv = all,
                                       .count = args.recvCount * group.size,
                                       .type = args.type,
                                       .op = args.op},
                                      wait);
      std::memcpy(args.recv, all + group.rank * blockBytes, blockBytes);
      return;
    }
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      if (blockBytes == 0) return;
      kernels::reduce(args.recv, args.send + group.rank * blockBytes, impl.inlineFromPrev(),
                      args.recvCount, args.type, args.op);
      if (args.op == ReduceOp::kAvg) {
        kernels::finishAverage(args.recv, args.recvCount, args.type, 2);
      }
      return;
    }
    if (algorithm == collectives::Algorithm::kRecursiveHalving) {
      return collectives::recursiveHalvingReduceScatter(group, args, impl.sliceBytes({}), wait);
    }
    if (algorithm == collectives::Algorithm::kHierarchical) {
      return impl.runOnHostGrid(collectives::hierarchicalReduceScatter, args, wait);
    }
    if (impl.ringReordered()) {
      const collectives::Group& ring = impl.hostRing();
      const std::vector<collectives::Piece> blocks = blocksByRingPlace(impl, args.recvCount);
      return collectives::ringReduceScatterv(ring,
                                             {.send = args.send,
                                              .recv = args.recv,
                                              .blocks = blocks,
                                              .type = args.type,
                                              .op = args.op},
                                             slice(impl, ring), wait, impl.headerCheck(wait));
    }
    collectives::ringReduceScatter(group, args, slice(impl, group), wait, impl.headerCheck(wait));
  };
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          int root) {
  auto p = prepareReduce(*impl_, send, recv, count, type, op, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::reduceAsync(const void* send, void* recv, size_t count, DataType type,
                               ReduceOp op, int root) {
  auto p = prepareReduce(*impl_, send, recv, count, type, op, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::allgather(const void* send, void* recv, size_t sendCount, DataType type) {
  auto p = prepareAllgather(*impl_, send, recv, sendCount, type);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::allgatherAsync(const void* send, void* recv, size_t sendCount, DataType type) {
  auto p = prepareAllgather(*impl_, send, recv, sendCount, type);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::reduceScatter(const void* send, void* recv, size_t recvCount, DataType type,
                                 ReduceOp op) {
  auto p = prepareReduceScatter(*impl_, send, recv, recvCount, type, op);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type,
                                      ReduceOp op) {
  auto p = prepareReduceScatter(*impl_, send, recv, recvCount, type, op);
  return impl_->runAsync(p.header, std::move(p.body));
}

}  // namespace ringlet
