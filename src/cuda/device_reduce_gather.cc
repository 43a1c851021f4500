// DeviceCommunicator::reduce, allgather and reduceScatter on device memory.
//
// CUDA IPC: the ring schedules of collectives/ring_schedule.h run by the slot ring (chain
// reduce, ring all-gather, ring reduce-scatter), enqueued on the caller's stream.
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
// on the slot in place (rank r's block of the slot is its send or recv). The chunk count depends
// only on the block size, type, world size and chunkBytes, so every rank agrees on it.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_util.h"
#include "kernels/reduce.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/core/call_checks.h"
#include "src/cuda/device_state.h"

namespace ringlet::cuda {

using kernels::cuda::checkCuda;
using kernels::cuda::ScopedDevice;

namespace {

void checkOp(const char* call, int rank, DataType type, ReduceOp op) {
  try {
    kernels::checkReducible(type, op);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("cuda {} on rank {}: {}", call, rank, e.what()));
  }
}

// Bytes of all `size` blocks of `blockBytes`, checked for overflow.
size_t allBlocksBytes(const char* call, int rank, int size, size_t blockBytes) {
  if (blockBytes > 0 && static_cast<size_t>(size) > SIZE_MAX / blockBytes) {
    throw InvalidArgument(
        fmt::format("cuda {} on rank {}: {} x {} bytes overflows", call, rank, size, blockBytes));
  }
  return blockBytes * static_cast<size_t>(size);
}

void copyOnDevice(void* dst, const void* src, size_t bytes, void* stream, const char* what) {
  if (dst == src || bytes == 0) return;
  checkCuda(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      what);
}

// Chunk i of `count` elements cut into chunks of `per`.
struct Chunks {
  size_t count;
  size_t per;
  size_t number() const { return std::max<size_t>(1, (count + per - 1) / per); }
  size_t offset(size_t i) const { return i * per; }
  size_t size(size_t i) const { return std::min(per, count - std::min(count, offset(i))); }
};

}  // namespace

void DeviceCommunicator::reduce(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, int root, void* stream) {
  State& st = *state_;
  Communicator& host = *st.host;
  const int rank = host.rank();
  const size_t bytes = detail::checkedBytes("cuda reduce", rank, count, type);
  checkOp("reduce", rank, type, op);
  if (root < 0 || root >= host.size()) {
    throw InvalidArgument(
        fmt::format("cuda reduce on rank {}: root {} is out of range for world "
                    "size {}",
                    rank, root, host.size()));
  }
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
              stream,
              [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                  collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                collectives::slotRingReduce(group, memory, executor, args, wait);
              });
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
    st.runIpc({.kind = detail::OpKind::kAllgather,
               .type = type,
               .count = sendCount,
               .algorithm = kIpcRing},
              stream,
              [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                  collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                collectives::slotRingAllgather(group, memory, executor, args, wait);
              });
    return;
  }
  // Chunk i: this rank's columns go into its block of the slot, the host all-gather fills the
  // others in place, and one strided copy puts every block's columns back.
  const size_t eb = elementSize(type);
  const Chunks chunks{sendCount, st.chunkElements(type, static_cast<size_t>(size))};
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  StagedSteps steps;
  steps.chunks = chunks.number();
  steps.slotBytes = static_cast<size_t>(size) * chunks.per * eb;
  steps.copyIn = [&](size_t i, std::byte* slot, cudaStream_t s) {
    const size_t n = chunks.size(i);
    copy2DAsync(slot + rank * n * eb, 0, in + chunks.offset(i) * eb, 0, n * eb, 1,
                cudaMemcpyDeviceToHost, s);
  };
  steps.hostOp = [&](size_t i, std::byte* slot) {
    const size_t n = chunks.size(i);
    host.allgather(slot + rank * n * eb, slot, n, type);
  };
  steps.copyOut = [&](size_t i, std::byte* slot, cudaStream_t s) {
    const size_t n = chunks.size(i);
    copy2DAsync(out + chunks.offset(i) * eb, blockBytes, slot, n * eb, n * eb,
                static_cast<size_t>(size), cudaMemcpyHostToDevice, s);
  };
  st.pipeline("allgather", stream, steps);
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
    st.runIpc({.kind = detail::OpKind::kReduceScatter,
               .type = type,
               .op = op,
               .count = recvCount,
               .algorithm = kIpcRing},
              stream,
              [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                  collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                collectives::slotRingReduceScatter(group, memory, executor, args, wait);
              });
    return;
  }
  // Chunk i: one strided copy brings the same columns of every block into the slot, the host
  // reduce-scatter leaves this rank's block reduced in place, and that block goes back.
  const size_t eb = elementSize(type);
  const Chunks chunks{recvCount, st.chunkElements(type, static_cast<size_t>(size))};
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  StagedSteps steps;
  steps.chunks = chunks.number();
  steps.slotBytes = static_cast<size_t>(size) * chunks.per * eb;
  steps.copyIn = [&](size_t i, std::byte* slot, cudaStream_t s) {
    const size_t n = chunks.size(i);
    copy2DAsync(slot, n * eb, in + chunks.offset(i) * eb, blockBytes, n * eb,
                static_cast<size_t>(size), cudaMemcpyDeviceToHost, s);
  };
  steps.hostOp = [&](size_t i, std::byte* slot) {
    const size_t n = chunks.size(i);
    host.reduceScatter(slot, slot + rank * n * eb, n, type, op);
  };
  steps.copyOut = [&](size_t i, std::byte* slot, cudaStream_t s) {
    const size_t n = chunks.size(i);
    copy2DAsync(out + chunks.offset(i) * eb, 0, slot + rank * n * eb, 0, n * eb, 1,
                cudaMemcpyHostToDevice, s);
  };
  st.pipeline("reduce_scatter", stream, steps);
}

}  // namespace ringlet::cuda
