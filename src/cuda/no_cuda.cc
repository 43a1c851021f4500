// The public CUDA API in a build without CUDA: it links, reports no device, and refuses to make
// a DeviceCommunicator with an error that says why.
#include <fmt/format.h>

#include "ringlet/cuda.h"
#include "ringlet/error.h"

namespace ringlet::cuda {
namespace {
constexpr const char* kNoCuda = "ringlet was built without CUDA (RINGLET_CUDA=OFF or no toolkit)";
}

bool builtWithCuda() { return false; }

int deviceCount(std::string* reason) {
  if (reason) *reason = kNoCuda;
  return 0;
}

MemoryLocation locate(const void*) { return {}; }

void checkDevicePointer(const void* pointer, int device, std::string_view what) {
  throw InvalidArgument(fmt::format("{} ({}) cannot be CUDA memory of device {}: {}", what, pointer,
                                    device, kNoCuda));
}

struct DeviceCommunicator::State {};

DeviceCommunicator::DeviceCommunicator(Communicator&, int device, DeviceOptions) {
  throw CudaError(fmt::format("cannot use CUDA device {}: {}", device, kNoCuda));
}
DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator::~DeviceCommunicator() = default;

int DeviceCommunicator::device() const { return -1; }
DevicePath DeviceCommunicator::path() const { return DevicePath::kAuto; }
DevicePath DeviceCommunicator::pathFor(size_t) const { return DevicePath::kAuto; }
BlockRoute DeviceCommunicator::blockRoute() const { return BlockRoute::kAuto; }
BlockRoute DeviceCommunicator::chunkRoute() const { return BlockRoute::kAuto; }
Communicator& DeviceCommunicator::host() const { throw CudaError(kNoCuda); }

void DeviceCommunicator::allreduce(const void*, void*, size_t, DataType, ReduceOp, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::broadcast(void*, size_t, DataType, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::reduce(const void*, void*, size_t, DataType, ReduceOp, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::allgather(const void*, void*, size_t, DataType, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::reduceScatter(const void*, void*, size_t, DataType, ReduceOp, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::gather(const void*, void*, size_t, DataType, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::scatter(const void*, void*, size_t, DataType, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::allToAll(const void*, void*, size_t, DataType, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::allgatherv(const void*, void*, std::span<const size_t>,
                                    std::span<const size_t>, DataType, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::reduceScatterv(const void*, void*, std::span<const size_t>, DataType,
                                        ReduceOp, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::gatherv(const void*, void*, std::span<const size_t>,
                                 std::span<const size_t>, DataType, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::scatterv(const void*, std::span<const size_t>, std::span<const size_t>,
                                  void*, DataType, int, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::allToAllv(const void*, std::span<const size_t>, std::span<const size_t>,
                                   void*, std::span<const size_t>, std::span<const size_t>,
                                   DataType, void*) {
  throw CudaError(kNoCuda);
}
void DeviceCommunicator::synchronize(void*) { throw CudaError(kNoCuda); }

}  // namespace ringlet::cuda
