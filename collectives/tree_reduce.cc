// Reduce by a binomial tree towards the root: ceil(log2 N) rounds of the whole buffer, for small
// messages (the chain of ring_gather_scatter.cc takes N-1 hops). With v = (rank - root) mod N,
// in round k a rank with bit k of v set sends what it holds to v - 2^k and is done; the others
// receive from v + 2^k (if it exists) and reduce. N = 6, root 0:
//
//   round 1  1->0  3->2  5->4
//   round 2  2->0          [4 has no partner 6]
//   round 3  4->0
//
// Leaves send their input as it is; inner ranks accumulate in scratch, the root in recv.
#include <cstring>
#include <functional>
#include <memory>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

void treeReduce(const Group& group, const ReduceArgs& args, size_t sliceBytes,
                const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t bytes = args.count * elementSize(args.type);
  const std::byte* held = args.send;  // what this rank passes on
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      sendSliced(group.link(wrap(group.rank - mask, n)), held, bytes, sliceBytes, wait,
                 afterFirstSend);
      return;
    }
    if (v + mask >= n) continue;
    // The first child's data is reduced with this rank's input straight into the accumulator
    // (no copy of the input first); later children's into the accumulator.
    const std::byte* local = held;
    if (held == args.send) {
      held = v != 0 ? scratchBytes(0, bytes) : args.recv;
    }
    Link& child = group.link(wrap(group.rank + mask, n));
    exchange({.out = &child,
              .in = &child,
              .recv = const_cast<std::byte*>(held),
              .recvBytes = bytes,
              .reduce = true,
              .local = local,
              .type = args.type,
              .op = args.op,
              // Ordinary stores, also for the root's result past the cache. Non-temporal ones
              // (from 16 MiB, as the ring's) took 1.2-1.7x the chain's time at 8 MiB, and on a
              // 2-core AMD EPYC VM, every algorithm timed in turns (ringlet-bench --vs-algos,
              // two alternating runs of each build), the tree at 32 MiB 3.5-5.4 ms with them
              // against 2.5-3.0 without at N = 2, 6.3-9.6 against 5.6-6.3 at N = 3, 8.8-9.8
              // against 7.1-7.7 at N = 4, and at 128 MiB 14.5-17.1 / 11.3-12.5, 46.9-49.6 /
              // 26.3-34.2, 46.0-46.1 / 43.8-44.6 (the chain beside it, ordinary stores: 12.1-15.4,
              // 24.1-27.8, 29.2-38.9). Where the root has more than one child it also reads the
              // accumulator back in the next round, which non-temporal stores had sent to memory.
              .streaming = false},
             sliceBytes, wait);
  }
  // The root.
  if (held != args.recv && bytes > 0) kernels::copy(args.recv, held, bytes);
  if (args.op == ReduceOp::kAvg) kernels::finishAverage(args.recv, args.count, args.type, n);
}

}  // namespace ringlet::collectives
