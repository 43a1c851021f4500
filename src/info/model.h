#pragma once
// ringlet-info --model: the cost model a real job measures on its own links, and the algorithm
// each collective would then use per size. Run on every rank of a launched job.

#include <nlohmann/json.hpp>
#include <string>

namespace ringlet::info {

// Collective over the job that launched this process (Bootstrap::fromEnvironment). Returns the
// report on rank 0 and an empty object elsewhere.
nlohmann::ordered_json modelReport();

// The text form: the parameters, then one row per size with each collective's algorithm.
std::string renderModelText(const nlohmann::ordered_json& report);

// True when this process was started by a launcher (ringlet-run, torchrun, mpirun, Slurm).
bool underLauncher();

}  // namespace ringlet::info
