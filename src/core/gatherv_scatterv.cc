// Communicator::gatherv and scatterv: argument checks, the call header (a fingerprint of the
// counts every rank must share, the root's included), and the algorithm
// (collectives/tree_gather_scatter.cc: the binomial tree, or the linear schedule for large blocks).
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <memory>
#include <span>

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
using detail::PairRole;
using Prepared = detail::PreparedCall;

namespace {

// What both calls share: the root, the counts (every rank), the displacements (the root only:
// elsewhere they are ignored), the root's buffer of all blocks against this rank's own block
// (in place on the root: `mine` == `all` + displs[root]), and a non-null own block elsewhere.
// `allMayOverlap`: blocks that are only read (scatterv's send) may overlap.
BlockLayout checkRootedV(const char* name, detail::CommunicatorImpl& impl, const void* all,
                         const char* allName, const void* mine, const char* mineName,
                         std::span<const size_t> counts, const char* countsName,
                         std::span<const size_t> displs, DataType type, int root,
                         bool allMayOverlap) {
  const int rank = impl.rank();
  if (root < 0 || root >= impl.size()) {
    throw InvalidArgument(fmt::format("{} on rank {}: root {} is out of range for world size {}",
                                      name, rank, root, impl.size()));
  }
  const bool isRoot = rank == root;
  BlockLayout layout =
      detail::checkLayout(name, rank, impl.size(), countsName, counts, "displs",
                          isRoot ? displs : std::span<const size_t>{}, type, allMayOverlap);
  const size_t element = elementSize(type);
  const Piece own = layout.blocks[rank];
  if (isRoot) {
    detail::checkRegions(name, rank, mineName, mine, own.count * element, allName, all,
                         layout.extent * element, own.offset * element);
  } else if (own.count > 0 && mine == nullptr) {
    throw InvalidArgument(fmt::format("{} on rank {}: {} buffer is null but {}[{}] is {}", name,
                                      rank, mineName, countsName, rank, own.count));
  }
  return layout;
}

// Bytes of the blocks of places 1..p (place: (rank - root) mod N), a gather-v chain's message
// from place p.
size_t chainBytes(std::span<const Piece> blocks, int root, int p, size_t element) {
  const int n = static_cast<int>(blocks.size());
  size_t bytes = 0;
  for (int u = 1; u <= p; ++u) bytes += blocks[(root + u) % n].count * element;
  return bytes;
}

// The blocks lie packed in rank order (each where the prefix sum of the counts puts it).
bool packedInOrder(std::span<const Piece> blocks) {
  size_t at = 0;
  for (const Piece& block : blocks) {
    if (block.count > 0 && block.offset != at) return false;
    at += block.count;
  }
  return true;
}

// A chain of call headers on three to five ranks (prepareRootedV set what each header carries).
// Gather-v: a relay appends its block to those that came, the root places them all. Scatter-v:
// every rank takes its own block of those that came (the root's from its send).
void rootedVChain(detail::CommunicatorImpl& impl, const collectives::Group& group, bool gather,
                  const std::byte* send, std::byte* recv, std::span<const Piece> blocks,
                  size_t element, int root) {
  const int n = group.size;
  const int place = (group.rank - root + n) % n;
  const Piece own = blocks[group.rank];
  if (!gather) {
    const std::byte* from =
        place == 0 ? send + own.offset * element
                   : impl.inlineFromPrev() + detail::packedStart(blocks, group.rank) * element;
    return copyBytes(recv, from, own.count * element);
  }
  if (place == 1) return;  // sent its block with its header
  if (place > 1) {         // a relay: the blocks that came, then its own
    const size_t before = chainBytes(blocks, root, place - 1, element);
    copyBytes(impl.inlineToNext(), impl.inlineFromPrev(), before);
    return copyBytes(impl.inlineToNext() + before, send, own.count * element);
  }
  copyBytes(recv + own.offset * element, send, own.count * element);
  size_t at = 0;
  for (int p = 1; p < n; ++p) {  // the blocks of places 1..n-1, in that order
    const Piece block = blocks[(root + p) % n];
    copyBytes(recv + block.offset * element, impl.inlineFromPrev() + at, block.count * element);
    at += block.count * element;
  }
}

// The same chain past what a header holds (up to kChainPayloadBytes in all): each header goes
// first with no data, and the data follows as a message of its own. `all` is the scatter-v
// root's blocks packed in rank order.
void rootedVChainAfterHeaders(detail::CommunicatorImpl& impl, const collectives::Group& group,
                              bool gather, const std::byte* send, const std::byte* all,
                              std::byte* recv, std::span<const Piece> blocks, size_t element,
                              int root, const transport::WaitContext& wait) {
  const int n = group.size;
  const int place = (group.rank - root + n) % n;
  const Piece own = blocks[group.rank];
  const size_t ownBytes = own.count * element;
  if (!gather) {  // every block from the root around the ring, each rank taking its own
    const size_t total = detail::packedStart(blocks, n) * element;
    if (place == 0) {
      copyBytes(recv, send + own.offset * element, ownBytes);
      return collectives::sendFrom(group.next(), all, total, wait);
    }
    const std::byte* in = group.prev().recv(total, wait);
    copyBytes(recv, in + detail::packedStart(blocks, group.rank) * element, ownBytes);
    if (place == n - 1) return group.prev().release();
    std::byte* out = impl.chainScratch();
    kernels::copy(out, in, total);
    group.prev().release();
    return collectives::sendFrom(group.next(), out, total, wait);
  }
  // Gather-v: place p receives the blocks of places 1..p-1 and sends them with its own.
  if (place == 1) return collectives::sendFrom(group.next(), send, ownBytes, wait);
  const size_t came = chainBytes(blocks, root, (place + n - 1) % n, element);
  const std::byte* in = group.prev().recv(came, wait);
  if (place == 0) {
    copyBytes(recv + own.offset * element, send, ownBytes);
    size_t at = 0;
    for (int p = 1; p < n; ++p) {  // the blocks of places 1..n-1, in that order
      const Piece block = blocks[(root + p) % n];
      copyBytes(recv + block.offset * element, in + at, block.count * element);
      at += block.count * element;
    }
    return group.prev().release();
  }
  std::byte* out = impl.chainScratch();
  copyBytes(out, in, came);
  group.prev().release();
  copyBytes(out + came, send, ownBytes);
  collectives::sendFrom(group.next(), out, came + ownBytes, wait);
}

// A kHeaderInline gather-v or scatter-v (CommunicatorImpl::chooseForBlocks). Two ranks: the
// non-root's block came with (or left in) the call header. More: every block packed in rank
// order in one buffer (the sender's set, the rest zero) and summed byte-wise by recursive doubling
// over call headers, so that every rank holds all of them: log2 N messages and no round of headers
// first, where the tree takes a round of headers and then log2 N steps.
void rootedVInHeaders(detail::CommunicatorImpl& impl, const collectives::Group& group, bool gather,
                      const std::byte* send, std::byte* recv, std::span<const Piece> blocks,
                      size_t element, int root, const transport::WaitContext& wait) {
  const int rank = group.rank;
  const Piece own = blocks[rank];
  if (group.size == 2 && blocks[1 - root].count * element > OpHeader::kInlineBytes) {
    // The non-root's block after the header: the sender sends it and returns.
    const Piece theirs = blocks[1 - root];
    const size_t bytes = theirs.count * element;
    if (rank != root) {
      if (gather) return collectives::sendFrom(group.next(), send, bytes, wait);
      return group.prev().recvInto(recv, bytes, wait);
    }
    if (!gather) {
      collectives::sendFrom(group.next(), send + theirs.offset * element, bytes, wait);
      return copyBytes(recv, send + own.offset * element, own.count * element);
    }
    copyBytes(recv + own.offset * element, send, own.count * element);
    return group.prev().recvInto(recv + theirs.offset * element, bytes, wait);
  }
  if (group.size == 2) {
    if (rank != root && gather) return;  // sent its block with its header
    if (rank != root) return copyBytes(recv, impl.inlineFromPrev(), own.count * element);
    if (!gather) return copyBytes(recv, send + own.offset * element, own.count * element);
    copyBytes(recv + own.offset * element, send, own.count * element);
    const Piece theirs = blocks[1 - rank];
    return copyBytes(recv + theirs.offset * element, impl.inlineFromPrev(), theirs.count * element);
  }
  const size_t total = detail::packedStart(blocks, group.size);
  std::byte* all = impl.chainScratch();  // kChainPayloadBytes
  std::memset(all, 0, total * element);
  if (gather) {
    copyBytes(all + detail::packedStart(blocks, rank) * element, send, own.count * element);
  } else if (rank == root) {
    for (int q = 0; q < group.size; ++q) {
      copyBytes(all + detail::packedStart(blocks, q) * element, send + blocks[q].offset * element,
                blocks[q].count * element);
    }
  }
  detail::headerDoublingUnion(impl, group, all, total * element, wait);
  if (!gather) {
    return copyBytes(recv, all + detail::packedStart(blocks, rank) * element, own.count * element);
  }
  if (rank != root) return;
  for (int q = 0; q < group.size; ++q) {
    if (q == rank) {
      copyBytes(recv + own.offset * element, send, own.count * element);
    } else {
      copyBytes(recv + blocks[q].offset * element, all + detail::packedStart(blocks, q) * element,
                blocks[q].count * element);
    }
  }
}

// Gather-v when `kind` is kGatherv (the root's recv holds the blocks), else scatter-v (the
// root's send does); `counts` are recvCounts or sendCounts.
Prepared prepareRootedV(detail::CommunicatorImpl& impl, OpKind kind, const void* send, void* recv,
                        std::span<const size_t> counts, std::span<const size_t> displs,
                        DataType type, int root) {
  const bool gather = kind == OpKind::kGatherv;
  BlockLayout layout = gather
                           ? checkRootedV("gatherv", impl, recv, "recv", send, "send", counts,
                                          "recvCounts", displs, type, root, /*allMayOverlap=*/false)
                           : checkRootedV("scatterv", impl, send, "send", recv, "recv", counts,
                                          "sendCounts", displs, type, root, /*allMayOverlap=*/true);
  Prepared prepared{.header = {.kind = kind,
                               .type = type,
                               .root = root,
                               .count = layout.total,
                               .countsHash = detail::hashCounts(counts),
                               .ranks = impl.size()},
                    .body = {}};
  OpHeader& header = prepared.header;
  // Priced over the blocks in relative order (from the root's), as select.h wants them.
  const auto algorithm = impl.chooseForBlocks(
      header, gather ? collectives::Collective::kGatherv : collectives::Collective::kScatterv,
      layout.blocks, elementSize(type), root);
  const int rank = impl.rank();
  const int size = impl.size();
  const size_t element = elementSize(type);
  const bool inHeaders = algorithm == collectives::Algorithm::kHeaderInline;
  const bool chain = inHeaders && !header.selfChecked && size > 2;
  // Past what a header holds the chain's data follows each header (the same on every rank: the
  // counts are; the body decides the same way from the blocks).
  const bool payload = chain && layout.total * element > OpHeader::kInlineBytes;
  // A scatter-v root whose blocks are not packed in rank order sends a packed copy along a chain.
  std::unique_ptr<std::byte[]> packed;
  if (chain && !gather && rank == root && !packedInOrder(layout.blocks)) {
    packed = std::make_unique_for_overwrite<std::byte[]>(layout.total * element);
    for (int q = 0; q < size; ++q) {
      copyBytes(packed.get() + detail::packedStart(layout.blocks, q) * element,
                static_cast<const std::byte*>(send) + layout.blocks[q].offset * element,
                layout.blocks[q].count * element);
    }
  }
  if (payload) {
    // The header carries no data; a relay's goes on as soon as it has checked the previous one.
    impl.inlineBlocks(
        header, nullptr, 0, 0,
        detail::chainRole(rank, size, gather ? collectives::wrap(root + 1, size) : root));
  } else if (inHeaders && size == 2) {
    // Two ranks: the non-root's block rides in the header of the rank that sends it, which
    // returns at once; the other rank takes it from there (as gather and scatter do). Past what
    // a header holds it follows the header, which carries nothing.
    const size_t theirs = layout.blocks[1 - root].count * element;  // the non-root's block
    const bool sends = (rank == root) != gather;
    const PairRole role = sends ? PairRole::kSendsOnly : PairRole::kReceivesOnly;
    if (theirs > OpHeader::kInlineBytes) {
      impl.inlineBlocks(header, nullptr, 0, 0, role);
      impl.sendFirstOnTwoRanks(header, sends, theirs);
    } else {
      const auto* out = static_cast<const std::byte*>(send);
      if (!gather && rank == root) out += layout.blocks[1 - root].offset * element;
      impl.inlineBlocks(header, sends ? out : nullptr, sends ? theirs : 0, sends ? 0 : theirs,
                        role);
    }
  } else if (inHeaders && !header.selfChecked && gather) {
    // A chain from the rank after the root: place p's header carries the blocks of places 1..p
    // (a relay's in the scratch it fills in its body), the root's none.
    const int place = collectives::wrap(rank - root, size);
    const PairRole role = detail::chainRole(rank, size, collectives::wrap(root + 1, size));
    const size_t upTo = chainBytes(layout.blocks, root, place == 0 ? size - 1 : place, element);
    const void* out = role == PairRole::kRelays ? impl.inlineToNext() : send;
    if (place == 0) {
      impl.inlineBlocks(header, nullptr, 0, upTo, role);
    } else {
      const size_t in = place == 1 ? upTo : chainBytes(layout.blocks, root, place - 1, element);
      impl.inlineBlocks(header, out, upTo, in, role);
    }
  } else if (inHeaders && !header.selfChecked) {
    // A chain from the root: every block, packed, from rank to rank around the ring; each takes
    // its own and passes them all on.
    const size_t total = layout.total * element;
    const PairRole role = detail::chainRole(rank, size, root);
    const std::byte* out = impl.inlineFromPrev();
    if (rank == root) out = packed ? packed.get() : static_cast<const std::byte*>(send);
    impl.inlineBlocks(header, out, total, total, role);
  } else if (size == 2) {
    const bool sends = (rank == root) != gather;
    impl.sendFirstOnTwoRanks(header, sends && algorithm == collectives::Algorithm::kTree,
                             layout.blocks[1 - root].count * element);
  }
  // (Captures ordered widest first: 64 bytes, which OpBody holds in place.)
  auto body = [&impl, send = static_cast<const std::byte*>(send),
               recv = static_cast<std::byte*>(recv), blocks = std::move(layout.blocks),
               packed = std::move(packed), root, type, algorithm, gather,
               chain](const collectives::Group& group, const transport::WaitContext& wait) {
    const size_t element = elementSize(type);
    if (group.size == 1) {
      const size_t at = blocks[0].offset * element;
      const size_t bytes = blocks[0].count * element;
      return gather ? copyBytes(recv + at, send, bytes) : copyBytes(recv, send + at, bytes);
    }
    if (chain && detail::packedStart(blocks, group.size) * element > OpHeader::kInlineBytes) {
      const std::byte* all = packed ? packed.get() : send;
      return rootedVChainAfterHeaders(impl, group, gather, send, all, recv, blocks, element, root,
                                      wait);
    }
    if (chain) return rootedVChain(impl, group, gather, send, recv, blocks, element, root);
    if (algorithm == collectives::Algorithm::kHeaderInline) {
      return rootedVInHeaders(impl, group, gather, send, recv, blocks, element, root, wait);
    }
    const collectives::RootedSchedule schedule = detail::rootedSchedule(algorithm);
    const transport::WaitContext linked = impl.linkedFor(schedule, wait);
    if (gather) {
      return collectives::gatherv(
          group,
          {.send = send, .recv = recv, .blocks = blocks, .elementBytes = element, .root = root},
          schedule, impl.sliceBytes({}), linked, impl.headerCheck(wait));
    }
    collectives::scatterv(
        group,
        {.send = send, .recv = recv, .blocks = blocks, .elementBytes = element, .root = root},
        schedule, impl.sliceBytes({}), linked, impl.headerCheck(wait));
  };
  static_assert(sizeof(body) <= detail::OpBody::kInlineBytes, "the body would go to the heap");
  prepared.body = std::move(body);
  return prepared;
}

}  // namespace

void Communicator::gatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
                           std::span<const size_t> displs, DataType type, int root) {
  auto p = prepareRootedV(*impl_, OpKind::kGatherv, send, recv, recvCounts, displs, type, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::gathervAsync(const void* send, void* recv, std::span<const size_t> recvCounts,
                                std::span<const size_t> displs, DataType type, int root) {
  auto p = prepareRootedV(*impl_, OpKind::kGatherv, send, recv, recvCounts, displs, type, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

void Communicator::scatterv(const void* send, std::span<const size_t> sendCounts,
                            std::span<const size_t> displs, void* recv, DataType type, int root) {
  auto p = prepareRootedV(*impl_, OpKind::kScatterv, send, recv, sendCounts, displs, type, root);
  impl_->runBlocking(p.header, std::move(p.body));
}

Work Communicator::scattervAsync(const void* send, std::span<const size_t> sendCounts,
                                 std::span<const size_t> displs, void* recv, DataType type,
                                 int root) {
  auto p = prepareRootedV(*impl_, OpKind::kScatterv, send, recv, sendCounts, displs, type, root);
  return impl_->runAsync(p.header, std::move(p.body));
}

}  // namespace ringlet
