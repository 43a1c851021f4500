#include "src/fences.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace ringlet::fences {

int membarrier(int command) {
#ifdef SYS_membarrier
  return static_cast<int>(::syscall(SYS_membarrier, command, 0, 0));
#else
  (void)command;
  errno = ENOSYS;
  return -1;
#endif
}

bool joinPrivateExpedited() {
  static const bool joined = [] {
    const int supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 ||
        (supported & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
      return false;
    }
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return joined;
}

void heavy(bool joined) {
  // Registered: the call does not fail; if it did, the local fence below leaves a window in which
  // both sides could miss each other, which for the communicator's abort means the call in flight
  // fails at its next wait (it sees the cancel flag) instead of at once.
  if (!joined || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

}  // namespace ringlet::fences
