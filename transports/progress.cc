// The wait engine's out-of-line parts (progress.h), WaitContext, and transport settings.
#include "transports/progress.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "ringlet/error.h"
#include "src/config.h"

namespace ringlet::transport {

std::string WaitContext::describe() const {
  return fmt::format("{} #{} on rank {}", op, seq, rank);
}

void WaitContext::throwTimeout(std::string_view what, int peer) const {
  if (cancelled != nullptr && cancelled->load()) {
    throw AbortedError(
        fmt::format("{} was aborted while waiting for {} (peer rank {})", describe(), what, peer));
  }
  throw TimeoutError(fmt::format("{} timed out waiting for {} (peer rank {}); deadline passed",
                                 describe(), what, peer));
}

void Link::holdPointToPoint(const std::byte* data, size_t bytes, const WaitContext& wait) {
  checkHoldRoom(bytes, wait);
  heldMessages_.emplace_back(data, data + bytes);
  heldBytes_ += bytes;
}

void Link::checkHoldRoom(size_t bytes, const WaitContext& wait) const {
  if (!holdRoom(bytes)) {
    throw IoError(fmt::format(
        "{}: rank {} sent a point-to-point message of {} bytes before this call's data; holding "
        "it for its recv would take past {} bytes of point-to-point messages held from rank {} "
        "({} held: receive them before the next collective)",
        wait.describe(), peer_, bytes, kMaxHeldBytes, peer_, heldBytes_));
  }
}

bool Link::tryHoldPointToPoint(const std::byte* data, size_t bytes) noexcept {
  if (!holdRoom(bytes)) return false;
  try {
    heldMessages_.emplace_back(data, data + bytes);
  } catch (const std::bad_alloc&) {
    return false;
  }
  heldBytes_ += bytes;
  return true;
}

int Backoff::usableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int affinity = std::max(1, CPU_COUNT(&set));
  if (affinity > 1) return affinity;
  return std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
}

Backoff Backoff::forHost(int ranksOnHost, bool adapt) {
  Backoff backoff;
  backoff.adapt = adapt;
  if (ranksOnHost > usableCpus()) {
    // More ranks than cores: no spinning (an 8-rank ring on 2 cores, 8-byte steps: ~12 us with
    // no spin against ~23 us with 100 spins); yields hand the core to the ranks we wait for.
    backoff.spins = 0;
    backoff.yields = 256;
  } else {
    // A core per rank: stay awake ~100 us (spin ~40 us, then yield) before sleeping.
    backoff.spins = 1000;
    backoff.yields = 64;
    backoff.awake = std::chrono::microseconds(100);
  }
  return backoff;
}

int Waiter::nextSpinBudget() {
  if (!limits_.adapt || credit_ > 0) return limits_.spins;
  if (++sinceProbe_ >= kProbeEvery) {
    sinceProbe_ = 0;
    return limits_.spins;
  }
  return std::min(limits_.spins, kFloorSpins);
}

void Waiter::endedAfterSpin(int spins, Deadline start, Deadline spun, Deadline end, bool slept) {
  const Deadline arrival = arrival_;
  arrival_ = Deadline{};
  if (!limits_.adapt || limits_.spins <= 0) return;
  if (spins == limits_.spins)
    spinTime_ = std::min<std::chrono::nanoseconds>(spinTime_, spun - start);
  // When did the data come? Without a sleep, about when the wait ended; after one, only the
  // writer's stamp tells (a stamp outside the wait is someone else's, or another clock's).
  Deadline came = end;
  if (slept) {
    if (arrival < start || arrival > end) return;  // unknown: learn nothing
    came = arrival;
  }
  if (came - start <= spinTime_) {
    credit_ = std::min(credit_ + 2, kMaxCredit);
  } else {
    credit_ = std::max(credit_ - 1, 0);
  }
}

void Waiter::slowYield(Deadline start, Deadline after, bool done) {
  if (!limits_.adapt) return;
  if (stampsArrivals_) {
    if (!done) return;
    if (arrival_ >= start && arrival_ <= after && after - arrival_ <= limits_.slowYield) return;
  }
  // A strike amid fast yields says little about a busy process (Backoff).
  const bool amidSlowOnes = fastYields_ <= limits_.maxFastYieldsBetweenStrikes;
  fastYields_ = 0;
  // Within the longest penalty of the last one's end (the load is still there), one renews it.
  const bool renews = amidSlowOnes && noYieldUntil_ != Deadline{} &&
                      after <= noYieldUntil_ + limits_.maxYieldPenalty;
  if (strikes_ == 0 || !amidSlowOnes || after - firstStrike_ > limits_.strikeWindow) {
    strikes_ = 0;
    firstStrike_ = after;
  }
  if (++strikes_ < limits_.slowYieldStrikes && !renews) return;
  strikes_ = 0;
  penalty_ = renews ? std::min(limits_.penaltyGrowth * penalty_, limits_.maxYieldPenalty)
                    : limits_.yieldPenalty;
  noYieldUntil_ = after + penalty_;
}

bool pumpOthersForWait(const Link& self, const WaitContext& wait) {
  const bool selfPolls = self.pollable();
  bool busy = false;
  for (Link* link : wait.links) {
    if (link == nullptr || link == &self) continue;
    if (link->pump() && !(selfPolls && link->pollable())) busy = true;
  }
  return busy;
}

namespace {

timespec relativeTimespec(std::chrono::nanoseconds span) {
  span = std::max(span, std::chrono::nanoseconds(0));
  return timespec{static_cast<time_t>(span.count() / 1000000000),
                  static_cast<long>(span.count() % 1000000000)};
}

struct Polled {
  int result = 0;  // ppoll's; errno in `error` where negative
  int error = 0;
  bool hungUp = false;   // one of the links hung up (POLLHUP, POLLERR)
  bool complete = true;  // every link's descriptors fitted (else, with `requireAll`, no poll)
};

// One ppoll() for at most `slice` on `own` (its revents filled in) and on the descriptors of the
// pollable `links` but `skip`, each pumped first (so its queued sends move, and it asks for output
// only while some remain); the links whose input came, or that hung up, read ahead. With
// `requireAll`, nothing is polled where some link's descriptors do not fit.
Polled pollAndReadAhead(std::span<pollfd> own, std::span<Link* const> links, const Link* skip,
                        std::chrono::nanoseconds slice, bool requireAll) {
  constexpr size_t kMaxPollFds = 256;
  std::array<pollfd, kMaxPollFds> fds;
  std::array<Link*, kMaxPollFds> owners;
  Polled polled;
  size_t count = 0;
  for (const pollfd& fd : own) {
    if (count == fds.size()) break;
    fds[count] = fd;
    owners[count++] = nullptr;
  }
  const size_t ownCount = count;
  for (Link* link : links) {
    if (link == nullptr || link == skip || !link->pollable()) continue;
    // POLLIN too: reading ahead on the other links while one waits breaks cycles of ranks that
    // each wait for the next to take a large send (e.g. send; flush; recv).
    link->pump();
    const size_t added = link->pollFds(std::span(fds.data() + count, fds.size() - count));
    if (added == 0) polled.complete = false;
    for (size_t i = 0; i < added; ++i) owners[count++] = link;
  }
  if (requireAll && !polled.complete) return polled;
  const timespec timeout = relativeTimespec(slice);
  polled.result = ::ppoll(fds.data(), count, &timeout, nullptr);
  polled.error = polled.result < 0 ? errno : 0;
  if (polled.result < 0) return polled;
  for (size_t i = 0; i < ownCount; ++i) own[i].revents = fds[i].revents;
  Link* readAlready = nullptr;
  for (size_t i = ownCount; i < count; ++i) {
    const short events = fds[i].revents;
    polled.hungUp = polled.hungUp || (events & (POLLHUP | POLLERR)) != 0;
    if ((events & (POLLIN | POLLHUP | POLLERR)) != 0 && owners[i] != readAlready) {
      owners[i]->readAhead();  // reads every stream of that link
      readAlready = owners[i];
    }
  }
  return polled;
}

// sleepOnLinks where every link is polled (TCP). False where one is not, or a peer hung up (a
// closed end keeps a descriptor readable: the caller's looks find out, sleeping by the clock
// meanwhile).
bool pollLinksFor(std::span<Link* const> links, std::chrono::nanoseconds slice) {
  for (Link* link : links) {
    if (!link->pollable()) return false;
  }
  const Polled polled = pollAndReadAhead({}, links, nullptr, slice, /*requireAll=*/true);
  return polled.complete && !polled.hungUp && (polled.result >= 0 || polled.error == EINTR);
}

}  // namespace

void pollLinks(const Link& self, std::span<pollfd> own, const WaitContext& wait,
               std::chrono::nanoseconds slice) {
  const Polled polled = pollAndReadAhead(own, wait.links, &self, slice, /*requireAll=*/false);
  if (polled.result < 0 && polled.error != EINTR) {
    throw IoError(fmt::format("{}: poll on the link to rank {} failed: {}", wait.describe(),
                              self.peer(), std::strerror(polled.error)));
  }
}

bool sleepOnLinks(std::span<Link* const> links, std::chrono::nanoseconds slice) {
  static std::atomic<bool> noWaitv{false};  // the kernel has no futex_waitv
  constexpr size_t kMaxWords = 128;         // FUTEX_WAITV_MAX
  if (links.empty()) return false;
  std::array<futex_waitv, kMaxWords> words{};
  std::array<Link*, kMaxWords> armedLinks{};
  size_t armed = 0;
  size_t polled = 0;  // links with no word (kNone)
  bool ready = false;
  for (Link* link : links) {
    std::atomic<uint32_t>* word = nullptr;
    uint32_t seen = 0;
    const Link::Wake wake = armed < kMaxWords && !noWaitv.load(std::memory_order_relaxed)
                                ? link->armWake(&word, &seen)
                                : Link::Wake::kNone;
    if (wake == Link::Wake::kArmed) {
      armedLinks[armed] = link;
      words[armed++] = futex_waitv{.val = seen,
                                   .uaddr = reinterpret_cast<uintptr_t>(word),
                                   .flags = FUTEX_32,  // shared: the word is in a segment
                                   .__reserved = 0};
    } else if (wake == Link::Wake::kReady) {
      ready = true;
      break;
    } else {
      ++polled;
    }
  }
  bool slept = ready;
  if (!ready && polled == links.size()) {
    slept = pollLinksFor(links, slice);
  } else if (!ready && polled == 0) {
    timespec until{};  // futex_waitv takes an absolute time
    ::clock_gettime(CLOCK_MONOTONIC, &until);
    const timespec span = relativeTimespec(slice);
    until.tv_sec += span.tv_sec;
    until.tv_nsec += span.tv_nsec;
    if (until.tv_nsec >= 1000000000) {
      ++until.tv_sec;
      until.tv_nsec -= 1000000000;
    }
    // EAGAIN (a word changed before the sleep), ETIMEDOUT, EINTR: all end the sleep alike.
    slept = ::syscall(SYS_futex_waitv, words.data(), static_cast<unsigned>(armed), 0u, &until,
                      CLOCK_MONOTONIC) >= 0 ||
            errno != ENOSYS;
    if (!slept) noWaitv.store(true, std::memory_order_relaxed);
  }
  // (Links of both kinds: no one call sleeps on both; the caller sleeps by the clock.)
  for (size_t i = 0; i < armed; ++i) armedLinks[i]->disarmWake();
  return slept;
}

Settings readSettings(const TransportEntry& entry) {
  Settings settings;
  for (const TransportOption& option : entry.options) {
    const std::string env(option.env);
    if (auto value = config::getenv(env.c_str())) settings[std::string(option.key)] = *value;
  }
  return settings;
}

}  // namespace ringlet::transport
