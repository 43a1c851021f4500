#pragma once
// What one benchmark row holds, shared by the text table, JSON and CSV writers.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/options.h"
#include "ringlet/communicator.h"
#include "ringlet/types.h"

namespace ringlet::bench {

// One measured variant of one size: time is the max over ranks of each rank's average
// iteration time; wrong is the mismatch count summed over ranks, -1 when not checked.
struct Timing {
  double timeUs = 0;
  double algbwGBs = 0;  // bytes / time, 1 GB = 1e9 bytes
  double busbwGBs = 0;  // algbw * busFactor
  int64_t wrong = -1;
  int iters = 0;        // timed iterations (every rank ran the same number)
  int warmupIters = 0;  // untimed iterations before them
  // --rounds > 1: every round's time per call (the slowest rank's), in the order they ran;
  // timeUs is their median.
  std::vector<double> roundsUs;
};

// --vs-algos: one algorithm forced, and its timing at the row's size.
struct AlgoTiming {
  std::string name;
  Timing timing;
};

struct Row {
  BenchOp op = BenchOp::kAllreduce;
  size_t bytes = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  std::optional<ReduceOp> redop;  // reductions only
  int root = -1;                  // -1 for operations without a root
  // The algorithm that ran (Communicator::algorithmFor at this size; "-" for sendrecv), and
  // whether --algo or RINGLET_ALGO forced it.
  std::string algorithm = "-";
  bool algorithmForced = false;
  Timing outOfPlace;
  std::optional<Timing> inPlace;  // --inplace 1, operations with an in-place form
  std::optional<Timing> mpi;      // --vs-mpi, when MPI has this operation
  std::string mpiNote;            // why mpi is empty under --vs-mpi ("n/a: ...")
  // --vs-algos, ops with more than one algorithm: every algorithm forced, in algorithms() order,
  // timed in turns with outOfPlace (the automatic choice, on a communicator alike).
  std::vector<AlgoTiming> algos;
  // The copy reference, measured at each size in the same run (bytes / time): a memcpy of
  // `bytes` on every rank at once, the slowest rank's time (--device cuda: a device-to-device
  // cudaMemcpy on rank 0's GPU alone). Unset for barrier and empty sizes.
  std::optional<double> copyGBs;
};

struct RunInfo {
  int worldSize = 1;
  std::string links;   // Communicator::describeLinks()
  std::string source;  // Bootstrap::source
  std::string mpiLibrary;
  std::string device;  // --device cuda: DeviceSide::describe()
  Options options;
  // The algorithm each collective runs with ("auto" unless --algo or RINGLET_ALGO forced one).
  std::map<std::string, std::string> algorithms;
  // The cost model the automatic choice used (Communicator::costModel): with the JSON, a run's
  // choices can be priced again offline.
  CostModel model;
};

// busbw uses busFactor() (bench/ops.h).
Timing makeTiming(BenchOp op, size_t bytes, int worldSize, double seconds, int64_t wrong);

// The algorithm `op` runs with according to `algorithms` ("auto" when absent, "-" for sendrecv).
std::string algorithmOf(const std::map<std::string, std::string>& algorithms, BenchOp op);

// --vs-algos: the fastest forced algorithm (nullptr without any), and the forced time of the
// row's algorithm (auto's pick) over the fastest's; nullopt where auto's pick cannot be forced
// (a path of its own, e.g. "header_inline").
const AlgoTiming* bestAlgo(const Row& row);
std::optional<double> pickOverBest(const Row& row);

// Sum of #wrong over every row and variant (unchecked rows count 0).
int64_t totalWrong(const std::vector<Row>& rows);

}  // namespace ringlet::bench
