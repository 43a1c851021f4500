// Small rooted calls on more than two ranks over TCP: the frames of their chain of headers go as
// runs (Link::sendInRun) where calls of one root follow each other, and one by one where roots
// alternate (CommunicatorImpl::execute).

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

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

}  // namespace
}  // namespace ringlet
