// The slot ring's protocol (slot_ring.h) and its primitives for the shared ring schedules.
#include "collectives/slot_ring.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <vector>

#include "collectives/link_prims.h"
#include "collectives/ring_schedule.h"
#include "collectives/slot_notice.h"
#include "ringlet/error.h"
#include "src/trace.h"

namespace ringlet::collectives {
namespace {

using detail::kNoticeBytes;
using detail::Notice;
using detail::NoticeBytes;
using detail::NoticeKind;

class SlotRing {
 public:
  SlotRing(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
           const WaitContext& wait)
      : memory_(memory),
        executor_(executor),
        wait_(wait),
        next_(group.next()),
        prev_(group.prev()),
        slots_(static_cast<uint64_t>(memory.slots)) {
    if (memory.slots < 1 || memory.slots > kMaxSlotRingSlots || memory.slotBytes == 0 ||
        memory.mine == nullptr || memory.next == nullptr) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("slot ring: invalid memory ({} slots of {} bytes)", memory.slots,
                              memory.slotBytes));
    }
    if (memory.slots < 2 && group.size > 2) {
      // A rank that relays holds the slice in its slot while it writes the next rank's; with one
      // slot each, every rank of the ring would wait for the next to free its slot at once.
      throw InvalidArgument(fmt::format(
          "slot ring: {} ranks need 2 or more slots per rank (a relaying rank holds its slot "
          "while it writes the next rank's), {} given",
          group.size, memory.slots));
    }
  }

  // Where the next message to the next rank goes: its slot, once the next rank said it is done
  // with what was there.
  std::byte* acquireSend(size_t bytes) {
    while (sent_ - freedSeen_ >= slots_) readNotice(next_);
    const int k = slotOf(sent_);
    executor_.waitSlotFree(k);
    sendBytes_ = bytes;
    return memory_.next + static_cast<size_t>(k) * memory_.slotBytes;
  }
  void commitSend() {
    const int k = slotOf(sent_);
    executor_.markSlotWritten(k);
    post(next_, {NoticeKind::kWritten, static_cast<uint16_t>(k), sent_, sendBytes_});
    ++sent_;
  }

  // The next message from the previous rank, in this rank's slot.
  const std::byte* acquireRecv(size_t bytes) {
    while (writtenSeen_ <= received_) readNotice(prev_);
    if (lastWrittenBytes_[slotOf(received_)] != bytes) {
      throw IoError(fmt::format(
          "{}: rank {} wrote {} bytes into slot {} but this rank expects {}: the ranks disagree "
          "about the call",
          wait_.describe(), prev_.peer(), lastWrittenBytes_[slotOf(received_)], slotOf(received_),
          bytes));
    }
    const int k = slotOf(received_);
    executor_.waitSlotWritten(k);
    return memory_.mine + static_cast<size_t>(k) * memory_.slotBytes;
  }
  void releaseRecv() {
    const int k = slotOf(received_);
    executor_.markSlotFree(k);
    post(prev_, {NoticeKind::kFreed, static_cast<uint16_t>(k), received_, 0});
    ++received_;
  }

  // Waits until the next rank has taken every message, then until the notices have left.
  void finish() {
    while (freedSeen_ < sent_) readNotice(next_);
    next_.flush(wait_);
    prev_.flush(wait_);
    outbox_.clear();
  }

  size_t slotBytes() const { return memory_.slotBytes; }
  SlotExecutor& executor() { return executor_; }
  const WaitContext& wait() const { return wait_; }
  int nextPeer() const { return next_.peer(); }
  int prevPeer() const { return prev_.peer(); }

 private:
  int slotOf(uint64_t seq) const { return static_cast<int>(seq % slots_); }

  void post(Link& link, const Notice& notice) {
    // TCP sends from caller memory until flush(): keep every notice of the call alive.
    outbox_.push_back(notice.encode());
    sendFrom(link, outbox_.back().data(), kNoticeBytes, wait_);
  }

  // Reads one notice from `link` and counts it. With two ranks next and prev are one link, and
  // its notices of both kinds arrive interleaved; the kind says which counter moves.
  void readNotice(Link& link) {
    NoticeBytes raw;
    link.recvInto(raw.data(), kNoticeBytes, wait_);
    Notice notice;
    if (!Notice::decode(raw, notice)) {
      throw IoError(fmt::format("{}: rank {} sent something that is not a slot notice",
                                wait_.describe(), link.peer()));
    }
    const bool written = notice.kind == NoticeKind::kWritten;
    if (written ? &link != &prev_ : &link != &next_) {
      throw IoError(fmt::format("{}: rank {} sent a '{}' notice, which only the {} rank sends",
                                wait_.describe(), link.peer(), written ? "written" : "freed",
                                written ? "previous" : "next"));
    }
    uint64_t& seen = written ? writtenSeen_ : freedSeen_;
    if (notice.seq != seen || notice.slot != slotOf(seen)) {
      throw IoError(fmt::format(
          "{}: rank {} sent '{}' notice #{} for slot {}, expected #{} for slot {}: the ranks are "
          "out of step",
          wait_.describe(), link.peer(), written ? "written" : "freed", notice.seq, notice.slot,
          seen, slotOf(seen)));
    }
    if (written) lastWrittenBytes_[notice.slot] = notice.bytes;
    ++seen;
  }

  const SlotRingMemory& memory_;
  SlotExecutor& executor_;
  const WaitContext& wait_;
  Link& next_;
  Link& prev_;
  const uint64_t slots_;
  uint64_t sent_ = 0;         // messages written into the next rank's slots
  uint64_t freedSeen_ = 0;    // of those, how many the next rank said it is done with
  uint64_t received_ = 0;     // messages taken from this rank's slots
  uint64_t writtenSeen_ = 0;  // messages the previous rank said it wrote
  size_t sendBytes_ = 0;
  std::array<uint64_t, kMaxSlotRingSlots> lastWrittenBytes_{};
  std::deque<NoticeBytes> outbox_;
};

// The schedule's primitives on slots. `input` and `output` are the same buffer for broadcast
// and all-gather. `outputFirst` is the element offset at which `output` starts (reduce-scatter:
// rank r's output is block r alone, and only block r is ever written).
class SlotPrims {
 public:
  SlotPrims(SlotRing& ring, const std::byte* input, std::byte* output, size_t elementBytes,
            DataType type, ReduceOp op, int size, size_t outputFirst = 0, size_t inputFirst = 0)
      : ring_(ring),
        exec_(ring.executor()),
        input_(input),
        output_(output),
        inputFirst_(inputFirst),
        outputFirst_(outputFirst),
        elementBytes_(elementBytes),
        type_(type),
        op_(op),
        size_(size) {}

  size_t sliceElements() const { return std::max<size_t>(1, ring_.slotBytes() / elementBytes_); }

  // Trace mode: the pieces are slices of sliceElements() of `chunks` even chunks of `count`
  // elements (one chunk: the chains), so that each step names its chunk and slice. A step's
  // times are the host's: when it enqueued the step's work, after its neighbours' notices.
  void traceChunks(size_t count, int chunks) {
    traceCount_ = count;
    traceParts_ = chunks;
  }
  // Trace mode, v-forms: the pieces are slices of the ranks' blocks (BlockPieces).
  void traceBlocks(std::span<const Piece> blocks) { traceBlocks_ = blocks; }

  void send(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("send", p, true, false, false); });
    std::byte* out = ring_.acquireSend(bytes(p));
    if (p.count > 0) exec_.copy(out, in(p), bytes(p));
    ring_.commitSend();
  }

  void recvReduceSend(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recvReduceSend", p, true, true, true); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    std::byte* out = ring_.acquireSend(bytes(p));
    if (p.count > 0) exec_.reduce(out, in(p), slot, p.count, type_, op_);
    ring_.releaseRecv();
    ring_.commitSend();
  }

  void recvReduceCopySend(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recvReduceCopySend", p, true, true, true); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    if (p.count > 0) {
      exec_.reduce(outp(p), in(p), slot, p.count, type_, op_);
      if (op_ == ReduceOp::kAvg) exec_.finishAverage(outp(p), p.count, type_, size_);
    }
    ring_.releaseRecv();
    std::byte* out = ring_.acquireSend(bytes(p));
    if (p.count > 0) exec_.copy(out, outp(p), bytes(p));
    ring_.commitSend();
  }

  void recvCopySend(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recvCopySend", p, true, true, false); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    std::byte* out = ring_.acquireSend(bytes(p));
    if (p.count > 0) {
      exec_.copy(outp(p), slot, bytes(p));
      exec_.copy(out, slot, bytes(p));
    }
    ring_.releaseRecv();
    ring_.commitSend();
  }

  // A relay (the rooted chains): what arrived goes on into the next rank's slot untouched.
  void recvSend(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recvSend", p, true, true, false); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    std::byte* out = ring_.acquireSend(bytes(p));
    if (p.count > 0) exec_.copy(out, slot, bytes(p));
    ring_.releaseRecv();
    ring_.commitSend();
  }

  void recv(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recv", p, false, true, false); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    if (p.count > 0) exec_.copy(outp(p), slot, bytes(p));
    ring_.releaseRecv();
  }

  void recvReduceCopy(const Piece& p) {
    trace::StepScope scope(ring_.wait().trace,
                           [&] { return traced("recvReduceCopy", p, false, true, true); });
    const std::byte* slot = ring_.acquireRecv(bytes(p));
    if (p.count > 0) {
      exec_.reduce(outp(p), in(p), slot, p.count, type_, op_);
      if (op_ == ReduceOp::kAvg) exec_.finishAverage(outp(p), p.count, type_, size_);
    }
    ring_.releaseRecv();
  }

 private:
  trace::Step traced(const char* name, const Piece& p, bool sends, bool receives,
                     bool reduces) const {
    trace::Step step = ringStep(name, p, elementBytes_, sends ? ring_.nextPeer() : -1,
                                receives ? ring_.prevPeer() : -1, reduces, traceCount_, traceParts_,
                                sliceElements());
    nameBlock(step, p, traceBlocks_, sliceElements());
    return step;
  }
  size_t bytes(const Piece& p) const { return p.count * elementBytes_; }
  const std::byte* in(const Piece& p) const {
    return input_ + (p.offset - inputFirst_) * elementBytes_;
  }
  std::byte* outp(const Piece& p) const {
    return output_ + (p.offset - outputFirst_) * elementBytes_;
  }

  SlotRing& ring_;
  SlotExecutor& exec_;
  const std::byte* input_;
  std::byte* output_;
  const size_t inputFirst_;
  const size_t outputFirst_;
  const size_t elementBytes_;
  const DataType type_;
  const ReduceOp op_;
  const int size_;
  size_t traceCount_ = 0;  // traceChunks(); 0: not traced by chunk
  int traceParts_ = 0;
  std::span<const Piece> traceBlocks_;  // traceBlocks()
};

// `blocks` of `elementBytes`-byte elements as pieces of bytes (the chains move bytes).
std::vector<Piece> inBytes(std::span<const Piece> blocks, size_t elementBytes) {
  std::vector<Piece> bytes;
  bytes.reserve(blocks.size());
  for (const Piece& b : blocks) bytes.push_back({b.offset * elementBytes, b.count * elementBytes});
  return bytes;
}

// Each slice of `whole` to `step`; none for an empty one.
template <typename Step>
void forEachSliceOf(const Piece& whole, size_t sliceElements, Step&& step) {
  const size_t slices = (whole.count + sliceElements - 1) / sliceElements;
  for (size_t k = 0; k < slices; ++k) step(sliceOf(whole, k, sliceElements));
}

// Each slice of block `block` (elements of `blockCount` per rank, offsets counted over all
// blocks in rank order, as the root's buffer holds them) to `step`.
template <typename Step>
void forEachSlice(int block, size_t blockCount, size_t sliceElements, Step&& step) {
  forEachSliceOf(Piece{static_cast<size_t>(block) * blockCount, blockCount}, sliceElements, step);
}

}  // namespace

void slotRingAllreduce(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllreduceArgs& args, const WaitContext& wait) {
  SlotRing ring(group, memory, executor, wait);
  SlotPrims prims(ring, args.send, args.recv, elementSize(args.type), args.type, args.op,
                  group.size);
  prims.traceChunks(args.count, group.size);
  ringAllreduceSchedule(prims, group.rank, group.size, args.count, prims.sliceElements());
  ring.finish();
}

void slotRingBroadcast(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       std::byte* buffer, size_t count, size_t elementBytes, int root,
                       const WaitContext& wait) {
  SlotRing ring(group, memory, executor, wait);
  SlotPrims prims(ring, buffer, buffer, elementBytes, DataType::kUInt8, ReduceOp::kSum, group.size);
  prims.traceChunks(count, 1);
  chainBroadcastSchedule(prims, wrap(group.rank - root, group.size), group.size, count,
                         prims.sliceElements());
  ring.finish();
}

void slotRingReduceScatter(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                           const ReduceScatterArgs& args, const WaitContext& wait) {
  SlotRing ring(group, memory, executor, wait);
  const size_t own = static_cast<size_t>(group.rank) * args.recvCount;
  SlotPrims prims(ring, args.send, args.recv, elementSize(args.type), args.type, args.op,
                  group.size, own);
  prims.traceChunks(args.recvCount * group.size, group.size);
  ringReduceScatterSchedule(
      prims, group.rank, group.size,
      RingPieces{args.recvCount * group.size, group.size, prims.sliceElements()});
  ring.finish();
}

void slotRingAllgather(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllgatherArgs& args, const WaitContext& wait) {
  const size_t elementBytes = elementSize(args.type);
  const size_t blockBytes = args.sendCount * elementBytes;
  std::byte* own = args.recv + static_cast<size_t>(group.rank) * blockBytes;
  if (own != args.send && blockBytes > 0) executor.copy(own, args.send, blockBytes);
  SlotRing ring(group, memory, executor, wait);
  // Every block is sent from where it landed in recv: recv is input and output.
  SlotPrims prims(ring, args.recv, args.recv, elementBytes, args.type, ReduceOp::kSum, group.size);
  prims.traceChunks(args.sendCount * group.size, group.size);
  ringAllgatherSchedule(prims, group.rank, group.size,
                        RingPieces{args.sendCount * group.size, group.size, prims.sliceElements()});
  ring.finish();
}

void slotRingAllgatherv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                        const AllgathervArgs& args, const WaitContext& wait) {
  const size_t elementBytes = elementSize(args.type);
  const Piece own = args.blocks[group.rank];
  std::byte* ownAt = args.recv + own.offset * elementBytes;
  if (ownAt != args.send && own.count > 0)
    executor.copy(ownAt, args.send, own.count * elementBytes);
  SlotRing ring(group, memory, executor, wait);
  // As slotRingAllgather: every block is sent from where it landed in recv.
  SlotPrims prims(ring, args.recv, args.recv, elementBytes, args.type, ReduceOp::kSum, group.size);
  prims.traceBlocks(args.blocks);
  ringAllgatherSchedule(prims, group.rank, group.size,
                        BlockPieces{args.blocks, prims.sliceElements()});
  ring.finish();
}

void slotRingReduceScatterv(const Group& group, const SlotRingMemory& memory,
                            SlotExecutor& executor, const ReduceScattervArgs& args,
                            const WaitContext& wait) {
  SlotRing ring(group, memory, executor, wait);
  // recv holds this rank's block alone: its pieces land at their offset less the block's.
  SlotPrims prims(ring, args.send, args.recv, elementSize(args.type), args.type, args.op,
                  group.size, args.blocks[group.rank].offset);
  prims.traceBlocks(args.blocks);
  ringReduceScatterSchedule(prims, group.rank, group.size,
                            BlockPieces{args.blocks, prims.sliceElements()});
  ring.finish();
}

void slotRingReduce(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                    const ReduceArgs& args, const WaitContext& wait) {
  SlotRing ring(group, memory, executor, wait);
  // Partial results go straight into the next rank's slots: only the root writes its output.
  SlotPrims prims(ring, args.send, args.recv, elementSize(args.type), args.type, args.op,
                  group.size);
  prims.traceChunks(args.count, 1);
  chainReduceSchedule(prims, wrap(group.rank - args.root - 1, group.size), group.size, args.count,
                      prims.sliceElements());
  ring.finish();
}

// Chain gather towards the root along the ring; position p = rank - root - 1 (mod N): the rank
// after the root is 0, the root N-1. Every rank but the root sends its own block first, then
// passes on what arrives from the previous rank in the order it comes (that rank's own block,
// then the ones before it). From the first slice every link is busy; the link into the root
// carries (N-1)/N of the data, as a linear gather's root receives it.
void slotRingGather(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                    const GatherArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const size_t block = args.blockBytes;
  if (block == 0) return;  // the same count on every rank (the header check): nothing moves
  const int position = wrap(group.rank - args.root - 1, n);
  const auto rankAt = [&](int p) { return (args.root + 1 + p) % n; };
  const bool root = group.rank == args.root;
  std::byte* ownInRecv = root ? args.recv + static_cast<size_t>(group.rank) * block : nullptr;
  if (root && ownInRecv != args.send) executor.copy(ownInRecv, args.send, block);
  SlotRing ring(group, memory, executor, wait);
  // Bytes as elements; offsets over all blocks (the root's recv), this rank's send at its own.
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n, 0,
                  static_cast<size_t>(group.rank) * block);
  prims.traceChunks(block * static_cast<size_t>(n), n);
  const size_t slice = prims.sliceElements();
  if (root) {
    for (int p = n - 2; p >= 0; --p) {
      forEachSlice(rankAt(p), block, slice, [&](const Piece& s) { prims.recv(s); });
    }
  } else {
    forEachSlice(group.rank, block, slice, [&](const Piece& s) { prims.send(s); });
    for (int p = position - 1; p >= 0; --p) {
      forEachSlice(rankAt(p), block, slice, [&](const Piece& s) { prims.recvSend(s); });
    }
  }
  ring.finish();
}

// Chain scatter from the root along the ring; position p = rank - root (mod N). The root sends
// the blocks farthest first (position N-1's, then N-2's, ... 1's); each rank passes on the
// blocks for the ranks after it and keeps the last that reaches it, its own.
void slotRingScatter(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                     const ScatterArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const size_t block = args.blockBytes;
  if (block == 0) return;
  const int position = wrap(group.rank - args.root, n);
  const auto rankAt = [&](int p) { return (args.root + p) % n; };
  const bool root = position == 0;
  SlotRing ring(group, memory, executor, wait);
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n,
                  static_cast<size_t>(group.rank) * block);
  prims.traceChunks(block * static_cast<size_t>(n), n);
  const size_t slice = prims.sliceElements();
  if (root) {
    for (int p = n - 1; p >= 1; --p) {
      forEachSlice(rankAt(p), block, slice, [&](const Piece& s) { prims.send(s); });
    }
  } else {
    for (int p = n - 1; p > position; --p) {
      forEachSlice(rankAt(p), block, slice, [&](const Piece& s) { prims.recvSend(s); });
    }
    forEachSlice(group.rank, block, slice, [&](const Piece& s) { prims.recv(s); });
  }
  ring.finish();
  const std::byte* own = root ? args.send + static_cast<size_t>(group.rank) * block : nullptr;
  if (root && own != args.recv) executor.copy(args.recv, own, block);
}

// The chains of slotRingGather and slotRingScatter over blocks of their own size, in bytes: a
// piece's offset is where the block lies on the root (its recv, its send); elsewhere this
// rank's own block is read from send (gather-v) or written to recv (scatter-v) at offset 0.
void slotRingGatherv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                     const GathervArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - args.root - 1, n);
  const auto rankAt = [&](int p) { return (args.root + 1 + p) % n; };
  const std::vector<Piece> blocks = inBytes(args.blocks, args.elementBytes);
  const bool root = group.rank == args.root;
  const Piece own = blocks[group.rank];
  if (root && own.count > 0 && args.recv + own.offset != args.send) {
    executor.copy(args.recv + own.offset, args.send, own.count);
  }
  SlotRing ring(group, memory, executor, wait);
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n, 0,
                  own.offset);
  prims.traceBlocks(blocks);
  const size_t slice = prims.sliceElements();
  if (root) {
    for (int p = n - 2; p >= 0; --p) {
      forEachSliceOf(blocks[rankAt(p)], slice, [&](const Piece& s) { prims.recv(s); });
    }
  } else {
    forEachSliceOf(own, slice, [&](const Piece& s) { prims.send(s); });
    for (int p = position - 1; p >= 0; --p) {
      forEachSliceOf(blocks[rankAt(p)], slice, [&](const Piece& s) { prims.recvSend(s); });
    }
  }
  ring.finish();
}

void slotRingScatterv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                      const ScattervArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - args.root, n);
  const auto rankAt = [&](int p) { return (args.root + p) % n; };
  const std::vector<Piece> blocks = inBytes(args.blocks, args.elementBytes);
  const bool root = position == 0;
  const Piece own = blocks[group.rank];
  SlotRing ring(group, memory, executor, wait);
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n, own.offset);
  prims.traceBlocks(blocks);
  const size_t slice = prims.sliceElements();
  if (root) {
    for (int p = n - 1; p >= 1; --p) {
      forEachSliceOf(blocks[rankAt(p)], slice, [&](const Piece& s) { prims.send(s); });
    }
  } else {
    for (int p = n - 1; p > position; --p) {
      forEachSliceOf(blocks[rankAt(p)], slice, [&](const Piece& s) { prims.recvSend(s); });
    }
    forEachSliceOf(own, slice, [&](const Piece& s) { prims.recv(s); });
  }
  ring.finish();
  if (root && own.count > 0 && args.send + own.offset != args.recv) {
    executor.copy(args.recv, args.send + own.offset, own.count);
  }
}

// All-to-all along the ring, by distance: in phase d (1..N-1) every rank sends its block for
// the rank d after it, which travels d hops: sent, relayed d-1 times, received. Every rank does
// the same steps at once (as the ring all-gather does), so each link carries one slice a step;
// in all a link carries N(N-1)/2 blocks, where a pairwise exchange over links to every peer
// would carry N-1 (the slot ring has only the next rank's memory). Slice by slice within a
// phase, so the d hops of a slice pipeline with the next slice's.
void slotRingAllToAll(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                      const AllToAllArgs& args, const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.blockBytes;
  if (block == 0) return;
  std::byte* ownOut = args.recv + static_cast<size_t>(r) * block;
  const std::byte* ownIn = args.send + static_cast<size_t>(r) * block;
  if (ownOut != ownIn) executor.copy(ownOut, ownIn, block);
  SlotRing ring(group, memory, executor, wait);
  // Offsets over the N blocks of send (what this rank sends) and of recv (what it receives).
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n);
  prims.traceChunks(block * static_cast<size_t>(n), n);
  const size_t sliceBytes = prims.sliceElements();
  const size_t slices = (block + sliceBytes - 1) / sliceBytes;
  // (slotRingAllToAllv below runs the same steps over blocks of their own size.)
  for (int d = 1; d < n; ++d) {
    const Piece to{static_cast<size_t>(wrap(r + d, n)) * block, block};    // in send
    const Piece from{static_cast<size_t>(wrap(r - d, n)) * block, block};  // in recv
    for (size_t k = 0; k < slices; ++k) {
      const Piece out = sliceOf(to, k, sliceBytes);
      prims.send(out);
      for (int hop = 1; hop < d; ++hop) {  // the block rank r - hop sends to rank r - hop + d
        const Piece relayed{static_cast<size_t>(wrap(r - hop + d, n)) * block, block};
        prims.recvSend(sliceOf(relayed, k, sliceBytes));
      }
      prims.recv(sliceOf(from, k, sliceBytes));
    }
  }
  ring.finish();
}

// The by-distance steps of slotRingAllToAll over blocks of their own size. In phase d each link
// r -> r+1 carries, slice k after slice k, the blocks of the origins r, r-1, ..., r-d+1 (each
// to the rank d after its origin); both ends read every block's size from the matrix, so they
// skip the same empty pieces and agree on every message.
void slotRingAllToAllv(const Group& group, const SlotRingMemory& memory, SlotExecutor& executor,
                       const AllToAllvArgs& args, std::span<const size_t> sends,
                       const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t eb = args.elementBytes;
  // Bytes rank p sends rank q.
  const auto bytes = [&](int p, int q) {
    return sends[static_cast<size_t>(wrap(p, n)) * static_cast<size_t>(n) +
                 static_cast<size_t>(wrap(q, n))] *
           eb;
  };
  const Piece ownIn = args.sendBlocks[r];
  const Piece ownOut = args.recvBlocks[r];
  if (ownOut.count > 0 && args.recv + ownOut.offset * eb != args.send + ownIn.offset * eb) {
    executor.copy(args.recv + ownOut.offset * eb, args.send + ownIn.offset * eb, ownOut.count * eb);
  }
  SlotRing ring(group, memory, executor, wait);
  // Bytes as elements; offsets into send (what this rank sends) and recv (what it receives).
  SlotPrims prims(ring, args.send, args.recv, 1, DataType::kUInt8, ReduceOp::kSum, n);
  const size_t sliceBytes = prims.sliceElements();
  for (int d = 1; d < n; ++d) {
    size_t slices = 0;  // the most any block of this phase needs, the same on every rank
    for (int o = 0; o < n; ++o) {
      slices = std::max(slices, (bytes(o, o + d) + sliceBytes - 1) / sliceBytes);
    }
    const Piece to{args.sendBlocks[wrap(r + d, n)].offset * eb, bytes(r, r + d)};
    const Piece from{args.recvBlocks[wrap(r - d, n)].offset * eb, bytes(r - d, r)};
    for (size_t k = 0; k < slices; ++k) {
      if (const Piece out = sliceOf(to, k, sliceBytes); out.count > 0) prims.send(out);
      for (int hop = 1; hop < d; ++hop) {  // the block rank r - hop sends to rank r - hop + d
        const Piece relayed = sliceOf(Piece{0, bytes(r - hop, r - hop + d)}, k, sliceBytes);
        if (relayed.count > 0) prims.recvSend(relayed);
      }
      if (const Piece in = sliceOf(from, k, sliceBytes); in.count > 0) prims.recv(in);
    }
  }
  ring.finish();
}

}  // namespace ringlet::collectives
