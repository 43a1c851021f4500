#include "transports/shm/slot_writer.h"

#include <algorithm>

#include "kernels/reduce.h"

namespace ringlet::transport::shm {

SlotWriter::Mode SlotWriter::mode() const {
  const double ordinary = secondsPerByte_[kOrdinary];
  const double streaming = secondsPerByte_[kStreaming];
  const bool timed = timings_[kOrdinary] >= kMinTimings && timings_[kStreaming] >= kMinTimings;
  return timed && streaming * kMargin < ordinary ? kStreaming : kOrdinary;
}

void SlotWriter::record(Mode way, size_t bytes, double seconds) {
  if (bytes == 0) return;
  const double perByte = std::max(seconds, 0.0) / static_cast<double>(bytes);
  double& cost = secondsPerByte_[way];
  if (timings_[way] < kMinTimings) ++timings_[way];  // counts up to kMinTimings, no further
  if (timings_[way] == 1) {
    cost = perByte;
    return;
  }
  // A write the scheduler interrupted counts as at most kOutlier times the running cost, so one
  // preemption does not turn the choice for many writes.
  cost = (1 - kWeight) * cost + kWeight * std::clamp(perByte, cost / kOutlier, cost * kOutlier);
}

void SlotWriter::timedWrite(Mode way, std::byte* dst, const std::byte* src, size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  if (way == kStreaming) {
    kernels::streamCopy(dst, src, bytes);
  } else {
    kernels::copy(dst, src, bytes);
  }
  record(way, bytes,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void SlotWriter::write(std::byte* dst, const std::byte* src, size_t bytes) {
  if (bytes < kTimedFromBytes) {
    kernels::copy(dst, src, bytes);
    return;
  }
  const Mode way = mode();
  const Mode other = way == kOrdinary ? kStreaming : kOrdinary;
  size_t probe = 0;
  if (++timedWrites_ % kProbeEvery == 0 || timings_[other] < kMinTimings) {
    // 64-byte multiples keep the rest's lines whole.
    probe = std::min(std::max(bytes / 8, kProbeMinBytes), bytes / 2) / 64 * 64;
    timedWrite(other, dst, src, probe);
  }
  timedWrite(way, dst + probe, src + probe, bytes - probe);
}

}  // namespace ringlet::transport::shm
