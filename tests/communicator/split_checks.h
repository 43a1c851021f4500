#pragma once
// What the split tests share: a communicator on thread or process ranks, and a check of every
// collective on a communicator whose ranks came from a split, against references.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet::testing {

Communicator makeComm(int rank, int size, std::shared_ptr<Store> store,
                      const std::string& transport,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Runs every collective (all-reduce small and large, broadcast, reduce, all-gather,
// reduce-scatter, gather, scatter, all-to-all, barrier, send/recv, an async all-reduce) on
// `comm` and checks each against references. `ids[r]` is the original rank of comm's rank r:
// every rank's data says who sent it, so a rank in the wrong place, or a message from another
// communicator, shows as a wrong value. `salt` makes each round's data its own.
void checkEveryCollective(Communicator& comm, const std::vector<int>& ids, int salt);

// 0, 1, ..., size - 1.
std::vector<int> identity(int size);

}  // namespace ringlet::testing
