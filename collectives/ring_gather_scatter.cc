// Ring reduce-scatter, ring all-gather and chain reduce over transport Links: the schedules of
// ring_schedule.h (where each is drawn for N = 4) run by the host primitives (link_prims.h).
//
// The v-forms run the same schedules over blocks of any size (BlockPieces), each cut into slices
// of the same size, so a large block is pipelined and small ones are done early. All-gather-v,
// N = 3, counts 5 0 2, slices of 2 elements (a0 a1 a2: rank 0's block; c0: rank 2's; "<>":
// received and passed on):
//
//   slice   rank 0          rank 1          rank 2
//   0       a0>  c0<>       a0<>  c0<       c0>  a0<
//   1       a1>             a1<>            a1<
//   2       a2>             a2<>            a2<
//
// Rank 1's empty block never moves, and nothing moves for a block's slices past its end: every
// link carries each block once, in as many messages as it has slices. Reduce-scatter-v is the
// mirror image: slice k of block r starts at rank r+1, gathers each rank's input on its way
// round, and ends reduced at rank r.
#include <algorithm>
#include <cstring>
#include <memory>

#include "collectives/collectives.h"
#include "collectives/link_prims.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"
#include "src/trace.h"

namespace ringlet::collectives {
namespace {

size_t sliceElements(size_t sliceBytes, size_t elementBytes) {
  return std::max<size_t>(1, sliceBytes / elementBytes);
}

// Memory for partial results that a rank passes on but does not keep (over TCP a send leaves
// from caller memory, which must stay unchanged until the flush).
std::byte* scratch(size_t bytes) { return scratchBytes(0, bytes); }

// Trace mode: each step names its ring chunk, or its v-form block, and slice.
void traceLayout(LinkPrims& prims, const RingPieces& piece) {
  prims.traceChunks(piece.count, piece.size, piece.sliceElements);
}
void traceLayout(LinkPrims& prims, const BlockPieces& piece) {
  prims.traceBlocks(piece.blocks, piece.sliceElements);
}

// The reduce-scatter of ring_schedule.h over `piece` (even chunks or the v-form's blocks): this
// rank's chunk `own` ends reduced in `recv`. `extent`: elements from the start of send that the
// chunks span.
template <typename Pieces>
void reduceScatterRing(const Group& group, const std::byte* send, std::byte* recv, Piece own,
                       size_t extent, DataType type, ReduceOp op, const Pieces& piece,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const size_t elementBytes = elementSize(type);
  // Partial sums of the other ranks' blocks pass through memory of the whole size (over TCP a
  // send leaves from it); this rank's block is reduced straight into recv (which may be this
  // rank's block of send: in place, element by element). Two ranks pass nothing on.
  std::byte* partial = group.size > 2 ? scratch(extent * elementBytes) : recv;
  // Ordinary stores: non-temporal ones into recv were slower at every size from 8 to 64 MiB
  // (N = 2, 1.07-1.4x the time).
  LinkPrims prims(group.prev(), group.next(), send, partial, elementBytes, type, op, group.size,
                  /*streaming=*/false, wait);
  prims.finalOutputAt(recv, own.offset);
  prims.afterFirstSend(afterFirstSend);
  traceLayout(prims, piece);
  ringReduceScatterSchedule(prims, group.rank, group.size, piece);
  group.next().flush(wait);
}

// The all-gather of ring_schedule.h over `piece`: recv is both input and output, so every chunk
// is sent on from where it landed. `own`: this rank's chunk; `total`: elements received in all.
// The same schedule over shared memory with every message lent (Link::lend): each block is read
// by the next rank straight out of where it lies (this rank's send buffer for its own block, its
// recv buffer for the blocks it passes on), one copy per hop instead of the slots' copy in and
// copy out. The messages are the slot path's, in the same order, so a rank on either path
// talks to one on the other. Returns false where it does not apply (fewer than three ranks, a
// link that does not share memory or lend, a slice larger than a lent message) and from
// kernels::kStreamingBytes of result on: from there the data is in no cache, and the slots'
// two copies, made side by side, beat the reader's one, as for the lent gather and scatter.
// 3 and 4 ranks on 2 cores, medians of 3 rounds, two runs, time / Open MPI's: all-gather
// 1-4 MiB 0.52-0.55x (N = 3) against 0.66-0.89x through the slots, 0.92-1.15x (N = 4) against
// 1.08-1.43x; all-gather-v 1 MiB 0.72-0.91x against 1.07-1.41x; at 16-64 MiB 0.85-1.60x against
// 0.61-1.37x (not used there).
template <typename Pieces>
bool allgatherRingLent(const Group& group, const std::byte* send, std::byte* recv, Piece own,
                       size_t total, DataType type, const Pieces& piece, const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  Link& next = group.next();
  Link& prev = group.prev();
  const size_t eb = elementSize(type);
  if (n < 3 || !next.sharesMemory() || !prev.sharesMemory() || next.directBytes() == 0 ||
      next.lendsForAllToAllOnly() || total * eb >= kernels::kStreamingBytes) {
    return false;
  }
  const size_t largest = std::min(next.directBytes(), next.maxMessageBytes());
  for (int c = 0; c < n; ++c) {
    if (piece(c, 0).count * eb > largest) return false;
  }
  std::byte* mine = recv + own.offset * eb;
  if (send != mine && overlaps(send, own.count * eb, recv, total * eb)) return false;
  auto at = [&](const Piece& p) { return recv + p.offset * eb; };
  auto step = [&](const char* name, int chunk, size_t k, const Piece& p, bool sends,
                  bool receives) {
    return trace::Step{.name = name,
                       .to = sends ? next.peer() : -1,
                       .from = receives ? prev.peer() : -1,
                       .chunk = chunk,
                       .slice = static_cast<int64_t>(k),
                       .offset = p.offset * eb,
                       .bytes = p.count * eb};
  };
  for (size_t k = 0; k < piece.slices(); ++k) {
    if (const Piece p = piece(r, k); p.count > 0) {
      trace::StepScope scope(wait.trace, [&] { return step("send", r, k, p, true, false); });
      next.lend(send + (p.offset - own.offset) * eb, p.count * eb, wait);
    }
    for (int s = 1; s <= n - 2; ++s) {
      if (const Piece p = piece(r - s, k); p.count > 0) {
        trace::StepScope scope(
            wait.trace, [&] { return step("recvCopySend", wrap(r - s, n), k, p, true, true); });
        prev.recvInto(at(p), p.count * eb, wait);
        next.lend(at(p), p.count * eb, wait);
      }
    }
    if (const Piece p = piece(r + 1, k); p.count > 0) {
      trace::StepScope scope(wait.trace,
                             [&] { return step("recv", wrap(r + 1, n), k, p, false, true); });
      prev.recvInto(at(p), p.count * eb, wait);
    }
  }
  copyOwnBlock(mine, send, own.count * eb, total * eb);  // while the next rank reads the last
  next.flush(wait);
  return true;
}

template <typename Pieces>
void allgatherRing(const Group& group, const std::byte* send, std::byte* recv, Piece own,
                   size_t total, DataType type, const Pieces& piece, const WaitContext& wait) {
  if (allgatherRingLent(group, send, recv, own, total, type, piece, wait)) return;
  const size_t elementBytes = elementSize(type);
  std::byte* mine = recv + own.offset * elementBytes;
  copyOwnBlock(mine, send, own.count * elementBytes, total * elementBytes);
  // Non-temporal stores from twice the usual size: at 8 MiB (N = 2) they took 1.3x the time of
  // ordinary ones, at 16 MiB about the same, at 32 MiB less.
  LinkPrims prims(group.prev(), group.next(), recv, recv, elementBytes, type, ReduceOp::kSum, 1,
                  total * elementBytes >= 2 * kernels::kStreamingBytes, wait);
  traceLayout(prims, piece);
  ringAllgatherSchedule(prims, group.rank, group.size, piece);
  group.next().flush(wait);
}

size_t extentOf(std::span<const Piece> blocks) {
  size_t end = 0;
  for (const Piece& b : blocks) {
    if (b.count > 0) end = std::max(end, b.offset + b.count);
  }
  return end;
}

}  // namespace

void ringReduceScatter(const Group& group, const ReduceScatterArgs& args, size_t sliceBytes,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const size_t total = args.recvCount * group.size;
  const RingPieces piece{total, group.size, sliceElements(sliceBytes, elementSize(args.type))};
  reduceScatterRing(group, args.send, args.recv, evenChunk(total, group.size, group.rank), total,
                    args.type, args.op, piece, wait, afterFirstSend);
}

void ringReduceScatterv(const Group& group, const ReduceScattervArgs& args, size_t sliceBytes,
                        const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const BlockPieces piece{args.blocks, sliceElements(sliceBytes, elementSize(args.type))};
  reduceScatterRing(group, args.send, args.recv, args.blocks[group.rank], extentOf(args.blocks),
                    args.type, args.op, piece, wait, afterFirstSend);
}

void ringAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  const size_t total = args.sendCount * group.size;
  const RingPieces piece{total, group.size, sliceElements(sliceBytes, elementSize(args.type))};
  allgatherRing(group, args.send, args.recv, evenChunk(total, group.size, group.rank), total,
                args.type, piece, wait);
}

void ringAllgatherv(const Group& group, const AllgathervArgs& args, size_t sliceBytes,
                    const WaitContext& wait) {
  const BlockPieces piece{args.blocks, sliceElements(sliceBytes, elementSize(args.type))};
  size_t total = 0;
  for (const Piece& b : args.blocks) total += b.count;
  allgatherRing(group, args.send, args.recv, args.blocks[group.rank], total, args.type, piece,
                wait);
}

void chainReduce(const Group& group, const ReduceArgs& args, size_t sliceBytes,
                 const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - args.root - 1, n);  // n-1 = the root
  const size_t elementBytes = elementSize(args.type);
  const size_t bytes = args.count * elementBytes;
  std::byte* output = args.recv;
  if (position != n - 1) output = scratch(bytes);  // partial sums pass through; the root keeps

  LinkPrims prims(group.prev(), group.next(), args.send, output, elementBytes, args.type, args.op,
                  n, /*streaming=*/false, wait);
  prims.traceChunks(args.count, 1, sliceElements(sliceBytes, elementBytes));
  chainReduceSchedule(prims, position, n, args.count, sliceElements(sliceBytes, elementBytes));
  if (position != n - 1) group.next().flush(wait);
}

}  // namespace ringlet::collectives
