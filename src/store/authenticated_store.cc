#include "src/store/authenticated_store.h"

#include <fmt/format.h>

#include "ringlet/error.h"
#include "src/auth.h"
#include "src/store/store_common.h"

namespace ringlet::store {
namespace {

constexpr std::string_view kRecordLabel = "ringlet-record";

class AuthenticatedStore final : public Store {
 public:
  AuthenticatedStore(std::string secret, std::shared_ptr<Store> base)
      : secret_(std::move(secret)), base_(std::move(base)) {}

  void set(std::string_view key, std::span<const std::byte> value) override {
    checkValue(value.size() + auth::kMacBytes, "set() on " + describe());
    const auth::Mac mac = macOf(key, value);
    Bytes sealed(value.begin(), value.end());
    const auto* p = reinterpret_cast<const std::byte*>(mac.data());
    sealed.insert(sealed.end(), p, p + mac.size());
    base_->set(key, sealed);
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    Bytes sealed = base_->get(key, timeout);
    if (sealed.size() < auth::kMacBytes) throw forged(key, sealed.size());
    const size_t bytes = sealed.size() - auth::kMacBytes;
    const std::span<const std::byte> value(sealed.data(), bytes);
    const auth::Mac expected = macOf(key, value);
    if (!auth::macEquals({reinterpret_cast<const uint8_t*>(sealed.data() + bytes), auth::kMacBytes},
                         expected)) {
      throw forged(key, sealed.size());
    }
    sealed.resize(bytes);
    return sealed;
  }

  int64_t add(std::string_view key, int64_t delta) override { return base_->add(key, delta); }
  bool check(std::string_view key) override { return base_->check(key); }
  std::string describe() const override { return base_->describe(); }

 private:
  auth::Mac macOf(std::string_view key, std::span<const std::byte> value) const {
    return auth::hmac(
        secret_, kRecordLabel,
        {auth::bytesOf(key), {reinterpret_cast<const uint8_t*>(value.data()), value.size()}});
  }

  IoError forged(std::string_view key, size_t bytes) const {
    return IoError(fmt::format(
        "the value of key '{}' in {} ({} bytes) fails authentication: it was not written with "
        "this job's secret (a forged or swapped peer record, or another job's store)",
        printableKey(key), describe(), bytes));
  }

  const std::string secret_;
  const std::shared_ptr<Store> base_;
};

}  // namespace

std::shared_ptr<Store> makeAuthenticatedStore(std::string secret, std::shared_ptr<Store> base) {
  if (!base) throw InvalidArgument("makeAuthenticatedStore: base store is null");
  return std::make_shared<AuthenticatedStore>(std::move(secret), std::move(base));
}

}  // namespace ringlet::store
