// Setting up a communicator's links: ranks publish who they are, each pair picks a transport,
// and each transport connects its share of the peers.
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "collectives/select.h"
#include "ringlet/error.h"
#include "src/core/communicator_impl.h"
#include "src/core/host_ring.h"
#include "src/log.h"
#include "src/store/authenticated_store.h"
#include "transports/progress.h"
#include "transports/registry.h"

namespace ringlet::detail {
namespace {

using transport::PeerInfo;

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

PeerInfo describeSelf(int rank) {
  PeerInfo info;
  info.rank = rank;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  info.hostname = host;
  struct stat shm {};
  std::string shmId = "no-shm";
  if (stat("/dev/shm", &shm) == 0) shmId = fmt::format("{}.{}", shm.st_dev, shm.st_ino);
  info.hostId = fmt::format("{}/{}/{}", info.hostname,
                            readFirstLine("/proc/sys/kernel/random/boot_id"), shmId);
  info.pid = static_cast<int>(getpid());
  char ns[128] = {};
  const ssize_t length = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  info.pidNamespace = length > 0 ? std::string(ns, static_cast<size_t>(length)) : "unknown";
  info.cpus = transport::Backoff::usableCpus();
  return info;
}

std::string encodeInfo(const PeerInfo& info, const std::string& transport) {
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n", info.hostname, info.hostId, info.pid,
                     info.pidNamespace, transport, info.cpus);
}

PeerInfo decodeInfo(int rank, const std::string& text, std::string& transport) {
  std::istringstream in(text);
  PeerInfo info;
  info.rank = rank;
  std::string pid;
  if (!std::getline(in, info.hostname) || !std::getline(in, info.hostId) ||
      !std::getline(in, pid) || !std::getline(in, info.pidNamespace) ||
      !std::getline(in, transport)) {
    throw IoError(fmt::format("rank {} published a malformed peer record", rank));
  }
  std::string cpus;
  if (std::getline(in, cpus)) {  // none: not known
    auto [end, ec] = std::from_chars(cpus.data(), cpus.data() + cpus.size(), info.cpus);
    if (ec != std::errc() || end != cpus.data() + cpus.size() || info.cpus < 0) {
      throw IoError(fmt::format("rank {} published a malformed peer record (cpus)", rank));
    }
  }
  auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), info.pid);
  if (ec != std::errc() || end != pid.data() + pid.size()) {
    throw IoError(fmt::format("rank {} published a malformed peer record (pid)", rank));
  }
  return info;
}

}  // namespace

double ranksPerCore(const std::vector<PeerInfo>& infos) {
  std::map<std::string, std::pair<int, int>> hosts;  // ranks, and the most CPUs one of them sees
  for (const PeerInfo& info : infos) {
    auto& [ranks, cpus] = hosts[info.hostId];
    ++ranks;
    cpus = std::max(cpus, info.cpus);
  }
  double most = 1;
  for (const auto& [host, counts] : hosts) {
    const auto& [ranks, cpus] = counts;
    if (cpus > 0 && ranks > cpus) most = std::max(most, static_cast<double>(ranks) / cpus);
  }
  return most;
}

bool ranksShareCores(const std::vector<PeerInfo>& infos) { return ranksPerCore(infos) > 1; }

bool oneHostOverTcp(const std::string& transport, const std::vector<PeerInfo>& infos) {
  return transport == "tcp" && std::all_of(infos.begin(), infos.end(), [&](const PeerInfo& info) {
           return info.hostId == infos.front().hostId;
         });
}

bool oneHostOverShm(const std::string& transport, const std::vector<PeerInfo>& infos) {
  if (transport != "shm" && transport != "auto") return false;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].hostId != infos.front().hostId) return false;
    // Two ranks of one process: "auto" may link them otherwise.
    for (size_t j = 0; j < i && transport == "auto"; ++j) {
      if (infos[j].pidComparable(infos[i]) && infos[j].pid == infos[i].pid) return false;
    }
  }
  return true;
}

size_t placementSegmentBytes(const std::string& transport, const std::vector<PeerInfo>& infos) {
  const double perCore = ranksPerCore(infos);
  if (perCore <= 1) return 0;
  if (oneHostOverTcp(transport, infos)) return kSharedCoresTcpSegmentBytes;
  return perCore >= 2 && oneHostOverShm(transport, infos) ? kSharedCoresShmSegmentBytes : 0;
}

bool everyLinkUnbounded(const std::string& transport, const std::vector<PeerInfo>& infos) {
  if (transport == "tcp" || transport == "local") return true;
  if (transport != "auto") return false;
  std::set<std::string> hosts;
  for (const PeerInfo& info : infos) {
    if (!hosts.insert(info.hostId).second) return false;
  }
  return true;
}

namespace {

// The peers the algorithms talk to: ring and dissemination neighbours (rank +- 2^k),
// recursive-doubling partners (rank ^ 2^k) and their fold partners (rank +- p).
std::vector<int> peersNeeded(int rank, int size) {
  std::set<int> peers;
  for (int d = 1; d < size; d <<= 1) {
    peers.insert((rank + d) % size);
    peers.insert(((rank - d) % size + size) % size);
  }
  int p = 1;
  while (p * 2 <= size) p *= 2;
  if (rank < p) {
    for (int mask = 1; mask < p; mask <<= 1) peers.insert(rank ^ mask);
    if (rank < size - p) peers.insert(rank + p);
  } else {
    peers.insert(rank - p);
  }
  peers.erase(rank);
  return {peers.begin(), peers.end()};
}

// Communicators made from one store get their own key space, numbered in creation order.
// Creation is collective, so every rank counts alike; each rank keeps its own counter in the
// store itself (thread ranks share a store, and processes share nothing else).
int nextCommunicatorId(Store& store, int rank) {
  return static_cast<int>(store.add(fmt::format("ringlet/created/{}", rank), 1));
}

std::string hostOf(const std::string& storeDescription) {
  // "tcp store 10.0.0.1:29500" -> "10.0.0.1"
  const auto space = storeDescription.rfind(' ');
  const auto colon = storeDescription.rfind(':');
  if (storeDescription.rfind("tcp", 0) != 0 || space == std::string::npos ||
      colon == std::string::npos || colon < space) {
    return "";
  }
  std::string host = storeDescription.substr(space + 1, colon - space - 1);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

void CommunicatorImpl::rendezvous(const Bootstrap& bootstrap) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    throw InvalidArgument(
        fmt::format("bootstrap rank {} is out of range for world size {}", rank_, size_));
  }
  if (size_ == 1) return;
  if (!bootstrap.store) throw InvalidArgument("bootstrap has no store (world size > 1)");

  const int id = nextCommunicatorId(*bootstrap.store, rank_);
  const std::string prefix = fmt::format("ringlet/comm{}", id);
  jobId_ = bootstrap.jobId.empty() ? "ringlet" : bootstrap.jobId;
  rendezvousHost_ = hostOf(bootstrap.store->describe());

  // The job secret: the launcher's (or RINGLET_JOB_SECRET / RINGLET_JOB_SECRET_FILE), which never
  // enters the store. Without one (a store ringlet does not own: in-process, a file, a
  // framework's store), rank 0 makes one and shares it through the store: the weak mode, in which
  // whoever can read the store is trusted (docs/security.md).
  secret_ = bootstrap.secret;
  if (secret_.empty()) {
    auto plain = makePrefixStore(prefix, bootstrap.store);
    if (rank_ == 0) {
      std::string fresh(32, '\0');
      if (RAND_bytes(reinterpret_cast<unsigned char*>(fresh.data()), 32) != 1) {
        throw IoError("could not generate a job secret (RAND_bytes failed)");
      }
      log::info(
          "no job secret given: rank 0 shares a fresh one through {}, which every rank must "
          "trust (whoever can read it can join the job)",
          bootstrap.store->describe());
      plain->setString("secret", fresh);
    }
    secret_ = plain->getString("secret", options_.timeout);
  }
  // Everything this communicator publishes from here on (peer records, transport addresses,
  // segment names) carries a MAC under the secret, over the full key.
  store_ = makePrefixStore(prefix, store::makeAuthenticatedStore(secret_, bootstrap.store));

  // Who is who.
  self_ = describeSelf(rank_);
  store_->setString(fmt::format("info/{}", rank_), encodeInfo(self_, options_.transport));
  infos_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    std::string transport;
    infos_[r] =
        decodeInfo(r, store_->getString(fmt::format("info/{}", r), options_.timeout), transport);
    if (transport != options_.transport) {
      throw InvalidArgument(fmt::format(
          "rank {} asks for transport '{}' but rank {} asks for '{}' (RINGLET_TRANSPORT must "
          "be the same on every rank)",
          rank_, options_.transport, r, transport));
    }
  }
}

void CommunicatorImpl::connectInitialLinks(transport::Deadline deadline) {
  sendSeq_.assign(std::max(size_, 1), 0);
  recvSeq_.assign(std::max(size_, 1), 0);
  incomingSeq_.assign(std::max(size_, 1), 0);
  stash_.assign(std::max(size_, 1), {});
  linksByRank_.assign(size_, nullptr);
  links_.resize(size_);
  // Never reallocated: a WaitContext's span over it stays valid when links are added later.
  activeLinks_.reserve(size_);
  std::vector<int> peers = peersNeeded(rank_, size_);
  int place = 0;
  int spreadPlace = 0;
  linksByPlace_.assign(size_, nullptr);
  linksBySpreadPlace_.assign(size_, nullptr);
  if (size_ > 1) {
    auto addPeer = [&](int peer) {
      if (peer != rank_ && std::find(peers.begin(), peers.end(), peer) == peers.end()) {
        peers.push_back(peer);
      }
    };
    auto placeIn = [&](const std::vector<int>& order) {
      return static_cast<int>(std::find(order.begin(), order.end(), rank_) - order.begin());
    };
    ringOrder_ = hostOrderedRing(infos_);
    place = placeIn(ringOrder_);
    ringReordered_ = !std::is_sorted(ringOrder_.begin(), ringOrder_.end());
    addPeer(ringOrder_[(place + 1) % size_]);
    addPeer(ringOrder_[(place + size_ - 1) % size_]);
    // The trees and log-step schedules in host order talk to places 2^k apart: the same
    // (symmetric) pairs as in rank order, through the order.
    if (ringReordered_) {
      for (int q : peersNeeded(place, size_)) addPeer(ringOrder_[q]);
    }
    std::map<std::string, int> perHost;
    for (const transport::PeerInfo& info : infos_) ++perHost[info.hostId];
    const bool even = std::all_of(perHost.begin(), perHost.end(), [&](const auto& h) {
      return h.second == perHost.begin()->second;
    });
    modelHosts_ = even ? static_cast<int>(perHost.size()) : 1;
    const int perHostRanks = size_ / modelHosts_;
    gridHost_ = place / perHostRanks;
    gridLocal_ = place % perHostRanks;
    spreadOrder_ = hostSpreadOrder(infos_);
    spreadPlace = placeIn(spreadOrder_);
    spreadReordered_ = !std::is_sorted(spreadOrder_.begin(), spreadOrder_.end());
    if (spreadReordered_) {
      for (int q : peersNeeded(spreadPlace, size_)) addPeer(spreadOrder_[q]);
    }
    std::sort(peers.begin(), peers.end());
    connectPeers(peers, deadline);
  }
  group_ = collectives::Group{rank_, size_, linksByRank_};
  hostRing_ = ringReordered_ ? collectives::Group{place, size_, linksByPlace_} : group_;
  hostSpread_ =
      spreadReordered_ ? collectives::Group{spreadPlace, size_, linksBySpreadPlace_} : group_;
  if (spreadReordered_ && rank_ == 0) {
    log::info(
        "recursive halving on ranks dealt over hosts (ranks {}), its largest exchanges "
        "inside a host",
        fmt::join(spreadOrder_, " "));
  }
  if (ringReordered_ && rank_ == 0) {
    log::info("ring all-reduce in host order (ranks {}), so it enters and leaves each host once",
              fmt::join(ringOrder_, " "));
  }
}

void CommunicatorImpl::refreshHostRing() {
  for (size_t place = 0; place < ringOrder_.size() && place < linksByPlace_.size(); ++place) {
    linksByPlace_[place] = linksByRank_[ringOrder_[place]];
  }
  for (size_t place = 0; place < spreadOrder_.size() && place < linksBySpreadPlace_.size();
       ++place) {
    linksBySpreadPlace_[place] = linksByRank_[spreadOrder_[place]];
  }
}

const collectives::HostGrid& CommunicatorImpl::linkedHostGrid(const transport::WaitContext& wait,
                                                              transport::WaitContext& all) {
  all = wait;
  all.links = activeLinks();
  if (hostGridLinked_) return hostGrid_;
  const int hosts = modelHosts_;
  const int perHost = size_ / hosts;
  auto at = [&](int host, int local) { return ringOrder_[host * perHost + local]; };
  std::vector<int> missing;
  for (int peer :
       {at(gridHost_, (gridLocal_ + 1) % perHost),
        at(gridHost_, (gridLocal_ + perHost - 1) % perHost),
        at((gridHost_ + 1) % hosts, gridLocal_), at((gridHost_ + hosts - 1) % hosts, gridLocal_)}) {
    if (peer != rank_ && linksByRank_[peer] == nullptr &&
        std::find(missing.begin(), missing.end(), peer) == missing.end()) {
      missing.push_back(peer);
    }
  }
  // Symmetric: a rank's next in either ring has it as its prev.
  if (!missing.empty()) connectPeers(missing, wait.deadline);
  gridIntraLinks_.assign(static_cast<size_t>(perHost), nullptr);
  for (int l = 0; l < perHost; ++l) gridIntraLinks_[l] = linksByRank_[at(gridHost_, l)];
  gridInterLinks_.assign(static_cast<size_t>(hosts), nullptr);
  for (int h = 0; h < hosts; ++h) gridInterLinks_[h] = linksByRank_[at(h, gridLocal_)];
  hostGrid_ = collectives::HostGrid{.intra = {gridLocal_, perHost, gridIntraLinks_},
                                    .inter = {gridHost_, hosts, gridInterLinks_},
                                    .ranks = ringOrder_};
  hostGridLinked_ = true;  // its rings' links stay; later links (connectAllPeers) are not its
  all.links = activeLinks();
  return hostGrid_;
}

void CommunicatorImpl::connectAllPeers(transport::Deadline deadline) {
  std::vector<int> missing;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && linksByRank_[peer] == nullptr) missing.push_back(peer);
  }
  if (missing.empty()) return;
  const ConnectingFor connecting(*this, running_.name(), running_.seq);  // inside its body
  connectPeers(missing, deadline);
}

void CommunicatorImpl::checkJobWhileConnecting(transport::Deadline deadline,
                                               std::span<const int> waitingFor) {
  if (watchParent_) return watchParent_(deadline, waitingFor);
  checkForFailure(deadline, connectingOp_, connectingSeq_, waitingFor);
}

void CommunicatorImpl::checkForFailure(transport::Deadline deadline, std::string_view op,
                                       uint64_t seq, std::span<const int> waitingFor) {
  throwIfBroken(op, seq);
  const transport::WaitContext wait{.deadline = deadline,
                                    .op = op,
                                    .seq = seq,
                                    .rank = rank_,
                                    .links = activeLinks_,
                                    .cancelled = &cancelled_};
  for (transport::Link* link : activeLinks_) {
    try {
      link->checkPeerAlive(wait);
    } catch (const PeerError& e) {
      // A peer that closed its end or exited may be done with this communicator (a rank of
      // another color, or one that finished its part), unless it is one this rank waits for:
      // it cannot have finished without linking to this rank first.
      const bool awaited =
          std::find(waitingFor.begin(), waitingFor.end(), link->peer()) != waitingFor.end();
      if (!e.aborted() && !awaited) continue;
      fail(e.peer(), e.what());
      throw;
    }
  }
}

namespace {
std::string announcedKey(int to, int from) { return fmt::format("p2p-link/{}/{}", to, from); }
std::string announcementsKey(int to) { return fmt::format("p2p-link/{}", to); }
}  // namespace

void CommunicatorImpl::announceLinkTo(int peer) {
  // The key first, then the count a looking rank polls: a count it sees has its key set.
  const std::byte mark{1};
  store_->set(announcedKey(peer, rank_), std::span(&mark, 1));
  store_->add(announcementsKey(peer), 1);
}

bool CommunicatorImpl::linkAnnounced(transport::Deadline deadline) {
  // Looks that come faster (tryRecv in a loop) cost the store a round trip each: at most one
  // every kAnnouncementLookEvery.
  const auto now = transport::Clock::now();
  if (now < nextAnnouncementLook_) return false;
  nextAnnouncementLook_ = now + kAnnouncementLookEvery;
  const int64_t announced = store_->add(announcementsKey(rank_), 0);
  if (announced == linkAnnouncementsSeen_) return false;
  std::vector<int> asking;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && linksByRank_[peer] == nullptr &&
        (connecting_.empty() || connecting_[static_cast<size_t>(peer)] == 0) &&
        store_->check(announcedKey(rank_, peer))) {
      asking.push_back(peer);
    }
  }
  linkAnnouncementsSeen_ = announced;
  if (asking.empty()) return false;
  connectPeers(asking, deadline);
  return true;
}

void CommunicatorImpl::whileWaiting(const transport::WaitContext& wait) {
  // Not as often as a recv from any source looks: every rank of a large job that waits long
  // would ask the store 500 times a second, for a link that is rarely asked for.
  const auto now = transport::Clock::now();
  if (now < nextSideLook_) return;
  nextSideLook_ = now + kSideLookEvery;
  linkAnnounced(wait.deadline);
}

transport::Waiter& CommunicatorImpl::anySourceWaiter() {
  if (!anySourceWaiter_) {
    anySourceWaiter_.emplace(transport::Backoff::forHost(ranksOnHost(), /*adapt=*/true));
  }
  return *anySourceWaiter_;
}

int CommunicatorImpl::ranksOnHost() const {
  return static_cast<int>(std::count_if(infos_.begin(), infos_.end(), [&](const PeerInfo& info) {
    return info.hostId == self_.hostId;
  }));
}

transport::WaitContext CommunicatorImpl::linkedToAll(const transport::WaitContext& wait) {
  connectAllPeers(wait.deadline);
  transport::WaitContext all = wait;
  all.links = activeLinks();
  return all;
}

transport::Transport& CommunicatorImpl::transportFor(size_t index) {
  auto& slot = transports_[index];
  if (!slot) {
    const auto& entry = transport::registry()[index];
    slot = entry.make(transport::TransportContext{
        .rank = rank_,
        .size = size_,
        .store = makePrefixStore(fmt::format("t/{}", entry.name), store_),
        .jobId = jobId_,
        .secret = secret_,
        .settings = options_.transportOptions,
        .ranksOnHost = ranksOnHost(),
        .adaptiveWait = options_.wait == "adaptive",
        .closeTimeout = options_.timeout,
        .peers = infos_,
        .rendezvousHost = rendezvousHost_,
        .whileConnecting = [this](transport::Deadline deadline) { linkAnnounced(deadline); },
        .checkJob =
            [this](transport::Deadline deadline, std::span<const int> waitingFor) {
              checkJobWhileConnecting(deadline, waitingFor);
            },
    });
  }
  return *slot;
}

void CommunicatorImpl::connectPeers(const std::vector<int>& peers, transport::Deadline deadline) {
  // Marked while they connect: a link request from one of them seen meanwhile
  // (whileConnecting) is this very connect.
  connecting_.resize(static_cast<size_t>(size_), 0);
  for (int peer : peers) ++connecting_[static_cast<size_t>(peer)];
  struct Unmark {
    std::vector<int>& connecting;
    const std::vector<int>& peers;
    ~Unmark() {
      for (int peer : peers) --connecting[static_cast<size_t>(peer)];
    }
  } unmark{connecting_, peers};
  const auto& registry = transport::registry();
  auto choose = [&](int peer, size_t from) {
    return transport::chooseTransport(options_.transport, self_, infos_[peer], from);
  };
  auto noTransport = [&](int peer) {
    return InvalidArgument(fmt::format(
        "no transport can link rank {} ({}) and rank {} ({}) with transport '{}' (built in: {})",
        rank_, self_.hostname, peer, infos_[peer].hostname, options_.transport,
        transport::transportNames()));
  };
  auto why = [&](int peer) -> std::string {
    if (options_.transport != "auto") return "forced by RINGLET_TRANSPORT";
    return infos_[peer].hostId == self_.hostId
               ? std::string("highest priority for a peer on this host")
               : fmt::format("highest priority for a peer on another host ({})",
                             infos_[peer].hostname);
  };

  std::map<size_t, std::vector<int>> byEntry;  // registry index -> peers
  for (int peer : peers) {
    auto index = choose(peer, 0);
    if (!index) throw noTransport(peer);
    byEntry[*index].push_back(peer);
  }
  // Registry order is the same on every rank, so every pair connects in the same round.
  for (size_t i = 0; i < registry.size(); ++i) {
    auto it = byEntry.find(i);
    if (it == byEntry.end()) continue;
    const auto& entry = registry[i];
    auto links = transportFor(i).connect(it->second, deadline);
    for (size_t k = 0; k < it->second.size(); ++k) {
      const int peer = it->second[k];
      if (k < links.size() && links[k]) {
        log::info("rank {} -> rank {}: {} ({}): {}", rank_, peer, entry.name, why(peer),
                  links[k]->describe());
        linksByRank_[peer] = links[k].get();
        activeLinks_.push_back(links[k].get());
        links_[peer] = std::move(links[k]);
        continue;
      }
      // Both sides agreed this transport cannot link the pair: fall back to the next one.
      auto fallback = choose(peer, i + 1);
      if (!fallback) throw noTransport(peer);
      log::warn("rank {} -> rank {}: {} unavailable, falling back to {}", rank_, peer, entry.name,
                registry[*fallback].name);
      byEntry[*fallback].push_back(peer);
    }
  }
  refreshHostRing();
}

}  // namespace ringlet::detail
