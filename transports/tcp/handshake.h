#pragma once
// The connection handshake of the TCP transport (format in wire.h). It proves to both ends that
// the other holds the job secret, and tells the listener which rank connected. A connection that
// fails it carries no data.

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/net/sealed_stream.h"
#include "src/net/socket.h"
#include "transports/tcp/wire.h"
#include "transports/transport.h"

namespace ringlet::transport::tcp {

// What this rank proves and expects.
struct HandshakeIdentity {
  std::string jobId;
  std::string secret;
  int rank = 0;
  int size = 1;
  // The listener's address as its record publishes it ("127.0.0.1:41234"); a connector that
  // dialed another address (a relay, a forged record) is refused.
  std::string listenAddress = {};
  // Connections per rank pair (wire.h); both ends must agree.
  int streams = 1;
  // Every byte of the connections sealed (RINGLET_SOCKET_ENCRYPT, sealed_stream.h); both ends
  // must agree.
  bool sealed = false;
};

// HMAC-SHA256(secret, label | parts...).
Mac computeMac(const std::string& secret, std::string_view label,
               std::initializer_list<std::span<const uint8_t>> parts);

// Connector side of stream `stream`, blocking until `deadline`: reads the listener's nonce,
// proves the secret over both nonces, both ranks, the stream and `remote` (the address it
// dialed, from the listener's record), checks the listener's proof. Throws IoError naming
// `remote` and the reason when the listener refuses (its answer names why), answers wrongly or
// keeps another number of streams or seals otherwise; PeerError when it closes the connection
// without an answer (its process failed or exited meanwhile); TimeoutError when it stays silent.
// Returns the connection's sealing keys (wire.h; used where `self.sealed`).
net::SealKeys connectorHandshake(int fd, const HandshakeIdentity& self, int listenerRank,
                                 Deadline deadline, const std::string& remote, int stream = 0);

// Listener side of one accepted connection, advanced without blocking from a poll loop.
class PendingHandshake {
 public:
  enum class State { kReading, kAccepted, kFailed };

  // Sends the nonce right away; a connection that cannot take 40 bytes fails.
  PendingHandshake(net::Fd fd, std::string remote, const HandshakeIdentity& self,
                   Deadline deadline);

  int fd() const { return fd_.get(); }
  const std::string& remote() const { return remote_; }
  Deadline deadline() const { return deadline_; }
  State state() const { return state_; }
  // Why it failed (for the warning), once state() is kFailed.
  const std::string& failure() const { return failure_; }
  // The connector's rank and stream, once state() is kAccepted.
  int peerRank() const { return peerRank_; }
  int peerStream() const { return peerStream_; }
  // The connection's sealing keys, once state() is kAccepted (used where the identity seals).
  const net::SealKeys& keys() const { return keys_; }

  // Reads what has arrived; on a complete ConnectorHello validates it and, when it is good,
  // answers with the listener's proof. `isWanted(rank, stream)` says whether that connection
  // may be made now (false for one already made or pending: a duplicate).
  template <typename IsWanted>
  State advance(const IsWanted& isWanted) {
    if (state_ == State::kReading) readAvailable();
    if (state_ == State::kReading && complete()) {
      finish(isWanted(parsedFromRank(), parsedStream()));
    }
    return state_;
  }
  void fail(std::string reason);
  net::Fd takeFd() { return std::move(fd_); }

 private:
  void readAvailable();
  bool complete() const { return in_.size() == need_; }
  int parsedFromRank() const;
  int parsedStream() const;
  void finish(bool wanted);
  // Answers the connector that it is refused and why (best effort: the socket closes next), then
  // fails with `reason`.
  void refuse(HandshakeAnswer answer, std::string reason);

  net::Fd fd_;
  std::string remote_;
  const HandshakeIdentity& self_;
  Deadline deadline_;
  Nonce nonce_{};
  std::vector<uint8_t> in_;
  size_t need_ = kConnectorFixedBytes;
  size_t jobIdBytes_ = 0;
  size_t dialedBytes_ = 0;
  State state_ = State::kReading;
  std::string failure_;
  int peerRank_ = -1;
  int peerStream_ = -1;
  net::SealKeys keys_{};
};

}  // namespace ringlet::transport::tcp
