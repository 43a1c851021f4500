#pragma once
// The private side of a Communicator, for ringlet's own layers above the core (the CUDA device
// layer runs its calls in the communicator's sequence). Not a public header: users cannot reach
// it, and the public one only befriends this type.

#include "ringlet/communicator.h"
#include "src/core/communicator_impl.h"

namespace ringlet::detail {

struct CommunicatorAccess {
  static CommunicatorImpl& impl(Communicator& communicator) { return *communicator.impl_; }
};

}  // namespace ringlet::detail
