#include <fmt/format.h>

#include "collectives/collectives.h"
#include "ringlet/error.h"

namespace ringlet::collectives {

void Group::throwNoLink(int peer) const {
  throw Error(ErrorCode::kInternal,
              fmt::format("rank {} has no link to rank {} (world size {})", rank, peer, size));
}

}  // namespace ringlet::collectives
