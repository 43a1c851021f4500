// Bruck's all-gather and all-to-all: ceil(log2 N) rounds for any N, each with ranks r +- 2^k,
// which every communicator links. Few messages, so they win for small blocks; they move more
// bytes than the ring and pairwise exchange, which win for large ones.
//
// All-gather. tmp[i] holds the block of rank r+i. Round k (dist = 2^k): send tmp[0, dist) to
// rank r-dist, receive tmp[dist, 2 dist) from rank r+dist (cut at N). N = 5, rank 0:
//   start [0]   dist 1: +[1]   dist 2: +[2 3]   dist 4: +[4]   then rotate into rank order.
//
// All-to-all. tmp[i] starts as the block for rank r+i. Round k: the blocks whose index has bit
// k set go to rank r+2^k, and the same indices come back from rank r-2^k. After the last round
// tmp[i] is the block rank r-i sent to r; a final rotation puts it in place.
#include <cstring>

#include "collectives/chunking.h"
#include "collectives/collectives.h"

namespace ringlet::collectives {
void bruckAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                    const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.sendCount * elementSize(args.type);
  std::byte* tmp = scratchBytes(0, block * n);
  if (block > 0) std::memcpy(tmp, args.send, block);
  for (int dist = 1; dist < n; dist <<= 1) {
    const size_t bytes = static_cast<size_t>(std::min(dist, n - dist)) * block;
    exchange({.out = &group.link(wrap(r - dist, n)),
              .send = tmp,
              .sendBytes = bytes,
              .in = &group.link(wrap(r + dist, n)),
              .recv = tmp + dist * block,
              .recvBytes = bytes},
             sliceBytes, wait);
  }
  for (int i = 0; i < n && block > 0; ++i) {
    std::memcpy(args.recv + wrap(r + i, n) * block, tmp + i * block, block);
  }
}

void bruckAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.blockBytes;
  std::byte* tmp = scratchBytes(0, block * n);
  for (int i = 0; i < n && block > 0; ++i) {
    std::memcpy(tmp + i * block, args.send + wrap(r + i, n) * block, block);
  }
  std::byte* packed = scratchBytes(1, block * n);
  std::byte* unpacked = scratchBytes(2, block * n);
  for (int dist = 1; dist < n; dist <<= 1) {
    size_t bytes = 0;
    for (int i = dist; i < n && block > 0; ++i) {
      if (i & dist) {
        std::memcpy(packed + bytes, tmp + i * block, block);
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
        std::memcpy(tmp + i * block, unpacked + bytes, block);
        bytes += block;
      }
    }
  }
  for (int j = 0; j < n && block > 0; ++j) {
    std::memcpy(args.recv + j * block, tmp + wrap(r - j, n) * block, block);
  }
}

}  // namespace ringlet::collectives
