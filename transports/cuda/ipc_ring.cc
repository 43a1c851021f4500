#include "transports/cuda/ipc_ring.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <span>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/device_reduce.h"
#include "ringlet/error.h"
#include "src/log.h"

namespace ringlet::transport::cuda {
namespace {

using kernels::cuda::checkCuda;

std::chrono::milliseconds until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

using Uuid = std::array<std::byte, 16>;

Uuid uuidOf(int device) {
  cudaDeviceProp properties{};
  checkCuda(cudaGetDeviceProperties(&properties, device),
            fmt::format("cudaGetDeviceProperties({})", device));
  Uuid uuid;
  static_assert(sizeof(properties.uuid) == sizeof(Uuid));
  std::memcpy(uuid.data(), &properties.uuid, sizeof(Uuid));
  return uuid;
}

std::string hex(const Uuid& uuid) {
  std::string out;
  for (std::byte b : uuid) out += fmt::format("{:02x}", static_cast<unsigned>(b));
  return out;
}

// Whether `device` can write into memory of the GPU named `target`; if not, why.
bool reaches(int device, const Uuid& target, std::string* why) {
  if (uuidOf(device) == target) return true;
  int count = 0;
  checkCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int other = 0; other < count; ++other) {
    if (uuidOf(other) != target) continue;
    int can = 0;
    checkCuda(cudaDeviceCanAccessPeer(&can, device, other),
              fmt::format("cudaDeviceCanAccessPeer({}, {})", device, other));
    if (can) return true;
    *why = fmt::format("device {} has no peer access to device {} (GPU {})", device, other,
                       hex(target));
    return false;
  }
  *why = fmt::format("GPU {} is not visible to this process (CUDA_VISIBLE_DEVICES?)", hex(target));
  return false;
}

void publishUuid(Store& store, std::string_view prefix, int rank, const Uuid& uuid) {
  store.set(fmt::format("{}/uuid/{}", prefix, rank), std::span<const std::byte>(uuid));
}

Uuid uuidOfRank(Store& store, std::string_view prefix, int r, Deadline deadline) {
  const Bytes theirs = store.get(fmt::format("{}/uuid/{}", prefix, r), until(deadline));
  if (theirs.size() != sizeof(Uuid)) {
    throw IoError(fmt::format("CUDA IPC probe: rank {}'s GPU id in {} has {} bytes, expected {}", r,
                              store.describe(), theirs.size(), sizeof(Uuid)));
  }
  Uuid uuid;
  std::memcpy(uuid.data(), theirs.data(), sizeof(Uuid));
  return uuid;
}

// Publishes this rank's answer ("ok" or why not) and reads every rank's, so all agree; false
// with `reason` from the first rank that said no, described by `describe(rank, answer)`.
bool agree(Store& store, std::string_view prefix, int rank, int size, const std::string& answer,
           Deadline deadline, std::string* reason,
           const std::function<std::string(int, const std::string&)>& describe) {
  store.setString(fmt::format("{}/reach/{}", prefix, rank), answer);
  for (int r = 0; r < size; ++r) {
    const std::string theirs =
        store.getString(fmt::format("{}/reach/{}", prefix, r), until(deadline));
    if (theirs != "ok") {
      if (reason) *reason = describe(r, theirs);
      return false;
    }
  }
  return true;
}

}  // namespace

bool probeMesh(Store& store, std::string_view prefix, int rank, int size, int device,
               Deadline deadline, std::string* reason) {
  publishUuid(store, prefix, rank, uuidOf(device));
  std::string answer = "ok";
  for (int p = 0; p < size && answer == "ok"; ++p) {
    std::string why;
    if (p != rank && !reaches(device, uuidOfRank(store, prefix, p, deadline), &why)) {
      answer = fmt::format("rank {}: {}", p, why);
    }
  }
  return agree(store, prefix, rank, size, answer, deadline, reason,
               [](int r, const std::string& why) {
                 return fmt::format("rank {} cannot write into {}'s GPU memory", r, why);
               });
}

bool probeRing(Store& store, std::string_view prefix, int rank, int size, int device,
               Deadline deadline, std::string* reason, bool* oneGpu) {
  const Uuid mine = uuidOf(device);
  publishUuid(store, prefix, rank, mine);
  const Uuid target = uuidOfRank(store, prefix, (rank + 1) % size, deadline);
  if (oneGpu) {
    *oneGpu = true;
    for (int r = 0; r < size && *oneGpu; ++r) {
      *oneGpu = uuidOfRank(store, prefix, r, deadline) == mine;
    }
  }
  std::string why;
  const bool ok = reaches(device, target, &why);
  return agree(store, prefix, rank, size, ok ? "ok" : why, deadline, reason,
               [size](int r, const std::string& answer) {
                 return fmt::format("rank {} cannot write into rank {}'s GPU memory: {}", r,
                                    (r + 1) % size, answer);
               });
}

class IpcRing::Executor final : public SlotExecutor {
 public:
  explicit Executor(IpcRing& ring) : ring_(ring) {}
  void setStream(cudaStream_t stream) { stream_ = stream; }

  void copy(std::byte* dst, const std::byte* src, size_t bytes) override {
    checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
              "cudaMemcpyAsync (CUDA IPC ring)");
  }
  void reduce(std::byte* dst, const std::byte* a, const std::byte* b, size_t count, DataType type,
              ReduceOp op) override {
    kernels::cuda::reduceOnDevice(dst, a, b, count, type, op, stream_);
  }
  void finishAverage(std::byte* data, size_t count, DataType type, int divisor) override {
    kernels::cuda::finishAverageOnDevice(data, count, type, divisor, stream_);
  }
  void waitSlotFree(int slot) override {
    checkCuda(cudaStreamWaitEvent(stream_, ring_.nextFreed_[slot].get(), 0),
              "cudaStreamWaitEvent (next rank's slot free)");
  }
  void markSlotWritten(int slot) override {
    checkCuda(cudaEventRecord(ring_.written_[slot].get(), stream_),
              "cudaEventRecord (next rank's slot written)");
  }
  void waitSlotWritten(int slot) override {
    checkCuda(cudaStreamWaitEvent(stream_, ring_.prevWritten_[slot].get(), 0),
              "cudaStreamWaitEvent (this rank's slot written)");
  }
  void markSlotFree(int slot) override {
    checkCuda(cudaEventRecord(ring_.freed_[slot].get(), stream_),
              "cudaEventRecord (this rank's slot free)");
  }

 private:
  IpcRing& ring_;
  cudaStream_t stream_ = nullptr;
};

IpcRing::IpcRing(Store& store, std::string_view prefix, int rank, int size, int device, int slots,
                 size_t slotBytes, Deadline deadline)
    : device_(device), executor_(std::make_unique<Executor>(*this)) {
  const size_t bytes = static_cast<size_t>(slots) * slotBytes;
  checkCuda(
      cudaMalloc(&slots_, bytes),
      fmt::format("cudaMalloc({} bytes of CUDA IPC receive slots on device {})", bytes, device));
  try {
    for (int k = 0; k < slots; ++k) {
      written_.emplace_back();
      freed_.emplace_back();
    }
    publishMemory(store, fmt::format("{}/slots/{}", prefix, rank), slots_, bytes, device);
    for (int k = 0; k < slots; ++k) {
      written_[k].publish(store, fmt::format("{}/written/{}/{}", prefix, rank, k));
      freed_[k].publish(store, fmt::format("{}/freed/{}/{}", prefix, rank, k));
    }
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;
    nextSlots_ = PeerMemory::open(store, fmt::format("{}/slots/{}", prefix, next), until(deadline));
    if (nextSlots_.bytes() != bytes) {
      throw InvalidArgument(fmt::format(
          "CUDA IPC ring: rank {} has {} bytes of receive slots but this rank expects {} "
          "({} x {}): every rank must pass the same DeviceOptions",
          next, nextSlots_.bytes(), bytes, slots, slotBytes));
    }
    for (int k = 0; k < slots; ++k) {
      nextFreed_.push_back(
          PeerEvent::open(store, fmt::format("{}/freed/{}/{}", prefix, next, k), until(deadline)));
      prevWritten_.push_back(PeerEvent::open(
          store, fmt::format("{}/written/{}/{}", prefix, prev, k), until(deadline)));
    }
  } catch (...) {
    cudaFree(slots_);
    throw;
  }
  memory_ = {static_cast<std::byte*>(slots_), static_cast<std::byte*>(nextSlots_.data()), slots,
             slotBytes};
  log::info("rank {}: CUDA IPC ring on device {}: {} slots of {} bytes, writing into rank {}'s",
            rank, device, slots, slotBytes, (rank + 1) % size);
}

IpcRing::~IpcRing() {
  try {
    kernels::cuda::ScopedDevice scope(device_);
    const auto deadline = std::chrono::steady_clock::now() + drainTimeout_;
    // Every message the previous rank wrote into these slots was read by this rank's stream
    // after waiting for the write, and each read is followed by a `freed` record: once this
    // rank's own events are complete, no GPU work of this rank or the previous one touches the
    // slots, and no copy of this rank touches the next rank's. (Only events this process made
    // are queried: the peers' may already be destroyed.)
    for (auto* events : {&written_, &freed_}) {
      for (auto& e : *events) {
        kernels::cuda::waitEvent(e.get(), deadline, drainTimeout_,
                                 [] { return std::string("CUDA IPC ring teardown"); });
      }
    }
    cudaFree(slots_);
  } catch (const std::exception& e) {
    log::warn(
        "CUDA IPC ring teardown on device {}: {}; its receive slots stay allocated until "
        "the process exits",
        device_, e.what());
  }
}

SlotExecutor& IpcRing::executor(cudaStream_t stream) {
  executor_->setStream(stream);
  return *executor_;
}

}  // namespace ringlet::transport::cuda

namespace ringlet::transport::cuda {

class IpcMesh::Executor final : public SlotMeshExecutor {
 public:
  explicit Executor(IpcMesh& mesh) : mesh_(mesh) {}
  void setStream(cudaStream_t stream) { stream_ = stream; }

  void copy(std::byte* dst, const std::byte* src, size_t bytes) override {
    checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
              "cudaMemcpyAsync (CUDA IPC direct)");
  }
  void reduce(std::byte* dst, const std::byte* a, const std::byte* b, size_t count, DataType type,
              ReduceOp op) override {
    kernels::cuda::reduceOnDevice(dst, a, b, count, type, op, stream_);
  }
  void finishAverage(std::byte* data, size_t count, DataType type, int divisor) override {
    kernels::cuda::finishAverageOnDevice(data, count, type, divisor, stream_);
  }
  void waitSlotFree(int peer, int slot) override {
    checkCuda(cudaStreamWaitEvent(stream_, mesh_.peerFreed_[peer][slot].get(), 0),
              "cudaStreamWaitEvent (peer's slot free)");
  }
  void markSlotWritten(int peer, int slot) override {
    checkCuda(cudaEventRecord(mesh_.written_[peer][slot].get(), stream_),
              "cudaEventRecord (peer's slot written)");
  }
  void waitSlotWritten(int peer, int slot) override {
    checkCuda(cudaStreamWaitEvent(stream_, mesh_.peerWritten_[peer][slot].get(), 0),
              "cudaStreamWaitEvent (this rank's slot for a peer written)");
  }
  void markSlotFree(int peer, int slot) override {
    checkCuda(cudaEventRecord(mesh_.freed_[peer][slot].get(), stream_),
              "cudaEventRecord (this rank's slot for a peer free)");
  }

 private:
  IpcMesh& mesh_;
  cudaStream_t stream_ = nullptr;
};

IpcMesh::IpcMesh(Store& store, std::string_view prefix, int rank, int size, int device, int slots,
                 size_t slotBytes, Deadline deadline)
    : device_(device), executor_(std::make_unique<Executor>(*this)) {
  const size_t region = static_cast<size_t>(slots) * slotBytes;
  const size_t bytes = region * static_cast<size_t>(size - 1);
  // Peer q's region in an allocation of rank `owner`: the peers in rank order, the owner skipped.
  const auto regionOf = [&](int owner, int q) {
    return static_cast<size_t>(q < owner ? q : q - 1) * region;
  };
  checkCuda(
      cudaMalloc(&slots_, bytes),
      fmt::format("cudaMalloc({} bytes of CUDA IPC all-to-all slots on device {})", bytes, device));
  try {
    const auto n = static_cast<size_t>(size);
    written_.resize(n);
    freed_.resize(n);
    peerSlots_.resize(n);
    peerFreed_.resize(n);
    peerWritten_.resize(n);
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      for (int k = 0; k < slots; ++k) {
        written_[p].emplace_back();
        freed_[p].emplace_back();
        written_[p][k].publish(store, fmt::format("{}/mesh-written/{}/{}/{}", prefix, rank, p, k));
        freed_[p][k].publish(store, fmt::format("{}/mesh-freed/{}/{}/{}", prefix, rank, p, k));
      }
    }
    publishMemory(store, fmt::format("{}/mesh-slots/{}", prefix, rank), slots_, bytes, device);
    memory_.from.assign(n, nullptr);
    memory_.to.assign(n, nullptr);
    memory_.slots = slots;
    memory_.slotBytes = slotBytes;
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      peerSlots_[p] =
          PeerMemory::open(store, fmt::format("{}/mesh-slots/{}", prefix, p), until(deadline));
      if (peerSlots_[p].bytes() != bytes) {
        throw InvalidArgument(fmt::format(
            "CUDA IPC all-to-all: rank {} has {} bytes of slots but this rank expects {} ({} "
            "peers x {} x {}): every rank must pass the same DeviceOptions",
            p, peerSlots_[p].bytes(), bytes, size - 1, slots, slotBytes));
      }
      for (int k = 0; k < slots; ++k) {
        peerFreed_[p].push_back(PeerEvent::open(
            store, fmt::format("{}/mesh-freed/{}/{}/{}", prefix, p, rank, k), until(deadline)));
        peerWritten_[p].push_back(PeerEvent::open(
            store, fmt::format("{}/mesh-written/{}/{}/{}", prefix, p, rank, k), until(deadline)));
      }
      memory_.from[p] = static_cast<std::byte*>(slots_) + regionOf(rank, p);
      memory_.to[p] = static_cast<std::byte*>(peerSlots_[p].data()) + regionOf(p, rank);
    }
  } catch (...) {
    cudaFree(slots_);
    throw;
  }
  log::info("rank {}: CUDA IPC all-to-all on device {}: {} slots of {} bytes for each of {} peers",
            rank, device, slots, slotBytes, size - 1);
}

IpcMesh::~IpcMesh() {
  try {
    kernels::cuda::ScopedDevice scope(device_);
    const auto deadline = std::chrono::steady_clock::now() + drainTimeout_;
    // As ~IpcRing: once this rank's own events are complete, no GPU work of this rank or of a
    // peer that wrote here touches these slots.
    for (auto* events : {&written_, &freed_}) {
      for (auto& perPeer : *events) {
        for (auto& e : perPeer) {
          kernels::cuda::waitEvent(e.get(), deadline, drainTimeout_,
                                   [] { return std::string("CUDA IPC all-to-all teardown"); });
        }
      }
    }
    cudaFree(slots_);
  } catch (const std::exception& e) {
    log::warn(
        "CUDA IPC all-to-all teardown on device {}: {}; its slots stay allocated until the "
        "process exits",
        device_, e.what());
  }
}

SlotMeshExecutor& IpcMesh::executor(cudaStream_t stream) {
  executor_->setStream(stream);
  return *executor_;
}

}  // namespace ringlet::transport::cuda
