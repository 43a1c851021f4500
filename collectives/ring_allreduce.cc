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
  // Non-temporal stores from twice the usual size: at 8 MiB (N = 2, 3 alternating runs) they
  // took 1.15x the time of ordinary ones (the send and receive buffers still fit this rank's
  // share of the cache); from 16 MiB the two were within the runs' spread.
  const bool streaming = args.count * elementBytes >= 2 * kernels::kStreamingBytes;
  LinkPrims prims(group.prev(), group.next(), args.send, args.recv, elementBytes, args.type,
                  args.op, group.size, streaming, wait);
  const size_t sliceElements = std::max<size_t>(1, sliceBytes / elementBytes);
  prims.traceChunks(args.count, group.size, sliceElements);
  ringAllreduceSchedule(prims, group.rank, group.size, args.count, sliceElements);
  group.next().flush(wait);
}

}  // namespace ringlet::collectives
