// The tcp transport's listener under stray and hostile clients: each is refused (and logged)
// while the real peer's link still comes up quickly and carries exact data.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <thread>

#include "ringlet/error.h"
#include "tests/support/ranks.h"
#include "tests/tcp/tcp_test_util.h"
#include "transports/tcp/handshake.h"

namespace ringlet::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;
using ringlet::testing::runThreadRanks;

net::Fd connectRaw(const std::string& address) {
  auto [host, port] = net::splitHostPort(address, "listener");
  return net::connectTcp(host, port, Clock::now() + 5s, "rank 0's listener");
}

std::string listenerOf(Store& store, int rank) {
  Bytes value = store.get(fmt::format("addr/{}", rank), 10s);
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

// True when the listener closed the connection within `timeout`.
bool closedWithin(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buffer[256];
  while (Clock::now() < deadline) {
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    net::waitFor(fd, POLLIN, std::min(deadline, Clock::now() + 50ms));
  }
  return false;
}

void exchangeOne(int rank, Endpoint& e) {
  auto wait = makeWait(rank, e.raw);
  auto out = pattern(rank, 9, 65536);
  e.to(0).send(out.data(), out.size(), wait);
  std::vector<std::byte> in(65536);
  e.to(0).recvInto(in.data(), in.size(), wait);
  EXPECT_EQ(firstWrong(in.data(), 1 - rank, 9, in.size()), -1);
  e.to(0).flush(wait);
}

TEST(TcpHandshake, StrayClientsAreRefusedWhileRealPeerConnects) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      Endpoint e = connectAll(makeContext(rank, size, store), {1});
      exchangeOne(rank, e);
      return;
    }
    const std::string address = listenerOf(*store, 0);
    // A silent client first: it holds a pending handshake that never completes.
    net::Fd silent = connectRaw(address);
    // A client that answers the nonce with garbage.
    net::Fd garbage = connectRaw(address);
    std::vector<uint8_t> junk(64, 0xab);
    net::writeFull(garbage.get(), junk.data(), junk.size(), Clock::now() + 2s, "listener");
    // A client that claims a huge job id.
    net::Fd huge = connectRaw(address);
    uint8_t header[kConnectorFixedBytes];
    put32(header, kMagic);
    put16(header + 4, kProtocolVersion);
    put16(header + 6, 60000);
    put32(header + 8, 1);
    put32(header + 12, 0);
    net::writeFull(huge.get(), header, sizeof(header), Clock::now() + 2s, "listener");
    // A client with the right format claiming to be rank 0 itself.
    net::Fd wrongRank = connectRaw(address);
    HandshakeIdentity self0{"tcp-test-job", "tcp-test-secret", 0, 2};
    EXPECT_THROW(connectorHandshake(wrongRank.get(), self0, 0, Clock::now() + 3s, address),
                 IoError);

    EXPECT_TRUE(closedWithin(garbage.get(), 2s)) << "garbage client not refused";
    EXPECT_TRUE(closedWithin(huge.get(), 2s)) << "huge job id not refused";

    // The real rank 1 still connects at once, with the silent client still pending.
    const auto start = Clock::now();
    Endpoint e = connectAll(makeContext(rank, size, store), {0});
    EXPECT_LT(Clock::now() - start, 2s);
    exchangeOne(rank, e);
  });
}

// A silent client is dropped after kHandshakeTimeout while the listener waits for its peer.
TEST(TcpHandshake, SilentClientIsDroppedAfterHandshakeTimeout) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      Endpoint e = connectAll(makeContext(rank, size, store), {1});
      exchangeOne(rank, e);
      return;
    }
    net::Fd silent = connectRaw(listenerOf(*store, 0));
    EXPECT_FALSE(closedWithin(silent.get(), kHandshakeTimeout - 1s));
    EXPECT_TRUE(closedWithin(silent.get(), 2s)) << "silent client still open";
    Endpoint e = connectAll(makeContext(rank, size, store), {0});
    exchangeOne(rank, e);
  });
}

TEST(TcpHandshake, WrongSecretOrJobIdIsRefused) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      Endpoint e = connectAll(makeContext(rank, size, store), {1});
      exchangeOne(rank, e);
      return;
    }
    {
      TcpTransport wrongSecret(makeContext(rank, size, store, "tcp-test-job", "not-the-secret"));
      try {
        wrongSecret.connect(std::vector<int>{0}, Clock::now() + 3s);
        ADD_FAILURE() << "a connector with the wrong secret was accepted";
      } catch (const IoError& error) {
        EXPECT_NE(std::string(error.what()).find("refused the handshake"), std::string::npos)
            << error.what();
      }
    }
    {
      TcpTransport wrongJob(makeContext(rank, size, store, "another-job", "tcp-test-secret"));
      EXPECT_THROW(wrongJob.connect(std::vector<int>{0}, Clock::now() + 3s), IoError);
    }
    Endpoint e = connectAll(makeContext(rank, size, store), {0});
    exchangeOne(rank, e);
  });
}

// The listener's proof: a connector refuses a listener that does not hold the secret.
TEST(TcpHandshake, ConnectorRefusesListenerWithoutSecret) {
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const std::string address = net::SocketAddress::local(listener.get()).toString();
  const HandshakeIdentity self{"job", "secret", 1, 2};
  std::string error;
  std::thread connector([&] {
    try {
      net::Fd fd = connectRaw(address);
      connectorHandshake(fd.get(), self, 0, Clock::now() + 3s, address);
    } catch (const IoError& e) {
      error = e.what();
    }
  });
  ASSERT_TRUE(net::waitFor(listener.get(), POLLIN, Clock::now() + 3s));
  net::Fd fd = net::acceptTcp(listener.get());
  ASSERT_TRUE(fd.valid());
  uint8_t hello[kListenerHelloBytes] = {};
  put32(hello, kMagic);
  put16(hello + 4, kProtocolVersion);
  net::writeFull(fd.get(), hello, sizeof(hello), Clock::now() + 2s, "connector");
  std::vector<uint8_t> theirs(kConnectorFixedBytes + self.jobId.size() + kMacBytes);
  net::readFull(fd.get(), theirs.data(), theirs.size(), Clock::now() + 2s, "connector");
  uint8_t accept[kListenerAcceptBytes] = {};  // right rank, made-up proof
  put32(accept, kMagic);
  put16(accept + 4, kProtocolVersion);
  put32(accept + 8, 0);
  net::writeFull(fd.get(), accept, sizeof(accept), Clock::now() + 2s, "connector");
  connector.join();
  EXPECT_NE(error.find("does not hold the job secret"), std::string::npos) << error;
}

TEST(TcpHandshake, MacDependsOnEveryInput) {
  const std::vector<uint8_t> nonce(32, 1);
  const Mac base = computeMac("secret", "label", {nonce});
  EXPECT_EQ(base, computeMac("secret", "label", {nonce}));
  EXPECT_NE(base, computeMac("secreT", "label", {nonce}));
  EXPECT_NE(base, computeMac("secret", "labeL", {nonce}));
  std::vector<uint8_t> other = nonce;
  other[31] = 2;
  EXPECT_NE(base, computeMac("secret", "label", {other}));
  EXPECT_NE(computeMac("", "label", {nonce}), computeMac("x", "label", {nonce}));
}

}  // namespace
}  // namespace ringlet::transport::tcp::testing
