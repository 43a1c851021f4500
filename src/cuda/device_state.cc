// DeviceCommunicator's shared machinery (device_state.h): argument checks, the staged pipeline,
// and the call that runs a slot-ring schedule on the CUDA IPC ring.
#include "src/cuda/device_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/reduce.h"
#include "ringlet/error.h"
#include "src/log.h"

namespace ringlet::cuda {

using kernels::cuda::checkCuda;
using kernels::cuda::ScopedDevice;
using Clock = std::chrono::steady_clock;

void checkStream(void* stream, int device) {
  // The default stream handles name "the stream of the current device": always valid here.
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t state = cudaStreamQuery(s);
  if (state != cudaSuccess && state != cudaErrorNotReady) {
    cudaGetLastError();
    throw CudaError(fmt::format("stream {} is not a valid CUDA stream: {}", stream,
                                kernels::cuda::describeCudaError("cudaStreamQuery", state)));
  }
  int streamDevice = -1;
  const cudaError_t error = cudaStreamGetDevice(s, &streamDevice);
  if (error != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(fmt::format("stream {} is not a valid CUDA stream: {}", stream,
                                kernels::cuda::describeCudaError("cudaStreamGetDevice", error)));
  }
  if (streamDevice != device) {
    throw InvalidArgument(
        fmt::format("stream {} belongs to device {}, but this call runs on device {}", stream,
                    streamDevice, device));
  }
}

void checkNoPartialOverlap(const void* send, const void* recv, size_t bytes) {
  if (send == recv || bytes == 0) return;
  const auto* a = static_cast<const std::byte*>(send);
  const auto* b = static_cast<const std::byte*>(recv);
  if (a < b + bytes && b < a + bytes) {
    throw InvalidArgument(fmt::format(
        "send ({}) and recv ({}) overlap without being equal ({} bytes each)", send, recv, bytes));
  }
}

void checkDeviceArgument(std::string_view call, int rank, const void* pointer, int device,
                         std::string_view what) {
  try {
    checkDevicePointer(pointer, device, what);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("cuda {} on rank {}: {}", call, rank, e.what()));
  }
}

void checkOp(const char* call, int rank, DataType type, ReduceOp op) {
  try {
    kernels::checkReducible(type, op);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("cuda {} on rank {}: {}", call, rank, e.what()));
  }
}

void checkRoot(const char* call, int rank, int root, int size) {
  if (root < 0 || root >= size) {
    throw InvalidArgument(fmt::format(
        "cuda {} on rank {}: root {} is out of range for world size {}", call, rank, root, size));
  }
}

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

void copy2DAsync(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width,
                 size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
  if (width == 0 || height == 0) return;
  const bool toHost = kind == cudaMemcpyDeviceToHost;
  if (height == 1 && width >= 2 && width <= kSmallCopyBytes) {
    // A small copy in one piece waits for its process's time slice on a GPU that other processes
    // use too (~280 us per copy with two processes on an H200); in two rows it goes to a copy
    // engine (11 us). Measured with cuda-copy-probe (bench/cuda_copy_probe.cu). An odd byte count
    // copies its last two bytes in a second two-row copy (the byte between is copied twice).
    auto* d = static_cast<std::byte*>(dst);
    const auto* from = static_cast<const std::byte*>(src);
    const size_t half = width / 2;
    copy2DAsync(d, half, from, half, half, 2, kind, stream);
    if (width % 2) copy2DAsync(d + width - 2, 1, from + width - 2, 1, 1, 2, kind, stream);
    return;
  }
  if (height == 1) {
    checkCuda(cudaMemcpyAsync(dst, src, width, kind, stream),
              toHost ? "cudaMemcpyAsync (device to host)" : "cudaMemcpyAsync (host to device)");
    return;
  }
  // cudaMemcpy2D refuses pitches past the device's limit (2^31 - 1 bytes): then row by row.
  constexpr size_t kMaxPitch = (size_t{1} << 31) - 1;
  if (dstPitch > kMaxPitch || srcPitch > kMaxPitch) {
    for (size_t row = 0; row < height; ++row) {
      copy2DAsync(static_cast<std::byte*>(dst) + row * dstPitch, 0,
                  static_cast<const std::byte*>(src) + row * srcPitch, 0, width, 1, kind, stream);
    }
    return;
  }
  checkCuda(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, height, kind, stream),
            toHost ? "cudaMemcpy2DAsync (device to host)" : "cudaMemcpy2DAsync (host to device)");
}

DeviceCommunicator::State::~State() {
  try {
    ScopedDevice scope(device);
    for (int k = 0; k < 2; ++k) {
      if (outPending[k]) cudaEventSynchronize(copiedOut[k]);
      if (copiedIn[k]) cudaEventSynchronize(copiedIn[k]);
    }
    for (cudaEvent_t e : copiedIn)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : copiedOut)
      if (e) cudaEventDestroy(e);
    // Freed once the allocations still queued for freeing on streams are freed.
    if (pool) cudaMemPoolDestroy(pool);
  } catch (...) {
    // Destructors never throw; a broken context frees everything at process exit.
  }
}

void StreamScratch::allocate(cudaMemPool_t pool, size_t bytes, void* on, const char* what) {
  stream = static_cast<cudaStream_t>(on);
  void* p = nullptr;
  checkCuda(cudaMallocFromPoolAsync(&p, bytes, pool, stream),
            fmt::format("cudaMallocFromPoolAsync ({} bytes for the {})", bytes, what));
  data = static_cast<std::byte*>(p);
}

cudaMemPool_t DeviceCommunicator::State::scratchPool() {
  if (pool != nullptr) return pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  checkCuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate (scratch memory)");
  uint64_t keep = UINT64_MAX;
  checkCuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "cudaMemPoolSetAttribute (release threshold)");
  return pool;
}

void DeviceCommunicator::State::ensurePinned(size_t bytes) {
  if (slotBytes >= bytes) return;
  if (pinned.data) {
    for (int k = 0; k < 2; ++k) reuse(k, "resize of the staging memory", 0, 0);
    checkCuda(cudaFreeHost(pinned.data), "cudaFreeHost");
    pinned.data = nullptr;
  }
  checkCuda(cudaHostAlloc(&pinned.data, 2 * bytes, cudaHostAllocDefault),
            fmt::format("cudaHostAlloc({} bytes of staging memory)", 2 * bytes));
  pinned.bytes = 2 * bytes;
  slotBytes = bytes;
}

std::string DeviceCommunicator::State::describeWait(std::string_view op, std::string_view what,
                                                    size_t chunk, size_t chunks) const {
  return fmt::format("cuda {} on rank {} (device {}) waiting for the {} of chunk {} of {}", op,
                     host->rank(), device, what, chunk, chunks);
}

void DeviceCommunicator::State::wait(cudaEvent_t event,
                                     const std::function<std::string()>& what) const {
  kernels::cuda::waitEvent(event, Clock::now() + options.timeout, options.timeout, what);
}

void DeviceCommunicator::State::reuse(int k, std::string_view op, size_t chunk, size_t chunks) {
  if (!outPending[k]) return;
  wait(copiedOut[k], [&] { return describeWait(op, "host-to-device copy", chunk, chunks); });
  outPending[k] = false;
}

void DeviceCommunicator::State::drain() noexcept {
  for (int k = 0; k < 2; ++k) {
    if (outPending[k]) cudaEventSynchronize(copiedOut[k]);
    outPending[k] = false;
    cudaEventSynchronize(copiedIn[k]);
  }
  cudaGetLastError();
}

size_t DeviceCommunicator::State::chunkElements(DataType type, size_t perChunk) const {
  return std::max<size_t>(1, options.chunkBytes / elementSize(type) / perChunk);
}

void DeviceCommunicator::State::pipeline(std::string_view op, void* stream,
                                         const StagedSteps& steps) {
  auto s = static_cast<cudaStream_t>(stream);
  const size_t chunks = steps.chunks;
  ensurePinned(std::max<size_t>(steps.slotBytes, 1));
  auto copyIn = [&](size_t i) {
    const int k = static_cast<int>(i % 2);
    reuse(k, op, i, chunks);
    steps.copyIn(i, slot(k), s);
    checkCuda(cudaEventRecord(copiedIn[k], s), "cudaEventRecord");
  };
  try {
    if (steps.copyIn) copyIn(0);
    for (size_t i = 0; i < chunks; ++i) {
      const int k = static_cast<int>(i % 2);
      if (steps.copyIn && i + 1 < chunks) copyIn(i + 1);
      if (steps.copyIn) {
        wait(copiedIn[k], [&] { return describeWait(op, "device-to-host copy", i, chunks); });
      } else {
        reuse(k, op, i, chunks);
      }
      steps.hostOp(i, slot(k));
      if (steps.copyOut) {
        steps.copyOut(i, slot(k), s);
        checkCuda(cudaEventRecord(copiedOut[k], s), "cudaEventRecord");
        outPending[k] = true;
      }
    }
    for (int k = 0; k < 2; ++k) reuse(k, op, chunks - 1, chunks);
  } catch (...) {
    drain();
    throw;
  }
}

void DeviceCommunicator::State::run(
    std::string_view op, const std::byte* in, std::byte* out, size_t count, DataType type,
    void* stream, const std::function<void(std::byte* slot, size_t count)>& hostOp) {
  const size_t eb = elementSize(type);
  const Chunks chunks{count, chunkElements(type, 1)};
  StagedSteps steps;
  steps.chunks = chunks.number();
  steps.slotBytes = chunks.per * eb;
  if (in) {
    steps.copyIn = [&](size_t i, std::byte* slot, cudaStream_t s) {
      copy2DAsync(slot, 0, in + chunks.offset(i) * eb, 0, chunks.size(i) * eb, 1,
                  cudaMemcpyDeviceToHost, s);
    };
  }
  steps.hostOp = [&](size_t i, std::byte* slot) { hostOp(slot, chunks.size(i)); };
  if (out) {
    steps.copyOut = [&](size_t i, std::byte* slot, cudaStream_t s) {
      copy2DAsync(out + chunks.offset(i) * eb, 0, slot, 0, chunks.size(i) * eb, 1,
                  cudaMemcpyHostToDevice, s);
    };
  }
  pipeline(op, stream, steps);
}

void DeviceCommunicator::State::runBlocks(
    std::string_view op, void* stream, size_t blockCount, DataType type,
    const BlockBuffers& buffers,
    const std::function<void(std::byte* slot, std::byte* out, size_t n)>& hostOp) {
  const size_t eb = elementSize(type);
  const auto ranks = static_cast<size_t>(host->size());
  const auto rank = static_cast<size_t>(host->rank());
  const size_t blockBytes = blockCount * eb;
  const Chunks chunks{blockCount, chunkElements(type, ranks)};
  const size_t area = ranks * chunks.per * eb;  // one area: every block's columns of a chunk
  StagedSteps steps;
  steps.chunks = chunks.number();
  steps.slotBytes = buffers.separateOut ? 2 * area : area;
  // Chunk i is n elements (`bytes`) from element offset(i) of each block; in the slot, block q
  // of an area starts at q * bytes.
  if (buffers.inBlocks != Blocks::kNone) {
    steps.copyIn = [&](size_t i, std::byte* slot, cudaStream_t s) {
      const size_t bytes = chunks.size(i) * eb;
      const std::byte* from = buffers.in + chunks.offset(i) * eb;
      if (buffers.inBlocks == Blocks::kOwn) {
        copy2DAsync(slot + rank * bytes, 0, from, 0, bytes, 1, cudaMemcpyDeviceToHost, s);
      } else {
        copy2DAsync(slot, bytes, from, blockBytes, bytes, ranks, cudaMemcpyDeviceToHost, s);
      }
    };
  }
  auto outArea = [&](std::byte* slot) { return buffers.separateOut ? slot + area : slot; };
  steps.hostOp = [&](size_t i, std::byte* slot) { hostOp(slot, outArea(slot), chunks.size(i)); };
  if (buffers.outBlocks != Blocks::kNone) {
    steps.copyOut = [&](size_t i, std::byte* slot, cudaStream_t s) {
      const size_t bytes = chunks.size(i) * eb;
      std::byte* to = buffers.out + chunks.offset(i) * eb;
      if (buffers.outBlocks == Blocks::kOwn) {
        copy2DAsync(to, 0, outArea(slot) + rank * bytes, 0, bytes, 1, cudaMemcpyHostToDevice, s);
      } else {
        copy2DAsync(to, blockBytes, outArea(slot), bytes, bytes, ranks, cudaMemcpyHostToDevice, s);
      }
    };
  }
  pipeline(op, stream, steps);
}

void DeviceCommunicator::State::runVBlocks(
    std::string_view op, void* stream, DataType type, size_t maxCount,
    std::span<const size_t> counts, std::span<const size_t> outCounts, const VBuffers& buffers,
    const std::function<void(std::byte*, std::byte*, std::span<const size_t>,
                             std::span<const size_t>)>& hostOp) {
  const size_t eb = elementSize(type);
  const auto ranks = static_cast<size_t>(host->size());
  const auto rank = static_cast<size_t>(host->rank());
  const bool separateOut = !outCounts.empty();
  if (!separateOut) outCounts = counts;
  const Chunks chunks{maxCount, chunkElements(type, ranks)};
  const size_t area = ranks * chunks.per * eb;  // every block's piece of one chunk, packed
  // Chunk i's piece of each block, in elements.
  auto pieces = [&](std::span<const size_t> of, size_t i) {
    std::vector<size_t> n(ranks);
    for (size_t q = 0; q < ranks; ++q) n[q] = Chunks{of[q], chunks.per}.size(i);
    return n;
  };
  // Enqueues the copies of chunk i's pieces between the device blocks and the packed slot area.
  auto copyPieces = [&](size_t i, std::span<const size_t> of, Blocks which,
                        std::span<const size_t> displs, std::byte* device, std::byte* packed,
                        cudaMemcpyKind kind, cudaStream_t s) {
    const std::vector<size_t> n = pieces(of, i);
    size_t at = 0;  // bytes into the area
    for (size_t q = 0; q < ranks; ++q) {
      if (which == Blocks::kAll || (which == Blocks::kOwn && q == rank)) {
        std::byte* block = device + ((which == Blocks::kAll ? displs[q] : 0) + i * chunks.per) * eb;
        if (kind == cudaMemcpyDeviceToHost) {
          copy2DAsync(packed + at, 0, block, 0, n[q] * eb, 1, kind, s);
        } else {
          copy2DAsync(block, 0, packed + at, 0, n[q] * eb, 1, kind, s);
        }
      }
      at += n[q] * eb;
    }
  };
  auto outArea = [&](std::byte* slot) { return separateOut ? slot + area : slot; };
  StagedSteps steps;
  steps.chunks = chunks.number();
  steps.slotBytes = separateOut ? 2 * area : area;
  if (buffers.inBlocks != Blocks::kNone) {
    steps.copyIn = [&](size_t i, std::byte* slot, cudaStream_t s) {
      copyPieces(i, counts, buffers.inBlocks, buffers.inDispls, const_cast<std::byte*>(buffers.in),
                 slot, cudaMemcpyDeviceToHost, s);
    };
  }
  steps.hostOp = [&](size_t i, std::byte* slot) {
    hostOp(slot, outArea(slot), pieces(counts, i), pieces(outCounts, i));
  };
  if (buffers.outBlocks != Blocks::kNone) {
    steps.copyOut = [&](size_t i, std::byte* slot, cudaStream_t s) {
      copyPieces(i, outCounts, buffers.outBlocks, buffers.outDispls, buffers.out, outArea(slot),
                 cudaMemcpyHostToDevice, s);
    };
  }
  pipeline(op, stream, steps);
}

void DeviceCommunicator::State::runIpc(detail::OpHeader header, void* stream, const IpcBody& body) {
  header.memory = 1;
  auto s = static_cast<cudaStream_t>(stream);
  detail::CommunicatorAccess::impl(*host).runBlocking(
      header, [&](const collectives::Group& group, const transport::WaitContext& wait) {
        body(group, ipc->memory(), ipc->executor(s), wait);
      });
}

bool DeviceCommunicator::State::useMesh(bool wholeBuffer) {
  if (alongTheRing()) return false;
  if (wholeBuffer && options.blockRoute == BlockRoute::kAuto && !oneGpu) return false;
  if (meshTried) return mesh != nullptr;
  meshTried = true;
  detail::CommunicatorImpl& impl = detail::CommunicatorAccess::impl(*host);
  detail::OpHeader header;
  header.kind = detail::OpKind::kDeviceSetup;
  header.memory = 1;
  header.algorithm = kIpcPairwise;
  impl.runBlocking(header, [&](const collectives::Group&, const transport::WaitContext& wait) {
    const std::string prefix = fmt::format("cuda-ipc/{}", impl.runningHeader().seq);
    const int n = host->size();
    std::string reason;
    if (!transport::cuda::probeMesh(impl.store(), prefix, host->rank(), n, device, wait.deadline,
                                    &reason)) {
      if (options.blockRoute == BlockRoute::kDirect) {
        throw InvalidArgument(
            fmt::format("rank {}: BlockRoute::kDirect is not possible: {}", host->rank(), reason));
      }
      log::info("rank {}: CUDA IPC blocks along the ring (no direct route): {}", host->rank(),
                reason);
      return;
    }
    const size_t meshSlotBytes =
        transport::directSlotBytes(ipc->memory().slotBytes, ipc->memory().slots, n);
    mesh = std::make_unique<transport::cuda::IpcMesh>(impl.store(), prefix, host->rank(), n, device,
                                                      2, meshSlotBytes, wait.deadline);
    mesh->setDrainTimeout(std::min(options.timeout, std::chrono::milliseconds(30000)));
  });
  return mesh != nullptr;
}

void DeviceCommunicator::State::runMesh(detail::OpHeader header, void* stream,
                                        const MeshBody& body) {
  header.memory = 1;
  auto s = static_cast<cudaStream_t>(stream);
  detail::CommunicatorImpl& impl = detail::CommunicatorAccess::impl(*host);
  impl.runBlocking(header,
                   [&](const collectives::Group& group, const transport::WaitContext& wait) {
                     // The notices go to every peer: the first such call links the ranks that no
                     // collective links yet (every rank runs this call; the group is in rank order,
                     // as the mesh's memory is).
                     body(group, mesh->memory(), mesh->executor(s), impl.linkedToAll(wait));
                   });
}

}  // namespace ringlet::cuda
