#pragma once
// Every RINGLET_* variable of the core is read here, once; a transport's own variables are
// declared in its TransportEntry (transports/<name>/) and read once by transport::readSettings.
// One is both: RINGLET_SOCKET_ENCRYPT seals the tcp transport's links (its setting) and the TCP
// store's connections (read here); parseSocketEncrypt() reads it for both.
// The README's table lists them all (a test checks). The rest of the code takes values as
// arguments.

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ringlet/store.h"

namespace ringlet::config {

struct Environment {
  std::optional<std::chrono::milliseconds> timeout;  // RINGLET_TIMEOUT (seconds, may be fractional)
  std::string debug;                   // RINGLET_DEBUG: NONE|OFF|WARN|INFO|DEBUG|TRACE
  std::string transport;               // RINGLET_TRANSPORT: auto or a built-in name
  std::optional<size_t> segmentBytes;  // RINGLET_SEGMENT_BYTES (e.g. 512K)
  std::string algorithms;              // RINGLET_ALGO: allreduce:ring,allgather:bruck
  // RINGLET_COST_MODEL: alpha, beta, gamma, delta, and optionally oneway, memory, cache, small,
  // direct, linkmemory, onewaymemory, linkmemorymid, onewaymemorymid, lentblock
  // (parseCostModel's order)
  std::optional<std::array<double, 14>> costModel;
  std::string storeAddr;                  // RINGLET_STORE_ADDR host:port (launcher)
  std::string storeKind;                  // RINGLET_STORE: auto|ringlet|c10d
  std::string jobId;                      // RINGLET_JOB_ID (launcher)
  std::string jobSecret;                  // RINGLET_JOB_SECRET hex (launcher)
  std::string jobSecretFile;              // RINGLET_JOB_SECRET_FILE: 0600 file, hex
  std::string cudaPath;                   // RINGLET_CUDA_PATH: auto|ipc|staged
  std::optional<size_t> cudaSlotBytes;    // RINGLET_CUDA_SLOT_BYTES
  std::optional<size_t> cudaStagedBelow;  // RINGLET_CUDA_STAGED_BELOW
  std::string cudaBlockRoute;             // RINGLET_CUDA_BLOCK_ROUTE: auto|direct|ring
  std::string trace;                      // RINGLET_TRACE: path of the trace files
  std::string wait;                       // RINGLET_WAIT: adaptive|fixed
  // RINGLET_STORE_MAX_KEYS, _BYTES, _CONNECTIONS: quotas of a TCP store server started here
  std::optional<size_t> storeMaxKeys;
  std::optional<size_t> storeMaxBytes;
  std::optional<size_t> storeMaxConnections;
  // RINGLET_SOCKET_ENCRYPT=1: the TCP store's connections sealed (the tcp transport reads the
  // same variable for its links)
  bool socketEncrypt = false;
};

// Parsed on first use; throws InvalidArgument naming a malformed or out-of-range variable, its
// value and the allowed values.
const Environment& environment();

// Re-reads the environment (tests that setenv() call this).
void reloadEnvironment();

// "4096", "64K", "1M", "2G", "1T" (binary multiples; also KiB/MiB/GiB/TiB and k/m/g/t). Throws
// InvalidArgument with `what` (e.g. "RINGLET_SEGMENT_BYTES") in the message.
size_t parseSize(std::string_view text, std::string_view what);
// The same, and the value must lie in [min, max]; the error names both bounds.
size_t parseSize(std::string_view text, std::string_view what, size_t min, size_t max);
// Seconds as "30", "0.5", from kMinSeconds (one millisecond: waits are counted in
// milliseconds) to kMaxSeconds. Throws InvalidArgument with `what` and the range in the message.
inline constexpr double kMinSeconds = 0.001;
inline constexpr double kMaxSeconds = 1e7;
std::chrono::milliseconds parseSeconds(std::string_view text, std::string_view what);
// "alpha=2e-6,beta=2.5e-10,gamma=1.2e-10,delta=6e-11" (seconds; all four). Throws
// InvalidArgument with `what` in the message.
std::array<double, 14> parseCostModel(std::string_view text, std::string_view what);
// A whole number from `min` to `max` ("1000"; also with a K/M/G suffix, binary multiples).
// Throws InvalidArgument with `what` and the range in the message.
size_t parseCount(std::string_view text, std::string_view what, size_t min, size_t max);
// The quotas a TCP store server started by this process enforces: TcpStoreQuotas' defaults,
// each replaced by its RINGLET_STORE_MAX_* variable when set.
TcpStoreQuotas storeQuotas();
// RINGLET_SOCKET_ENCRYPT's value: "1" true, "0" false; anything else throws InvalidArgument
// naming the variable and the allowed values.
bool parseSocketEncrypt(std::string_view text);
// Reads a variable; nullopt when unset or empty.
std::optional<std::string> getenv(const char* name);

}  // namespace ringlet::config
