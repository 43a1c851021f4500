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

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <span>

#include "transports/progress.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp {

template <typename Events, typename What, typename Attempt>
void TcpLink::waitUntil(const WaitContext& wait, const Events& events, const What& what,
                        Attempt&& attempt, bool nudges) {
  // The first nudge kNudgeAfter past the spin (check() runs from there on), then at doubling
  // intervals; only to a peer that sends runs (only those hold frames back).
  Deadline nextNudge{};
  std::chrono::nanoseconds nudgeEvery = kNudgeAfter;
  waitFor(
      *this, wait, waiter_, /*slowWake=*/true, attempt,
      [&] {
        if (aborted_.load(std::memory_order_acquire)) checkUsable();
        if (!nudges || !peerSendsRuns_) return;
        const Deadline now = Clock::now();
        if (nextNudge == Deadline{}) {
          nextNudge = now + nudgeEvery;
        } else if (now >= nextNudge) {
          sendNudge();
          nudgeEvery = std::min<std::chrono::nanoseconds>(2 * nudgeEvery, kNudgeEveryMost);
          nextNudge = now + nudgeEvery;
        }
      },
      [&](std::chrono::nanoseconds slice, bool) {
        std::array<pollfd, kMaxStreams> own;
        own[0] = pollfd{fd_.get(), static_cast<short>(events()), 0};
        {
          std::lock_guard lock(sendMutex_);
          for (size_t s = 0; s < stripes_.size(); ++s) {
            const Stripe& stripe = stripes_[s];
            const bool queued =
                !stripe.queue.empty() || (stripe.sealed && stripe.sealed->pendingBytes() > 0);
            own[s + 1] =
                pollfd{stripe.fd.get(), static_cast<short>(POLLIN | (queued ? POLLOUT : 0)), 0};
          }
        }
        pollLinks(*this, std::span(own.data(), streams()), wait, slice);
        // A stripe that no receive reads now holds parts of later messages: read them ahead, or
        // the next poll would return at once for them.
        for (size_t s = 0; s < stripes_.size(); ++s) {
          if (!stripes_[s].direct && (own[s + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            readStripeAhead(stripes_[s]);
          }
        }
      },
      what);
}

}  // namespace ringlet::transport::tcp
