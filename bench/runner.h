#pragma once
// Times and checks one operation at one size, on ringlet and (with --vs-mpi) on MPI, with the
// same buffers. Collective: every rank calls run() with the same arguments in the same order.
//
// Per variant: fill the input, warm up, barrier, time `iters` calls (blocking, or all issued
// async and then waited for), then refill, run once more and count wrong elements. The per-rank
// averages are reduced to their max and the wrong counts to their sum with ringlet all-reduces,
// outside the timed region.

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "bench/data.h"
#include "bench/device_side.h"
#include "bench/options.h"
#include "bench/report.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {

class Runner {
 public:
  // Allocates two buffers of options.maxBytes each.
  // With options.cuda the collectives run on `device`'s buffers instead.
  Runner(Communicator& comm, const Options& options, device::DeviceSide* device = nullptr);

  Row run(BenchOp op, size_t bytes);

 private:
  enum class Impl { kRinglet, kMpi };
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

  static Buffer allocate(size_t bytes);
  void prepare(BenchOp op, bool inPlace, size_t count);
  void syncAfter(Impl impl);  // barrier of this implementation (see runner.cc)
  void runOnce(Impl impl, BenchOp op, bool inPlace, size_t count);
  double timeLoop(Impl impl, BenchOp op, bool inPlace, size_t count);  // seconds per iteration
  int64_t check(Impl impl, BenchOp op, bool inPlace, size_t count);    // -1 when not checked

  // --device cuda: host buffers are filled and checked, device buffers run the collective.
  void toDevice(BenchOp op, bool inPlace, size_t count);
  void fromDevice(BenchOp op, bool inPlace, size_t count);

  Communicator& comm_;
  Options options_;
  device::DeviceSide* device_;
  DataPattern pattern_;
  Buffer send_;
  Buffer recv_;
};

}  // namespace ringlet::bench
