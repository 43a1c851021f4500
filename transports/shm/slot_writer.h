#pragma once
// How a link writes a message into a slot its peer reads next: with ordinary stores, or with
// non-temporal ones (kernels::streamCopy), whichever has lately been faster on this link.
//
// An ordinary store first takes the line for itself, and a slot's lines were last read by the
// peer's core: where that core shares no cache with ours, each line's ownership crosses between
// the dies. On a 2-core AMD EPYC VM whose host moved the two vCPUs every few seconds, writing
// 1 MiB over lines the other vCPU had just read ran at 4.5-6.5 GB/s in one placement and 31-33
// in another (a cache line's round trip 550 and 130 ns); non-temporal stores ran at 21-22 in
// both, and the reader then read them from memory at 15-17 GB/s (from the writer's cache: 12-13
// and 33-39). So neither way wins in every placement, and the placement moves while a job runs:
// each large write is timed, and every kProbeEvery-th one writes a part the other way, so the
// link follows the faster one.
//
// Not thread-safe: its link's thread writes.

#include <chrono>
#include <cstddef>

namespace ringlet::transport::shm {

class SlotWriter {
 public:
  enum Mode { kOrdinary = 0, kStreaming = 1 };
  // Writes below this are ordinary and untimed (a clock read costs tens of nanoseconds).
  static constexpr size_t kTimedFromBytes = size_t{32} << 10;
  // Every kProbeEvery-th timed write writes a part of itself the other way (an eighth, at least
  // kProbeMinBytes).
  static constexpr unsigned kProbeEvery = 16;
  static constexpr size_t kProbeMinBytes = size_t{16} << 10;
  // Streaming is taken only where it writes this much faster: its reader then reads from memory
  // rather than from the writer's cache, which the writer's timing does not see.
  static constexpr double kMargin = 1.5;
  // Each way is timed this many times before streaming is taken: a fresh link's first write,
  // timed once and cold, decides nothing (nor, through mode(), declines direct writes:
  // ShmLink::sendDirect).
  static constexpr unsigned kMinTimings = 3;
  // Weight of a new timing in a way's running cost per byte.
  static constexpr double kWeight = 0.25;
  static constexpr double kOutlier = 4;

  // Copies `bytes` from `src` to `dst` (a slot): memory the peer reads next.
  void write(std::byte* dst, const std::byte* src, size_t bytes);

  // The way the next write takes: streaming where it has written kMargin faster, both ways timed
  // kMinTimings times; else ordinary.
  Mode mode() const;
  // Adds a timing of `bytes` written `way` in `seconds` to its running cost.
  void record(Mode way, size_t bytes, double seconds);
  // A way's running cost in seconds per byte; 0 before it was timed.
  double secondsPerByte(Mode way) const { return secondsPerByte_[way]; }
  // How many times a way was timed, up to kMinTimings.
  unsigned timings(Mode way) const { return timings_[way]; }

 private:
  void timedWrite(Mode way, std::byte* dst, const std::byte* src, size_t bytes);

  double secondsPerByte_[2] = {0, 0};
  unsigned timings_[2] = {0, 0};
  unsigned timedWrites_ = 0;
};

}  // namespace ringlet::transport::shm
