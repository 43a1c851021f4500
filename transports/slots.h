#pragma once
// The slot ring's memory and executor: what a transport that gives a rank direct access to its
// next rank's memory (transports/cuda: CUDA IPC) provides, and what the slot-ring algorithms
// (collectives/slot_ring.h, where the protocol is described) drive. Written without CUDA, so
// both the algorithms and their CPU test run anywhere.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::transport {

// How memory operations of the slot ring run. Host memory: at once. CUDA: enqueued on a stream.
class SlotExecutor {
 public:
  virtual ~SlotExecutor() = default;
  virtual void copy(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // dst = a (op) b, element-wise; dst may equal a or b. kAvg reduces like kSum.
  virtual void reduce(std::byte* dst, const std::byte* a, const std::byte* b, size_t count,
                      DataType type, ReduceOp op) = 0;
  // data /= divisor, element-wise (the end of kAvg).
  virtual void finishAverage(std::byte* data, size_t count, DataType type, int divisor) = 0;

  // Cross-rank order of slot k (see the top of this file); no-ops where operations complete
  // when called.
  virtual void waitSlotFree(int slot) = 0;     // before writing the next rank's slot
  virtual void markSlotWritten(int slot) = 0;  // after writing the next rank's slot
  virtual void waitSlotWritten(int slot) = 0;  // before reading this rank's slot
  virtual void markSlotFree(int slot) = 0;     // after reading this rank's slot
};

// This rank's slots and its next rank's, as mapped in this process.
struct SlotRingMemory {
  std::byte* mine = nullptr;  // slots * slotBytes: the previous rank writes here
  std::byte* next = nullptr;  // the next rank's slots
  int slots = 0;              // 1..kMaxSlots
  size_t slotBytes = 0;
};

inline constexpr int kMaxSlotRingSlots = 4;

// The direct all-to-all's slots (collectives/slot_mesh.h): every rank keeps `slots` receive slots
// for each peer, which that peer writes directly; the same four marks and waits as the ring's,
// per peer. `peer` is a rank of the group (never this rank).
class SlotMeshExecutor {
 public:
  virtual ~SlotMeshExecutor() = default;
  virtual void copy(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // As SlotExecutor's (the direct reduce-scatter and all-reduce).
  virtual void reduce(std::byte* dst, const std::byte* a, const std::byte* b, size_t count,
                      DataType type, ReduceOp op) = 0;
  virtual void finishAverage(std::byte* data, size_t count, DataType type, int divisor) = 0;
  virtual void waitSlotFree(int peer, int slot) = 0;     // before writing peer's slot for me
  virtual void markSlotWritten(int peer, int slot) = 0;  // after writing peer's slot for me
  virtual void waitSlotWritten(int peer, int slot) = 0;  // before reading my slot for peer
  virtual void markSlotFree(int peer, int slot) = 0;     // after reading my slot for peer
};

// Bytes per slot of the direct route when the ring has `ringSlots` of `ringSlotBytes` and there
// are `ranks` ranks: 2 slots per peer in about the ring's bytes, at least
// min(ringSlotBytes, 1 MiB), at most ringSlotBytes, whole 256-byte lines where above 256.
inline size_t directSlotBytes(size_t ringSlotBytes, int ringSlots, int ranks) {
  const size_t peers = ranks > 1 ? static_cast<size_t>(ranks - 1) : 1;
  size_t bytes = static_cast<size_t>(ringSlots) * ringSlotBytes / (2 * peers);
  bytes = std::clamp(bytes, std::min(ringSlotBytes, size_t{1} << 20), ringSlotBytes);
  return bytes > 256 ? bytes & ~size_t{255} : bytes;
}

// This rank's slots for each peer and each peer's slots for this rank, as mapped in this process
// (index: the peer's rank; this rank's own entries are null).
struct SlotMeshMemory {
  std::vector<std::byte*> from;  // from[q]: slots * slotBytes that rank q writes
  std::vector<std::byte*> to;    // to[p]: rank p's slots * slotBytes that this rank writes
  int slots = 0;                 // 1..kMaxSlotRingSlots
  size_t slotBytes = 0;
};

}  // namespace ringlet::transport
