#include "bench/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/mpi_side.h"

namespace ringlet::bench {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Runner::Buffer Runner::allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    throw InvalidArgument(fmt::format("cannot allocate a {}-byte benchmark buffer", rounded));
  }
  return Buffer(static_cast<std::byte*>(p));
}

Runner::Runner(Communicator& comm, const Options& options, device::DeviceSide* device)
    : comm_(comm),
      options_(options),
      device_(device),
      pattern_(options.type, options.op, comm.size()),
      send_(allocate(options.maxBytes)),
      recv_(allocate(options.maxBytes)) {}

void Runner::prepare(BenchOp op, bool inPlace, size_t count) {
  const int rank = comm_.rank();
  if (op == BenchOp::kAllreduce) {
    if (inPlace) {
      pattern_.fillInput(recv_.get(), count, rank);
    } else {
      pattern_.fillInput(send_.get(), count, rank);
      pattern_.fillPoison(recv_.get(), count);
    }
  } else if (op == BenchOp::kBroadcast) {
    if (rank == options_.root) {
      pattern_.fillInput(recv_.get(), count, rank);
    } else {
      pattern_.fillPoison(recv_.get(), count);
    }
  }
}

void Runner::toDevice(BenchOp op, bool inPlace, size_t count) {
  const size_t bytes = count * elementSize(options_.type);
  if (op == BenchOp::kBarrier) return;
  if (op == BenchOp::kAllreduce && !inPlace) device_->upload(device_->send(), send_.get(), bytes);
  device_->upload(device_->recv(), recv_.get(), bytes);
}

void Runner::fromDevice(BenchOp op, bool inPlace, size_t count) {
  const size_t bytes = count * elementSize(options_.type);
  if (op == BenchOp::kBarrier) return;
  if (op == BenchOp::kAllreduce && !inPlace) device_->download(send_.get(), device_->send(), bytes);
  device_->download(recv_.get(), device_->recv(), bytes);
}

void Runner::runOnce(Impl impl, BenchOp op, bool inPlace, size_t count) {
  if (device_ != nullptr) {
    device_->run(op, inPlace ? device_->recv() : device_->send(), device_->recv(), count);
    return;
  }
  const void* send = inPlace ? recv_.get() : send_.get();
  if (impl == Impl::kMpi) {
    mpi::run(op, send, recv_.get(), count, options_.type, options_.op, options_.root);
    return;
  }
  switch (op) {
    case BenchOp::kAllreduce:
      comm_.allreduce(send, recv_.get(), count, options_.type, options_.op);
      return;
    case BenchOp::kBroadcast:
      comm_.broadcast(recv_.get(), count, options_.type, options_.root);
      return;
    case BenchOp::kBarrier:
      comm_.barrier();
      return;
  }
}

double Runner::timeLoop(Impl impl, BenchOp op, bool inPlace, size_t count) {
  prepare(op, inPlace, count);
  if (device_ != nullptr) {
    // Enqueue every iteration, then wait for the stream (nccl-tests' way).
    toDevice(op, inPlace, count);
    for (int i = 0; i < options_.warmup; ++i) runOnce(impl, op, inPlace, count);
    device_->synchronize();
    syncAfter(impl);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options_.iters; ++i) runOnce(impl, op, inPlace, count);
    device_->synchronize();
    return secondsSince(start) / options_.iters;
  }
  for (int i = 0; i < options_.warmup; ++i) runOnce(impl, op, inPlace, count);
  syncAfter(impl);
  const auto start = std::chrono::steady_clock::now();
  if (options_.async && impl == Impl::kRinglet) {
    const void* send = inPlace ? recv_.get() : send_.get();
    std::vector<Work> works;
    works.reserve(static_cast<size_t>(options_.iters));
    for (int i = 0; i < options_.iters; ++i) {
      switch (op) {
        case BenchOp::kAllreduce:
          works.push_back(
              comm_.allreduceAsync(send, recv_.get(), count, options_.type, options_.op));
          break;
        case BenchOp::kBroadcast:
          works.push_back(comm_.broadcastAsync(recv_.get(), count, options_.type, options_.root));
          break;
        case BenchOp::kBarrier:
          works.push_back(comm_.barrierAsync());
          break;
      }
    }
    for (const Work& work : works) work.wait();
  } else {
    for (int i = 0; i < options_.iters; ++i) runOnce(impl, op, inPlace, count);
  }
  const double seconds = secondsSince(start) / options_.iters;
  if (impl == Impl::kMpi) syncAfter(impl);
  return seconds;
}

void Runner::syncAfter(Impl impl) {
  // Open MPI's TCP path can return from a collective on one rank while a peer still needs this
  // rank to progress MPI; a ringlet barrier here would then wait forever. MPI's own barrier keeps
  // progressing until every rank is through.
  if (impl == Impl::kMpi) {
    mpi::run(BenchOp::kBarrier, nullptr, nullptr, 0, options_.type, options_.op, 0);
  } else {
    comm_.barrier();
  }
}

int64_t Runner::check(Impl impl, BenchOp op, bool inPlace, size_t count) {
  if (!options_.check || op == BenchOp::kBarrier) return -1;
  prepare(op, inPlace, count);
  if (device_ != nullptr) toDevice(op, inPlace, count);
  runOnce(impl, op, inPlace, count);
  if (device_ != nullptr) fromDevice(op, inPlace, count);
  if (impl == Impl::kMpi) syncAfter(impl);
  size_t wrong = 0;
  if (op == BenchOp::kAllreduce) {
    wrong = pattern_.countWrongReduced(recv_.get(), count);
    // Out of place, the send buffer must come back untouched.
    if (!inPlace) wrong += pattern_.countWrongInput(send_.get(), count, comm_.rank());
  } else {
    wrong = pattern_.countWrongInput(recv_.get(), count, options_.root);
  }
  return static_cast<int64_t>(wrong);
}

Row Runner::run(BenchOp op, size_t bytes) {
  const int n = comm_.size();
  Row row;
  row.op = op;
  row.type = options_.type;
  row.count = op == BenchOp::kBarrier ? 0 : bytes / elementSize(options_.type);
  row.bytes = row.count * elementSize(options_.type);
  if (op == BenchOp::kAllreduce) row.redop = options_.op;
  row.root = op == BenchOp::kBroadcast ? options_.root : -1;

  // Slots: 0 ringlet out-of-place, 1 ringlet in-place, 2 MPI. Unused slots stay 0.
  double seconds[3] = {0, 0, 0};
  int64_t wrong[3] = {0, 0, 0};
  seconds[0] = timeLoop(Impl::kRinglet, op, false, row.count);
  wrong[0] = check(Impl::kRinglet, op, false, row.count);
  const bool inPlace = options_.inPlace && op == BenchOp::kAllreduce;
  if (inPlace) {
    seconds[1] = timeLoop(Impl::kRinglet, op, true, row.count);
    wrong[1] = check(Impl::kRinglet, op, true, row.count);
  }
  const bool mpiRuns =
      options_.vsMpi && mpi::unsupportedReason(op, options_.type, options_.op).empty();
  if (mpiRuns) {
    seconds[2] = timeLoop(Impl::kMpi, op, false, row.count);
    wrong[2] = check(Impl::kMpi, op, false, row.count);
  } else if (options_.vsMpi) {
    row.mpiNote = mpi::unsupportedReason(op, options_.type, options_.op);
  }

  double copySeconds = 0;
  if (device_ != nullptr && op != BenchOp::kBarrier && row.bytes > 0) {
    // Rank 0 alone, the others idle: the GPU's own copy bandwidth. (Ranks that share one GPU
    // share this bandwidth in the collective; see the README's CUDA section.)
    comm_.barrier();
    if (comm_.rank() == 0) {
      copySeconds = device_->timeDeviceCopy(row.bytes, options_.iters, options_.warmup);
    }
    comm_.allreduce(&copySeconds, &copySeconds, 1, DataType::kFloat64, ReduceOp::kMax);
    row.copyGBs = static_cast<double>(row.bytes) / copySeconds / 1e9;
  }
  comm_.allreduce(seconds, seconds, 3, DataType::kFloat64, ReduceOp::kMax);
  comm_.allreduce(wrong, wrong, 3, DataType::kInt64, ReduceOp::kSum);
  const bool checked = options_.check && op != BenchOp::kBarrier;
  auto timing = [&](int slot) {
    return makeTiming(op, row.bytes, n, seconds[slot], checked ? wrong[slot] : -1);
  };
  row.outOfPlace = timing(0);
  if (inPlace) row.inPlace = timing(1);
  if (mpiRuns) row.mpi = timing(2);
  return row;
}

}  // namespace ringlet::bench
