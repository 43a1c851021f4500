#include "tests/support/scoped_env.h"

#include <stdlib.h>

#include "src/config.h"

namespace ringlet::testing {

ScopedEnv::ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
  if (const char* old = ::getenv(name)) {
    had_ = true;
    old_ = old;
  }
  if (value) {
    ::setenv(name, value->c_str(), 1);
  } else {
    ::unsetenv(name);
  }
  try {
    config::reloadEnvironment();
  } catch (...) {
    restore();
    throw;
  }
}

ScopedEnv::~ScopedEnv() { restore(); }

void ScopedEnv::restore() noexcept {
  if (had_) {
    ::setenv(name_.c_str(), old_.c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
  try {
    config::reloadEnvironment();
  } catch (...) {
    // Another scoped variable may still hold a bad value; it reloads again when it goes.
  }
}

}  // namespace ringlet::testing
