#include "transports/tcp/handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cerrno>

#include "ringlet/error.h"

namespace ringlet::transport::tcp {

namespace {

constexpr std::string_view kConnectLabel = "ringlet-connect";
constexpr std::string_view kAcceptLabel = "ringlet-accept";
constexpr std::string_view kSealToListenerLabel = "ringlet-seal-to-listener";
constexpr std::string_view kSealToConnectorLabel = "ringlet-seal-to-connector";

std::span<const uint8_t> bytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void encodeConnectorFixed(uint8_t* out, size_t jobIdBytes, int fromRank, int toRank,
                          size_t dialedBytes, int stream, int streams, uint8_t flags,
                          const Nonce& nonce) {
  put32(out, kMagic);
  put16(out + 4, kProtocolVersion);
  put16(out + 6, static_cast<uint16_t>(jobIdBytes));
  put32(out + 8, static_cast<uint32_t>(fromRank));
  put32(out + 12, static_cast<uint32_t>(toRank));
  put16(out + 16, static_cast<uint16_t>(dialedBytes));
  out[18] = static_cast<uint8_t>(stream);
  out[19] = static_cast<uint8_t>(streams);
  out[20] = flags;
  std::memcpy(out + 21, nonce.data(), nonce.size());
}

uint8_t flagsOf(const HandshakeIdentity& self) { return self.sealed ? kFlagSealed : 0; }

// "seals" / "does not seal", for the errors of two ends that disagree.
std::string_view sealingText(bool sealed) { return sealed ? "seals" : "does not seal"; }

// Both directions' keys of one connection (wire.h), as the end `listener` sees them.
net::SealKeys sealKeys(const std::string& secret, std::span<const uint8_t> listenerNonce,
                       std::span<const uint8_t> connectorNonce,
                       std::span<const uint8_t> connectorMac, bool listener) {
  const Mac toListener =
      computeMac(secret, kSealToListenerLabel, {listenerNonce, connectorNonce, connectorMac});
  const Mac toConnector =
      computeMac(secret, kSealToConnectorLabel, {listenerNonce, connectorNonce, connectorMac});
  static_assert(kMacBytes == net::kSealKeyBytes);
  net::SealKeys keys;
  std::memcpy(keys.send.data(), (listener ? toConnector : toListener).data(), net::kSealKeyBytes);
  std::memcpy(keys.recv.data(), (listener ? toListener : toConnector).data(), net::kSealKeyBytes);
  return keys;
}

Nonce freshNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    throw IoError("RAND_bytes failed to make a handshake nonce in the tcp transport");
  }
  return nonce;
}

// The first 12 bytes of the listener's answer, accepted or refused (wire.h, HandshakeAnswer).
void putAnswerHeader(uint8_t* out, HandshakeAnswer answer, int listenerRank) {
  put32(out, kMagic);
  put16(out + 4, kProtocolVersion);
  put16(out + 6, static_cast<uint16_t>(answer));
  put32(out + 8, static_cast<uint32_t>(listenerRank));
}

// What a listener's refusal means, for the connector's error.
std::string refusalText(uint16_t answer) {
  switch (static_cast<HandshakeAnswer>(answer)) {
    case HandshakeAnswer::kWrongJobOrSecret:
      return "this rank's job id or secret is not its own (do both use the same job id and "
             "secret?)";
    case HandshakeAnswer::kWrongAddress:
      return "this rank dialed another address than the listener's own (a relay between the "
             "ranks, or a forged address record)";
    case HandshakeAnswer::kWrongRank:
      return "it is not the rank this rank asked for, or this rank is not one that connects to it";
    case HandshakeAnswer::kWrongStreams:
      return "it keeps another number of tcp streams per rank pair: set RINGLET_SOCKET_STREAMS "
             "alike on every rank";
    case HandshakeAnswer::kDuplicate:
      return "this rank's connection is made already (a duplicate)";
    case HandshakeAnswer::kWrongSealing:
      return "one of the two seals its tcp links and the other does not: set "
             "RINGLET_SOCKET_ENCRYPT alike on every rank";
    default:
      return fmt::format("reason {} (unknown to this rank)", answer);
  }
}

}  // namespace

Mac computeMac(const std::string& secret, std::string_view label,
               std::initializer_list<std::span<const uint8_t>> parts) {
  std::vector<uint8_t> message(label.begin(), label.end());
  for (auto part : parts) message.insert(message.end(), part.begin(), part.end());
  static const uint8_t kEmptyKey = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kEmptyKey) : secret.data();
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), message.data(), message.size(),
           mac.data(), &length) == nullptr ||
      length != kMacBytes) {
    throw IoError("HMAC-SHA256 failed in the tcp transport handshake");
  }
  return mac;
}

net::SealKeys connectorHandshake(int fd, const HandshakeIdentity& self, int listenerRank,
                                 Deadline deadline, const std::string& remote, int stream) {
  const std::string what = fmt::format("rank {} at {} (handshake)", listenerRank, remote);
  if (self.jobId.size() > kMaxJobIdBytes) {
    throw InvalidArgument(fmt::format("job id is {} bytes; the tcp transport allows at most {}",
                                      self.jobId.size(), kMaxJobIdBytes));
  }
  uint8_t hello[kListenerHelloBytes];
  try {
    net::readFull(fd, hello, sizeof(hello), deadline, what);
  } catch (const IoError& e) {
    // Every listener of the job greets at once: its process is gone (or its listener closed).
    throw PeerError(listenerRank,
                    fmt::format("rank {}: rank {} at {} closed the connection before the handshake "
                                "({})",
                                self.rank, listenerRank, remote, e.what()));
  }
  if (get32(hello) != kMagic || get16(hello + 4) != kProtocolVersion) {
    throw IoError(fmt::format(
        "rank {}: {} is not a ringlet tcp listener of protocol version {} (magic {:#x}, version "
        "{})",
        self.rank, remote, kProtocolVersion, get32(hello), get16(hello + 4)));
  }
  if (hello[6] != self.streams) {
    throw IoError(
        fmt::format("rank {}: rank {} at {} keeps {} tcp streams per rank pair, this rank {}: set "
                    "RINGLET_SOCKET_STREAMS alike on every rank",
                    self.rank, listenerRank, remote, hello[6], self.streams));
  }
  if (((hello[7] & kFlagSealed) != 0) != self.sealed) {
    throw IoError(fmt::format(
        "rank {}: rank {} at {} {} its tcp links and this rank {}: set RINGLET_SOCKET_ENCRYPT "
        "alike on every rank",
        self.rank, listenerRank, remote, sealingText(!self.sealed), sealingText(self.sealed)));
  }
  const std::span<const uint8_t> nonce(hello + 8, kNonceBytes);
  if (remote.size() > kMaxDialedBytes) {
    throw InvalidArgument(fmt::format("rank {}: address '{}' is longer than {} bytes", self.rank,
                                      remote.substr(0, kMaxDialedBytes), kMaxDialedBytes));
  }
  const Nonce mine = freshNonce();

  std::vector<uint8_t> message(kConnectorFixedBytes + self.jobId.size() + remote.size() +
                               kMacBytes);
  encodeConnectorFixed(message.data(), self.jobId.size(), self.rank, listenerRank, remote.size(),
                       stream, self.streams, flagsOf(self), mine);
  std::memcpy(message.data() + kConnectorFixedBytes, self.jobId.data(), self.jobId.size());
  std::memcpy(message.data() + kConnectorFixedBytes + self.jobId.size(), remote.data(),
              remote.size());
  const Mac mac = computeMac(self.secret, kConnectLabel,
                             {nonce, std::span<const uint8_t>(message.data(), kConnectorFixedBytes),
                              bytesOf(self.jobId), bytesOf(remote)});
  std::memcpy(message.data() + message.size() - kMacBytes, mac.data(), kMacBytes);
  net::writeFull(fd, message.data(), message.size(), deadline, what);

  uint8_t accept[kListenerAcceptBytes];
  try {
    net::readFull(fd, accept, sizeof(accept), deadline, what);
  } catch (const IoError& e) {
    // A listener that refuses says so (below); one that closes without an answer is gone: its
    // process failed or exited while this rank connected (a job whose ranks stop on an error).
    throw PeerError(listenerRank,
                    fmt::format("rank {}: rank {} at {} closed the connection during the "
                                "handshake, without an answer ({})",
                                self.rank, listenerRank, remote, e.what()));
  }
  if (get32(accept) == kMagic && get16(accept + 4) == kProtocolVersion &&
      get16(accept + 6) != static_cast<uint16_t>(HandshakeAnswer::kAccepted)) {
    throw IoError(fmt::format("rank {}: rank {} at {} refused the handshake: {}", self.rank,
                              listenerRank, remote, refusalText(get16(accept + 6))));
  }
  uint8_t rankBytes[4];
  put32(rankBytes, static_cast<uint32_t>(listenerRank));
  const Mac expected =
      computeMac(self.secret, kAcceptLabel, {nonce, mine, mac, rankBytes, bytesOf(remote)});
  if (get32(accept) != kMagic || get16(accept + 4) != kProtocolVersion ||
      static_cast<int>(get32(accept + 8)) != listenerRank ||
      CRYPTO_memcmp(accept + 12, expected.data(), kMacBytes) != 0) {
    throw IoError(fmt::format(
        "rank {}: the listener at {} failed the handshake (wrong rank {}, or it does not hold the "
        "job secret, or a relay stands between us); expected rank {}",
        self.rank, remote, static_cast<int>(get32(accept + 8)), listenerRank));
  }
  return sealKeys(self.secret, nonce, mine, mac, /*listener=*/false);
}

PendingHandshake::PendingHandshake(net::Fd fd, std::string remote, const HandshakeIdentity& self,
                                   Deadline deadline)
    : fd_(std::move(fd)), remote_(std::move(remote)), self_(self), deadline_(deadline) {
  in_.reserve(kConnectorFixedBytes + kMaxJobIdBytes + kMaxDialedBytes + kMacBytes);
  nonce_ = freshNonce();
  uint8_t hello[kListenerHelloBytes];
  put32(hello, kMagic);
  put16(hello + 4, kProtocolVersion);
  hello[6] = static_cast<uint8_t>(self_.streams);
  hello[7] = flagsOf(self_);
  std::memcpy(hello + 8, nonce_.data(), kNonceBytes);
  ssize_t n = ::send(fd_.get(), hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof(hello))) {
    fail(n < 0 ? fmt::format("sending the nonce failed: {}", net::errorText(errno))
               : "could not send the nonce");
  }
}

void PendingHandshake::fail(std::string reason) {
  state_ = State::kFailed;
  failure_ = std::move(reason);
  fd_.reset();
}

void PendingHandshake::readAvailable() {
  while (in_.size() < need_) {
    const size_t have = in_.size();
    in_.resize(need_);
    ssize_t n = ::recv(fd_.get(), in_.data() + have, need_ - have, MSG_DONTWAIT);
    in_.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n == 0) return fail(fmt::format("closed after {} handshake bytes", have));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return fail(fmt::format("read failed: {}", net::errorText(errno)));
    }
    if (in_.size() == kConnectorFixedBytes && need_ == kConnectorFixedBytes) {
      const uint32_t magic = get32(in_.data());
      const uint16_t version = get16(in_.data() + 4);
      const uint16_t jobIdBytes = get16(in_.data() + 6);
      if (magic != kMagic) return fail(fmt::format("wrong magic {:#010x}", magic));
      if (version != kProtocolVersion) {
        return fail(
            fmt::format("protocol version {} (this rank speaks {})", version, kProtocolVersion));
      }
      if (jobIdBytes > kMaxJobIdBytes) {
        return fail(fmt::format("job id length {} exceeds {}", jobIdBytes, kMaxJobIdBytes));
      }
      const uint16_t dialedBytes = get16(in_.data() + 16);
      if (dialedBytes > kMaxDialedBytes) {
        return fail(fmt::format("address length {} exceeds {}", dialedBytes, kMaxDialedBytes));
      }
      jobIdBytes_ = jobIdBytes;
      dialedBytes_ = dialedBytes;
      need_ = kConnectorFixedBytes + jobIdBytes + dialedBytes + kMacBytes;
    }
  }
}

int PendingHandshake::parsedFromRank() const { return static_cast<int>(get32(in_.data() + 8)); }
int PendingHandshake::parsedStream() const { return in_[18]; }

void PendingHandshake::finish(bool wanted) {
  const size_t jobIdBytes = jobIdBytes_;
  const int fromRank = parsedFromRank();
  const int toRank = static_cast<int>(get32(in_.data() + 12));
  const std::span<const uint8_t> theirNonce(in_.data() + 21, kNonceBytes);
  const std::string_view jobId(reinterpret_cast<const char*>(in_.data()) + kConnectorFixedBytes,
                               jobIdBytes);
  const std::string_view dialed(
      reinterpret_cast<const char*>(in_.data()) + kConnectorFixedBytes + jobIdBytes, dialedBytes_);
  const uint8_t* mac = in_.data() + kConnectorFixedBytes + jobIdBytes + dialedBytes_;
  // The proof first: nothing an unauthenticated client claims is echoed into logs unchecked.
  const Mac expected =
      computeMac(self_.secret, kConnectLabel,
                 {nonce_, std::span<const uint8_t>(in_.data(), kConnectorFixedBytes),
                  bytesOf(jobId), bytesOf(dialed)});
  if (jobId != self_.jobId) {
    return refuse(HandshakeAnswer::kWrongJobOrSecret,
                  fmt::format("wrong job id ({} bytes; expected '{}')", jobIdBytes, self_.jobId));
  }
  if (CRYPTO_memcmp(mac, expected.data(), kMacBytes) != 0) {
    return refuse(HandshakeAnswer::kWrongJobOrSecret,
                  "wrong secret (handshake proof does not match)");
  }
  if (!self_.listenAddress.empty() && dialed != self_.listenAddress) {
    return refuse(
        HandshakeAnswer::kWrongAddress,
        fmt::format("rank {} dialed {}, but this rank listens on {}: a relay between the ranks, or "
                    "a forged address record",
                    fromRank, std::string(dialed).substr(0, kMaxDialedBytes), self_.listenAddress));
  }
  if (toRank != self_.rank) {
    return refuse(HandshakeAnswer::kWrongRank,
                  fmt::format("rank {} asked for rank {}, but this is rank {}", fromRank, toRank,
                              self_.rank));
  }
  if (fromRank <= self_.rank || fromRank >= self_.size) {
    return refuse(HandshakeAnswer::kWrongRank,
                  fmt::format("unexpected rank {} (only ranks {}..{} connect to rank {})", fromRank,
                              self_.rank + 1, self_.size - 1, self_.rank));
  }
  const int streams = in_[19];
  const int stream = parsedStream();
  if (streams != self_.streams) {
    return refuse(
        HandshakeAnswer::kWrongStreams,
        fmt::format(
            "rank {} keeps {} tcp streams per rank pair, this rank {}: set RINGLET_SOCKET_STREAMS "
            "alike on every rank",
            fromRank, streams, self_.streams));
  }
  if (stream >= streams) {
    return refuse(HandshakeAnswer::kWrongStreams,
                  fmt::format("rank {} connected as stream {} of {}", fromRank, stream, streams));
  }
  const bool sealed = (in_[20] & kFlagSealed) != 0;
  if (sealed != self_.sealed) {
    return refuse(HandshakeAnswer::kWrongSealing,
                  fmt::format("rank {} {} its tcp links and this rank {}: set "
                              "RINGLET_SOCKET_ENCRYPT alike on every rank",
                              fromRank, sealingText(sealed), sealingText(self_.sealed)));
  }
  if (!wanted) {
    return refuse(HandshakeAnswer::kDuplicate,
                  fmt::format("duplicate connection from rank {} (stream {})", fromRank, stream));
  }

  uint8_t accept[kListenerAcceptBytes];
  putAnswerHeader(accept, HandshakeAnswer::kAccepted, self_.rank);
  const Mac proof = computeMac(self_.secret, kAcceptLabel,
                               {nonce_, theirNonce, std::span<const uint8_t>(mac, kMacBytes),
                                std::span<const uint8_t>(accept + 8, 4), bytesOf(dialed)});
  std::memcpy(accept + 12, proof.data(), kMacBytes);
  ssize_t n = ::send(fd_.get(), accept, sizeof(accept), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof(accept))) {
    return fail(fmt::format("rank {}: sending the handshake answer failed", fromRank));
  }
  peerRank_ = fromRank;
  peerStream_ = stream;
  keys_ = sealKeys(self_.secret, nonce_, theirNonce, std::span<const uint8_t>(mac, kMacBytes),
                   /*listener=*/true);
  state_ = State::kAccepted;
}

void PendingHandshake::refuse(HandshakeAnswer answer, std::string reason) {
  uint8_t refusal[kListenerAcceptBytes] = {};  // no proof: zeros in its place
  putAnswerHeader(refusal, answer, self_.rank);
  // Best effort: a connector that does not read it finds the socket closed, as before.
  (void)::send(fd_.get(), refusal, sizeof(refusal), MSG_NOSIGNAL | MSG_DONTWAIT);
  fail(std::move(reason));
}

}  // namespace ringlet::transport::tcp
