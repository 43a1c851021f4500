// CommunicatorOptions from the environment, the transports' options, and what ringlet-info
// shows about them: everything here reads the transport table, never a transport by name.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "collectives/select.h"
#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "src/config.h"
#include "src/core/communicator_impl.h"
#include "transports/registry.h"

namespace ringlet {

CommunicatorOptions CommunicatorOptions::fromEnvironment() {
  const auto& env = config::environment();
  CommunicatorOptions options;
  if (env.timeout) options.timeout = *env.timeout;
  if (!env.transport.empty()) options.transport = env.transport;
  if (env.segmentBytes) options.segmentBytes = *env.segmentBytes;
  options.trace = env.trace;
  if (!env.wait.empty()) options.wait = env.wait;
  options.algorithms = collectives::parseAlgorithmList(env.algorithms, "RINGLET_ALGO");
  if (env.costModel) {
    const auto& v = *env.costModel;
    options.costModel = CostModel{.alpha = v[0],
                                  .beta = v[1],
                                  .gamma = v[2],
                                  .delta = v[3],
                                  .betaOneWay = v[4],
                                  .smallFactor = v[7],
                                  .memoryFactor = v[5],
                                  .cacheBytes = v[6],
                                  .linkMemoryFactor = v[9],
                                  .oneWayMemoryFactor = v[10],
                                  .linkMemoryMidFactor = v[11],
                                  .oneWayMemoryMidFactor = v[12],
                                  .directBytes = v[8],
                                  .lentBlockBytes = v[13]};
  }
  for (const auto& entry : transport::registry()) {
    for (auto& [key, value] : transport::readSettings(entry)) options.transportOptions[key] = value;
  }
  return options;
}

namespace detail {

void checkOptions(const CommunicatorOptions& options) {
  if (options.calibrationEffort < 1 || options.calibrationEffort > 1000) {
    throw InvalidArgument(
        fmt::format("CommunicatorOptions::calibrationEffort is {}: it must be between 1 and 1000",
                    options.calibrationEffort));
  }
  collectives::parseForced(options.algorithms);  // throws naming an unknown name
  // Every transport's settings, used or not: a malformed one is named, never ignored.
  for (const auto& entry : transport::registry()) {
    if (entry.checkSettings) entry.checkSettings(options.transportOptions);
  }
  if (const auto& m = options.costModel) {
    for (double v : {m->alpha, m->beta, m->gamma, m->delta, m->betaOneWay, m->cacheBytes,
                     m->directBytes, m->lentBlockBytes}) {
      if (!std::isfinite(v) || v < 0) {
        throw InvalidArgument(fmt::format(
            "CommunicatorOptions::costModel has {}: every parameter must be a finite number >= 0",
            v));
      }
    }
    if (!std::isfinite(m->memoryFactor) || m->memoryFactor < 1) {
      throw InvalidArgument(fmt::format(
          "CommunicatorOptions::costModel has memoryFactor {}: it must be a finite number >= 1",
          m->memoryFactor));
    }
    if (!std::isfinite(m->linkMemoryFactor) ||
        (m->linkMemoryFactor != 0 && m->linkMemoryFactor < 1)) {
      throw InvalidArgument(fmt::format(
          "CommunicatorOptions::costModel has linkMemoryFactor {}: it must be 0 (memoryFactor) "
          "or a finite number >= 1",
          m->linkMemoryFactor));
    }
    const std::pair<const char*, double> pastCacheFactors[] = {
        {"oneWayMemoryFactor", m->oneWayMemoryFactor},
        {"linkMemoryMidFactor", m->linkMemoryMidFactor},
        {"oneWayMemoryMidFactor", m->oneWayMemoryMidFactor}};
    for (const auto& [name, factor] : pastCacheFactors) {
      if (!std::isfinite(factor) || (factor != 0 && factor < 1)) {
        throw InvalidArgument(fmt::format(
            "CommunicatorOptions::costModel has {} {}: it must be 0 (not measured) or a finite "
            "number >= 1",
            name, factor));
      }
    }
    if (!std::isfinite(m->ranksPerCore) || m->ranksPerCore < 1) {
      throw InvalidArgument(fmt::format(
          "CommunicatorOptions::costModel has ranksPerCore {}: it must be a finite number >= 1",
          m->ranksPerCore));
    }
    if (!(m->smallFactor > 0 && m->smallFactor <= 1)) {
      throw InvalidArgument(fmt::format(
          "CommunicatorOptions::costModel has smallFactor {}: it must be above 0 and at most 1",
          m->smallFactor));
    }
  }
  if (options.wait != "adaptive" && options.wait != "fixed") {
    throw InvalidArgument(fmt::format(
        "CommunicatorOptions::wait (RINGLET_WAIT) is '{}': it must be adaptive or fixed",
        options.wait));
  }
  if (options.transport != "auto" && transport::findTransport(options.transport) == nullptr) {
    throw InvalidArgument(fmt::format("transport '{}' (RINGLET_TRANSPORT) is not one of auto, {}",
                                      options.transport, transport::transportNames()));
  }
  std::vector<std::string> known;
  for (const auto& entry : transport::registry()) {
    for (const auto& option : entry.options) known.emplace_back(option.key);
  }
  for (const auto& [key, value] : options.transportOptions) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw InvalidArgument(fmt::format(
          "CommunicatorOptions::transportOptions has the key '{}', which no transport built in "
          "understands (known: {})",
          key, fmt::join(known, ", ")));
    }
  }
}

}  // namespace detail

std::vector<AlgorithmInfo> algorithms() {
  std::vector<AlgorithmInfo> list;
  for (size_t i = 0; i < collectives::kCollectiveCount; ++i) {
    const auto collective = static_cast<collectives::Collective>(i);
    AlgorithmInfo info;
    info.collective = std::string(collectives::nameOf(collective));
    for (auto a : collectives::algorithmsOf(collective)) {
      info.algorithms.emplace_back(collectives::nameOf(a));
    }
    list.push_back(std::move(info));
  }
  return list;
}

double predictSeconds(const CostModel& model, std::string_view collective,
                      std::string_view algorithm, int ranks, size_t bytes, size_t sliceBytes) {
  const auto which = collectives::collectiveNamed(collective);
  if (!which) {
    throw InvalidArgument(fmt::format("predictSeconds: '{}' is not a collective", collective));
  }
  for (auto a : collectives::algorithmsOf(*which)) {
    if (collectives::nameOf(a) == algorithm) {
      return collectives::predictSeconds(*which, a, ranks, bytes,
                                         collectives::sliceBytes(sliceBytes, {}), model);
    }
  }
  throw InvalidArgument(
      fmt::format("predictSeconds: {} has no algorithm '{}'", collective, algorithm));
}

std::vector<TransportInfo> transports(const CommunicatorOptions& options) {
  std::vector<TransportInfo> list;
  for (const auto& entry : transport::registry()) {
    TransportInfo info;
    info.name = std::string(entry.name);
    info.priority = entry.priority;
    const std::string why = entry.probe ? entry.probe(options.transportOptions) : "";
    info.available = why.empty();
    try {
      info.status = !info.available  ? why
                    : entry.describe ? entry.describe(options.transportOptions)
                                     : "available";
    } catch (const std::exception& e) {
      info.available = false;
      info.status = e.what();
    }
    for (const auto& option : entry.options) {
      auto it = options.transportOptions.find(std::string(option.key));
      info.options.push_back({std::string(option.key), std::string(option.env),
                              std::string(option.help),
                              it == options.transportOptions.end() ? "" : it->second});
    }
    list.push_back(std::move(info));
  }
  return list;
}

std::string localTransportChoice(const CommunicatorOptions& options, std::string* why) {
  detail::checkOptions(options);
  if (options.transport != "auto") {
    if (why) *why = "forced (RINGLET_TRANSPORT)";
    return options.transport;
  }
  // Two processes of this host, as link setup would describe them.
  const transport::PeerInfo self{
      .rank = 0, .hostname = "this", .hostId = "this-host", .pid = 1, .pidNamespace = "pid:[1]"};
  const transport::PeerInfo peer{
      .rank = 1, .hostname = "this", .hostId = "this-host", .pid = 2, .pidNamespace = "pid:[1]"};
  // As link setup chooses, skipping what this host cannot offer (the probe).
  for (auto i = transport::chooseTransport("auto", self, peer); i;
       i = transport::chooseTransport("auto", self, peer, *i + 1)) {
    const auto& entry = transport::registry()[*i];
    if (entry.probe && !entry.probe(options.transportOptions).empty()) continue;
    if (why) *why = "highest-priority transport that links two processes of one host";
    return std::string(entry.name);
  }
  if (why) *why = "no transport built in links two processes of one host";
  return "";
}

}  // namespace ringlet
