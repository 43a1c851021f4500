#pragma once
// Waiting primitives for the shared-memory transport: futex wait/wake on a 32-bit word in shared
// memory, and a watch on the peer process. The waits themselves run in the wait engine
// (transports/progress.h: spin, yield, then sleep on the futex, which the other side wakes only
// when it sees the sleeper's flag); the fast path (data already there) makes no system call.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "src/net/socket.h"

namespace ringlet::transport::shm {

// How often a waiting rank checks that its peer's process still runs.
inline constexpr std::chrono::milliseconds kLivenessInterval{50};

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
