#include "store_adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "ringlet/error.h"

namespace ringlet::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

class C10dStore final : public Store {
 public:
  C10dStore(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
            std::string describe)
      : store_(std::move(store)), timeout_(timeout), describe_(std::move(describe)) {}

  void set(std::string_view key, std::span<const std::byte> value) override {
    checkKey(key);
    if (value.size() > kMaxValueBytes) {
      throw InvalidArgument(fmt::format("store value for '{}' is {} bytes; the limit is {}", key,
                                        value.size(), kMaxValueBytes));
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(value.data());
    // A vector, not a brace list: torch 2.x adds set(key, string).
    const std::vector<uint8_t> v(bytes, bytes + value.size());
    call("set", key, [&] { store_->set(std::string(key), v); });
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    checkKey(key);
    if (timeout.count() < 0) timeout = timeout_;
    const std::string k(key);
    const auto start = Clock::now();
    auto pause = std::chrono::microseconds(50);
    while (!exists(k)) {
      const auto waited = Clock::now() - start;
      if (waited >= timeout) {
        throw TimeoutError(fmt::format(
            "timed out after {} ms waiting for key '{}' in {}",
            std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(), key, describe_));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
    std::vector<uint8_t> value;
    call("get", key, [&] { value = store_->get(k); });
    Bytes out(value.size());
    std::copy(value.begin(), value.end(), reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }

  int64_t add(std::string_view key, int64_t delta) override {
    checkKey(key);
    int64_t value = 0;
    call("add", key, [&] { value = store_->add(std::string(key), delta); });
    return value;
  }

  bool check(std::string_view key) override {
    checkKey(key);
    return exists(std::string(key));
  }

  std::string describe() const override { return describe_; }

 private:
  static void checkKey(std::string_view key) {
    if (key.empty()) throw InvalidArgument("store key is empty");
    if (key.size() > kMaxKeyBytes) {
      throw InvalidArgument(
          fmt::format("store key is {} bytes; the limit is {}", key.size(), kMaxKeyBytes));
    }
  }

  bool exists(const std::string& key) {
    bool found = false;
    call("check", key, [&] { found = store_->check({key}); });
    return found;
  }

  // c10d stores throw c10::Error (a std::exception) for a closed connection or a timeout:
  // carried on as ringlet's IoError, naming the store and the key.
  template <typename F>
  void call(const char* what, std::string_view key, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw IoError(fmt::format("{} of key '{}' in {} failed: {}", what, key, describe_,
                                firstLine(e.what())));
    }
  }

  static std::string firstLine(const char* text) {
    std::string s(text);
    return s.substr(0, s.find('\n'));
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string describe_;
};

}  // namespace

std::shared_ptr<Store> adaptC10dStore(c10::intrusive_ptr<c10d::Store> store,
                                      std::chrono::milliseconds timeout, std::string describe) {
  return std::make_shared<C10dStore>(std::move(store), timeout, std::move(describe));
}

}  // namespace ringlet::torch_backend
