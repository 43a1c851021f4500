// DeviceCommunicator: collectives on CUDA device memory, staged through pinned host memory.
//
// The staged path runs the host communicator's collective (any transport: TCP, shared memory)
// on pinned copies of the device buffer, chunk by chunk, with two pinned slots so that copies
// and the host collective overlap. For 3 chunks (D2H = device to host copy into a slot, H2D =
// back; every copy is enqueued on the caller's stream, so the copies run in order):
//
//   host thread                                  GPU copy engine (caller's stream)
//   D2H chunk 0 -> slot 0
//   D2H chunk 1 -> slot 1; wait D2H 0            D2H 0, D2H 1
//   collective on slot 0; H2D slot 0 -> chunk 0  H2D 0
//   wait H2D 0; D2H chunk 2 -> slot 0; wait D2H 1  D2H 2
//   collective on slot 1; H2D slot 1 -> chunk 1  H2D 1
//   wait D2H 2; collective on slot 0; H2D slot 0 -> chunk 2
//   wait H2D 1, H2D 2; return
//
// A slot is reused only after the H2D copy out of it has finished (State::reuse). Every wait is
// on a CUDA event with a deadline. The chunk count depends only on count, type and chunkBytes,
// so every rank issues the same host collectives; a rank with other options gets the host
// communicator's MismatchError.
//
// The CUDA IPC path runs the slot ring (collectives/slot_ring.h) with the executor of
// transports/cuda/ipc_ring.h, as one call of the host communicator (its header check, sequence
// number, deadlines and abort), and only enqueues.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>

#include "collectives/slot_ring.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/reduce.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/core/communicator_access.h"
#include "src/log.h"
#include "transports/cuda/ipc_ring.h"

namespace ringlet::cuda {

using kernels::cuda::checkCuda;
using kernels::cuda::ScopedDevice;
using Clock = std::chrono::steady_clock;

namespace {

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

struct PinnedMemory {
  void* data = nullptr;
  size_t bytes = 0;
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() {
    if (data) cudaFreeHost(data);
  }
};

}  // namespace

struct DeviceCommunicator::State {
  Communicator* host = nullptr;
  int device = 0;
  DeviceOptions options;
  DevicePath chosen = DevicePath::kAuto;  // decided by the first collective
  std::unique_ptr<transport::cuda::IpcRing> ipc;
  PinnedMemory pinned;  // two slots of slotBytes
  size_t slotBytes = 0;
  std::array<cudaEvent_t, 2> copiedIn{};   // D2H into slot k finished
  std::array<cudaEvent_t, 2> copiedOut{};  // H2D out of slot k finished
  std::array<bool, 2> outPending{};        // an H2D out of slot k may still run

  ~State() {
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
    } catch (...) {
      // Destructors never throw; a broken context frees everything at process exit.
    }
  }

  std::byte* slot(int k) const { return static_cast<std::byte*>(pinned.data) + k * slotBytes; }

  void ensurePinned(size_t bytes) {
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

  std::string describeWait(std::string_view op, std::string_view what, size_t chunk,
                           size_t chunks) const {
    return fmt::format("cuda {} on rank {} (device {}) waiting for the {} of chunk {} of {}", op,
                       host->rank(), device, what, chunk, chunks);
  }

  void wait(cudaEvent_t event, const std::function<std::string()>& what) const {
    kernels::cuda::waitEvent(event, Clock::now() + options.timeout, options.timeout, what);
  }

  // Waits until no copy reads slot k any more.
  void reuse(int k, std::string_view op, size_t chunk, size_t chunks) {
    if (!outPending[k]) return;
    wait(copiedOut[k], [&] { return describeWait(op, "host-to-device copy", chunk, chunks); });
    outPending[k] = false;
  }

  // Best effort after a failure: the pinned slots must not be freed or refilled under a copy.
  void drain() noexcept {
    for (int k = 0; k < 2; ++k) {
      if (outPending[k]) cudaEventSynchronize(copiedOut[k]);
      outPending[k] = false;
      cudaEventSynchronize(copiedIn[k]);
    }
    cudaGetLastError();
  }

  using IpcBody = std::function<void(const collectives::Group&, const collectives::SlotRingMemory&,
                                     collectives::SlotExecutor&, const transport::WaitContext&)>;

  // Runs `body` on the IPC ring as one call of the host communicator (header check with the
  // memory kind, sequence number, deadlines, abort), enqueuing on `stream`.
  void runIpc(detail::OpHeader header, cudaStream_t stream, const IpcBody& body) {
    header.memory = 1;
    detail::CommunicatorAccess::impl(*host).runBlocking(
        header, [&](const collectives::Group& group, const transport::WaitContext& wait) {
          body(group, ipc->memory(), ipc->executor(stream), wait);
        });
  }

  // The staged pipeline. `in`: device memory copied into each slot before `hostOp` (null: none);
  // `out`: device memory the slot is copied back to afterwards (null: none).
  void run(std::string_view op, const std::byte* in, std::byte* out, size_t count, DataType type,
           void* stream, const std::function<void(std::byte* slot, size_t count)>& hostOp) {
    auto s = static_cast<cudaStream_t>(stream);
    const size_t elementBytes = elementSize(type);
    const size_t chunkElements = std::max<size_t>(1, options.chunkBytes / elementBytes);
    const size_t chunks = std::max<size_t>(1, (count + chunkElements - 1) / chunkElements);
    ensurePinned(chunkElements * elementBytes);
    auto offsetOf = [&](size_t i) { return i * chunkElements; };
    auto countOf = [&](size_t i) {
      return std::min(chunkElements, count - std::min(count, offsetOf(i)));
    };
    auto copyIn = [&](size_t i) {
      const int k = static_cast<int>(i % 2);
      reuse(k, op, i, chunks);
      if (countOf(i) > 0) {
        checkCuda(cudaMemcpyAsync(slot(k), in + offsetOf(i) * elementBytes,
                                  countOf(i) * elementBytes, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync (device to host)");
      }
      checkCuda(cudaEventRecord(copiedIn[k], s), "cudaEventRecord");
    };
    try {
      if (in) copyIn(0);
      for (size_t i = 0; i < chunks; ++i) {
        const int k = static_cast<int>(i % 2);
        if (in && i + 1 < chunks) copyIn(i + 1);
        if (in) {
          wait(copiedIn[k], [&] { return describeWait(op, "device-to-host copy", i, chunks); });
        } else {
          reuse(k, op, i, chunks);
        }
        hostOp(slot(k), countOf(i));
        if (out && countOf(i) > 0) {
          checkCuda(cudaMemcpyAsync(out + offsetOf(i) * elementBytes, slot(k),
                                    countOf(i) * elementBytes, cudaMemcpyHostToDevice, s),
                    "cudaMemcpyAsync (host to device)");
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
};

DeviceCommunicator::DeviceCommunicator(Communicator& host, int device, DeviceOptions options)
    : state_(std::make_unique<State>()) {
  std::string reason;
  const int devices = deviceCount(&reason);
  if (device < 0 || device >= devices) {
    throw InvalidArgument(
        fmt::format("device {} does not exist: this process sees {} CUDA device(s){}", device,
                    devices, reason.empty() ? "" : " (" + reason + ")"));
  }
  if (options.chunkBytes == 0) throw InvalidArgument("DeviceOptions::chunkBytes must not be 0");
  if (options.slots < 1 || options.slots > collectives::kMaxSlotRingSlots) {
    throw InvalidArgument(fmt::format("DeviceOptions::slots is {}, expected 1 to {}", options.slots,
                                      collectives::kMaxSlotRingSlots));
  }
  if (options.slotBytes < 64) {
    throw InvalidArgument(
        fmt::format("DeviceOptions::slotBytes is {}, expected at least 64", options.slotBytes));
  }
  if (options.timeout.count() <= 0) {
    throw InvalidArgument(
        fmt::format("DeviceOptions::timeout must be positive, got {} ms", options.timeout.count()));
  }
  if (options.path != DevicePath::kAuto && options.path != DevicePath::kIpc &&
      options.path != DevicePath::kStaged) {
    throw InvalidArgument(
        fmt::format("DeviceOptions::path {} is not a DevicePath", static_cast<int>(options.path)));
  }
  state_->host = &host;
  state_->device = device;
  state_->options = options;
  ScopedDevice scope(device);
  for (int k = 0; k < 2; ++k) {
    checkCuda(cudaEventCreateWithFlags(&state_->copiedIn[k], cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
    checkCuda(cudaEventCreateWithFlags(&state_->copiedOut[k], cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
  }
}

namespace {

// Why the CUDA IPC path cannot serve these ranks, from what every rank published at creation;
// empty when it can (every rank a separate process of one host).
std::string ipcUnavailable(const detail::CommunicatorImpl& impl) {
  const auto& infos = impl.peerInfos();
  for (const auto& info : infos) {
    if (info.hostId != infos[0].hostId) {
      return fmt::format("ranks 0 and {} are on different hosts ({} and {})", info.rank,
                         infos[0].hostname, info.hostname);
    }
    for (const auto& other : infos) {
      if (other.rank < info.rank && other.pid == info.pid) {
        return fmt::format(
            "ranks {} and {} are threads of one process (CUDA IPC connects processes)", other.rank,
            info.rank);
      }
    }
  }
  return {};
}

}  // namespace

void DeviceCommunicator::choosePath() {
  State& st = *state_;
  if (st.chosen != DevicePath::kAuto) return;
  Communicator& host = *st.host;
  if (st.options.path == DevicePath::kStaged || host.size() == 1) {
    st.chosen = DevicePath::kStaged;
    return;
  }
  detail::CommunicatorImpl& impl = detail::CommunicatorAccess::impl(host);
  const std::string unavailable = ipcUnavailable(impl);
  if (!unavailable.empty()) {
    if (st.options.path == DevicePath::kIpc) {
      throw InvalidArgument(
          fmt::format("rank {}: DevicePath::kIpc is not possible: {}", host.rank(), unavailable));
    }
    log::info("rank {}: device collectives staged through host memory: {}", host.rank(),
              unavailable);
    st.chosen = DevicePath::kStaged;
    return;
  }
  // One collective call in which every rank probes and, if all can, connects the ring.
  detail::OpHeader header;
  header.kind = detail::OpKind::kDeviceSetup;
  header.memory = 1;
  impl.runBlocking(header, [&](const collectives::Group&, const transport::WaitContext& wait) {
    const std::string prefix = fmt::format("cuda-ipc/{}", impl.runningHeader().seq);
    std::string reason;
    if (!transport::cuda::probeRing(impl.store(), prefix, host.rank(), host.size(), st.device,
                                    wait.deadline, &reason)) {
      if (st.options.path == DevicePath::kIpc) {
        throw InvalidArgument(
            fmt::format("rank {}: DevicePath::kIpc is not possible: {}", host.rank(), reason));
      }
      log::info("rank {}: device collectives staged through host memory: {}", host.rank(), reason);
      st.chosen = DevicePath::kStaged;
      return;
    }
    st.ipc = std::make_unique<transport::cuda::IpcRing>(impl.store(), prefix, host.rank(),
                                                        host.size(), st.device, st.options.slots,
                                                        st.options.slotBytes, wait.deadline);
    st.ipc->setDrainTimeout(std::min(st.options.timeout, std::chrono::milliseconds(30000)));
    st.chosen = DevicePath::kIpc;
  });
}

DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator::~DeviceCommunicator() = default;

int DeviceCommunicator::device() const { return state_->device; }
DevicePath DeviceCommunicator::path() const { return state_->chosen; }
Communicator& DeviceCommunicator::host() const { return *state_->host; }

void DeviceCommunicator::allreduce(const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op, void* stream) {
  kernels::checkReducible(type, op);
  const size_t bytes = count * elementSize(type);
  if (count > 0) {
    checkDevicePointer(send, state_->device, "send");
    checkDevicePointer(recv, state_->device, "recv");
    checkNoPartialOverlap(send, recv, bytes);
  }
  checkStream(stream, state_->device);
  ScopedDevice scope(state_->device);
  Communicator& host = *state_->host;
  auto s = static_cast<cudaStream_t>(stream);
  if (host.size() == 1) {
    // Sum, product, min, max and average of one value are the value.
    if (send != recv && bytes > 0) {
      checkCuda(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, s),
                "cudaMemcpyAsync (one-rank all-reduce)");
    }
    return;
  }
  choosePath();
  if (state_->chosen == DevicePath::kIpc) {
    const collectives::AllreduceArgs args{static_cast<const std::byte*>(send),
                                          static_cast<std::byte*>(recv), count, type, op};
    state_->runIpc({.kind = detail::OpKind::kAllreduce, .type = type, .op = op, .count = count}, s,
                   [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                       collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                     collectives::slotRingAllreduce(group, memory, executor, args, wait);
                   });
    return;
  }
  state_->run("allreduce", static_cast<const std::byte*>(send), static_cast<std::byte*>(recv),
              count, type, stream,
              [&](std::byte* slot, size_t n) { host.allreduce(slot, slot, n, type, op); });
}

void DeviceCommunicator::broadcast(void* buffer, size_t count, DataType type, int root,
                                   void* stream) {
  Communicator& host = *state_->host;
  if (root < 0 || root >= host.size()) {
    throw InvalidArgument(fmt::format("broadcast root {} is outside [0, {})", root, host.size()));
  }
  elementSize(type);  // throws InvalidArgument for an unknown type
  if (count > 0) checkDevicePointer(buffer, state_->device, "buffer");
  checkStream(stream, state_->device);
  ScopedDevice scope(state_->device);
  if (host.size() == 1) return;
  auto* data = static_cast<std::byte*>(buffer);
  choosePath();
  if (state_->chosen == DevicePath::kIpc) {
    state_->runIpc({.kind = detail::OpKind::kBroadcast, .type = type, .root = root, .count = count},
                   static_cast<cudaStream_t>(stream),
                   [&](const collectives::Group& group, const collectives::SlotRingMemory& memory,
                       collectives::SlotExecutor& executor, const transport::WaitContext& wait) {
                     collectives::slotRingBroadcast(group, memory, executor, data, count,
                                                    elementSize(type), root, wait);
                   });
    return;
  }
  const bool isRoot = host.rank() == root;
  state_->run("broadcast", isRoot ? data : nullptr, isRoot ? nullptr : data, count, type, stream,
              [&](std::byte* slot, size_t n) { host.broadcast(slot, n, type, root); });
}

void DeviceCommunicator::synchronize(void* stream) {
  checkStream(stream, state_->device);
  ScopedDevice scope(state_->device);
  cudaEvent_t event = nullptr;
  checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  try {
    checkCuda(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
    const auto timeout = state_->options.timeout;
    kernels::cuda::waitEvent(event, Clock::now() + timeout, timeout, [&] {
      return fmt::format("cuda synchronize on rank {} (device {}, stream {})", state_->host->rank(),
                         state_->device, stream);
    });
  } catch (...) {
    cudaEventDestroy(event);
    throw;
  }
  cudaEventDestroy(event);
}

}  // namespace ringlet::cuda
