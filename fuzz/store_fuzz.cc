// Fuzz target: the TCP store server fed hostile requests by one client.
//
// Per input, a fresh server (so an input's outcome does not depend on the ones before it):
// connect, open a session
// (openSession: the only part that knows how a connection starts, so a change in the protocol's
// opening touches one function), send the rest of the input, close the sending side, read the
// answers until the server closes or 50 ms pass. Byte 0 bit 0 set: send the input raw, without
// opening a session (the server's check of the opening is fuzzed too). A crash or an overrun in
// the server is a finding, and so is a server that does not accept the connection.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/store/tcp_store_protocol.h"

using namespace ringlet;

namespace {

net::Fd connectToServer(const TcpStoreServer& server) {
  net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::abort();  // the server stopped accepting
  }
  return fd;
}

// What a client sends first on a new connection.
std::vector<uint8_t> openSession() {
  return {std::begin(store::wire::kHello), std::end(store::wire::kHello)};
}

// Reads until EOF or the deadline; returns the bytes read.
size_t drain(int fd, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  size_t total = 0;
  uint8_t buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return total;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return total;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return total;
    total += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::InputReader in({data, size});
  const bool raw = (in.u8() & 1) != 0;
  std::vector<uint8_t> request = raw ? std::vector<uint8_t>{} : openSession();
  request.insert(request.end(), in.rest().begin(), in.rest().end());
  const std::unique_ptr<TcpStoreServer> server = TcpStoreServer::start({"127.0.0.1", 0});
  net::Fd fd = connectToServer(*server);
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;  // the server closed on a bad request, or its buffer is full
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd.get(), SHUT_WR);
  drain(fd.get(), std::chrono::milliseconds(50));
  return 0;
}
