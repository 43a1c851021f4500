// Recursive-doubling all-reduce for small messages.
//
// With p the largest power of two <= N and the other N-p ranks "extra":
//   fold:    extra rank p+i sends its input to rank i, which adds it (i < N-p).
//   double:  for mask = 1, 2, 4, ... < p, rank r swaps its partial result with rank r^mask and
//            adds: after log2(p) rounds every one of the p ranks holds the full result.
//   unfold:  rank i sends the result back to extra rank p+i.
// N = 6 (p = 4): fold 4->0, 5->1; rounds (0,1)(2,3) then (0,2)(1,3); unfold 0->4, 1->5.
//
// Every combine is "mine + theirs" on one side and "theirs + mine" on the other, which IEEE
// arithmetic makes bit-identical, so all ranks end with the same bits (like the ring).
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/reduce.h"

namespace ringlet::collectives {

void recursiveDoublingAllreduce(const Group& group, const AllreduceArgs& args,
                                const WaitContext& wait,
                                const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int r = group.rank;
  const size_t bytes = args.count * elementSize(args.type);
  int p = 1;
  while (p * 2 <= n) p *= 2;

  std::byte* out = args.recv;
  if (out != args.send && bytes > 0) std::memcpy(out, args.send, bytes);

  // Exchange `out` with `peer` and combine: send first, then receive and reduce. The send must
  // have left `out` (flush) before the reduction overwrites it.
  bool sentOnce = false;
  auto sent = [&] {
    if (!sentOnce && afterFirstSend) afterFirstSend();
    sentOnce = true;
  };
  auto exchange = [&](int peer) {
    Link& link = group.link(peer);
    sendFrom(link, out, bytes, wait);
    sent();
    const std::byte* in = link.recv(bytes, wait);
    link.flush(wait);
    reduce(out, out, in, args.count, args.type, args.op);
    link.release();
  };

  if (r >= p) {  // extra rank: hand the input to rank r-p, get the result back
    Link& link = group.link(r - p);
    sendFrom(link, out, bytes, wait);
    sent();
    link.flush(wait);
    link.recvInto(out, bytes, wait);
    return;
  }
  if (r < n - p) {  // fold the extra rank's input in
    Link& link = group.link(r + p);
    const std::byte* in = link.recv(bytes, wait);
    reduce(out, out, in, args.count, args.type, args.op);
    link.release();
  }
  for (int mask = 1; mask < p; mask <<= 1) exchange(r ^ mask);
  if (args.op == ReduceOp::kAvg) finishAverage(out, args.count, args.type, n);
  if (r < n - p) {
    Link& link = group.link(r + p);
    sendFrom(link, out, bytes, wait);
    sent();
    link.flush(wait);
  }
  if (!sentOnce && afterFirstSend) afterFirstSend();
}

}  // namespace ringlet::collectives
