#pragma once
// Waiting primitives for the shared-memory transport: a CPU pause, futex wait/wake on a 32-bit
// word in shared memory, and a watch on the peer process.
//
// The wait policy is spin -> yield -> sleep. A rank spins on shared memory for a short while
// (cheapest when the peer runs on another core), then gives its core away with sched_yield (the
// peer may be waiting for that very core), then sleeps on a futex that the other side wakes only
// when it sees the sleeper's flag. The fast path (data already there) makes no system call.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "src/net/socket.h"

namespace ringlet::transport::shm {

struct WaitPolicy {
  // Pause-spins before the first sched_yield: about 4 us (one pause is ~37 ns here). Chosen by
  // tests/shm/shm_link_perf's sweep (numbers in transports/shm/README.md): it catches a peer that
  // answers within a few microseconds on its own core (8-byte ping-pong 0.2 us instead of 2-4 us
  // through the futex), while 1000+ spins made an 8-rank ring on 2 cores 5-30x slower.
  int spinIterations = 100;
  // sched_yield calls before sleeping on the futex: cheap on an idle core (the call returns at
  // once), and on a busy one they hand the core to the ranks we wait for.
  int yieldIterations = 16;
  // How long one futex sleep lasts at most, and how often the peer's liveness is checked.
  std::chrono::milliseconds sleepSlice{20};
  std::chrono::milliseconds livenessInterval{50};
};

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Sleeps while *word == expected, at most `timeout`. Shared (not process-private) futex: the word
// lives in a segment mapped by two processes, or twice by one.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every sleeper on `word`.
void futexWake(std::atomic<uint32_t>* word);

// Tells whether the peer's process still runs. Holds a pidfd (immune to pid reuse, and readable
// as soon as the process exits, zombie or not); falls back to kill(pid, 0) where pidfds are
// missing. A peer in this very process (thread ranks) is always "alive": its link flags tell.
class PeerWatch {
 public:
  PeerWatch() = default;
  explicit PeerWatch(int pid);
  // False once the process has exited. One system call.
  bool alive() const;
  int pid() const { return pid_; }

 private:
  int pid_ = 0;
  bool sameProcess_ = true;
  net::Fd pidfd_;
};

}  // namespace ringlet::transport::shm
