#pragma once
// Small RAII and deadline helpers over POSIX sockets, shared by the TCP store and the TCP
// transport. Every blocking helper takes a deadline and says in its error what it waited for.

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace ringlet::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // Numeric or DNS host and a port. Throws InvalidArgument naming the host when it resolves to
  // nothing.
  static SocketAddress resolve(const std::string& host, uint16_t port);
  // Of a bound or connected socket.
  static SocketAddress local(int fd);
  static SocketAddress remote(int fd);
  uint16_t port() const;
  std::string host() const;      // "127.0.0.1" / "::1"
  std::string toString() const;  // "127.0.0.1:29500" / "[::1]:29500"
};

// Splits "host:port" or "[v6]:port". Throws InvalidArgument naming `what` on a malformed value.
std::pair<std::string, uint16_t> splitHostPort(std::string_view text, std::string_view what);

// A listening TCP socket bound to host:port (port 0: any free port), SO_REUSEADDR, nonblocking.
Fd listenTcp(const std::string& host, uint16_t port, int backlog = 128);

// A port of `host` that is free now and lies outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so that no connect() on this machine takes it as its local port
// before the program it is meant for binds it (a port from listenTcp(host, 0) is an ephemeral one:
// while a Python rank imports its libraries for seconds, any outgoing connection may take it).
// Falls back to any free port when the range leaves no room outside it.
uint16_t unusedPort(const std::string& host);

// Connects to host:port, retrying refused/unreachable attempts with backoff until the deadline.
// The socket comes back nonblocking with TCP_NODELAY. Throws TimeoutError naming the address.
// `betweenAttempts` (when set) runs after each pause between attempts; what it throws ends them.
Fd connectTcp(const std::string& host, uint16_t port, Deadline deadline, std::string_view what,
              const std::function<void()>& betweenAttempts = {});

// Accepts one pending connection (nonblocking listener); returns an invalid Fd if none is ready.
Fd acceptTcp(int listenFd);

void setNonBlocking(int fd);
void setNoDelay(int fd);
// Sets SO_SNDBUF/SO_RCVBUF once, large, as the kernel allows. Never called again to shrink.
void setLargeBuffers(int fd, int bytes = 4 << 20);

// Waits until fd is readable (POLLIN) or writable (POLLOUT); false at the deadline.
bool waitFor(int fd, short events, Deadline deadline);

// Reads exactly `bytes`; throws IoError on EOF or error, TimeoutError at the deadline. `what`
// describes the peer for messages ("store client 127.0.0.1:5555").
void readFull(int fd, void* data, size_t bytes, Deadline deadline, std::string_view what);
void writeFull(int fd, const void* data, size_t bytes, Deadline deadline, std::string_view what);

// Address of the interface named `ifname` (IPv4 preferred). Throws InvalidArgument naming it and
// listing the interfaces that exist.
std::string interfaceAddress(const std::string& ifname);
// The local address the kernel would use to reach `host` (no packet is sent).
std::string addressRoutingTo(const std::string& host);
// True for 127.0.0.0/8 and ::1.
bool isLoopback(const std::string& host);

// "Connection refused" etc. for errno values.
std::string errorText(int err);

}  // namespace ringlet::net
