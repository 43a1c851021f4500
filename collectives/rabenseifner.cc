// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by
// recursive doubling, over p = the largest power of two <= N ranks. The buffer is cut into p
// chunks. Halving: with mask = p/2, p/4, .. 1, rank r and r^mask split the chunks they share;
// each sends the half it gives up and reduces the half it keeps. Afterwards rank r owns chunk r,
// fully reduced (only there, so every rank ends with the same bits). Doubling: the same pairs in
// reverse order swap what they own. N = 4:
//
//   halving  mask 2: 0<->2, 1<->3 (0,1 keep chunks 0-1; 2,3 keep 2-3)
//            mask 1: 0<->1, 2<->3 (rank r keeps chunk r)
//   doubling mask 1: 0<->1, 2<->3 (each holds 2 chunks)
//            mask 2: 0<->2, 1<->3 (each holds all 4)
//
// The N-p extra ranks fold their input into rank r-p first and get the result back at the end,
// as in recursive doubling. 2 log2(p) steps moving 2(p-1)/p of the buffer: between the
// latency of recursive doubling and the bandwidth of the ring.
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

void rabenseifnerAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                           const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t es = elementSize(args.type);
  const size_t bytes = args.count * es;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::byte* out = args.recv;
  // What the next step reads: the caller's input until a reduction has landed in `out`. No copy
  // of the input into `out` first: the first step reduces from the input (Exchange::local). That
  // copy, of the whole buffer, took N = 2 to 1.5-1.9x the ring's time at 4-16 MiB.
  const std::byte* source = args.send;

  if (r >= p) {  // extra rank: hand the input over, get the result back
    Link& link = group.link(r - p);
    sendSliced(link, args.send, bytes, sliceBytes, wait);
    recvSliced(link, out, bytes, sliceBytes, wait);
    return;
  }
  if (r < n - p) {
    Link& extra = group.link(r + p);
    exchange({.out = &extra,
              .in = &extra,
              .recv = out,
              .recvBytes = bytes,
              .reduce = true,
              .local = source,
              .type = args.type,
              .op = args.op},
             sliceBytes, wait);
    source = out;
  }
  // Chunks [first, last) as a byte range of the buffer.
  auto range = [&](int first, int last) {
    const size_t begin = evenChunk(args.count, p, first).offset;
    const size_t end = last == p ? args.count : evenChunk(args.count, p, last).offset;
    return Piece{begin * es, (end - begin) * es};
  };
  int lo = 0;
  int hi = p;
  for (int mask = p / 2; mask >= 1; mask >>= 1) {
    Link& partner = group.link(r ^ mask);
    const int mid = lo + mask;
    const bool upper = (r & mask) != 0;
    const Piece give = upper ? range(lo, mid) : range(mid, hi);
    const Piece keep = upper ? range(mid, hi) : range(lo, mid);
    exchange({.out = &partner,
              .send = source + give.offset,
              .sendBytes = give.count,
              .in = &partner,
              .recv = out + keep.offset,
              .recvBytes = keep.count,
              .reduce = true,
              .local = source + keep.offset,
              .type = args.type,
              .op = args.op},
             sliceBytes, wait);
    source = out;
    (upper ? lo : hi) = mid;
  }
  if (source != out && bytes > 0) std::memcpy(out, source, bytes);  // one rank: no step ran
  if (args.op == ReduceOp::kAvg) {
    const Piece own = range(lo, hi);
    kernels::finishAverage(out + own.offset, own.count / es, args.type, n);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    Link& partner = group.link(r ^ mask);
    const bool upper = (r & mask) != 0;
    const Piece mine = range(lo, hi);
    const Piece theirs = upper ? range(lo - mask, lo) : range(hi, hi + mask);
    exchange({.out = &partner,
              .send = out + mine.offset,
              .sendBytes = mine.count,
              .in = &partner,
              .recv = out + theirs.offset,
              .recvBytes = theirs.count},
             sliceBytes, wait);
    (upper ? lo : hi) += upper ? -mask : mask;
  }
  if (r < n - p) sendSliced(group.link(r + p), out, bytes, sliceBytes, wait);
}

}  // namespace ringlet::collectives
