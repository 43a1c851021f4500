// In-process store: a map under one mutex; get() waits on a condition variable that every
// set()/add() notifies.

#include <fmt/format.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "src/store/store_common.h"

namespace ringlet {
namespace {

class InProcessStore final : public Store {
 public:
  explicit InProcessStore(StoreOptions options)
      : options_(options), name_(fmt::format("in-process store {}", fmt::ptr(this))) {}

  void set(std::string_view key, std::span<const std::byte> value) override {
    store::checkKey(key, "set() on " + name_);
    store::checkValue(value.size(), "set() on " + name_);
    {
      std::lock_guard lock(mutex_);
      values_[std::string(key)] = Bytes(value.begin(), value.end());
    }
    changed_.notify_all();
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    store::checkKey(key, "get() on " + name_);
    const auto wait = store::effectiveTimeout(timeout, options_.timeout);
    const auto start = store::Clock::now();
    std::unique_lock lock(mutex_);
    const std::string k(key);
    auto found = [&] { return values_.find(k) != values_.end(); };
    if (!changed_.wait_until(lock, start + wait, found)) {
      store::throwGetTimeout(
          key, name_,
          std::chrono::duration_cast<std::chrono::milliseconds>(store::Clock::now() - start));
    }
    return values_.find(k)->second;
  }

  int64_t add(std::string_view key, int64_t delta) override {
    store::checkKey(key, "add() on " + name_);
    int64_t result = 0;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(std::string(key));
      const int64_t current = it == values_.end() ? 0 : store::parseCounter(it->second, key, name_);
      result = store::addCounter(current, delta, key, name_);
      values_[std::string(key)] = store::counterBytes(result);
    }
    changed_.notify_all();
    return result;
  }

  bool check(std::string_view key) override {
    store::checkKey(key, "check() on " + name_);
    std::lock_guard lock(mutex_);
    return values_.find(std::string(key)) != values_.end();
  }

  std::string describe() const override { return name_; }

 private:
  const StoreOptions options_;
  const std::string name_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes, std::less<>> values_;
};

}  // namespace

std::shared_ptr<Store> makeInProcessStore(StoreOptions options) {
  return std::make_shared<InProcessStore>(options);
}

}  // namespace ringlet
