#include "src/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <vector>

#include "ringlet/error.h"
#include "src/net/socket.h"

namespace ringlet::auth {
namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr size_t kMaxSecretFileBytes = 4096;

// The secret in RINGLET_JOB_SECRET_FILE: hex text (surrounding white space ignored) in a regular
// file that only its owner, this user, can read or write. The secret's value is never put in a
// message.
std::string readSecretFile(const std::string& path) {
  const std::string what = fmt::format("RINGLET_JOB_SECRET_FILE={}", path);
  // O_NONBLOCK: a FIFO put there does not block the open; O_NOFOLLOW: no symlink games.
  net::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    throw InvalidArgument(fmt::format("{}: cannot open: {}", what, net::errorText(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw InvalidArgument(fmt::format("{}: fstat failed: {}", what, net::errorText(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw InvalidArgument(fmt::format("{} is not a regular file", what));
  if (st.st_uid != ::geteuid()) {
    throw InvalidArgument(fmt::format("{} belongs to uid {}, not to this user (uid {})", what,
                                      st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    throw InvalidArgument(
        fmt::format("{} has mode {:04o}: other users could read the secret (chmod 600 it)", what,
                    st.st_mode & 07777));
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretFileBytes)) {
    throw InvalidArgument(fmt::format("{} has {} bytes; a secret file holds at most {}", what,
                                      st.st_size, kMaxSecretFileBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw InvalidArgument(fmt::format("{}: short read", what));
    done += static_cast<size_t>(n);
  }
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  text = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  return decodeHexSecret(text, what);
}

}  // namespace

std::span<const uint8_t> bytesOf(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

Mac hmac(std::string_view secret, std::string_view label,
         std::initializer_list<std::span<const uint8_t>> parts) {
  std::vector<uint8_t> message;
  auto append = [&](std::span<const uint8_t> bytes) {
    for (int i = 0; i < 8; ++i)
      message.push_back(static_cast<uint8_t>(uint64_t{bytes.size()} >> (8 * i)));
    message.insert(message.end(), bytes.begin(), bytes.end());
  };
  append(bytesOf(label));
  for (auto part : parts) append(part);
  static const uint8_t kEmptyKey = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmptyKey) : secret.data();
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), message.data(), message.size(),
           mac.data(), &length) == nullptr ||
      length != kMacBytes) {
    throw IoError(fmt::format("HMAC-SHA256 failed ({})", label));
  }
  return mac;
}

bool macEquals(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Nonce freshNonce(std::string_view what) {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    throw IoError(fmt::format("RAND_bytes failed to make a nonce for {}", what));
  }
  return nonce;
}

std::string decodeHexSecret(std::string_view hex, std::string_view what) {
  if (hex.size() % 2 != 0) {
    throw InvalidArgument(
        fmt::format("{} must be hex with an even number of digits (it has {})", what, hex.size()));
  }
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hexDigit(hex[i]);
    const int lo = hexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      throw InvalidArgument(fmt::format("{} must be hex: character {} of {} is not a hex digit",
                                        what, hi < 0 ? i : i + 1, hex.size()));
    }
    out += static_cast<char>(hi * 16 + lo);
  }
  if (out.size() < kMinSecretBytes) {
    throw InvalidArgument(
        fmt::format("{} is {} bytes ({} hex digits); a job secret needs at least "
                    "{} bytes ({} hex digits)",
                    what, out.size(), hex.size(), kMinSecretBytes, 2 * kMinSecretBytes));
  }
  return out;
}

std::string readJobSecret(const std::string& hex, const std::string& file) {
  if (!hex.empty() && !file.empty()) {
    throw InvalidArgument(
        "RINGLET_JOB_SECRET and RINGLET_JOB_SECRET_FILE are both set; set one of them");
  }
  if (!hex.empty()) return decodeHexSecret(hex, "RINGLET_JOB_SECRET");
  if (!file.empty()) return readSecretFile(file);
  return "";
}

std::string encodeHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

}  // namespace ringlet::auth
