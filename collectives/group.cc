#include <fmt/format.h>

#include "collectives/collectives.h"
#include "ringlet/error.h"

namespace ringlet::collectives {

Link& Group::link(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(links.size()) || links[peer] == nullptr) {
    throw Error(ErrorCode::kInternal,
                fmt::format("rank {} has no link to rank {} (world size {})", rank, peer, size));
  }
  return *links[peer];
}

}  // namespace ringlet::collectives
