// TCP store client. Requests on one connection are strictly one at a time, so each concurrent
// request takes its own connection from a small pool: a thread parked in get() never holds up
// another thread's set() on the same Store (thread ranks sharing one store rely on this). Every
// connection proves the job secret before its first request (tcp_store_protocol.h), and a sealed
// one (TcpStoreClientOptions::sealed) carries every byte after that in AES-256-GCM records.

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "ringlet/error.h"
#include "src/auth.h"
#include "src/net/sealed_stream.h"
#include "src/net/socket.h"
#include "src/store/store_common.h"
#include "src/store/tcp_store_protocol.h"

namespace ringlet {
namespace {

namespace wire = store::wire;
using wire::Command;
using wire::Status;

// Idle connections kept for reuse; more may be open while requests are in flight.
constexpr size_t kMaxIdleConnections = 8;
// How long past a GET's own timeout the client waits for the server's timeout reply.
constexpr auto kReplyGrace = std::chrono::seconds(2);

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(std::string host, uint16_t port, TcpStoreClientOptions options)
      : host_(std::move(host)),
        port_(port),
        options_(options),
        name_(fmt::format("tcp store {}:{}", host_, port_)) {
    if (options_.sealed && options_.secret.empty()) {
      throw InvalidArgument(fmt::format(
          "{}: sealed connections (RINGLET_SOCKET_ENCRYPT=1) need a job secret to derive their "
          "keys from (RINGLET_JOB_SECRET or RINGLET_JOB_SECRET_FILE, or ringlet-run)",
          name_));
    }
    idle_.push_back(connect());
  }

  void set(std::string_view key, std::span<const std::byte> value) override {
    store::checkKey(key, "set() on " + name_);
    store::checkValue(value.size(), "set() on " + name_);
    request(Command::kSet, key, value, store::Clock::now() + options_.timeout);
  }

  Bytes get(std::string_view key, std::chrono::milliseconds timeout) override {
    store::checkKey(key, "get() on " + name_);
    const auto wait = store::effectiveTimeout(timeout, options_.timeout);
    std::byte payload[8];
    wire::putU64(payload, static_cast<uint64_t>(wait.count()));
    const auto start = store::Clock::now();
    auto waited = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(store::Clock::now() - start);
    };
    Reply reply;
    try {
      reply = request(Command::kGet, key, payload, start + wait + kReplyGrace);
    } catch (const TimeoutError&) {
      store::throwGetTimeout(key, name_ + " (no reply from the server)", waited());
    }
    if (reply.status == Status::kTimeout) store::throwGetTimeout(key, name_, waited());
    return std::move(reply.payload);
  }

  int64_t add(std::string_view key, int64_t delta) override {
    store::checkKey(key, "add() on " + name_);
    std::byte payload[8];
    wire::putU64(payload, static_cast<uint64_t>(delta));
    Reply reply = request(Command::kAdd, key, payload, store::Clock::now() + options_.timeout);
    if (reply.payload.size() != 8) throw malformed("ADD reply", reply.payload.size());
    return static_cast<int64_t>(wire::getU64(reply.payload.data()));
  }

  bool check(std::string_view key) override {
    store::checkKey(key, "check() on " + name_);
    Reply reply = request(Command::kCheck, key, {}, store::Clock::now() + options_.timeout);
    if (reply.payload.size() != 1) throw malformed("CHECK reply", reply.payload.size());
    return reply.payload[0] != std::byte{0};
  }

  std::string describe() const override { return name_; }

 private:
  struct Reply {
    Status status = Status::kOk;
    Bytes payload;
  };

  // One connection; `sealed` carries its bytes where the options seal them.
  struct Connection {
    net::Fd fd;
    std::unique_ptr<net::SealedStream> sealed;
  };

  IoError malformed(std::string_view what, uint64_t bytes) const {
    return IoError(fmt::format("{}: malformed {} from the server ({} bytes)", name_, what, bytes));
  }

  Connection connect() const {
    const auto deadline = store::Clock::now() + options_.connectTimeout;
    Connection connection{.fd = net::connectTcp(host_, port_, deadline, name_), .sealed = nullptr};
    const net::SealKeys keys = authenticate(connection.fd.get(), deadline);
    if (options_.sealed) {
      connection.sealed = std::make_unique<net::SealedStream>(connection.fd.get(), keys);
    }
    return connection;
  }

  // Reads the server's challenge, proves the secret over both nonces, checks the server's proof.
  // Returns the keys of a sealed connection.
  net::SealKeys authenticate(int fd, net::Deadline deadline) const {
    std::byte greeting[wire::kGreetingBytes];
    net::readFull(fd, greeting, sizeof(greeting), deadline, name_);
    if (std::memcmp(greeting, wire::kHello, sizeof(wire::kHello)) != 0) {
      throw IoError(fmt::format(
          "{}: the server is not a ringlet store of protocol {} (it greeted with other bytes)",
          name_, std::string_view(wire::kHello, sizeof(wire::kHello))));
    }
    const auto status = static_cast<wire::GreetStatus>(greeting[8]);
    const uint16_t textBytes = wire::getU16(greeting + 9);
    if (status != wire::GreetStatus::kOk) throw refused(fd, textBytes, deadline);
    const std::span<const uint8_t> serverNonce(reinterpret_cast<const uint8_t*>(greeting + 11),
                                               wire::kNonceBytes);

    const auth::Nonce clientNonce = auth::freshNonce(name_);
    const auth::Mac proof =
        auth::hmac(options_.secret, options_.sealed ? wire::kClientSealedLabel : wire::kClientLabel,
                   {serverNonce, clientNonce});
    std::byte message[wire::kProofBytes];
    std::memcpy(message, wire::kHello, sizeof(wire::kHello));
    std::memcpy(message + sizeof(wire::kHello), clientNonce.data(), clientNonce.size());
    std::memcpy(message + sizeof(wire::kHello) + wire::kNonceBytes, proof.data(), proof.size());
    net::writeFull(fd, message, sizeof(message), deadline, name_);

    std::byte answer[wire::kAnswerBytes];
    try {
      net::readFull(fd, answer, sizeof(answer), deadline, name_);
    } catch (const IoError& e) {
      throw IoError(
          fmt::format("{} closed the connection during the secret check: {}", name_, e.what()));
    }
    if (static_cast<wire::GreetStatus>(answer[0]) != wire::GreetStatus::kOk) {
      throw refused(fd, wire::getU16(answer + 1), deadline);
    }
    const auth::Mac expected =
        auth::hmac(options_.secret, options_.sealed ? wire::kServerSealedLabel : wire::kServerLabel,
                   {clientNonce, serverNonce});
    if (!auth::macEquals({reinterpret_cast<const uint8_t*>(answer + 3), wire::kMacBytes},
                         expected)) {
      throw IoError(fmt::format(
          "{}: the server failed the secret check (it does not hold this job's secret: another "
          "job's store, or an impostor on that address)",
          name_));
    }
    return wire::sealKeys(options_.secret, serverNonce, clientNonce, /*server=*/false);
  }

  // The server's reason for refusing the connection, as an IoError.
  IoError refused(int fd, uint16_t textBytes, net::Deadline deadline) const {
    std::string text(std::min<size_t>(textBytes, wire::kMaxRefusalBytes), '\0');
    try {
      net::readFull(fd, text.data(), text.size(), deadline, name_);
    } catch (const Error&) {
      text = "no reason given";
    }
    for (char& c : text) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return IoError(fmt::format("{} refused the connection: {}", name_, text));
  }

  Connection take() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        Connection connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
      }
    }
    return connect();
  }

  void giveBack(Connection connection) {
    std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
  }

  // Sends one request and reads its reply by `deadline`. A connection that failed or timed out
  // mid-request is closed (its stream position is unknown), never reused.
  Reply request(Command command, std::string_view key, std::span<const std::byte> payload,
                net::Deadline deadline) {
    Connection connection = take();
    const int fd = connection.fd.get();
    net::SealedStream* sealed = connection.sealed.get();
    // One write (one sealed record where sealed) of the whole request.
    Bytes frame(wire::kRequestHeaderBytes + key.size() + payload.size());
    frame[0] = static_cast<std::byte>(command);
    wire::putU32(frame.data() + 1, static_cast<uint32_t>(key.size()));
    wire::putU64(frame.data() + 5, payload.size());
    std::memcpy(frame.data() + wire::kRequestHeaderBytes, key.data(), key.size());
    if (!payload.empty()) {
      std::memcpy(frame.data() + wire::kRequestHeaderBytes + key.size(), payload.data(),
                  payload.size());
    }
    net::writeFull(fd, sealed, frame.data(), frame.size(), deadline, name_);

    std::byte replyHeader[wire::kReplyHeaderBytes];
    net::readFull(fd, sealed, replyHeader, sizeof(replyHeader), deadline, name_);
    Reply reply;
    reply.status = static_cast<Status>(replyHeader[0]);
    const uint64_t bytes = wire::getU64(replyHeader + 1);
    switch (reply.status) {
      case Status::kOk:
        if (bytes > kMaxValueBytes) throw malformed("reply", bytes);
        break;
      case Status::kTimeout:
        if (bytes != 0) throw malformed("timeout reply", bytes);
        break;
      case Status::kError:
        if (bytes == 0 || bytes > wire::kMaxErrorBytes) throw malformed("error reply", bytes);
        break;
      default:
        throw IoError(fmt::format("{}: reply with unknown status {}", name_,
                                  static_cast<unsigned>(replyHeader[0])));
    }
    reply.payload.resize(bytes);
    net::readFull(fd, sealed, reply.payload.data(), bytes, deadline, name_);
    giveBack(std::move(connection));
    if (reply.status == Status::kError) throwServerError(reply.payload);
    return reply;
  }

  [[noreturn]] void throwServerError(const Bytes& payload) const {
    const auto code = static_cast<ErrorCode>(payload[0]);
    const std::string message = fmt::format(
        "{} answered: {}", name_,
        std::string_view(reinterpret_cast<const char*>(payload.data() + 1), payload.size() - 1));
    switch (code) {
      case ErrorCode::kInvalidArgument:
        throw InvalidArgument(message);
      case ErrorCode::kTimeout:
        throw TimeoutError(message);
      default:
        throw IoError(message);
    }
  }

  const std::string host_;
  const uint16_t port_;
  const TcpStoreClientOptions options_;
  const std::string name_;
  std::mutex mutex_;
  std::vector<Connection> idle_;
};

}  // namespace

std::shared_ptr<Store> connectTcpStore(const std::string& host, uint16_t port,
                                       TcpStoreClientOptions options) {
  if (host.empty()) throw InvalidArgument("connectTcpStore: host must not be empty");
  if (port == 0) throw InvalidArgument("connectTcpStore: port must not be 0");
  return std::make_shared<TcpStoreClient>(host, port, options);
}

}  // namespace ringlet
