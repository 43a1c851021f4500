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
//
// The v-forms run the same code over blocks of their own size (FoldedOwnBlocks): a range of
// chunks is still one piece, so an exchange is as many messages as with equal blocks, and one
// with nothing either way costs none. N = 3, counts 4 0 1, reduce-scatter-v (chunks B0 B2 | B1):
//
//   fold in   2->0   all 5 elements of rank 2's input, reduced into rank 0's
//   mask 1    1->0   chunk 0 (B0 B2, 5 elements), reduced in; 0->1 chunk 1 (0 elements): none
//   fold out  0->2   B2 (1 element)
//
// Where the caller's blocks lie back to back in rank order (packed, as the equal blocks always
// are) the folded ranks' messages go from and to the caller's buffer, and for N = p the steps work
// in it; else through a copy.
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
namespace {

// Where the caller's blocks start when they lie back to back in rank order (`where(b)`: block b's
// element in the caller's buffer), else nullopt. Empty blocks may lie anywhere.
template <typename Layout, typename Where>
std::optional<size_t> packedAt(const Layout& layout, Where&& where) {
  std::optional<size_t> base;
  for (int b = 0; b < layout.blocks; ++b) {
    if (layout.countOf(b) == 0) continue;
    const size_t at = where(b);
    const size_t packed = layout.packedOffsetOf(b);
    if (!base) {
      if (at < packed) return std::nullopt;
      base = at - packed;
    } else if (at != *base + packed) {
      return std::nullopt;
    }
  }
  return base.value_or(0);
}

// Where block b lies in a buffer laid out packed in rank order, or folded.
enum class Order { kPacked, kFolded };
template <typename Layout>
size_t placeOf(const Layout& layout, Order order, int b) {
  return order == Order::kPacked ? layout.packedOffsetOf(b) : layout.offsetOf(b);
}

// Copies every block from the caller's places into `out`, laid out in `order`.
template <typename Layout, typename Where>
void gatherBlocks(const Layout& layout, Where&& where, const std::byte* caller, std::byte* out,
                  Order order, size_t es) {
  for (int b = 0; b < layout.blocks; ++b) {
    const size_t bytes = layout.countOf(b) * es;
    if (bytes > 0)
      kernels::copy(out + placeOf(layout, order, b) * es, caller + where(b) * es, bytes);
  }
}

// Copies every block from `in`, laid out in `order`, to the caller's places.
template <typename Layout, typename Where>
void scatterBlocks(const Layout& layout, Where&& where, const std::byte* in, std::byte* caller,
                   Order order, size_t es) {
  for (int b = 0; b < layout.blocks; ++b) {
    const size_t bytes = layout.countOf(b) * es;
    if (bytes > 0)
      kernels::copy(caller + where(b) * es, in + placeOf(layout, order, b) * es, bytes);
  }
}

// Trace mode, v-forms: the blocks as the steps' messages carry them, folded (the exchanges) and
// packed in rank order (what a folded rank sends or gets whole).
template <typename Layout>
struct Traces {
  std::vector<Piece> foldedBlocks;
  std::vector<Piece> packedBlocks;
  BlockTrace folded;
  BlockTrace packed;

  Traces(const Layout& layout, bool on, size_t es, size_t sliceBytes) {
    if (!on) return;
    for (int b = 0; b < layout.blocks; ++b) {
      foldedBlocks.push_back({layout.offsetOf(b), layout.countOf(b)});
      packedBlocks.push_back({layout.packedOffsetOf(b), layout.countOf(b)});
    }
    const size_t slice = std::max<size_t>(1, sliceBytes / es);
    folded = {.blocks = foldedBlocks, .elementBytes = es, .sliceElements = slice};
    packed = {.blocks = packedBlocks, .elementBytes = es, .sliceElements = slice};
  }
  // Null when off: the steps are traced whole, as the equal blocks' are.
  const BlockTrace* foldedOrNull() const { return foldedBlocks.empty() ? nullptr : &folded; }
  const BlockTrace* packedOrNull() const { return packedBlocks.empty() ? nullptr : &packed; }
};

// Rank r ends with block r (of `layout.countOf(r)` elements) in `recv`, reduced over all ranks;
// the caller's block b is element where(b) of `send`. `nameBlocks`: trace the blocks (v-forms).
template <typename Layout, typename Where>
void halvingReduceScatter(const Group& group, const Layout& layout, Where&& where,
                          const std::byte* send, std::byte* recv, DataType type, ReduceOp op,
                          size_t sliceBytes, const WaitContext& wait, bool nameBlocks) {
  const int n = group.size;
  const int r = group.rank;
  const size_t es = elementSize(type);
  const size_t total = layout.total() * es;
  const size_t own = layout.countOf(r) * es;
  const int p = layout.p;
  if (total == 0) return;
  if (n == 1) {
    if (recv != send + where(r) * es && own > 0) kernels::copy(recv, send + where(r) * es, own);
    return;
  }
  const Traces<Layout> traces(layout, nameBlocks && wait.trace != nullptr, es, sliceBytes);
  const std::optional<size_t> packed = packedAt(layout, where);
  if (r >= p) {  // folded: hand the whole input over, get block r back
    Link& partner = group.link(r - p);
    const std::byte* input = send + packed.value_or(0) * es;
    if (!packed) {
      std::byte* staged = scratchBytes(1, total);
      gatherBlocks(layout, where, send, staged, Order::kPacked, es);
      input = staged;
    }
    sendSliced(partner, input, total, sliceBytes, wait, traces.packedOrNull());
    recvSliced(partner, recv, own, sliceBytes, wait, false, traces.foldedOrNull(),
               layout.offsetOf(r));
    if (op == ReduceOp::kAvg) kernels::finishAverage(recv, layout.countOf(r), type, n);
    return;
  }
  // What the first step reads, laid out by chunk: the input itself when N = p and it is packed.
  std::byte* work = scratchBytes(0, total);
  const std::byte* source = work;
  if (n == p && packed) {
    source = send + *packed * es;
  } else if (r < n - p) {
    std::byte* folded = scratchBytes(1, total);
    recvSliced(group.link(r + p), folded, total, sliceBytes, wait, false, traces.packedOrNull());
    for (int b = 0; b < n; ++b) {
      if (layout.countOf(b) == 0) continue;
      kernels::reduce(work + layout.offsetOf(b) * es, send + where(b) * es,
                      folded + layout.packedOffsetOf(b) * es, layout.countOf(b), type, op);
    }
  } else {
    gatherBlocks(layout, where, send, work, Order::kFolded, es);
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
    std::byte* into = mask == 1 && r >= n - p ? recv : work + keep.offset * es;
    exchange({.out = &partner,
              .send = source + give.offset * es,
              .sendBytes = give.count * es,
              .in = &partner,
              .recv = into,
              .recvBytes = keep.count * es,
              .reduce = true,
              .local = source + keep.offset * es,
              .type = type,
              .op = op,
              .blocks = traces.foldedOrNull(),
              .sendAt = give.offset,
              .recvAt = keep.offset},
             sliceBytes, wait);
    source = work;
    (upper ? lo : hi) = mid;
  }
  if (r < n - p) {  // chunk r holds block r, then the folded partner's block r+p
    sendSliced(group.link(r + p), work + layout.offsetOf(r + p) * es, layout.countOf(r + p) * es,
               sliceBytes, wait, traces.foldedOrNull(), layout.offsetOf(r + p));
    if (own > 0) kernels::copy(recv, work + layout.offsetOf(r) * es, own);
  }
  if (op == ReduceOp::kAvg) kernels::finishAverage(recv, layout.countOf(r), type, n);
}

// Every rank ends with every block: rank b's at element where(b) of `recv`; `send` holds this
// rank's block (it may be that place of recv). `nameBlocks`: trace the blocks (v-forms).
template <typename Layout, typename Where>
void doublingAllgather(const Group& group, const Layout& layout, Where&& where,
                       const std::byte* send, std::byte* recv, DataType type, size_t sliceBytes,
                       const WaitContext& wait, bool nameBlocks,
                       const std::function<void()>* afterFirstSend = nullptr) {
  const int n = group.size;
  const int r = group.rank;
  const size_t es = elementSize(type);
  const size_t total = layout.total() * es;
  const size_t own = layout.countOf(r) * es;
  const int p = layout.p;
  if (total == 0) return;
  const Traces<Layout> traces(layout, nameBlocks && wait.trace != nullptr, es, sliceBytes);
  // The whole result packed in rank order: a folded rank's last message.
  const std::optional<size_t> packed = packedAt(layout, where);
  if (r >= p) {  // folded: hand the block over, get the whole result back
    Link& partner = group.link(r - p);
    sendSliced(partner, send, own, sliceBytes, wait, traces.foldedOrNull(), layout.offsetOf(r));
    std::byte* result = packed ? recv + *packed * es : scratchBytes(1, total);
    recvSliced(partner, result, total, sliceBytes, wait,
               packed && total >= kernels::kStreamingBytes, traces.packedOrNull());
    if (!packed) scatterBlocks(layout, where, result, recv, Order::kPacked, es);
    return;
  }
  // The chunks' buffer: recv itself when N = p and the blocks are packed (the layout is rank
  // order).
  const bool direct = n == p && packed;
  std::byte* work = direct ? recv + *packed * es : scratchBytes(0, total);
  std::byte* mine = work + layout.offsetOf(r) * es;
  const std::function<void()> copyOwn = [&] { copyOwnBlock(mine, send, own, total); };
  // Where the first round sends this rank's own block from `send` (below), the copy into `mine`
  // comes once that round has received, while the partner still reads the block: with uneven
  // blocks the rank with the larger one lent it only after copying it, and its partner waited
  // that long. N = 2 all-gather-v (ramp blocks), 256 KiB-64 MiB, medians of 5 rounds, two runs:
  // 0.68-0.91x Open MPI's time against 0.96-1.21x with the copy first; even blocks 0.83-1.02x
  // against 0.82-1.04x.
  const bool ownFirst = p > 1 && r >= n - p && layout.chunks(r, r + 1).count * es == own;
  if (!ownFirst) copyOwn();
  if (r < n - p) {
    recvSliced(group.link(r + p), work + layout.offsetOf(r + p) * es, layout.countOf(r + p) * es,
               sliceBytes, wait, false, traces.foldedOrNull(), layout.offsetOf(r + p));
  }
  int lo = r;
  int hi = r + 1;
  for (int mask = 1; mask < p; mask <<= 1) {
    Link& partner = group.link(r ^ mask);
    const bool upper = (r & mask) != 0;
    const Piece held = layout.chunks(lo, hi);
    const Piece theirs = upper ? layout.chunks(lo - mask, lo) : layout.chunks(hi, hi + mask);
    // The first round sends this rank's own block: from `send`, whose bytes the partner may
    // read itself (Link::lend); this rank copies them into `mine` meanwhile (ownFirst).
    const bool ownOnly = mask == 1 && r >= n - p && held.count * es == own;
    exchange({.out = &partner,
              .send = ownOnly ? send : work + held.offset * es,
              .sendBytes = held.count * es,
              .in = &partner,
              .recv = work + theirs.offset * es,
              .recvBytes = theirs.count * es,
              .lend = ownOnly,
              .blocks = traces.foldedOrNull(),
              .sendAt = held.offset,
              .recvAt = theirs.offset,
              .afterFirstSend = mask == 1 ? afterFirstSend : nullptr,
              .whileRead = ownOnly ? &copyOwn : nullptr},
             sliceBytes, wait);
    (upper ? lo : hi) += upper ? -mask : mask;
  }
  if (direct) return;
  scatterBlocks(layout, where, work, recv, Order::kFolded, es);
  if (r < n - p) {
    const std::byte* result = recv + packed.value_or(0) * es;
    if (!packed) {
      std::byte* staged = scratchBytes(1, total);
      gatherBlocks(layout, where, recv, staged, Order::kPacked, es);
      result = staged;
    }
    sendSliced(group.link(r + p), result, total, sliceBytes, wait, traces.packedOrNull());
  }
}

}  // namespace

void recursiveHalvingReduceScatter(const Group& group, const ReduceScatterArgs& args,
                                   size_t sliceBytes, const WaitContext& wait) {
  const FoldedBlocks layout{.blocks = group.size, .blockCount = args.recvCount};
  halvingReduceScatter(
      group, layout, [&](int b) { return layout.packedOffsetOf(b); }, args.send, args.recv,
      args.type, args.op, sliceBytes, wait, false);
}

void recursiveHalvingReduceScatterv(const Group& group, const ReduceScattervArgs& args,
                                    size_t sliceBytes, const WaitContext& wait) {
  const FoldedOwnBlocks layout(args.blocks);
  halvingReduceScatter(
      group, layout, [&](int b) { return args.blocks[b].offset; }, args.send, args.recv, args.type,
      args.op, sliceBytes, wait, true);
}

void recursiveDoublingAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                                const WaitContext& wait,
                                const std::function<void()>& afterFirstSend) {
  const FoldedBlocks layout{.blocks = group.size, .blockCount = args.sendCount};
  doublingAllgather(
      group, layout, [&](int b) { return layout.packedOffsetOf(b); }, args.send, args.recv,
      args.type, sliceBytes, wait, false, &afterFirstSend);
}

void recursiveDoublingAllgatherv(const Group& group, const AllgathervArgs& args, size_t sliceBytes,
                                 const WaitContext& wait,
                                 const std::function<void()>& afterFirstSend) {
  const FoldedOwnBlocks layout(args.blocks);
  doublingAllgather(
      group, layout, [&](int b) { return args.blocks[b].offset; }, args.send, args.recv, args.type,
      sliceBytes, wait, true, &afterFirstSend);
}

}  // namespace ringlet::collectives
