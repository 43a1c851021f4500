#include "kernels/cuda/cuda_util.h"

#include <fmt/format.h>

#include <thread>

#include "ringlet/error.h"

namespace ringlet::kernels::cuda {

std::string describeCudaError(std::string_view call, cudaError_t error) {
  return fmt::format("{} failed: {}: {}", call, cudaGetErrorName(error), cudaGetErrorString(error));
}

void checkCuda(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // reset the non-sticky last error
  throw CudaError(describeCudaError(call, error));
}

ScopedDevice::ScopedDevice(int device) : device_(device) {
  checkCuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device_)
    checkCuda(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_));
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);  // best effort: no throw
}

void waitEvent(cudaEvent_t event, std::chrono::steady_clock::time_point deadline,
               std::chrono::milliseconds timeout, const std::function<std::string()>& what) {
  auto sleep = std::chrono::microseconds(10);
  for (int attempt = 0;; ++attempt) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) checkCuda(state, fmt::format("cudaEventQuery ({})", what()));
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError(fmt::format("{} timed out after {:.1f} s", what(),
                                     std::chrono::duration<double>(timeout).count()));
    }
    if (attempt < 64) continue;  // spin: a short copy finishes within microseconds
    if (attempt < 256) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace ringlet::kernels::cuda
