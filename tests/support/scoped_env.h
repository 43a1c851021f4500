#pragma once
// Sets (or unsets) one environment variable for a scope and re-reads ringlet's environment;
// restores both afterwards. Process ranks started inside the scope inherit the value.

#include <optional>
#include <string>

namespace ringlet::testing {

class ScopedEnv {
 public:
  // `value` nullopt: the variable is unset for the scope.
  ScopedEnv(const char* name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void restore() noexcept;

  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace ringlet::testing
