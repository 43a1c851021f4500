// Shared-memory links between thread ranks: data integrity, sizes, errors, abort, fallback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "ringlet/error.h"
#include "tests/shm/shm_test_bodies.h"
#include "tests/shm/shm_test_support.h"
#include "tests/support/ranks.h"
#include "transports/registry.h"
#include "transports/shm/kernel_copy.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_segment.h"

namespace ringlet::testing::shm {
namespace {

using namespace std::chrono_literals;

TEST(ShmLink, AwkwardSizesBothWays) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-awkward");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    exchangeAwkwardSizes(rank, size, store, testOptions(dir.path(), 4096), job);
  });
  EXPECT_TRUE(dir.files().empty());
}

class ShmMesh : public ::testing::TestWithParam<int> {};

TEST_P(ShmMesh, ManyMessagesEveryPair) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-mesh");
  const int size = GetParam();
  auto start = std::chrono::steady_clock::now();
  runThreadRanks(size, [&](int rank, int n, std::shared_ptr<Store> store) {
    exchangeFullMesh(rank, n, store, testOptions(dir.path(), 1024), job, 200);
  });
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  RecordProperty("milliseconds", static_cast<int>(ms.count()));
  std::printf("%d thread ranks, 200 messages per pair each way: %lld ms\n", size,
              static_cast<long long>(ms.count()));
  EXPECT_TRUE(dir.files().empty());
}

INSTANTIATE_TEST_SUITE_P(Sizes, ShmMesh, ::testing::Values(2, 3, 5, 8));

// Small messages are announced with their bytes in a cell, larger ones in a cell with their bytes
// in the next slot; both kinds interleave in one order. The writer runs up to kCells small
// messages ahead of a reader that holds none, and no further; the reader may hold slotCount
// messages of either kind at once.
TEST(ShmLink, CellsAndSlotsInterleaveInOrder) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-cells");
  constexpr size_t kSlotBytes = 4096;
  const size_t cell = transport::shm::kCellPayloadBytes;
  // Sizes around the cell's edge and the slot's, in a pattern that is not periodic in 8 or 64.
  const std::vector<size_t> sizes = {0, 8, cell, cell + 1, 56, kSlotBytes, 1, cell - 1, 300};
  auto sizeOf = [&](int k) { return sizes[(k * 7 + k / 5) % sizes.size()]; };
  constexpr int kMessages = 1000;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path(), kSlotBytes), job);
    Link& link = mesh.to(1 - rank);
    if (rank == 0) {
      // kCells small messages go without the reader taking any...
      for (int k = 0; k < static_cast<int>(transport::shm::kCells); ++k) {
        std::byte* out = link.sendBuffer(8, nullptr, mesh.wait());
        fillMessage(out, 8, 0, 1, k);
        link.send(out, 8, mesh.wait());
      }
      // ...but not one more.
      std::vector<std::byte> extra(8);
      EXPECT_THROW(link.send(extra.data(), 8, mesh.wait(50ms)), TimeoutError);
      store->setString("filled", "1");
      // Then a mix; sendBuffer() asked twice for the same message, first for fewer bytes.
      for (int k = 0; k < kMessages; ++k) {
        const size_t bytes = sizeOf(k);
        link.sendBuffer(std::min<size_t>(bytes, 8), nullptr, mesh.wait());
        std::byte* out = link.sendBuffer(bytes, nullptr, mesh.wait());
        fillMessage(out, bytes, 0, 1, 100 + k);
        link.send(out, bytes, mesh.wait());
      }
      // A send longer than what sendBuffer() handed out is refused, not written past it.
      std::byte* small = link.sendBuffer(8, nullptr, mesh.wait());
      EXPECT_THROW(link.send(small, cell + 1, mesh.wait()), InvalidArgument);
      link.send(small, 8, mesh.wait());
      store->getString("done");
    } else {
      store->getString("filled");
      for (int k = 0; k < static_cast<int>(transport::shm::kCells); ++k) {
        const std::byte* in = link.recv(8, mesh.wait());
        EXPECT_EQ(firstWrongByte(in, 8, 0, 1, k), -1) << "message " << k;
        link.release();
      }
      // Hold slotCount (8) messages at a time, then check and release them all.
      for (int k = 0; k < kMessages; k += 8) {
        std::vector<const std::byte*> held;
        for (int j = k; j < std::min(k + 8, kMessages); ++j) {
          held.push_back(link.recv(sizeOf(j), mesh.wait()));
        }
        for (int j = k; j < std::min(k + 8, kMessages); ++j) {
          EXPECT_EQ(firstWrongByte(held[j - k], sizeOf(j), 0, 1, 100 + j), -1)
              << "message " << j << " of " << sizeOf(j) << " bytes";
          link.release();
        }
        if (::testing::Test::HasFailure()) break;
      }
      link.recvInto(std::vector<std::byte>(8).data(), 8, mesh.wait());
      store->setString("done", "1");
    }
  });
}

// skipPeeked() drops the message peekMessage() showed, in a cell or in a slot, and the next
// recv() gets the one after it: every third message is peeked and skipped, the others received
// and checked (a skip that took the wrong cell or slot, or released twice, shifts them).
TEST(ShmLink, SkipPeekedDropsCellAndSlotMessagesInOrder) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-skip");
  constexpr size_t kSlotBytes = 4096;
  const size_t cell = transport::shm::kCellPayloadBytes;
  const std::vector<size_t> sizes = {8, cell + 1, 56, kSlotBytes, cell, 1};
  auto sizeOf = [&](int k) { return sizes[(k * 5 + k / 7) % sizes.size()]; };
  constexpr int kMessages = 600;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path(), kSlotBytes), job);
    Link& link = mesh.to(1 - rank);
    if (rank == 0) {
      for (int k = 0; k < kMessages; ++k) {
        std::vector<std::byte> out(sizeOf(k));
        fillMessage(out.data(), out.size(), 0, 1, k);
        link.send(out.data(), out.size(), mesh.wait());
      }
      store->getString("done");
    } else {
      ASSERT_TRUE(link.canPeek());
      for (int k = 0; k < kMessages; ++k) {
        if (k % 3 == 1) {
          size_t bytes = 0;
          const std::byte* in = nullptr;
          const auto deadline = std::chrono::steady_clock::now() + 10s;
          while ((in = link.peekMessage(&bytes)) == nullptr &&
                 std::chrono::steady_clock::now() < deadline) {
          }
          ASSERT_NE(in, nullptr) << "message " << k << " never showed";
          ASSERT_EQ(bytes, sizeOf(k)) << "message " << k;
          EXPECT_EQ(firstWrongByte(in, bytes, 0, 1, k), -1) << "peeked message " << k;
          link.skipPeeked(mesh.wait());
        } else {
          const std::byte* in = link.recv(sizeOf(k), mesh.wait());
          EXPECT_EQ(firstWrongByte(in, sizeOf(k), 0, 1, k), -1)
              << "message " << k << " of " << sizeOf(k) << " bytes";
          link.release();
        }
        if (::testing::Test::HasFailure()) break;
      }
      store->setString("done", "1");
    }
  });
}

// Point-to-point messages among a collective's (every third, cells and slots): a collective's
// receives pass over them, also while it holds earlier messages unreleased (their cells and
// slots free once those are released), and the link holds them whole in order; a
// point-to-point receive sees both channels in order and which each is.
TEST(ShmLink, PointToPointMessagesArePassedOverAndHeld) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-channels");
  constexpr size_t kSlotBytes = 4096;
  const size_t cell = transport::shm::kCellPayloadBytes;
  const std::vector<size_t> sizes = {8, cell + 1, 56, kSlotBytes, cell, 1, 0};
  auto sizeOf = [&](int k) { return sizes[(k * 5 + k / 7) % sizes.size()]; };
  auto pointToPoint = [](int k) { return k % 3 == 1; };
  constexpr int kMessages = 600;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path(), kSlotBytes), job);
    Link& link = mesh.to(1 - rank);
    using transport::Channel;
    if (rank == 0) {
      for (int k = 0; k < kMessages + 30; ++k) {
        std::vector<std::byte> out(sizeOf(k));
        fillMessage(out.data(), out.size(), 0, 1, k);
        link.setSendChannel(pointToPoint(k) ? Channel::kPointToPoint : Channel::kCollective);
        link.send(out.data(), out.size(), mesh.wait());
      }
      store->getString("done");
      return;
    }
    // Collective receives, holding up to three at a time; a look now and then.
    std::vector<int> held;
    int k = 0;
    auto nextCollective = [&] {
      while (pointToPoint(k)) ++k;
      return k++;
    };
    for (int taken = 0; k < kMessages; ++taken) {
      if (taken % 4 == 0 && held.empty()) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!link.messageReady() && std::chrono::steady_clock::now() < deadline) {
        }
      }
      const int m = nextCollective();
      const std::byte* in = link.recv(sizeOf(m), mesh.wait());
      EXPECT_EQ(link.lastChannel(), Channel::kCollective);
      EXPECT_EQ(firstWrongByte(in, sizeOf(m), 0, 1, m), -1) << "message " << m;
      held.push_back(m);
      if (held.size() == 3 || k >= kMessages) {
        for (size_t j = 0; j < held.size(); ++j) link.release();
        held.clear();
      }
      if (::testing::Test::HasFailure()) break;
    }
    int expected = 0;
    for (const auto& message : link.heldPointToPoint()) {
      while (!pointToPoint(expected)) ++expected;
      ASSERT_EQ(message.size(), sizeOf(expected)) << "held message " << expected;
      EXPECT_EQ(firstWrongByte(message.data(), message.size(), 0, 1, expected), -1)
          << "held message " << expected;
      ++expected;
    }
    EXPECT_GE(expected, kMessages - 3);
    // The rest as a point-to-point receive sees them: both channels, in order.
    link.setReceiveChannel(Channel::kPointToPoint);
    for (; k < kMessages + 30; ++k) {
      size_t bytes = 0;
      const std::byte* in = link.recvAny(kSlotBytes, &bytes, mesh.wait());
      EXPECT_EQ(bytes, sizeOf(k)) << "message " << k;
      EXPECT_EQ(link.lastChannel(), pointToPoint(k) ? Channel::kPointToPoint : Channel::kCollective)
          << "message " << k;
      EXPECT_EQ(firstWrongByte(in, bytes, 0, 1, k), -1) << "message " << k;
      link.release();
    }
    store->setString("done", "1");
  });
}

TEST(ShmLink, LargeMessagesAreWrittenWhereTheReceiverWaits) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-direct");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    directWrites(rank, size, store, testOptions(dir.path(), 512 << 10), job, /*direct=*/true);
  });
}

TEST(ShmLink, WithoutDirectWritesLargeMessagesGoThroughSlots) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-nodirect");
  ShmOptions options = testOptions(dir.path(), 512 << 10);
  options.direct = ShmOptions::Direct::kOff;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    directWrites(rank, size, store, options, job, /*direct=*/false);
  });
}

TEST(ShmLink, LentMessagesAreReadFromTheSendersMemory) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-lent");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    lentMessages(rank, size, store, testOptions(dir.path(), 512 << 10), job, /*lends=*/true);
  });
}

TEST(ShmLink, WithoutDirectWritesLentMessagesGoThroughSlots) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-notlent");
  ShmOptions options = testOptions(dir.path(), 512 << 10);
  options.direct = ShmOptions::Direct::kOff;
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    lentMessages(rank, size, store, options, job, /*lends=*/false);
  });
}

// A peer that announces a lent message (its bytes in its own memory, for this side to read)
// where this side never said it reads the peer: a corrupt segment, and nothing is read.
TEST(ShmLink, LentWordTheReceiverNeverAgreedToIsCorrupt) {
  using namespace transport::shm;
  ShmDir dir;
  const std::string name = segmentName(uniqueJobId("shm-lentword"), 0, 1);
  std::string noRoom;
  Segment creator =
      Segment::create(dir.path(), name, {.slotCount = 8, .slotBytes = 128 << 10}, 0, 1, &noRoom);
  ASSERT_TRUE(creator.valid()) << noRoom;
  // Direct writes and lent messages off on the receiving side: it never sets readsPeer.
  ShmLink receiver(1, 0, Segment::open(dir.path(), name, 0, 1), /*side=*/1, PeerWatch(),
                   transport::Backoff{}, /*direct=*/false);
  constexpr size_t kBytes = 64 << 10;
  std::vector<std::byte> theirs(kBytes, std::byte{0x5a});
  const uint64_t address = reinterpret_cast<uint64_t>(theirs.data());
  Cell& cell = creator.fifo(0)->cells[0];
  std::memcpy(cell.payload, &address, sizeof(address));
  cell.word.store((uint64_t{1} << 32) | kBytes | Cell::kLent, std::memory_order_release);
  std::vector<std::byte> mine(kBytes, std::byte{0});
  try {
    WaitContext wait;
    wait.deadline = transport::Clock::now() + 5s;
    receiver.recvInto(mine.data(), kBytes, wait);
    ADD_FAILURE() << "a lent message nobody agreed to was taken";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt shm segment"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mine.front(), std::byte{0});
}

TEST(ShmLink, NoFileRemainsOnceConnected) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-files");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    // Every rank has connected: every segment is mapped twice and already unlinked.
    store->add("connected", 1);
    while (store->getString("connected") != "3") std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(dir.files().empty()) << dir.files().size() << " files remain";
  });
  EXPECT_TRUE(dir.files().empty());
}

TEST(ShmLink, SizeMismatchIsIoErrorNamingBothLengths) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-mismatch");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    if (rank == 0) {
      std::vector<std::byte> data(8);
      mesh.to(1).send(data.data(), 8, mesh.wait());
      store->getString("checked");
    } else {
      try {
        mesh.to(0).recv(16, mesh.wait());
        ADD_FAILURE() << "recv of 16 bytes accepted a message of 8";
      } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("8 bytes"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("16 bytes"), std::string::npos) << e.what();
      }
      store->setString("checked", "1");
    }
  });
}

TEST(ShmLink, OversizedMessageIsInvalidArgument) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-oversize");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path(), 1024), job);
    std::vector<std::byte> data(1025);
    EXPECT_THROW(mesh.to(1 - rank).send(data.data(), data.size(), mesh.wait()), InvalidArgument);
    EXPECT_THROW(mesh.to(1 - rank).sendBuffer(1025, nullptr, mesh.wait()), InvalidArgument);
    EXPECT_THROW(mesh.to(1 - rank).release(), InvalidArgument);  // nothing held
  });
}

TEST(ShmLink, RecvTimesOutNamingThePeer) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-timeout");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    if (rank == 1) {
      auto start = std::chrono::steady_clock::now();
      try {
        mesh.to(0).recv(4, mesh.wait(150ms));
        ADD_FAILURE() << "recv returned without a message";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the wait outlived its deadline";
      store->setString("done", "1");
    } else {
      store->getString("done");
    }
  });
}

TEST(ShmLink, AbortReachesAWaitingPeerWithOriginAndReason) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-abort");
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    if (rank == 0) {
      // Rank 1 blocks in recv from rank 0; rank 2 blocks on a full FIFO towards rank 0. The
      // pause only makes it likely that they already wait: an abort that comes first must give
      // them the same PeerError.
      std::this_thread::sleep_for(100ms);
      mesh.to(1).abort(2, "reduction kernel failed");
      mesh.to(2).abort(2, "reduction kernel failed");
      EXPECT_THROW(mesh.to(1).send(nullptr, 0, mesh.wait()), AbortedError);
      EXPECT_THROW(mesh.to(2).recv(0, mesh.wait()), AbortedError);
      EXPECT_THROW(mesh.to(2).flush(mesh.wait()), AbortedError);
      mesh.to(1).abort(2, "twice is harmless");
    } else {
      try {
        if (rank == 1) {
          mesh.to(0).recv(4, mesh.wait(30s));
        } else {
          std::vector<std::byte> data(64);
          for (int i = 0; i < 100; ++i) mesh.to(0).send(data.data(), data.size(), mesh.wait(30s));
        }
        ADD_FAILURE() << "rank " << rank << " kept going after rank 0 aborted";
      } catch (const PeerError& e) {
        EXPECT_EQ(e.peer(), 2);
        EXPECT_STREQ(e.what(), "rank 2 aborted: reduction kernel failed");
      }
    }
  });
}

TEST(ShmLink, ClosedPeerIsPeerErrorAfterItsLastMessage) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-close");
  runThreadRanks(2, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    if (rank == 0) {
      std::vector<std::byte> data(100);
      fillMessage(data.data(), data.size(), 0, 1, 7);
      mesh.to(1).send(data.data(), data.size(), mesh.wait());
      mesh.links.clear();  // closes before rank 1 has read the message
      store->setString("closed", "1");
    } else {
      store->getString("closed");  // rank 0 closed its side after sending
      std::vector<std::byte> got(100);
      mesh.to(0).recvInto(got.data(), got.size(), mesh.wait());
      EXPECT_EQ(firstWrongByte(got.data(), got.size(), 0, 1, 7), -1);
      try {
        mesh.to(0).recv(100, mesh.wait(30s));
        ADD_FAILURE() << "recv returned after rank 0 closed";
      } catch (const PeerError& e) {
        EXPECT_EQ(e.peer(), 0);
        EXPECT_NE(std::string(e.what()).find("rank 0 closed"), std::string::npos) << e.what();
      }
    }
  });
}

// A wait on several links at once (a recv from any source) sleeps until the first message lands
// on any of them, not by the clock; a message the waiter leaves unread does not keep it awake.
TEST(ShmLink, SleepOnLinksWakesAtTheFirstMessageOfAny) {
  ShmDir dir;
  const std::string job = uniqueJobId("shm-sleep-any");
  auto sinceMs = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMesh(rank, size, store, testOptions(dir.path()), job);
    std::vector<std::byte> data(64, std::byte{7});
    if (rank != 0) {
      // Rank 1 sends a message rank 0 leaves unread for a while, and another once rank 0
      // sleeps again; rank 2 sends one once rank 0 sleeps.
      if (rank == 1) mesh.to(0).send(data.data(), data.size(), mesh.wait());
      store->getString(rank == 2 ? "first" : "second");
      std::this_thread::sleep_for(100ms);
      mesh.to(0).send(data.data(), data.size(), mesh.wait());
      store->getString("done");
      return;
    }
    std::vector<transport::Link*> links = {&mesh.to(1), &mesh.to(2)};
    // Rank 1's message: news at the first arm (no sleep), then no longer.
    while (!mesh.to(1).messageReady()) std::this_thread::sleep_for(1ms);
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(transport::sleepOnLinks(links, 10s));
    EXPECT_LT(sinceMs(start), 5000);
    start = std::chrono::steady_clock::now();
    ASSERT_TRUE(transport::sleepOnLinks(links, 150ms));
    EXPECT_GE(sinceMs(start), 100) << "a message left unread kept the sleep from starting";
    // `peer` sends 100 ms after `key` is set: sleeps of up to 10 s end with its message.
    auto sleepUntilMessage = [&](const std::string& key, int peer) {
      store->setString(key, "1");
      const auto since = std::chrono::steady_clock::now();
      while (!mesh.to(peer).messageReady()) {
        ASSERT_TRUE(transport::sleepOnLinks(links, 10s));
        ASSERT_LT(sinceMs(since), 5000) << "slept past the message";
      }
      mesh.to(peer).recvInto(data.data(), data.size(), mesh.wait());
    };
    sleepUntilMessage("first", 2);
    // Rank 1's first message taken, its second comes after this.
    mesh.to(1).recvInto(data.data(), data.size(), mesh.wait());
    sleepUntilMessage("second", 1);
    store->setString("done", "1");
  });
  EXPECT_TRUE(dir.files().empty());
}

TEST(ShmTransport, CanConnectSameNonEmptyHostIdOnly) {
  const transport::TransportEntry* entry = transport::findTransport("shm");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->priority, 20);
  transport::PeerInfo a{
      .rank = 0, .hostname = "h", .hostId = "h/boot/shm", .pid = 10, .pidNamespace = "pid:[1]"};
  transport::PeerInfo b{
      .rank = 1, .hostname = "h", .hostId = "h/boot/shm", .pid = 11, .pidNamespace = "pid:[1]"};
  transport::PeerInfo c{.rank = 2,
                        .hostname = "h",
                        .hostId = "h/other-boot/shm",
                        .pid = 12,
                        .pidNamespace = "pid:[1]"};
  transport::PeerInfo d{
      .rank = 3, .hostname = "h", .hostId = "", .pid = 13, .pidNamespace = "pid:[1]"};
  transport::PeerInfo e{
      .rank = 4, .hostname = "h", .hostId = "", .pid = 14, .pidNamespace = "pid:[1]"};
  EXPECT_TRUE(entry->canConnect(a, b));
  EXPECT_TRUE(entry->canConnect(b, a));
  EXPECT_FALSE(entry->canConnect(a, c));
  EXPECT_FALSE(entry->canConnect(d, e));
}

// Two processes of one host in different PID namespaces (containers sharing /dev/shm) may both be
// pid 1: they share memory through shm, never through the in-process transport.
TEST(ShmTransport, EqualPidsInOtherPidNamespacesAreNotOneProcess) {
  const transport::TransportEntry* shm = transport::findTransport("shm");
  const transport::TransportEntry* local = transport::findTransport("local");
  ASSERT_NE(shm, nullptr);
  ASSERT_NE(local, nullptr);
  const transport::PeerInfo a{
      .rank = 0, .hostname = "h", .hostId = "h/b/s", .pid = 1, .pidNamespace = "pid:[1]"};
  const transport::PeerInfo b{
      .rank = 1, .hostname = "h", .hostId = "h/b/s", .pid = 1, .pidNamespace = "pid:[2]"};
  EXPECT_TRUE(shm->canConnect(a, b));
  EXPECT_FALSE(local->canConnect(a, b));
  EXPECT_FALSE(a.sameProcess(b));
  EXPECT_FALSE(a.pidComparable(b));
  EXPECT_TRUE(a.sameProcess(a));
}

TEST(ShmTransport, DirectIsAutoOneOrZero) {
  using Direct = ShmOptions::Direct;
  EXPECT_EQ(ShmOptions::fromEnvironment().direct, Direct::kAuto) << "the default";
  const std::pair<const char*, Direct> cases[] = {
      {"auto", Direct::kAuto}, {"1", Direct::kOn}, {"0", Direct::kOff}};
  for (const auto& [text, mode] : cases) {
    ScopedEnv direct("RINGLET_SHM_DIRECT", text);
    EXPECT_EQ(ShmOptions::fromEnvironment().direct, mode) << text;
  }
  ScopedEnv direct("RINGLET_SHM_DIRECT", "yes");
  try {
    ShmOptions::fromEnvironment();
    ADD_FAILURE() << "RINGLET_SHM_DIRECT=yes was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("RINGLET_SHM_DIRECT is 'yes'"));
  }
}

// Under auto, threads of one process always copy each other's memory directly, and so do ranks
// that outnumber the cores; other processes only where the kernel's copy was measured to pay.
TEST(ShmTransport, AutoDirectIsOnBetweenThreadsAndMeasuredBetweenProcesses) {
  using transport::shm::directBetween;
  using transport::shm::kernelCopy;
  using Direct = ShmOptions::Direct;
  EXPECT_TRUE(directBetween(Direct::kOn, false, false));
  EXPECT_FALSE(directBetween(Direct::kOff, true, true));
  EXPECT_TRUE(directBetween(Direct::kAuto, true, false));
  EXPECT_TRUE(directBetween(Direct::kAuto, false, true)) << "ranks waiting for cores lend";
  EXPECT_EQ(directBetween(Direct::kAuto, false, false), kernelCopy().pays());
}

// Ranks that outnumber the cores, between processes whose kernel copy does not pay, lend only
// to the pairwise all-to-all; everywhere else every block the link allows.
TEST(ShmTransport, AutoLendsOnlyToTheAllToAllWhereRanksOutnumberCoresAndTheKernelCopyIsSlow) {
  using transport::shm::directForAllToAllOnly;
  using transport::shm::kernelCopy;
  using Direct = ShmOptions::Direct;
  EXPECT_FALSE(directForAllToAllOnly(Direct::kOn, false, true));
  EXPECT_FALSE(directForAllToAllOnly(Direct::kAuto, true, true)) << "threads: a memcpy";
  EXPECT_FALSE(directForAllToAllOnly(Direct::kAuto, false, false));
  EXPECT_EQ(directForAllToAllOnly(Direct::kAuto, false, true), !kernelCopy().pays());
}

// Link::lendsBlock: up to directBytes and lendBlockBytes, never an empty block, never where the
// link lends to the all-to-all only.
TEST(ShmLink, LendsBlocksUpToItsBoundUnlessForTheAllToAllOnly) {
  struct Bounded : transport::Link {
    Bounded(size_t hi, bool allToAllOnly, size_t lendMax = SIZE_MAX)
        : Link(1), hi_(hi), allToAllOnly_(allToAllOnly), lendMax_(lendMax) {}
    size_t directBytes() const override { return hi_; }
    bool lendsForAllToAllOnly() const override { return allToAllOnly_; }
    size_t lendBlockBytes() const override { return lendMax_; }
    std::string_view transportName() const override { return "test"; }
    std::string describe() const override { return "test"; }
    size_t maxMessageBytes() const override { return 0; }
    std::byte* sendBuffer(size_t, std::byte*, const transport::WaitContext&) override {
      return nullptr;
    }
    void send(const std::byte*, size_t, const transport::WaitContext&) override {}
    void flush(const transport::WaitContext&) override {}
    const std::byte* recv(size_t, const transport::WaitContext&) override { return nullptr; }
    void release() override {}
    void recvInto(std::byte*, size_t, const transport::WaitContext&) override {}
    const std::byte* recvAny(size_t, size_t*, const transport::WaitContext&) override {
      return nullptr;
    }
    bool pump() override { return false; }
    void abort(int, std::string_view) override {}
    size_t hi_;
    bool allToAllOnly_;
    size_t lendMax_;
  };
  const Bounded all(1 << 20, false), allToAll(1 << 20, true), none(0, false);
  EXPECT_FALSE(all.lendsBlock(0));
  EXPECT_TRUE(all.lendsBlock(1));
  EXPECT_TRUE(all.lendsBlock(1 << 20));
  EXPECT_FALSE(all.lendsBlock((1 << 20) + 1));
  EXPECT_FALSE(allToAll.lendsBlock(64 << 10));
  EXPECT_FALSE(none.lendsBlock(4096));
  const Bounded capped(1 << 20, false, 64 << 10);
  EXPECT_TRUE(capped.lendsBlock(64 << 10));
  EXPECT_FALSE(capped.lendsBlock((64 << 10) + 1)) << "past the largest block the link lends";
}

// Under auto, links between processes whose kernel copy pays lend blocks up to the size its
// measurement past the cache allows; everywhere else any size.
TEST(ShmTransport, AutoLendsBlocksUpToWhatTheKernelCopyPaysFor) {
  using transport::shm::kernelCopy;
  using transport::shm::lendBlockBytesBetween;
  using Direct = ShmOptions::Direct;
  EXPECT_EQ(lendBlockBytesBetween(Direct::kOn, false), SIZE_MAX);
  EXPECT_EQ(lendBlockBytesBetween(Direct::kAuto, true), SIZE_MAX) << "threads: a memcpy";
  EXPECT_EQ(lendBlockBytesBetween(Direct::kAuto, false),
            kernelCopy().pays() ? kernelCopy().lendBlockBytes() : SIZE_MAX);
}

TEST(KernelCopy, PaysWhereTheKernelsCopyTakesAtMostItsShareOfTheSlotsTwo) {
  using transport::shm::KernelCopy;
  EXPECT_TRUE(KernelCopy::kernelPays(KernelCopy::kShare * 1e-5, 1e-5));
  EXPECT_TRUE(KernelCopy::kernelPays(0.4e-5, 1e-5));
  EXPECT_FALSE(KernelCopy::kernelPays(1.01 * KernelCopy::kShare * 1e-5, 1e-5));
  EXPECT_FALSE(KernelCopy::kernelPays(1e-5, 1e-5)) << "a tie keeps the slots";
  EXPECT_FALSE(KernelCopy::kernelPays(0, 1e-5)) << "nothing measured";
  const KernelCopy refused{
      .permitted = false, .measured = true, .kernelSeconds = 1e-6, .slotsSeconds = 1e-5};
  EXPECT_FALSE(refused.pays()) << "refused by the kernel";
  const KernelCopy slow{
      .permitted = true, .measured = true, .kernelSeconds = 2e-5, .slotsSeconds = 1e-5};
  EXPECT_FALSE(slow.pays());
  const KernelCopy unmeasured{.permitted = true, .measured = false};
  EXPECT_TRUE(unmeasured.pays()) << "as before the measurement";
  const KernelCopy measured = transport::shm::measureKernelCopy();
  if (!measured.permitted) GTEST_SKIP() << "process_vm_readv is refused here";
  if (!measured.measured) GTEST_SKIP() << "the reader thread got no core for a second";
  // Both paths took some time, and less than a second for 256 KiB.
  EXPECT_GT(measured.kernelSeconds, 0);
  EXPECT_LT(measured.kernelSeconds, 1.0);
  EXPECT_GT(measured.slotsSeconds, 0);
  EXPECT_LT(measured.slotsSeconds, 1.0);
}

// Past the cache a link lends blocks of any size where the kernel's copy took at most the
// slots' time there, or where that was not measured; else up to kLendBelowPastBytes.
TEST(KernelCopy, LendsBlocksPastTheCacheOnlyWhereTheKernelsCopyPaysThere) {
  using transport::shm::KernelCopy;
  EXPECT_TRUE(KernelCopy::kernelPaysPast(1e-3, 1e-3)) << "a tie: no slower";
  EXPECT_FALSE(KernelCopy::kernelPaysPast(1.01e-3, 1e-3));
  EXPECT_FALSE(KernelCopy::kernelPaysPast(0, 1e-3)) << "nothing measured";
  KernelCopy copy{.permitted = true, .measured = true, .kernelSeconds = 1e-6, .slotsSeconds = 1e-5};
  EXPECT_EQ(copy.lendBlockBytes(), ~0ul) << "not measured past the cache: as before";
  copy.pastMeasured = true;
  copy.kernelPastSeconds = 2e-3;
  copy.slotsPastSeconds = 1e-3;
  EXPECT_EQ(copy.lendBlockBytes(), KernelCopy::kLendBelowPastBytes);
  copy.kernelPastSeconds = 0.5e-3;
  EXPECT_EQ(copy.lendBlockBytes(), ~0ul);
  const KernelCopy measured = transport::shm::measureKernelCopy(/*alwaysPastCache=*/true);
  if (!measured.permitted) GTEST_SKIP() << "process_vm_readv is refused here";
  if (!measured.measured || !measured.pastMeasured) {
    GTEST_SKIP() << "a thread got no core for a second";
  }
  // Both ways took some time, and less than a second for 8 MiB each way.
  EXPECT_GT(measured.kernelPastSeconds, 0);
  EXPECT_LT(measured.kernelPastSeconds, 1.0);
  EXPECT_GT(measured.slotsPastSeconds, 0);
  EXPECT_LT(measured.slotsPastSeconds, 1.0);
  const KernelCopy unasked = transport::shm::measureKernelCopy();
  if (unasked.measured && !unasked.pays()) {
    EXPECT_FALSE(unasked.pastMeasured) << "past the cache only where asked or where it pays";
  }
}

// A direct write whose target lies off its source within 64 bytes goes through the slots only where
// the kernel's copy was measured slower there (or not measured).
TEST(KernelCopyOffsets, ApartIsSlowOnlyWhereMeasuredSlower) {
  using transport::shm::KernelCopyOffsets;
  EXPECT_TRUE(KernelCopyOffsets::apartIsSlow(1e-6, 5e-6));
  EXPECT_FALSE(KernelCopyOffsets::apartIsSlow(1e-6, 1.1e-6));
  EXPECT_FALSE(KernelCopyOffsets::apartIsSlow(1e-6, KernelCopyOffsets::kSlower * 1e-6));
  EXPECT_TRUE(KernelCopyOffsets{}.apartSlow()) << "not measured: declined, as before";
  const KernelCopyOffsets fast{.measured = true, .alignedSeconds = 1e-6, .apartSeconds = 1e-6};
  EXPECT_FALSE(fast.apartSlow());
  const KernelCopyOffsets measured = transport::shm::measureKernelCopyOffsets();
  if (!measured.measured) GTEST_SKIP() << "process_vm_readv is refused here";
  EXPECT_GT(measured.alignedSeconds, 0);
  EXPECT_LT(measured.alignedSeconds, 1.0);  // 64 KiB
  EXPECT_GT(measured.apartSeconds, 0);
  EXPECT_LT(measured.apartSeconds, 1.0);
  EXPECT_EQ(&transport::shm::kernelCopyOffsets(), &transport::shm::kernelCopyOffsets());
}

// The measurement stands for two ranks on two cores: its threads on two CPUs (left to the
// scheduler, two processes measuring at once under mpirun had each process's threads on one CPU,
// and the slots' copies hit that core's cache), also where the caller is bound to one CPU (as
// mpirun binds the ranks of a small job: the reader on another of the host's), and the caller's
// CPUs are its own again afterwards.
TEST(KernelCopy, MeasuresOnTwoCpusAndGivesTheCallerItsCpusBack) {
  cpu_set_t before;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
  const transport::shm::KernelCopy copy = transport::shm::measureKernelCopy();
  cpu_set_t after;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  if (!copy.permitted) GTEST_SKIP() << "process_vm_readv is refused here";
  if (!copy.measured) GTEST_SKIP() << "the reader thread got no core for a second";
  if (CPU_COUNT(&before) >= 2) {
    EXPECT_TRUE(copy.twoCpus);
  }

  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c) {
    if (CPU_ISSET(c, &before)) cpu = c;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  const transport::shm::KernelCopy single = transport::shm::measureKernelCopy();
  cpu_set_t still;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(still), &still), 0);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
  EXPECT_TRUE(CPU_EQUAL(&one, &still));
  // The reader then takes another of the host's CPUs, those this process could use before first.
  if (single.measured && CPU_COUNT(&before) >= 2) {
    EXPECT_TRUE(single.twoCpus);
  }
}

TEST(ShmTransport, BadShmBytesIsInvalidArgument) {
  ScopedEnv bytes("RINGLET_SHM_BYTES", "100");
  EXPECT_THROW(transport::shm::ShmOptions::fromEnvironment(), InvalidArgument);
}

// Segments larger than the directory's free space: both sides agree on a null link, with a
// warning, and nothing is left behind.
TEST(ShmFallback, SegmentLargerThanFreeSpaceGivesNullLinks) {
  ShmDir dir;
  ScopedEnv shmDir("RINGLET_SHM_DIR", dir.path());
  ScopedEnv shmBytes("RINGLET_SHM_BYTES", "1024G");
  const std::string job = uniqueJobId("shm-fallback");
  ::testing::internal::CaptureStderr();
  runThreadRanks(3, [&](int rank, int size, std::shared_ptr<Store> store) {
    Mesh mesh = connectMeshFromEntry(rank, size, store, job);
    for (int peer = 0; peer < size; ++peer) {
      EXPECT_EQ(mesh.links[peer], nullptr) << "rank " << rank << " got a link to " << peer;
    }
  });
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("bytes free but a shared-memory segment needs"), std::string::npos) << log;
  EXPECT_NE(log.find(dir.path()), std::string::npos) << log;
  EXPECT_TRUE(dir.files().empty());
}

}  // namespace
}  // namespace ringlet::testing::shm
