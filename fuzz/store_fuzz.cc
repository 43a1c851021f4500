// Fuzz target: the TCP store server fed hostile requests by one client.
//
// One server (with a job secret) serves the inputs one connection each, and is replaced every
// kInputsPerServer inputs so that the keys earlier inputs left behind stay few. Per input:
// connect, read the greeting, prove the secret (openSession: the only part that knows how a
// connection starts, so a change in the protocol's opening touches one function), send the rest
// of the input, close the sending side, and read the answers until the server closes. Byte 0
// bit 0 set: send the input raw instead of proving the secret (the server's check of the opening
// is fuzzed too); bit 1 set: a sealed session (RINGLET_SOCKET_ENCRYPT=1), the rest of the input
// sealed in good records, so that the requests reach the server's parser through its sealed
// stream, pipelined (the server drains what its stream opened ahead). A crash or an overrun in the
// server is a finding, and so is a server that stops accepting, fails its own proof, does not greet
// within kCloseBudget, or does not close the connection within kCloseBudget of the client's end of
// input (it must read the EOF and drop the client, parked GET or not).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fuzz/fuzz_support.h"
#include "ringlet/error.h"
#include "ringlet/store.h"
#include "src/auth.h"
#include "src/net/sealed_stream.h"
#include "src/store/tcp_store_protocol.h"

using namespace ringlet;
namespace wire = ringlet::store::wire;

namespace {

constexpr int kInputsPerServer = 1000;
// Far longer than the server needs, and shorter than the fuzz runs' -timeout of 30 s.
constexpr auto kCloseBudget = std::chrono::seconds(20);
constexpr std::string_view kSecret = "fuzz-job-secret-of-32-bytes-long";

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "store fuzz: %s\n", what);
  std::abort();
}

net::Fd connectToServer(const TcpStoreServer& server) {
  net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Each connection from another loopback address (127.1.x.y): the client closes first (its
  // EOF ends the session), so its side waits in TIME_WAIT for a minute, and thousands of inputs
  // a second would otherwise run out of ports towards the one server port.
  static uint32_t next = 0;
  const uint32_t n = next++ % 65536;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl((127u << 24) | (1u << 16) | n);
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    finding("cannot bind a client socket to a loopback address");
  }
  // libFuzzer's timer (SIGALRM) interrupts blocking calls now and then: an interrupted connect
  // goes on in the background, and is waited for.
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int error = errno;
    if (error == EINTR) {
      pollfd p{fd.get(), POLLOUT, 0};
      while (::poll(&p, 1, static_cast<int>(kCloseBudget.count() * 1000)) < 0 && errno == EINTR) {
      }
      socklen_t length = sizeof(error);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    }
    if (error != 0) {
      std::fprintf(stderr, "store fuzz: connect: %s\n", std::strerror(error));
      finding("the server stopped accepting");
    }
  }
  return fd;
}

// Reads exactly `bytes` (blocking, bounded by kCloseBudget); false if the server closed first.
bool readExactly(int fd, uint8_t* out, size_t bytes) {
  const auto deadline = std::chrono::steady_clock::now() + kCloseBudget;
  size_t got = 0;
  while (got < bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) finding("the server did not greet or answer in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;  // libFuzzer's timer
    if (ready <= 0) finding("the server did not greet or answer in time");
    const ssize_t n = ::recv(fd, out + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// What a client does first on a new connection: reads the greeting, proves the secret over the
// server's nonce, and checks the server's answer (so that it proves the secret back). Returns
// the keys of a sealed session.
net::SealKeys openSession(int fd, bool sealed) {
  uint8_t greeting[wire::kGreetingBytes];
  if (!readExactly(fd, greeting, sizeof(greeting))) finding("the server closed before greeting");
  if (greeting[sizeof(wire::kHello)] != static_cast<uint8_t>(wire::GreetStatus::kOk)) {
    finding("the server refused a fresh connection");
  }
  const std::span<const uint8_t> serverNonce(greeting + sizeof(wire::kHello) + 3,
                                             wire::kNonceBytes);
  const auth::Nonce clientNonce{};  // fixed: only the server's nonce must be fresh here
  const auth::Mac proof = auth::hmac(
      kSecret, sealed ? wire::kClientSealedLabel : wire::kClientLabel, {serverNonce, clientNonce});
  uint8_t out[wire::kProofBytes];
  std::memcpy(out, wire::kHello, sizeof(wire::kHello));
  std::memcpy(out + sizeof(wire::kHello), clientNonce.data(), clientNonce.size());
  std::memcpy(out + sizeof(wire::kHello) + wire::kNonceBytes, proof.data(), proof.size());
  ssize_t sent = -1;
  do {
    sent = ::send(fd, out, sizeof(out), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof(out))) {
    finding("the server closed before the proof");
  }
  uint8_t answer[wire::kAnswerBytes];
  if (!readExactly(fd, answer, sizeof(answer))) finding("the server closed instead of answering");
  if (answer[0] != static_cast<uint8_t>(wire::GreetStatus::kOk)) {
    finding("the server refused a correct proof");
  }
  const auth::Mac expected = auth::hmac(
      kSecret, sealed ? wire::kServerSealedLabel : wire::kServerLabel, {clientNonce, serverNonce});
  if (!auth::macEquals({answer + 3, wire::kMacBytes}, expected)) {
    finding("the server's proof of the secret is wrong");
  }
  return wire::sealKeys(kSecret, serverNonce, clientNonce, /*server=*/false);
}

// Sends `request` while reading (and dropping) what the server sends back, then closes the
// sending side and reads until the server closes. Through `sealed` where it is not null.
void exchange(int fd, net::SealedStream* sealed, std::span<const uint8_t> request) {
  const auto deadline = std::chrono::steady_clock::now() + kCloseBudget;
  size_t sent = 0;
  bool shut = false;
  uint8_t buffer[64 * 1024];
  while (true) {
    if (!shut && sent == request.size()) {
      // Sealed bytes still waiting go out first (unless the server closed).
      const bool waiting = sealed != nullptr && sealed->pendingBytes() > 0 &&
                           sealed->flushPending() == 0 && sealed->pendingBytes() > 0;
      if (!waiting) {
        ::shutdown(fd, SHUT_WR);
        shut = true;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) finding("the server kept the connection open after the client's EOF");
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = net::recvOn(fd, sealed, buffer, sizeof(buffer));
      if (n < 0 && errno == EBADMSG) finding("the server's sealed replies fail authentication");
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;  // the server closed
    }
    if (!shut && (p.revents & POLLOUT) && sent < request.size()) {
      iovec iov{const_cast<uint8_t*>(request.data() + sent), request.size() - sent};
      const ssize_t n = net::sendOn(fd, sealed, &iov, 1);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        sent = request.size();  // the server closed on a bad request
      }
    }
  }
}

std::unique_ptr<TcpStoreServer> gServer;

// Stops the server at exit, before OpenSSL cleans up (its exit handler was registered first): a
// server thread still running then would leave OpenSSL's per-thread state behind, which
// LeakSanitizer reports. (A static's destructor does not do: it ran too late here.)
void stopServer() { gServer.reset(); }

TcpStoreServer& server() {
  static int served = 0;
  if (!gServer) {
    // The server logs every client it closes: most inputs. Quiet, it serves twice as many.
    ::setenv("RINGLET_DEBUG", "NONE", /*overwrite=*/0);
    auth::freshNonce("the fuzz target");  // OpenSSL's exit handler first
    std::atexit(stopServer);
  }
  if (!gServer || ++served % kInputsPerServer == 0) {
    gServer.reset();
    TcpStoreServer::Options options;
    options.secret = std::string(kSecret);
    gServer = TcpStoreServer::start(options);
  }
  return *gServer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::InputReader in({data, size});
  const uint8_t mode = in.u8();
  const bool raw = (mode & 1) != 0;
  const bool sealed = !raw && (mode & 2) != 0;
  net::Fd fd = connectToServer(server());
  std::unique_ptr<net::SealedStream> stream;
  if (!raw) {
    const net::SealKeys keys = openSession(fd.get(), sealed);
    if (sealed) stream = std::make_unique<net::SealedStream>(fd.get(), keys);
  }
  const std::span<const uint8_t> request = in.rest();
  exchange(fd.get(), stream.get(), request);
  return 0;
}
