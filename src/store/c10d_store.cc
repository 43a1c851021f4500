// Client of PyTorch's c10d TCPStore (1.13 wire protocol).
//
// A request is one query byte followed by its arguments; a reply is read only where the query
// has one. Integers are 8 bytes in the host's byte order (torch sends its native values;
// written here as little-endian, which is what x86-64 and aarch64 hosts send):
//
//   SET   0  string key, bytes value          -> (no reply)
//   GET   2  string key                       -> bytes value (the server closes the connection
//                                                if the key is missing: always WAIT first)
//   ADD   3  string key, int64 delta          -> int64 new value (stored as decimal text)
//   CHECK 4  uint64 n, n x string key         -> 1 byte: 0 all present, 1 not
//   WAIT  5  uint64 n, n x string key         -> 1 byte 0, once every key exists
//
// where string and bytes are a uint64 length then the bytes. A WAIT cannot be cancelled in 1.13,
// so a get() that times out closes its connection (the server then forgets the waiter). SET has
// no reply, so set() follows it with a CHECK of the same key on the same connection: the answer
// proves the server applied the SET before set() returns, and bounds it by a deadline.

#include "src/store/c10d_store.h"

#include <fmt/format.h>

#include <mutex>
#include <span>
#include <vector>

#include "ringlet/error.h"
#include "src/net/socket.h"
#include "src/store/store_common.h"

namespace ringlet {
namespace {

enum class Query : uint8_t { kSet = 0, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5 };
constexpr uint8_t kReady = 0;     // CHECK: every key exists
constexpr uint8_t kNotReady = 1;  // CHECK: some key is missing
constexpr uint8_t kStopWaiting = 0;

// Idle connections kept for reuse; more may be open while requests are in flight.
constexpr size_t kMaxIdleConnections = 8;
constexpr size_t kMaxPrefixBytes = 1024;

// One request, framed into a single buffer so it goes out in one write.
class Request {
 public:
  explicit Request(Query query) { bytes_.push_back(static_cast<std::byte>(query)); }

  Request& u64(uint64_t value) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<std::byte>(value >> (8 * i)));
    return *this;
  }
  Request& data(std::span<const std::byte> value) {
    u64(value.size());
    bytes_.insert(bytes_.end(), value.begin(), value.end());
    return *this;
  }
  Request& string(std::string_view value) {
    return data(std::as_bytes(std::span(value.data(), value.size())));
  }

  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

uint64_t decodeU64(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

class C10dStoreClient final : public Store {
 public:
  C10dStoreClient(std::string host, uint16_t port, C10dStoreOptions options)
      : host_(std::move(host)),
        port_(port),
        options_(std::move(options)),
        name_(fmt::format("c10d store {}:{}", host_, port_)) {
    idle_.push_back(connect());
  }

  void set(std::string_view key, std::span<const std::byte> value) override {
    store::checkKey(key, "set() on " + name_);
    store::checkValue(value.size(), "set() on " + name_);
    const std::string wire = wireKey(key);
    const auto deadline = store::Clock::now() + options_.timeout;
    net::Fd fd = take();
    send(fd, Request(Query::kSet).string(wire).data(value), deadline);
    const uint8_t answer = checkOn(fd, wire, deadline);
    giveBack(std::move(fd));
    if (answer != kReady) {
      throw IoError(
          fmt::format("{}: key '{}' is missing right after set() (deleted by another "
                      "client?)",
                      name_, store::printableKey(key)));
    }
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    store::checkKey(key, "get() on " + name_);
    const auto wait = store::effectiveTimeout(timeout, options_.timeout);
    const auto start = store::Clock::now();
    const std::string wire = wireKey(key);
    net::Fd fd = take();
    send(fd, Request(Query::kWait).u64(1).string(wire), start + wait);
    std::byte answer{};
    try {
      net::readFull(fd.get(), &answer, 1, start + wait, name_);
    } catch (const TimeoutError&) {
      // The server still holds the WAIT; closing the connection (fd goes out of scope) drops it.
      store::throwGetTimeout(
          key, name_,
          std::chrono::duration_cast<std::chrono::milliseconds>(store::Clock::now() - start));
    }
    if (static_cast<uint8_t>(answer) != kStopWaiting) {
      throw malformed("WAIT reply", static_cast<uint64_t>(answer));
    }
    // The key exists; the value follows promptly (bounded by the store's request timeout).
    const auto deadline = store::Clock::now() + options_.timeout;
    send(fd, Request(Query::kGet).string(wire), deadline);
    std::byte header[8];
    net::readFull(fd.get(), header, sizeof(header), deadline, name_);
    const uint64_t bytes = decodeU64(header);
    if (bytes > kMaxValueBytes) {
      throw IoError(fmt::format("{}: value of key '{}' is {} bytes, more than the limit of {}",
                                name_, store::printableKey(key), bytes, kMaxValueBytes));
    }
    Bytes value(bytes);
    net::readFull(fd.get(), value.data(), value.size(), deadline, name_);
    giveBack(std::move(fd));
    return value;
  }

  int64_t add(std::string_view key, int64_t delta) override {
    store::checkKey(key, "add() on " + name_);
    const auto deadline = store::Clock::now() + options_.timeout;
    net::Fd fd = take();
    send(fd, Request(Query::kAdd).string(wireKey(key)).u64(static_cast<uint64_t>(delta)), deadline);
    std::byte reply[8];
    net::readFull(fd.get(), reply, sizeof(reply), deadline, name_);
    giveBack(std::move(fd));
    return static_cast<int64_t>(decodeU64(reply));
  }

  bool check(std::string_view key) override {
    store::checkKey(key, "check() on " + name_);
    const auto deadline = store::Clock::now() + options_.timeout;
    net::Fd fd = take();
    const uint8_t answer = checkOn(fd, wireKey(key), deadline);
    giveBack(std::move(fd));
    return answer == kReady;
  }

  std::string describe() const override { return name_; }

 private:
  std::string wireKey(std::string_view key) const {
    std::string wire = "/" + options_.keyPrefix;
    wire += key;
    return wire;
  }

  IoError malformed(std::string_view what, uint64_t value) const {
    return IoError(
        fmt::format("{}: malformed {} from the server ({}); is it a PyTorch 1.13 "
                    "TCPStore?",
                    name_, what, value));
  }

  void send(net::Fd& fd, const Request& request, net::Deadline deadline) const {
    net::writeFull(fd.get(), request.bytes().data(), request.bytes().size(), deadline, name_);
  }

  // CHECK of one key on `fd`; returns kReady or kNotReady.
  uint8_t checkOn(net::Fd& fd, const std::string& wire, net::Deadline deadline) const {
    send(fd, Request(Query::kCheck).u64(1).string(wire), deadline);
    std::byte answer{};
    net::readFull(fd.get(), &answer, 1, deadline, name_);
    const auto value = static_cast<uint8_t>(answer);
    if (value != kReady && value != kNotReady) throw malformed("CHECK reply", value);
    return value;
  }

  net::Fd connect() const {
    return net::connectTcp(host_, port_, store::Clock::now() + options_.connectTimeout, name_);
  }

  // A connection whose request failed part-way is never given back (its stream position is
  // unknown): it closes when the caller's Fd goes out of scope.
  net::Fd take() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        net::Fd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    return connect();
  }

  void giveBack(net::Fd fd) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(fd));
  }

  const std::string host_;
  const uint16_t port_;
  const C10dStoreOptions options_;
  const std::string name_;
  std::mutex mutex_;
  std::vector<net::Fd> idle_;
};

}  // namespace

std::shared_ptr<Store> connectC10dStore(const std::string& host, uint16_t port,
                                        C10dStoreOptions options) {
  if (host.empty()) throw InvalidArgument("connectC10dStore: host must not be empty");
  if (port == 0) throw InvalidArgument("connectC10dStore: port must not be 0");
  if (options.keyPrefix.size() > kMaxPrefixBytes) {
    throw InvalidArgument(fmt::format("connectC10dStore: key prefix of {} bytes is longer than {}",
                                      options.keyPrefix.size(), kMaxPrefixBytes));
  }
  // Clamped so that now() + timeout cannot overflow the clock.
  options.timeout = store::effectiveTimeout(options.timeout, std::chrono::seconds(300));
  options.connectTimeout =
      store::effectiveTimeout(options.connectTimeout, std::chrono::seconds(60));
  return std::make_shared<C10dStoreClient>(host, port, std::move(options));
}

}  // namespace ringlet
