// The TCP store's sealed connections (TcpStoreServer::Options::sealed, RINGLET_SOCKET_ENCRYPT=1):
// every byte after the challenge-response travels in AES-256-GCM records. A relay between client
// and server stands for an attacker on the path: it reads what crosses and may flip one bit. In
// clear it reads the keys and values and a flipped bit changes a stored value unnoticed (the
// tests show both, so they can fail); sealed it reads neither, and a flipped bit fails the
// request by name and changes nothing.

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/net/socket.h"
#include "src/store/tcp_store_protocol.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
namespace wire = store::wire;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "0123456789abcdef-sealed-job-secret";

TcpStoreClientOptions clientOptions(bool sealed, std::string secret = kSecret) {
  return {.timeout = 5s, .connectTimeout = 3s, .secret = std::move(secret), .sealed = sealed};
}

std::unique_ptr<TcpStoreServer> startServer(bool sealed) {
  return TcpStoreServer::start({.secret = kSecret, .sealed = sealed});
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

template <typename E>
std::string errorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

// Bytes before the first sealed one, each way: the client's proof; the greeting and the answer.
constexpr size_t kClientOpening = wire::kProofBytes;
constexpr size_t kServerOpening = wire::kGreetingBytes + wire::kAnswerBytes;

// A relay on a port of its own for the connections of one client to `server`: forwards every
// byte both ways, records them, and may flip bit 0 of one byte (its offset in one direction).
class Relay {
 public:
  struct Flip {
    bool towardsServer = true;
    size_t offset = 0;
  };

  Relay(const TcpStoreServer& server, std::optional<Flip> flip = std::nullopt)
      : server_(server), flip_(flip), listener_(net::listenTcp("127.0.0.1", 0)) {
    port_ = net::SocketAddress::local(listener_.get()).port();
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }
  // Everything that crossed so far, each way.
  std::string towardsServer() {
    std::lock_guard lock(mutex_);
    return up_;
  }
  std::string towardsClient() {
    std::lock_guard lock(mutex_);
    return down_;
  }

 private:
  struct Pair {
    net::Fd client;
    net::Fd server;
    size_t sentUp = 0;
    size_t sentDown = 0;
    bool ended = false;
  };

  void run() {
    std::vector<Pair> pairs;
    char buffer[65536];
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (const Pair& p : pairs) {
        fds.push_back({p.client.get(), POLLIN, 0});
        fds.push_back({p.server.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        Pair p;
        p.client = net::acceptTcp(listener_.get());
        p.server = net::connectTcp(server_.host(), server_.port(), Clock::now() + 3s, "relay");
        pairs.push_back(std::move(p));
        continue;
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Pair& p = pairs[(i - 1) / 2];
        if (p.ended) continue;
        const bool up = (i - 1) % 2 == 0;
        const int from = up ? p.client.get() : p.server.get();
        const int to = up ? p.server.get() : p.client.get();
        const ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (n <= 0) {
          // One side ended: end the other.
          ::shutdown(to, SHUT_RDWR);
          p.ended = true;
          continue;
        }
        size_t& sent = up ? p.sentUp : p.sentDown;
        if (flip_ && flip_->towardsServer == up && flip_->offset >= sent &&
            flip_->offset < sent + static_cast<size_t>(n)) {
          buffer[flip_->offset - sent] ^= 1;
        }
        {
          std::lock_guard lock(mutex_);
          (up ? up_ : down_).append(buffer, static_cast<size_t>(n));
        }
        sent += static_cast<size_t>(n);
        try {
          net::writeFull(to, buffer, static_cast<size_t>(n), Clock::now() + 3s, "relay");
        } catch (const Error&) {
        }
      }
      std::erase_if(pairs, [](const Pair& p) { return p.ended; });
    }
  }

  const TcpStoreServer& server_;
  const std::optional<Flip> flip_;
  net::Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string up_;
  std::string down_;
  std::thread thread_;
};

TEST(TcpStoreSealed, EveryCommandWorksSealed) {
  auto server = startServer(true);
  auto store = connectTcpStore(server->host(), server->port(), clientOptions(true));
  store->setString("k", "v");
  EXPECT_EQ(store->getString("k"), "v");
  EXPECT_EQ(store->add("n", 2), 2);
  EXPECT_EQ(store->add("n", -5), -3);
  EXPECT_TRUE(store->check("k"));
  EXPECT_FALSE(store->check("missing"));
  EXPECT_THROW(store->get("missing", 100ms), TimeoutError);
  // A value of many records (64 KiB of plaintext each), past what one side may hold sealed and
  // unsent (1 MiB): both ends wait for the socket and go on.
  Bytes large(5 << 20);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<std::byte>(i * 7 + i / 4099);
  store->set("large", large);
  EXPECT_EQ(store->get("large"), large);
  // A GET parked on a key another connection sets later, several threads at once.
  std::vector<std::thread> waiters;
  std::atomic<int> woken{0};
  for (int t = 0; t < 4; ++t) {
    waiters.emplace_back([&, t] {
      if (store->getString("late/" + std::to_string(t), 5s) == "here") ++woken;
    });
  }
  auto other = connectTcpStore(server->host(), server->port(), clientOptions(true));
  std::this_thread::sleep_for(50ms);
  for (int t = 0; t < 4; ++t) other->setString("late/" + std::to_string(t), "here");
  for (auto& w : waiters) w.join();
  EXPECT_EQ(woken.load(), 4);
}

// What an attacker on the path reads: in clear the keys and values; sealed neither.
TEST(TcpStoreSealed, NothingCrossesInClear) {
  for (const bool sealed : {false, true}) {
    SCOPED_TRACE(sealed ? "sealed" : "in clear");
    auto server = startServer(sealed);
    Relay relay(*server);
    {
      auto store = connectTcpStore("127.0.0.1", relay.port(), clientOptions(sealed));
      store->setString("ringlet/comm1/info/0", "the-private-value-10.0.0.7:4242");
      EXPECT_EQ(store->getString("ringlet/comm1/info/0"), "the-private-value-10.0.0.7:4242");
      EXPECT_EQ(store->add("ringlet/comm1/arrived", 41), 41);
    }
    const std::string up = relay.towardsServer();
    const std::string down = relay.towardsClient();
    EXPECT_GT(up.size(), kClientOpening);
    EXPECT_GT(down.size(), kServerOpening);
    EXPECT_EQ(contains(up, "ringlet/comm1/info/0"), !sealed);
    EXPECT_EQ(contains(up, "the-private-value"), !sealed);
    EXPECT_EQ(contains(down, "the-private-value"), !sealed);
  }
}

// A bit flipped in a SET's value on the way: in clear the server stores the changed value and
// nobody notices; sealed the server drops the connection, the client's set fails, nothing is
// stored.
TEST(TcpStoreSealed, AChangedRequestIsRefusedNotApplied) {
  const std::string key = "ringlet/comm1/info/1";
  const std::string value = "AAAAAAAA";
  for (const bool sealed : {false, true}) {
    SCOPED_TRACE(sealed ? "sealed" : "in clear");
    auto server = startServer(sealed);
    // The value's first byte: after the request's header and key, and the record's length.
    const size_t offset =
        kClientOpening + (sealed ? 4 : 0) + wire::kRequestHeaderBytes + key.size();
    Relay relay(*server, Relay::Flip{.towardsServer = true, .offset = offset});
    auto store = connectTcpStore("127.0.0.1", relay.port(), clientOptions(sealed));
    const std::string error = errorOf<IoError>([&] { store->setString(key, value); });
    auto direct = connectTcpStore(server->host(), server->port(), clientOptions(sealed));
    if (sealed) {
      EXPECT_TRUE(contains(error, "closed the connection")) << error;
      EXPECT_FALSE(direct->check(key)) << "a changed request was applied";
    } else {
      EXPECT_EQ(error, "no error");
      EXPECT_EQ(direct->getString(key), "@AAAAAAA") << "the relay changed the value in clear";
    }
  }
}

// A bit flipped in a reply: in clear the client takes the changed value; sealed its get fails,
// by name.
TEST(TcpStoreSealed, AChangedReplyFailsByName) {
  const std::string key = "ringlet/comm1/info/2";
  for (const bool sealed : {false, true}) {
    SCOPED_TRACE(sealed ? "sealed" : "in clear");
    auto server = startServer(sealed);
    connectTcpStore(server->host(), server->port(), clientOptions(sealed))
        ->setString(key, "BBBBBBBB");
    // The reply's first value byte: after its header (and the record's length).
    const size_t offset = kServerOpening + (sealed ? 4 : 0) + wire::kReplyHeaderBytes;
    Relay relay(*server, Relay::Flip{.towardsServer = false, .offset = offset});
    auto store = connectTcpStore("127.0.0.1", relay.port(), clientOptions(sealed));
    if (sealed) {
      const std::string error = errorOf<IoError>([&] { store->getString(key); });
      EXPECT_TRUE(contains(error, "fail authentication")) << error;
      EXPECT_TRUE(contains(error, "RINGLET_SOCKET_ENCRYPT")) << error;
    } else {
      EXPECT_EQ(store->getString(key), "CBBBBBBB") << "the relay changed the reply in clear";
    }
  }
}

// A sealing server refuses a client that does not seal, and says why; a wrong secret is still a
// failed secret check.
TEST(TcpStoreSealed, ASealingServerRefusesAClearClientByName) {
  auto server = startServer(true);
  std::string error = errorOf<IoError>(
      [&] { connectTcpStore(server->host(), server->port(), clientOptions(false)); });
  EXPECT_TRUE(contains(error, "the client does not seal")) << error;
  EXPECT_TRUE(contains(error, "RINGLET_SOCKET_ENCRYPT")) << error;
  error = errorOf<IoError>(
      [&] { connectTcpStore(server->host(), server->port(), clientOptions(true, "other")); });
  EXPECT_TRUE(contains(error, "secret check")) << error;
}

// A server that does not seal serves a client that does, sealed (the client's choice wins: a
// rank started with RINGLET_SOCKET_ENCRYPT=1 under a launcher without it), and its clear clients
// as before.
TEST(TcpStoreSealed, AClearServerServesASealingClientSealed) {
  auto server = startServer(false);
  Relay relay(*server);
  {
    auto sealedClient = connectTcpStore("127.0.0.1", relay.port(), clientOptions(true));
    sealedClient->setString("ringlet/comm1/info/3", "the-private-value");
    EXPECT_EQ(sealedClient->getString("ringlet/comm1/info/3"), "the-private-value");
  }
  EXPECT_FALSE(contains(relay.towardsServer(), "the-private-value"));
  EXPECT_FALSE(contains(relay.towardsClient(), "the-private-value"));
  auto clearClient = connectTcpStore(server->host(), server->port(), clientOptions(false));
  EXPECT_EQ(clearClient->getString("ringlet/comm1/info/3"), "the-private-value");
}

TEST(TcpStoreSealed, SealingNeedsASecret) {
  std::string error = errorOf<InvalidArgument>([] { TcpStoreServer::start({.sealed = true}); });
  EXPECT_TRUE(contains(error, "RINGLET_SOCKET_ENCRYPT")) << error;
  auto server = TcpStoreServer::start({});
  error = errorOf<InvalidArgument>(
      [&] { connectTcpStore(server->host(), server->port(), clientOptions(true, "")); });
  EXPECT_TRUE(contains(error, "need a job secret")) << error;
}

}  // namespace
}  // namespace ringlet
