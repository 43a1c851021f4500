// Fuzz target: the environment parsers (RINGLET_* variables, the launcher variables, host:port)
// fed hostile values.
//
// Input: lines "index value", where the byte `index` picks a variable from kVariables. Each value
// is set in the environment, then every parser that reads them runs. Each must accept the value
// or throw ringlet::InvalidArgument (a ringlet::Error); another exception, a crash or an overflow
// is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/error.h"
#include "src/bootstrap/launcher_env.h"
#include "src/config.h"
#include "src/net/socket.h"
#include "transports/shm/shm_transport.h"

using namespace ringlet;

namespace {

constexpr const char* kVariables[] = {
    "RINGLET_TIMEOUT",
    "RINGLET_DEBUG",
    "RINGLET_TRANSPORT",
    "RINGLET_SEGMENT_BYTES",
    "RINGLET_ALGO",
    "RINGLET_COST_MODEL",
    "RINGLET_STORE_ADDR",
    "RINGLET_JOB_ID",
    "RINGLET_CUDA_PATH",
    "RINGLET_CUDA_SLOT_BYTES",
    "RINGLET_SHM_BYTES",
    "RINGLET_SHM_DIR",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NODEID",
    "RINGLET_STORE_MAX_KEYS",
    "RINGLET_STORE_MAX_BYTES",
    "RINGLET_STORE_MAX_CONNECTIONS",
};
constexpr size_t kVariableCount = std::size(kVariables);

template <typename F>
void expectNamedError(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const char* name : kVariables) ::unsetenv(name);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  std::string storeAddr;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    const char* name = kVariables[static_cast<uint8_t>(line[0]) % kVariableCount];
    const std::string value(line.substr(1));
    if (value.find('\0') != std::string::npos) continue;  // not representable in environ
    ::setenv(name, value.c_str(), 1);
    if (std::string_view(name) == "RINGLET_STORE_ADDR") storeAddr = value;
    // The size and seconds parsers on their own, with any bytes.
    expectNamedError([&] { config::parseSize(value, "fuzz"); });
    expectNamedError([&] { config::parseSize(value, "fuzz", 64, size_t{1} << 30); });
    expectNamedError([&] { config::parseSeconds(value, "fuzz"); });
    expectNamedError([&] { config::parseCostModel(value, "fuzz"); });
  }
  expectNamedError([] { config::reloadEnvironment(); });
  expectNamedError([] { config::storeQuotas(); });
  expectNamedError([] { CommunicatorOptions::fromEnvironment(); });
  expectNamedError([] { transport::shm::ShmOptions::fromEnvironment(); });
  expectNamedError([] { bootstrap::readLauncherEnvironment(false); });
  expectNamedError([] { bootstrap::readLauncherEnvironment(true); });
  if (!storeAddr.empty()) {
    expectNamedError([&] { net::splitHostPort(storeAddr, "RINGLET_STORE_ADDR"); });
  }
  return 0;
}
