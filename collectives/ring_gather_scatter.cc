// Ring reduce-scatter, ring all-gather and chain reduce over transport Links: the schedules of
// ring_schedule.h (where each is drawn for N = 4) run by the host primitives (link_prims.h).
#include <cstring>
#include <memory>

#include "collectives/collectives.h"
#include "collectives/link_prims.h"
#include "collectives/ring_schedule.h"
#include "kernels/reduce.h"

namespace ringlet::collectives {
namespace {

size_t sliceElements(size_t sliceBytes, size_t elementBytes) {
  return std::max<size_t>(1, sliceBytes / elementBytes);
}

// Memory for partial results that a rank passes on but does not keep (over TCP a send leaves
// from caller memory, which must stay unchanged until the flush). Not zero-filled.
std::unique_ptr<std::byte[]> scratch(size_t bytes) {
  return std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(bytes, 1));
}

}  // namespace

void ringReduceScatter(const Group& group, const ReduceScatterArgs& args, size_t sliceBytes,
                       const WaitContext& wait) {
  const size_t elementBytes = elementSize(args.type);
  const size_t total = args.recvCount * group.size;
  const size_t blockBytes = args.recvCount * elementBytes;
  // Partial sums of the other ranks' blocks go through a buffer of the whole size; this rank's
  // block ends there too and is copied out (recv may be this rank's block of send: in place).
  auto partial = scratch(total * elementBytes);
  LinkPrims prims(group.prev(), group.next(), args.send, partial.get(), elementBytes, args.type,
                  args.op, group.size, /*streaming=*/false, wait);
  ringReduceScatterSchedule(prims, group.rank, group.size, total,
                            sliceElements(sliceBytes, elementBytes));
  group.next().flush(wait);
  if (blockBytes > 0) {
    std::memmove(args.recv, partial.get() + group.rank * blockBytes, blockBytes);
  }
}

void ringAllgather(const Group& group, const AllgatherArgs& args, size_t sliceBytes,
                   const WaitContext& wait) {
  const size_t elementBytes = elementSize(args.type);
  const size_t blockBytes = args.sendCount * elementBytes;
  const size_t total = args.sendCount * group.size;
  std::byte* own = args.recv + group.rank * blockBytes;
  if (own != args.send && blockBytes > 0) std::memcpy(own, args.send, blockBytes);
  // The output is both input and output: every chunk is sent from where it landed.
  LinkPrims prims(group.prev(), group.next(), args.recv, args.recv, elementBytes, args.type,
                  ReduceOp::kSum, 1, total * elementBytes >= kernels::kStreamingBytes, wait);
  ringAllgatherSchedule(prims, group.rank, group.size, total,
                        sliceElements(sliceBytes, elementBytes));
  group.next().flush(wait);
}

void chainReduce(const Group& group, const ReduceArgs& args, size_t sliceBytes,
                 const WaitContext& wait) {
  const int n = group.size;
  const int position = wrap(group.rank - args.root - 1, n);  // n-1 = the root
  const size_t elementBytes = elementSize(args.type);
  const size_t bytes = args.count * elementBytes;
  std::unique_ptr<std::byte[]> partial;
  std::byte* output = args.recv;
  if (position != n - 1) {  // partial sums pass through; only the root keeps the result
    partial = scratch(bytes);
    output = partial.get();
  }
  LinkPrims prims(group.prev(), group.next(), args.send, output, elementBytes, args.type, args.op,
                  n, /*streaming=*/false, wait);
  chainReduceSchedule(prims, position, n, args.count, sliceElements(sliceBytes, elementBytes));
  if (position != n - 1) group.next().flush(wait);
}

}  // namespace ringlet::collectives
