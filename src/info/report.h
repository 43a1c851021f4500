#pragma once
// What ringlet-info reports: version and build options, the transports compiled in, the host
// (name, topology, network interfaces) and what ringlet would choose for a job here. Collected
// once as JSON; the text form is rendered from the same object.

#include <nlohmann/json.hpp>
#include <string>

namespace ringlet::info {

// Never throws for a missing piece: a part that cannot be read holds {"error": "..."}.
// `master`: the rendezvous host a job across hosts would use (empty: RINGLET_STORE_ADDR's host,
// if set), to say which interface the TCP transport would pick to reach the other hosts.
nlohmann::ordered_json hostReport(const std::string& master = "");

// The human-readable form of hostReport().
std::string renderText(const nlohmann::ordered_json& report);

}  // namespace ringlet::info
