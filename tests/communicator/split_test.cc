// Communicator::split and dup: membership and order, every collective on the new communicators,
// parents and children driven at once from different threads, nesting. Thread ranks over the
// local transport, process ranks over shm and tcp. Errors: split_errors_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <thread>

#include "ringlet/ringlet.h"
#include "tests/communicator/split_checks.h"
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
  // Children inherit the transport that the parent's links name ("1:shm+direct, 3:shm"; the
  // "+direct" mark is each link's own, so only the name before it is compared).
  const std::string parentLinks = parent.describeLinks();
  const size_t colon = parentLinks.find(':');
  const std::string parentTransport =
      colon == std::string::npos
          ? ""
          : parentLinks.substr(colon + 1, parentLinks.find_first_of(",+") - colon - 1);
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
}  // namespace
}  // namespace ringlet::testing
