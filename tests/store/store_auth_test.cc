// The TCP store's authentication: a client must prove the job secret over fresh nonces before
// anything is read; a recorded session replayed later, a client without the secret and a server
// without it all fail by name.

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/auth.h"
#include "src/net/socket.h"
#include "src/store/tcp_store_protocol.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
namespace wire = store::wire;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "0123456789abcdef-job-secret";

TcpStoreClientOptions withSecret(std::string secret) {
  return {.timeout = 5s, .connectTimeout = 3s, .secret = std::move(secret)};
}

net::Fd rawConnect(const TcpStoreServer& server) {
  return net::connectTcp(server.host(), server.port(), Clock::now() + 3s, "test raw client");
}

// Everything the peer sends until it closes (or `within` passes).
std::string drain(int fd, std::chrono::milliseconds within) {
  std::string all;
  const auto deadline = Clock::now() + within;
  char buffer[4096];
  while (Clock::now() < deadline) {
    if (!net::waitFor(fd, POLLIN, deadline)) break;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      all.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    break;
  }
  return all;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

void expectIoErrorWith(const std::function<void()>& body, const std::string& text) {
  try {
    body();
    ADD_FAILURE() << "no error; wanted an IoError with '" << text << "'";
  } catch (const IoError& e) {
    EXPECT_TRUE(contains(e.what(), text)) << e.what();
  }
}

// The request bytes of one GET of `key` (timeout 1 s).
std::string getRequest(const std::string& key) {
  std::string out(wire::kRequestHeaderBytes, '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  p[0] = static_cast<std::byte>(wire::Command::kGet);
  wire::putU32(p + 1, static_cast<uint32_t>(key.size()));
  wire::putU64(p + 5, 8);
  out += key;
  std::string timeout(8, '\0');
  wire::putU64(reinterpret_cast<std::byte*>(timeout.data()), 1000);
  return out + timeout;
}

TEST(TcpStoreAuth, ClientWithTheSecretIsServed) {
  auto server = TcpStoreServer::start({.secret = kSecret});
  auto store = connectTcpStore(server->host(), server->port(), withSecret(kSecret));
  store->setString("k", "v");
  EXPECT_EQ(store->getString("k"), "v");
  EXPECT_EQ(store->add("n", 2), 2);
}

// A local user without the secret connects and tries to read a key. The old
// protocol answered after an 8-byte hello; now nothing is answered without a proof.
TEST(TcpStoreAuth, ClientWithoutTheSecretReadsNothing) {
  auto server = TcpStoreServer::start({.secret = kSecret});
  connectTcpStore(server->host(), server->port(), withSecret(kSecret))
      ->setString("ringlet/comm1/info/0", "the-private-value");

  net::Fd raw = rawConnect(*server);
  const std::string hello(wire::kHello, sizeof(wire::kHello));
  const std::string request = hello + getRequest("ringlet/comm1/info/0");
  net::writeFull(raw.get(), request.data(), request.size(), Clock::now() + 2s, "raw");
  const std::string answer = drain(raw.get(), 5s);
  EXPECT_FALSE(contains(answer, "the-private-value"));

  expectIoErrorWith(
      [&] { connectTcpStore(server->host(), server->port(), withSecret("another-secret-x")); },
      "secret check");
  expectIoErrorWith([&] { connectTcpStore(server->host(), server->port(), withSecret("")); },
                    "secret check");
  // The server still serves its own clients.
  EXPECT_EQ(connectTcpStore(server->host(), server->port(), withSecret(kSecret))
                ->getString("ringlet/comm1/info/0"),
            "the-private-value");
}

// A relay records every byte a real client sends in one session; replaying them later on a new
// connection gets nothing back: the server's nonce is new, so the recorded proof is wrong.
TEST(TcpStoreAuth, RecordedSessionReplayedLaterFails) {
  auto server = TcpStoreServer::start({.secret = kSecret});
  net::Fd relayListener = net::listenTcp("127.0.0.1", 0);
  const uint16_t relayPort = net::SocketAddress::local(relayListener.get()).port();
  std::string recorded;
  std::thread relay([&] {
    ASSERT_TRUE(net::waitFor(relayListener.get(), POLLIN, Clock::now() + 10s));
    net::Fd client = net::acceptTcp(relayListener.get());
    net::Fd upstream = rawConnect(*server);
    std::vector<pollfd> fds{{client.get(), POLLIN, 0}, {upstream.get(), POLLIN, 0}};
    char buffer[65536];
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
      if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = ::recv(fds[i].fd, buffer, sizeof(buffer), 0);
        if (n <= 0) return;
        if (i == 0) recorded.append(buffer, static_cast<size_t>(n));
        net::writeFull(fds[1 - i].fd, buffer, static_cast<size_t>(n), deadline, "relay");
      }
    }
  });
  {
    auto store = connectTcpStore("127.0.0.1", relayPort, withSecret(kSecret));
    store->setString("ringlet/comm1/secret", "the-private-value");
    EXPECT_EQ(store->getString("ringlet/comm1/secret"), "the-private-value");
  }
  relay.join();
  ASSERT_GT(recorded.size(), wire::kProofBytes);

  net::Fd replay = rawConnect(*server);
  net::writeFull(replay.get(), recorded.data(), recorded.size(), Clock::now() + 2s, "replay");
  const std::string answer = drain(replay.get(), 5s);
  EXPECT_FALSE(contains(answer, "the-private-value"));
  EXPECT_TRUE(contains(answer, "secret check")) << "the refusal says why";
}

// The client checks the server's proof too: a listener on the store's address that does not hold
// the secret is refused by name.
TEST(TcpStoreAuth, ClientRefusesAServerWithoutTheSecret) {
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const uint16_t port = net::SocketAddress::local(listener.get()).port();
  std::thread impostor([&] {
    ASSERT_TRUE(net::waitFor(listener.get(), POLLIN, Clock::now() + 10s));
    net::Fd fd = net::acceptTcp(listener.get());
    std::byte greeting[wire::kGreetingBytes] = {};
    std::memcpy(greeting, wire::kHello, sizeof(wire::kHello));
    net::writeFull(fd.get(), greeting, sizeof(greeting), Clock::now() + 5s, "impostor");
    std::byte proof[wire::kProofBytes];
    net::readFull(fd.get(), proof, sizeof(proof), Clock::now() + 5s, "impostor");
    std::byte answer[wire::kAnswerBytes] = {};  // kOk with a made-up proof
    net::writeFull(fd.get(), answer, sizeof(answer), Clock::now() + 5s, "impostor");
    drain(fd.get(), 5s);
  });
  expectIoErrorWith([&] { connectTcpStore("127.0.0.1", port, withSecret(kSecret)); },
                    "the server failed the secret check");
  impostor.join();
}

TEST(TcpStoreAuth, NoSecretMeansLoopbackOnly) {
  try {
    TcpStoreServer::start({.host = "0.0.0.0"});
    ADD_FAILURE() << "an unauthenticated store was opened to the network";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "RINGLET_JOB_SECRET")) << e.what();
  }
  // With a secret it may listen on every interface; without one, loopback works as before.
  auto open = TcpStoreServer::start({.host = "0.0.0.0", .secret = kSecret});
  auto loop = TcpStoreServer::start({});
  auto store = connectTcpStore(loop->host(), loop->port(), withSecret(""));
  store->setString("k", "v");
  EXPECT_EQ(store->getString("k"), "v");
}

// Without a secret the store trusts only its own user: another user's process on this host is
// refused by name (it used to read and write every key).
TEST(TcpStoreAuth, NoSecretAdmitsOnlyThisUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another user";
  auto server = TcpStoreServer::start({});
  connectTcpStore(server->host(), server->port(), withSecret(""))->setString("k", "private");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int status = 3;
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
      try {
        auto store = connectTcpStore(server->host(), server->port(), withSecret(""));
        status = store->getString("k") == "private" ? 1 : 2;
      } catch (const IoError& e) {
        status = contains(e.what(), "admits only uid 0") ? 0 : 4;
        if (status != 0) std::fprintf(stderr, "child: %s\n", e.what());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        status = 5;
      }
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: uid 65534 read the value; 3: setuid failed; 2/4/5: "
                                       "another outcome (see stderr)";
  EXPECT_EQ(connectTcpStore(server->host(), server->port(), withSecret(""))->getString("k"),
            "private");
}

TEST(TcpStoreAuth, MacIsLengthPrefixedAndKeyed) {
  const std::vector<uint8_t> ab{'a', 'b'}, a{'a'}, b{'b'}, empty;
  EXPECT_NE(auth::hmac("k", "l", {ab, empty}), auth::hmac("k", "l", {a, b}));
  EXPECT_NE(auth::hmac("k", "l", {a}), auth::hmac("K", "l", {a}));
  EXPECT_EQ(auth::hmac("k", "l", {a}), auth::hmac("k", "l", {a}));
  EXPECT_THROW(auth::decodeHexSecret("00ff", "RINGLET_JOB_SECRET"), InvalidArgument);
  EXPECT_EQ(auth::decodeHexSecret(std::string(32, 'a'), "x").size(), 16u);
}

}  // namespace
}  // namespace ringlet
