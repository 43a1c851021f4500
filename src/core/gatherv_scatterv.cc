// Communicator::gatherv and scatterv: argument checks, the call header (a fingerprint of the
// counts every rank must share, the root's included), and the algorithm
// (collectives/tree_gather_scatter.cc: the binomial tree, or the linear schedule for large blocks).
#include <fmt/format.h>

#include <cstring>

#include "collectives/collectives.h"
#include "collectives/select.h"
#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/core/communicator_impl.h"

namespace ringlet {

using collectives::Piece;
using detail::BlockLayout;
using detail::copyBytes;
using detail::OpHeader;
using detail::OpKind;
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
  OpHeader header{.kind = kind,
                  .type = type,
                  .root = root,
                  .count = layout.total,
                  .countsHash = detail::hashCounts(counts),
                  .ranks = impl.size()};
  // Priced over the blocks in relative order (from the root's), as select.h wants them.
  const auto algorithm = impl.chooseForBlocks(
      header, gather ? collectives::Collective::kGatherv : collectives::Collective::kScatterv,
      layout.blocks, elementSize(type), root);
  auto body = [&impl, gather, send = static_cast<const std::byte*>(send),
               recv = static_cast<std::byte*>(recv), blocks = std::move(layout.blocks), type, root,
               algorithm](const collectives::Group& group, const transport::WaitContext& wait) {
    const size_t element = elementSize(type);
    if (group.size == 1) {
      const size_t at = blocks[0].offset * element;
      const size_t bytes = blocks[0].count * element;
      return gather ? copyBytes(recv + at, send, bytes) : copyBytes(recv, send + at, bytes);
    }
    const collectives::RootedSchedule schedule = detail::rootedSchedule(algorithm);
    const transport::WaitContext linked = impl.linkedFor(schedule, wait);
    if (gather) {
      return collectives::gatherv(
          group,
          {.send = send, .recv = recv, .blocks = blocks, .elementBytes = element, .root = root},
          schedule, impl.sliceBytes({}), linked);
    }
    collectives::scatterv(
        group,
        {.send = send, .recv = recv, .blocks = blocks, .elementBytes = element, .root = root},
        schedule, impl.sliceBytes({}), linked);
  };
  return {header, body};
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
