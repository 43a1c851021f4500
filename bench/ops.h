#pragma once
// The operations ringlet-bench times, and what nccl-tests means by their size.
//
// The `size` column is the total buffer, as in nccl-tests (doc/PERFORMANCE.md):
//
//   op             size is                     count passed     busbw / algbw
//   allreduce      each buffer                 size             2(n-1)/n
//   broadcast      the buffer                  size             1
//   reduce         each buffer                 size             1
//   allgather      the gathered recv buffer    size / n (send)  (n-1)/n
//   reducescatter  the send buffer             size / n (recv)  (n-1)/n
//   alltoall       each rank's send buffer     size / n (block) (n-1)/n
//   gather         the root's recv buffer      size / n (send)  (n-1)/n
//   scatter        the root's send buffer      size / n (recv)  (n-1)/n
//   sendrecv       the message                 size             1
//   barrier        -                           -                - (time only)
//
// Sizes that n does not divide round down to a multiple of n elements (nccl-tests does the same),
// so a row's size can be smaller than asked, and 0 when fewer than n elements were asked for.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::bench {

enum class BenchOp {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kBarrier,
  kSendRecv,
};

// Every operation, in the order `--ops all` runs them.
const std::vector<BenchOp>& allOps();

// "allreduce", "reducescatter", ... (the --ops names; also the CommunicatorOptions::algorithms
// key where the operation has algorithms).
std::string_view toString(BenchOp op);

// The operation named `name` (a --ops name, or an alias: all_reduce, bcast, all_gather,
// reduce_scatter, all_to_all, send_recv); nullopt for anything else.
std::optional<BenchOp> opFromName(std::string_view name);

// The collective's name in CommunicatorOptions::algorithms, or "" (sendrecv: no algorithm).
std::string_view algorithmKey(BenchOp op);

bool hasBandwidth(BenchOp op);  // all but barrier
bool usesRoot(BenchOp op);      // broadcast, reduce, gather, scatter
bool reduces(BenchOp op);       // allreduce, reduce, reducescatter
// Has an in-place form in ringlet's API that differs from out of place (broadcast is always in
// place, sendrecv and barrier have none).
bool hasInPlace(BenchOp op);

// busbw / algbw, from nccl-tests.
double busFactor(BenchOp op, int worldSize);

// One row's buffers, in elements.
struct Shape {
  size_t count = 0;      // the `count` column: size / element size
  size_t bytes = 0;      // the `size` column (rounded down to n blocks where the op splits)
  size_t callCount = 0;  // the count argument of ringlet's call (and MPI's)
  size_t sendCount = 0;  // elements this rank's send buffer holds (on the root for scatter)
  size_t recvCount = 0;  // elements this rank's recv buffer holds (on the root for gather)
};

// One call's arguments, as ringlet's and MPI's calls take them.
struct CallArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // Shape::callCount
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

// sendrecv is a ring shift, as nccl-tests' sendrecv: rank r sends to r + 1 and receives from
// r - 1 (mod n).
inline int sendPeer(int rank, int worldSize) { return (rank + 1) % worldSize; }
inline int recvPeer(int rank, int worldSize) { return (rank + worldSize - 1) % worldSize; }

// The shape of `op` at `bytes` requested bytes of `type` over `worldSize` ranks.
Shape shapeOf(BenchOp op, size_t bytes, DataType type, int worldSize);

}  // namespace ringlet::bench
