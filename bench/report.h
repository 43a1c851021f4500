#pragma once
// What one benchmark row holds, shared by the text table, JSON and CSV writers.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/options.h"
#include "ringlet/types.h"

namespace ringlet::bench {

// One measured variant of one size: time is the max over ranks of each rank's average
// iteration time; wrong is the mismatch count summed over ranks, -1 when not checked.
struct Timing {
  double timeUs = 0;
  double algbwGBs = 0;  // bytes / time, 1 GB = 1e9 bytes
  double busbwGBs = 0;  // algbw * busFactor
  int64_t wrong = -1;
};

struct Row {
  BenchOp op = BenchOp::kAllreduce;
  size_t bytes = 0;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  std::optional<ReduceOp> redop;  // none for broadcast and barrier
  int root = -1;                  // -1 for allreduce and barrier
  Timing outOfPlace;
  std::optional<Timing> inPlace;  // --inplace 1, all-reduce only
  std::optional<Timing> mpi;      // --vs-mpi, when MPI has this operation
  std::string mpiNote;            // why mpi is empty under --vs-mpi ("n/a: ...")
  // --device cuda: bandwidth of a device-to-device cudaMemcpy of `bytes` on the same GPU in
  // the same run (bytes / time), the physical reference for busbw.
  std::optional<double> copyGBs;
};

struct RunInfo {
  int worldSize = 1;
  std::string links;   // Communicator::describeLinks()
  std::string source;  // Bootstrap::source
  std::string mpiLibrary;
  std::string device;  // --device cuda: DeviceSide::describe()
  Options options;
};

// busbw / algbw (nccl-tests): all-reduce 2(n-1)/n, broadcast 1, barrier 0 (time only).
double busFactor(BenchOp op, int worldSize);

Timing makeTiming(BenchOp op, size_t bytes, int worldSize, double seconds, int64_t wrong);

// Sum of #wrong over every row and variant (unchecked rows count 0).
int64_t totalWrong(const std::vector<Row>& rows);

}  // namespace ringlet::bench
