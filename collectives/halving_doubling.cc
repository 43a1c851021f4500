// Reduce-scatter by recursive halving and all-gather by recursive doubling, equal blocks, any N:
// the two halves of Rabenseifner's all-reduce (rabenseifner.cc) as collectives of their own.
// p = the largest power of two <= N ranks run log2(p) exchanges with rank r ^ mask.
//
// Reduce-scatter, N = 4, input blocks B0..B3 on every rank (block r belongs to rank r):
//
//   mask 2: 0<->2, 1<->3   rank 0 sends its B2 B3 to 2 and reduces 2's B0 B1 into its own;
//                          1 and 3 likewise: 0 and 1 now hold B0 B1 summed over two ranks
//   mask 1: 0<->1, 2<->3   rank 0 sends B1 to 1 and reduces 1's B0: rank r holds block r
//
// A rank sends half of what it holds each step: (p-1)/p of its input in all, as the ring does,
// in log2(p) messages instead of N-1. All-gather is the mirror image: mask 1, then 2, each rank
// swaps everything it holds with its partner, so what it holds doubles each step:
//
//   mask 1: 0<->1, 2<->3   rank 0 sends B0, gets B1
//   mask 2: 0<->2, 1<->3   rank 0 sends B0 B1, gets B2 B3
//
// N not a power of two: rank r >= p folds into rank r-p, as in recursive doubling. The steps
// run over p chunks, chunk v holding block v and, when rank v has a folded partner, that
// partner's block v+p, laid out chunk by chunk so that every range of chunks is one piece
// (FoldedBlocks; N = 6: B0 B4 | B1 B5 | B2 | B3). Reduce-scatter: a folded rank sends its whole
// input to its partner, which reduces it in while laying out its own, and gets its block back at
// the end; the other ranks lay out their input. All-gather: a folded rank sends its block to its
// partner first and gets the whole result at the end; the partners lay the result back out in
// rank order.
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

void recursiveHalvingReduceScatter(const Group& group, const ReduceScatterArgs& args,
                                   size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t es = elementSize(args.type);
  const size_t block = args.recvCount * es;
  const FoldedBlocks layout{.blocks = n, .blockCount = args.recvCount};
  const int p = layout.p;
  if (block == 0) return;
  if (n == 1) {
    if (args.recv != args.send) std::memcpy(args.recv, args.send, block);
    return;
  }
  if (r >= p) {  // folded: hand the whole input over, get block r back
    Link& partner = group.link(r - p);
    sendSliced(partner, args.send, n * block, sliceBytes, wait);
    recvSliced(partner, args.recv, block, sliceBytes, wait);
    if (args.op == ReduceOp::kAvg) kernels::finishAverage(args.recv, args.recvCount, args.type, n);
    return;
  }
  // What the first step reads, laid out by chunk: the input itself when N = p.
  std::byte* work = scratchBytes(0, n * block);
  const std::byte* source = args.send;
  if (n != p) {
    if (r < n - p) {
      std::byte* folded = scratchBytes(1, n * block);
      recvSliced(group.link(r + p), folded, n * block, sliceBytes, wait);
      for (int b = 0; b < n; ++b) {
        kernels::reduce(work + layout.offsetOf(b) * es, args.send + b * block, folded + b * block,
                        args.recvCount, args.type, args.op);
      }
    } else {
      for (int b = 0; b < n; ++b) {
        std::memcpy(work + layout.offsetOf(b) * es, args.send + b * block, block);
      }
    }
    source = work;
  }
  int lo = 0;
  int hi = p;
  for (int mask = p / 2; mask >= 1; mask >>= 1) {
    Link& partner = group.link(r ^ mask);
    const int mid = lo + mask;
    const bool upper = (r & mask) != 0;
    const Piece give = upper ? layout.chunks(lo, mid) : layout.chunks(mid, hi);
    const Piece keep = upper ? layout.chunks(mid, hi) : layout.chunks(lo, mid);
    // The last step of a rank without a folded partner reduces block r straight into recv (in
    // place, recv is block r of the input, which no step reads after the first).
    std::byte* into = mask == 1 && r >= n - p ? args.recv : work + keep.offset * es;
    exchange({.out = &partner,
              .send = source + give.offset * es,
              .sendBytes = give.count * es,
              .in = &partner,
              .recv = into,
              .recvBytes = keep.count * es,
              .reduce = true,
              .local = source + keep.offset * es,
              .type = args.type,
              .op = args.op},
             sliceBytes, wait);
    source = work;
    (upper ? lo : hi) = mid;
  }
  if (r < n - p) {  // chunk r holds block r, then the folded partner's block r+p
    sendSliced(group.link(r + p), work + layout.offsetOf(r + p) * es, block, sliceBytes, wait);
    std::memcpy(args.recv, work + layout.offsetOf(r) * es, block);
  }
  if (args.op == ReduceOp::kAvg) kernels::finishAverage(args.recv, args.recvCount, args.type, n);
}

void recursiveDoublingAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                                const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t es = elementSize(args.type);
  const size_t block = args.sendCount * es;
  const size_t total = n * block;
  const FoldedBlocks layout{.blocks = n, .blockCount = args.sendCount};
  const int p = layout.p;
  if (block == 0) return;
  if (r >= p) {  // folded: hand the block over, get the whole result back
    Link& partner = group.link(r - p);
    sendSliced(partner, args.send, block, sliceBytes, wait);
    recvSliced(partner, args.recv, total, sliceBytes, wait, total >= kernels::kStreamingBytes);
    return;
  }
  // The chunks' buffer: recv itself when N = p (the layout is rank order).
  std::byte* work = n == p ? args.recv : scratchBytes(0, total);
  std::byte* mine = work + layout.offsetOf(r) * es;
  if (mine != args.send) std::memcpy(mine, args.send, block);
  if (r < n - p) {
    recvSliced(group.link(r + p), work + layout.offsetOf(r + p) * es, block, sliceBytes, wait);
  }
  int lo = r;
  int hi = r + 1;
  for (int mask = 1; mask < p; mask <<= 1) {
    Link& partner = group.link(r ^ mask);
    const bool upper = (r & mask) != 0;
    const Piece held = layout.chunks(lo, hi);
    const Piece theirs = upper ? layout.chunks(lo - mask, lo) : layout.chunks(hi, hi + mask);
    exchange({.out = &partner,
              .send = work + held.offset * es,
              .sendBytes = held.count * es,
              .in = &partner,
              .recv = work + theirs.offset * es,
              .recvBytes = theirs.count * es},
             sliceBytes, wait);
    (upper ? lo : hi) += upper ? -mask : mask;
  }
  if (n != p) {
    for (int b = 0; b < n; ++b) {
      std::memcpy(args.recv + b * block, work + layout.offsetOf(b) * es, block);
    }
    if (r < n - p) sendSliced(group.link(r + p), args.recv, total, sliceBytes, wait);
  }
}

}  // namespace ringlet::collectives
