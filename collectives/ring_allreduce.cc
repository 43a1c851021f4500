// Ring all-reduce over transport Links: the shared schedule (ring_schedule.h, where the N = 4
// table and the pipelining are drawn) run by the host primitives (link_prims.h).
#include "collectives/collectives.h"
#include "collectives/link_prims.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {

void ringAllreduce(const Group& group, const AllreduceArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  const size_t elementBytes = elementSize(args.type);
  const bool streaming = args.count * elementBytes >= kernels::kStreamingBytes;
  LinkPrims prims(group.prev(), group.next(), args.send, args.recv, elementBytes, args.type,
                  args.op, group.size, streaming, wait);
  const size_t sliceElements = std::max<size_t>(1, sliceBytes / elementBytes);
  prims.traceChunks(args.count, group.size, sliceElements);
  ringAllreduceSchedule(prims, group.rank, group.size, args.count, sliceElements);
  group.next().flush(wait);
}

}  // namespace ringlet::collectives
