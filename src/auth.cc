#include "src/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include <vector>

#include "ringlet/error.h"

namespace ringlet::auth {
namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
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

}  // namespace ringlet::auth
