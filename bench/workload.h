#pragma once
// The host buffers of one rank and, per operation, what goes in them and what must come out.
//
// Inputs come from DataPattern (bench/data.h): rank r's send buffer holds the pattern of rank r
// from element 0, so every block that arrives somewhere says where it came from:
//
//   op             rank r checks (c = the call's count, n ranks)
//   allreduce      recv = op over ranks
//   broadcast      buffer = root's input
//   reduce         root: recv = op over ranks
//   allgather      recv block q = rank q's input [0, c)
//   reducescatter  recv = op over ranks of elements [r*c, r*c + c)
//   alltoall       recv block q = rank q's input [r*c, r*c + c) (the block q addressed to r)
//   gather         root: recv block q = rank q's input [0, c)
//   scatter        recv = root's input [r*c, r*c + c)
//   sendrecv       recv = input of rank r - 1
//   allgatherv     recv block q (packed, at the prefix sum of the counts) = rank q's input
//   gatherv        root: as allgatherv
//   reducescatterv recv = op over ranks of the elements of block r
//   scatterv       recv = root's input of block r
//   alltoallv      recv block q = rank q's input from where its blocks for ranks < r end
//
// Out of place, every send buffer must also come back untouched. Outputs start as poison
// (zero bytes, which no input and no result equals), so an element nobody wrote is wrong.
// Reductions use the pattern of the -o reduction; the others use the sum pattern, whose values
// repeat least often.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "bench/data.h"
#include "bench/ops.h"
#include "bench/options.h"

namespace ringlet::bench {

class Workload {
 public:
  // Allocates two page-aligned buffers of options.maxBytes.
  Workload(const Options& options, int rank, int worldSize);

  // The arguments of one call on the host buffers. In place, everything lives in recv():
  // allreduce/reduce/alltoall pass recv() twice, allgather/gather send from this rank's block of
  // recv(), reducescatter/scatter receive into it.
  CallArgs args(BenchOp op, const Shape& shape, bool inPlace) const;

  // Fills the inputs and poisons the outputs of one call.
  void prepare(BenchOp op, const Shape& shape, bool inPlace);

  // Wrong elements on this rank after one call on freshly prepared buffers (the table above).
  // With --inject-wrong N, the one rank injectingRank() zeroes up to N received elements first.
  int64_t countWrong(BenchOp op, const Shape& shape, bool inPlace);

  // The rank that --inject-wrong corrupts: the root where only the root receives (reduce,
  // gather), else the last rank.
  int injectingRank(BenchOp op) const;

  std::byte* send() { return send_.get(); }
  std::byte* recv() { return recv_.get(); }

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;
  static Buffer allocate(size_t bytes);

  const DataPattern& pattern(BenchOp op) const { return reduces(op) ? reduced_ : moved_; }
  std::byte* at(std::byte* base, size_t elements) const { return base + elements * width_; }
  // Where this rank's result lands and how many elements it has (0: it receives nothing).
  std::byte* result(BenchOp op, const Shape& shape, bool inPlace, size_t* count);

  Options options_;
  int rank_;
  int worldSize_;
  size_t width_;
  DataPattern reduced_;
  DataPattern moved_;
  Buffer send_;
  Buffer recv_;
};

}  // namespace ringlet::bench
