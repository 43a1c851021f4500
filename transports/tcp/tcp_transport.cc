#include "transports/tcp/tcp_transport.h"

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "ringlet/error.h"
#include "src/config.h"
#include "src/log.h"
#include "src/net/interface_choice.h"

namespace ringlet::transport::tcp {

namespace {

// How often a wait for a peer asks TransportContext::checkJob whether the job failed meanwhile.
constexpr std::chrono::milliseconds kCheckJobEvery{100};

}  // namespace

TcpTransport::TcpTransport(TransportContext context, std::optional<Backoff> backoff)
    : context_(std::move(context)),
      backoff_(backoff ? *backoff : Backoff::forHost(context_.ranksOnHost, context_.adaptiveWait)) {
  if (!context_.store) throw InvalidArgument("tcp transport: the context has no store");
  if (context_.rank < 0 || context_.rank >= context_.size) {
    throw InvalidArgument(
        fmt::format("tcp transport: rank {} is outside 0..{}", context_.rank, context_.size - 1));
  }
  if (context_.jobId.size() > kMaxJobIdBytes) {
    throw InvalidArgument(fmt::format("tcp transport: job id is {} bytes; at most {} allowed",
                                      context_.jobId.size(), kMaxJobIdBytes));
  }
  identity_ = {context_.jobId, context_.secret, context_.rank, context_.size};
  identity_.streams = streamsFromSettings(context_.settings);
  identity_.sealed = sealedFromSettings(context_.settings);
  if (identity_.sealed && context_.secret.empty()) {
    throw InvalidArgument(
        "RINGLET_SOCKET_ENCRYPT=1: the tcp transport has no job secret to derive its keys from");
  }
}

TcpTransport::~TcpTransport() = default;

std::optional<std::string> listenHostFromSettings(const Settings& settings) {
  if (const std::string* address = findSetting(settings, "socket_addr")) return *address;
  if (const std::string* ifname = findSetting(settings, "socket_ifname")) {
    return net::interfaceAddress(*ifname);
  }
  return std::nullopt;
}

int streamsFromSettings(const Settings& settings) {
  const std::string* text = findSetting(settings, "socket_streams");
  if (text == nullptr) return 1;
  int streams = 0;
  const char* end = text->data() + text->size();
  const auto [at, error] = std::from_chars(text->data(), end, streams);
  if (text->empty() || error != std::errc() || at != end || streams < 1 ||
      streams > static_cast<int>(kMaxStreams)) {
    throw InvalidArgument(fmt::format(
        "RINGLET_SOCKET_STREAMS='{}': expected a whole number of tcp streams per rank pair, 1 "
        "to {}",
        *text, kMaxStreams));
  }
  return streams;
}

bool sealedFromSettings(const Settings& settings) {
  const std::string* text = findSetting(settings, "socket_encrypt");
  return text != nullptr && config::parseSocketEncrypt(*text);
}

std::unique_ptr<TcpLink> TcpTransport::makeLink(int peer, Streams streams) const {
  if (!identity_.sealed) streams.keys.clear();
  return std::make_unique<TcpLink>(context_.rank, peer, std::move(streams.fds), backoff_,
                                   context_.closeTimeout, std::move(streams.keys));
}

std::string TcpTransport::chooseListenHost() const {
  if (auto host = listenHostFromSettings(context_.settings)) return *host;
  const bool oneHost = std::all_of(context_.peers.begin(), context_.peers.end(), [&](auto& p) {
    return p.hostId == context_.peers.front().hostId;
  });
  if (oneHost) return "127.0.0.1";
  std::string rendezvous = context_.rendezvousHost;
  if (rendezvous.empty()) {
    char hostname[256] = {};
    if (gethostname(hostname, sizeof(hostname) - 1) != 0) {
      throw IoError("tcp transport: gethostname failed while choosing a listen address");
    }
    rendezvous = hostname;
  }
  const net::InterfaceChoice choice = net::chooseInterface("", "", rendezvous);
  log::info("rank {}: tcp transport listens on {} ({}), because {}", context_.rank, choice.address,
            choice.interface.empty() ? "no interface" : choice.interface, choice.reason);
  return choice.address;
}

void TcpTransport::startListening() {
  const std::string host = chooseListenHost();
  listener_ = net::listenTcp(host, 0);
  listenAddress_ = net::SocketAddress::local(listener_.get()).toString();
  identity_.listenAddress = listenAddress_;
  const std::string key = fmt::format("addr/{}", context_.rank);
  context_.store->set(key, std::as_bytes(std::span(listenAddress_)));
  log::debug("rank {}: tcp transport listens on {}", context_.rank, listenAddress_);
}

std::vector<std::unique_ptr<Link>> TcpTransport::connect(std::span<const int> peers,
                                                         Deadline deadline) {
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] < 0 || peers[i] >= context_.size || peers[i] == context_.rank ||
        (i > 0 && peers[i] <= peers[i - 1])) {
      throw InvalidArgument(fmt::format(
          "tcp transport on rank {}: peers [{}] must be ascending ranks in 0..{} without this rank",
          context_.rank, fmt::join(peers, ", "), context_.size - 1));
    }
  }
  if (!listener_.valid()) startListening();

  // Lower ranks first, then accept the higher ones. By induction on the rank this cannot
  // deadlock: rank 0 only accepts, and every rank finishes its outgoing connections once the
  // lower ranks reach their accept phase.
  std::vector<std::unique_ptr<Link>> links(peers.size());
  std::vector<int> higher;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] > context_.rank) {
      higher.push_back(peers[i]);
      continue;
    }
    links[i] = makeLink(peers[i], connectTo(peers[i], deadline));
  }
  std::map<int, Streams> accepted = acceptFrom(higher, deadline);
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] > context_.rank) links[i] = makeLink(peers[i], std::move(accepted.at(peers[i])));
    log::debug("rank {}: {}", context_.rank, links[i]->describe());
  }
  return links;
}

TcpTransport::Streams TcpTransport::connectTo(int peer, Deadline deadline) {
  const std::string key = fmt::format("addr/{}", peer);
  // A peer that failed before it set the key never will: the wait asks checkJob between slices.
  const Bytes value = getWatching(*context_.store, key, deadline, kCheckJobEvery, [&] {
    if (context_.checkJob) context_.checkJob(deadline, std::span(&peer, 1));
  });
  const std::string address(reinterpret_cast<const char*>(value.data()), value.size());
  const auto [host, port] = net::splitHostPort(address, key);
  Streams streams;
  for (int stream = 0; stream < identity_.streams; ++stream) {
    net::Fd fd = net::connectTcp(host, port, deadline, fmt::format("rank {}", peer), [&] {
      if (context_.checkJob) context_.checkJob(deadline, std::span(&peer, 1));
    });
    streams.keys.push_back(
        connectorHandshake(fd.get(), identity_, peer, deadline, address, stream));
    streams.fds.push_back(std::move(fd));
  }
  return streams;
}

std::map<int, TcpTransport::Streams> TcpTransport::acceptFrom(std::vector<int> wanted,
                                                              Deadline deadline) {
  std::map<int, Streams> result;
  auto whole = [](const Streams& streams) {
    return std::all_of(streams.fds.begin(), streams.fds.end(), [](auto& fd) { return fd.valid(); });
  };
  auto claim = [&] {
    for (auto it = wanted.begin(); it != wanted.end();) {
      auto found = stash_.find(*it);
      if (found == stash_.end() || !whole(found->second)) {
        ++it;
        continue;
      }
      result.emplace(*it, std::move(found->second));
      stash_.erase(found);
      it = wanted.erase(it);
    }
  };
  claim();
  auto nextCheck = Clock::now() + kCheckJobEvery;
  while (!wanted.empty()) {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    auto wake = deadline;
    for (const auto& p : pending_) {
      fds.push_back({p->fd(), POLLIN, 0});
      wake = std::min(wake, p->deadline());
    }
    const auto slice =
        std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()) +
                       std::chrono::milliseconds(1),
                   std::chrono::milliseconds(0), kCheckJobEvery);
    if (::poll(fds.data(), fds.size(), static_cast<int>(slice.count())) < 0 && errno != EINTR) {
      throw IoError(fmt::format("rank {}: poll on the tcp listener failed: {}", context_.rank,
                                net::errorText(errno)));
    }
    serviceListener([&](int rank) { return result.count(rank) == 0; });
    claim();
    if (!wanted.empty() && Clock::now() >= deadline) {
      throw TimeoutError(fmt::format(
          "rank {}: tcp transport setup timed out waiting for rank(s) [{}] to connect to {}",
          context_.rank, fmt::join(wanted, ", "), listenAddress_));
    }
    if (!wanted.empty() && context_.checkJob && Clock::now() >= nextCheck) {
      context_.checkJob(deadline, wanted);
      nextCheck = Clock::now() + kCheckJobEvery;
    }
  }
  return result;
}

void TcpTransport::serviceListener(const std::function<bool(int)>& notClaimed) {
  while (true) {
    net::Fd fd = net::acceptTcp(listener_.get());
    if (!fd.valid()) break;
    std::string remote = "unknown address";
    try {
      remote = net::SocketAddress::remote(fd.get()).toString();
    } catch (const Error&) {
    }
    pending_.push_back(std::make_unique<PendingHandshake>(
        std::move(fd), std::move(remote), identity_, Clock::now() + kHandshakeTimeout));
  }
  const auto now = Clock::now();
  auto isWanted = [&](int rank, int stream) {
    auto found = stash_.find(rank);
    return notClaimed(rank) &&
           (found == stash_.end() || stream >= static_cast<int>(found->second.fds.size()) ||
            !found->second.fds[stream].valid());
  };
  for (auto it = pending_.begin(); it != pending_.end();) {
    PendingHandshake& p = **it;
    auto state = p.advance(isWanted);
    if (state == PendingHandshake::State::kReading && now >= p.deadline()) {
      p.fail(fmt::format("no complete handshake within {} s", kHandshakeTimeout.count()));
      state = PendingHandshake::State::kFailed;
    }
    if (state == PendingHandshake::State::kReading) {
      ++it;
      continue;
    }
    if (state == PendingHandshake::State::kAccepted) {
      log::debug("rank {}: rank {} connected stream {} from {}", context_.rank, p.peerRank(),
                 p.peerStream(), p.remote());
      Streams& streams = stash_[p.peerRank()];
      streams.fds.resize(identity_.streams);
      streams.keys.resize(identity_.streams);
      streams.fds.at(p.peerStream()) = p.takeFd();
      streams.keys.at(p.peerStream()) = p.keys();
    } else {
      log::warn("rank {}: tcp transport refused the connection from {}: {}", context_.rank,
                p.remote(), p.failure());
    }
    it = pending_.erase(it);
  }
}

}  // namespace ringlet::transport::tcp

namespace ringlet::transport::tcp {

TransportEntry transportEntry() {
  return TransportEntry{
      .name = "tcp",
      .priority = 10,
      .sharesMemory = false,
      .options = {{"socket_addr", "RINGLET_SOCKET_ADDR",
                   "address the tcp transport listens on (wins over socket_ifname)"},
                  {"socket_ifname", "RINGLET_SOCKET_IFNAME",
                   "interface whose address the tcp transport listens on"},
                  {"socket_streams", "RINGLET_SOCKET_STREAMS",
                   "tcp connections per rank pair (1-16, default 1; alike on every rank): large "
                   "messages are striped over them"},
                  {"socket_encrypt", "RINGLET_SOCKET_ENCRYPT",
                   "1: every tcp link's bytes, and the TCP store's, sealed with AES-256-GCM "
                   "under keys from the job secret (for networks not trusted end to end); 0, the "
                   "default: in clear, authenticated at the handshake only. Alike on every rank "
                   "and launcher"}},
      .probe = [](const Settings& settings) -> std::string {
        try {
          (void)streamsFromSettings(settings);
          (void)sealedFromSettings(settings);
          (void)listenHostFromSettings(settings);
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      .checkSettings =
          [](const Settings& settings) {
            (void)streamsFromSettings(settings);
            (void)sealedFromSettings(settings);
          },
      .canConnect = [](const PeerInfo&, const PeerInfo&) { return true; },
      .make = [](TransportContext context) -> std::unique_ptr<Transport> {
        return std::make_unique<TcpTransport>(std::move(context));
      },
      .describe = [](const Settings& settings) -> std::string {
        const int streams = streamsFromSettings(settings);
        const std::string perPair =
            (streams == 1 ? std::string("; 1 connection per rank pair")
                          : fmt::format("; {} connections per rank pair, large messages striped "
                                        "(RINGLET_SOCKET_STREAMS)",
                                        streams)) +
            (sealedFromSettings(settings)
                 ? "; every byte sealed with AES-256-GCM (RINGLET_SOCKET_ENCRYPT=1)"
                 : "");
        if (const std::string* address = findSetting(settings, "socket_addr")) {
          return fmt::format("listens on {} (RINGLET_SOCKET_ADDR){}", *address, perPair);
        }
        if (const std::string* ifname = findSetting(settings, "socket_ifname")) {
          return fmt::format("listens on {} (RINGLET_SOCKET_IFNAME={}){}",
                             net::interfaceAddress(*ifname), *ifname, perPair);
        }
        return "listens on 127.0.0.1 when every rank is on one host, else on the interface "
               "that routes to the store's address" +
               perPair;
      },
  };
}

}  // namespace ringlet::transport::tcp
