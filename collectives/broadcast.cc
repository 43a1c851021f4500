// Broadcast from any root.
//
// Large messages: a pipelined chain along the ring, root -> root+1 -> ... -> root-1. The buffer
// is cut into slices; every rank forwards slice k while the next slice is arriving, so the
// time is about (bytes + (N-2) * slice) / bandwidth. N = 4, root 1, slices a b c:
//
//   time   1      2      3      4      5
//   1->2   a      b      c
//   2->3          a      b      c
//   3->0                 a      b      c
//
// Small messages: a binomial tree, ceil(log2 N) rounds. With v = (rank - root) mod N, rank v
// receives from v - 2^k where 2^k is v's highest set bit, then sends to v + 2^j for every
// smaller j. N = 8, root 0: round 1 0->4; round 2 0->2, 4->6; round 3 0->1 2->3 4->5 6->7.
#include <cstring>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "collectives/reduce.h"

namespace ringlet::collectives {

void chainBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root,
                    size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - root, n);  // 0 = root, n-1 = end of the chain
  const size_t slices = std::max<size_t>(1, (bytes + sliceBytes - 1) / sliceBytes);
  const Piece whole{0, bytes};
  // Over shared memory read each incoming slot once, into the buffer (with non-temporal stores
  // when it is large: nothing reads it again during the call) and into the next rank's slot.
  const bool direct = position != 0 && group.prev().sharesMemory();
  const bool streaming = bytes >= kStreamingBytes;
  for (size_t k = 0; k < slices; ++k) {
    const Piece p = sliceOf(whole, k, sliceBytes);
    std::byte* data = buffer + p.offset;
    if (direct) {
      Link& prev = group.prev();
      const std::byte* in = prev.recv(p.count, wait);
      std::byte* out = position != n - 1 ? group.next().sendBuffer(p.count, data, wait) : nullptr;
      if (streaming) {
        streamCopy(data, in, p.count);
      } else if (p.count > 0) {
        std::memcpy(data, in, p.count);
      }
      if (out != nullptr && out != data && p.count > 0) std::memcpy(out, in, p.count);
      prev.release();
      if (out != nullptr) group.next().send(out, p.count, wait);
      continue;
    }
    if (position != 0) group.prev().recvInto(data, p.count, wait);
    if (position != n - 1) sendFrom(group.next(), data, p.count, wait);
  }
  if (position != n - 1) group.next().flush(wait);
}

void treeBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root,
                   const WaitContext& wait) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      group.link(wrap(group.rank - mask, n)).recvInto(buffer, bytes, wait);
      break;
    }
    mask <<= 1;
  }
  std::vector<Link*> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) {
      children.push_back(&group.link(wrap(group.rank + mask, n)));
      sendFrom(*children.back(), buffer, bytes, wait);
    }
  }
  for (Link* child : children) child->flush(wait);
}

}  // namespace ringlet::collectives
