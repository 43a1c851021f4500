#include "src/core/host_ring.h"

#include <map>
#include <string>

namespace ringlet::detail {

namespace {

// Each host's ranks, ascending; hosts in the order of their lowest rank.
std::vector<std::vector<int>> ranksByHost(const std::vector<transport::PeerInfo>& infos) {
  std::map<std::string, size_t> hostIndex;  // host id -> its place, by lowest rank
  std::vector<std::vector<int>> hosts;
  for (int rank = 0; rank < static_cast<int>(infos.size()); ++rank) {
    auto [it, added] = hostIndex.emplace(infos[rank].hostId, hosts.size());
    if (added) hosts.emplace_back();
    hosts[it->second].push_back(rank);
  }
  return hosts;
}

}  // namespace

std::vector<int> hostOrderedRing(const std::vector<transport::PeerInfo>& infos) {
  std::vector<int> order;
  order.reserve(infos.size());
  for (const auto& ranks : ranksByHost(infos))
    order.insert(order.end(), ranks.begin(), ranks.end());
  return order;
}

std::vector<int> hostSpreadOrder(const std::vector<transport::PeerInfo>& infos) {
  const std::vector<std::vector<int>> hosts = ranksByHost(infos);
  std::vector<int> order;
  order.reserve(infos.size());
  for (size_t i = 0; order.size() < infos.size(); ++i) {
    for (const auto& ranks : hosts) {
      if (i < ranks.size()) order.push_back(ranks[i]);
    }
  }
  return order;
}

}  // namespace ringlet::detail
