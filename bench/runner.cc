#include "bench/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/calls.h"
#include "bench/mpi_side.h"

namespace ringlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr int kMaxIters = 1000000;
constexpr int kMaxAsyncIters = 100000;  // each in-flight call holds a Work

}  // namespace

Runner::Runner(Communicator& comm, const Options& options, device::DeviceSide* device)
    : comm_(comm), options_(options), device_(device), work_(options, comm.rank(), comm.size()) {}

CallArgs Runner::args(BenchOp op, const Shape& shape, bool inPlace) {
  CallArgs a = work_.args(op, shape, inPlace);
  if (device_ != nullptr) {
    // The same places in the device buffers (in place: a block of recv, or recv itself).
    auto onDevice = [&](const void* host) -> void* {
      const auto* p = static_cast<const std::byte*>(host);
      if (p >= work_.recv() && p < work_.recv() + options_.maxBytes) {
        return static_cast<std::byte*>(device_->recv()) + (p - work_.recv());
      }
      return static_cast<std::byte*>(device_->send()) + (p - work_.send());
    };
    a.send = onDevice(a.send);
    a.recv = onDevice(a.recv);
  }
  return a;
}

// In place, recv holds the whole call: the larger of its input and output (a reduce-scatter's or
// scatter's input is size() blocks, its output one).
static size_t recvElements(const Shape& shape, bool inPlace) {
  return inPlace ? std::max(shape.sendCount, shape.recvCount) : shape.recvCount;
}

void Runner::toDevice(const Shape& shape, bool inPlace) {
  const size_t element = elementSize(options_.type);
  if (!inPlace) device_->upload(device_->send(), work_.send(), shape.sendCount * element);
  device_->upload(device_->recv(), work_.recv(), recvElements(shape, inPlace) * element);
}

void Runner::fromDevice(const Shape& shape, bool inPlace) {
  const size_t element = elementSize(options_.type);
  if (!inPlace) device_->download(work_.send(), device_->send(), shape.sendCount * element);
  device_->download(work_.recv(), device_->recv(), recvElements(shape, inPlace) * element);
}

void Runner::runOnce(Impl impl, BenchOp op, const CallArgs& a) {
  if (device_ != nullptr) {
    device_->run(op, a);
  } else if (impl == Impl::kMpi) {
    mpi::run(op, a);
  } else {
    callRinglet(*ringlet_, op, a);
  }
}

void Runner::runBatch(Impl impl, BenchOp op, const CallArgs& a, int count) {
  for (int i = 0; i < count; ++i) runOnce(impl, op, a);
  if (device_ != nullptr) device_->synchronize();
}

void Runner::agreeMax(Impl impl, double* values, int count) {
  if (impl == Impl::kMpi) {
    mpi::allreduceMax(values, count);
  } else {
    ringlet_->allreduce(values, values, static_cast<size_t>(count), DataType::kFloat64,
                        ReduceOp::kMax);
  }
}

void Runner::syncAfter(Impl impl) {
  // Open MPI's TCP path can return from a collective on one rank while a peer still needs this
  // rank to progress MPI; a ringlet barrier here would then wait forever. MPI's own barrier keeps
  // progressing until every rank is through.
  if (impl == Impl::kMpi) {
    mpi::run(BenchOp::kBarrier, CallArgs{});
  } else {
    ringlet_->barrier();
  }
}

int Runner::warmUp(Impl impl, BenchOp op, const CallArgs& a, double* secondsPerCall) {
  *secondsPerCall = 0;
  const double warmupSeconds = options_.warmupMs / 1e3;
  // --min-time-ms needs a time per call: at least one batch then.
  if (options_.warmup == 0 && warmupSeconds <= 0 && options_.minTimeMs <= 0) return 0;
  int done = 0;
  int batch = std::max(options_.warmup, 1);
  // Time spent in the batches after the first. The first holds the cold calls (the first call
  // of a communicator, or of a size, can take longer than the whole warm-up time), so it does
  // not count towards --warmup-ms.
  double warmSeconds = 0;
  for (bool first = true;; first = false) {
    const auto batchStart = Clock::now();
    runBatch(impl, op, a, batch);
    done += batch;
    const double took = secondsSince(batchStart);
    if (!first) warmSeconds += took;
    // {warm time, seconds per call of this batch}: the slowest rank's, the same on every rank,
    // so every rank takes the same decision below.
    double agreed[2] = {warmSeconds, took / batch};
    agreeMax(impl, agreed, 2);
    *secondsPerCall = agreed[1];
    const double left = warmupSeconds - agreed[0];
    if ((done >= options_.warmup && left <= 0) || done >= kMaxIters) return done;
    // Half of what seems to be left, growing at most 4x per batch (early calls are the slow ones).
    const double fits = agreed[1] > 0 ? left / agreed[1] / 2 : 4.0 * batch;
    batch = static_cast<int>(std::clamp(fits, 1.0, 4.0 * batch));
    batch = std::min(batch, kMaxIters - done);
  }
}

Runner::Loop Runner::timeLoop(Impl impl, BenchOp op, const Shape& shape, bool inPlace) {
  work_.prepare(op, shape, inPlace);
  if (device_ != nullptr) toDevice(shape, inPlace);
  const CallArgs a = args(op, shape, inPlace);
  const bool async = options_.async && impl == Impl::kRinglet && device_ == nullptr;
  Loop loop;
  double perCall = 0;
  loop.warmupIters = warmUp(impl, op, a, &perCall);
  loop.iters = options_.iters;
  if (options_.minTimeMs > 0 && perCall > 0) {
    const double wanted = std::ceil(options_.minTimeMs / 1e3 / perCall);
    const int cap = async ? kMaxAsyncIters : kMaxIters;
    loop.iters = std::max(loop.iters, static_cast<int>(std::min(wanted, double(cap))));
  }
  syncAfter(impl);
  const auto start = Clock::now();
  if (async) {
    std::vector<Work> works;
    works.reserve(static_cast<size_t>(loop.iters));
    for (int i = 0; i < loop.iters; ++i) issueRinglet(*ringlet_, op, a, works);
    for (const Work& work : works) work.wait();
  } else {
    // Device: enqueue every iteration, then wait for the stream (nccl-tests' way).
    runBatch(impl, op, a, loop.iters);
  }
  loop.seconds = secondsSince(start) / loop.iters;
  if (impl == Impl::kMpi) syncAfter(impl);
  return loop;
}

int64_t Runner::check(Impl impl, BenchOp op, const Shape& shape, bool inPlace) {
  if (!options_.check || !hasBandwidth(op)) return -1;
  work_.prepare(op, shape, inPlace);
  if (device_ != nullptr) toDevice(shape, inPlace);
  runBatch(impl, op, args(op, shape, inPlace), 1);
  if (device_ != nullptr) fromDevice(shape, inPlace);
  if (impl == Impl::kMpi) syncAfter(impl);
  return work_.countWrong(op, shape, inPlace);
}

double Runner::timeCopy(size_t bytes, int iters) {
  double seconds = 0;
  if (device_ != nullptr) {
    // Rank 0 alone, the others idle: the GPU's own copy bandwidth. (Ranks that share one GPU
    // share this bandwidth in the collective; see the README's CUDA section.)
    comm_.barrier();
    if (comm_.rank() == 0) seconds = device_->timeDeviceCopy(bytes, iters, options_.warmup);
  } else {
    // Every rank at once, as in a collective: on one host they share the memory bandwidth.
    std::byte* from = work_.send();
    std::byte* to = work_.recv();
    // At least `iters` copies and kCopySeconds, so that tiny copies outlast the clock's overhead.
    constexpr double kCopySeconds = 2e-3;
    std::memcpy(to, from, bytes);  // warm: caches and TLB as the timed copies will see them
    comm_.barrier();
    const auto start = Clock::now();
    int done = 0;
    for (int batch = std::max(iters, 1);; batch = std::min(2 * batch, kMaxIters)) {
      for (int i = 0; i < batch; ++i) {
        std::memcpy(to, from, bytes);
        asm volatile("" : : "r"(to) : "memory");  // every copy happens
      }
      done += batch;
      if (secondsSince(start) >= kCopySeconds || done >= kMaxIters) break;
    }
    seconds = secondsSince(start) / done;
  }
  comm_.allreduce(&seconds, &seconds, 1, DataType::kFloat64, ReduceOp::kMax);
  return seconds;
}

std::string Runner::algorithmColumn(BenchOp op, const Shape& shape) const {
  const int n = comm_.size();
  const std::string_view key = algorithmKey(op);
  if (op == BenchOp::kAllToAllv) return n > 1 ? "pairwise" : "local_copy";  // its one schedule
  if (key.empty()) return "-";
  if (!isVForm(op)) return ringlet_->algorithmFor(key, shape.bytes);
  // The blocks as this row cuts them (the same on every rank), not even ones.
  std::vector<size_t> blockBytes = vCounts(op, shape, comm_.rank(), n);
  for (size_t& b : blockBytes) b *= elementSize(options_.type);
  return ringlet_->algorithmFor(key, blockBytes, options_.root);
}

Row Runner::run(BenchOp op, size_t bytes, const AlgoComms* algos) {
  const int n = comm_.size();
  const Shape shape = shapeOf(op, bytes, options_.type, n, options_.vblocks);
  Row row;
  row.op = op;
  row.type = options_.type;
  row.count = shape.count;
  row.bytes = shape.bytes;
  if (reduces(op)) row.redop = options_.op;
  row.root = usesRoot(op) ? options_.root : -1;

  // Slots: 0 ringlet out-of-place, 1 ringlet in-place, 2 MPI, 3... the forced algorithms
  // (--vs-algos). Unused slots stay 0. With --rounds the slots take turns, round after round, so
  // that a noisy stretch of the machine falls on all of them rather than on whichever ran then.
  constexpr int kForced = 3;
  const int rounds = options_.rounds;
  const bool inPlace = options_.inPlace && hasInPlace(op);
  const std::string mpiNote =
      options_.vsMpi ? mpi::unsupportedReason(op, options_.type, options_.op) : "";
  const bool mpiRuns = options_.vsMpi && mpiNote.empty();
  if (!mpiRuns) row.mpiNote = mpiNote;
  Communicator* automatic = algos != nullptr ? algos->automatic : &comm_;
  const size_t forced = algos != nullptr ? algos->forced.size() : 0;
  const size_t slots = kForced + forced;
  // The communicator of each ringlet slot (MPI's: unused).
  std::vector<Communicator*> on(slots, automatic);
  for (size_t i = 0; i < forced; ++i) on[kForced + i] = algos->forced[i].second;
  std::vector<Loop> loops(slots);                    // iteration counts, summed over rounds
  std::vector<double> seconds(slots * rounds, 0.0);  // [slot * rounds + round], per call
  auto timeRound = [&](size_t slot, Impl impl, bool place, int round) {
    ringlet_ = on[slot];
    const Loop loop = timeLoop(impl, op, shape, place);
    loops[slot].iters += loop.iters;
    loops[slot].warmupIters += loop.warmupIters;
    seconds[slot * rounds + round] = loop.seconds;
  };
  struct Variant {
    size_t slot;
    Impl impl;
    bool inPlace;
  };
  std::vector<Variant> variants = {{0, Impl::kRinglet, false}};
  if (inPlace) variants.push_back({1, Impl::kRinglet, true});
  if (mpiRuns) variants.push_back({2, Impl::kMpi, false});
  for (size_t i = 0; i < forced; ++i) variants.push_back({kForced + i, Impl::kRinglet, false});
  for (int round = 0; round < rounds; ++round) {
    // Each round starts one variant later: none always runs first, after the last size's
    // check and copy or the last round's other calls.
    for (size_t k = 0; k < variants.size(); ++k) {
      const Variant& v = variants[(k + static_cast<size_t>(round)) % variants.size()];
      timeRound(v.slot, v.impl, v.inPlace, round);
      if (round == 0 && v.slot == 0) {
        // After the calls: a device communicator chooses its path at its first one.
        row.algorithm = device_ == nullptr ? algorithmColumn(op, shape)
                                           : device_->algorithm(op, shape.bytes, [&](size_t chunk) {
                                               Shape part = shape;
                                               part.bytes = chunk;
                                               return algorithmColumn(op, part);
                                             });
      }
    }
  }
  std::vector<int64_t> wrong(slots, 0);
  auto checkSlot = [&](size_t slot, Impl impl, bool place) {
    ringlet_ = on[slot];
    wrong[slot] = check(impl, op, shape, place);
  };
  checkSlot(0, Impl::kRinglet, false);
  if (inPlace) checkSlot(1, Impl::kRinglet, true);
  if (mpiRuns) checkSlot(2, Impl::kMpi, false);
  for (size_t i = 0; i < forced; ++i) checkSlot(kForced + i, Impl::kRinglet, false);
  ringlet_ = &comm_;
  if (hasBandwidth(op) && row.bytes > 0) {
    const double copySeconds = timeCopy(row.bytes, loops[0].iters / rounds);
    if (copySeconds > 0) row.copyGBs = static_cast<double>(row.bytes) / copySeconds / 1e9;
  }
  comm_.allreduce(seconds.data(), seconds.data(), seconds.size(), DataType::kFloat64,
                  ReduceOp::kMax);
  comm_.allreduce(wrong.data(), wrong.data(), wrong.size(), DataType::kInt64, ReduceOp::kSum);
  const bool checked = options_.check && hasBandwidth(op);
  auto timing = [&](size_t slot) {
    const auto first = seconds.begin() + static_cast<std::ptrdiff_t>(slot * rounds);
    std::vector<double> sorted(first, first + rounds);
    std::sort(sorted.begin(), sorted.end());
    const double median = (sorted[(rounds - 1) / 2] + sorted[rounds / 2]) / 2;
    Timing t = makeTiming(op, row.bytes, n, median, checked ? wrong[slot] : -1);
    t.iters = loops[slot].iters;
    t.warmupIters = loops[slot].warmupIters;
    if (rounds > 1) {
      for (auto it = first; it != first + rounds; ++it) t.roundsUs.push_back(*it * 1e6);
    }
    return t;
  };
  row.outOfPlace = timing(0);
  if (inPlace) row.inPlace = timing(1);
  if (mpiRuns) row.mpi = timing(2);
  for (size_t i = 0; i < forced; ++i) {
    row.algos.push_back({.name = algos->forced[i].first, .timing = timing(kForced + i)});
  }
  return row;
}

}  // namespace ringlet::bench
