// The transports built into this binary. A transport folder's CMakeLists.txt defines
// RINGLET_TRANSPORT_<NAME> and provides make<Name>TransportEntry().
#include <algorithm>

#include "transports/transport.h"

namespace ringlet::transport {

#ifdef RINGLET_TRANSPORT_TCP
TransportEntry makeTcpTransportEntry();
#endif
#ifdef RINGLET_TRANSPORT_SHM
TransportEntry makeShmTransportEntry();
#endif
#ifdef RINGLET_TRANSPORT_LOCAL
TransportEntry makeLocalTransportEntry();
#endif
#ifdef RINGLET_TRANSPORT_CUDA
TransportEntry makeCudaTransportEntry();
#endif

const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = [] {
    std::vector<TransportEntry> all;
#ifdef RINGLET_TRANSPORT_CUDA
    all.push_back(makeCudaTransportEntry());
#endif
#ifdef RINGLET_TRANSPORT_SHM
    all.push_back(makeShmTransportEntry());
#endif
#ifdef RINGLET_TRANSPORT_TCP
    all.push_back(makeTcpTransportEntry());
#endif
#ifdef RINGLET_TRANSPORT_LOCAL
    all.push_back(makeLocalTransportEntry());
#endif
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.priority > b.priority; });
    return all;
  }();
  return entries;
}

const TransportEntry* findTransport(std::string_view name) {
  for (const auto& entry : registry()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace ringlet::transport
