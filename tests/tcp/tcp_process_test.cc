// The tcp link between forked process ranks that share a file store.
#include <gtest/gtest.h>

#include "tests/support/ranks.h"
#include "tests/tcp/tcp_test_util.h"

namespace ringlet::transport::tcp::testing {
namespace {

using ringlet::testing::runProcessRanks;

void meshExchange(int rank, int size, std::shared_ptr<Store> store) {
  const auto peers = othersOf(rank, size);
  Endpoint e = connectAll(makeContext(rank, size, store), peers);
  auto wait = makeWait(rank, e.raw);
  const auto& sizes = assortedSizes();
  std::vector<std::vector<std::byte>> out;
  for (size_t m = 0; m < sizes.size(); ++m) out.push_back(pattern(rank, int(m), sizes[m]));
  for (int round = 0; round < 2; ++round) {
    for (auto* link : e.raw) {
      for (size_t m = 0; m < sizes.size(); ++m) link->send(out[m].data(), sizes[m], wait);
    }
    for (auto* link : e.raw) {
      std::vector<std::byte> in;
      for (size_t m = 0; m < sizes.size(); ++m) {
        if (m % 2 == 0) {
          EXPECT_EQ(firstWrong(link->recv(sizes[m], wait), link->peer(), int(m), sizes[m]), -1)
              << "message " << m << " from rank " << link->peer();
          link->release();
        } else {
          in.resize(sizes[m]);
          link->recvInto(in.data(), sizes[m], wait);
          EXPECT_EQ(firstWrong(in.data(), link->peer(), int(m), sizes[m]), -1)
              << "message " << m << " from rank " << link->peer();
        }
      }
    }
    for (auto* link : e.raw) link->flush(wait);
  }
  // Nobody closes before everybody has read everything.
  std::byte token{};
  for (auto* link : e.raw) link->send(&token, 1, wait);
  for (auto* link : e.raw) link->recvInto(&token, 1, wait);
  for (auto* link : e.raw) link->flush(wait);
}

TEST(TcpProcess, TwoRanksAssortedSizes) { runProcessRanks(2, meshExchange); }

TEST(TcpProcess, FourRanksFullMesh) { runProcessRanks(4, meshExchange); }

}  // namespace
}  // namespace ringlet::transport::tcp::testing
