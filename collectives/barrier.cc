// Dissemination barrier (Hensgen, Finkel and Manber): in round k, rank r signals r + 2^k and
// waits for the signal from r - 2^k. After ceil(log2 N) rounds every rank has heard, directly
// or through others, from every rank, so none can leave before all have entered. N = 5:
//
//   round 1 (distance 1): 0->1 1->2 2->3 3->4 4->0
//   round 2 (distance 2): 0->2 1->3 2->4 3->0 4->1
//   round 3 (distance 4): 0->4 1->0 2->1 3->2 4->3
//
// The communicator's header exchange (each rank sends its call to rank+1 and checks the one from
// rank-1) already is round 1, so the barrier starts at distance 2.
#include "collectives/chunking.h"
#include "collectives/collectives.h"
#include "src/trace.h"

namespace ringlet::collectives {

void disseminationBarrier(const Group& group, int firstDistance, const WaitContext& wait) {
  const int n = group.size;
  for (int distance = firstDistance; distance < n; distance <<= 1) {
    Link& to = group.link(wrap(group.rank + distance, n));
    Link& from = group.link(wrap(group.rank - distance, n));
    trace::StepScope scope(wait.trace, [&] {
      return trace::Step{.name = "exchange", .to = to.peer(), .from = from.peer()};
    });
    to.send(to.sendBuffer(0, nullptr, wait), 0, wait);
    from.recvInto(nullptr, 0, wait);
    to.flush(wait);
  }
}

}  // namespace ringlet::collectives
