#include "tests/shm/shm_test_bodies.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

namespace ringlet::testing::shm {
namespace {

size_t messageBytes(int k, int src, int dst, size_t slotBytes) {
  switch (k % 5) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return 7;
    case 3:
      return slotBytes;
    default:
      return (static_cast<size_t>(k) * 977 + static_cast<size_t>(src) * 31 +
              static_cast<size_t>(dst) * 7) %
             (slotBytes + 1);
  }
}

// Sends message k to `peer`, either written straight into the slot or from caller memory.
void sendMessage(Mesh& mesh, int peer, int k, size_t bytes, bool intoSlot) {
  Link& link = mesh.to(peer);
  auto wait = mesh.wait();
  if (intoSlot) {
    std::byte* slot = link.sendBuffer(bytes, nullptr, wait);
    ASSERT_NE(slot, nullptr);
    fillMessage(slot, bytes, mesh.rank, peer, k);
    link.send(slot, bytes, wait);
  } else {
    std::vector<std::byte> data(bytes);
    fillMessage(data.data(), bytes, mesh.rank, peer, k);
    link.send(data.data(), bytes, wait);
    std::fill(data.begin(), data.end(), std::byte{0xee});  // send() copied it already
  }
}

void recvMessage(Mesh& mesh, int peer, int k, size_t bytes, bool inPlace) {
  Link& link = mesh.to(peer);
  auto wait = mesh.wait();
  if (inPlace) {
    const std::byte* data = link.recv(bytes, wait);
    EXPECT_EQ(firstWrongByte(data, bytes, peer, mesh.rank, k), -1)
        << "message " << k << " (" << bytes << " bytes) from rank " << peer << " to rank "
        << mesh.rank;
    link.release();
  } else {
    std::vector<std::byte> data(bytes + 1, std::byte{0x5a});
    link.recvInto(data.data(), bytes, wait);
    EXPECT_EQ(firstWrongByte(data.data(), bytes, peer, mesh.rank, k), -1)
        << "message " << k << " (" << bytes << " bytes) from rank " << peer << " to rank "
        << mesh.rank;
    EXPECT_EQ(data[bytes], std::byte{0x5a}) << "recvInto wrote past " << bytes << " bytes";
  }
}

}  // namespace

void exchangeAwkwardSizes(int rank, int size, std::shared_ptr<Store> store,
                          const ShmOptions& options, const std::string& jobId) {
  ASSERT_EQ(size, 2);
  Mesh mesh = connectMesh(rank, size, store, options, jobId);
  const int peer = 1 - rank;
  EXPECT_EQ(mesh.to(peer).maxMessageBytes(), options.slotBytes);
  EXPECT_EQ(mesh.to(peer).transportName(), "shm");
  const std::vector<size_t> sizes = {0, 1, 7, options.slotBytes};
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      sendMessage(mesh, peer, round * 10 + static_cast<int>(i), sizes[i], (rank + round) % 2 == 0);
    }
    mesh.to(peer).flush(mesh.wait());
    for (size_t i = 0; i < sizes.size(); ++i) {
      recvMessage(mesh, peer, round * 10 + static_cast<int>(i), sizes[i], (rank + round) % 2 == 1);
    }
  }
  EXPECT_FALSE(mesh.to(peer).pump());
}

void exchangeFullMesh(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                      const std::string& jobId, int messages) {
  Mesh mesh = connectMesh(rank, size, store, options, jobId);
  for (int k = 0; k < messages; ++k) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      sendMessage(mesh, peer, k, messageBytes(k, rank, peer, options.slotBytes),
                  (k + peer) % 2 == 0);
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      recvMessage(mesh, peer, k, messageBytes(k, peer, rank, options.slotBytes), k % 3 != 0);
    }
    if (::testing::Test::HasFailure()) return;
  }
}

void directWrites(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                  const std::string& jobId, bool direct) {
  ASSERT_EQ(size, 2);
  Mesh mesh = connectMesh(rank, size, store, options, jobId, "direct");
  Link& link = mesh.to(1 - rank);
  using transport::Channel;
  constexpr size_t kStep = 192 << 10;
  constexpr size_t kTotal = 3 * kStep - 1000;
  constexpr size_t kPointToPoint = 100 << 10;
  constexpr int kInto = 10;
  auto piece = [&](int p) { return std::min(kStep, kTotal - static_cast<size_t>(p) * kStep); };
  // Both buffers start on a 64-byte line: where the kernel's copy is slower at targets off their
  // source within a line (KernelCopyOffsets), a direct write between such buffers would go
  // through the slots by design, and this test asks for one in place.
  auto lineStart = [](std::vector<std::byte>& storage) {
    const auto at = reinterpret_cast<uintptr_t>(storage.data());
    return storage.data() + ((64 - at % 64) % 64);
  };
  if (rank == 0) {
    std::vector<std::byte> outStorage(kStep + 64);
    std::span<std::byte> out(lineStart(outStorage), kStep);
    store->getString("posted");
    link.setSendChannel(Channel::kPointToPoint);
    fillMessage(out.data(), kPointToPoint, 0, 1, 100);
    link.send(out.data(), kPointToPoint, mesh.wait());
    link.setSendChannel(Channel::kCollective);
    for (int p = 0; p < 3; ++p) {
      fillMessage(out.data(), piece(p), 0, 1, p);
      if (p == 1) {
        std::byte* to = link.sendBuffer(piece(p), out.data(), mesh.wait());
        if (to != out.data()) std::memcpy(to, out.data(), piece(p));
        link.send(to, piece(p), mesh.wait());
      } else {
        link.send(out.data(), piece(p), mesh.wait());
      }
    }
    for (int k = 0; k < kInto; ++k) {
      fillMessage(out.data(), kPointToPoint, 0, 1, 200 + k);
      link.send(out.data(), kPointToPoint, mesh.wait());
    }
    store->getString("done");
    return;
  }
  std::vector<std::byte> inStorage(kTotal + 64);
  std::span<std::byte> in(lineStart(inStorage), kTotal);
  link.expect(in.data(), kTotal, kStep);
  store->setString("posted", "1");
  for (int p = 0; p < 3; ++p) {
    const std::byte* at = link.recv(piece(p), mesh.wait());
    std::byte* place = in.data() + static_cast<size_t>(p) * kStep;
    if (direct) {
      EXPECT_EQ(at, place) << "piece " << p << " was not written in place";
    } else {
      EXPECT_NE(at, place) << "piece " << p;
    }
    if (at != place) std::memcpy(place, at, piece(p));
    link.release();
    EXPECT_EQ(firstWrongByte(place, piece(p), 0, 1, p), -1) << "piece " << p;
  }
  link.unexpect();
  ASSERT_EQ(link.heldPointToPoint().size(), 1u);
  EXPECT_EQ(link.heldPointToPoint().front().size(), kPointToPoint);
  EXPECT_EQ(firstWrongByte(link.heldPointToPoint().front().data(), kPointToPoint, 0, 1, 100), -1);
  std::vector<std::byte> into(kPointToPoint);
  for (int k = 0; k < kInto; ++k) {
    link.recvInto(into.data(), kPointToPoint, mesh.wait());
    EXPECT_EQ(firstWrongByte(into.data(), kPointToPoint, 0, 1, 200 + k), -1) << "message " << k;
  }
  store->setString("done", "1");
}

void lentMessages(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options,
                  const std::string& jobId, bool lends) {
  ASSERT_EQ(size, 2);
  Mesh mesh = connectMesh(rank, size, store, options, jobId, "lent");
  Link& link = mesh.to(1 - rank);
  using transport::Channel;
  const std::vector<size_t> sizes = {100 << 10, 1 << 10, 256 << 10, 64 << 10, 300 << 10};
  constexpr size_t kPointToPoint = 128 << 10;
  constexpr int kPointToPointId = 50;
  if (rank == 0) {
    std::byte hello{7};
    link.send(&hello, 1, mesh.wait());
    store->getString("probed");
    // What lend() will do, as the all-to-all asks before lending many messages at once.
    EXPECT_EQ(link.lendsNow(100 << 10), lends);
    EXPECT_FALSE(link.lendsNow(transport::Link::kLendMinBytes - 1)) << "below the smallest lent";
    EXPECT_FALSE(link.lendsNow(link.maxMessageBytes() + 1)) << "past the link's largest message";
    EXPECT_EQ(link.queueMessages(), transport::shm::kCells);  // what the all-to-all plans with
    std::vector<std::vector<std::byte>> out(sizes.size() + 1);
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (k == 2) {  // between collective messages: one a collective receive passes over
        out.back().resize(kPointToPoint);
        fillMessage(out.back().data(), kPointToPoint, 0, 1, kPointToPointId);
        link.setSendChannel(Channel::kPointToPoint);
        link.lend(out.back().data(), kPointToPoint, mesh.wait());
        link.setSendChannel(Channel::kCollective);
      }
      out[k].resize(sizes[k]);
      fillMessage(out[k].data(), sizes[k], 0, 1, static_cast<int>(k));
      link.lend(out[k].data(), sizes[k], mesh.wait());
    }
    link.flush(mesh.wait());
    if (lends) {
      EXPECT_TRUE(store->check("reading")) << "flush() returned before the peer read";
    } else {
      store->setString("flushed", "1");  // the peer reads only now: a lent message would hang
    }
    for (auto& buffer : out) std::fill(buffer.begin(), buffer.end(), std::byte{0xee});
    store->getString("done");
    return;
  }
  std::byte hello{};
  link.recvInto(&hello, 1, mesh.wait());
  EXPECT_EQ(hello, std::byte{7});
  store->setString("probed", "1");
  if (lends) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  } else {
    store->getString("flushed",
                     std::chrono::seconds(20));  // through the slots, flush() waits for nobody
  }
  store->setString("reading", "1");
  std::vector<std::byte> in(sizes[4]);
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (k == 3) {  // recv(): a copy of the link's
      const std::byte* at = link.recv(sizes[k], mesh.wait());
      EXPECT_EQ(firstWrongByte(at, sizes[k], 0, 1, static_cast<int>(k)), -1) << "message " << k;
      link.release();
      continue;
    }
    link.recvInto(in.data(), sizes[k], mesh.wait());
    EXPECT_EQ(firstWrongByte(in.data(), sizes[k], 0, 1, static_cast<int>(k)), -1)
        << "message " << k;
  }
  ASSERT_EQ(link.heldPointToPoint().size(), 1u);
  EXPECT_EQ(link.heldPointToPoint().front().size(), kPointToPoint);
  EXPECT_EQ(
      firstWrongByte(link.heldPointToPoint().front().data(), kPointToPoint, 0, 1, kPointToPointId),
      -1);
  store->setString("done", "1");
}

}  // namespace ringlet::testing::shm
