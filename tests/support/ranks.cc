#include "tests/support/ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace ringlet::testing {

std::string uniqueJobId(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return fmt::format("{}-{}-{}", prefix, getpid(), counter++);
}

std::string makeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

void runThreadRanks(int size, const RankBody& body, std::chrono::seconds timeout) {
  auto store = makeInProcessStore({.timeout = std::chrono::seconds(30)});
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank, size, store);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
      } catch (...) {
        ADD_FAILURE() << "rank " << rank << " threw a non-standard exception";
      }
      finished++;
    });
  }
  // Watchdog: a hung rank must not hang CI. Thread ranks cannot be killed, so abort the binary.
  std::thread watchdog([&] {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (finished.load() < size) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "runThreadRanks: ranks still running after %lld s; aborting\n",
                     static_cast<long long>(timeout.count()));
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (auto& t : threads) t.join();
  watchdog.join();
}

void runProcessRanks(int size, const RankBody& body, std::chrono::seconds timeout) {
  runProcessRanksWithVictim(size, -1, body, timeout);
}

void runProcessRanksWithVictim(int size, int mayDie, const RankBody& body,
                               std::chrono::seconds timeout) {
  const std::string dir = makeTempDir("ringlet-ranks");
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork failed";
      break;
    }
    if (pid == 0) {
      int code = 0;
      try {
        auto store = makeFileStore(dir, {.timeout = std::chrono::seconds(30)});
        body(rank, size, store);
        if (::testing::Test::HasFailure()) {
          std::fprintf(stderr, "rank %d: expectations failed (see above)\n", rank);
          code = 1;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", rank, e.what());
        code = 2;
      } catch (...) {
        std::fprintf(stderr, "rank %d threw a non-standard exception\n", rank);
        code = 2;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> status(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int s = 0;
      pid_t r = waitpid(pids[i], &s, WNOHANG);
      if (r == pids[i]) {
        status[i] = s;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (status[i] == -1) {
          kill(pids[i], SIGKILL);
          int s = 0;
          waitpid(pids[i], &s, 0);
          status[i] = s;
          ADD_FAILURE() << "rank " << i << " still running after " << timeout.count()
                        << " s; killed";
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int s = status[i];
    if (WIFEXITED(s) && WEXITSTATUS(s) == 0) continue;
    if (static_cast<int>(i) == mayDie && WIFSIGNALED(s)) continue;
    if (WIFEXITED(s)) {
      ADD_FAILURE() << "rank " << i << " exited with status " << WEXITSTATUS(s);
    } else if (WIFSIGNALED(s)) {
      ADD_FAILURE() << "rank " << i << " was killed by signal " << WTERMSIG(s);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace ringlet::testing
