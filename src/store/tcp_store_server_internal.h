#pragma once
// What tests may see of the TCP store server beyond the public interface.

#include <cstdint>

#include "ringlet/store.h"

namespace ringlet::store {

// How many times accept() failed for lack of descriptors or memory (EMFILE, ENFILE, ...). A
// server that backs off counts a few per second at most; one that spins counts thousands.
uint64_t acceptFailures(const TcpStoreServer& server);

}  // namespace ringlet::store
