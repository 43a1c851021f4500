#pragma once
// The wait engine: the one loop in which every link waits, and the one back-off policy.
//
// A wait that cannot finish at once goes through three phases:
//   1. spin: retry with a CPU pause between attempts (no system call; cheapest when the peer
//      runs on another core and answers within microseconds), pumping the other links now and
//      then;
//   2. yield: retry with sched_yield() between attempts, which gives the core to a peer that
//      may be waiting for that very core (an oversubscribed host), and returns at once on an idle
//      one;
//   3. block: sleep until the link's writer wakes it (a futex word in shared memory, a socket
//      that becomes readable, a condition variable), for at most a slice, so that the deadline,
//      a cancellation and the peer's health are checked between slices.
// Throughout, the other links of the communicator are pumped (their queued sends move while this
// one waits), and between attempts the link checks that waiting can still succeed (a peer that
// aborted, closed its end or exited ends the wait with its error at once).
//
// The policy (Backoff) is chosen once per communicator from how many of its ranks share this
// host and how many CPUs they have (Backoff::forHost): with a core per rank, spin ~40 us and
// yield ~60 us before sleeping (a futex wake-up costs tens of microseconds, more than most
// pipeline waits); with more ranks than cores, never spin (every spin steals the core of a rank
// we wait for) and yield up to 256 times first. A link only says how it blocks and whether its
// wake-up is slow (a socket: poll wake-ups cost more than a futex), in which case the yield phase
// lasts at least Backoff::slowWakeAwake.

#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>

#include "transports/transport.h"

namespace ringlet::transport {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

struct Backoff {
  // Pause-spins before the first yield (one pause is ~40 ns on current x86).
  int spins = 100;
  // sched_yield rounds before blocking.
  int yields = 16;
  // Links whose wake-up is slow (TCP) keep yielding at least this long after the wait started.
  // Measured: 4 oversubscribed ranks, 256 KiB-16 MiB TCP all-reduce 10-30 % faster with 200 us
  // than with an immediate poll.
  std::chrono::nanoseconds slowWakeAwake = std::chrono::microseconds(200);
  // Longest block when nothing else needs this thread, and when another link has sends queued
  // that this link's wake-up would not notice.
  std::chrono::nanoseconds idleSlice = std::chrono::milliseconds(20);
  std::chrono::nanoseconds busySlice = std::chrono::microseconds(50);

  // The policy for a rank whose host runs `ranksOnHost` ranks of its communicator. Numbers from
  // tests/shm/shm_link_perf's sweep (transports/shm/README.md).
  static Backoff forHost(int ranksOnHost);
  // CPUs this host's ranks may share. A rank pinned to one core (mpirun binds each rank;
  // ringlet-run --bind cores) sees an affinity of one CPU, which says nothing about how many the
  // job has: count the online CPUs then.
  static int usableCpus();
};

// Blocks on `fd` (for `events`) and on every other link of `wait` that has a descriptor (for
// input, and for output while it has sends queued) for at most `slice`; reads ahead on the other
// links whose input arrived. For links that wake through a socket.
void pollLinks(const Link& self, int fd, short events, const WaitContext& wait,
               std::chrono::nanoseconds slice);

// Waits until ready() returns true, with the phases above. The link supplies
//   ready():             tries without blocking;
//   check():             throws if waiting can no longer succeed (peer aborted, closed, exited);
//   block(slice, busy):  sleeps at most `slice` or until woken (`busy`: other links have sends
//                        queued);
//   what():              what is awaited, for the TimeoutError ("a message of 64 bytes from ...").
// `slowWake`: the link's wake-up costs more than a futex (see Backoff::slowWakeAwake).
// Pumps the other links of `wait`; true when one of them still has sends queued that a block of
// `self` would not notice (a link that polls notices the other polled links' output).
bool pumpOthersForWait(const Link& self, const WaitContext& wait);

template <typename Ready, typename Check, typename Block, typename What>
void waitFor(const Link& self, const WaitContext& wait, const Backoff& backoff, bool slowWake,
             Ready&& ready, Check&& check, Block&& block, What&& what) {
  if (ready()) return;
  const Deadline start = Clock::now();
  for (int i = 0; i < backoff.spins; ++i) {
    if ((i & 127) == 127) pumpOthersForWait(self, wait);
    cpuRelax();
    if (ready()) return;
  }
  const Deadline awakeUntil = slowWake ? start + backoff.slowWakeAwake : start;
  int yields = 0;
  for (;;) {
    const bool othersBusy = pumpOthersForWait(self, wait);
    if (ready()) return;
    check();
    if (wait.expired()) {  // the deadline passed, or Communicator::abort() cancelled the wait
      if (ready()) return;
      wait.throwTimeout(what(), self.peer());
    }
    const Deadline now = Clock::now();
    if (yields < backoff.yields || now < awakeUntil) {
      ++yields;
      ::sched_yield();
      continue;
    }
    const std::chrono::nanoseconds slice = std::min<std::chrono::nanoseconds>(
        othersBusy ? backoff.busySlice : backoff.idleSlice, wait.deadline - now);
    if (slice.count() > 0) block(slice, othersBusy);
  }
}

}  // namespace ringlet::transport
