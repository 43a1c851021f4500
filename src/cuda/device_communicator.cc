// DeviceCommunicator: creation, the choice of path, all-reduce, broadcast and synchronize. The
// staged pipeline and the IPC call are in device_state.{h,cc}; reduce, all-gather and
// reduce-scatter in device_reduce_gather.cc.
//
// The CUDA IPC path runs the slot ring (collectives/slot_ring.h) with the executor of
// transports/cuda/ipc_ring.h, as one call of the host communicator (its header check, sequence
// number, deadlines and abort), and only enqueues.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "kernels/cuda/cuda_util.h"
#include "kernels/reduce.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "src/cuda/device_state.h"
#include "src/log.h"

namespace ringlet::cuda {

using kernels::cuda::checkCuda;
using kernels::cuda::ScopedDevice;
using Clock = std::chrono::steady_clock;

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
  if (options.slotBytes != 0 && options.slotBytes < 64) {
    throw InvalidArgument(
        fmt::format("DeviceOptions::slotBytes is {}, expected 0 (automatic) or at least 64",
                    options.slotBytes));
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
  // A world of one moves nothing between ranks: its calls are copies on the stream.
  if (host.size() == 1) state_->chosen = DevicePath::kStaged;
  ScopedDevice scope(device);
  for (int k = 0; k < 2; ++k) {
    checkCuda(cudaEventCreateWithFlags(&state_->copiedIn[k], cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
    checkCuda(cudaEventCreateWithFlags(&state_->copiedOut[k], cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
  }
}

namespace {

// Slots per rank on the IPC ring: as asked, but 2 or more for 3 or more ranks (a rank that
// relays holds its slot while it writes the next rank's; with one slot each they all wait).
int ipcSlots(int asked, int ranks) { return ranks > 2 ? std::max(asked, 2) : asked; }

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
      if (other.rank < info.rank && other.sameProcess(info)) {
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
    bool oneGpu = false;
    if (!transport::cuda::probeRing(impl.store(), prefix, host.rank(), host.size(), st.device,
                                    wait.deadline, &reason, &oneGpu)) {
      if (st.options.path == DevicePath::kIpc) {
        throw InvalidArgument(
            fmt::format("rank {}: DevicePath::kIpc is not possible: {}", host.rank(), reason));
      }
      log::info("rank {}: device collectives staged through host memory: {}", host.rank(), reason);
      st.chosen = DevicePath::kStaged;
      return;
    }
    st.oneGpu = oneGpu;
    const size_t slotBytes = st.options.slotBytes != 0 ? st.options.slotBytes
                             : oneGpu                  ? size_t{64} << 20
                                                       : size_t{4} << 20;
    st.ipc = std::make_unique<transport::cuda::IpcRing>(
        impl.store(), prefix, host.rank(), host.size(), st.device,
        ipcSlots(st.options.slots, host.size()), slotBytes, wait.deadline);
    st.ipc->setDrainTimeout(std::min(st.options.timeout, std::chrono::milliseconds(30000)));
    st.chosen = DevicePath::kIpc;
  });
}

DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator::~DeviceCommunicator() = default;

int DeviceCommunicator::device() const { return state_->device; }
DevicePath DeviceCommunicator::path() const { return state_->chosen; }
DevicePath DeviceCommunicator::pathFor(size_t bytes) const {
  if (state_->chosen == DevicePath::kAuto) return DevicePath::kAuto;
  return state_->useIpc(bytes) ? DevicePath::kIpc : DevicePath::kStaged;
}
BlockRoute DeviceCommunicator::blockRoute() const {
  const State& st = *state_;
  if (st.mesh) return BlockRoute::kDirect;
  return st.meshTried || st.alongTheRing() ? BlockRoute::kRing : BlockRoute::kAuto;
}
BlockRoute DeviceCommunicator::chunkRoute() const {
  const State& st = *state_;
  const bool direct = st.options.blockRoute == BlockRoute::kDirect || st.oneGpu;
  const BlockRoute blocks = blockRoute();
  return blocks == BlockRoute::kDirect && !direct ? BlockRoute::kRing : blocks;
}
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
  if (state_->useIpc(bytes)) {
    const collectives::AllreduceArgs args{static_cast<const std::byte*>(send),
                                          static_cast<std::byte*>(recv), count, type, op};
    state_->runRoute({.kind = detail::OpKind::kAllreduce,
                      .type = type,
                      .op = op,
                      .count = count,
                      .algorithm = kIpcRing},
                     stream, args, collectives::slotRingAllreduce, collectives::slotMeshAllreduce,
                     kIpcPairwise, /*wholeBuffer=*/true);
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
  if (state_->useIpc(count * elementSize(type))) {
    state_->runIpc({.kind = detail::OpKind::kBroadcast,
                    .type = type,
                    .root = root,
                    .count = count,
                    .algorithm = kIpcChain},
                   stream,
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
