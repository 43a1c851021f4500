#pragma once
// The wait engine: the one loop in which every link waits, and the one back-off policy.
//
// A wait that cannot finish at once goes through three phases:
//   1. spin: retry with a CPU pause between attempts (no system call; cheapest when the peer
//      runs on another core and answers within microseconds), pumping the other links now and
//      then;
//   2. yield: retry with sched_yield() between attempts, which gives the core to a peer that
//      may be waiting for that very core (an oversubscribed host), and returns at once on an idle
//      one;
//   3. block: sleep until the link's writer wakes it (a futex word in shared memory, a socket
//      that becomes readable, a condition variable), for at most a slice, so that the deadline,
//      a cancellation and the peer's health are checked between slices.
// Throughout, the other links of the communicator are pumped (their queued sends move while this
// one waits), and between attempts the link checks that waiting can still succeed (a peer that
// aborted, closed its end or exited ends the wait with its error at once).
//
// The limits (Backoff) are chosen once per communicator from how many of its ranks share this
// host and how many CPUs they have (Backoff::forHost): with a core per rank, spin up to ~40 us and
// yield until ~100 us have passed before sleeping (a futex wake-up costs tens of microseconds, in
// a VM over a hundred, more than most pipeline waits); with more ranks than cores, never spin
// (every spin steals the core of a rank we wait for) and yield up to 256 times first. A link only
// says how it blocks and whether its wake-up is slow (a socket: poll wake-ups cost more than a
// futex), in which case the yield phase lasts at least Backoff::slowWakeAwake.
//
// Within those limits each link adapts (Waiter) to what its own recent waits say, because a core
// shared with someone else's busy thread (backward's BLAS, a compile) turns both phases against
// us (docs/busy-cores.md):
//   - spinning pays only when the peer answers within the spin; while recent waits got their data
//     later than a spin could have caught it (the peer was descheduled, or busy with a large
//     reduction), the spin shrinks to a few pauses (Waiter below). Under load that happens within
//     a few waits: the rank sleeps at once, and its peer's wake-up preempts the busy thread (a
//     woken sleeper runs before a CPU hog), where a spinner would have burnt its share of the core;
//   - a sched_yield() that kept us off the core for longer than Backoff::slowYield may have given
//     it to a process that does not give it back (a busy loop runs its whole time slice,
//     milliseconds, while our data sits there): after a few such yields in a short time
//     (Backoff::slowYieldStrikes within strikeWindow, with few fast yields between them) yields
//     stop for this link for Backoff::yieldPenalty, longer each time the load is found again
//     at the penalty's end (up to maxYieldPenalty), after which one slow yield is all it costs
//     to find out.

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <string>

#include "transports/transport.h"

namespace ringlet::transport {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

struct Backoff {
  // Pause-spins before the first yield (one pause is ~40 ns on current x86); with `adapt`, the
  // most a link spins.
  int spins = 100;
  // sched_yield rounds before blocking.
  int yields = 16;
  // Adapt the spin budget and the yields to the link's recent waits (Waiter); false: always the
  // numbers above (tests and sweeps that measure one policy).
  bool adapt = false;
  // Every link keeps yielding at least this long after the wait started (the spin included)
  // before it sleeps: `yields` alone is no time. A sched_yield() with nobody else to run took
  // 0.13 us on a 2-core VM, so 64 of them after a shrunk spin (Waiter) slept a wait of 30 us,
  // and the futex wake-up then took 100-130 us: a 512 KiB broadcast on 2 ranks took 130-170 us
  // a call against 55-65 with fixed waits (RINGLET_WAIT=fixed), which spin 20 us first.
  std::chrono::nanoseconds awake{0};
  // Links whose wake-up is slow (TCP) keep yielding at least this long after the wait started.
  // Measured: 4 oversubscribed ranks, 256 KiB-16 MiB TCP all-reduce 10-30 % faster with 200 us
  // than with an immediate poll.
  std::chrono::nanoseconds slowWakeAwake = std::chrono::microseconds(200);
  // Longest block when nothing else needs this thread, and when another link has sends queued
  // that this link's wake-up would not notice.
  std::chrono::nanoseconds idleSlice = std::chrono::milliseconds(20);
  std::chrono::nanoseconds busySlice = std::chrono::microseconds(50);
  // A sched_yield() that took longer than this handed the core to a busy process (adapt: stop
  // yielding for yieldPenalty).
  std::chrono::nanoseconds slowYield = std::chrono::microseconds(500);
  // A penalty lasts yieldPenalty, penaltyGrowth times the last one where it renews that (up to
  // maxYieldPenalty): a busy process that stays is found again at each penalty's end at the cost
  // of one slow yield, every maxYieldPenalty once the load has lasted half a second (25, 100,
  // 400, 500 ms), while a burst of slow yields that ends (our own ranks' work on a shared core,
  // a job's start) stops the yields for a short while only. Every penalty lasted 500 ms before:
  // 4 ranks on 2 cores, idle, took a few at their start, and their waits then slept through the
  // first sizes of a benchmark (docs/busy-cores.md, "Strikes amid fast yields"). Doubling from
  // 25 ms measured slower under load than growing by 4 (4 ranks, 8 B and 64 KiB, the first
  // sizes a process times).
  std::chrono::nanoseconds yieldPenalty = std::chrono::milliseconds(25);
  std::chrono::nanoseconds maxYieldPenalty = std::chrono::milliseconds(500);
  int penaltyGrowth = 4;
  // The penalty starts at the slowYieldStrikes-th slow yield (that counts) within strikeWindow,
  // or at the first within maxYieldPenalty after the last penalty ended. A busy process takes the
  // core at every yield, so under load the strikes come within a few waits (4 ranks on 2 cores
  // with a busy loop per core, 16 MiB all-reduce: a median 12 ms apart), and while it stays one
  // renews the penalty; a host oversubscribed by our own ranks now and then keeps a rank's data
  // waiting for a time slice too (4 ranks on 2 cores, idle: about one such yield per rank every
  // half second), and a penalty at each stopped the yields there: 32-byte calls at 4.1-19 us
  // against 3.4-4.4 with fixed waits and 2.8-5.7 us for Open MPI.
  int slowYieldStrikes = 3;
  std::chrono::nanoseconds strikeWindow = std::chrono::milliseconds(100);
  // A strike adds to the ones before it, or renews a penalty, only where at most this many
  // fast yields came since the strike before it (since the penalty's end). A busy process
  // makes nearly every yield slow: 0-7 fast ones between strikes (2 and 4 ranks on 2 cores, a
  // busy loop per core, shm and TCP: 165 of 169 strikes, the other 4 after 9-64, over TCP).
  // Our own ranks' work on a shared core (4 ranks on 2 cores, idle: a rank checking a result
  // while another waits) makes one now and then among many fast ones: 32 of 48 strikes came
  // after more than 64, 20 after more than 1000, and the penalties they added up to held the
  // link's waits in futex sleeps (docs/busy-cores.md, "Strikes amid fast yields").
  int maxFastYieldsBetweenStrikes = 32;

  // The policy for a rank whose host runs `ranksOnHost` ranks of its communicator; `adapt` as
  // above. Numbers from tests/shm/shm_link_perf's sweep (transports/shm/README.md) and
  // docs/busy-cores.md.
  static Backoff forHost(int ranksOnHost, bool adapt = true);
  // CPUs this host's ranks may share. A rank pinned to one core (mpirun binds each rank;
  // ringlet-run --bind cores) sees an affinity of one CPU, which says nothing about how many the
  // job has: count the online CPUs then.
  static int usableCpus();
};

// One link's wait policy: the limits, and with Backoff::adapt what its recent waits taught it
// (see the top of this file). Used by one thread at a time, like its link.
//
// The spin phase runs in full while spinning has recently paid (a credit that a wait ended by
// the spin, or one whose data arrived within a spin's time, raises by 2, and any other lowers
// by 1), else it shrinks to a few pauses, with one full spin in every kProbeEvery waits to
// notice that the peer answers quickly again. When the waiter slept, when its data arrived comes
// from the writer, where the link can tell (shm: the writer stamps the time it published before
// it wakes a sleeper; arrived()); a sleep's wake-up latency (tens of microseconds under load)
// must not count, or a rank that once stopped spinning would never start again.
class Waiter {
 public:
  // `stampsArrivals`: the link reports when its data was published (arrived()) after a yield
  // or a sleep (shm); a slow yield then counts against yielding only if the data sat unread.
  explicit Waiter(const Backoff& limits, bool stampsArrivals = false)
      : limits_(limits), stampsArrivals_(stampsArrivals) {}

  const Backoff& limits() const { return limits_; }
  // Spins the next wait may use (counts the waits between probes).
  int nextSpinBudget();
  // Whether the next yield may be made (false for a while after a slow one).
  bool mayYield(Deadline now) const { return !limits_.adapt || now >= noYieldUntil_; }

  // The wait ended while spinning.
  void endedSpinning() { credit_ = std::min(credit_ + 2, kMaxCredit); }
  // The wait began at `start`, spun `spins` times until `spun`, ended at `end`, and blocked
  // (`slept`) or only yielded.
  void endedAfterSpin(int spins, Deadline start, Deadline spun, Deadline end, bool slept);
  // A sched_yield() in the wait that began at `start` kept the rank off its core until `after`
  // for longer than Backoff::slowYield; `done`: the data had come by then. Counts a strike,
  // except where the link stamps arrivals and the data did not sit there for longer than
  // slowYield (or has not come): then the core went to a rank of ours that produced it, or that
  // had its own work (an oversubscribed host), not to a busy process. A strike after more than
  // Backoff::maxFastYieldsBetweenStrikes fast yields (since the strike before it) starts the
  // count afresh and renews nothing. The slowYieldStrikes-th strike within strikeWindow, or one
  // soon after the last penalty ended, stops the yields for Backoff::yieldPenalty (longer where
  // it renews the last penalty: Backoff::penaltyGrowth times it, up to maxYieldPenalty).
  void slowYield(Deadline start, Deadline after, bool done);
  // A sched_yield() that returned within Backoff::slowYield (counted up to one past the limit).
  void fastYield() {
    if (fastYields_ <= limits_.maxFastYieldsBetweenStrikes) ++fastYields_;
  }
  // From the link, once the data is there after the spin phase: the writer published it at
  // `when` (stamped links only).
  void arrived(Deadline when) { arrival_ = when; }

 private:
  static constexpr int kMaxCredit = 8;
  static constexpr int kFloorSpins = 8;
  static constexpr int kProbeEvery = 16;

  Backoff limits_;
  bool stampsArrivals_ = false;
  int credit_ = kMaxCredit;
  int sinceProbe_ = 0;
  // The fastest full spin phase seen: what a spin can catch.
  std::chrono::nanoseconds spinTime_ = std::chrono::nanoseconds::max();
  Deadline arrival_{};
  Deadline noYieldUntil_{};
  std::chrono::nanoseconds penalty_{0};  // the last penalty's length
  int strikes_ = 0;
  Deadline firstStrike_{};
  int fastYields_ = 0;  // since the last strike
};

// Blocks on `own` (the waiting link's descriptors and events; their revents are filled in) and
// on every other link of `wait` that has descriptors (for input, and for output while it has
// sends queued) for at most `slice`; reads ahead on the other links whose input arrived. For
// links that wake through a socket.
void pollLinks(const Link& self, std::span<pollfd> own, const WaitContext& wait,
               std::chrono::nanoseconds slice);

// Sleeps until a message lands on one of `links`, at most `slice`: where every one of them arms
// a futex word (Link::armWake: shared memory), in one futex_waitv(2) on all the words (Linux 5.16
// and later, up to 128 links); where every one is polled (TCP), in one ppoll() on all their
// descriptors (reading ahead what came, pumping queued sends). Returns false at once, having
// slept nothing, where it cannot (links of both kinds, an in-process link, a shared-memory
// peer that closed its end, a TCP peer that hung up, a kernel without futex_waitv): the caller
// then sleeps by the clock. True also when a link had news already (no sleep) or the sleep was
// cut short (a signal, the slice).
bool sleepOnLinks(std::span<Link* const> links, std::chrono::nanoseconds slice);

// Up to `spins` pauses until ready(); tells the waiter when the spin ended it. Whether it did.
template <typename Ready>
bool spinPauses(Waiter& waiter, int spins, Ready&& ready) {
  for (int i = 0; i < spins; ++i) {
    cpuRelax();
    if (ready()) {
      waiter.endedSpinning();
      return true;
    }
  }
  return false;
}

// Spins as a wait's spin phase does (the waiter's budget) until ready(); returns whether it
// became ready. A link's spinForMessage().
template <typename Ready>
bool spinUntil(Waiter& waiter, Ready&& ready) {
  return ready() || spinPauses(waiter, waiter.nextSpinBudget(), ready);
}

// Pumps the other links of `wait`; true when one of them still has sends queued that a block of
// `self` would not notice (a link that polls notices the other polled links' output).
bool pumpOthersForWait(const Link& self, const WaitContext& wait);

// waitFor()'s spins before it reads the clock.
inline constexpr int kQuickSpins = 8;
// A wait calls WaitContext::sideWork before it sleeps once it has waited this long: a wait that
// ends sooner is not what another rank is held up by.
inline constexpr auto kSideWorkAfter = std::chrono::milliseconds(5);

// Waits until ready() returns true, with the phases above. The link supplies
//   ready():             tries without blocking;
//   check():             throws if waiting can no longer succeed (peer aborted, closed, exited);
//   block(slice, busy):  sleeps at most `slice` or until woken (`busy`: other links have sends
//                        queued);
//   what():              what is awaited, for the TimeoutError ("a message of 64 bytes from ...").
// `slowWake`: the link's wake-up costs more than a futex (see Backoff::slowWakeAwake).
template <typename Ready, typename Check, typename Block, typename What>
void waitFor(const Link& self, const WaitContext& wait, Waiter& waiter, bool slowWake,
             Ready&& ready, Check&& check, Block&& block, What&& what) {
  if (ready()) return;
  const Backoff& limits = waiter.limits();
  const int spins = waiter.nextSpinBudget();
  // A few spins before the clock is read: many waits end within them, and a clock read (tens of
  // nanoseconds in a VM; 7-12% of an 8-byte all-reduce's samples at N = 2 under perf) would delay
  // noticing the message by as much. `start` is then late by those spins at most, a small part of
  // the full spin whose time the wait policy measures with it (spinTime_); a budget of a few pauses
  // (the policy's floor) reads the clock first, as its spin would otherwise measure as none.
  const int quick = spins > 2 * kQuickSpins ? kQuickSpins : 0;
  if (spinPauses(waiter, quick, ready)) return;
  const Deadline start = Clock::now();
  for (int i = quick; i < spins; ++i) {
    if ((i & 127) == 127) pumpOthersForWait(self, wait);
    cpuRelax();
    if (ready()) {
      waiter.endedSpinning();
      return;
    }
  }
  const Deadline spun = spins > 0 ? Clock::now() : start;
  const Deadline awakeUntil =
      start + std::max(limits.awake, slowWake ? limits.slowWakeAwake : std::chrono::nanoseconds{0});
  int yields = 0;
  bool slept = false;
  for (;;) {
    const bool othersBusy = pumpOthersForWait(self, wait);
    if (ready()) break;
    check();
    if (wait.expired()) {  // the deadline passed, or Communicator::abort() cancelled the wait
      if (ready()) break;
      wait.throwTimeout(what(), self.peer());
    }
    const Deadline now = Clock::now();
    if ((yields < limits.yields || now < awakeUntil) && waiter.mayYield(now)) {
      ++yields;
      ::sched_yield();
      const Deadline after = Clock::now();
      if (after - now <= limits.slowYield) {
        waiter.fastYield();
      } else {
        const bool done = ready();
        waiter.slowYield(start, after, done);
        if (done) break;
      }
      continue;
    }
    if (wait.sideWork != nullptr && now - start >= kSideWorkAfter) {
      wait.sideWork->whileWaiting(wait);
      if (ready()) break;
    }
    const std::chrono::nanoseconds slice = std::min<std::chrono::nanoseconds>(
        othersBusy ? limits.busySlice : limits.idleSlice, wait.deadline - now);
    if (slice.count() > 0) {
      block(slice, othersBusy);
      slept = true;
    }
  }
  waiter.endedAfterSpin(spins, start, spun, Clock::now(), slept);
}

}  // namespace ringlet::transport
