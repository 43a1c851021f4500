#pragma once
// Ring collectives over peer-mapped slots: the data path of the CUDA IPC transport, written
// without CUDA so that its protocol runs (and is tested) on the CPU too.
//
// Each rank owns `slots` receive slots of `slotBytes` in memory its previous rank can write
// directly (on one node: device memory exported with CUDA IPC). A step of the ring schedule
// (ring_schedule.h) reads the incoming slot, combines it with this rank's input, and writes the
// result straight into the next rank's slot: no copy through host memory, no staging buffer.
//
// Two things order each slot between the writer (rank r-1) and the reader (rank r):
//  1. Notices over the host Links of the communicator (16 bytes each): "I wrote your slot k"
//     (r-1 -> r) and "I am done with my slot k" (r -> r-1). They say that the other side has
//     *issued* its work, and carry the slot and a sequence number, checked on arrival.
//  2. The executor's marks and waits (SlotExecutor): where memory operations run later on a
//     queue (a CUDA stream), the writer records "written k" after its write and the reader makes
//     its queue wait for it before reading; the reader records "free k" after its read and the
//     writer's queue waits for that before writing slot k again. An executor whose operations
//     complete when called (the host executor) needs no marks.
// A mark is issued before the notice that announces it, and a wait only after the notice arrived,
// so a wait always refers to the mark just announced (CUDA events: cudaStreamWaitEvent uses the
// most recent record).
//
// Flow control: a rank writes slot (i mod slots) for its i-th message and waits for the notice
// that message i - slots was consumed first. At the end of a call every rank waits for the
// notices of all of its messages, so no notice is left on a Link between calls (a host collective
// may come next) and the next call starts at slot 0 again; the executor's queue still waits on the
// slot's last "free" mark before writing it.
//
// Host waits have the WaitContext's deadline; the host call returns once its work is issued
// (with a queueing executor: before it has run). Each Link direction holds at most 2 * slots
// unread notices, which the shared-memory FIFO (8 messages) always has room for: slots <= 4.

#include <cstddef>
#include <cstdint>
#include <deque>

#include "collectives/collectives.h"

namespace ringlet::collectives {

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

// Ring all-reduce (2 <= group.size); args' buffers are in the executor's memory.
void slotRingAllreduce(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllreduceArgs& args, const WaitContext& wait);

// Chain broadcast of `count` elements of `elementBytes` from `root`.
void slotRingBroadcast(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       std::byte* buffer, size_t count, size_t elementBytes, int root,
                       const WaitContext& wait);

}  // namespace ringlet::collectives
