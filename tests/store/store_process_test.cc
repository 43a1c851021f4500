// File store shared by forked processes (the store runProcessRanks gives its ranks).

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <cstdlib>
#include <cstring>

#include "ringlet/bootstrap.h"
#include "ringlet/store.h"
#include "src/config.h"
#include "tests/store/env_guard.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;

TEST(FileStoreProcesses, ExchangeAndAtomicAdd) {
  constexpr int kRanks = 4;
  constexpr int kAdds = 200;
  testing::runProcessRanks(
      kRanks,
      [](int rank, int size, std::shared_ptr<Store> store) {
        store->setString("rank" + std::to_string(rank), std::to_string(rank * 10 + 1));
        for (int peer = 0; peer < size; ++peer) {
          EXPECT_EQ(store->getString("rank" + std::to_string(peer), 20'000ms),
                    std::to_string(peer * 10 + 1));
        }
        for (int i = 0; i < kAdds; ++i) store->add("counter", 1);
        // Barrier on the counter, then everyone sees the full count.
        const int64_t last = store->add("done", 1);
        if (last == size) store->setString("all-done", "1");
        store->get("all-done", 20'000ms);
        EXPECT_EQ(store->getString("counter"), std::to_string(size * kAdds));
      },
      std::chrono::seconds(30));
}

// Writers that share a process id (each rank's writer is pid 1 of its own PID namespace, as in
// containers): their temporary files must not collide, and none may remove another's.
TEST(FileStoreProcesses, WritersThatShareAProcessIdKeepEveryKey) {
  if (::geteuid() != 0) GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  constexpr int kRanks = 4;
  constexpr int kKeys = 100;
  testing::runProcessRanks(
      kRanks,
      [](int rank, int size, std::shared_ptr<Store> store) {
        if (::unshare(CLONE_NEWPID) != 0) {
          GTEST_SKIP() << "unshare(CLONE_NEWPID): " << std::strerror(errno);
        }
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
          int code = ::getpid() == 1 ? 0 : 3;
          try {
            for (int i = 0; i < kKeys && code == 0; ++i) {
              store->setString(fmt::format("r{}-k{}", rank, i), fmt::format("{}:{}", rank, i));
            }
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d (pid 1 of its namespace): %s\n", rank, e.what());
            code = 1;
          }
          ::_exit(code);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
        if (store->add("written", 1) == size) store->setString("all-written", "1");
        store->get("all-written", 20'000ms);
        for (int peer = 0; peer < size; ++peer) {
          for (int i = 0; i < kKeys; ++i) {
            EXPECT_EQ(store->getString(fmt::format("r{}-k{}", peer, i), 1'000ms),
                      fmt::format("{}:{}", peer, i));
          }
        }
      },
      std::chrono::seconds(30));
}

// torchrun-style processes: rank 0 hosts the TCP store on MASTER_ADDR:MASTER_PORT, the others
// connect (retrying until it listens) and all meet through it.
TEST(BootstrapProcesses, TorchrunRanksMeetThroughRankZerosStore) {
  constexpr int kRanks = 4;
  const uint16_t port = testing::freePort();
  testing::runProcessRanks(
      kRanks,
      [port](int rank, int size, std::shared_ptr<Store>) {
        testing::EnvGuard env;
        env.set("RANK", std::to_string(rank));
        env.set("WORLD_SIZE", std::to_string(size));
        env.set("LOCAL_RANK", std::to_string(rank));
        env.set("LOCAL_WORLD_SIZE", std::to_string(size));
        env.set("MASTER_ADDR", "127.0.0.1");
        env.set("MASTER_PORT", std::to_string(port));
        env.set("RINGLET_TIMEOUT", "10");
        config::reloadEnvironment();
        Bootstrap b = Bootstrap::fromEnvironment();
        EXPECT_EQ(b.rank, rank);
        EXPECT_EQ(b.size, size);
        EXPECT_EQ(b.source, "torchrun");
        EXPECT_EQ(b.keepAlive != nullptr, rank == 0);
        b.store->setString("hello" + std::to_string(rank), std::to_string(rank + 100));
        for (int peer = 0; peer < size; ++peer) {
          EXPECT_EQ(b.store->getString("hello" + std::to_string(peer), 20'000ms),
                    std::to_string(peer + 100));
        }
        // Rank 0 keeps the server up until everyone is done with it.
        b.store->add("done", 1);
        if (rank == 0) {
          for (int i = 0; i < 2000 && b.store->getString("done") != std::to_string(size); ++i) {
            std::this_thread::sleep_for(10ms);
          }
          EXPECT_EQ(b.store->getString("done"), std::to_string(size));
        }
      },
      std::chrono::seconds(30));
}

}  // namespace
}  // namespace ringlet
