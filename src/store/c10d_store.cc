// Client of PyTorch's c10d TCPStore: the wire protocol of PyTorch 1.13 and of 2.x.
//
// A request is one query byte followed by its arguments; a reply is read only where the query
// has one. Integers are 8 bytes in the host's byte order (torch sends its native values;
// written here as little-endian, which is what x86-64 and aarch64 hosts send). The queries used,
// with their numbers in 1.13 / 2.x:
//
//   SET   0 / 1  string key, bytes value      -> (no reply)
//   GET   2 / 3  string key                   -> bytes value (1.13 closes the connection if the
//                                                key is missing, 2.x answers empty: WAIT first)
//   ADD   3 / 4  string key, int64 delta      -> int64 new value (stored as decimal text)
//   CHECK 4 / 5  uint64 n, n x string key     -> 1 byte: 0 all present, 1 not
//   WAIT  5 / 6  uint64 n, n x string key     -> 1 byte 0, once every key exists
//
// where string and bytes are a uint64 length then the bytes. 2.x numbers VALIDATE 0 (then a
// uint32 magic, no reply), which must be a connection's first message, GETNUMKEYS 7 (-> int64)
// and, from 2.3 or so, PING 13 (a uint32 nonce, echoed). A WAIT is never cancelled here (1.13
// cannot): a get() that times out closes its connection, and the server then forgets the waiter.
// SET has no reply, so set() follows it with a CHECK of the same key on the same connection: the
// answer proves the server applied the SET before set() returns, and bounds it by a deadline.
//
// Which protocol a server speaks is found on the first connection, by requests that every
// generation either answers or refuses by closing the connection, and that cannot harm a server
// of the other one (handshake() below).

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

// The query numbers of one protocol generation.
struct Queries {
  uint8_t set, get, add, check, wait;
};
constexpr Queries kTorch1Queries{0, 2, 3, 4, 5};
constexpr Queries kTorch2Queries{1, 3, 4, 5, 6};
constexpr uint8_t kValidate = 0;  // 2.x
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kGetNumKeys = 7;  // 2.x
constexpr uint8_t kPing = 13;       // 2.3 and later
// A ping nonce whose third byte has its top bit set: a 1.13 server reads that byte as the top
// byte of a string length (see handshake()).
constexpr uint32_t kPingNonce = 0xA5C3E1F0u;
static_assert(((kPingNonce >> 16) & 0x80) != 0);
// How long the handshake waits for an answer that a server of its generation gives at once.
constexpr std::chrono::milliseconds kProbeWait = std::chrono::seconds(5);
constexpr uint8_t kReady = 0;     // CHECK: every key exists
constexpr uint8_t kNotReady = 1;  // CHECK: some key is missing
constexpr uint8_t kStopWaiting = 0;

// Idle connections kept for reuse; more may be open while requests are in flight.
constexpr size_t kMaxIdleConnections = 8;
constexpr size_t kMaxPrefixBytes = 1024;

// One request, framed into a single buffer so it goes out in one write.
class Request {
 public:
  Request() = default;
  explicit Request(uint8_t query) { u8(query); }

  Request& u8(uint8_t value) {
    bytes_.push_back(static_cast<std::byte>(value));
    return *this;
  }
  Request& u32(uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<std::byte>(value >> (8 * i)));
    return *this;
  }
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

// The little-endian integer in the first `bytes` bytes at `p`.
uint64_t decodeU64Prefix(const std::byte* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

uint64_t decodeU64(const std::byte* p) { return decodeU64Prefix(p, 8); }

class C10dStoreClient final : public Store {
 public:
  C10dStoreClient(std::string host, uint16_t port, C10dStoreOptions options)
      : host_(std::move(host)),
        port_(port),
        options_(std::move(options)),
        name_(fmt::format("c10d store {}:{}", host_, port_)) {
    idle_.push_back(handshake());
  }

  C10dProtocol protocol() const { return protocol_; }

  void set(std::string_view key, std::span<const std::byte> value) override {
    store::checkKey(key, "set() on " + name_);
    store::checkValue(value.size(), "set() on " + name_);
    const std::string wire = wireKey(key);
    const auto deadline = store::Clock::now() + options_.timeout;
    net::Fd fd = take();
    send(fd, Request(q().set).string(wire).data(value), deadline);
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
    send(fd, Request(q().wait).u64(1).string(wire), start + wait);
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
    send(fd, Request(q().get).string(wire), deadline);
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
    send(fd, Request(q().add).string(wireKey(key)).u64(static_cast<uint64_t>(delta)), deadline);
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

  const Queries& q() const {
    return protocol_ == C10dProtocol::kTorch1 ? kTorch1Queries : kTorch2Queries;
  }

  IoError malformed(std::string_view what, uint64_t value) const {
    return IoError(fmt::format("{}: malformed {} from the server ({}); is it a PyTorch TCPStore?",
                               name_, what, value));
  }

  void send(net::Fd& fd, const Request& request, net::Deadline deadline) const {
    net::writeFull(fd.get(), request.bytes().data(), request.bytes().size(), deadline, name_);
  }

  // CHECK of one key on `fd`; returns kReady or kNotReady.
  uint8_t checkOn(net::Fd& fd, const std::string& wire, net::Deadline deadline) const {
    send(fd, Request(q().check).u64(1).string(wire), deadline);
    std::byte answer{};
    net::readFull(fd.get(), &answer, 1, deadline, name_);
    const auto value = static_cast<uint8_t>(answer);
    if (value != kReady && value != kNotReady) throw malformed("CHECK reply", value);
    return value;
  }

  net::Fd connectRaw() const {
    return net::connectTcp(host_, port_, store::Clock::now() + options_.connectTimeout, name_);
  }

  static Request validation() { return std::move(Request(kValidate).u32(kValidationMagic)); }

  // A connection ready for requests: under 2.x, validated first.
  net::Fd connect() const {
    net::Fd fd = connectRaw();
    if (protocol_ == C10dProtocol::kTorch2) {
      send(fd, validation(), store::Clock::now() + options_.timeout);
    }
    return fd;
  }

  // Sends `request` on a new connection and reads `reply.size()` bytes within kProbeWait (or the
  // store timeout, if shorter). False where the server closed the connection or stayed silent.
  bool probe(const Request& request, std::span<std::byte> reply, net::Fd& fd) const {
    fd = connectRaw();
    const auto deadline = store::Clock::now() + std::min(kProbeWait, options_.timeout);
    try {
      send(fd, request, deadline);
      net::readFull(fd.get(), reply.data(), reply.size(), deadline, name_);
      return true;
    } catch (const IoError&) {
    } catch (const TimeoutError&) {
    }
    fd = net::Fd();
    return false;
  }

  // Finds the server's protocol and returns a connection ready for requests. Three requests, in
  // turn, each on a connection of its own, until one is answered:
  //  1. 2.3+: VALIDATE and a PING, which the server echoes. A 1.13 server reads it as a SET whose
  //     key length's top byte is the nonce's third (>= 0x80): a length no std::vector can have,
  //     so it throws before allocating anything and closes the connection (tested against 1.13).
  //  2. 1.13: CHECK of no keys, answered READY. A 2.x server closes a connection whose first
  //     message is not VALIDATE (or, libuv's, ignores it: kProbeWait).
  //  3. 2.0-2.2 (VALIDATE, no PING): VALIDATE and three GETNUMKEYS, answered by counts, then a
  //     query byte 0xFF that ends the connection; to 1.13 again a SET of an impossible length.
  // The requests never leave a 1.13 server waiting for bytes (its daemon reads a request with
  // blocking reads, every client's): each is whole or stops where 1.13 gives up on it.
  net::Fd handshake() {
    if (options_.assumeTorch1) return connect();
    net::Fd fd;
    std::byte echo[4];
    if (probe(validation().u8(kPing).u32(kPingNonce), echo, fd)) {
      if (decodeU64Prefix(echo, 4) != kPingNonce) {
        throw malformed("PING reply", decodeU64Prefix(echo, 4));
      }
      protocol_ = C10dProtocol::kTorch2;
      return fd;
    }
    std::byte ready[1];
    if (probe(Request(kTorch1Queries.check).u64(0), ready, fd)) {
      if (static_cast<uint8_t>(ready[0]) != kReady) {
        throw malformed("CHECK reply", static_cast<uint8_t>(ready[0]));
      }
      protocol_ = C10dProtocol::kTorch1;
      return fd;
    }
    std::byte count[8];
    if (probe(validation().u8(kGetNumKeys).u8(kGetNumKeys).u8(kGetNumKeys).u8(0xFF), count, fd)) {
      protocol_ = C10dProtocol::kTorch2;
      return connect();  // this one ends at the 0xFF
    }
    throw IoError(fmt::format(
        "{}: the server answered neither PyTorch 2.x's TCPStore requests (VALIDATE, PING or "
        "GETNUMKEYS) nor 1.13's (CHECK) within {} ms; is it a PyTorch TCPStore?",
        name_, std::min(kProbeWait, options_.timeout).count()));
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
  C10dProtocol protocol_ = C10dProtocol::kTorch1;  // set once, by handshake()
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

C10dProtocol c10dProtocolOf(const Store& store) {
  const auto* client = dynamic_cast<const C10dStoreClient*>(&store);
  return client ? client->protocol() : C10dProtocol::kUnknown;
}

}  // namespace ringlet
