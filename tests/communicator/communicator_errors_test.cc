// Bad arguments, mismatched calls, timeouts and abort: each gives a clear error, never a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ringlet/ringlet.h"
#include "tests/support/event.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      std::chrono::milliseconds timeout = 10s, std::string transport = "local") {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = std::move(transport);
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

// For the tests whose timeout is short: the cost model given, so that creation does not spend
// the timeout calibrating (under TSan, beside other work, that alone took more than 1 s).
Communicator makeUncalibratedComm(int rank, int size, std::shared_ptr<Store> store,
                                  std::chrono::milliseconds timeout) {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = "local";
  o.costModel = CostModel{};
  return Communicator::create(Bootstrap::forThread(rank, size, store), o);
}

TEST(CommunicatorErrors, AnUnknownWaitPolicyIsRefusedByName) {
  runThreadRanks(1, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o;
    o.transport = "local";
    o.wait = "sometimes";
    expectThrowWith<InvalidArgument>(
        [&] { Communicator::create(Bootstrap::forThread(rank, size, store), o); },
        {"RINGLET_WAIT", "'sometimes'", "adaptive or fixed"});
  });
}

// A transport's malformed setting is named even where that transport links nobody (here the
// in-process transport links every pair): it used to be ignored until a pair needed it.
TEST(CommunicatorErrors, AMalformedSettingOfAnUnusedTransportIsRefusedByName) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"socket_streams", "99"}}, "RINGLET_SOCKET_STREAMS='99'"},
      {{{"socket_encrypt", "maybe"}}, "RINGLET_SOCKET_ENCRYPT='maybe'"},
      {{{"shm_direct", "sometimes"}}, "RINGLET_SHM_DIRECT"},
      {{{"shm_bytes", "lots"}}, "RINGLET_SHM_BYTES"}};
  for (const auto& [settings, named] : cases) {
    SCOPED_TRACE(named);
    runThreadRanks(1, [&](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o;
      o.transport = "local";
      o.costModel = CostModel{};
      o.transportOptions = settings;
      expectThrowWith<InvalidArgument>(
          [&] { Communicator::create(Bootstrap::forThread(rank, size, store), o); }, {named});
    });
  }
  // Well-formed settings of unused transports stay fine.
  runThreadRanks(1, [](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o;
    o.transport = "local";
    o.costModel = CostModel{};
    o.transportOptions = {{"socket_streams", "4"}, {"socket_encrypt", "0"}, {"shm_direct", "1"}};
    Communicator::create(Bootstrap::forThread(rank, size, store), o);
  });
}

TEST(CommunicatorErrors, InvalidArgumentsThrowBeforeSendingAndNameTheValue) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> data(10, 1.0f);
    expectThrowWith<InvalidArgument>(
        [&] { comm.allreduce(nullptr, data.data(), 5, DataType::kFloat32, ReduceOp::kSum); },
        {"send buffer is null", "count is 5", "allreduce", "rank"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allreduce(data.data(), SIZE_MAX / 2, DataType::kFloat32, ReduceOp::kSum); },
        {"overflows", "float32"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allreduce(data.data(), 10, static_cast<DataType>(42), ReduceOp::kSum); },
        {"unknown data type 42"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.allreduce(data.data(), 10, DataType::kFloat32, static_cast<ReduceOp>(9)); },
        {"unknown reduction op 9"});
    std::vector<int32_t> ints(4, 1);
    expectThrowWith<InvalidArgument>(
        [&] { comm.allreduce(ints.data(), 4, DataType::kInt32, ReduceOp::kAvg); },
        {"avg", "int32"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.broadcast(data.data(), 10, DataType::kFloat32, 3); },
        {"root 3", "world size 3"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.broadcast(data.data(), 10, DataType::kFloat32, -1); }, {"root -1"});
    expectThrowWith<InvalidArgument>(
        [&] {
          comm.allreduce(data.data(), data.data() + 1, 5, DataType::kFloat32, ReduceOp::kSum);
        },
        {"overlap"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.reduce(data.data(), data.data(), 5, DataType::kFloat32, ReduceOp::kSum, 7); },
        {"reduce", "root 7", "world size 3"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.reduce(data.data(), nullptr, 5, DataType::kFloat32, ReduceOp::kSum, rank); },
        {"reduce", "recv buffer is null"});
    expectThrowWith<InvalidArgument>(
        [&] { comm.reduceScatter(ints.data(), ints.data(), 1, DataType::kInt32, ReduceOp::kAvg); },
        {"reduce_scatter", "avg", "int32"});
    std::vector<float> all(9, 0.0f);
    // In place, send must be this rank's block of recv; anywhere else inside recv is an error.
    const size_t wrongBlock = static_cast<size_t>((rank + 1) % size) * 3;
    expectThrowWith<InvalidArgument>(
        [&] { comm.allgather(all.data() + wrongBlock, all.data(), 3, DataType::kFloat32); },
        {"allgather", "overlaps", "not this rank's block"});
    expectThrowWith<InvalidArgument>(
        [&] {
          comm.reduceScatter(all.data(), all.data() + wrongBlock, 3, DataType::kFloat32,
                             ReduceOp::kSum);
        },
        {"reduce_scatter", "not this rank's block"});
    // Nothing was sent and no sequence number was used: the next call works everywhere.
    comm.allreduce(data.data(), 10, DataType::kFloat32, ReduceOp::kSum);
    for (float v : data) EXPECT_EQ(v, 3.0f);
  });
}

TEST(CommunicatorErrors, MismatchedCountsFailOnBothSidesNamingBothCalls) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> data(100, 1.0f);
    const size_t count = rank == 0 ? 100 : 99;
    expectThrowWith<MismatchError>(
        [&] { comm.allreduce(data.data(), count, DataType::kFloat32, ReduceOp::kSum); },
        {"allreduce(count=100, float32, sum)", "allreduce(count=99, float32, sum)", "rank 0",
         "rank 1"});
    // The communicator is unusable afterwards, and says why.
    expectThrowWith<AbortedError>([&] { comm.barrier(); }, {"unusable", "disagree"});
  });
}

TEST(CommunicatorErrors, MismatchedNewCollectivesFailNamingBothCalls) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> data(8, 1.0f);
    std::vector<float> out(8, 0.0f);
    if (rank == 0) {
      expectThrowWith<MismatchError>(
          [&] { comm.allgather(data.data(), out.data(), 4, DataType::kFloat32); },
          {"allgather(count=4 per rank, float32)",
           "reduce_scatter(count=4 per rank, float32, sum)"});
    } else {
      expectThrowWith<MismatchError>(
          [&] {
            comm.reduceScatter(data.data(), out.data(), 4, DataType::kFloat32, ReduceOp::kSum);
          },
          {"allgather(count=4 per rank, float32)",
           "reduce_scatter(count=4 per rank, float32, sum)"});
    }
  });
  // Roots that differ: both name both calls.
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<float> data(4, 1.0f);
    expectThrowWith<MismatchError>(
        [&] { comm.reduce(data.data(), data.data(), 4, DataType::kFloat32, ReduceOp::kSum, rank); },
        {"reduce(count=4, float32, sum, root=0)", "reduce(count=4, float32, sum, root=1)"});
  });
}

// Two ranks over `transport` make the calls `call(comm, rank, data, out)` (with `algorithms`
// forced), which disagree: both must fail within 10 s, at least one with a MismatchError whose
// message has every one of `parts`, the other with it or a PeerError about the disagreement.
// `data` and `out` hold `floats` each.
void expectTwoRanksFailAtOnce(const char* transport,
                              const std::map<std::string, std::string>& algorithms, size_t floats,
                              const std::string& what, const std::vector<std::string>& parts,
                              const std::function<void(Communicator&, int, float*, float*)>& call) {
  std::atomic<int> mismatches{0};
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.transport = transport;
    o.algorithms = algorithms;
    Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
    std::vector<float> data(floats, 1.0f);
    std::vector<float> out(floats, 0.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      call(comm, rank, data.data(), out.data());
      ADD_FAILURE() << what << ": rank " << rank << " returned";
    } catch (const MismatchError& e) {
      ++mismatches;
      for (const std::string& part : parts) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << what << ": " << e.what();
      }
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos)
          << what << ": " << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << what;
  });
  EXPECT_GE(mismatches.load(), 1) << what;
}

// Two ranks, data past a call header: the rank that only sends (the tree's broadcast and scatter
// root, reduce and gather leaf, and the v-forms') sends its first message before it reads its
// peer's call header (OpHeader::earlyData). Two ranks that both believe they only send (two roots,
// or two leaves of roots that differ) must still find the disagreement at that first message: after
// it each could wait on the other for good (a lent message unread, a link with no room for the
// rest). 64 KiB: one message, lent over shm; 4 MiB: eight slices. Both ranks fail at once, naming
// both calls.
TEST(CommunicatorErrors, TwoRanksThatBothOnlySendFailAfterTheirFirstMessage) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (const size_t count : {size_t{16} << 10, size_t{1} << 20}) {
      const std::vector<size_t> counts{count, count};
      const std::vector<size_t> displs{0, count};
      for (const std::string op :
           {"broadcast", "reduce", "gather", "scatter", "gatherv", "scatterv"}) {
        expectTwoRanksFailAtOnce(transport, {{op, "tree"}}, 2 * count,
                                 fmt::format("{} {} count {}", transport, op, count),
                                 {"root=0", "root=1"},
                                 [&](Communicator& comm, int rank, float* data, float* out) {
                                   const auto f32 = DataType::kFloat32;
                                   if (op == "broadcast") {  // two roots
                                     comm.broadcast(data, count, f32, rank);
                                   } else if (op == "scatter") {
                                     comm.scatter(data, out, count, f32, rank);
                                   } else if (op == "reduce") {  // each names the other: two leaves
                                     comm.reduce(data, out, count, f32, ReduceOp::kSum, 1 - rank);
                                   } else if (op == "gather") {
                                     comm.gather(data, out, count, f32, 1 - rank);
                                   } else if (op == "gatherv") {
                                     comm.gatherv(data, out, counts, displs, f32, 1 - rank);
                                   } else {
                                     comm.scatterv(data, counts, displs, out, f32, rank);
                                   }
                                 });
      }
    }
  }
}

// The two-rank recursive-doubling all-gather sends its block before it checks the peer's call
// header too (OpHeader::earlyData). Against another all-gather (a count that differs: both send
// first), a reduce to it (a receiver that checks first) and a broadcast from the peer (a sender
// that sends first), both ranks fail at once naming both calls: 64 KiB (lent over shm) and
// 4 MiB blocks.
TEST(CommunicatorErrors, TwoRankAllgathersThatDisagreeFailAfterTheirFirstMessage) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (const size_t count : {size_t{16} << 10, size_t{1} << 20}) {
      for (const std::string other : {"allgather", "reduce", "broadcast"}) {
        expectTwoRanksFailAtOnce(
            transport,
            {{"allgather", "recursive_doubling"}, {"reduce", "tree"}, {"broadcast", "tree"}},
            2 * count + 2, fmt::format("{} allgather/{} count {}", transport, other, count),
            {fmt::format("allgather(count={}", count), other + "(count="},
            [&](Communicator& comm, int rank, float* data, float* out) {
              const auto f32 = DataType::kFloat32;
              if (rank == 0) {
                comm.allgather(data, out, count, f32);
              } else if (other == "allgather") {
                comm.allgather(data, out, count + 1, f32);
              } else if (other == "reduce") {
                comm.reduce(data, out, count, f32, ReduceOp::kSum, 1);
              } else {
                comm.broadcast(data, count, f32, 1);
              }
            });
      }
    }
  }
}

// Two ranks, data in the call header: a rank that only sends (broadcast root) returns once its
// data is sent and reads its peer's call later. Both ranks believing they are the root send
// and return; each finds the disagreement at its next call, naming both broadcasts.
// (A rank that is slow to leave its broadcast may hear of the other's failure there already: a
// PeerError that carries the other's MismatchError. At least one rank reads the other's call.)
TEST(CommunicatorErrors, TwoRootsOfOneSmallBroadcastFailAtTheNextCall) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    std::atomic<int> mismatches{0};
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 10s, transport);
      std::vector<float> data(2, float(rank));
      try {
        comm.broadcast(data.data(), 2, DataType::kFloat32, rank);  // returns: it only sends
        EXPECT_EQ(data[0], float(rank));                           // and nothing was written
        comm.barrier();
        ADD_FAILURE() << transport << ": rank " << rank << " never heard of the disagreement";
      } catch (const MismatchError& e) {
        ++mismatches;
        for (const char* part : {"broadcast(count=2, float32, root=0)",
                                 "broadcast(count=2, float32, root=1)", "call #0 returned"}) {
          EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
      } catch (const PeerError& e) {
        EXPECT_NE(std::string(e.what()).find("call #0 returned"), std::string::npos) << e.what();
      }
    });
    EXPECT_GE(mismatches.load(), 1) << transport;
  }
}

// The root sends and returns; the receiver disagrees (another count) at call #`agreed` and fails
// at once; the root fails at a later call (or at this one, when the receiver's abort is there
// before the root looks), naming both calls (its own read of the peer's header, or the peer's
// abort carrying them). With `late`, the receiver starts after the root has sent everything, so
// it takes the calls before the disagreement silently (without answering them). The root's
// count is `count` floats, the receiver's one more (2 and 3 ride in the header; past 64 the data
// follows it).
void receiverRejectsASmallBroadcast(const char* transport, int agreed, bool late, int count = 2) {
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, 10s, transport);
    EXPECT_EQ(comm.algorithmFor("broadcast", count * sizeof(float)), "header_inline");
    std::vector<float> data(count + 1, 1.0f);
    const std::string mine = fmt::format("broadcast(count={}, float32, root=0)", count);
    const std::string theirs = fmt::format("broadcast(count={}, float32, root=0)", count + 1);
    if (rank == 1) {
      if (late) std::this_thread::sleep_for(50ms);
      for (int i = 0; i < agreed; ++i) comm.broadcast(data.data(), 1, DataType::kFloat32, 0);
      expectThrowWith<MismatchError>(
          [&] { comm.broadcast(data.data(), count + 1, DataType::kFloat32, 0); },
          {mine, theirs, fmt::format("call #{}", agreed)});
      return;
    }
    try {
      for (int i = 0; i < agreed; ++i) comm.broadcast(data.data(), 1, DataType::kFloat32, 0);
      for (int i = 0; i < 101; ++i) comm.broadcast(data.data(), count, DataType::kFloat32, 0);
      comm.barrier();
      ADD_FAILURE() << transport << ": the root never heard of the disagreement";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(theirs), std::string::npos) << e.what();
    }
  });
}

TEST(CommunicatorErrors, ASmallBroadcastThatTheReceiverRejectsFailsTheRootNext) {
  receiverRejectsASmallBroadcast("shm", 0, false);
}

// After many calls taken without an answer, a receiver whose call differs still names both
// calls, and the sender hears of it at a later call.
TEST(CommunicatorErrors, AReceiverThatDisagreesAfterSilentCallsNamesBoth) {
  for (const char* transport : {"local", "shm"})
    receiverRejectsASmallBroadcast(transport, 30, true);
}

// Many small rooted calls in a row, roots changing, mixed with point-to-point messages and an
// all-reduce: every value arrives (the senders run ahead of their peer by up to the limit of
// unread headers).
TEST(CommunicatorErrors, SmallRootedCallsRunAheadAndStayExact) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 10s, transport);
      for (int i = 0; i < 300; ++i) {
        const int root = (i / 7) % 2;
        int64_t value = rank == root ? 1000 * i + root : -1;
        comm.broadcast(&value, 1, DataType::kInt64, root);
        ASSERT_EQ(value, 1000 * i + root) << transport << " call " << i;
        int64_t sum = 0;
        const int64_t mine = i + rank;
        comm.reduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum, root);
        if (rank == root) {
          ASSERT_EQ(sum, 2 * i + 1) << transport << " call " << i;
        }
        if (i % 50 == 49) {
          int64_t got = -1;
          if (rank == 0) {
            comm.send(&value, 1, DataType::kInt64, 1);
            comm.recv(&got, 1, DataType::kInt64, 1);
          } else {
            comm.recv(&got, 1, DataType::kInt64, 0);
            comm.send(&value, 1, DataType::kInt64, 0);
          }
          ASSERT_EQ(got, value);
          int64_t total = rank;
          comm.allreduce(&total, 1, DataType::kInt64, ReduceOp::kSum);
          ASSERT_EQ(total, 1);
        }
      }
    });
  }
}

// Unrooted calls that move no data (every count zero) return once their header is sent, on
// every rank: rank 0 makes forty of them before any other rank starts its first (a call that
// waited for its peers would leave them all waiting here). The calls are still compared later,
// between small all-reduces and all-gathers (header doubling on more than two ranks),
// broadcasts and point-to-point messages that must not take those headers for their own.
TEST(CommunicatorErrors, CallsThatMoveNoDataRunAheadAndStayChecked) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (int ranks : {2, 3, 4}) {
      Event rankZeroAhead;
      runThreadRanks(ranks, [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        const std::vector<size_t> zeros(size, 0);
        auto emptyCall = [&](int i) {
          int64_t none = 0;
          switch (i % 6) {
            case 0:
              return comm.allreduce(&none, 0, DataType::kInt64, ReduceOp::kSum);
            case 1:
              return comm.allgather(&none, &none, 0, DataType::kInt64);
            case 2:
              return comm.reduceScatter(&none, &none, 0, DataType::kInt64, ReduceOp::kMax);
            case 3:
              return comm.allToAll(&none, &none, 0, DataType::kInt64);
            case 4:
              return comm.allgatherv(&none, &none, zeros, DataType::kInt64);
            default:
              return comm.reduceScatterv(&none, &none, zeros, DataType::kInt64, ReduceOp::kSum);
          }
        };
        if (rank == 0) {
          for (int i = 0; i < 40; ++i) emptyCall(i);
          rankZeroAhead.set();
        } else {
          ASSERT_TRUE(rankZeroAhead.waitFor(20s))
              << transport << ", " << size << " ranks: rank 0's calls waited for the others";
          for (int i = 0; i < 40; ++i) emptyCall(i);
        }
        for (int i = 0; i < 120; ++i) {
          emptyCall(i);
          if (i % 5 == 0) {
            int64_t sum = rank + i;
            comm.allreduce(&sum, 1, DataType::kInt64, ReduceOp::kSum);
            ASSERT_EQ(sum, int64_t{size} * (size - 1) / 2 + int64_t{size} * i)
                << transport << " call " << i;
          }
          if (i % 7 == 0) {
            const int32_t mine = 10 * rank + i;
            std::vector<int32_t> all(size, -1);
            comm.allgather(&mine, all.data(), 1, DataType::kInt32);
            for (int r = 0; r < size; ++r) ASSERT_EQ(all[r], 10 * r + i) << transport;
          }
          if (i % 9 == 0) {
            const int root = (i / 9) % size;
            int64_t value = rank == root ? 1000 + i : -1;
            comm.broadcast(&value, 1, DataType::kInt64, root);
            ASSERT_EQ(value, 1000 + i) << transport << " call " << i;
          }
          if (i % 11 == 0) {  // rank 0 -> 1 and size-1 -> 0: each from its ring's previous rank
            int64_t got = -1;
            const int64_t sent = 7 * i + rank;
            if (rank == 0) {
              comm.send(&sent, 1, DataType::kInt64, 1);
              comm.recv(&got, 1, DataType::kInt64, size - 1);
              ASSERT_EQ(got, 7 * i + size - 1) << transport;
            } else if (rank == 1) {
              comm.recv(&got, 1, DataType::kInt64, 0);
              ASSERT_EQ(got, 7 * i) << transport;
              if (size == 2) comm.send(&sent, 1, DataType::kInt64, 0);
            } else if (rank == size - 1) {
              comm.send(&sent, 1, DataType::kInt64, 0);
            }
          }
        }
        comm.barrier();
      });
    }
  }
}

// One rank's all-gather moves no data where the others' do: those fail in the call, naming both
// calls; the one that returned fails at its next call. Nobody waits for the timeout.
TEST(CommunicatorErrors, ACallThatMovesNoDataWhereOthersDoFailsEveryRank) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (int ranks : {2, 4}) {
      std::atomic<int> mismatches{0};
      runThreadRanks(ranks, [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        const bool odd = rank == size - 1;
        std::vector<int32_t> mine(2, rank), all(2 * size, -1);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm.allgather(mine.data(), all.data(), odd ? 0 : 2, DataType::kInt32);
          EXPECT_TRUE(odd) << transport << ": rank " << rank << " returned";
          comm.barrier();
          ADD_FAILURE() << transport << ": rank " << rank << " never heard of the disagreement";
        } catch (const MismatchError& e) {
          ++mismatches;
          for (const char* part :
               {"allgather(count=0 per rank, int32)", "allgather(count=2 per rank, int32)"}) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
          }
        } catch (const PeerError& e) {
          EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << transport;
      });
      EXPECT_GE(mismatches.load(), 1) << transport << ", " << ranks << " ranks";
    }
  }
}

// An all-to-all that moves no data runs no body: it links no peers (nor records that it did).
// A disagreement right after it still fails every rank within seconds (no hang, no silent pass;
// it also passed before the empty all-to-all stopped recording links it never made, so it
// guards the outcome, not that change): rank 3 all-reduces where
// the others all-to-all blocks of 40 bytes, which go pairwise with a core per rank (the model
// given so) and link every peer inside the call (at 8 ranks the ring and the trees leave ranks 3
// and 5 apart unlinked); those linking peers fail with the abort that reaches them there.
TEST(CommunicatorErrors, AnEmptyAllToAllLeavesTheNextOneChecked) {
  for (const char* transport : {"shm", "tcp"}) {
    std::atomic<int> mismatches{0};
    runThreadRanks(8, [&](int rank, int size, std::shared_ptr<Store> store) {
      CommunicatorOptions o;
      o.timeout = 10s;
      o.transport = transport;
      o.costModel = CostModel{};  // ranks with cores of their own
      Communicator comm = Communicator::create(Bootstrap::forThread(rank, size, store), o);
      int32_t none = 0;
      std::vector<int32_t> mine(10 * size, rank), got(10 * size, -1);
      const auto start = std::chrono::steady_clock::now();
      try {
        // A rank this late may find the abort already here (its previous rank's).
        comm.allToAll(&none, &none, 0, DataType::kInt32);
        if (rank == 3) {
          comm.allreduce(mine.data(), 1, DataType::kInt32, ReduceOp::kSum);
        } else {
          comm.allToAll(mine.data(), got.data(), 10, DataType::kInt32);
        }
        comm.barrier();
        ADD_FAILURE() << transport << ": rank " << rank << " never heard of the disagreement";
      } catch (const MismatchError& e) {
        ++mismatches;
        EXPECT_NE(std::string(e.what()).find("alltoall(count=10"), std::string::npos) << e.what();
      } catch (const PeerError& e) {
        EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
      } catch (const AbortedError& e) {
        EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << transport << ": rank " << rank;
    });
    EXPECT_GE(mismatches.load(), 1) << transport;
  }
}

// Two ranks, data past what a header holds: it follows the root's header, and a receiver whose
// count differs names both calls before it reads any of it; the root hears of it later.
TEST(CommunicatorErrors, TwoRankRootedDataAfterTheHeaderStillComparesCalls) {
  for (const char* transport : {"shm", "tcp"})
    receiverRejectsASmallBroadcast(transport, 0, false, 2000);
}

// Two ranks over TCP (or in one process): a sender of small rooted calls runs ahead of a
// receiver that is not there (under load: off its core for a time slice) by far more than
// shared memory's 48 calls, and every value still arrives. The receiver starts only once the
// root has returned from all of them (or after 5 s: the root stopped to wait for it).
TEST(CommunicatorErrors, TwoRankSendersOverTcpRunFarAhead) {
  for (const char* transport : {"local", "tcp"}) {
    constexpr int kCalls = 600;
    std::atomic<bool> rootDone{false};
    std::atomic<bool> rootWasAhead{false};
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 20s, transport);
      if (rank == 0) {
        for (int i = 0; i < kCalls; ++i) {
          int64_t value = 3 * i + 1;
          comm.broadcast(&value, 1, DataType::kInt64, 0);
        }
        rootDone = true;
      } else {
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (!rootDone && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(1ms);
        }
        rootWasAhead = rootDone.load();
        for (int i = 0; i < kCalls; ++i) {
          int64_t value = -1;
          comm.broadcast(&value, 1, DataType::kInt64, 0);
          ASSERT_EQ(value, 3 * i + 1) << transport << " call " << i;
        }
      }
      int64_t total = rank + 1;
      comm.allreduce(&total, 1, DataType::kInt64, ReduceOp::kSum);
      EXPECT_EQ(total, 3) << transport;
    });
    EXPECT_TRUE(rootWasAhead.load()) << transport << ": the root waited for the receiver";
    rootDone = false;
  }
}

// Two ranks: a root that sends many small rooted calls (in the headers and after them) and then
// destroys its communicator before its peer has read any of them fails nobody: the receiver,
// starting late, still takes every call (its answers, every 16th call, find the root gone).
TEST(CommunicatorErrors, ATwoRankRootThatLeavesEarlyFailsNobody) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    constexpr int kCalls = 300;
    std::atomic<bool> rootGone{false};
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        if (rank == 0) {
          for (int i = 0; i < kCalls; ++i) {
            int64_t value = 5 * i;
            comm.broadcast(&value, 1, DataType::kInt64, 0);
            if (i % 10 == 0) {
              std::vector<int64_t> big(700, 9 * i);
              comm.broadcast(big.data(), big.size(), DataType::kInt64, 0);
            }
          }
        } else {
          // Over shm the root waits for answers past 48 calls: then it starts after 2 s.
          const auto until = std::chrono::steady_clock::now() + 2s;
          while (!rootGone && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
          }
          for (int i = 0; i < kCalls; ++i) {
            int64_t value = -1;
            comm.broadcast(&value, 1, DataType::kInt64, 0);
            ASSERT_EQ(value, 5 * i) << transport << " call " << i;
            if (i % 10 == 0) {
              std::vector<int64_t> big(700, -1);
              comm.broadcast(big.data(), big.size(), DataType::kInt64, 0);
              ASSERT_EQ(big[699], 9 * i) << transport << " call " << i;
            }
          }
        }
      }
      if (rank == 0) rootGone = true;
    });
    rootGone = false;
  }
}

// A receiver that comes late finds its peer's small rooted calls already waiting: it takes each
// one that matches without answering it (but every few calls), so the sender, which holds at
// most 16 unanswered calls, must learn from those few answers that the calls in between were
// checked, or it waits until the timeout. Afterwards the sender's point-to-point receive and an
// all-reduce read past the answers still on the link. TCP cannot look at a message without
// taking it: its receivers answer every call, and the same run must pass.
TEST(CommunicatorErrors, ALateReceiverTakesWaitingCallsAndTheSenderGoesOn) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 5s, transport);
      if (rank == 1) std::this_thread::sleep_for(100ms);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 200; ++i) {
        int64_t value = rank == 0 ? 7 * i : -1;
        comm.broadcast(&value, 1, DataType::kInt64, 0);
        ASSERT_EQ(value, 7 * i) << transport << " broadcast " << i;
        const int64_t mine = 1000 * i + rank;
        int64_t both[2] = {-1, -1};
        comm.gather(&mine, both, 1, DataType::kInt64, 1);  // rank 0 only sends
        if (rank == 1) {
          ASSERT_EQ(both[0], 1000 * i) << transport << " gather " << i;
          ASSERT_EQ(both[1], 1000 * i + 1) << transport << " gather " << i;
        }
      }
      int64_t got = -1;
      if (rank == 1) {
        const int64_t value = 42;
        comm.send(&value, 1, DataType::kInt64, 0);
      } else {
        comm.recv(&got, 1, DataType::kInt64, 1);
        EXPECT_EQ(got, 42) << transport;
      }
      int64_t total = rank + 1;
      comm.allreduce(&total, 1, DataType::kInt64, ReduceOp::kSum);
      EXPECT_EQ(total, 3) << transport;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << transport;
    });
  }
}

// Two ranks that each think the other is the root both only receive: neither has data to find,
// so each sends its own call and both name the disagreement, after calls taken silently.
TEST(CommunicatorErrors, TwoReceiversOfOneSmallBroadcastBothFail) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 5s, transport);
      float value = 1.0f;
      for (int i = 0; i < 20; ++i) comm.broadcast(&value, 1, DataType::kFloat32, 0);
      const auto start = std::chrono::steady_clock::now();
      expectThrowWith<MismatchError>(
          [&] { comm.broadcast(&value, 1, DataType::kFloat32, 1 - rank); },
          {"broadcast(count=1, float32, root=0)", "broadcast(count=1, float32, root=1)"});
      EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << transport;
    });
  }
}

// More than two ranks: a small broadcast's data rides in the call headers around the ring from
// the root, each rank between relaying it; the root returns once it has sent, and the rank
// before it answers every call. A scatter's blocks go the same way (all of them, each rank taking
// its own). A small reduce's partial results and a gather's growing blocks ride towards the root,
// from the rank after it (which only sends). Roots change; small all-reduces (whose
// messages are call headers themselves), a large broadcast (the tree), point-to-point rings and
// barriers come in between: every value arrives, and no answer is read as another call's.
TEST(CommunicatorErrors, SmallRootedCallsOnMoreRanksPassAlongTheRing) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (int n : {3, 4, 5}) {
      runThreadRanks(n, [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        for (const char* c : {"broadcast", "reduce", "gather", "scatter"}) {
          EXPECT_EQ(comm.algorithmFor(c, 64), "header_inline") << n << c;
          // The chain's messages carry up to 16 KiB, the data after each header (a scatter's
          // carry every block).
          EXPECT_EQ(comm.algorithmFor(c, 2048 * n), "header_inline") << n << c;
          EXPECT_NE(comm.algorithmFor(c, 32768), "header_inline") << n << c;
        }
        // The unrooted ones check their own headers (every message is one, by recursive
        // doubling; where ranks share cores past 256 bytes, up to 16 KiB (2 KiB on 3 ranks), the
        // data follows each);
        // all-to-all's messages carry the N x N matrix of blocks, up to 256 bytes. With a core
        // per rank not on 3 ranks, where the doubling takes three messages one after another
        // and a ring two.
        const bool shared = comm.costModel().ranksShareCores;
        for (const char* c : {"allgather", "reducescatter", "alltoall"}) {
          EXPECT_EQ(comm.algorithmFor(c, 32) == "header_inline", shared || n != 3) << n << c;
          // Past 2 KiB at 3 ranks (three messages by doubling, two by the ring) not even where
          // ranks share cores.
          EXPECT_EQ(comm.algorithmFor(c, 2040) == "header_inline",
                    shared && std::string(c) != "alltoall")
              << n << c;
          EXPECT_EQ(comm.algorithmFor(c, 4096) == "header_inline",
                    shared && n != 3 && std::string(c) != "alltoall")
              << n << c;
          EXPECT_NE(comm.algorithmFor(c, 32768), "header_inline") << n << c;
        }
        for (int i = 0; i < 150; ++i) {
          const int root = (i / 7) % size;
          int64_t value[2] = {-1, -1};
          if (rank == root) value[0] = 1000 * i + root, value[1] = -i;
          comm.broadcast(value, 2, DataType::kInt64, root);
          ASSERT_EQ(value[0], 1000 * i + root) << transport << " n=" << n << " call " << i;
          ASSERT_EQ(value[1], -i) << transport << " n=" << n << " call " << i;
          if (i % 3 == 1) {  // past what a header holds: the data follows each header
            std::vector<int64_t> big(33 + 97 * (i % 21), -1);  // 264 B .. 16 KiB
            if (rank == root) {
              for (size_t j = 0; j < big.size(); ++j) big[j] = int64_t(j) * 31 + i + root;
            }
            comm.broadcast(big.data(), big.size(), DataType::kInt64, root);
            for (size_t j = 0; j < big.size(); j += 7) {
              ASSERT_EQ(big[j], int64_t(j) * 31 + i + root)
                  << transport << " n=" << n << " call " << i << " element " << j;
            }
            // Reduce, gather and scatter the same way: blocks of 33 .. 33 + 7 * 11 int64s, so
            // that a scatter's every block (all of them travel) stays within 16 KiB at n = 5.
            const size_t count = 33 + 7 * (i % 12);
            const int other = (root + 1) % size;
            std::vector<int64_t> mine(count), got(count * size, -1);
            for (size_t j = 0; j < count; ++j) mine[j] = int64_t(j) + 1000 * rank + i;
            comm.reduce(mine.data(), got.data(), count, DataType::kInt64, ReduceOp::kSum, other);
            if (rank == other) {
              for (size_t j = 0; j < count; j += 5) {
                ASSERT_EQ(got[j], int64_t(size) * (int64_t(j) + i) + 1000 * size * (size - 1) / 2)
                    << transport << " n=" << n << " reduce call " << i << " element " << j;
              }
            }
            comm.gather(mine.data(), got.data(), count, DataType::kInt64, root);
            if (rank == root) {
              for (int r = 0; r < size; ++r) {
                for (size_t j = 0; j < count; j += 5) {
                  ASSERT_EQ(got[r * count + j], int64_t(j) + 1000 * r + i)
                      << transport << " n=" << n << " gather call " << i << " rank " << r;
                }
              }
            }
            // All-gather and reduce-scatter of the same blocks: recursive doubling over headers
            // with the data after each (up to 16 KiB in all).
            if (count * size * sizeof(int64_t) <= (16 << 10)) {
              std::fill(got.begin(), got.end(), -1);
              comm.allgather(mine.data(), got.data(), count, DataType::kInt64);
              for (int r = 0; r < size; ++r) {
                for (size_t j = 0; j < count; j += 3) {
                  ASSERT_EQ(got[r * count + j], int64_t(j) + 1000 * r + i)
                      << transport << " n=" << n << " allgather call " << i << " rank " << r;
                }
              }
              std::vector<int64_t> parts(count * size), sum(count, -1);
              for (size_t j = 0; j < parts.size(); ++j) parts[j] = int64_t(j) + rank;
              comm.reduceScatter(parts.data(), sum.data(), count, DataType::kInt64, ReduceOp::kSum);
              for (size_t j = 0; j < count; ++j) {
                ASSERT_EQ(sum[j], int64_t(size) * int64_t(rank * count + j) + size * (size - 1) / 2)
                    << transport << " n=" << n << " reducescatter call " << i << " element " << j;
              }
            }
            // Gather-v and scatter-v of uneven blocks (one of them empty), 264 bytes to 4 KiB
            // in all: on three to five ranks the chain, each header followed by the blocks.
            std::vector<size_t> counts(size);
            size_t total = 0;
            for (int r = 0; r < size; ++r) {
              counts[r] = r == i % size ? 0 : count / 2 + 9 * r;
              total += counts[r];
            }
            std::vector<int64_t> vmine(counts[rank], -1), vall(total, -1);
            for (size_t j = 0; j < vmine.size(); ++j) vmine[j] = int64_t(j) * 13 + 100 * rank + i;
            comm.gatherv(vmine.data(), vall.data(), counts, DataType::kInt64, other);
            if (rank == other) {
              size_t at = 0;
              for (int r = 0; r < size; ++r) {
                for (size_t j = 0; j < counts[r]; ++j) {
                  ASSERT_EQ(vall[at + j], int64_t(j) * 13 + 100 * r + i)
                      << transport << " n=" << n << " gatherv call " << i << " rank " << r;
                }
                at += counts[r];
              }
            }
            for (size_t j = 0; j < total; ++j) vall[j] = int64_t(j) * 5 + root + i;
            std::fill(vmine.begin(), vmine.end(), -1);
            comm.scatterv(vall.data(), counts, vmine.data(), DataType::kInt64, root);
            size_t start = 0;
            for (int r = 0; r < rank; ++r) start += counts[r];
            for (size_t j = 0; j < vmine.size(); ++j) {
              ASSERT_EQ(vmine[j], int64_t(start + j) * 5 + root + i)
                  << transport << " n=" << n << " scatterv call " << i << " element " << j;
            }
            std::vector<int64_t> blocks(count * size);
            for (size_t j = 0; j < blocks.size(); ++j) blocks[j] = int64_t(j) * 3 + other;
            std::fill(mine.begin(), mine.end(), -1);
            comm.scatter(blocks.data(), mine.data(), count, DataType::kInt64, other);
            for (size_t j = 0; j < count; ++j) {
              ASSERT_EQ(mine[j], int64_t(rank * count + j) * 3 + other)
                  << transport << " n=" << n << " scatter call " << i << " element " << j;
            }
          }
          const int64_t mine[2] = {i + rank, int64_t{1} << rank};
          int64_t sum[2] = {-1, -1};
          comm.reduce(mine, sum, 2, DataType::kInt64, ReduceOp::kSum, (root + i) % size);
          if (rank == (root + i) % size) {
            ASSERT_EQ(sum[0], int64_t{size} * i + size * (size - 1) / 2) << transport << " " << i;
            ASSERT_EQ(sum[1], (int64_t{1} << size) - 1) << transport << " " << i;
          }
          {
            const int other = (root + 2) % size;  // the gather's root; the scatter's is `root`
            const int32_t mine = 100 * rank + i;
            std::vector<int32_t> all(size, -1);
            comm.gather(&mine, all.data(), 1, DataType::kInt32, other);
            if (rank == other) {
              for (int r = 0; r < size; ++r)
                ASSERT_EQ(all[r], 100 * r + i) << transport << " " << i;
            }
            std::vector<int32_t> blocks(2 * size, -1);
            for (int r = 0; r < size; ++r) blocks[2 * r] = 7 * r + i, blocks[2 * r + 1] = -r;
            int32_t got[2] = {-1, -1};
            comm.scatter(blocks.data(), got, 2, DataType::kInt32, root);
            ASSERT_EQ(got[0], 7 * rank + i) << transport << " " << i;
            ASSERT_EQ(got[1], -rank) << transport << " " << i;
          }
          if (i % 10 == 0) {
            const float x = float(rank);
            float mean = -1;
            comm.reduce(&x, &mean, 1, DataType::kFloat32, ReduceOp::kAvg, root);
            if (rank == root) {
              ASSERT_FLOAT_EQ(mean, float(size - 1) / 2) << transport << " " << i;
            }
          }
          if (i % 13 == 12) {
            int64_t total = rank + i;
            comm.allreduce(&total, 1, DataType::kInt64, ReduceOp::kSum);
            ASSERT_EQ(total, int64_t{size} * i + size * (size - 1) / 2) << transport << " " << i;
          }
          if (i % 11 == 5) {
            const int32_t mine = 3 * rank + i;
            std::vector<int32_t> all(size, -1);
            comm.allgather(&mine, all.data(), 1, DataType::kInt32);
            for (int r = 0; r < size; ++r) ASSERT_EQ(all[r], 3 * r + i) << transport << " " << i;
            std::vector<int32_t> parts(size);
            for (int r = 0; r < size; ++r) parts[r] = r * 10 + rank;
            int32_t part = -1;
            comm.reduceScatter(parts.data(), &part, 1, DataType::kInt32, ReduceOp::kSum);
            ASSERT_EQ(part, rank * 10 * size + size * (size - 1) / 2) << transport << " " << i;
            std::vector<int32_t> out(size, -1), in(size);
            for (int r = 0; r < size; ++r) in[r] = 100 * rank + r;  // to rank r
            comm.allToAll(in.data(), out.data(), 1, DataType::kInt32);
            for (int r = 0; r < size; ++r)
              ASSERT_EQ(out[r], 100 * r + rank) << transport << " " << i;
          }
          if (i % 50 == 49) {
            std::vector<int32_t> big(2000, rank == root ? i : -1);
            comm.broadcast(big.data(), big.size(), DataType::kInt32, root);
            ASSERT_EQ(big.front(), i);
            ASSERT_EQ(big.back(), i);
            const int64_t mine = 10 * rank;
            int64_t got = -1;
            comm.sendrecv(&mine, 1, (rank + 1) % size, &got, 1, (rank + size - 1) % size,
                          DataType::kInt64);
            ASSERT_EQ(got, 10 * ((rank + size - 1) % size));
            comm.barrier();
          }
        }
      });
    }
  }
  // Past five ranks the chain's N-1 messages outnumber the tree's: the tree is chosen. The
  // linear gather's 7 messages all go out before any wait: where more than 3 ranks share a core
  // they cost less than the tree's 2 forwarding hops (collectives/select.cc, rootedSeconds).
  runThreadRanks(8, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    EXPECT_EQ(comm.algorithmFor("broadcast", 64), "tree");
    EXPECT_EQ(comm.algorithmFor("reduce", 64), "tree");
    EXPECT_EQ(comm.algorithmFor("gather", 64),
              comm.costModel().ranksPerCore > 3 ? "linear" : "tree");
  });
}

// A root that closes its communicator as soon as its small broadcast returns (its last call)
// fails nobody: the rank before it answers into a link nobody reads any more. So does the rank
// that starts a small reduce's chain (the one after the root).
TEST(CommunicatorErrors, ARootThatLeavesAfterASmallBroadcastFailsNobody) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 10s, transport);
      comm.barrier();
      for (int i = 0; i < 5; ++i) {
        int32_t value = rank == 2 ? 40 + i : -1;
        comm.broadcast(&value, 1, DataType::kInt32, 2);
        EXPECT_EQ(value, 40 + i) << transport;
        // Past what a header holds: the data follows the headers.
        std::vector<int32_t> values(1000, rank == 2 ? 50 + i : -1);
        comm.broadcast(values.data(), values.size(), DataType::kInt32, 2);
        EXPECT_EQ(values[999], 50 + i) << transport;
      }
      const int32_t mine = rank;
      int32_t sum = -1;
      comm.reduce(&mine, &sum, 1, DataType::kInt32, ReduceOp::kSum, 1);
      if (rank == 1) {
        EXPECT_EQ(sum, 6) << transport;
      }
    });
  }
}

// More than two ranks, a small broadcast, one rank naming another root (then another count): the
// ranks that read a disagreeing call name both; the others fail through the abort, at this call
// or (the root, which only sends) at the next. Only the ranks whose call is the root's (rank 0's)
// return from it, each with the root's data. Counts of 2 and 3 floats ride in the headers, 64
// and 65 on both sides of what a header holds, 1000 and 1001 after the headers.
TEST(CommunicatorErrors, ASmallBroadcastOnMoreRanksThatOneRankDisagreesWithFailsEveryRank) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (const auto& variant : {std::pair{true, 2}, std::pair{false, 2}, std::pair{true, 1000},
                                std::pair{false, 64}, std::pair{false, 1000}}) {
      // Plain variables: clang 14 cannot capture structured bindings in a lambda.
      const bool otherRoot = variant.first;
      const int base = variant.second;
      std::atomic<int> mismatches{0};
      runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        const bool odd = rank == 2;
        const int root = odd && otherRoot ? 1 : 0;
        const size_t count = odd && !otherRoot ? base + 1 : base;
        std::vector<float> data(base + 1, rank == 0 ? 5.0f : -1.0f);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm.broadcast(data.data(), count, DataType::kFloat32, root);
          // Only a rank whose call is the root's returns here, with the root's data.
          EXPECT_FALSE(odd) << transport << ": the disagreeing rank returned";
          EXPECT_EQ(data[0], 5.0f) << transport << ": rank " << rank;
          comm.barrier();
          ADD_FAILURE() << transport << ": rank " << rank << " never heard of the disagreement";
        } catch (const MismatchError& e) {
          ++mismatches;
          const std::string other =
              otherRoot ? fmt::format("broadcast(count={}, float32, root=1)", base)
                        : fmt::format("broadcast(count={}, float32, root=0)", base + 1);
          for (const std::string& part :
               {fmt::format("broadcast(count={}, float32, root=0)", base), other}) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
          }
        } catch (const PeerError& e) {
          EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << transport;
      });
      EXPECT_GE(mismatches.load(), 1) << transport;
    }
  }
}

// More than two ranks, a small all-gather whose every message is a call header: one rank with
// another count fails at once with both calls named, and so does every rank (the ones that read
// its header directly, or through the abort). Nobody waits for the timeout.
// Counts of 1 and 2 ride in the headers, 16 and 17 on both sides of what a header holds (64 and
// 68 bytes of 4 ranks), 100 and 101 after the headers.
TEST(CommunicatorErrors, ASmallAllgatherOnMoreRanksWithAnotherCountFailsEveryRank) {
  for (const char* transport : {"local", "shm", "tcp"}) {
    for (size_t base : {1, 16, 100}) {
      std::atomic<int> mismatches{0};
      runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
        Communicator comm = makeComm(rank, size, store, 10s, transport);
        const size_t count = rank == 3 ? base + 1 : base;
        std::vector<int32_t> mine(base + 1, rank), all((base + 1) * size, -1);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm.allgather(mine.data(), all.data(), count, DataType::kInt32);
          ADD_FAILURE() << transport << ": rank " << rank << " returned";
        } catch (const MismatchError& e) {
          ++mismatches;
          for (const std::string& part :
               {fmt::format("allgather(count={} per rank, int32)", base),
                fmt::format("allgather(count={} per rank, int32)", base + 1)}) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
          }
        } catch (const PeerError& e) {
          EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << transport;
      });
      EXPECT_GE(mismatches.load(), 1) << transport << " count " << base;
    }
  }
}

// Rank 1 broadcasts while the others all-reduce. The ranks that read rank 1's call directly
// throw MismatchError; the others fail through the abort that follows, with a PeerError whose
// message still names both calls. Nobody waits for the timeout. Run for a small all-reduce
// (recursive doubling over headers) and a large one (ring after the header round).
void mismatchedOperations(size_t count) {
  std::atomic<int> mismatches{0};
  runThreadRanks(4, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, 20s);
    std::vector<float> data(count, 1.0f);
    const std::string bcast = fmt::format("broadcast(count={}, float32, root=0)", count);
    const std::string allreduce = fmt::format("allreduce(count={}, float32, sum)", count);
    const auto start = std::chrono::steady_clock::now();
    try {
      if (rank == 1) {
        comm.broadcast(data.data(), count, DataType::kFloat32, 0);
      } else {
        comm.allreduce(data.data(), count, DataType::kFloat32, ReduceOp::kSum);
      }
      ADD_FAILURE() << "rank " << rank << ": expected an error";
    } catch (const MismatchError& e) {
      ++mismatches;
      EXPECT_NE(std::string(e.what()).find(bcast), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(allreduce), std::string::npos) << e.what();
    } catch (const PeerError& e) {
      EXPECT_NE(rank, 1) << e.what();
      EXPECT_NE(e.peer(), rank) << e.what();  // the rank that saw the mismatch
      EXPECT_NE(std::string(e.what()).find(bcast), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
  EXPECT_GE(mismatches.load(), 1);
}

TEST(CommunicatorErrors, MismatchedOperationsNoRankHangsSmall) { mismatchedOperations(64); }
TEST(CommunicatorErrors, MismatchedOperationsNoRankHangsLarge) { mismatchedOperations(100000); }

// The communicator's timeout also bounds its setup and call #0, so it cannot be tiny: 1 s leaves
// the two threads ample time for those on a busy machine. Rank 1 joins call #1 only once rank 0
// has seen its timeout (an event, not a sleep that races the timeout).
TEST(CommunicatorErrors, TimeoutNamesRankPeerOperationAndSequence) {
  Event rank0TimedOut;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeUncalibratedComm(rank, size, store, 1s);
    std::vector<float> data(16, 1.0f);
    comm.allreduce(data.data(), 16, DataType::kFloat32, ReduceOp::kSum);  // call #0 works
    if (rank == 0) {
      SetOnExit done(rank0TimedOut);
      const auto start = std::chrono::steady_clock::now();
      expectThrowWith<TimeoutError>(
          [&] { comm.allreduce(data.data(), 16, DataType::kFloat32, ReduceOp::kSum); },
          {"allreduce #1 on rank 0", "rank 1"});
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the wait outlived its timeout";
    } else {
      ASSERT_TRUE(rank0TimedOut.waitFor()) << "rank 0's call #1 never ended";
      EXPECT_THROW(comm.allreduce(data.data(), 16, DataType::kFloat32, ReduceOp::kSum), Error);
    }
  });
}

// setCallTimeout(): a call takes the timeout in force when it is issued. Rank 0 issues an async
// all-reduce under 200 ms, sets the communicator's 30 s back at once, and the call (which rank 1
// never joins) still ends with a TimeoutError within seconds; a blocking call under 200 ms the
// same. The values read back, and a negative one is refused by name.
TEST(CommunicatorErrors, ACallTimeoutBoundsTheCallsIssuedUnderIt) {
  for (const bool async : {true, false}) {
    Event rank0Done;
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 30s);
      if (rank == 1) {
        ASSERT_TRUE(rank0Done.waitFor(std::chrono::seconds(60))) << "rank 0's call never ended";
        return;
      }
      SetOnExit done(rank0Done);
      EXPECT_EQ(comm.callTimeout(), 30s);
      expectThrowWith<InvalidArgument>([&] { comm.setCallTimeout(-1ms); },
                                       {"setCallTimeout", "negative"});
      std::vector<float> data(16, 1.0f);
      const auto start = std::chrono::steady_clock::now();
      comm.setCallTimeout(200ms);
      EXPECT_EQ(comm.callTimeout(), 200ms);
      if (async) {
        Work w =
            comm.allreduceAsync(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum);
        comm.setCallTimeout(0ms);
        EXPECT_EQ(comm.callTimeout(), 30s);
        expectThrowWith<TimeoutError>([&] { w.wait(); }, {"allreduce #0 on rank 0", "rank 1"});
      } else {
        expectThrowWith<TimeoutError>(
            [&] { comm.allreduce(data.data(), 16, DataType::kFloat32, ReduceOp::kSum); },
            {"allreduce #0 on rank 0", "rank 1"});
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the 30 s timeout ran instead";
    });
  }
}

TEST(CommunicatorErrors, AbortFromAnotherThreadEndsTheCallOnEveryRank) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store, 30s);
    std::vector<float> data(8, 1.0f);
    comm.barrier();
    if (rank == 0) {
      // The pause only makes it likely that the others already wait; an abort that reaches them
      // before they call must give the same PeerError.
      std::this_thread::sleep_for(200ms);
      comm.abort("test abort");
      expectThrowWith<AbortedError>([&] { comm.barrier(); }, {"test abort"});
    } else {
      const auto start = std::chrono::steady_clock::now();
      // Rank 0 never joins: the abort ends the wait long before the 30 s timeout.
      expectThrowWith<PeerError>(
          [&] { comm.allreduce(data.data(), 8, DataType::kFloat32, ReduceOp::kSum); },
          {"rank 0", "test abort"});
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    }
  });
}

// abort() from a second thread while the first runs blocking calls back to back: whether it
// lands inside a call or between two, both ranks' loops end with an error naming it, long before
// the 30 s timeout (a blocking call takes no lock that abort() could try: runBlocking's flag and
// the asymmetric fences decide who aborts the links).
TEST(CommunicatorErrors, AbortFromASecondThreadDuringBlockingCallsEndsBothRanks) {
  for (int round = 0; round < 5; ++round) {
    runThreadRanks(2, [round](int rank, int size, std::shared_ptr<Store> store) {
      Communicator comm = makeComm(rank, size, store, 30s);
      std::vector<float> data(2, 1.0f);
      std::thread aborter;
      if (rank == 0) {
        aborter = std::thread([&comm, round] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20 + 15 * round));
          comm.abort("second-thread abort");
        });
      }
      const auto start = std::chrono::steady_clock::now();
      bool failed = false;
      std::string what;
      for (int i = 0; i < 100000000 && !failed; ++i) {
        try {
          comm.broadcast(data.data(), 2, DataType::kFloat32, 0);
        } catch (const Error& e) {
          failed = true;
          what = e.what();
        }
        if (std::chrono::steady_clock::now() - start > 20s) break;
      }
      if (aborter.joinable()) aborter.join();
      EXPECT_TRUE(failed) << "rank " << rank << " never saw the abort";
      EXPECT_NE(what.find("second-thread abort"), std::string::npos) << what;
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    });
  }
}

TEST(CommunicatorAsync, QueuedCallsRunInOrderAndWorkHandlesReport) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeComm(rank, size, store);
    std::vector<std::vector<int64_t>> buffers(6, std::vector<int64_t>(1000));
    std::vector<Work> works;
    for (size_t b = 0; b < buffers.size(); ++b) {
      for (size_t j = 0; j < 1000; ++j) buffers[b][j] = static_cast<int64_t>(b * 1000 + j + rank);
      works.push_back(comm.allreduceAsync(buffers[b].data(), buffers[b].data(), 1000,
                                          DataType::kInt64, ReduceOp::kSum));
    }
    std::vector<int64_t> root(5, rank == 2 ? 7 : 0);
    Work bcast = comm.broadcastAsync(root.data(), 5, DataType::kInt64, 2);
    comm.barrier();  // a blocking call runs after the queued ones
    for (auto& w : works) {
      EXPECT_TRUE(w.test());
      EXPECT_EQ(w.error(), nullptr);
      w.wait();
      EXPECT_TRUE(w.wait(1ms));
    }
    bcast.wait();
    for (size_t b = 0; b < buffers.size(); ++b) {
      for (size_t j = 0; j < 1000; ++j) {
        ASSERT_EQ(buffers[b][j], static_cast<int64_t>(4 * (b * 1000 + j) + 6)) << b << "," << j;
      }
    }
    for (int64_t v : root) EXPECT_EQ(v, 7);
    Work empty;
    EXPECT_TRUE(empty.test());
  });
}

// Rank 1 never joins and keeps its communicator open until rank 0 has seen the TimeoutError: had
// it closed its links first, rank 0 would see a PeerError instead. The timeout (which also bounds
// the setup) is 1 s, far longer than the 10 ms wait that must find the call still running.
TEST(CommunicatorAsync, ErrorsReachTheWorkHandle) {
  Event rank0Done;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Communicator comm = makeUncalibratedComm(rank, size, store, 1s);
    std::vector<float> data(4, 1.0f);
    if (rank == 0) {
      SetOnExit done(rank0Done);
      Work w = comm.allreduceAsync(data.data(), data.data(), 4, DataType::kFloat32, ReduceOp::kSum);
      EXPECT_FALSE(w.wait(10ms));  // still waiting for rank 1
      EXPECT_THROW(w.wait(), TimeoutError);
      EXPECT_NE(w.error(), nullptr);
    } else {
      EXPECT_TRUE(rank0Done.waitFor()) << "rank 0's call never ended";
    }
  });
}

}  // namespace
}  // namespace ringlet::testing
