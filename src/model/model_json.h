#pragma once
// The cost model's parameters as the JSON reports name them: ringlet-info --model --json,
// ringlet-model measure -o, and ringlet-bench --json (config.cost_model). modelOf
// (src/model/table.cc) reads them back.

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "ringlet/communicator.h"

namespace ringlet::model {

template <typename Json = nlohmann::ordered_json>
Json costModelJson(const CostModel& m) {
  return {{"alpha_s", m.alpha},
          {"beta_s_per_byte", m.beta},
          {"gamma_s_per_byte", m.gamma},
          {"delta_s_per_byte", m.delta},
          {"beta_one_way_s_per_byte", m.betaOneWay},
          {"small_factor", m.smallFactor},
          {"memory_factor", m.memoryFactor},
          {"link_memory_factor", m.linkMemoryFactor},
          {"one_way_memory_factor", m.oneWayMemoryFactor},
          {"link_memory_mid_factor", m.linkMemoryMidFactor},
          {"one_way_memory_mid_factor", m.oneWayMemoryMidFactor},
          {"cache_bytes", m.cacheBytes},
          {"direct_bytes", m.directBytes},
          {"lent_block_bytes", m.lentBlockBytes},
          {"ranks_share_cores", m.ranksShareCores},
          {"ranks_per_core", m.ranksPerCore},
          {"all_to_all_lends", m.allToAllLends}};
}

// " (a link's byte 1.3x at 32 MiB a rank)" where a report's model (`m`, as costModelJson writes
// it) has a link memory factor, else empty: the text headers of ringlet-info --model and
// ringlet-model. 32 MiB: the working set it is measured at
// (collectives::kLinkFactorWorkingSetBytes); with the points measured half way (8 MiB) and one
// way, " (a link's byte 1.1x at 8 MiB and 1.9x at 32 MiB a rank; one way 1x and 1.1x)".
template <typename Json>
std::string linkMemoryNote(const Json& m) {
  const double factor = m.value("link_memory_factor", 0.0);
  if (factor <= 0) return {};
  const double mid = m.value("link_memory_mid_factor", 0.0);
  const double oneWay = m.value("one_way_memory_factor", 0.0);
  const double oneWayMid = m.value("one_way_memory_mid_factor", 0.0);
  std::string note =
      mid > 0 ? fmt::format(" (a link's byte {:.2g}x at 8 MiB and {:.2g}x at 32 MiB a rank", mid,
                            factor)
              : fmt::format(" (a link's byte {:.2g}x at 32 MiB a rank", factor);
  if (oneWay > 0) {
    note += oneWayMid > 0 ? fmt::format("; one way {:.2g}x and {:.2g}x", oneWayMid, oneWay)
                          : fmt::format("; one way {:.2g}x", oneWay);
  }
  return note + ")";
}

}  // namespace ringlet::model
