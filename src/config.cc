#include "src/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "ringlet/error.h"

namespace ringlet::config {
namespace {

std::mutex gMutex;
std::optional<Environment> gEnvironment;

// The bounds of each variable, shown in its error message.
constexpr size_t kMinSegmentBytes = 64;  // the collectives never slice finer
constexpr size_t kMaxSegmentBytes = size_t{1} << 30;
constexpr size_t kMinCudaSlotBytes = 64;
constexpr size_t kMaxCudaSlotBytes = size_t{1} << 30;
constexpr size_t kMaxJobIdBytes = 256;  // what the link handshake carries
// Store quotas: below these a job cannot start; above, a limit stops being one.
constexpr size_t kMaxStoreKeys = size_t{1} << 30;
constexpr size_t kMinStoreBytes = 64 * 1024;
constexpr size_t kMaxStoreBytes = size_t{1} << 40;
constexpr size_t kMaxStoreConnections = size_t{1} << 20;
constexpr std::string_view kDebugLevels[] = {"NONE", "OFF", "WARN", "INFO", "DEBUG", "TRACE"};

std::string checkDebugLevel(const std::string& text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view level : kDebugLevels) {
    if (upper == level) return text;
  }
  throw InvalidArgument(fmt::format(
      "RINGLET_DEBUG='{}' is not a log level (allowed: NONE, OFF, WARN, INFO, DEBUG, TRACE)",
      text));
}

std::string sizeText(size_t bytes) {
  constexpr std::string_view kUnits[] = {"", "K", "M", "G", "T", "P", "E"};
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", bytes, kUnits[unit]);
}

Environment parse() {
  Environment env;
  if (auto v = getenv("RINGLET_TIMEOUT")) env.timeout = parseSeconds(*v, "RINGLET_TIMEOUT");
  if (auto v = getenv("RINGLET_DEBUG")) env.debug = checkDebugLevel(*v);
  // Checked against the transports built in when a communicator is made (core).
  if (auto v = getenv("RINGLET_TRANSPORT")) env.transport = *v;
  if (auto v = getenv("RINGLET_SEGMENT_BYTES")) {
    env.segmentBytes = parseSize(*v, "RINGLET_SEGMENT_BYTES", kMinSegmentBytes, kMaxSegmentBytes);
  }
  // Checked against the algorithms built in when a communicator is made (core).
  if (auto v = getenv("RINGLET_ALGO")) env.algorithms = *v;
  if (auto v = getenv("RINGLET_COST_MODEL"))
    env.costModel = parseCostModel(*v, "RINGLET_COST_MODEL");
  if (auto v = getenv("RINGLET_TRACE")) env.trace = *v;
  // Checked with the other options when a communicator is made (core).
  if (auto v = getenv("RINGLET_WAIT")) env.wait = *v;
  if (auto v = getenv("RINGLET_STORE_ADDR")) env.storeAddr = *v;
  if (auto v = getenv("RINGLET_JOB_ID")) {
    if (v->size() > kMaxJobIdBytes) {
      throw InvalidArgument(fmt::format("RINGLET_JOB_ID is {} bytes long (allowed: 1 to {})",
                                        v->size(), kMaxJobIdBytes));
    }
    env.jobId = *v;
  }
  env.storeKind = getenv("RINGLET_STORE").value_or("auto");
  if (env.storeKind != "auto" && env.storeKind != "ringlet" && env.storeKind != "c10d") {
    throw InvalidArgument(
        fmt::format("RINGLET_STORE={} is not one of auto, ringlet, c10d", env.storeKind));
  }
  if (auto v = getenv("RINGLET_JOB_SECRET")) env.jobSecret = *v;
  if (auto v = getenv("RINGLET_JOB_SECRET_FILE")) env.jobSecretFile = *v;
  if (auto v = getenv("RINGLET_CUDA_PATH")) {
    if (*v != "auto" && *v != "ipc" && *v != "staged") {
      throw InvalidArgument(
          fmt::format("RINGLET_CUDA_PATH={} is not one of auto, ipc, staged", *v));
    }
    env.cudaPath = *v;
  }
  if (auto v = getenv("RINGLET_CUDA_BLOCK_ROUTE")) {
    if (*v != "auto" && *v != "direct" && *v != "ring") {
      throw InvalidArgument(
          fmt::format("RINGLET_CUDA_BLOCK_ROUTE={} is not one of auto, direct, ring", *v));
    }
    env.cudaBlockRoute = *v;
  }
  if (auto v = getenv("RINGLET_CUDA_STAGED_BELOW")) {
    env.cudaStagedBelow = parseSize(*v, "RINGLET_CUDA_STAGED_BELOW", 0, kMaxCudaSlotBytes);
  }
  if (auto v = getenv("RINGLET_CUDA_SLOT_BYTES")) {
    env.cudaSlotBytes =
        parseSize(*v, "RINGLET_CUDA_SLOT_BYTES", kMinCudaSlotBytes, kMaxCudaSlotBytes);
  }
  if (auto v = getenv("RINGLET_SOCKET_ENCRYPT")) env.socketEncrypt = parseSocketEncrypt(*v);
  if (auto v = getenv("RINGLET_STORE_MAX_KEYS")) {
    env.storeMaxKeys = parseCount(*v, "RINGLET_STORE_MAX_KEYS", 1, kMaxStoreKeys);
  }
  if (auto v = getenv("RINGLET_STORE_MAX_BYTES")) {
    env.storeMaxBytes = parseSize(*v, "RINGLET_STORE_MAX_BYTES", kMinStoreBytes, kMaxStoreBytes);
  }
  if (auto v = getenv("RINGLET_STORE_MAX_CONNECTIONS")) {
    env.storeMaxConnections =
        parseCount(*v, "RINGLET_STORE_MAX_CONNECTIONS", 1, kMaxStoreConnections);
  }
  return env;
}

}  // namespace

std::array<double, 14> parseCostModel(std::string_view text, std::string_view what) {
  struct Key {
    std::string_view name;
    double low, high;  // the accepted range
    bool required;
    double otherwise;  // when not given
  };
  constexpr double kMaxCostSeconds = 1.0;  // per message or byte: anything above is a typo
  constexpr Key kKeys[] = {{"alpha", 0, kMaxCostSeconds, true, 0},
                           {"beta", 0, kMaxCostSeconds, true, 0},
                           {"gamma", 0, kMaxCostSeconds, true, 0},
                           {"delta", 0, kMaxCostSeconds, true, 0},
                           {"oneway", 0, kMaxCostSeconds, false, 0},
                           {"memory", 1, 1000, false, 1},
                           {"cache", 0, 1e15, false, 0},
                           {"small", 0.01, 1, false, 1},
                           {"direct", 0, 1e15, false, 0},
                           {"linkmemory", 1, 1000, false, 0},
                           {"onewaymemory", 1, 1000, false, 0},
                           {"linkmemorymid", 1, 1000, false, 0},
                           {"onewaymemorymid", 1, 1000, false, 0},
                           {"lentblock", 0, 1e15, false, 0}};
  constexpr size_t kCount = std::size(kKeys);
  std::array<double, kCount> values{};
  std::array<bool, kCount> seen{};
  const std::string all(text);
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = std::min(all.find(',', start), all.size());
    const std::string entry = all.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    const std::string key = entry.substr(0, std::min(eq, entry.size()));
    size_t index = 0;
    while (index < kCount && kKeys[index].name != key) ++index;
    char* end = nullptr;
    const double value = eq == std::string::npos ? -1 : std::strtod(entry.c_str() + eq + 1, &end);
    if (index == kCount || eq == std::string::npos || end == entry.c_str() + eq + 1 ||
        *end != '\0' || !std::isfinite(value) || value < kKeys[index].low ||
        value > kKeys[index].high) {
      throw InvalidArgument(fmt::format(
          "{}={}: '{}' is not name=value with name alpha, beta, gamma, delta, oneway (seconds "
          "from 0 to {:g}), memory, linkmemory, onewaymemory, linkmemorymid or onewaymemorymid (a "
          "factor from 1 to "
          "1000), small (a factor "
          "from 0.01 to 1), "
          "cache, direct or lentblock (bytes) (example: "
          "alpha=2e-6,beta=2.5e-10,gamma=1.2e-10,delta=6e-11)",
          what, text, entry, kMaxCostSeconds));
    }
    values[index] = value;
    seen[index] = true;
  }
  for (size_t i = 0; i < kCount; ++i) {
    if (seen[i]) continue;
    if (kKeys[i].required) {
      throw InvalidArgument(fmt::format("{}={}: {} is missing", what, text, kKeys[i].name));
    }
    values[i] = kKeys[i].otherwise;
  }
  return values;
}

std::optional<std::string> getenv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

const Environment& environment() {
  std::lock_guard lock(gMutex);
  if (!gEnvironment) gEnvironment = parse();
  return *gEnvironment;
}

void reloadEnvironment() {
  std::lock_guard lock(gMutex);
  gEnvironment = parse();
}

size_t parseSize(std::string_view text, std::string_view what) {
  auto fail = [&]() -> size_t {
    throw InvalidArgument(
        fmt::format("{}='{}' is not a size (examples: 4096, 64K, 1M, 2G, 1T)", what, text));
  };
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) return fail();
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i) return fail();
  std::string suffix;
  for (char c : text.substr(i))
    suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    return fail();
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) return fail();
  return static_cast<size_t>(value << shift);
}

size_t parseSize(std::string_view text, std::string_view what, size_t min, size_t max) {
  const size_t value = parseSize(text, what);
  if (value < min || value > max) {
    throw InvalidArgument(fmt::format("{}='{}' is out of range (allowed: {} to {} bytes)", what,
                                      text, sizeText(min), sizeText(max)));
  }
  return value;
}

size_t parseCount(std::string_view text, std::string_view what, size_t min, size_t max) {
  size_t value = 0;
  try {
    value = parseSize(text, what);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(
        fmt::format("{}='{}' is not a whole number (allowed: {} to {})", what, text, min, max));
  }
  if (value < min || value > max) {
    throw InvalidArgument(
        fmt::format("{}='{}' is out of range (allowed: {} to {})", what, text, min, max));
  }
  return value;
}

bool parseSocketEncrypt(std::string_view text) {
  if (text == "0") return false;
  if (text == "1") return true;
  throw InvalidArgument(fmt::format(
      "RINGLET_SOCKET_ENCRYPT='{}': expected 1 (seal every tcp link's and the store's bytes with "
      "AES-256-GCM) or 0 (the default)",
      text));
}

TcpStoreQuotas storeQuotas() {
  const Environment& env = environment();
  TcpStoreQuotas quotas;
  quotas.maxKeys = env.storeMaxKeys.value_or(quotas.maxKeys);
  quotas.maxBytes = env.storeMaxBytes.value_or(quotas.maxBytes);
  quotas.maxConnectionsPerHost = env.storeMaxConnections.value_or(quotas.maxConnectionsPerHost);
  return quotas;
}

std::chrono::milliseconds parseSeconds(std::string_view text, std::string_view what) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end == copy.c_str() || *end != '\0' || errno == ERANGE ||
      !std::isfinite(seconds)) {
    throw InvalidArgument(
        fmt::format("{}='{}' is not a number of seconds (examples: 30, 0.5)", what, text));
  }
  // Waits are counted in milliseconds: a shorter time would round to a zero deadline.
  if (seconds < kMinSeconds || seconds > kMaxSeconds) {
    throw InvalidArgument(fmt::format("{}='{}' is out of range (allowed: {:g} to {:g} seconds)",
                                      what, text, kMinSeconds, kMaxSeconds));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace ringlet::config
