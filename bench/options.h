#pragma once
// ringlet-bench's command line: what to run, over which sizes, and where to write results.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/types.h"

namespace ringlet::bench {

enum class BenchOp { kAllreduce, kBroadcast, kBarrier };

std::string_view toString(BenchOp op);

struct Options {
  size_t minBytes = 32 << 20;
  size_t maxBytes = 32 << 20;
  size_t stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::vector<BenchOp> ops = {BenchOp::kAllreduce};
  bool check = true;
  bool inPlace = false;  // also time the in-place form (extra columns)
  bool async = false;    // issue the timed iterations with the *Async calls, then wait for all
  bool vsMpi = false;    // time Open MPI's collectives next to ringlet's (MPI build only)
  bool cuda = false;     // --device cuda: buffers in GPU memory (bench/device_side.h)
  std::string jsonPath;
  std::string csvPath;
};

// Parses argv. Returns nullopt after printing help (--help); throws InvalidArgument with a
// message naming the option and its value for anything wrong.
std::optional<Options> parseOptions(int argc, char** argv);

// "8", "64K", "256M", "1G" (binary multiples; also KiB/MiB/GiB, lower case). Throws
// InvalidArgument naming `what` and the text.
size_t parseByteSize(std::string_view text, std::string_view what);

// "allreduce,broadcast,barrier". Throws InvalidArgument naming an unknown entry.
std::vector<BenchOp> parseOpList(std::string_view text);

// The sizes to sweep: minBytes, minBytes*factor, ... up to maxBytes (inclusive).
std::vector<size_t> sweepSizes(const Options& options);

}  // namespace ringlet::bench
