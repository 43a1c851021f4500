#pragma once
// ringlet-bench's command line: what to run, over which sizes, and where to write results.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/ops.h"
#include "ringlet/types.h"

namespace ringlet::bench {

struct Options {
  size_t minBytes = 32 << 20;
  size_t maxBytes = 32 << 20;
  size_t stepFactor = 2;
  int iters = 20;        // timed iterations per size, at least
  double minTimeMs = 0;  // and at least this long (-n auto: 1 iteration, 100 ms)
  int warmup = 5;        // untimed iterations per size, at least
  double warmupMs = 20;  // and at least this long
  // --rounds: time every variant this many times per size, the variants taking turns (ringlet,
  // [in place], MPI, ringlet, ...); the row shows each variant's median round.
  int rounds = 1;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::vector<BenchOp> ops = {BenchOp::kAllreduce};
  VBlocks vblocks = VBlocks::kRamp;  // --vblocks: how the v-forms cut their size (ops.h)
  bool check = true;
  bool inPlace = false;  // also time the in-place form (extra columns)
  bool async = false;    // issue the timed iterations with the *Async calls, then wait for all
  bool vsMpi = false;    // time Open MPI's collectives next to ringlet's (MPI build only)
  // --vs-algos: time every algorithm of each op forced, taking turns with the automatic choice
  // (on dup()s of the communicator alike: bench/runner.h, AlgoComms).
  bool vsAlgos = false;
  bool cuda = false;  // --device cuda: buffers in GPU memory (bench/device_side.h)
  // --algo: CommunicatorOptions::algorithms entries to force (collective name -> algorithm).
  std::map<std::string, std::string> algorithms;
  // Test hook (--inject-wrong N): after each checked call, one receiving rank zeroes up to N
  // received elements before counting, so #wrong must read N wherever anything was received.
  size_t injectWrong = 0;
  std::string jsonPath;
  std::string csvPath;
};

// Parses argv. Returns nullopt after printing help (--help); throws InvalidArgument with a
// message naming the option and its value for anything wrong.
std::optional<Options> parseOptions(int argc, char** argv);

// "8", "64K", "256M", "1G" (binary multiples; also KiB/MiB/GiB, lower case). Throws
// InvalidArgument naming `what` and the text.
size_t parseByteSize(std::string_view text, std::string_view what);

// "allreduce,broadcast,barrier" or "all". Throws InvalidArgument naming an unknown entry.
std::vector<BenchOp> parseOpList(std::string_view text);

// --algo: "NAME" forces NAME for every op in `ops` that has algorithms; "op:NAME,op:NAME" forces
// each named op (which need not be in `ops`). Throws InvalidArgument naming a bad entry.
std::map<std::string, std::string> parseAlgorithms(std::string_view text,
                                                   const std::vector<BenchOp>& ops);

// The sizes to sweep: minBytes, minBytes*factor, ... up to maxBytes (inclusive).
std::vector<size_t> sweepSizes(const Options& options);

}  // namespace ringlet::bench
