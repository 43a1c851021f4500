// TCP store server: one thread, poll() over a wake-up eventfd, the listener and every client.
// Each client has an input buffer (bytes until a whole request is there) and an output buffer
// (reply bytes the socket did not take yet). A GET for a missing key parks the client as a waiter
// on that key until a SET/ADD creates it (reply kOk) or its deadline passes (reply kTimeout).
// A client that breaks the protocol is closed and logged; nobody else notices.

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ringlet/error.h"
#include "src/log.h"
#include "src/net/socket.h"
#include "src/store/store_common.h"
#include "src/store/tcp_store_protocol.h"

namespace ringlet {
namespace {

namespace wire = store::wire;
using wire::Command;
using wire::Status;

// A request the client broke the protocol with; closes that client.
struct ProtocolViolation {
  std::string reason;
};

struct Client {
  net::Fd fd;
  std::string peer;
  bool greeted = false;
  Bytes input;
  Bytes output;
  size_t outputSent = 0;
  // Set while a GET is parked: the key and when to give up.
  std::optional<std::string> waitingKey;
  store::Clock::time_point waitDeadline;
};

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  explicit TcpStoreServerImpl(TcpStoreServer::Options options)
      : host_(options.host), listener_(net::listenTcp(options.host, options.port)) {
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

 private:
  std::string name() const { return fmt::format("tcp store server {}:{}", host_, port_); }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    while (true) {
      fds.clear();
      ids.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (auto& [id, client] : clients_) {
        // A parked client sends nothing until answered; POLLRDHUP still tells if it goes away.
        short events = client.waitingKey ? POLLRDHUP : POLLIN;
        if (client.outputSent < client.output.size()) events |= POLLOUT;
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
      resumeAnswered();
    }
  }

  int pollTimeoutMs() const {
    std::optional<store::Clock::time_point> next;
    for (const auto& [id, client] : clients_) {
      if (client.waitingKey && (!next || client.waitDeadline < *next)) next = client.waitDeadline;
    }
    if (!next) return -1;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*next - store::Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
  }

  void acceptAll() {
    while (true) {
      net::Fd fd;
      try {
        fd = net::acceptTcp(listener_.get());
      } catch (const Error& e) {
        log::warn("{}: {}", name(), e.what());
        return;
      }
      if (!fd.valid()) return;
      Client client;
      try {
        client.peer = net::SocketAddress::remote(fd.get()).toString();
      } catch (const Error&) {
        client.peer = "unknown peer";
      }
      client.fd = std::move(fd);
      clients_.emplace(nextId_++, std::move(client));
    }
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
  bool readInput(Client& client) {
    std::byte chunk[64 * 1024];
    while (true) {
      const ssize_t n = ::recv(client.fd.get(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        client.input.insert(client.input.end(), chunk, chunk + n);
        if (static_cast<size_t>(n) < sizeof(chunk)) return true;
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      return false;
    }
  }

  void flush(Client& client) {
    while (client.outputSent < client.output.size()) {
      const ssize_t n = ::send(client.fd.get(), client.output.data() + client.outputSent,
                               client.output.size() - client.outputSent, MSG_NOSIGNAL);
      if (n > 0) {
        client.outputSent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      throw IoError(fmt::format("sending a reply failed: {}", net::errorText(errno)));
    }
    client.output.clear();
    client.outputSent = 0;
  }

  // Handles every whole request in the input buffer, stopping at a parked GET.
  void processInput(Client& client) {
    size_t offset = 0;
    const auto& in = client.input;
    if (!client.greeted) {
      if (in.size() < sizeof(wire::kHello)) return;
      if (std::memcmp(in.data(), wire::kHello, sizeof(wire::kHello)) != 0) {
        throw ProtocolViolation{"bad hello (not a ringlet store client, or another version)"};
      }
      client.greeted = true;
      offset = sizeof(wire::kHello);
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
        values_[key] = Bytes(payload.begin(), payload.end());
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
        const int64_t result = current + delta;
        values_[key] = store::counterBytes(result);
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
      flush(client);
    } catch (const ProtocolViolation& v) {
      log::warn("{}: closing client {}: {}", name(), client.peer, v.reason);
      close(id);
    } catch (const Error& e) {
      log::warn("{}: closing client {}: {}", name(), client.peer, e.what());
      close(id);
    }
  }

  void close(uint64_t id) { clients_.erase(id); }

  const std::string host_;
  net::Fd listener_;
  uint16_t port_ = 0;
  net::Fd wake_;
  // Owned by the server thread once it runs.
  std::map<uint64_t, Client> clients_;
  uint64_t nextId_ = 0;
  std::vector<uint64_t> answered_;
  std::unordered_map<std::string, Bytes> values_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(Options options) {
  if (options.host.empty()) throw InvalidArgument("TcpStoreServer::start: host must not be empty");
  return std::make_unique<TcpStoreServerImpl>(std::move(options));
}

}  // namespace ringlet
