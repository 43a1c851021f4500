// A rank that dies mid-collective, and a stray client at a listener: survivors fail fast and
// name the dead rank; a stray client changes nothing.
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "ringlet/ringlet.h"
#include "src/auth.h"
#include "src/net/socket.h"
#include "tests/support/event.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

class PeerDeath : public ::testing::TestWithParam<std::string> {};

// Shared-memory segments of this job still in /dev/shm (their names carry the job id).
size_t segmentsOf(const std::string& jobId) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (entry.path().filename().string().find(jobId) != std::string::npos) ++n;
  }
  return n;
}

TEST_P(PeerDeath, SurvivorsNameTheKilledRankWithinTenSeconds) {
  const std::string transport = GetParam();
  const std::string jobId = uniqueJobId("peerdeath");
  constexpr int kVictim = 2;
  runProcessRanksWithVictim(
      4, kVictim,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = 60s;  // far beyond the 10 s the test allows: only failure detection may end it
        o.transport = transport;
        o.segmentBytes = 64 << 10;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store, jobId), o);
        std::vector<float> data(1 << 20, 1.0f);
        comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
        if (rank == kVictim) {
          // Die in the middle of a later all-reduce.
          std::thread([] {
            std::this_thread::sleep_for(30ms);
            raise(SIGKILL);
          }).detach();
        }
        auto start = std::chrono::steady_clock::now();
        try {
          for (int i = 0; i < 100000; ++i) {
            comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
            start = std::chrono::steady_clock::now();
          }
          ADD_FAILURE() << "rank " << rank << ": no error after the victim died";
        } catch (const PeerError& e) {
          const auto took = std::chrono::steady_clock::now() - start;
          EXPECT_EQ(e.peer(), kVictim) << e.what();
          EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
          EXPECT_LT(took, 10s) << e.what();
        }
      },
      std::chrono::seconds(60));
  // Segments are unlinked as soon as both sides map them: nothing is left, even by the victim.
  EXPECT_EQ(segmentsOf(jobId), 0u) << "shared-memory segments of job " << jobId << " left behind";
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerDeath, ::testing::Values("tcp", "shm"));

// Ranks in PID namespaces of their own (containers sharing the host's /dev/shm): each is pid 1 in
// its namespace, so pids tell nothing, and two ranks with the same pid are not one process.
// They must still pick shared memory (not the in-process transport), and when one is killed the
// others must name it at once (not after their timeout, watching the host's init as "the peer").
// Rank `kVictim`'s parent kills it from outside (a namespace's init ignores its own SIGKILL).
int pidNamespaceRank(int rank, int size, std::shared_ptr<Store> store, const std::string& jobId,
                     int ready) {
  CommunicatorOptions o;
  o.timeout = 60s;  // far beyond the 10 s allowed: only failure detection may end the wait
  o.segmentBytes = 64 << 10;
  Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store, jobId), o);
  const std::string links = comm.describeLinks();  // "0:shm, 2:shm"
  if (links.find("shm") == std::string::npos || links.find("local") != std::string::npos) {
    std::fprintf(stderr, "rank %d: links '%s', expected shared memory only\n", rank, links.c_str());
    return 1;
  }
  std::vector<float> data(1 << 18, 1.0f);
  comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
  if (data[7] != static_cast<float>(size)) {
    std::fprintf(stderr, "rank %d: sum %g, expected %d\n", rank, data[7], size);
    return 1;
  }
  const char byte = 1;
  if (::write(ready, &byte, 1) != 1) return 1;
  auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 1000000; ++i) {
      comm.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      start = std::chrono::steady_clock::now();
    }
    std::fprintf(stderr, "rank %d: no error after the victim died\n", rank);
  } catch (const PeerError& e) {
    const auto took = std::chrono::steady_clock::now() - start;
    if (e.peer() == 1 && took < 10s) return 0;
    std::fprintf(
        stderr, "rank %d: PeerError naming rank %d after %lld ms: %s\n", rank, e.peer(),
        static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
        e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: expected a PeerError, got: %s\n", rank, e.what());
  }
  return 1;
}

TEST(PeerDeathInPidNamespaces, ShmIsChosenAndSurvivorsNameTheKilledRank) {
  if (::geteuid() != 0) GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  const std::string jobId = uniqueJobId("pidns");
  constexpr int kVictim = 1;
  runProcessRanksWithVictim(
      3, kVictim,
      [&](int rank, int size, std::shared_ptr<Store> store) {
        if (::unshare(CLONE_NEWPID) != 0) {
          // Same answer on every rank (same user, same kernel): the whole test is skipped.
          GTEST_SKIP() << "unshare(CLONE_NEWPID): " << std::strerror(errno);
        }
        int pipeFds[2];
        ASSERT_EQ(::pipe(pipeFds), 0);
        std::fflush(stdout);
        std::fflush(stderr);
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
          ::prctl(PR_SET_PDEATHSIG, SIGKILL);
          ::close(pipeFds[0]);
          int code = 2;
          try {
            code = ::getpid() == 1 ? pidNamespaceRank(rank, size, store, jobId, pipeFds[1]) : 3;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
          }
          ::_exit(code);
        }
        ::close(pipeFds[1]);
        char byte = 0;
        const bool ready = ::read(pipeFds[0], &byte, 1) == 1;
        ::close(pipeFds[0]);
        if (rank == kVictim && ready) {
          std::this_thread::sleep_for(30ms);  // into a later all-reduce
          ::kill(child, SIGKILL);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        if (rank == kVictim) {
          EXPECT_TRUE(ready) << "the victim failed before its first all-reduce ended";
          return;
        }
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "rank " << rank << " (its stderr says why): status " << status;
      },
      std::chrono::seconds(60));
}

// Rank 0's helper thread connects the stray clients to rank 1's listener whenever it gets there
// (during the setup or after it) and rank 0 holds them open to the end. Every rank keeps its
// communicator, and so the listener, until they have connected, so that they always find it.
TEST(StrayClient, GarbageAtTheListenerIsRefusedAndResultsStayExact) {
  Event strayConnected;
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    net::Fd garbage;
    net::Fd silent;
    std::thread stray;
    struct JoinOnExit {
      std::thread& thread;
      ~JoinOnExit() {
        if (thread.joinable()) thread.join();
      }
    } joinOnExit{stray};
    if (rank == 0) {
      stray = std::thread([&] {
        SetOnExit connected(strayConnected);
        try {
          // Rank 1's listening address, as the tcp transport publishes it (the record ends with
          // its MAC, which a stray client cannot make but need not check).
          std::string addr = store->getString("ringlet/comm1/t/tcp/addr/1", 30s);
          addr.resize(addr.size() - auth::kMacBytes);
          auto [host, port] = net::splitHostPort(addr, "listener");
          auto deadline = net::Clock::now() + 30s;
          garbage = net::connectTcp(host, port, deadline, "listener");
          const char junk[] = "GET / HTTP/1.0\r\n\r\nthis is not ringlet";
          ::send(garbage.get(), junk, sizeof(junk), MSG_NOSIGNAL);
          silent = net::connectTcp(host, port, deadline, "listener");
        } catch (const std::exception& e) {
          ADD_FAILURE() << "stray client: " << e.what();
        }
      });
    }
    CommunicatorOptions o;
    o.timeout = 20s;
    o.transport = "tcp";
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    for (int round = 0; round < 5; ++round) {
      std::vector<int64_t> data(100003);
      for (size_t j = 0; j < data.size(); ++j) data[j] = static_cast<int64_t>(j * 3 + rank);
      comm.allreduce(data.data(), data.size(), DataType::kInt64, ReduceOp::kSum);
      size_t wrong = 0;
      for (size_t j = 0; j < data.size(); ++j) wrong += data[j] != static_cast<int64_t>(9 * j + 3);
      EXPECT_EQ(wrong, 0u) << "round " << round << " on rank " << rank;
    }
    EXPECT_TRUE(strayConnected.waitFor()) << "the stray clients never connected";
  });
}

}  // namespace
}  // namespace ringlet::testing
