// Prefix store: "prefix/" + key on a shared base store. Limits are checked against the full
// key, so a key that fits alone but not with its prefix is refused here with both lengths.

#include <fmt/format.h>

#include "ringlet/error.h"
#include "src/store/store_common.h"

namespace ringlet {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  void set(std::string_view key, std::span<const std::byte> value) override {
    base_->set(full(key, "set()"), value);
  }
  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    const std::string k = full(key, "get()");
    const auto start = store::Clock::now();
    try {
      return base_->get(k, timeout);
    } catch (const TimeoutError&) {
      // Name the key as the caller knows it, and this store.
      store::throwGetTimeout(
          key, describe(),
          std::chrono::duration_cast<std::chrono::milliseconds>(store::Clock::now() - start));
    }
  }
  int64_t add(std::string_view key, int64_t delta) override {
    return base_->add(full(key, "add()"), delta);
  }
  bool check(std::string_view key) override { return base_->check(full(key, "check()")); }
  std::string describe() const override {
    return fmt::format("prefix '{}' of {}", prefix_, base_->describe());
  }

 private:
  std::string full(std::string_view key, std::string_view op) const {
    store::checkKey(key, fmt::format("{} on {}", op, describe()));
    if (prefix_.size() + key.size() > kMaxKeyBytes) {
      throw InvalidArgument(fmt::format(
          "{} on {}: key of {} bytes plus prefix of {} bytes is longer than the limit of {} bytes",
          op, describe(), key.size(), prefix_.size(), kMaxKeyBytes));
    }
    std::string result;
    result.reserve(prefix_.size() + key.size());
    result += prefix_;
    result += key;
    return result;
  }

  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace

std::shared_ptr<Store> makePrefixStore(std::string prefix, std::shared_ptr<Store> base) {
  if (!base) throw InvalidArgument("makePrefixStore: base store is null");
  if (prefix.empty()) throw InvalidArgument("makePrefixStore: prefix must not be empty");
  if (prefix.size() >= kMaxKeyBytes) {
    throw InvalidArgument(
        fmt::format("makePrefixStore: prefix of {} bytes leaves no room under "
                    "the key limit of {} bytes",
                    prefix.size(), kMaxKeyBytes));
  }
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(base));
}

}  // namespace ringlet
