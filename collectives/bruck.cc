// Bruck's all-gather and all-to-all: ceil(log2 N) rounds for any N, each with ranks r +- 2^k,
// which every communicator links. Few messages, so they win for small blocks; they move more
// bytes than the ring and pairwise exchange, which win for large ones.
//
// All-gather. tmp[i] holds the block of rank r+i. Round k (dist = 2^k): send tmp[0, dist) to
// rank r-dist, receive tmp[dist, 2 dist) from rank r+dist (cut at N). N = 5, rank 0:
//   start [0]   dist 1: +[1]   dist 2: +[2 3]   dist 4: +[4]
// tmp is the output itself read from block r on, wrapping (so no rotation at the end).
//
// All-to-all. tmp[i] starts as the block for rank r+i. Round k: the blocks whose index has bit
// k set go to rank r+2^k, and the same indices come back from rank r-2^k. After the last round
// tmp[i] is the block rank r-i sent to r; a final rotation puts it in place.
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
void bruckAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                    const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.sendCount * elementSize(args.type);
  // tmp[i] is recv's block r+i (mod n), so the rounds work in recv itself: a run of tmp is at
  // most two runs of recv, split where the block index wraps to 0. A round's sender and
  // receiver name the same blocks (the sender's tmp[0, c) is the receiver's tmp[dist, dist+c)),
  // so both split it alike and each part is one exchange. No scratch, no final rotation.
  std::byte* mine = args.recv + static_cast<size_t>(r) * block;
  copyOwnBlock(mine, args.send, block, block * static_cast<size_t>(n));
  // Blocks [first, first+count) mod n: the part before the wrap, then the part after it.
  auto part = [&](int first, int count, int which) {
    const int before = std::min(count, n - first);
    return which == 0
               ? Piece{static_cast<size_t>(first) * block, static_cast<size_t>(before) * block}
               : Piece{0, static_cast<size_t>(count - before) * block};
  };
  for (int dist = 1; dist < n; dist <<= 1) {
    const int count = std::min(dist, n - dist);
    for (int which = 0; which < 2; ++which) {
      const Piece out = part(r, count, which);
      const Piece in = part(wrap(r + dist, n), count, which);
      if (out.count == 0 && in.count == 0) continue;  // no wrap on either side: no step
      exchange({.out = &group.link(wrap(r - dist, n)),
                .send = args.recv + out.offset,
                .sendBytes = out.count,
                .in = &group.link(wrap(r + dist, n)),
                .recv = args.recv + in.offset,
                .recvBytes = in.count},
               sliceBytes, wait);
    }
  }
}

void bruckAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.blockBytes;
  std::byte* tmp = scratchBytes(0, block * n);
  for (int i = 0; i < n && block > 0; ++i) {
    kernels::copy(tmp + i * block, args.send + wrap(r + i, n) * block, block);
  }
  std::byte* packed = scratchBytes(1, block * n);
  std::byte* unpacked = scratchBytes(2, block * n);
  for (int dist = 1; dist < n; dist <<= 1) {
    size_t bytes = 0;
    for (int i = dist; i < n && block > 0; ++i) {
      if (i & dist) {
        kernels::copy(packed + bytes, tmp + i * block, block);
        bytes += block;
      }
    }
    exchange({.out = &group.link(wrap(r + dist, n)),
              .send = packed,
              .sendBytes = bytes,
              .in = &group.link(wrap(r - dist, n)),
              .recv = unpacked,
              .recvBytes = bytes},
             sliceBytes, wait);
    bytes = 0;
    for (int i = dist; i < n && block > 0; ++i) {
      if (i & dist) {
        kernels::copy(tmp + i * block, unpacked + bytes, block);
        bytes += block;
      }
    }
  }
  for (int j = 0; j < n && block > 0; ++j) {
    kernels::copy(args.recv + j * block, tmp + wrap(r - j, n) * block, block);
  }
}

}  // namespace ringlet::collectives
