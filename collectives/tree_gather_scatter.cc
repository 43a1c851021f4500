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
//
// The v-forms (gatherv, scatterv) run the same rounds over blocks of their own size: every rank
// knows every count, so a subtree's blocks travel packed in relative order (RelativeBlocks) and
// each side knows the length of every message; a subtree whose blocks are all empty sends
// nothing. N = 6, root 0, counts 2 0 1 3 0 4: round 1 1->0 (0 elements: no message), 3->2 (3),
// 5->4 (4); round 2 2->0 (blocks 2,3: 1 + 3); round 3 4->0 (blocks 4,5: 0 + 4). The root takes a
// subtree's blocks straight into (or from) the caller's buffer when the displacements put them
// back to back in relative order (packed, or any layout that happens to), else through a
// staging copy.
#include <cstring>
#include <memory>
#include <span>

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

// Where the root's relative blocks [first, last) of the v-forms sit in `all` when they lie back
// to back in relative order (empty blocks skipped): the start of that run, else nullptr.
std::byte* rootRunV(std::byte* all, std::span<const Piece> blocks, int root, int first, int last,
                    size_t element) {
  const int n = static_cast<int>(blocks.size());
  std::byte* run = all;
  bool started = false;
  size_t next = 0;
  for (int u = first; u < last; ++u) {
    const Piece& b = blocks[static_cast<size_t>((root + u) % n)];
    if (b.count == 0) continue;
    if (!started) {
      run = all + b.offset * element;
      started = true;
    } else if (b.offset != next) {
      return nullptr;
    }
    next = b.offset + b.count;
  }
  return run;
}

// Copies the v-forms' relative blocks [first, last) between `packed` (relative order, packed)
// and their places in `all`.
void copyRelativeV(std::byte* all, std::byte* packed, bool toBlocks, std::span<const Piece> blocks,
                   int root, int first, int last, size_t element) {
  const int n = static_cast<int>(blocks.size());
  for (int u = first; u < last; ++u) {
    const Piece& b = blocks[static_cast<size_t>((root + u) % n)];
    const size_t bytes = b.count * element;
    if (bytes == 0) continue;
    if (toBlocks) {
      std::memcpy(all + b.offset * element, packed, bytes);
    } else {
      std::memcpy(packed, all + b.offset * element, bytes);
    }
    packed += bytes;
  }
}

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

void treeGatherv(const Group& group, const GathervArgs& args, size_t sliceBytes,
                 const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t element = args.elementBytes;
  const RelativeBlocks packing(args.blocks, args.root, element);
  if (v == 0) {  // the root: every child's subtree lands at its blocks' places
    const Piece& mine = args.blocks[static_cast<size_t>(args.root)];
    std::byte* own = args.recv + mine.offset * element;
    if (mine.count > 0 && own != args.send) std::memcpy(own, args.send, mine.count * element);
    std::byte* staging = nullptr;
    for (int mask = 1; mask < n; mask <<= 1) {
      const int last = std::min(2 * mask, n);
      const size_t bytes = packing.bytes(mask, last);
      if (bytes == 0) continue;  // an empty subtree: no message
      Link& child = group.link(wrap(group.rank + mask, n));
      if (std::byte* run = rootRunV(args.recv, args.blocks, args.root, mask, last, element)) {
        recvSliced(child, run, bytes, sliceBytes, wait);
        continue;
      }
      if (!staging) staging = scratchBytes(0, packing.start(n));
      recvSliced(child, staging, bytes, sliceBytes, wait);
      copyRelativeV(args.recv, staging, true, args.blocks, args.root, mask, last, element);
    }
    return;
  }
  const int last = v + subtreeBlocks(v, n);
  const size_t subtree = packing.bytes(v, last);
  if (subtree == 0) return;  // nothing below or here: no message
  const int parentMask = v & -v;
  Link& parent = group.link(wrap(group.rank - parentMask, n));
  const size_t mineBytes = packing.bytes(v, v + 1);
  if (subtree == mineBytes) {  // a leaf, or children with empty blocks: its own block, as it is
    sendSliced(parent, args.send, mineBytes, sliceBytes, wait);
    return;
  }
  // This rank's subtree, packed in relative order.
  std::byte* held = scratchBytes(0, subtree);
  if (mineBytes > 0) std::memcpy(held, args.send, mineBytes);
  for (int mask = 1; mask < parentMask && v + mask < n; mask <<= 1) {
    const int first = v + mask;
    const size_t bytes = packing.bytes(first, std::min(first + mask, n));
    if (bytes == 0) continue;
    recvSliced(group.link(wrap(group.rank + mask, n)), held + packing.bytes(v, first), bytes,
               sliceBytes, wait);
  }
  sendSliced(parent, held, subtree, sliceBytes, wait);
}

void treeScatterv(const Group& group, const ScattervArgs& args, size_t sliceBytes,
                  const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - args.root, n);
  const size_t element = args.elementBytes;
  const RelativeBlocks packing(args.blocks, args.root, element);
  int top = 1;
  while (top < n) top <<= 1;
  if (v == 0) {  // the root: every child's subtree leaves from its blocks' places
    std::byte* staging = nullptr;
    auto* all = const_cast<std::byte*>(args.send);  // only read
    for (int mask = top >> 1; mask > 0; mask >>= 1) {
      if (mask >= n) continue;
      const int last = std::min(2 * mask, n);
      const size_t bytes = packing.bytes(mask, last);
      if (bytes == 0) continue;  // an empty subtree: no message
      Link& child = group.link(wrap(group.rank + mask, n));
      if (std::byte* run = rootRunV(all, args.blocks, args.root, mask, last, element)) {
        sendSliced(child, run, bytes, sliceBytes, wait);
        continue;
      }
      if (!staging) staging = scratchBytes(0, packing.start(n));
      copyRelativeV(all, staging, false, args.blocks, args.root, mask, last, element);
      sendSliced(child, staging, bytes, sliceBytes, wait);
    }
    const Piece& mine = args.blocks[static_cast<size_t>(args.root)];
    const std::byte* own = args.send + mine.offset * element;
    if (mine.count > 0 && own != args.recv) std::memcpy(args.recv, own, mine.count * element);
    return;
  }
  const int last = v + subtreeBlocks(v, n);
  const size_t subtree = packing.bytes(v, last);
  if (subtree == 0) return;  // nothing here or below: no message
  const int parentMask = v & -v;
  Link& parent = group.link(wrap(group.rank - parentMask, n));
  const size_t mineBytes = packing.bytes(v, v + 1);
  if (subtree == mineBytes) {  // a leaf, or children with empty blocks: straight into recv
    recvSliced(parent, args.recv, mineBytes, sliceBytes, wait);
    return;
  }
  std::byte* held = scratchBytes(0, subtree);
  recvSliced(parent, held, subtree, sliceBytes, wait);
  for (int mask = parentMask >> 1; mask > 0; mask >>= 1) {
    const int first = v + mask;
    if (first >= n) continue;
    const size_t bytes = packing.bytes(first, std::min(first + mask, n));
    if (bytes == 0) continue;
    sendSliced(group.link(wrap(group.rank + mask, n)), held + packing.bytes(v, first), bytes,
               sliceBytes, wait);
  }
  if (mineBytes > 0) std::memcpy(args.recv, held, mineBytes);
}

}  // namespace ringlet::collectives
