// The transport table: the generated list of built-in transports (transport_table.cc.in),
// sorted by priority once.
#include "transports/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ringlet::transport {

std::vector<TransportEntry> builtinTransports();  // transport_table.cc (generated)

const std::vector<TransportEntry>& registry() {
  static const std::vector<TransportEntry> entries = [] {
    std::vector<TransportEntry> all = builtinTransports();
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

std::optional<size_t> chooseTransport(std::string_view forced, const PeerInfo& self,
                                      const PeerInfo& peer, size_t from) {
  const auto& entries = registry();
  for (size_t i = from; i < entries.size(); ++i) {
    if (forced != "auto" && entries[i].name != forced) continue;
    if (entries[i].canConnect(self, peer)) return i;
  }
  return std::nullopt;
}

std::string transportNames() {
  std::vector<std::string_view> names;
  for (const auto& entry : registry()) names.push_back(entry.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace ringlet::transport
