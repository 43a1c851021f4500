// The cost model's parameters, measured once per communicator inside create(), on the links the
// collectives will use (collectives/select.cc has the model):
//
//   alpha  one message: an 8-byte shift around the ring (every rank sends to the next and
//          receives from the previous at once, as a ring step does)
//   beta   one byte over a link: the same shift with 1 MiB, less alpha, per byte
//   gamma  one byte reduced: a float32 sum of 1 MiB into a buffer, per byte
//   delta  one byte copied: a memcpy of 1 MiB, per byte
//
// Each is the fastest of a few batches (other processes only ever slow a batch down). Each rank
// measures, then all take the largest value of each (a max all-reduce), so the model and every
// choice made from it is the same on every rank. 33 small and 5 large shifts: about a
// millisecond on one idle host, tens of milliseconds over TCP or with more ranks than cores.
// CommunicatorOptions::calibrationEffort multiplies the batches (ringlet-model uses more).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "kernels/reduce.h"
#include "src/core/communicator_impl.h"

namespace ringlet::detail {
namespace {

using Seconds = std::chrono::duration<double>;
constexpr size_t kLargeBytes = size_t{1} << 20;

// The fastest of `batches` batches of `reps` runs, per run: the machine's cost without the
// noise of other processes (a busy core stretches some batches, never shortens one).
template <typename F>
double bestSeconds(int batches, int reps, F&& run) {
  run();  // warm: caches, pages, the peer's arrival
  double best = 1e30;
  for (int b = 0; b < batches; ++b) {
    const auto start = transport::Clock::now();
    for (int i = 0; i < reps; ++i) run();
    best = std::min(best, Seconds(transport::Clock::now() - start).count() / reps);
  }
  return best;
}

CostModel measure(const collectives::Group& group, size_t slice, int effort,
                  const transport::WaitContext& wait) {
  std::vector<std::byte> out(kLargeBytes, std::byte{1});
  std::vector<std::byte> in(kLargeBytes);
  auto shift = [&](size_t bytes) {
    collectives::exchange({.out = &group.next(),
                           .send = out.data(),
                           .sendBytes = bytes,
                           .in = &group.prev(),
                           .recv = in.data(),
                           .recvBytes = bytes},
                          slice, wait);
  };
  const double small = bestSeconds(8 * effort, 4, [&] { shift(8); });
  const double large = bestSeconds(4 * effort, 1, [&] { shift(kLargeBytes); });
  const size_t floats = kLargeBytes / sizeof(float);
  const double reduce = bestSeconds(3 * effort, 1, [&] {
    kernels::reduce(in.data(), in.data(), out.data(), floats, DataType::kFloat32, ReduceOp::kSum);
  });
  const double copy =
      bestSeconds(3 * effort, 1, [&] { std::memcpy(in.data(), out.data(), kLargeBytes); });
  const double bytes = static_cast<double>(kLargeBytes);
  double values[4] = {small, std::max(large - small, 0.0) / bytes, reduce / bytes, copy / bytes};
  collectives::recursiveDoublingAllreduce(group,
                                          {.send = reinterpret_cast<std::byte*>(values),
                                           .recv = reinterpret_cast<std::byte*>(values),
                                           .count = 4,
                                           .type = DataType::kFloat64,
                                           .op = ReduceOp::kMax},
                                          wait);
  return {.alpha = values[0], .beta = values[1], .gamma = values[2], .delta = values[3]};
}

}  // namespace

void CommunicatorImpl::calibrate() {
  if (options_.costModel || size_ == 1) return;
  runBlocking(OpHeader{.kind = OpKind::kCalibrate},
              [this](const collectives::Group& group, const transport::WaitContext& wait) {
                model_ = measure(group, sliceBytes({&group.next(), &group.prev()}),
                                 std::max(1, options_.calibrationEffort), wait);
              });
  nextSeq_ = 0;  // the caller's calls are numbered from 0, as without calibration
}

}  // namespace ringlet::detail
