// The adaptive wait policy (transports/progress.h, Waiter) on made-up timelines: what each kind
// of wait teaches it. Times are synthetic, so nothing here depends on the machine's speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "transports/progress.h"

namespace {

using ringlet::transport::Backoff;
using ringlet::transport::Clock;
using ringlet::transport::Deadline;
using ringlet::transport::Waiter;
using namespace std::chrono_literals;

Backoff adaptive() {
  Backoff b;
  b.spins = 1000;
  b.yields = 64;
  b.adapt = true;
  return b;
}

// One wait that spun its whole budget (40 us), then slept, and whose data the writer published
// `arrivedAfter` after the wait began; the wake-up came `wokeAfter` after the start.
void sleptWait(Waiter& w, Deadline start, std::chrono::nanoseconds arrivedAfter,
               std::chrono::nanoseconds wokeAfter) {
  const int spins = w.nextSpinBudget();
  const auto spun = start + (spins == w.limits().spins ? 40us : 1us);
  w.arrived(start + arrivedAfter);
  w.endedAfterSpin(spins, start, spun, start + wokeAfter, /*slept=*/true);
}

// A waiter whose last 20 waits (from t0, 1 ms apart) all got their data long after a spin.
Waiter stoppedSpinning(Deadline t0) {
  Waiter w(adaptive());
  for (int i = 0; i < 20; ++i) sleptWait(w, t0 + i * 1ms, 600us, 650us);
  return w;
}

TEST(WaitPolicy, FixedPolicyNeverChanges) {
  Backoff b = adaptive();
  b.adapt = false;
  Waiter w(b);
  const Deadline t0 = Clock::now();
  for (int i = 0; i < 50; ++i) sleptWait(w, t0 + i * 10ms, 5ms, 5ms);
  w.slowYield(t0, t0 + 10ms, false);
  EXPECT_EQ(w.nextSpinBudget(), 1000);
  EXPECT_TRUE(w.mayYield(t0 + 10ms + 1us));
}

TEST(WaitPolicy, SlowYieldsInQuickSuccessionStopYieldingForThePenalty) {
  Waiter w(adaptive());  // a link that cannot say when its data came (TCP)
  const Deadline t0 = Clock::now();
  EXPECT_TRUE(w.mayYield(t0));
  // A busy process ran its time slice at each of three yields, 5 ms apart.
  w.slowYield(t0, t0 + 5ms, false);
  EXPECT_TRUE(w.mayYield(t0 + 5ms + 1us));  // one strike: not yet
  w.slowYield(t0 + 5ms, t0 + 10ms, false);
  EXPECT_TRUE(w.mayYield(t0 + 10ms + 1us));
  w.slowYield(t0 + 10ms, t0 + 15ms, false);
  EXPECT_FALSE(w.mayYield(t0 + 15ms + 1us));
  EXPECT_FALSE(w.mayYield(t0 + 15ms + adaptive().yieldPenalty - 1us));
  const Deadline ended = t0 + 15ms + adaptive().yieldPenalty;
  EXPECT_TRUE(w.mayYield(ended));
  // The load is still there: the first slow yield after the penalty renews it, for longer.
  w.slowYield(ended + 1ms, ended + 6ms, false);
  const auto renewed = adaptive().penaltyGrowth * adaptive().yieldPenalty;
  ASSERT_GT(renewed, adaptive().yieldPenalty);
  EXPECT_FALSE(w.mayYield(ended + 6ms + 1us));
  EXPECT_FALSE(w.mayYield(ended + 6ms + renewed - 1us));
  const Deadline renewedEnd = ended + 6ms + renewed;
  EXPECT_TRUE(w.mayYield(renewedEnd));
  // Long after that penalty, one slow yield is one strike again.
  const Deadline later = renewedEnd + adaptive().maxYieldPenalty + 1ms;
  w.slowYield(later, later + 5ms, false);
  EXPECT_TRUE(w.mayYield(later + 5ms + 1us));
}

// A busy process that stays: each penalty's end finds it again with one slow yield, and each
// renewal makes the penalty longer, up to the longest, so that finding out costs one slow yield per
// maxYieldPenalty once the load has lasted. A burst that ended long ago (our own ranks' work
// on a shared core, a job's start) leaves nothing behind: three strikes then start over at
// the shortest penalty.
TEST(WaitPolicy, APenaltyThatKeepsBeingRenewedGrowsToTheLongestThenStartsShortAgain) {
  const Backoff limits = adaptive();
  ASSERT_LT(limits.yieldPenalty, limits.maxYieldPenalty);
  Waiter w(limits);
  const Deadline t0 = Clock::now();
  for (int i = 0; i < 3; ++i) w.slowYield(t0 + i * 5ms, t0 + (i + 1) * 5ms, false);
  Deadline end = t0 + 15ms + limits.yieldPenalty;
  ASSERT_FALSE(w.mayYield(end - 1us));
  ASSERT_TRUE(w.mayYield(end));
  auto expected = limits.yieldPenalty;
  for (int renewal = 1; renewal <= 8; ++renewal) {
    // The first yield after the penalty, slow again; a gap between calls (the caller's own
    // work) shorter than the longest penalty does not lose the load.
    const Deadline after = end + (renewal % 2 == 0 ? 3ms : limits.maxYieldPenalty - 1ms);
    w.slowYield(after - 2ms, after, false);
    expected = std::min(limits.penaltyGrowth * expected, limits.maxYieldPenalty);
    EXPECT_FALSE(w.mayYield(after + expected - 1us)) << "renewal " << renewal;
    EXPECT_TRUE(w.mayYield(after + expected)) << "renewal " << renewal;
    end = after + expected;
  }
  EXPECT_EQ(expected, limits.maxYieldPenalty);
  // The load went away; much later a burst earns the shortest penalty again.
  const Deadline burst = end + 2 * limits.maxYieldPenalty;
  for (int i = 0; i < 3; ++i) w.slowYield(burst + i * 5ms, burst + (i + 1) * 5ms, false);
  EXPECT_FALSE(w.mayYield(burst + 15ms + limits.yieldPenalty - 1us));
  EXPECT_TRUE(w.mayYield(burst + 15ms + limits.yieldPenalty));
}

// Slow yields far apart (a host oversubscribed by our own ranks, now and then a time slice)
// never add up to the penalty: each strike window starts afresh.
TEST(WaitPolicy, SlowYieldsFarApartNeverStopYielding) {
  Waiter w(adaptive());
  const Deadline t0 = Clock::now();
  const auto apart = adaptive().strikeWindow / 2 + 1ms;  // two fit in a window, three never
  for (int i = 0; i < 20; ++i) {
    const Deadline at = t0 + i * apart;
    w.slowYield(at, at + 2ms, false);
    ASSERT_TRUE(w.mayYield(at + 2ms + 1us)) << "slow yield " << i;
  }
}

// A host oversubscribed by our own ranks: now and then a slow yield (another rank's work held
// the core) among many fast ones. Three of them within the strike window never add up to a
// penalty, nor does one right after a penalty renew it; a few fast yields between slow ones (a
// busy process that is not always eligible to run) still do.
TEST(WaitPolicy, SlowYieldsAmidFastOnesNeverStopYielding) {
  const Backoff limits = adaptive();
  const int many = limits.maxFastYieldsBetweenStrikes + 1;
  const Deadline t0 = Clock::now();
  Waiter w(limits);
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < many; ++k) w.fastYield();
    const Deadline at = t0 + i * 5ms;
    w.slowYield(at, at + 2ms, false);
    ASSERT_TRUE(w.mayYield(at + 2ms + 1us)) << "slow yield " << i;
  }
  // A few fast yields between them: a busy process.
  Waiter busy(limits);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < limits.maxFastYieldsBetweenStrikes; ++k) busy.fastYield();
    busy.slowYield(t0 + i * 5ms, t0 + i * 5ms + 2ms, false);
  }
  EXPECT_FALSE(busy.mayYield(t0 + 12ms + 1us));
  // After its penalty, a slow yield amid many fast ones renews nothing.
  const Deadline ended = t0 + 12ms + limits.yieldPenalty;
  ASSERT_TRUE(busy.mayYield(ended));
  for (int k = 0; k < many; ++k) busy.fastYield();
  busy.slowYield(ended + 1ms, ended + 3ms, false);
  EXPECT_TRUE(busy.mayYield(ended + 3ms + 1us));
}

TEST(WaitPolicy, WithStampsOnlyASlowYieldWhileTheDataSatCounts) {
  const Deadline t0 = Clock::now();
  {
    // Oversubscribed by our own ranks: the yield ran the rank that produced our data, which
    // published it just before handing the core back. Yielding goes on.
    Waiter w(adaptive(), /*stampsArrivals=*/true);
    w.arrived(t0 + 2900us);
    w.slowYield(t0, t0 + 3ms, true);
    EXPECT_TRUE(w.mayYield(t0 + 3ms + 1us));
    // Nothing came during a slow yield: the core went to other work of ours.
    w.slowYield(t0, t0 + 6ms, false);
    EXPECT_TRUE(w.mayYield(t0 + 6ms + 1us));
  }
  {
    // The data came 2 ms before the yield returned, three times in a row: it sat while a busy
    // process held the core.
    Waiter w(adaptive(), /*stampsArrivals=*/true);
    for (int i = 0; i < 3; ++i) {
      const Deadline at = t0 + i * 3ms;
      w.arrived(at + 1ms);
      w.slowYield(at, at + 3ms, true);
    }
    EXPECT_FALSE(w.mayYield(t0 + 9ms + 1us));
  }
}

TEST(WaitPolicy, DataThatComesLateShrinksTheSpinThenProbes) {
  Waiter w(adaptive());
  const Deadline t0 = Clock::now();
  int waits = 0;
  while (w.nextSpinBudget() == 1000) {
    // nextSpinBudget() above counted as a wait's budget: give it its outcome.
    w.arrived(t0 + waits * 1ms + 500us);
    w.endedAfterSpin(1000, t0 + waits * 1ms, t0 + waits * 1ms + 40us, t0 + waits * 1ms + 520us,
                     true);
    ASSERT_LT(++waits, 100) << "the spin budget never shrank";
  }
  EXPECT_GE(waits, 4);  // not on the first miss: a few slow waits are normal
  // At the floor, one wait in every 16 spins in full, to notice a peer that answers fast again.
  int full = 0;
  for (int i = 0; i < 64; ++i) {
    const int spins = w.nextSpinBudget();
    if (spins == 1000) ++full;
    const Deadline start = t0 + 1s + i * 1ms;
    w.arrived(start + 500us);
    w.endedAfterSpin(spins, start, start + (spins == 1000 ? 40us : 1us), start + 520us, true);
  }
  EXPECT_EQ(full, 4);
}

TEST(WaitPolicy, AWakeUpThatTookLongDoesNotHideDataThatCameEarly) {
  const Deadline t0 = Clock::now();
  Waiter w = stoppedSpinning(t0);
  ASSERT_LT(w.nextSpinBudget(), 1000);
  // Now the data comes 3 us after the wait starts, but under load the sleeper is woken only
  // 45 us later: the spin would have caught it, so spinning comes back.
  sleptWait(w, t0 + 100ms, 3us, 48us);
  EXPECT_EQ(w.nextSpinBudget(), 1000);
}

TEST(WaitPolicy, ASleepWithoutAStampTeachesNothing) {
  const Deadline t0 = Clock::now();
  Waiter w = stoppedSpinning(t0);
  ASSERT_LT(w.nextSpinBudget(), 1000);
  for (int i = 0; i < 5; ++i) {
    const Deadline start = t0 + 100ms + i * 1ms;
    const int spins = w.nextSpinBudget();
    // No arrived(): a transport that cannot tell (TCP), or a stamp from before this wait.
    w.arrived(start - 1ms);
    w.endedAfterSpin(spins, start, start + (spins == 1000 ? 40us : 1us), start + 5us, true);
  }
  EXPECT_LT(w.nextSpinBudget(), 1000);
}

TEST(WaitPolicy, WaitsThatEndWhileSpinningKeepTheSpin) {
  const Deadline t0 = Clock::now();
  Waiter w = stoppedSpinning(t0);
  ASSERT_LT(w.nextSpinBudget(), 1000);
  // A wait that ended while yielding (no sleep) within a spin's time counts as caught.
  Deadline start = t0 + 100ms;
  int spins = w.nextSpinBudget();
  w.endedAfterSpin(spins, start, start + 1us, start + 10us, /*slept=*/false);
  EXPECT_EQ(w.nextSpinBudget(), 1000);
  // Then every wait ends while spinning: the budget stays in full.
  for (int i = 0; i < 20; ++i) w.endedSpinning();
  EXPECT_EQ(w.nextSpinBudget(), 1000);
}

// A link with nothing to move; waitFor() only asks its peer and for other links to pump.
class IdleLink final : public ringlet::transport::Link {
 public:
  IdleLink() : Link(1) {}
  std::string_view transportName() const override { return "idle"; }
  std::string describe() const override { return "idle link"; }
  size_t maxMessageBytes() const override { return kMinMessageBytes; }
  std::byte* sendBuffer(size_t, std::byte*, const ringlet::transport::WaitContext&) override {
    throw std::logic_error("unused");
  }
  void send(const std::byte*, size_t, const ringlet::transport::WaitContext&) override {}
  void flush(const ringlet::transport::WaitContext&) override {}
  const std::byte* recv(size_t, const ringlet::transport::WaitContext&) override {
    throw std::logic_error("unused");
  }
  void release() override {}
  void recvInto(std::byte*, size_t, const ringlet::transport::WaitContext&) override {}
  const std::byte* recvAny(size_t, size_t*, const ringlet::transport::WaitContext&) override {
    throw std::logic_error("unused");
  }
  bool pump() override { return false; }
  void abort(int, std::string_view) override {}
};

// How many times a wait whose data is there at its `readyAt`-th look sleeps, under `limits`.
int sleepsOfAWait(const Backoff& limits, int readyAt) {
  IdleLink link;
  ringlet::transport::WaitContext wait;
  wait.deadline = Clock::now() + 60s;
  Waiter waiter(limits);
  int looks = 0;
  int sleeps = 0;
  ringlet::transport::waitFor(
      link, wait, waiter, /*slowWake=*/false, [&] { return ++looks >= readyAt; }, [] {},
      [&](std::chrono::nanoseconds, bool) { ++sleeps; }, [] { return std::string("data"); });
  return sleeps;
}

TEST(WaitFor, StaysAwakeForItsTimeHoweverFewItsYields) {
  // No spin and no yield by count: only `awake` keeps the wait from sleeping. With it, data
  // that comes at the 20th look (microseconds in) is caught awake; without it, each look past
  // the first sleeps. A 2-core VM's sched_yield() took 0.13 us, so 64 yields were 8 us awake,
  // and a wait of 30 us slept and woke 100 us later.
  Backoff limits;
  limits.spins = 0;
  limits.yields = 0;
  limits.awake = 10s;
  EXPECT_EQ(sleepsOfAWait(limits, 20), 0);
  limits.awake = 0s;
  EXPECT_GT(sleepsOfAWait(limits, 20), 0);
}

}  // namespace
