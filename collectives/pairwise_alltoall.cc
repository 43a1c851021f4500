// All-to-all by pairwise exchange: in step s = 1 .. N-1 rank r sends its block for rank r+s and
// receives rank r-s's block for it, both at once, slice by slice, so every link carries one
// block each way and no rank waits for a peer that is itself waiting to send. N = 4:
//
//   step   rank 0        rank 1        rank 2        rank 3
//   1      ->1  <-3      ->2  <-0      ->3  <-1      ->0  <-2
//   2      ->2  <-2      ->3  <-3      ->0  <-0      ->1  <-1
//   3      ->3  <-1      ->0  <-2      ->1  <-3      ->2  <-0
//
// Needs a link to every rank (the communicator connects them at the first all-to-all).
#include <cstring>
#include <memory>

#include "collectives/chunking.h"
#include "collectives/collectives.h"

namespace ringlet::collectives {

void pairwiseAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                      const WaitContext& wait) {
  const int n = group.size;
  const int r = group.rank;
  const size_t block = args.blockBytes;
  if (block > 0 && args.recv != args.send) {
    std::memcpy(args.recv + r * block, args.send + r * block, block);
  }
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const int from = wrap(r - s, n);
    Link& out = group.link(to);
    Link& in = group.link(from);
    // Each link is cut by its own largest message, the same at both of its ends.
    const size_t sendSlice = std::min(sliceBytes, out.maxMessageBytes());
    const size_t recvSlice = std::min(sliceBytes, in.maxMessageBytes());
    size_t sent = 0;
    size_t received = 0;
    do {
      if (sent < block) {
        const size_t bytes = std::min(sendSlice, block - sent);
        sendFrom(out, args.send + to * block + sent, bytes, wait);
        sent += bytes;
      }
      if (received < block) {
        const size_t bytes = std::min(recvSlice, block - received);
        in.recvInto(args.recv + from * block + received, bytes, wait);
        received += bytes;
      }
    } while (sent < block || received < block);
    out.flush(wait);
  }
}

}  // namespace ringlet::collectives
