#pragma once
// Helpers shared by the fuzz targets: a connected socket pair whose far end plays the hostile
// peer, and byte readers that never run past the input.

#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <utility>

#include "src/net/socket.h"

namespace ringlet::fuzz {

// Reads fields off the front of a fuzz input; past the end every read yields zeros.
class InputReader {
 public:
  explicit InputReader(std::span<const uint8_t> data) : data_(data) {}
  uint8_t u8() { return at_ < data_.size() ? data_[at_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  std::span<const uint8_t> rest() const { return data_.subspan(at_); }

 private:
  std::span<const uint8_t> data_;
  size_t at_ = 0;
};

// A connected AF_UNIX stream pair: `ours` goes to the code under test, `theirs` is the peer.
struct SocketPair {
  net::Fd ours;
  net::Fd theirs;
};

inline SocketPair makeSocketPair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  // Room for a whole fuzz input, so writing it never blocks.
  const int bytes = 1 << 20;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  return {net::Fd(fds[0]), net::Fd(fds[1])};
}

// Writes `bytes` from the peer's end (nonblocking; whatever does not fit is dropped) and, when
// `close` is set, ends the peer's side of the stream.
inline void peerSends(const SocketPair& pair, std::span<const uint8_t> bytes, bool close) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        ::send(pair.theirs.get(), bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (close) ::shutdown(pair.theirs.get(), SHUT_WR);
}

}  // namespace ringlet::fuzz
