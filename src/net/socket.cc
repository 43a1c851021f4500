#include "src/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "ringlet/error.h"
#include "src/net/sealed_stream.h"

namespace ringlet::net {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errorText(int err) {
  char buffer[256];
  return std::string(strerror_r(err, buffer, sizeof(buffer)));
}

SocketAddress SocketAddress::resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw InvalidArgument(
        fmt::format("cannot resolve host '{}': {}", host, rc != 0 ? gai_strerror(rc) : "none"));
  }
  SocketAddress address;
  // Prefer IPv4 when both exist: loopback jobs then agree on 127.0.0.1.
  const addrinfo* pick = result;
  for (const addrinfo* a = result; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  std::memcpy(&address.storage, pick->ai_addr, pick->ai_addrlen);
  address.length = pick->ai_addrlen;
  freeaddrinfo(result);
  return address;
}

SocketAddress SocketAddress::local(int fd) {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) {
    throw IoError(fmt::format("getsockname failed: {}", errorText(errno)));
  }
  return a;
}

SocketAddress SocketAddress::remote(int fd) {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) {
    throw IoError(fmt::format("getpeername failed: {}", errorText(errno)));
  }
  return a;
}

uint16_t SocketAddress::port() const {
  if (storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
}

std::string SocketAddress::host() const {
  char buffer[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buffer,
              sizeof(buffer));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buffer,
              sizeof(buffer));
  }
  return buffer;
}

std::string SocketAddress::toString() const {
  if (storage.ss_family == AF_INET6) return fmt::format("[{}]:{}", host(), port());
  return fmt::format("{}:{}", host(), port());
}

std::pair<std::string, uint16_t> splitHostPort(std::string_view text, std::string_view what) {
  auto fail = [&]() -> std::pair<std::string, uint16_t> {
    throw InvalidArgument(
        fmt::format("{}='{}' is not host:port (e.g. 127.0.0.1:29500)", what, text));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= text.size()) return fail();
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string_view portText = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec != std::errc() || ptr != portText.data() + portText.size() || port == 0 || port > 65535) {
    return fail();
  }
  return {std::string(host), static_cast<uint16_t>(port)};
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw IoError(fmt::format("fcntl(O_NONBLOCK) failed: {}", errorText(errno)));
  }
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void setLargeBuffers(int fd, int bytes) {
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

Fd listenTcp(const std::string& host, uint16_t port, int backlog) {
  SocketAddress address = SocketAddress::resolve(host, port);
  Fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw IoError(fmt::format("socket() failed: {}", errorText(errno)));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // Accepted sockets inherit buffer sizes set before listen().
  setLargeBuffers(fd.get());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address.storage), address.length) != 0) {
    throw IoError(
        fmt::format("cannot listen on {}: bind: {}", address.toString(), errorText(errno)));
  }
  if (::listen(fd.get(), backlog) != 0) {
    throw IoError(fmt::format("listen on {} failed: {}", address.toString(), errorText(errno)));
  }
  setNonBlocking(fd.get());
  return fd;
}

namespace {

// The ephemeral range connect() draws local ports from; Linux's default when unreadable.
std::pair<int, int> ephemeralPortRange() {
  std::pair<int, int> range{32768, 60999};
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "re")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && 0 < lo && lo <= hi && hi <= 65535) {
      range = {lo, hi};
    }
    std::fclose(f);
  }
  return range;
}

}  // namespace

uint16_t unusedPort(const std::string& host) {
  // Candidates: [20000, lo) and (hi, 65535], clear of the well-known services below 20000.
  constexpr int kFirst = 20000, kLast = 65535;
  const auto [lo, hi] = ephemeralPortRange();
  const int below = std::max(0, std::min(lo, kLast + 1) - kFirst);
  const int above = std::max(0, kLast - std::max(hi, kFirst - 1));
  if (below + above > 0) {
    std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<int> draw(0, below + above - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int k = draw(pick);
      const int port = k < below ? kFirst + k : hi + 1 + (k - below);
      try {
        Fd probe = listenTcp(host, static_cast<uint16_t>(port), 1);
        return static_cast<uint16_t>(port);
      } catch (const IoError&) {
        // In use: draw again.
      }
    }
  }
  Fd probe = listenTcp(host, 0, 1);
  return SocketAddress::local(probe.get()).port();
}

Fd connectTcp(const std::string& host, uint16_t port, Deadline deadline, std::string_view what,
              const std::function<void()>& betweenAttempts) {
  const SocketAddress address = SocketAddress::resolve(host, port);
  auto backoff = std::chrono::milliseconds(1);
  std::string lastError = "no attempt";
  while (true) {
    Fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw IoError(fmt::format("socket() failed: {}", errorText(errno)));
    setLargeBuffers(fd.get());
    setNonBlocking(fd.get());
    int rc =
        ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (waitFor(fd.get(), POLLOUT, deadline)) {
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) {
      setNoDelay(fd.get());
      return fd;
    }
    lastError = errorText(err);
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    if (betweenAttempts) betweenAttempts();
  }
  throw TimeoutError(
      fmt::format("could not connect to {} at {} before the deadline (last error: {})", what,
                  address.toString(), lastError));
}

Fd acceptTcp(int listenFd) {
  int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
      return Fd();
    }
    throw IoError(fmt::format("accept failed: {}", errorText(errno)));
  }
  setNoDelay(fd);
  return Fd(fd);
}

bool waitFor(int fd, short events, Deadline deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throw IoError(fmt::format("poll failed: {}", errorText(errno)));
    if (Clock::now() >= deadline) return false;
  }
}

void readFull(int fd, void* data, size_t bytes, Deadline deadline, std::string_view what) {
  readFull(fd, nullptr, data, bytes, deadline, what);
}

void writeFull(int fd, const void* data, size_t bytes, Deadline deadline, std::string_view what) {
  writeFull(fd, nullptr, data, bytes, deadline, what);
}

std::string interfaceAddress(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw IoError(fmt::format("getifaddrs failed: {}", errorText(errno)));
  std::string v4, v6;
  std::vector<std::string> names;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (std::find(names.begin(), names.end(), i->ifa_name) == names.end()) {
      names.push_back(i->ifa_name);
    }
    if (ifname != i->ifa_name) continue;
    char buffer[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buffer,
                sizeof(buffer));
      v4 = buffer;
    } else if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buffer,
                sizeof(buffer));
      v6 = buffer;
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  throw InvalidArgument(fmt::format("network interface '{}' has no address (interfaces: {})",
                                    ifname, fmt::join(names, ", ")));
}

std::string addressRoutingTo(const std::string& host) {
  SocketAddress target = SocketAddress::resolve(host, 9);
  Fd fd(::socket(target.storage.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&target.storage), target.length) != 0) {
    throw IoError(fmt::format("no route to {}: {}", host, errorText(errno)));
  }
  return SocketAddress::local(fd.get()).host();
}

bool isLoopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host == "localhost";
}

}  // namespace ringlet::net
