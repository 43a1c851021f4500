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

}  // namespace ringlet::detail
