#pragma once
// Wire protocol of the TCP store. All integers little-endian.
//
//   connection start (client -> server): 8 bytes kHello ("RGLSTOR1": magic and version)
//   request:  u8 command | u32 keyBytes | u64 payloadBytes | key | payload
//     SET    payload = value (<= kMaxValueBytes)
//     GET    payload = u64 timeout in ms (the server parks the request until the key is set or
//            the timeout passes)
//     ADD    payload = i64 delta
//     CHECK  payload = empty
//   reply:    u8 status | u64 payloadBytes | payload
//     kOk       SET: empty; GET: the value; ADD: i64 new value; CHECK: u8 0/1
//     kTimeout  GET only: empty
//     kError    u8 ErrorCode | message text (e.g. add() on a value that is not a counter)
// Keys are 1..kMaxKeyBytes bytes. A request that breaks these rules (bad hello, unknown command,
// a length out of range) makes the server close that connection; requests on one connection
// are answered in order, one at a time.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringlet::store::wire {

inline constexpr char kHello[8] = {'R', 'G', 'L', 'S', 'T', 'O', 'R', '1'};
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

}  // namespace ringlet::store::wire
