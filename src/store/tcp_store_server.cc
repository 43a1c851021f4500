// TCP store server: one thread, poll() over a wake-up eventfd, the listener and every client.
// Each client has an input buffer (bytes until a whole request is there) and an output buffer
// (reply bytes the socket did not take yet). A new connection first gets the greeting with the
// server's nonce and must answer with its proof of the secret (tcp_store_protocol.h) within
// kProofTimeout; until then at most kProofBytes of its input are read and no request is.
// A GET for a missing key parks the client as a waiter on that key until a SET/ADD creates it
// (reply kOk) or its deadline passes (reply kTimeout). A client that breaks the protocol is
// closed and logged; nobody else notices. Quotas (keys, bytes, connections per client address)
// are checked before a request changes anything or a connection is admitted; at most
// kMaxPendingPerHost connections per address may wait to prove the secret, and a new one evicts
// the oldest, so a flood of silent connections cannot lock out a rank. When accept() runs out of
// descriptors the listener leaves the poll set for a pause that doubles up to kMaxAcceptPause, so
// the loop does not spin on a listener that stays readable.
// Sealed (Options::sealed): a client's bytes after its proof go through its SealedStream both
// ways; the answer to the proof is the last thing sent in clear (Client::clearBytes).

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ringlet/error.h"
#include "src/auth.h"
#include "src/log.h"
#include "src/net/sealed_stream.h"
#include "src/net/socket.h"
#include "src/store/loopback_owner.h"
#include "src/store/store_common.h"
#include "src/store/tcp_store_protocol.h"
#include "src/store/tcp_store_server_internal.h"

namespace ringlet {
namespace {

namespace wire = store::wire;
using wire::Command;
using wire::Status;

constexpr auto kProofTimeout = std::chrono::seconds(10);
constexpr size_t kMaxPendingPerHost = 64;
constexpr auto kFirstAcceptPause = std::chrono::milliseconds(10);
constexpr auto kMaxAcceptPause = std::chrono::milliseconds(1000);
// Input read ahead of processing: one whole request at most (a parked GET stops reading).
constexpr size_t kMaxFrameBytes = wire::kRequestHeaderBytes + kMaxKeyBytes + kMaxValueBytes;

// A request the client broke the protocol with; closes that client.
struct ProtocolViolation {
  std::string reason;
};

struct Client {
  net::Fd fd;
  std::string peer;
  std::string peerHost;  // the address part of `peer`: what the connection quota counts
  bool authenticated = false;
  auth::Nonce nonce{};  // this server's challenge to it
  store::Clock::time_point proofDeadline;
  Bytes input;
  Bytes output;
  size_t outputSent = 0;
  // Sealed connections, once the proof is checked: every byte after the first clearBytes of
  // output (the answer to the proof) goes through `sealed`, and every byte read.
  std::unique_ptr<net::SealedStream> sealed;
  size_t clearBytes = 0;
  // Whether there are bytes to write: output not taken yet, or sealed bytes not yet written.
  bool wantsToWrite() const {
    return outputSent < output.size() || (sealed && sealed->pendingBytes() > 0);
  }
  // Set while a GET is parked: the key and when to give up.
  std::optional<std::string> waitingKey;
  store::Clock::time_point waitDeadline;
};

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  explicit TcpStoreServerImpl(TcpStoreServer::Options options)
      : host_(options.host),
        secret_(std::move(options.secret)),
        quotas_(options.quotas),
        sealed_(options.sealed),
        listener_(net::listenTcp(options.host, options.port)) {
    port_ = net::SocketAddress::local(listener_.get()).port();
    wake_ = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) {
      throw IoError(fmt::format("tcp store server {}:{}: eventfd failed: {}", host_, port_,
                                net::errorText(errno)));
    }
    thread_ = std::thread([this] { run(); });
  }

  ~TcpStoreServerImpl() override {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    thread_.join();
  }

  uint16_t port() const override { return port_; }
  std::string host() const override { return host_; }
  uint64_t acceptFailures() const { return acceptFailures_.load(); }

 private:
  std::string name() const { return fmt::format("tcp store server {}:{}", host_, port_); }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (true) {
      fds.clear();
      ids.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      // While accepting is paused the listener sits out (fd -1 is ignored by poll).
      const bool accepting = store::Clock::now() >= acceptPausedUntil_;
      fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
      for (auto& [id, client] : clients_) {
        // A parked client sends nothing until answered; POLLRDHUP still tells if it goes away.
        short events = client.waitingKey ? POLLRDHUP : POLLIN;
        if (client.wantsToWrite()) events |= POLLOUT;
        // POLLHUP/POLLERR come regardless; a parked client's hang-up is still noticed.
        fds.push_back({client.fd.get(), events, 0});
        ids.push_back(id);
      }
      const int rc = ::poll(fds.data(), fds.size(), pollTimeoutMs());
      if (rc < 0 && errno != EINTR) {
        log::warn("{}: poll failed ({}); the server stops", name(), net::errorText(errno));
        return;
      }
      if (fds[0].revents != 0) return;  // destructor
      if (fds[1].revents != 0) acceptAll();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        serviceClient(ids[i - 2], fds[i].revents);
      }
      expireWaiters();
      expireProofs();
      resumeAnswered();
    }
  }

  int pollTimeoutMs() const {
    std::optional<store::Clock::time_point> next;
    auto consider = [&](store::Clock::time_point t) {
      if (!next || t < *next) next = t;
    };
    for (const auto& [id, client] : clients_) {
      if (client.waitingKey) consider(client.waitDeadline);
      if (!client.authenticated) consider(client.proofDeadline);
    }
    if (acceptPausedUntil_ > store::Clock::now()) consider(acceptPausedUntil_);
    if (!next) return -1;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*next - store::Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
  }

  void acceptAll() {
    while (true) {
      const int raw = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (raw < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED) return;
        // Out of descriptors or memory: the connection stays queued and the listener stays
        // readable, so pause accepting instead of spinning on it; clients already connected are
        // still served meanwhile.
        acceptFailures_.fetch_add(1);
        if (acceptPause_ == std::chrono::milliseconds(0)) {
          log::warn("{}: accept failed ({}); pausing new connections, serving the {} connected",
                    name(), net::errorText(err), clients_.size());
        }
        acceptPause_ = std::clamp(acceptPause_ * 2, kFirstAcceptPause, kMaxAcceptPause);
        acceptPausedUntil_ = store::Clock::now() + acceptPause_;
        return;
      }
      net::Fd fd(raw);
      if (acceptPause_ != std::chrono::milliseconds(0)) {
        log::warn("{}: accepting again", name());
        acceptPause_ = std::chrono::milliseconds(0);
      }
      net::setNoDelay(fd.get());
      Client client;
      try {
        const auto address = net::SocketAddress::remote(fd.get());
        client.peer = address.toString();
        client.peerHost = address.host();
      } catch (const Error&) {
        client.peer = "unknown peer";
        client.peerHost = "unknown";
      }
      // Without a secret nothing is proven: admit only this user's processes (loopback only).
      if (secret_.empty()) {
        const std::optional<uid_t> uid = store::loopbackPeerUid(fd.get());
        if (!uid || *uid != ::geteuid()) {
          const std::string who = uid ? fmt::format("uid {}", *uid) : "an unknown user";
          log::warn(
              "{}: refusing client {} of {}: without a job secret this store admits only the "
              "processes of its own user (uid {})",
              name(), client.peer, who, ::geteuid());
          const Bytes out =
              greeting(wire::GreetStatus::kRefused, auth::Nonce{},
                       fmt::format("{} has no job secret and admits only uid {}; this client is {}",
                                   name(), ::geteuid(), who));
          [[maybe_unused]] ssize_t n =
              ::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          continue;
        }
      }
      // Connections that have not proven the secret yet are few per address: a flood of them
      // evicts the oldest, so it cannot crowd out a rank that proves the secret at once.
      if (pendingFrom_[client.peerHost] >= kMaxPendingPerHost) evictOldestPending(client.peerHost);
      ++pendingFrom_[client.peerHost];
      client.fd = std::move(fd);
      client.nonce = auth::freshNonce("a tcp store connection");
      client.proofDeadline = store::Clock::now() + kProofTimeout;
      client.output = greeting(wire::GreetStatus::kOk, client.nonce, {});
      const uint64_t id = nextId_++;
      auto [it, inserted] = clients_.emplace(id, std::move(client));
      try {
        flush(it->second);
      } catch (const Error& e) {
        log::warn("{}: closing client {}: {}", name(), it->second.peer, e.what());
        close(id);
      }
    }
  }

  static Bytes greeting(wire::GreetStatus status, const auth::Nonce& nonce, std::string_view text) {
    text = text.substr(0, wire::kMaxRefusalBytes);
    Bytes out(wire::kGreetingBytes + text.size());
    std::memcpy(out.data(), wire::kHello, sizeof(wire::kHello));
    out[8] = static_cast<std::byte>(status);
    wire::putU16(out.data() + 9, static_cast<uint16_t>(text.size()));
    std::memcpy(out.data() + 11, nonce.data(), nonce.size());
    if (!text.empty()) std::memcpy(out.data() + wire::kGreetingBytes, text.data(), text.size());
    return out;
  }

  void serviceClient(uint64_t id, short revents) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    Client& client = it->second;
    try {
      if (revents & POLLOUT) flush(client);
      if (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) {
        if (!readInput(client)) {
          if (!client.input.empty() && !client.waitingKey) {
            log::warn(
                "{}: client {} closed the connection in the middle of a request ({} bytes "
                "unparsed)",
                name(), client.peer, client.input.size());
          }
          close(id);
          return;
        }
        processInput(client);
        if (!readSealedAhead(client)) {
          close(id);
          return;
        }
        flush(client);
      }
    } catch (const ProtocolViolation& v) {
      log::warn("{}: closing client {}: {}", name(), client.peer, v.reason);
      close(id);
    } catch (const Error& e) {
      log::warn("{}: closing client {}: {}", name(), client.peer, e.what());
      close(id);
    }
  }

  // Reads what is there; false when the peer closed or the socket failed.
  // Reads at most what the next step can use: the proof before authentication, one request
  // after it.
  bool readInput(Client& client) {
    std::byte chunk[64 * 1024];
    const size_t limit = client.authenticated ? kMaxFrameBytes : wire::kProofBytes;
    while (client.input.size() < limit) {
      const size_t want = std::min(sizeof(chunk), limit - client.input.size());
      const ssize_t n = net::recvOn(client.fd.get(), client.sealed.get(), chunk, want);
      if (n > 0) {
        client.input.insert(client.input.end(), chunk, chunk + n);
        if (static_cast<size_t>(n) < want) return true;
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EBADMSG) {
        throw ProtocolViolation{
            "it sent bytes that fail authentication: changed on the way, or not sent by a holder "
            "of the job secret (the connection is sealed, RINGLET_SOCKET_ENCRYPT=1)"};
      }
      return false;
    }
    return true;
  }

  // A sealed stream may hold opened requests past what readInput took (it stops at one whole
  // request), which no poll would report: handles them while the client is not parked. False
  // when the peer closed.
  bool readSealedAhead(Client& client) {
    while (client.sealed && !client.waitingKey && client.sealed->readyBytes() > 0) {
      if (!readInput(client)) return false;
      processInput(client);
    }
    return true;
  }

  // Sends what the socket takes: the first clearBytes of output in clear, the rest through the
  // sealed stream where there is one.
  void flush(Client& client) {
    auto failed = [](int error) {
      return IoError(fmt::format("sending a reply failed: {}", net::errorText(error)));
    };
    if (client.sealed) {
      if (const int error = client.sealed->flushPending(); error != 0) throw failed(error);
    }
    while (client.outputSent < client.output.size()) {
      const bool clear = !client.sealed || client.outputSent < client.clearBytes;
      const size_t end = client.sealed && clear ? client.clearBytes : client.output.size();
      const std::byte* data = client.output.data() + client.outputSent;
      const size_t bytes = end - client.outputSent;
      const ssize_t n = clear ? ::send(client.fd.get(), data, bytes, MSG_NOSIGNAL)
                              : client.sealed->send(data, bytes);
      if (n > 0) {
        client.outputSent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      throw failed(n < 0 ? errno : EPIPE);
    }
    client.output.clear();
    client.outputSent = 0;
    client.clearBytes = 0;
  }

  // Handles every whole request in the input buffer, stopping at a parked GET.
  void processInput(Client& client) {
    size_t offset = 0;
    const auto& in = client.input;
    if (!client.authenticated) {
      if (in.size() < sizeof(wire::kHello)) return;
      if (std::memcmp(in.data(), wire::kHello, sizeof(wire::kHello)) != 0) {
        throw ProtocolViolation{"bad hello (not a ringlet store client, or another version)"};
      }
      if (in.size() < wire::kProofBytes) return;
      checkProof(client);
      offset = wire::kProofBytes;
    }
    while (!client.waitingKey && in.size() - offset >= wire::kRequestHeaderBytes) {
      const std::byte* header = in.data() + offset;
      const auto command = static_cast<Command>(header[0]);
      const uint32_t keyBytes = wire::getU32(header + 1);
      const uint64_t payloadBytes = wire::getU64(header + 5);
      checkRequest(command, keyBytes, payloadBytes);
      const size_t frame = wire::kRequestHeaderBytes + keyBytes + payloadBytes;
      if (in.size() - offset < frame) break;
      const auto* keyStart = reinterpret_cast<const char*>(header + wire::kRequestHeaderBytes);
      std::string key(keyStart, keyBytes);
      std::span<const std::byte> payload(header + wire::kRequestHeaderBytes + keyBytes,
                                         payloadBytes);
      handle(client, command, std::move(key), payload);
      offset += frame;
    }
    client.input.erase(client.input.begin(), client.input.begin() + static_cast<ptrdiff_t>(offset));
  }

  // The client's proof of the secret over both nonces; answers with this server's proof. A
  // wrong proof gets a kRefused answer and closes the connection.
  void checkProof(Client& client) {
    const std::byte* in = client.input.data();
    const std::span<const uint8_t> clientNonce(
        reinterpret_cast<const uint8_t*>(in + sizeof(wire::kHello)), wire::kNonceBytes);
    const std::span<const uint8_t> proof(
        reinterpret_cast<const uint8_t*>(in + sizeof(wire::kHello) + wire::kNonceBytes),
        wire::kMacBytes);
    // The client's proof names its choice of sealing (its label). A sealing server admits only
    // sealed clients; one that does not seal serves a client that does, sealed: nobody on the
    // path can change the choice (it is under the MAC), and nobody gets less than asked for.
    auto proves = [&](std::string_view label) {
      return auth::macEquals(proof, auth::hmac(secret_, label, {client.nonce, clientNonce}));
    };
    const bool clientSeals = !secret_.empty() && proves(wire::kClientSealedLabel);
    if (!clientSeals && !proves(wire::kClientLabel)) {
      refuse(client,
             "the client failed the secret check (wrong or missing job secret, or a replayed "
             "session)");
    }
    if (sealed_ && !clientSeals) {
      refuse(client,
             "the client does not seal its store connection and this server seals every "
             "connection (RINGLET_SOCKET_ENCRYPT=1): set RINGLET_SOCKET_ENCRYPT alike on every "
             "rank and launcher of the job");
    }
    size_t& open = connectionsFrom_[client.peerHost];
    if (open >= quotas_.maxConnectionsPerHost) {
      const std::string why = fmt::format(
          "{}: connection quota reached: {} connections open from {} (limit {}, "
          "TcpStoreQuotas::maxConnectionsPerHost)",
          name(), open, client.peerHost, quotas_.maxConnectionsPerHost);
      refuse(client, why);
    }
    const auth::Mac mine =
        auth::hmac(secret_, clientSeals ? wire::kServerSealedLabel : wire::kServerLabel,
                   {clientNonce, client.nonce});
    answer(client, wire::GreetStatus::kOk, mine, {});
    if (clientSeals) {
      client.clearBytes = client.output.size();
      client.sealed = std::make_unique<net::SealedStream>(
          client.fd.get(), wire::sealKeys(secret_, client.nonce, clientNonce, /*server=*/true));
    }
    ++open;
    uncount(pendingFrom_, client.peerHost);
    client.authenticated = true;
  }

  // Answers the proof with a refusal saying why, and closes the connection.
  [[noreturn]] void refuse(Client& client, const std::string& why) {
    answer(client, wire::GreetStatus::kRefused, auth::Mac{}, why);
    try {
      flush(client);
    } catch (const Error&) {
    }
    throw ProtocolViolation{why};
  }

  static void answer(Client& client, wire::GreetStatus status, const auth::Mac& mac,
                     std::string_view text) {
    text = text.substr(0, wire::kMaxRefusalBytes);
    const size_t at = client.output.size();
    client.output.resize(at + wire::kAnswerBytes + text.size());
    std::byte* p = client.output.data() + at;
    p[0] = static_cast<std::byte>(status);
    wire::putU16(p + 1, static_cast<uint16_t>(text.size()));
    std::memcpy(p + 3, mac.data(), mac.size());
    if (!text.empty()) std::memcpy(p + wire::kAnswerBytes, text.data(), text.size());
  }

  static void checkRequest(Command command, uint32_t keyBytes, uint64_t payloadBytes) {
    if (keyBytes == 0 || keyBytes > kMaxKeyBytes) {
      throw ProtocolViolation{fmt::format("key length {} outside 1..{}", keyBytes, kMaxKeyBytes)};
    }
    auto expect = [&](uint64_t want, const char* what) {
      if (payloadBytes != want) {
        throw ProtocolViolation{fmt::format("{} request with a payload of {} bytes (want {})", what,
                                            payloadBytes, want)};
      }
    };
    switch (command) {
      case Command::kSet:
        if (payloadBytes > kMaxValueBytes) {
          throw ProtocolViolation{
              fmt::format("SET value of {} bytes is longer than the limit of "
                          "{} bytes",
                          payloadBytes, kMaxValueBytes)};
        }
        return;
      case Command::kGet:
        return expect(8, "GET");
      case Command::kAdd:
        return expect(8, "ADD");
      case Command::kCheck:
        return expect(0, "CHECK");
    }
    throw ProtocolViolation{
        fmt::format("unknown command {}", static_cast<unsigned>(static_cast<uint8_t>(command)))};
  }

  void handle(Client& client, Command command, std::string key,
              std::span<const std::byte> payload) {
    switch (command) {
      case Command::kSet:
        if (auto refusal = quotaRefusal(key, payload.size())) {
          replyError(client, ErrorCode::kIo, *refusal);
          return;
        }
        put(key, Bytes(payload.begin(), payload.end()));
        reply(client, Status::kOk, {});
        wakeWaiters(key);
        return;
      case Command::kGet: {
        auto it = values_.find(key);
        if (it != values_.end()) {
          reply(client, Status::kOk, it->second);
          return;
        }
        const uint64_t timeoutMs =
            std::min<uint64_t>(wire::getU64(payload.data()), uint64_t{365} * 24 * 3600 * 1000);
        client.waitingKey = std::move(key);
        client.waitDeadline = store::Clock::now() + std::chrono::milliseconds(timeoutMs);
        return;
      }
      case Command::kAdd: {
        const auto delta = static_cast<int64_t>(wire::getU64(payload.data()));
        auto it = values_.find(key);
        int64_t current = 0;
        if (it != values_.end()) {
          try {
            current = store::parseCounter(it->second, key, name());
          } catch (const InvalidArgument& e) {
            replyError(client, ErrorCode::kInvalidArgument, e.what());
            return;
          }
        }
        int64_t result = 0;
        if (__builtin_add_overflow(current, delta, &result)) {
          replyError(client, ErrorCode::kInvalidArgument,
                     store::overflowText(key, name(), current, delta));
          return;
        }
        Bytes text = store::counterBytes(result);
        if (auto refusal = quotaRefusal(key, text.size())) {
          replyError(client, ErrorCode::kIo, *refusal);
          return;
        }
        put(key, std::move(text));
        std::byte out[8];
        wire::putU64(out, static_cast<uint64_t>(result));
        reply(client, Status::kOk, out);
        wakeWaiters(key);
        return;
      }
      case Command::kCheck: {
        const std::byte out[1] = {static_cast<std::byte>(values_.contains(key) ? 1 : 0)};
        reply(client, Status::kOk, out);
        return;
      }
    }
  }

  // Why storing `valueBytes` under `key` would pass a quota, or nothing when it fits.
  std::optional<std::string> quotaRefusal(const std::string& key, size_t valueBytes) const {
    auto it = values_.find(key);
    const size_t before = it == values_.end() ? 0 : key.size() + it->second.size();
    if (it == values_.end() && values_.size() >= quotas_.maxKeys) {
      return fmt::format(
          "{}: key quota reached: {} keys held (limit {}, TcpStoreQuotas::maxKeys); key '{}' "
          "refused",
          name(), values_.size(), quotas_.maxKeys, store::printableKey(key));
    }
    const size_t after = storedBytes_ - before + key.size() + valueBytes;
    if (after > quotas_.maxBytes) {
      return fmt::format(
          "{}: memory quota reached: storing {} bytes under key '{}' would hold {} bytes (limit "
          "{}, TcpStoreQuotas::maxBytes)",
          name(), valueBytes, store::printableKey(key), after, quotas_.maxBytes);
    }
    return std::nullopt;
  }

  void put(const std::string& key, Bytes value) {
    auto [it, inserted] = values_.try_emplace(key);
    if (!inserted) storedBytes_ -= key.size() + it->second.size();
    storedBytes_ += key.size() + value.size();
    it->second = std::move(value);
  }

  static void reply(Client& client, Status status, std::span<const std::byte> payload) {
    std::byte header[wire::kReplyHeaderBytes];
    header[0] = static_cast<std::byte>(status);
    wire::putU64(header + 1, payload.size());
    client.output.insert(client.output.end(), header, header + sizeof(header));
    client.output.insert(client.output.end(), payload.begin(), payload.end());
  }

  static void replyError(Client& client, ErrorCode code, std::string_view message) {
    message = message.substr(0, wire::kMaxErrorBytes - 1);
    Bytes payload;
    payload.push_back(static_cast<std::byte>(code));
    const auto* p = reinterpret_cast<const std::byte*>(message.data());
    payload.insert(payload.end(), p, p + message.size());
    reply(client, Status::kError, payload);
  }

  // Answers every client parked on `key`; resumeAnswered() then sends the replies.
  void wakeWaiters(const std::string& key) {
    const Bytes& value = values_.at(key);
    for (auto& [id, client] : clients_) {
      if (!client.waitingKey || *client.waitingKey != key) continue;
      client.waitingKey.reset();
      reply(client, Status::kOk, value);
      answered_.push_back(id);
    }
  }

  void expireWaiters() {
    const auto now = store::Clock::now();
    for (auto& [id, client] : clients_) {
      if (!client.waitingKey || client.waitDeadline > now) continue;
      client.waitingKey.reset();
      reply(client, Status::kTimeout, {});
      answered_.push_back(id);
    }
  }

  // Closes connections that did not prove the secret in time.
  void expireProofs() {
    const auto now = store::Clock::now();
    std::vector<uint64_t> late;
    for (const auto& [id, client] : clients_) {
      if (!client.authenticated && client.proofDeadline <= now) late.push_back(id);
    }
    for (uint64_t id : late) {
      log::warn("{}: closing client {}: no proof of the secret within {} s", name(),
                clients_.at(id).peer, kProofTimeout.count());
      close(id);
    }
  }

  // After parked GETs are answered: send, and handle requests that arrived meanwhile (which may
  // answer more parked GETs). Not done inside wakeWaiters(), which runs while a request of
  // another client is being handled.
  void resumeAnswered() {
    while (!answered_.empty()) {
      const uint64_t id = answered_.back();
      answered_.pop_back();
      auto it = clients_.find(id);
      if (it != clients_.end()) resume(id, it->second);
    }
  }

  void resume(uint64_t id, Client& client) {
    try {
      processInput(client);
      if (!readSealedAhead(client)) {
        close(id);
        return;
      }
      flush(client);
    } catch (const ProtocolViolation& v) {
      log::warn("{}: closing client {}: {}", name(), client.peer, v.reason);
      close(id);
    } catch (const Error& e) {
      log::warn("{}: closing client {}: {}", name(), client.peer, e.what());
      close(id);
    }
  }

  static void uncount(std::unordered_map<std::string, size_t>& counts, const std::string& host) {
    auto it = counts.find(host);
    if (it != counts.end() && --it->second == 0) counts.erase(it);
  }

  void evictOldestPending(const std::string& host) {
    for (auto& [id, client] : clients_) {  // ordered by id: the oldest first
      if (client.authenticated || client.peerHost != host) continue;
      log::warn("{}: closing client {}: {} connections from {} have not proven the secret yet",
                name(), client.peer, kMaxPendingPerHost, host);
      close(id);
      return;
    }
  }

  void close(uint64_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    uncount(it->second.authenticated ? connectionsFrom_ : pendingFrom_, it->second.peerHost);
    clients_.erase(it);
  }

  const std::string host_;
  const std::string secret_;
  const TcpStoreQuotas quotas_;
  const bool sealed_;
  net::Fd listener_;
  uint16_t port_ = 0;
  net::Fd wake_;
  // Owned by the server thread once it runs.
  std::map<uint64_t, Client> clients_;
  uint64_t nextId_ = 0;
  std::vector<uint64_t> answered_;
  std::unordered_map<std::string, Bytes> values_;
  size_t storedBytes_ = 0;                                   // keys and values in values_
  std::unordered_map<std::string, size_t> connectionsFrom_;  // authenticated, per peerHost
  std::unordered_map<std::string, size_t> pendingFrom_;      // not yet, per peerHost
  std::chrono::milliseconds acceptPause_{0};                 // 0 while accepting normally
  store::Clock::time_point acceptPausedUntil_{};
  std::atomic<uint64_t> acceptFailures_{0};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(Options options) {
  if (options.host.empty()) throw InvalidArgument("TcpStoreServer::start: host must not be empty");
  if (options.secret.empty() && !net::isLoopback(options.host)) {
    throw InvalidArgument(fmt::format(
        "TcpStoreServer::start: a store on {} (not loopback) needs a job secret: without one any "
        "host that reaches it could read and write the job's keys (set RINGLET_JOB_SECRET or "
        "RINGLET_JOB_SECRET_FILE, or use ringlet-run)",
        options.host));
  }
  if (options.sealed && options.secret.empty()) {
    throw InvalidArgument(
        "TcpStoreServer::start: sealed connections (RINGLET_SOCKET_ENCRYPT=1) need a job secret "
        "to derive their keys from (set RINGLET_JOB_SECRET or RINGLET_JOB_SECRET_FILE, or use "
        "ringlet-run)");
  }
  if (options.quotas.maxKeys == 0 || options.quotas.maxBytes == 0 ||
      options.quotas.maxConnectionsPerHost == 0) {
    throw InvalidArgument("TcpStoreServer::start: every quota must be at least 1");
  }
  return std::make_unique<TcpStoreServerImpl>(std::move(options));
}

uint64_t store::acceptFailures(const TcpStoreServer& server) {
  const auto* impl = dynamic_cast<const TcpStoreServerImpl*>(&server);
  return impl == nullptr ? 0 : impl->acceptFailures();
}

}  // namespace ringlet
