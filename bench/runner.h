#pragma once
// Times and checks one operation at one size, on ringlet and (with --vs-mpi) on MPI, with the
// same buffers. Collective: every rank calls run() with the same arguments in the same order.
//
// Per variant (ringlet out of place, ringlet in place, MPI):
//   1. fill the inputs (bench/workload.h);
//   2. warm up: batches of calls until at least -w calls AND --warmup-ms have passed (after the
//      first batch, which holds the cold calls). After each
//      batch the ranks agree (an all-reduce max of the elapsed time, through the implementation
//      being measured), so every rank runs the same number of calls and stops together;
//   3. barrier, then time the calls: -n of them, or more with --min-time-ms (the count comes
//      from the agreed warm-up time per call, so it is the same on every rank). Blocking calls,
//      or with --async all issued and then waited for;
//   4. refill, run once more and count wrong elements.
// With --rounds R, steps 2-3 run R times per variant, the variants taking turns (ringlet,
// [in place], MPI, then [in place], MPI, ringlet: each round starts one variant later), and
// each variant's median round is its time; step 4 follows
// the last round. With --vs-algos (AlgoComms) the ringlet variant runs on `automatic` and every
// forced algorithm is one variant more, in the same turns, each checked as well. Then the copy
// reference: every rank memcpys `size` bytes at once (--device cuda: rank 0's device-to-device
// copy). The per-rank averages are reduced to their max and the wrong counts to their sum with
// ringlet all-reduces, outside the timed region.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "bench/device_side.h"
#include "bench/ops.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {

// --vs-algos: the communicators one op runs on, dup()s of the bench's communicator made alike
// (links of their own, the parent's cost model): `automatic` choosing by the model, and one per
// algorithm of the op forcing it. The automatic variant runs on a dup too, so that no variant
// has links warmed by the others' calls or made another way.
struct AlgoComms {
  Communicator* automatic = nullptr;
  std::vector<std::pair<std::string, Communicator*>> forced;  // algorithm name, its communicator
};

class Runner {
 public:
  // Allocates two buffers of options.maxBytes each.
  // With options.cuda the collectives run on `device`'s buffers instead.
  Runner(Communicator& comm, const Options& options, device::DeviceSide* device = nullptr);

  // One table row; with `algos`, its per-algorithm timings too.
  Row run(BenchOp op, size_t bytes, const AlgoComms* algos = nullptr);

 private:
  enum class Impl { kRinglet, kMpi };
  struct Loop {
    double seconds = 0;  // per timed call
    int iters = 0;
    int warmupIters = 0;
  };

  CallArgs args(BenchOp op, const Shape& shape, bool inPlace);
  // The row's algorithm: the communicator's choice for this shape (v-forms: its blocks).
  std::string algorithmColumn(BenchOp op, const Shape& shape) const;
  void runOnce(Impl impl, BenchOp op, const CallArgs& args);
  // `count` calls; on the device, then waits for the stream.
  void runBatch(Impl impl, BenchOp op, const CallArgs& args, int count);
  void agreeMax(Impl impl, double* values, int count);  // all-reduce max, in place
  void syncAfter(Impl impl);  // barrier of this implementation (see runner.cc)
  // Warm-up calls; returns how many ran and the agreed seconds per call of the last batch.
  int warmUp(Impl impl, BenchOp op, const CallArgs& args, double* secondsPerCall);
  Loop timeLoop(Impl impl, BenchOp op, const Shape& shape, bool inPlace);
  int64_t check(Impl impl, BenchOp op, const Shape& shape, bool inPlace);  // -1: not checked
  double timeCopy(size_t bytes, int iters);  // seconds per copy, max over ranks

  // --device cuda: host buffers are filled and checked, device buffers run the collective.
  // The shape's send and recv elements (send only out of place, where it is a buffer of its own).
  void toDevice(const Shape& shape, bool inPlace);
  void fromDevice(const Shape& shape, bool inPlace);

  Communicator& comm_;
  Communicator* ringlet_ = &comm_;  // what the ringlet variant being timed runs on
  Options options_;
  device::DeviceSide* device_;
  Workload work_;
};

}  // namespace ringlet::bench
