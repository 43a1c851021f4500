#pragma once
// ringlet-bench --device cuda: the buffers live in CUDA device memory and the collectives go
// through cuda::DeviceCommunicator on one stream; each timed loop enqueues every iteration and
// then waits for the stream (as nccl-tests does). The same run measures cudaMemcpyAsync
// device-to-device on the same GPU at each size, the physical reference for the bandwidth.
// device_none.cc stands in when ringlet-bench is built without CUDA.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "bench/options.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench::device {

bool compiledIn();

class DeviceSide {
 public:
  // Uses GPU localRank % (visible GPUs); allocates two buffers of maxBytes there and a stream.
  DeviceSide(Communicator& comm, int localRank, const Options& options);
  ~DeviceSide();

  void* send();
  void* recv();
  void upload(void* deviceDst, const void* hostSrc, size_t bytes);
  void download(void* hostDst, const void* deviceSrc, size_t bytes);
  // Enqueues one collective on the stream (a.send, a.recv, a.count; the v-forms' a.counts).
  void run(BenchOp op, const CallArgs& a);
  void synchronize();
  // Seconds per cudaMemcpyAsync of `bytes` from one device buffer to another on this GPU.
  double timeDeviceCopy(size_t bytes, int iters, int warmup);
  // "cuda device 0 (NVIDIA H100 ...), path ipc".
  std::string describe() const;
  // The algorithm column of a row moving `bytes` (the larger of input and output), after its
  // calls: "cuda_ipc_ring" / "cuda_ipc_chain" on the IPC ring, else "staged_" + the host
  // collective's algorithm (`host`, for the staged chunk of that size).
  std::string algorithm(BenchOp op, size_t bytes,
                        const std::function<std::string(size_t chunkBytes)>& host) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringlet::bench::device
