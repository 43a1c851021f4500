// The tcp transport's listener under stray and hostile clients: each is refused (and logged)
// while the real peer's link still comes up quickly and carries exact data.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <atomic>
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

// True when the listener was seen to have closed the connection before `deadline` (reads and
// drops what it sent). A close seen only after the deadline counts as not closed before it.
bool closedBefore(int fd, Deadline deadline) {
  char buffer[256];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    const bool closed = n == 0 || (n < 0 && errno == ECONNRESET);
    if (Clock::now() >= deadline) return false;
    if (closed) return true;
    if (n <= 0) net::waitFor(fd, POLLIN, std::min(deadline, Clock::now() + 50ms));
  }
}

bool closedWithin(int fd, std::chrono::milliseconds timeout) {
  return closedBefore(fd, Clock::now() + timeout);
}

// True while the listener keeps the connection open (reads and drops what it sent).
bool stillOpen(int fd) {
  char buffer[256];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
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

// The silent client connects first, so the listener's handshake deadline for it comes no later
// than for any other client: while it is still open, a client that was closed was refused for
// what it sent, not dropped for silence, and the real peer was not held up by it. No check
// depends on how fast the listener is (only on it being well within kHandshakeTimeout).
TEST(TcpHandshake, StrayClientsAreRefusedWhileRealPeerConnects) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      Endpoint e = connectAll(makeContext(rank, size, store), {1}, 30s);
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
    uint8_t header[kConnectorFixedBytes] = {};
    put32(header, kMagic);
    put16(header + 4, kProtocolVersion);
    put16(header + 6, 60000);
    put32(header + 8, 1);
    put32(header + 12, 0);
    net::writeFull(huge.get(), header, sizeof(header), Clock::now() + 2s, "listener");
    // A client with the right format claiming to be rank 0 itself.
    net::Fd wrongRank = connectRaw(address);
    HandshakeIdentity self0{"tcp-test-job", "tcp-test-secret", 0, 2};
    EXPECT_THROW(connectorHandshake(wrongRank.get(), self0, 0, Clock::now() + 30s, address),
                 IoError);

    EXPECT_TRUE(closedWithin(garbage.get(), 30s)) << "garbage client not refused";
    EXPECT_TRUE(closedWithin(huge.get(), 30s)) << "huge job id not refused";
    EXPECT_TRUE(stillOpen(silent.get()))
        << "the silent client was dropped already: the others may have been dropped for silence "
           "too, not refused";

    // The real rank 1 still connects, while the silent client is still pending.
    Endpoint e = connectAll(makeContext(rank, size, store), {0}, 30s);
    EXPECT_TRUE(stillOpen(silent.get()))
        << "the real peer got through only once the silent client was dropped";
    exchangeOne(rank, e);
  });
}

// A silent client is dropped after kHandshakeTimeout while the listener waits for its peer. The
// listener starts the client's clock when it accepts it, after `start`: the client cannot be
// dropped before start + kHandshakeTimeout, however slow either side is.
TEST(TcpHandshake, SilentClientIsDroppedAfterHandshakeTimeout) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      Endpoint e = connectAll(makeContext(rank, size, store), {1}, 30s);
      exchangeOne(rank, e);
      return;
    }
    const std::string address = listenerOf(*store, 0);
    const auto start = Clock::now();
    net::Fd silent = connectRaw(address);
    EXPECT_FALSE(closedBefore(silent.get(), start + kHandshakeTimeout - 100ms))
        << "dropped before kHandshakeTimeout";
    EXPECT_TRUE(closedWithin(silent.get(), 30s)) << "silent client never dropped";
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
        // The listener's answer names the reason (wire.h, HandshakeAnswer).
        EXPECT_NE(std::string(error.what())
                      .find("refused the handshake: this rank's job id or "
                            "secret is not its own"),
                  std::string::npos)
            << error.what();
      }
    }
    {
      TcpTransport wrongJob(makeContext(rank, size, store, "another-job", "tcp-test-secret"));
      try {
        wrongJob.connect(std::vector<int>{0}, Clock::now() + 3s);
        ADD_FAILURE() << "a connector of another job was accepted";
      } catch (const IoError& error) {
        EXPECT_NE(std::string(error.what()).find("job id or secret"), std::string::npos)
            << error.what();
      }
    }
    Endpoint e = connectAll(makeContext(rank, size, store), {0});
    exchangeOne(rank, e);
  });
}

// A made-up listener: takes one connection on `listener` (none within 30 s: an invalid Fd),
// greets it as a listener of one stream per pair and reads the whole of what `connector`, which
// dialed `address`, sends; returns the connection, unanswered.
net::Fd greetAndTakeProof(int listener, const HandshakeIdentity& connector,
                          const std::string& address) {
  if (!net::waitFor(listener, POLLIN, Clock::now() + 30s)) return {};
  net::Fd fd = net::acceptTcp(listener);
  uint8_t hello[kListenerHelloBytes] = {};
  put32(hello, kMagic);
  put16(hello + 4, kProtocolVersion);
  put16(hello + 6, 1);  // streams per rank pair
  net::writeFull(fd.get(), hello, sizeof(hello), Clock::now() + 30s, "connector");
  std::vector<uint8_t> theirs(kConnectorFixedBytes + connector.jobId.size() + address.size() +
                              kMacBytes);
  net::readFull(fd.get(), theirs.data(), theirs.size(), Clock::now() + 30s, "connector");
  return fd;
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
      connectorHandshake(fd.get(), self, 0, Clock::now() + 30s, address);
    } catch (const IoError& e) {
      error = e.what();
    }
  });
  net::Fd fd = greetAndTakeProof(listener.get(), self, address);
  ASSERT_TRUE(fd.valid());
  uint8_t accept[kListenerAcceptBytes] = {};  // right rank, made-up proof
  put32(accept, kMagic);
  put16(accept + 4, kProtocolVersion);
  put32(accept + 8, 0);
  net::writeFull(fd.get(), accept, sizeof(accept), Clock::now() + 30s, "connector");
  connector.join();
  EXPECT_NE(error.find("does not hold the job secret"), std::string::npos) << error;
}

// A listener that closes without its greeting (its rank died as the connection came in) is a
// PeerError naming that rank, not a failure of this one's own.
TEST(TcpHandshake, ListenerThatClosesBeforeItsGreetingIsAPeerError) {
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const std::string address = net::SocketAddress::local(listener.get()).toString();
  std::thread closer([&] {
    if (!net::waitFor(listener.get(), POLLIN, Clock::now() + 30s)) return;
    net::Fd fd = net::acceptTcp(listener.get());  // and closed at once
  });
  net::Fd fd = connectRaw(address);
  try {
    connectorHandshake(fd.get(), HandshakeIdentity{"job", "secret", 1, 2}, 0, Clock::now() + 30s,
                       address);
    ADD_FAILURE() << "the handshake went on without a greeting";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 0);
    EXPECT_NE(std::string(e.what()).find("rank 0 at " + address + " closed the connection"),
              std::string::npos)
        << e.what();
  }
  closer.join();
}

// A listener that greets, takes the connector's proof and closes without an answer (its rank
// failed as the connection came in: a job stopping on an error) is a PeerError naming that rank,
// not a refusal: the connector's job id and secret are not in doubt.
TEST(TcpHandshake, ListenerThatClosesWithoutAnAnswerIsAPeerError) {
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const std::string address = net::SocketAddress::local(listener.get()).toString();
  const HandshakeIdentity self{"job", "secret", 1, 2};
  std::thread closer([&] { greetAndTakeProof(listener.get(), self, address); });  // and closed
  net::Fd fd = connectRaw(address);
  try {
    connectorHandshake(fd.get(), self, 0, Clock::now() + 30s, address);
    ADD_FAILURE() << "the handshake went on without an answer";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer(), 0);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 at " + address + " closed the connection during the handshake"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("secret"), std::string::npos) << what;
  }
  closer.join();
}

// Forwards one connection both ways between a client and `target`, until either side closes.
void relayOnce(int listener, const std::string& target, std::atomic<bool>& used) {
  if (!net::waitFor(listener, POLLIN, Clock::now() + 10s)) return;
  net::Fd client = net::acceptTcp(listener);
  auto [host, port] = net::splitHostPort(target, "relay target");
  net::Fd upstream = net::connectTcp(host, port, Clock::now() + 5s, "relay target");
  used = true;
  pollfd fds[2] = {{client.get(), POLLIN, 0}, {upstream.get(), POLLIN, 0}};
  char buffer[4096];
  const auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline) {
    if (::poll(fds, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::recv(fds[i].fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n <= 0) return;
      net::writeFull(fds[1 - i].fd, buffer, static_cast<size_t>(n), deadline, "relay");
    }
  }
}

// Rank 1 reads a relay's address in place of rank 0's (here its store lies; in a job the record
// would also fail its MAC). The relay forwards every byte, yet the handshake fails: rank 1 proves
// the address it dialed, and rank 0 sees that it is not its own.
TEST(TcpHandshake, RelayBetweenTheRanksIsRefused) {
  std::atomic<bool> used{false};
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    if (rank == 0) {
      EXPECT_THROW(connectAll(makeContext(rank, size, store), {1}, 4s), TimeoutError);
      return;
    }
    const std::string real = listenerOf(*store, 0);
    net::Fd listener = net::listenTcp("127.0.0.1", 0);
    const std::string relayAddress = net::SocketAddress::local(listener.get()).toString();
    std::thread relay([&] { relayOnce(listener.get(), real, used); });
    auto lying = makeInProcessStore({.timeout = 10s});
    lying->setString("addr/0", relayAddress);
    try {
      connectAll(makeContext(rank, size, lying), {0}, 4s);
      ADD_FAILURE() << "rank 1 linked to rank 0 through a relay";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("refused the handshake: this rank dialed another "
                                           "address than the listener's own"),
                std::string::npos)
          << e.what();
    }
    relay.join();
  });
  EXPECT_TRUE(used) << "the relay was never dialed: the test did not test anything";
}

// Ranks that keep different numbers of streams per pair fail at setup with an error that names
// the setting, on the connector at once and on the listener at its deadline.
TEST(TcpHandshake, StreamCountsMustAgree) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    TransportContext context = makeContext(rank, size, store);
    context.settings["socket_streams"] = rank == 0 ? "2" : "3";
    TcpTransport transport(std::move(context));
    try {
      transport.connect(std::vector<int>{1 - rank}, Clock::now() + (rank == 0 ? 3s : 10s));
      ADD_FAILURE() << "rank " << rank << " connected with a different stream count";
    } catch (const IoError& error) {
      EXPECT_EQ(rank, 1) << error.what();
      EXPECT_NE(std::string(error.what()).find("keeps 2 tcp streams per rank pair, this rank 3"),
                std::string::npos)
          << error.what();
      EXPECT_NE(std::string(error.what()).find("RINGLET_SOCKET_STREAMS"), std::string::npos)
          << error.what();
    } catch (const TimeoutError& error) {
      EXPECT_EQ(rank, 0) << error.what();
    }
  });
}

// One rank seals, the other not: the connector stops naming the variable on both sides' terms
// (the listener's greeting says it), the listener times out (it never gets a link).
TEST(TcpHandshake, SealingMustAgree) {
  for (const int sealedRank : {0, 1}) {
    runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
      TransportContext context = makeContext(rank, size, store);
      if (rank == sealedRank) context.settings["socket_encrypt"] = "1";
      TcpTransport transport(std::move(context));
      try {
        transport.connect(std::vector<int>{1 - rank}, Clock::now() + (rank == 0 ? 3s : 10s));
        ADD_FAILURE() << "rank " << rank << " connected although only rank " << sealedRank
                      << " seals";
      } catch (const IoError& error) {
        EXPECT_EQ(rank, 1) << error.what();
        const std::string expected = sealedRank == 0
                                         ? "seals its tcp links and this rank does not seal"
                                         : "does not seal its tcp links and this rank seals";
        EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("RINGLET_SOCKET_ENCRYPT"), std::string::npos)
            << error.what();
      } catch (const TimeoutError& error) {
        EXPECT_EQ(rank, 0) << error.what();
      }
    });
  }
}

// A connector that says it does not seal, under its proof, to a listener that seals (a flag
// changed in the listener's greeting on the way cannot talk the connection out of sealing): the
// listener refuses it by name.
TEST(TcpHandshake, ListenerRefusesAConnectorThatDoesNotSeal) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    TransportContext context = makeContext(rank, size, store);
    if (rank == 0) {
      context.settings["socket_encrypt"] = "1";
      TcpTransport transport(std::move(context));
      EXPECT_THROW(transport.connect(std::vector<int>{1}, Clock::now() + 3s), TimeoutError);
      return;
    }
    const std::string address = listenerOf(*store, 0);
    net::Fd fd = connectRaw(address);
    uint8_t hello[kListenerHelloBytes];
    net::readFull(fd.get(), hello, sizeof hello, Clock::now() + 10s, "listener");
    EXPECT_EQ(hello[7], kFlagSealed);
    // A well-formed, proven hello with flags 0 (this connector's own code would stop at the
    // greeting: it checks the flag too).
    const std::string jobId = "tcp-test-job";
    std::vector<uint8_t> message(kConnectorFixedBytes + jobId.size() + address.size() + kMacBytes);
    uint8_t* fixed = message.data();
    put32(fixed, kMagic);
    put16(fixed + 4, kProtocolVersion);
    put16(fixed + 6, static_cast<uint16_t>(jobId.size()));
    put32(fixed + 8, 1);
    put32(fixed + 12, 0);
    put16(fixed + 16, static_cast<uint16_t>(address.size()));
    fixed[18] = 0;  // stream
    fixed[19] = 1;  // streams
    fixed[20] = 0;  // flags: does not seal
    std::memset(fixed + 21, 0x5a, kNonceBytes);
    std::memcpy(fixed + kConnectorFixedBytes, jobId.data(), jobId.size());
    std::memcpy(fixed + kConnectorFixedBytes + jobId.size(), address.data(), address.size());
    auto bytesOf = [](const std::string& text) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    };
    const Mac mac = computeMac(
        "tcp-test-secret", "ringlet-connect",
        {std::span<const uint8_t>(hello + 8, kNonceBytes),
         std::span<const uint8_t>(fixed, kConnectorFixedBytes), bytesOf(jobId), bytesOf(address)});
    std::memcpy(message.data() + message.size() - kMacBytes, mac.data(), kMacBytes);
    net::writeFull(fd.get(), message.data(), message.size(), Clock::now() + 10s, "listener");
    uint8_t answer[kListenerAcceptBytes];
    net::readFull(fd.get(), answer, sizeof answer, Clock::now() + 10s, "listener");
    EXPECT_EQ(get16(answer + 6), static_cast<uint16_t>(HandshakeAnswer::kWrongSealing));
  });
}

TEST(TcpHandshake, SealingSettingIsCheckedAndNamed) {
  EXPECT_FALSE(sealedFromSettings({}));
  EXPECT_FALSE(sealedFromSettings({{"socket_encrypt", "0"}}));
  EXPECT_TRUE(sealedFromSettings({{"socket_encrypt", "1"}}));
  for (const char* bad : {"yes", "2", "on", " 1"}) {
    try {
      sealedFromSettings({{"socket_encrypt", bad}});
      ADD_FAILURE() << "accepted RINGLET_SOCKET_ENCRYPT='" << bad << "'";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(fmt::format("RINGLET_SOCKET_ENCRYPT='{}'", bad)),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(TcpHandshake, StreamsSettingIsCheckedAndNamed) {
  EXPECT_EQ(streamsFromSettings({}), 1);
  EXPECT_EQ(streamsFromSettings({{"socket_streams", "4"}}), 4);
  EXPECT_EQ(streamsFromSettings({{"socket_streams", "16"}}), 16);
  for (const char* bad : {"0", "17", "-1", "two", "2x", " 2"}) {
    try {
      streamsFromSettings({{"socket_streams", bad}});
      ADD_FAILURE() << "accepted RINGLET_SOCKET_STREAMS='" << bad << "'";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(fmt::format("RINGLET_SOCKET_STREAMS='{}'", bad)),
                std::string::npos)
          << error.what();
    }
  }
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
