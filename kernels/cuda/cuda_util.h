#pragma once
// Small helpers for ringlet's CUDA host code: error checks, the current device, and waits on
// CUDA events that have a deadline and back off.

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace ringlet::kernels::cuda {

// "cudaMemcpyAsync failed: cudaErrorInvalidValue: invalid argument".
std::string describeCudaError(std::string_view call, cudaError_t error);
// Throws CudaError(describeCudaError(call, error)) unless error is cudaSuccess. Clears CUDA's
// last-error state so a non-sticky error does not resurface in a later unrelated call.
void checkCuda(cudaError_t error, std::string_view call);

// Makes `device` current for the scope and restores the caller's current device afterwards.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
  int device_ = -1;
};

// Polls `event` until it completes: spins briefly, then yields, then sleeps (up to 1 ms), so a
// rank waiting on its GPU leaves the CPU to the ranks it waits for. Past `deadline` throws
// TimeoutError "<what()> timed out after N s"; a CUDA failure throws CudaError.
void waitEvent(cudaEvent_t event, std::chrono::steady_clock::time_point deadline,
               std::chrono::milliseconds timeout, const std::function<std::string()>& what);

}  // namespace ringlet::kernels::cuda
