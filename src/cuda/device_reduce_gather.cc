// DeviceCommunicator::reduce, allgather, reduceScatter, gather, scatter and allToAll on device
// memory.
//
// CUDA IPC: the ring schedules of collectives/ring_schedule.h run by the slot ring (chain
// reduce, ring all-gather, ring reduce-scatter) and its chains for gather and scatter and its
// all-to-all by distance (collectives/slot_ring.h), enqueued on the caller's stream.
//
// Staged: the pipeline of device_state.h, calling the host communicator's collective on each
// pinned chunk. Reduce chunks the buffer like all-reduce. All-gather and reduce-scatter move
// per-rank blocks, so a chunk is the same columns of every block: with blocks of 10 elements,
// 3 ranks and chunks of 4 elements per block, chunk 1 is elements 4..7 of each block:
//
//   device buffer (3 blocks)       pinned slot of chunk 1 (3 blocks of 4)
//   [0 1 2 3|4 5 6 7|8 9]  x3  ->  [4 5 6 7][4 5 6 7][4 5 6 7]
//
// One strided copy (cudaMemcpy2DAsync) moves a chunk between the two layouts; the host call runs
// on the slot in place (rank r's block of the slot is its send or recv; all-to-all writes a
// second area of as many blocks). The chunk count depends only on the block size, type, world
// size and chunkBytes, so every rank agrees on it. On the IPC path all-to-all runs along the
// ring too (collectives/slot_ring.h: its blocks travel d hops to the rank d after).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_util.h"
#include "kernels/reduce.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/cuda/device_state.h"

namespace ringlet::cuda {

using kernels::cuda::checkCuda;
using kernels::cuda::ScopedDevice;

void DeviceCommunicator::reduce(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, int root, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const size_t bytes = detail::checkedBytes("cuda reduce", rank, count, type);
  checkOp("reduce", rank, type, op);
  checkRoot("reduce", rank, root, host.size());
  const bool isRoot = rank == root;
  if (count > 0) {
    checkDeviceArgument("reduce", rank, send, st.device, "send");
    if (isRoot) {
      checkDeviceArgument("reduce", rank, recv, st.device, "recv");
      detail::checkBuffers("cuda reduce", rank, send, recv, count, type);
    }
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    // Every op of one value is the value.
    copyOnDevice(recv, send, bytes, stream, "cudaMemcpyAsync (one-rank reduce)");
    return;
  }
  choosePath();
  if (st.useIpc(bytes)) {
    const collectives::ReduceArgs args{.send = static_cast<const std::byte*>(send),
                                       .recv = static_cast<std::byte*>(recv),
                                       .count = count,
                                       .type = type,
                                       .op = op,
                                       .root = root};
    st.runIpc({.kind = detail::OpKind::kReduce,
               .type = type,
               .op = op,
               .root = root,
               .count = count,
               .algorithm = kIpcChain},
              stream, collectives::slotRingReduce, args);
    return;
  }
  st.run("reduce", static_cast<const std::byte*>(send),
         isRoot ? static_cast<std::byte*>(recv) : nullptr, count, type, stream,
         [&](std::byte* slot, size_t n) { host.reduce(slot, slot, n, type, op, root); });
}

void DeviceCommunicator::allgather(const void* send, void* recv, size_t sendCount, DataType type,
                                   void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const int size = host.size();
  const size_t blockBytes = detail::checkedBytes("cuda allgather", rank, sendCount, type);
  const size_t totalBytes = allBlocksBytes("allgather", rank, size, blockBytes);
  if (blockBytes > 0) {
    checkDeviceArgument("allgather", rank, send, st.device, "send");
    checkDeviceArgument("allgather", rank, recv, st.device, "recv");
    detail::checkRegions("cuda allgather", rank, "send", send, blockBytes, "recv", recv, totalBytes,
                         blockBytes * rank);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (size == 1) {
    copyOnDevice(recv, send, blockBytes, stream, "cudaMemcpyAsync (one-rank all-gather)");
    return;
  }
  choosePath();
  if (st.useIpc(blockBytes * static_cast<size_t>(size))) {
    const collectives::AllgatherArgs args{.send = static_cast<const std::byte*>(send),
                                          .recv = static_cast<std::byte*>(recv),
                                          .sendCount = sendCount,
                                          .type = type};
    st.runRoute({.kind = detail::OpKind::kAllgather,
                 .type = type,
                 .count = sendCount,
                 .algorithm = kIpcRing},
                stream, args, collectives::slotRingAllgather, collectives::slotMeshAllgather,
                kIpcPairwise, /*wholeBuffer=*/true);
    return;
  }
  // This rank's columns of each chunk go into its block of the slot, the host all-gather fills
  // the others in place, and one strided copy puts every block's columns back.
  st.runBlocks("allgather", stream, sendCount, type,
               {.in = static_cast<const std::byte*>(send),
                .inBlocks = Blocks::kOwn,
                .out = static_cast<std::byte*>(recv),
                .outBlocks = Blocks::kAll},
               [&](std::byte* slot, std::byte*, size_t n) {
                 host.allgather(slot + rank * n * elementSize(type), slot, n, type);
               });
}

void DeviceCommunicator::reduceScatter(const void* send, void* recv, size_t recvCount,
                                       DataType type, ReduceOp op, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const int size = host.size();
  const size_t blockBytes = detail::checkedBytes("cuda reduce_scatter", rank, recvCount, type);
  checkOp("reduce_scatter", rank, type, op);
  const size_t totalBytes = allBlocksBytes("reduce_scatter", rank, size, blockBytes);
  if (blockBytes > 0) {
    checkDeviceArgument("reduce_scatter", rank, send, st.device, "send");
    checkDeviceArgument("reduce_scatter", rank, recv, st.device, "recv");
    detail::checkRegions("cuda reduce_scatter", rank, "recv", recv, blockBytes, "send", send,
                         totalBytes, blockBytes * rank);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (size == 1) {
    copyOnDevice(recv, send, blockBytes, stream, "cudaMemcpyAsync (one-rank reduce-scatter)");
    return;
  }
  choosePath();
  if (st.useIpc(blockBytes * static_cast<size_t>(size))) {
    const collectives::ReduceScatterArgs args{.send = static_cast<const std::byte*>(send),
                                              .recv = static_cast<std::byte*>(recv),
                                              .recvCount = recvCount,
                                              .type = type,
                                              .op = op};
    st.runRoute({.kind = detail::OpKind::kReduceScatter,
                 .type = type,
                 .op = op,
                 .count = recvCount,
                 .algorithm = kIpcRing},
                stream, args, collectives::slotRingReduceScatter,
                collectives::slotMeshReduceScatter, kIpcPairwise, /*wholeBuffer=*/true);
    return;
  }
  // One strided copy brings a chunk's columns of every block into the slot, the host
  // reduce-scatter leaves this rank's block reduced in place, and that block goes back.
  st.runBlocks("reduce_scatter", stream, recvCount, type,
               {.in = static_cast<const std::byte*>(send),
                .inBlocks = Blocks::kAll,
                .out = static_cast<std::byte*>(recv),
                .outBlocks = Blocks::kOwn},
               [&](std::byte* slot, std::byte*, size_t n) {
                 host.reduceScatter(slot, slot + rank * n * elementSize(type), n, type, op);
               });
}

namespace {

// Gather's and scatter's checks: `own` is this rank's block (send of a gather, recv of a scatter),
// `all` the root's size() blocks (own may sit in place at block root). Returns the block's bytes.
size_t checkRootedBlocks(const char* call, const Communicator& host, int device, int root,
                         size_t count, DataType type, const void* own, const char* ownName,
                         const void* all, const char* allName, void* stream) {
  const int rank = host.rank();
  const std::string name = fmt::format("cuda {}", call);
  const size_t blockBytes = detail::checkedBytes(name.c_str(), rank, count, type);
  const size_t totalBytes = allBlocksBytes(call, rank, host.size(), blockBytes);
  checkRoot(call, rank, root, host.size());
  if (blockBytes > 0) {
    checkDeviceArgument(call, rank, own, device, ownName);
    if (rank == root) {
      checkDeviceArgument(call, rank, all, device, allName);
      detail::checkRegions(name.c_str(), rank, ownName, own, blockBytes, allName, all, totalBytes,
                           blockBytes * root);
    }
  }
  checkStream(stream, device);
  return blockBytes;
}

}  // namespace

void DeviceCommunicator::gather(const void* send, void* recv, size_t count, DataType type, int root,
                                void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const size_t blockBytes = checkRootedBlocks("gather", host, st.device, root, count, type, send,
                                              "send", recv, "recv", stream);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    copyOnDevice(recv, send, blockBytes, stream, "cudaMemcpyAsync (one-rank gather)");
    return;
  }
  choosePath();
  if (st.useIpc(blockBytes * static_cast<size_t>(host.size()))) {
    const collectives::GatherArgs args{.send = static_cast<const std::byte*>(send),
                                       .recv = static_cast<std::byte*>(recv),
                                       .blockBytes = blockBytes,
                                       .root = root};
    st.runRoute({.kind = detail::OpKind::kGather,
                 .type = type,
                 .root = root,
                 .count = count,
                 .algorithm = kIpcChain},
                stream, args, collectives::slotRingGather, collectives::slotMeshGather, kIpcLinear);
    return;
  }
  // This rank's columns go into its block of the slot; on the root the host gather fills the
  // others and every block goes back.
  st.runBlocks("gather", stream, count, type,
               {.in = static_cast<const std::byte*>(send),
                .inBlocks = Blocks::kOwn,
                .out = static_cast<std::byte*>(recv),
                .outBlocks = rank == root ? Blocks::kAll : Blocks::kNone},
               [&](std::byte* slot, std::byte*, size_t n) {
                 host.gather(slot + rank * n * elementSize(type), slot, n, type, root);
               });
}

void DeviceCommunicator::scatter(const void* send, void* recv, size_t count, DataType type,
                                 int root, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const size_t blockBytes = checkRootedBlocks("scatter", host, st.device, root, count, type, recv,
                                              "recv", send, "send", stream);
  ScopedDevice scope(st.device);
  if (host.size() == 1) {
    copyOnDevice(recv, send, blockBytes, stream, "cudaMemcpyAsync (one-rank scatter)");
    return;
  }
  choosePath();
  if (st.useIpc(blockBytes * static_cast<size_t>(host.size()))) {
    const collectives::ScatterArgs args{.send = static_cast<const std::byte*>(send),
                                        .recv = static_cast<std::byte*>(recv),
                                        .blockBytes = blockBytes,
                                        .root = root};
    st.runRoute({.kind = detail::OpKind::kScatter,
                 .type = type,
                 .root = root,
                 .count = count,
                 .algorithm = kIpcChain},
                stream, args, collectives::slotRingScatter, collectives::slotMeshScatter,
                kIpcLinear);
    return;
  }
  // On the root every block's columns go into the slot; the host scatter leaves each rank's in
  // its block of the slot, which goes back.
  st.runBlocks("scatter", stream, count, type,
               {.in = static_cast<const std::byte*>(send),
                .inBlocks = rank == root ? Blocks::kAll : Blocks::kNone,
                .out = static_cast<std::byte*>(recv),
                .outBlocks = Blocks::kOwn},
               [&](std::byte* slot, std::byte*, size_t n) {
                 host.scatter(slot, slot + rank * n * elementSize(type), n, type, root);
               });
}

void DeviceCommunicator::allToAll(const void* send, void* recv, size_t count, DataType type,
                                  void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const int size = host.size();
  const size_t blockBytes = detail::checkedBytes("cuda all_to_all", rank, count, type);
  const size_t totalBytes = allBlocksBytes("all_to_all", rank, size, blockBytes);
  if (blockBytes > 0) {
    checkDeviceArgument("all_to_all", rank, send, st.device, "send");
    checkDeviceArgument("all_to_all", rank, recv, st.device, "recv");
    checkNoPartialOverlap(send, recv, totalBytes);
  }
  checkStream(stream, st.device);
  ScopedDevice scope(st.device);
  if (size == 1) {
    copyOnDevice(recv, send, blockBytes, stream, "cudaMemcpyAsync (one-rank all-to-all)");
    return;
  }
  choosePath();
  if (st.useIpc(totalBytes)) {
    // In place a block may arrive before the one in its place has left: send from a copy, in
    // stream-ordered memory freed on the stream after the call's work.
    StreamScratch copy;
    const auto* from = static_cast<const std::byte*>(send);
    if (send == recv && totalBytes > 0) {
      copy.allocate(st.scratchPool(), totalBytes, stream, "in-place all-to-all");
      copyOnDevice(copy.data, send, totalBytes, stream, "cudaMemcpyAsync (in-place all-to-all)");
      from = copy.data;
    }
    const collectives::AllToAllArgs args{
        .send = from, .recv = static_cast<std::byte*>(recv), .blockBytes = blockBytes};
    st.runRoute(
        {.kind = detail::OpKind::kAllToAll, .type = type, .count = count, .algorithm = kIpcRing},
        stream, args, collectives::slotRingAllToAll, collectives::slotMeshAllToAll, kIpcPairwise);
    return;
  }
  // Every block's columns go into the slot, the host all-to-all writes the second area, and
  // every block of that goes back (so send == recv works: each chunk is read before written).
  st.runBlocks(
      "all_to_all", stream, count, type,
      {.in = static_cast<const std::byte*>(send),
       .inBlocks = Blocks::kAll,
       .out = static_cast<std::byte*>(recv),
       .outBlocks = Blocks::kAll,
       .separateOut = true},
      [&](std::byte* slot, std::byte* out, size_t n) { host.allToAll(slot, out, n, type); });
}

}  // namespace ringlet::cuda
