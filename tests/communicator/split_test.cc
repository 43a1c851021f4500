// Communicator::split and dup: membership and order, every collective on the new communicators,
// parents and children driven at once from different threads, nesting, and errors that stay in
// the communicator where they happen. Thread ranks over the local transport, process ranks over
// shm and tcp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <numeric>
#include <thread>

#include "ringlet/ringlet.h"
#include "tests/support/event.h"
#include "tests/support/ranks.h"

namespace ringlet::testing {
namespace {

using namespace std::chrono_literals;

// Where the ranks run: threads over "local", or processes over "shm" / "tcp".
struct Mode {
  bool processes;
  std::string transport;
};
const Mode kModes[] = {{false, "local"}, {true, "shm"}, {true, "tcp"}};

void PrintTo(const Mode& mode, std::ostream* os) {
  *os << (mode.processes ? "processes over " : "threads over ") << mode.transport;
}

std::string modeName(const ::testing::TestParamInfo<Mode>& info) {
  return (info.param.processes ? "processes_" : "threads_") + info.param.transport;
}

void runRanks(const Mode& mode, int size, const RankBody& body) {
  if (mode.processes) {
    runProcessRanks(size, body, 120s);
  } else {
    runThreadRanks(size, body, 120s);
  }
}

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      const std::string& transport, std::chrono::milliseconds timeout = 30s) {
  CommunicatorOptions o;
  o.timeout = timeout;
  o.transport = transport;
  o.segmentBytes = 4096;  // many pipeline segments even for modest counts
  return Communicator::create(Bootstrap::forThread(rank, size, std::move(store)), o);
}

// Element j of the data that the rank known as `id` (its rank in the parent) contributes to call
// `salt`: every value is exact in int64 and differs between ranks, elements and calls.
int64_t value(int id, size_t j, int salt) {
  return static_cast<int64_t>(j) * 7 + id * 1000 + salt * 100000;
}

std::vector<int64_t> dataOf(int id, size_t count, int salt) {
  std::vector<int64_t> v(count);
  for (size_t j = 0; j < count; ++j) v[j] = value(id, j, salt);
  return v;
}

// Counts the elements of `got` that differ from `want(j)`.
template <typename F>
size_t wrong(const std::vector<int64_t>& got, F want) {
  size_t n = 0;
  for (size_t j = 0; j < got.size(); ++j) n += got[j] != want(j);
  return n;
}

// Runs every collective on `comm` and checks it against references. `ids[r]` is the parent rank
// of comm's rank r, so the data says who sent it and a rank in the wrong place shows.
void checkEveryCollective(Communicator& comm, const std::vector<int>& ids, int salt) {
  const int n = comm.size();
  const int me = comm.rank();
  ASSERT_EQ(static_cast<int>(ids.size()), n);
  const std::string where = fmt::format("rank {} of {} (salt {})", me, n, salt);
  const auto sumOver = [&](auto f) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += f(r);
    return s;
  };
  using T = int64_t;
  const DataType kType = DataType::kInt64;

  for (size_t count : {size_t{3}, size_t{20011}}) {  // recursive doubling, then the ring
    auto data = dataOf(ids[me], count, salt);
    comm.allreduce(data.data(), count, kType, ReduceOp::kSum);
    EXPECT_EQ(
        wrong(data,
              [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt); }); }),
        0u)
        << "allreduce count " << count << " on " << where;

    const int root = n - 1;
    auto b = me == root ? dataOf(ids[me], count, salt + 1) : std::vector<T>(count, -1);
    comm.broadcast(b.data(), count, kType, root);
    EXPECT_EQ(wrong(b, [&](size_t j) { return value(ids[root], j, salt + 1); }), 0u)
        << "broadcast count " << count << " on " << where;
  }

  auto send = dataOf(ids[me], 1001, salt + 2);
  std::vector<T> reduced(1001, -1);
  comm.reduce(send.data(), reduced.data(), send.size(), kType, ReduceOp::kSum, 0);
  if (me == 0) {
    EXPECT_EQ(
        wrong(reduced,
              [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt + 2); }); }),
        0u)
        << "reduce on " << where;
  }

  constexpr size_t kBlock = 5;
  auto block = dataOf(ids[me], kBlock, salt + 3);
  std::vector<T> gathered(kBlock * n, -1);
  comm.allgather(block.data(), gathered.data(), kBlock, kType);
  EXPECT_EQ(wrong(gathered, [&](size_t j) { return value(ids[j / kBlock], j % kBlock, salt + 3); }),
            0u)
      << "allgather on " << where;

  auto full = dataOf(ids[me], kBlock * n, salt + 4);
  std::vector<T> mine(kBlock, -1);
  comm.reduceScatter(full.data(), mine.data(), kBlock, kType, ReduceOp::kSum);
  EXPECT_EQ(wrong(mine,
                  [&](size_t j) {
                    return sumOver([&](int r) { return value(ids[r], me * kBlock + j, salt + 4); });
                  }),
            0u)
      << "reduce_scatter on " << where;

  const int root = n / 2;
  std::vector<T> atRoot(kBlock * n, -1);
  comm.gather(block.data(), atRoot.data(), kBlock, kType, root);
  if (me == root) {
    EXPECT_EQ(wrong(atRoot, [&](size_t j) { return value(ids[j / kBlock], j % kBlock, salt + 3); }),
              0u)
        << "gather on " << where;
  }
  auto source = dataOf(ids[me], kBlock * n, salt + 5);
  std::vector<T> piece(kBlock, -1);
  comm.scatter(source.data(), piece.data(), kBlock, kType, root);
  EXPECT_EQ(wrong(piece, [&](size_t j) { return value(ids[root], me * kBlock + j, salt + 5); }), 0u)
      << "scatter on " << where;

  std::vector<T> exchanged(kBlock * n, -1);
  comm.allToAll(source.data(), exchanged.data(), kBlock, kType);
  EXPECT_EQ(
      wrong(exchanged,
            [&](size_t j) { return value(ids[j / kBlock], me * kBlock + j % kBlock, salt + 5); }),
      0u)
      << "alltoall on " << where;

  comm.barrier();

  if (n > 1) {  // point to point around the ring
    auto out = dataOf(ids[me], 777, salt + 6);
    std::vector<T> in(777, -1);
    Work sent = comm.sendAsync(out.data(), out.size(), kType, (me + 1) % n, salt);
    const int from = (me + n - 1) % n;
    comm.recv(in.data(), in.size(), kType, from, salt);
    sent.wait();
    EXPECT_EQ(wrong(in, [&](size_t j) { return value(ids[from], j, salt + 6); }), 0u)
        << "send/recv on " << where;
  }

  auto async = dataOf(ids[me], 4099, salt + 7);
  comm.allreduceAsync(async.data(), async.data(), async.size(), kType, ReduceOp::kSum).wait();
  EXPECT_EQ(
      wrong(async,
            [&](size_t j) { return sumOver([&](int r) { return value(ids[r], j, salt + 7); }); }),
      0u)
      << "allreduceAsync on " << where;
}

// The parent ranks that split(color, key) puts together with `rank`, in their new order.
std::vector<int> expectedMembers(int size, int rank, const std::function<int(int)>& color,
                                 const std::function<int(int)>& key) {
  std::vector<int> members;
  for (int r = 0; r < size; ++r) {
    if (color(r) == color(rank)) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return key(a) < key(b); });
  return members;
}

// Splits `parent` by `color`/`key` and checks the child's place and every collective on it.
// `ids` maps the parent's ranks to the original ones.
std::optional<Communicator> splitAndCheck(Communicator& parent, const std::vector<int>& ids,
                                          const std::function<int(int)>& color,
                                          const std::function<int(int)>& key, int salt) {
  const int me = parent.rank();
  // Children inherit the transport that the parent's links name ("1:shm, 3:shm").
  const std::string parentLinks = parent.describeLinks();
  const size_t colon = parentLinks.find(':');
  const std::string parentTransport =
      colon == std::string::npos ? ""
                                 : parentLinks.substr(colon + 1, parentLinks.find(',') - colon - 1);
  std::optional<Communicator> child = parent.split(color(me), key(me));
  if (color(me) == kNoColor) {
    EXPECT_FALSE(child.has_value()) << "rank " << me << " passed kNoColor";
    return child;
  }
  if (!child) {
    ADD_FAILURE() << "rank " << me << " got no communicator";
    return child;
  }
  const auto members = expectedMembers(parent.size(), me, color, key);
  EXPECT_EQ(child->size(), static_cast<int>(members.size())) << "parent rank " << me;
  const int place =
      static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  EXPECT_EQ(child->rank(), place) << "parent rank " << me;
  if (child->size() > 1) {  // the links are named by rank in the child
    const std::string next = fmt::format("{}:{}", (place + 1) % child->size(), parentTransport);
    EXPECT_NE(child->describeLinks().find(next), std::string::npos) << child->describeLinks();
  }
  std::vector<int> childIds;
  for (int r : members) childIds.push_back(ids[r]);
  checkEveryCollective(*child, childIds, salt);
  return child;
}

std::vector<int> identity(int size) {
  std::vector<int> ids(size);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

class Split : public ::testing::TestWithParam<Mode> {};

TEST_P(Split, ByParityAndByHalvesWithKeysReversingTheOrder) {
  const Mode mode = GetParam();
  for (int size : mode.processes ? std::vector<int>{4} : std::vector<int>{1, 2, 3, 5}) {
    runRanks(mode, size, [&](int rank, int n, std::shared_ptr<Store> store) {
      Communicator world = makeComm(rank, n, store, mode.transport);
      const auto ids = identity(n);
      auto parity = splitAndCheck(
          world, ids, [](int r) { return r % 2; }, [](int r) { return -r; }, 1);
      auto halves = splitAndCheck(
          world, ids, [n](int r) { return r < n / 2 ? 0 : 1; }, [n](int r) { return n - r; }, 2);
      // The parent is untouched by its children.
      checkEveryCollective(world, ids, 3);
    });
  }
}

TEST_P(Split, NestedSplitAndDup) {
  const Mode mode = GetParam();
  runRanks(mode, mode.processes ? 4 : 6, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, mode.transport);
    const auto ids = identity(n);
    auto half = splitAndCheck(
        world, ids, [n](int r) { return r < n / 2 ? 0 : 1; }, [](int r) { return r; }, 1);
    ASSERT_TRUE(half.has_value());
    std::vector<int> halfIds;
    for (int r = 0; r < n; ++r) {
      if ((r < n / 2) == (rank < n / 2)) halfIds.push_back(r);
    }
    // Inside each half: by parity of the half's rank, reversed.
    auto quarter = splitAndCheck(
        *half, halfIds, [](int r) { return r % 2; }, [](int r) { return -r; }, 2);
    ASSERT_TRUE(quarter.has_value());

    Communicator twin = world.dup();
    EXPECT_EQ(twin.rank(), world.rank());
    EXPECT_EQ(twin.size(), world.size());
    checkEveryCollective(twin, ids, 3);
    // A dup of a nested child, with its own options.
    CommunicatorOptions o;
    o.timeout = 20s;
    o.transport = mode.transport;
    Communicator quarterTwin = quarter->dup(o);
    EXPECT_EQ(quarterTwin.rank(), quarter->rank());
    std::vector<int> quarterIds;
    for (size_t r = 0; r < halfIds.size(); ++r) {
      if (static_cast<int>(r) % 2 == half->rank() % 2) quarterIds.push_back(halfIds[r]);
    }
    std::reverse(quarterIds.begin(), quarterIds.end());
    checkEveryCollective(quarterTwin, quarterIds, 4);
    checkEveryCollective(world, ids, 5);
    checkEveryCollective(*half, halfIds, 6);
  });
}

// Every communicator driven by a thread of its own on every rank, at the same time: the parent,
// two children of one split (siblings) and a dup. Each checks its results, so a message that
// reached another communicator's call would show as a wrong value or a mismatch.
TEST_P(Split, ParentAndChildrenRunConcurrentlyWithoutCrosstalk) {
  const Mode mode = GetParam();
  runRanks(mode, 4, [&](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, mode.transport);
    const auto ids = identity(n);
    std::optional<Communicator> parity = world.split(rank % 2, rank);
    ASSERT_TRUE(parity.has_value());
    Communicator twin = world.dup();
    const std::vector<int> parityIds =
        rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    auto drive = [](Communicator& comm, const std::vector<int>& members, int salt) {
      return std::thread([&comm, members, salt] {
        try {
          for (int round = 0; round < 3; ++round) {
            checkEveryCollective(comm, members, salt + 10 * round);
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << "salt " << salt << ": " << e.what();
        }
      });
    };
    std::thread a = drive(world, ids, 100);
    std::thread b = drive(*parity, parityIds, 200);
    std::thread c = drive(twin, ids, 300);
    a.join();
    b.join();
    c.join();
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, Split, ::testing::ValuesIn(kModes), modeName);

TEST(SplitThreads, NoColorRanksTakePartAndGetNothing) {
  runThreadRanks(5, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    const auto ids = identity(n);
    // Ranks 1 and 3 stay out; the rest form one communicator, ordered by descending rank.
    auto color = [](int r) { return r == 1 || r == 3 ? kNoColor : 7; };
    auto child = splitAndCheck(
        world, ids, color, [](int r) { return 10 - r; }, 1);
    EXPECT_EQ(child.has_value(), rank != 1 && rank != 3);
    // Everybody out: nobody gets one, and the parent goes on.
    EXPECT_FALSE(world.split(kNoColor, 0).has_value());
    checkEveryCollective(world, ids, 2);
  });
}

TEST(SplitThreads, WorldOfOne) {
  runThreadRanks(1, [](int rank, int n, std::shared_ptr<Store> store) {
    Communicator world = makeComm(rank, n, store, "local");
    auto child = splitAndCheck(
        world, {0}, [](int) { return 3; }, [](int) { return 0; }, 1);
    ASSERT_TRUE(child.has_value());
    EXPECT_EQ(child->describeLinks(), "none (world of one)");
    Communicator twin = child->dup();
    checkEveryCollective(twin, {0}, 2);
    EXPECT_FALSE(twin.split(kNoColor, 0).has_value());
  });
}

// A child keeps working after its parent is gone (its store and links are its own).
TEST(SplitThreads, AChildOutlivesItsParent) {
  runThreadRanks(3, [](int rank, int n, std::shared_ptr<Store> store) {
    std::optional<Communicator> child;
    {
      Communicator world = makeComm(rank, n, store, "local");
      child = world.split(0, -rank);
    }
    ASSERT_TRUE(child.has_value());
    checkEveryCollective(*child, {2, 1, 0}, 1);
    Communicator grandchild = child->dup();
    checkEveryCollective(grandchild, {2, 1, 0}, 2);
  });
}

// Expects `f` to throw E whose message contains every string in `parts`.
template <typename E, typename F>
void expectThrowWith(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

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
