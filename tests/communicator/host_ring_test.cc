// The ring all-reduce's order across hosts (src/core/host_ring.h).

#include "src/core/host_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "src/core/communicator_impl.h"

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

TEST(HostSpread, RanksAreDealtOverTheHosts) {
  EXPECT_EQ(hostSpreadOrder(onHosts("AABB")), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(hostSpreadOrder(onHosts("AABBCCDD")), (std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7}));
  // Already dealt cyclically, or one host, or one rank per host: rank order.
  EXPECT_EQ(hostSpreadOrder(onHosts("ABAB")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hostSpreadOrder(onHosts("AAAA")), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(hostSpreadOrder(onHosts("ABCD")), (std::vector<int>{0, 1, 2, 3}));
  // Hosts of different sizes: the larger hosts' last ranks come last.
  EXPECT_EQ(hostSpreadOrder(onHosts("AAABB")), (std::vector<int>{0, 3, 1, 4, 2}));
}

// Recursive halving on the spread order: with H hosts of R ranks, the exchanges at distances
// size/2 .. H (the largest) stay inside a host, only those below H cross.
TEST(HostSpread, LargestHalvingsStayInsideAHost) {
  for (const std::string hosts : {"AABB", "AAAABBBB", "AABBCCDD", "ABABABAB", "AAAABBBBCCCCDDDD"}) {
    const auto infos = onHosts(hosts);
    const std::vector<int> order = hostSpreadOrder(infos);
    const int n = static_cast<int>(order.size());
    std::set<std::string> distinct;
    for (const auto& info : infos) distinct.insert(info.hostId);
    const int h = static_cast<int>(distinct.size());
    for (int distance = n / 2; distance >= 1; distance /= 2) {
      bool crosses = false;
      for (int p = 0; p < n; ++p) {
        crosses |= infos[order[p]].hostId != infos[order[p ^ distance]].hostId;
      }
      EXPECT_EQ(crosses, distance < h) << hosts << " distance " << distance;
    }
  }
}

// Ranks share cores where a host has more of them than the CPUs they may use (the most any of
// them sees).
TEST(RanksShareCores, CountsEachHostsRanksAgainstItsCpus) {
  auto withCpus = [](const std::string& hosts, const std::vector<int>& cpus) {
    std::vector<transport::PeerInfo> infos = onHosts(hosts);
    for (size_t r = 0; r < infos.size(); ++r) infos[r].cpus = cpus[r];
    return infos;
  };
  EXPECT_FALSE(ranksShareCores(withCpus("AA", {2, 2})));     // two ranks, two CPUs
  EXPECT_TRUE(ranksShareCores(withCpus("AAA", {2, 2, 2})));  // three on two
  // A rank restricted to fewer CPUs than the others: the host still has the most any sees.
  EXPECT_FALSE(ranksShareCores(withCpus("AAA", {1, 4, 1})));
  // Per host: host B's three ranks on two CPUs share, though host A has room.
  EXPECT_TRUE(ranksShareCores(withCpus("AABBB", {8, 8, 2, 2, 2})));
  EXPECT_FALSE(ranksShareCores(withCpus("AABBB", {8, 8, 3, 3, 3})));
  // Not known (0): not counted as shared.
  EXPECT_FALSE(ranksShareCores(withCpus("AAA", {0, 0, 0})));
  // Ranks per core: the most crowded host's; 1 where none is crowded.
  EXPECT_DOUBLE_EQ(ranksPerCore(withCpus("AA", {2, 2})), 1.0);
  EXPECT_DOUBLE_EQ(ranksPerCore(withCpus("AAA", {2, 2, 2})), 1.5);
  EXPECT_DOUBLE_EQ(ranksPerCore(withCpus("AABBBB", {1, 1, 2, 2, 2, 2})), 2.0);
  EXPECT_DOUBLE_EQ(ranksPerCore(withCpus("AAA", {0, 0, 0})), 1.0);
}

// The larger default pipeline slice where ranks share cores applies only where every link is
// TCP and every rank can tell (CommunicatorImpl::segmentBytes): one host, TCP forced.
TEST(OneHostOverTcp, OnlyWithTcpForcedAndEveryRankOnOneHost) {
  EXPECT_TRUE(oneHostOverTcp("tcp", onHosts("AAAA")));
  EXPECT_FALSE(oneHostOverTcp("auto", onHosts("AAAA")));  // shared memory between them
  EXPECT_FALSE(oneHostOverTcp("shm", onHosts("AAAA")));
  EXPECT_FALSE(oneHostOverTcp("tcp", onHosts("AAAB")));  // a rank elsewhere
  EXPECT_TRUE(oneHostOverTcp("tcp", onHosts("A")));
}

}  // namespace
}  // namespace ringlet::detail
