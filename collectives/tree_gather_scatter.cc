// Gather and scatter by binomial trees rooted at the root: ceil(log2 N) rounds, each rank sends
// or receives its whole subtree's blocks in one message stream. With v = (rank - root) mod N, a
// rank's subtree is the relative ranks v .. v + 2^k - 1 (cut at N), where 2^k is v's lowest set
// bit (N for the root). N = 6, root 0:
//
//   gather:  round 1  1->0  3->2  5->4      (each sends its own block)
//            round 2  2->0 (blocks 2,3)  [4 holds 4,5]
//            round 3  4->0 (blocks 4,5)
//   scatter: the same rounds in reverse order and direction.
//
// Blocks travel in relative order (block of relative rank u at u - v); the root rotates them into
// or out of rank order. Every link used is rank +- 2^k, which the communicator always connects.
#include <cstring>
#include <memory>

#include "collectives/chunking.h"
#include "collectives/collectives.h"

namespace ringlet::collectives {
void treeGather(const Group& group, const GatherArgs& args, size_t sliceBytes,
                const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t block = args.blockBytes;
  // This rank's subtree, in relative order; the root's is everything.
  auto held = std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(block * n, 1));
  if (block > 0) std::memcpy(held.get(), args.send, block);
  int have = 1;  // blocks held
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      sendSliced(group.link(wrap(group.rank - mask, n)), held.get(), have * block, sliceBytes,
                 wait);
      return;
    }
    if (v + mask < n) {
      const int blocks = std::min(mask, n - v - mask);
      recvSliced(group.link(wrap(group.rank + mask, n)), held.get() + have * block, blocks * block,
                 sliceBytes, wait);
      have += blocks;
    }
  }
  // The root: relative block u belongs to rank root + u.
  for (int u = 0; u < n && block > 0; ++u) {
    std::memcpy(args.recv + wrap(args.root + u, n) * block, held.get() + u * block, block);
  }
}

void treeScatter(const Group& group, const ScatterArgs& args, size_t sliceBytes,
                 const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t block = args.blockBytes;
  auto held = std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(block * n, 1));
  int mask = 1;
  if (v == 0) {  // the root: its blocks in relative order
    for (int u = 0; u < n && block > 0; ++u) {
      std::memcpy(held.get() + u * block, args.send + wrap(args.root + u, n) * block, block);
    }
    while (mask < n) mask <<= 1;
  } else {
    while (!(v & mask)) mask <<= 1;
    recvSliced(group.link(wrap(group.rank - mask, n)), held.get(), std::min(mask, n - v) * block,
               sliceBytes, wait);
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) {
      sendSliced(group.link(wrap(group.rank + mask, n)), held.get() + mask * block,
                 std::min(mask, n - v - mask) * block, sliceBytes, wait);
    }
  }
  if (block > 0 && args.recv != held.get()) std::memcpy(args.recv, held.get(), block);
}

}  // namespace ringlet::collectives
