#pragma once
// Wire protocol of the TCP store. All integers little-endian.
//
// Connection start: a challenge-response in which each side proves it holds the job secret K,
// over fresh nonces from both sides, before any request is read.
//
//   server -> client  greeting: kHello (8: magic and version) | u8 GreetStatus | u16 textBytes |
//                     Ns (32 random bytes) | text (why the connection is refused, when it is)
//   client -> server  proof:    kHello | Nc (32 random bytes) | HMAC(K, "ringlet-store-client",
//                               Ns, Nc)
//   server -> client  answer:   u8 GreetStatus | u16 textBytes | HMAC(K, "ringlet-store-server",
//                               Nc, Ns) | text
// The server checks the client's proof with a constant-time compare and closes the connection
// (after a kRefused answer saying why) when it is wrong; the client checks the server's proof the
// same way, so neither talks to an impostor. Ns is fresh for every connection, so a recorded
// session replayed later fails at the proof. K is never sent. HMAC is auth::hmac (src/auth.h):
// each part length-prefixed. A server without a secret uses the empty key (loopback only).
//
// Sealed connections (TcpStoreServer::Options::sealed, TcpStoreClientOptions::sealed; ringlet
// sets both from RINGLET_SOCKET_ENCRYPT=1): both proofs take the labels kClientSealedLabel and
// kServerSealedLabel instead, so the choice is under the MACs (nobody on the path can talk a
// connection out of it). A sealing server refuses, by name, a client that does not seal; one that
// does not seal serves a sealing client sealed (the client's choice wins). After the
// server's answer every byte both ways travels in AES-256-GCM records (src/net/sealed_stream.h)
// under HMAC(K, kSealToServerLabel | kSealToClientLabel, Ns, Nc): fresh keys per connection.
//
//   request:  u8 command | u32 keyBytes | u64 payloadBytes | key | payload
//     SET    payload = value (<= kMaxValueBytes)
//     GET    payload = u64 timeout in ms (the server parks the request until the key is set or
//            the timeout passes)
//     ADD    payload = i64 delta
//     CHECK  payload = empty
//   reply:    u8 status | u64 payloadBytes | payload
//     kOk       SET: empty; GET: the value; ADD: i64 new value; CHECK: u8 0/1
//     kTimeout  GET only: empty
//     kError    u8 ErrorCode | message text (add() on a value that is not a counter, an add()
//               that would overflow, a quota of TcpStoreServer::Options::quotas reached)
// Keys are 1..kMaxKeyBytes bytes. A request that breaks these rules (bad hello, unknown command,
// a length out of range) makes the server close that connection; requests on one connection
// are answered in order, one at a time.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "src/auth.h"
#include "src/net/sealed_stream.h"

namespace ringlet::store::wire {

inline constexpr char kHello[8] = {'R', 'G', 'L', 'S', 'T', 'O', 'R', '2'};
inline constexpr std::string_view kClientLabel = "ringlet-store-client";
inline constexpr std::string_view kServerLabel = "ringlet-store-server";
inline constexpr std::string_view kClientSealedLabel = "ringlet-store-client-sealed";
inline constexpr std::string_view kServerSealedLabel = "ringlet-store-server-sealed";
inline constexpr std::string_view kSealToServerLabel = "ringlet-store-seal-to-server";
inline constexpr std::string_view kSealToClientLabel = "ringlet-store-seal-to-client";
enum class GreetStatus : uint8_t { kOk = 0, kRefused = 1 };
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kGreetingBytes = sizeof(kHello) + 1 + 2 + kNonceBytes;  // + text
inline constexpr size_t kProofBytes = sizeof(kHello) + kNonceBytes + kMacBytes;
inline constexpr size_t kAnswerBytes = 1 + 2 + kMacBytes;  // + text
// Longest refusal text.
inline constexpr size_t kMaxRefusalBytes = 1024;
inline constexpr size_t kRequestHeaderBytes = 1 + 4 + 8;
inline constexpr size_t kReplyHeaderBytes = 1 + 8;
// Longest error message a server sends or a client accepts.
inline constexpr size_t kMaxErrorBytes = 4096;

enum class Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

inline void putU32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline void putU64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline void putU16(std::byte* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline uint16_t getU16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<uint16_t>(p[0]) | static_cast<uint16_t>(p[1]) << 8);
}
inline uint32_t getU32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
inline uint64_t getU64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// A sealed connection's keys, as the server (`server`) or the client sees them.
inline net::SealKeys sealKeys(std::string_view secret, std::span<const uint8_t> serverNonce,
                              std::span<const uint8_t> clientNonce, bool server) {
  static_assert(auth::kMacBytes == net::kSealKeyBytes);
  const auth::Mac toServer = auth::hmac(secret, kSealToServerLabel, {serverNonce, clientNonce});
  const auth::Mac toClient = auth::hmac(secret, kSealToClientLabel, {serverNonce, clientNonce});
  net::SealKeys keys;
  std::memcpy(keys.send.data(), (server ? toClient : toServer).data(), net::kSealKeyBytes);
  std::memcpy(keys.recv.data(), (server ? toServer : toClient).data(), net::kSealKeyBytes);
  return keys;
}

}  // namespace ringlet::store::wire
