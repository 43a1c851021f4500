// DeviceCommunicator's v-forms on device memory: allgatherv, reduceScatterv, gatherv, scatterv
// and allToAllv. First the ranks compare their counts in one small host all-reduce
// (all-to-all-v: an all-to-all of each pair's counts first), so a disagreement is a
// MismatchError on every rank before data moves. Then, on the CUDA IPC ring, the slot ring's
// v-form schedules run over blocks of their own size (collectives/slot_ring.h: the ring for
// all-gather-v and reduce-scatter-v, the chains for gather-v and scatter-v, by distance for
// all-to-all-v). Staged (State::runVBlocks in
// device_state.cc), chunk i takes elements [i*c, (i+1)*c) of every block, so with blocks of 5, 0
// and 9 elements and c = 4:
//
//   device blocks                  chunk 0 in the slot    chunk 1      chunk 2
//   rank 0: a0..a4                 [a0..a3][][b0..b3]     [a4][][b4..b7]  [][][b8]
//   rank 2: b0..b8
//
// one host v-form call per chunk on the packed pieces (counts 4,0,4 / 1,0,4 / 0,0,1). The chunk
// count comes from the largest block, which the agreement makes the same on every rank.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/core/op.h"
#include "src/cuda/device_state.h"

namespace ringlet::cuda {

using kernels::cuda::ScopedDevice;

namespace {

// The elements before each block and the block's size, as the v-form's layout gives them.
std::vector<size_t> offsets(const detail::BlockLayout& layout) {
  std::vector<size_t> at;
  at.reserve(layout.blocks.size());
  for (const auto& block : layout.blocks) at.push_back(block.offset);
  return at;
}

size_t largest(std::span<const size_t> counts) {
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

// Elements before rank q's piece when pieces are packed in rank order.
size_t packedAt(std::span<const size_t> pieces, int q) {
  size_t at = 0;
  for (int u = 0; u < q; ++u) at += pieces[u];
  return at;
}

// Every rank passed the same counts: one host all-reduce (max) of their fingerprint and of its
// complement; both are the largest only where every rank's fingerprint is the same. Otherwise
// MismatchError on every rank, before any data moves. Returns the fingerprint (the call header's
// countsHash on the ring).
uint64_t agreeOnCounts(Communicator& host, const char* call, const char* name,
                       std::span<const size_t> counts) {
  const auto mine = static_cast<int64_t>(detail::hashCounts(counts));
  int64_t both[2] = {mine, ~mine};
  host.allreduce(both, both, 2, DataType::kInt64, ReduceOp::kMax);
  if (both[0] != mine || both[1] != ~mine) {
    throw MismatchError(fmt::format(
        "cuda {} on rank {}: the ranks passed different {} (this rank's: [{}]); every rank must "
        "pass the same",
        call, host.rank(), name, fmt::join(counts, ", ")));
  }
  return static_cast<uint64_t>(mine);
}

}  // namespace

void DeviceCommunicator::allgatherv(const void* send, void* recv,
                                    std::span<const size_t> recvCounts,
                                    std::span<const size_t> displs, DataType type, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const detail::BlockLayout layout = detail::checkLayout(
      "cuda allgatherv", rank, host.size(), "recvCounts", recvCounts, "displs", displs, type);
  const size_t eb = elementSize(type);
  const collectives::Piece own = layout.blocks[rank];
  if (own.count > 0) checkDeviceArgument("allgatherv", rank, send, st.device, "send");
  if (layout.total > 0) {
    checkDeviceArgument("allgatherv", rank, recv, st.device, "recv");
    detail::checkRegions("cuda allgatherv", rank, "send", send, own.count * eb, "recv", recv,
                         layout.extent * eb, own.offset * eb);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  auto* to = static_cast<std::byte*>(recv);
  if (host.size() == 1) {
    return copyOnDevice(to + own.offset * eb, send, own.count * eb, stream,
                        "cudaMemcpyAsync (one-rank allgatherv)");
  }
  choosePath();
  const uint64_t countsHash = agreeOnCounts(host, "allgatherv", "recvCounts", recvCounts);
  if (st.useIpc(layout.total * eb)) {
    // The ring (collectives::slotRingAllgatherv) or direct (slotMeshAllgatherv) over blocks of
    // their own size.
    const collectives::AllgathervArgs args{.send = static_cast<const std::byte*>(send),
                                           .recv = to,
                                           .blocks = layout.blocks,
                                           .type = type};
    st.runRoute({.kind = detail::OpKind::kAllgatherv,
                 .type = type,
                 .count = layout.total,
                 .countsHash = countsHash,
                 .ranks = host.size(),
                 .algorithm = kIpcRing},
                stream, args, collectives::slotRingAllgatherv, collectives::slotMeshAllgatherv,
                kIpcPairwise, /*wholeBuffer=*/true);
    return;
  }
  const std::vector<size_t> at = offsets(layout);
  // Staged: this rank's piece goes into its place in the slot, the host all-gather-v fills the
  // others in place, and every piece goes back to its block.
  st.runVBlocks("allgatherv", stream, type, largest(recvCounts), recvCounts, {},
                {.in = static_cast<const std::byte*>(send),
                 .inDispls = {},
                 .inBlocks = Blocks::kOwn,
                 .out = to,
                 .outDispls = at,
                 .outBlocks = Blocks::kAll},
                [&](std::byte* slot, std::byte*, std::span<const size_t> n, auto) {
                  host.allgatherv(slot + packedAt(n, rank) * eb, slot, n, type);
                });
}

void DeviceCommunicator::reduceScatterv(const void* send, void* recv,
                                        std::span<const size_t> recvCounts, DataType type,
                                        ReduceOp op, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const detail::BlockLayout layout = detail::checkLayout(
      "cuda reduce_scatterv", rank, host.size(), "recvCounts", recvCounts, "displs", {}, type);
  checkOp("reduce_scatterv", rank, type, op);
  const size_t eb = elementSize(type);
  const collectives::Piece own = layout.blocks[rank];
  if (layout.total > 0) checkDeviceArgument("reduce_scatterv", rank, send, st.device, "send");
  if (own.count > 0) {
    checkDeviceArgument("reduce_scatterv", rank, recv, st.device, "recv");
    detail::checkRegions("cuda reduce_scatterv", rank, "recv", recv, own.count * eb, "send", send,
                         layout.total * eb, own.offset * eb);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    return copyOnDevice(recv, send, own.count * eb, stream,
                        "cudaMemcpyAsync (one-rank reduce_scatterv)");
  }
  choosePath();
  const uint64_t countsHash = agreeOnCounts(host, "reduce_scatterv", "recvCounts", recvCounts);
  if (st.useIpc(layout.total * eb)) {
    // The ring (collectives::slotRingReduceScatterv) or direct (slotMeshReduceScatterv) over
    // blocks of their own size.
    const collectives::ReduceScattervArgs args{.send = static_cast<const std::byte*>(send),
                                               .recv = static_cast<std::byte*>(recv),
                                               .blocks = layout.blocks,
                                               .type = type,
                                               .op = op};
    st.runRoute({.kind = detail::OpKind::kReduceScatterv,
                 .type = type,
                 .op = op,
                 .count = layout.total,
                 .countsHash = countsHash,
                 .ranks = host.size(),
                 .algorithm = kIpcRing},
                stream, args, collectives::slotRingReduceScatterv,
                collectives::slotMeshReduceScatterv, kIpcPairwise, /*wholeBuffer=*/true);
    return;
  }
  const std::vector<size_t> at = offsets(layout);
  // Staged: every block's piece goes into the slot, the host reduce-scatter-v leaves this rank's
  // reduced in place, and that piece goes back.
  st.runVBlocks("reduce_scatterv", stream, type, largest(recvCounts), recvCounts, {},
                {.in = static_cast<const std::byte*>(send),
                 .inDispls = at,
                 .inBlocks = Blocks::kAll,
                 .out = static_cast<std::byte*>(recv),
                 .outDispls = {},
                 .outBlocks = Blocks::kOwn},
                [&](std::byte* slot, std::byte*, std::span<const size_t> n, auto) {
                  host.reduceScatterv(slot, slot + packedAt(n, rank) * eb, n, type, op);
                });
}

void DeviceCommunicator::gatherv(const void* send, void* recv, std::span<const size_t> recvCounts,
                                 std::span<const size_t> displs, DataType type, int root,
                                 void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  checkRoot("gatherv", rank, root, host.size());
  const bool isRoot = rank == root;
  // displs are the root's alone (ignored elsewhere, as for the host call).
  const detail::BlockLayout layout =
      detail::checkLayout("cuda gatherv", rank, host.size(), "recvCounts", recvCounts, "displs",
                          isRoot ? displs : std::span<const size_t>{}, type);
  const size_t eb = elementSize(type);
  const collectives::Piece own = layout.blocks[rank];
  if (own.count > 0) checkDeviceArgument("gatherv", rank, send, st.device, "send");
  if (isRoot && layout.total > 0) {
    checkDeviceArgument("gatherv", rank, recv, st.device, "recv");
    detail::checkRegions("cuda gatherv", rank, "send", send, own.count * eb, "recv", recv,
                         layout.extent * eb, own.offset * eb);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    return copyOnDevice(static_cast<std::byte*>(recv) + own.offset * eb, send, own.count * eb,
                        stream, "cudaMemcpyAsync (one-rank gatherv)");
  }
  choosePath();
  const uint64_t countsHash = agreeOnCounts(host, "gatherv", "recvCounts", recvCounts);
  if (st.useIpc(layout.total * eb)) {
    // Direct (collectives::slotMeshGatherv) or the chain (slotRingGatherv) over blocks of their
    // own size.
    const collectives::GathervArgs args{.send = static_cast<const std::byte*>(send),
                                        .recv = isRoot ? static_cast<std::byte*>(recv) : nullptr,
                                        .blocks = layout.blocks,
                                        .elementBytes = eb,
                                        .root = root};
    st.runRoute({.kind = detail::OpKind::kGatherv,
                 .type = type,
                 .root = root,
                 .count = layout.total,
                 .countsHash = countsHash,
                 .ranks = host.size(),
                 .algorithm = kIpcChain},
                stream, args, collectives::slotRingGatherv, collectives::slotMeshGatherv,
                kIpcLinear);
    return;
  }
  const std::vector<size_t> at = offsets(layout);
  // Staged: this rank's piece goes into its place in the slot; on the root the host gather-v
  // fills the others and every piece goes back to its block.
  st.runVBlocks("gatherv", stream, type, largest(recvCounts), recvCounts, {},
                {.in = static_cast<const std::byte*>(send),
                 .inDispls = {},
                 .inBlocks = Blocks::kOwn,
                 .out = static_cast<std::byte*>(recv),
                 .outDispls = at,
                 .outBlocks = isRoot ? Blocks::kAll : Blocks::kNone},
                [&](std::byte* slot, std::byte*, std::span<const size_t> n, auto) {
                  host.gatherv(slot + packedAt(n, rank) * eb, slot, n, type, root);
                });
}

void DeviceCommunicator::scatterv(const void* send, std::span<const size_t> sendCounts,
                                  std::span<const size_t> displs, void* recv, DataType type,
                                  int root, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  checkRoot("scatterv", rank, root, host.size());
  const bool isRoot = rank == root;
  // The root's blocks may overlap (they are only read); displs are the root's alone.
  const detail::BlockLayout layout =
      detail::checkLayout("cuda scatterv", rank, host.size(), "sendCounts", sendCounts, "displs",
                          isRoot ? displs : std::span<const size_t>{}, type, /*mayOverlap=*/true);
  const size_t eb = elementSize(type);
  const collectives::Piece own = layout.blocks[rank];
  if (own.count > 0) checkDeviceArgument("scatterv", rank, recv, st.device, "recv");
  if (isRoot && layout.total > 0) {
    checkDeviceArgument("scatterv", rank, send, st.device, "send");
    detail::checkRegions("cuda scatterv", rank, "recv", recv, own.count * eb, "send", send,
                         layout.extent * eb, own.offset * eb);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    return copyOnDevice(recv, static_cast<const std::byte*>(send) + own.offset * eb, own.count * eb,
                        stream, "cudaMemcpyAsync (one-rank scatterv)");
  }
  choosePath();
  const uint64_t countsHash = agreeOnCounts(host, "scatterv", "sendCounts", sendCounts);
  if (st.useIpc(layout.total * eb)) {
    // Direct (collectives::slotMeshScatterv) or the chain (slotRingScatterv) over blocks of their
    // own size.
    const collectives::ScattervArgs args{
        .send = isRoot ? static_cast<const std::byte*>(send) : nullptr,
        .recv = static_cast<std::byte*>(recv),
        .blocks = layout.blocks,
        .elementBytes = eb,
        .root = root};
    st.runRoute({.kind = detail::OpKind::kScatterv,
                 .type = type,
                 .root = root,
                 .count = layout.total,
                 .countsHash = countsHash,
                 .ranks = host.size(),
                 .algorithm = kIpcChain},
                stream, args, collectives::slotRingScatterv, collectives::slotMeshScatterv,
                kIpcLinear);
    return;
  }
  const std::vector<size_t> at = offsets(layout);
  // Staged: on the root every block's piece goes into the slot; the host scatter-v leaves each
  // rank's piece in its place in the slot, which goes back.
  st.runVBlocks("scatterv", stream, type, largest(sendCounts), sendCounts, {},
                {.in = static_cast<const std::byte*>(send),
                 .inDispls = at,
                 .inBlocks = isRoot ? Blocks::kAll : Blocks::kNone,
                 .out = static_cast<std::byte*>(recv),
                 .outDispls = {},
                 .outBlocks = Blocks::kOwn},
                [&](std::byte* slot, std::byte*, std::span<const size_t> n, auto) {
                  host.scatterv(slot, n, slot + packedAt(n, rank) * eb, type, root);
                });
}

void DeviceCommunicator::allToAllv(const void* send, std::span<const size_t> sendCounts,
                                   std::span<const size_t> sendDispls, void* recv,
                                   std::span<const size_t> recvCounts,
                                   std::span<const size_t> recvDispls, DataType type,
                                   void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const int size = host.size();
  // In place (identical layouts): staged, chunk i of each block is read before it is written;
  // on the ring, blocks go out from a copy of send.
  const detail::AllToAllvLayouts layouts =
      detail::checkAllToAllvLayouts("cuda alltoallv", rank, size, send, sendCounts, sendDispls,
                                    recv, recvCounts, recvDispls, type);
  const detail::BlockLayout& out = layouts.out;
  const detail::BlockLayout& in = layouts.in;
  const size_t eb = elementSize(type);
  if (out.total > 0) checkDeviceArgument("alltoallv", rank, send, st.device, "send");
  if (in.total > 0) checkDeviceArgument("alltoallv", rank, recv, st.device, "recv");
  const auto* a = static_cast<const std::byte*>(send);
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (size == 1) {
    return copyOnDevice(static_cast<std::byte*>(recv) + in.blocks[0].offset * eb,
                        a + out.blocks[0].offset * eb, in.blocks[0].count * eb, stream,
                        "cudaMemcpyAsync (one-rank alltoallv)");
  }
  choosePath();
  // Each pair compares what one sends with what the other expects, both ways (an all-to-all of
  // two counts per pair); then one all-reduce tells every rank whether any pair disagreed and
  // the largest block anywhere (the chunk count).
  std::vector<int64_t> mine(2 * static_cast<size_t>(size)), theirs(mine.size());
  for (int q = 0; q < size; ++q) {
    mine[2 * q] = static_cast<int64_t>(sendCounts[q]);
    mine[2 * q + 1] = static_cast<int64_t>(recvCounts[q]);
  }
  host.allToAll(mine.data(), theirs.data(), 2, DataType::kInt64);
  std::string disagreement;
  for (int q = 0; q < size && disagreement.empty(); ++q) {
    const auto sends = static_cast<size_t>(theirs[2 * q]);
    const auto expects = static_cast<size_t>(theirs[2 * q + 1]);
    if (sends != recvCounts[q]) {
      disagreement = fmt::format("rank {} sends {} elements here but recvCounts[{}] = {}", q, sends,
                                 q, recvCounts[q]);
    } else if (expects != sendCounts[q]) {
      disagreement = fmt::format("rank {} expects {} elements from here but sendCounts[{}] = {}", q,
                                 expects, q, sendCounts[q]);
    }
  }
  int64_t agreed[2] = {disagreement.empty() ? 0 : 1,
                       static_cast<int64_t>(std::max(largest(sendCounts), largest(recvCounts)))};
  host.allreduce(agreed, agreed, 2, DataType::kInt64, ReduceOp::kMax);
  if (!disagreement.empty()) {
    throw MismatchError(fmt::format("cuda alltoallv on rank {}: {}", rank, disagreement));
  }
  if (agreed[0] != 0) {
    throw MismatchError(fmt::format(
        "cuda alltoallv on rank {}: other ranks disagree on what they send each other (this "
        "rank's counts agree with its peers')",
        rank));
  }
  // The path as for N blocks of the largest block anywhere (the same on every rank).
  const size_t largestBytes =
      detail::checkedBytes("cuda alltoallv", rank, static_cast<size_t>(agreed[1]), type);
  if (st.useIpc(allBlocksBytes("alltoallv", rank, size, largestBytes))) {
    // In place a block may arrive before the one in its place has left: send from a copy.
    StreamScratch copy;
    const std::byte* from = a;
    if (layouts.inPlace) {
      copy.allocate(st.scratchPool(), out.extent * eb, stream, "in-place alltoallv");
      copyOnDevice(copy.data, send, out.extent * eb, stream,
                   "cudaMemcpyAsync (in-place alltoallv)");
      from = copy.data;
    }
    const collectives::AllToAllvArgs args{.send = from,
                                          .recv = static_cast<std::byte*>(recv),
                                          .sendBlocks = out.blocks,
                                          .recvBlocks = in.blocks,
                                          .elementBytes = eb};
    if (st.useMesh()) {
      // Each pair's blocks go straight from sender to receiver: each rank needs only its own
      // counts (agreed pairwise above).
      st.runMesh({.kind = detail::OpKind::kAllToAllv,
                  .type = type,
                  .count = out.total,
                  .ranks = size,
                  .algorithm = kIpcPairwise},
                 stream, collectives::slotMeshAllToAllv, args);
      return;
    }
    // Along the ring by distance over blocks of their own size: every rank relays blocks of
    // other pairs, so it needs the whole matrix of counts (gathered; already agreed pairwise).
    std::vector<int64_t> row(sendCounts.begin(), sendCounts.end());
    std::vector<int64_t> all(static_cast<size_t>(size) * static_cast<size_t>(size));
    host.allgather(row.data(), all.data(), static_cast<size_t>(size), DataType::kInt64);
    const std::vector<size_t> matrix(all.begin(), all.end());
    st.runIpc({.kind = detail::OpKind::kAllToAllv,
               .type = type,
               .count = out.total,
               .ranks = size,
               .algorithm = kIpcRing},
              stream,
              [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                  collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                collectives::slotRingAllToAllv(group, memory, executor, args, matrix, wait);
              });
    return;
  }
  const std::vector<size_t> sendAt = offsets(out);
  const std::vector<size_t> recvAt = offsets(in);
  // Staged: every block's piece goes into the slot, the host all-to-all-v writes the second
  // area, and every piece of that goes back.
  st.runVBlocks(
      "alltoallv", stream, type, static_cast<size_t>(agreed[1]), sendCounts, recvCounts,
      {.in = a,
       .inDispls = sendAt,
       .inBlocks = Blocks::kAll,
       .out = static_cast<std::byte*>(recv),
       .outDispls = recvAt,
       .outBlocks = Blocks::kAll},
      [&](std::byte* slot, std::byte* to, std::span<const size_t> sends,
          std::span<const size_t> receives) { host.allToAllv(slot, sends, to, receives, type); });
}

}  // namespace ringlet::cuda
