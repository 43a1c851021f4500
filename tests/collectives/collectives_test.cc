// The collective matrix over every transport, with thread ranks (1..8) and process ranks (2..4).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "tests/collectives/matrix.h"
#include "tests/support/ranks.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace ringlet::testing {
namespace {

struct Case {
  std::string transport;
  bool processes;
  int size;
  int streams = 1;             // tcp connections per rank pair (RINGLET_SOCKET_STREAMS)
  std::string shmDirect = {};  // RINGLET_SHM_DIRECT (empty: the default, auto)
  bool sealed = false;         // RINGLET_SOCKET_ENCRYPT=1
};

// Readable test names in ctest instead of the parameter's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.transport << (c.processes ? " processes x" : " threads x") << c.size;
  if (c.streams > 1) *os << ", " << c.streams << " streams";
  if (!c.shmDirect.empty()) *os << ", shm_direct " << c.shmDirect;
  if (c.sealed) *os << ", sealed";
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("{}_{}_{}{}{}{}", info.param.transport,
                     info.param.processes ? "procs" : "threads", info.param.size,
                     info.param.streams > 1 ? fmt::format("_{}streams", info.param.streams) : "",
                     info.param.shmDirect.empty() ? "" : "_direct" + info.param.shmDirect,
                     info.param.sealed ? "_sealed" : "");
}

class CollectiveMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveMatrix, AllCollectivesTypesOpsAndCounts) {
  const Case c = GetParam();
  if (c.transport != "auto" && transport::findTransport(c.transport) == nullptr) {
    GTEST_SKIP() << "transport " << c.transport << " is not built into this binary";
  }
  MatrixOptions options{.transport = c.transport, .large = true};
  if (c.streams > 1) {
    // Segments large enough to be striped over the streams.
    options.transportOptions["socket_streams"] = std::to_string(c.streams);
    options.largeSegmentBytes = 1 << 20;
  }
  if (!c.shmDirect.empty()) options.transportOptions["shm_direct"] = c.shmDirect;
  if (c.sealed) {
    options.transportOptions["socket_encrypt"] = "1";
    // Every 1 KiB slice a record, every byte sealed and opened: a margin over the default 30 s
    // for runs beside other matrices on two cores (the whole case took 21 s at -j3 beside a
    // build, 3.7 s alone on a quiet machine).
    options.timeout = std::chrono::seconds(100);
  }
  auto body = [&](int rank, int size, std::shared_ptr<Store> store) {
    runCollectiveMatrix(rank, size, store, options);
  };
  if (c.processes) {
    runProcessRanks(c.size, body, std::chrono::seconds(240));
  } else {
    runThreadRanks(c.size, body, std::chrono::seconds(240));
  }
}

std::vector<Case> threadCases(const std::string& transport, std::vector<int> sizes) {
  std::vector<Case> cases;
  for (int s : sizes) cases.push_back({.transport = transport, .processes = false, .size = s});
  return cases;
}

std::vector<Case> processCases(const std::string& transport, std::vector<int> sizes) {
  std::vector<Case> cases;
  for (int s : sizes) cases.push_back({.transport = transport, .processes = true, .size = s});
  return cases;
}

// Large messages striped over several connections per rank pair.
std::vector<Case> streamCases() {
  return {{.transport = "tcp", .processes = false, .size = 2, .streams = 3},
          {.transport = "tcp", .processes = false, .size = 4, .streams = 2},
          {.transport = "tcp", .processes = true, .size = 3, .streams = 4}};
}

INSTANTIATE_TEST_SUITE_P(TcpThreads, CollectiveMatrix,
                         ::testing::ValuesIn(threadCases("tcp", {2, 3, 4, 8})), caseName);
INSTANTIATE_TEST_SUITE_P(TcpStreams, CollectiveMatrix, ::testing::ValuesIn(streamCases()),
                         caseName);
// Every byte sealed (RINGLET_SOCKET_ENCRYPT=1): one stream, striped streams, processes.
INSTANTIATE_TEST_SUITE_P(
    TcpSealed, CollectiveMatrix,
    ::testing::Values(
        Case{.transport = "tcp", .processes = false, .size = 3, .sealed = true},
        Case{.transport = "tcp", .processes = false, .size = 2, .streams = 3, .sealed = true},
        Case{.transport = "tcp", .processes = true, .size = 2, .sealed = true}),
    caseName);
INSTANTIATE_TEST_SUITE_P(ShmThreads, CollectiveMatrix,
                         ::testing::ValuesIn(threadCases("shm", {2, 3, 5, 8})), caseName);
INSTANTIATE_TEST_SUITE_P(TcpProcesses, CollectiveMatrix,
                         ::testing::ValuesIn(processCases("tcp", {2, 3, 4})), caseName);
INSTANTIATE_TEST_SUITE_P(ShmProcesses, CollectiveMatrix,
                         ::testing::ValuesIn(processCases("shm", {2, 3, 4})), caseName);
// Whichever way RINGLET_SHM_DIRECT=auto decides on this host (a measured kernel copy; on where
// ranks outnumber cores), both paths between processes: lent messages and direct writes
// (process_vm_readv / _writev) at 2 ranks, the slots alone at 3.
INSTANTIATE_TEST_SUITE_P(
    ShmProcessesDirect, CollectiveMatrix,
    ::testing::Values(Case{.transport = "shm", .processes = true, .size = 2, .shmDirect = "1"},
                      Case{.transport = "shm", .processes = true, .size = 3, .shmDirect = "0"}),
    caseName);
// "auto" picks shared memory between ranks of one host: same results as forcing either.
INSTANTIATE_TEST_SUITE_P(AutoProcesses, CollectiveMatrix,
                         ::testing::ValuesIn(processCases("auto", {3})), caseName);
INSTANTIATE_TEST_SUITE_P(Local, CollectiveMatrix,
                         ::testing::ValuesIn(threadCases("local", {1, 2, 3, 4, 5, 6, 7, 8})),
                         caseName);

// Results of at least twice kernels::kStreamingBytes take each rank's own block with
// non-temporal stores (collectives::copyOwnBlock). Odd sizes and a destination one element off
// its allocation's alignment take the copy's unaligned head and tail; every element is checked.
TEST(LargeResults, OwnBlocksCopiedWithStreamingStoresAreExact) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o;
    o.transport = "local";
    o.timeout = std::chrono::seconds(60);
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    // Per rank: 8 MiB and 12 bytes, so that a result of two blocks passes 16 MiB.
    const size_t count = (size_t{8} << 20) / sizeof(int32_t) + 3;
    auto value = [](int from, size_t i) { return static_cast<int32_t>((from << 24) | i); };
    std::vector<int32_t> send(2 * count);
    for (size_t i = 0; i < send.size(); ++i) send[i] = value(rank, i);
    std::vector<int32_t> out(2 * count + 1);
    int32_t* recv = out.data() + 1;
    // Each check stops at its first wrong element (one failure, not millions).
    auto expectBlocks = [&](const char* what, size_t blocks, size_t block, auto expected) {
      for (size_t q = 0; q < blocks; ++q) {
        for (size_t i = 0; i < block; ++i) {
          if (recv[q * block + i] != expected(static_cast<int>(q), i)) {
            ADD_FAILURE() << what << " rank " << rank << ": block " << q << " element " << i
                          << " is " << recv[q * block + i];
            return;
          }
        }
      }
    };
    comm.allgather(send.data(), recv, count, DataType::kInt32);
    expectBlocks("allgather", 2, count, [&](int q, size_t i) { return value(q, i); });
    comm.allToAll(send.data(), recv, count, DataType::kInt32);
    expectBlocks("alltoall", 2, count,
                 [&](int q, size_t i) { return value(q, static_cast<size_t>(rank) * count + i); });
    comm.gather(send.data(), recv, count, DataType::kInt32, 1);
    if (rank == 1) expectBlocks("gather", 2, count, [&](int q, size_t i) { return value(q, i); });
    // The scatter's result is one block: 16 MiB and 24 bytes here.
    std::vector<int32_t> all(4 * count);
    for (size_t i = 0; i < all.size(); ++i) all[i] = value(rank, i);
    comm.scatter(all.data(), recv, 2 * count, DataType::kInt32, 0);
    expectBlocks("scatter", 1, 2 * count, [&](int, size_t i) {
      return value(0, static_cast<size_t>(rank) * 2 * count + i);
    });
  });
}

}  // namespace
}  // namespace ringlet::testing
