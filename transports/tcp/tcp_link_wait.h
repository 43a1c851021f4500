#pragma once
// TcpLink::waitUntil: the one waiting loop of the tcp link (included by its .cc files only).
//
// The deadline is checked between attempts: an attempt that keeps finding data keeps reading
// (bounded by the message), so a transfer that is making progress is not cut off.
//
// events() gives the poll events for this socket, what() names what is awaited (called only on
// timeout), attempt() tries without blocking and returns true when done.
//
// Spin first: retry the nonblocking attempt and pump the other links for tuning_.spin, which
// catches a small message's reply without a sleep/wake-up (several microseconds on loopback).
// Then sleep in ppoll() on this socket and on every other tcp link that still has queued sends
// (their POLLOUT wakes us to pump them), in slices, until the attempt succeeds or the deadline
// passes or the wait is cancelled (slices of kIdleSlice notice a cancellation). Links of other
// transports that have queued sends cap the slice at kBusySlice.

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <array>

#include "ringlet/error.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp {

namespace wait_detail {
inline constexpr std::chrono::milliseconds kIdleSlice{20};
inline constexpr std::chrono::microseconds kBusySlice{50};
inline constexpr size_t kMaxPollFds = 64;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace wait_detail

template <typename Events, typename What, typename Attempt>
void TcpLink::waitUntil(const WaitContext& wait, const Events& events, const What& what,
                        Attempt&& attempt) {
  using namespace wait_detail;
  if (attempt()) return;
  const auto spinEnd = Clock::now() + tuning_.spin;
  while (Clock::now() < spinEnd) {
    wait.pumpOthers(this);
    if (attempt()) return;
    if (tuning_.yield) {
      sched_yield();
    } else {
      cpuRelax();
    }
  }
  std::array<pollfd, kMaxPollFds> fds;
  std::array<TcpLink*, kMaxPollFds> owners;
  while (true) {
    if (aborted_.load(std::memory_order_acquire)) checkUsable();
    size_t count = 0;
    fds[count] = pollfd{fd_.get(), static_cast<short>(events()), 0};
    owners[count++] = this;
    bool otherBusy = false;
    for (Link* link : wait.links) {
      if (link == nullptr || link == this) continue;
      const bool busy = link->pump();
      auto* tcp = dynamic_cast<TcpLink*>(link);
      if (tcp != nullptr && count < fds.size()) {
        // POLLIN too: reading ahead on the other links while this one waits breaks cycles of
        // ranks that each wait for the next to take a large send (e.g. send; flush; recv).
        const short otherEvents =
            static_cast<short>((busy ? POLLOUT : 0) | (tcp->peerClosed_ ? 0 : POLLIN));
        if (otherEvents != 0) {
          fds[count] = pollfd{tcp->fd(), otherEvents, 0};
          owners[count++] = tcp;
        }
      } else if (busy) {
        otherBusy = true;
      }
    }
    if (wait.expired()) {  // the deadline passed, or Communicator::abort() cancelled the wait
      if (attempt()) return;
      wait.throwTimeout(what(), peer());
    }
    std::chrono::nanoseconds slice =
        otherBusy ? std::chrono::nanoseconds(kBusySlice) : std::chrono::nanoseconds(kIdleSlice);
    slice = std::clamp<std::chrono::nanoseconds>(wait.deadline - Clock::now(),
                                                 std::chrono::nanoseconds(0), slice);
    const timespec timeout{static_cast<time_t>(slice.count() / 1000000000),
                           static_cast<long>(slice.count() % 1000000000)};
    if (::ppoll(fds.data(), count, &timeout, nullptr) < 0 && errno != EINTR) {
      throw IoError(fmt::format("{}: poll on the tcp link to rank {} failed: {}", wait.describe(),
                                peer(), net::errorText(errno)));
    }
    for (size_t i = 1; i < count; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) owners[i]->readAheadQuietly();
    }
    if (attempt()) return;
  }
}

}  // namespace ringlet::transport::tcp
