#pragma once
// The choice of algorithm, in one place. Every input is something all ranks know alike (world
// size, sizes, the transport table's entry for this host, options), so every rank picks the same
// algorithm for the same call.

#include <cstddef>
#include <initializer_list>

#include "transports/transport.h"

namespace ringlet::collectives {

enum class AllreduceAlgorithm {
  kLocalCopy,          // one rank: copy send to recv
  kInlineExchange,     // two ranks, data fits a call header: one message each way (core)
  kHeaderDoubling,     // more ranks, data fits a call header: recursive doubling over headers
  kRecursiveDoubling,  // small: log2(N) exchanges of the whole buffer
  kRing,               // large: reduce-scatter then all-gather, pipelined
};

struct AllreduceChoice {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  // Recursive doubling whose first partner is the next rank (two ranks, or even ranks of a
  // power-of-two world): the data follows the call header at once and the header is checked
  // after that first send, saving a round trip.
  bool earlyData = false;
};

// `smallBytes`: at or below, latency-optimised algorithms; `inlineBytes`: what a call header
// can carry.
AllreduceChoice chooseAllreduce(int rank, int size, size_t bytes, size_t smallBytes,
                                size_t inlineBytes);

enum class BroadcastAlgorithm {
  kNone,   // one rank
  kTree,   // small: binomial tree, ceil(log2 N) rounds
  kChain,  // large: pipelined chain along the ring
};
BroadcastAlgorithm chooseBroadcast(int size, size_t bytes, size_t smallBytes);

// The default small-message limit: where recursive doubling stops beating the ring. Measured
// (ringlet-bench, 16 KiB vs 64 KiB limits): with two ranks one exchange of the whole buffer wins
// up to 64 KiB on shm and TCP (32 KiB: 4.5 vs 6.6 us shm, 15 vs 29 us TCP); with more ranks it
// wins up to 64 KiB over TCP (32 KiB, 4 ranks: 52 vs 130 us) but not over shared memory.
// `sharedMemory`: every rank is on one host and the transport linking them shares memory.
size_t defaultSmallMessageBytes(int size, bool sharedMemory);

// Pipeline slice for the ring and chain over `links`: `segmentBytes` (0: 512 KiB), capped by
// every link's largest message, at least 64 bytes.
size_t sliceBytes(size_t segmentBytes, std::initializer_list<const transport::Link*> links);

}  // namespace ringlet::collectives
