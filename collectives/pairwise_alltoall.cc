// All-to-all by pairwise exchange: in step s = 1 .. N-1 rank r sends its block for rank r+s and
// receives rank r-s's block for it, both at once, slice by slice, so every link carries one
// block each way and no rank waits for a peer that is itself waiting to send. N = 4:
//
//   step   rank 0        rank 1        rank 2        rank 3
//   1      ->1  <-3      ->2  <-0      ->3  <-1      ->0  <-2
//   2      ->2  <-2      ->3  <-3      ->0  <-0      ->1  <-1
//   3      ->3  <-1      ->0  <-2      ->1  <-3      ->2  <-0
//
// All-to-all-v is the same exchange with a block of its own size per pair: in step s rank r
// sends sendBlocks[r+s] and receives recvBlocks[r-s], whichever is longer going on alone once
// the other is done; an empty block is no message at all.
//
// Needs a link to every rank (the communicator connects them at the first all-to-all).
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"

namespace ringlet::collectives {

void pairwiseAllToAllv(const Group& group, const AllToAllvArgs& args, size_t sliceBytes,
                       const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int r = group.rank;
  const size_t element = args.elementBytes;
  auto at = [element](auto* base, const Piece& block) { return base + block.offset * element; };
  size_t result = 0;
  for (const Piece& block : args.recvBlocks) result += block.count * element;
  copyOwnBlock(at(args.recv, args.recvBlocks[r]), at(args.send, args.sendBlocks[r]),
               args.recvBlocks[r].count * element, result);
  for (int s = 1; s < n; ++s) {
    const int to = wrap(r + s, n);
    const int from = wrap(r - s, n);
    Link& out = group.link(to);
    Link& in = group.link(from);
    const std::byte* source = at(args.send, args.sendBlocks[to]);
    std::byte* target = at(args.recv, args.recvBlocks[from]);
    const size_t sendBytes = args.sendBlocks[to].count * element;
    const size_t recvBytes = args.recvBlocks[from].count * element;
    // Each link is cut by its own largest message, the same at both of its ends. An empty block
    // sends no message (its receiver expects none).
    const size_t sendSlice = std::min(sliceBytes, out.maxMessageBytes());
    const size_t recvSlice = std::min(sliceBytes, in.maxMessageBytes());
    // The block may stay in send until the flush below (Link::lend) unless a receive of this
    // step writes over it.
    const bool lends = !overlaps(source, sendBytes, target, recvBytes);
    size_t sent = 0;
    size_t received = 0;
    AfterFirstSend once(s == 1 ? &afterFirstSend : nullptr);
    while (sent < sendBytes || received < recvBytes) {
      if (sent < sendBytes) {
        const size_t bytes = std::min(sendSlice, sendBytes - sent);
        if (lends) {
          out.lend(source + sent, bytes, wait);  // the peer takes it with recvInto() below
        } else {
          sendFrom(out, source + sent, bytes, wait);
        }
        sent += bytes;
        once();
      }
      if (received < recvBytes) {
        once();
        const size_t bytes = std::min(recvSlice, recvBytes - received);
        in.recvInto(target + received, bytes, wait);
        received += bytes;
      }
    }
    if (sendBytes > 0) out.flush(wait);
  }
}

void pairwiseAllToAll(const Group& group, const AllToAllArgs& args, size_t sliceBytes,
                      const WaitContext& wait, const std::function<void()>& afterFirstSend) {
  // Equal blocks of blockBytes, counted in bytes.
  const std::vector<Piece> blocks = equalBlocks(args.blockBytes, group.size);
  pairwiseAllToAllv(group,
                    {.send = args.send,
                     .recv = args.recv,
                     .sendBlocks = blocks,
                     .recvBlocks = blocks,
                     .elementBytes = 1},
                    sliceBytes, wait, afterFirstSend);
}

}  // namespace ringlet::collectives
