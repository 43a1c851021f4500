#include "src/core/host_ring.h"

#include <map>
#include <string>

namespace ringlet::detail {

std::vector<int> hostOrderedRing(const std::vector<transport::PeerInfo>& infos) {
  std::map<std::string, size_t> hostIndex;  // host id -> its place, by lowest rank
  std::vector<std::vector<int>> ranksByHost;
  for (int rank = 0; rank < static_cast<int>(infos.size()); ++rank) {
    auto [it, added] = hostIndex.emplace(infos[rank].hostId, ranksByHost.size());
    if (added) ranksByHost.emplace_back();
    ranksByHost[it->second].push_back(rank);
  }
  std::vector<int> order;
  order.reserve(infos.size());
  for (const auto& ranks : ranksByHost) order.insert(order.end(), ranks.begin(), ranks.end());
  return order;
}

}  // namespace ringlet::detail
