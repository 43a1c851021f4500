// A rank that dies mid-collective, and a stray client at a listener: survivors fail fast and
// name the dead rank; a stray client changes nothing.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
