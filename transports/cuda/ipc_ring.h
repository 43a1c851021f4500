#pragma once
// The CUDA IPC transport: what the slot ring (collectives/slot_ring.h) needs on device memory
// between processes of one node.
//
// Each rank owns
//   - its receive slots: one cudaMalloc of slots * slotBytes, exported with cudaIpcGetMemHandle,
//     which the previous rank opens and writes into;
//   - `written[k]`: recorded on its stream after it wrote slot k of the next rank;
//   - `freed[k]`: recorded on its stream after it read its own slot k;
// and opens the next rank's slots and `freed` events and the previous rank's `written` events.
// Every rank records only the events it created and waits on the ones it opened. Handles go
// through the rendezvous store (ipc_handles.h). Several processes on one GPU work the same way
// (the IPC mapping is to the same device); a next rank on another GPU is written through peer
// access, which cudaIpcMemLazyEnablePeerAccess enables.
//
// The executor enqueues everything on the caller's stream: copies (cudaMemcpyAsync), reduction
// kernels (kernels/cuda/device_reduce.h), event records and cross-process event waits.

#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/store.h"
#include "transports/cuda/ipc_handles.h"
#include "transports/slots.h"

namespace ringlet::transport::cuda {

using Deadline = std::chrono::steady_clock::time_point;

// Collective (every rank of the ring calls it with the same prefix): can every rank write into
// the next rank's GPU memory? Each rank publishes its GPU's UUID; a rank reaches the next one if
// they share the GPU or the next GPU is visible here with peer access from `device`. Returns the
// agreed answer (the same on every rank); when false, `reason` names the first rank that cannot.
// `oneGpu` (optional): whether every rank uses one and the same GPU (agreed: each rank reads
// every rank's GPU id).
bool probeRing(Store& store, std::string_view prefix, int rank, int size, int device,
               Deadline deadline, std::string* reason, bool* oneGpu = nullptr);

class IpcRing {
 public:
  // Collective: allocates and exports this rank's slots and events, then opens the neighbours'.
  // `device` is current.
  IpcRing(Store& store, std::string_view prefix, int rank, int size, int device, int slots,
          size_t slotBytes, Deadline deadline);
  // Waits (at most `drainTimeout`) for this rank's own events, after which no GPU work of this
  // rank or the previous one touches the slots, then closes and frees everything; if the wait fails
  // the allocation is left to the process's exit rather than freed under a running copy. Never
  // throws.
  ~IpcRing();
  IpcRing(const IpcRing&) = delete;
  IpcRing& operator=(const IpcRing&) = delete;

  const SlotRingMemory& memory() const { return memory_; }
  // The executor for one call, enqueuing on `stream`.
  SlotExecutor& executor(cudaStream_t stream);
  void setDrainTimeout(std::chrono::milliseconds timeout) { drainTimeout_ = timeout; }

 private:
  class Executor;

  int device_;
  void* slots_ = nullptr;  // this rank's receive slots (cudaMalloc)
  SlotRingMemory memory_;
  std::vector<InterprocessEvent> written_;  // mine: I wrote the next rank's slot k
  std::vector<InterprocessEvent> freed_;    // mine: I am done with my slot k
  PeerMemory nextSlots_;
  std::vector<PeerEvent> nextFreed_;
  std::vector<PeerEvent> prevWritten_;
  std::unique_ptr<Executor> executor_;
  std::chrono::milliseconds drainTimeout_{std::chrono::seconds(30)};
};

// Collective: can every rank write into every other rank's GPU memory (the direct all-to-all's
// slots)? Each rank publishes its GPU's UUID under `prefix` and checks every peer's as
// probeRing checks the next one's. Returns the agreed answer; when false, `reason` names the
// first rank that cannot and why.
bool probeMesh(Store& store, std::string_view prefix, int rank, int size, int device,
               Deadline deadline, std::string* reason);

// The direct all-to-all's memory (collectives/slot_mesh.h): each rank keeps `slots` receive
// slots of `slotBytes` for every peer in one cudaMalloc ((size - 1) regions, the peers' in rank
// order), and per peer `written[p][k]` (recorded after it wrote its slot k at p) and
// `freed[q][k]` (after it read its slot k for q); it opens every peer's allocation and, per peer,
// the peer's `freed` events for its region there and `written` events for its region here. As
// IpcRing: every rank records only its own events and waits on the ones it opened.
class IpcMesh {
 public:
  // Collective; `device` is current.
  IpcMesh(Store& store, std::string_view prefix, int rank, int size, int device, int slots,
          size_t slotBytes, Deadline deadline);
  // As ~IpcRing: waits (at most `drainTimeout`) for this rank's own events, then frees; leaves
  // the allocation to the process's exit if that wait fails. Never throws.
  ~IpcMesh();
  IpcMesh(const IpcMesh&) = delete;
  IpcMesh& operator=(const IpcMesh&) = delete;

  const SlotMeshMemory& memory() const { return memory_; }
  SlotMeshExecutor& executor(cudaStream_t stream);
  void setDrainTimeout(std::chrono::milliseconds timeout) { drainTimeout_ = timeout; }

 private:
  class Executor;

  int device_;
  void* slots_ = nullptr;  // this rank's receive slots for every peer (cudaMalloc)
  SlotMeshMemory memory_;
  std::vector<std::vector<InterprocessEvent>> written_;  // [p][k]: I wrote my slot k at p
  std::vector<std::vector<InterprocessEvent>> freed_;    // [q][k]: I read my slot k for q
  std::vector<PeerMemory> peerSlots_;                    // [p]
  std::vector<std::vector<PeerEvent>> peerFreed_;        // [p][k]: p read its slot k for me
  std::vector<std::vector<PeerEvent>> peerWritten_;      // [q][k]: q wrote its slot k here
  std::unique_ptr<Executor> executor_;
  std::chrono::milliseconds drainTimeout_{std::chrono::seconds(30)};
};

}  // namespace ringlet::transport::cuda
