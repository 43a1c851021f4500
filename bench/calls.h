#pragma once
// ringlet's call for each benchmark operation, blocking and async.

#include <vector>

#include "bench/ops.h"
#include "ringlet/ringlet.h"

namespace ringlet::bench {

// One blocking call of `op` on `comm`. Barrier ignores the arguments.
//
// sendrecv: ringlet runs a communicator's point-to-point calls one at a time in issue order,
// and a send larger than the link's buffers waits for its receiver; so even ranks send first and
// then receive, odd ranks receive first (no cycle of waiting senders, for any n >= 2).
void callRinglet(Communicator& comm, BenchOp op, const CallArgs& args);

// The same call through the *Async API; appends its Work (sendrecv: two) to `works`.
void issueRinglet(Communicator& comm, BenchOp op, const CallArgs& args, std::vector<Work>& works);

}  // namespace ringlet::bench
