#pragma once
// The job secret and the proofs made with it: HMAC-SHA256 over labelled, length-prefixed parts,
// fresh nonces, constant-time comparison. Shared by the TCP store's client handshake and the
// authenticated records every rank publishes (src/core). OpenSSL does the cryptography.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace ringlet::auth {

inline constexpr size_t kMacBytes = 32;    // HMAC-SHA256
inline constexpr size_t kNonceBytes = 32;  // per side and connection
using Mac = std::array<uint8_t, kMacBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

std::span<const uint8_t> bytesOf(std::string_view text);

// HMAC-SHA256 keyed with `secret` over `label` and each part, every one preceded by its length
// (8 bytes, little-endian), so no two different lists of parts give the same message. Throws
// IoError if OpenSSL fails.
Mac hmac(std::string_view secret, std::string_view label,
         std::initializer_list<std::span<const uint8_t>> parts);

// True when the two MACs are equal, in time that does not depend on where they differ
// (CRYPTO_memcmp).
bool macEquals(std::span<const uint8_t> a, std::span<const uint8_t> b);

// A fresh nonce from OpenSSL's generator. Throws IoError naming `what` if it fails.
Nonce freshNonce(std::string_view what);

// Raw bytes of a hex secret; throws InvalidArgument naming `what` (never the value) when the text
// is not an even number of hex digits or is shorter than kMinSecretBytes bytes.
inline constexpr size_t kMinSecretBytes = 16;
std::string decodeHexSecret(std::string_view hex, std::string_view what);

// The job secret's raw bytes from RINGLET_JOB_SECRET's hex text or from the file named by
// RINGLET_JOB_SECRET_FILE (hex, surrounding white space ignored; a regular file of this user with
// mode 0600, anything else refused by name), or empty when both are empty. Throws
// InvalidArgument when both are set or the value is malformed; the secret is never in a message.
std::string readJobSecret(const std::string& hex, const std::string& file);

// Lower-case hex text of `bytes` (the form RINGLET_JOB_SECRET takes).
std::string encodeHex(std::string_view bytes);

}  // namespace ringlet::auth
