#pragma once
// All-to-all over direct slots: each rank keeps receive slots for every peer in memory that peer
// writes directly (on one node: device memory exported with CUDA IPC), so a block crosses one
// link once, where the slot ring (slot_ring.h) relays it d hops to the rank d after its origin:
// N - 1 blocks leave each rank, against N(N - 1)/2 on each link of the ring.
//
// The order of each slot is the slot ring's, per pair: rank r writes the s-th message for rank p
// into p's slot (s mod slots) for r after p's notice that it freed message s - slots there, marks
// it written, and sends p a "written" notice; p makes its queue wait for that mark, reads, marks
// the slot free and answers "freed". Notices travel over the host Links (collectives/slot_notice.h)
// and are checked: kind, sequence number, slot and size.
//
// Round c moves slice c of every block: first this rank writes slice c of each block it sends
// (to the ranks after it, nearest first), then it reads slice c of each block it receives (from
// the ranks before it, nearest first). A write of round c waits only for a notice of round
// c - slots, which its reader sent in an earlier round, and a read of round c for a write of the
// same round, which its writer issues before any read of that round: no rank waits on one that
// waits on it, with one slot per pair too. Each rank runs as many rounds as its own largest block
// needs (a pair's blocks look the same from both ends), so the v-form needs no other rank's
// counts. Every Link direction holds at most 2 x slots unread notices. At the end each rank waits
// until every peer freed what it wrote, so nothing is left on the Links and the next call starts
// at slot 0 (its queue still waits on each slot's last "free" mark before writing it).

#include "collectives/collectives.h"
#include "transports/slots.h"

namespace ringlet::collectives {

using transport::SlotMeshExecutor;
using transport::SlotMeshMemory;

// Block q of args.send goes to rank q, block q of args.recv comes from rank q. send and recv must
// not overlap (a device caller copies an in-place buffer first). Needs a Link to every peer.
void slotMeshAllToAll(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                      const AllToAllArgs& args, const WaitContext& wait);

// The same with blocks of their own size; an empty block costs no message. Each rank passes only
// its own blocks (args.recvBlocks[q].count must be what rank q sends this rank: checked against
// every notice's size).
void slotMeshAllToAllv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllToAllvArgs& args, const WaitContext& wait);

// All-gather, reduce-scatter and all-reduce in one round of writes each way (two for the
// all-reduce: its reduce-scatter of N even chunks, then the all-gather of the reduced chunks),
// where the ring takes N - 1 steps (2(N - 1)): the same bytes, fewer hand-offs between ranks.
// Reduce-scatter: rank r reduces block r as its own input, then each peer's slot in rank order
// from r + 1 (kAvg: divided at the end). Layouts and in-place rules as slot_ring.h's.
void slotMeshAllgather(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllgatherArgs& args, const WaitContext& wait);
void slotMeshReduceScatter(const Group& group, const SlotMeshMemory& memory,
                           SlotMeshExecutor& executor, const ReduceScatterArgs& args,
                           const WaitContext& wait);
void slotMeshAllreduce(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllreduceArgs& args, const WaitContext& wait);
// The v-forms of the first two: blocks of their own size at any place (an empty block costs no
// message); layouts and in-place rules as slot_ring.h's.
void slotMeshAllgatherv(const Group& group, const SlotMeshMemory& memory,
                        SlotMeshExecutor& executor, const AllgathervArgs& args,
                        const WaitContext& wait);
void slotMeshReduceScatterv(const Group& group, const SlotMeshMemory& memory,
                            SlotMeshExecutor& executor, const ReduceScattervArgs& args,
                            const WaitContext& wait);

// Gather, scatter and their v-forms: the all-to-all-v whose only blocks are between the root
// and each rank, each straight from one to the other (the root's own block copied, unless in
// place). Layouts and in-place rules as slot_ring.h's chains.
void slotMeshGather(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                    const GatherArgs& args, const WaitContext& wait);
void slotMeshScatter(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                     const ScatterArgs& args, const WaitContext& wait);
void slotMeshGatherv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                     const GathervArgs& args, const WaitContext& wait);
void slotMeshScatterv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                      const ScattervArgs& args, const WaitContext& wait);

}  // namespace ringlet::collectives
