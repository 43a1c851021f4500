#include <fmt/format.h>

#include <chrono>

#include "ringlet/error.h"
#include "src/config.h"
#include "transports/transport.h"

namespace ringlet::transport {

void WaitContext::pumpOthers(const Link* self) const {
  for (Link* link : links) {
    if (link != self && link != nullptr) link->pump();
  }
}

std::string WaitContext::describe() const {
  return fmt::format("{} #{} on rank {}", op, seq, rank);
}

void WaitContext::throwTimeout(std::string_view what, int peer) const {
  if (cancelled != nullptr && cancelled->load()) {
    throw AbortedError(
        fmt::format("{} was aborted while waiting for {} (peer rank {})", describe(), what, peer));
  }
  throw TimeoutError(fmt::format("{} timed out waiting for {} (peer rank {}); deadline passed",
                                 describe(), what, peer));
}

Settings readSettings(const TransportEntry& entry) {
  Settings settings;
  for (const TransportOption& option : entry.options) {
    const std::string env(option.env);
    if (auto value = config::getenv(env.c_str())) settings[std::string(option.key)] = *value;
  }
  return settings;
}

}  // namespace ringlet::transport
