#pragma once
// One TCP connection's bytes sealed in both directions (RINGLET_SOCKET_ENCRYPT=1): AES-256-GCM
// records under keys that the handshake derives from the job secret and both ends' fresh nonces
// (a key per direction per connection), so that an attacker on the path between two hosts can
// neither read a link's data nor change, drop, reorder or replay any of it unnoticed.
//
// Record (every integer little-endian):   length u32 | ciphertext[length] | tag[16]
//   length      the plaintext's bytes, 1..kMaxRecordBytes; also the record's associated data
//   nonce       4 zero bytes | the record's number in its direction, u64 (never sent: both ends
//               count), so a record replayed, dropped or moved fails its tag
//
// The stream sits under TcpLink's frames (a frame may span records and a record frames), and
// under the TCP store's requests and replies once the connection has proven the secret. Both
// calls never block and answer as the system calls they stand for do (sendmsg and recv with
// MSG_DONTWAIT): the bytes taken or given, 0 for the peer's end, or -1 with errno (EAGAIN for
// nothing now; EBADMSG for a record that fails authentication, and for every call after one).
//
// Send side: sendv() seals what it takes into its own buffer at once (the caller's memory is free
// when it returns) and writes what the socket takes; up to kMaxPendingBytes of sealed bytes may
// wait there, moved on by later calls and by flushPending(). Receive side: recv() reads the
// socket in chunks, opens whole records straight into the caller's buffer where they fit (else
// into its own, and gives out from there first). It returns less than asked only once it holds
// nothing more to give and the socket had nothing more: a wait that polls the socket after such
// a call does not sleep on bytes already here.
//
// Threads: the send side and the receive side may be used by two threads at once, each by one.

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "src/net/socket.h"

// OpenSSL's cipher context, as <openssl/types.h> declares it (its headers stay out of ours).
typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace ringlet::net {

inline constexpr size_t kSealKeyBytes = 32;
using SealKey = std::array<uint8_t, kSealKeyBytes>;

// The keys of one connection, as one end sees them.
struct SealKeys {
  SealKey send{};
  SealKey recv{};
};

class SealedStream {
 public:
  static constexpr size_t kMaxRecordBytes = 64 << 10;  // plaintext per record
  static constexpr size_t kLengthBytes = 4;
  static constexpr size_t kTagBytes = 16;
  static constexpr size_t kOverheadBytes = kLengthBytes + kTagBytes;
  // Sealed bytes that may wait unsent before sendv() takes nothing more.
  static constexpr size_t kMaxPendingBytes = size_t{1} << 20;

  // `fd` stays owned by the caller and outlives this.
  SealedStream(int fd, const SealKeys& keys);
  ~SealedStream();
  SealedStream(const SealedStream&) = delete;
  SealedStream& operator=(const SealedStream&) = delete;

  // As sendmsg(MSG_NOSIGNAL | MSG_DONTWAIT) of `count` buffers: the bytes taken (sealed; sent or
  // waiting), or -1 with errno (EAGAIN: the pending bytes are at their limit and the socket
  // takes none now).
  ssize_t sendv(const iovec* iov, size_t count);
  ssize_t send(const void* data, size_t bytes) {
    iovec iov{const_cast<void*>(data), bytes};
    return sendv(&iov, 1);
  }
  // Writes pending sealed bytes until the socket would block: 0, or the errno of a failed write.
  int flushPending();
  // Sealed bytes not yet written to the socket.
  size_t pendingBytes() const { return outEnd_ - outStart_; }

  // As recv(MSG_DONTWAIT) of at most `bytes` into `dst`.
  ssize_t recv(void* dst, size_t bytes);
  // Bytes here that recv() would give or open without reading the socket (opened plaintext, and
  // received records not yet opened, whole or not).
  size_t bufferedBytes() const { return (plainEnd_ - plainStart_) + (inEnd_ - inStart_); }
  // Of those, the plaintext recv() could give now without reading the socket: opened, or in a
  // whole record. 0 after a recv() that gave less than asked.
  size_t readyBytes() const;
  // Whether a record failed authentication (every recv() fails from then on).
  bool failed() const { return failed_; }
  // Records sealed and opened (tests).
  uint64_t recordsSent() const { return sendCounter_; }
  uint64_t recordsOpened() const { return recvCounter_; }

 private:
  // Seals the next `bytes` bytes of `iov` from (index, offset) onwards as one record onto out_.
  void sealRecord(const iovec* iov, size_t count, size_t& index, size_t& offset, size_t bytes);
  // Opens the record at the head of in_ (whole) into `dst`; false when its tag fails.
  bool openRecord(uint8_t* dst, size_t plainBytes);
  // The length of the whole record at the head of in_, or 0 when it has not wholly arrived.
  // Sets failed_ for a length out of range.
  size_t wholeRecordBytes();
  // One read of the socket onto in_: bytes read, 0 for the peer's end, -1 with errno.
  ssize_t readSocket();

  const int fd_;
  EVP_CIPHER_CTX* sealCtx_ = nullptr;
  EVP_CIPHER_CTX* openCtx_ = nullptr;
  uint64_t sendCounter_ = 0;
  uint64_t recvCounter_ = 0;

  // Sealed records; [outStart_, outEnd_) not yet written. Room for kMaxPendingBytes and one
  // more record.
  std::unique_ptr<uint8_t[]> out_;
  size_t outStart_ = 0;
  size_t outEnd_ = 0;

  // Read from the socket; [inStart_, inEnd_) not yet opened. Room for several records.
  std::unique_ptr<uint8_t[]> in_;
  size_t inStart_ = 0;
  size_t inEnd_ = 0;
  std::unique_ptr<uint8_t[]> plain_;  // an opened record that did not fit the caller's buffer
  size_t plainStart_ = 0;
  size_t plainEnd_ = 0;
  bool failed_ = false;  // a record failed authentication: every later recv() fails too
  bool ended_ = false;   // the socket returned its end
  int readError_ = 0;    // a read failed after recv() had given bytes: the next call says so
};

// A stream's system call, or its sealed stand-in where `sealed` is not null: sendmsg with
// MSG_NOSIGNAL | MSG_DONTWAIT of `count` buffers.
inline ssize_t sendOn(int fd, SealedStream* sealed, const iovec* iov, size_t count) {
  if (sealed != nullptr) return sealed->sendv(iov, count);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = count;
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}
// The same for recv with MSG_DONTWAIT.
inline ssize_t recvOn(int fd, SealedStream* sealed, void* dst, size_t bytes) {
  return sealed != nullptr ? sealed->recv(dst, bytes) : ::recv(fd, dst, bytes, MSG_DONTWAIT);
}

// readFull and writeFull (socket.h, which call these with no stream) through `sealed` where it
// is not null: IoError for bytes that fail authentication too. writeFull returns once every byte
// is sealed and written to the socket.
void readFull(int fd, SealedStream* sealed, void* data, size_t bytes, Deadline deadline,
              std::string_view what);
void writeFull(int fd, SealedStream* sealed, const void* data, size_t bytes, Deadline deadline,
               std::string_view what);

}  // namespace ringlet::net
