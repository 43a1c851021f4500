#include "src/info/model.h"

#include <fmt/format.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "ringlet/ringlet.h"
#include "src/model/model_json.h"

namespace ringlet::info {

using json = nlohmann::ordered_json;

bool underLauncher(const Bootstrap& bootstrap) {
  return bootstrap.source != "manual" || bootstrap.size > 1;
}

json modelReport(Bootstrap bootstrap) {
  Communicator comm = Communicator::create(std::move(bootstrap));
  if (comm.rank() != 0) return json::object();
  const CostModel m = comm.costModel();
  json report;
  report["ranks"] = comm.size();
  report["links"] = comm.describeLinks();
  report["segment_bytes"] = comm.segmentBytes();
  report["model"] = model::costModelJson<json>(m);
  json rows = json::array();
  for (size_t bytes = 8; bytes <= (size_t{256} << 20); bytes *= 4) {
    json row;
    row["bytes"] = bytes;
    for (const auto& info : algorithms()) {
      row[info.collective] = comm.algorithmFor(info.collective, bytes);
    }
    rows.push_back(row);
  }
  report["choice"] = rows;
  return report;
}

std::string renderModelText(const json& r) {
  if (r.empty()) return "";
  const json& m = r["model"];
  std::string out = fmt::format(
      "cost model measured on {} ranks (links: {})\n"
      "  alpha {:.3g} us per message, beta {:.3g} GB/s per link ({:.3g} one way), gamma {:.3g} "
      "GB/s reduced, delta {:.3g} GB/s copied; {:.2g}x slower past {:.3g} MiB of cache per "
      "rank{}{}{}; pipeline slices of {} KiB\n\n",
      r["ranks"].get<int>(), r["links"].get<std::string>(), m["alpha_s"].get<double>() * 1e6,
      1e-9 / std::max(m["beta_s_per_byte"].get<double>(), 1e-15),
      1e-9 / std::max(m["beta_one_way_s_per_byte"].get<double>(), 1e-15),
      1e-9 / std::max(m["gamma_s_per_byte"].get<double>(), 1e-15),
      1e-9 / std::max(m["delta_s_per_byte"].get<double>(), 1e-15), m["memory_factor"].get<double>(),
      m["cache_bytes"].get<double>() / (1 << 20), model::linkMemoryNote(m),
      m.value("ranks_share_cores", false)
          ? fmt::format("; ranks share cores ({:.3g} per CPU{})", m.value("ranks_per_core", 1.0),
                        m.value("all_to_all_lends", false) ? ", all-to-all blocks lent" : "")
          : std::string(),
      m.value("direct_bytes", 0.0) > 0
          ? fmt::format("; tree broadcasts of up to {:g} KiB written in place{}",
                        m.value("direct_bytes", 0.0) / 1024,
                        m.value("lent_block_bytes", 0.0) > 0
                            ? fmt::format(", exchanges' blocks of up to {:g} KiB lent",
                                          m.value("lent_block_bytes", 0.0) / 1024)
                            : std::string())
          : std::string(),
      r.value("segment_bytes", size_t{0}) >> 10);
  std::vector<std::string> names;
  for (const auto& [key, value] : r["choice"][0].items()) {
    if (key != "bytes") names.push_back(key);
  }
  out += fmt::format("{:>10}", "bytes");
  for (const auto& name : names) out += fmt::format(" {:>19}", name);
  out += "\n";
  for (const auto& row : r["choice"]) {
    out += fmt::format("{:>10}", row["bytes"].get<size_t>());
    for (const auto& name : names) out += fmt::format(" {:>19}", row[name].get<std::string>());
    out += "\n";
  }
  return out;
}

}  // namespace ringlet::info
