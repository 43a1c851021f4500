#pragma once
// ringlet-model table: the model measured here, carried to other world sizes and links.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/communicator.h"

namespace ringlet::model {

struct TableOptions {
  // A network message's latency (the measured alpha is this host's): one value for every link,
  // or one per entry of `gbits`.
  std::vector<double> linkAlpha = {5e-6};
  std::vector<size_t> sizes = {size_t{256} << 10, size_t{64} << 20};
  std::vector<int> ranks = {8, 16, 64, 256, 1024, 4096};
  std::vector<double> gbits = {10, 100, 400};
  std::vector<std::string> collectives = {"allreduce", "allgather", "reducescatter", "broadcast"};
};

// Markdown: for each collective, size, rank count and link, the time each algorithm would take,
// the one the choice would make, and its bus bandwidth (nccl-tests' factors). Throws
// InvalidArgument naming an unknown collective, or link alphas that do not match the links. The
// measured link is the first row of each block (alpha and beta as measured); network links keep the
// measured gamma and delta (the reduction still runs on this CPU). Throws InvalidArgument when
// `report` has no model.
std::string extrapolate(const nlohmann::ordered_json& report, const TableOptions& options);

// The cost model a report of ringlet-model measure was predicted with (its "model"); throws
// InvalidArgument naming what is missing.
CostModel modelOf(const nlohmann::ordered_json& report);

// "64K", "1M", "4096". Throws InvalidArgument naming `what`.
size_t parseBytes(std::string_view text, std::string_view what);

}  // namespace ringlet::model
