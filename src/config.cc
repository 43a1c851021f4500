#include "src/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "ringlet/error.h"

namespace ringlet::config {
namespace {

std::mutex gMutex;
std::optional<Environment> gEnvironment;

Environment parse() {
  Environment env;
  if (auto v = getenv("RINGLET_TIMEOUT")) env.timeout = parseSeconds(*v, "RINGLET_TIMEOUT");
  if (auto v = getenv("RINGLET_DEBUG")) env.debug = *v;
  // Checked against the transports built in when a communicator is made (core).
  if (auto v = getenv("RINGLET_TRANSPORT")) env.transport = *v;
  if (auto v = getenv("RINGLET_SEGMENT_BYTES")) {
    env.segmentBytes = parseSize(*v, "RINGLET_SEGMENT_BYTES");
    if (*env.segmentBytes == 0) throw InvalidArgument("RINGLET_SEGMENT_BYTES must be > 0");
  }
  // Checked against the algorithms built in when a communicator is made (core).
  if (auto v = getenv("RINGLET_ALGO")) env.algorithms = *v;
  if (auto v = getenv("RINGLET_COST_MODEL"))
    env.costModel = parseCostModel(*v, "RINGLET_COST_MODEL");
  if (auto v = getenv("RINGLET_STORE_ADDR")) env.storeAddr = *v;
  if (auto v = getenv("RINGLET_JOB_ID")) env.jobId = *v;
  env.storeKind = getenv("RINGLET_STORE").value_or("auto");
  if (env.storeKind != "auto" && env.storeKind != "ringlet" && env.storeKind != "c10d") {
    throw InvalidArgument(
        fmt::format("RINGLET_STORE={} is not one of auto, ringlet, c10d", env.storeKind));
  }
  if (auto v = getenv("RINGLET_JOB_SECRET")) env.jobSecret = *v;
  if (auto v = getenv("RINGLET_CUDA_PATH")) {
    if (*v != "auto" && *v != "ipc" && *v != "staged") {
      throw InvalidArgument(
          fmt::format("RINGLET_CUDA_PATH={} is not one of auto, ipc, staged", *v));
    }
    env.cudaPath = *v;
  }
  if (auto v = getenv("RINGLET_CUDA_SLOT_BYTES")) {
    env.cudaSlotBytes = parseSize(*v, "RINGLET_CUDA_SLOT_BYTES");
    if (*env.cudaSlotBytes < 64) {
      throw InvalidArgument(
          fmt::format("RINGLET_CUDA_SLOT_BYTES={} is below the minimum of 64 bytes", *v));
    }
  }
  return env;
}

}  // namespace

std::array<double, 4> parseCostModel(std::string_view text, std::string_view what) {
  constexpr std::string_view kNames[] = {"alpha", "beta", "gamma", "delta"};
  std::array<double, 4> values{};
  std::array<bool, 4> seen{};
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
    while (index < 4 && kNames[index] != key) ++index;
    char* end = nullptr;
    const double value = eq == std::string::npos ? -1 : std::strtod(entry.c_str() + eq + 1, &end);
    if (index == 4 || eq == std::string::npos || end == entry.c_str() + eq + 1 || *end != '\0' ||
        !std::isfinite(value) || value < 0) {
      throw InvalidArgument(fmt::format(
          "{}={}: '{}' is not name=seconds with name alpha, beta, gamma or delta (example: "
          "alpha=2e-6,beta=2.5e-10,gamma=1.2e-10,delta=6e-11)",
          what, text, entry));
    }
    values[index] = value;
    seen[index] = true;
  }
  for (size_t i = 0; i < 4; ++i) {
    if (!seen[i]) throw InvalidArgument(fmt::format("{}={}: {} is missing", what, text, kNames[i]));
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
        fmt::format("{}='{}' is not a size (examples: 4096, 64K, 1M, 2G)", what, text));
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
  } else {
    return fail();
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) return fail();
  return static_cast<size_t>(value << shift);
}

std::chrono::milliseconds parseSeconds(std::string_view text, std::string_view what) {
  std::string copy(text);
  char* end = nullptr;
  double seconds = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > 1e7) {
    throw InvalidArgument(fmt::format("{}='{}' is not a positive number of seconds", what, text));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace ringlet::config
