#include "tests/shm/shm_test_bodies.h"

#include <gtest/gtest.h>

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

}  // namespace ringlet::testing::shm
