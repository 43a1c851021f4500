// What one client may use of a store, and hostile files under a file store: quotas with named
// errors, accept() out of descriptors without a spin, add() overflow, a file store's modes, FIFOs
// and huge files.

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/net/socket.h"
#include "src/store/tcp_store_server_internal.h"
#include "tests/support/ranks.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TcpStoreClientOptions shortOptions() { return {.timeout = 5s, .connectTimeout = 3s}; }

template <typename E>
void expectErrorWith(const std::function<void()>& body, const std::string& text) {
  try {
    body();
    ADD_FAILURE() << "no error; wanted one with '" << text << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(TcpStoreQuota, KeyCountIsLimitedWithANamedError) {
  auto server = TcpStoreServer::start({.quotas = {.maxKeys = 3}});
  auto store = connectTcpStore(server->host(), server->port(), shortOptions());
  store->setString("a", "1");
  store->setString("b", "2");
  store->add("c", 1);
  expectErrorWith<IoError>([&] { store->setString("d", "4"); }, "key quota");
  expectErrorWith<IoError>([&] { store->add("e", 1); }, "key quota");
  // Keys already held may change; the server goes on serving.
  store->setString("a", "11");
  EXPECT_EQ(store->add("c", 1), 2);
  EXPECT_EQ(store->getString("a"), "11");
  EXPECT_FALSE(store->check("d"));
}

// One client used to grow the store without bound (8 MB to 1.88 GB); now a job's bytes are bounded.
TEST(TcpStoreQuota, JobMemoryIsLimitedWithANamedError) {
  auto server = TcpStoreServer::start({.quotas = {.maxBytes = 1 << 20}});
  auto store = connectTcpStore(server->host(), server->port(), shortOptions());
  const std::string big(400 << 10, 'x');
  store->setString("one", big);
  store->setString("two", big);
  expectErrorWith<IoError>([&] { store->setString("three", big); }, "memory quota");
  // Replacing a value counts its old bytes out.
  store->setString("two", std::string(500 << 10, 'y'));
  EXPECT_EQ(store->getString("one"), big);
  EXPECT_FALSE(store->check("three"));
}

TEST(TcpStoreQuota, ConnectionsPerClientAreLimitedWithANamedError) {
  auto server = TcpStoreServer::start({.quotas = {.maxConnectionsPerHost = 2}});
  auto first = connectTcpStore(server->host(), server->port(), shortOptions());
  {
    auto second = connectTcpStore(server->host(), server->port(), shortOptions());
    expectErrorWith<IoError>(
        [&] { connectTcpStore(server->host(), server->port(), shortOptions()); },
        "connection quota");
  }
  // A closed connection frees its place (the server notices the close asynchronously).
  std::shared_ptr<Store> again;
  const auto deadline = Clock::now() + 10s;
  while (!again) {
    try {
      again = connectTcpStore(server->host(), server->port(), shortOptions());
    } catch (const IoError&) {
      if (Clock::now() > deadline) throw;
      std::this_thread::sleep_for(20ms);
    }
  }
  again->setString("k", "v");
  EXPECT_EQ(first->getString("k"), "v");
}

// A local user opens many connections and never proves anything: they are evicted, oldest first,
// and a client with the secret still gets in at once.
TEST(TcpStoreQuota, SilentConnectionsDoNotLockOutAClient) {
  auto server = TcpStoreServer::start(
      {.secret = "a-secret-of-16-bytes", .quotas = {.maxConnectionsPerHost = 8}});
  std::vector<net::Fd> silent;
  for (int i = 0; i < 200; ++i) {
    silent.push_back(net::connectTcp(server->host(), server->port(), Clock::now() + 5s, "silent"));
  }
  auto store =
      connectTcpStore(server->host(), server->port(),
                      {.timeout = 5s, .connectTimeout = 5s, .secret = "a-secret-of-16-bytes"});
  store->setString("k", "v");
  EXPECT_EQ(store->getString("k"), "v");
}

// Out of descriptors, accept() fails with EMFILE and the listener stays readable: a server that
// retries at once spins (thousands of failures a second). This one pauses, keeps serving the
// client it has, and accepts again once descriptors are free. Runs in a child process, whose
// descriptor limit it lowers.
TEST(TcpStoreServer, AcceptOutOfDescriptorsBacksOffAndKeepsServing) {
  int toParent[2];
  int toChild[2];
  ASSERT_EQ(::pipe(toParent), 0);
  ASSERT_EQ(::pipe(toChild), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int status = 10;
    try {
      auto server = TcpStoreServer::start({});
      auto store = connectTcpStore(server->host(), server->port(), shortOptions());
      store->setString("k", "v");
      int highest = 0;
      for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        highest = std::max(highest, std::stoi(entry.path().filename().string()));
      }
      rlimit saved{};
      ::getrlimit(RLIMIT_NOFILE, &saved);
      rlimit low = saved;
      low.rlim_cur = static_cast<rlim_t>(highest + 1);
      ::setrlimit(RLIMIT_NOFILE, &low);
      // Fill every free number below the limit, so the next accept() has none.
      std::vector<net::Fd> filler;
      while (true) {
        net::Fd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!fd.valid()) break;
        filler.push_back(std::move(fd));
      }
      const uint16_t port = server->port();
      [[maybe_unused]] ssize_t w = ::write(toParent[1], &port, sizeof(port));
      char go = 0;
      [[maybe_unused]] ssize_t r = ::read(toChild[0], &go, 1);  // the parent has connected
      std::this_thread::sleep_for(1500ms);
      const uint64_t failures = store::acceptFailures(*server);
      const bool served = store->getString("k") == "v";
      filler.clear();
      ::setrlimit(RLIMIT_NOFILE, &saved);
      auto later = connectTcpStore(server->host(), server->port(), shortOptions());
      const bool acceptsAgain = later->getString("k") == "v";
      std::fprintf(stderr, "accept failures in 1.5 s: %llu\n",
                   static_cast<unsigned long long>(failures));
      status = failures == 0 ? 2 : failures > 200 ? 3 : !served ? 4 : !acceptsAgain ? 5 : 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      status = 6;
    }
    ::_exit(status);
  }
  uint16_t port = 0;
  ASSERT_EQ(::read(toParent[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  std::vector<net::Fd> waiting;
  for (int i = 0; i < 4; ++i) {
    waiting.push_back(net::connectTcp("127.0.0.1", port, Clock::now() + 5s, "waiting client"));
  }
  ASSERT_EQ(::write(toChild[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: accept never failed (the limit did not bite), 3: it spun, 4: the connected client "
         "was not served meanwhile, 5: it did not accept again, 6: an error (see stderr)";
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) ::close(fd);
}

// add() overflow is an InvalidArgument on every store, and leaves the counter as it was.
TEST(StoreAdd, OverflowIsRefusedOnEveryStore) {
  std::shared_ptr<TcpStoreServer> server = TcpStoreServer::start({});
  const std::string dir = testing::makeTempDir("ringlet-store-overflow");
  std::vector<std::shared_ptr<Store>> stores{
      makeInProcessStore({.timeout = 5s}), makeFileStore(dir, {.timeout = 5s}),
      connectTcpStore(server->host(), server->port(), shortOptions())};
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (auto& store : stores) {
    SCOPED_TRACE(store->describe());
    EXPECT_EQ(store->add("up", kMax), kMax);
    expectErrorWith<InvalidArgument>([&] { store->add("up", 1); }, "64-bit counter");
    EXPECT_EQ(store->add("up", 0), kMax);
    EXPECT_EQ(store->add("down", kMin), kMin);
    expectErrorWith<InvalidArgument>([&] { store->add("down", -1); }, "64-bit counter");
    expectErrorWith<InvalidArgument>(
        [&] {
          store->add("fresh", kMin);
          store->add("fresh", kMin);
        },
        "64-bit counter");
  }
  std::filesystem::remove_all(dir);
}

TEST(FileStore, FilesAreForThisUserOnly) {
  const std::string parent = testing::makeTempDir("ringlet-file-store-mode");
  const std::string dir = parent + "/store";
  auto store = makeFileStore(dir, {.timeout = 5s});
  store->setString("ringlet/comm1/secret", "not for others");
  store->add("counter", 1);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the store's directory";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << entry.path();
  }
  std::filesystem::remove_all(parent);
}

// A FIFO in place of a key's file used to block get() forever (open() waits for a writer).
TEST(FileStore, FifoInPlaceOfAKeyIsRefused) {
  const std::string dir = testing::makeTempDir("ringlet-file-store-fifo");
  auto store = makeFileStore(dir, {.timeout = 2s});
  ASSERT_EQ(::mkfifo((dir + "/k-pipe").c_str(), 0600), 0);
  expectErrorWith<IoError>([&] { store->getString("pipe"); }, "not a regular file");
  std::filesystem::remove_all(dir);
}

// A huge (sparse) file used to end in bad_alloc; it is refused by size before any allocation.
TEST(FileStore, HugeFileIsRefused) {
  const std::string dir = testing::makeTempDir("ringlet-file-store-huge");
  auto store = makeFileStore(dir, {.timeout = 2s});
  {
    net::Fd fd(::open((dir + "/k-huge").c_str(), O_WRONLY | O_CREAT, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), off_t{1} << 40), 0);
  }
  expectErrorWith<IoError>([&] { store->getString("huge"); }, "more than a value may");
  expectErrorWith<IoError>([&] { store->add("huge", 1); }, "more than a value may");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringlet
