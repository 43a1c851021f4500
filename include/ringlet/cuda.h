#pragma once
// Collectives on CUDA device memory.
//
// Memory kind. Communicator's collectives take host memory. DeviceCommunicator takes CUDA device
// memory (cudaMalloc, or managed memory) on one device ordinal, fixed when it is made; every
// pointer is checked with cudaPointerGetAttributes before anything is sent:
//  - host memory (pageable or pinned) passed as device memory -> InvalidArgument naming the
//    argument, the pointer and what it is;
//  - device memory of another device -> InvalidArgument naming both ordinals;
//  - a stream that CUDA does not know (destroyed, or not a stream) -> CudaError with CUDA's error
//    string; a stream of another device -> InvalidArgument naming both ordinals.
// Like Communicator, every rank must issue the same sequence of calls with the same counts.
//
// Streams and what the host call waits for. Each call takes the caller's cudaStream_t (as void*;
// nullptr is the legacy default stream). Work the caller enqueued on that stream before the
// call is seen by the collective, and work enqueued after the call returns sees its result. Today
// every call runs the staged path, which is synchronous on the host: the call
//   1. enqueues device-to-host copies of the input on the stream, in chunks of
//      options.chunkBytes, into pinned host memory, and waits for each chunk's copy (so it also
//      waits for all work enqueued on the stream before the call);
//   2. runs the host communicator's collective on each pinned chunk (over whatever transport
//      links the ranks: TCP, shared memory), while the next chunk's copy runs on the GPU;
//   3. enqueues the host-to-device copy of each reduced chunk on the stream, and before
//      returning waits until the last of them has finished.
// So when the call returns the result is in device memory and the stream holds no work of
// ringlet's. (A CUDA IPC path that only enqueues and returns is planned; see
// transports/cuda/README.md. Code that relies only on stream order stays correct with both.)
//
// Errors. A failed CUDA call throws CudaError naming the call and CUDA's error name and string.
// A wait for a copy has a deadline (options.timeout) and throws TimeoutError naming the rank,
// the operation and the device. Transport errors are those of Communicator. After a CudaError the
// CUDA context may be unusable (sticky errors), as for any CUDA program.
//
// Threads. One DeviceCommunicator per Communicator, used from one thread at a time. It borrows
// the Communicator, which must outlive it. Calls set the current device for their duration and
// restore the caller's current device before returning.
//
// Without CUDA (built with -DRINGLET_CUDA=OFF, or no toolkit found) this header still compiles
// and links: deviceCount() is 0 with a reason, and making a DeviceCommunicator throws CudaError.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ringlet/communicator.h"
#include "ringlet/types.h"

namespace ringlet::cuda {

// True when this ringlet was built with CUDA support.
bool builtWithCuda();

// Number of CUDA devices this process sees. 0 when there is none, when the driver cannot start,
// or when ringlet was built without CUDA; then `reason` (if given) says why, e.g.
// "cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected".
// Note: this initialises the CUDA runtime; a process that forks children which use CUDA must
// not call it (or any CUDA function) before forking.
int deviceCount(std::string* reason = nullptr);

enum class MemoryKind : uint8_t {
  kHost = 0,  // pageable or pinned host memory, or anything CUDA does not know
  kCuda = 1,  // device memory (cudaMalloc) or managed memory (cudaMallocManaged)
};

struct MemoryLocation {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the owning device ordinal for kCuda, else -1
};

// Where `pointer` lives, as CUDA reports it. Host for nullptr and when CUDA has no device.
MemoryLocation locate(const void* pointer);

// Throws InvalidArgument unless `pointer` is CUDA memory of device `device`. `what` names the
// argument in the message ("send", "recv", ...).
void checkDevicePointer(const void* pointer, int device, std::string_view what);

struct DeviceOptions {
  // Staged path: bytes per pipelined chunk (rounded down to whole elements, at least one). Two
  // chunks of pinned host memory are allocated on first use and kept. All ranks must agree.
  size_t chunkBytes = size_t{4} << 20;
  // Deadline for each wait on a copy.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class DeviceCommunicator {
 public:
  // Checks that `device` exists (InvalidArgument naming it and the device count otherwise, or
  // CudaError when CUDA itself failed) and makes the CUDA events the staged path uses. Local:
  // no communication. `host` must outlive this object.
  DeviceCommunicator(Communicator& host, int device, DeviceOptions options = {});
  DeviceCommunicator(DeviceCommunicator&&) noexcept;
  DeviceCommunicator& operator=(DeviceCommunicator&&) noexcept;
  ~DeviceCommunicator();  // frees pinned memory and events; never throws

  int device() const;
  Communicator& host() const;

  // All-reduce of `count` elements on device memory; `send` may equal `recv` (in place).
  // Overlapping but unequal buffers are an error. Ordered on `stream`; see the top of this file
  // for what the call waits for.
  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                 void* stream);
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op, void* stream) {
    allreduce(buffer, buffer, count, type, op, stream);
  }

  // Broadcast of root's `count` elements into `buffer` on every rank.
  void broadcast(void* buffer, size_t count, DataType type, int root, void* stream);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringlet::cuda
