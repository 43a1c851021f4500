// The direct all-to-all over every peer's slots (slot_mesh.h).
#include "collectives/slot_mesh.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/slot_notice.h"
#include "ringlet/error.h"
#include "ringlet/types.h"
#include "src/trace.h"

namespace ringlet::collectives {
namespace {

using detail::kNoticeBytes;
using detail::Notice;
using detail::NoticeBytes;
using detail::NoticeKind;
using transport::kMaxSlotRingSlots;

trace::Step meshStep(const char* name, int to, int from, size_t round, const Piece& bytes) {
  trace::Step step;
  step.name = name;
  step.to = to;
  step.from = from;
  step.slice = static_cast<int64_t>(round);
  step.offset = bytes.offset;
  step.bytes = bytes.count;
  return step;
}

class SlotMesh {
 public:
  SlotMesh(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
           const WaitContext& wait)
      : group_(group),
        memory_(memory),
        executor_(executor),
        wait_(wait),
        slots_(static_cast<uint64_t>(memory.slots)),
        peers_(static_cast<size_t>(group.size)) {
    const auto n = static_cast<size_t>(group.size);
    bool mapped = memory.from.size() == n && memory.to.size() == n;
    for (int q = 0; mapped && q < group.size; ++q) {
      mapped = q == group.rank || (memory.from[q] != nullptr && memory.to[q] != nullptr);
    }
    if (memory.slots < 1 || memory.slots > kMaxSlotRingSlots || memory.slotBytes == 0 || !mapped) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("direct all-to-all: invalid slots ({} of {} bytes per peer, {} of "
                              "{} ranks mapped)",
                              memory.slots, memory.slotBytes, memory.to.size(), group.size));
    }
  }

  // Where the next message to `p` goes: its slot for this rank, once `p` freed what was there.
  std::byte* acquireSend(int p, size_t bytes) {
    Peer& peer = peers_[p];
    while (peer.sent - peer.freedSeen >= slots_) readNotice(p);
    const int k = slotOf(peer.sent);
    executor_.waitSlotFree(p, k);
    peer.sendBytes = bytes;
    return memory_.to[p] + static_cast<size_t>(k) * memory_.slotBytes;
  }
  void commitSend(int p) {
    Peer& peer = peers_[p];
    const int k = slotOf(peer.sent);
    executor_.markSlotWritten(p, k);
    post(p, {NoticeKind::kWritten, static_cast<uint16_t>(k), peer.sent, peer.sendBytes});
    ++peer.sent;
  }

  // The next message from `q`, in this rank's slot for `q`.
  const std::byte* acquireRecv(int q, size_t bytes) {
    Peer& peer = peers_[q];
    while (peer.writtenSeen <= peer.received) readNotice(q);
    const int k = slotOf(peer.received);
    if (peer.lastWrittenBytes[k] != bytes) {
      throw IoError(fmt::format(
          "{}: rank {} wrote {} bytes into its slot {} here but this rank expects {}: the ranks "
          "disagree about the call",
          wait_.describe(), q, peer.lastWrittenBytes[k], k, bytes));
    }
    executor_.waitSlotWritten(q, k);
    return memory_.from[q] + static_cast<size_t>(k) * memory_.slotBytes;
  }
  void releaseRecv(int q) {
    Peer& peer = peers_[q];
    const int k = slotOf(peer.received);
    executor_.markSlotFree(q, k);
    post(q, {NoticeKind::kFreed, static_cast<uint16_t>(k), peer.received, 0});
    ++peer.received;
  }

  // Round c's writes: slice c (of `slice` bytes) of each peer's piece of `from` (bytes, from
  // `pieceOf(p)`) into that peer's slot, nearest peer first.
  template <class PieceOf>
  void sendRound(size_t c, size_t slice, const std::byte* from, PieceOf pieceOf) {
    for (int d = 1; d < group_.size; ++d) {
      const int p = wrap(group_.rank + d, group_.size);
      const Piece out = sliceOf(pieceOf(p), c, slice);
      if (out.count == 0) continue;
      trace::StepScope scope(wait_.trace, [&] { return meshStep("send", p, -1, c, out); });
      std::byte* slot = acquireSend(p, out.count);
      executor_.copy(slot, from + out.offset, out.count);
      commitSend(p);
    }
  }

  // Waits until every peer freed every message this rank wrote, then until the notices left.
  void finish() {
    for (int p = 0; p < group_.size; ++p) {
      if (p == group_.rank) continue;
      while (peers_[p].freedSeen < peers_[p].sent) readNotice(p);
    }
    for (int p = 0; p < group_.size; ++p) {
      if (p != group_.rank) group_.link(p).flush(wait_);
    }
    outbox_.clear();
  }

 private:
  struct Peer {
    uint64_t sent = 0;         // messages written into this peer's slots
    uint64_t freedSeen = 0;    // of those, how many it said it is done with
    uint64_t received = 0;     // messages taken from this rank's slots for the peer
    uint64_t writtenSeen = 0;  // messages it said it wrote
    size_t sendBytes = 0;
    std::array<uint64_t, kMaxSlotRingSlots> lastWrittenBytes{};
  };

  int slotOf(uint64_t seq) const { return static_cast<int>(seq % slots_); }

  void post(int peer, const Notice& notice) {
    // TCP sends from caller memory until flush(): keep every notice of the call alive.
    outbox_.push_back(notice.encode());
    sendFrom(group_.link(peer), outbox_.back().data(), kNoticeBytes, wait_);
  }

  // Reads one notice from `q`: a "written" for a message it sends here or a "freed" for one this
  // rank sent it, interleaved on one Link.
  void readNotice(int q) {
    NoticeBytes raw;
    group_.link(q).recvInto(raw.data(), kNoticeBytes, wait_);
    Notice notice;
    if (!Notice::decode(raw, notice)) {
      throw IoError(
          fmt::format("{}: rank {} sent something that is not a slot notice", wait_.describe(), q));
    }
    Peer& peer = peers_[q];
    const bool written = notice.kind == NoticeKind::kWritten;
    uint64_t& seen = written ? peer.writtenSeen : peer.freedSeen;
    if (notice.seq != seen || notice.slot != slotOf(seen) || (!written && seen >= peer.sent)) {
      throw IoError(fmt::format(
          "{}: rank {} sent '{}' notice #{} for slot {}, expected #{} for slot {}{}: the ranks "
          "are out of step",
          wait_.describe(), q, written ? "written" : "freed", notice.seq, notice.slot, seen,
          slotOf(seen), written ? "" : fmt::format(" of {} sent", peer.sent)));
    }
    if (written) peer.lastWrittenBytes[notice.slot] = notice.bytes;
    ++seen;
  }

  const Group& group_;
  const SlotMeshMemory& memory_;
  SlotMeshExecutor& executor_;
  const WaitContext& wait_;
  const uint64_t slots_;
  std::vector<Peer> peers_;
  std::deque<NoticeBytes> outbox_;
};

}  // namespace

void slotMeshAllToAllv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllToAllvArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t eb = args.elementBytes;
  const auto inBytes = [eb](const Piece& p) { return Piece{p.offset * eb, p.count * eb}; };
  const Piece ownIn = inBytes(args.sendBlocks[r]);
  const Piece ownOut = inBytes(args.recvBlocks[r]);
  if (ownOut.count > 0 && args.recv + ownOut.offset != args.send + ownIn.offset) {
    executor.copy(args.recv + ownOut.offset, args.send + ownIn.offset, ownOut.count);
  }
  SlotMesh mesh(group, memory, executor, wait);
  const size_t slice = memory.slotBytes;
  size_t rounds = 0;
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const size_t most = std::max(args.sendBlocks[q].count, args.recvBlocks[q].count) * eb;
    rounds = std::max(rounds, (most + slice - 1) / slice);
  }
  for (size_t c = 0; c < rounds; ++c) {
    mesh.sendRound(c, slice, args.send, [&](int p) { return inBytes(args.sendBlocks[p]); });
    for (int d = 1; d < n; ++d) {
      const int q = wrap(r - d, n);
      const Piece in = sliceOf(inBytes(args.recvBlocks[q]), c, slice);
      if (in.count == 0) continue;
      trace::StepScope scope(wait.trace, [&] { return meshStep("recv", -1, q, c, in); });
      const std::byte* slot = mesh.acquireRecv(q, in.count);
      executor.copy(args.recv + in.offset, slot, in.count);
      mesh.releaseRecv(q);
    }
  }
  mesh.finish();
}

void slotMeshAllToAll(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                      const AllToAllArgs& args, const WaitContext& wait) {
  const std::vector<Piece> blocks = equalBlocks(args.blockBytes, group.size);
  slotMeshAllToAllv(group, memory, executor,
                    {.send = args.send,
                     .recv = args.recv,
                     .sendBlocks = blocks,
                     .recvBlocks = blocks,
                     .elementBytes = 1},
                    wait);
}

namespace {

// Rank r's piece of every peer reduced into out (pieces[q]: element offsets into send of what
// rank q reduces; out holds rank r's piece at out + (pieces[r].offset - outFirst) elements).
// Round c: slice c of piece p to each peer p, then slice c of this rank's piece reduced from its
// own input and each peer's slot.
void reduceScatterPieces(const Group& group, const SlotMeshMemory& memory,
                         SlotMeshExecutor& executor, const std::byte* send, std::byte* out,
                         size_t outFirst, std::span<const Piece> pieces, DataType type, ReduceOp op,
                         const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t eb = elementSize(type);
  const size_t slice = std::max<size_t>(1, memory.slotBytes / eb);
  const Piece mine = pieces[r];
  std::byte* result = out + (mine.offset - outFirst) * eb;
  SlotMesh mesh(group, memory, executor, wait);
  size_t rounds = 0;
  for (const Piece& p : pieces) rounds = std::max(rounds, (p.count + slice - 1) / slice);
  for (size_t c = 0; c < rounds; ++c) {
    mesh.sendRound(c, slice * eb, send, [&](int p) {
      return Piece{pieces[p].offset * eb, pieces[p].count * eb};
    });
    const Piece s = sliceOf(mine, c, slice);
    if (s.count == 0) continue;
    std::byte* at = result + (s.offset - mine.offset) * eb;
    const std::byte* own = send + s.offset * eb;
    for (int d = 1; d < n; ++d) {
      const int q = wrap(r + d, n);
      trace::StepScope scope(wait.trace, [&] {
        trace::Step step = meshStep("recvReduce", -1, q, c, {s.offset * eb, s.count * eb});
        step.reduces = true;
        return step;
      });
      const std::byte* slot = mesh.acquireRecv(q, s.count * eb);
      executor.reduce(at, d == 1 ? own : at, slot, s.count, type, op);
      mesh.releaseRecv(q);
    }
    if (op == ReduceOp::kAvg) executor.finishAverage(at, s.count, type, n);
  }
  mesh.finish();
}

// Gather (toRoot) or scatter as an all-to-all-v in bytes. blocks[q] (elements) is rank q's block,
// at its offset in the root's buffer and at 0 in rank q's own. Every rank's own block travels
// between its own buffer and the root's: on every rank that is the block to (gather) or from
// (scatter) the root, and on the root itself the copy from send to recv.
void rootedOnMesh(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                  bool toRoot, const std::byte* send, std::byte* recv,
                  std::span<const Piece> blocks, size_t elementBytes, int root,
                  const WaitContext& wait) {
  const auto n = static_cast<size_t>(group.size);
  std::vector<Piece> none(n, Piece{0, 0});
  std::vector<Piece> own(none);
  own[root] = {0, blocks[group.rank].count * elementBytes};
  std::vector<Piece> all(none);
  if (group.rank == root) {
    for (size_t q = 0; q < n; ++q) {
      all[q] = {blocks[q].offset * elementBytes, blocks[q].count * elementBytes};
    }
  }
  // `all` is the root's side (empty elsewhere), `own` this rank's.
  slotMeshAllToAllv(group, memory, executor,
                    {.send = send,
                     .recv = recv,
                     .sendBlocks = toRoot ? own : all,
                     .recvBlocks = toRoot ? all : own,
                     .elementBytes = 1},
                    wait);
}

}  // namespace

void slotMeshAllgatherv(const Group& group, const SlotMeshMemory& memory,
                        SlotMeshExecutor& executor, const AllgathervArgs& args,
                        const WaitContext& wait) {
  const size_t eb = elementSize(args.type);
  std::vector<Piece> bytes(args.blocks.size());
  for (size_t q = 0; q < bytes.size(); ++q) {
    bytes[q] = {args.blocks[q].offset * eb, args.blocks[q].count * eb};
  }
  // Every peer gets this rank's block from send; block q of recv comes from rank q.
  const std::vector<Piece> sends(bytes.size(), Piece{0, bytes[group.rank].count});
  slotMeshAllToAllv(group, memory, executor,
                    {.send = args.send,
                     .recv = args.recv,
                     .sendBlocks = sends,
                     .recvBlocks = bytes,
                     .elementBytes = 1},
                    wait);
}

void slotMeshAllgather(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllgatherArgs& args, const WaitContext& wait) {
  slotMeshAllgatherv(group, memory, executor,
                     {args.send, args.recv, equalBlocks(args.sendCount, group.size), args.type},
                     wait);
}

void slotMeshReduceScatterv(const Group& group, const SlotMeshMemory& memory,
                            SlotMeshExecutor& executor, const ReduceScattervArgs& args,
                            const WaitContext& wait) {
  reduceScatterPieces(group, memory, executor, args.send, args.recv, args.blocks[group.rank].offset,
                      args.blocks, args.type, args.op, wait);
}

void slotMeshReduceScatter(const Group& group, const SlotMeshMemory& memory,
                           SlotMeshExecutor& executor, const ReduceScatterArgs& args,
                           const WaitContext& wait) {
  slotMeshReduceScatterv(
      group, memory, executor,
      {args.send, args.recv, equalBlocks(args.recvCount, group.size), args.type, args.op}, wait);
}

void slotMeshAllreduce(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                       const AllreduceArgs& args, const WaitContext& wait) {
  const size_t eb = elementSize(args.type);
  std::vector<Piece> chunks(static_cast<size_t>(group.size));
  for (int q = 0; q < group.size; ++q) chunks[q] = evenChunk(args.count, group.size, q);
  // Rank r's chunk reduced in place in recv (in place: it is only this rank's input there),
  // then every chunk from its rank into recv.
  reduceScatterPieces(group, memory, executor, args.send, args.recv, 0, chunks, args.type, args.op,
                      wait);
  slotMeshAllgatherv(group, memory, executor,
                     {args.recv + chunks[group.rank].offset * eb, args.recv, chunks, args.type},
                     wait);
}

void slotMeshGather(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                    const GatherArgs& args, const WaitContext& wait) {
  rootedOnMesh(group, memory, executor, true, args.send, args.recv,
               equalBlocks(args.blockBytes, group.size), 1, args.root, wait);
}

void slotMeshScatter(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                     const ScatterArgs& args, const WaitContext& wait) {
  rootedOnMesh(group, memory, executor, false, args.send, args.recv,
               equalBlocks(args.blockBytes, group.size), 1, args.root, wait);
}

void slotMeshGatherv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                     const GathervArgs& args, const WaitContext& wait) {
  rootedOnMesh(group, memory, executor, true, args.send, args.recv, args.blocks, args.elementBytes,
               args.root, wait);
}

void slotMeshScatterv(const Group& group, const SlotMeshMemory& memory, SlotMeshExecutor& executor,
                      const ScattervArgs& args, const WaitContext& wait) {
  rootedOnMesh(group, memory, executor, false, args.send, args.recv, args.blocks, args.elementBytes,
               args.root, wait);
}

}  // namespace ringlet::collectives
