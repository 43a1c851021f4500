#pragma once
// Asymmetric fences for a Dekker pair whose one side runs on every call and whose other side
// almost never does (Linux membarrier(2), as in folly's asymmetric barriers and the kernel's RCU).
//
// Each side stores its flag, fences, and loads the other's flag; then at least one of them sees
// the other's store. A full fence on the frequent side costs a locked instruction, which waits for
// every store still in the core's buffer (the last message written to a peer's cache line among
// them). With MEMBARRIER_CMD_PRIVATE_EXPEDITED the rare side runs a full barrier on every running
// thread of this process, so the frequent side needs only a compiler barrier.
#include <atomic>

namespace ringlet::fences {

// Registers this process for private expedited membarriers (once; later calls return the first
// answer): true when the kernel supports and allowed it.
bool joinPrivateExpedited();

// The frequent side's fence. `joined`: what joinPrivateExpedited() returned.
inline void light(bool joined) {
  if (joined) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// The rare side's fence: a full barrier on every running thread of this process when joined, else
// a local full fence (then the frequent side fenced fully itself).
void heavy(bool joined);

// membarrier(2) with no flags: its return value, -1 with errno (ENOSYS where it is missing).
int membarrier(int command);

}  // namespace ringlet::fences
