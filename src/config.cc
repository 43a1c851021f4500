#include "src/config.h"

#include <fmt/format.h>

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
  if (auto v = getenv("RINGLET_SMALL_MESSAGE_BYTES")) {
    env.smallMessageBytes = parseSize(*v, "RINGLET_SMALL_MESSAGE_BYTES");
  }
  if (auto v = getenv("RINGLET_STORE_ADDR")) env.storeAddr = *v;
  if (auto v = getenv("RINGLET_JOB_ID")) env.jobId = *v;
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
