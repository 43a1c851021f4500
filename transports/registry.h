#pragma once
// The table of transports built into this library, made by transports/CMakeLists.txt from its
// `ringlet_add_transport(<folder>)` lines: each line adds `transport::<folder>::transportEntry()`.
// Nothing else names a transport: the communicator, ringlet-info and the option parser all read
// this table.

#include <optional>
#include <string_view>
#include <vector>

#include "transports/transport.h"

namespace ringlet::transport {

// Every transport built in, highest priority first.
const std::vector<TransportEntry>& registry();
// The entry called `name`, or null.
const TransportEntry* findTransport(std::string_view name);
// The first entry at or after index `from` (priority order) that can link `self` and `peer`,
// counting only the one named `forced` unless it is "auto"; nullopt when none can. Every rank
// sees the same table, so every rank chooses alike.
std::optional<size_t> chooseTransport(std::string_view forced, const PeerInfo& self,
                                      const PeerInfo& peer, size_t from = 0);
// "tcp, shm, local": the names, for error messages.
std::string transportNames();

}  // namespace ringlet::transport
