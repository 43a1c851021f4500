// The Store contract (include/ringlet/store.h), run against every store kind.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;

// One store kind: makes a fresh store and keeps alive whatever it needs (server, directory).
struct StoreKind {
  std::string name;
  std::function<std::shared_ptr<Store>(std::shared_ptr<void>& keepAlive)> make;
};

void PrintTo(const StoreKind& kind, std::ostream* os) { *os << kind.name; }

std::shared_ptr<void> holdDirectory(const std::string& dir) {
  return std::shared_ptr<void>(nullptr, [dir](void*) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
}

std::vector<StoreKind> storeKinds() {
  return {
      {"InProcess", [](std::shared_ptr<void>&) { return makeInProcessStore({.timeout = 5s}); }},
      {"File",
       [](std::shared_ptr<void>& keep) {
         const std::string dir = testing::makeTempDir("ringlet-store-test");
         keep = holdDirectory(dir);
         return makeFileStore(dir, {.timeout = 5s});
       }},
      {"Tcp",
       [](std::shared_ptr<void>& keep) {
         std::shared_ptr<TcpStoreServer> server = TcpStoreServer::start({});
         keep = server;
         return connectTcpStore(server->host(), server->port(),
                                {.timeout = 5s, .connectTimeout = 5s});
       }},
      {"PrefixOverTcp",
       [](std::shared_ptr<void>& keep) {
         std::shared_ptr<TcpStoreServer> server = TcpStoreServer::start({});
         keep = server;
         return makePrefixStore("job", connectTcpStore(server->host(), server->port(),
                                                       {.timeout = 5s, .connectTimeout = 5s}));
       }},
      {"PrefixOverInProcess",
       [](std::shared_ptr<void>&) {
         return makePrefixStore("p", makeInProcessStore({.timeout = 5s}));
       }},
  };
}

class StoreContract : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override { store_ = GetParam().make(keepAlive_); }
  void TearDown() override {
    store_.reset();
    keepAlive_.reset();
  }

  std::shared_ptr<void> keepAlive_;
  std::shared_ptr<Store> store_;
};

Bytes bytesOf(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

TEST_P(StoreContract, SetGetOverwriteCheck) {
  EXPECT_FALSE(store_->check("a"));
  store_->setString("a", "one");
  EXPECT_TRUE(store_->check("a"));
  EXPECT_EQ(store_->getString("a"), "one");
  store_->setString("a", "two!");
  EXPECT_EQ(store_->getString("a"), "two!");
  store_->setString("empty", "");
  EXPECT_TRUE(store_->check("empty"));
  EXPECT_EQ(store_->getString("empty"), "");
  EXPECT_FALSE(store_->check("b"));
}

TEST_P(StoreContract, KeysWithOddBytesAreDistinct) {
  store_->setString("a/b", "1");
  store_->setString("a%2Fb", "2");
  store_->setString("a b", "3");
  store_->setString(std::string("a\0b", 3), "4");
  store_->setString("..", "5");
  EXPECT_EQ(store_->getString("a/b"), "1");
  EXPECT_EQ(store_->getString("a%2Fb"), "2");
  EXPECT_EQ(store_->getString("a b"), "3");
  EXPECT_EQ(store_->getString(std::string("a\0b", 3)), "4");
  EXPECT_EQ(store_->getString(".."), "5");
}

TEST_P(StoreContract, BinaryValuesRoundTrip) {
  Bytes value = bytesOf({0, 1, 0, 255, 0, 10, 13, 0});
  for (int i = 0; i < 1000; ++i) value.push_back(static_cast<std::byte>((i * 7) & 0xff));
  store_->set("bin", value);
  EXPECT_EQ(store_->get("bin"), value);
}

// The set comes at least 50 ms after `start` (taken before the setter starts), so a get() that
// returns "here" has waited for it. The pause only makes it likely that get() is already waiting
// when the value is set; the verdict holds either way.
TEST_P(StoreContract, GetBlocksUntilLaterSet) {
  const auto start = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    store_->setString("late", "here");
  });
  EXPECT_EQ(store_->getString("late", 30'000ms), "here");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  setter.join();
}

TEST_P(StoreContract, GetTimesOutNamingKeyAndStore) {
  const auto start = std::chrono::steady_clock::now();
  try {
    store_->get("never-set", 150ms);
    FAIL() << "get() returned for a key nobody set";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("never-set"), std::string::npos) << message;
    EXPECT_NE(message.find(store_->describe()), std::string::npos) << message;
    EXPECT_NE(message.find("ms"), std::string::npos) << message;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, 140ms);
  EXPECT_LT(elapsed, 10s) << "get() outlived its 150 ms timeout by far";
}

TEST_P(StoreContract, HugeTimeoutDoesNotOverflow) {
  store_->setString("present", "yes");
  EXPECT_EQ(store_->getString("present", std::chrono::milliseconds::max()), "yes");
  std::thread setter([&] {
    std::this_thread::sleep_for(20ms);
    store_->setString("soon", "ok");
  });
  EXPECT_EQ(store_->getString("soon", std::chrono::milliseconds::max()), "ok");
  setter.join();
}

TEST_P(StoreContract, SetDoesNotWaitForABlockedGet) {
  // One thread parked in get() must not hold up set() from another thread on the same object:
  // held up, set() would return only when the get() gives up after 60 s. The pause only makes it
  // likely that the get() is parked before the set(); the verdict does not depend on it.
  std::thread waiter([&] { EXPECT_EQ(store_->getString("wake", 60'000ms), "up"); });
  std::this_thread::sleep_for(30ms);
  const auto start = std::chrono::steady_clock::now();
  store_->setString("other", "x");
  EXPECT_EQ(store_->getString("other", 30'000ms), "x");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  store_->setString("wake", "up");
  waiter.join();
}

TEST_P(StoreContract, AddIsAtomic) {
  EXPECT_EQ(store_->add("counter", 0), 0);
  EXPECT_EQ(store_->add("counter", 5), 5);
  EXPECT_EQ(store_->add("counter", -2), 3);
  EXPECT_EQ(store_->getString("counter"), "3");
  constexpr int kThreads = 8;
  constexpr int kAdds = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) store_->add("atomic", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->getString("atomic"), std::to_string(kThreads * kAdds));
}

TEST_P(StoreContract, AddOnNonCounterThrows) {
  store_->setString("text", "hello");
  EXPECT_THROW(store_->add("text", 1), InvalidArgument);
}

TEST_P(StoreContract, LengthLimits) {
  EXPECT_THROW(store_->setString("", "x"), InvalidArgument);
  EXPECT_THROW(store_->get("", 100ms), InvalidArgument);
  EXPECT_THROW(store_->check(""), InvalidArgument);
  const std::string longKey(kMaxKeyBytes + 1, 'k');
  try {
    store_->setString(longKey, "x");
    FAIL() << "a key of kMaxKeyBytes+1 bytes was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxKeyBytes)), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(store_->get(longKey, 100ms), InvalidArgument);
  EXPECT_THROW(store_->add(longKey, 1), InvalidArgument);
  EXPECT_THROW(store_->check(longKey), InvalidArgument);
  Bytes big(kMaxValueBytes + 1);
  EXPECT_THROW(store_->set("big", big), InvalidArgument);
  EXPECT_FALSE(store_->check("big"));
  // A long key that fits (up to the limit minus any prefix) works.
  const std::string okKey(kMaxKeyBytes - 64, 'k');
  store_->setString(okKey, "fits");
  EXPECT_EQ(store_->getString(okKey), "fits");
}

TEST_P(StoreContract, PrefixesKeepKeysApart) {
  auto a = makePrefixStore("a", store_);
  auto b = makePrefixStore("b", store_);
  a->setString("k", "from a");
  EXPECT_FALSE(b->check("k"));
  EXPECT_FALSE(store_->check("k"));
  b->setString("k", "from b");
  EXPECT_EQ(a->getString("k"), "from a");
  EXPECT_EQ(b->getString("k"), "from b");
  EXPECT_EQ(a->add("n", 2), 2);
  EXPECT_EQ(b->add("n", 3), 3);
  EXPECT_THROW(b->get("only-a", 100ms), TimeoutError);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreContract, ::testing::ValuesIn(storeKinds()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ringlet
