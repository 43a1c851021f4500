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
//   allgatherv     the gathered recv buffer    blocks (below)   (n-1)/n
//   reducescatterv the send buffer             blocks           (n-1)/n
//   alltoallv      each rank's send buffer     blocks           (n-1)/n
//   gatherv        the root's recv buffer      blocks           (n-1)/n
//   scatterv       the root's send buffer      blocks           (n-1)/n
//
// Sizes that n does not divide round down to a multiple of n elements (nccl-tests does the same),
// so a row's size can be smaller than asked, and 0 when fewer than n elements were asked for.
//
// The v-forms (nccl-tests has none; OSU's osu_allgatherv & co. time even blocks) cut the size
// into blocks of u * w elements, u = size / (the weights' sum), rounded down:
//   --vblocks ramp (default)  rank q's block weighs q + 1, so blocks differ up to n-fold and the
//                             largest is 2n/(n+1) times the mean; all-to-all-v: rank r sends
//                             ((r + q) mod n) + 1 units to q (every rank sends and receives the
//                             whole size; the weights are symmetric, so r receives from q what it
//                             sends to q)
//   --vblocks even            every block weighs 1: the equal-block op through the v-form's call
// Blocks travel packed in rank order (displacements at the prefix sums). busbw uses the
// equal-block factor, (n-1)/n: with uneven blocks the bytes a rank moves depend on its block.

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
  kAllgatherv,
  kReduceScatterv,
  kAllToAllv,
  kGatherv,
  kScatterv,
};

// How the v-forms cut their size into blocks (the table above).
enum class VBlocks { kRamp, kEven };

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
bool usesRoot(BenchOp op);      // broadcast, reduce, gather, scatter, gatherv, scatterv
bool reduces(BenchOp op);       // allreduce, reduce, reducescatter, reducescatterv
bool isVForm(BenchOp op);       // allgatherv, reducescatterv, alltoallv, gatherv, scatterv
// Has an in-place form in ringlet's API that differs from out of place (broadcast is always in
// place, sendrecv and barrier have none).
bool hasInPlace(BenchOp op);

// busbw / algbw, from nccl-tests.
double busFactor(BenchOp op, int worldSize);

// One row's buffers, in elements.
struct Shape {
  size_t count = 0;      // the `count` column: size / element size
  size_t bytes = 0;      // the `size` column (rounded down to n blocks where the op splits)
  size_t callCount = 0;  // the count argument of ringlet's call (and MPI's); v-forms: the unit
  // Elements this rank's send buffer holds (on the root for scatter), and its recv buffer (on
  // the root for gather). The v-forms': at most these (a rank's block is vCounts()).
  size_t sendCount = 0;
  size_t recvCount = 0;
  VBlocks vblocks = VBlocks::kRamp;  // v-forms: how the blocks are cut
};

// One call's arguments, as ringlet's and MPI's calls take them.
struct CallArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // Shape::callCount
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  // v-forms: the blocks by rank, in elements (vCounts), and MPI's int counts and displacements
  // (packed, at the prefix sums), made once per row and not per call.
  std::vector<size_t> counts;
  std::vector<int> mpiCounts;
  std::vector<int> mpiDispls;
};

// sendrecv is a ring shift, as nccl-tests' sendrecv: rank r sends to r + 1 and receives from
// r - 1 (mod n).
inline int sendPeer(int rank, int worldSize) { return (rank + 1) % worldSize; }
inline int recvPeer(int rank, int worldSize) { return (rank + worldSize - 1) % worldSize; }

// The shape of `op` at `bytes` requested bytes of `type` over `worldSize` ranks.
Shape shapeOf(BenchOp op, size_t bytes, DataType type, int worldSize,
              VBlocks vblocks = VBlocks::kRamp);

// A v-form's blocks on `rank`, in elements, by rank q: allgatherv, gatherv: what q contributes;
// reducescatterv, scatterv: what q ends with (the same on every rank); alltoallv: what `rank`
// sends to q, which is also what it receives from q. Empty for the other ops.
std::vector<size_t> vCounts(BenchOp op, const Shape& shape, int rank, int worldSize);

// Elements before block q: the prefix sum of `counts`.
size_t blockStart(const std::vector<size_t>& counts, int q);

}  // namespace ringlet::bench
