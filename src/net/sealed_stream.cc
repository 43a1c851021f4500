#include "src/net/sealed_stream.h"

#include <endian.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "ringlet/error.h"

namespace ringlet::net {

namespace {

// The record's length, little-endian.
void put32(uint8_t* p, uint32_t v) {
  v = htole32(v);
  std::memcpy(p, &v, 4);
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return le32toh(v);
}

constexpr size_t kNonceBytes = 12;
constexpr size_t kRecordRoom = SealedStream::kMaxRecordBytes + SealedStream::kOverheadBytes;
// Room to read into: several records a read.
constexpr size_t kInBytes = 4 * kRecordRoom;

std::array<uint8_t, kNonceBytes> nonceOf(uint64_t counter) {
  std::array<uint8_t, kNonceBytes> nonce{};
  const uint64_t le = htole64(counter);
  std::memcpy(nonce.data() + 4, &le, sizeof le);
  return nonce;
}

EVP_CIPHER_CTX* newContext(const SealKey& key, bool seal) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) throw IoError("ringlet could not make an AES-256-GCM context");
  const int ok = seal ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr)
                      : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  if (ok != 1) {
    EVP_CIPHER_CTX_free(ctx);
    throw IoError("ringlet could not set up AES-256-GCM");
  }
  return ctx;
}

[[noreturn]] void cipherFailed(const char* what) {
  throw IoError(std::string("AES-256-GCM failed to ") + what);
}

}  // namespace

SealedStream::SealedStream(int fd, const SealKeys& keys)
    : fd_(fd),
      out_(std::make_unique_for_overwrite<uint8_t[]>(kMaxPendingBytes + kRecordRoom)),
      in_(std::make_unique_for_overwrite<uint8_t[]>(kInBytes)) {
  sealCtx_ = newContext(keys.send, true);
  try {
    openCtx_ = newContext(keys.recv, false);
  } catch (...) {
    EVP_CIPHER_CTX_free(sealCtx_);
    throw;
  }
}

SealedStream::~SealedStream() {
  EVP_CIPHER_CTX_free(sealCtx_);
  EVP_CIPHER_CTX_free(openCtx_);
}

// ---- send side ----

void SealedStream::sealRecord(const iovec* iov, size_t count, size_t& index, size_t& offset,
                              size_t bytes) {
  if (outStart_ == outEnd_) outStart_ = outEnd_ = 0;
  if (outEnd_ + bytes + kOverheadBytes > kMaxPendingBytes + kRecordRoom) {
    std::memmove(out_.get(), out_.get() + outStart_, outEnd_ - outStart_);
    outEnd_ -= outStart_;
    outStart_ = 0;
  }
  uint8_t* record = out_.get() + outEnd_;
  put32(record, static_cast<uint32_t>(bytes));
  const auto nonce = nonceOf(sendCounter_);
  int length = 0;
  if (EVP_EncryptInit_ex(sealCtx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_EncryptUpdate(sealCtx_, nullptr, &length, record, kLengthBytes) != 1) {
    cipherFailed("start a record");
  }
  uint8_t* cipher = record + kLengthBytes;
  size_t left = bytes;
  while (left > 0 && index < count) {
    const size_t take = std::min(left, iov[index].iov_len - offset);
    if (take > 0) {
      const auto* source = static_cast<const uint8_t*>(iov[index].iov_base) + offset;
      if (EVP_EncryptUpdate(sealCtx_, cipher, &length, source, static_cast<int>(take)) != 1) {
        cipherFailed("seal");
      }
      cipher += length;
      offset += take;
      left -= take;
    }
    if (offset == iov[index].iov_len) {
      ++index;
      offset = 0;
    }
  }
  if (EVP_EncryptFinal_ex(sealCtx_, cipher, &length) != 1 ||
      EVP_CIPHER_CTX_ctrl(sealCtx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          record + kLengthBytes + bytes) != 1) {
    cipherFailed("finish a record");
  }
  outEnd_ += bytes + kOverheadBytes;
  ++sendCounter_;
}

int SealedStream::flushPending() {
  while (outStart_ < outEnd_) {
    const ssize_t n =
        ::send(fd_, out_.get() + outStart_, outEnd_ - outStart_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      outStart_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else {
      return n < 0 ? errno : EPIPE;
    }
  }
  outStart_ = outEnd_ = 0;
  return 0;
}

ssize_t SealedStream::sendv(const iovec* iov, size_t count) {
  if (const int error = flushPending(); error != 0) {
    errno = error;
    return -1;
  }
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += iov[i].iov_len;
  if (total == 0) return 0;
  size_t taken = 0;
  size_t index = 0;
  size_t offset = 0;
  while (taken < total && pendingBytes() < kMaxPendingBytes) {
    const size_t bytes = std::min(total - taken, kMaxRecordBytes);
    sealRecord(iov, count, index, offset, bytes);
    taken += bytes;
  }
  // An error here shows at the next call (the bytes taken are sealed: they count as sent).
  const int error = flushPending();
  if (taken == 0) {
    errno = error != 0 ? error : EAGAIN;
    return -1;
  }
  return static_cast<ssize_t>(taken);
}

// ---- receive side ----

size_t SealedStream::wholeRecordBytes() {
  const size_t have = inEnd_ - inStart_;
  if (have < kLengthBytes) return 0;
  const uint32_t length = get32(in_.get() + inStart_);
  if (length == 0 || length > kMaxRecordBytes) {
    failed_ = true;  // not a record this stream sends: corrupt or forged
    return 0;
  }
  const size_t whole = length + kOverheadBytes;
  return have >= whole ? whole : 0;
}

size_t SealedStream::readyBytes() const {
  size_t ready = plainEnd_ - plainStart_;
  const size_t have = inEnd_ - inStart_;
  if (have >= kLengthBytes) {
    const uint32_t length = get32(in_.get() + inStart_);
    if (length > 0 && length <= kMaxRecordBytes && have >= length + kOverheadBytes) {
      ready += length;
    }
  }
  return ready;
}

bool SealedStream::openRecord(uint8_t* dst, size_t plainBytes) {
  const uint8_t* record = in_.get() + inStart_;
  const auto nonce = nonceOf(recvCounter_);
  int length = 0;
  if (EVP_DecryptInit_ex(openCtx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_DecryptUpdate(openCtx_, nullptr, &length, record, kLengthBytes) != 1 ||
      EVP_DecryptUpdate(openCtx_, dst, &length, record + kLengthBytes,
                        static_cast<int>(plainBytes)) != 1 ||
      EVP_CIPHER_CTX_ctrl(openCtx_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          const_cast<uint8_t*>(record + kLengthBytes + plainBytes)) != 1) {
    return false;
  }
  if (EVP_DecryptFinal_ex(openCtx_, dst + length, &length) != 1) return false;
  inStart_ += plainBytes + kOverheadBytes;
  if (inStart_ == inEnd_) inStart_ = inEnd_ = 0;
  ++recvCounter_;
  return true;
}

ssize_t SealedStream::readSocket() {
  if (inStart_ > 0) {
    // What is left is less than one whole record (recv() opens those first).
    std::memmove(in_.get(), in_.get() + inStart_, inEnd_ - inStart_);
    inEnd_ -= inStart_;
    inStart_ = 0;
  }
  while (true) {
    const ssize_t n = ::recv(fd_, in_.get() + inEnd_, kInBytes - inEnd_, MSG_DONTWAIT);
    if (n > 0) inEnd_ += static_cast<size_t>(n);
    if (n >= 0 || errno != EINTR) return n;
  }
}

ssize_t SealedStream::recv(void* dst, size_t bytes) {
  if (failed_) {
    errno = EBADMSG;
    return -1;
  }
  if (readError_ != 0) {
    errno = std::exchange(readError_, 0);
    return -1;
  }
  auto* out = static_cast<uint8_t*>(dst);
  size_t given = 0;
  while (given < bytes) {
    if (plainStart_ < plainEnd_) {
      const size_t take = std::min(bytes - given, plainEnd_ - plainStart_);
      std::memcpy(out + given, plain_.get() + plainStart_, take);
      plainStart_ += take;
      given += take;
      continue;
    }
    const size_t whole = wholeRecordBytes();
    if (failed_) break;
    if (whole > 0) {
      const size_t plainBytes = whole - kOverheadBytes;
      if (bytes - given >= plainBytes) {
        // Straight into the caller's buffer; on a failed tag what it holds is not used (the
        // link fails).
        if (!openRecord(out + given, plainBytes)) {
          failed_ = true;
          break;
        }
        given += plainBytes;
      } else {
        if (!plain_) plain_ = std::make_unique_for_overwrite<uint8_t[]>(kMaxRecordBytes);
        if (!openRecord(plain_.get(), plainBytes)) {
          failed_ = true;
          break;
        }
        plainStart_ = 0;
        plainEnd_ = plainBytes;
      }
      continue;
    }
    if (ended_) break;
    const ssize_t n = readSocket();
    if (n > 0) continue;
    if (n == 0) {
      ended_ = true;  // a record cut off by the end is dropped with it
      break;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && given > 0) readError_ = errno;
    if (given > 0) break;
    return -1;
  }
  if (given > 0) return static_cast<ssize_t>(given);
  if (failed_) {
    errno = EBADMSG;
    return -1;
  }
  return 0;  // the peer's end (a zero-byte request also comes here, as recv() answers it)
}

void readFull(int fd, SealedStream* sealed, void* data, size_t bytes, Deadline deadline,
              std::string_view what) {
  auto* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = recvOn(fd, sealed, p + done, bytes - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      throw IoError(
          fmt::format("{} closed the connection ({} of {} bytes read)", what, done, bytes));
    }
    if (errno == EINTR) continue;
    if (errno == EBADMSG) {
      throw IoError(fmt::format(
          "{} sent bytes that fail authentication: changed on the way, or not sent by a holder "
          "of the job secret (the connection is sealed, RINGLET_SOCKET_ENCRYPT=1)",
          what));
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw IoError(fmt::format("reading from {} failed: {}", what, errorText(errno)));
    }
    if (!waitFor(fd, POLLIN, deadline)) {
      throw TimeoutError(
          fmt::format("timed out reading {} bytes from {} ({} read)", bytes, what, done));
    }
  }
}

void writeFull(int fd, SealedStream* sealed, const void* data, size_t bytes, Deadline deadline,
               std::string_view what) {
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  auto pending = [&] { return sealed == nullptr ? size_t{0} : sealed->pendingBytes(); };
  auto waitWritable = [&] {
    if (!waitFor(fd, POLLOUT, deadline)) {
      throw TimeoutError(fmt::format("timed out writing {} bytes to {} ({} written{})", bytes, what,
                                     done - std::min(done, pending()),
                                     sealed == nullptr ? "" : ", sealed"));
    }
  };
  auto failed = [&](int error) {
    return IoError(fmt::format("writing to {} failed: {}", what, errorText(error)));
  };
  while (done < bytes) {
    iovec iov{const_cast<char*>(p + done), bytes - done};
    const ssize_t n = sendOn(fd, sealed, &iov, 1);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw failed(errno);
    waitWritable();
  }
  while (pending() > 0) {
    if (const int error = sealed->flushPending(); error != 0) throw failed(error);
    if (pending() > 0) waitWritable();
  }
}

}  // namespace ringlet::net
