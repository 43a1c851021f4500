#pragma once
// Every RINGLET_* variable of the core is read here, once; a transport's own variables are
// declared in its TransportEntry (transports/<name>/) and read once by transport::readSettings.
// The README's table lists them all (a test checks). The rest of the code takes values as
// arguments.

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ringlet::config {

struct Environment {
  std::optional<std::chrono::milliseconds> timeout;  // RINGLET_TIMEOUT (seconds, may be fractional)
  std::string debug;                               // RINGLET_DEBUG: NONE|OFF|WARN|INFO|DEBUG|TRACE
  std::string transport;                           // RINGLET_TRANSPORT: auto or a built-in name
  std::optional<size_t> segmentBytes;              // RINGLET_SEGMENT_BYTES (e.g. 512K)
  std::string algorithms;                          // RINGLET_ALGO: allreduce:ring,allgather:bruck
  std::optional<std::array<double, 4>> costModel;  // RINGLET_COST_MODEL: alpha,beta,gamma,delta
  std::string storeAddr;                           // RINGLET_STORE_ADDR host:port (launcher)
  std::string storeKind;                           // RINGLET_STORE: auto|ringlet|c10d
  std::string jobId;                               // RINGLET_JOB_ID (launcher)
  std::string jobSecret;                           // RINGLET_JOB_SECRET hex (launcher)
  std::string cudaPath;                            // RINGLET_CUDA_PATH: auto|ipc|staged
  std::optional<size_t> cudaSlotBytes;             // RINGLET_CUDA_SLOT_BYTES
};

// Parsed on first use; throws InvalidArgument naming a malformed variable and its value.
const Environment& environment();

// Re-reads the environment (tests that setenv() call this).
void reloadEnvironment();

// "4096", "64K", "1M", "2G" (binary multiples; also KiB/MiB/GiB and k/m/g). Throws
// InvalidArgument with `what` (e.g. "RINGLET_SEGMENT_BYTES") in the message.
size_t parseSize(std::string_view text, std::string_view what);
// Seconds as "30", "0.5". Throws InvalidArgument with `what` in the message.
std::chrono::milliseconds parseSeconds(std::string_view text, std::string_view what);
// "alpha=2e-6,beta=2.5e-10,gamma=1.2e-10,delta=6e-11" (seconds; all four). Throws
// InvalidArgument with `what` in the message.
std::array<double, 4> parseCostModel(std::string_view text, std::string_view what);
// Reads a variable; nullopt when unset or empty.
std::optional<std::string> getenv(const char* name);

}  // namespace ringlet::config
