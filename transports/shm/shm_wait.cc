#include "transports/shm/shm_wait.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "src/fences.h"

namespace ringlet::transport::shm {

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  // EAGAIN (the word already changed), EINTR and ETIMEDOUT all mean: look again.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
            0);
}

bool joinMembarrierFences() {
  static const bool joined = [] {
    const int supported = fences::membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ||
        (supported & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0) {
      return false;
    }
    return fences::membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
  }();
  return joined;
}

void membarrierFence() {
  if (fences::membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

PeerWatch::PeerWatch(const PeerInfo& self, const PeerInfo& peer)
    : pid_(peer.pid),
      sameProcess_(self.sameProcess(peer)),
      pidComparable_(self.pidComparable(peer) && peer.pid > 0) {
  if (sameProcess_ || !pidComparable_) return;
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (fd >= 0) pidfd_.reset(fd);
#endif
}

void PeerWatch::watchLock(const Segment& segment, int peerSide) {
  if (sameProcess_ || segment.fd() < 0) return;
  segmentFd_.reset(::fcntl(segment.fd(), F_DUPFD_CLOEXEC, 0));
  peerSide_ = segmentFd_.valid() ? peerSide : -1;
}

bool PeerWatch::alive() const {
  if (sameProcess_) return true;
  if (peerSide_ >= 0 && !livenessLockHeld(segmentFd_.get(), peerSide_)) return false;
  if (!pidComparable_) return true;
  if (pidfd_.valid()) {
    struct pollfd p {};
    p.fd = pidfd_.get();
    p.events = POLLIN;
    return ::poll(&p, 1, 0) == 0;  // readable: the process has exited
  }
  return ::kill(pid_, 0) == 0 || errno != ESRCH;
}

std::string PeerWatch::describe() const {
  return pidComparable_ ? fmt::format("pid {}", pid_) : std::string("in another PID namespace");
}

}  // namespace ringlet::transport::shm
