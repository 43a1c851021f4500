// spawn() (forked ranks) and spawnThreads() (thread ranks): exact collectives for several sizes,
// the first failing rank named with how it ended, the others stopped, nothing left behind.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;

// Every rank all-reduces data that depends on rank and position, and checks the exact result.
void allreduceAndCheck(Communicator& comm) {
  const int n = comm.size();
  std::vector<int32_t> data(1001);
  for (size_t j = 0; j < data.size(); ++j) data[j] = static_cast<int32_t>(j * n + comm.rank() + 1);
  comm.allreduce(data.data(), data.data(), data.size(), DataType::kInt32, ReduceOp::kSum);
  for (size_t j = 0; j < data.size(); ++j) {
    const int32_t want = static_cast<int32_t>(j * n * n + n * (n + 1) / 2);
    if (data[j] != want) {
      throw std::runtime_error("rank " + std::to_string(comm.rank()) + ": element " +
                               std::to_string(j) + " is " + std::to_string(data[j]) +
                               ", expected " + std::to_string(want));
    }
  }
}

SpawnOptions quick() {
  SpawnOptions o;
  o.communicator.timeout = 30s;
  o.grace = 300ms;
  return o;
}

// The children of this process (from /proc), to check that none is left.
std::set<int> childrenOfThisProcess() {
  std::set<int> pids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    int pid = 0;
    while (in >> pid) pids.insert(pid);
  }
  return pids;
}

size_t entriesStartingWith(const std::string& dir, const std::string& prefix) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

class NothingLeft : public ::testing::Test {
 protected:
  void SetUp() override {
    children_ = childrenOfThisProcess();
    storeDirs_ = entriesStartingWith("/tmp", mine());
    segments_ = entriesStartingWith("/dev/shm", mine());
  }
  void TearDown() override {
    EXPECT_EQ(childrenOfThisProcess(), children_) << "a child process outlived the call";
    EXPECT_EQ(entriesStartingWith("/tmp", mine()), storeDirs_) << "store dir left";
    EXPECT_EQ(entriesStartingWith("/dev/shm", mine()), segments_) << "shared-memory segment left";
  }
  // Names of this process's jobs (other tests may run spawn() at the same time).
  static std::string mine() { return "ringlet-spawn-" + std::to_string(getpid()) + "-"; }
  std::set<int> children_;
  size_t storeDirs_ = 0;
  size_t segments_ = 0;
};

using Spawn = NothingLeft;
using SpawnThreads = NothingLeft;

TEST_F(Spawn, EveryRankAllReducesExactlyAndSeesItsEnvironment) {
  for (int n : {1, 2, 3, 5}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    EXPECT_NO_THROW(spawn(
        n,
        [n](Communicator& comm) {
          const char* rank = std::getenv("RANK");
          const char* size = std::getenv("WORLD_SIZE");
          if (!rank || std::stoi(rank) != comm.rank() || !size || std::stoi(size) != n ||
              comm.size() != n) {
            throw std::runtime_error("RANK/WORLD_SIZE do not match the communicator");
          }
          allreduceAndCheck(comm);
        },
        quick()));
  }
}

TEST_F(Spawn, AThrowingRankIsNamedWithItsMessageAndTheOthersAreStopped) {
  const auto start = std::chrono::steady_clock::now();
  try {
    spawn(
        4,
        [](Communicator& comm) {
          allreduceAndCheck(comm);
          if (comm.rank() == 2) throw std::runtime_error("rank two gives up");
          allreduceAndCheck(comm);  // the others wait here for rank 2
        },
        quick());
    ADD_FAILURE() << "no error";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.rank(), 2) << e.what();
    EXPECT_EQ(e.how(), "exception") << e.what();
    EXPECT_NE(std::string(e.what()).find("rank two gives up"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 2 of 4"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST_F(Spawn, AKilledRankIsNamedWithItsSignal) {
  try {
    spawn(
        3,
        [](Communicator& comm) {
          allreduceAndCheck(comm);
          if (comm.rank() == 1) ::raise(SIGKILL);
          allreduceAndCheck(comm);
        },
        quick());
    ADD_FAILURE() << "no error";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.rank(), 1) << e.what();
    EXPECT_NE(e.how().find("signal 9"), std::string::npos) << e.what();
  }
}

// A rank busy outside ringlet (it never notices) is stopped once the grace has passed.
TEST_F(Spawn, ARankThatNeverEndsIsStoppedAfterTheGrace) {
  const auto start = std::chrono::steady_clock::now();
  try {
    spawn(
        2,
        [](Communicator& comm) {
          if (comm.rank() == 0) throw std::invalid_argument("bad input on rank 0");
          for (;;) std::this_thread::sleep_for(1s);
        },
        quick());
    ADD_FAILURE() << "no error";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.rank(), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad input on rank 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(Spawn, TheJobDeadlineIsATimeoutError) {
  SpawnOptions o = quick();
  o.timeout = 500ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(spawn(
                   2, [](Communicator&) { std::this_thread::sleep_for(60s); }, o),
               TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(SpawnThreads, EveryRankAllReducesExactlyOverTheInProcessTransport) {
  for (int n : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::atomic<int> calls{0};
    EXPECT_NO_THROW(spawnThreads(
        n,
        [&](Communicator& comm) {
          if (n > 1 && comm.describeLinks().find("local") == std::string::npos) {
            throw std::runtime_error("links are " + comm.describeLinks());
          }
          allreduceAndCheck(comm);
          ++calls;
        },
        quick()));
    EXPECT_EQ(calls.load(), n);
  }
}

TEST_F(SpawnThreads, AFailingRankIsNamedAndTheOthersAreReleased) {
  const auto start = std::chrono::steady_clock::now();
  try {
    spawnThreads(
        3,
        [](Communicator& comm) {
          allreduceAndCheck(comm);
          if (comm.rank() == 1) throw std::runtime_error("thread rank one fails");
          allreduceAndCheck(comm);  // the others would wait for rank 1 until the timeout
        },
        quick());
    ADD_FAILURE() << "no error";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.rank(), 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("thread rank one fails"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

TEST(SpawnArguments, AreCheckedBeforeAnythingStarts) {
  auto fn = [](Communicator&) {};
  EXPECT_THROW(spawn(0, fn), InvalidArgument);
  EXPECT_THROW(spawn(1025, fn), InvalidArgument);
  EXPECT_THROW(spawn(2, RankFunction{}), InvalidArgument);
  EXPECT_THROW(spawnThreads(-1, fn), InvalidArgument);
  EXPECT_THROW(spawnThreads(2, RankFunction{}), InvalidArgument);
}

}  // namespace
}  // namespace ringlet
