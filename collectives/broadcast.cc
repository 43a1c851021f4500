// Broadcast from any root.
//
// Large messages: the pipelined chain of ring_schedule.h along the ring, root -> root+1 -> ...
// -> root-1, run by the host primitives (link_prims.h: over shared memory each incoming slot is
// read once, into the buffer and into the next rank's slot).
//
// Small messages: a binomial tree, ceil(log2 N) rounds. With v = (rank - root) mod N, rank v
// receives from v - 2^k where 2^k is v's highest set bit, then sends to v + 2^j for every
// smaller j. N = 8, root 0: round 1 0->4; round 2 0->2, 4->6; round 3 0->1 2->3 4->5 6->7.
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "collectives/link_prims.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"
#include "src/trace.h"

namespace ringlet::collectives {

void chainBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root,
                    size_t sliceBytes, const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - root, n);  // 0 = root, n-1 = end of the chain
  // Bytes as elements; the buffer is both input and output; a broadcast never reduces.
  LinkPrims prims(group.prev(), group.next(), buffer, buffer, 1, DataType::kUInt8, ReduceOp::kSum,
                  1, bytes >= kernels::kStreamingBytes, wait);
  prims.traceChunks(bytes, 1, std::max<size_t>(1, sliceBytes));
  chainBroadcastSchedule(prims, position, n, bytes, std::max<size_t>(1, sliceBytes));
  if (position != n - 1) group.next().flush(wait);
}

void treeBroadcast(const Group& group, std::byte* buffer, size_t bytes, int root, size_t sliceBytes,
                   const WaitContext& wait, bool rootLends,
                   const std::function<void()>& afterFirstSend) {
  const int n = group.size;
  const int v = wrap(group.rank - root, n);
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      Link& parent = group.link(wrap(group.rank - mask, n));
      OfferScope offer(parent, buffer, bytes, sliceBytes);
      recvSliced(parent, buffer, bytes, sliceBytes, wait, bytes >= kernels::kStreamingBytes);
      break;
    }
    mask <<= 1;
  }
  // Small messages go to every child before any flush; large ones child by child.
  std::vector<Link*> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) children.push_back(&group.link(wrap(group.rank + mask, n)));
  }
  const bool oneMessage = std::all_of(children.begin(), children.end(), [&](Link* child) {
    return bytes <= std::min(sliceBytes, child->maxMessageBytes());
  });
  // The root's buffer is the caller's: its children may read it there (Link::lend), all at once;
  // they receive from it before anything else. Bytes a rank just received stay in the slots.
  const bool lends = v == 0 && rootLends;
  const std::function<void()> none;
  const auto start = wait.trace != nullptr ? trace::Clock::now() : trace::Clock::time_point{};
  for (Link* child : children) {
    // Only the first child's message may come before the header check (two ranks: the only one).
    const std::function<void()>& afterFirst = child == children.front() ? afterFirstSend : none;
    if (oneMessage) {
      if (lends && child->lendsBlock(bytes)) {
        child->lend(buffer, bytes, wait);
      } else {
        sendFrom(*child, buffer, bytes, wait);
      }
      if (afterFirst) afterFirst();
    } else if (lends) {
      lendSliced(*child, buffer, bytes, sliceBytes, wait, SIZE_MAX, afterFirst);
    } else {
      sendSliced(*child, buffer, bytes, sliceBytes, wait, afterFirst);
    }
  }
  if (oneMessage) {
    for (Link* child : children) {
      child->flush(wait);
      if (wait.trace != nullptr) {  // sent (or lent) at the start, gone (or read) by now
        wait.trace->step({.name = "send", .to = child->peer(), .bytes = bytes}, start,
                         trace::Clock::now());
      }
    }
  }
}

}  // namespace ringlet::collectives
