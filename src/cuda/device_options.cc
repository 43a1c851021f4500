// DeviceOptions from the environment; built with or without CUDA.
#include "ringlet/cuda.h"
#include "src/config.h"

namespace ringlet::cuda {

std::string_view toString(DevicePath path) {
  switch (path) {
    case DevicePath::kAuto:
      return "auto";
    case DevicePath::kIpc:
      return "ipc";
    case DevicePath::kStaged:
      return "staged";
  }
  return "unknown";
}

std::string_view toString(BlockRoute route) {
  switch (route) {
    case BlockRoute::kAuto:
      return "auto";
    case BlockRoute::kDirect:
      return "direct";
    case BlockRoute::kRing:
      return "ring";
  }
  return "unknown";
}

DeviceOptions DeviceOptions::fromEnvironment() {
  DeviceOptions options;
  const auto& env = config::environment();
  if (env.cudaPath == "ipc") options.path = DevicePath::kIpc;
  if (env.cudaPath == "staged") options.path = DevicePath::kStaged;
  if (env.cudaSlotBytes) options.slotBytes = *env.cudaSlotBytes;
  if (env.cudaStagedBelow) options.stagedBelowBytes = *env.cudaStagedBelow;
  if (env.cudaBlockRoute == "direct") options.blockRoute = BlockRoute::kDirect;
  if (env.cudaBlockRoute == "ring") options.blockRoute = BlockRoute::kRing;
  if (env.timeout) options.timeout = *env.timeout;
  return options;
}

}  // namespace ringlet::cuda
