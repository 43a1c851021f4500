#pragma once
// The choice of algorithm, in one place: an alpha-beta-gamma cost model predicts each
// algorithm's time for a call, and the cheapest wins unless the caller forced one
// (RINGLET_ALGO / CommunicatorOptions::algorithms). Every input is something all ranks hold
// alike (world size, sizes, the model's parameters, which the communicator agrees on at
// creation, and the options), so every rank picks the same algorithm for the same call.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ringlet/communicator.h"
#include "transports/transport.h"

namespace ringlet::collectives {

enum class Collective : uint8_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kBarrier,
  // The v-forms with a choice: a block of its own size per rank (predictSecondsOfBlocks).
  kAllgatherv,
  kReduceScatterv,
  // The rooted v-forms: every rank passes every count, so all price the same blocks.
  kGatherv,
  kScatterv,
};
inline constexpr size_t kCollectiveCount = 13;

enum class Algorithm : uint8_t {
  kAuto,               // the cost model decides
  kRing,               // bandwidth-optimal, N-1 (or 2(N-1)) steps of 1/N of the data
  kRecursiveDoubling,  // log2(N) exchanges of the whole buffer (all-reduce); all-gather: of
                       // what a rank holds, which doubles each step
  kRabenseifner,       // recursive halving reduce-scatter + recursive doubling all-gather
  kTree,               // binomial tree: ceil(log2 N) rounds of the whole buffer
  kChain,              // pipelined chain along the ring: N-1 hops, sliced
  kBruck,              // ceil(log2 N) rounds of about half the data, any N
  kPairwise,           // N-1 exchanges, one block each way
  kDissemination,      // barrier: ceil(log2 N) rounds of signals
  kRecursiveHalving,   // reduce-scatter: log2(N) exchanges of half of what a rank holds
  // Two ranks, data that fits a call header: the header exchange carries it, one message each
  // way (the communicator's; never forced, not one of algorithmsOf()).
  kHeaderInline,
  kLinear,  // gather, scatter: the root exchanges each rank's block with that rank, N-1 messages
  // All-gather, reduce-scatter, all-reduce across hosts: a ring per local index across the hosts
  // and rings inside each host (hierarchical.cc), so a host's link carries (H-1)/H of the data
  // (twice for all-reduce). Priced only with H > 1 hosts of R > 1 ranks each; forced elsewhere,
  // the host-ordered ring in effect.
  kHierarchical,
};

// "allreduce", "reducescatter", "alltoall", ..., "allgatherv", "reducescatterv", "gatherv",
// "scatterv" (the names
// RINGLET_ALGO and ringlet-bench use; a v-form is forced by its own name, not its equal-block
// collective's).
std::string_view nameOf(Collective collective);
// "ring", "recursive_doubling", "rabenseifner", "tree", "chain", "bruck", "pairwise",
// "recursive_halving", "linear", ...
std::string_view nameOf(Algorithm algorithm);
std::optional<Collective> collectiveNamed(std::string_view name);
// The algorithms built for a collective, the model's candidates (kAuto not included).
std::span<const Algorithm> algorithmsOf(Collective collective);

// The forced algorithm per collective; kAuto where the model decides.
using ForcedAlgorithms = std::array<Algorithm, kCollectiveCount>;
// From CommunicatorOptions::algorithms ({"allreduce": "ring"}): throws InvalidArgument naming
// an unknown collective, or an algorithm that collective does not have (and listing those it has).
ForcedAlgorithms parseForced(const std::map<std::string, std::string>& byName);
// "allreduce:ring,allgather:bruck" -> {"allreduce": "ring", "allgather": "bruck"}; throws
// InvalidArgument naming `what` and the malformed entry. Names are checked by parseForced.
std::map<std::string, std::string> parseAlgorithmList(std::string_view text, std::string_view what);

// The model's parameters (include/ringlet/communicator.h).
using CostModel = ringlet::CostModel;

// Predicted seconds for `algorithm` running `collective` on `size` ranks. `bytes` is the size
// nccl-tests names: the buffer (all-reduce, broadcast, reduce), the gathered buffer (all-gather,
// gather), the scattered one (reduce-scatter, scatter), one rank's send buffer (all-to-all).
// `sliceBytes`: the pipeline slice of the ring and chain. `hosts`: the hosts the ranks are spread
// over, the same number on each (1: one host, or an uneven spread, which the model does not
// price); see the all-reduce, all-gather and all-to-all rows of select.cc.
double predictSeconds(Collective collective, Algorithm algorithm, int size, size_t bytes,
                      size_t sliceBytes, const CostModel& model, int hosts = 1);
// The v-forms (kAllgatherv, kReduceScatterv) with rank r's block of blockBytes[r] bytes: the
// largest block sets the ring's steps, and the largest group of chunks each log step of
// recursive halving and doubling. The rooted ones (kGatherv, kScatterv) take the blocks in
// relative order, the root's first (blockBytes[u] is rank (root + u) mod N's): the tree's
// subtrees are relative ranks. (predictSeconds prices them with blocks as even as `bytes`
// allows.) Every rank holds every count of these calls, so all choose alike.
double predictSecondsOfBlocks(Collective collective, Algorithm algorithm,
                              std::span<const size_t> blockBytes, size_t sliceBytes,
                              const CostModel& model, int hosts = 1);
// What a copied or reduced byte costs, relative to the calibrated rates, when a rank's buffers
// span `workingSetBytes` (CostModel::smallFactor, memoryFactor, cacheBytes): memoryFactor is
// reached kMemoryRampDoublings doublings past cacheBytes.
inline constexpr double kMemoryRampDoublings = 3;
double memoryScale(const CostModel& model, double workingSetBytes);
// The same for a byte sent over a link: where linkMemoryFactor was measured (by a shift of
// buffers of kLinkFactorWorkingSetBytes a rank), from 1 at the calibration's 1 MiB shift (a
// working set of 2 MiB) to it there, linear in log2 of the working set, on along that line for
// kLinkRampPastDoublings past it, flat after; below 2 MiB and where linkMemoryFactor is 0, as
// memoryScale.
inline constexpr double kLinkFactorWorkingSetBytes = double(size_t{32} << 20);
inline constexpr double kLinkRampPastDoublings = 1.5;
// Where the calibration measures both factors half way too (CostModel::linkMemoryMidFactor).
inline constexpr double kLinkMidWorkingSetBytes = double(size_t{8} << 20);
double linkMemoryScale(const CostModel& model, double workingSetBytes);
// The same for a byte sent one way (betaOneWay): oneWayMemoryFactor's ramp where it was
// measured (by a one-way stream of kLinkFactorWorkingSetBytes), else linkMemoryScale.
double oneWayMemoryScale(const CostModel& model, double workingSetBytes);
// The messages one after another of recursive doubling on `size` ranks: log2 p for the largest
// power of two p <= size, and two more where size is not one (the ranks past p fold in first and
// get the result last).
int doublingSteps(int size);
// `forced` when it is not kAuto; else the algorithm the model predicts fastest (ties: the first
// in algorithmsOf order).
Algorithm choose(Collective collective, int size, size_t bytes, size_t sliceBytes,
                 const CostModel& model, Algorithm forced, int hosts = 1);
// The same for a v-form's blocks (predictSecondsOfBlocks).
Algorithm chooseForBlocks(Collective collective, std::span<const size_t> blockBytes,
                          size_t sliceBytes, const CostModel& model, Algorithm forced,
                          int hosts = 1);

enum class AllreduceAlgorithm {
  kLocalCopy,          // one rank: copy send to recv
  kInlineExchange,     // two ranks, data fits a call header: one message each way (core)
  kHeaderDoubling,     // more ranks, data fits a call header: recursive doubling over headers
  kRecursiveDoubling,  // small: log2(N) exchanges of the whole buffer
  kRabenseifner,       // medium: recursive halving then doubling
  kRing,               // large: reduce-scatter then all-gather, pipelined
  kHierarchical,       // across hosts: the two-level reduce-scatter then all-gather
};

struct AllreduceChoice {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  // Recursive doubling whose first partner is the next rank (two ranks, or even ranks of a
  // power-of-two world): the data follows the call header at once and the header is checked
  // after that first send, saving a round trip.
  bool earlyData = false;
};

// All-reduce: data that fits a call header (`inlineBytes`) rides in headers (recursive
// doubling), unless another algorithm is forced; above that the model chooses.
AllreduceChoice chooseAllreduce(int rank, int size, size_t bytes, size_t inlineBytes,
                                size_t sliceBytes, const CostModel& model, Algorithm forced,
                                int hosts = 1);

// The pipeline slice where nothing sets another (CommunicatorOptions::segmentBytes,
// RINGLET_SEGMENT_BYTES, the ranks' placement: src/core placementSegmentBytes).
inline constexpr size_t kDefaultSegmentBytes = size_t{512} << 10;
// Pipeline slice for the ring and chain over `links`: `segmentBytes` (0: kDefaultSegmentBytes),
// capped by every link's largest message, at least 64 bytes.
size_t sliceBytes(size_t segmentBytes, std::initializer_list<const transport::Link*> links);

}  // namespace ringlet::collectives
