// Small rooted calls on more than two ranks over TCP: the frames of their chain of headers go as
// runs (Link::sendInRun) where calls of one root follow each other, and one by one where roots
// alternate (CommunicatorImpl::execute).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/ringlet.h"
#include "src/core/communicator_access.h"
#include "tests/support/ranks.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using testing::runThreadRanks;

// Per peer: whether this rank's tcp link to it has taken a frame of a run.
std::map<int, bool> linksThatTookRuns(Communicator& comm) {
  std::map<int, bool> took;
  for (transport::Link* link : detail::CommunicatorAccess::impl(comm).activeLinks()) {
    auto* tcp = dynamic_cast<transport::tcp::TcpLink*>(link);
    if (tcp != nullptr) took[tcp->peer()] = tcp->peerSendsRuns();
  }
  return took;
}

// Every call's values are checked, so that the runs are known to carry what was sent.
void broadcasts(Communicator& comm, int rank, int calls, auto rootOf) {
  for (int i = 0; i < calls; ++i) {
    const int root = rootOf(i);
    int64_t value[2] = {-1, -1};
    if (rank == root) value[0] = 1000 * i + root, value[1] = -i;
    comm.broadcast(value, 2, DataType::kInt64, root);
    ASSERT_EQ(value[0], 1000 * i + root) << "call " << i;
    ASSERT_EQ(value[1], -i) << "call " << i;
  }
}

Communicator tcpComm(int rank, int size, std::shared_ptr<Store> store) {
  CommunicatorOptions o;
  o.timeout = 20s;
  o.transport = "tcp";
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

TEST(ChainRuns, CallsOfOneRootSendTheirChainAsRuns) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = tcpComm(rank, size, store);
    ASSERT_EQ(comm.algorithmFor("broadcast", 16), "header_inline");
    broadcasts(comm, rank, 64, [](int) { return 0; });
    comm.barrier();
    // The chain runs 0 -> 1 -> 2 -> 3, and 3 answers 0: each rank hears runs from the one
    // before it, and nothing of a run from the one after.
    const std::map<int, bool> took = linksThatTookRuns(comm);
    const int prev = (rank + size - 1) % size, next = (rank + 1) % size;
    ASSERT_TRUE(took.contains(prev) && took.contains(next)) << "rank " << rank;
    EXPECT_TRUE(took.at(prev)) << "rank " << rank << " took no run from rank " << prev;
    EXPECT_FALSE(took.at(next)) << "rank " << rank;
  });
}

TEST(ChainRuns, AlternatingRootsSendFramesOneByOne) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = tcpComm(rank, size, store);
    broadcasts(comm, rank, 64, [](int i) { return i % 2; });
    comm.barrier();
    for (const auto& [peer, took] : linksThatTookRuns(comm)) {
      EXPECT_FALSE(took) << "rank " << rank << " took a run from rank " << peer;
    }
  });
}

// The end of a chain that finds each call's chain waiting and matching answers only every 16th
// call, and owes the root the last one it skipped (CommunicatorImpl::owedAnswer_): the rank before
// the root (3 of 4) starts its calls after the others have made theirs, so that all of them wait
// for it. It owes the root an answer after them, and sends it before anything else: the root's
// unsettled calls are settled by the call after (an all-reduce, which checks its own headers and
// reads the answers first).
TEST(ChainRuns, TheEndOfAChainOwesOneAnswerForTheCallsItFoundWaiting) {
  for (const char* transport : {"tcp", "shm", "local"}) {
    runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o;
      o.timeout = 20s;
      o.transport = transport;
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      const detail::CommunicatorImpl& impl = detail::CommunicatorAccess::impl(comm);
      ASSERT_EQ(comm.algorithmFor("broadcast", 16), "header_inline");
      if (rank == size - 1) {
        for (int r = 0; r < size - 1; ++r) store->getString(fmt::format("test/passed{}", r), 20s);
        std::this_thread::sleep_for(100ms);  // a frame that TCP held back for a run, sent
      }
      broadcasts(comm, rank, 10, [](int) { return 0; });
      if (rank < size - 1) store->setString(fmt::format("test/passed{}", rank), "1");
      if (rank == size - 1) {
        EXPECT_TRUE(impl.owesAnswer()) << transport;
      }
      if (rank == 0) {
        EXPECT_GE(impl.unsettledCalls(), 1u) << transport;
      }
      int64_t sum = rank;
      comm.allreduce(&sum, &sum, 1, DataType::kInt64, ReduceOp::kSum);
      EXPECT_EQ(sum, 6) << transport;
      EXPECT_FALSE(impl.owesAnswer()) << transport << " rank " << rank;
      EXPECT_EQ(impl.unsettledCalls(), 0u) << transport << " rank " << rank;
      // A point-to-point call after a chain call settles the same way.
      broadcasts(comm, rank, 5, [](int) { return 0; });
      if (rank == 0 || rank == size - 1) {
        int64_t word = rank == 0 ? 77 : -1;
        if (rank == 0) {
          comm.send(&word, 1, DataType::kInt64, size - 1);
        } else {
          comm.recv(&word, 1, DataType::kInt64, 0);
        }
        EXPECT_EQ(word, 77) << transport;
      }
      comm.barrier();
      EXPECT_EQ(impl.unsettledCalls(), 0u) << transport << " rank " << rank;
    });
  }
}

// Over links without a bound in messages (TCP, in one process) the root of small chain calls
// runs far ahead of ranks that are not there (under load: off their cores for a time slice),
// past shared memory's 48 calls; with the chain's data past a few KiB a call it stops at 48
// (kUnsettledChainBytes). The others start once the root has returned from every call, or after
// a while (the root stopped to wait for them), and every value arrives.
TEST(ChainRuns, RootsOfSmallCallsRunFarAheadOverUnboundedLinks) {
  for (const char* transport : {"tcp", "local"}) {
    for (const size_t count : {size_t{1}, size_t{2048}}) {
      const bool small = count == 1;
      const int calls = small ? 600 : 100;
      std::atomic<bool> rootDone{false};
      std::atomic<bool> rootWasAhead{false};
      runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = 20s;
        o.transport = transport;
        Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
        ASSERT_EQ(comm.algorithmFor("broadcast", count * 8), "header_inline");
        std::vector<int64_t> value(count);
        if (rank == 0) {
          for (int i = 0; i < calls; ++i) {
            value.assign(count, 3 * i + 1);
            comm.broadcast(value.data(), count, DataType::kInt64, 0);
          }
          rootDone = true;
        } else {
          const auto until = std::chrono::steady_clock::now() + (small ? 5s : 1s);
          while (!rootDone && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
          }
          if (rank == size - 1) rootWasAhead = rootDone.load();
          for (int i = 0; i < calls; ++i) {
            value.assign(count, -1);
            comm.broadcast(value.data(), count, DataType::kInt64, 0);
            ASSERT_EQ(value[count - 1], 3 * i + 1) << transport << " call " << i;
          }
        }
        comm.barrier();
      });
      EXPECT_EQ(rootWasAhead.load(), small) << transport << " count " << count;
    }
  }
}

// Calls that disagree after answers were skipped still fail on every rank, naming the mismatch
// where a rank saw it, never hanging.
TEST(ChainRuns, AMismatchAfterSkippedAnswersFailsEveryRank) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = tcpComm(rank, size, store);
    if (rank == size - 1) std::this_thread::sleep_for(100ms);
    broadcasts(comm, rank, 10, [](int) { return 0; });
    int64_t values[8] = {};
    const size_t count = rank == size - 1 ? 8 : 4;
    EXPECT_THROW(comm.allreduce(values, values, count, DataType::kInt64, ReduceOp::kSum), Error)
        << "rank " << rank;
  });
}

}  // namespace
}  // namespace ringlet
