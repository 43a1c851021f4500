#include "src/log.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "src/config.h"

namespace ringlet::log {
namespace {

Level parseLevel(const std::string& text) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (t == "NONE" || t == "OFF") return Level::kNone;
  if (t == "INFO") return Level::kInfo;
  if (t == "DEBUG") return Level::kDebug;
  if (t == "TRACE") return Level::kTrace;
  return Level::kWarn;
}

const char* name(Level level) {
  switch (level) {
    case Level::kWarn:
      return "WARN";
    case Level::kInfo:
      return "INFO";
    case Level::kDebug:
      return "DEBUG";
    case Level::kTrace:
      return "TRACE";
    default:
      return "";
  }
}

}  // namespace

Level level() {
  static const Level cached = [] {
    try {
      return parseLevel(config::environment().debug);
    } catch (...) {
      return Level::kWarn;
    }
  }();
  return cached;
}

void write(Level level, std::string_view message) {
  static const std::string host = [] {
    char buffer[256] = {};
    gethostname(buffer, sizeof(buffer) - 1);
    return std::string(buffer);
  }();
  // The pid is read each time: forked ranks must not print their parent's.
  std::string line = fmt::format("ringlet {} [{}:{}] {}\n", name(level), host, getpid(), message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace ringlet::log
