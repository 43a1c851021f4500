// Sealed streams (RINGLET_SOCKET_ENCRYPT=1, src/net/sealed_stream.h): bytes round trip
// exactly through partial writes and reads of any size; the wire carries no plaintext; a byte
// changed, a record replayed, dropped or moved, or the wrong key fails authentication (EBADMSG),
// for good. And two tcp links through a relay that changes one byte on the way: in clear the
// receiver takes the changed data unnoticed, sealed its receive fails naming the cause.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "src/net/sealed_stream.h"
#include "src/net/socket.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp::testing {
namespace {

using net::SealedStream;
using net::SealKey;
using net::SealKeys;

using namespace std::chrono_literals;

struct Pair {
  net::Fd a;
  net::Fd b;
};

// A connected pair of nonblocking stream sockets; `buffer` > 0 makes the send buffers small, so
// that writes come out partial.
Pair makePair(int buffer = 0) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  for (int fd : fds) {
    net::setNonBlocking(fd);
    if (buffer > 0) {
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    }
  }
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

SealKey keyOf(uint8_t seed) {
  SealKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(seed * 31 + i);
  return key;
}

// The two ends' keys of one connection.
SealKeys firstEnd() { return {.send = keyOf(1), .recv = keyOf(2)}; }
SealKeys secondEnd() { return {.send = keyOf(2), .recv = keyOf(1)}; }

std::vector<uint8_t> patternOf(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937 random(seed);
  for (auto& b : out) b = static_cast<uint8_t>(random());
  return out;
}

bool waitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 5000) > 0;
}

// Everything `sealed` wrote on its socket and still holds, read raw from the other end, `peer`.
std::vector<uint8_t> wireBytes(SealedStream& sealed, int peer) {
  std::vector<uint8_t> wire;
  uint8_t chunk[65536];
  for (int idle = 0; idle < 50;) {
    EXPECT_EQ(sealed.flushPending(), 0);
    const ssize_t n = ::recv(peer, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      wire.insert(wire.end(), chunk, chunk + n);
      idle = 0;
    } else if (sealed.pendingBytes() == 0) {
      ++idle;
      std::this_thread::sleep_for(1ms);
    }
  }
  return wire;
}

// Writes `bytes` raw onto `fd` whole (blocking with poll).
void writeRaw(int fd, const std::vector<uint8_t>& bytes) {
  net::writeFull(fd, bytes.data(), bytes.size(), Clock::now() + 5s, "test peer");
}

// Reads with `opener` until `bytes` arrived, the end (0) or an error (-1, errno): returns what
// came and the last answer.
std::pair<std::vector<uint8_t>, ssize_t> readAll(SealedStream& opener, int fd, size_t bytes) {
  std::vector<uint8_t> got(bytes);
  size_t have = 0;
  ssize_t last = 0;
  while (have < bytes) {
    last = opener.recv(got.data() + have, bytes - have);
    if (last > 0) {
      have += static_cast<size_t>(last);
      continue;
    }
    if (last < 0 && errno == EAGAIN && waitReadable(fd)) continue;
    break;
  }
  got.resize(have);
  return {got, last};
}

TEST(SealedStream, BytesRoundTripThroughPartialWritesAndReadsOfEverySize) {
  Pair pair = makePair(16 << 10);
  SealedStream writer(pair.a.get(), firstEnd());
  SealedStream reader(pair.b.get(), secondEnd());
  // Messages from empty to several records, sent as one to three buffers; read in pieces from
  // one byte to more than a record.
  const std::vector<size_t> sizes{0,       1,      7,  4096, 65535,  65536, 65537,
                                  1 << 20, 333333, 12, 2,    200000, 131072};
  std::vector<uint8_t> all;
  for (size_t m = 0; m < sizes.size(); ++m) {
    const auto part = patternOf(sizes[m], static_cast<uint32_t>(m));
    all.insert(all.end(), part.begin(), part.end());
  }
  std::atomic<bool> failed{false};
  std::thread sender([&] {
    size_t at = 0;
    for (size_t m = 0; m < sizes.size() && !failed; ++m) {
      size_t left = sizes[m];
      while (left > 0) {
        // Up to three buffers of the message's rest.
        iovec iov[3];
        const size_t third = std::max<size_t>(1, left / 3);
        size_t count = 0;
        for (size_t put = 0; put < left && count < 3; ++count) {
          const size_t take = count == 2 ? left - put : std::min(third, left - put);
          iov[count] = {all.data() + at + put, take};
          put += take;
        }
        const ssize_t n = writer.sendv(iov, count);
        if (n > 0) {
          at += static_cast<size_t>(n);
          left -= static_cast<size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
          pollfd p{pair.a.get(), POLLOUT, 0};
          ::poll(&p, 1, 100);
        } else {
          failed = true;
          return;
        }
      }
    }
    while (writer.pendingBytes() > 0 && writer.flushPending() == 0) {
      pollfd p{pair.a.get(), POLLOUT, 0};
      ::poll(&p, 1, 100);
    }
  });
  std::vector<uint8_t> got(all.size());
  size_t have = 0;
  std::mt19937 random(7);
  const auto deadline = Clock::now() + 30s;
  while (have < all.size() && Clock::now() < deadline) {
    const size_t want = std::min<size_t>(all.size() - have, 1 + random() % 100000);
    const ssize_t n = reader.recv(got.data() + have, want);
    if (n > 0) {
      have += static_cast<size_t>(n);
    } else {
      ASSERT_TRUE(n < 0 && errno == EAGAIN) << "recv answered " << n << ", errno " << errno;
      // Less than asked only when nothing is left here: a poll may sleep.
      EXPECT_EQ(reader.readyBytes(), 0u) << "bytes to give here while recv said EAGAIN";
      waitReadable(pair.b.get());
    }
  }
  sender.join();
  ASSERT_FALSE(failed);
  ASSERT_EQ(have, all.size());
  EXPECT_TRUE(got == all) << "the bytes differ";
  EXPECT_EQ(writer.recordsSent(), reader.recordsOpened());
  EXPECT_GT(writer.recordsSent(), 25u);  // 1 MiB alone is 16 records
}

TEST(SealedStream, TheWireCarriesNoPlaintextAndEveryRecordIsNew) {
  Pair pair = makePair();
  SealedStream writer(pair.a.get(), firstEnd());
  // The same 4 KiB twice, each in a record of its own: ciphertexts must differ (a nonce per
  // record), and the plaintext must not appear.
  std::string text;
  while (text.size() < 4096) text += "ringlet tensor bytes in the clear? ";
  text.resize(4096);
  ASSERT_EQ(writer.send(text.data(), text.size()), 4096);
  ASSERT_EQ(writer.send(text.data(), text.size()), 4096);
  const std::vector<uint8_t> wire = wireBytes(writer, pair.b.get());
  ASSERT_EQ(wire.size(), 2 * (4096 + SealedStream::kOverheadBytes));
  const std::string asText(wire.begin(), wire.end());
  EXPECT_EQ(asText.find("ringlet tensor"), std::string::npos);
  const size_t record = 4096 + SealedStream::kOverheadBytes;
  EXPECT_FALSE(std::equal(wire.begin() + 4, wire.begin() + record, wire.begin() + record + 4))
      << "two records of the same bytes look alike";
}

// Records as `writer` sealed them, one vector each.
std::vector<std::vector<uint8_t>> sealRecords(const std::vector<std::vector<uint8_t>>& messages) {
  Pair pair = makePair();
  SealedStream writer(pair.a.get(), firstEnd());
  std::vector<std::vector<uint8_t>> records;
  for (const auto& m : messages) {
    EXPECT_EQ(writer.send(m.data(), m.size()), static_cast<ssize_t>(m.size()));
    records.push_back(wireBytes(writer, pair.b.get()));
    EXPECT_EQ(records.back().size(), m.size() + SealedStream::kOverheadBytes);
  }
  return records;
}

// Feeds `wire` to a fresh reader with `keys`, closes, and reads `bytes`.
std::pair<std::vector<uint8_t>, ssize_t> openWire(const std::vector<uint8_t>& wire, size_t bytes,
                                                  SealKeys keys = secondEnd()) {
  Pair pair = makePair();
  SealedStream reader(pair.b.get(), keys);
  writeRaw(pair.a.get(), wire);
  pair.a.reset();
  return readAll(reader, pair.b.get(), bytes);
}

TEST(SealedStream, AnyChangedByteFailsAuthenticationForGood) {
  const auto message = patternOf(1000, 3);
  const auto records = sealRecords({message});
  const auto& record = records[0];
  {
    auto [got, last] = openWire(record, message.size());
    ASSERT_EQ(got, message) << "the unchanged record must open";
  }
  // Every byte of the ciphertext and the tag, and the length: a flipped bit never yields data.
  for (size_t at = 0; at < record.size(); at += (at < 8 || at + 20 > record.size()) ? 1 : 97) {
    auto changed = record;
    changed[at] ^= 0x10;
    Pair pair = makePair();
    SealedStream reader(pair.b.get(), secondEnd());
    writeRaw(pair.a.get(), changed);
    pair.a.reset();
    auto [got, last] = readAll(reader, pair.b.get(), message.size());
    EXPECT_TRUE(got.empty()) << "byte " << at << " changed, yet " << got.size() << " bytes opened";
    if (at >= SealedStream::kLengthBytes) {
      EXPECT_EQ(last, -1) << "byte " << at;
      EXPECT_EQ(errno, EBADMSG) << "byte " << at;
      // For good: the next call fails the same, whatever arrives.
      uint8_t more[16];
      EXPECT_EQ(reader.recv(more, sizeof more), -1);
      EXPECT_EQ(errno, EBADMSG);
    } else {
      // A changed length: a record too long for the stream (EBADMSG) or cut off by the end (0).
      EXPECT_TRUE(last == 0 || (last == -1 && errno == EBADMSG)) << "byte " << at << ": " << last;
    }
  }
}

TEST(SealedStream, ReplayedDroppedOrMovedRecordsFail) {
  const auto first = patternOf(300, 1);
  const auto second = patternOf(300, 2);
  const auto records = sealRecords({first, second});
  auto join = [](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  {
    auto [got, last] = openWire(join({records[0], records[1]}), 600);
    EXPECT_EQ(got, join({first, second}));
  }
  {
    // The first record again where the second belongs: the first opens, the replay fails.
    auto [got, last] = openWire(join({records[0], records[0]}), 600);
    EXPECT_EQ(got, first);
    EXPECT_EQ(last, -1);
    EXPECT_EQ(errno, EBADMSG);
  }
  {
    // The first dropped: the second fails where the first was expected.
    auto [got, last] = openWire(records[1], 300);
    EXPECT_TRUE(got.empty());
    EXPECT_EQ(errno, EBADMSG);
  }
  {
    // Another connection's keys (or direction): nothing opens.
    auto [got, last] = openWire(records[0], 300, firstEnd());
    EXPECT_TRUE(got.empty());
    EXPECT_EQ(errno, EBADMSG);
  }
}

// ---------------------------------------------------------------------------------------------
// Two tcp links through a relay that changes one byte of the first link's stream on the way.

WaitContext waitOf(std::span<Link* const> links) {
  WaitContext wait;
  wait.deadline = Clock::now() + 10s;
  wait.op = "sealedtest";
  wait.rank = 1;
  wait.links = links;
  return wait;
}

// Copies a -> b and b -> a until both ends close or `stop`; flips one bit of the a -> b stream
// at byte `flipAt`, and reports whether `needle` passed through in clear.
struct Relay {
  Relay(net::Fd a, net::Fd b, size_t flipAt, std::string needle)
      : a_(std::move(a)), b_(std::move(b)), flipAt_(flipAt), needle_(std::move(needle)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  bool sawNeedle() const { return sawNeedle_; }

 private:
  void run() {
    std::vector<uint8_t> chunk(1 << 16);
    std::string seen;
    size_t passed = 0;
    while (!stop_) {
      pollfd fds[2] = {{a_.get(), POLLIN, 0}, {b_.get(), POLLIN, 0}};
      if (::poll(fds, 2, 20) <= 0) continue;
      for (int side = 0; side < 2; ++side) {
        if ((fds[side].revents & (POLLIN | POLLHUP)) == 0) continue;
        const int from = side == 0 ? a_.get() : b_.get();
        const int to = side == 0 ? b_.get() : a_.get();
        const ssize_t n = ::recv(from, chunk.data(), chunk.size(), MSG_DONTWAIT);
        if (n <= 0) continue;
        if (side == 0) {
          if (flipAt_ >= passed && flipAt_ < passed + static_cast<size_t>(n)) {
            chunk[flipAt_ - passed] ^= 0x01;
          }
          passed += static_cast<size_t>(n);
          seen.append(reinterpret_cast<const char*>(chunk.data()), static_cast<size_t>(n));
          if (seen.find(needle_) != std::string::npos) sawNeedle_ = true;
          if (seen.size() > needle_.size()) seen.erase(0, seen.size() - needle_.size());
        }
        try {
          net::writeFull(to, chunk.data(), static_cast<size_t>(n), Clock::now() + 5s, "relay");
        } catch (const Error&) {
        }
      }
    }
  }

  net::Fd a_, b_;
  size_t flipAt_;
  std::string needle_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sawNeedle_{false};
  std::thread thread_;
};

// Rank 0 sends a 64 KiB message holding `needle` to rank 1 through the relay, which flips the bit
// at byte 1000 of the stream. Returns rank 1's error ("" when it received) and whether its data
// came out changed; `sawNeedle` says whether the relay read the needle in clear.
struct RelayOutcome {
  std::string error;
  bool dataChanged = false;
  bool sawNeedle = false;
};

std::vector<net::Fd> oneStream(net::Fd fd) {
  std::vector<net::Fd> streams;
  streams.push_back(std::move(fd));
  return streams;
}

RelayOutcome sendThroughRelay(bool sealed) {
  Pair left = makePair();
  Pair right = makePair();
  const std::string needle = "a tensor row the relay should not read";
  std::vector<SealKeys> senderKeys, receiverKeys;
  if (sealed) {
    senderKeys = {firstEnd()};
    receiverKeys = {secondEnd()};
  }
  RelayOutcome outcome;
  {
    Relay relay(std::move(left.b), std::move(right.a), 1000, needle);
    TcpLink sender(0, 1, oneStream(std::move(left.a)), Backoff{}, 2s, senderKeys);
    TcpLink receiver(1, 0, oneStream(std::move(right.b)), Backoff{}, 2s, receiverKeys);
    std::vector<std::byte> message(64 << 10);
    for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<std::byte>(i * 7 + 3);
    std::memcpy(message.data() + 4000, needle.data(), needle.size());
    Link* links[] = {&sender, &receiver};
    const WaitContext wait = waitOf(links);
    sender.send(message.data(), message.size(), wait);
    std::vector<std::byte> got(message.size());
    try {
      receiver.recvInto(got.data(), got.size(), wait);
      outcome.dataChanged = got != message;
    } catch (const Error& e) {
      outcome.error = e.what();
    }
    try {
      sender.flush(wait);
    } catch (const Error&) {
    }
    outcome.sawNeedle = relay.sawNeedle();
    sender.abort(0, "test over");
    receiver.abort(1, "test over");
  }
  return outcome;
}

TEST(SealedLink, InClearAChangedByteArrivesUnnoticed) {
  // What sealing is for: without it the relay reads the data and changes it unnoticed. (This
  // also shows that the relay below does change a byte.)
  const RelayOutcome clear = sendThroughRelay(/*sealed=*/false);
  EXPECT_EQ(clear.error, "");
  EXPECT_TRUE(clear.dataChanged);
  EXPECT_TRUE(clear.sawNeedle);
}

TEST(SealedLink, SealedAChangedByteFailsTheReceiveByName) {
  const RelayOutcome sealed = sendThroughRelay(/*sealed=*/true);
  EXPECT_FALSE(sealed.sawNeedle) << "the relay read the plaintext";
  EXPECT_FALSE(sealed.dataChanged) << "changed data was taken as good";
  EXPECT_NE(sealed.error.find("sent bytes that fail authentication: changed on the way, or not "
                              "sent by rank 0"),
            std::string::npos)
      << sealed.error;
  EXPECT_NE(sealed.error.find("RINGLET_SOCKET_ENCRYPT=1"), std::string::npos) << sealed.error;
}

}  // namespace
}  // namespace ringlet::transport::tcp::testing
