// Memory kinds and device checks for the public CUDA API (include/ringlet/cuda.h).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "kernels/cuda/cuda_util.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"

namespace ringlet::cuda {

bool builtWithCuda() { return true; }

int deviceCount(std::string* reason) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    if (reason) *reason = kernels::cuda::describeCudaError("cudaGetDeviceCount", error);
    return 0;
  }
  if (count == 0 && reason) *reason = "cudaGetDeviceCount reports 0 devices";
  return count;
}

MemoryLocation locate(const void* pointer) {
  if (pointer == nullptr) return {};
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess) {
    cudaGetLastError();  // e.g. no device: nothing can be device memory
    return {};
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    return {MemoryKind::kCuda, attributes.device};
  }
  return {};
}

void checkDevicePointer(const void* pointer, int device, std::string_view what) {
  if (pointer == nullptr) {
    throw InvalidArgument(
        fmt::format("{} is a null pointer, expected CUDA memory of device {}", what, device));
  }
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess) {
    cudaGetLastError();
    throw InvalidArgument(fmt::format(
        "{} ({}) is not CUDA memory of device {}: CUDA cannot inspect it ({})", what, pointer,
        device, kernels::cuda::describeCudaError("cudaPointerGetAttributes", error)));
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
      if (attributes.device != device) {
        throw InvalidArgument(
            fmt::format("{} ({}) is CUDA memory of device {}, but this call runs on device {}",
                        what, pointer, attributes.device, device));
      }
      return;
    case cudaMemoryTypeHost:
      throw InvalidArgument(
          fmt::format("{} ({}) is pinned host memory, expected CUDA memory of device {}", what,
                      pointer, device));
    default:
      throw InvalidArgument(
          fmt::format("{} ({}) is host memory unknown to CUDA, expected CUDA memory of device {}",
                      what, pointer, device));
  }
}

}  // namespace ringlet::cuda
