#pragma once
// Logging to stderr, filtered by RINGLET_DEBUG (WARN by default). One line per message:
//   ringlet INFO [host:pid] message

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace ringlet::log {

enum class Level { kNone = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

Level level();
void write(Level level, std::string_view message);

template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ringlet::log
