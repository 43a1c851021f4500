#include "src/info/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <array>
#include <sstream>

#include "ringlet/communicator.h"
#include "ringlet/version.h"
#include "src/config.h"
#include "src/info/net_interfaces.h"
#include "src/info/topology.h"
#include "src/net/interface_choice.h"
#include "src/net/socket.h"

namespace ringlet::info {
namespace {

using json = nlohmann::ordered_json;

json buildJson() {
  json build = json::object();
  std::istringstream lines(buildInfo());
  for (std::string line; std::getline(lines, line);) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    build[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return build;
}

json transportsJson(const CommunicatorOptions& options) {
  json list = json::array();
  for (const auto& t : transports(options)) {
    json settings = json::array();
    for (const auto& o : t.options) {
      settings.push_back({{"key", o.key}, {"env", o.env}, {"help", o.help}, {"value", o.value}});
    }
    list.push_back({{"name", t.name},
                    {"priority", t.priority},
                    {"available", t.available},
                    {"status", t.status},
                    {"options", settings}});
  }
  return list;
}

std::string hostName() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

json topologyJson() {
  Topology topology = discoverTopology();
  json numa = json::array();
  for (const auto& node : topology.numaNodes) {
    numa.push_back({{"index", node.index},
                    {"memory_bytes", node.memoryBytes},
                    {"cpus", cpuListText(node.pus)}});
  }
  json caches = json::array();
  for (const auto& cache : topology.caches) {
    caches.push_back({{"name", cache.name}, {"bytes", cache.bytesEach}, {"count", cache.count}});
  }
  json gpus = json::array();
  for (const auto& gpu : topology.gpus) {
    gpus.push_back({{"name", gpu.name},
                    {"kind", gpu.kind},
                    {"model", gpu.model},
                    {"pci_bus_id", gpu.pciBusId}});
  }
  std::vector<int> usable;
  for (const auto& core : usableCores(topology))
    usable.insert(usable.end(), core.pus.begin(), core.pus.end());
  return {{"source", topology.note},
          {"hwloc", topology.fromHwloc},
          {"packages", topology.packages},
          {"cores", topology.cores.size()},
          {"pus", topology.pus},
          {"usable_cpus", cpuListText(usable)},
          {"numa_nodes", numa},
          {"caches", caches},
          {"gpus", gpus}};
}

json networkJson() {
  json list = json::array();
  try {
    for (const auto& iface : netInterfaces()) {
      list.push_back({{"name", iface.name},
                      {"up", iface.up},
                      {"loopback", iface.loopback},
                      {"addresses", iface.addresses}});
    }
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
  return list;
}

// What a job on this host would use, following the environment the way the library does.
json choiceJson(const CommunicatorOptions& options) {
  json choice = json::object();
  std::string why;
  const std::string local = localTransportChoice(options, &why);
  choice["local_transport"] = local;
  choice["local_transport_reason"] = why;
  return choice;
}

std::string bytesText(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ull << 30))
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20))
    return fmt::format("{:g} MiB", static_cast<double>(bytes) / (1ull << 20));
  if (bytes >= (1ull << 10))
    return fmt::format("{:g} KiB", static_cast<double>(bytes) / (1ull << 10));
  return fmt::format("{} B", bytes);
}

std::string str(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

// The address and interface the TCP transport would listen on for peers on other hosts
// (net::chooseInterface, as the transport does), given the rendezvous host.
json betweenHostsJson(const json& transportList, const std::string& master) {
  std::string socketAddr, socketIfname;
  for (const auto& t : transportList) {
    if (t["name"] != "tcp") continue;
    for (const auto& o : t["options"]) {
      const std::string value = o["value"].is_string() ? o["value"].get<std::string>() : "";
      if (o["key"] == "socket_addr") socketAddr = value;
      if (o["key"] == "socket_ifname") socketIfname = value;
    }
  }
  if (master.empty() && socketAddr.empty() && socketIfname.empty()) {
    return {{"rendezvous", ""},
            {"reason",
             "the interface that routes to the rendezvous address (give --master ADDR, or set "
             "RINGLET_STORE_ADDR, to see which)"}};
  }
  try {
    const net::InterfaceChoice choice = net::chooseInterface(socketAddr, socketIfname, master);
    return {{"rendezvous", master},
            {"address", choice.address},
            {"interface", choice.interface},
            {"reason", choice.reason}};
  } catch (const std::exception& e) {
    return {{"rendezvous", master}, {"error", e.what()}};
  }
}

json hostReport(const std::string& master) {
  json report = {{"version", version()}, {"build", buildJson()}};
  try {
    const CommunicatorOptions options = CommunicatorOptions::fromEnvironment();
    report["transports"] = transportsJson(options);
    report["choice"] = choiceJson(options);
    std::string rendezvous = master;
    const std::string& storeAddr = config::environment().storeAddr;
    if (rendezvous.empty() && !storeAddr.empty()) {
      rendezvous = net::splitHostPort(storeAddr, "RINGLET_STORE_ADDR").first;
    }
    report["choice"]["between_hosts"] = betweenHostsJson(report["transports"], rendezvous);
    json forced = json::object();
    for (const auto& [collective, algorithm] : options.algorithms) forced[collective] = algorithm;
    report["choice"]["forced_algorithms"] = forced;
  } catch (const std::exception& e) {  // a malformed RINGLET_* variable: say so, show the rest
    report["transports"] = json::array();
    report["choice"] = {{"error", e.what()}};
  }
  json algorithmList = json::object();
  for (const auto& info : algorithms()) algorithmList[info.collective] = info.algorithms;
  report["algorithms"] = algorithmList;
  report["hostname"] = hostName();
  report["topology"] = topologyJson();
  report["network"] = networkJson();
  return report;
}

std::string renderText(const json& r) {
  std::string out = fmt::format("ringlet {}\n", str(r["version"]));
  out += "build:\n";
  for (const auto& [key, value] : r["build"].items()) {
    out += fmt::format("  {}: {}\n", key, str(value));
  }
  out += "transports (highest priority first):\n";
  if (r["transports"].empty()) out += "  (none)\n";
  for (const auto& t : r["transports"]) {
    out += fmt::format("  {}: {}{}\n", str(t["name"]),
                       t["available"].get<bool>() ? "" : "unavailable: ", str(t["status"]));
    for (const auto& o : t["options"]) {
      const std::string value = str(o["value"]);
      out += fmt::format("    {}={}: {}\n", str(o["env"]), value, str(o["help"]));
    }
  }
  out += "algorithms (RINGLET_ALGO=collective:algorithm,...; the cost model chooses the rest):\n";
  for (const auto& [collective, names] : r["algorithms"].items()) {
    out += fmt::format("  {}: {}\n", collective,
                       fmt::join(names.get<std::vector<std::string>>(), ", "));
  }
  out += fmt::format("hostname: {}\n", str(r["hostname"]));

  const json& t = r["topology"];
  out += fmt::format("topology ({}):\n", str(t["source"]));
  if (!t["hwloc"].get<bool>())
    out += "  (CPUs from the kernel only: no cores, caches, NUMA nodes or GPUs without hwloc)\n";
  out += fmt::format("  packages: {}, cores: {}, PUs: {}, usable CPUs: {}\n",
                     t["packages"].get<int>() > 0 ? str(t["packages"]) : "unknown", str(t["cores"]),
                     str(t["pus"]), str(t["usable_cpus"]));
  for (const auto& node : t["numa_nodes"]) {
    out += fmt::format("  NUMA node {}: {} memory, cpus {}\n", str(node["index"]),
                       bytesText(node["memory_bytes"].get<uint64_t>()), str(node["cpus"]));
  }
  for (const auto& cache : t["caches"]) {
    out += fmt::format("  {}: {} x {}\n", str(cache["name"]), str(cache["count"]),
                       bytesText(cache["bytes"].get<uint64_t>()));
  }
  if (t["gpus"].empty()) out += "  GPUs: none found\n";
  for (const auto& gpu : t["gpus"]) {
    out += fmt::format("  GPU {} ({}) {} {}\n", str(gpu["name"]), str(gpu["kind"]),
                       str(gpu["model"]), str(gpu["pci_bus_id"]));
  }

  out += "network interfaces:\n";
  const json& network = r["network"];
  if (network.is_object()) {
    out += fmt::format("  error: {}\n", str(network["error"]));
  } else {
    for (const auto& iface : network) {
      std::vector<std::string> addresses = iface["addresses"].get<std::vector<std::string>>();
      out += fmt::format(
          "  {}{}{}: {}\n", str(iface["name"]), iface["up"].get<bool>() ? "" : " (down)",
          iface["loopback"].get<bool>() ? " (loopback)" : "",
          addresses.empty() ? "no address" : fmt::format("{}", fmt::join(addresses, " ")));
    }
  }

  const json& c = r["choice"];
  out += "a job on this host would use:\n";
  if (c.contains("error")) {
    out += fmt::format("  error in the environment: {}\n", str(c["error"]));
  } else {
    out += fmt::format("  between local ranks: {} ({})\n", str(c["local_transport"]),
                       str(c["local_transport_reason"]));
    const json& hosts = c["between_hosts"];
    if (hosts.contains("error")) {
      out += fmt::format("  between hosts: tcp; no usable interface: {}\n", str(hosts["error"]));
    } else if (hosts.contains("address")) {
      out += fmt::format("  between hosts: tcp on {} ({}), because {}\n", str(hosts["address"]),
                         str(hosts["interface"]).empty() ? "no interface holds it"
                                                         : "interface " + str(hosts["interface"]),
                         str(hosts["reason"]));
    } else {
      out += fmt::format("  between hosts: tcp on {}\n", str(hosts["reason"]));
    }
    for (const auto& [collective, algorithm] : c["forced_algorithms"].items()) {
      out += fmt::format("  {}: {} (forced by RINGLET_ALGO)\n", collective, str(algorithm));
    }
    out +=
        "  algorithms per size: the cost model measured on a job's links (ringlet-info --model)\n";
  }
  return out;
}

}  // namespace ringlet::info
