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

std::string_view toString(DeviceAllToAll allToAll) {
  switch (allToAll) {
    case DeviceAllToAll::kAuto:
      return "auto";
    case DeviceAllToAll::kDirect:
      return "direct";
    case DeviceAllToAll::kRing:
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
  if (env.cudaAllToAll == "direct") options.allToAll = DeviceAllToAll::kDirect;
  if (env.cudaAllToAll == "ring") options.allToAll = DeviceAllToAll::kRing;
  if (env.timeout) options.timeout = *env.timeout;
  return options;
}

}  // namespace ringlet::cuda
