#pragma once
// The ring schedules, written once and run by every executor: host memory over any Link
// (ring_allreduce.cc, broadcast.cc, ring_gather_scatter.cc) and device memory over CUDA IPC
// slots (slot_ring.cc, src/cuda/). Only the primitives differ between them.
//
// A Prims type provides, for a Piece of elements (chunking.h):
//   send(p)                input -> next
//   recvReduceSend(p)      prev + input -> next
//   recvReduceCopySend(p)  prev + input -> output (final; averaged for kAvg) -> next
//   recvCopySend(p)        prev -> output -> next
//   recv(p)                prev -> output
//   recvReduceCopy(p)      prev + input -> output (final; averaged for kAvg)  (reduce-scatter,
//   reduce)
// (as in NCCL). Broadcast uses send, recvCopySend and recv with input == output == the buffer.
//
// Ring all-reduce = reduce-scatter, then all-gather: 2(N-1) steps. The buffer is cut into N
// chunks (uneven counts give the first count % N chunks one extra element). Rank r sends to r+1
// and receives from r-1. At step s of the reduce-scatter, rank r sends chunk r-s and receives
// chunk r-s-1, adding its own input to it; after N-1 steps rank r holds chunk r+1 fully reduced.
// The all-gather then passes the finished chunks once around the ring. For N = 4 (chunks 0..3;
// "3<" = receives chunk 3):
//
//   step  phase            rank 0      rank 1      rank 2      rank 3
//   1     reduce-scatter   0> 3<       1> 0<       2> 1<       3> 2<
//   2     reduce-scatter   3> 2<       0> 3<       1> 0<       2> 1<
//   3     reduce-scatter   2> 1<=      3> 2<=      0> 3<=      1> 0<=   (= fully reduced)
//   4     all-gather       1> 0<       2> 1<       3> 2<       0> 3<
//   5     all-gather       0> 3<       1> 0<       2> 1<       3> 2<
//   6     all-gather       3> 2<       0> 3<       1> 0<       2> 1<
//
// Every rank sends and receives 2(N-1) chunks: 2(N-1)/N of the buffer each way (the "bus
// bandwidth" factor), whatever N is.
//
// Pipelining: each chunk is cut into slices, and the whole schedule runs slice by slice, so
// while rank r reduces slice k its neighbours already move slice k+1. Per slice the table's
// steps become the primitives; the loop body mirrors the table row by row:
//
//   send                 step 1      chunk r       input -> next
//   recvReduceSend       steps 2..N-1 chunk r-s    prev + input -> next
//   recvReduceCopySend   step N      chunk r+1     prev + input -> output (final) -> next
//   recvCopySend         steps N+1..2N-2           prev -> output -> next
//   recv                 step 2N-1  chunk r+2      prev -> output
//
// (Steps here count primitives, one more than the table's rows: the first send starts row 1
// and the last receive ends row 2N-2.) Partial sums travel through output chunks that the
// all-gather overwrites later, which is safe even in place: a chunk comes back only after the
// whole ring has consumed what this rank sent from it.
#include <cstddef>
#include <span>

#include "collectives/chunking.h"

namespace ringlet::collectives {

// Slice `slice` of chunk `chunk` (wrapped to 0..size-1) when `count` elements are cut into
// `size` even chunks and each chunk into slices of `sliceElements`.
struct RingPieces {
  size_t count;
  int size;
  size_t sliceElements;
  Piece operator()(int chunk, size_t slice) const {
    return sliceOf(evenChunk(count, size, wrap(chunk, size)), slice, sliceElements);
  }
  size_t slices() const { return sliceCount(count, size, sliceElements); }
};

// The same for chunks of any size at any place (the v-forms: all-gather-v, reduce-scatter-v):
// chunk i is blocks[i]. Small chunks run out of slices early; their empty pieces are skipped.
struct BlockPieces {
  std::span<const Piece> blocks;
  size_t sliceElements;
  Piece operator()(int chunk, size_t slice) const {
    return sliceOf(blocks[wrap(chunk, static_cast<int>(blocks.size()))], slice, sliceElements);
  }
  size_t slices() const { return blockSliceCount(blocks, sliceElements); }
};

// Runs ring all-reduce of `count` elements on rank `rank` of `size` (size >= 2), in slices of
// at most `sliceElements` elements.
template <typename Prims>
void ringAllreduceSchedule(Prims& prims, int rank, int size, size_t count, size_t sliceElements) {
  const RingPieces piece{count, size, sliceElements};
  const size_t slices = sliceCount(count, size, sliceElements);
  for (size_t k = 0; k < slices; ++k) {
    prims.send(piece(rank, k));
    for (int s = 1; s <= size - 2; ++s) prims.recvReduceSend(piece(rank - s, k));
    prims.recvReduceCopySend(piece(rank + 1, k));
    for (int s = 1; s <= size - 2; ++s) prims.recvCopySend(piece(rank + 1 - s, k));
    prims.recv(piece(rank + 2, k));
  }
}

// Pipelined chain broadcast of `count` elements along the ring from the rank at `position` 0
// (the root) to `position` size-1 (the rank before the root), in slices of at most
// `sliceElements`. N = 4, root 1, slices a b c:
//
//   time   1      2      3      4      5
//   1->2   a      b      c
//   2->3          a      b      c
//   3->0                 a      b      c
//
// The time is about (bytes + (N-2) * slice) / bandwidth.
template <typename Prims>
void chainBroadcastSchedule(Prims& prims, int position, int size, size_t count,
                            size_t sliceElements) {
  const Piece whole{0, count};
  const size_t slices = std::max<size_t>(1, (count + sliceElements - 1) / sliceElements);
  for (size_t k = 0; k < slices; ++k) {
    const Piece p = sliceOf(whole, k, sliceElements);
    if (position == 0) {
      prims.send(p);
    } else if (position == size - 1) {
      prims.recv(p);
    } else {
      prims.recvCopySend(p);
    }
  }
}

// Ring reduce-scatter: the first half of the all-reduce, shifted by one chunk so that rank r ends
// with chunk r fully reduced: N-1 steps, (N-1)/N of the buffer each way. N = 4:
//
//   step   rank 0      rank 1      rank 2      rank 3
//   1      3> 2<       0> 3<       1> 0<       2> 1<
//   2      2> 1<       3> 2<       0> 3<       1> 0<
//   3      1> 0<=      2> 1<=      3> 2<=      0> 3<=    (= fully reduced: rank r holds chunk r)
//
// `piece` is RingPieces (N even chunks) or BlockPieces (reduce-scatter-v: chunk r is rank r's
// block, any size). Both ends of a link compute the same pieces, so an empty piece is skipped on
// both and costs no message: a zero block moves nothing.
template <typename Prims, typename Pieces>
void ringReduceScatterSchedule(Prims& prims, int rank, int size, const Pieces& piece) {
  const size_t slices = piece.slices();
  for (size_t k = 0; k < slices; ++k) {
    if (Piece p = piece(rank - 1, k); p.count > 0) prims.send(p);
    for (int s = 1; s <= size - 2; ++s) {
      if (Piece p = piece(rank - 1 - s, k); p.count > 0) prims.recvReduceSend(p);
    }
    if (Piece p = piece(rank, k); p.count > 0) prims.recvReduceCopy(p);
  }
}

// Ring all-gather: the second half of the all-reduce. Rank r starts with chunk r in place and
// passes every chunk once around the ring: N-1 steps, (N-1)/N of the buffer each way. N = 4:
//
//   step   rank 0      rank 1      rank 2      rank 3
//   1      0> 3<       1> 0<       2> 1<       3> 2<
//   2      3> 2<       0> 3<       1> 0<       2> 1<
//   3      2> 1<       3> 2<       0> 3<       1> 0<
//
// With BlockPieces (all-gather-v) the chunks are the ranks' blocks of any size, at any place in
// the output; as in the reduce-scatter, empty pieces are skipped on both ends of a link.
template <typename Prims, typename Pieces>
void ringAllgatherSchedule(Prims& prims, int rank, int size, const Pieces& piece) {
  const size_t slices = piece.slices();
  for (size_t k = 0; k < slices; ++k) {
    if (Piece p = piece(rank, k); p.count > 0) prims.send(p);
    for (int s = 1; s <= size - 2; ++s) {
      if (Piece p = piece(rank - s, k); p.count > 0) prims.recvCopySend(p);
    }
    if (Piece p = piece(rank + 1, k); p.count > 0) prims.recv(p);
  }
}

// Pipelined chain reduce along the ring, from the rank after the root (`position` 0) to the root
// (`position` size-1): each rank adds its input to what arrives and passes it on; the root adds
// its own last and keeps the result. The time is about (bytes + (N-2) * slice) / bandwidth.
template <typename Prims>
void chainReduceSchedule(Prims& prims, int position, int size, size_t count, size_t sliceElements) {
  const Piece whole{0, count};
  const size_t slices = std::max<size_t>(1, (count + sliceElements - 1) / sliceElements);
  for (size_t k = 0; k < slices; ++k) {
    const Piece p = sliceOf(whole, k, sliceElements);
    if (position == 0) {
      prims.send(p);
    } else if (position == size - 1) {
      prims.recvReduceCopy(p);
    } else {
      prims.recvReduceSend(p);
    }
  }
}

}  // namespace ringlet::collectives
