#pragma once
// The primitives of the ring and chain schedules (ring_schedule.h) on host memory over two
// Links, prev and next: what one step does with one piece, whatever the transport.
//
//   send(p)                input -> next
//   recvReduceSend(p)      prev + input -> next
//   recvReduceCopySend(p)  prev + input -> output (final; averaged for kAvg) -> next
//   recvCopySend(p)        prev -> output -> next
//   recv(p)                prev -> output
//   recvReduceCopy(p)      prev + input -> output (final; averaged for kAvg)
//
// Zero copy: a receive reduces straight out of the transport's buffer (Link::recv), and a send
// goes straight into the transport's slot when it has one or straight from caller memory
// otherwise. This is the one place that asks a link for a capability, sharesMemory(): over shared
// memory the final reduction writes the next rank's slot and the output in one pass, and a
// forwarded slot is read once, into the output and the next slot. Large buffers get their output
// written with non-temporal stores, since nothing reads it again during the call.

#include <cstddef>
#include <functional>
#include <span>
#include <utility>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "src/trace.h"

namespace ringlet::collectives {

// The trace record of a ring primitive `name` on piece `p` (elements of `elementBytes`): the rank
// it sends to and the one it receives from (-1: none), its bytes, and where the pieces are
// slices of `slice` elements of `parts` even chunks of `count` (parts 0: not), its chunk and
// slice. The host ring's (LinkPrims) and the slot ring's (slot_ring.cc) alike.
inline trace::Step ringStep(const char* name, const Piece& p, size_t elementBytes, int to, int from,
                            bool reduces, size_t count, int parts, size_t slice) {
  trace::Step step{.name = name,
                   .to = to,
                   .from = from,
                   .offset = p.offset * elementBytes,
                   .bytes = p.count * elementBytes,
                   .reduces = reduces};
  if (parts > 0) {
    step.chunk = chunkHolding(count, parts, p.offset);
    step.slice =
        static_cast<int64_t>((p.offset - evenChunk(count, parts, step.chunk).offset) / slice);
  }
  return step;
}

// Trace mode, v-forms: names the block of `blocks` (every rank's, not overlapping) that piece `p`
// lies in as the step's chunk, and its slice of `slice` elements counted from the block's start.
inline void nameBlock(trace::Step& step, const Piece& p, std::span<const Piece> blocks,
                      size_t slice) {
  for (size_t b = 0; b < blocks.size(); ++b) {
    const Piece& block = blocks[b];
    if (block.count > 0 && p.offset >= block.offset && p.offset < block.offset + block.count) {
      step.chunk = static_cast<int>(b);
      step.slice = static_cast<int64_t>((p.offset - block.offset) / slice);
      return;
    }
  }
}

class LinkPrims {
 public:
  // `input` and `output` hold the whole buffer (they may be equal); pieces count elements of
  // `elementBytes`. `divisor` finishes kAvg in recvReduceCopySend. `streaming`: write outputs
  // with non-temporal stores.
  LinkPrims(Link& prev, Link& next, const std::byte* input, std::byte* output, size_t elementBytes,
            DataType type, ReduceOp op, int divisor, bool streaming, const WaitContext& wait);

  void send(const Piece& p);
  void recvReduceSend(const Piece& p);
  void recvReduceCopySend(const Piece& p);
  void recvCopySend(const Piece& p);
  void recv(const Piece& p);
  void recvReduceCopy(const Piece& p);

  // recvReduceCopy writes `out` instead of the output: the piece at element `first` of the
  // buffer lands at out[0] (reduce-scatter: only this rank's chunk is kept, straight in the
  // caller's buffer, so partial sums passed on need no memory of the caller's size).
  void finalOutputAt(std::byte* out, size_t first) {
    finalOutput_ = out;
    finalFirst_ = first;
  }

  // A two-rank call whose ranks send before they check the peer's call header
  // (OpHeader::earlyData): `hook` (when set) runs once, right after the first message to the
  // next rank, or before the first receive where none went first. `hook` outlives the calls.
  void afterFirstSend(const std::function<void()>& hook) {
    afterFirstSend_ = hook ? &hook : nullptr;
  }

  // Trace mode: the pieces are slices of `slice` elements of `chunks` even chunks of `count`
  // (RingPieces), so that each traced step names its chunk and slice.
  void traceChunks(size_t count, int chunks, size_t slice);
  // Trace mode, v-forms: the pieces are slices of `slice` elements of `blocks` (BlockPieces), so
  // that each traced step names its block (as `chunk`) and slice. `blocks` outlives the calls.
  void traceBlocks(std::span<const Piece> blocks, size_t slice);

 private:
  size_t bytes(const Piece& p) const { return p.count * elementBytes_; }
  const std::byte* input(const Piece& p) const { return input_ + p.offset * elementBytes_; }
  std::byte* output(const Piece& p) const { return output_ + p.offset * elementBytes_; }
  std::byte* finalOutput(const Piece& p) const {
    return finalOutput_ == nullptr ? output(p)
                                   : finalOutput_ + (p.offset - finalFirst_) * elementBytes_;
  }
  void copyOut(std::byte* dst, const std::byte* src, size_t n) const;
  // Runs afterFirstSend's hook if it has not run: after a send, before a receive.
  void settleFirstSend() {
    if (afterFirstSend_ != nullptr) (*std::exchange(afterFirstSend_, nullptr))();
  }
  // The trace record of primitive `name` on `p`.
  trace::Step traced(const char* name, const Piece& p, bool sends, bool receives,
                     bool reduces) const;

  Link& prev_;
  Link& next_;
  const std::byte* input_;
  std::byte* output_;
  const size_t elementBytes_;
  const DataType type_;
  const ReduceOp op_;
  const int divisor_;
  const bool streaming_;
  const WaitContext& wait_;
  std::byte* finalOutput_ = nullptr;                       // finalOutputAt()
  const std::function<void()>* afterFirstSend_ = nullptr;  // afterFirstSend()
  size_t finalFirst_ = 0;
  size_t traceCount_ = 0;  // traceChunks(); 0: the pieces are not ring chunks
  int traceParts_ = 0;
  size_t traceSlice_ = 0;
  std::span<const Piece> traceBlocks_;  // traceBlocks()
};

}  // namespace ringlet::collectives
