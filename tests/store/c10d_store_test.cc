// The c10d store client (src/store/c10d_store.h) against a real PyTorch TCPStore server started
// by the test with /usr/bin/python3 (skipped with the reason when it cannot import torch): 1.13's
// on Debian 12, 2.6's classic server on Debian 13 (scripts/torch2-check.sh runs this test there),
// the libuv server of a PyTorch 2 that has one. Also against fakes of PyTorch 2.x's servers as
// they behave on the wire (every generation, whichever torch is installed), hostile fake servers,
// and Bootstrap::fromEnvironment's choice of it under torchrun.

#include "src/store/c10d_store.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/bootstrap.h"
#include "ringlet/error.h"
#include "src/config.h"
#include "src/net/socket.h"
#include "tests/launcher/tool_process.h"
#include "tests/store/env_guard.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using testing::EnvGuard;

constexpr const char* kPython = "/usr/bin/python3";

// Serves a c10d TCPStore on a free loopback port until killed, and prints "port <port> torch
// <version> <server>": the server torchrun's agent would make (libuv where 2.x has it, the
// classic one where a PyTorch 2 is built without libuv, as Debian's 2.6 is, or in 1.13).
constexpr const char* kServerScript = R"(
import sys, time
try:
    import torch, torch.distributed as dist
except Exception as e:
    print('cannot import torch.distributed: %s' % e, flush=True)
    sys.exit(3)
server = 'classic'
try:
    store = dist.TCPStore('127.0.0.1', 0, 1, True, wait_for_workers=False)
    server = 'libuv' if getattr(store, 'libuvBackend', False) else 'classic'
except RuntimeError as e:
    if 'libuv' not in str(e): raise
    store = dist.TCPStore('127.0.0.1', 0, 1, True, wait_for_workers=False, use_libuv=False)
print('port %d torch %s %s' % (store.port, torch.__version__, server), flush=True)
time.sleep(600)
)";

// A torch client: reads what ringlet set, answers with the bytes reversed, adds to ringlet's
// counter, and prints the counter.
constexpr const char* kTorchClientScript = R"(
import sys
from datetime import timedelta
import torch.distributed as dist
def client(**kw):
    return dist.TCPStore('127.0.0.1', int(sys.argv[1]), 1, False, timeout=timedelta(seconds=20),
                         **kw)
try:
    store = client()
except RuntimeError as e:
    if 'libuv' not in str(e): raise
    store = client(use_libuv=False)
value = store.get('ringlet/from_ringlet')
store.set('ringlet/from_torch', value[::-1])
print(store.add('ringlet/counter', 10), flush=True)
)";

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

class C10dTorchStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<testing::ToolProcess>(
        std::vector<std::string>{kPython, "-c", kServerScript});
    const bool answered = server_->waitForOutput(
        [](const std::string& out, const std::string&) {
          return out.find('\n') != std::string::npos;
        },
        60s);
    std::string out;
    if (answered) {
      server_->waitForOutput(
          [&](const std::string& o, const std::string&) {
            out = o;
            return true;
          },
          0ms);
    }
    if (!answered || !startsWith(out, "port ")) {
      skipReason_ = answered ? out : "the torch TCPStore server printed no port in 60 s";
      if (skipReason_.empty()) skipReason_ = "the torch TCPStore server did not start";
      server_.reset();
      return;
    }
    // "port <port> torch <version> <server>"
    std::istringstream words(out.substr(5));
    int port = 0;
    std::string torchWord;
    words >> port >> torchWord >> torchVersion_ >> serverKind_;
    port_ = static_cast<uint16_t>(port);
    std::printf("[          ] PyTorch %s, %s TCPStore server on port %d\n", torchVersion_.c_str(),
                serverKind_.c_str(), port);
  }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    if (!server_) GTEST_SKIP() << kPython << ": " << skipReason_;
  }

  static std::shared_ptr<Store> connect(std::string prefix = "ringlet/",
                                        std::chrono::milliseconds timeout = 10s) {
    return connectC10dStore(
        "127.0.0.1", port_,
        {.timeout = timeout, .connectTimeout = 10s, .keyPrefix = std::move(prefix)});
  }

  static bool torch1() { return startsWith(torchVersion_, "1."); }

  static std::unique_ptr<testing::ToolProcess> server_;
  static uint16_t port_;
  static std::string skipReason_;
  static std::string torchVersion_;
  static std::string serverKind_;  // "classic" or "libuv"
};

std::unique_ptr<testing::ToolProcess> C10dTorchStore::server_;
uint16_t C10dTorchStore::port_ = 0;
std::string C10dTorchStore::skipReason_;
std::string C10dTorchStore::torchVersion_;
std::string C10dTorchStore::serverKind_;

Bytes patternBytes(size_t n, int seed) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return out;
}

TEST_F(C10dTorchStore, SetGetCheckAdd) {
  auto store = connect("ringlet/basic/");
  EXPECT_FALSE(store->check("a"));
  store->setString("a", "hello");
  EXPECT_TRUE(store->check("a"));
  EXPECT_EQ(store->getString("a"), "hello");
  store->setString("a", "overwritten");
  EXPECT_EQ(store->getString("a"), "overwritten");
  store->set("empty", {});
  EXPECT_TRUE(store->get("empty").empty());
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -7), -2);
  EXPECT_EQ(store->getString("n"), "-2");
  EXPECT_NE(store->describe().find("c10d store 127.0.0.1:"), std::string::npos);
}

TEST_F(C10dTorchStore, LargeAndBinaryValues) {
  auto store = connect("ringlet/large/");
  for (size_t n : {size_t{1}, size_t{1439}, size_t{1441}, size_t{1} << 20, (size_t{3} << 20) + 7}) {
    const Bytes value = patternBytes(n, static_cast<int>(n));
    std::string key = "v";
    key += std::to_string(n);
    store->set(key, value);
    EXPECT_EQ(store->get(key), value) << n << " bytes";
  }
  const std::string binaryKey("k\0\xff", 3);
  store->setString(binaryKey, "x");
  EXPECT_EQ(store->getString(binaryKey), "x");
}

TEST_F(C10dTorchStore, PrefixesKeepKeysApart) {
  auto a = connect("ringlet/attempt_0/");
  auto b = connect("ringlet/attempt_1/");
  a->setString("secret", "old");
  EXPECT_FALSE(b->check("secret"));
  b->setString("secret", "new");
  EXPECT_EQ(a->getString("secret"), "old");
  EXPECT_EQ(b->getString("secret"), "new");
  // The full key on the wire is "/" + prefix + key.
  EXPECT_EQ(connect("")->getString("ringlet/attempt_1/secret"), "new");
}

TEST_F(C10dTorchStore, GetWaitsForASetFromAnotherThreadAndClient) {
  auto waiter = connect("ringlet/wait/");
  auto setter = connect("ringlet/wait/");
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    setter->setString("late", "arrived");
  });
  EXPECT_EQ(waiter->getString("late", 10s), "arrived");
  late.join();
  // Many threads parked in get() on one store never hold up a set() on it.
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    readers.emplace_back([&, i] {
      if (waiter->getString("go", 10s) == "now") ok += 1;
      (void)i;
    });
  }
  std::this_thread::sleep_for(100ms);
  waiter->setString("go", "now");
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 6);
}

TEST_F(C10dTorchStore, GetTimesOutNamingTheKeyAndTheStoreStillWorks) {
  auto store = connect("ringlet/timeout/");
  const auto start = std::chrono::steady_clock::now();
  try {
    store->get("never", 300ms);
    ADD_FAILURE() << "get() of a missing key returned";
  } catch (const TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("never"), std::string::npos) << what;
    EXPECT_NE(what.find("c10d store"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // The abandoned WAIT left nothing behind: the key can be set and read, by the same store.
  store->setString("never", "now set");
  EXPECT_EQ(store->getString("never"), "now set");
}

TEST_F(C10dTorchStore, TorchClientsSeeRingletKeysUnderThePrefix) {
  auto store = connect("ringlet/");
  store->setString("from_ringlet", "abc");
  EXPECT_EQ(store->add("counter", 1), 1);
  const auto result =
      testing::runTool({kPython, "-c", kTorchClientScript, std::to_string(port_)}, 60s);
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(result.out, "11\n");
  EXPECT_EQ(store->getString("from_torch"), "cba");
  EXPECT_EQ(store->getString("counter"), "11");
}

TEST_F(C10dTorchStore, HugeTimeoutsDoNotOverflow) {
  auto store = connectC10dStore("127.0.0.1", port_,
                                {.timeout = std::chrono::milliseconds::max(),
                                 .connectTimeout = std::chrono::milliseconds::max(),
                                 .keyPrefix = "ringlet/huge/"});
  store->setString("present", "yes");
  EXPECT_EQ(store->getString("present", std::chrono::milliseconds::max()), "yes");
  EXPECT_EQ(store->add("n", 2), 2);
}

TEST_F(C10dTorchStore, FindsTheInstalledTorchsProtocolAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  auto store = connect("ringlet/protocol/");
  EXPECT_EQ(c10dProtocolOf(*store), torch1() ? C10dProtocol::kTorch1 : C10dProtocol::kTorch2)
      << "PyTorch " << torchVersion_ << ", " << serverKind_ << " server";
  // Refused by closing (1.13's server, a VALIDATE it reads as a SET it cannot hold) or answered
  // (2.3 and later echo the PING): no probe waited for a silent server (5 s each).
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  store->setString("k", "v");
  EXPECT_EQ(store->getString("k"), "v");
}

TEST_F(C10dTorchStore, ArgumentsAreChecked) {
  auto store = connect();
  EXPECT_THROW(store->set("", {}), InvalidArgument);
  EXPECT_THROW(store->get(std::string(kMaxKeyBytes + 1, 'k')), InvalidArgument);
  EXPECT_THROW(connectC10dStore("", port_), InvalidArgument);
  EXPECT_THROW(connectC10dStore("127.0.0.1", 0), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Fake servers: whatever a c10d server answers is checked before it is trusted.

// Accepts one connection, and once the client has sent something, writes `reply` and then keeps
// the connection open (silent) until destroyed.
class FakeServer {
 public:
  explicit FakeServer(Bytes reply) : listener_(net::listenTcp("127.0.0.1", 0)) {
    port_ = net::SocketAddress::local(listener_.get()).port();
    thread_ = std::thread([this, reply = std::move(reply)] { serve(reply); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  void serve(const Bytes& reply) {
    const auto deadline = net::Clock::now() + 10s;
    net::Fd fd;
    while (!stop_ && !fd.valid() && net::Clock::now() < deadline) {
      if (net::waitFor(listener_.get(), POLLIN, net::Clock::now() + 50ms)) {
        fd = net::acceptTcp(listener_.get());
      }
    }
    if (!fd.valid()) return;
    while (!stop_ && net::Clock::now() < deadline) {
      if (net::waitFor(fd.get(), POLLIN, net::Clock::now() + 50ms)) break;
    }
    if (stop_) return;
    std::byte sink[256];
    (void)!::read(fd.get(), sink, sizeof(sink));
    if (!reply.empty()) net::writeFull(fd.get(), reply.data(), reply.size(), deadline, "fake");
    while (!stop_ && net::Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  }

  net::Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Bytes bytesOf(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::shared_ptr<Store> connectFake(const FakeServer& server) {
  return connectC10dStore(
      "127.0.0.1", server.port(),
      {.timeout = 2s, .connectTimeout = 2s, .keyPrefix = "ringlet/", .assumeTorch1 = true});
}

TEST(C10dStoreHostileServer, OversizedValueLengthIsRefusedBeforeAllocating) {
  // WAIT answered, then a GET reply claiming 2^40 bytes.
  FakeServer server(bytesOf({0, 0, 0, 0, 0, 0, 1, 0, 0}));
  auto store = connectFake(server);
  try {
    store->get("k", 1s);
    ADD_FAILURE() << "a 2^40-byte value was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the limit"), std::string::npos) << e.what();
  }
}

TEST(C10dStoreHostileServer, UnknownWaitReplyIsAnError) {
  FakeServer server(bytesOf({7}));
  auto store = connectFake(server);
  try {
    store->get("k", 1s);
    ADD_FAILURE() << "a WAIT reply of 7 was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed WAIT reply"), std::string::npos) << e.what();
  }
}

TEST(C10dStoreHostileServer, UnknownCheckReplyIsAnError) {
  FakeServer server(bytesOf({5}));
  auto store = connectFake(server);
  try {
    store->check("k");
    ADD_FAILURE() << "a CHECK reply of 5 was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed CHECK reply"), std::string::npos) << e.what();
  }
}

TEST(C10dStoreHostileServer, SilentServerTimesOutEveryCall) {
  FakeServer server({});
  auto store = connectC10dStore("127.0.0.1", server.port(),
                                {.timeout = 300ms, .connectTimeout = 2s, .assumeTorch1 = true});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store->setString("k", "v"), TimeoutError);
  EXPECT_THROW(store->get("k", 200ms), TimeoutError);
  EXPECT_THROW(store->add("k", 1), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(C10dStoreHostileServer, ClosedServerIsAnIoError) {
  // Replies half a GET header, then the fake stops answering and the connection closes.
  auto server = std::make_unique<FakeServer>(bytesOf({0, 1, 2}));
  auto store = connectFake(*server);
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    server.reset();
  });
  EXPECT_THROW(store->get("k", 1s), IoError);
  stopper.join();
}

TEST(C10dStoreHostileServer, NobodyListeningTimesOutNamingTheAddress) {
  const uint16_t port = testing::freePort();
  try {
    connectC10dStore("127.0.0.1", port, {.timeout = 1s, .connectTimeout = 300ms});
    ADD_FAILURE() << "connected to a port nobody listens on";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(port)), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// PyTorch 2.x servers, as they behave on the wire (torch/csrc/distributed/c10d/TCPStoreBackend
// .cpp and TCPStoreLibUvBackend.cpp): every connection must send VALIDATE and the magic first,
// and the queries are numbered one higher than 1.13's. Debian 12 installs 1.13 and Debian 13's
// 2.6 has no libuv server, so these fakes stand in for the generations not installed: they hold
// a real key-value map and serve many connections, one thread polling them all.

enum class Torch2Server {
  kPing,               // 2.3 and later: PING echoes its nonce
  kNoPingCloses,       // earlier: an unknown query, or a first message that is not VALIDATE,
                       // closes the connection
  kNoPingIgnoresFirst  // the libuv server before PING: ignores such a first message
};

class FakeTorch2Store {
 public:
  explicit FakeTorch2Store(Torch2Server kind)
      : kind_(kind), listener_(net::listenTcp("127.0.0.1", 0)) {
    port_ = net::SocketAddress::local(listener_.get()).port();
    thread_ = std::thread([this] { run(); });
  }
  ~FakeTorch2Store() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  struct Connection {
    net::Fd fd;
    std::string in;
    bool validated = false;
    bool ignored = false;
    bool broken = false;  // a reply could not be written (the client left): closed next
    std::vector<std::string> waitingFor;
  };

  // Reads a request's fields from `in` at `pos`; false while the request is still incomplete.
  struct Reader {
    const std::string& in;
    size_t pos = 0;
    bool raw(void* out, size_t n) {
      if (in.size() - pos < n) return false;
      std::memcpy(out, in.data() + pos, n);
      pos += n;
      return true;
    }
    bool string(std::string& out) {
      uint64_t n = 0;
      if (!raw(&n, 8) || n > (1u << 24) || in.size() - pos < n) return false;
      out.assign(in, pos, n);
      pos += n;
      return true;
    }
  };

  // As a server does, a client that left before its answer only loses its connection (the
  // handshake's probes close theirs once they have read what they need).
  static void reply(Connection& c, const void* data, size_t n) {
    if (c.broken) return;
    try {
      net::writeFull(c.fd.get(), data, n, net::Clock::now() + 5s, "fake 2.x");
    } catch (const Error&) {
      c.broken = true;
    }
  }
  static void replyU64(Connection& c, uint64_t v) { reply(c, &v, 8); }
  static void replyByte(Connection& c, uint8_t v) { reply(c, &v, 1); }

  bool allPresent(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return kv_.count(k); });
  }

  void wakeWaiters() {
    for (auto& c : connections_) {
      if (!c.waitingFor.empty() && allPresent(c.waitingFor)) {
        c.waitingFor.clear();
        replyByte(c, 0);  // STOP_WAITING
      }
    }
  }

  // Serves every whole request in c.in; false to close the connection.
  bool serve(Connection& c) {
    while (!c.ignored && !c.in.empty()) {
      Reader r{c.in};
      uint8_t query = 0;
      r.raw(&query, 1);
      if (!c.validated) {
        if (query != 0) {
          if (kind_ != Torch2Server::kNoPingIgnoresFirst) return false;
          c.ignored = true;
          return true;
        }
        uint32_t magic = 0;
        if (!r.raw(&magic, 4)) return true;
        if (magic != 0x3C85F7CE) return false;
        c.validated = true;
      } else if (query == 13) {  // PING
        if (kind_ != Torch2Server::kPing) return false;
        uint32_t nonce = 0;
        if (!r.raw(&nonce, 4)) return true;
        reply(c, &nonce, 4);
      } else if (query == 1) {  // SET
        std::string key, value;
        if (!r.string(key) || !r.string(value)) return true;
        kv_[key] = value;
        wakeWaiters();
      } else if (query == 3) {  // GET: empty if missing
        std::string key;
        if (!r.string(key)) return true;
        const std::string value = kv_.count(key) ? kv_[key] : "";
        replyU64(c, value.size());
        reply(c, value.data(), value.size());
      } else if (query == 4) {  // ADD
        std::string key;
        int64_t delta = 0;
        if (!r.string(key) || !r.raw(&delta, 8)) return true;
        const int64_t now = (kv_.count(key) ? std::stoll(kv_[key]) : 0) + delta;
        kv_[key] = std::to_string(now);
        replyU64(c, static_cast<uint64_t>(now));
        wakeWaiters();
      } else if (query == 5 || query == 6) {  // CHECK, WAIT
        uint64_t n = 0;
        if (!r.raw(&n, 8)) return true;
        std::vector<std::string> keys(n);
        for (auto& k : keys) {
          if (!r.string(k)) return true;
        }
        if (query == 5) {
          replyByte(c, allPresent(keys) ? 0 : 1);
        } else if (allPresent(keys)) {
          replyByte(c, 0);
        } else {
          c.waitingFor = keys;
        }
      } else if (query == 7) {  // GETNUMKEYS
        replyU64(c, kv_.size());
      } else {
        return false;
      }
      c.in.erase(0, r.pos);
    }
    return true;
  }

  void run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (auto& c : connections_) fds.push_back({c.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        net::Fd fd = net::acceptTcp(listener_.get());
        if (fd.valid()) {
          connections_.emplace_back();
          connections_.back().fd = std::move(fd);
        }
      }
      std::vector<bool> closing(connections_.size(), false);
      for (size_t i = 0; i + 1 < fds.size(); ++i) {
        if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buffer[4096];
        const ssize_t got = ::read(connections_[i].fd.get(), buffer, sizeof(buffer));
        if (got <= 0) {
          closing[i] = true;
          continue;
        }
        connections_[i].in.append(buffer, static_cast<size_t>(got));
        closing[i] = !serve(connections_[i]);
      }
      for (size_t i = 0; i < closing.size(); ++i) closing[i] = closing[i] || connections_[i].broken;
      for (size_t i = closing.size(); i-- > 0;) {
        if (closing[i]) connections_.erase(connections_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
  }

  const Torch2Server kind_;
  net::Fd listener_;
  uint16_t port_ = 0;
  std::map<std::string, std::string> kv_;
  std::vector<Connection> connections_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class C10dTorch2Store : public ::testing::TestWithParam<Torch2Server> {};

TEST_P(C10dTorch2Store, IsFoundAndServesEveryCall) {
  FakeTorch2Store server(GetParam());
  const C10dStoreOptions options{.timeout = 2s, .connectTimeout = 2s, .keyPrefix = "r/"};
  auto store = connectC10dStore("127.0.0.1", server.port(), options);
  EXPECT_EQ(c10dProtocolOf(*store), C10dProtocol::kTorch2);
  EXPECT_FALSE(store->check("a"));
  store->setString("a", "hello");
  EXPECT_TRUE(store->check("a"));
  EXPECT_EQ(store->getString("a"), "hello");
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -7), -2);
  const Bytes large = patternBytes(100000, 3);
  store->set("large", large);
  EXPECT_EQ(store->get("large"), large);
  // A get() parked in WAIT on one connection while another store's set() arrives.
  auto other = connectC10dStore("127.0.0.1", server.port(), options);
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    other->setString("late", "arrived");
  });
  EXPECT_EQ(store->getString("late", 5s), "arrived");
  late.join();
  EXPECT_THROW(store->get("never", 200ms), TimeoutError);
  EXPECT_EQ(other->getString("a"), "hello");  // the full key on the wire: "/r/a" for both
}

INSTANTIATE_TEST_SUITE_P(Generations, C10dTorch2Store,
                         ::testing::Values(Torch2Server::kPing, Torch2Server::kNoPingCloses,
                                           Torch2Server::kNoPingIgnoresFirst),
                         [](const auto& info) {
                           switch (info.param) {
                             case Torch2Server::kPing:
                               return std::string("WithPing");
                             case Torch2Server::kNoPingCloses:
                               return std::string("NoPing");
                             default:
                               return std::string("LibuvNoPing");
                           }
                         });

TEST(C10dStoreHostileServer, WrongPingEchoIsAnError) {
  FakeServer server(bytesOf({1, 2, 3, 4}));
  try {
    connectC10dStore("127.0.0.1", server.port(), {.timeout = 2s, .connectTimeout = 2s});
    ADD_FAILURE() << "a wrong PING echo was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed PING reply"), std::string::npos) << e.what();
  }
}

TEST(C10dStoreHostileServer, AServerThatAnswersNoGenerationIsNamed) {
  // Answers nothing and closes every connection: neither 1.13 nor 2.x.
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const uint16_t port = net::SocketAddress::local(listener.get()).port();
  std::atomic<bool> stop{false};
  std::thread closer([&] {
    while (!stop) {
      if (net::waitFor(listener.get(), POLLIN, net::Clock::now() + 20ms)) {
        net::Fd fd = net::acceptTcp(listener.get());
      }
    }
  });
  try {
    connectC10dStore("127.0.0.1", port, {.timeout = 2s, .connectTimeout = 2s});
    ADD_FAILURE() << "a server that closes every connection was taken for a TCPStore";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("answered neither"), std::string::npos) << e.what();
  }
  stop = true;
  closer.join();
}

// ---------------------------------------------------------------------------------------------
// Bootstrap::fromEnvironment picks the c10d store under torchrun's agent store.

void setTorchrun(EnvGuard& env, uint16_t port) {
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", std::to_string(port));
}

TEST_F(C10dTorchStore, BootstrapUsesTheAgentStoreUnderTorchrun) {
  EnvGuard env;
  setTorchrun(env, port_);
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  env.set("TORCHELASTIC_RESTART_COUNT", "2");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_EQ(b.source, "torchrun");
  EXPECT_NE(b.store->describe().find("c10d store"), std::string::npos) << b.store->describe();
  b.store->setString("bootstrap-key", "from rank 0");
  // Under "ringlet/attempt_<TORCHELASTIC_RESTART_COUNT>/".
  EXPECT_EQ(connect("")->getString("ringlet/attempt_2/bootstrap-key"), "from rank 0");
}

TEST_F(C10dTorchStore, RingletStoreC10dForcesIt) {
  EnvGuard env;
  setTorchrun(env, port_);
  env.set("RINGLET_STORE", "c10d");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_NE(b.store->describe().find("c10d store"), std::string::npos) << b.store->describe();
  b.store->setString("forced", "yes");
  EXPECT_EQ(connect("")->getString("ringlet/attempt_0/forced"), "yes");
}

TEST(C10dBootstrap, RingletStoreRingletKeepsRankZeroHosting) {
  EnvGuard env;
  setTorchrun(env, testing::freePort());
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  env.set("RINGLET_STORE", "ringlet");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_NE(b.store->describe().find("tcp store"), std::string::npos) << b.store->describe();
}

TEST(C10dBootstrap, AgentStoreFalseKeepsRankZeroHosting) {
  EnvGuard env;
  setTorchrun(env, testing::freePort());
  env.set("TORCHELASTIC_USE_AGENT_STORE", "False");
  config::reloadEnvironment();
  Bootstrap b = Bootstrap::fromEnvironment();
  EXPECT_NE(b.store->describe().find("tcp store"), std::string::npos) << b.store->describe();
}

void expectInvalid(const std::string& needle) {
  try {
    config::reloadEnvironment();
    Bootstrap::fromEnvironment();
    ADD_FAILURE() << "fromEnvironment() accepted it";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(C10dBootstrap, BadSettingsAreNamed) {
  {
    EnvGuard env;
    env.set("RINGLET_STORE", "redis");
    expectInvalid("RINGLET_STORE=redis is not one of auto, ringlet, c10d");
  }
  {
    EnvGuard env;
    env.set("RINGLET_STORE", "c10d");
    expectInvalid("RINGLET_STORE=c10d needs MASTER_ADDR and MASTER_PORT");
  }
  {
    EnvGuard env;
    env.set("RINGLET_STORE", "c10d");
    env.set("RINGLET_STORE_ADDR", "127.0.0.1:1");
    env.set("RANK", "0");
    env.set("WORLD_SIZE", "1");
    expectInvalid("cannot be used with RINGLET_STORE_ADDR");
  }
  {
    EnvGuard env;
    setTorchrun(env, 29500);
    env.set("TORCHELASTIC_USE_AGENT_STORE", "yes");
    expectInvalid("TORCHELASTIC_USE_AGENT_STORE='yes' is neither True nor False");
  }
  {
    EnvGuard env;
    setTorchrun(env, 29500);
    env.set("TORCHELASTIC_RESTART_COUNT", "-1");
    expectInvalid("TORCHELASTIC_RESTART_COUNT='-1' is out of range");
  }
}

}  // namespace
}  // namespace ringlet
