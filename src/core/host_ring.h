#pragma once
// The order of the ring all-reduce: ranks grouped by host, so that the ring enters and leaves
// every host once however the launcher dealt the ranks to hosts.
//
// Ranks dealt cyclically over two hosts A and B (rank r on host r mod 2) make a rank-order ring
// cross between hosts at every step, so each host's link carries two flows each way:
//
//   rank order:  0(A) -> 1(B) -> 2(A) -> 3(B) -> 0      4 crossings, 2 per host and direction
//   host order:  0(A) -> 2(A) -> 1(B) -> 3(B) -> 0      2 crossings, 1 per host and direction
//
// Hosts come in the order of their lowest rank, and ranks within a host in rank order, so a
// placement that is already by host (ringlet-run's block order, torchrun's) gives rank order.

#include <vector>

#include "transports/transport.h"

namespace ringlet::detail {

// Position -> rank, from every rank's peer record (the same on every rank).
std::vector<int> hostOrderedRing(const std::vector<transport::PeerInfo>& infos);

// The ranks dealt over the hosts instead: the first rank of every host (hosts in the order
// above), then the second of every host, and so on. With H hosts of R ranks each, place p holds
// the (p / H)-th rank of host p % H, so places size/2, size/4, ... apart (recursive halving's
// first and largest exchanges) share a host until the distance falls below H:
//
//   2 hosts A (ranks 0 1) and B (2 3), by host:  0 1 2 3    spread:  0 2 1 3
//   halving at distance 2 pairs places 0-2 and 1-3: ranks 0-1 (A) and 2-3 (B)
std::vector<int> hostSpreadOrder(const std::vector<transport::PeerInfo>& infos);

}  // namespace ringlet::detail
