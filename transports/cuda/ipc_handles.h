#pragma once
// CUDA IPC building blocks for a transport between processes of one node: device memory and
// CUDA events exported by one process and opened by another, their handles passed through the
// rendezvous store.
//
// These are the first pieces of the CUDA transport (README.md): a ring step over CUDA IPC is
// "peer wrote slot k and recorded its event; I make my stream wait on that event, reduce out of
// the peer's slot with a kernel, record my own event". Nothing here is registered as a
// transport yet.
//
// Rules CUDA imposes (and these functions check where they can):
//  - a handle opens only in another process (never in the exporting one);
//  - memory handles name whole allocations: export the pointer cudaMalloc returned;
//  - events must be made with cudaEventInterprocess | cudaEventDisableTiming;
//  - the exporter must keep the allocation and event alive until every opener closed them.
// Every store read has a deadline; a record read from the store is checked for size, magic and
// version before use.

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "ringlet/store.h"

namespace ringlet::transport::cuda {

// Publishes `base` (the start of a cudaMalloc allocation of `bytes` bytes on `device`) under
// `key`. Throws InvalidArgument if `base` is not device memory of `device`, CudaError if CUDA
// cannot export it.
void publishMemory(Store& store, std::string_view key, void* base, size_t bytes, int device);

// A peer's allocation mapped into this process (on the current device), closed on destruction.
class PeerMemory {
 public:
  // Waits up to `timeout` for `key`, then opens the handle (cudaIpcMemLazyEnablePeerAccess, so a
  // peer on another GPU of the node is reached by direct peer access).
  static PeerMemory open(Store& store, std::string_view key, std::chrono::milliseconds timeout);
  PeerMemory() = default;
  PeerMemory(PeerMemory&& other) noexcept;
  PeerMemory& operator=(PeerMemory&& other) noexcept;
  ~PeerMemory();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int ownerDevice() const { return ownerDevice_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int ownerDevice_ = -1;
};

// An event this process records and peers wait on (cudaStreamWaitEvent on the opened handle).
class InterprocessEvent {
 public:
  // Creates the event on the current device.
  InterprocessEvent();
  InterprocessEvent(InterprocessEvent&& other) noexcept;
  InterprocessEvent& operator=(InterprocessEvent&& other) noexcept;
  ~InterprocessEvent();

  cudaEvent_t get() const { return event_; }
  void publish(Store& store, std::string_view key) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// A peer's event opened in this process. CUDA documents that such events need no destroy call
// beyond cudaEventDestroy, which this does.
class PeerEvent {
 public:
  static PeerEvent open(Store& store, std::string_view key, std::chrono::milliseconds timeout);
  PeerEvent() = default;
  PeerEvent(PeerEvent&& other) noexcept;
  PeerEvent& operator=(PeerEvent&& other) noexcept;
  ~PeerEvent();

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace ringlet::transport::cuda
