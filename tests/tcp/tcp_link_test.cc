// The tcp Link contract with thread ranks: order, exact data, sizes, queued sends both ways,
// a full mesh, size mismatch, timeouts and abort.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>

#include "ringlet/error.h"
#include "src/net/socket.h"
#include "tests/support/event.h"
#include "tests/support/ranks.h"
#include "tests/tcp/tcp_test_util.h"
#include "transports/tcp/tcp_link.h"

namespace ringlet::transport::tcp::testing {
namespace {

using namespace std::chrono_literals;
using ringlet::testing::Event;
using ringlet::testing::runThreadRanks;
using ringlet::testing::SetOnExit;

// Every test runs with one stream per rank pair and with three (large messages striped), in
// clear and sealed (RINGLET_SOCKET_ENCRYPT=1): the parameter is the streams, negative for sealed.
class TcpLinkTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    testStreams() = streams();
    testSealed() = GetParam() < 0;
  }
  void TearDown() override {
    testStreams() = 1;
    testSealed() = false;
  }
  static int streams() { return std::abs(GetParam()); }
};
INSTANTIATE_TEST_SUITE_P(Streams, TcpLinkTest, ::testing::Values(1, 3, -1, -3),
                         [](const auto& info) {
                           return std::to_string(std::abs(info.param)) + "streams" +
                                  (info.param < 0 ? "_sealed" : "");
                         });

// Sends every assorted size to `link`, then receives them, alternating recv and recvInto.
void exchangeAssorted(int rank, Link& link, const std::vector<Link*>& all) {
  const auto& sizes = assortedSizes();
  auto wait = makeWait(rank, all);
  std::vector<std::vector<std::byte>> out;
  for (size_t m = 0; m < sizes.size(); ++m) out.push_back(pattern(rank, int(m), sizes[m]));
  for (size_t m = 0; m < sizes.size(); ++m) {
    std::byte* at = link.sendBuffer(sizes[m], out[m].data(), wait);
    ASSERT_EQ(at, out[m].data());
    link.send(at, sizes[m], wait);
  }
  for (size_t m = 0; m < sizes.size(); ++m) {
    if (m % 2 == 0) {
      const std::byte* data = link.recv(sizes[m], wait);
      EXPECT_EQ(firstWrong(data, link.peer(), int(m), sizes[m]), -1)
          << "recv of message " << m << " (" << sizes[m] << " bytes) from rank " << link.peer();
      link.release();
    } else {
      std::vector<std::byte> in(sizes[m]);
      link.recvInto(in.data(), sizes[m], wait);
      EXPECT_EQ(firstWrong(in.data(), link.peer(), int(m), sizes[m]), -1)
          << "recvInto of message " << m << " (" << sizes[m] << " bytes) from rank " << link.peer();
    }
  }
  link.flush(wait);
}

TEST_P(TcpLinkTest, AssortedSizesInOrderBothWays) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    ASSERT_EQ(e.links.size(), 1u);
    EXPECT_EQ(e.to(0).peer(), 1 - rank);
    EXPECT_EQ(e.to(0).transportName(), "tcp");
    EXPECT_NE(e.to(0).describe().find("127.0.0.1"), std::string::npos) << e.to(0).describe();
    EXPECT_EQ(e.to(0).describe().find("sealed (AES-256-GCM)") != std::string::npos, GetParam() < 0)
        << e.to(0).describe();
    if (streams() > 1) {
      EXPECT_NE(e.to(0).describe().find(fmt::format("and {} more streams", streams() - 1)),
                std::string::npos)
          << e.to(0).describe();
    }
    for (int round = 0; round < 3; ++round) exchangeAssorted(rank, e.to(0), e.raw);
  });
}

// Both ranks queue far more than the socket buffers hold, then flush before receiving: flush
// must read ahead, or both would wait forever.
TEST_P(TcpLinkTest, ManyLargeMessagesInFlightBothWaysFlushFirst) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    constexpr int kMessages = 24;
    constexpr size_t kBytes = (1 << 20) + 3;
    std::vector<std::vector<std::byte>> out;
    for (int m = 0; m < kMessages; ++m) out.push_back(pattern(rank, m, kBytes));
    for (int m = 0; m < kMessages; ++m) link.send(out[m].data(), kBytes, wait);
    link.flush(wait);
    std::vector<std::byte> in(kBytes);
    for (int m = 0; m < kMessages; ++m) {
      if (m % 3 == 0) {
        EXPECT_EQ(firstWrong(link.recv(kBytes, wait), 1 - rank, m, kBytes), -1) << m;
        link.release();
      } else {
        link.recvInto(in.data(), kBytes, wait);
        EXPECT_EQ(firstWrong(in.data(), 1 - rank, m, kBytes), -1) << m;
      }
    }
  });
}

// Interleaved small and large messages, many in flight, received while sends are still queued.
TEST_P(TcpLinkTest, InterleavedSendRecvStream) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    constexpr int kMessages = 400;
    auto sizeOf = [](int m) -> size_t { return m % 10 == 0 ? 300001 : size_t(m % 97); };
    std::vector<std::vector<std::byte>> out;
    for (int m = 0; m < kMessages; ++m) out.push_back(pattern(rank, m, sizeOf(m)));
    std::vector<std::byte> in(300001);
    constexpr int kAhead = 16;  // sends run this many messages ahead of receives
    for (int m = 0; m < kMessages + kAhead; ++m) {
      if (m < kMessages) link.send(out[m].data(), out[m].size(), wait);
      const int r = m - kAhead;
      if (r >= 0) {
        link.recvInto(in.data(), sizeOf(r), wait);
        ASSERT_EQ(firstWrong(in.data(), 1 - rank, r, sizeOf(r)), -1) << "message " << r;
      }
    }
    link.flush(wait);
  });
}

// A message kept by recv() stays intact while flush() reads ahead behind it.
// Messages of odd lengths back to back in the stream: every message recv() hands out is
// 8-byte aligned anyway (reductions read int64 and double straight out of it).
TEST_P(TcpLinkTest, ReceivedMessagesAreAlignedAfterOddSizedOnes) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    const std::vector<size_t> sizes = {12, 8, 3, 16, 1, 24, 5, 40, 7, 8};
    for (size_t m = 0; m < sizes.size(); ++m) {
      auto out = pattern(rank, int(m), sizes[m]);
      link.send(out.data(), sizes[m], wait);
    }
    link.flush(wait);
    for (size_t m = 0; m < sizes.size(); ++m) {
      const std::byte* data = link.recv(sizes[m], wait);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 8, 0u) << "message " << m;
      EXPECT_EQ(firstWrong(data, 1 - rank, int(m), sizes[m]), -1) << "message " << m;
      link.release();
    }
  });
}

// spinForMessage() looks as long as the link's waits spin, so a message sent a moment after it
// began is caught (one look would miss it: the receiving side of a two-rank rooted call then
// sent a call header of its own per call, and its peer read each), and it says false when
// nothing comes.
TEST_P(TcpLinkTest, SpinForMessageCatchesAMessageSentDuringTheSpin) {
  // Many rounds, and a fixed policy of long spins (20000 looks, each a read of the socket): a
  // loaded machine may hold the sender past any one spin, and an adapting link whose waits have
  // not been paying (a busy loop per core: most of them) spins only a few looks.
  constexpr int kRounds = 64;
  std::atomic<int> spinning{0};
  std::atomic<int> caught{0};
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size), 10s,
                            Backoff{.spins = 20000, .adapt = false});
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    const std::vector<std::byte> out(8, std::byte{7});
    if (rank == 1) {
      EXPECT_FALSE(link.spinForMessage()) << "nothing was sent";
    }
    for (int r = 1; r <= kRounds; ++r) {
      if (rank == 0) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (spinning.load() < r && std::chrono::steady_clock::now() < deadline) {
        }
        // Past one look (a read of the socket, ~1 us), inside a spin of a hundred.
        const auto later = std::chrono::steady_clock::now() + 5us;
        while (std::chrono::steady_clock::now() < later) {
        }
        link.send(out.data(), out.size(), wait);
        link.flush(wait);
      } else {
        spinning.store(r);
        if (link.spinForMessage()) caught.fetch_add(1);
        link.recvInto(std::vector<std::byte>(8).data(), 8, wait);
      }
    }
  });
  EXPECT_GT(caught.load(), 0) << "no message sent during a spin was seen by it in " << kRounds
                              << " rounds";
}

// peekMessage() shows a whole small message where it lies, leaves it for recv(), shows nothing
// while a message is held, and never shows a large message striped over several streams.
TEST_P(TcpLinkTest, PeekShowsAWholeMessageAndLeavesItForRecv) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    ASSERT_TRUE(link.canPeek());
    const std::vector<size_t> sizes = {3, 300, 12, size_t{6} << 20};
    for (size_t m = 0; m < sizes.size(); ++m) {
      auto out = pattern(rank, int(m), sizes[m]);
      link.send(out.data(), sizes[m], wait);
      link.flush(wait);
    }
    for (size_t m = 0; m < sizes.size(); ++m) {
      const bool striped = m == 3 && streams() > 1;
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      size_t bytes = 0;
      const std::byte* peeked = nullptr;
      while (peeked == nullptr && std::chrono::steady_clock::now() < deadline &&
             !(striped && link.messageReady())) {
        peeked = link.peekMessage(&bytes);
      }
      if (striped) {
        EXPECT_EQ(peeked, nullptr) << "a striped message was peeked";
      } else {
        ASSERT_NE(peeked, nullptr) << "message " << m << " never showed";
        EXPECT_EQ(bytes, sizes[m]);
        EXPECT_EQ(firstWrong(peeked, 1 - rank, int(m), sizes[m]), -1) << "message " << m;
        size_t again = 0;
        EXPECT_EQ(link.peekMessage(&again), peeked) << "a second peek moved the message";
      }
      const std::byte* data = link.recv(sizes[m], wait);
      EXPECT_EQ(firstWrong(data, 1 - rank, int(m), sizes[m]), -1) << "message " << m;
      size_t held = 0;
      EXPECT_EQ(link.peekMessage(&held), nullptr) << "peeked while message " << m << " is held";
      link.release();
    }
  });
}

// Point-to-point frames among a collective's, small and large (a large collective message is
// striped over three streams, a point-to-point one never): a collective's receives pass over
// them, recv, recvInto and looks alike, and the link holds them whole in order; a point-to-point
// receive sees both channels in order and which each is.
TEST_P(TcpLinkTest, PointToPointFramesArePassedOverAndHeld) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    const std::vector<size_t> sizes = {3, 300, size_t{1} << 20, 12, 0, size_t{6} << 20};
    auto sizeOf = [&](int m) { return sizes[(m * 5 + m / 7) % sizes.size()]; };
    auto pointToPoint = [](int m) { return m % 3 == 1; };
    constexpr int kMessages = 60;
    using transport::Channel;
    std::vector<std::vector<std::byte>> out(kMessages + 6);
    for (int m = 0; m < kMessages + 6; ++m) {
      out[m] = pattern(rank, m, sizeOf(m));
      link.setSendChannel(pointToPoint(m) ? Channel::kPointToPoint : Channel::kCollective);
      link.send(out[m].data(), sizeOf(m), wait);
    }
    link.setSendChannel(Channel::kCollective);
    int m = 0;
    for (int taken = 0; m < kMessages; ++taken) {
      while (pointToPoint(m)) ++m;
      if (taken % 3 == 0) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!link.messageReady() && std::chrono::steady_clock::now() < deadline) link.pump();
      }
      if (taken % 2 == 0) {
        const std::byte* in = link.recv(sizeOf(m), wait);
        EXPECT_EQ(link.lastChannel(), Channel::kCollective);
        EXPECT_EQ(firstWrong(in, 1 - rank, m, sizeOf(m)), -1) << "message " << m;
        link.release();
      } else {
        std::vector<std::byte> in(sizeOf(m));
        link.recvInto(in.data(), in.size(), wait);
        EXPECT_EQ(firstWrong(in.data(), 1 - rank, m, sizeOf(m)), -1) << "message " << m;
      }
      ++m;
      if (::testing::Test::HasFailure()) break;
    }
    int expected = 0;
    for (const auto& message : link.heldPointToPoint()) {
      while (!pointToPoint(expected)) ++expected;
      ASSERT_EQ(message.size(), sizeOf(expected)) << "held message " << expected;
      EXPECT_EQ(firstWrong(message.data(), 1 - rank, expected, message.size()), -1)
          << "held message " << expected;
      ++expected;
    }
    EXPECT_GE(expected, kMessages - 3);
    link.setReceiveChannel(Channel::kPointToPoint);
    for (; m < kMessages + 6; ++m) {
      size_t bytes = 0;
      const std::byte* in = link.recvAny(size_t{8} << 20, &bytes, wait);
      EXPECT_EQ(bytes, sizeOf(m)) << "message " << m;
      EXPECT_EQ(link.lastChannel(), pointToPoint(m) ? Channel::kPointToPoint : Channel::kCollective)
          << "message " << m;
      EXPECT_EQ(firstWrong(in, 1 - rank, m, bytes), -1) << "message " << m;
      link.release();
    }
    link.flush(wait);
  });
}

// A receive that waits sends its peer NUDGE frames once that peer has sent frames of a run
// (what Link::sendInRun left held in the peer's kernel goes out when one arrives), and none
// before. The peer's every kind of read passes over them, at the head of its stream and between
// its messages.
TEST_P(TcpLinkTest, NudgesFromAWaitingReceiverArePassedOver) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    auto& link = dynamic_cast<TcpLink&>(e.to(0));
    auto wait = makeWait(rank, e.raw, 30s);
    const std::vector<size_t> sizes = {8, 300, size_t{64} << 10, 12};
    std::vector<std::vector<std::byte>> out;
    for (int m = 0; m < 4; ++m) out.push_back(pattern(rank, m, sizes[m]));
    if (rank == 0) {
      // Rank 1 sleeps before each of its messages; its first is sent plainly, the others in a run.
      std::vector<std::byte> in(100);
      link.recvInto(in.data(), in.size(), wait);
      EXPECT_EQ(firstWrong(in.data(), 1, 0, in.size()), -1);
      EXPECT_EQ(link.nudgesSent(), 0u) << "nudged a peer that sends no runs";
      link.recvInto(in.data(), in.size(), wait);
      EXPECT_EQ(firstWrong(in.data(), 1, 1, in.size()), -1);
      EXPECT_EQ(link.nudgesSent(), 0u) << "nudged a peer that sends no runs";
      // Nudges go out while rank 1 sleeps, before rank 0's messages 0 and 1 ...
      link.recvInto(in.data(), in.size(), wait);
      EXPECT_EQ(firstWrong(in.data(), 1, 2, in.size()), -1);
      const size_t before = link.nudgesSent();
      EXPECT_GT(before, 0u) << "a receive that waited 30 ms sent no nudge";
      link.send(out[0].data(), sizes[0], wait);
      link.sendInRun(out[1].data(), sizes[1], wait);
      // ... and between messages 1 and 2.
      link.recvInto(in.data(), in.size(), wait);
      EXPECT_EQ(firstWrong(in.data(), 1, 3, in.size()), -1);
      EXPECT_GT(link.nudgesSent(), before) << "the second wait sent no nudge";
      link.send(out[2].data(), sizes[2], wait);
      link.sendInRun(out[3].data(), sizes[3], wait);
      link.flush(wait);
    } else {
      for (int m = 0; m < 4; ++m) {
        std::this_thread::sleep_for(30ms);
        const auto message = pattern(1, m, 100);
        if (m == 0) {
          link.send(message.data(), message.size(), wait);
        } else {
          link.sendInRun(message.data(), message.size(), wait);
        }
        link.flush(wait);
      }
      link.checkPeer(wait);  // nudges at the head are no abort
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!link.messageReady() && std::chrono::steady_clock::now() < deadline) link.pump();
      size_t bytes = 0;
      ASSERT_NE(link.peekMessage(&bytes), nullptr);
      EXPECT_EQ(bytes, sizes[0]);
      const std::byte* in = link.recv(sizes[0], wait);
      EXPECT_EQ(firstWrong(in, 0, 0, sizes[0]), -1);
      link.release();
      in = link.recvAny(1000, &bytes, wait);
      EXPECT_EQ(bytes, sizes[1]);
      EXPECT_EQ(firstWrong(in, 0, 1, bytes), -1);
      link.release();
      std::vector<std::byte> large(sizes[2]);
      link.recvInto(large.data(), large.size(), wait);  // past the nudges, straight into it
      EXPECT_EQ(firstWrong(large.data(), 0, 2, sizes[2]), -1);
      in = link.recv(sizes[3], wait);
      EXPECT_EQ(firstWrong(in, 0, 3, sizes[3]), -1);
      link.release();
    }
  });
}

TEST_P(TcpLinkTest, HeldMessageSurvivesReadAhead) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw);
    constexpr size_t kSmall = 1000;
    constexpr size_t kBig = 6 << 20;
    auto small = pattern(rank, 0, kSmall);
    auto big = pattern(rank, 1, kBig);
    link.send(small.data(), kSmall, wait);
    const std::byte* held = link.recv(kSmall, wait);
    link.send(big.data(), kBig, wait);
    link.flush(wait);  // reads the peer's big message ahead while `held` is out
    EXPECT_EQ(firstWrong(held, 1 - rank, 0, kSmall), -1);
    link.release();
    std::vector<std::byte> in(kBig);
    link.recvInto(in.data(), kBig, wait);
    EXPECT_EQ(firstWrong(in.data(), 1 - rank, 1, kBig), -1);
  });
}

// A ring where every rank sends more than the socket buffers hold to its right and flushes
// before receiving from its left: each flush waits for a rank that is itself flushing, so the
// waits must read ahead on the rank's other links.
TEST_P(TcpLinkTest, RingOfFlushesBeforeReceivesDoesNotDeadlock) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link* right = nullptr;
    Link* left = nullptr;
    for (auto* link : e.raw) {
      if (link->peer() == (rank + 1) % size) right = link;
      if (link->peer() == (rank + size - 1) % size) left = link;
    }
    auto wait = makeWait(rank, e.raw, 20s);
    constexpr size_t kBytes = 40 << 20;
    auto out = pattern(rank, 0, kBytes);
    right->send(out.data(), kBytes, wait);
    right->flush(wait);
    std::vector<std::byte> in(kBytes);
    left->recvInto(in.data(), kBytes, wait);
    EXPECT_EQ(firstWrong(in.data(), left->peer(), 0, kBytes), -1);
  });
}

// A wait on several links at once (a recv from any source) sleeps in one poll until the first
// message comes on any of them; a message read ahead and left there does not keep it awake.
TEST_P(TcpLinkTest, SleepOnLinksWakesAtTheFirstMessageOfAny) {
  auto sinceMs = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    auto wait = makeWait(rank, e.raw);
    auto data = pattern(rank, 0, 64);
    if (rank != 0) {
      // Rank 1's message comes at once and stays unread a while; rank 2's once rank 0 sleeps.
      if (rank == 2) store->getString("asleep");
      if (rank == 2) std::this_thread::sleep_for(100ms);
      e.to(0).send(data.data(), data.size(), wait);
      e.to(0).flush(wait);
      store->getString("done");
      return;
    }
    Link& one = e.to(0);  // peers 1 and 2, in order
    Link& two = e.to(1);
    while (!one.messageReady()) std::this_thread::sleep_for(1ms);
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(transport::sleepOnLinks(e.raw, 150ms));
    EXPECT_GE(sinceMs(start), 100) << "a message read ahead kept the sleep from starting";
    store->setString("asleep", "1");
    start = std::chrono::steady_clock::now();
    while (!two.messageReady()) {
      ASSERT_TRUE(transport::sleepOnLinks(e.raw, 10s));
      ASSERT_LT(sinceMs(start), 5000) << "slept past the message";
    }
    std::vector<std::byte> in(64);
    two.recvInto(in.data(), in.size(), wait);
    EXPECT_EQ(firstWrong(in.data(), 2, 0, in.size()), -1);
    one.recvInto(in.data(), in.size(), wait);
    EXPECT_EQ(firstWrong(in.data(), 1, 0, in.size()), -1);
    store->setString("done", "1");
  });
}

TEST_P(TcpLinkTest, FourRanksFullMesh) {
  runThreadRanks(4, [](int rank, int size, std::shared_ptr<Store> store) {
    const auto peers = othersOf(rank, size);
    Endpoint e = connectAll(makeContext(rank, size, store), peers);
    ASSERT_EQ(e.links.size(), 3u);
    auto wait = makeWait(rank, e.raw);
    const auto& sizes = assortedSizes();
    std::vector<std::vector<std::byte>> out;
    for (size_t m = 0; m < sizes.size(); ++m) out.push_back(pattern(rank, int(m), sizes[m]));
    for (size_t i = 0; i < peers.size(); ++i) {
      EXPECT_EQ(e.to(i).peer(), peers[i]);
      for (size_t m = 0; m < sizes.size(); ++m) e.to(i).send(out[m].data(), sizes[m], wait);
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      std::vector<std::byte> in;
      for (size_t m = 0; m < sizes.size(); ++m) {
        in.resize(sizes[m]);
        e.to(i).recvInto(in.data(), sizes[m], wait);
        EXPECT_EQ(firstWrong(in.data(), peers[i], int(m), sizes[m]), -1)
            << "message " << m << " from rank " << peers[i];
      }
    }
    for (auto* link : e.raw) link->flush(wait);
  });
}

// connect() called twice on one transport: the listener stays open, later links work too.
TEST_P(TcpLinkTest, SecondConnectCallAddsLinks) {
  runThreadRanks(3, [](int rank, int size, std::shared_ptr<Store> store) {
    TcpTransport transport(makeContext(rank, size, store));
    std::vector<int> first;  // ring neighbours first: 0-1, 1-2
    if (rank > 0) first.push_back(rank - 1);
    if (rank < size - 1) first.push_back(rank + 1);
    auto links = transport.connect(first, Clock::now() + 10s);
    std::vector<int> second;  // then the chord 0-2
    if (rank == 0) second.push_back(2);
    if (rank == 2) second.push_back(0);
    auto more = transport.connect(second, Clock::now() + 10s);
    for (auto& link : more) links.push_back(std::move(link));
    std::vector<Link*> raw;
    for (auto& link : links) raw.push_back(link.get());
    auto wait = makeWait(rank, raw);
    auto out = pattern(rank, 5, 777);
    for (auto* link : raw) link->send(out.data(), out.size(), wait);
    for (auto* link : raw) {
      EXPECT_EQ(firstWrong(link->recv(777, wait), link->peer(), 5, 777), -1);
      link->release();
      link->flush(wait);
    }
  });
}

TEST_P(TcpLinkTest, SizeMismatchIsIoErrorNamingBothLengths) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    auto wait = makeWait(rank, e.raw, 30s, "allreduce", 12);
    auto out = pattern(rank, 0, 100);
    if (rank == 0) {
      e.to(0).send(out.data(), 100, wait);
      e.to(0).flush(wait);
      std::byte done{};
      e.to(0).recvInto(&done, 1, wait);  // wait for rank 1's verdict before closing
    } else {
      try {
        e.to(0).recv(64, wait);
        ADD_FAILURE() << "recv of 64 bytes accepted a 100-byte message";
      } catch (const IoError& error) {
        const std::string what = error.what();
        EXPECT_NE(what.find("100 bytes"), std::string::npos) << what;
        EXPECT_NE(what.find("64 bytes"), std::string::npos) << what;
        EXPECT_NE(what.find("disagree"), std::string::npos) << what;
        EXPECT_NE(what.find("allreduce #12"), std::string::npos) << what;
      }
      std::byte done{};
      e.to(0).send(&done, 1, wait);
      e.to(0).flush(wait);
    }
  });
}

TEST_P(TcpLinkTest, RecvTimeoutNamesOpSeqAndPeer) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    if (rank == 1) {
      const auto start = Clock::now();  // before the deadline is set: took >= 200 ms for sure
      auto wait = makeWait(rank, e.raw, 200ms, "broadcast", 7);
      try {
        e.to(0).recv(8, wait);
        ADD_FAILURE() << "recv returned without a message";
      } catch (const TimeoutError& error) {
        const std::string what = error.what();
        EXPECT_NE(what.find("broadcast #7 on rank 1"), std::string::npos) << what;
        EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
      }
      const auto took = Clock::now() - start;
      EXPECT_GE(took, 200ms);
      EXPECT_LT(took, 10s) << "the wait went on long after its deadline";
    }
    // Rank 0 waits for rank 1's token so it does not close the link under rank 1's wait.
    auto wait = makeWait(rank, e.raw);
    std::byte token{};
    if (rank == 1) e.to(0).send(&token, 1, wait);
    if (rank == 0) e.to(0).recvInto(&token, 1, wait);
    e.to(0).flush(wait);
  });
}

// A wait that ends in the middle of a message leaves the stream out of step: every later call
// throws the same error instead of reading the rest of the payload as a header. Rank 0 stays
// connected and silent (it never pumps the rest of its queue) until rank 1 has seen both errors:
// had it closed first, rank 1 would see the peer close instead of a timeout.
TEST_P(TcpLinkTest, TimeoutInTheMiddleOfAMessageSticks) {
  constexpr size_t kBig = 64 << 20;  // more than the socket buffers hold
  Event bigSent;                     // rank 0's send() returned: the header is on its way
  Event rank1Done;                   // rank 1 has checked both errors
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    if (rank == 0) {
      std::vector<std::byte> big(kBig);
      link.send(big.data(), kBig, makeWait(rank, e.raw, 30s));  // what the socket takes now
      bigSent.set();
      EXPECT_TRUE(rank1Done.waitFor()) << "rank 1 never finished its checks";
      return;  // only now does the link close
    }
    SetOnExit done(rank1Done);
    ASSERT_TRUE(bigSent.waitFor()) << "rank 0 never sent";
    std::vector<std::byte> in(kBig);
    // A wait that ends before the header is in consumed nothing and is simply tried again; the
    // wait under test is the one that ends after the header, in the middle of the payload.
    const auto giveUp = Clock::now() + 30s;
    std::string first;
    while (true) {
      try {
        link.recvInto(in.data(), kBig, makeWait(rank, e.raw, 100ms, "allgather", 2));
        ADD_FAILURE() << "64 MiB arrived although rank 0 sent only part of it";
        return;
      } catch (const TimeoutError& error) {
        first = error.what();
      }
      if (first.find("the rest of") != std::string::npos || Clock::now() > giveUp) break;
    }
    EXPECT_NE(first.find("allgather #2 on rank 1 timed out waiting for the rest of a "
                         "67108864-byte message from rank 0"),
              std::string::npos)
        << first;
    try {
      link.recv(8, makeWait(rank, e.raw, 30s));
      ADD_FAILURE() << "recv after a timeout in the middle of a message returned";
    } catch (const TimeoutError& error) {
      EXPECT_EQ(std::string(error.what()), first) << "a later call must throw the same error";
    }
  });
}

TEST_P(TcpLinkTest, AbortReachesPeerWithOriginAndReason) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw, 30s);
    if (rank == 0) {
      auto out = pattern(0, 0, 5000);
      link.send(out.data(), out.size(), wait);
      // Rank 0 forwards an abort that started on rank 3.
      link.abort(3, "rank 3 ran out of memory");
      EXPECT_THROW(link.send(out.data(), 10, wait), AbortedError);
      EXPECT_THROW(link.recv(10, wait), AbortedError);
      EXPECT_THROW(link.flush(wait), AbortedError);
      EXPECT_FALSE(link.pump());
      link.abort(0, "twice is harmless");
    } else {
      std::vector<std::byte> in(5000);
      link.recvInto(in.data(), in.size(), wait);  // data sent before the abort still arrives
      EXPECT_EQ(firstWrong(in.data(), 0, 0, 5000), -1);
      const auto start = Clock::now();
      try {
        link.recv(8, wait);
        ADD_FAILURE() << "recv returned after the peer aborted";
      } catch (const PeerError& error) {
        EXPECT_EQ(error.peer(), 3);
        const std::string what = error.what();
        EXPECT_NE(what.find("rank 3 aborted: rank 3 ran out of memory"), std::string::npos) << what;
      }
      EXPECT_LT(Clock::now() - start, 10s) << "the abort took far too long to arrive";
      // The failure sticks: later calls throw the same PeerError.
      EXPECT_THROW(link.recv(8, wait), PeerError);
    }
  });
}

// abort() from another thread ends a wait in progress with AbortedError. The pause before the
// abort only makes it likely that recv() is already waiting: an abort that comes first must give
// the same errors, so the verdict does not depend on it.
TEST_P(TcpLinkTest, AbortFromAnotherThreadEndsWait) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    if (rank == 0) {
      std::thread aborter([&] {
        std::this_thread::sleep_for(100ms);
        link.abort(0, "user pressed ctrl-c");
      });
      auto wait = makeWait(rank, e.raw, 30s);
      const auto start = Clock::now();
      EXPECT_THROW(link.recv(8, wait), AbortedError);
      EXPECT_LT(Clock::now() - start, 10s) << "the abort took far too long to end the wait";
      aborter.join();
    } else {
      auto wait = makeWait(rank, e.raw, 30s);
      try {
        link.recv(8, wait);
        ADD_FAILURE() << "recv returned after the peer aborted";
      } catch (const PeerError& error) {
        EXPECT_EQ(error.peer(), 0);
        EXPECT_NE(std::string(error.what()).find("user pressed ctrl-c"), std::string::npos)
            << error.what();
      }
    }
  });
}

// A peer that closes its link (destroys it) is reported as closing the connection.
TEST_P(TcpLinkTest, ClosedPeerIsPeerError) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    if (rank == 0) {
      e.links.clear();
      return;
    }
    auto wait = makeWait(rank, e.raw, 30s, "barrier", 3);
    try {
      e.to(0).recv(8, wait);
      ADD_FAILURE() << "recv returned from a closed link";
    } catch (const PeerError& error) {
      EXPECT_EQ(error.peer(), 0);
      const std::string what = error.what();
      EXPECT_NE(what.find("barrier #3 on rank 1: rank 0 closed the connection"), std::string::npos)
          << what;
    }
  });
}

// What a reader that comes late gets of a stream whose sender closed its link after sending more
// than the reader's socket buffer holds: the messages in order, then the error that ended it.
// The reader answers every 16th message, as the end of a chain of small rooted calls does.
struct LateRead {
  int whole = 0;      // messages that arrived whole and right
  std::string error;  // what ended the stream: the peer's end, or its reset
};

LateRead readLateFromAClosedLink(std::chrono::milliseconds closeTimeout) {
  net::Fd listener = net::listenTcp("127.0.0.1", 0);
  const int small = 16 << 10;  // accepted sockets take the listener's buffer size
  EXPECT_EQ(::setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  const uint16_t port = net::SocketAddress::local(listener.get()).port();
  net::Fd sending = net::connectTcp("127.0.0.1", port, Clock::now() + 10s, "the test's listener");
  EXPECT_TRUE(net::waitFor(listener.get(), POLLIN, Clock::now() + 10s));
  net::Fd receiving = net::acceptTcp(listener.get());
  if (!receiving.valid()) return {0, "no connection accepted"};
  net::setNonBlocking(receiving.get());

  constexpr int kMessages = 64;
  constexpr size_t kBytes = 32 << 10;  // 2 MiB in all: far past the reader's buffer
  std::vector<std::vector<std::byte>> out;
  for (int m = 0; m < kMessages; ++m) out.push_back(pattern(0, m, kBytes));
  auto closing = std::make_unique<TcpLink>(0, 1, std::move(sending), Backoff{}, closeTimeout);
  TcpLink reader(1, 0, std::move(receiving), Backoff{});
  const std::vector<Link*> senderLinks{closing.get()};
  const std::vector<Link*> readerLinks{&reader};
  std::thread sender([&] {
    auto wait = makeWait(0, senderLinks);
    for (int m = 0; m < kMessages; ++m) closing->send(out[m].data(), kBytes, wait);
    closing->flush(wait);  // all in the kernel; the reader's buffer holds a few KiB of it
    closing.reset();
  });
  std::this_thread::sleep_for(100ms);  // the reader comes late
  LateRead got;
  try {
    auto wait = makeWait(1, readerLinks);
    std::vector<std::byte> in(kBytes);
    const uint64_t answer = 42;
    for (int m = 0; m <= kMessages; ++m) {  // one more than sent: the stream's end
      reader.recvInto(in.data(), kBytes, wait);
      if (firstWrong(in.data(), 0, m, kBytes) != -1) break;
      ++got.whole;
      if (m % 16 == 0) {
        reader.send(reinterpret_cast<const std::byte*>(&answer), sizeof answer, wait);
        reader.flush(wait);
      }
    }
  } catch (const Error& error) {
    got.error = error.what();
  }
  sender.join();
  return got;
}

// A link closed while its kernel still holds bytes that the peer has not taken waits for the
// peer's kernel to take them; the peer, which answers as it reads, gets the whole stream and
// then its end. Closed at once (a close timeout of 0, as before), the socket is reset by the
// first answer, and the rest of the stream is lost ("rank 0 reset the connection").
TEST(TcpLinkClose, AClosedLinkWaitsForItsPeerToTakeWhatItSent) {
  const LateRead waited = readLateFromAClosedLink(10s);
  EXPECT_EQ(waited.whole, 64) << waited.error;
  EXPECT_NE(waited.error.find("rank 0 closed the connection while receiving"), std::string::npos)
      << waited.error;

  const LateRead atOnce = readLateFromAClosedLink(0s);
  EXPECT_LT(atOnce.whole, 64) << "the reset lost nothing: the test shows nothing";
  EXPECT_NE(atOnce.error.find("rank 0 reset the connection"), std::string::npos) << atOnce.error;
}

// A peer that aborts with a large message half sent (more than the socket buffers hold, striped
// over the streams when there are several): the receiver gets the part that left, then a
// PeerError naming the peer, never wrong data or a hang.
TEST_P(TcpLinkTest, AbortWithALargeMessageHalfSentIsPeerError) {
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store), othersOf(rank, size));
    Link& link = e.to(0);
    auto wait = makeWait(rank, e.raw, 30s);
    constexpr size_t kBytes = 64 << 20;
    if (rank == 0) {
      auto out = pattern(0, 0, kBytes);
      link.send(out.data(), kBytes, wait);
      link.abort(0, "stopped in the middle");
      store->setString("aborted", "1");
    } else {
      (void)store->get("aborted", 30s);
      std::vector<std::byte> in(kBytes);
      const auto start = Clock::now();
      try {
        link.recvInto(in.data(), kBytes, wait);
        ADD_FAILURE() << "a message its sender aborted in the middle arrived whole";
      } catch (const PeerError& error) {
        EXPECT_EQ(error.peer(), 0) << error.what();
      }
      EXPECT_LT(Clock::now() - start, 10s) << "the abort took far too long to arrive";
      EXPECT_THROW(link.recv(8, wait), PeerError) << "the failure must stick";
    }
  });
}

// In clear; a sealed link has no keys without a secret, and says so before anything is sent.
TEST_P(TcpLinkTest, EmptySecretStillHandshakes) {
  if (GetParam() < 0) {
    try {
      TcpTransport transport(makeContext(0, 2, makeInProcessStore(), "job", ""));
      ADD_FAILURE() << "a sealed transport without a secret was made";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what())
                    .find("RINGLET_SOCKET_ENCRYPT=1: the tcp transport has "
                          "no job secret"),
                std::string::npos)
          << error.what();
    }
    return;
  }
  runThreadRanks(2, [](int rank, int size, std::shared_ptr<Store> store) {
    Endpoint e = connectAll(makeContext(rank, size, store, "job", ""), othersOf(rank, size));
    exchangeAssorted(rank, e.to(0), e.raw);
  });
}

}  // namespace
}  // namespace ringlet::transport::tcp::testing
