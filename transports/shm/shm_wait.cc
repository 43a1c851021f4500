#include "transports/shm/shm_wait.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

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

PeerWatch::PeerWatch(int pid) : pid_(pid), sameProcess_(pid <= 0 || pid == ::getpid()) {
  if (sameProcess_) return;
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) pidfd_.reset(fd);
#endif
}

bool PeerWatch::alive() const {
  if (sameProcess_) return true;
  if (pidfd_.valid()) {
    struct pollfd p {};
    p.fd = pidfd_.get();
    p.events = POLLIN;
    return ::poll(&p, 1, 0) == 0;  // readable: the process has exited
  }
  return ::kill(pid_, 0) == 0 || errno != ESRCH;
}

}  // namespace ringlet::transport::shm
