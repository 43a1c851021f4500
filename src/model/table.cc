#include "src/model/table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "ringlet/ringlet.h"

namespace ringlet::model {

size_t parseBytes(std::string_view text, std::string_view what) {
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view suffix = text.substr(static_cast<size_t>(end - text.data()));
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (ec != std::errc() || end == text.data() || shift < 0 || value == 0) {
    throw InvalidArgument(
        fmt::format("{} '{}' is not a size (examples: 4096, 64K, 1M)", what, text));
  }
  return value << shift;
}

namespace {

std::string human(size_t bytes) {
  if (bytes >= (size_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (size_t{1} << 10)) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

// nccl-tests' bus bandwidth factor: what a link carries per byte of the call's size.
double busFactor(std::string_view collective, int n) {
  if (collective == "allreduce") return 2.0 * (n - 1) / n;
  if (collective == "broadcast" || collective == "reduce") return 1.0;
  return static_cast<double>(n - 1) / n;  // all-gather, reduce-scatter, all-to-all, gather, ...
}

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace

CostModel modelOf(const nlohmann::ordered_json& report) {
  if (!report.contains("model")) {
    throw InvalidArgument("the report has no \"model\" (write one with ringlet-model measure -o)");
  }
  const auto& m = report.at("model");
  // A const json's operator[] with a key it lacks reads past its storage (found by ASan on a
  // report without alpha_s_per_message): look keys up with contains() and at().
  auto number = [&m](const char* key) {
    if (!m.contains(key) || !m.at(key).is_number()) {
      throw InvalidArgument(fmt::format("the report's \"model\" has no number \"{}\"", key));
    }
    return m.at(key).get<double>();
  };
  return {.alpha =
              m.contains("alpha_s_per_message") ? number("alpha_s_per_message") : number("alpha_s"),
          .beta = number("beta_s_per_byte"),
          .gamma = number("gamma_s_per_byte"),
          .delta = number("delta_s_per_byte"),
          .betaOneWay = m.value("beta_one_way_s_per_byte", 0.0),
          .smallFactor = m.value("small_factor", 1.0),
          .memoryFactor = m.value("memory_factor", 1.0),
          .cacheBytes = m.value("cache_bytes", 0.0),
          .linkMemoryFactor = m.value("link_memory_factor", 0.0),
          .oneWayMemoryFactor = m.value("one_way_memory_factor", 0.0),
          .linkMemoryMidFactor = m.value("link_memory_mid_factor", 0.0),
          .oneWayMemoryMidFactor = m.value("one_way_memory_mid_factor", 0.0),
          .ranksShareCores = m.value("ranks_share_cores", false),
          .directBytes = m.value("direct_bytes", 0.0),
          .lentBlockBytes = m.value("lent_block_bytes", 0.0),
          .ranksPerCore = m.value("ranks_per_core", 1.0),
          .allToAllLends = m.value("all_to_all_lends", false)};
}

std::string extrapolate(const nlohmann::ordered_json& report, const TableOptions& options) {
  // Whether the measured job's ranks shared cores says nothing about the ranks extrapolated to.
  CostModel here = modelOf(report);
  here.ranksShareCores = false;
  here.ranksPerCore = 1;
  if (options.linkAlpha.size() != 1 && options.linkAlpha.size() != options.gbits.size()) {
    throw InvalidArgument(
        fmt::format("--link-alpha gives {} values for {} links: give one for all, or one per link",
                    options.linkAlpha.size(), options.gbits.size()));
  }
  auto alphaOf = [&](size_t link) {
    return options.linkAlpha.size() == 1 ? options.linkAlpha[0] : options.linkAlpha[link];
  };
  std::string alphas;
  for (size_t i = 0; i < options.gbits.size(); ++i) {
    alphas += fmt::format("{}{:g} Gbit/s {:.1f} us", i == 0 ? "" : ", ", options.gbits[i],
                          alphaOf(i) * 1e6);
  }
  std::string out = fmt::format(
      "Predicted by the cost model (collectives/select.cc). Measured here: alpha {:.2f} us, {:.2f} "
      "GB/s per link, reduce {:.2f} GB/s, copy {:.2f} GB/s; network links: the link's rate, "
      "this host's reduce and copy, alpha per link: {}.\n",
      here.alpha * 1e6, 1e-9 / here.beta, 1e-9 / here.gamma, 1e-9 / here.delta, alphas);
  const auto known = algorithms();
  for (const std::string& collective : options.collectives) {
    std::vector<std::string> names;
    for (const auto& info : known) {
      if (info.collective != collective) continue;
      // Not the ones the model prices only across hosts (hierarchical): these tables price
      // ranks one to a link.
      for (const std::string& name : info.algorithms) {
        if (std::isfinite(predictSeconds(CostModel{}, collective, name, 8, size_t{1} << 20))) {
          names.push_back(name);
        }
      }
    }
    if (names.empty()) {
      std::string list;
      for (const auto& info : known) list += (list.empty() ? "" : ", ") + info.collective;
      throw InvalidArgument(
          fmt::format("--collectives: '{}' is not a collective (known: {})", collective, list));
    }
    out += fmt::format("\n### {}\n\n| size | ranks | link |", collective);
    for (const auto& n : names) out += fmt::format(" {} |", n);
    out += " chosen | busbw GB/s |\n|---|---:|---|";
    for (size_t i = 0; i < names.size(); ++i) out += "---:|";
    out += "---|---:|\n";
    for (size_t bytes : options.sizes) {
      for (int n : options.ranks) {
        std::vector<std::pair<std::string, CostModel>> links = {{"measured", here}};
        for (size_t i = 0; i < options.gbits.size(); ++i) {
          CostModel link = here;
          link.alpha = alphaOf(i);
          link.beta = 8.0 / (options.gbits[i] * 1e9);
          link.betaOneWay = 0;             // a network link is full duplex: one way costs beta too
          link.linkBytesInMemory = false;  // nor does its rate depend on the caches
          link.directBytes = 0;            // nor does it lend messages (shared memory's)
          links.emplace_back(fmt::format("{:g} Gbit/s", options.gbits[i]), link);
        }
        for (const auto& [label, model] : links) {
          out += fmt::format("| {} | {} | {} |", human(bytes), n, label);
          double best = std::numeric_limits<double>::infinity();
          std::string chosen;
          for (const auto& name : names) {
            const double t = predictSeconds(model, collective, name, n, bytes);
            out += fmt::format(" {} |", seconds(t));
            if (t < best) {
              best = t;
              chosen = name;
            }
          }
          out += fmt::format(" {} | {:.3g} |\n", chosen,
                             bytes / best * busFactor(collective, n) / 1e9);
        }
      }
    }
  }
  return out;
}

}  // namespace ringlet::model
