// DeviceCommunicator's v-forms on device memory: allgatherv, reduceScatterv, gatherv, scatterv
// and allToAllv, all staged (State::runVBlocks in device_state.cc). Chunk i takes elements
// [i*c, (i+1)*c) of every block, so with blocks of 5, 0 and 9 elements and c = 4 the calls are
//
//   device blocks                  chunk 0 in the slot    chunk 1      chunk 2
//   rank 0: a0..a4                 [a0..a3][][b0..b3]     [a4][][b4..b7]  [][][b8]
//   rank 2: b0..b8
//
// one host v-form call per chunk on the packed pieces (counts 4,0,4 / 1,0,4 / 0,0,1). The chunk
// count comes from the largest block, which every rank must agree on: before the first chunk the
// ranks compare their counts in one small host all-reduce (all-to-all-v: an all-to-all of each
// pair's counts first), so a disagreement is a MismatchError on every rank before data moves,
// not a different number of chunk calls.
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
// MismatchError on every rank, before any data moves.
void agreeOnCounts(Communicator& host, const char* call, const char* name,
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
  choosePath();  // the path of the calls that follow; these calls stay staged
  agreeOnCounts(host, "allgatherv", "recvCounts", recvCounts);
  // This rank's piece goes into its place in the slot, the host all-gather-v fills the others
  // in place, and every piece goes back to its block.
  const std::vector<size_t> at = offsets(layout);
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
  choosePath();  // the path of the calls that follow; these calls stay staged
  agreeOnCounts(host, "reduce_scatterv", "recvCounts", recvCounts);
  // Every block's piece goes into the slot, the host reduce-scatter-v leaves this rank's reduced
  // in place, and that piece goes back.
  const std::vector<size_t> at = offsets(layout);
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
  choosePath();  // the path of the calls that follow; these calls stay staged
  agreeOnCounts(host, "gatherv", "recvCounts", recvCounts);
  // This rank's piece goes into its place in the slot; on the root the host gather-v fills the
  // others and every piece goes back to its block.
  const std::vector<size_t> at = offsets(layout);
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
  choosePath();  // the path of the calls that follow; these calls stay staged
  agreeOnCounts(host, "scatterv", "sendCounts", sendCounts);
  // On the root every block's piece goes into the slot; the host scatter-v leaves each rank's
  // piece in its place in the slot, which goes back.
  const std::vector<size_t> at = offsets(layout);
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
  const detail::BlockLayout out =
      detail::checkLayout("cuda alltoallv", rank, size, "sendCounts", sendCounts, "sendDispls",
                          sendDispls, type, /*mayOverlap=*/true);
  const detail::BlockLayout in = detail::checkLayout("cuda alltoallv", rank, size, "recvCounts",
                                                     recvCounts, "recvDispls", recvDispls, type);
  if (sendCounts[rank] != recvCounts[rank]) {
    throw InvalidArgument(fmt::format(
        "cuda alltoallv on rank {}: sendCounts[{}] = {} but recvCounts[{}] = {}; what a rank "
        "sends itself is what it receives from itself",
        rank, rank, sendCounts[rank], rank, recvCounts[rank]));
  }
  const size_t eb = elementSize(type);
  if (out.total > 0) checkDeviceArgument("alltoallv", rank, send, st.device, "send");
  if (in.total > 0) checkDeviceArgument("alltoallv", rank, recv, st.device, "recv");
  const auto* a = static_cast<const std::byte*>(send);
  const auto* b = static_cast<const std::byte*>(recv);
  const size_t sendBytes = out.extent * eb;
  const size_t recvBytes = in.extent * eb;
  if (sendBytes > 0 && recvBytes > 0 && a < b + recvBytes && b < a + sendBytes) {
    // In place only with identical layouts: chunk i of each block is read before it is written.
    bool same = send == recv;
    for (int q = 0; same && q < size; ++q) {
      same = out.blocks[q].count == in.blocks[q].count &&
             (out.blocks[q].count == 0 || out.blocks[q].offset == in.blocks[q].offset);
    }
    if (!same) {
      throw InvalidArgument(fmt::format(
          "cuda alltoallv on rank {}: send ({}) and recv ({}) overlap; in place needs send == recv "
          "with equal counts and displacements",
          rank, send, recv));
    }
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (size == 1) {
    return copyOnDevice(static_cast<std::byte*>(recv) + in.blocks[0].offset * eb,
                        a + out.blocks[0].offset * eb, in.blocks[0].count * eb, stream,
                        "cudaMemcpyAsync (one-rank alltoallv)");
  }
  choosePath();  // the path of the calls that follow; this call stays staged
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
  // Every block's piece goes into the slot, the host all-to-all-v writes the second area, and
  // every piece of that goes back.
  const std::vector<size_t> sendAt = offsets(out);
  const std::vector<size_t> recvAt = offsets(in);
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
