#pragma once
// Run one test body on N ranks, as threads or as forked processes; every rank's failure counts.
//
//   runThreadRanks(4, [](int rank, int size, std::shared_ptr<ringlet::Store> store) { ... });
//   runProcessRanks(4, [](int rank, int size, std::shared_ptr<ringlet::Store> store) { ... });
//
// Inside the body use gtest assertions (EXPECT_*, ASSERT_*) or throw: a failed expectation or an
// exception on any rank fails the test with that rank's message. Process ranks share a file
// store in a fresh temporary directory; each child reports its failures to the parent through a
// pipe and exits with _exit. A rank that hangs is killed after `timeout`.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ringlet/store.h"

namespace ringlet::testing {

using RankBody = std::function<void(int rank, int size, std::shared_ptr<Store> store)>;

void runThreadRanks(int size, const RankBody& body,
                    std::chrono::seconds timeout = std::chrono::seconds(60));
void runProcessRanks(int size, const RankBody& body,
                     std::chrono::seconds timeout = std::chrono::seconds(60));
// As above, but rank `mayDie` is expected to kill itself (its death is not a failure).
void runProcessRanksWithVictim(int size, int mayDie, const RankBody& body,
                               std::chrono::seconds timeout = std::chrono::seconds(60));

// A unique job id per call (tests run concurrently under ctest -j).
std::string uniqueJobId(const std::string& prefix);
// A fresh temporary directory (removed by the caller or left in /tmp).
std::string makeTempDir(const std::string& prefix);

}  // namespace ringlet::testing
