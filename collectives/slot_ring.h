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
//  1. Notices over the host Links of the communicator (kNoticeBytes = 24 bytes each): "I wrote your
//  slot k"
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
#include "transports/slots.h"

namespace ringlet::collectives {

using transport::kMaxSlotRingSlots;
using transport::SlotExecutor;
using transport::SlotRingMemory;

// Ring all-reduce (2 <= group.size); args' buffers are in the executor's memory.
void slotRingAllreduce(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllreduceArgs& args, const WaitContext& wait);

// Chain broadcast of `count` elements of `elementBytes` from `root`.
void slotRingBroadcast(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       std::byte* buffer, size_t count, size_t elementBytes, int root,
                       const WaitContext& wait);

// Ring reduce-scatter (ring_schedule.h): args.send holds group.size blocks of args.recvCount;
// rank r ends with block r reduced in args.recv, which may be block r of args.send (in place).
// Partial sums travel only through the slots: send is never written.
void slotRingReduceScatter(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                           const ReduceScatterArgs& args, const WaitContext& wait);

// Ring all-gather: rank r's args.sendCount elements land at block r of args.recv on every rank.
// args.send may be block r of args.recv (in place); otherwise it is copied there first.
void slotRingAllgather(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllgatherArgs& args, const WaitContext& wait);

// The v-forms of the two above (ring_schedule.h's schedules over BlockPieces): blocks of any
// size at any place, an empty one costing no message. All-gather-v: rank r's block lands at
// args.blocks[r] of args.recv on every rank (send may be in place there). Reduce-scatter-v:
// args.send holds every block at args.blocks[r]; rank r ends with its block reduced in args.recv
// (which may be its block of send).
void slotRingAllgatherv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                        const AllgathervArgs& args, const WaitContext& wait);
void slotRingReduceScatterv(const Group& group, const SlotRingMemory& memory,
                            SlotExecutor& executor, const ReduceScattervArgs& args,
                            const WaitContext& wait);

// Chain reduce ending at args.root, which keeps the result in args.recv (unused elsewhere).
void slotRingReduce(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                    const ReduceArgs& args, const WaitContext& wait);

// Chain gather towards args.root (byte blocks): every block reaches the root's args.recv in rank
// order; the root's own block may be in place there. Non-roots' recv is unused.
void slotRingGather(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                    const GatherArgs& args, const WaitContext& wait);

// Chain scatter from args.root: block r of the root's args.send lands in rank r's args.recv (the
// root's may be in place in send).
void slotRingScatter(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                     const ScatterArgs& args, const WaitContext& wait);

// The v-forms of the two chains: block r of its own size (args.blocks[r].count elements of
// args.elementBytes), an empty one costing no message. The blocks' offsets count on the root
// only (its recv for gather-v, its send for scatter-v); elsewhere only this rank's block is
// read (gather-v: from send) or written (scatter-v: to recv).
void slotRingGatherv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                     const GathervArgs& args, const WaitContext& wait);
void slotRingScatterv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                      const ScattervArgs& args, const WaitContext& wait);

// All-to-all along the ring (byte blocks): block q of args.send goes to rank q, block q of
// args.recv comes from rank q. send and recv must not overlap (a device caller copies an in-place
// buffer first): a block may arrive before this rank has sent the one in its place.
void slotRingAllToAll(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                      const AllToAllArgs& args, const WaitContext& wait);

// All-to-all-v along the ring by distance, as slotRingAllToAll with blocks of their own size:
// `sends` is the whole N x N matrix, sends[p * N + q] the elements rank p sends rank q (every
// rank needs it: it relays blocks of other pairs), consistent with args' blocks
// (args.sendBlocks[q].count == sends[rank * N + q], args.recvBlocks[q].count ==
// sends[q * N + rank]). An empty block costs no message. send and recv must not overlap.
void slotRingAllToAllv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllToAllvArgs& args, std::span<const size_t> sends,
                       const WaitContext& wait);

}  // namespace ringlet::collectives
