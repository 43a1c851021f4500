#pragma once
// Waiting primitives for the shared-memory transport: futex wait/wake on a 32-bit word in shared
// memory, and a watch on the peer process. The waits themselves run in the wait engine
// (transports/progress.h: spin, yield, then sleep on the futex, which the other side wakes only
// when it sees the sleeper's flag); the fast path (data already there) makes no system call.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "src/net/socket.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace ringlet::transport::shm {

// How often a waiting rank checks that its peer's process still runs.
inline constexpr std::chrono::milliseconds kLivenessInterval{50};

// Sleeps while *word == expected, at most `timeout`. Shared (not process-private) futex: the word
// lives in a segment mapped by two processes, or twice by one.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wakes every sleeper on `word`.
void futexWake(std::atomic<uint32_t>* word);

// The sleep handshake is a Dekker pair: the writer publishes, then reads the sleeper's flag; the
// sleeper sets its flag, then reads what was published. Each side needs a full fence between its
// store and its load, and the writer's, on every message, waits for the message's stores to
// leave the core (without it an 8-byte broadcast ran 9-18% faster here). With membarrier(2) the
// sleeper, which is about to make a system call anyway, can fence for both:
// MEMBARRIER_CMD_GLOBAL_EXPEDITED runs a full barrier on every running thread of the processes that
// registered for it, so a writer in such a process needs only a compiler barrier.
//
// Registers this process (once; later calls return the first answer): true when the kernel
// supports it and allowed it.
bool joinMembarrierFences();
// The sleeper's fence when both sides joined: a full barrier here and on every running thread of
// the joined processes. If the call fails (it does not once registration succeeded) it falls
// back to a local full fence, which does not cover the writer: a wake-up missed then costs at
// most the sleep's slice (the wait engine re-checks after each), never a hang.
void membarrierFence();

// Tells whether the peer's process still runs, by two signs:
//  - a pidfd on its pid (immune to pid reuse, readable as soon as the process exits, zombie or
//    not; kill(pid, 0) where pidfds are missing), kept only when the pid means the same process
//    here (same host and PID namespace: PeerInfo::pidComparable);
//  - once the link's segment exists, the peer's liveness lock on it (Segment::holdLivenessLock):
//    an open-file-description lock that the kernel drops when the peer's last descriptor of the
//    segment closes, whatever PID namespace it runs in (containers sharing /dev/shm).
// A peer in this very process (thread ranks) is always "alive": its link flags tell.
class PeerWatch {
 public:
  PeerWatch() = default;
  PeerWatch(const PeerInfo& self, const PeerInfo& peer);
  // From now on also requires that the peer (`peerSide` of `segment`) holds its liveness lock.
  void watchLock(const Segment& segment, int peerSide);
  // False once the process is known to have exited. One or two system calls.
  bool alive() const;
  // How the peer is identified in errors: "pid 123", or "in another PID namespace".
  std::string describe() const;
  // The peer's process as this process can address it: its pid (0 where its PID namespace
  // differs or it is unknown), and whether it is this very process.
  int pid() const { return pidComparable_ ? pid_ : 0; }
  bool sameProcess() const { return sameProcess_; }

 private:
  int pid_ = 0;
  bool sameProcess_ = true;
  bool pidComparable_ = false;
  net::Fd pidfd_;
  net::Fd segmentFd_;  // a duplicate of the segment's descriptor, for F_OFD_GETLK
  int peerSide_ = -1;
};

}  // namespace ringlet::transport::shm
