// Broadcast from any root.
//
// Large messages: the pipelined chain of ring_schedule.h along the ring, root -> root+1 -> ...
// -> root-1, with the primitives below on host memory.
//
// Small messages: a binomial tree, ceil(log2 N) rounds. With v = (rank - root) mod N, rank v
// receives from v - 2^k where 2^k is v's highest set bit, then sends to v + 2^j for every
// smaller j. N = 8, root 0: round 1 0->4; round 2 0->2, 4->6; round 3 0->1 2->3 4->5 6->7.
#include <cstring>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

using kernels::kStreamingBytes;
using kernels::streamCopy;

namespace {

// Chain primitives over Links, on bytes. Over shared memory each incoming slot is read once,
// into the buffer (with non-temporal stores when it is large: nothing reads it again during the
// call) and into the next rank's slot.
class ChainBroadcast {
 public:
  ChainBroadcast(const Group& group, std::byte* buffer, size_t bytes, const WaitContext& wait)
      : group_(group), buffer_(buffer), wait_(wait), streaming_(bytes >= kStreamingBytes) {}

  void send(const Piece& p) { sendFrom(group_.next(), data(p), p.count, wait_); }

  void recvCopySend(const Piece& p) {
    if (!group_.prev().sharesMemory()) {
      group_.prev().recvInto(data(p), p.count, wait_);
      send(p);
      return;
    }
    Link& prev = group_.prev();
    const std::byte* in = prev.recv(p.count, wait_);
    std::byte* out = group_.next().sendBuffer(p.count, data(p), wait_);
    copyOut(data(p), in, p.count);
    if (out != data(p) && p.count > 0) std::memcpy(out, in, p.count);
    prev.release();
    group_.next().send(out, p.count, wait_);
  }

  void recv(const Piece& p) {
    if (!group_.prev().sharesMemory()) {
      group_.prev().recvInto(data(p), p.count, wait_);
      return;
    }
    Link& prev = group_.prev();
    copyOut(data(p), prev.recv(p.count, wait_), p.count);
    prev.release();
  }

 private:
  std::byte* data(const Piece& p) const { return buffer_ + p.offset; }
  void copyOut(std::byte* dst, const std::byte* src, size_t n) const {
    if (streaming_) {
      streamCopy(dst, src, n);
    } else if (n > 0) {
      std::memcpy(dst, src, n);
    }
  }

  const Group& group_;
  std::byte* buffer_;
  const WaitContext& wait_;
  const bool streaming_;
};

}  // namespace

void chainBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root,
                    size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - root, n);  // 0 = root, n-1 = end of the chain
  ChainBroadcast prims(group, buffer, bytes, wait);
  chainBroadcastSchedule(prims, position, n, bytes, std::max<size_t>(1, sliceBytes));
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
