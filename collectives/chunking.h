#pragma once
// All chunk arithmetic of the collectives goes through here, uneven splits included.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace ringlet::collectives {

// A run of elements: [offset, offset + count).
struct Piece {
  size_t offset = 0;
  size_t count = 0;
};

// Splits `count` elements into `parts` contiguous chunks; the first count % parts chunks get one
// element more. Example: count 10, parts 4 -> sizes 3 3 2 2 at offsets 0 3 6 8.
inline Piece evenChunk(size_t count, int parts, int index) {
  const size_t n = static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  const size_t base = count / n;
  const size_t extra = count % n;
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

// The inverse of evenChunk(): the chunk of `parts` even chunks of `count` elements that holds
// element `offset` (trace mode names each step's chunk).
inline int chunkHolding(size_t count, int parts, size_t offset) {
  const size_t base = count / static_cast<size_t>(parts);
  const size_t extra = count % static_cast<size_t>(parts);
  const size_t longPart = extra * (base + 1);  // the first `extra` chunks hold one more
  return static_cast<int>(offset < longPart || base == 0 ? offset / (base + 1)
                                                         : extra + (offset - longPart) / base);
}

// Positive remainder: wrap(-1, 4) == 3. Most callers pass a rank plus or minus less than the size
// (the next rank, the distance from a root): those take no division, which a rooted 8-byte call's
// bookkeeping made several of (3% of the receiver's samples on one in a profile of the two-rank
// broadcast over shared memory; no gain stood out of the runs' spread).
inline int wrap(int value, int size) {
  if (value >= size) {
    value -= size;
  } else if (value < 0) {
    value += size;
  }
  if (value >= 0 && value < size) return value;
  return ((value % size) + size) % size;
}

// Slice `slice` of at most `sliceElements` elements of a chunk (empty past its end).
inline Piece sliceOf(const Piece& chunk, size_t slice, size_t sliceElements) {
  const size_t begin = std::min(chunk.count, slice * sliceElements);
  return {chunk.offset + begin, std::min(sliceElements, chunk.count - begin)};
}

// How many slices of `sliceElements` cover the largest of `parts` even chunks of `count`.
inline size_t sliceCount(size_t count, int parts, size_t sliceElements) {
  const size_t largest = evenChunk(count, parts, 0).count;
  return std::max<size_t>(1, (largest + sliceElements - 1) / sliceElements);
}

// The v-forms' blocks: block i holds counts[i] elements at displs[i], or packed in order (at the
// prefix sums of counts) when displs is empty. The caller has checked that the sums fit.
inline std::vector<Piece> blocksOf(std::span<const size_t> counts, std::span<const size_t> displs) {
  std::vector<Piece> blocks(counts.size());
  size_t offset = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    blocks[i] = {displs.empty() ? offset : displs[i], counts[i]};
    offset += counts[i];
  }
  return blocks;
}

// The v-forms' blocks as a binomial tree rooted at `root` moves them: relative block u is rank
// (root + u) mod N's, and a subtree's blocks travel packed in relative order, so relative blocks
// [first, last) are the bytes [start(first), start(last)) of that packing. N = 4, root 2, counts
// by rank 1 0 3 2: relative blocks 3 2 1 0 (ranks 2 3 0 1), starts 0 3 5 6 6 (elements).
class RelativeBlocks {
 public:
  RelativeBlocks(std::span<const Piece> blocks, int root, size_t elementBytes)
      : starts_(blocks.size() + 1, 0) {
    const size_t n = blocks.size();
    for (size_t u = 0; u < n; ++u) {
      starts_[u + 1] =
          starts_[u] + blocks[(static_cast<size_t>(root) + u) % n].count * elementBytes;
    }
  }
  // Bytes of relative blocks [0, u); u may be N (all of them).
  size_t start(int u) const { return starts_[static_cast<size_t>(u)]; }
  // Bytes of relative blocks [first, last).
  size_t bytes(int first, int last) const { return start(last) - start(first); }

 private:
  std::vector<size_t> starts_;
};

// N equal blocks of `count` elements, packed: the equal-block collectives as v-forms.
inline std::vector<Piece> equalBlocks(size_t count, int parts) {
  std::vector<Piece> blocks(static_cast<size_t>(parts));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = {i * count, count};
  return blocks;
}

// The largest power of two <= n (n >= 1): the ranks the recursive halving and doubling
// schedules run on; the n - p others fold into ranks 0 .. n-p-1.
inline int largestPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// N blocks of `blockCount` elements grouped into p = largestPowerOfTwo(N) chunks for the
// recursive halving reduce-scatter and doubling all-gather: chunk v holds block v, then block
// v + p when v < N - p (the block of the rank that folds into v). Laid out chunk by chunk, so a
// range of chunks is one piece. N = 6, p = 4: B0 B4 | B1 B5 | B2 | B3. For N = p this is the
// blocks in rank order.
struct FoldedBlocks {
  int blocks = 1;
  size_t blockCount = 0;
  int p = largestPowerOfTwo(blocks);

  // Chunks [first, last) in the folded layout (last == p: to the end).
  Piece chunks(int first, int last) const {
    return {blockStart(first), blockStart(last) - blockStart(first)};
  }
  // Where block b lies in the folded layout.
  size_t offsetOf(int b) const { return b < p ? blockStart(b) : blockStart(b - p) + blockCount; }
  // Block b's elements; where it lies when the blocks are packed in rank order (the buffers of
  // the equal-block collectives, and what a folded rank sends or gets whole); all the elements.
  size_t countOf(int /*b*/) const { return blockCount; }
  size_t packedOffsetOf(int b) const { return static_cast<size_t>(b) * blockCount; }
  size_t total() const { return static_cast<size_t>(blocks) * blockCount; }

 private:
  // Elements before chunk v: v blocks, and one more for each folded block before it.
  size_t blockStart(int v) const {
    return static_cast<size_t>(v + std::min(v, blocks - p)) * blockCount;
  }
};

// FoldedBlocks for blocks of their own size (the v-forms), the same chunks. N = 6, p = 4, counts
// 2 0 1 3 0 4: B0 B4 | B1 B5 | B2 | B3, chunks of 2, 4, 1 and 3 elements at 0, 2, 6 and 7.
class FoldedOwnBlocks {
 public:
  explicit FoldedOwnBlocks(std::span<const Piece> own)
      : blocks(static_cast<int>(own.size())),
        p(largestPowerOfTwo(blocks)),
        own_(own),
        chunkStarts_(static_cast<size_t>(p) + 1, 0),
        packedStarts_(own.size() + 1, 0) {
    for (int b = 0; b < blocks; ++b) packedStarts_[b + 1] = packedStarts_[b] + countOf(b);
    for (int v = 0; v < p; ++v) {
      chunkStarts_[v + 1] = chunkStarts_[v] + countOf(v) + (v + p < blocks ? countOf(v + p) : 0);
    }
  }

  const int blocks;
  const int p;

  Piece chunks(int first, int last) const {
    return {chunkStarts_[first], chunkStarts_[last] - chunkStarts_[first]};
  }
  size_t offsetOf(int b) const {
    return b < p ? chunkStarts_[b] : chunkStarts_[b - p] + countOf(b - p);
  }
  size_t countOf(int b) const { return own_[static_cast<size_t>(b)].count; }
  size_t packedOffsetOf(int b) const { return packedStarts_[static_cast<size_t>(b)]; }
  size_t total() const { return packedStarts_.back(); }

 private:
  std::span<const Piece> own_;
  std::vector<size_t> chunkStarts_;   // p + 1
  std::vector<size_t> packedStarts_;  // N + 1
};

// How many slices of `sliceElements` cover the largest of `blocks` (at least 1).
inline size_t blockSliceCount(std::span<const Piece> blocks, size_t sliceElements) {
  size_t largest = 0;
  for (const Piece& b : blocks) largest = std::max(largest, b.count);
  return std::max<size_t>(1, (largest + sliceElements - 1) / sliceElements);
}

}  // namespace ringlet::collectives
