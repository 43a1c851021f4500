#pragma once

#include <string>

namespace ringlet {

// "0.1.0"
std::string version();
// One line per build option: "cuda: OFF", "hwloc: ON", ...
std::string buildInfo();

}  // namespace ringlet
