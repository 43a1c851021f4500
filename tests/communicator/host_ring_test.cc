// The ring all-reduce's order across hosts (src/core/host_ring.h).

#include "src/core/host_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ringlet::detail {
namespace {

// Peer records whose host ids are the given letters, by rank.
std::vector<transport::PeerInfo> onHosts(const std::string& hosts) {
  std::vector<transport::PeerInfo> infos;
  for (size_t rank = 0; rank < hosts.size(); ++rank) {
    infos.push_back({.rank = static_cast<int>(rank),
                     .hostname = std::string(1, hosts[rank]),
                     .hostId = std::string(1, hosts[rank]) + "/boot/shm",
                     .pid = 100 + static_cast<int>(rank),
                     .pidNamespace = "pid:[1]"});
  }
  return infos;
}

TEST(HostRing, PlacementByHostKeepsRankOrder) {
  EXPECT_EQ(hostOrderedRing(onHosts("AABB")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hostOrderedRing(onHosts("AAAA")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hostOrderedRing(onHosts("ABC")), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(hostOrderedRing(onHosts("A")), (std::vector<int>{0}));
}

TEST(HostRing, CyclicPlacementEntersEachHostOnce) {
  EXPECT_EQ(hostOrderedRing(onHosts("ABAB")), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(hostOrderedRing(onHosts("ABCDABCD")), (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  // Hosts in the order of their lowest rank, ranks within a host ascending.
  EXPECT_EQ(hostOrderedRing(onHosts("BAAB")), (std::vector<int>{0, 3, 1, 2}));
  // Every rank once, and the ring crosses between hosts once per host.
  const auto infos = onHosts("ABCABCAB");
  const std::vector<int> order = hostOrderedRing(infos);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  int crossings = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    crossings += infos[order[i]].hostId != infos[order[(i + 1) % order.size()]].hostId;
  }
  EXPECT_EQ(crossings, 3);
}

}  // namespace
}  // namespace ringlet::detail
