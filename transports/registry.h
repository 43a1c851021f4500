#pragma once
// The table of transports built into this library, made by transports/CMakeLists.txt from its
// `ringlet_add_transport(<folder>)` lines: each line adds `transport::<folder>::transportEntry()`.
// Nothing else names a transport: the communicator, ringlet-info and the option parser all read
// this table.

#include <string_view>
#include <vector>

#include "transports/transport.h"

namespace ringlet::transport {

// Every transport built in, highest priority first.
const std::vector<TransportEntry>& registry();
// The entry called `name`, or null.
const TransportEntry* findTransport(std::string_view name);
// "tcp, shm, local": the names, for error messages.
std::string transportNames();

}  // namespace ringlet::transport
