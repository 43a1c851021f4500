// The kernel's copy between processes against the slots' two copies (kernel_copy.h).
#include "transports/shm/kernel_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace ringlet::transport::shm {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

KernelCopy measureKernelCopy() {
  KernelCopy result;
  const size_t bytes = KernelCopy::kProbeBytes;
  std::vector<std::byte> source(bytes), slot(bytes), target(bytes);
  const pid_t self = ::getpid();
  {
    iovec local{.iov_base = target.data(), .iov_len = bytes};
    iovec remote{.iov_base = source.data(), .iov_len = bytes};
    if (::process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes)) {
      return result;  // refused (seccomp, a kernel without it): not permitted
    }
  }
  result.permitted = true;
  // The writer (this thread) wrote `source` once, as a rank wrote the buffer it sends before the
  // call. Rounds alternate the two paths: the slots' round copies it into `slot` here and out of
  // it on the reader thread, the kernel's round reads `source` on the reader thread. Rewritten
  // before every round (its lines dirty in this core's cache when read), a standalone probe put
  // a 16-core Xeon, where lending makes exchanges mostly 1.1-3.8x faster, at 0.89-1.15 of the
  // slots' time: a coin toss at the line. Written once: 0.38-0.70 there, against 0.99-1.28 on a
  // 2-core EPYC VM, where lending makes them 1.1-2.5x slower (transports/shm/README.md). Waits
  // yield, so that two threads on one core take turns.
  std::memset(source.data(), 1, bytes);
  const Clock::time_point giveUp =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(KernelCopy::kMeasureSeconds));
  std::atomic<int> turn{0};  // 0: the writer's; 1: the reader's; -1: stop
  // Round r of each path lands in [r / 2]. The reader adds its copy to the writer's for the
  // slots: the writer's time was stored before the turn passed.
  std::vector<double> slots(KernelCopy::kProbeRounds, 0.0);
  std::vector<double> kernel(KernelCopy::kProbeRounds, 0.0);
  auto waitFor = [&](int want) {
    for (;;) {
      const int now = turn.load(std::memory_order_acquire);
      if (now == want || now < 0) return now == want;
      if (Clock::now() > giveUp) return false;
      std::this_thread::yield();
    }
  };
  std::thread reader([&] {
    for (int round = 0; round < 2 * KernelCopy::kProbeRounds; ++round) {
      if (!waitFor(1)) return;
      const Clock::time_point start = Clock::now();
      if (round % 2 == 0) {
        std::memcpy(target.data(), slot.data(), bytes);
      } else {
        iovec local{.iov_base = target.data(), .iov_len = bytes};
        iovec remote{.iov_base = source.data(), .iov_len = bytes};
        (void)::process_vm_readv(self, &local, 1, &remote, 1, 0);
      }
      asm volatile("" : : "r"(target.data()) : "memory");  // the copy is not optimised away
      (round % 2 == 0 ? slots : kernel)[round / 2] += secondsSince(start);
      turn.store(0, std::memory_order_release);
    }
  });
  bool done = true;
  for (int round = 0; round < 2 * KernelCopy::kProbeRounds && done; ++round) {
    if (round % 2 == 0) {
      const Clock::time_point start = Clock::now();
      std::memcpy(slot.data(), source.data(), bytes);
      asm volatile("" : : "r"(slot.data()) : "memory");
      slots[round / 2] = secondsSince(start);
    }
    turn.store(1, std::memory_order_release);
    done = waitFor(0);
  }
  if (!done) turn.store(-1, std::memory_order_release);
  reader.join();
  if (!done) return result;
  // Medians: a single round that found the other copy's lines placed luckily moves neither.
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  result.measured = true;
  result.kernelSeconds = median(kernel);
  result.slotsSeconds = median(slots);
  return result;
}

const KernelCopy& kernelCopy() {
  static const KernelCopy measured = measureKernelCopy();
  return measured;
}

}  // namespace ringlet::transport::shm
