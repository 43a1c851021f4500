#pragma once
// The TCP transport's wire format. Every integer is little-endian.
//
// Handshake (once per connection, before any frame; the connector is the higher rank):
//
//   listener  -> connector  ListenerHello   magic u32 | version u16 | streams u8 | flags u8 |
//                                           listenerNonce[32]
//   connector -> listener   ConnectorHello  magic u32 | version u16 | jobIdBytes u16 |
//                                           fromRank i32 | toRank i32 | dialedBytes u16 |
//                                           stream u8 | streams u8 | flags u8 |
//                                           connectorNonce[32] |
//                                           jobId[jobIdBytes] | dialed[dialedBytes] |
//                                           mac[32] = HMAC-SHA256(secret, "ringlet-connect" |
//                                           listenerNonce | the 53 fixed bytes | jobId | dialed)
//   listener  -> connector  ListenerAccept  magic u32 | version u16 | reserved u16 |
//                                           listenerRank i32 | mac[32] = HMAC-SHA256(secret,
//                                           "ringlet-accept" | listenerNonce | connectorNonce |
//                                           connector mac | rank i32 | dialed)
//
// `dialed` is the address the connector connected to, as the listener's record published it.
// Both proofs cover both ranks, both fresh nonces and that address, so neither end accepts a
// replayed answer, and a relay (a third party that forwards the bytes between a connector and
// the real listener) fails: the listener sees an address that is not its own. A listener that
// refuses a connector closes the socket without answering.
//
// `flags` (protocol version 7): kFlagSealed where the link's bytes travel sealed
// (RINGLET_SOCKET_ENCRYPT=1, sealed_stream.h); both ends must agree. The connector's flags are
// under its proof, so nobody on the path can talk a connection out of sealing; after an accepted
// handshake every byte of the connection, both ways, is in records of sealed_stream.h, under a
// key per direction: HMAC-SHA256(secret, "ringlet-seal-to-listener" or "ringlet-seal-to-connector"
// | listenerNonce | connectorNonce | the connector's mac).
//
// `streams` is how many connections each rank pair keeps (RINGLET_SOCKET_STREAMS; every rank must
// use the same); the connector makes one connection per `stream` in 0..streams-1, each with its
// own handshake. Stream 0 carries the frames below; the other streams carry raw payload bytes.
//
// Frames (stream 0, after the handshake, both directions): header = type u32 | length u32, then
// `length` payload bytes. DATA carries one message of a collective, PTOP one point-to-point
// message (transport::Channel; protocol version 4), never striped. ABORT carries origin i32 |
// reason bytes and is the last frame on the connection. NUDGE (protocol version 5) carries
// nothing: a receiver that has waited a while for a message sends it so that the segment, which
// acknowledges what has come, makes the sender's kernel send what Nagle's algorithm holds back
// (TcpLink::sendInRun); readers pass over it. A DATA frame's length may carry kFrameInRunBit
// (below).
//
// Striping: with S > 1 streams, a DATA message of at least S x kStripePartMinBytes is cut into S
// parts (stripeOffset()); its header (length = the whole message) and part 0 go on stream 0, part
// s alone on stream s. Both ends cut alike from the length, so no stream carries any other
// framing, and the parts of one message move side by side.

#include <endian.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringlet::transport::tcp {

inline constexpr uint32_t kMagic = 0x4c474e52;  // "RNGL"
inline constexpr uint16_t kProtocolVersion = 7;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kMaxJobIdBytes = 256;
inline constexpr size_t kMaxDialedBytes = 128;

inline constexpr size_t kListenerHelloBytes = 8 + kNonceBytes;
inline constexpr size_t kConnectorFixedBytes = 21 + kNonceBytes;
inline constexpr size_t kListenerAcceptBytes = 12 + kMacBytes;

// The listener's answer (the u16 after the version in its last message, protocol version 6):
// accepted, with its proof, or refused, with the reason and no proof. A connector can then tell a
// listener that refused it from one whose process failed or exited as it connected (which only
// closes the socket). The reasons after kWrongJobOrSecret are checked after the connector's
// proof, so only a holder of the secret learns them.
enum class HandshakeAnswer : uint16_t {
  kAccepted = 0,
  kWrongJobOrSecret = 1,  // the job id, or the proof of the secret
  kWrongAddress = 2,      // it dialed another address than this listener's own (a relay)
  kWrongRank = 3,         // it asked for another rank, or is not a rank that connects here
  kWrongStreams = 4,      // another number of streams per pair, or a stream out of range
  kDuplicate = 5,         // this rank's stream is connected (or connecting) already
  kWrongSealing = 6,      // one end seals its links (RINGLET_SOCKET_ENCRYPT), the other not
};

// The handshake's flags (protocol version 7).
inline constexpr uint8_t kFlagSealed = 1;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// Frame types: tags rather than small numbers, so a corrupt or foreign stream is noticed.
inline constexpr uint32_t kFrameData = 0x41544144;          // "DATA"
inline constexpr uint32_t kFrameAbort = 0x54524241;         // "ABRT"
inline constexpr uint32_t kFramePointToPoint = 0x504f5450;  // "PTOP"
inline constexpr uint32_t kFrameNudge = 0x4744554e;         // "NUDG"
inline constexpr size_t kFrameHeaderBytes = 8;
// recv() hands out messages aligned to this (the widest element a reduction reads): the
// buffer is allocated at least this aligned, and so is the header before each message.
inline constexpr size_t kMessageAlignment = 8;
static_assert(kFrameHeaderBytes % kMessageAlignment == 0);
// Largest DATA payload; collectives cut their segments to fit.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 30;
// Largest reason text carried by an ABORT frame.
inline constexpr size_t kMaxAbortReasonBytes = 4096;

// Streams per rank pair: at most this many (NCCL allows 64 sockets, spread over threads; one
// thread drives ours).
inline constexpr size_t kMaxStreams = 16;
// A striped message gives each stream at least this much.
inline constexpr size_t kStripePartMinBytes = 64 << 10;

inline bool isStriped(size_t bytes, size_t streams) {
  return streams > 1 && bytes >= streams * kStripePartMinBytes;
}
// Where stream `stream`'s part of a striped message of `bytes` bytes starts (stream == streams:
// the end). Parts are equal but for the last, and start at multiples of 64 bytes.
inline size_t stripeOffset(size_t bytes, size_t streams, size_t stream) {
  if (stream >= streams) return bytes;
  const size_t part = (bytes / streams + 63) & ~size_t{63};
  return std::min(bytes, stream * part);
}

// A DATA frame's length's top bit marks one sent by Link::sendInRun (protocol version 5): its
// receiver acknowledges at once once it has read all it has of such frames (TcpLink), so that
// what the sender holds back behind them goes out. Lengths are at most kMaxMessageBytes.
inline constexpr uint32_t kFrameInRunBit = uint32_t{1} << 31;
static_assert(kMaxMessageBytes < kFrameInRunBit);

struct FrameHeader {
  uint32_t type = 0;
  uint32_t length = 0;
  bool inRun = false;
};

inline void put16(uint8_t* p, uint16_t v) {
  v = htole16(v);
  std::memcpy(p, &v, 2);
}
inline void put32(uint8_t* p, uint32_t v) {
  v = htole32(v);
  std::memcpy(p, &v, 4);
}
inline uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return le16toh(v);
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return le32toh(v);
}

inline void encodeFrameHeader(uint8_t* out, uint32_t type, uint32_t length, bool inRun = false) {
  put32(out, type);
  put32(out + 4, length | (inRun ? kFrameInRunBit : 0));
}
inline FrameHeader decodeFrameHeader(const std::byte* in) {
  const auto* p = reinterpret_cast<const uint8_t*>(in);
  const uint32_t type = get32(p);
  const uint32_t length = get32(p + 4);
  const bool inRun = type == kFrameData && (length & kFrameInRunBit) != 0;
  return FrameHeader{type, inRun ? length & ~kFrameInRunBit : length, inRun};
}

}  // namespace ringlet::transport::tcp
