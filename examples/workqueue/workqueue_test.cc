// The work queue (workqueue.h) finds every prime below the limit exactly once, whoever takes
// which range, for 1-5 ranks and chunks that do not divide the limit; every range is done once.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <vector>

#include "tests/support/ranks.h"
#include "workqueue.h"

namespace {

using namespace std::chrono_literals;

std::vector<int64_t> serialPrimes(int64_t limit) {
  std::vector<int64_t> out;
  for (int64_t v = 0; v < limit; ++v) {
    if (workqueue::isPrime(v)) out.push_back(v);
  }
  return out;
}

void runQueue(const std::string& transport, int size, int64_t limit, int64_t chunk) {
  std::mutex mu;
  std::multiset<int64_t> ranges;
  ringlet::testing::runThreadRanks(
      size, [&](int rank, int n, std::shared_ptr<ringlet::Store> store) {
        ringlet::CommunicatorOptions options;
        options.timeout = 30s;
        options.transport = transport;
        auto comm =
            ringlet::Communicator::create(ringlet::Bootstrap::forThread(rank, n, store), options);
        std::vector<int64_t> mine;
        const auto primes = workqueue::primesBelow(comm, limit, chunk, &mine);
        if (rank == 0) {
          EXPECT_EQ(primes, serialPrimes(limit)) << n << " ranks, limit " << limit;
        }
        std::lock_guard lock(mu);
        ranges.insert(mine.begin(), mine.end());
      });
  if (size > 1) {
    std::multiset<int64_t> want;
    for (int64_t lo = 0; lo < limit; lo += chunk) want.insert(lo);
    EXPECT_EQ(ranges, want) << size << " ranks: every range once";
  }
}

TEST(WorkQueue, EveryPrimeOnceLocal) {
  for (int size : {1, 2, 3, 5}) runQueue("local", size, 20011, 997);
}

TEST(WorkQueue, EveryPrimeOnceTcp) { runQueue("tcp", 4, 20011, 1500); }

TEST(WorkQueue, NothingToDo) { runQueue("local", 3, 0, 10); }

}  // namespace
