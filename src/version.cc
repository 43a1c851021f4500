#include "ringlet/version.h"

#include <fmt/format.h>

#include "build_info.h"

namespace ringlet {

std::string version() { return RINGLET_VERSION_STRING; }

std::string buildInfo() {
  return fmt::format(
      "version: {}\nbuild type: {}\ncompiler: {}\ncuda: {}\nhwloc: {}\nmpi (bench): {}\n",
      RINGLET_VERSION_STRING, RINGLET_BUILD_TYPE, RINGLET_BUILD_COMPILER, RINGLET_BUILD_CUDA,
      RINGLET_BUILD_HWLOC, RINGLET_BUILD_MPI);
}

}  // namespace ringlet
