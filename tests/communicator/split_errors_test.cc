// Communicator::split and dup, when something goes wrong: bad arguments, disagreeing ranks, a
// mismatch, an abort or a timeout inside a child, a rank that never splits, a peer that dies.
// Each error stays in the communicator where it happens.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <optional>

#include "ringlet/ringlet.h"
#include "tests/communicator/split_checks.h"
#include "tests/support/event.h"
#include "tests/support/expect_throw.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

TEST(SplitThreads, BadArgumentsThrowBeforeAnythingIsSent) {
  runThreadRanks(3, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    expectThrowWith<InvalidArgument>([&] { world.split(-2, 0); },
                                     {"split on rank", "color -2", "kNoColor"});
    CommunicatorOptions zero;
    zero.timeout = 0ms;
    expectThrowWith<InvalidArgument>([&] { world.split(0, 0, zero); },
                                     {"split on rank", "timeout must be positive"});
    CommunicatorOptions unknown;
    unknown.transport = "carrier-pigeon";
    expectThrowWith<InvalidArgument>([&] { world.dup(unknown); },
                                     {"dup on rank", "carrier-pigeon"});
    // No call was issued: the sequence is intact everywhere.
    checkEveryCollective(world, identity(n), 1);
  });
}

// Ranks of one color that ask for different transports all fail, naming both; the other color
// and the parent go on.
TEST(SplitThreads, RanksOfOneColorMustAgreeOnTheTransport) {
  runThreadRanks(4, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    CommunicatorOptions o;
    o.timeout = 20s;
    o.transport = rank == 2 ? "auto" : "local";
    if (rank % 2 == 0) {
      expectThrowWith<InvalidArgument>([&] { world.split(0, rank, o); },
                                       {"color 0", "'auto'", "'local'"});
    } else {
      auto child = world.split(1, rank, o);
      ASSERT_TRUE(child.has_value());
      checkEveryCollective(*child, {1, 3}, 1);
    }
    checkEveryCollective(world, identity(n), 2);
  });
}

// A split on one rank while another all-reduces is a mismatch on the parent, not a hang, and a
// dup is not a split.
TEST(SplitThreads, SplitAgainstAllreduceOrDupIsAMismatch) {
  for (size_t count : {size_t{4}, size_t{100000}}) {
    runThreadRanks(2, [&](int rank, int n, std::shared_ptr<Store> store) {
      Communicator world = makeComm(rank, n, store, "local");
      std::vector<float> data(count, 1.0f);
      const std::string allreduce = fmt::format("allreduce(count={}, float32, sum)", count);
      expectThrowWith<MismatchError>(
          [&] {
            if (rank == 0) {
              world.split(5, 9);
            } else {
              world.allreduce(data.data(), count, DataType::kFloat32, ReduceOp::kSum);
            }
          },
          {"split(color=5, key=9)", allreduce, "rank 0", "rank 1"});
    });
  }
  runThreadRanks(2, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    expectThrowWith<MismatchError>(
        [&] {
          if (rank == 0) {
            world.dup();
          } else {
            world.split(0, rank);
          }
        },
        {"dup()", "split(color=0, key=1)"});
  });
  // Four ranks: those that read rank 1's split throw MismatchError, the others a PeerError.
  std::atomic<int> mismatches{0};
  runThreadRanks(4, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    std::vector<float> data(64, 1.0f);
    try {
      if (rank == 1) {
        world.split(0, 0);
      } else {
        world.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      }
      ADD_FAILURE() << "rank " << rank << ": expected an error";
    } catch (const MismatchError& e) {
      ++mismatches;
      EXPECT_NE(std::string(e.what()).find("split(color=0, key=0)"), std::string::npos) << e.what();
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("split(color=0, key=0)"), std::string::npos) << e.what();
    }
  });
  EXPECT_GE(mismatches.load(), 1);
}

// A mismatch inside one child breaks that child only: its sibling and the parent go on.
TEST(SplitThreads, MismatchInAChildLeavesParentAndSiblingWorking) {
  runThreadRanks(4, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    auto child = world.split(rank % 2, rank);
    ASSERT_TRUE(child.has_value());
    if (rank % 2 == 0) {
      std::vector<float> data(100, 1.0f);
      const size_t count = rank == 0 ? 100 : 99;
      expectThrowWith<MismatchError>(
          [&] { child->allreduce(data.data(), count, DataType::kFloat32, ReduceOp::kSum); },
          {"allreduce(count=100, float32, sum)", "allreduce(count=99, float32, sum)"});
      expectThrowWith<AbortedError>([&] { child->barrier(); }, {"unusable"});
    } else {
      checkEveryCollective(*child, {1, 3}, 1);
    }
    checkEveryCollective(world, identity(n), 2);
    if (rank % 2 == 1) checkEveryCollective(*child, {1, 3}, 3);
  });
}

// abort() on a child fails that child on every rank (fast, through the abort notice) and leaves
// the parent usable.
TEST(SplitThreads, AbortOfAChildDoesNotAbortTheParent) {
  Event aborted;
  runThreadRanks(3, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    Communicator twin = world.dup();
    std::vector<float> data(64, 1.0f);
    if (rank == 0) {
      SetOnExit done(aborted);
      twin.abort("test aborts the dup");
      expectThrowWith<AbortedError>(
          [&] { twin.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum); },
          {"test aborts the dup"});
    } else {
      ASSERT_TRUE(aborted.waitFor());
      try {
        twin.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
        ADD_FAILURE() << "rank " << rank << ": the aborted dup still ran a call";
      } catch (const TimeoutError& e) {
        ADD_FAILURE() << "rank " << rank << " waited for its timeout: " << e.what();
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("test aborts the dup"), std::string::npos) << e.what();
      }
    }
    checkEveryCollective(world, identity(n), 1);
  });
}

// A child with a short timeout of its own times out alone: the parent (long timeout) goes on.
TEST(SplitThreads, AChildTimeoutIsItsOwn) {
  Event rank0TimedOut;
  runThreadRanks(2, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local", 60s);
    CommunicatorOptions o;
    o.timeout = 1s;
    o.transport = "local";
    auto child = world.split(0, rank, o);
    ASSERT_TRUE(child.has_value());
    std::vector<float> data(16, 1.0f);
    child->allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    if (rank == 0) {
      SetOnExit done(rank0TimedOut);
      expectThrowWith<TimeoutError>(
          [&] { child->allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum); },
          {"allreduce #1 on rank 0", "rank 1"});
    } else {
      ASSERT_TRUE(rank0TimedOut.waitFor()) << "rank 0's call #1 never ended";
      EXPECT_THROW(child->allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum),
                   Error);
    }
    checkEveryCollective(world, identity(n), 1);
  });
}

// A rank that never calls split: the others' split ends at the parent's timeout with an error
// naming the call, not a hang. Rank 1 keeps its communicator (and so its links) until then.
TEST(SplitThreads, ASplitThatARankNeverJoinsEndsAtTheTimeout) {
  Event rank0TimedOut;
  runThreadRanks(2, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local", 1s);
    if (rank == 0) {
      SetOnExit done(rank0TimedOut);
      expectThrowWith<TimeoutError>([&] { world.split(0, 0); }, {"split #0 on rank 0", "rank 1"});
    } else {
      EXPECT_TRUE(rank0TimedOut.waitFor()) << "rank 0's split never ended";
    }
  });
}

// A rank of a color that cannot make the new communicator's links (its listener cannot bind the
// address its options name) fails the parent, and the other rank of the color, which watches
// the parent's links while it waits for that rank to connect, fails at once with it instead of
// at its own 60 s timeout. Both parents are unusable after.
TEST(SplitThreads, ARankThatCannotConnectTheChildEndsTheOthersWait) {
  runThreadRanks(2, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "tcp", 60s);
    CommunicatorOptions o;
    o.timeout = 60s;
    o.transport = "tcp";
    // TEST-NET-1 (RFC 5737): no interface of this host has it, so bind() fails; nothing is sent.
    if (rank == 1) o.transportOptions["socket_addr"] = "192.0.2.1";
    const auto start = std::chrono::steady_clock::now();
    if (rank == 1) {
      expectThrowWith<IoError>([&] { world.split(0, rank, o); }, {"192.0.2.1"});
    } else {
      expectThrowWith<PeerError>([&] { world.split(0, rank, o); },
                                 {"rank 1 aborted", "split #0 on rank 1", "failed to connect"});
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "rank " << rank;
    expectThrowWith<AbortedError>([&] { world.barrier(); }, {"unusable after an earlier error"});
  });
}

// A peer process that dies shows up as a PeerError in every communicator that talks to it; a
// child without it goes on.
class SplitPeerDeath : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitPeerDeath, EveryCommunicatorWithTheDeadRankFailsTheOthersGoOn) {
  const std::string transport = GetParam();
  constexpr int kVictim = 2;
  runProcessRanksWithVictim(
      4, kVictim,
      [&](int rank, int n, std::shared_ptr<Store> store) {
        CommunicatorOptions o;
        o.timeout = 60s;  // only failure detection may end the calls below
        o.transport = transport;
        Communicator world = Communicator::create(Bootstrap::forThread(rank, n, store), o);
        auto parity = world.split(rank % 2, rank);  // {0, 2} and {1, 3}
        ASSERT_TRUE(parity.has_value());
        Communicator twin = world.dup();
        world.barrier();
        if (rank == kVictim) raise(SIGKILL);
        std::vector<int64_t> data(1000, 1);
        auto expectPeerError = [&](Communicator& comm, const char* which) {
          try {
            for (int i = 0; i < 1000; ++i) {
              comm.allreduce(data.data(), data.size(), DataType::kInt64, ReduceOp::kSum);
            }
            ADD_FAILURE() << which << " on rank " << rank << ": no error after rank 2 died";
          } catch (const PeerError& e) {
            EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
          } catch (const std::exception& e) {
            ADD_FAILURE() << which << " on rank " << rank << ": " << e.what();
          }
        };
        expectPeerError(world, "the parent");
        expectPeerError(twin, "the dup");
        if (rank % 2 == 0) {
          expectPeerError(*parity, "the even child");
        } else {
          checkEveryCollective(*parity, {1, 3}, 1);
        }
      },
      120s);
}

INSTANTIATE_TEST_SUITE_P(Transports, SplitPeerDeath, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace ringlet::testing
