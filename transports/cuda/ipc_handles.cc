#include "transports/cuda/ipc_handles.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "kernels/cuda/cuda_util.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"

namespace ringlet::transport::cuda {
namespace {

using kernels::cuda::checkCuda;

constexpr uint32_t kMagic = 0x52474950;  // "RGIP"
constexpr uint32_t kVersion = 1;
enum class Kind : uint32_t { kMemory = 1, kEvent = 2 };

// What the store holds for one exported handle. Fixed size, host byte order (one node).
struct Record {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  Kind kind = Kind::kMemory;
  int32_t pid = 0;
  int32_t device = -1;
  uint32_t reserved = 0;
  uint64_t bytes = 0;
  std::byte handle[64] = {};
};
static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(Record::handle));
static_assert(sizeof(cudaIpcEventHandle_t) <= sizeof(Record::handle));

void put(Store& store, std::string_view key, const Record& record) {
  store.set(key, std::span(reinterpret_cast<const std::byte*>(&record), sizeof(record)));
}

Record take(Store& store, std::string_view key, Kind kind, std::chrono::milliseconds timeout) {
  const Bytes value = store.get(key, timeout);
  Record record;
  if (value.size() != sizeof(Record)) {
    throw IoError(fmt::format("CUDA IPC record {} in {} has {} bytes, expected {}", key,
                              store.describe(), value.size(), sizeof(Record)));
  }
  std::memcpy(&record, value.data(), sizeof(Record));
  if (record.magic != kMagic || record.version != kVersion || record.kind != kind) {
    throw IoError(fmt::format("CUDA IPC record {} in {} is not a version {} {} record", key,
                              store.describe(), kVersion,
                              kind == Kind::kMemory ? "memory" : "event"));
  }
  if (record.pid == static_cast<int32_t>(getpid())) {
    throw InvalidArgument(fmt::format(
        "CUDA IPC handle {} was exported by this process (pid {}); CUDA opens IPC handles only in "
        "other processes",
        key, record.pid));
  }
  return record;
}

}  // namespace

void publishMemory(Store& store, std::string_view key, void* base, size_t bytes, int device) {
  ringlet::cuda::checkDevicePointer(base, device, "exported memory");
  cudaIpcMemHandle_t handle;
  checkCuda(cudaIpcGetMemHandle(&handle, base), fmt::format("cudaIpcGetMemHandle({})", base));
  Record record;
  record.kind = Kind::kMemory;
  record.pid = static_cast<int32_t>(getpid());
  record.device = device;
  record.bytes = bytes;
  std::memcpy(record.handle, &handle, sizeof(handle));
  put(store, key, record);
}

PeerMemory PeerMemory::open(Store& store, std::string_view key, std::chrono::milliseconds timeout) {
  const Record record = take(store, key, Kind::kMemory, timeout);
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, record.handle, sizeof(handle));
  PeerMemory memory;
  checkCuda(cudaIpcOpenMemHandle(&memory.data_, handle, cudaIpcMemLazyEnablePeerAccess),
            fmt::format("cudaIpcOpenMemHandle({} from pid {} on device {})", key, record.pid,
                        record.device));
  memory.bytes_ = record.bytes;
  memory.ownerDevice_ = record.device;
  return memory;
}

PeerMemory::PeerMemory(PeerMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(other.bytes_),
      ownerDevice_(other.ownerDevice_) {}

PeerMemory& PeerMemory::operator=(PeerMemory&& other) noexcept {
  if (this != &other) {
    if (data_) cudaIpcCloseMemHandle(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = other.bytes_;
    ownerDevice_ = other.ownerDevice_;
  }
  return *this;
}

PeerMemory::~PeerMemory() {
  if (data_) cudaIpcCloseMemHandle(data_);
}

InterprocessEvent::InterprocessEvent() {
  checkCuda(cudaEventCreateWithFlags(&event_, cudaEventInterprocess | cudaEventDisableTiming),
            "cudaEventCreateWithFlags(cudaEventInterprocess | cudaEventDisableTiming)");
}

InterprocessEvent::InterprocessEvent(InterprocessEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)) {}

InterprocessEvent& InterprocessEvent::operator=(InterprocessEvent&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

InterprocessEvent::~InterprocessEvent() {
  if (event_) cudaEventDestroy(event_);
}

void InterprocessEvent::publish(Store& store, std::string_view key) const {
  cudaIpcEventHandle_t handle;
  checkCuda(cudaIpcGetEventHandle(&handle, event_), "cudaIpcGetEventHandle");
  int device = -1;
  checkCuda(cudaGetDevice(&device), "cudaGetDevice");
  Record record;
  record.kind = Kind::kEvent;
  record.pid = static_cast<int32_t>(getpid());
  record.device = device;
  std::memcpy(record.handle, &handle, sizeof(handle));
  put(store, key, record);
}

PeerEvent PeerEvent::open(Store& store, std::string_view key, std::chrono::milliseconds timeout) {
  const Record record = take(store, key, Kind::kEvent, timeout);
  cudaIpcEventHandle_t handle;
  std::memcpy(&handle, record.handle, sizeof(handle));
  PeerEvent event;
  checkCuda(cudaIpcOpenEventHandle(&event.event_, handle),
            fmt::format("cudaIpcOpenEventHandle({} from pid {})", key, record.pid));
  return event;
}

PeerEvent::PeerEvent(PeerEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

PeerEvent& PeerEvent::operator=(PeerEvent&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

PeerEvent::~PeerEvent() {
  if (event_) cudaEventDestroy(event_);
}

}  // namespace ringlet::transport::cuda
