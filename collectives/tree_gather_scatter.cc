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
// caller's buffer. Every link used is rank +- 2^k, which the communicator always connects. A
// subtree with nothing in it sends no message.
//
// The v-forms (gatherv, scatterv) run the same code over blocks of their own size: every rank
// knows every count, so a subtree's blocks travel packed in relative order (RelativeBlocks) and
// each side knows the length of every message; a subtree whose blocks are all empty sends
// nothing. N = 6, root 0, counts 2 0 1 3 0 4: round 1 1->0 (0 elements: no message), 3->2 (3),
// 5->4 (4); round 2 2->0 (blocks 2,3: 1 + 3); round 3 4->0 (blocks 4,5: 0 + 4). The root takes a
// subtree's blocks straight into (or from) the caller's buffer when the displacements put them
// back to back in relative order (packed, or any layout that happens to), else through a
// staging copy.
//
// The linear schedule moves every block once, straight between the root and its rank, the root
// taking a slice from (to) each rank in turn, relative order, so that every rank's transfer
// moves at once (sendToEach, recvFromEach). N = 4, root 1:
//
//   gather:  2->1, 3->1, 0->1   (each block straight to its place in recv, sliced)
//   scatter: 1->2, 1->3, 1->0   (each block straight from its place in send)
//
// It needs a link from the root to every rank, and N-1 messages on the root's side in place of
// ceil(log2 N); in return no rank forwards another's block and the root never stages one. Over
// shared memory the scatter's root lends every rank its block at once (sendToEach's `lend`: each
// reads its own out of the root's buffer, all at the same time); 4 ranks on 2 cores, 1 MiB:
// 62-63 us against 95-252 through the slots, 4 MiB 317-344 against 435-520 (three alternating
// rounds). The root copies its own block while they read (the tree's root: while its last
// child, rank + 1, reads): 1 MiB at 2 ranks 23-27 us against 37-38 after the reads (Open MPI
// 36-38), at 4 ranks 43-46 against 66-80 (Open MPI 53-57; medians of 5 rounds, two runs). The
// gather's root reads every block itself, lent or not, one rank after another.
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
namespace {

// Blocks in the subtree of relative rank v > 0: from v up to its lowest set bit, cut at N.
int subtreeBlocks(int v, int n) { return std::min(v & -v, n - v); }

// The blocks a tree moves, by relative rank u = (rank - root) mod N. Equal blocks (gather,
// scatter): N blocks of `block` bytes in rank order.
struct EqualBlocks {
  int n;
  int root;
  size_t block;

  // Bytes of relative blocks [first, last), and where they start when packed from u = 0.
  size_t bytes(int first, int last) const { return static_cast<size_t>(last - first) * block; }
  size_t start(int u) const { return bytes(0, u); }
  // The root's block in `all`, and its bytes.
  std::byte* rootBlock(std::byte* all) const { return all + static_cast<size_t>(root) * block; }
  // Where relative blocks [first, last) sit in `all` as one run (they do not wrap past rank
  // N-1), else nullptr.
  std::byte* run(std::byte* all, int first, int last) const {
    const int startRank = (root + first) % n;
    return startRank + (last - first) > n ? nullptr : all + static_cast<size_t>(startRank) * block;
  }
  // Copies relative blocks [first, last) between `packed` (relative order) and `all`.
  void copy(std::byte* all, std::byte* packed, bool toAll, int first, int last) const {
    for (int u = first; u < last; ++u, packed += block) {
      std::byte* ranked = all + static_cast<size_t>((root + u) % n) * block;
      kernels::copy(toAll ? ranked : packed, toAll ? packed : ranked, block);
    }
  }
};

// The v-forms (gatherv, scatterv): blocks of their own size at their own places in `all`,
// packed in relative order on the wire (RelativeBlocks).
struct OwnBlocks {
  std::span<const Piece> blocks;
  int root;
  size_t element;
  RelativeBlocks packing;

  OwnBlocks(std::span<const Piece> b, int r, size_t e)
      : blocks(b), root(r), element(e), packing(b, r, e) {}
  int n() const { return static_cast<int>(blocks.size()); }
  const Piece& at(int u) const { return blocks[static_cast<size_t>((root + u) % n())]; }

  size_t bytes(int first, int last) const { return packing.bytes(first, last); }
  size_t start(int u) const { return packing.start(u); }
  std::byte* rootBlock(std::byte* all) const { return all + at(0).offset * element; }
  // One run when the blocks lie back to back in relative order (empty ones skipped).
  std::byte* run(std::byte* all, int first, int last) const {
    std::byte* begin = all;
    bool started = false;
    size_t next = 0;
    for (int u = first; u < last; ++u) {
      const Piece& b = at(u);
      if (b.count == 0) continue;
      if (!started) {
        begin = all + b.offset * element;
        started = true;
      } else if (b.offset != next) {
        return nullptr;
      }
      next = b.offset + b.count;
    }
    return begin;
  }
  void copy(std::byte* all, std::byte* packed, bool toAll, int first, int last) const {
    for (int u = first; u < last; ++u) {
      const Piece& b = at(u);
      const size_t size = b.count * element;
      if (size == 0) continue;
      std::byte* placed = all + b.offset * element;
      kernels::copy(toAll ? placed : packed, toAll ? packed : placed, size);
      packed += size;
    }
  }
};

// The largest block a gather's rank leaves for its parent to read (lendSliced): the root's
// reads come one after another and after its copy of its own block, where through the slots the
// children's copies run beside them. N = 2, three alternating rounds: blocks of 512 KiB 59-72 us
// against 64-79 through the slots, of 1 MiB 271-289 against 174-197 (scatter: 113-180 against
// 166-181).
constexpr size_t kGatherLendMaxBytes = size_t{512} << 10;

template <typename Blocks>
void gatherTree(const Group& group, const std::byte* send, std::byte* recv, const Blocks& blocks,
                int root, size_t sliceBytes, const WaitContext& wait,
                const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  const size_t mineBytes = blocks.bytes(v, v + 1);
  if (v == 0) {  // the root: every child's subtree lands at its blocks' places
    copyOwnBlock(blocks.rootBlock(recv), send, mineBytes, blocks.start(n));
    std::byte* staging = nullptr;
    for (int mask = 1; mask < n; mask <<= 1) {
      const int last = std::min(2 * mask, n);
      const size_t bytes = blocks.bytes(mask, last);
      if (bytes == 0) continue;  // an empty subtree: no message
      Link& child = group.link(wrap(group.rank + mask, n));
      if (std::byte* run = blocks.run(recv, mask, last)) {
        recvSliced(child, run, bytes, sliceBytes, wait);
        continue;
      }
      if (!staging) staging = scratchBytes(0, blocks.start(n));
      recvSliced(child, staging, bytes, sliceBytes, wait);
      blocks.copy(recv, staging, true, mask, last);
    }
    return;
  }
  const int last = v + subtreeBlocks(v, n);
  const size_t subtree = blocks.bytes(v, last);
  if (subtree == 0) return;  // nothing here or below: no message
  Link& parent = group.link(wrap(group.rank - (v & -v), n));
  if (subtree == mineBytes) {  // a leaf, or children with empty blocks: its own block, as it is
    // The parent only receives from it.
    lendSliced(parent, send, mineBytes, sliceBytes, wait, kGatherLendMaxBytes, afterFirstSend);
    return;
  }
  // This rank's subtree, packed in relative order.
  std::byte* held = scratchBytes(0, subtree);
  if (mineBytes > 0) kernels::copy(held, send, mineBytes);
  for (int mask = 1; mask < (v & -v) && v + mask < n; mask <<= 1) {
    const int first = v + mask;
    const size_t bytes = blocks.bytes(first, std::min(first + mask, n));
    if (bytes == 0) continue;
    recvSliced(group.link(wrap(group.rank + mask, n)), held + blocks.bytes(v, first), bytes,
               sliceBytes, wait);
  }
  sendSliced(parent, held, subtree, sliceBytes, wait);
}

template <typename Blocks>
void scatterTree(const Group& group, const std::byte* send, std::byte* recv, const Blocks& blocks,
                 int root, size_t sliceBytes, const WaitContext& wait,
                 const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  const size_t mineBytes = blocks.bytes(v, v + 1);
  if (v == 0) {  // the root: every child's subtree leaves from its blocks' places
    int top = 1;
    while (top < n) top <<= 1;
    std::byte* staging = nullptr;
    auto* all = const_cast<std::byte*>(send);  // only read
    bool ownCopied = false;
    // The root's own block, copied while the last child (rank + 1) reads its lent block.
    const std::function<void()> copyOwn = [&] {
      copyOwnBlock(recv, blocks.rootBlock(all), mineBytes, mineBytes);
      ownCopied = true;
    };
    for (int mask = top >> 1; mask > 0; mask >>= 1) {
      if (mask >= n) continue;
      const int last = std::min(2 * mask, n);
      const size_t bytes = blocks.bytes(mask, last);
      if (bytes == 0) continue;  // an empty subtree: no message
      Link& child = group.link(wrap(group.rank + mask, n));
      // Only the first child's message may come before the header check (two ranks: the only one).
      const std::function<void()> none;
      const std::function<void()>& afterFirst = mask == top >> 1 ? afterFirstSend : none;
      if (std::byte* run = blocks.run(all, mask, last)) {
        // Its first receive.
        lendSliced(child, run, bytes, sliceBytes, wait, SIZE_MAX, afterFirst,
                   mask == 1 ? copyOwn : none);
        continue;
      }
      if (!staging) staging = scratchBytes(0, blocks.start(n));
      blocks.copy(all, staging, false, mask, last);
      sendSliced(child, staging, bytes, sliceBytes, wait, afterFirst);
    }
    if (!ownCopied) copyOwn();
    return;
  }
  const int last = v + subtreeBlocks(v, n);
  const size_t subtree = blocks.bytes(v, last);
  if (subtree == 0) return;  // nothing here or below: no message
  const int parentMask = v & -v;
  Link& parent = group.link(wrap(group.rank - parentMask, n));
  if (subtree == mineBytes) {  // a leaf, or children with empty blocks: straight into recv
    recvSliced(parent, recv, mineBytes, sliceBytes, wait);
    return;
  }
  std::byte* held = scratchBytes(0, subtree);
  recvSliced(parent, held, subtree, sliceBytes, wait);
  for (int mask = parentMask >> 1; mask > 0; mask >>= 1) {
    const int first = v + mask;
    if (first >= n) continue;
    const size_t bytes = blocks.bytes(first, std::min(first + mask, n));
    if (bytes == 0) continue;
    sendSliced(group.link(wrap(group.rank + mask, n)), held + blocks.bytes(v, first), bytes,
               sliceBytes, wait);
  }
  if (mineBytes > 0) kernels::copy(recv, held, mineBytes);
}

template <typename Blocks>
void gatherLinear(const Group& group, const std::byte* send, std::byte* recv, const Blocks& blocks,
                  int root, size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  const size_t mineBytes = blocks.bytes(v, v + 1);
  if (v != 0) {
    if (mineBytes > 0) {
      lendSliced(group.link(root), send, mineBytes, sliceBytes, wait, kGatherLendMaxBytes);
    }
    return;
  }
  copyOwnBlock(blocks.rootBlock(recv), send, mineBytes, blocks.start(n));
  std::vector<PeerBlock> from;
  for (int u = 1; u < n; ++u) {
    const size_t bytes = blocks.bytes(u, u + 1);
    if (bytes > 0)
      from.push_back({&group.link(wrap(root + u, n)), blocks.run(recv, u, u + 1), bytes});
  }
  recvFromEach(from, sliceBytes, wait);
}

template <typename Blocks>
void scatterLinear(const Group& group, const std::byte* send, std::byte* recv, const Blocks& blocks,
                   int root, size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  const size_t mineBytes = blocks.bytes(v, v + 1);
  if (v != 0) {
    if (mineBytes > 0) recvSliced(group.link(root), recv, mineBytes, sliceBytes, wait);
    return;
  }
  auto* all = const_cast<std::byte*>(send);  // only read
  std::vector<PeerBlock> to;
  for (int u = 1; u < n; ++u) {
    const size_t bytes = blocks.bytes(u, u + 1);
    if (bytes > 0) to.push_back({&group.link(wrap(root + u, n)), blocks.run(all, u, u + 1), bytes});
  }
  // Each rank's first receive; the root's own block is copied while they read theirs.
  sendToEach(to, sliceBytes, wait, /*lend=*/true,
             [&] { copyOwnBlock(recv, blocks.rootBlock(all), mineBytes, mineBytes); });
}

// The schedule's gather or scatter over either block layout.
// (`afterFirstSend`: the tree's only.)
template <typename Blocks>
void gatherBy(RootedSchedule schedule, const Group& group, const std::byte* send, std::byte* recv,
              const Blocks& blocks, int root, size_t sliceBytes, const WaitContext& wait,
              const std::function<void()>& afterFirstSend) {
  if (schedule == RootedSchedule::kLinear) {
    return gatherLinear(group, send, recv, blocks, root, sliceBytes, wait);
  }
  gatherTree(group, send, recv, blocks, root, sliceBytes, wait, afterFirstSend);
}
template <typename Blocks>
void scatterBy(RootedSchedule schedule, const Group& group, const std::byte* send, std::byte* recv,
               const Blocks& blocks, int root, size_t sliceBytes, const WaitContext& wait,
               const std::function<void()>& afterFirstSend) {
  if (schedule == RootedSchedule::kLinear) {
    return scatterLinear(group, send, recv, blocks, root, sliceBytes, wait);
  }
  scatterTree(group, send, recv, blocks, root, sliceBytes, wait, afterFirstSend);
}

}  // namespace

void gather(const Group& group, const GatherArgs& args, RootedSchedule schedule, size_t sliceBytes,
            const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  gatherBy(schedule, group, args.send, args.recv,
           EqualBlocks{group.size, args.root, args.blockBytes}, args.root, sliceBytes, wait,
           afterFirstSend);
}

void scatter(const Group& group, const ScatterArgs& args, RootedSchedule schedule,
             size_t sliceBytes, const WaitContext& wait,
             const std::function<void()>& afterFirstSend) {
  scatterBy(schedule, group, args.send, args.recv,
            EqualBlocks{group.size, args.root, args.blockBytes}, args.root, sliceBytes, wait,
            afterFirstSend);
}

void gatherv(const Group& group, const GathervArgs& args, RootedSchedule schedule,
             size_t sliceBytes, const WaitContext& wait,
             const std::function<void()>& afterFirstSend) {
  gatherBy(schedule, group, args.send, args.recv,
           OwnBlocks(args.blocks, args.root, args.elementBytes), args.root, sliceBytes, wait,
           afterFirstSend);
}

void scatterv(const Group& group, const ScattervArgs& args, RootedSchedule schedule,
              size_t sliceBytes, const WaitContext& wait,
              const std::function<void()>& afterFirstSend) {
  scatterBy(schedule, group, args.send, args.recv,
            OwnBlocks(args.blocks, args.root, args.elementBytes), args.root, sliceBytes, wait,
            afterFirstSend);
}

}  // namespace ringlet::collectives
