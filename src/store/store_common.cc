#include "src/store/store_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "ringlet/error.h"

namespace ringlet {

void Store::setString(std::string_view key, std::string_view value) {
  set(key, std::as_bytes(std::span(value.data(), value.size())));
}

std::string Store::getString(std::string_view key, std::chrono::milliseconds timeout) {
  Bytes value = get(key, timeout);
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

namespace store {

void checkKey(std::string_view key, std::string_view where) {
  if (key.empty()) throw InvalidArgument(fmt::format("{}: store keys must not be empty", where));
  if (key.size() > kMaxKeyBytes) {
    throw InvalidArgument(fmt::format("{}: key of {} bytes is longer than the limit of {} bytes",
                                      where, key.size(), kMaxKeyBytes));
  }
}

void checkValue(size_t bytes, std::string_view where) {
  if (bytes > kMaxValueBytes) {
    throw InvalidArgument(fmt::format("{}: value of {} bytes is longer than the limit of {} bytes",
                                      where, bytes, kMaxValueBytes));
  }
}

std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds timeout,
                                           std::chrono::milliseconds storeDefault) {
  // Clamped so that now() + timeout cannot overflow the clock (milliseconds::max() means "wait
  // as good as forever").
  constexpr auto kLongest = std::chrono::milliseconds(std::chrono::hours(24 * 365));
  return std::min(timeout.count() < 0 ? storeDefault : timeout, kLongest);
}

void throwGetTimeout(std::string_view key, std::string_view store,
                     std::chrono::milliseconds waited) {
  throw TimeoutError(fmt::format("timed out after {} ms waiting for key '{}' in {}", waited.count(),
                                 printableKey(key), store));
}

int64_t parseCounter(std::span<const std::byte> value, std::string_view key,
                     std::string_view store) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  int64_t result = 0;
  auto [ptr, ec] = std::from_chars(begin, end, result);
  if (value.empty() || ec != std::errc() || ptr != end) {
    throw InvalidArgument(fmt::format(
        "add() on key '{}' in {}: the existing value ({} bytes) is not a decimal counter",
        printableKey(key), store, value.size()));
  }
  return result;
}

Bytes counterBytes(int64_t value) {
  const std::string text = std::to_string(value);
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return Bytes(p, p + text.size());
}

std::string overflowText(std::string_view key, std::string_view store, int64_t current,
                         int64_t delta) {
  return fmt::format("add() on key '{}' in {}: {} + {} does not fit in a 64-bit counter",
                     printableKey(key), store, current, delta);
}

int64_t addCounter(int64_t current, int64_t delta, std::string_view key, std::string_view store) {
  int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    throw InvalidArgument(overflowText(key, store, current, delta));
  }
  return result;
}

std::string printableKey(std::string_view key) {
  constexpr size_t kShown = 200;
  std::string out;
  for (size_t i = 0; i < key.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (key.size() > kShown) out += fmt::format("... ({} bytes)", key.size());
  return out;
}

}  // namespace store
}  // namespace ringlet
