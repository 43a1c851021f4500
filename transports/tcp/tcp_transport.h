#pragma once
// The tcp transport: one listening socket per rank, one handshaken TCP connection per peer pair.
//
// Setup (connect()): every rank listens once, for the Transport's lifetime, and publishes
// "addr/<rank>" = "host:port" in the context's store. For each pair the higher rank connects to
// the lower rank's listener (once per stream, RINGLET_SOCKET_STREAMS) and the lower rank
// accepts; both sides then run the handshake in handshake.h. The listener serves all pending
// handshakes at once from one poll loop, so a stray or hostile client (garbage, silence, wrong
// secret) is refused and logged without delaying the real peers. A peer that connects for a later
// connect() call is kept until that call claims it.
//
// Listen address: the setting socket_addr (RINGLET_SOCKET_ADDR); else the address of the
// interface socket_ifname (RINGLET_SOCKET_IFNAME); else
// 127.0.0.1 when every rank is on one host; else the address that routes to the rendezvous host
// (or this host name's address when that is unknown).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/tcp/handshake.h"
#include "transports/tcp/tcp_link.h"
#include "transports/transport.h"

namespace ringlet::transport::tcp {

// How long an accepted connection may take to complete its handshake before it is dropped.
inline constexpr std::chrono::seconds kHandshakeTimeout{5};

// The listen address the settings ask for, or nullopt to choose from the peers (see above).
// Throws InvalidArgument when socket_ifname names no usable interface.
std::optional<std::string> listenHostFromSettings(const Settings& settings);
// Connections per rank pair from socket_streams (RINGLET_SOCKET_STREAMS), 1 by default. Throws
// InvalidArgument naming the setting when it is not a whole number in 1..kMaxStreams.
int streamsFromSettings(const Settings& settings);
// Whether links seal their bytes, from socket_encrypt (RINGLET_SOCKET_ENCRYPT: 0 or 1, default
// 0). Throws InvalidArgument naming the setting for any other value.
bool sealedFromSettings(const Settings& settings);

class TcpTransport final : public Transport {
 public:
  // `backoff`: the wait policy of its links; by default Backoff::forHost(context.ranksOnHost).
  explicit TcpTransport(TransportContext context, std::optional<Backoff> backoff = std::nullopt);
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  std::vector<std::unique_ptr<Link>> connect(std::span<const int> peers,
                                             Deadline deadline) override;

  // "host:port" of this rank's listener (empty before the first connect()).
  const std::string& listenAddress() const { return listenAddress_; }

 private:
  // One rank pair's handshaken connections, stream by stream, with their sealing keys.
  struct Streams {
    std::vector<net::Fd> fds;
    std::vector<net::SealKeys> keys;
  };

  std::string chooseListenHost() const;
  void startListening();
  // One connection per stream, stream 0 first.
  Streams connectTo(int peer, Deadline deadline);
  // Accepts until every rank in `wanted` has connected all its streams; returns their sockets
  // by rank.
  std::map<int, Streams> acceptFrom(std::vector<int> wanted, Deadline deadline);
  // The link over `streams` (sealed where identity_ says so).
  std::unique_ptr<TcpLink> makeLink(int peer, Streams streams) const;
  // Accepts new connections and advances pending handshakes; completed ones go to stash_.
  // `notClaimed(rank)` is false for ranks this connect() call already linked (a duplicate).
  void serviceListener(const std::function<bool(int)>& notClaimed);

  TransportContext context_;
  Backoff backoff_;
  HandshakeIdentity identity_;
  net::Fd listener_;
  std::string listenAddress_;
  std::vector<std::unique_ptr<PendingHandshake>> pending_;
  // Handshaken, not yet claimed by a connect() call: each rank's streams by index.
  std::map<int, Streams> stash_;
};

}  // namespace ringlet::transport::tcp
