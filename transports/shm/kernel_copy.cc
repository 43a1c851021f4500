// The kernel's copy between processes against the slots' two copies (kernel_copy.h).
#include "transports/shm/kernel_copy.h"

#include <pthread.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/turns.h"

namespace ringlet::transport::shm {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The calling thread on the first of `cpus` that it may be put on, alone, until destroyed, then
// on the CPUs it had (nothing when none can be set: the threads then go where the scheduler puts
// them).
class PinnedTo {
 public:
  explicit PinnedTo(const std::vector<int>& cpus) {
    if (cpus.empty() || pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) != 0) {
      return;
    }
    for (int cpu : cpus) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0) {
        pinned_ = true;
        return;
      }
    }
  }
  ~PinnedTo() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
  }
  PinnedTo(const PinnedTo&) = delete;
  PinnedTo& operator=(const PinnedTo&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

// The CPUs other than `cpu` for the reader, in order of preference: those this thread may run
// on, then (a process bound to one core, as mpirun binds each rank of a small job, its peer on
// another) the host's others, of which the cpuset may refuse some (PinnedTo tries the next).
std::vector<int> otherCpus(int cpu) {
  std::vector<int> out;
  cpu_set_t allowed;
  if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) return out;
  const long configured = std::min<long>(sysconf(_SC_NPROCESSORS_CONF), CPU_SETSIZE);
  for (int other = 0; other < configured; ++other) {
    if (other != cpu && CPU_ISSET(other, &allowed)) out.push_back(other);
  }
  for (int other = 0; other < configured; ++other) {
    if (other != cpu && !CPU_ISSET(other, &allowed)) out.push_back(other);
  }
  return out;
}

// KernelCopy's exchange past the cache: this thread is one side, a second thread pinned to the
// first of `otherCpus` it may run on the other. Fills the past fields where every round ran
// within KernelCopy::kMeasureSeconds.
void measurePastCache(const std::vector<int>& otherCpus, KernelCopy* result) {
  constexpr size_t kBytes = KernelCopy::kPastBytes;
  constexpr size_t kSlot = KernelCopy::kPastSlotBytes;
  constexpr uint64_t kSlots = KernelCopy::kPastSlots;
  constexpr uint64_t kMessages = kBytes / kSlot;
  // Written once, as a rank wrote the buffer it sends; the targets and the rings are first
  // touched in the rounds (the fastest of each way is kept).
  struct Side {
    std::vector<std::byte> source = std::vector<std::byte>(kBytes, std::byte{1});
    std::unique_ptr<std::byte[]> target = std::make_unique_for_overwrite<std::byte[]>(kBytes);
    std::unique_ptr<std::byte[]> ring = std::make_unique_for_overwrite<std::byte[]>(kSlots * kSlot);
    alignas(64) std::atomic<uint64_t> written{0};  // messages this side put into its ring
    alignas(64) std::atomic<uint64_t> emptied{0};  // of those, how many the other side took
  };
  std::array<Side, 2> sides;
  const pid_t self = ::getpid();
  const Clock::time_point giveUp =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(KernelCopy::kMeasureSeconds));
  std::atomic<bool> failed{false};
  std::atomic<int> arrived{0};
  // Both sides wait here before and after every round (the n-th time: 2 n arrivals in all).
  auto meet = [&](int n) {
    arrived.fetch_add(1, std::memory_order_acq_rel);
    while (arrived.load(std::memory_order_acquire) < 2 * n) {
      if (failed.load(std::memory_order_relaxed)) return false;
      if (Clock::now() > giveUp) {
        failed.store(true, std::memory_order_relaxed);
        return false;
      }
      std::this_thread::yield();
    }
    return !failed.load(std::memory_order_relaxed);
  };
  // Rounds in turns, the kernel's first in the first and last of every four.
  auto lent = [](int round) { return round % 4 == 0 || round % 4 == 3; };
  constexpr int kRounds = 2 * KernelCopy::kPastRounds;
  std::array<std::array<double, kRounds>, 2> seconds{};
  auto run = [&](int side, int round) {
    Side& mine = sides[side];
    Side& theirs = sides[1 - side];
    const Clock::time_point start = Clock::now();
    if (lent(round)) {
      for (uint64_t i = 0; i < kMessages; ++i) {
        iovec local{.iov_base = mine.target.get() + i * kSlot, .iov_len = kSlot};
        iovec remote{.iov_base = theirs.source.data() + i * kSlot, .iov_len = kSlot};
        if (::process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(kSlot)) {
          failed.store(true, std::memory_order_relaxed);
          return;
        }
      }
    } else {
      uint64_t sent = 0;
      uint64_t received = 0;
      while (sent < kMessages || received < kMessages) {
        bool moved = false;
        if (sent < kMessages && sent - mine.emptied.load(std::memory_order_acquire) < kSlots) {
          std::memcpy(mine.ring.get() + sent % kSlots * kSlot, mine.source.data() + sent * kSlot,
                      kSlot);
          mine.written.store(++sent, std::memory_order_release);
          moved = true;
        }
        if (received < kMessages && theirs.written.load(std::memory_order_acquire) > received) {
          std::memcpy(mine.target.get() + received * kSlot,
                      theirs.ring.get() + received % kSlots * kSlot, kSlot);
          theirs.emptied.store(++received, std::memory_order_release);
          moved = true;
        }
        if (moved) continue;
        if (failed.load(std::memory_order_relaxed) || Clock::now() > giveUp) {
          failed.store(true, std::memory_order_relaxed);
          return;
        }
        std::this_thread::yield();
      }
    }
    asm volatile("" : : "r"(mine.target.get()) : "memory");
    seconds[side][round] = secondsSince(start);
  };
  std::thread other([&] {
    const PinnedTo pinned(otherCpus);
    for (int round = 0; round < kRounds; ++round) {
      if (!meet(2 * round + 1)) return;
      run(1, round);
      if (!meet(2 * round + 2)) return;
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    if (!meet(2 * round + 1)) break;
    run(0, round);
    if (!meet(2 * round + 2)) break;
    for (Side& side : sides) {  // both are between rounds: the rings start empty again
      side.written.store(0, std::memory_order_relaxed);
      side.emptied.store(0, std::memory_order_relaxed);
    }
  }
  other.join();
  if (failed.load()) return;
  // A round takes as long as its slower side; of those, the fastest of each way.
  double kernel = std::numeric_limits<double>::infinity();
  double slots = kernel;
  for (int round = 0; round < kRounds; ++round) {
    const double both = std::max(seconds[0][round], seconds[1][round]);
    double& fastest = lent(round) ? kernel : slots;
    fastest = std::min(fastest, both);
  }
  result->pastMeasured = true;
  result->kernelPastSeconds = kernel;
  result->slotsPastSeconds = slots;
}

}  // namespace

KernelCopy measureKernelCopy(bool alwaysPastCache) {
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
  // The two threads on two CPUs, as two ranks' cores: left to the scheduler they can share one
  // for the whole measurement (two processes of two threads each on a 2-core VM, launched by
  // mpirun: the writer and the reader on one CPU in 32 of 32 rounds in each process, the slots'
  // copies then hitting that core's own cache, 16-22 us against the kernel's 16-19, "does not
  // pay"; on two CPUs 33-37 us against 15-21, as under ringlet-run, and lending made the 2-rank
  // sendrecv, all-gather and all-to-all of 512 KiB-1 MiB 1.4-2.4x faster there). A process
  // bound to one core (mpirun's default for 2 ranks) measures with the reader on another of the
  // host's CPUs where it may, as its peer runs; on a host of one CPU both run there.
  const int writerCpu = sched_getcpu();
  const std::vector<int> readerCpus = otherCpus(writerCpu);
  const PinnedTo writerPinned(readerCpus.empty() ? std::vector<int>{} : std::vector{writerCpu});
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
  std::vector<int> writerRan(2 * KernelCopy::kProbeRounds, -1);
  std::vector<int> readerRan(2 * KernelCopy::kProbeRounds, -1);
  std::thread reader([&] {
    const PinnedTo readerPinned(readerCpus);
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
      readerRan[round] = sched_getcpu();
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
    writerRan[round] = sched_getcpu();
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
  result.twoCpus = true;
  for (size_t round = 0; round < writerRan.size(); ++round) {
    if (writerRan[round] < 0 || writerRan[round] == readerRan[round]) result.twoCpus = false;
  }
  result.kernelSeconds = median(kernel);
  result.slotsSeconds = median(slots);
  // Past the cache only where the answer matters: elsewhere nothing is lent either way.
  if (alwaysPastCache || result.pays()) measurePastCache(readerCpus, &result);
  return result;
}

KernelCopyOffsets measureKernelCopyOffsets() {
  constexpr size_t kBytes = KernelCopyOffsets::kBytes;
  constexpr size_t kPage = 4096;
  constexpr size_t kSpan = kBytes + kPage;
  std::vector<std::byte> memory(3 * kSpan + kPage, std::byte{1});
  const auto base = reinterpret_cast<uintptr_t>(memory.data());
  auto* source = reinterpret_cast<std::byte*>((base + kPage - 1) / kPage * kPage);
  std::byte* target = source + kSpan;
  const pid_t self = ::getpid();
  auto read = [&](std::byte* to) {
    iovec local{.iov_base = to, .iov_len = kBytes};
    iovec remote{.iov_base = source, .iov_len = kBytes};
    const Clock::time_point start = Clock::now();
    const bool whole =
        ::process_vm_readv(self, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(kBytes);
    asm volatile("" : : "r"(to) : "memory");
    return whole ? secondsSince(start) : -1.0;
  };
  KernelCopyOffsets result;
  if (read(target) < 0 || read(target + 16) < 0) return result;  // refused: not measured
  std::tie(result.alignedSeconds, result.apartSeconds) = kernels::fastestInTurns(
      KernelCopyOffsets::kRounds, [&] { return read(target); }, [&] { return read(target + 16); });
  result.measured = result.alignedSeconds > 0 && result.apartSeconds > 0;
  return result;
}

const KernelCopyOffsets& kernelCopyOffsets() {
  static const KernelCopyOffsets measured = measureKernelCopyOffsets();
  return measured;
}

const KernelCopy& kernelCopy() {
  static const KernelCopy measured = measureKernelCopy();
  return measured;
}

}  // namespace ringlet::transport::shm
