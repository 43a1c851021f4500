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
// Blocks travel in relative order (block of relative rank u at u - v). The root receives (or
// sends) each subtree's blocks straight in (or from) the caller's buffer when they do not wrap
// past rank N-1, and through a staging copy when they do; a leaf sends its own block from the
// caller's buffer. Every link used is rank +- 2^k, which the communicator always connects.
#include <cstring>
#include <memory>

#include "collectives/chunking.h"
#include "collectives/collectives.h"

namespace ringlet::collectives {
namespace {

// Where the root's relative blocks [first, first + count) sit in rank order: one run of `all`
// when they do not wrap past rank N-1, else nullptr.
std::byte* rootRun(std::byte* all, int root, int first, int count, int n, size_t block) {
  const int start = (root + first) % n;
  return start + count > n ? nullptr : all + static_cast<size_t>(start) * block;
}

// Copies relative blocks [first, first + count) between `relative` (contiguous) and rank order
// in `all`.
void copyRelative(std::byte* all, std::byte* relative, bool toRankOrder, int root, int first,
                  int count, int n, size_t block) {
  for (int u = 0; u < count; ++u) {
    std::byte* ranked = all + static_cast<size_t>((root + first + u) % n) * block;
    std::byte* packed = relative + static_cast<size_t>(u) * block;
    if (toRankOrder) {
      std::memcpy(ranked, packed, block);
    } else {
      std::memcpy(packed, ranked, block);
    }
  }
}

// Blocks in the subtree of relative rank v > 0: from v up to its lowest set bit, cut at N.
int subtreeBlocks(int v, int n) { return std::min(v & -v, n - v); }

}  // namespace

void treeGather(const Group& group, const GatherArgs& args, size_t sliceBytes,
                const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t block = args.blockBytes;
  if (v == 0) {  // the root: every child's subtree lands in rank order
    std::byte* own = args.recv + static_cast<size_t>(args.root) * block;
    if (block > 0 && own != args.send) std::memcpy(own, args.send, block);
    std::byte* staging = nullptr;
    for (int mask = 1; mask < n; mask <<= 1) {
      const int blocks = std::min(mask, n - mask);
      Link& child = group.link(wrap(group.rank + mask, n));
      if (std::byte* run = rootRun(args.recv, args.root, mask, blocks, n, block)) {
        recvSliced(child, run, blocks * block, sliceBytes, wait);
        continue;
      }
      if (!staging) staging = scratchBytes(0, block * n);
      recvSliced(child, staging, blocks * block, sliceBytes, wait);
      copyRelative(args.recv, staging, true, args.root, mask, blocks, n, block);
    }
    return;
  }
  const int subtree = subtreeBlocks(v, n);
  const int parentMask = v & -v;
  Link& parent = group.link(wrap(group.rank - parentMask, n));
  if (subtree == 1) {  // a leaf: its own block, as it is
    sendSliced(parent, args.send, block, sliceBytes, wait);
    return;
  }
  // This rank's subtree, in relative order.
  std::byte* held = scratchBytes(0, block * subtree);
  if (block > 0) std::memcpy(held, args.send, block);
  for (int mask = 1; mask < parentMask && v + mask < n; mask <<= 1) {
    const int blocks = std::min(mask, n - v - mask);
    recvSliced(group.link(wrap(group.rank + mask, n)), held + mask * block, blocks * block,
               sliceBytes, wait);
  }
  sendSliced(parent, held, subtree * block, sliceBytes, wait);
}

void treeScatter(const Group& group, const ScatterArgs& args, size_t sliceBytes,
                 const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t block = args.blockBytes;
  int top = 1;
  while (top < n) top <<= 1;
  if (v == 0) {  // the root: every child's subtree leaves from rank order
    std::byte* staging = nullptr;
    auto* all = const_cast<std::byte*>(args.send);  // only read
    for (int mask = top >> 1; mask > 0; mask >>= 1) {
      if (mask >= n) continue;
      const int blocks = std::min(mask, n - mask);
      Link& child = group.link(wrap(group.rank + mask, n));
      if (std::byte* run = rootRun(all, args.root, mask, blocks, n, block)) {
        sendSliced(child, run, blocks * block, sliceBytes, wait);
        continue;
      }
      if (!staging) staging = scratchBytes(0, block * n);
      copyRelative(all, staging, false, args.root, mask, blocks, n, block);
      sendSliced(child, staging, blocks * block, sliceBytes, wait);
    }
    const std::byte* own = args.send + static_cast<size_t>(args.root) * block;
    if (block > 0 && own != args.recv) std::memcpy(args.recv, own, block);
    return;
  }
  const int subtree = subtreeBlocks(v, n);
  const int parentMask = v & -v;
  Link& parent = group.link(wrap(group.rank - parentMask, n));
  if (subtree == 1) {  // a leaf: its own block, straight into recv
    recvSliced(parent, args.recv, block, sliceBytes, wait);
    return;
  }
  std::byte* held = scratchBytes(0, block * subtree);
  recvSliced(parent, held, subtree * block, sliceBytes, wait);
  for (int mask = parentMask >> 1; mask > 0; mask >>= 1) {
    if (v + mask < n) {
      sendSliced(group.link(wrap(group.rank + mask, n)), held + mask * block,
                 std::min(mask, n - v - mask) * block, sliceBytes, wait);
    }
  }
  if (block > 0) std::memcpy(args.recv, held, block);
}

}  // namespace ringlet::collectives
