#pragma once
// ringlet-info --model: the cost model a real job measures on its own links, and the algorithm
// each collective would then use per size. Run on every rank of a launched job.

#include <nlohmann/json.hpp>
#include <string>

#include "ringlet/bootstrap.h"

namespace ringlet::info {

// Collective over the job that launched this process (`bootstrap`, from
// Bootstrap::fromEnvironment). Returns the report on rank 0 and an empty object elsewhere.
nlohmann::ordered_json modelReport(Bootstrap bootstrap);

// The text form: the parameters, then one row per size with each collective's algorithm.
std::string renderModelText(const nlohmann::ordered_json& report);

// True when `bootstrap` (Bootstrap::fromEnvironment) says a launcher started this process
// (ringlet-run, torchrun, mpirun, Slurm). One bootstrap for both: under mpirun or Slurm rank 0
// hosts the store on a port derived from the job id, and a second bootstrap right after the
// first raced its server's shutdown (ranks that connected to the closing one failed).
bool underLauncher(const Bootstrap& bootstrap);

}  // namespace ringlet::info
