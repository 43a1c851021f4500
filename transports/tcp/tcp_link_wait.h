#pragma once
// TcpLink::waitUntil: the tcp link's side of the wait engine (transports/progress.h), included
// by its .cc files only. The link blocks in poll() on its socket and on the rank's other polled
// links, and its wake-up counts as slow (a poll wake-up costs more than a futex).
//
// events() gives the poll events for this socket, what() names what is awaited (called only on
// timeout), attempt() tries without blocking and returns true when done. An attempt that keeps
// finding data keeps reading (bounded by the message), so a transfer that is making progress is
// not cut off by the deadline.

#include <poll.h>

#include "transports/progress.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp {

template <typename Events, typename What, typename Attempt>
void TcpLink::waitUntil(const WaitContext& wait, const Events& events, const What& what,
                        Attempt&& attempt) {
  waitFor(
      *this, wait, waiter_, /*slowWake=*/true, attempt,
      [&] {
        if (aborted_.load(std::memory_order_acquire)) checkUsable();
      },
      [&](std::chrono::nanoseconds slice, bool) {
        pollLinks(*this, fd_.get(), static_cast<short>(events()), wait, slice);
      },
      what);
}

}  // namespace ringlet::transport::tcp
